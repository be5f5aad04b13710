"""The planted truth of the simulated offline models: their per-step error and success.

A simulated model corrupts step i of its intended plan with probability ``hazard(i)``,
independently, and every corruption breaks the plan (the families make sure of it). So
its success at depth L is known exactly, ``prod_{i=1..L} (1 - hazard(i))``, and an
analysis can be checked against it: the calibration suite calls
:meth:`PlantedTruth.success_probability` instead of estimating it.

Shapes (i counts steps from 1):

- ``constant``: ``eps`` at every step (the ``noisy`` baseline; success ``(1 - eps)^L``);
- ``linear``: ``eps * (1 + rate * (i - 1))``;
- ``exponential``: ``eps * (1 + rate) ** (i - 1)``;

each rising shape capped at ``cap`` (< 1), so no step is certain to fail and the
success curve stays a product of positive factors. A share of answers may also be
unusable by style (cut at ``max_tokens`` or refused): ``usable`` is the share that is
not. In plan mode one answer holds the whole plan, so success is ``usable * prod``; in a
rollout every step is an answer, so it is ``usable^L * prod``.

Pure: no I/O, no randomness; kept in ``core`` because the families (which plant it),
the models (which configure it) and the analysis (which checks against it) all use it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np

Shape = Literal["constant", "linear", "exponential"]
SHAPES: tuple[str, ...] = ("constant", "linear", "exponential")

#: the answer styles a simulated model writes (horizonbench.core.answer_styles),
#: in the order a mix is drawn from (the order fixes the draw)
ANSWER_STYLES: tuple[str, ...] = ("plain", "reasoning", "draft", "fenced", "json", "recap", "cut", "refusal")
#: styles whose answer holds no usable plan (cut at max_tokens, refused)
UNUSABLE_STYLES: frozenset[str] = frozenset({"cut", "refusal"})
#: a rising error's default cap
DEFAULT_CAP = 0.9


@dataclass(frozen=True, slots=True)
class PlantedTruth:
    """Per-step error ``hazard(i)`` and the success it implies (see the module docstring)."""

    eps: float
    shape: Shape = "constant"
    rate: float = 0.0
    cap: float = 1.0
    usable: float = 1.0

    def __post_init__(self) -> None:
        if self.shape not in SHAPES:
            raise ValueError(f"shape: {self.shape!r} is not one of {', '.join(SHAPES)}")
        if not 0.0 <= self.eps < 1.0:
            raise ValueError(f"eps: {self.eps} is not in [0, 1)")
        if self.rate < 0.0 or not math.isfinite(self.rate):
            raise ValueError(f"rate: {self.rate} is not a finite number >= 0")
        if self.shape != "constant" and not self.eps <= self.cap < 1.0:
            raise ValueError(f"cap: {self.cap} is not in [eps, 1)")
        if not 0.0 <= self.usable <= 1.0:
            raise ValueError(f"usable: {self.usable} is not in [0, 1]")

    def hazard(self, i: int) -> float:
        """The probability that step ``i`` (from 1) is corrupted."""
        if i < 1:
            raise ValueError(f"steps count from 1, got {i}")
        if self.shape == "constant":
            return self.eps
        if self.shape == "linear":
            raw = self.eps * (1.0 + self.rate * (i - 1))
        else:
            # in logs, so a long plan cannot overflow (1 + rate) ** (i - 1)
            log = math.log(self.eps) + (i - 1) * math.log1p(self.rate) if self.eps > 0 else -math.inf
            raw = math.exp(min(log, 0.0))
        return min(raw, self.cap)

    def describe(self) -> str:
        """The truth in one line, for reports and logs (``eps_i = 0.01 * (1 + 0.05 (i - 1)),
        capped at 0.9; usable answers 0.95``)."""
        if self.shape == "constant":
            text = f"eps_i = {self.eps:g}"
        elif self.shape == "linear":
            text = f"eps_i = {self.eps:g} * (1 + {self.rate:g} (i - 1)), capped at {self.cap:g}"
        else:
            text = f"eps_i = {self.eps:g} * {1 + self.rate:g}^(i - 1), capped at {self.cap:g}"
        return text if self.usable == 1.0 else f"{text}; usable answers {self.usable:g}"

    def hazards(self, n: int) -> np.ndarray:
        """``hazard(1..n)`` as a float array (what the families draw against)."""
        return np.array([self.hazard(i) for i in range(1, n + 1)], dtype=float)

    def step_success(self, length: int) -> float:
        """``prod_{i=1..L} (1 - hazard(i))``: the chance that no step is corrupted."""
        if length < 0:
            raise ValueError(f"L must be >= 0, got {length}")
        if self.shape == "constant":
            return (1.0 - self.eps) ** length  # exact, and what the noisy baseline documents
        return float(np.prod(1.0 - self.hazards(length)))

    def success_probability(self, length: int, mode: Literal["plan", "rollout"] = "plan") -> float:
        """The planted success at depth ``length``: every step right and every answer usable."""
        if mode == "plan":
            return self.usable * self.step_success(length)
        if mode == "rollout":
            return self.usable**length * self.step_success(length)
        raise ValueError(f"mode must be plan or rollout, got {mode!r}")


def step_rates(eps: float | PlantedTruth, n: int) -> np.ndarray:
    """Per-step error probabilities of an ``n``-step plan: a constant ``eps`` or a truth's
    ``hazards(n)``. A constant gives an array of that value, so drawing
    ``rng.random(n) < step_rates(eps, n)`` is the same draw as ``< eps``."""
    if isinstance(eps, PlantedTruth):
        return eps.hazards(n)
    return np.full(n, float(eps))


def step_rate(eps: float | PlantedTruth, i: int) -> float:
    """The error probability of step ``i`` (from 1): a constant ``eps`` or ``hazard(i)``."""
    return eps.hazard(i) if isinstance(eps, PlantedTruth) else float(eps)


def complete_mix(mix: Mapping[str, float] | None) -> dict[str, float]:
    """A style mix with ``plain`` taking the rest: shares in [0, 1] summing to at most 1.
    Raises ValueError naming the style that is wrong (``styles.<name>: ...``)."""
    out: dict[str, float] = {}
    for name, weight in (mix or {}).items():
        if name not in ANSWER_STYLES:
            raise ValueError(f"styles.{name}: not a style (one of {', '.join(ANSWER_STYLES)})")
        w = float(weight)
        if not 0.0 <= w <= 1.0:
            raise ValueError(f"styles.{name}: {weight} is not a share in [0, 1]")
        out[name] = w
    total = sum(out.values())
    if total > 1.0 + 1e-9:
        raise ValueError(f"styles: the shares sum to {total:g}, more than 1")
    out["plain"] = out.get("plain", 0.0) + max(0.0, 1.0 - total)
    return out


def usable_share(mix: Mapping[str, float] | None) -> float:
    """The share of answers that hold a plan: 1 minus the cut and refusal shares."""
    full = complete_mix(mix)
    return max(0.0, 1.0 - sum(full.get(s, 0.0) for s in UNUSABLE_STYLES))
