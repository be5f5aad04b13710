"""The world-model paper's shape readouts: Table 1's environment selection and the W_trans
patterns A/B/C of Appendix J.

- :func:`environment_selection` (Table 1, Section 4 "Trigger-environment selection"): an
  environment is selected when its one-dimensional dd sweep (a) is monotone for every
  agent, (b) has the same shape for every agent, and (c) drops by at least 20 points for
  each agent (min over agents of the largest drop >= 0.20);
- :func:`band_patterns` (Appendix J): W_trans(d) per agent read as Pattern A (sharpening:
  non-increasing in d, ending at a width <= 1), B (constant) or C (broadening:
  non-decreasing), with the counts the cells' Wilson intervals allow beside the point
  counts, so a pattern that one noisy cell could flip says so.

Both take the cell table (``analysis.worlds.grid``: env, model, sc, dd, n, successes, p,
wilson_low, wilson_high). Pure statistics; no I/O.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from horizonbench.analysis import phase, world_effects

#: criterion (c): the smallest per-agent largest drop along dd (Table 1: 20 pp)
MIN_DROP = 0.20
#: a curve whose range is below this is "flat" (Table 1's ToolDAG mini: 0 pp)
FLAT_RANGE = 0.10
#: Appendix J's band and Pattern A's final width
BAND = (phase.BAND_LOW, phase.BAND_HIGH)
A_FINAL_WIDTH = 1
#: the closed band's slack, as ``phase.w_trans`` (30/100 counts as 0.30)
_TOL = 1e-9
PATTERN_NAMES = {"A": "sharpening", "B": "constant", "C": "broadening"}

SELECTION_COLUMNS = [
    "env",
    "model",
    "dd_levels",
    "p_by_dd",
    "shape",
    "max_drop",
    "drop_low",
    "drop_high",
    "monotone",
    "shapes_match",
    "min_max_drop",
    "selected",
    "reason",
]
PATTERN_COLUMNS = [
    "env",
    "model",
    "dd_levels",
    "w_trans",
    "w_trans_low",
    "w_trans_high",
    "pattern",
    "pattern_name",
    "stable",
]


def curve_shape(p, tol: float = 0.0, flat: float = FLAT_RANGE) -> str:
    """The shape of a success curve along dd (ascending), in Table 1's words: ``flat``
    (range below ``flat``), ``monotone`` (never rises by more than ``tol``),
    ``increasing``, ``hump`` (highest inside, lower at both ends), ``u-shape`` (lowest
    inside) or ``mixed``; ``single level`` for a curve of one point."""
    v = np.asarray(p, dtype=float)
    if v.size < 2:
        return "single level"
    if np.ptp(v) < flat:
        return "flat"
    steps = np.diff(v)
    if (steps <= tol).all():
        return "monotone"
    if (steps >= -tol).all():
        return "increasing"
    top, bottom = int(np.argmax(v)), int(np.argmin(v))
    if 0 < top < v.size - 1 and v[top] > max(v[0], v[-1]) + tol:
        return "hump"
    if 0 < bottom < v.size - 1 and v[bottom] < min(v[0], v[-1]) - tol:
        return "u-shape"
    return "mixed"


def largest_drop(successes, n) -> tuple[float, int, int]:
    """The largest ``p_i - p_j`` with ``i`` before ``j`` (0 when the curve never falls),
    with the two indices (equal when it never falls)."""
    k = np.asarray(successes, dtype=float)
    m = np.asarray(n, dtype=float)
    p = k / m
    best, at = 0.0, (0, 0)
    for j in range(1, p.size):
        i = int(np.argmax(p[:j]))
        if p[i] - p[j] > best:
            best, at = float(p[i] - p[j]), (i, j)
    return best, at[0], at[1]


def _dd_curve(part: pd.DataFrame) -> pd.DataFrame:
    """One agent's dd sweep: the cells of each dd pooled over sc."""
    return part.groupby("dd", sort=True)[["successes", "n"]].sum().reset_index()


def environment_selection(cells: pd.DataFrame, min_drop: float = MIN_DROP, tol: float = 0.0) -> pd.DataFrame:
    """Table 1's rule over a run's cells, one row per (env, agent) with the environment's
    verdict repeated on each of its rows.

    Each agent's dd sweep is its success per dd pooled over the run's sc values (the
    paper's pilot swept dd alone; a grid run pools its rows). ``selected`` = (a) every
    agent's shape is ``monotone`` AND (b) all agents share one shape (two agents at
    least: one agent cannot agree with another) AND (c) ``min_max_drop`` >= ``min_drop``.
    ``reason`` names each criterion that failed. ``drop_low``/``drop_high`` are the
    Newcombe 95% interval of the agent's largest drop.
    """
    rows: list[dict] = []
    measured = cells[cells["n"] > 0] if len(cells) else cells
    for env, part in measured.groupby("env", sort=True):
        agents = []
        for model, sub in part.groupby("model", sort=True):
            curve = _dd_curve(sub)
            k, n = curve["successes"].to_numpy(int), curve["n"].to_numpy(int)
            p = k / n
            drop, i, j = largest_drop(k, n)
            low, high = (
                world_effects.newcombe_interval(int(k[i]), int(n[i]), int(k[j]), int(n[j]))
                if i != j
                else (0.0, 0.0)
            )
            agents.append(
                {
                    "env": str(env),
                    "model": str(model),
                    "dd_levels": " ".join(str(int(d)) for d in curve["dd"]),
                    "p_by_dd": " ".join(f"{x:.2f}" for x in p),
                    "shape": curve_shape(p, tol),
                    "max_drop": drop,
                    "drop_low": float(low),
                    "drop_high": float(high),
                }
            )
        shapes = [a["shape"] for a in agents]
        monotone = all(s == "monotone" for s in shapes)
        match = len(agents) >= 2 and len(set(shapes)) == 1
        least = min(a["max_drop"] for a in agents)
        reasons = []
        if not monotone:
            reasons.append("(a) not monotone: " + ", ".join(f"{a['model']} {a['shape']}" for a in agents))
        if not match:
            reasons.append("(b) " + ("one agent only" if len(agents) < 2 else "shapes differ"))
        if least < min_drop - 1e-9:
            reasons.append(f"(c) min max drop {100 * least:.0f} pp < {100 * min_drop:.0f} pp")
        for a in agents:
            rows.append(
                {
                    **a,
                    "monotone": a["shape"] == "monotone",
                    "shapes_match": match,
                    "min_max_drop": least,
                    "selected": not reasons,
                    "reason": "; ".join(reasons) or None,
                }
            )
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in SELECTION_COLUMNS})
    return pd.DataFrame(rows, columns=SELECTION_COLUMNS)


def pattern(widths) -> str | None:
    """Appendix J's pattern of W_trans(d) over ascending d: ``B`` when constant, ``A``
    when non-increasing and ending at most 1 wide, ``C`` when non-decreasing, None
    otherwise (or with fewer than two dd values). Constant comes first: a flat band meets
    A's and C's inequalities too, and "constant" is the stronger statement."""
    w = np.asarray(widths, dtype=int)
    if w.size < 2:
        return None
    steps = np.diff(w)
    if (steps == 0).all():
        return "B"
    if (steps <= 0).all():
        return "A" if w[-1] <= A_FINAL_WIDTH else None
    if (steps >= 0).all():
        return "C"
    return None


def band_patterns(cells: pd.DataFrame, low: float = BAND[0], high: float = BAND[1]) -> pd.DataFrame:
    """Per (env, agent): W_trans(d) by point estimate (``phase.w_trans``), the counts of
    cells whose Wilson interval lies wholly in the band (``w_trans_low``) or meets it
    (``w_trans_high``), the pattern of the point counts, and ``stable``: the low and high
    counts give the same pattern (a pattern read from cells that could sit on either
    side of 0.30 or 0.70 is not)."""
    rows = []
    measured = cells[cells["n"] > 0] if len(cells) else cells
    for env, part in measured.groupby("env", sort=True):
        widths = phase.w_trans(part, low, high)
        for model, sub in part.groupby("model", sort=True):
            point = widths[widths["model"] == model].sort_values("dd")
            surely, maybe = [], []
            for _, cell in sub.groupby("dd", sort=True):
                lo, hi = cell["wilson_low"].to_numpy(float), cell["wilson_high"].to_numpy(float)
                surely.append(int(((lo >= low - _TOL) & (hi <= high + _TOL)).sum()))
                maybe.append(int(((hi >= low - _TOL) & (lo <= high + _TOL)).sum()))
            found = pattern(point["w_trans"].to_numpy(int))
            rows.append(
                {
                    "env": str(env),
                    "model": str(model),
                    "dd_levels": " ".join(str(int(d)) for d in point["dd"]),
                    "w_trans": " ".join(str(int(w)) for w in point["w_trans"]),
                    "w_trans_low": " ".join(map(str, surely)),
                    "w_trans_high": " ".join(map(str, maybe)),
                    "pattern": found,
                    "pattern_name": PATTERN_NAMES.get(found or "", "none"),
                    "stable": pattern(surely) == found == pattern(maybe),
                }
            )
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in PATTERN_COLUMNS})
    return pd.DataFrame(rows, columns=PATTERN_COLUMNS)


def paper_tables(
    measured: pd.DataFrame,
    cells: pd.DataFrame,
    cliffs: pd.DataFrame,
    unwinnable: pd.DataFrame | None = None,
    g1b_pair: tuple[int, int, int] | None = None,
) -> dict[str, pd.DataFrame]:
    """The paper's tables by file name (``<run>/analysis/worlds_<name>.parquet``), from
    the measured episodes (``analysis.worlds.eligible``; ``unwinnable`` the T < L* ones),
    the cell table and the cliff table: Table 5 (``ablation_deltas``), Table 10
    (``model_pairs``), G1b (``g1b``, on the backdrop's episodes only, at ``g1b_pair`` =
    (sc_from, sc_to, dd) when locked, else each agent's largest drop), Table 1
    (``env_selection``) and the W_trans patterns (``band_patterns``)."""
    return {
        "ablation_deltas": world_effects.ablation_deltas(measured, unwinnable),
        "model_pairs": world_effects.model_pairs(cells),
        "g1b": world_effects.g1b(world_effects.backdrop_only(measured), cliffs, pair=g1b_pair),
        "env_selection": environment_selection(cells),
        "band_patterns": band_patterns(cells),
    }
