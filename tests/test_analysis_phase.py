"""Phase-diagram statistics: checked against the paper's tables and independent computations.

Paper: "World-Model Collapse as a Phase Transition" (/work/shared/papers/003_*.txt).
Tables used as inputs: Table 2 (claude-haiku-4-5 confirmatory grid, n = 100 per cell),
Table 3 (gpt-4o-mini cells with their n), Table 4 (ablation rates), Table 6 (SC-Fine scan
with successes and n). Tables used as outputs: 5 (Cliff's delta), 9 (sc*), 10 (Cohen's h),
Appendix J (W_trans).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import optimize, stats

from horizonbench.analysis.effect_sizes import (
    benjamini_hochberg,
    bonferroni,
    cliffs_delta,
    cliffs_delta_label,
    cohens_h,
    cohens_h_label,
    hodges_lehmann,
    holm,
    mann_whitney,
)
from horizonbench.analysis.phase import (
    abrupt_transition,
    cliffs,
    critical_point,
    critical_point_bootstrap,
    phase_grid,
    w_trans,
    wilson_interval,
)
from horizonbench.analysis.risk_difference import (
    _restricted_mle,
    _restricted_mle_numeric,
    miettinen_nurminen_test,
)
from horizonbench.analysis.trajectory import (
    COLLAPSE_TYPES,
    bad_steps,
    collapse_onset,
    collapse_type,
    dependency_correct,
    lag,
    lag_distribution,
    tau_a,
    tau_w,
)

# --------------------------------------------------------------------------------------
# the paper's tables as data
# --------------------------------------------------------------------------------------

#: Table 6, SC-Fine at dd = 1 for claude-haiku-4-5: sc -> (successes, n)
TABLE6 = {
    10: (100, 100),
    11: (50, 50),
    12: (50, 50),
    13: (39, 50),
    14: (26, 50),
    15: (1, 78),
    16: (1, 50),
    17: (3, 50),
    18: (0, 50),
    19: (0, 50),
    20: (0, 100),
}
#: the p-hat column of Table 6 as printed
TABLE6_P = [1.000, 1.000, 1.000, 0.780, 0.520, 0.013, 0.020, 0.060, 0.000, 0.000, 0.000]

#: Table 2, claude-haiku-4-5 confirmatory grid, n = 100 per cell: (sc, dd) -> p
TABLE2 = {
    (sc, dd): p
    for sc, row in {
        5: [1.00, 1.00, 1.00, 1.00],
        10: [1.00, 1.00, 0.72, 0.20],
        20: [0.00, 0.00, 0.00, 0.00],
        40: [0.00, 0.00, 0.00, 0.00],
    }.items()
    for dd, p in zip([1, 2, 4, 6], row, strict=True)
}
#: Table 3, gpt-4o-mini: (sc, dd) -> (n, p); successes = round(n p) gives the printed p
TABLE3 = {
    (5, 1): (100, 0.990),
    (5, 2): (100, 1.000),
    (5, 4): (100, 0.970),
    (5, 6): (100, 0.980),
    (10, 1): (100, 0.920),
    (10, 2): (100, 0.680),
    (10, 4): (100, 0.640),
    (10, 6): (100, 0.580),
    (20, 1): (125, 0.464),
    (20, 2): (146, 0.089),
    (20, 4): (114, 0.000),
    (20, 6): (100, 0.000),
}


def _episodes(model: str, cells: dict[tuple[int, int], tuple[int, int]]) -> pd.DataFrame:
    """One row per episode from {(sc, dd): (successes, n)}."""
    rows = []
    for (sc, dd), (k, n) in cells.items():
        rows += [{"model": model, "sc": sc, "dd": dd, "success": i < k} for i in range(n)]
    return pd.DataFrame(rows)


def _table2_episodes() -> pd.DataFrame:
    return _episodes("haiku", {key: (round(p * 100), 100) for key, p in TABLE2.items()})


def _table3_episodes() -> pd.DataFrame:
    return _episodes("mini", {key: (round(p * n), n) for key, (n, p) in TABLE3.items()})


def _table6_episodes() -> pd.DataFrame:
    return _episodes("haiku", {(sc, 1): kn for sc, kn in TABLE6.items()})


def _binary(successes: int, n: int) -> np.ndarray:
    return np.array([1.0] * successes + [0.0] * (n - successes))


# --------------------------------------------------------------------------------------
# Wilson interval
# --------------------------------------------------------------------------------------


def test_wilson_closed_form_at_zero_successes() -> None:
    """For x = 0 the upper Wilson bound is z^2 / (n + z^2): 0.2775 for n = 10 at 95%."""
    z2 = stats.norm.ppf(0.975) ** 2
    low, high = wilson_interval(0, 10)
    assert low == 0.0
    assert high == pytest.approx(z2 / (10 + z2), abs=1e-12)
    assert high == pytest.approx(0.2775, abs=1e-4)
    low, high = wilson_interval(10, 10)
    assert high == 1.0 and low == pytest.approx(1 - z2 / (10 + z2), abs=1e-12)


@pytest.mark.parametrize(("x", "n", "conf"), [(26, 50, 0.95), (1, 78, 0.95), (39, 50, 0.9), (7, 13, 0.99)])
def test_wilson_endpoints_solve_the_score_equation(x: int, n: int, conf: float) -> None:
    """Independent computation: the bounds are the roots of (phat - p)^2 = z^2 p (1 - p) / n."""
    z = stats.norm.ppf(0.5 + conf / 2)
    phat = x / n

    def score(p: float) -> float:
        return (phat - p) ** 2 - z * z * p * (1 - p) / n

    lo_root = optimize.brentq(score, 1e-15, phat) if x > 0 else 0.0
    hi_root = optimize.brentq(score, phat, 1 - 1e-15) if x < n else 1.0
    low, high = wilson_interval(x, n, conf)
    assert low == pytest.approx(lo_root, abs=1e-10)
    assert high == pytest.approx(hi_root, abs=1e-10)


def test_wilson_vectorised_matches_scalar_and_handles_empty_cells() -> None:
    x = np.array([0, 3, 26, 50, 0])
    n = np.array([10, 20, 50, 50, 0])
    low, high = wilson_interval(x, n)
    for i in range(4):
        assert (low[i], high[i]) == pytest.approx(wilson_interval(int(x[i]), int(n[i])))
    assert math.isnan(low[4]) and math.isnan(high[4])
    with pytest.raises(ValueError):
        wilson_interval(5, 4)
    with pytest.raises(ValueError):
        wilson_interval(1, 4, conf=1.0)


@given(st.integers(1, 500).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))), st.floats(0.5, 0.999))
def test_wilson_contains_phat_and_stays_in_unit_interval(xn: tuple[int, int], conf: float) -> None:
    x, n = xn
    low, high = wilson_interval(x, n, conf)
    assert 0.0 <= low <= x / n <= high <= 1.0
    wider_low, wider_high = wilson_interval(x, n, min(0.9999, conf + 0.0005))
    assert wider_low <= low + 1e-12 and wider_high >= high - 1e-12


# --------------------------------------------------------------------------------------
# phase grid
# --------------------------------------------------------------------------------------


def test_phase_grid_reproduces_table6_rates() -> None:
    grid = phase_grid(_table6_episodes())
    assert list(grid.columns) == ["model", "sc", "dd", "n", "successes", "p", "wilson_low", "wilson_high"]
    assert grid["sc"].tolist() == list(TABLE6)
    assert grid["n"].tolist() == [n for _, n in TABLE6.values()]
    assert grid["successes"].tolist() == [k for k, _ in TABLE6.values()]
    assert np.round(grid["p"].to_numpy(), 3).tolist() == TABLE6_P
    low, high = wilson_interval(grid["successes"].to_numpy(), grid["n"].to_numpy())
    np.testing.assert_allclose(grid["wilson_low"], low)
    np.testing.assert_allclose(grid["wilson_high"], high)
    # the cell deciding the crossing, 26/50, cannot be told apart from 1/2
    row14 = grid.set_index("sc").loc[14]
    assert row14["wilson_low"] < 0.5 < row14["wilson_high"]


def test_phase_grid_separates_models_and_dd_and_refuses_missing_outcomes() -> None:
    episodes = pd.concat([_table2_episodes(), _table3_episodes()], ignore_index=True)
    grid = phase_grid(episodes)
    assert len(grid) == 16 + 12
    cell = grid[(grid["model"] == "mini") & (grid["sc"] == 20) & (grid["dd"] == 1)].iloc[0]
    assert (cell["n"], cell["successes"]) == (125, 58) and cell["p"] == pytest.approx(0.464)
    bad = episodes.head(3).copy()
    bad["success"] = [True, None, False]
    with pytest.raises(ValueError):
        phase_grid(bad)
    with pytest.raises(ValueError):
        phase_grid(episodes.drop(columns="dd"))


# --------------------------------------------------------------------------------------
# critical point
# --------------------------------------------------------------------------------------


def test_critical_point_table6_is_14_04_not_13_5() -> None:
    """The definition s* = inf{s : p(s) <= 1/2} on Table 6's numbers gives 14.04.

    p(14) = 26/50 = 0.52 > 1/2, so the crossing is bracketed by 14 and 15 (not by 13 and
    14 as the caption says) and interpolates to 14 + 0.02/0.507 = 14.04, which is also
    Table 9's readout. The text's "sc* ~ 13.5" would need p(14) <= 1/2 (0.22 exactly for
    the interpolation to land on 13.5); we pin the definition, not the prose.
    """
    cp = critical_point(list(TABLE6), [k / n for k, n in TABLE6.values()])
    assert round(cp.value, 2) == 14.04
    assert cp.bracket == (14.0, 15.0) and cp.reason is None and cp.note is None
    assert float(cp) == cp.value
    # using the printed (rounded) p-hat column changes nothing at two decimals
    assert round(critical_point(list(TABLE6), TABLE6_P).value, 2) == 14.04
    # what the text's 13.5 would require
    p_needed = list(TABLE6_P)
    p_needed[4] = 0.22
    assert critical_point(list(TABLE6), p_needed).value == pytest.approx(13.5)


def test_critical_point_table9_other_models() -> None:
    """Table 9: gpt-4o-mini 18.94 is not reproduced from Table 3; GPT-4o 15.56 is.

    gpt-4o-mini's dd = 1 cells in Table 3 are 0.92 (sc = 10) and 58/125 = 0.464
    (sc = 20), which interpolate to 19.21, not 18.94. 18.94 follows if p(20, 1) = 0.45,
    the value that Table 10's Cohen's h for the same cell also implies (see the Cohen's h
    test). We pin 19.21. GPT-4o has no success table; Table 10's h = 0.00 against haiku's
    1.00 at (10, 1) and h = -0.64 against haiku's 0.00 at (20, 1) imply 1.00 and 0.10,
    from which the definition gives Table 9's 15.56. Llama-3 70B is "below the tested
    range" (Table 9: < 10); Table 10 implies p(10, 1) = 0.20, so the curve starts below.
    """
    mini = critical_point([5, 10, 20], [0.99, 0.92, 58 / 125])
    assert round(mini.value, 2) == 19.21 and mini.bracket == (10.0, 20.0)
    assert round(critical_point([5, 10, 20], [0.99, 0.92, 0.45]).value, 2) == 18.94
    assert round(critical_point([10, 20], [1.0, 0.10]).value, 2) == 15.56
    llama = critical_point([10, 20], [0.20, 0.0])
    assert math.isnan(llama.value) and llama.reason.startswith("starts below")


def test_critical_point_edge_cases() -> None:
    never = critical_point([5, 10], [1.0, 0.9])
    assert math.isnan(never.value) and never.reason.startswith("never crosses")
    assert math.isnan(critical_point([], []).value)
    # a cell exactly at 1/2 is the crossing itself
    assert critical_point([1, 2, 3], [0.9, 0.5, 0.1]).value == 2.0
    # unsorted input is sorted first
    assert critical_point([15, 13, 14], [1 / 78, 0.78, 0.52]).value == pytest.approx(14.0394, abs=1e-4)
    # a later recovery above 1/2 does not move the first crossing but is flagged
    cp = critical_point([1, 2, 3, 4], [0.9, 0.3, 0.7, 0.1])
    assert cp.value == pytest.approx(1 + 0.4 / 0.6) and "non-monotone" in cp.note
    with pytest.raises(ValueError):
        critical_point([1, 1, 2], [0.9, 0.8, 0.1])
    with pytest.raises(ValueError):
        critical_point([1, 2], [0.9, 1.2])


_curve = st.lists(
    st.tuples(st.integers(-50, 50), st.floats(0.0, 1.0, allow_nan=False)), min_size=2, max_size=12
).map(lambda cells: sorted(dict(cells).items()))


@given(_curve)
def test_critical_point_lies_in_its_bracket(cells) -> None:
    s = [c[0] for c in cells]
    p = [c[1] for c in cells]
    cp = critical_point(s, p)
    below = [i for i, v in enumerate(p) if v <= 0.5]
    if not below or below[0] == 0:
        assert math.isnan(cp.value) and cp.reason
        return
    j = below[0]
    assert cp.bracket == (s[j - 1], s[j])
    assert s[j - 1] < cp.value <= s[j]
    assert p[j - 1] > 0.5 >= p[j]


@given(_curve, st.floats(0.1, 10.0), st.floats(-100.0, 100.0))
def test_critical_point_commutes_with_increasing_affine_maps_of_sc(cells, a: float, b: float) -> None:
    s = np.array([c[0] for c in cells], dtype=float)
    p = [c[1] for c in cells]
    base = critical_point(s, p)
    moved = critical_point(a * s + b, p)
    if math.isnan(base.value):
        assert math.isnan(moved.value)
    else:
        assert moved.value == pytest.approx(a * base.value + b, abs=1e-9)


@given(_curve)
def test_critical_point_bracket_is_invariant_under_monotone_transforms(cells) -> None:
    """Increasing maps of sc move s* only inside the mapped bracket; increasing maps of p
    that fix 1/2 leave the bracket unchanged (only the interpolation weight moves)."""
    s = np.array([c[0] for c in cells], dtype=float)
    p = np.array([c[1] for c in cells])
    base = critical_point(s, p)
    assume(not math.isnan(base.value))
    f_s = np.exp(s / 20.0)
    moved = critical_point(f_s, p)
    lo, hi = base.bracket
    assert math.exp(lo / 20) < moved.value <= math.exp(hi / 20) * (1 + 1e-12)
    g_p = np.where(p > 0.5, 0.5 + (p - 0.5) ** 3 * 4, 0.5 - np.abs(0.5 - p) ** 0.5 / 2**0.5)
    assert critical_point(s, g_p).bracket == base.bracket


def test_bootstrap_on_table6_is_deterministic_and_brackets_the_readout() -> None:
    episodes = _table6_episodes()
    first = critical_point_bootstrap(episodes, n_boot=400, seed=7)
    again = critical_point_bootstrap(episodes, n_boot=400, seed=7)
    assert first == again
    assert round(first.sc_star, 2) == 14.04
    # sc = 12 is 50/50 and sc = 15 is 1/78 in every replicate, so the crossing stays
    # within [12, 15]; 26/50 straddles 1/2, so the interval reaches below 14
    assert 12.0 <= first.low < 14.0 < first.sc_star < first.high <= 15.0
    other = critical_point_bootstrap(episodes, n_boot=400, seed=8)
    assert other.sc_star == first.sc_star and (other.low, other.high) != (first.low, first.high)


def test_bootstrap_keeps_unbracketed_replicates_as_infinite_bounds() -> None:
    """A curve ending at 0.52 never crosses in about half the replicates: the upper bound
    is +inf (beyond the scan), not a number made up from the bracketed half."""
    episodes = _episodes("m", {(10, 1): (50, 50), (11, 1): (26, 50)})
    est = critical_point_bootstrap(episodes, n_boot=300, seed=1)
    assert math.isnan(est.sc_star) and est.high == math.inf and 10 < est.low < 11
    with pytest.raises(ValueError):
        critical_point_bootstrap(_table2_episodes(), n_boot=10)  # several dd at once


def test_bootstrap_interval_is_at_the_2_5_and_97_5_percentiles() -> None:
    """The interval's *level*, not only its order: on a curve whose replicate crossings
    have a known distribution, the bounds are its 2.5% and 97.5% percentiles.

    Each replicate draws a cell's rate from its Jeffreys posterior Beta(x + 1/2, n - x + 1/2).
    sc = 1 is 20,000/20,000 (its draws stay within 1e-4 of 1, moving the crossing by less
    than 1e-4); sc = 2 is 13/46, so a replicate's crossing is the increasing
    ``g(P) = 1 + 0.5 / (1 - P)`` of P ~ Beta(13.5, 33.5) (``+inf`` once P > 1/2, which has
    probability 0.0014). So the bounds are g at the Beta's 2.5% and 97.5% quantiles; the 5%
    and 95% ones lie 0.012 and 0.034 away in g, about 10 standard errors of a
    20,000-replicate percentile (0.001 in g at the low end), so the check does not hang on
    the seed."""
    n, k, n_boot = 46, 13, 20_000
    post = stats.beta(k + 0.5, n - k + 0.5)

    def g(p: float) -> float:
        return 1.0 + 0.5 / (1.0 - p)

    lo95, hi95 = g(post.ppf(0.025)), g(post.ppf(0.975))
    lo90, hi90 = g(post.ppf(0.05)), g(post.ppf(0.95))
    assert lo90 - lo95 > 0.012 and hi95 - hi90 > 0.03  # the test tells the levels apart
    episodes = _episodes("m", {(1, 1): (20_000, 20_000), (2, 1): (k, n)})
    est = critical_point_bootstrap(episodes, n_boot=n_boot, seed=3)
    assert est.sc_star == pytest.approx(g(k / n))
    assert est.low == pytest.approx(lo95, abs=0.004) and est.high == pytest.approx(hi95, abs=0.01)
    narrower = critical_point_bootstrap(episodes, n_boot=n_boot, seed=3, conf=0.90)
    assert narrower.low == pytest.approx(lo90, abs=0.004) and narrower.high == pytest.approx(hi90, abs=0.01)


def test_bootstrap_interval_of_a_step_between_all_1_and_all_0_cells_has_width() -> None:
    """Issue 22: cells of 50/50 and 0/50 around the crossing never vary when episodes are
    resampled, which gave sc* the zero-width interval [14.5, 14.5]. The interval must have
    the width those n allow (the Jeffreys draws: about 14.47 to 14.53)."""
    episodes = _episodes("m", {(13, 1): (50, 50), (14, 1): (50, 50), (15, 1): (0, 50), (16, 1): (0, 50)})
    est = critical_point_bootstrap(episodes, n_boot=2000, seed=0)
    assert est.sc_star == pytest.approx(14.5)
    assert est.low < 14.49 and est.high > 14.51
    assert 14.0 < est.low and est.high < 15.0


# --------------------------------------------------------------------------------------
# cliffs, Definition 1, W_trans
# --------------------------------------------------------------------------------------


def test_cliffs_on_table2() -> None:
    grid = phase_grid(_table2_episodes())
    pairs = cliffs(grid).set_index(["dd", "sc_from"])
    assert len(pairs) == 4 * 3
    assert pairs.loc[(1, 10), "drop"] == pytest.approx(1.0) and pairs.loc[(1, 10), "meets_margin"]
    assert pairs.loc[(4, 5), "drop"] == pytest.approx(0.28) and not pairs.loc[(4, 5), "meets_margin"]
    assert pairs.loc[(4, 10), "drop"] == pytest.approx(0.72) and pairs.loc[(4, 10), "meets_margin"]
    assert pairs.loc[(6, 5), "drop"] == pytest.approx(0.80) and pairs.loc[(6, 5), "meets_margin"]
    assert pairs.loc[(6, 10), "drop"] == pytest.approx(0.20) and not pairs.loc[(6, 10), "meets_margin"]
    assert pairs["plateau_exists"].all() and pairs["floor_exists"].all()
    assert pairs["abrupt"].equals(pairs["meets_margin"])
    # G1a: the Miettinen-Nurminen test of drop > 0.30 at alpha = 0.01 (Appendix H)
    assert pairs.loc[(1, 10), "mn_p"] < 0.01 and pairs.loc[(4, 10), "mn_p"] < 0.01
    assert pairs.loc[(6, 10), "mn_p"] > 0.5  # a 0.20 drop is below the margin
    assert pairs.loc[(1, 5), "drop"] == 0.0
    summary = abrupt_transition(grid).iloc[0]
    assert summary["abrupt"] and summary["max_drop"] == pytest.approx(1.0) and summary["n_cliffs"] == 4


def test_definition1_needs_plateau_and_floor() -> None:
    grid = pd.DataFrame(
        {"model": "m", "sc": [5, 10, 20], "dd": 1, "p": [0.95, 0.60, 0.40]}
    )  # a 0.35 drop, plateau present, but no cell at or below 0.30
    pairs = cliffs(grid)
    assert pairs["meets_margin"].tolist() == [True, False]
    assert not pairs["floor_exists"].any() and not pairs["abrupt"].any()
    assert pairs["mn_z"].isna().all()  # no counts in the grid, no test
    assert cliffs(grid, alpha=0.40)["abrupt"].tolist() == [True, False]
    assert not abrupt_transition(grid).iloc[0]["abrupt"]
    mini = cliffs(phase_grid(_table3_episodes()))
    assert mini["abrupt"].any()  # gpt-4o-mini: the same geometry, shifted (Section 5.2)


def test_w_trans_table2_is_empty_band() -> None:
    """Appendix J: "the doubled confirmatory grid assigns no cell to the middle band"."""
    out = w_trans(phase_grid(_table2_episodes()))
    assert out["dd"].tolist() == [1, 2, 4, 6]
    assert out["w_trans"].tolist() == [0, 0, 0, 0]


def test_w_trans_sc_fine_has_one_band_cell_not_two() -> None:
    """Not reproduced: Appendix J says SC-Fine resolves the d = 1 band "into the two
    integer locations sc = 13 and sc = 14", but p(13) = 39/50 = 0.78 lies outside the
    paper's own band [0.30, 0.70]; only sc = 14 (0.52) is inside. We pin W_trans = 1."""
    out = w_trans(phase_grid(_table6_episodes())).iloc[0]
    assert out["w_trans"] == 1 and out["sc_in_band"] == (14,)
    # the paper's two cells would need the band to reach 0.78
    assert w_trans(phase_grid(_table6_episodes()), high=0.80).iloc[0]["sc_in_band"] == (13, 14)


def test_w_trans_band_is_closed() -> None:
    grid = pd.DataFrame({"model": "m", "sc": [1, 2, 3, 4], "dd": 1, "p": [0.7, 0.3, 21 / 70, 0.2999]})
    assert w_trans(grid).iloc[0]["sc_in_band"] == (1, 2, 3)


# --------------------------------------------------------------------------------------
# Miettinen-Nurminen
# --------------------------------------------------------------------------------------


def _mn_brute_force(x1: int, n1: int, x2: int, n2: int, delta0: float) -> tuple[float, float]:
    """Independent MN z: restricted MLE by numerical maximisation over p2, then the formula."""

    def negloglik(p2: float) -> float:
        p1 = p2 + delta0
        terms = []
        for x, n, q in ((x1, n1, p1), (x2, n2, p2)):
            q = min(max(q, 1e-300), 1 - 1e-16)
            terms.append(x * math.log(q) + (n - x) * math.log(1 - q))
        return -sum(terms)

    lo, hi = max(0.0, -delta0), min(1.0, 1.0 - delta0)
    inner = optimize.minimize_scalar(negloglik, bounds=(lo, hi), method="bounded", options={"xatol": 1e-13}).x
    # Brent's bounded search never evaluates the end points, where the maximum sits when
    # a group is all successes or all failures
    p2 = min((inner, lo, hi), key=negloglik)
    p1 = p2 + delta0
    big_n = n1 + n2
    var = (p1 * (1 - p1) / n1 + p2 * (1 - p2) / n2) * big_n / (big_n - 1)
    return (x1 / n1 - x2 / n2 - delta0) / math.sqrt(var), p2


@pytest.mark.parametrize(
    ("x1", "n1", "x2", "n2", "delta0"),
    [
        (100, 100, 0, 100, 0.30),
        (72, 100, 0, 100, 0.30),
        (20, 100, 0, 100, 0.30),
        (39, 50, 1, 78, 0.30),
        (26, 50, 1, 78, 0.30),
        (0, 10, 10, 10, 0.30),
        (5, 7, 3, 40, -0.20),
        (12, 30, 12, 30, 0.0),
        (1, 3, 2, 5, 0.6),
        (45, 60, 20, 90, 0.1),
    ],
)
def test_mn_matches_numerical_restricted_mle(x1: int, n1: int, x2: int, n2: int, delta0: float) -> None:
    res = miettinen_nurminen_test(x1, n1, x2, n2, delta0)
    z, p2 = _mn_brute_force(x1, n1, x2, n2, delta0)
    assert res.p2_restricted == pytest.approx(p2, abs=1e-6)
    assert res.p1_restricted - res.p2_restricted == pytest.approx(delta0)
    assert res.z == pytest.approx(z, rel=1e-6, abs=1e-6)
    assert res.p_value == pytest.approx(stats.norm.sf(z), rel=1e-6, abs=1e-12)


@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 150).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
    st.integers(1, 150).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
    # margins like 1e-100 make the restricted variance underflow; they mean nothing here
    st.floats(-0.9, 0.9).filter(lambda d: d == 0.0 or abs(d) > 1e-6),
)
def test_mn_matches_numerical_restricted_mle_random(g1, g2, delta0: float) -> None:
    (x1, n1), (x2, n2) = g1, g2
    res = miettinen_nurminen_test(x1, n1, x2, n2, delta0)
    if math.isnan(res.z):  # undefined only at delta0 = 0 with identical outcomes
        assert delta0 == 0.0 and x1 + x2 in (0, n1 + n2)
        return
    z, p2 = _mn_brute_force(x1, n1, x2, n2, delta0)
    assert res.p2_restricted == pytest.approx(p2, abs=1e-5)
    assert res.z == pytest.approx(z, rel=1e-5, abs=1e-5)


@pytest.mark.parametrize(
    ("x1", "n1", "x2", "n2", "delta0"),
    [(39, 50, 1, 78, 0.3), (0, 50, 15, 15, -0.3), (100, 100, 0, 100, 0.3), (3, 9, 7, 8, -0.5)],
)
def test_mn_numeric_safety_net_agrees_with_the_closed_form(x1, n1, x2, n2, delta0) -> None:
    """The bounded-search fallback (used only if the closed form fails) gives the same MLE."""
    closed = _restricted_mle(x1, n1, x2, n2, delta0)
    numeric = _restricted_mle_numeric(x1, n1, x2, n2, delta0)
    assert numeric == pytest.approx(closed, abs=1e-6)


def test_mn_with_zero_margin_is_the_pearson_chi_square() -> None:
    """Textbook identity: at delta0 = 0 the restricted MLE is the pooled rate, so
    z^2 = Pearson X^2 (no continuity correction) times (N - 1) / N."""
    for x1, n1, x2, n2 in [(30, 50, 20, 50), (7, 19, 15, 23), (1, 40, 9, 35)]:
        table = np.array([[x1, n1 - x1], [x2, n2 - x2]])
        chi2 = stats.chi2_contingency(table, correction=False)[0]
        res = miettinen_nurminen_test(x1, n1, x2, n2, 0.0)
        assert res.z**2 == pytest.approx(chi2 * (n1 + n2 - 1) / (n1 + n2), rel=1e-9)
        pooled = (x1 + x2) / (n1 + n2)
        assert res.p1_restricted == pytest.approx(pooled) and res.p2_restricted == pytest.approx(pooled)


def test_mn_symmetries_and_degenerate_cases() -> None:
    base = miettinen_nurminen_test(39, 50, 1, 78, 0.3)
    # relabelling successes as failures and swapping the groups keeps p1 - p2
    swapped = miettinen_nurminen_test(78 - 1, 78, 50 - 39, 50, 0.3)
    assert swapped.z == pytest.approx(base.z, rel=1e-9)
    # swapping the groups and the sign of the margin flips the statistic
    mirrored = miettinen_nurminen_test(1, 78, 39, 50, -0.3)
    assert mirrored.z == pytest.approx(-base.z, rel=1e-9)
    # an observed difference equal to the margin: restricted = observed, z = 0
    on_margin = miettinen_nurminen_test(40, 50, 25, 50, 0.3)
    assert on_margin.z == pytest.approx(0.0, abs=1e-9) and on_margin.p_value == pytest.approx(0.5)
    assert on_margin.p1_restricted == pytest.approx(0.8)
    # the edge cells that break a Wald test still give a finite statistic
    assert math.isfinite(miettinen_nurminen_test(100, 100, 0, 100).z)
    undefined = miettinen_nurminen_test(0, 10, 0, 10, 0.0)
    assert math.isnan(undefined.z) and math.isnan(undefined.p_value)
    with pytest.raises(ValueError):
        miettinen_nurminen_test(5, 4, 0, 4)
    with pytest.raises(ValueError):
        miettinen_nurminen_test(1, 4, 0, 4, delta0=1.0)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 60), st.integers(2, 60), st.floats(-0.5, 0.5))
def test_mn_p_value_is_monotone_in_the_counts(n1: int, n2: int, delta0: float) -> None:
    """More successes in group 1 (or fewer in group 2) can only strengthen the evidence."""
    x2 = n2 // 3
    pv = [miettinen_nurminen_test(x1, n1, x2, n2, delta0).p_value for x1 in range(n1 + 1)]
    pv = [v for v in pv if not math.isnan(v)]  # delta0 = 0 with identical outcomes
    assert all(b <= a + 1e-12 for a, b in itertools.pairwise(pv))
    x1 = n1 // 2
    pv2 = [miettinen_nurminen_test(x1, n1, x, n2, delta0).p_value for x in range(n2 + 1)]
    pv2 = [v for v in pv2 if not math.isnan(v)]
    assert all(b >= a - 1e-12 for a, b in itertools.pairwise(pv2))


# --------------------------------------------------------------------------------------
# multiplicity
# --------------------------------------------------------------------------------------


def test_adjusted_p_values_by_hand() -> None:
    p = [0.01, 0.04, 0.03, 0.005]
    np.testing.assert_allclose(bonferroni(p), [0.04, 0.16, 0.12, 0.02])
    # Holm: sorted 0.005*4, 0.01*3, 0.03*2, 0.04*1 -> 0.02, 0.03, 0.06, max(0.04, 0.06)
    np.testing.assert_allclose(holm(p), [0.03, 0.06, 0.06, 0.02])
    # BH: 0.005*4/1, 0.01*4/2, 0.03*4/3, 0.04*4/4 -> 0.02, 0.02, 0.04, 0.04
    np.testing.assert_allclose(benjamini_hochberg(p), [0.02, 0.04, 0.04, 0.02])
    np.testing.assert_allclose(bonferroni([0.3, 0.5]), [0.6, 1.0])
    assert holm([]).size == 0 and benjamini_hochberg([]).size == 0
    with pytest.raises(ValueError):
        holm([0.1, float("nan")])
    with pytest.raises(ValueError):
        benjamini_hochberg([1.2])


def _holm_direct(p: list[float]) -> list[float]:
    """Definition: adjusted p_i = max over j with p_j <= p_i (ties broken by position) of
    min(1, (m - rank_j + 1) p_j)."""
    m = len(p)
    order = sorted(range(m), key=lambda i: (p[i], i))
    rank = {i: r + 1 for r, i in enumerate(order)}
    return [max(min(1.0, (m - rank[j] + 1) * p[j]) for j in range(m) if rank[j] <= rank[i]) for i in range(m)]


def _bh_direct(p: list[float]) -> list[float]:
    m = len(p)
    order = sorted(range(m), key=lambda i: (p[i], i))
    rank = {i: r + 1 for r, i in enumerate(order)}
    return [min(min(1.0, m * p[j] / rank[j]) for j in range(m) if rank[j] >= rank[i]) for i in range(m)]


_pvals = st.lists(st.floats(0.0, 1.0, allow_nan=False), min_size=1, max_size=25)


@given(_pvals)
def test_adjusted_p_values_match_the_direct_formulas(p: list[float]) -> None:
    np.testing.assert_allclose(holm(p), _holm_direct(p), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(benjamini_hochberg(p), _bh_direct(p), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(bonferroni(p), [min(1.0, len(p) * v) for v in p])


@given(_pvals)
def test_adjusted_p_values_properties(p: list[float]) -> None:
    raw = np.asarray(p)
    order = np.argsort(raw, kind="stable")
    for adjust in (bonferroni, holm, benjamini_hochberg):
        adj = adjust(p)
        assert (adj >= raw - 1e-15).all() and (adj <= 1.0).all()
        assert (np.diff(adj[order]) >= -1e-15).all()  # same order as the raw p-values
    assert (benjamini_hochberg(p) <= holm(p) + 1e-15).all()
    assert (holm(p) <= bonferroni(p) + 1e-15).all()


# --------------------------------------------------------------------------------------
# rank tests and effect sizes
# --------------------------------------------------------------------------------------


def test_mann_whitney_textbook_and_direct_count() -> None:
    """Completely separated samples of 3 and 3: U = 0 and exact two-sided p = 2 / C(6, 3)."""
    res = mann_whitney([1, 2, 3], [4, 5, 6])
    assert res.u == 0.0 and res.p_value == pytest.approx(2 / 20)
    a = [0.2, 0.5, 0.5, 0.9, 0.1, 0.7]
    b = [0.5, 0.3, 0.8, 0.05]
    direct = sum((x > y) + 0.5 * (x == y) for x in a for y in b)
    u_ab, p_ab = mann_whitney(a, b)
    u_ba, p_ba = mann_whitney(b, a)
    assert u_ab == direct and u_ab + u_ba == len(a) * len(b)
    assert p_ab == pytest.approx(p_ba)
    one_sided = mann_whitney(a, b, alternative="greater")
    assert one_sided.p_value == pytest.approx(stats.mannwhitneyu(a, b, alternative="greater").pvalue)
    with pytest.raises(ValueError):
        mann_whitney([], [1.0])


def test_hodges_lehmann_against_pairwise_median() -> None:
    a = [0.2, 0.5, 0.5, 0.9, 0.1, 0.7]
    b = [0.5, 0.3, 0.8, 0.05]
    diffs = sorted(x - y for x in a for y in b)
    assert hodges_lehmann(a, b) == pytest.approx((diffs[11] + diffs[12]) / 2)
    assert hodges_lehmann(b, a) == pytest.approx(-hodges_lehmann(a, b))
    assert hodges_lehmann(np.asarray(b) + 0.25, b) == pytest.approx(0.25)


def _cliffs_direct(a, b) -> float:
    return sum((x > y) - (x < y) for x in a for y in b) / (len(a) * len(b))


_samples = st.lists(st.integers(-5, 5) | st.floats(-3, 3, allow_nan=False), min_size=1, max_size=30)


@given(_samples, _samples)
def test_cliffs_delta_matches_direct_count_and_is_antisymmetric(a, b) -> None:
    d = cliffs_delta(a, b)
    assert d == pytest.approx(_cliffs_direct(a, b), abs=1e-12)
    assert -1.0 <= d <= 1.0
    assert cliffs_delta(b, a) == pytest.approx(-d, abs=1e-12)


@given(st.integers(1, 40).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))), st.integers(0, 30))
def test_cliffs_delta_of_binary_outcomes_is_the_rate_difference(xn, x2: int) -> None:
    x1, n1 = xn
    n2 = 30
    assert cliffs_delta(_binary(x1, n1), _binary(x2, n2)) == pytest.approx(x1 / n1 - x2 / n2, abs=1e-12)


#: Table 4 rates (n = 25 per ablation cell, as Table 7 shows for T = 40 and 80) and the
#: Table 5 deltas and codes: axis -> (base successes, [(level successes, delta, code)])
TABLE5 = {
    "T": (3, [(0, -0.12, "n"), (0, -0.12, "n"), (8, +0.20, "S")]),
    "branching": (5, [(4, -0.04, "n"), (4, -0.04, "n"), (5, 0.00, "n")]),
    "observation": (10, [(0, -0.40, "M"), (3, -0.28, "S"), (4, -0.24, "S")]),
    "mutation": (2, [(8, +0.24, "S"), (6, +0.16, "S"), (2, 0.00, "n")]),
}
_CODES = {"negligible": "n", "small": "S", "medium": "M", "large": "L"}


def test_cliffs_delta_reproduces_table5_from_table4() -> None:
    """Every Cliff's delta and magnitude code of Table 5 follows from Table 4's rates."""
    for base_k, levels in TABLE5.values():
        base = _binary(base_k, 25)
        for k, reported, code in levels:
            d = cliffs_delta(_binary(k, 25), base)
            assert round(d, 2) == pytest.approx(reported)
            assert _CODES[cliffs_delta_label(d)] == code


def test_cohens_h_basics() -> None:
    assert cohens_h(1.0, 0.0) == pytest.approx(math.pi)
    assert cohens_h(0.3, 0.3) == 0.0
    np.testing.assert_allclose(cohens_h([0.1, 0.9], [0.9, 0.1]), [-cohens_h(0.9, 0.1), cohens_h(0.9, 0.1)])
    with pytest.raises(ValueError):
        cohens_h(1.1, 0.5)


#: Table 10: pair -> {cell: (reported h, code)}
TABLE10 = {
    ("haiku", "mini"): {(10, 1): (+0.57, "M"), (10, 6): (-0.80, "L"), (20, 1): (-1.47, "L")},
    ("haiku", "gpt4o"): {(10, 1): (+0.00, "n"), (10, 6): (-1.29, "L"), (20, 1): (-0.64, "M")},
    ("haiku", "llama"): {(10, 1): (+2.21, "L"), (10, 6): (+0.93, "L"), (20, 1): (+0.00, "n")},
    ("mini", "gpt4o"): {(10, 1): (-0.57, "M"), (10, 6): (-0.48, "S"), (20, 1): (+0.83, "L")},
    ("mini", "llama"): {(10, 1): (+1.64, "L"), (10, 6): (+1.73, "L"), (20, 1): (+1.47, "L")},
    ("gpt4o", "llama"): {(10, 1): (+2.21, "L"), (10, 6): (+2.21, "L"), (20, 1): (+0.64, "M")},
}


def test_cohens_h_table10_haiku_mini_from_tables_2_and_3() -> None:
    """haiku - mini is the only Table 10 row whose inputs are all in the paper's tables.

    (10, 1) +0.57 and (10, 6) -0.80 reproduce. (20, 1) does not: Table 3 gives mini
    58/125 = 0.464, so h = 0 - 2 asin(sqrt 0.464) = -1.50, while the reported -1.47 needs
    p = 0.45 (the same value behind Table 9's 18.94). We pin -1.50.
    """
    haiku = {cell: TABLE2[cell] for cell in [(10, 1), (10, 6), (20, 1)]}
    mini = {cell: TABLE3[cell][1] for cell in haiku}
    got = {cell: cohens_h(haiku[cell], mini[cell]) for cell in haiku}
    assert round(got[(10, 1)], 2) == 0.57 and round(got[(10, 6)], 2) == -0.80
    assert round(got[(20, 1)], 2) == -1.50  # paper: -1.47
    assert round(cohens_h(0.0, 0.45), 2) == -1.47
    for cell, h in got.items():
        assert _CODES[cohens_h_label(h)] == TABLE10[("haiku", "mini")][cell][1]


def test_cohens_h_table10_all_pairs_with_inferred_cells() -> None:
    """The GPT-4o and Llama-3 cells appear in no success table. The round rates
    GPT-4o (1.00, 0.80, 0.10) and Llama-3 (0.20, 0.00, 0.00) at (10,1), (10,6), (20,1)
    reproduce all 18 entries and codes of Table 10 provided mini's (20, 1) is 0.45;
    with Table 3's 0.464 the three mini (20, 1) entries come out as -1.50, +0.86 and
    +1.50 instead of -1.47, +0.83, +1.47 (not reproduced; pinned here)."""
    rates = {
        "haiku": {(10, 1): 1.00, (10, 6): 0.20, (20, 1): 0.00},
        "mini": {(10, 1): 0.92, (10, 6): 0.58, (20, 1): 0.45},
        "gpt4o": {(10, 1): 1.00, (10, 6): 0.80, (20, 1): 0.10},
        "llama": {(10, 1): 0.20, (10, 6): 0.00, (20, 1): 0.00},
    }
    for (m1, m2), cells in TABLE10.items():
        for cell, (reported, code) in cells.items():
            h = cohens_h(rates[m1][cell], rates[m2][cell])
            assert round(h, 2) == pytest.approx(reported, abs=1e-9), (m1, m2, cell)
            assert _CODES[cohens_h_label(h)] == code
    rates["mini"][(20, 1)] = 58 / 125
    pinned = [cohens_h(rates[a][(20, 1)], rates[b][(20, 1)]) for a, b in TABLE10 if "mini" in (a, b)]
    assert [round(h, 2) for h in pinned] == [-1.50, 0.86, 1.50]


# --------------------------------------------------------------------------------------
# trajectory metrics
# --------------------------------------------------------------------------------------


def test_tau_w_by_hand() -> None:
    # trailing means at t = 5, 6, 7: 0.8, 0.6, 0.4 -> first below 1/2 at t = 7
    assert tau_w([1, 1, 1, 1, 1, 0, 0, 0]) == 7
    # early steps use the available window: a state wrong from the start fails at t = 0
    assert tau_w([0.2, 0.9, 0.9, 0.9, 0.9, 0.9]) == 0
    # (1 + 0) / 2 = 0.5 is not below 1/2; (1 + 0 + 0) / 3 is
    assert tau_w([1, 0, 0]) == 2
    assert tau_w([1.0] * 10) is None and tau_w([]) is None
    assert tau_w([1, 0.4, 1], h=1) == 1
    with pytest.raises(ValueError):
        tau_w([1.0, float("nan")])


def test_tau_a_and_lag_share_one_step_index() -> None:
    assert tau_a([True, True, False, False]) == 2
    assert tau_a([1, 1, 1]) is None
    # world state and action fail at the same step: lag 0, not the reference code's +-1
    R = [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    valid = [True, True, True, True, False, True, True]
    assert tau_w(R) == 4 and tau_a(valid) == 4 and lag(R, valid) == 0
    # world state first: the available-window mean is 1, 1/2, 1/3 -> below 1/2 at step 2;
    # the first invalid action is step 5
    R2 = [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    valid2 = [True, True, True, True, True, False, True]
    assert tau_w(R2) == 2 and lag(R2, valid2) == 2 - 5
    assert lag([1.0] * 7, valid2) is None
    with pytest.raises(ValueError):
        lag([1.0, 1.0], [True])


@given(st.lists(st.floats(0, 1, allow_nan=False), max_size=30), st.integers(1, 7), st.floats(0.05, 0.95))
def test_tau_w_matches_a_direct_loop(R, h: int, threshold: float) -> None:
    means = [sum(R[max(0, t - h + 1) : t + 1]) / len(R[max(0, t - h + 1) : t + 1]) for t in range(len(R))]
    # a mean within rounding of the threshold may fall either way in either computation
    assume(all(abs(m - threshold) > 1e-9 for m in means))
    expected = next((t for t, m in enumerate(means) if m < threshold), None)
    assert tau_w(R, h, threshold) == expected


def test_tau_w_is_exact_at_the_threshold() -> None:
    """A running-sum implementation turns (1 + x) - 1 into something other than x; a
    window whose mean equals the threshold must not count as below it."""
    x = 0.47454372276379236
    assert tau_w([1.0, x, 0.0], h=1, threshold=x) == 2
    assert tau_w([0.3] * 40 + [0.7] * 40, h=2, threshold=0.5) == 0
    assert tau_w([0.7] * 40 + [0.3, 0.7] * 20, h=2, threshold=0.5) is None


@given(st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=30))
def test_tau_w_with_window_one_is_the_first_low_step_and_never_precedes_it(R) -> None:
    first_low = next((t for t, r in enumerate(R) if r < 0.5), None)
    assert tau_w(R, h=1) == first_low
    wide = tau_w(R, h=5)
    if wide is not None:
        assert first_low is not None and wide >= first_low  # a mean below 1/2 needs a low step


@given(st.lists(st.booleans(), max_size=30))
def test_tau_a_is_the_first_false(valid) -> None:
    assert tau_a(valid) == (valid.index(False) if False in valid else None)


@given(st.lists(st.booleans(), max_size=30), st.integers(1, 6), st.integers(0, 4))
def test_collapse_onset_matches_a_direct_scan(bad, k: int, extra: int) -> None:
    window = k + extra
    bare = next((t for t in range(len(bad)) if sum(bad[t : t + window]) >= k), None)
    anchored = next((t for t in range(len(bad)) if bad[t] and sum(bad[t : t + window]) >= k), None)
    assert collapse_onset(bad, k, window, require_bad_start=False) == bare
    assert collapse_onset(bad, k, window) == anchored
    if bare is not None:  # anchoring only skips the window's leading good steps
        assert anchored == bare + bad[bare:].index(True)
        assert anchored - bare < window


def test_collapse_onset_by_hand() -> None:
    assert collapse_onset([0, 1, 0, 1, 0, 1, 0]) == 1  # steps 1..5 hold three bad steps
    assert collapse_onset([1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1]) is None  # isolated slips
    # a burst at the very end; the bare forward-looking rule would date it at step 4,
    # two steps before the first error
    assert collapse_onset([0, 0, 0, 0, 0, 0, 1, 1, 1]) == 6
    assert collapse_onset([0, 0, 0, 0, 0, 0, 1, 1, 1], require_bad_start=False) == 4
    with pytest.raises(ValueError):
        collapse_onset([1, 1], k=6, window=5)


def test_collapse_type_rule() -> None:
    no = [False] * 8
    world = [False, True, True, True, False, False, False, False]
    action = [False, False, True, False, True, True, False, False]
    assert collapse_type(world, no, no) == "world_state"
    assert collapse_type(no, world, no) == "action_validity"
    assert collapse_type(no, no, world) == "self_check"
    assert collapse_type(no, no, no) is None
    assert collapse_type(world, world) == "compound"
    # union onset at 1 (steps 1-5); world reaches 3 bad steps alone, action too -> compound
    assert collapse_type(world, action) == "compound"
    # world has 3 bad steps in the window, action only one -> world_state
    action_once = [False, False, False, False, True, False, False, False]
    assert collapse_type(world, action_once) == "world_state"
    # neither reaches 3 alone but together they collapse -> compound
    w2 = [False, True, False, False, True, False, False, False]
    a2 = [False, False, True, False, False, False, False, False]
    assert collapse_onset(np.array(w2) | np.array(a2)) == 1
    assert collapse_type(w2, a2) == "compound"
    # an onset from another bad-step definition can be passed in
    assert collapse_type(no, action_once, onset=3) == "action_validity"
    assert collapse_type(no, no, onset=3) is None
    assert set(COLLAPSE_TYPES) == {"world_state", "action_validity", "self_check", "compound"}
    with pytest.raises(ValueError):
        collapse_type([True], [True, False])


def test_dependency_correct_compares_required_with_required() -> None:
    """The reference code compared the declared required set with the *missing*
    preconditions, so a fully correct declaration failed whenever nothing was missing."""
    gold_required = {"door_open", "holding_key"}
    assert dependency_correct(["holding_key", "door_open"], gold_required)
    assert not dependency_correct(["holding_key"], gold_required)
    np.testing.assert_array_equal(
        bad_steps([True, False, True, True], [True, True, False, True], [True, True, True, False]),
        [False, True, True, True],
    )


def test_lag_distribution() -> None:
    episodes = pd.DataFrame(
        {
            "success": [False, False, False, False, False, True, False],
            "tau_w": [3, 5, 4, np.nan, 2, 1, 7],
            "tau_a": [5, 5, 6, 4, np.nan, 3, 6],
        }
    )
    out = lag_distribution(episodes)
    # paired failed episodes: lags -2, 0, -2, +1 (the successful one is ignored)
    assert out["n_episodes"] == 7 and out["n_failed"] == 6 and out["count"] == 4
    assert out["median"] == -1.0 and out["mean"] == pytest.approx(-0.75)
    assert out["share_world_first"] == 0.5
    assert out["share_simultaneous"] == 0.25 and out["share_action_first"] == 0.25
    empty = lag_distribution(episodes[episodes["success"]])
    assert empty["count"] == 0 and math.isnan(empty["median"])
