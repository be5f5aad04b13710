"""Offline baselines (oracle, noisy, random) and simulated models (rising) behind the
same interface as API models.

They anchor the analysis (an oracle must score 100 %, a random planner near 0) and let
the whole pipeline run without a network or an API key. The family produces the text;
this class only adds the bookkeeping every attempt row needs.

``rising`` is the ``noisy`` executor with a per-step error that rises with the step
index (``ModelSpec.truth()``: its planted truth, exact because every corruption breaks
the plan). With ``styles``, any offline kind writes its intended plan in a style drawn
per answer (reasoning, a draft, fences, JSON, a recap, cut at max_tokens, refused):
the style comes from a stream of its own, so the intended plan is the one the plain
answer holds, and without ``styles`` the answers are byte-identical to before.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from horizonbench.core.answer_styles import pick_style, write_answer
from horizonbench.core.hazard import PlantedTruth
from horizonbench.core.registry import get_family
from horizonbench.core.types import Completion
from horizonbench.models.base import AttemptRequest
from horizonbench.schemas.config import ModelSpec


def _words(text: str) -> int:
    # Offline baselines have no tokenizer; word counts keep token columns meaningful
    # (roughly proportional to real tokens) without pulling one in.
    return len(text.split())


#: the SeedSequence stream of the answer style, beside the request's seed
_STYLE_STREAM = 1


class OfflineModel:
    """Answers with ``family.offline_answer``, seeded by the request's seed (reproducible)."""

    def __init__(self, spec: ModelSpec) -> None:
        if spec.provider != "offline" or spec.kind is None:
            raise ValueError(f"model {spec.name!r} is not an offline baseline")
        self.name = spec.name
        self.kind: str = spec.kind
        self.eps: float = float(spec.eps or 0.0)
        self.spec = spec
        #: the rising model's planted truth (its hazard per step); None for other kinds
        self.truth: PlantedTruth | None = spec.truth() if spec.kind == "rising" else None
        self.styles: dict[str, float] | None = dict(spec.styles) if spec.styles else None

    def identity(self) -> dict[str, Any]:
        ident: dict[str, Any] = {"provider": "offline", "kind": self.kind, "eps": self.eps}
        # only what a new field sets, so the attempt keys of earlier configs stay the same
        if self.truth is not None:
            ident.update(rise=self.truth.shape, rate=self.truth.rate, eps_cap=self.truth.cap)
        if self.styles:
            ident["styles"] = sorted(self.styles.items())
        return ident

    def complete(self, request: AttemptRequest) -> Completion:
        start = time.perf_counter()
        family = get_family(request.family)
        rng = np.random.default_rng(request.seed)
        state = request.context.get("state")
        # the rising model is the noisy executor with an error per step from its truth
        kind = "noisy" if self.truth is not None else self.kind
        finish = "stop"
        if state is not None:  # one step of a rollout: answer from the state reached
            eps = self.truth.hazard(request.turn + 1) if self.truth is not None else self.eps
            if self.styles:
                pieces = family.offline_step_pieces(request.row, state, kind, rng, eps)  # type: ignore[attr-defined]
                text, finish = "STOP", "stop"
                if pieces is not None:
                    text, finish = self._styled(pieces, request.seed)
            else:
                text = family.offline_step(request.row, state, kind, rng, eps)  # type: ignore[attr-defined]
        else:
            plan_eps: float | PlantedTruth = self.truth if self.truth is not None else self.eps
            if self.styles:
                pieces = family.offline_pieces(request.row, kind, rng, plan_eps)  # type: ignore[attr-defined]
                text, finish = self._styled(pieces, request.seed)
            else:
                text = family.offline_answer(request.row, kind, rng, plan_eps)  # type: ignore[arg-type]
        latency = time.perf_counter() - start
        return Completion(
            text=text,
            finish_reason=finish,
            input_tokens=sum(_words(m.content) for m in request.messages),
            output_tokens=_words(text),
            latency_s=latency,
            cost_usd=0.0,
        )

    def _styled(self, pieces: Any, seed: int) -> tuple[str, str]:
        """The answer in a style drawn from the mix, from a stream of its own."""
        style_rng = np.random.default_rng(np.random.SeedSequence([seed, _STYLE_STREAM]))
        return write_answer(pick_style(self.styles, style_rng), pieces, style_rng)

    def __repr__(self) -> str:
        return f"OfflineModel(name={self.name!r}, kind={self.kind!r}, eps={self.eps})"
