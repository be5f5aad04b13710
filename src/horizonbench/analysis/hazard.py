"""The per-step hazard behind Figure 10: where a plan's first violation falls, against the
constant-rate expectation, and a calibrated test of a hazard that rises along the plan.

Why this exists: seqBench's Figure 10 reads the first violation's position RELATIVE to L
moving left as L grows as evidence against a constant per-step error. It is not: under a
constant per-step error eps, the first violation's absolute step is geometric, truncated
at L (``P(k) = eps (1 - eps)^k`` for ``k < L``), the same at every L, so its position
relative to L falls as 1/L by itself (the constant-rate noisy baseline shows exactly that
"shift"). What tells a constant rate apart is the absolute step against that expectation,
and a test of the hazard's trend.

The data is discrete-time survival: attempt j with optimal length ``L_j`` is at risk at
steps ``0 .. T_j`` and has its event (the first violation) at ``T_j`` when
``first_violation_step < L_j``; a success, or a first violation at or past ``L_j`` (a plan
that stayed legal for L steps and went wrong later), is censored after step ``L_j - 1``.
Aggregated per step index i, the at-risk counts ``n_i`` and events ``d_i`` are all the
likelihood needs, so a million attempts cost one ``bincount``.

- the constant rate: ``eps = sum(d) / sum(n)`` (its maximum-likelihood estimate);
- the trend: ``logit h_i = a + b * i / STEP_UNIT``; ``b`` (log-odds per ``STEP_UNIT``
  steps) with a 95% profile-likelihood interval; "rising" when the whole interval lies
  above 0 (a one-sided test at 2.5%).

Pure numpy/scipy; no pandas.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq

#: the trend's step unit: ``b`` is the change of the hazard's log-odds per this many steps
STEP_UNIT = 10.0
#: chi-square(1) 95% quantile: the profile-likelihood interval's drop is half of it
_LR_95 = 3.841458820694124


@dataclass(frozen=True, slots=True)
class AtRisk:
    """Per step index i: attempts at risk ``n[i]`` and first violations ``d[i]``."""

    n: np.ndarray
    d: np.ndarray


@dataclass(frozen=True, slots=True)
class HazardTrend:
    """The constant rate and the trend test of one model's attempts (NaN when undefined:
    no event or no step survived, or a single step index at risk)."""

    eps: float
    slope: float
    slope_low: float
    slope_high: float
    attempts: int
    events: int

    @property
    def rising(self) -> bool:
        """Later steps are riskier than earlier ones: the slope's whole 95% interval lies
        above 0."""
        return bool(self.slope_low > 0.0)


def at_risk(lengths: np.ndarray, first_step: np.ndarray) -> AtRisk:
    """Aggregate attempts into per-step risk sets. ``first_step`` is NaN for attempts with
    no located violation (successes); attempts with ``L < 1`` are left out."""
    L = np.asarray(lengths, dtype=float)
    k = np.asarray(first_step, dtype=float)
    keep = np.isfinite(L) & (L >= 1)
    L, k = L[keep].astype(np.int64), k[keep]
    event = np.isfinite(k) & (k < L)
    last = np.where(event, np.nan_to_num(k, nan=0.0).astype(np.int64), L - 1)  # last step at risk
    last = np.maximum(last, 0)
    size = int(L.max()) if L.size else 0
    # at risk at step i: attempts whose last step is >= i (a reversed cumulative count)
    ends = np.bincount(last, minlength=size)
    n = np.cumsum(ends[::-1])[::-1].astype(float)
    d = np.bincount(last[event], minlength=size).astype(float)
    return AtRisk(n, d)


def _loglik(a: float, b: float, x: np.ndarray, n: np.ndarray, d: np.ndarray) -> float:
    eta = a + b * x
    # d * log h + (n - d) * log(1 - h), with log h = -log(1 + e^-eta)
    return float(-(d * np.logaddexp(0.0, -eta)).sum() - ((n - d) * np.logaddexp(0.0, eta)).sum())


def _fit_a(b: float, x: np.ndarray, n: np.ndarray, d: np.ndarray, a: float) -> float:
    """The intercept that maximises the likelihood at slope ``b`` (Newton on a concave
    one-parameter function, from ``a``)."""
    for _ in range(100):
        h = 0.5 * (1.0 + np.tanh(0.5 * (a + b * x)))  # the logistic, without exp overflow
        grad = float((d - n * h).sum())
        hess = float((n * h * (1.0 - h)).sum())
        if hess <= 0.0:
            break
        step = grad / hess
        a += max(-5.0, min(5.0, step))
        if abs(step) < 1e-10:
            break
    return a


def _fit(x: np.ndarray, n: np.ndarray, d: np.ndarray, a0: float) -> tuple[float, float]:
    """Maximum-likelihood (a, b) by Newton with step halving."""
    a, b = a0, 0.0
    best = _loglik(a, b, x, n, d)
    for _ in range(200):
        h = 0.5 * (1.0 + np.tanh(0.5 * (a + b * x)))  # the logistic, without exp overflow
        w = n * h * (1.0 - h)
        r = d - n * h
        g = np.array([r.sum(), (r * x).sum()])
        H = np.array([[w.sum(), (w * x).sum()], [(w * x).sum(), (w * x * x).sum()]])
        try:
            delta = np.linalg.solve(H, g)
        except np.linalg.LinAlgError:
            break
        t = 1.0
        while t > 1e-8:
            cand = _loglik(a + t * delta[0], b + t * delta[1], x, n, d)
            if cand >= best - 1e-12:
                break
            t /= 2
        a, b = a + t * delta[0], b + t * delta[1]
        improved = _loglik(a, b, x, n, d)
        done = abs(improved - best) < 1e-10 and float(np.abs(t * delta).max()) < 1e-8
        best = max(best, improved)
        if done:
            break
    return a, b


def hazard_trend(lengths: np.ndarray, first_step: np.ndarray) -> HazardTrend:
    """The constant rate and the hazard's trend along the plan (see the module doc)."""
    risk = at_risk(lengths, first_step)
    attempts = int(risk.n[0]) if risk.n.size else 0
    N, D = float(risk.n.sum()), float(risk.d.sum())
    nan = math.nan
    if attempts == 0 or N == 0:
        return HazardTrend(nan, nan, nan, nan, attempts, 0)
    eps = D / N
    used = risk.n > 0
    x = np.flatnonzero(used).astype(float) / STEP_UNIT
    n, d = risk.n[used], risk.d[used]
    if D == 0 or D == N or x.size < 2:
        return HazardTrend(eps, nan, nan, nan, attempts, int(D))
    a0 = math.log(eps / (1.0 - eps))
    a, b = _fit(x, n, d, a0)
    best = _loglik(a, b, x, n, d)
    floor = best - _LR_95 / 2

    def gap(bb: float) -> float:
        return _loglik(_fit_a(bb, x, n, d, a), bb, x, n, d) - floor

    # bracket each end of the interval by doubling a step away from the estimate
    ends = []
    for sign in (-1.0, 1.0):
        width = 0.1 + abs(b)
        end = nan
        for _ in range(40):
            probe = b + sign * width
            if gap(probe) < 0:
                end = float(brentq(gap, *sorted((b, probe)), xtol=1e-9))
                break
            width *= 2
        ends.append(end)
    return HazardTrend(eps, b, ends[0], ends[1], attempts, int(D))


def expected_first_step(
    lengths: np.ndarray, eps: float, quantiles: tuple[float, ...] = (0.25, 0.5, 0.75)
) -> tuple[float, list[float]]:
    """Mean and quantiles of the first violation's absolute step among the FAILED attempts
    of these lengths, if every step fails with probability ``eps`` (geometric, truncated
    at each attempt's L, mixed over the attempts by their chance to fail).

    Quantiles are the least step k whose mixture CDF reaches q (the step is an integer).
    """
    L = np.asarray(lengths, dtype=float)
    L = L[np.isfinite(L) & (L >= 1)].astype(np.int64)
    if not L.size or not math.isfinite(eps) or eps <= 0.0:
        return math.nan, [math.nan] * len(quantiles)
    q = 1.0 - eps
    top = int(L.max())
    counts = np.bincount(L, minlength=top + 1).astype(float)  # attempts per L
    steps = np.arange(top)
    pmf = eps * np.power(q, steps)  # P(first violation at k), before truncation
    # attempts still able to fail at step k: those with L > k
    alive = np.cumsum(counts[::-1])[::-1][1:]  # alive[k] = #attempts with L >= k + 1
    mass = pmf * alive
    total = float(mass.sum())
    if total <= 0.0:
        return math.nan, [math.nan] * len(quantiles)
    mean = float((mass * steps).sum() / total)
    cdf = np.cumsum(mass) / total
    out = [float(np.searchsorted(cdf, p - 1e-12, side="left")) for p in quantiles]
    return mean, out


__all__ = ["STEP_UNIT", "AtRisk", "HazardTrend", "at_risk", "expected_first_step", "hazard_trend"]
