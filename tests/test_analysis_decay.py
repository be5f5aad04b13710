"""The decay fits recover known laws and degrade gracefully on degenerate data."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from horizonbench.analysis import summary
from horizonbench.analysis.decay import (
    A_NOTE_ABOVE,
    DEFAULT_SUCCESS_DEFINITION,
    SUCCESS_DEFINITIONS,
    DecayFit,
    _interval_from_rates,
    fit_binomial_mle,
    fit_wls_origin,
    fit_wls_prefactor,
)
from horizonbench.schemas.tables import ANALYSIS_SCHEMAS, SCORES_SCHEMA

EPS = 0.02
TRUE_L0 = 1.0 / -math.log(1.0 - EPS)  # about 49.5


def _simulate(seed: int = 1, instances: int = 1500, samples: int = 2):
    """Noisy-baseline attempts: each step fails independently with probability EPS."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(10, 121, size=instances)
    L = np.repeat(lengths, samples)
    cluster = np.repeat(np.arange(instances), samples)
    success = rng.random(L.size) < (1.0 - EPS) ** L
    return L, success, cluster


def _binned(L: np.ndarray, success: np.ndarray, width: int):
    bins = L // width * width
    keys = np.unique(bins)
    x = np.array([L[bins == k].mean() for k in keys])
    rate = np.array([success[bins == k].mean() for k in keys])
    n = np.array([(bins == k).sum() for k in keys])
    return x, rate, n


def test_binomial_mle_recovers_l0() -> None:
    L, success, cluster = _simulate()
    fit = fit_binomial_mle(L, success, cluster, bootstrap=50, seed=3)
    assert fit.method == "binomial_mle" and fit.converged
    assert fit.L0 == pytest.approx(TRUE_L0, rel=0.15)
    assert fit.L0_low is not None and fit.L0_high is not None
    assert fit.L0_low < fit.L0 < fit.L0_high
    assert fit.n_attempts == L.size and 0 < fit.A <= 1


def test_wls_recovers_l0_with_wide_bins() -> None:
    L, success, _ = _simulate()
    x, rate, n = _binned(L, success, width=10)
    assert (rate > 0).all(), "bins must be wide enough to have no zero rates"
    fit = fit_wls_prefactor(x, rate, n)
    assert fit.method == "wls_prefactor" and fit.converged
    assert fit.L0 == pytest.approx(TRUE_L0, rel=0.15)
    assert fit.n_bins_dropped == 0 and fit.n_bins_used == len(x)
    assert fit.n_attempts == L.size


def test_wls_drops_zero_bins_and_says_so() -> None:
    L = np.arange(1.0, 8.0)
    rate = np.exp(-L / 3.0)
    rate[[2, 5]] = 0.0
    fit = fit_wls_prefactor(L, rate)
    assert fit.n_bins_dropped == 2 and fit.n_bins_used == 5
    assert fit.note is not None and "zero successes" in fit.note
    assert fit.L0 == pytest.approx(3.0, rel=1e-6)


@pytest.mark.parametrize(
    ("L", "success", "expected"),
    [
        ([10, 20, 30, 40], [1, 1, 1, 1], math.inf),
        ([10, 20, 30, 40], [0, 0, 0, 0], math.nan),
        ([25, 25, 25], [1, 0, 1], math.nan),
        ([], [], math.nan),
    ],
    ids=["all-successes", "all-failures", "single-bin", "empty"],
)
def test_degenerate_attempts_do_not_raise(L, success, expected) -> None:
    mle = fit_binomial_mle(np.array(L), np.array(success, dtype=bool), bootstrap=10)
    assert isinstance(mle, DecayFit) and mle.note
    if math.isnan(expected):
        assert math.isnan(mle.L0)
    else:
        assert mle.L0 == expected

    rates = np.array(success, dtype=float)
    wls = fit_wls_prefactor(np.array(L, dtype=float), rates)
    assert isinstance(wls, DecayFit) and wls.note
    if math.isnan(expected):
        assert math.isnan(wls.L0)
    else:
        assert wls.L0 == expected


def test_increasing_success_is_no_decay() -> None:
    fit = fit_wls_prefactor(np.array([1.0, 2.0, 3.0]), np.array([0.2, 0.4, 0.8]))
    assert fit.L0 == math.inf and "does not decay" in (fit.note or "")


def test_rising_wls_fit_is_a_level_within_the_data_not_below_it() -> None:
    """Issue 25 review: a rising line's intercept made the flat L0 = inf curve lie
    below every bin (demo noisy-2pct: A = 0.23 under bins >= 0.33); A is now the
    slope-0 level, which lies between the lowest and highest bin."""
    rates = np.array([0.33, 0.4, 0.5, 0.6])
    fit = fit_wls_prefactor(np.array([2.0, 4.0, 6.0, 8.0]), rates)
    assert fit.L0 == math.inf and fit.note is not None and fit.note.startswith("no decay")
    assert rates.min() <= fit.A <= rates.max()


def test_prefactor_above_certainty_is_noted() -> None:
    """A > 1 (P(0) above certainty, demo rising-1pct: 6.25) is flagged in the note."""
    fit = fit_wls_prefactor(np.array([10.0, 20.0, 30.0]), np.array([0.9, 0.4, 0.15]))
    assert fit.A > 1 and "above certainty" in (fit.note or "")
    plain = fit_wls_prefactor(np.array([10.0, 20.0, 30.0]), np.array([0.5, 0.25, 0.125]))
    assert plain.A <= 1 and plain.note is None
    # a prefactor just above 1 is the scatter of a pure decay, not worth a note
    near = fit_wls_prefactor(np.array([10.0, 20.0, 30.0]), 1.05 * np.array([0.5, 0.25, 0.125]))
    assert 1 < near.A <= A_NOTE_ABOVE and near.note is None


def test_bootstrap_is_deterministic_given_seed() -> None:
    L, success, cluster = _simulate(seed=5, instances=300)
    a = fit_binomial_mle(L, success, cluster, bootstrap=30, seed=11)
    b = fit_binomial_mle(L, success, cluster, bootstrap=30, seed=11)
    c = fit_binomial_mle(L, success, cluster, bootstrap=30, seed=12)
    assert a == b
    assert (a.L0_low, a.L0_high) != (c.L0_low, c.L0_high)
    assert a.L0 == c.L0  # the point estimate does not depend on the bootstrap


def test_cluster_bootstrap_is_wider_for_correlated_samples() -> None:
    """Duplicated samples carry no new information; resampling instances must see that."""
    L, success, _ = _simulate(seed=7, instances=400, samples=1)
    L4, s4 = np.repeat(L, 4), np.repeat(success, 4)
    clusters = np.repeat(np.arange(L.size), 4)
    by_instance = fit_binomial_mle(L4, s4, clusters, bootstrap=60, seed=0)
    naive = fit_binomial_mle(L4, s4, None, bootstrap=60, seed=0)
    assert (by_instance.L0_high - by_instance.L0_low) > 1.5 * (naive.L0_high - naive.L0_low)


def test_bad_arguments_raise() -> None:
    with pytest.raises(ValueError):
        fit_binomial_mle(np.array([1, 2]), np.array([1]))
    with pytest.raises(ValueError):
        fit_binomial_mle(np.array([1, 2]), np.array([1, 0]), confidence=1.5)


@settings(max_examples=60, deadline=None)
@given(
    L0=st.floats(min_value=2.0, max_value=500.0),
    A=st.floats(min_value=0.05, max_value=1.0),
    lengths=st.lists(st.integers(min_value=1, max_value=150), min_size=2, max_size=40, unique=True),
)
def test_wls_recovers_exact_law(L0: float, A: float, lengths: list[int]) -> None:
    L = np.array(sorted(lengths), dtype=float)
    fit = fit_wls_prefactor(L, A * np.exp(-L / L0))
    assert fit.L0 == pytest.approx(L0, rel=1e-6)
    assert fit.A == pytest.approx(A, rel=1e-6)
    assert fit.n_bins_dropped == 0


@settings(max_examples=60, deadline=None)
@given(
    L0=st.floats(min_value=2.0, max_value=500.0),
    lengths=st.lists(st.integers(min_value=1, max_value=150), min_size=1, max_size=40, unique=True),
)
def test_wls_origin_recovers_exact_law_through_the_origin(L0: float, lengths: list[int]) -> None:
    """exp(-L/L0) alone: the origin form finds L0 with A = 1, from a single bin too."""
    L = np.array(sorted(lengths), dtype=float)
    fit = fit_wls_origin(L, np.exp(-L / L0))
    assert fit.method == "wls_origin" and fit.converged
    assert fit.L0 == pytest.approx(L0, rel=1e-6) and fit.A == 1.0


def test_the_two_wls_forms_part_when_there_is_a_prefactor() -> None:
    """0.7 exp(-L/20): the prefactor form finds 20 and 0.7; the origin form, which
    assumes A = 1, must tilt its line to reach the lowered rates and comes out short."""
    L = np.arange(5.0, 100.0, 5.0)
    rate = 0.7 * np.exp(-L / 20.0)
    prefactor, origin = fit_wls_prefactor(L, rate), fit_wls_origin(L, rate)
    assert prefactor.method == "wls_prefactor"
    assert prefactor.L0 == pytest.approx(20.0, rel=1e-6) and prefactor.A == pytest.approx(0.7, rel=1e-6)
    assert origin.A == 1.0 and 15.0 < origin.L0 < 19.5


def test_wls_origin_degenerate_inputs_do_not_raise() -> None:
    assert math.isnan(fit_wls_origin(np.array([0.0, 0.0]), np.array([0.5, 0.4])).L0)
    assert math.isnan(fit_wls_origin(np.array([5.0, 9.0]), np.array([0.0, 0.0])).L0)
    no_decay = fit_wls_origin(np.array([5.0, 9.0]), np.array([1.0, 1.0]))
    assert no_decay.L0 == math.inf and "does not decay" in (no_decay.note or "")


def test_success_definitions_name_score_columns() -> None:
    assert set(SUCCESS_DEFINITIONS) == {"simulation", "exact_match"}
    assert DEFAULT_SUCCESS_DEFINITION == "simulation"
    for column, meaning in SUCCESS_DEFINITIONS.values():
        assert SCORES_SCHEMA.field(column).type == "bool" and meaning
    assert "Pass@1" in SUCCESS_DEFINITIONS["exact_match"][1]


def test_estimators_leave_the_success_definition_to_their_caller() -> None:
    L, success, cluster = _simulate(instances=200)
    x, rate, n = _binned(L, success, 10)
    assert fit_wls_prefactor(x, rate, n).success_definition is None
    assert fit_binomial_mle(L, success, cluster, bootstrap=5).success_definition is None


def test_fits_schema_has_every_fit_column() -> None:
    # the fits table written by the analysis keeps every DecayFit field, the success
    # definition included
    assert set(ANALYSIS_SCHEMAS["fits"].names) == {"family", *summary.FIT_COLUMNS}
    assert "success_definition" in summary.FIT_COLUMNS


def test_bootstrap_interval_is_at_the_2_5_and_97_5_percentiles_of_the_rates() -> None:
    """The interval's level, not only low < L0 < high: resampled rates k spread evenly
    over 0..4 in steps of 0.001 (4,001 of them, shuffled) have their 2.5% and 97.5%
    percentiles exactly at k = 0.1 and 3.9, so L0 = 1/k lies in [1/3.9, 10]; 5%/95%
    would give [1/3.8, 5]. Degenerate (NaN) resamples are left out and counted."""
    rates = np.random.default_rng(0).permutation(np.arange(4001) * 0.001)
    low, high, note = _interval_from_rates(rates, 0.95)
    assert low == pytest.approx(1 / 3.9) and high == pytest.approx(1 / 0.1)
    assert note is None
    low, high, _ = _interval_from_rates(rates, 0.90)
    assert low == pytest.approx(1 / 3.8) and high == pytest.approx(1 / 0.2)
    low, high, note = _interval_from_rates(np.concatenate([rates, [np.nan] * 7]), 0.95)
    assert low == pytest.approx(1 / 3.9) and high == pytest.approx(1 / 0.1)
    assert note == "bootstrap: 7 of 4008 resamples were degenerate"


@settings(max_examples=60, deadline=None)
@given(
    start=st.integers(min_value=1, max_value=40),
    step=st.integers(min_value=1, max_value=10),
    levels=st.integers(min_value=2, max_value=12),
    per_level=st.integers(min_value=2, max_value=30),
    mirrored=st.lists(st.integers(min_value=0, max_value=11), min_size=1, max_size=6),
)
def test_failures_spread_evenly_over_l_are_no_decay_not_a_huge_l0(
    start: int, step: int, levels: int, per_level: int, mirrored: list[int]
) -> None:
    """Failures placed in mirrored pairs around the middle of an even grid of L leave
    success flat in L: the MLE rate is 0 and L0 is inf. The optimiser alone stopped at a
    rate of rounding size there (L0 = 2.6e9; a bootstrap upper limit of 198366769.5 in
    a comparison, stretching its figure's axis to 2e8)."""
    lengths = start + step * np.arange(levels)
    L = np.repeat(lengths, per_level).astype(float)
    success = np.ones(L.size)
    fails = np.zeros(levels, dtype=int)
    for i in mirrored:
        i %= levels
        fails[i] += 1
        fails[levels - 1 - i] += 1
    fails = np.minimum(fails, per_level - 1)
    fails = np.minimum(fails, fails[::-1])  # still mirrored after the cap
    for level, n in enumerate(fails):
        success[level * per_level : level * per_level + n] = 0.0
    if success.all():
        return
    fit = fit_binomial_mle(L, success, bootstrap=0)
    assert fit.L0 == math.inf, fit
    assert fit.A == pytest.approx(success.mean())
    assert "does not decay" in (fit.note or "")
