"""Adaptive depth sampling: which depths the next wave of instances should test.

Why: an attempt at a depth where the model nearly always succeeds, or nearly always
fails, says almost nothing about its decay length L0. Under ``p(L) = A exp(-k L)``
(k = 1/L0) one Bernoulli attempt at depth L carries the Fisher information
``p / (1 - p) * v v^T`` with ``v = (1, -L)`` for (log A, k); a design's variance of k is
the (k, k) entry of the inverse of the summed information. A wave is chosen greedily,
instance by instance, to shrink that variance the most under the current estimate
(c-optimality for k, which is also the relative variance of L0 = 1/k), within the
bins' capacities; a share of every wave (``explore``) is spread evenly over the depths
where success is neither near-certain nor near-impossible for any L0 of the current
interval, so a wrong estimate, or a curve that is not exponential, is still seen
without spending calls where p is 0 whatever the model.

The waves stop when the interval's relative half-width ``(high - low) / (2 value)`` is
within the target, or the call budget is spent, or no bin has instances left. The
interval itself is the analysis' own (the binomial MLE's cluster bootstrap for L0, the
likelihood-ratio interval for eps): the likelihood of data gathered by a design that
only looked at earlier data is the same function as for a fixed design, so the fit is
unchanged; the calibration suite measures the coverage that stopping on the interval's
width leaves (``calibration/adaptive_cases.py``).

What a perfect design can buy is bounded: against uniform bins over a range that suits
the model (L0 of 20 or 80 over L in [10, 120)), the optimal two-point design needs only
1.9-2.4 times fewer attempts for the same variance (:func:`relative_variance` of both);
the large savings come where the range misses the model (L0 = 5 there: 6.2 times), which
is exactly what a fixed grid cannot know in advance.

Pure numpy: the flow (``flows/adaptive.py``) reads the estimates from the analysis
tables and writes the design to the run folder.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

#: a probability this close to 0 or 1 carries no information (and would divide by 0)
_P_CLIP = 1e-9
#: added to the information matrix so a design with one depth can still be inverted
_RIDGE = 1e-9


def relative_half_width(value: float, low: float | None, high: float | None) -> float:
    """``(high - low) / (2 value)``; inf when the interval is missing or unbounded."""
    if low is None or high is None:
        return math.inf
    if not all(map(math.isfinite, (value, low, high))) or value <= 0:
        return math.inf
    return (high - low) / (2.0 * value)


def decay_rate(metric: str, value: float) -> float:
    """k of ``p(L) = A exp(-k L)`` from an L0 or a per-step error eps."""
    if not math.isfinite(value) or value <= 0:
        return math.nan
    if metric == "L0":
        return 1.0 / value
    if metric == "eps":
        return -math.log1p(-value) if value < 1 else math.nan
    raise ValueError(f"unknown metric {metric!r} (L0 or eps)")


def information(lengths: np.ndarray, A: float, k: float, free_prefactor: bool) -> np.ndarray:
    """Per-attempt Fisher information at each depth: shape (n, 2, 2) for (log A, k), or
    (n, 1, 1) for k alone when the prefactor is fixed at 1 (eps: ``(1 - eps)^L``)."""
    L = np.asarray(lengths, dtype=float)
    p = np.clip(A * np.exp(-k * L), _P_CLIP, 1 - _P_CLIP)
    w = p / (1.0 - p)
    if not free_prefactor:
        return (w * L * L)[:, None, None]
    v = np.stack([np.ones_like(L), -L], axis=1)
    return w[:, None, None] * v[:, :, None] * v[:, None, :]


def relative_variance(
    lengths: np.ndarray, attempts: np.ndarray, A: float, k: float, free_prefactor: bool = True
) -> float:
    """``var(k) / k^2`` of the MLE under a design of ``attempts`` per depth (asymptotic):
    the squared relative standard error of L0 the design buys."""
    info = information(lengths, A, k, free_prefactor)
    total = np.tensordot(np.asarray(attempts, dtype=float), info, axes=1)
    total = total + _RIDGE * np.eye(total.shape[0])
    try:
        cov = np.linalg.inv(total)
    except np.linalg.LinAlgError:
        return math.inf
    var = float(cov[-1, -1])
    return var / (k * k) if var > 0 else math.inf


def spread(capacity: np.ndarray, instances: int, held: np.ndarray | None = None) -> np.ndarray:
    """``instances`` new instances spread evenly over the bins that have room: the
    least-visited bins (``held``) first, evenly spaced among them, never more than a
    bin's capacity. Wave after wave this fills the grid as uniform bins would."""
    cap = np.asarray(capacity, dtype=int)
    have = np.zeros(cap.size, dtype=int) if held is None else np.asarray(held, dtype=int).copy()
    out = np.zeros(cap.size, dtype=int)
    left = int(instances)
    while left > 0:
        open_bins = np.flatnonzero(cap - out > 0)
        if open_bins.size == 0:
            break
        level = have[open_bins] + out[open_bins]
        least = open_bins[level == level.min()]
        take = min(left, least.size)
        picks = least[np.unique(np.linspace(0, least.size - 1, take).round().astype(int))]
        out[picks] += 1
        left -= picks.size
    return out


def allocate(
    lengths: np.ndarray,
    attempts: np.ndarray,
    capacity: np.ndarray,
    A: float,
    k: float,
    instances: int,
    samples: int,
    free_prefactor: bool = True,
) -> np.ndarray:
    """New instances per bin, chosen one at a time to shrink ``var(k)`` the most.

    ``attempts`` is what each bin holds already (the design so far); each new instance
    adds ``samples`` attempts at its bin's depth. The update is Sherman-Morrison on the
    inverse information, so a wave of W instances over B bins costs O(W B).
    """
    info = information(lengths, A, k, free_prefactor)
    dim = info.shape[1]
    total = np.tensordot(np.asarray(attempts, dtype=float), info, axes=1) + _RIDGE * np.eye(dim)
    cov = np.linalg.pinv(total)
    L = np.asarray(lengths, dtype=float)
    p = np.clip(A * np.exp(-k * L), _P_CLIP, 1 - _P_CLIP)
    weight = samples * p / (1.0 - p)
    vecs = np.stack([np.ones_like(L), -L], axis=1) if free_prefactor else L[:, None]
    room = np.asarray(capacity, dtype=int).copy()
    out = np.zeros(room.size, dtype=int)
    for _ in range(int(instances)):
        cv = vecs @ cov  # (B, dim): C v per bin (C symmetric)
        quad = np.einsum("bi,bi->b", cv, vecs)
        gain = weight * cv[:, -1] ** 2 / (1.0 + weight * quad)
        gain[room <= 0] = -1.0
        b = int(np.argmax(gain))
        if gain[b] < 0:
            break
        c = cv[b]
        cov = cov - weight[b] * np.outer(c, c) / (1.0 + weight[b] * quad[b])
        out[b] += 1
        room[b] -= 1
    return out


@dataclass(frozen=True)
class AdaptiveSettings:
    """What a study asks of its waves (the config's ``sampling.adaptive``)."""

    #: stop when the interval's half-width is within this share of the estimate
    target: float = 0.05
    #: calls per model and family label at most (None: no cap but ``max_waves``)
    max_calls: int | None = None
    #: instances of the first wave, spread evenly over the bins' whole range
    first_wave: int = 24
    max_waves: int = 12
    #: share of every later wave spread evenly over the range (guards a wrong estimate)
    explore: float = 0.2
    #: a later wave asks for what the interval's width predicts it needs, times this
    overshoot: float = 1.1
    #: and never more than this multiple of the calls made so far
    max_growth: float = 2.0


@dataclass(frozen=True)
class Estimate:
    """The analysis' current reading of one (family label, model)."""

    metric: str  # "L0" or "eps"
    value: float
    low: float | None
    high: float | None
    A: float = 1.0
    #: share of attempts that succeeded (steers a wave when nothing could be fitted)
    success_rate: float = math.nan

    @property
    def half_width(self) -> float:
        return relative_half_width(self.value, self.low, self.high)


@dataclass(frozen=True)
class Wave:
    """The next wave of one (family label, model): new instances per bin, or why none."""

    new: np.ndarray
    stop: str | None = None
    calls_wanted: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)


def first_wave(capacity: np.ndarray, settings: AdaptiveSettings) -> Wave:
    new = spread(capacity, settings.first_wave)
    return Wave(new, None if new.sum() else "exhausted")


def next_wave(
    lengths: np.ndarray,
    held: np.ndarray,
    capacity: np.ndarray,
    estimate: Estimate,
    samples: int,
    calls: int,
    waves: int,
    settings: AdaptiveSettings,
) -> Wave:
    """The wave after ``waves`` done ones, which made ``calls`` calls and hold ``held``
    instances per bin; ``capacity`` is what each bin may still add."""
    hw = estimate.half_width
    if math.isfinite(hw) and hw <= settings.target:
        return Wave(np.zeros_like(held), "target")
    if waves >= settings.max_waves:
        return Wave(np.zeros_like(held), "max_waves")
    budget_left = math.inf if settings.max_calls is None else settings.max_calls - calls
    if budget_left < samples:
        return Wave(np.zeros_like(held), "budget")
    if math.isfinite(hw):
        wanted = calls * (hw / settings.target) ** 2 * settings.overshoot - calls
    else:
        wanted = calls  # no interval yet: double
    wanted = min(max(wanted, 0.25 * calls, samples), settings.max_growth * calls, budget_left)
    instances = max(1, int(wanted // samples))
    k = decay_rate(estimate.metric, estimate.value)
    free = estimate.metric == "L0"
    explore = int(round(settings.explore * instances))
    notes: list[str] = []
    cap = np.asarray(capacity, dtype=int)
    band = np.ones_like(cap)
    if math.isfinite(k) and k > 0:
        A = estimate.A if free and math.isfinite(estimate.A) and estimate.A > 0 else 1.0
        attempts = np.asarray(held, dtype=float) * samples
        chosen = allocate(lengths, attempts, cap, A, k, instances - explore, samples, free)
        band = informative(lengths, estimate, A)
    else:
        # nothing to steer by (no decay seen, or nothing fitted): look where the
        # curve must be, the short end when almost everything failed, else the long end
        notes.append(f"no finite {estimate.metric}: wave aimed by the success rate")
        half = max(1, cap.size // 2)
        mask = np.zeros_like(cap)
        if estimate.success_rate == estimate.success_rate and estimate.success_rate < 0.5:
            mask[:half] = 1
        else:
            mask[-half:] = 1
        chosen = spread(cap * mask, instances - explore, held)
    rest = cap - chosen
    left = instances - int(chosen.sum())
    # explore where an attempt can still say something: where success is neither all
    # but certain nor all but impossible for any L0 the interval allows
    explored = spread(rest * band, left, np.asarray(held) + chosen)
    new = chosen + explored + spread(rest - explored, left - int(explored.sum()), np.asarray(held) + chosen)
    if not new.sum():
        return Wave(new, "exhausted")
    return Wave(new, None, int(new.sum()) * samples, tuple(notes))


#: success probabilities outside this band carry almost no information about L0
INFORMATIVE = (0.01, 0.99)


def informative(lengths: np.ndarray, estimate: Estimate, A: float) -> np.ndarray:
    """1 for the depths where success lies inside :data:`INFORMATIVE` for some L0 of the
    estimate's interval (or of a factor of 3 either side without one), else 0; all 1
    when no depth qualifies (exploring somewhere beats exploring nowhere)."""
    L = np.asarray(lengths, dtype=float)
    low, high = estimate.low, estimate.high
    if estimate.metric == "L0":
        slow = high if high is not None and math.isfinite(high) and high > 0 else 3 * estimate.value
        fast = low if low is not None and math.isfinite(low) and low > 0 else estimate.value / 3
        k_slow, k_fast = 1.0 / slow, 1.0 / fast
    else:
        k = decay_rate(estimate.metric, estimate.value)
        k_slow, k_fast = k / 3, 3 * k
    p_slow, p_fast = A * np.exp(-k_slow * L), A * np.exp(-k_fast * L)
    keep = (p_slow >= INFORMATIVE[0]) & (p_fast <= INFORMATIVE[1])
    return keep.astype(int) if keep.any() else np.ones(L.size, dtype=int)


@dataclass
class DesignTrace:
    """A simulated study's waves: calls and interval after each (benchmarks, calibration)."""

    calls: list[int] = field(default_factory=list)
    estimates: list[Estimate] = field(default_factory=list)
    stop: str | None = None


def simulate(
    lengths: np.ndarray,
    capacity: np.ndarray,
    samples: int,
    settings: AdaptiveSettings,
    observe: Callable[[np.ndarray], np.ndarray],
    fit: Callable[[np.ndarray, np.ndarray, np.ndarray], Estimate],
    uniform: bool = False,
) -> DesignTrace:
    """Waves against a simulated model, with the same rules as a pipeline run.

    ``observe(new)`` gets the new instances per bin and returns their successes as an
    array (instances, samples); ``fit(L, success, instance)`` is the analysis' fit of
    every attempt so far. ``uniform`` replaces every later wave by a whole sweep of the
    bins (each wave the same size as the adaptive rule would ask for, spread evenly),
    the fixed grid's design under the same stopping rule.
    """
    held = np.zeros(len(lengths), dtype=int)
    cap = np.asarray(capacity, dtype=int)
    L_parts: list[np.ndarray] = []
    y_parts: list[np.ndarray] = []
    c_parts: list[np.ndarray] = []
    trace = DesignTrace()
    wave = first_wave(cap, settings) if not uniform else Wave(spread(cap, settings.first_wave))
    waves = 0
    while wave.stop is None:
        new = wave.new
        y = observe(new)
        depth = np.repeat(np.asarray(lengths, dtype=float), new)
        ids = np.arange(held.sum(), held.sum() + new.sum())
        L_parts.append(np.repeat(depth, samples))
        y_parts.append(y.ravel())
        c_parts.append(np.repeat(ids, samples))
        held = held + new
        waves += 1
        est = fit(np.concatenate(L_parts), np.concatenate(y_parts), np.concatenate(c_parts))
        calls = int(held.sum()) * samples
        trace.calls.append(calls)
        trace.estimates.append(est)
        wave = next_wave(lengths, held, cap - held, est, samples, calls, waves, settings)
        if uniform and wave.stop is None:
            wave = Wave(spread(cap - held, int(wave.new.sum()), held))
    trace.stop = wave.stop
    return trace
