"""Figure 10 on the absolute step: the per-step hazard, its constant-rate expectation and
the calibrated test of a rising hazard (analysis/hazard.py, seqbench.first_violation_by_length,
calibration/figure10.py)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

from horizonbench.analysis import hazard
from horizonbench.analysis.seqbench import first_violation_by_length
from horizonbench.calibration import run_case
from horizonbench.calibration.figure10 import RELATIVE_SHIFT, RISING_HAZARD, constant_hazards, simulate

attempt = st.integers(1, 12).flatmap(
    lambda L: st.tuples(st.just(L), st.one_of(st.none(), st.integers(0, L + 3)))
)


@settings(max_examples=80, deadline=None)
@given(st.lists(attempt, min_size=1, max_size=30))
def test_at_risk_against_a_loop(items: list[tuple[int, int | None]]) -> None:
    L = np.array([x for x, _ in items], dtype=float)
    k = np.array([math.nan if s is None else s for _, s in items])
    risk = hazard.at_risk(L, k)
    top = int(L.max())
    n, d = np.zeros(top), np.zeros(top)
    for length, step in items:
        # a violation at or past L: the plan stayed legal for L steps (censored there)
        last = step if step is not None and step < length else length - 1
        n[: last + 1] += 1
        if step is not None and step < length:
            d[step] += 1
    assert risk.n.tolist() == n.tolist() and risk.d.tolist() == d.tolist()


def _brute_loglik(params: np.ndarray, L: np.ndarray, k: np.ndarray) -> float:
    a, b = params
    total = 0.0
    for length, step in zip(L, k, strict=True):
        event = np.isfinite(step) and step < length
        last = int(step) if event else int(length) - 1
        for i in range(last + 1):
            h = 1.0 / (1.0 + math.exp(-(a + b * i / hazard.STEP_UNIT)))
            total += math.log(h) if (event and i == last) else math.log1p(-h)
    return total


def test_trend_is_the_maximum_likelihood_fit_of_the_expanded_data() -> None:
    rng = np.random.default_rng(5)
    L = rng.integers(3, 25, size=60).astype(float)
    k = np.where(rng.random(60) < 0.6, rng.integers(0, 25, size=60), np.nan)
    t = hazard.hazard_trend(L, k)
    res = minimize(lambda p: -_brute_loglik(p, L, k), x0=[-2.0, 0.0], method="Nelder-Mead",
                   options={"xatol": 1e-8, "fatol": 1e-10, "maxiter": 4000})  # fmt: skip
    assert t.slope == pytest.approx(res.x[1], abs=1e-3)
    risk = hazard.at_risk(L, k)
    assert t.eps == pytest.approx(risk.d.sum() / risk.n.sum())
    best = -res.fun
    # each end of the interval is where the profile likelihood drops by chi2(1)/2
    for end in (t.slope_low, t.slope_high):
        prof = minimize(lambda a, end=end: -_brute_loglik(np.array([a[0], end]), L, k), x0=[res.x[0]],
                        method="Nelder-Mead", options={"xatol": 1e-9, "fatol": 1e-11})  # fmt: skip
        assert best + prof.fun == pytest.approx(3.841458820694124 / 2, abs=1e-3)
    assert t.slope_low < t.slope < t.slope_high


def test_trend_undefined_without_events_or_without_survivors() -> None:
    none_failed = hazard.hazard_trend(np.array([5.0, 7.0]), np.array([np.nan, np.nan]))
    assert none_failed.eps == 0.0 and math.isnan(none_failed.slope_low) and not none_failed.rising
    all_at_zero = hazard.hazard_trend(np.array([5.0, 7.0]), np.array([0.0, 0.0]))
    assert all_at_zero.eps == 1.0 and math.isnan(all_at_zero.slope)
    empty = hazard.hazard_trend(np.array([]), np.array([]))
    assert empty.attempts == 0 and math.isnan(empty.eps)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(1, 30), min_size=1, max_size=8),
    st.floats(0.01, 0.6),
)
def test_expected_first_step_against_enumeration(lengths: list[int], eps: float) -> None:
    """The mixture of truncated geometrics, enumerated attempt by attempt."""
    mass: dict[int, float] = {}
    for L in lengths:
        for k in range(L):
            mass[k] = mass.get(k, 0.0) + eps * (1 - eps) ** k
    total = sum(mass.values())
    mean = sum(k * m for k, m in mass.items()) / total
    got_mean, (q25, q50, q75) = hazard.expected_first_step(np.array(lengths, float), eps)
    assert got_mean == pytest.approx(mean)
    for q, got in ((0.25, q25), (0.5, q50), (0.75, q75)):
        cdf, want = 0.0, None
        for k in sorted(mass):
            cdf += mass[k] / total
            if cdf >= q - 1e-12:
                want = k
                break
        assert got == want


def test_constant_rate_expected_step_is_flat_in_L_while_the_relative_one_falls() -> None:
    """The issue's point: under a constant rate the absolute median stays put once L is
    well past 1/eps, while median / L keeps falling."""
    medians = [hazard.expected_first_step(np.array([L], float), 0.1)[1][1] for L in (40, 80, 160)]
    assert medians[0] == medians[1] == medians[2] == 6.0  # ln 2 / -ln 0.9 = 6.6 -> step 6
    assert medians[0] / 40 > medians[2] / 160


def test_figure10_table_has_the_absolute_step_and_its_expectation() -> None:
    rng = np.random.default_rng(11)
    scores = simulate(rng, constant_hazards(), 600)
    out = first_violation_by_length(scores, groups=4)
    assert len(out) == 4
    located = scores[scores["first_violation_step"].notna()]
    assert out["first_violation_step_median"].iloc[0] == pytest.approx(
        located.loc[located["solution_length"] <= out["L_high"].iloc[0], "first_violation_step"].median()
    )
    # the constant-rate curve sits near the observed one for a constant-rate model
    assert np.allclose(out["expected_step_median"], out["first_violation_step_median"], atol=3.0)
    assert out["constant_eps"].nunique() == 1 and out["constant_eps"].iloc[0] == pytest.approx(0.04, rel=0.2)
    assert not (out["hazard_slope_low"] > 0).any()


def test_a_failure_without_a_located_step_is_left_out_of_the_test() -> None:
    base = pd.DataFrame(
        {
            "model": "m",
            "solution_length": [10, 10, 10, 10, 20, 20],
            "success": [False, False, True, True, False, True],
            "first_violation_step": [2.0, 5.0, np.nan, np.nan, 7.0, np.nan],
        }
    )
    unlocated = pd.concat(
        [
            base,
            pd.DataFrame(
                {
                    "model": ["m"],
                    "solution_length": [20],
                    "success": [False],
                    "first_violation_step": [np.nan],
                }
            ),
        ],  # fmt: skip
        ignore_index=True,
    )
    cols = ["constant_eps", "hazard_slope", "hazard_slope_low", "hazard_slope_high"]
    pd.testing.assert_frame_equal(
        first_violation_by_length(base, groups=1)[cols], first_violation_by_length(unlocated, groups=1)[cols]
    )


def test_calibration_rising_hazard_found_constant_not() -> None:
    """The suite's Figure 10 case, small: at full size (200 studies, scale 1) it measured
    detection 0.995 and false positives 0.015 (see calibration/figure10.py)."""
    result = run_case(RISING_HAZARD, n_studies=60, seed=0, scale=0.5)
    planted, null = result.arm("planted"), result.arm("null")
    assert planted.rate >= 0.8, planted
    assert null.rate <= 0.05, null
    assert planted.undefined == null.undefined == 0


def test_calibration_relative_shift_shows_in_its_own_null() -> None:
    """The old reading of Figure 10: the relative median falls with L under a constant
    rate most of the time (full size: 0.93), so it cannot tell a rising hazard apart."""
    result = run_case(RELATIVE_SHIFT, n_studies=40, seed=0, scale=0.5)
    assert result.arm("null").rate >= 0.6


def _maze_study(rows: list[dict], truth: object, seed: int, samples: int = 8) -> pd.DataFrame:
    from horizonbench.datasets.maze import MazeFamily

    fam = MazeFamily()
    out = []
    for r in rows:
        for k in range(samples):
            rng = np.random.default_rng([seed, r["seed"] % 2**32, k])
            s = fam.score(r, fam.parse_answer(fam.offline_answer(r, "noisy", rng, truth)))
            out.append(
                {
                    "model": "m",
                    "solution_length": r["solution_length"],
                    "num_keys": r["num_keys"],
                    "success": s.success,
                    "progress_ratio": s.progress_ratio,
                    "first_violation_step": np.nan
                    if s.first_violation_step is None
                    else s.first_violation_step,
                }
            )
    return pd.DataFrame(out)


def test_through_real_maze_scoring_constant_rate_is_not_flagged_and_rising_is() -> None:
    """The noisy maze baseline (constant eps) and its rising kind, scored by the maze's
    simulator. The maze locates a skipped key pickup at the locked door, later than the
    mistake; read on first_violation_step that delay alone flagged 16 of 100 constant-rate
    studies (measured), so the test reads the first deviation (progress_ratio * L)."""
    from horizonbench.core.hazard import PlantedTruth
    from horizonbench.datasets.maze import MazeFamily, MazeParams

    params = MazeParams(grid_rows=8, grid_cols=8, num_keys=2, num_keys_mode="at_most")
    rows = [r for s in range(80) if (r := MazeFamily().generate_candidate(params, s, s).row)]
    flagged = 0
    for seed in range(40):
        out = first_violation_by_length(_maze_study(rows, 0.05, 1000 + seed))
        flagged += bool(out["hazard_slope_low"].iloc[0] > 0)
    # 2 of 100 at this design (measured), 1 of these 40; on first_violation_step, 6 of 40
    assert flagged <= 2, flagged
    rising = PlantedTruth(eps=0.02, shape="linear", rate=0.08, cap=0.9)
    for seed in range(5):
        out = first_violation_by_length(_maze_study(rows, rising, 2000 + seed))
        assert out["hazard_slope_low"].iloc[0] > 0


def test_figure10_draws_the_step_axis_the_expectation_and_marks_a_rising_hazard() -> None:
    from horizonbench.calibration.figure10 import rising_hazards
    from horizonbench.reports.seqbench_plots import first_violation_by_length_svg

    rng = np.random.default_rng(2)
    flat = simulate(rng, constant_hazards(), 400).assign(model="flat")
    rising = simulate(rng, rising_hazards(), 400).assign(model="rises")
    table = first_violation_by_length(pd.concat([flat, rising], ignore_index=True))
    svg = first_violation_by_length_svg(table)
    assert "first violation step" in svg and "constant-rate expectation" in svg
    assert "rises (rising)" in svg and "flat (rising)" not in svg
    old = table.drop(columns=["expected_step_median"])
    assert "run the analyse stage again" in first_violation_by_length_svg(old)


def test_the_analyse_stage_reads_every_column_figure10_and_by_n_use() -> None:
    """The analyse task reads a subset of the scores columns; the maze's deviation rule
    needs num_keys and progress_ratio, by_n needs best_progress."""
    from horizonbench.tasks.analyse.scores import SCORE_COLUMNS_READ

    assert {"num_keys", "progress_ratio", "first_violation_step", "success"} <= SCORE_COLUMNS_READ
    assert "best_progress" in SCORE_COLUMNS_READ


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 40), st.one_of(st.none(), st.integers(0, 45))),
        min_size=1,
        max_size=30,
    )
)
def test_trend_fits_degenerate_data_without_overflow(items: list[tuple[int, int | None]]) -> None:
    """Smoke runs feed the fit a handful of attempts (every failure at one step, none at
    all): the logistic must not overflow on its way to an infinite intercept."""
    lengths = np.array([L for L, _ in items], dtype=float)
    first = np.array([np.nan if k is None else k for _, k in items], dtype=float)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        hazard.hazard_trend(lengths, first)
