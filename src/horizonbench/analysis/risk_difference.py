"""The Miettinen-Nurminen score test for a risk difference (the paper's G1a cliff test).

Kept apart from the grid statistics of :mod:`horizonbench.analysis.phase` because it is
a general two-proportion test: :func:`horizonbench.analysis.phase.cliffs` applies it to
adjacent cells, and its maths (a restricted MLE in closed form with a numeric safety
net) is tested on its own against the paper's Appendix H and I tables.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import optimize, special

#: cliff margin of Definition 1 and the null of the G1a test (Appendix H: H0 dp <= 0.30)
CLIFF_MARGIN = 0.30


def _restricted_mle(x1: int, n1: int, x2: int, n2: int, delta0: float) -> tuple[float, float]:
    """Maximum-likelihood ``(p1, p2)`` subject to ``p1 - p2 = delta0``.

    The score equation is a cubic in ``p1`` with a unique root in the feasible range
    (the constrained log-likelihood is concave); Farrington and Manning (1990) give it
    in trigonometric closed form, used here. If rounding pushes that root outside the
    feasible interval (it can at the edges), a bounded 1-D maximisation takes over.
    """
    ph1, ph2 = x1 / n1, x2 / n2
    if delta0 == 0.0:
        # the pooled rate, exactly; the cubic has a double root at 0 or 1 when all
        # outcomes agree, where the trigonometric form loses half its digits
        pooled = (x1 + x2) / (n1 + n2)
        return pooled, pooled
    lo1, hi1 = max(0.0, delta0), min(1.0, 1.0 + delta0)
    theta = n2 / n1
    a = 1.0 + theta
    b = -(1.0 + theta + ph1 + theta * ph2 + delta0 * (theta + 2.0))
    c = delta0 * delta0 + delta0 * (2.0 * ph1 + theta + 1.0) + ph1 + theta * ph2
    d = -ph1 * delta0 * (1.0 + delta0)
    v = b**3 / (3.0 * a) ** 3 - b * c / (6.0 * a * a) + d / (2.0 * a)
    radicand = b * b / (3.0 * a) ** 2 - c / (3.0 * a)
    p1 = math.nan
    if radicand > 0.0:
        u = math.copysign(math.sqrt(radicand), v if v != 0.0 else 1.0)
        ratio = min(1.0, max(-1.0, v / u**3))
        w = (math.pi + math.acos(ratio)) / 3.0
        p1 = 2.0 * u * math.cos(w) - b / (3.0 * a)
    if math.isfinite(p1) and lo1 - 1e-9 <= p1 <= hi1 + 1e-9:
        p1 = min(hi1, max(lo1, p1))
        # a few Newton steps on the cubic recover the digits acos loses near a
        # (nearly) repeated root; a step is kept only if it shrinks the residual
        for _ in range(4):
            f = ((a * p1 + b) * p1 + c) * p1 + d
            df = (3.0 * a * p1 + 2.0 * b) * p1 + c
            if f == 0.0 or df == 0.0:
                break
            q = min(hi1, max(lo1, p1 - f / df))
            if abs(((a * q + b) * q + c) * q + d) >= abs(f):
                break
            p1 = q
        return p1, p1 - delta0
    return _restricted_mle_numeric(x1, n1, x2, n2, delta0)


def _restricted_mle_numeric(x1: int, n1: int, x2: int, n2: int, delta0: float) -> tuple[float, float]:
    """The same restricted MLE by bounded 1-D maximisation; the closed form's safety net.

    Brent's bounded search never evaluates the end points, where the maximum lies when
    a group is all successes or all failures, so those are compared as well.
    """
    lo1, hi1 = max(0.0, delta0), min(1.0, 1.0 + delta0)

    def negloglik(q1: float) -> float:
        total = 0.0
        for x, n, q in ((x1, n1, q1), (x2, n2, q1 - delta0)):
            q = min(1.0 - 1e-15, max(1e-15, q))
            total += x * math.log(q) + (n - x) * math.log1p(-q)
        return -total

    res = optimize.minimize_scalar(negloglik, bounds=(lo1, hi1), method="bounded", options={"xatol": 1e-12})
    p1 = float(min((float(res.x), lo1, hi1), key=negloglik))
    return p1, p1 - delta0


@dataclass(frozen=True, slots=True)
class MNTest:
    """One-sided Miettinen-Nurminen test of ``H0: p1 - p2 <= delta0``."""

    z: float
    p_value: float
    diff: float
    p1_restricted: float
    p2_restricted: float


def miettinen_nurminen_test(x1: int, n1: int, x2: int, n2: int, delta0: float = CLIFF_MARGIN) -> MNTest:
    """One-sided score test of ``H0: p1 - p2 <= delta0`` against ``p1 - p2 > delta0``.

    This is the paper's G1a statistic (Appendix H, formula in Appendix I): group 1 is
    the low-stress cell, group 2 the high-stress one, and rejecting H0 says the drop
    is larger than the margin ``delta0 = 0.30``, not merely non-zero. The statistic::

        z = (p1_hat - p2_hat - delta0) / sqrt(V),
        V = [p1~(1 - p1~)/n1 + p2~(1 - p2~)/n2] * N / (N - 1),   N = n1 + n2

    uses the restricted MLE ``(p1~, p2~)`` under ``p1 - p2 = delta0`` (the boundary of
    H0) rather than the observed rates. Why: at the grid's edge cells (100/100 vs
    0/100) the observed-rate (Wald) variance is zero and the z would be infinite; the
    restricted variance is not. ``N/(N-1)`` is Miettinen and Nurminen's (1985)
    correction that makes V unbiased; the paper's Appendix I formula omits it.

    The p-value is ``1 - Phi(z)``. With ``delta0 = 0`` and all outcomes identical the
    restricted variance is zero and the statistic undefined: z and p_value are NaN.
    """
    for name, val in (("x1", x1), ("n1", n1), ("x2", x2), ("n2", n2)):
        if int(val) != val:
            raise ValueError(f"{name} must be an integer")
    x1, n1, x2, n2 = int(x1), int(n1), int(x2), int(n2)
    if n1 < 1 or n2 < 1 or not (0 <= x1 <= n1 and 0 <= x2 <= n2):
        raise ValueError("need n >= 1 and 0 <= x <= n in both groups")
    if not -1.0 < delta0 < 1.0:
        raise ValueError("delta0 must lie strictly between -1 and 1")
    p1t, p2t = _restricted_mle(x1, n1, x2, n2, float(delta0))
    total = n1 + n2
    var = (p1t * (1.0 - p1t) / n1 + p2t * (1.0 - p2t) / n2) * total / (total - 1.0)
    diff = x1 / n1 - x2 / n2
    if var <= 0.0:
        return MNTest(math.nan, math.nan, diff, p1t, p2t)
    z = (diff - delta0) / math.sqrt(var)
    return MNTest(float(z), float(special.ndtr(-z)), diff, p1t, p2t)
