"""The ``training:`` section of a config: RecurrReason's sequence-model experiment.

Why a config section and not a separate file format: the benchmark the models learn from
(the ``families:``), the split they are tested on (``export:``), the seed and the
evaluation of the trained models (rollouts through the engine) are the run's own, so
one file says all of it and ``horizonbench train`` and ``horizonbench run`` read the same
thing.

A trained model is evaluated under the name ``<architecture>-<condition>`` (one name
across puzzles, one checkpoint per puzzle), which is how the paper's tables label rows:
"T5 (scratch) / Trained", "T5 (pre-trained) / Fine-tuned".
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: the paper's three conditions (section 3, "Training conditions")
CONDITIONS = ("scratch", "zero_shot", "fine_tuned")
Condition = Literal["scratch", "zero_shot", "fine_tuned"]
#: ``run:<puzzle>`` as ``pretrained``: the scratch checkpoint this run trains for the same
#: architecture on <puzzle> (a CPU stand-in for a hub checkpoint: no download, and a
#: vocabulary that shares the exports' tokens)
RUN_PREFIX = "run:"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,40}")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ArchitectureSpec(_Strict):
    """One architecture: its family, the sizes used to build it from scratch, and the
    checkpoint the pre-trained conditions start from.

    ``encoder_decoder`` is the T5 family (bidirectional encoder over state and goal);
    ``decoder_only`` the GPT-2 family (one causal sequence: state, goal, next state)."""

    kind: Literal["encoder_decoder", "decoder_only"]
    layers: int = Field(default=2, ge=1, le=96)
    #: the model width (d_model / n_embd)
    width: int = Field(default=64, ge=8, le=16_384)
    heads: int = Field(default=4, ge=1, le=256)
    #: the feed-forward width; unset: 4 x width
    ff_width: int | None = Field(default=None, ge=8, le=65_536)
    dropout: float = Field(default=0.1, ge=0.0, lt=1.0)
    #: a local checkpoint folder, a Hugging Face hub name (downloaded once by a user with
    #: network access), or ``run:<puzzle>``; needed by zero_shot and fine_tuned
    pretrained: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _sizes(self) -> ArchitectureSpec:
        if self.width % self.heads:
            raise ValueError(f"width: {self.width} is not a multiple of heads ({self.heads})")
        return self


class OptimizerSpec(_Strict):
    """AdamW with early stopping on validation loss (the paper's Appendix M: lr 1e-4,
    batch 16, patience 5 evaluations)."""

    lr: float = Field(default=1e-4, gt=0, le=1.0)
    batch_size: int = Field(default=16, ge=1, le=4096)
    weight_decay: float = Field(default=0.01, ge=0, le=1.0)
    #: evaluations without a better validation loss before training stops
    patience: int = Field(default=5, ge=1, le=1000)
    max_epochs: int = Field(default=50, ge=1, le=100_000)
    #: a cap on optimiser steps (the tiny configs' few CPU minutes); unset: epochs decide
    max_steps: int | None = Field(default=None, ge=1)
    #: optimiser steps between validation evaluations (and checkpoints); unset: one epoch
    eval_every: int | None = Field(default=None, ge=1)
    #: gradient-norm clipping; 0 turns it off
    grad_clip: float = Field(default=1.0, ge=0)


class TrainingSpec(_Strict):
    """What to train: architectures x conditions, on which puzzles, how."""

    architectures: dict[str, ArchitectureSpec] = Field(min_length=1)
    conditions: list[Condition] = Field(default_factory=lambda: ["scratch", "fine_tuned"], min_length=1)
    #: the puzzle families to train on; unset: every puzzle family of the config
    puzzles: list[str] | None = None
    optimizer: OptimizerSpec = OptimizerSpec()
    #: the splits the trained models are rolled out on
    evaluate_splits: list[Literal["train", "validation", "ood"]] = Field(
        default_factory=lambda: ["validation", "ood"], min_length=1
    )
    #: torch threads per training job; unset: torch's default (the machine's cores)
    threads: int | None = Field(default=None, ge=1, le=1024)
    #: rollout steps decoded together by a local model (episodes in flight)
    decode_batch: int = Field(default=32, ge=1, le=4096)

    @model_validator(mode="after")
    def _pretrained(self) -> TrainingSpec:
        needs = [c for c in self.conditions if c != "scratch"]
        for name, arch in self.architectures.items():
            if not _NAME.fullmatch(name):
                raise ValueError(f"architectures: {name!r} is not a name (letters, digits, _ . -)")
            if needs and arch.pretrained is None:
                raise ValueError(
                    f"architectures.{name}.pretrained: the {', '.join(needs)} condition(s) start from a "
                    "pre-trained checkpoint (a folder, a hub name, or run:<puzzle>)"
                )
            if (
                arch.pretrained
                and arch.pretrained.startswith(RUN_PREFIX)
                and "scratch" not in self.conditions
            ):
                raise ValueError(
                    f"architectures.{name}.pretrained: {arch.pretrained!r} is the scratch model of this "
                    "run, but conditions has no 'scratch'"
                )
        if len(set(self.conditions)) != len(self.conditions):
            raise ValueError("conditions: each condition once")
        return self

    def model_names(self) -> dict[str, tuple[str, Condition]]:
        """Evaluation model name -> (architecture, condition), in config order."""
        return {seqmodel_name(a, c): (a, c) for a in self.architectures for c in self.conditions}


def seqmodel_name(architecture: str, condition: str) -> str:
    """The name a trained model is evaluated and reported under."""
    return f"{architecture}-{condition}"
