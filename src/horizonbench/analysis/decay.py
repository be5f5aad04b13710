"""Fits of the success-versus-depth law ``p(L) = min(1, A * exp(-L / L0))``.

Three estimators are offered on purpose:

* ``wls_prefactor`` and ``wls_origin`` are seqBench's Figure 1 method (weighted least
  squares on log success rates, weights from the inverse squared residuals of a
  preliminary OLS fit), in its two forms: ``wls_prefactor`` fits
  ``log p = log A - L / L0`` (a free prefactor A), ``wls_origin`` fits
  ``log p = -L / L0`` (A = 1, the line through the origin), which is the curve the
  paper's text names: "we fit an exponential decay curve P(L)=exp(-L/L0) to the success
  rates" (seqBench §2.2), and its L0 is "the path length at which performance drops by a
  factor of e^-1", true only when A = 1. Neither can use bins with zero successes
  (``log 0``), so those are dropped and counted rather than silently ignored; that drop
  keeps only the lucky bins at large L and flattens the prefactor form's slope most
  (the origin form is pinned at L = 0). When success really has a prefactor
  (``A exp(-L/L0)`` with A < 1: a first-step error), the origin form is the biased one.
  ``calibration/decay_cases.py`` measures both (case ``WLS forms``).
* ``binomial_mle`` maximises the Bernoulli likelihood of the individual attempts, which
  uses every attempt including the all-failure bins, and gets its interval from a
  cluster bootstrap over instances (samples of one instance are not independent).

Degenerate data never raises: the fit comes back with ``L0`` set to ``inf`` (no decay)
or ``nan`` (not identifiable) and a ``note`` saying why, so a report can still render.

What counts as a success is the caller's choice, and every fit records it
(``DecayFit.success_definition``, one of :data:`SUCCESS_DEFINITIONS`): horizonbench
fits its own success by simulation unless asked otherwise, while seqBench's Figure 1
fits Pass@1, an exact match with the gold plan. The two agree on mazes with a single
optimal plan; where a maze has several, simulation also credits the other optimal
plans, so its success rate is never below the exact-match rate.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from scipy import optimize

#: probabilities are clipped to [P_EPS, 1 - P_EPS] so a single surprising attempt
#: cannot make the log-likelihood infinite
P_EPS = 1e-12
#: smallest |residual| used for the WLS weights, relative to the OLS residual RMS;
#: without it one bin lying on the OLS line would get an unbounded weight
_RESID_FLOOR_REL = 1e-2
_RESID_FLOOR_ABS = 1e-9
#: a fitted rate below this (per unit of scaled L) is indistinguishable from no decay
_RATE_ZERO = 1e-9
#: how far below 0 (per attempt) the slope in k at k = 0 may be and still count as 0:
#: far above float rounding (1e-16 per term), far below one success moved by one L step
_KKT_TOLERANCE = 1e-9

#: the success definitions a fit can use: name -> (scores column, what it means)
SUCCESS_DEFINITIONS: dict[str, tuple[str, str]] = {
    "simulation": (
        "success",
        "the plan, replayed in the simulator, is legal from the start, rescues Alice and has "
        "the optimal number of actions (any optimal plan counts)",
    ),
    "exact_match": (
        "exact_match",
        "the plan is identical to the gold plan (seqBench's Pass@1)",
    ),
}
#: what horizonbench's fits count unless told otherwise
DEFAULT_SUCCESS_DEFINITION = "simulation"


@dataclass(frozen=True)
class DecayFit:
    """One fitted decay law plus what went into it, so a reader can judge it.

    ``success_definition`` names what the fitted rates count as a success (a key of
    :data:`SUCCESS_DEFINITIONS`); the estimators leave it to their caller, which knows
    which column it passed (None when it was not said).
    """

    method: str
    L0: float
    A: float
    L0_low: float | None
    L0_high: float | None
    n_bins_used: int
    n_bins_dropped: int
    n_attempts: int
    converged: bool
    note: str | None
    success_definition: str | None = None


# ---------------------------------------------------------------------------
# WLS on log success rates (seqBench Figure 1)
# ---------------------------------------------------------------------------


def _weighted_line(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[float, float]:
    """Slope and intercept of a weighted straight-line fit.

    Centring x first keeps the normal equations well conditioned for long L ranges.
    """
    xm = float(np.sum(w * x) / np.sum(w))
    ym = float(np.sum(w * y) / np.sum(w))
    dx = x - xm
    slope = float(np.sum(w * dx * (y - ym)) / np.sum(w * dx * dx))
    return slope, ym - slope * xm


def _origin_line(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[float, float]:
    """Slope of a weighted straight line through the origin, and its intercept (0)."""
    return float(np.sum(w * x * y) / np.sum(w * x * x)), 0.0


def _wls_paper_weights(x: np.ndarray, y: np.ndarray, through_origin: bool = False) -> tuple[float, float]:
    """OLS, then WLS with weights 1/resid^2 from that OLS, as the paper describes; both
    fits through the origin when ``through_origin``."""
    line = _origin_line if through_origin else _weighted_line
    slope, intercept = line(x, y, np.ones_like(x))
    resid = y - (intercept + slope * x)
    rms = float(np.sqrt(np.mean(resid**2)))
    floor = max(_RESID_FLOOR_ABS, _RESID_FLOOR_REL * rms)
    weights = 1.0 / np.maximum(np.abs(resid), floor) ** 2
    return line(x, y, weights)


def fit_wls_prefactor(L: np.ndarray, success_rate: np.ndarray, n: np.ndarray | None = None) -> DecayFit:
    """Fit ``log(rate) = log A - L / L0`` over per-bin rates (method ``wls_prefactor``).

    ``n`` (attempts per bin) is optional: it only serves to drop empty bins and to
    report how many attempts the bins summarise; the weights follow the paper.
    """
    return _fit_wls(L, success_rate, n, through_origin=False)


def fit_wls_origin(L: np.ndarray, success_rate: np.ndarray, n: np.ndarray | None = None) -> DecayFit:
    """Fit ``log(rate) = -L / L0`` (A = 1) over per-bin rates (method ``wls_origin``): the
    curve ``P(L) = exp(-L/L0)`` the paper's text fits. Same weights and bins as
    :func:`fit_wls_prefactor`; one point with L != 0 is enough."""
    return _fit_wls(L, success_rate, n, through_origin=True)


def _fit_wls(L: np.ndarray, success_rate: np.ndarray, n: np.ndarray | None, through_origin: bool) -> DecayFit:
    """Both WLS forms: the bins they keep, the notes they give, the fit itself."""
    method = "wls_origin" if through_origin else "wls_prefactor"
    x = np.asarray(L, dtype=float).ravel()
    rate = np.asarray(success_rate, dtype=float).ravel()
    if x.shape != rate.shape:
        raise ValueError(f"L and success_rate differ in length: {x.size} vs {rate.size}")
    counts = None if n is None else np.asarray(n, dtype=float).ravel()
    if counts is not None and counts.shape != x.shape:
        raise ValueError(f"L and n differ in length: {x.size} vs {counts.size}")

    usable = np.isfinite(x) & np.isfinite(rate) & (rate >= 0) & (rate <= 1)
    if counts is not None:
        usable &= np.isfinite(counts) & (counts > 0)
    n_attempts = int(np.sum(counts[usable])) if counts is not None else 0
    unusable = int(np.sum(~usable))
    zero = usable & (rate == 0)
    keep = usable & (rate > 0)
    dropped = unusable + int(np.sum(zero))

    notes = []
    if zero.any():
        notes.append(f"dropped {int(np.sum(zero))} bin(s) with zero successes (log 0)")
    if unusable:
        notes.append(f"dropped {unusable} empty or invalid bin(s)")

    def result(L0: float, A: float, converged: bool, why: str | None = None) -> DecayFit:
        text = "; ".join([*([why] if why else []), *notes]) or None
        return DecayFit(method, L0, A, None, None, int(np.sum(keep)), dropped, n_attempts, converged, text)

    xs, ys = x[keep], np.log(rate[keep])
    if through_origin and not np.any(xs != 0):
        return result(math.nan, math.nan, False, "no L other than 0 with successes")
    if not through_origin and np.unique(xs).size < 2:
        return result(math.nan, math.nan, False, "fewer than 2 distinct L with successes")
    slope, intercept = _wls_paper_weights(xs, ys, through_origin)
    if not math.isfinite(slope):
        return result(math.nan, math.nan, False, "WLS slope is not finite")
    if slope >= 0:
        # No decay: the rising line's intercept would put a flat L0 = inf curve below
        # every bin, so A is refitted with slope 0 (the paper-weighted mean log level).
        A = 1.0 if through_origin else math.exp(_wls_level(ys))
        why = f"no decay: success does not decay with L (WLS slope {slope:.3g} >= 0); A refitted at slope 0"
        return result(math.inf, A, True, _above_certainty(why, A))
    A = math.exp(intercept)
    return result(-1.0 / slope, A, True, _above_certainty(None, A))


def _wls_level(y: np.ndarray) -> float:
    """The slope-0 fit of ``y`` with the paper's weights (mean, then 1/resid^2 weights)."""
    resid = y - float(np.mean(y))
    rms = float(np.sqrt(np.mean(resid**2)))
    floor = max(_RESID_FLOOR_ABS, _RESID_FLOOR_REL * rms)
    weights = 1.0 / np.maximum(np.abs(resid), floor) ** 2
    return float(np.sum(weights * y) / np.sum(weights))


#: a prefactor above this is noted: a fit of pure decay scatters A around 1 (the demo's
#: decaying baselines gave 1.005-1.51 with nothing wrong), so only a clear excess counts
A_NOTE_ABOVE = 1.1


def _above_certainty(why: str | None, A: float) -> str | None:
    """Add a note when the prefactor A clearly exceeds 1: P(0) above certainty, so the
    fit does not describe short plans (the drawn curve is capped at 1)."""
    if not A > A_NOTE_ABOVE:
        return why
    flag = f"A = {A:.3g} > 1 (prefactor above certainty)"
    return flag if why is None else f"{why}; {flag}"


# ---------------------------------------------------------------------------
# Binomial maximum likelihood over attempts
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Counts:
    """Attempts aggregated per distinct L: the likelihood only depends on these."""

    L: np.ndarray
    successes: np.ndarray
    trials: np.ndarray


def _aggregate(
    L_index: np.ndarray, L_values: np.ndarray, y: np.ndarray, w: np.ndarray | None = None
) -> _Counts:
    size = L_values.size
    trials = np.bincount(L_index, weights=w, minlength=size).astype(float)
    wy = y if w is None else w * y
    successes = np.bincount(L_index, weights=wy, minlength=size).astype(float)
    present = trials > 0
    return _Counts(L_values[present], successes[present], trials[present])


def _neg_loglik(theta: np.ndarray, xs: np.ndarray, s: np.ndarray, t: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean negative Bernoulli log-likelihood and its gradient in (log A, k*scale).

    The model is convex in these parameters (log p is linear, log(1 - e^eta) is
    concave), so one local optimiser run finds the global optimum.
    """
    log_a, k = theta
    eta = np.minimum(log_a - k * xs, 0.0)
    p = np.clip(np.exp(eta), P_EPS, 1 - P_EPS)
    total = float(np.sum(t))
    ll = np.sum(s * np.log(p) + (t - s) * np.log1p(-p))
    # d ll / d eta for each L group; zero where the min(1, .) cap is active
    dl_deta = np.where(log_a - k * xs < 0, (s - t * p) / (1 - p), 0.0)
    grad = np.array([np.sum(dl_deta), -np.sum(dl_deta * xs)])
    return -float(ll) / total, -grad / total


def _mle_point(c: _Counts, scale: float) -> tuple[float, float, bool, str | None]:
    """(rate k, A, converged, note) for aggregated counts; k = 0 means no decay.

    Degenerate data is answered directly rather than handed to the optimiser,
    whose answer there would depend on tolerances rather than on the data.
    """
    total_s, total_t = float(np.sum(c.successes)), float(np.sum(c.trials))
    if total_t == 0:
        return math.nan, math.nan, False, "no attempts"
    if total_s == 0:
        return math.nan, 0.0, False, "no successes: L0 is not identifiable"
    if total_s == total_t:
        return 0.0, 1.0, True, "every attempt succeeded: no decay"
    if c.L.size < 2:
        return math.nan, math.nan, False, "a single L value: A and L0 are not separable"

    xs = c.L / scale
    rate = total_s / total_t
    # k = 0 is the optimum (the likelihood is convex) when, with A at the overall rate,
    # the slope in k does not point down: the successes sit no shallower than the
    # attempts. Said here rather than left to the optimiser, which stops near the bound
    # at a rate of rounding size (3e-10 per step: L0 = 2.6e9, or a bootstrap upper limit
    # of 198366769.5 instead of inf) when failures are spread evenly over L.
    if float(np.sum((c.successes - c.trials * rate) * xs)) >= -_KKT_TOLERANCE * total_t:
        return 0.0, rate, True, None
    start = np.array([0.0, max(-math.log(rate) / max(float(np.mean(xs)), 1e-6), 1e-3)])
    res = optimize.minimize(
        _neg_loglik,
        start,
        args=(xs, c.successes, c.trials),
        jac=True,
        method="L-BFGS-B",
        bounds=[(math.log(P_EPS), 0.0), (0.0, None)],
    )
    log_a, k_scaled = (float(v) for v in res.x)
    note = None if res.success else f"optimiser did not converge: {res.message}"
    return k_scaled / scale, math.exp(log_a), bool(res.success), note


def _cluster_members(cluster: np.ndarray) -> tuple[np.ndarray, int]:
    """Integer cluster code per attempt and the number of clusters."""
    _, codes = np.unique(cluster, return_inverse=True)
    return codes.ravel(), int(codes.max()) + 1 if codes.size else 0


@contextlib.contextmanager
def _one_blas_thread() -> Iterator[None]:
    """BLAS on one thread while fitting: L-BFGS-B on two parameters makes many tiny
    BLAS/LAPACK calls, and a threaded OpenBLAS wakes its threads for each of them,
    which costs 10 to 40 times the fit itself on a busy machine. The numbers are the
    same either way. Without threadpoolctl the threads are left as they are."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def _bootstrap_rates(
    L_index: np.ndarray,
    L_values: np.ndarray,
    y: np.ndarray,
    codes: np.ndarray,
    n_clusters: int,
    reps: int,
    seed: int,
    scale: float,
) -> np.ndarray:
    """Decay rates k refitted on resampled clusters; nan where a resample is degenerate.

    A resample is expressed as a multiplicity per cluster. The attempts are first
    summed per (cluster, L) cell, so a replicate weighs cells, not attempts: its cost
    is O(clusters), whatever the samples per instance. The sums are whole numbers, exact
    in float64, so the counts are the same as weighing every attempt.
    """
    size = L_values.size
    cell, cell_index = np.unique(codes.astype(np.int64) * size + L_index, return_inverse=True)
    cell_index = cell_index.ravel()
    cell_cluster, cell_L = cell // size, cell % size
    cell_trials = np.bincount(cell_index, minlength=cell.size).astype(float)
    cell_successes = np.bincount(cell_index, weights=y, minlength=cell.size)
    rng = np.random.default_rng(seed)
    rates = np.empty(reps)
    for i in range(reps):
        draw = rng.integers(0, n_clusters, size=n_clusters)
        mult = np.bincount(draw, minlength=n_clusters).astype(float)[cell_cluster]
        trials = np.bincount(cell_L, weights=mult * cell_trials, minlength=size)
        successes = np.bincount(cell_L, weights=mult * cell_successes, minlength=size)
        present = trials > 0
        counts = _Counts(L_values[present], successes[present], trials[present])
        rates[i] = _mle_point(counts, scale)[0]
    return rates


def _interval_from_rates(
    rates: np.ndarray, confidence: float
) -> tuple[float | None, float | None, str | None]:
    """Percentile interval for L0, computed on k = 1/L0 so k = 0 (L0 = inf) is fine."""
    ok = rates[np.isfinite(rates)]
    if ok.size < 2:
        return None, None, "bootstrap: too few usable resamples for an interval"
    alpha = (1 - confidence) / 2
    k_low, k_high = np.quantile(ok, [alpha, 1 - alpha])
    lost = rates.size - ok.size
    note = f"bootstrap: {lost} of {rates.size} resamples were degenerate" if lost else None
    return _inverse_rate(float(k_high)), _inverse_rate(float(k_low)), note


def _inverse_rate(k: float) -> float:
    return math.inf if k <= 0 else 1.0 / k


def fit_binomial_mle(
    L: np.ndarray,
    success: np.ndarray,
    cluster: np.ndarray | None = None,
    bootstrap: int = 200,
    seed: int = 0,
    confidence: float = 0.95,
) -> DecayFit:
    """Maximum-likelihood ``p(L) = min(1, A exp(-L/L0))`` over 0/1 attempts.

    ``cluster`` names the instance of each attempt; the bootstrap resamples whole
    clusters because repeated samples of one instance share its difficulty. Without
    it every attempt is its own cluster. The result is deterministic given ``seed``.
    """
    if bootstrap < 0:
        raise ValueError(f"bootstrap must be >= 0, got {bootstrap}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    x = np.asarray(L, dtype=float).ravel()
    y = np.asarray(success, dtype=float).ravel()
    if x.shape != y.shape:
        raise ValueError(f"L and success differ in length: {x.size} vs {y.size}")
    groups = np.arange(x.size) if cluster is None else np.asarray(cluster).ravel()
    if groups.shape != x.shape:
        raise ValueError(f"L and cluster differ in length: {x.size} vs {groups.size}")

    keep = np.isfinite(x) & np.isfinite(y)
    x, y, groups = x[keep], (y[keep] > 0.5).astype(float), groups[keep]
    L_values, L_index = np.unique(x, return_inverse=True)
    L_index = L_index.ravel()
    scale = float(np.max(np.abs(x))) if x.size and np.max(np.abs(x)) > 0 else 1.0

    with _one_blas_thread():
        k, A, converged, note = _mle_point(_aggregate(L_index, L_values, y), scale)
        if k * scale < _RATE_ZERO and math.isfinite(k) and note is None:
            note = "success does not decay with L (fitted rate is 0)"
        notes = [note] if note else []
        low = high = None
        if bootstrap > 0 and math.isfinite(k):
            codes, n_clusters = _cluster_members(groups)
            rates = _bootstrap_rates(L_index, L_values, y, codes, n_clusters, bootstrap, seed, scale)
            rates[rates * scale < _RATE_ZERO] = 0.0
            low, high, boot_note = _interval_from_rates(rates, confidence)
            notes += [boot_note] if boot_note else []
    L0 = math.nan if not math.isfinite(k) else (math.inf if k * scale < _RATE_ZERO else 1.0 / k)
    return DecayFit(
        "binomial_mle",
        L0,
        A,
        low,
        high,
        int(L_values.size),
        0,
        int(x.size),
        converged,
        "; ".join(notes) or None,
    )
