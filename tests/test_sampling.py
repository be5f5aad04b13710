"""Tests for the candidate selector: count mode, L-binned quotas, order independence."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from horizonbench.datasets.sampling import Selector
from horizonbench.datasets.shards import generate_shard
from horizonbench.schemas.config import BinSpec, SamplingSpec

Item = tuple[int, int, str | None]  # (index, length, rejection)


class Recording(Selector):
    """The selector with the rows it keeps beside it (the generate stage streams them to
    the table instead)."""

    def __init__(self, spec: SamplingSpec) -> None:
        super().__init__(spec)
        self.rows: list[dict[str, Any]] = []

    def feed(self, index: int, length: int | None, row: Any, rejection: str | None) -> bool:  # type: ignore[override]
        kept = super().feed(index, length, row is not None, rejection)
        assert kept == (self.kept == len(self.rows) + 1)
        if kept:
            self.rows.append(row)
        return kept


def row(index: int) -> dict[str, Any]:
    return {"candidate_index": index}


def feed_all(sel: Selector, stream: list[Item]) -> Selector:
    for index, length, rejection in stream:
        if rejection is None:
            sel.feed(index, length, row(index), None)
        else:
            sel.feed(index, None, None, rejection)
    return sel


def kept_indices(sel: Selector) -> list[int]:
    return [r["candidate_index"] for r in sel.rows]


def bins_spec(lo: int, hi: int, width: int, per_bin: int, max_candidates: int = 200_000) -> SamplingSpec:
    return SamplingSpec(
        bins=BinSpec(min=lo, max=hi, width=width, per_bin=per_bin), max_candidates=max_candidates
    )


# --- hand-written cases ---------------------------------------------------------------


def test_bins_keep_per_bin_in_index_order() -> None:
    sel = Recording(bins_spec(10, 20, 5, 2))
    assert sel.bin_counts == {10: 0, 15: 0}
    stream: list[Item] = [
        (0, 12, None),
        (1, 3, None),  # below the bins: certified, not kept
        (2, 0, "unsolvable"),
        (3, 17, None),
        (4, 11, None),
        (5, 14, None),  # bin 10 is full by now
        (6, 20, None),  # max is exclusive
        (7, 19, None),
        (8, 0, "gold_not_optimal"),
        (9, 15, None),  # bin 15 full after 7 -> selector is done before this
    ]
    feed_all(sel, stream)
    assert kept_indices(sel) == [0, 3, 4, 7]
    assert sel.bin_counts == {10: 2, 15: 2}
    assert sel.done and sel.unfilled() == {}
    # everything after the selector finished is ignored
    assert sel.considered == 8
    assert sel.certified == 7
    assert sel.rejections == Counter({"unsolvable": 1})


def test_bins_report_unfilled() -> None:
    sel = Recording(bins_spec(1, 10, 3, 2))
    assert sorted(sel.bin_counts) == [1, 4, 7]
    feed_all(sel, [(0, 1, None), (1, 2, None), (2, 5, None), (3, 0, "x"), (4, 0, "x"), (5, 9, None)])
    assert not sel.done
    assert sel.unfilled() == {4: 1, 7: 1}
    assert sel.rejections == Counter({"x": 2})
    assert sel.considered == 6 and sel.certified == 4


def test_bin_of_and_wants() -> None:
    sel = Recording(bins_spec(10, 22, 5, 1))
    assert [sel.bin_of(n) for n in (9, 10, 14, 15, 19, 20, 21, 22, 100)] == [
        None,
        10,
        10,
        15,
        15,
        20,
        20,
        None,
        None,
    ]
    assert sel.wants(12) and not sel.wants(9) and not sel.wants(22)
    sel.feed(0, 12, row(0), None)
    assert not sel.wants(12) and sel.wants(17)
    count_sel = Recording(SamplingSpec(count=1))
    assert count_sel.wants(10**6)
    assert count_sel.bin_of(5) is None and count_sel.unfilled() == {}


def test_wanted_row_must_not_be_dropped() -> None:
    sel = Recording(bins_spec(10, 20, 5, 1))
    sel.feed(0, 3, None, None)  # outside the bins: its row may be dropped
    sel.feed(1, 12, row(1), None)
    sel.feed(2, 13, None, None)  # bin full: fine to drop
    with pytest.raises(RuntimeError):
        sel.feed(3, 16, None, None)


def test_count_mode_keeps_first_n_certified() -> None:
    sel = Recording(SamplingSpec(count=3))
    feed_all(
        sel, [(0, 5, "a"), (1, 50, None), (2, 0, "b"), (3, 7, None), (4, 9, None), (5, 8, None), (6, 1, "c")]
    )
    assert kept_indices(sel) == [1, 3, 4]
    assert sel.done
    assert sel.considered == 5 and sel.certified == 3
    assert sel.rejections == Counter({"a": 1, "b": 1})


def test_max_candidates_is_respected() -> None:
    sel = Recording(SamplingSpec(count=10, max_candidates=4))
    feed_all(sel, [(i, 5, None) for i in range(10)])
    assert kept_indices(sel) == [0, 1, 2, 3]
    assert sel.considered == 4 and not sel.done
    sel = Recording(bins_spec(1, 5, 1, 3, max_candidates=3))
    feed_all(sel, [(i, 1 + i % 4, None) for i in range(20)])
    assert kept_indices(sel) == [0, 1, 2]
    assert sel.unfilled() == {1: 1, 2: 1, 3: 1, 4: 0}


# --- property test against a declarative reference -----------------------------------------


def reference(stream: list[Item], spec: SamplingSpec) -> dict[str, Any]:
    """What the selector should conclude, stated without simulating it step by step.

    Only candidates below ``max_candidates`` count. In count mode the kept ones are the
    first ``count`` certified; with bins, per bin the first ``per_bin`` certified whose
    length falls in it (``quotas[lo]`` where the bin has its own quota). The selector
    stops considering candidates right after the one that completes its target.
    """
    eligible = [it for it in stream if it[0] < spec.max_candidates]
    certified = [it for it in eligible if it[2] is None]
    if spec.count is not None:
        kept = certified[: spec.count]
        complete = len(kept) == spec.count
        counts: dict[int, int] = {}
    else:
        b = spec.bins
        assert b is not None
        per: dict[int, list[Item]] = {lo: [] for lo in range(b.min, b.max, b.width)}
        for it in certified:
            if b.min <= it[1] < b.max:
                lo = max(e for e in per if e <= it[1])
                if len(per[lo]) < b.quotas.get(lo, b.per_bin):
                    per[lo].append(it)
        kept = sorted((it for group in per.values() for it in group), key=lambda it: it[0])
        complete = all(len(g) == b.quotas.get(lo, b.per_bin) for lo, g in per.items())
        counts = {lo: len(g) for lo, g in per.items()}
    if complete:
        last = max(it[0] for it in kept)
        considered = [it for it in eligible if it[0] <= last]
    else:
        considered = eligible
    return {
        "kept": [it[0] for it in kept],
        "considered": len(considered),
        "certified": sum(it[2] is None for it in considered),
        "rejections": Counter(it[2] for it in considered if it[2] is not None),
        "done": complete,
        "unfilled": {}
        if spec.bins is None
        else {lo: c for lo, c in counts.items() if c < spec.bins.quotas.get(lo, spec.bins.per_bin)},
    }


@st.composite
def streams(draw: st.DrawFn) -> list[Item]:
    gaps = draw(st.lists(st.integers(1, 3), max_size=80))
    out: list[Item] = []
    index = draw(st.integers(0, 3))
    for gap in gaps:
        rejection = draw(st.sampled_from([None, None, None, "unsolvable", "gold_not_optimal"]))
        out.append((index, draw(st.integers(1, 40)), rejection))
        index += gap
    return out


@st.composite
def specs(draw: st.DrawFn) -> SamplingSpec:
    max_candidates = draw(st.integers(1, 300))
    if draw(st.booleans()):
        return SamplingSpec(count=draw(st.integers(1, 30)), max_candidates=max_candidates)
    lo = draw(st.integers(1, 20))
    hi = draw(st.integers(lo + 1, lo + 30))
    spec = bins_spec(lo, hi, draw(st.integers(1, 8)), draw(st.integers(1, 5)), max_candidates)
    assert spec.bins is not None
    # some bins with a quota of their own (a puzzle size with fewer puzzles)
    own = draw(st.lists(st.sampled_from(spec.bins.edges()), unique=True, max_size=3))
    quotas = {e: draw(st.integers(1, 6)) for e in own}
    return spec.model_copy(update={"bins": BinSpec(**spec.bins.model_dump() | {"quotas": quotas})})


@given(streams(), specs())
@settings(max_examples=400, deadline=None)
def test_selector_matches_reference(stream: list[Item], spec: SamplingSpec) -> None:
    sel = feed_all(Recording(spec), stream)
    ref = reference(stream, spec)
    assert kept_indices(sel) == ref["kept"]
    assert sel.considered == ref["considered"]
    assert sel.certified == ref["certified"]
    assert sel.rejections == ref["rejections"]
    assert sel.done == ref["done"]
    assert sel.unfilled() == ref["unfilled"]
    if spec.bins is not None:
        assert sum(sel.bin_counts.values()) == len(sel.rows)
        assert all(c <= spec.bins.quota(lo) for lo, c in sel.bin_counts.items())
        # the selector never keeps a row it said it did not want
        sel2 = Recording(spec)
        for index, length, rejection in stream:
            wanted = (
                rejection is None and not sel2.done and index < spec.max_candidates and sel2.wants(length)
            )
            before = len(sel2.rows)
            sel2.feed(index, length if rejection is None else None, row(index), rejection)
            assert (len(sel2.rows) == before + 1) == wanted


@given(streams(), specs(), st.data())
@settings(max_examples=150, deadline=None)
def test_dropping_unwanted_rows_changes_nothing(
    stream: list[Item], spec: SamplingSpec, data: st.DataObject
) -> None:
    # a worker may drop the row of any candidate outside [bins.min, bins.max)
    full = feed_all(Recording(spec), stream)
    sel = Recording(spec)
    for index, length, rejection in stream:
        if rejection is not None:
            sel.feed(index, None, None, rejection)
            continue
        outside = spec.bins is not None and not spec.bins.min <= length < spec.bins.max
        drop = outside and data.draw(st.booleans())
        sel.feed(index, length, None if drop else row(index), None)
    assert kept_indices(sel) == kept_indices(full)
    assert (sel.considered, sel.certified, sel.rejections) == (
        full.considered,
        full.certified,
        full.rejections,
    )


# --- real shards: the kept set does not depend on how the index range is split ------------


MAZE = {"grid_rows": 5, "grid_cols": 5, "num_keys": 1, "noise_ratio": 0.5}


@pytest.mark.parametrize(
    "spec",
    [
        SamplingSpec(count=12),
        bins_spec(5, 25, 5, 3),
        bins_spec(5, 25, 5, 3, max_candidates=20),
    ],
    ids=["count", "bins", "bins_capped"],
)
def test_split_shards_give_the_same_selection(spec: SamplingSpec) -> None:
    total = 60
    keep = range(spec.bins.min, spec.bins.max) if spec.bins else None
    whole = generate_shard("maze", MAZE, 5, 0, total, keep)
    results = []
    for cuts in ([0, total], [0, 7, 19, 20, 43, total], [0, *range(5, total, 5), total]):
        sel = Recording(spec)
        parts = [generate_shard("maze", MAZE, 5, a, b, keep) for a, b in zip(cuts, cuts[1:], strict=False)]
        assert [t for p in parts for t in p] == whole
        for part in parts:
            for index, length, r, rejection in part:
                sel.feed(index, length, r, rejection)
        results.append(
            (
                [r["instance_id"] for r in sel.rows],
                sel.considered,
                sel.certified,
                dict(sel.rejections),
                sel.unfilled(),
            )
        )
    assert results[0] == results[1] == results[2]
    kept = [r for r in whole if r[2] is not None]
    assert results[0][0] and len(results[0][0]) <= len(kept)


def test_open_lengths_shrink_as_bins_fill() -> None:
    sel = Recording(bins_spec(10, 20, 5, 1))
    assert sel.open_lengths() == frozenset(range(10, 20))
    sel.feed(0, 12, {"instance_id": "a"}, None)
    assert sel.open_lengths() == frozenset(range(15, 20))
    sel.feed(1, 19, {"instance_id": "b"}, None)
    assert sel.open_lengths() == frozenset() and sel.done
    assert Recording(SamplingSpec(count=3)).open_lengths() is None
