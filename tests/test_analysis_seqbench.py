"""seqBench-style tables and figures, each statistic checked against a plain-Python
computation over the rows (loops, ``statistics``), on hand-made and random scores
tables built with the real schema."""

from __future__ import annotations

import math
import statistics
import xml.etree.ElementTree as ET
from collections import defaultdict

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from horizonbench.analysis import seqbench as sb
from horizonbench.analysis.summary import first_violation_hist
from horizonbench.datasets.maze.categories import category_of
from horizonbench.reports import seqbench_plots as sp
from horizonbench.schemas.tables import ANALYSIS_SCHEMAS, ATTEMPTS_SCHEMA, SCORES_SCHEMA

VIOLATIONS = ["non_adjacent_move", "locked_door", "key_not_held", "suboptimal", "no_rescue", "invalid_output"]


def _row(
    model: str,
    instance: str,
    sample: int,
    L: int,
    ok: bool,
    *,
    violation=None,
    step=None,
    progress=None,
    family="maze",
    mode="plan",
) -> dict:
    return {
        "model": model,
        "instance_id": instance,
        "family": family,
        "mode": mode,
        "sample": sample,
        "answered": True,
        "solution_length": L,
        "success": ok,
        "valid": ok,
        "exact_match": ok,
        "progress_ratio": 1.0 if ok else (0.0 if progress is None else progress),
        "precision": 1.0,
        "recall": 1.0,
        "plan_length": L,
        "violation": None if ok else violation,
        "first_violation_step": None if ok else step,
    }


def _table(rows: list[dict]) -> pd.DataFrame:
    return pa.Table.from_pylist(rows, schema=SCORES_SCHEMA).to_pandas()


def _random_rows(seed: int, n: int = 400, models: int = 3, instances: int = 40) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for k in range(n):
        inst = int(rng.integers(instances))
        L = 3 + inst % 17
        ok = bool(rng.random() < 0.3)
        located = rng.random() < 0.85
        rows.append(
            _row(
                f"m{int(rng.integers(models))}",
                f"i{inst:03d}",
                k,
                L,
                ok,
                violation=VIOLATIONS[int(rng.integers(len(VIOLATIONS)))],
                step=int(rng.integers(0, L + 2)) if located else None,
                progress=int(rng.integers(0, L)) / L,
            )
        )
    return rows


@pytest.fixture(scope="module")
def random_rows() -> list[dict]:
    return _random_rows(0)


@pytest.fixture(scope="module")
def random_scores(random_rows: list[dict]) -> pd.DataFrame:
    return _table(random_rows)


def _assert_plain(df: pd.DataFrame, columns: list[str]) -> None:
    assert list(df.columns) == columns
    for col, dtype in df.dtypes.items():
        assert dtype in (np.dtype("float64"), np.dtype("int64"), np.dtype(object)), f"{col} has {dtype}"


def _bin_of(p: float) -> int:
    """The progress bin, by comparing with each lower edge k/10 in turn."""
    return max(k for k in range(11) if p >= k / 10)


# --- 1. progress distribution ---------------------------------------------------------


def test_progress_distribution_hand_made() -> None:
    rows = [
        _row("a", "i1", 0, 10, True),
        _row("a", "i2", 0, 10, False, progress=3 / 10),  # on an edge: the bin starting at 0.3
        _row("a", "i3", 0, 20, False, progress=6 / 20),
        _row("a", "i4", 0, 20, False, progress=19 / 20),
        _row("a", "i5", 0, 20, False, progress=0.0),
        _row("b", "i1", 0, 10, False, progress=0.7),
    ]
    out = sb.progress_distribution(_table(rows))
    _assert_plain(out, sb.PROGRESS_DISTRIBUTION_COLUMNS)
    assert len(out) == 22 and out["model"].tolist() == ["a"] * 11 + ["b"] * 11
    a = out[out.model == "a"]
    assert a["bin_low"].tolist() == pytest.approx([k / 10 for k in range(10)] + [1.0])
    assert a["bin_high"].tolist() == pytest.approx([k / 10 for k in range(1, 11)] + [1.0])
    assert a["count"].tolist() == [1, 0, 0, 2, 0, 0, 0, 0, 0, 1, 1]
    assert a["share"].tolist() == pytest.approx([c / 5 for c in a["count"]])
    b = out[out.model == "b"]
    assert b["count"].tolist() == [0] * 7 + [1] + [0] * 3


def test_progress_distribution_against_loops(random_rows, random_scores) -> None:
    out = sb.progress_distribution(random_scores)
    counts: dict[str, list[int]] = defaultdict(lambda: [0] * 11)
    for r in random_rows:
        counts[r["model"]][_bin_of(r["progress_ratio"])] += 1
    for model, expected in counts.items():
        got = out[out.model == model]
        assert got["count"].tolist() == expected
        assert got["share"].tolist() == pytest.approx([c / sum(expected) for c in expected])
    assert sorted(counts) == sorted(set(out.model))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["x", "y", "z"]),
            st.one_of(st.floats(0.0, 1.0), st.integers(0, 20).map(lambda k: k / 20)),
        ),
        min_size=1,
        max_size=60,
    )
)
def test_progress_distribution_properties(values) -> None:
    rows = [_row(m, f"i{k}", 0, 5, False, progress=p) for k, (m, p) in enumerate(values)]
    out = sb.progress_distribution(_table(rows))
    attempts = pd.Series([m for m, _ in values]).value_counts()
    for model, g in out.groupby("model"):
        assert len(g) == 11
        assert g["count"].sum() == attempts[model]
        assert g["share"].sum() == pytest.approx(1.0)
        expected = [0] * 11
        for m, p in values:
            if m == model:
                expected[_bin_of(p)] += 1
        assert g["count"].tolist() == expected


# --- 2. first violation by L range ---------------------------------------------------


def test_length_ranges_hand_made() -> None:
    lows, highs, where = sb.length_ranges(np.array([10, 13, 14, 25, 21]), 4)
    assert lows.tolist() == [10, 14, 18, 22] and highs.tolist() == [13, 17, 21, 25]
    assert where.tolist() == [0, 0, 1, 3, 2]
    # fewer integers than groups: one range per L value
    lows, highs, where = sb.length_ranges(np.array([7, 8, 7]), 4)
    assert lows.tolist() == [7, 8] and highs.tolist() == [7, 8] and where.tolist() == [0, 1, 0]
    with pytest.raises(ValueError, match="groups"):
        sb.length_ranges(np.array([1]), 0)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 400), min_size=1, max_size=30), st.integers(1, 9))
def test_length_ranges_partition_the_span(L, groups) -> None:
    lows, highs, where = sb.length_ranges(np.array(L), groups)
    assert lows[0] == min(L) and highs[-1] == max(L)
    assert (lows <= highs).all() and (lows[1:] == highs[:-1] + 1).all()  # contiguous, no overlap
    widths = highs - lows + 1
    assert widths.max() - widths.min() <= 1
    assert len(lows) == min(groups, max(L) - min(L) + 1)
    for value, k in zip(L, where, strict=True):
        assert lows[k] <= value <= highs[k]


def test_first_violation_by_length_against_loops(random_rows, random_scores) -> None:
    out = sb.first_violation_by_length(random_scores, groups=3)
    _assert_plain(out, sb.FIRST_VIOLATION_BY_LENGTH_COLUMNS)
    ranges = out[["L_low", "L_high"]].drop_duplicates().sort_values("L_low").values.tolist()
    Ls = [r["solution_length"] for r in random_rows]
    assert ranges[0][0] == min(Ls) and ranges[-1][1] == max(Ls)  # the span of every attempt
    groups: dict[tuple, list[tuple[float, int]]] = defaultdict(list)
    for r in random_rows:
        if r["first_violation_step"] is None:
            continue
        (lo, hi) = next((lo, hi) for lo, hi in ranges if lo <= r["solution_length"] <= hi)
        rel = r["first_violation_step"] / r["solution_length"]
        groups[(r["model"], lo, hi)].append((rel, r["first_violation_step"]))
    assert len(out) == len(groups)
    for row in out.itertuples():
        items = groups[(row.model, row.L_low, row.L_high)]
        rel = [x for x, _ in items]
        assert row.attempts == len(items)
        assert row.relative_position_mean == pytest.approx(statistics.fmean(rel))
        assert row.relative_position_median == pytest.approx(statistics.median(rel))
        q25, _, q75 = statistics.quantiles(rel, n=4, method="inclusive") if len(rel) > 1 else [rel[0]] * 3
        assert row.relative_position_q25 == pytest.approx(q25)
        assert row.relative_position_q75 == pytest.approx(q75)
        assert row.first_violation_step_mean == pytest.approx(statistics.fmean(s for _, s in items))
    # the same attempts, and the same relative positions, as summary.first_violation_hist
    hist = first_violation_hist(random_scores)
    assert out["attempts"].sum() == len(hist)
    assert (out["attempts"] * out["relative_position_mean"]).sum() == pytest.approx(
        hist["relative_position"].sum()
    )


def test_first_violation_by_length_shows_the_leftward_shift() -> None:
    rows = []
    for L in range(10, 50):
        # longer problems break earlier: at a fifth of the plan from L = 30 on
        step = L // 2 if L < 30 else L // 5
        rows += [_row("a", f"i{L}-{s}", s, L, False, violation="locked_door", step=step) for s in range(3)]
    rows.append(_row("a", "ok", 0, 59, True))  # a success widens the span to 10..59
    out = sb.first_violation_by_length(_table(rows), groups=5)
    assert out[["L_low", "L_high"]].values.tolist() == [[10, 19], [20, 29], [30, 39], [40, 49]]
    median = out["relative_position_median"].to_numpy()
    assert median[:2].min() > 0.45 and median[2:].max() < 0.25


def test_first_violation_by_length_edge_cases() -> None:
    rows = [
        _row("a", "i1", 0, 10, True),
        _row("a", "i2", 0, 10, False, violation="invalid_output", step=None),  # not located
        _row("b", "i1", 0, 12, True),
    ]
    empty = sb.first_violation_by_length(_table(rows))
    assert empty.empty
    _assert_plain(empty, sb.FIRST_VIOLATION_BY_LENGTH_COLUMNS)
    rows.append(_row("a", "i3", 0, 12, False, violation="locked_door", step=3))
    out = sb.first_violation_by_length(_table(rows), groups=1)
    assert out[["model", "L_low", "L_high", "attempts"]].values.tolist() == [["a", 10, 12, 1]]
    assert out.iloc[0].relative_position_q25 == out.iloc[0].relative_position_q75 == 0.25
    with pytest.raises(ValueError, match="groups"):
        sb.first_violation_by_length(_table(rows), groups=0)


# --- 3. violations by L ---------------------------------------------------------------


@pytest.mark.parametrize("bin_width", [1, 5])
def test_violations_by_length_against_loops(random_rows, random_scores, bin_width) -> None:
    out = sb.violations_by_length(random_scores, bin_width=bin_width)
    _assert_plain(out, sb.VIOLATIONS_BY_LENGTH_COLUMNS)
    counts: dict[tuple, int] = defaultdict(int)
    totals: dict[tuple, int] = defaultdict(int)
    for r in random_rows:
        L = r["solution_length"] // bin_width * bin_width
        counts[(r["model"], L, r["violation"] or "none")] += 1
        totals[(r["model"], L)] += 1
    assert len(out) == len(counts)
    for row in out.itertuples():
        assert row.count == counts[(row.model, row.L, row.violation)]
        assert row.attempts == totals[(row.model, row.L)]
        assert row.share == pytest.approx(row.count / row.attempts)
        assert row.category == ("none" if row.violation == "none" else category_of(row.violation))
    # models, L, then the most frequent violation first, ties by name
    keys = [(r.model, r.L, -r.count, r.violation) for r in out.itertuples()]
    assert keys == sorted(keys)
    assert out.groupby(["model", "L"])["share"].sum().to_numpy() == pytest.approx(1.0)


def test_violations_by_length_other_family_has_no_category() -> None:
    rows = [
        _row("a", "h1", 0, 7, False, violation="not_top_disk", step=1, family="hanoi"),
        _row("a", "h2", 0, 7, True, family="hanoi"),
    ]
    out = sb.violations_by_length(_table(rows))
    assert out[["violation", "category", "count", "attempts"]].values.tolist() == [
        ["none", "none", 1, 2],
        ["not_top_disk", None, 1, 2],
    ]


# --- 4. instance progress and model pairs --------------------------------------------


def test_instance_progress_against_loops(random_rows, random_scores) -> None:
    out = sb.instance_progress(random_scores)
    _assert_plain(out, sb.INSTANCE_PROGRESS_COLUMNS)
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in random_rows:
        groups[(r["model"], r["instance_id"])].append(r)
    assert [tuple(k) for k in out[["model", "instance_id"]].values] == sorted(groups)
    for row in out.itertuples():
        items = groups[(row.model, row.instance_id)]
        assert row.L == items[0]["solution_length"] and row.attempts == len(items)
        assert row.progress_ratio_mean == pytest.approx(statistics.fmean(r["progress_ratio"] for r in items))
        assert row.success_rate == pytest.approx(statistics.fmean(float(r["success"]) for r in items))


def _pairs_by_loops(ip: pd.DataFrame, margin: float = 0.5) -> dict[tuple[str, str], dict]:
    rows = {(r.model, r.instance_id): r for r in ip.itertuples()}
    models = sorted(set(ip.model))
    out = {}
    for i, a in enumerate(models):
        for b in models[i + 1 :]:
            shared = sorted({inst for m, inst in rows if m == a} & {inst for m, inst in rows if m == b})
            pa_ = [rows[(a, k)].progress_ratio_mean for k in shared]
            pb_ = [rows[(b, k)].progress_ratio_mean for k in shared]
            try:
                corr = statistics.correlation(pa_, pb_)
            except statistics.StatisticsError:  # fewer than two points, or a constant
                corr = float("nan")
            mean_a = statistics.fmean(pa_) if shared else float("nan")
            mean_b = statistics.fmean(pb_) if shared else float("nan")
            a_better = sum(x - y >= margin - 1e-9 for x, y in zip(pa_, pb_, strict=True))
            b_better = sum(y - x >= margin - 1e-9 for x, y in zip(pa_, pb_, strict=True))
            if not shared or abs(mean_a - mean_b) <= 1e-9:
                weaker, inversions = None, 0
            else:
                weaker = a if mean_a < mean_b else b
                inversions = a_better if weaker == a else b_better
            solved = [(rows[(a, k)].success_rate, rows[(b, k)].success_rate) for k in shared]
            out[(a, b)] = {
                "instances": len(shared),
                "progress_mean_a": mean_a,
                "progress_mean_b": mean_b,
                "progress_corr": corr,
                "a_better": a_better,
                "b_better": b_better,
                "a_only_solved": sum(sa == 1 and sb_ == 0 for sa, sb_ in solved),
                "b_only_solved": sum(sb_ == 1 and sa == 0 for sa, sb_ in solved),
                "weaker": weaker,
                "inversions": inversions,
                "inversion_share": inversions / len(shared) if shared else float("nan"),
            }
    return out


def _assert_pairs_match(out: pd.DataFrame, expected: dict) -> None:
    assert [tuple(p) for p in out[["model_a", "model_b"]].values] == sorted(expected)
    for row in out.to_dict("records"):
        want = expected[(row["model_a"], row["model_b"])]
        for col, value in want.items():
            if isinstance(value, float) and math.isnan(value):
                assert math.isnan(row[col]), col
            elif isinstance(value, float):
                assert row[col] == pytest.approx(value), col
            else:
                assert row[col] == value, col


def test_model_pairs_against_loops(random_scores) -> None:
    ip = sb.instance_progress(random_scores)
    out = sb.model_pairs(ip)
    _assert_plain(out, sb.MODEL_PAIR_COLUMNS)
    _assert_pairs_match(out, _pairs_by_loops(ip))


def test_model_pairs_inversions_hand_made() -> None:
    rows = [
        # strong: high progress on i1 and i2 (mean over i1..i4: 0.575); weak: low there
        # but ahead on i3 and i4 (mean 0.475)
        *(_row("strong", f"i{k}", 0, 10, False, progress=0.9) for k in (1, 2)),
        *(_row("weak", f"i{k}", 0, 10, False, progress=0.1) for k in (1, 2)),
        _row("strong", "i3", 0, 10, False, progress=0.2),
        _row("weak", "i3", 0, 10, False, progress=0.7),  # 0.7 - 0.2 < 0.5 in floats: still counts
        _row("strong", "i4", 0, 10, False, progress=0.5),
        _row("strong", "i4", 1, 10, False, progress=0.1),  # strong's mean on i4: 0.3
        _row("weak", "i4", 0, 10, True),  # 1.0 - 0.3: an inversion, and weak alone solved it
        _row("weak", "i5", 0, 10, True),  # not shared
    ]
    ip = sb.instance_progress(_table(rows))
    out = sb.model_pairs(ip).iloc[0]
    assert (out.model_a, out.model_b, out.instances) == ("strong", "weak", 4)
    assert out.progress_mean_a == pytest.approx(0.575) and out.progress_mean_b == pytest.approx(0.475)
    assert out.weaker == "weak" and out.inversions == 2 and out.inversion_share == 0.5
    assert out.a_better == 2 and out.b_better == 2
    assert (out.a_only_solved, out.b_only_solved) == (0, 1)
    # requiring a lead of 0.55: i3 (a lead of 0.5) no longer counts, i4 (0.7) does
    assert sb.model_pairs(ip, margin=0.55).iloc[0].inversions == 1


def test_model_pairs_edge_cases() -> None:
    one = sb.instance_progress(_table([_row("a", "i1", 0, 5, True)]))
    assert sb.model_pairs(one).empty
    _assert_plain(sb.model_pairs(one), sb.MODEL_PAIR_COLUMNS)
    _assert_plain(sb.model_pairs(one.iloc[:0]), sb.MODEL_PAIR_COLUMNS)
    # equal means: no weaker model, so no inversions; one shared instance: no correlation
    tie = _table(
        [
            _row("a", "i1", 0, 5, False, progress=0.0),
            _row("b", "i1", 0, 5, True),
            _row("a", "i2", 0, 5, True),
            _row("b", "i2", 0, 5, False, progress=0.0),
            _row("c", "i9", 0, 5, True),
        ]
    )
    out = sb.model_pairs(sb.instance_progress(tie)).set_index(["model_a", "model_b"])
    assert out.loc[("a", "b"), "weaker"] is None and out.loc[("a", "b"), "inversions"] == 0
    assert out.loc[("a", "b"), "a_better"] == out.loc[("a", "b"), "b_better"] == 1
    assert out.loc[("a", "b"), "progress_corr"] == pytest.approx(-1.0)
    # no shared instance: counted as a pair with nothing in common
    assert out.loc[("a", "c"), "instances"] == 0 and math.isnan(out.loc[("a", "c"), "inversion_share"])
    assert out.loc[("a", "c"), "weaker"] is None and math.isnan(out.loc[("a", "c"), "progress_corr"])


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["p", "q"]), st.integers(0, 5), st.integers(0, 4).map(lambda k: k / 4)),
        min_size=1,
        max_size=30,
    )
)
def test_model_pairs_symmetric_in_the_names(values) -> None:
    """Swapping the two models' names swaps a and b in every column, nothing else."""
    rows = [_row(m, f"i{i}", k, 4, p == 1.0, progress=p) for k, (m, i, p) in enumerate(values)]
    swapped = [{**r, "model": {"p": "q", "q": "p"}[r["model"]]} for r in rows]
    out = sb.model_pairs(sb.instance_progress(_table(rows)))
    back = sb.model_pairs(sb.instance_progress(_table(swapped)))
    assert len(out) == len(back)
    if out.empty:
        return
    o, b = out.iloc[0], back.iloc[0]
    assert o.instances == b.instances and o.inversions == b.inversions
    assert (o.a_better, o.b_better) == (b.b_better, b.a_better)
    assert (o.a_only_solved, o.b_only_solved) == (b.b_only_solved, b.a_only_solved)
    same = np.testing.assert_equal  # NaN equals NaN
    same([o.progress_mean_a, o.progress_mean_b], [b.progress_mean_b, b.progress_mean_a])
    same(o.progress_corr, b.progress_corr)
    swap = {"p": "q", "q": "p", None: None}
    assert swap[o.weaker] == b.weaker
    assert o.inversions <= o.instances and o.inversions in (0, o.a_better, o.b_better)
    assert _pairs_by_loops(sb.instance_progress(_table(rows)))[("p", "q")]["inversions"] == o.inversions


# --- 5. output tokens by L ------------------------------------------------------------


def _attempt(model, instance, sample, tokens, *, turn=0, mode="plan", family="maze") -> dict:
    return {
        "model": model,
        "family": family,
        "instance_id": instance,
        "sample": sample,
        "mode": mode,
        "turn": turn,
        "output_tokens": tokens,
    }


def test_tokens_by_length_against_loops(random_rows, random_scores) -> None:
    rng = np.random.default_rng(1)
    attempts = [
        _attempt(r["model"], r["instance_id"], r["sample"], int(rng.integers(10, 900))) for r in random_rows
    ]
    attempts = attempts[5:]  # five scores without an attempt row: left out
    attempts.append({**attempts[0], "output_tokens": 10**6})  # a repeated key: its first row counts
    attempts += [_attempt(r["model"], r["instance_id"], r["sample"], 10**7, turn=1) for r in random_rows[:20]]
    attempts += [
        _attempt(r["model"], r["instance_id"], r["sample"], 10**7, mode="rollout") for r in random_rows[:20]
    ]
    frame = pd.DataFrame(attempts).sample(frac=1.0, random_state=3)  # the row order is the frame's
    first_in_frame = {}
    for a in frame.to_dict("records"):
        first_in_frame.setdefault(
            (a["model"], a["family"], a["instance_id"], a["sample"], a["mode"], a["turn"]), a
        )
    out = sb.tokens_by_length(random_scores, frame, bin_width=4)
    _assert_plain(out, sb.TOKENS_BY_LENGTH_COLUMNS)
    groups: dict[tuple, list[int]] = defaultdict(list)
    for r in random_rows:
        a = first_in_frame.get((r["model"], "maze", r["instance_id"], r["sample"], "plan", 0))
        if a is not None:
            groups[(r["model"], r["solution_length"] // 4 * 4)].append(a["output_tokens"])
    assert [tuple(k) for k in out[["model", "L"]].values] == sorted(groups)
    for row in out.itertuples():
        tokens = groups[(row.model, row.L)]
        assert row.attempts == len(tokens)
        assert row.output_tokens_mean == pytest.approx(statistics.fmean(tokens))
        assert row.output_tokens_median == pytest.approx(statistics.median(tokens))
        q90 = statistics.quantiles(tokens, n=10, method="inclusive")[-1] if len(tokens) > 1 else tokens[0]
        assert row.output_tokens_q90 == pytest.approx(q90)
    assert out["attempts"].sum() == len(random_rows) - 5


def test_tokens_by_length_with_the_real_attempts_schema() -> None:
    scores = _table(
        [
            _row("a", "i1", 0, 4, True),
            _row("a", "i1", 1, 4, False, violation="locked_door", step=1),
            _row("a", "i1", 0, 4, True, family="hanoi"),  # same id, another family: no attempt
            _row("a", "r1", 0, 4, True, mode="rollout"),  # rollouts are left out
        ]
    )
    full = {f.name: None for f in ATTEMPTS_SCHEMA}
    rows = [
        {**full, **_attempt("a", "i1", 0, 100), "attempt_key": "k0", "prompt_sha256": "x"},
        {**full, **_attempt("a", "i1", 1, 300), "attempt_key": "k1", "prompt_sha256": "x"},
        {**full, **_attempt("a", "r1", 0, 999, mode="rollout"), "attempt_key": "k2", "prompt_sha256": "x"},
    ]
    for r in rows:
        r.update(input_tokens=1, latency_s=0.0, cost_usd=0.0, tries=1, reused=False, via_batch=False)
    attempts = pa.Table.from_pylist(rows, schema=ATTEMPTS_SCHEMA).to_pandas()
    out = sb.tokens_by_length(scores, attempts)
    assert out[["model", "L", "attempts"]].values.tolist() == [["a", 4, 2]]
    assert out.iloc[0].output_tokens_mean == 200 and out.iloc[0].output_tokens_median == 200
    assert out.iloc[0].output_tokens_q90 == pytest.approx(280)
    empty = sb.tokens_by_length(scores, attempts.iloc[:0])
    assert empty.empty
    _assert_plain(empty, sb.TOKENS_BY_LENGTH_COLUMNS)


# --- every table ----------------------------------------------------------------------

_TABLES = {
    "progress_distribution": (sb.progress_distribution, sb.PROGRESS_DISTRIBUTION_COLUMNS),
    "first_violation_by_length": (sb.first_violation_by_length, sb.FIRST_VIOLATION_BY_LENGTH_COLUMNS),
    "violations_by_length": (sb.violations_by_length, sb.VIOLATIONS_BY_LENGTH_COLUMNS),
    "instance_progress": (sb.instance_progress, sb.INSTANCE_PROGRESS_COLUMNS),
    "model_pairs": (lambda s: sb.model_pairs(sb.instance_progress(s)), sb.MODEL_PAIR_COLUMNS),
}

#: the Arrow types the tables are written with (the lead copies these into ANALYSIS_SCHEMAS)
_S, _I, _F = pa.string(), pa.int64(), pa.float64()
_ARROW = {
    "progress_distribution": [_S, _F, _F, _I, _F],
    "first_violation_by_length": [_S, _I, _I, _I, *[_F] * 16],
    "violations_by_length": [_S, _I, _S, _S, _I, _I, _F],
    "instance_progress": [_S, _S, _I, _I, _F, _F],
    "model_pairs": [_S, _S, _I, _F, _F, _F, _I, _I, _I, _I, _S, _I, _F],
    "tokens_by_length": [_S, _I, _I, _F, _F, _F],
}


def _schema(name: str, columns: list[str]) -> pa.Schema:
    return pa.schema([("family", _S), *zip(columns, _ARROW[name], strict=True)])


def test_empty_input_gives_empty_tables_with_columns(random_scores) -> None:
    empty = random_scores.iloc[:0]
    for fn, columns in _TABLES.values():
        out = fn(empty)
        assert out.empty
        _assert_plain(out, columns)
    out = sb.tokens_by_length(empty, pd.DataFrame({c: [] for c in sb.TOKEN_ATTEMPT_COLUMNS}))
    assert out.empty
    _assert_plain(out, sb.TOKENS_BY_LENGTH_COLUMNS)


def test_row_order_and_index_do_not_matter(random_scores) -> None:
    shuffled = random_scores.sample(frac=1.0, random_state=7)
    shuffled.index = shuffled.index * 3 + 11
    for fn, _ in _TABLES.values():
        pd.testing.assert_frame_equal(fn(random_scores), fn(shuffled))


def _to_table(df: pd.DataFrame, schema: pa.Schema) -> pa.Table:
    """As ``tasks.analyse.scores.to_table`` writes analysis tables (not imported: Prefect is slow
    to import)."""
    return pa.Table.from_pylist(df.astype(object).where(df.notna(), None).to_dict("records"), schema=schema)


def test_tables_write_with_their_arrow_schemas(random_scores) -> None:
    attempts = pd.DataFrame(
        [_attempt(m, i, s, 5) for m, i, s in random_scores[["model", "instance_id", "sample"]].values]
    )
    tables = {name: fn(random_scores) for name, (fn, _) in _TABLES.items()}
    tables["tokens_by_length"] = sb.tokens_by_length(random_scores, attempts)
    columns = {name: cols for name, (_, cols) in _TABLES.items()}
    columns["tokens_by_length"] = sb.TOKENS_BY_LENGTH_COLUMNS
    for name, df in tables.items():
        schema = _schema(name, columns[name])
        table = _to_table(df.assign(family="maze")[schema.names], schema)
        assert table.num_rows == len(df) > 0
        if name in ANALYSIS_SCHEMAS:  # once wired up, the registered schema must agree
            assert ANALYSIS_SCHEMAS[name].names == schema.names
            assert ANALYSIS_SCHEMAS[name].types == schema.types


def test_a_model_with_no_failures(random_scores) -> None:
    perfect = _table([_row("zz", f"i{k:03d}", 0, 3 + k % 17, True) for k in range(10)])
    both = pd.concat([random_scores, perfect], ignore_index=True)
    dist = sb.progress_distribution(both)
    assert dist[dist.model == "zz"]["count"].tolist() == [0] * 10 + [10]
    assert "zz" not in set(sb.first_violation_by_length(both).model)
    assert set(sb.violations_by_length(both).query("model == 'zz'").violation) == {"none"}
    pairs = sb.model_pairs(sb.instance_progress(both))
    zz = pairs[pairs.model_b == "zz"]
    assert (zz.weaker != "zz").all()  # never the weaker one
    assert (zz["a_better"] == 0).all()


# --- figures --------------------------------------------------------------------------

ODD = "gpt<b>&$x$"


def _parse(svg: str) -> ET.Element:
    assert svg.startswith("<svg") and "<script" not in svg.lower()
    return ET.fromstring(svg)  # well-formed on its own, not only inline in HTML


@pytest.fixture(scope="module")
def odd_scores(random_scores) -> pd.DataFrame:
    return random_scores.assign(model=random_scores["model"].replace({"m1": ODD}))


@pytest.fixture(scope="module")
def figures(odd_scores) -> dict[str, object]:
    attempts = pd.DataFrame(
        [_attempt(m, i, s, 7 * s % 300) for m, i, s in odd_scores[["model", "instance_id", "sample"]].values]
    )
    ip = sb.instance_progress(odd_scores)
    return {
        "progress": lambda: sp.progress_distribution_svg(sb.progress_distribution(odd_scores)),
        "first_violation": lambda: sp.first_violation_by_length_svg(sb.first_violation_by_length(odd_scores)),
        "violations": lambda: sp.violation_types_by_length_svg(sb.violations_by_length(odd_scores)),
        "pairs": lambda: sp.model_pair_scatter_svg(ip, sb.model_pairs(ip)),
        "tokens": lambda: sp.tokens_by_length_svg(sb.tokens_by_length(odd_scores, attempts)),
    }


@pytest.mark.parametrize("name", ["progress", "first_violation", "violations", "pairs", "tokens"])
def test_figures_are_well_formed_escaped_and_deterministic(figures, name) -> None:
    svg = figures[name]()
    _parse(svg)
    assert "gpt&lt;b&gt;&amp;$x$" in svg and "<b>" not in svg  # escaped, and no TeX
    assert svg == figures[name]()
    assert len(svg) < 300_000


def test_figures_without_data_are_placeholders() -> None:
    empty = _table([]).iloc[:0]
    ip = sb.instance_progress(empty)
    for svg in [
        sp.progress_distribution_svg(sb.progress_distribution(empty)),
        sp.first_violation_by_length_svg(sb.first_violation_by_length(empty)),
        sp.violation_types_by_length_svg(sb.violations_by_length(empty)),
        sp.model_pair_scatter_svg(ip, sb.model_pairs(ip)),
        sp.tokens_by_length_svg(pd.DataFrame(columns=sb.TOKENS_BY_LENGTH_COLUMNS)),
    ]:
        assert "<text" in svg
        _parse(svg)


def test_capped_figures_say_what_they_leave_out() -> None:
    rows = [
        _row(f"model{m}", f"i{k}", 0, 4 + k % 3, k % 2 == 0, violation="locked_door", step=1, progress=0.25)
        for m in range(8)
        for k in range(6)
    ]
    scores = _table(rows)
    svg = sp.violation_types_by_length_svg(sb.violations_by_length(scores))
    _parse(svg)
    assert "6 of 8 models shown; not shown: model6, model7" in svg
    ip = sb.instance_progress(scores)
    svg = sp.model_pair_scatter_svg(ip, sb.model_pairs(ip))
    _parse(svg)
    assert "6 of 28 model pairs shown" in svg


def test_many_pair_points_become_a_small_2d_histogram() -> None:
    rng = np.random.default_rng(5)

    def progress(models: list[str], n: int) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "model": np.repeat(models, n),
                "instance_id": np.tile([f"i{k}" for k in range(n)], len(models)),
                "L": 5,
                "attempts": 1,
                "progress_ratio_mean": rng.random(len(models) * n),
                "success_rate": 0.0,
            }
        )

    many = progress(["a", "b", "c"], 7_000)  # three pairs, 21,000 points in all: histograms
    svg = sp.model_pair_scatter_svg(many, sb.model_pairs(many))
    _parse(svg)
    assert "instances per cell" in svg and len(svg) < 300_000
    assert "mathdefault" not in svg  # colour bar labels are plain numbers, not raw TeX
    few = progress(["a", "b"], 1_000)  # 1,000 points: a scatter, rasterised
    svg = sp.model_pair_scatter_svg(few, sb.model_pairs(few))
    _parse(svg)
    assert "instances per cell" not in svg and "<image" in svg and len(svg) < 300_000
