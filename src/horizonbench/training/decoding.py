"""Checkpoint folders, the sequence formats of both model kinds, and batched greedy decoding.

The formats live here, beside the decoder, so training and rollouts cannot disagree on
them: an encoder-decoder reads ``source </s>`` and writes ``target </s>``; a decoder-only
model reads ``source =>`` and continues with `` target </s>`` (the loss covers only the
target part). Decoding is greedy (the paper's rollouts), one batch at a time, with the
prompts of a decoder-only model padded on the left so every row continues at the end.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from horizonbench.training.texts import copy_prediction, normalise

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

META_FILE = "horizonbench.json"
IGNORE = -100
PROMPT_SUFFIX = " =>"
_WEIGHTS = (".safetensors", ".bin", ".pt", ".pth", ".msgpack", ".h5")


# --- sequence formats --------------------------------------------------------------------


def _ids(tokenizer: PreTrainedTokenizerBase, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def prompt_ids(tokenizer: PreTrainedTokenizerBase, kind: str, source: str) -> list[int]:
    """What the model reads before it writes the target."""
    if kind == "encoder_decoder":
        return [*_ids(tokenizer, source), tokenizer.eos_token_id]
    return _ids(tokenizer, source + PROMPT_SUFFIX)


def target_ids(tokenizer: PreTrainedTokenizerBase, kind: str, target: str) -> list[int]:
    """What the model should write, ending with eos."""
    text = target if kind == "encoder_decoder" else " " + target
    return [*_ids(tokenizer, text), tokenizer.eos_token_id]


def encode_pair(
    tokenizer: PreTrainedTokenizerBase, kind: str, source: str, target: str
) -> dict[str, list[int]]:
    """One training example: ``input_ids`` and ``labels`` (IGNORE where no loss is taken)."""
    p, t = prompt_ids(tokenizer, kind, source), target_ids(tokenizer, kind, target)
    if kind == "encoder_decoder":
        return {"input_ids": p, "labels": t}
    return {"input_ids": p + t, "labels": [IGNORE] * len(p) + t}


def collate(features: Sequence[Mapping[str, list[int]]], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded tensors (training and loss); labels padded with IGNORE."""
    import torch

    width = max(len(f["input_ids"]) for f in features)
    lwidth = max(len(f["labels"]) for f in features)
    ids = [f["input_ids"] + [pad_id] * (width - len(f["input_ids"])) for f in features]
    mask = [[1] * len(f["input_ids"]) + [0] * (width - len(f["input_ids"])) for f in features]
    labels = [f["labels"] + [IGNORE] * (lwidth - len(f["labels"])) for f in features]
    return {
        "input_ids": torch.tensor(ids, dtype=torch.long),
        "attention_mask": torch.tensor(mask, dtype=torch.long),
        "labels": torch.tensor(labels, dtype=torch.long),
    }


def token_loss_sum(model: PreTrainedModel, batch: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, int]:
    """Summed token cross-entropy over the labelled tokens, and their number (the
    training loss is their mean; the validation loss their mean over the whole set)."""
    import torch.nn.functional as F

    labels = batch["labels"]
    if model.config.is_encoder_decoder:
        logits = model(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=labels
        ).logits
    else:
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, :-1]
        labels = labels[:, 1:]
    loss = F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), ignore_index=IGNORE, reduction="sum"
    )
    return loss, int((labels != IGNORE).sum())


# --- checkpoint folders -------------------------------------------------------------------


def replace_dir(tmp: Path, final: Path) -> None:
    """Move a fully written folder into place: the old one is renamed away first and removed
    only after the new one is there, so a crash leaves one complete folder."""
    old = final.with_name(f".{final.name}.old-{os.getpid()}")
    if final.exists():
        os.replace(final, old)
    os.replace(tmp, final)
    if old.exists():
        shutil.rmtree(old)


def temp_dir(final: Path) -> Path:
    """An empty folder next to ``final`` to write into."""
    tmp = final.with_name(f".{final.name}.tmp-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    return tmp


def write_checkpoint(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, folder: Path, meta: Mapping[str, Any]
) -> None:
    """model + tokenizer + ``horizonbench.json`` into ``folder`` (not atomic by itself)."""
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / META_FILE).write_text(json.dumps(dict(meta), indent=1, sort_keys=True) + "\n")


def save_checkpoint(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, folder: Path, meta: Mapping[str, Any]
) -> None:
    """A checkpoint folder, written next to ``folder`` and renamed into place."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_dir(folder)
    write_checkpoint(model, tokenizer, tmp, meta)
    replace_dir(tmp, folder)


def weights_digest(path_or_name: str) -> str:
    """sha256 over a folder's weight files (name and bytes, sorted by name), or of the hub
    name when it is not a folder: what identifies a model's answers."""
    folder = Path(path_or_name)
    h = hashlib.sha256()
    if not folder.is_dir():
        h.update(f"hub:{path_or_name}".encode())
        return h.hexdigest()
    for f in sorted(p for p in folder.iterdir() if p.is_file() and p.name.endswith(_WEIGHTS)):
        h.update(f.name.encode() + b"\x00")
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


# --- decoding ------------------------------------------------------------------------------


class LoadedModel:
    """A checkpoint ready for greedy decoding (eval mode, no gradients). Not reentrant:
    call from one thread at a time."""

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        digest: str,
        meta: Mapping[str, Any] | None = None,
        device: str = "cpu",
    ) -> None:
        from horizonbench.training.architectures import kind_of

        self.model = model.to(device)
        self.model.eval()
        self.tokenizer = tokenizer
        self.kind = kind_of(model)
        self.digest = digest
        self.meta: dict[str, Any] = dict(meta or {})
        self.device = device

    @classmethod
    def load(cls, path_or_name: str, device: str = "cpu") -> LoadedModel:
        """A checkpoint folder (ours, or any Hugging Face folder) or a hub name."""
        from horizonbench.training.architectures import load_pretrained

        model, tokenizer = load_pretrained(str(path_or_name))
        meta_file = Path(path_or_name) / META_FILE
        meta = json.loads(meta_file.read_text()) if meta_file.is_file() else {}
        return cls(model, tokenizer, weights_digest(str(path_or_name)), meta, device)

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` under this model's tokenizer (no special tokens)."""
        return len(_ids(self.tokenizer, text))

    def generate(self, sources: list[str], max_new_tokens: int) -> list[tuple[str, bool]]:
        """Greedy continuation of each source: (text, ended with eos), in order."""
        import torch

        if not sources:
            return []
        tok, pad, eos = self.tokenizer, self.tokenizer.pad_token_id, self.tokenizer.eos_token_id
        prompts = [prompt_ids(tok, self.kind, s) for s in sources]
        width = max(map(len, prompts))
        left = self.kind == "decoder_only"  # a causal model continues at the end of each row
        ids, mask = [], []
        for p in prompts:
            fill = [pad] * (width - len(p))
            ids.append(fill + p if left else p + fill)
            mask.append([0] * len(fill) + [1] * len(p) if left else [1] * len(p) + [0] * len(fill))
        input_ids = torch.tensor(ids, dtype=torch.long, device=self.device)
        attention = torch.tensor(mask, dtype=torch.long, device=self.device)
        self.model.eval()
        with torch.inference_mode():
            out = self.model.generate(
                input_ids=input_ids,
                attention_mask=attention,
                do_sample=False,
                num_beams=1,
                max_new_tokens=max_new_tokens,
                pad_token_id=pad,
                eos_token_id=eos,
            )
        new = out[:, width:] if left else out[:, 1:]  # drop the prompt / the decoder start token
        results = []
        for row in new.tolist():
            ended = eos in row
            kept = row[: row.index(eos)] if ended else row
            kept = [t for t in kept if t != pad]
            results.append((tok.decode(kept, skip_special_tokens=True).strip(), ended))
        return results


def next_state_accuracy(
    model: LoadedModel | str | Path,
    pairs: Sequence[tuple[str, str]],
    batch: int = 32,
    max_new_tokens: int | None = None,
) -> float:
    """Share of (source, target) pairs whose greedy output equals the target (whitespace
    ignored); NaN for no pairs. ``max_new_tokens`` defaults to the longest target + 4."""
    loaded = model if isinstance(model, LoadedModel) else LoadedModel.load(str(model))
    if not pairs:
        return float("nan")
    limit = max_new_tokens or max(loaded.count_tokens(t) for _, t in pairs) + 4
    hits = 0
    for i in range(0, len(pairs), batch):
        chunk = pairs[i : i + batch]
        outs = loaded.generate([s for s, _ in chunk], limit)
        hits += sum(normalise(text) == normalise(t) for (text, _), (_, t) in zip(outs, chunk, strict=True))
    return hits / len(pairs)


def copy_baseline_accuracy(pairs: Sequence[tuple[str, str]]) -> float:
    """Share of pairs a model copying the current state gets right (saying STOP at the
    goal): the floor a learnt next-state model must beat. NaN for no pairs."""
    if not pairs:
        return float("nan")
    return sum(normalise(copy_prediction(s)) == normalise(t) for s, t in pairs) / len(pairs)
