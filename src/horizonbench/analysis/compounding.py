"""The compounding-error model of RecurrReason (its appendix N): P(success) = (1 - eps)^L.

eps is fitted by binomial maximum likelihood over attempts, each with its own optimal
length L, so sizes with very different lengths (Hanoi: 1 to 1,023 moves) inform one
per-step error rate. The interval is the likelihood-ratio interval (chi-square, 1
degree of freedom), which stays sensible at the edges where a Wald interval fails:
all attempts solved (eps = 0, upper bound only) or none (eps = 1, lower bound only).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import special  # not scipy.stats: 0.3 s of imports the pipeline never needs
from scipy.optimize import brentq, minimize_scalar

#: chi-square(1) quantile for a 95% likelihood-ratio interval
_LR_95 = 3.841458820694124
_EDGE = 1e-12


@dataclass(frozen=True, slots=True)
class EpsFit:
    eps: float
    eps_low: float
    eps_high: float
    n_attempts: int
    successes: int
    converged: bool
    note: str | None = None


def _loglik(eps: float, L: np.ndarray, s: np.ndarray) -> float:
    q = math.log1p(-eps)  # log(1 - eps)
    ok = L[s] * q
    fail_p = -np.expm1(L[~s] * q)  # 1 - (1 - eps)^L
    with np.errstate(divide="ignore"):
        return float(ok.sum() + np.log(np.clip(fail_p, 1e-300, None)).sum())


def fit_eps(lengths: np.ndarray, successes: np.ndarray) -> EpsFit:
    """Maximum-likelihood eps with a 95% likelihood-ratio interval. Attempts with L = 0
    carry no information and are ignored."""
    L = np.asarray(lengths, dtype=float)
    s = np.asarray(successes, dtype=bool)
    keep = L > 0
    L, s = L[keep], s[keep]
    n, k = len(L), int(s.sum())
    if n == 0:
        return EpsFit(math.nan, math.nan, math.nan, 0, 0, False, "no attempts with L > 0")
    lo_b, hi_b = _EDGE, 1.0 - _EDGE
    if k == n:
        eps, best, note = 0.0, 0.0, "every attempt solved: eps at its lower edge"
    elif k == 0:
        eps, best, note = 1.0, 0.0, "no attempt solved: eps at its upper edge"
    else:
        res = minimize_scalar(
            lambda e: -_loglik(e, L, s), bounds=(lo_b, hi_b), method="bounded", options={"xatol": 1e-10}
        )
        eps, best, note = float(res.x), -float(res.fun), None
    target = best - _LR_95 / 2

    def gap(e: float) -> float:
        return _loglik(e, L, s) - target

    inside = min(max(eps, lo_b), hi_b)  # the estimate, moved off the edges for the search
    low = 0.0 if gap(lo_b) >= 0 else float(brentq(gap, lo_b, inside, xtol=1e-12))
    high = 1.0 if gap(hi_b) >= 0 else float(brentq(gap, inside, hi_b, xtol=1e-12))
    return EpsFit(eps, low, high, n, k, note is None, note)


def predicted_success(lengths: np.ndarray, eps: float) -> float:
    """Mean of (1 - eps)^L over the given attempts (their own lengths, not a mean L)."""
    L = np.asarray(lengths, dtype=float)
    if not len(L) or math.isnan(eps):
        return math.nan
    return float(np.mean(np.power(1.0 - eps, L)))


#: two-sided level of the predicted bands
BAND_LEVEL = 0.95
#: points of the eps distribution the predictive band mixes over (quantile midpoints)
_EPS_POINTS = 41


def _eps_draws(eps: float, eps_low: float, eps_high: float) -> np.ndarray:
    """Quantile points of a two-piece normal for eps: centred on the estimate, each side's
    spread read off that side of the 95% likelihood-ratio interval (so an estimate at an
    edge, eps = 0 with every attempt solved, spreads upwards only), clipped to [0, 1]."""
    u = (np.arange(_EPS_POINTS) + 0.5) / _EPS_POINTS
    z = special.ndtri(u)  # the normal quantile
    half = special.ndtri(0.5 + BAND_LEVEL / 2)
    spread = np.where(z < 0, (eps - eps_low) / half, (eps_high - eps) / half)
    return np.clip(eps + z * spread, 0.0, 1.0)


def predicted_band(
    lengths: np.ndarray, eps: float, eps_low: float, eps_high: float, level: float = BAND_LEVEL
) -> tuple[float, float]:
    """Where the observed success share of these attempts should fall if their success is
    (1 - eps)^L, with both sources of spread: the fit's uncertainty about eps AND the
    binomial noise of a finite number of attempts.

    Why: the band over the eps interval alone is the spread of the MEAN; 30 attempts
    scatter their share by +-0.1 around it, so a correct model fell outside that band most
    of the time (issue 22: 0.900 of 30 against 0.744-0.794). The predictive distribution
    of the successes is a mixture over eps (:func:`_eps_draws`) of binomials with
    ``p = mean((1 - eps)^L)`` over the attempts' own lengths (a binomial at the mean p
    is a little wider than the exact Poisson-binomial: the band errs wide). The band is
    ``[k_low, k_high] / n`` with ``P(X < k_low) <= (1 - level)/2`` and
    ``P(X > k_high) <= (1 - level)/2``: the observed share lies inside with probability
    at least ``level`` under the model (discreteness makes it a little more).
    """
    L = np.asarray(lengths, dtype=float)
    n = len(L)
    if not n or not all(map(math.isfinite, (eps, eps_low, eps_high))):
        return math.nan, math.nan
    p = np.array([np.mean(np.power(1.0 - e, L)) for e in _eps_draws(eps, eps_low, eps_high)])
    k = np.arange(n + 1)
    cdf = special.bdtr(k[:, None], n, p[None, :]).mean(axis=1)  # the binomial cdf
    tail = (1.0 - level) / 2
    k_low = int(np.searchsorted(cdf, tail - 1e-12, side="left"))  # least k with F(k) >= tail
    # P(X > k) = 1 - F(k) <= tail: the least such k
    k_high = int(np.searchsorted(cdf, 1.0 - tail - 1e-12, side="left"))
    return k_low / n, min(k_high, n) / n


FIT_COLUMNS = ["model", "eps", "eps_low", "eps_high", "n_attempts", "successes", "converged", "note"]
BY_N_COLUMNS = [
    "model",
    "n",
    "L_mean",
    "attempts",
    "successes",
    "success_rate",
    "predicted",
    "predicted_low",
    "predicted_high",
    "predicted_eps_low",
    "predicted_eps_high",
    "move_legality_mean",
    "optimality_gap_mean",
    "progress_mean",
    "best_progress_mean",
]


def _mean(g: pd.DataFrame, column: str) -> float:
    """Mean of a numeric column, NaN when the column is absent or all missing."""
    if column not in g:
        return math.nan
    values = pd.to_numeric(g[column], errors="coerce").astype("float64").dropna()
    return float(values.mean()) if len(values) else math.nan


def compounding_tables(scores: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(one eps fit per model, a per-n table of observed beside predicted success) for
    the answered attempts of one family and mode (scores with an ``n`` column)."""
    fits, rows = [], []
    if "n" not in scores or scores["n"].isna().all():
        return pd.DataFrame(columns=FIT_COLUMNS), pd.DataFrame(columns=BY_N_COLUMNS)
    for model, df in scores.groupby("model", sort=True):
        L = df["solution_length"].to_numpy(dtype=float)
        s = df["success"].to_numpy(dtype=bool)
        f = fit_eps(L, s)
        fits.append({"model": model, **{k: getattr(f, k) for k in FIT_COLUMNS[1:]}})
        for n, g in df.groupby("n", sort=True):
            Ln = g["solution_length"].to_numpy(dtype=float)
            gaps = g["optimality_gap"].dropna()
            band = predicted_band(Ln, f.eps, f.eps_low, f.eps_high)
            rows.append(
                {
                    "model": model,
                    "n": int(n),
                    "L_mean": float(Ln.mean()),
                    "attempts": len(g),
                    "successes": int(g["success"].sum()),
                    "success_rate": float(g["success"].mean()),
                    "predicted": predicted_success(Ln, f.eps),
                    # where this many attempts' share falls: eps's spread and binomial noise
                    **dict(zip(("predicted_low", "predicted_high"), band, strict=True)),
                    # the mean's range over eps's interval alone ((1 - eps)^L falls as
                    # eps rises: the high eps gives the low bound)
                    "predicted_eps_low": predicted_success(Ln, f.eps_high),
                    "predicted_eps_high": predicted_success(Ln, f.eps_low),
                    "move_legality_mean": float(g["move_legality_rate"].astype(float).mean()),
                    "optimality_gap_mean": float(gaps.astype(float).mean()) if len(gaps) else math.nan,
                    # the share of the start's distance to the goal closed (puzzle scoring)
                    "progress_mean": _mean(g, "progress_ratio"),
                    "best_progress_mean": _mean(g, "best_progress"),
                }
            )
    return pd.DataFrame(fits, columns=FIT_COLUMNS), pd.DataFrame(rows, columns=BY_N_COLUMNS)
