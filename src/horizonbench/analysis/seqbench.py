"""seqBench-style analysis tables: how far plans get, where they break, and how models
disagree, computed from the scores table of ONE family label.

Every function takes the answered attempts of one family label (``SCORES_SCHEMA``
columns; the caller filters ``answered`` and adds the ``family`` column of the output)
and returns a frame with a fixed column list (the ``*_COLUMNS`` constants), plain dtypes
(``int64``, ``float64``, ``object`` strings), a deterministic row order and, on empty
input, no rows but the same columns and dtypes.

The functions are vectorised: rows are turned into integer codes once (``_codes``) and
grouped with numpy, never looped over in Python, so a million score rows take well
under a second per table. They normalise their input as ``summary._prepare`` does
(numbers through ``summary._float``, rows without a ``solution_length`` left out,
``L = solution_length // bin_width * bin_width``) but read only the columns they need,
as codes: ``_prepare`` converts every text column to Python strings, which costs seconds
on a million rows.

Tables:

* :func:`progress_distribution` -- seqBench's progress-ratio distributions;
* :func:`first_violation_by_length` -- Figure 10: the first error's step against L, beside
  the constant-rate expectation, with a calibrated test of a rising per-step hazard;
* :func:`violations_by_length` -- violation types (and seqBench categories) per L bin;
* :func:`instance_progress` and :func:`model_pairs` -- Figure 13's performance
  inversions between models on shared instances;
* :func:`tokens_by_length` -- output tokens against L (joins the attempts table).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from horizonbench.analysis.hazard import expected_first_step, hazard_trend
from horizonbench.analysis.summary import NO_VIOLATION, _categorizer, _empty, _float

#: one row per (model, bin), 11 bins a model: ``[bin_low, bin_high)`` for the ten equal
#: bins of [0, 1), then the complete plans (``bin_low == bin_high == 1.0``)
PROGRESS_DISTRIBUTION_COLUMNS = ["model", "bin_low", "bin_high", "count", "share"]
#: one row per (model, L range) with at least one located first violation
FIRST_VIOLATION_BY_LENGTH_COLUMNS = [
    "model",
    "L_low",
    "L_high",
    "attempts",
    "relative_position_mean",
    "relative_position_median",
    "relative_position_q25",
    "relative_position_q75",
    "first_violation_step_mean",
    "first_violation_step_median",
    "first_violation_step_q25",
    "first_violation_step_q75",
    "expected_step_mean",
    "expected_step_median",
    "expected_step_q25",
    "expected_step_q75",
    "constant_eps",
    "hazard_slope",
    "hazard_slope_low",
    "hazard_slope_high",
]
#: one row per (model, L bin, violation); successes are the violation ``"none"``
VIOLATIONS_BY_LENGTH_COLUMNS = ["model", "L", "violation", "category", "count", "attempts", "share"]
#: one row per (model, instance_id)
INSTANCE_PROGRESS_COLUMNS = ["model", "instance_id", "L", "attempts", "progress_ratio_mean", "success_rate"]
#: one row per pair of models (``model_a < model_b`` by name)
MODEL_PAIR_COLUMNS = [
    "model_a",
    "model_b",
    "instances",
    "progress_mean_a",
    "progress_mean_b",
    "progress_corr",
    "a_better",
    "b_better",
    "a_only_solved",
    "b_only_solved",
    "weaker",
    "inversions",
    "inversion_share",
]
#: one row per (model, L bin) with at least one whole-plan attempt matched to its tokens
TOKENS_BY_LENGTH_COLUMNS = [
    "model",
    "L",
    "attempts",
    "output_tokens_mean",
    "output_tokens_median",
    "output_tokens_q90",
]

#: progress-ratio bins: ten of width 0.1 on [0, 1), then exactly 1.0. The edges are the
#: doubles nearest k/10, so a ratio k/n equal to m/10 (division is correctly rounded)
#: lands on its edge exactly and falls in the bin that starts there.
PROGRESS_EDGES = np.arange(11) / 10
#: the least progress difference an inversion needs (see :func:`model_pairs`)
INVERSION_MARGIN = 0.5
#: slack for float rounding in margin comparisons and ties of means
_EPS = 1e-9

_TEXT = frozenset({"model", "model_a", "model_b", "instance_id", "violation", "category", "weaker"})


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


def _codes(s: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes of a label column and its labels as sorted Python strings.

    Codes follow the sorted labels (so sorting by code sorts by label), and are -1 for
    missing values. Values that read the same as text (``1`` and ``"1"``) share a code,
    as ``summary._label`` makes them equal strings.
    """
    raw, uniques = pd.factorize(s, use_na_sentinel=True)
    raw = np.asarray(raw, dtype=np.int64)
    text = pd.Index(uniques).astype(str)
    if text.has_duplicates:  # distinct values with the same text: merge them (rare, slower)
        labels, rank = np.unique(np.asarray(text, dtype=object), return_inverse=True)
    else:  # sorting the string index is far faster than numpy's sort of Python strings
        order = np.asarray(text.argsort(), dtype=np.int64)
        labels = np.asarray(text, dtype=object)[order]
        rank = np.empty(order.size, dtype=np.int64)
        rank[order] = np.arange(order.size)
    remap = np.append(rank.astype(np.int64), -1)  # raw code -1 indexes the appended -1
    return remap[raw], labels.astype(object)


def _dense(key: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Dense group ids (0..G-1, in key order) of non-negative int keys below ``size``,
    and the key of each group. Counting beats sorting while the key space is small."""
    if size <= max(4 * key.size, 1 << 16):
        present = np.flatnonzero(np.bincount(key, minlength=size))
        lookup = np.zeros(size, dtype=np.int64)
        lookup[present] = np.arange(present.size)
        return lookup[key], present
    present, dense = np.unique(key, return_inverse=True)
    return dense.astype(np.int64), present


def _is(s: pd.Series, value: str) -> np.ndarray:
    """Boolean array: where ``s`` equals ``value`` (missing is False)."""
    return s.eq(value).fillna(False).to_numpy(dtype=bool)


@dataclasses.dataclass(frozen=True)
class _Rows:
    """The rows every table keeps (a solution length and a model, as ``summary._prepare``
    keeps rows with a solution length), as arrays aligned with each other."""

    keep: np.ndarray  # boolean mask over the input rows
    model: np.ndarray  # codes into ``labels``
    labels: np.ndarray  # model names, sorted
    solution_length: np.ndarray  # float64
    L: np.ndarray  # int64 bin: solution_length // bin_width * bin_width

    def col(self, scores: pd.DataFrame, name: str) -> np.ndarray:
        """A numeric column of the kept rows as float64 (NaN for missing)."""
        return _float(scores[name]).to_numpy()[self.keep]

    def codes(self, scores: pd.DataFrame, name: str) -> tuple[np.ndarray, np.ndarray]:
        """A label column of the kept rows as codes, and its labels."""
        codes, labels = _codes(scores[name])
        return codes[self.keep], labels


def _rows(scores: pd.DataFrame, bin_width: int = 1) -> _Rows:
    if bin_width < 1:
        raise ValueError(f"bin_width must be >= 1, got {bin_width}")
    model, labels = _codes(scores["model"])
    length = _float(scores["solution_length"]).to_numpy()
    keep = ~np.isnan(length) & (model >= 0)
    length = length[keep]
    L = (length // bin_width * bin_width).astype(np.int64)
    return _Rows(keep, model[keep], labels, length, L)


def _int_codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Codes 0..K-1 of int64 values in ascending order, and the K distinct values."""
    if values.size == 0:
        return values.astype(np.int64), values.astype(np.int64)
    low = int(values.min())
    dense, present = _dense(values - low, int(values.max()) - low + 1)
    return dense, present + low


def _finalise(out: pd.DataFrame, columns: list[str], ints: tuple[str, ...]) -> pd.DataFrame:
    """Column order and plain dtypes: int64 counts, object text, float64 otherwise."""
    out = out[columns].copy()
    for col in columns:
        if col in ints:
            out[col] = out[col].astype("int64")
        elif col in _TEXT:
            values = out[col].to_numpy(dtype=object, copy=True)
            values[pd.isna(values)] = None  # pandas 3 turns a None among strings into NaN
            out[col] = pd.Series(values, index=out.index, dtype=object)
        else:
            out[col] = out[col].astype("float64")
    return out.reset_index(drop=True)


def _empty_like(columns: list[str], ints: tuple[str, ...]) -> pd.DataFrame:
    return _empty(columns, {c: "int64" if c in ints else "object" for c in (*ints, *_TEXT) if c in columns})


def _group_stats(
    group: np.ndarray, values: np.ndarray, n_groups: int, quantiles: tuple[float, ...]
) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """Per group (codes 0..n_groups-1): count, mean and quantiles of ``values``.

    Quantiles interpolate linearly between order statistics, as ``numpy.quantile`` and
    pandas do by default. Empty groups get NaN.
    """
    counts = np.bincount(group, minlength=n_groups)
    sums = np.bincount(group, weights=values, minlength=n_groups)
    has = counts > 0
    means = np.full(n_groups, np.nan)
    means[has] = sums[has] / counts[has]
    # by value, then (stably) by group: each group's values in ascending order
    by_value = np.argsort(values)
    v = values[by_value][np.argsort(group[by_value], kind="stable")]
    starts = (np.cumsum(counts) - counts)[has]
    out = []
    for q in quantiles:
        pos = q * (counts[has] - 1)
        lo = np.floor(pos).astype(np.int64)
        hi = np.ceil(pos).astype(np.int64)
        a, b = v[starts + lo], v[starts + hi]
        res = np.full(n_groups, np.nan)
        res[has] = a + (b - a) * (pos - lo)
        out.append(res)
    return counts, means, out


# ---------------------------------------------------------------------------
# 1. progress-ratio distribution
# ---------------------------------------------------------------------------


def progress_distribution(scores: pd.DataFrame) -> pd.DataFrame:
    """Per model, the histogram of ``progress_ratio`` over 11 fixed bins.

    Bins 0..9 are ``[k/10, (k+1)/10)``; bin 10 holds the complete plans, a ratio of
    exactly 1.0 (``bin_low == bin_high == 1.0``). Every model has all 11 rows, empty
    bins with ``count`` 0. ``share`` is ``count`` over the model's attempts with a
    progress ratio (a missing ratio is left out); ratios outside [0, 1], which the
    scorers never write, are clipped into the end bins so every attempt is counted.
    Rows: models by name, bins from low to high.
    """
    ints = ("count",)
    rows = _rows(scores)
    progress = rows.col(scores, "progress_ratio")
    ok = ~np.isnan(progress)
    if not ok.any():
        return _empty_like(PROGRESS_DISTRIBUTION_COLUMNS, ints)
    model, progress = rows.model[ok], np.clip(progress[ok], 0.0, 1.0)
    model, present = _dense(model, rows.labels.size)
    n_bins = len(PROGRESS_EDGES)
    # side="right": a ratio on an edge belongs to the bin that starts there; 1.0 -> bin 10
    bins = np.searchsorted(PROGRESS_EDGES, progress, side="right") - 1
    counts = np.bincount(model * n_bins + bins, minlength=present.size * n_bins)
    totals = np.repeat(counts.reshape(-1, n_bins).sum(axis=1), n_bins)
    out = pd.DataFrame(
        {
            "model": np.repeat(rows.labels[present], n_bins),
            "bin_low": np.tile(PROGRESS_EDGES, present.size),
            "bin_high": np.tile(np.append(PROGRESS_EDGES[1:], 1.0), present.size),
            "count": counts,
            "share": counts / totals,
        }
    )
    return _finalise(out, PROGRESS_DISTRIBUTION_COLUMNS, ints)


# ---------------------------------------------------------------------------
# 2. first violation against L ranges (the leftward shift)
# ---------------------------------------------------------------------------


def length_ranges(L: np.ndarray, groups: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split the integer span ``min(L)..max(L)`` into up to ``groups`` ranges of
    (nearly) equal width and say which range each L is in.

    With ``span = max - min + 1``, range k holds the offsets ``d = L - min`` with
    ``k * span / groups <= d < (k + 1) * span / groups``: widths differ by at most one,
    and ranges with no integer in them (``span < groups``) are dropped. Returns the
    inclusive ``L_low`` and ``L_high`` of the kept ranges and each L's index into them.
    """
    if groups < 1:
        raise ValueError(f"groups must be >= 1, got {groups}")
    L = np.asarray(L, dtype=np.int64)
    if L.size == 0:
        empty = np.empty(0, np.int64)
        return empty, empty, empty
    low, span = int(L.min()), int(L.max() - L.min() + 1)
    k = np.arange(groups + 1, dtype=np.int64)
    starts = low + (-(-k * span // groups))  # low + ceil(k * span / groups)
    lows, highs = starts[:-1], starts[1:] - 1
    kept = lows <= highs
    index = (L - low) * groups // span
    renumber = np.cumsum(kept) - 1
    return lows[kept], highs[kept], renumber[index]


def _deviation_steps(scores: pd.DataFrame, rows: _Rows, step: np.ndarray) -> np.ndarray:
    """The step the hazard test reads per kept row: a maze row's first deviation from
    every optimal plan (``round(progress_ratio * solution_length)``: the maze's progress
    counts the leading actions that stay on some optimal plan), else the first violation.

    Why: the maze locates a violation where it is DETECTED, which can be later than the
    mistake (a skipped key pickup shows at the locked door), and that delay alone made a
    constant-rate model's hazard look rising (16 of 100 constant-eps studies through real
    maze scoring flagged on ``first_violation_step``, 2 of 100 on the deviation:
    tests/test_analysis_hazard.py). Maze rows are the ones with a ``num_keys`` (a maze-only
    scores column); a puzzle's illegal move is detected where it is made.
    """
    if "num_keys" not in scores or "progress_ratio" not in scores:
        return step
    maze = ~np.isnan(rows.col(scores, "num_keys"))
    deviation = np.round(rows.col(scores, "progress_ratio") * rows.solution_length)
    return np.where(maze & ~np.isnan(deviation) & ~np.isnan(step), deviation, step)


def first_violation_by_length(scores: pd.DataFrame, groups: int = 4) -> pd.DataFrame:
    """Where the first violation falls, per model and range of L (seqBench Figure 10).

    The attempts are those of ``summary.first_violation_hist``: a located first violation
    (``first_violation_step`` not null; a success never has one) and
    ``solution_length > 0``. ``relative_position`` is, as there,
    ``first_violation_step / solution_length`` (above 1 when a plan goes wrong after
    running past the optimal length). A smaller median at larger L is seqBench's
    "leftward shift": longer problems fail earlier in relative terms.

    The L ranges (:func:`length_ranges`) split the L span of ALL the given attempts,
    successes included, into up to ``groups`` ranges of equal width, the same for every
    model so they compare. ``L_low``/``L_high`` are inclusive. Only (model, range) pairs
    with at least one such attempt get a row; quantiles interpolate linearly.
    Rows: models by name, ranges from low to high.

    **On the paper's axis** (issue 22): the relative position falls with L under a
    constant per-step error too (the first violation's absolute step is then geometric,
    truncated at L, the same at every L), so the table also gives the absolute step
    (``first_violation_step_median``/``_q25``/``_q75``) beside what a constant rate
    predicts for the same attempts (``expected_step_*``: :func:`hazard.expected_first_step`
    over the range's attempts, successes included, at the model's ``constant_eps``), and
    per model (repeated on each of its rows) the test of a hazard rising along the plan
    (:func:`hazard.hazard_trend` over all the model's attempts with a success or a located
    violation: ``hazard_slope`` in log-odds per ``hazard.STEP_UNIT`` steps, with its 95%
    interval; "rising" when ``hazard_slope_low > 0``). Failed attempts without a located
    violation are left out of the test; a maze attempt's event is its first deviation
    from every optimal plan, not the later step where the violation was detected
    (:func:`_deviation_steps`).
    """
    ints = ("L_low", "L_high", "attempts")
    if groups < 1:
        raise ValueError(f"groups must be >= 1, got {groups}")
    rows = _rows(scores)
    step = rows.col(scores, "first_violation_step")
    located = ~np.isnan(step) & (rows.solution_length > 0)
    if not located.any():
        return _empty_like(FIRST_VIOLATION_BY_LENGTH_COLUMNS, ints)
    lows, highs, where = length_ranges(rows.L, groups)
    n_ranges = lows.size
    n_groups = rows.labels.size * n_ranges
    success = rows.col(scores, "success") == 1.0 if "success" in scores else np.zeros(step.size, bool)
    usable = (located | success) & (rows.solution_length > 0)
    event = _deviation_steps(scores, rows, step)
    trend: dict[int, tuple[float, float, float, float]] = {}
    expected = np.full((n_groups, 4), np.nan)
    for m in np.unique(rows.model[located]):
        mine = usable & (rows.model == m)
        t = hazard_trend(rows.solution_length[mine], np.where(success[mine], np.nan, event[mine]))
        trend[int(m)] = (t.eps, t.slope, t.slope_low, t.slope_high)
        for r in range(n_ranges):
            cell = mine & (where == r)
            if cell.any():
                mean, (e25, e50, e75) = expected_first_step(rows.solution_length[cell], t.eps)
                expected[int(m) * n_ranges + r] = (mean, e50, e25, e75)
    group = rows.model[located] * n_ranges + where[located]
    step = step[located]
    rel = step / rows.solution_length[located]
    counts, means, (median, q25, q75) = _group_stats(group, rel, n_groups, (0.5, 0.25, 0.75))
    _, step_mean, (step_median, step_q25, step_q75) = _group_stats(group, step, n_groups, (0.5, 0.25, 0.75))
    ids = np.flatnonzero(counts)
    per_model = np.array([trend[int(m)] for m in ids // n_ranges]).reshape(-1, 4)
    out = pd.DataFrame(
        {
            "model": rows.labels[ids // n_ranges],
            "L_low": lows[ids % n_ranges],
            "L_high": highs[ids % n_ranges],
            "attempts": counts[ids],
            "relative_position_mean": means[ids],
            "relative_position_median": median[ids],
            "relative_position_q25": q25[ids],
            "relative_position_q75": q75[ids],
            "first_violation_step_mean": step_mean[ids],
            "first_violation_step_median": step_median[ids],
            "first_violation_step_q25": step_q25[ids],
            "first_violation_step_q75": step_q75[ids],
            "expected_step_mean": expected[ids, 0],
            "expected_step_median": expected[ids, 1],
            "expected_step_q25": expected[ids, 2],
            "expected_step_q75": expected[ids, 3],
            "constant_eps": per_model[:, 0],
            "hazard_slope": per_model[:, 1],
            "hazard_slope_low": per_model[:, 2],
            "hazard_slope_high": per_model[:, 3],
        }
    )
    return _finalise(out, FIRST_VIOLATION_BY_LENGTH_COLUMNS, ints)


# ---------------------------------------------------------------------------
# 3. violation types against L
# ---------------------------------------------------------------------------


def violations_by_length(scores: pd.DataFrame, bin_width: int = 1) -> pd.DataFrame:
    """How often each violation occurs per model and L bin (lower edge
    ``solution_length // bin_width * bin_width``), successes counted as ``"none"``.

    ``attempts`` is the bin's attempts (all violations and the successes), ``share`` is
    ``count / attempts``, so a bin's shares sum to 1. ``category`` is seqBench's failure
    category (``summary.violation_counts`` does the same): ``"none"`` for successes,
    null for a violation that is not the maze's. Rows: models by name, L ascending,
    then violations by count (most first) and name.
    """
    ints = ("L", "count", "attempts")
    rows = _rows(scores, bin_width)
    if rows.model.size == 0:
        return _empty_like(VIOLATIONS_BY_LENGTH_COLUMNS, ints)
    violation, vlabels = _codes(scores["violation"].fillna(NO_VIOLATION))
    violation = violation[rows.keep]
    lcode, lvalues = _int_codes(rows.L)
    n_l, n_v = lvalues.size, vlabels.size
    group, keys = _dense((rows.model * n_l + lcode) * n_v + violation, rows.labels.size * n_l * n_v)
    counts = np.bincount(group)
    cell = keys // n_v  # (model, L) of each group, ascending
    attempts = np.bincount(cell, weights=counts)[cell].astype(np.int64)
    v = keys % n_v
    # model, L, then most frequent first, then violation name (codes follow names)
    order = np.lexsort((v, -counts, cell))
    category = _categorizer()
    categories = np.array([category(x) for x in vlabels], dtype=object)
    out = pd.DataFrame(
        {
            "model": rows.labels[cell // n_l],
            "L": lvalues[cell % n_l],
            "violation": vlabels[v],
            "category": categories[v],
            "count": counts,
            "attempts": attempts,
            "share": counts / attempts,
        }
    ).iloc[order]
    return _finalise(out, VIOLATIONS_BY_LENGTH_COLUMNS, ints)


# ---------------------------------------------------------------------------
# 4. per-instance progress and model pairs (performance inversions)
# ---------------------------------------------------------------------------


def instance_progress(scores: pd.DataFrame) -> pd.DataFrame:
    """Per model and instance: ``L`` (its ``solution_length``; the least one should an
    instance somehow carry two), the attempts (samples), their mean progress ratio and
    success rate (NaNs are left out of each mean). Instance ids are unique within a
    family, so pass one family label. Rows: models by name, then instance ids."""
    ints = ("L", "attempts")
    rows = _rows(scores)
    if rows.model.size == 0:
        return _empty_like(INSTANCE_PROGRESS_COLUMNS, ints)
    inst, ilabels = rows.codes(scores, "instance_id")
    n_i = ilabels.size + 1  # a missing instance id gets its own code, n_i - 1
    inst = np.where(inst < 0, n_i - 1, inst)
    group, keys = _dense(rows.model * n_i + inst, rows.labels.size * n_i)
    n_groups = keys.size
    attempts = np.bincount(group, minlength=n_groups)
    L = np.full(n_groups, np.inf)
    np.minimum.at(L, group, rows.solution_length)
    means = []
    for name in ("progress_ratio", "success"):
        x = rows.col(scores, name)
        ok = ~np.isnan(x)
        n = np.bincount(group[ok], minlength=n_groups)
        total = np.bincount(group[ok], weights=x[ok], minlength=n_groups)
        mean = np.full(n_groups, np.nan)
        mean[n > 0] = total[n > 0] / n[n > 0]
        means.append(mean)
    inst_of = keys % n_i
    out = pd.DataFrame(
        {
            "model": rows.labels[keys // n_i],
            "instance_id": np.append(ilabels, None)[inst_of],
            "L": np.floor(L),
            "attempts": attempts,
            "progress_ratio_mean": means[0],
            "success_rate": means[1],
        }
    )
    return _finalise(out, INSTANCE_PROGRESS_COLUMNS, ints)


def pair_matrix(instance_progress: pd.DataFrame, columns: tuple[str, ...]) -> tuple[np.ndarray, ...]:
    """The ``columns`` of an :func:`instance_progress` table as instances x models
    matrices (NaN where a model has no row for an instance), then a boolean matrix of
    which (instance, model) cells have a row, then the models in column order."""
    model, models = _codes(instance_progress["model"])
    inst, instances = _codes(instance_progress["instance_id"])
    ok = (model >= 0) & (inst >= 0)  # a row without a model or an instance id pairs nothing
    model, inst = model[ok], inst[ok]
    mats = []
    for col in columns:
        mat = np.full((instances.size, models.size), np.nan)
        mat[inst, model] = _float(instance_progress[col]).to_numpy()[ok]
        mats.append(mat)
    present = np.zeros((instances.size, models.size), dtype=bool)
    present[inst, model] = True
    return (*mats, present, models)


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    if x.size < 2 or x.min() == x.max() or y.min() == y.max():
        return float("nan")  # undefined: too few points, or a constant
    # elementwise sums, not ``@``: BLAS threads cost more than they save here
    dx, dy = x - x.mean(), y - y.mean()
    sxx, syy = float((dx * dx).sum()), float((dy * dy).sum())
    if sxx <= 0.0 or syy <= 0.0:
        return float("nan")
    return float(np.clip((dx * dy).sum() / np.sqrt(sxx * syy), -1.0, 1.0))


def model_pairs(instance_progress: pd.DataFrame, margin: float = INVERSION_MARGIN) -> pd.DataFrame:
    """Every pair of models (``model_a < model_b`` by name) compared on their SHARED
    instances (those both have a row for in ``instance_progress``): seqBench Figure 13.

    Per pair, with ``p_a``/``p_b`` a model's mean progress ratio on an instance and
    ``s_a``/``s_b`` its success rate there:

    * ``instances``: shared instances; ``progress_mean_a``/``_b``: the mean of ``p_a``
      and of ``p_b`` over them (NaN with none shared). An instance where ``p_a`` or
      ``p_b`` is missing counts in ``instances`` but in none of the comparisons below;
    * ``progress_corr``: Pearson correlation of ``p_a`` and ``p_b`` (NaN with fewer
      than two shared instances or when either is constant);
    * ``a_better``: instances with ``p_a - p_b >= margin``; ``b_better`` likewise;
    * ``a_only_solved``: instances ``a`` solved in every attempt (``s_a == 1``) and ``b``
      in none (``s_b == 0``); ``b_only_solved`` likewise.

    **Inversion.** The *weaker* model of the pair is the one with the lower mean
    progress over the shared instances (``progress_mean_a`` against ``progress_mean_b``).
    An inversion is a shared instance on which the weaker model's progress is higher
    than the stronger one's by at least ``margin`` (0.5 by default): ``p_weak - p_strong
    >= margin``. So ``inversions`` equals ``a_better`` when ``b`` is stronger and
    ``b_better`` when ``a`` is; ``inversion_share`` is ``inversions / instances``.
    When the two means are equal (within 1e-9), or no instance is shared, there is no
    weaker model: ``weaker`` is null and ``inversions`` 0. Margin comparisons allow
    1e-9 for float rounding (0.7 - 0.2 counts as 0.5).

    Swapping the two models' names swaps the ``_a``/``_b`` columns and changes nothing
    else. Rows: pairs by ``model_a``, then ``model_b``.
    """
    ints = ("instances", "a_better", "b_better", "a_only_solved", "b_only_solved", "inversions")
    if instance_progress.empty:
        return _empty_like(MODEL_PAIR_COLUMNS, ints)
    columns = ("progress_ratio_mean", "success_rate")
    progress, success, has_row, models = pair_matrix(instance_progress, columns)
    rows = []
    for i in range(models.size):
        for j in range(i + 1, models.size):
            shared = has_row[:, i] & has_row[:, j]
            pa, pb = progress[shared, i], progress[shared, j]
            both = ~np.isnan(pa) & ~np.isnan(pb)
            sa, sb = success[shared, i], success[shared, j]
            n = int(shared.sum())
            mean_a = float(np.nanmean(pa)) if np.isfinite(pa).any() else float("nan")
            mean_b = float(np.nanmean(pb)) if np.isfinite(pb).any() else float("nan")
            diff = pa[both] - pb[both]
            a_better = int((diff >= margin - _EPS).sum())
            b_better = int((-diff >= margin - _EPS).sum())
            if n == 0 or not np.isfinite(mean_a - mean_b) or abs(mean_a - mean_b) <= _EPS:
                weaker, inversions = None, 0
            elif mean_a < mean_b:
                weaker, inversions = models[i], a_better
            else:
                weaker, inversions = models[j], b_better
            rows.append(
                {
                    "model_a": models[i],
                    "model_b": models[j],
                    "instances": n,
                    "progress_mean_a": mean_a,
                    "progress_mean_b": mean_b,
                    "progress_corr": _pearson(pa[both], pb[both]),
                    "a_better": a_better,
                    "b_better": b_better,
                    "a_only_solved": int(((sa == 1.0) & (sb == 0.0)).sum()),
                    "b_only_solved": int(((sb == 1.0) & (sa == 0.0)).sum()),
                    "weaker": weaker,
                    "inversions": inversions,
                    "inversion_share": inversions / n if n else float("nan"),
                }
            )
    if not rows:
        return _empty_like(MODEL_PAIR_COLUMNS, ints)
    return _finalise(pd.DataFrame(rows), MODEL_PAIR_COLUMNS, ints)


# ---------------------------------------------------------------------------
# 5. output tokens against L
# ---------------------------------------------------------------------------

#: the attempts columns :func:`tokens_by_length` reads (``response`` is not needed)
TOKEN_ATTEMPT_COLUMNS = ("model", "family", "instance_id", "sample", "mode", "turn", "output_tokens")
_KEY = ("model", "family", "instance_id", "sample")


def _shared_codes(left: pd.Series, right: pd.Series) -> tuple[np.ndarray, np.ndarray, int]:
    """Codes of two label columns in one space (equal text, equal code), and its size.

    A missing or left-only label never matches: missing values on the left get a code
    of their own, and right labels absent from the left (or missing) another.
    """
    lcodes, llabels = _codes(left)
    rcodes, rlabels = _codes(right)
    n = llabels.size
    where = pd.Index(llabels, dtype=object).get_indexer(pd.Index(rlabels, dtype=object))
    rmap = np.append(np.where(where >= 0, where, n + 1), n + 1)  # code -1 -> n + 1
    return np.where(lcodes >= 0, lcodes, n), rmap[rcodes], n + 2


def _join_keys(left: pd.DataFrame, right: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, int]:
    """One int64 key per row of each frame from the ``_KEY`` columns (equal key, equal
    columns), and the size of the key space. Keys are compressed whenever the next
    column could overflow int64."""
    lkey = np.zeros(len(left), dtype=np.int64)
    rkey = np.zeros(len(right), dtype=np.int64)
    size = 1
    for col in _KEY:
        if col == "sample":  # numbers: 1 and 1.0 are the same sample
            lc, rc, n = _shared_codes(_float(left[col]), _float(right[col]))
        else:
            lc, rc, n = _shared_codes(left[col], right[col])
        if size * n >= 2**62:
            codes, uniques = pd.factorize(np.concatenate([lkey, rkey]))
            lkey, rkey, size = codes[: lkey.size], codes[lkey.size :], len(uniques)
        lkey, rkey, size = lkey * n + lc, rkey * n + rc, size * n
    return lkey, rkey, size


def _first_match(lkey: np.ndarray, rkey: np.ndarray, size: int) -> np.ndarray:
    """For each left key, the index of the first right row with that key, or -1."""
    if size <= 4 * (lkey.size + rkey.size) + (1 << 16):  # a lookup table beats a search
        first = np.full(size, rkey.size, dtype=np.int64)
        np.minimum.at(first, rkey, np.arange(rkey.size, dtype=np.int64))
        found = first[lkey]
        return np.where(found < rkey.size, found, -1)
    uniq, first = np.unique(rkey, return_index=True)
    pos = np.minimum(np.searchsorted(uniq, lkey), uniq.size - 1)
    return np.where(uniq[pos] == lkey, first[pos], -1)


def tokens_by_length(scores: pd.DataFrame, attempts: pd.DataFrame, bin_width: int = 1) -> pd.DataFrame:
    """Output tokens of whole-plan answers per model and L bin.

    Scores with ``mode == "plan"`` (all of them if the column is missing) are joined to
    the attempts rows with ``mode == "plan"`` and ``turn == 0`` on (model, family,
    instance_id, sample). ``attempts`` needs only :data:`TOKEN_ATTEMPT_COLUMNS`. A
    score with no matching attempt, or whose ``output_tokens`` is missing, is left out;
    should an attempt key appear twice, its first row counts. ``attempts`` in the output
    counts the matched rows; the median and 90th percentile interpolate linearly.
    Rows: models by name, L ascending.
    """
    ints = ("L", "attempts")
    rows = _rows(scores, bin_width)
    plan = _is(scores["mode"], "plan")[rows.keep] if "mode" in scores else np.ones(rows.model.size, bool)
    att = attempts[_is(attempts["mode"], "plan") & (_float(attempts["turn"]).to_numpy() == 0)]
    if not plan.any() or att.empty:
        return _empty_like(TOKENS_BY_LENGTH_COLUMNS, ints)
    left = scores.loc[rows.keep, list(_KEY)]
    match = _first_match(*_join_keys(left, att))
    matched = plan & (match >= 0)
    tokens = np.full(match.size, np.nan)
    tokens[matched] = _float(att["output_tokens"]).to_numpy()[match[matched]]
    use = ~np.isnan(tokens)
    if not use.any():
        return _empty_like(TOKENS_BY_LENGTH_COLUMNS, ints)
    lcode, lvalues = _int_codes(rows.L[use])
    n_l = lvalues.size
    group = rows.model[use] * n_l + lcode
    counts, means, (median, q90) = _group_stats(group, tokens[use], rows.labels.size * n_l, (0.5, 0.9))
    ids = np.flatnonzero(counts)
    out = pd.DataFrame(
        {
            "model": rows.labels[ids // n_l],
            "L": lvalues[ids % n_l],
            "attempts": counts[ids],
            "output_tokens_mean": means[ids],
            "output_tokens_median": median[ids],
            "output_tokens_q90": q90[ids],
        }
    )
    return _finalise(out, TOKENS_BY_LENGTH_COLUMNS, ints)
