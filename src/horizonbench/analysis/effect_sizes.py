"""Rank tests, effect sizes and multiplicity corrections (Tables 5 and 10, Appendices H and I).

:func:`mann_whitney`, :func:`hodges_lehmann`, :func:`cliffs_delta`, :func:`cohens_h`
(with :func:`cliffs_delta_label`, :func:`cohens_h_label`), :func:`bonferroni`,
:func:`holm`, :func:`benjamini_hochberg`: what the paper reports beside its p-values,
so a comparison of two environments or models reads as a size, not just a verdict.
Arrays in, numbers out; no I/O.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from horizonbench.analysis.inputs import float_series, unit_pvalues

#: the effect-size labels below "large", smallest first (see :func:`_magnitude`)
_MAGNITUDES = ("negligible", "small", "medium")


class MannWhitney(NamedTuple):
    u: float
    p_value: float


def mann_whitney(a, b, alternative: str = "two-sided") -> MannWhitney:
    """Mann-Whitney U of sample ``a`` against ``b`` (scipy), default two-sided.

    ``u`` is the statistic of ``a``: the number of pairs with ``a_i > b_j`` plus half
    the ties. The paper's G1b used one-sided tests per metric (Appendix H); pass
    ``alternative="greater"`` or ``"less"`` for those. A thin wrapper so the module's
    callers get one return shape and input checks (no NaN, no empty sample).
    """
    x = float_series(a, "a")
    y = float_series(b, "b")
    if x.size == 0 or y.size == 0:
        raise ValueError("both samples must be non-empty")
    from scipy import stats  # 0.3 s of imports that only the rank tests need

    res = stats.mannwhitneyu(x, y, alternative=alternative)
    return MannWhitney(float(res.statistic), float(res.pvalue))


def hodges_lehmann(a, b) -> float:
    """Hodges-Lehmann shift estimate: the median of all pairwise differences ``a_i - b_j``.

    The location estimate that goes with the Mann-Whitney test (the paper's G1b
    demands it be at least 0.20 per metric): robust to outliers, and equal to the true
    shift when ``a`` is ``b`` moved by a constant.
    """
    x = float_series(a, "a")
    y = float_series(b, "b")
    if x.size == 0 or y.size == 0:
        raise ValueError("both samples must be non-empty")
    return float(np.median(np.subtract.outer(x, y)))


def cliffs_delta(a, b) -> float:
    """Cliff's delta ``P(a > b) - P(a < b)`` over all pairs, in [-1, 1].

    The paper's effect size for the ablations (Table 5). For 0/1 outcomes it equals
    the difference of success rates, which is why Table 5 can be read off Table 4.
    Computed by sorting ``b`` and counting with binary search, O((n + m) log m).
    """
    x = float_series(a, "a")
    y = np.sort(float_series(b, "b"))
    if x.size == 0 or y.size == 0:
        raise ValueError("both samples must be non-empty")
    smaller = np.searchsorted(y, x, side="left")  # b_j < a_i
    larger = y.size - np.searchsorted(y, x, side="right")  # b_j > a_i
    return float((smaller.sum() - larger.sum()) / (x.size * y.size))


def cliffs_delta_label(delta: float) -> str:
    """Magnitude of Cliff's delta by Romano et al. (2006): 0.147 / 0.33 / 0.474.

    These cut-offs reproduce every code of the paper's Table 5.
    """
    return _magnitude(delta, (0.147, 0.33, 0.474))


def cohens_h(p1, p2):
    """Cohen's h ``2 asin(sqrt p1) - 2 asin(sqrt p2)``; vectorised.

    Why not a plain difference: the arcsine transform stabilises the binomial variance,
    so a 0.10 gap near 0 or 1 counts for more than the same gap near 0.5 -- the paper
    uses it to compare models cell by cell (Table 10).
    """
    a = np.asarray(p1, dtype=float)
    b = np.asarray(p2, dtype=float)
    if np.isnan(a).any() or np.isnan(b).any() or ((a < 0) | (a > 1) | (b < 0) | (b > 1)).any():
        raise ValueError("proportions must lie in [0, 1]")
    h = 2.0 * np.arcsin(np.sqrt(a)) - 2.0 * np.arcsin(np.sqrt(b))
    return float(h) if h.ndim == 0 else h


def cohens_h_label(h: float) -> str:
    """Magnitude of Cohen's h by Cohen (1988): 0.2 / 0.5 / 0.8 (the codes of Table 10)."""
    return _magnitude(h, (0.2, 0.5, 0.8))


def _magnitude(value: float, cuts: tuple[float, float, float]) -> str:
    """The conventional label of ``|value|`` against three ascending cut-offs: below the
    first "negligible", then "small", "medium", and "large" at or above the last (also
    for NaN, which is below no cut-off)."""
    v = abs(float(value))
    return next((label for label, cut in zip(_MAGNITUDES, cuts, strict=True) if v < cut), "large")


def bonferroni(pvalues) -> np.ndarray:
    """Bonferroni-adjusted p-values ``min(1, m p)`` in the input order.

    Controls the family-wise error rate under any dependence; the paper applies it at
    alpha = 0.01 to the secondary-axis family (Appendix I).
    """
    p = unit_pvalues(pvalues)
    return np.minimum(1.0, p * p.size)


def holm(pvalues) -> np.ndarray:
    """Holm step-down adjusted p-values in the input order.

    With the sorted p-values ``p_(1) <= ... <= p_(m)`` the adjusted value of ``p_(i)``
    is ``max_{j <= i} min(1, (m - j + 1) p_(j))``. Same family-wise guarantee as
    Bonferroni but uniformly more powerful; the paper's G1b uses it (Appendix H).
    """
    p = unit_pvalues(pvalues)
    m = p.size
    if m == 0:
        return p.copy()
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, p[order] * (m - np.arange(m)))
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(scaled)
    return adjusted


def benjamini_hochberg(pvalues) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (q-values) in the input order.

    The adjusted value of ``p_(i)`` is ``min_{j >= i} min(1, m p_(j) / j)``; rejecting
    where it is at most q controls the false-discovery rate at q for independent or
    positively dependent tests (the paper uses q = 0.05, Appendix I).
    """
    p = unit_pvalues(pvalues)
    m = p.size
    if m == 0:
        return p.copy()
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, p[order] * m / np.arange(1, m + 1))
    adjusted = np.empty(m)
    adjusted[order] = np.minimum.accumulate(scaled[::-1])[::-1]
    return adjusted
