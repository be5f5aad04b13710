"""The adaptive designs' pure parts (issue 27): where the L0 waves put their instances and
when they stop, the sc* bisection, and small runs of both calibration cases.

Why properties rather than examples: ``spread`` and ``allocate`` run on whatever capacities
a run folder's bins are left with, and the scan on whatever curve a model has, so their
promises (never over capacity, least-visited first, the bracket ``critical_point`` reads)
must hold for every input, not for the one a test author picked.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from horizonbench.analysis.adaptive import (
    AdaptiveSettings,
    Estimate,
    allocate,
    next_wave,
    relative_half_width,
    relative_variance,
    spread,
)
from horizonbench.analysis.phase import critical_point
from horizonbench.analysis.sc_scan import (
    BRACKETED,
    NEVER_CROSSES,
    STARTS_BELOW,
    Stop,
    bracket,
    fine_scan,
    next_cells,
    simulate_scan,
)
from horizonbench.calibration import load_cases, run_case
from horizonbench.calibration.base import run_arm

LENGTHS = np.arange(10, 120).astype(float)
CASES = load_cases()

small_ints = st.lists(st.integers(0, 6), min_size=1, max_size=30)


# ---------------------------------------------------------------------------
# spread
# ---------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(small_ints, st.integers(0, 120), st.data())
def test_spread_respects_capacity_totals_and_fills_the_least_visited_bins_first(cap, instances, data):
    capacity = np.array(cap)
    held = np.array(data.draw(st.lists(st.integers(0, 6), min_size=len(cap), max_size=len(cap))))
    out = spread(capacity, instances, held)
    assert (out >= 0).all() and (out <= capacity).all()
    assert out.sum() == min(instances, capacity.sum())
    # water-filling: a bin that still has room was never passed over for a fuller one
    level = held + out
    got, room = np.flatnonzero(out > 0), np.flatnonzero(capacity - out > 0)
    for i in got:
        assert (level[room] >= level[i] - 1).all(), (i, level, room)


def test_spread_spaces_a_small_wave_evenly_and_prefers_the_empty_bins():
    assert np.flatnonzero(spread(np.ones(10, dtype=int), 2)).tolist() == [0, 9]
    assert np.flatnonzero(spread(np.ones(9, dtype=int), 3)).tolist() == [0, 4, 8]
    held = np.array([1, 1, 0, 1, 0, 1])
    assert np.flatnonzero(spread(np.ones(6, dtype=int), 2, held)).tolist() == [2, 4]


# ---------------------------------------------------------------------------
# allocate
# ---------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(small_ints, st.integers(0, 60), st.floats(3.0, 150.0))
def test_allocate_never_exceeds_a_bins_capacity(cap, instances, L0):
    capacity = np.array(cap)
    lengths = np.linspace(10, 119, capacity.size)
    held = np.full(capacity.size, 10.0)
    out = allocate(lengths, held, capacity, 0.95, 1.0 / L0, instances, 5)
    assert (out >= 0).all() and (out <= capacity).all()
    assert out.sum() == min(instances, capacity.sum())


def test_allocate_lands_in_two_clusters_at_the_informative_depths():
    """For L0 = 20 on 10..119 the c-optimal design for L0 holds the low edge (pins A) and
    L of about 2-3 L0 (the slope); the greedy wave should put nearly all there."""
    L0 = 20.0
    held = np.full(LENGTHS.size, 2 * 5.0)  # a first sweep of 2 instances per bin
    out = allocate(LENGTHS, held, np.full(LENGTHS.size, 10**6), 0.95, 1 / L0, 200, 5)
    low_edge = out[LENGTHS <= 15].sum()
    slope = out[(LENGTHS >= 2 * L0) & (LENGTHS <= 3 * L0)].sum()
    assert out.sum() == 200
    assert low_edge >= 20 and slope >= 100 and low_edge + slope >= 0.95 * 200
    assert out[(LENGTHS > 15) & (LENGTHS < 2 * L0)].sum() == 0  # nothing in the gap
    # and the design it builds beats uniform bins by most of what the Fisher bound allows
    # (1.9x for this grid): the greedy steps are near-optimal, not merely different
    design = held + 5.0 * out
    uniform = np.full(LENGTHS.size, design.sum() / LENGTHS.size)
    k = 1 / L0
    gain = relative_variance(LENGTHS, uniform, 0.95, k) / relative_variance(LENGTHS, design, 0.95, k)
    assert 1.4 < gain < 1.95


def test_allocate_follows_the_estimate_to_the_long_end_for_a_long_decay():
    out = allocate(LENGTHS, np.full(LENGTHS.size, 10.0), np.full(LENGTHS.size, 100), 0.95, 1 / 80, 100, 5)
    assert out[LENGTHS >= 110].sum() >= 60 and out[LENGTHS <= 15].sum() >= 10


# ---------------------------------------------------------------------------
# next_wave and relative_half_width
# ---------------------------------------------------------------------------


def _wave(est: Estimate, calls: int = 1000, waves: int = 2, cap: int = 50, **kw: object):
    held = np.full(LENGTHS.size, 2)
    capacity = np.full(LENGTHS.size, cap)
    return next_wave(LENGTHS, held, capacity, est, 5, calls, waves, AdaptiveSettings(**kw))


WIDE = Estimate("L0", 20.0, 15.0, 27.0, 0.95)  # half-width 0.3
NARROW = Estimate("L0", 20.0, 19.2, 20.8, 0.95)  # half-width 0.04


def test_next_wave_stops_for_each_reason_and_target_comes_first():
    assert _wave(NARROW).stop == "target"
    assert _wave(NARROW, waves=99, max_waves=3).stop == "target"
    assert _wave(WIDE, waves=3, max_waves=3).stop == "max_waves"
    assert _wave(WIDE, calls=1000, max_calls=1004).stop == "budget"  # fewer calls left than samples
    assert _wave(WIDE, cap=0).stop == "exhausted"
    for stopped in (_wave(NARROW), _wave(WIDE, cap=0)):
        assert stopped.new.sum() == 0
    going = _wave(WIDE, waves=2, max_waves=3)
    assert going.stop is None and going.new.sum() > 0


@settings(max_examples=40, deadline=None)
@given(st.integers(100, 20_000), st.integers(0, 40_000), st.floats(0.06, 2.0))
def test_a_wave_stays_within_the_budget_the_growth_cap_and_the_bins(calls, extra, half):
    est = Estimate("L0", 20.0, 20.0 * (1 - half), 20.0 * (1 + half), 0.95)
    wave = _wave(est, calls=calls, cap=30, max_calls=calls + extra)
    if wave.stop is not None:
        assert wave.stop == "budget" and extra < 5
        return
    assert wave.calls_wanted == 5 * wave.new.sum() <= extra
    assert wave.calls_wanted <= 2.0 * calls + 5  # max_growth, rounded down to instances
    assert (wave.new <= 30).all()


def test_a_wave_without_a_finite_l0_looks_where_the_curve_must_be():
    """Almost everything failed: the crossing is at the short end; almost everything
    succeeded: at the long end (only the explore share goes elsewhere)."""
    half = LENGTHS.size // 2
    for rate, side in ((0.1, slice(None, half)), (0.9, slice(half, None))):
        wave = _wave(Estimate("L0", math.nan, None, None, success_rate=rate), calls=2000)
        assert wave.stop is None and wave.notes
        assert wave.new[side].sum() >= 0.75 * wave.new.sum()


def test_relative_half_width_edge_cases():
    assert relative_half_width(20.0, 18.0, 22.0) == pytest.approx(0.1)
    assert relative_half_width(20.0, 20.0, 20.0) == 0.0
    for low, high in ((None, 22.0), (18.0, None), (18.0, math.inf), (math.nan, 22.0)):
        assert relative_half_width(20.0, low, high) == math.inf
    for value in (0.0, -5.0, math.inf, math.nan):
        assert relative_half_width(value, 18.0, 22.0) == math.inf
    assert WIDE.half_width == pytest.approx(0.3) and NARROW.half_width == pytest.approx(0.04)


# ---------------------------------------------------------------------------
# the sc* bisection
# ---------------------------------------------------------------------------


def _step_scan(lo: int, hi: int, t: int, target_width: float = 1.0) -> tuple[list[int], Stop]:
    """The scan on an exact step (p = 1 below t, 0 from t on): no noise, so every step of
    the bisection is decided by the rule alone."""
    tested: dict[int, tuple[int, int]] = {}
    order: list[int] = []
    while True:
        step = next_cells(tested, lo, hi, target_width)
        if isinstance(step, Stop):
            return order, step
        assert not set(step) & set(tested), "a cell was asked for twice"
        for c in step:
            assert lo <= c <= hi
            tested[c] = (50 if c < t else 0, 50)
            order.append(c)


@settings(max_examples=200, deadline=None)
@given(st.integers(-20, 40), st.integers(1, 200), st.data())
def test_bisection_brackets_a_step_within_one_unit_in_about_log2_cells(lo, span, data):
    hi = lo + span
    t = data.draw(st.integers(lo + 1, hi))
    order, stop = _step_scan(lo, hi, t)
    assert order[:2] == [lo, hi]
    assert stop == Stop(BRACKETED, (t - 1, t))
    assert len(order) <= math.ceil(math.log2(span)) + 2 if span > 1 else len(order) == 2


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 10), st.integers(4, 60), st.integers(2, 6), st.data())
def test_a_wider_target_stops_at_a_bracket_that_wide(lo, span, width, data):
    hi = lo + span
    t = data.draw(st.integers(lo + 1, hi))
    order, stop = _step_scan(lo, hi, t, target_width=width)
    a, b = stop.bracket
    assert stop.reason == BRACKETED and a < t <= b and b - a <= width
    assert len(order) <= len(_step_scan(lo, hi, t)[0])


def test_a_range_that_brackets_no_crossing_stops_after_its_two_ends():
    for p, reason in ((0.8, NEVER_CROSSES), (0.5, STARTS_BELOW), (0.2, STARTS_BELOW)):
        tested = {6: (round(50 * p), 50), 30: (round(50 * p), 50)}
        assert next_cells(tested, 6, 30) == Stop(reason)
    # the upper end above 1/2 and the lower end below: the lower end decides (first crossing)
    assert next_cells({6: (10, 50), 30: (40, 50)}, 6, 30) == Stop(STARTS_BELOW)
    assert next_cells({}, 6, 30) == [6, 30] and next_cells({6: (40, 50)}, 6, 30) == [30]
    with pytest.raises(ValueError):
        next_cells({}, 30, 6)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.integers(0, 30), st.integers(0, 10), min_size=2, max_size=15))
def test_the_bracket_is_the_one_critical_point_reads(successes):
    tested = {c: (x, 10) for c, x in successes.items()}
    cells = sorted(tested)
    found = bracket(tested, 0, 30)
    point = critical_point(cells, [tested[c][0] / 10 for c in cells])
    if isinstance(found, Stop):
        assert point.bracket is None and math.isnan(point.value)
    else:
        assert point.bracket == found


def test_simulated_scans_read_sc_star_and_cost_a_fraction_of_the_fine_scan():
    rng = np.random.default_rng(7)
    centre = 17.6

    def p(sc: int) -> float:
        return 1.0 / (1.0 + math.exp((sc - centre) / 0.5))

    scan = simulate_scan(p, 6, 30, 50, rng, n_boot=500)
    fine = fine_scan(p, 6, 30, 50, rng, n_boot=500)
    assert scan.stop.reason == BRACKETED and scan.stop.bracket == (17, 18)
    assert 17 <= scan.value <= 18 and scan.low <= scan.value <= scan.high
    assert fine.episodes == 25 * 50 and scan.episodes == 50 * len(scan.cells) <= fine.episodes / 3
    flat = simulate_scan(lambda sc: 0.8, 6, 30, 50, rng)
    assert flat.stop.reason == NEVER_CROSSES and flat.episodes == 100 and math.isnan(flat.value)


# ---------------------------------------------------------------------------
# the calibration cases, small
# ---------------------------------------------------------------------------


def test_adaptive_l0_interval_covers_and_no_decay_is_not_claimed():
    """Scale 0.1: a 16% target and a 4,000-call cap, about half a second per study."""
    case = CASES["L0 coverage (adaptive design)"]
    assert case.null_study is not None
    planted = run_arm(case, "planted", case.planted_study, case.planted_target, 8, 0, 0.1)
    assert planted.hits >= 6 and planted.undefined == 0
    assert planted.values["reached_target"] >= 0.8 and abs(planted.values["rel_bias"]) < 0.1
    null = run_arm(case, "null", case.null_study, case.null_target, 5, 0, 0.1)
    # the no-decay model's waves end at the cap, and its interval stays open above
    assert null.hits <= 1 and null.values["calls"] == 4_000


def test_adaptive_sc_scan_covers_and_claims_no_crossing_on_a_flat_curve():
    case = CASES["sc* coverage (adaptive scan)"]
    result = run_case(case, n_studies=40)
    planted, null = result.arm("planted"), result.arm("null")
    assert planted.rate >= 0.82 and planted.values["cells"] <= 8
    assert planted.values["episodes"] <= 1250 / 3
    assert null.hits == 0 and null.values["episodes"] == 100
