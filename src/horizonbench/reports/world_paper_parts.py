"""The report's parts laid out as the world-model paper's tables: Table 5 (Cliff's deltas of
the ablations), Table 10 (Cohen's h between agents on shared cells), the G1b summary, the
W_trans patterns of Appendix J, and Table 1's environment selection across environments.

Pure: the analysis tables (``analysis/world_effects.py``, ``analysis/world_shapes.py``) in,
DataFrames of display text out, with ``(column, header, format)`` specs beside them;
``reports/html.py`` turns them into HTML tables. Every number keeps its interval beside it,
as the paper's tables do not.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

__all__ = [
    "G1B_COLUMNS",
    "PATTERN_COLUMNS",
    "SELECTION_COLUMNS",
    "TABLE5_COLUMNS",
    "g1b_rows",
    "pair_table",
    "pattern_rows",
    "selection_columns",
    "selection_rows",
    "table5_rows",
]

#: Table 5's layout: one row per agent, cell and axis, the levels side by side
TABLE5_COLUMNS = [
    ("model", "agent", "text"),
    ("cell", "(sc, dd)", "text"),
    ("axis", "axis", "text"),
    ("levels", "levels vs. base", "text"),
    ("deltas", "δ", "text"),
    ("codes", "", "text"),
    ("intervals", "95% intervals (Newcombe)", "text"),
    ("deltas_all", "δ with T < L* as failures", "text"),
]
G1B_COLUMNS = [
    ("model", "agent", "text"),
    ("pair", "trigger pair", "text"),
    ("pair_chosen", "pair chosen", "text"),
    ("metric", "metric", "text"),
    ("n", "episodes (before / after)", "text"),
    ("mw_p", "one-sided Mann-Whitney p", "num"),
    ("p_holm", "Holm (α = 0.01)", "num"),
    ("hodges_lehmann", "Hodges-Lehmann shift", "num"),
    ("hl_ci", "95% interval (Moses)", "num-range"),
    ("rule", "shift ≥ 0.20", "text"),
    ("verdict", "metric", "text"),
    ("g1b", "G1b", "text"),
]
PATTERN_COLUMNS = [
    ("model", "agent", "text"),
    ("dd_levels", "dd", "text"),
    ("w_trans", "W_trans(dd)", "text"),
    ("w_trans_range", "by Wilson interval (surely – possibly)", "text"),
    ("pattern_text", "pattern", "text"),
    ("stable_text", "one noisy cell could change it", "text"),
]
#: the fixed columns of Table 1's layout (one shape column per agent goes between)
SELECTION_COLUMNS = [
    ("env", "environment", "text"),
    ("match", "match", "text"),
    ("min_max_drop_text", "min max Δp̂", "text"),
    ("selected_text", "selected", "text"),
    ("reason", "fails", "text"),
]
METRIC_NAMES = {
    "world_state_accuracy": "world-state accuracy",
    "action_validity": "action validity",
    "self_check_accuracy": "self-check accuracy",
}


def _rows(tables: Mapping[str, pd.DataFrame], name: str, env: str | None = None) -> pd.DataFrame:
    df = tables.get(name)
    if df is None or df.empty:
        return pd.DataFrame()
    return (df[df["env"] == env] if env is not None else df).reset_index(drop=True)


def _signed(value: float) -> str:
    return "—" if value is None or not math.isfinite(value) else f"{value:+.2f}"


def _interval(low: float, high: float) -> str:
    if not (math.isfinite(low) and math.isfinite(high)):
        return "—"
    return f"[{low:+.2f}, {high:+.2f}]"


def table5_rows(tables: Mapping[str, pd.DataFrame], env: str) -> pd.DataFrame:
    """Table 5 as printed: per (agent, cell, axis) the levels against the base, their
    deltas and codes in one row, with the intervals and the delta counting T < L*
    worlds as failures beside them."""
    df = _rows(tables, "ablation_deltas", env)
    if df.empty:
        return df
    out = []
    for (model, sc, dd, axis), part in df.groupby(["model", "sc", "dd", "axis"], sort=False):
        out.append(
            {
                "model": model,
                "cell": f"({sc}, {dd})",
                "axis": axis,
                "levels": "/".join(part["level"]) + f" vs. {part['backdrop'].iloc[0]}",
                "deltas": ", ".join(_signed(v) for v in part["cliffs_delta"]),
                "codes": ", ".join(c if isinstance(c, str) else "—" for c in part["magnitude"]),
                "intervals": ", ".join(
                    _interval(lo, hi) for lo, hi in zip(part["delta_low"], part["delta_high"], strict=True)
                ),
                "deltas_all": ", ".join(_signed(v) for v in part["delta_all"]),
            }
        )
    return pd.DataFrame(out)


def pair_table(
    tables: Mapping[str, pd.DataFrame], env: str
) -> tuple[pd.DataFrame, list[tuple[str, str, str]]]:
    """Table 10 as printed and its header: one row per pair of agents ("a − b") and one
    column per shared cell, each entry h, its code and its 95% interval. With more
    shared cells than pairs (a whole grid rather than the paper's three cells) the
    table is turned: one row per cell, one column per pair, so it stays readable."""
    df = _rows(tables, "model_pairs", env)
    if df.empty:
        return df, [("pair", "pair", "text")]
    pairs = list(dict.fromkeys(f"{a} − {b}" for a, b in zip(df["model_a"], df["model_b"], strict=True)))
    cells = sorted({(int(s), int(d)) for s, d in zip(df["sc"], df["dd"], strict=True)})
    by_pair = len(cells) <= len(pairs)
    keys, heads = (pairs, cells) if by_pair else ([f"({s}, {d})" for s, d in cells], pairs)
    out: dict[str, dict[str, str]] = {k: {"row": k} for k in keys}
    for rec in df.to_dict("records"):
        pair, cell = f"{rec['model_a']} − {rec['model_b']}", f"({rec['sc']}, {rec['dd']})"
        row, col = (pair, cell) if by_pair else (cell, pair)
        out[row][col] = f"{rec['cohens_h']:+.2f} {rec['magnitude']} {_interval(rec['h_low'], rec['h_high'])}"
    names = [f"({s}, {d})" for s, d in heads] if by_pair else heads
    columns = [("row", "pair" if by_pair else "(sc, dd)", "text"), *[(n, n, "text") for n in names]]
    return pd.DataFrame(list(out.values())), columns


def g1b_rows(tables: Mapping[str, pd.DataFrame], env: str) -> pd.DataFrame:
    """The G1b summary: the three metrics of each agent at its trigger pair, and how
    the pair was chosen (locked by ``worlds.g1b_pair``, or the data's largest drop)."""
    df = _rows(tables, "g1b", env)
    if df.empty:
        return df
    return df.assign(
        pair_chosen=df["pair_chosen"] if "pair_chosen" in df else "largest_drop",
        pair=[
            f"sc {a} → {b} at dd {d}" for a, b, d in zip(df["sc_from"], df["sc_to"], df["dd"], strict=True)
        ],
        metric=df["metric"].map(lambda m: METRIC_NAMES.get(m, m)),
        n=[f"{a} / {b}" for a, b in zip(df["n_from"], df["n_to"], strict=True)],
        hl_ci=list(zip(df["hl_low"], df["hl_high"], strict=True)),
        rule=df["shift_met"].map(lambda v: "yes" if v else "no"),
        verdict=df["metric_passes"].map(lambda v: "passes" if v else "fails"),
        g1b=df["g1b_passes"].map(lambda v: "passes" if v else "does not pass"),
    )


def pattern_rows(tables: Mapping[str, pd.DataFrame], env: str) -> pd.DataFrame:
    """The W_trans patterns: each agent's band widths, the range its cells' intervals
    allow, and the pattern of Appendix J."""
    df = _rows(tables, "band_patterns", env)
    if df.empty:
        return df
    return df.assign(
        w_trans_range=[f"{a} – {b}" for a, b in zip(df["w_trans_low"], df["w_trans_high"], strict=True)],
        pattern_text=[
            f"{p} ({n})" if isinstance(p, str) else "none of A/B/C"
            for p, n in zip(df["pattern"], df["pattern_name"], strict=True)
        ],
        stable_text=df["stable"].map(lambda v: "no" if v else "yes"),
    )


def selection_rows(tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Table 1 as printed: one row per environment, each agent's dd-sweep shape in its own
    column, then whether the shapes match, the smallest per-agent largest drop, the
    verdict and the criteria that failed."""
    df = _rows(tables, "env_selection")
    if df.empty:
        return df
    out = []
    for env, part in df.groupby("env", sort=True):
        first = part.iloc[0]
        row = {
            "env": env,
            "match": "✓" if first["shapes_match"] else "✗",
            "min_max_drop_text": f"{100 * first['min_max_drop']:.0f} pp",
            "selected_text": "selected" if first["selected"] else "not selected",
            "reason": first["reason"],
        }
        for rec in part.to_dict("records"):
            row[f"shape_{rec['model']}"] = f"{rec['shape']} ({rec['p_by_dd']})"
        out.append(row)
    return pd.DataFrame(out)


def selection_columns(tables: Mapping[str, pd.DataFrame]) -> list[tuple[str, str, str]]:
    """The header of :func:`selection_rows`: the environment, one shape column per agent
    (the success per dd in brackets), then the verdict columns."""
    df = _rows(tables, "env_selection")
    models = sorted(set(df["model"])) if len(df) else []
    shapes = [(f"shape_{m}", f"{m} (p̂ per dd)", "text") for m in models]
    return [SELECTION_COLUMNS[0], *shapes, *SELECTION_COLUMNS[1:]]
