"""Offline baselines (oracle, noisy, random) behind the same interface as API models.

They anchor the analysis (an oracle must score 100 %, a random planner near 0) and let
the whole pipeline run without a network or an API key. The family produces the text;
this class only adds the bookkeeping every attempt row needs.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from horizonbench.core.registry import get_family
from horizonbench.core.types import Completion
from horizonbench.models.base import AttemptRequest
from horizonbench.schemas.config import ModelSpec


def _words(text: str) -> int:
    # Offline baselines have no tokenizer; word counts keep token columns meaningful
    # (roughly proportional to real tokens) without pulling one in.
    return len(text.split())


class OfflineModel:
    """Answers with ``family.offline_answer``, seeded by the request's seed (reproducible)."""

    def __init__(self, spec: ModelSpec) -> None:
        if spec.provider != "offline" or spec.kind is None:
            raise ValueError(f"model {spec.name!r} is not an offline baseline")
        self.name = spec.name
        self.kind: str = spec.kind
        self.eps: float = float(spec.eps or 0.0)

    def identity(self) -> dict[str, Any]:
        return {"provider": "offline", "kind": self.kind, "eps": self.eps}

    def complete(self, request: AttemptRequest) -> Completion:
        start = time.perf_counter()
        family = get_family(request.family)
        rng = np.random.default_rng(request.seed)
        state = request.context.get("state")
        if state is not None:  # one step of a rollout: answer from the state reached
            text = family.offline_step(request.row, state, self.kind, rng, self.eps)  # type: ignore[attr-defined]
        else:
            text = family.offline_answer(request.row, self.kind, rng, self.eps)
        latency = time.perf_counter() - start
        return Completion(
            text=text,
            finish_reason="stop",
            input_tokens=sum(_words(m.content) for m in request.messages),
            output_tokens=_words(text),
            latency_s=latency,
            cost_usd=0.0,
        )

    def __repr__(self) -> str:
        return f"OfflineModel(name={self.name!r}, kind={self.kind!r}, eps={self.eps})"
