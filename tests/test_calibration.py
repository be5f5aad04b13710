"""Small versions of the calibration suite (issue 22): each case over a few seeded studies,
with bounds loose enough for the small numbers and tight enough to fail on a broken
statistic (the full figures come from ``benchmarks/calibration.py``)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from horizonbench.analysis import compare as cmp
from horizonbench.analysis import trajectory
from horizonbench.calibration import (
    Case,
    Target,
    Trial,
    base,
    decay_cases,
    load_cases,
    register,
    results_table,
    run_case,
    study_rngs,
    world_cases,
)
from horizonbench.calibration.base import verdict

CASES = load_cases()


def _arm(name: str, arm: str, studies: int, scale: float = 1.0, seed: int = 0):
    return run_case(CASES[name], n_studies=studies, seed=seed, scale=scale).arm(arm)


# ---------------------------------------------------------------------------
# the contract
# ---------------------------------------------------------------------------


def test_the_registry_holds_a_case_per_analysis_output():
    names = set(CASES)
    for expected in (
        "L0 coverage",
        "eps coverage (plan test design)",
        "sc* coverage (step)",
        "transition found (Definition 1 + MN test; W_trans)",
        "collapse-type shares",
        "compare moved (2x L0)",
    ):
        assert expected in names
    assert any(n.startswith("lag tau_W - tau_A") for n in names)


def test_a_case_registered_twice_is_refused():
    case = Case("twice", "s", "p", "n", "coverage", lambda rng, scale: Trial(True))
    register(case)
    try:
        register(case)  # the same object again is fine
        with pytest.raises(ValueError, match="twice"):
            register(Case("twice", "s", "p", "n", "coverage", lambda rng, scale: Trial(True)))
    finally:
        base._REGISTRY.pop("twice")


def test_run_case_is_deterministic_and_counts_undefined_studies_as_misses():
    def study(rng: np.random.Generator, scale: float) -> Trial:
        u = rng.random()
        return Trial(None if u < 0.1 else bool(u < 0.9), {"u": u})

    case = Case("coin", "s", "p", "n", "coverage", study, null_study=study)
    first, again = run_case(case, 300, seed=3), run_case(case, 300, seed=3)
    assert results_table([first]) == results_table([again])
    arm = first.arm("planted")
    assert arm.hits + arm.undefined <= arm.studies == 300 and arm.undefined > 0
    assert arm.rate == arm.hits / 300 and arm.low < arm.rate < arm.high
    assert 0.75 < arm.rate < 0.85 and 0.45 < arm.values["u"] < 0.55
    # the arms draw from their own seeds: same study, other numbers
    assert first.arm("null").hits != arm.hits or first.arm("null").values != arm.values


def test_verdicts():
    band = Target(0.90, 0.98)
    assert verdict(0.95, 0.9, 0.99, band) == "pass"
    assert verdict(0.80, 0.75, 0.85, band) == "fail"
    assert verdict(0.88, 0.83, 0.92, band) == "unclear"
    assert verdict(0.10, 0.0, 1.0, Target(report_only=True)) == "report"
    assert verdict(math.nan, math.nan, math.nan, band) == "fail"


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**40), st.integers(1, 20))
def test_study_seeds_are_sha256_keyed_and_distinct(seed, n):
    a = [g.integers(2**62) for g in study_rngs("case", "planted", n, seed)]
    b = [g.integers(2**62) for g in study_rngs("case", "planted", n, seed)]
    c = [g.integers(2**62) for g in study_rngs("case", "null", n, seed)]
    assert a == b and len(set(a)) == n and a != c


# ---------------------------------------------------------------------------
# the simulators
# ---------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32), st.integers(10, 30), st.integers(0, 8))
def test_a_trace_fails_where_it_was_planted(seed, action_at, lag):
    rng = np.random.default_rng(seed)
    R, valid, consistent = world_cases.trace(rng, action_at - lag, action_at)
    assert trajectory.tau_a(valid) == action_at
    assert (R[: action_at - lag] >= world_cases.R_HEALTHY[0]).all()
    assert (R[action_at - lag :] <= world_cases.R_FAILED[1]).all()
    assert not consistent[action_at - lag :].any() and consistent[: action_at - lag].all()
    # the trailing-window tau_W sees the drop within the window, never before it
    tw = trajectory.tau_w(R)
    assert tw is not None and action_at - lag <= tw <= action_at - lag + trajectory.TAU_W_WINDOW - 1
    # ... and tau_w_onset dates the drop itself
    assert trajectory.tau_w_onset(R) == action_at - lag


def test_tau_w_onset_examples():
    assert trajectory.tau_w_onset([1.0] * 10) is None
    assert trajectory.tau_w_onset([0.9, 0.9, 0.9, 0.1, 0.1, 0.1, 0.1]) == 3  # tau_w is 5
    assert trajectory.tau_w(np.array([0.9, 0.9, 0.9, 0.1, 0.1, 0.1, 0.1])) == 5
    assert trajectory.tau_w_onset([0.2, 0.9]) == 0  # low from the start: tau_w is 0 already
    # a shallow drop takes the whole window to detect: tau_w 4 steps late, the onset not
    R = [1.0] * 6 + [0.4] * 6
    assert trajectory.tau_w(R) == 10 and trajectory.tau_w_onset(R) == 6
    # never earlier than the window that fired
    assert trajectory.tau_w_onset([0.4] * 12) == 0 and trajectory.tau_w_onset([0.9] * 5 + [0.45] * 10) == 5


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**32), st.floats(0.0, 0.2))
def test_the_decay_simulator_plants_its_rate(seed, eps):
    frame = decay_cases.simulate_decay(np.random.default_rng(seed), eps, 0.5)
    assert set(frame["solution_length"]) == set(decay_cases.L0_LENGTHS.tolist())
    per_instance = frame.groupby("instance_id")["solution_length"].agg(["nunique", "size"])
    assert (per_instance["nunique"] == 1).all() and (per_instance["size"] == decay_cases.L0_SAMPLES).all()
    if eps == 0.0:
        assert frame["success"].all()


# ---------------------------------------------------------------------------
# the cases, small
# ---------------------------------------------------------------------------


def test_l0_interval_covers_and_no_decay_is_not_claimed():
    planted = _arm("L0 coverage", "planted", 8, scale=0.25)
    assert planted.hits >= 6, planted  # 95% nominal; a zero-width or 5/95 interval misses more
    for method in ("binomial_mle", "wls_prefactor", "wls_origin"):
        assert abs(planted.values[f"{method}_rel_bias"]) < 0.25, method


def test_wls_forms_which_one_is_biased():
    """decay.py's docstring: on exp(-L/L0) both WLS forms are near the truth; with a
    prefactor the origin form is biased low; at eps 0.1 the dropped zero-success bins
    bias the prefactor form far more than the origin form (12 studies each, seed 0)."""
    pure = _arm("WLS forms (exp(-L/L0), eps 0.02)", "planted", 12).values
    assert abs(pure["wls_prefactor_rel_bias"]) < 0.1 and abs(pure["wls_origin_rel_bias"]) < 0.1
    prefactor = _arm("WLS forms (prefactor 0.7, eps 0.02)", "planted", 12)
    assert prefactor.values["wls_origin_rel_bias"] < -0.12  # truth: -0.2 over 200 studies
    assert abs(prefactor.values["wls_prefactor_rel_bias"]) < 0.1
    assert prefactor.hits <= 4
    steep = _arm("WLS forms (exp(-L/L0), eps 0.1)", "planted", 12)
    assert steep.values["wls_prefactor_rel_bias"] > steep.values["wls_origin_rel_bias"] + 0.25
    assert steep.hits >= 9
    assert _arm("L0 coverage", "null", 4, scale=0.25).hits <= 1


def test_eps_likelihood_ratio_interval_covers():
    """200 cheap studies (seed 0): 0.935 covered; an interval built on the chi-square
    quantile instead of its half covers 0.98 of them (about 99% nominal)."""
    arm = _arm("eps coverage (plan test design)", "planted", 200)
    assert 0.88 <= arm.rate <= 0.97, arm
    assert abs(arm.values["rel_error"]) < 0.05


def test_sc_star_interval_covers_a_step_between_all_1_and_all_0_cells():
    """Resampling episodes within cells gave 0.665 here (zero-width intervals)."""
    arm = _arm("sc* coverage (step)", "planted", 60)
    assert arm.rate >= 0.85, arm
    assert arm.values["zero_width"] == 0.0


def test_sc_star_covers_on_a_sharp_curve_and_claims_no_crossing_without_one():
    assert _arm("sc* coverage (sharp)", "planted", 40).rate >= 0.85
    assert _arm("sc* coverage (sharp)", "null", 40).hits == 0


def test_a_planted_transition_is_found_and_a_crossover_is_not():
    name = "transition found (Definition 1 + MN test; W_trans)"
    planted, null = _arm(name, "planted", 12), _arm(name, "null", 12)
    assert planted.rate >= 0.7 and planted.values["w_trans"] <= 1.5
    assert null.hits <= 1 and null.values["w_trans"] >= 3


def _pairs_of_nights(rng: np.random.Generator, pairs: int, factor: float) -> pd.DataFrame:
    """Fits of two nights per model at the level compare reads: log L0 estimates normal
    around the truth with a standard error that differs per model and night, each with its
    95% interval; night 1's true L0 is ``factor`` times night 0's."""
    rows = []
    for i in range(pairs):
        for night, truth in enumerate((30.0, 30.0 * factor)):
            se = rng.uniform(0.1, 0.3)
            est = math.log(truth) + se * rng.standard_normal()
            rows.append(
                {
                    "run": f"night-{night}", "family": "maze", "setting_id": "s", "setting": "maze",
                    "model": f"m{i}", "model_spec": "", "method": "binomial_mle",
                    "success_definition": "simulation", "L0": math.exp(est),
                    "L0_low": math.exp(est - 1.96 * se), "L0_high": math.exp(est + 1.96 * se),
                    "n_attempts": 100, "converged": True, "note": None,
                }
            )  # fmt: skip
    return pd.DataFrame(rows)


def _runs() -> pd.DataFrame:
    return cmp.order_runs(
        pd.DataFrame(
            [
                {"run": f"night-{i}", "run_path": "", "position": i, "started_at": f"2026-01-0{i + 1}",
                 "finished_at": None, "run_name": "n", "seed": 0, "git_sha": None, "horizonbench": "x"}
                for i in range(2)
            ]
        )
    )  # fmt: skip


def test_compare_flags_about_5_percent_of_unchanged_pairs_and_most_doubled_l0():
    """At the level of the fits (calibrated normal intervals on log L0) the old rule, this
    night's point outside the previous interval, flags P(|Z| > 1.96 / sqrt 2) ~ 1/6 of pairs
    with no change; the two-sample rule 5%."""
    rng = np.random.default_rng(22)
    same = cmp.compare_fits(_runs(), _pairs_of_nights(rng, 600, 1.0)).dropna(subset=["moved"])
    assert len(same) == 600
    flagged = float((same["moved"] != "within").mean())
    assert 0.025 <= flagged <= 0.075, flagged
    outside = ((same["L0"] > same["previous_L0_high"]) | (same["L0"] < same["previous_L0_low"])).mean()
    assert 0.12 <= outside <= 0.22  # what the old rule flagged
    doubled = cmp.compare_fits(_runs(), _pairs_of_nights(rng, 300, 2.0)).dropna(subset=["moved"])
    assert (doubled["moved"] == "up").mean() >= 0.6 and (doubled["moved"] == "down").sum() == 0


def test_compare_case_end_to_end_on_simulated_nights():
    """The registered case (fit_all on simulated attempts, then compare_fits), a few studies."""
    name = "compare moved (2x L0, small nights)"
    assert _arm(name, "null", 3).hits <= 1
    assert _arm(name, "planted", 2).hits == 2


def test_the_lag_tables_onset_interval_covers_the_planted_lag_and_tau_w_reads_late():
    name = next(n for n in CASES if n.startswith("lag tau_W - tau_A"))
    planted = _arm(name, "planted", 40)
    assert planted.rate >= 0.8  # the lags table's onset t interval covers the mean lag
    assert abs(planted.values["onset_mean_lag"] + world_cases.PLANTED_LAG) < 0.3
    # the paper's tau_W: its trailing 5-step mean needs 2-3 failed steps to fall below 1/2
    assert -4.0 < planted.values["mean_lag"] < -1.0
    assert 1.5 < planted.values["detection_delay"] < 3.5
    assert planted.values["tau_w_covered"] < 0.2
    null = _arm(name, "null", 40)
    assert null.hits <= 4  # an onset interval entirely below 0 under lag 0
    assert null.values["mean_lag"] > 0  # tau_W alone reads a simultaneous failure as action first
    assert abs(null.values["onset_mean_lag"]) < 0.3


def test_collapse_type_shares_are_recovered_and_slips_are_no_collapse():
    planted = _arm("collapse-type shares", "planted", 30, scale=0.5)
    assert planted.rate >= 0.7
    for kind, share in world_cases.SHARES.items():
        assert abs(planted.values[f"share_{kind}"] - share) < 0.05
    assert _arm("collapse-type shares", "null", 30, scale=0.5).hits == 0


_positive = st.floats(0.5, 500.0, allow_nan=False)


@settings(max_examples=80, deadline=None)
@given(_positive, _positive, _positive, _positive, _positive, _positive)
def test_the_moved_rule_is_symmetric_in_the_two_nights(a, a_lo, a_hi, b, b_lo, b_hi):
    """Swapping the nights swaps up and down (the rule uses the same two facing half-widths
    either way), and disjoint intervals always move (the test is never stricter than
    disjointness)."""
    a_lo, a_hi = min(a, a_lo), max(a, a_hi)
    b_lo, b_hi = min(b, b_lo), max(b, b_hi)
    forward = cmp.judge_move(b, b_lo, b_hi, a, a_lo, a_hi)
    backward = cmp.judge_move(a, a_lo, a_hi, b, b_lo, b_hi)
    assert {forward, backward} in ({"within"}, {"up", "down"})
    if forward == "up":
        assert b > a and backward == "down"
    if cmp._disjoint(b_lo, b_hi, a_lo, a_hi):
        assert forward != "within"  # disjoint intervals always move


def test_budget_stops_counted_as_failures_keep_the_rate_honest():
    """The issue's scripted agent: true success 0.5, most failures stopped by the budget.
    Leaving the stops out read about 0.83; counting them as failures covers 0.5."""
    name = "success with budget stops (p vs p_finished)"
    planted, old = _arm(name, "planted", 40), _arm(name, "null", 40)
    assert planted.rate >= 0.85 and abs(planted.values["rate"] - 0.5) < 0.05
    assert old.rate <= 0.15 and old.values["rate"] > 0.75
