"""The two model families of RecurrReason's section 3, built small from scratch or loaded.

``encoder_decoder``: T5 (a bidirectional encoder reads state, goal and rules; the decoder
writes the next state). ``decoder_only``: GPT-2 (one causal sequence ``source => target``).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from horizonbench.schemas.training import ArchitectureSpec

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


#: held while a model is built or loaded. transformers builds a model's parameters under a
#: process-wide patch (weights first created on the meta device, then filled from the
#: file); a second thread building a model at the same time gets meta tensors ("Cannot
#: copy out of meta tensor"). The local provider loads one checkpoint per model and
#: puzzle from the engine's threads, so loads take turns.
BUILD_LOCK = threading.RLock()


def quiet() -> None:
    """Turn off transformers' own progress bars (one per checkpoint save and load, which
    would flood a training log); the trainer draws its own."""
    from transformers.utils import logging

    logging.disable_progress_bar()


def build_model(
    arch: ArchitectureSpec, tokenizer: PreTrainedTokenizerBase, max_positions: int
) -> PreTrainedModel:
    """A randomly initialised model of ``arch``'s sizes over ``tokenizer``'s vocabulary
    (seed torch first: the initial weights come from its generator)."""
    from transformers import GPT2Config, GPT2LMHeadModel, T5Config, T5ForConditionalGeneration

    ids: dict[str, Any] = {
        "vocab_size": len(tokenizer),
        "pad_token_id": tokenizer.pad_token_id,
        "eos_token_id": tokenizer.eos_token_id,
    }
    ff = arch.ff_width or 4 * arch.width
    if arch.kind == "encoder_decoder":
        cfg = T5Config(
            d_model=arch.width,
            d_ff=ff,
            num_layers=arch.layers,
            num_decoder_layers=arch.layers,
            num_heads=arch.heads,
            d_kv=arch.width // arch.heads,
            dropout_rate=arch.dropout,
            decoder_start_token_id=tokenizer.pad_token_id,
            **ids,
        )
        with BUILD_LOCK:
            return T5ForConditionalGeneration(cfg)
    cfg = GPT2Config(
        n_layer=arch.layers,
        n_embd=arch.width,
        n_head=arch.heads,
        n_inner=ff,
        n_positions=max_positions,
        resid_pdrop=arch.dropout,
        embd_pdrop=arch.dropout,
        attn_pdrop=arch.dropout,
        bos_token_id=tokenizer.bos_token_id,
        **ids,
    )
    with BUILD_LOCK:
        return GPT2LMHeadModel(cfg)


def kind_of(model: PreTrainedModel) -> str:
    """``encoder_decoder`` or ``decoder_only``, from the model's config."""
    return "encoder_decoder" if model.config.is_encoder_decoder else "decoder_only"


def load_pretrained(path_or_name: str) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """A checkpoint folder or hub name and its tokenizer. A tokenizer without a pad token
    (GPT-2's) pads with its eos token."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    quiet()
    with BUILD_LOCK:
        tokenizer = AutoTokenizer.from_pretrained(path_or_name)
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        config = AutoConfig.from_pretrained(path_or_name)
        cls = AutoModelForSeq2SeqLM if config.is_encoder_decoder else AutoModelForCausalLM
        model = cls.from_pretrained(path_or_name)
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer
