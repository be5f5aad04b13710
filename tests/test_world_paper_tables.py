"""The world-model paper's Tables 1, 5, 10, G1b and the W_trans patterns as tables
(``analysis/world_effects.py``, ``analysis/world_shapes.py``), checked against the paper's
own numbers where it gives their inputs, and their calibration cases in small."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from horizonbench.analysis import phase, world_effects, world_shapes
from horizonbench.analysis.worlds import world_tables
from horizonbench.calibration import world_paper_cases
from horizonbench.calibration.base import run_case
from horizonbench.datasets.worlds.study import AgentSpec, run_shard
from horizonbench.schemas.config import Config, WorldsSpec, load_config

EXE = Path(sys.executable).parent / "horizonbench"

#: Table 2 (claude-haiku-4-5, n = 100 a cell) and Table 3 (gpt-4o-mini: (n, p))
TABLE2 = {
    (5, 1): 1.00, (5, 2): 1.00, (5, 4): 1.00, (5, 6): 1.00,
    (10, 1): 1.00, (10, 2): 1.00, (10, 4): 0.72, (10, 6): 0.20,
    (20, 1): 0.00, (20, 2): 0.00, (20, 4): 0.00, (20, 6): 0.00,
    (40, 1): 0.00, (40, 2): 0.00, (40, 4): 0.00, (40, 6): 0.00,
}  # fmt: skip
TABLE3 = {
    (5, 1): (100, 99), (5, 2): (100, 100), (5, 4): (100, 97), (5, 6): (100, 98),
    (10, 1): (100, 92), (10, 2): (100, 68), (10, 4): (100, 64), (10, 6): (100, 58),
    (20, 1): (125, 58), (20, 2): (146, 13), (20, 4): (114, 0), (20, 6): (100, 0),
}  # fmt: skip


def _cells(rows: list[tuple[str, str, int, int, int, int]]) -> pd.DataFrame:
    """A cell table from (env, model, sc, dd, n, successes)."""
    frame = pd.DataFrame(rows, columns=["env", "model", "sc", "dd", "n", "successes"])
    frame["p"] = frame["successes"] / frame["n"]
    low, high = phase.wilson_interval(frame["successes"].to_numpy(), frame["n"].to_numpy())
    return frame.assign(wilson_low=low, wilson_high=high)


def _paper_cells() -> pd.DataFrame:
    rows = [("stateful_puzzle", "haiku", sc, dd, 100, round(100 * p)) for (sc, dd), p in TABLE2.items()]
    rows += [("stateful_puzzle", "mini", sc, dd, n, k) for (sc, dd), (n, k) in TABLE3.items()]
    return _cells(rows)


# --- Table 10 --------------------------------------------------------------------------


def test_table10_haiku_mini_from_the_papers_tables_2_and_3() -> None:
    """+0.57 (M) at (10, 1) and -0.80 (L) at (10, 6) as printed; (20, 1) comes out -1.50
    from Table 3's 58/125 (the paper's -1.47 needs 0.45; see test_analysis_phase)."""
    table = world_effects.model_pairs(_paper_cells())
    assert set(zip(table["model_a"], table["model_b"], strict=True)) == {("haiku", "mini")}
    # shared cells only: mini never played sc = 40
    assert len(table) == 12 and 40 not in set(table["sc"])
    got = table.set_index(["sc", "dd"])
    assert round(got.loc[(10, 1), "cohens_h"], 2) == 0.57 and got.loc[(10, 1), "magnitude"] == "M"
    assert round(got.loc[(10, 6), "cohens_h"], 2) == -0.80 and got.loc[(10, 6), "magnitude"] == "L"
    assert round(got.loc[(20, 1), "cohens_h"], 2) == -1.50 and got.loc[(20, 1), "magnitude"] == "L"
    # the interval is h +- 1.96 sqrt(1/n_a + 1/n_b)
    row = got.loc[(20, 1)]
    assert row["h_high"] - row["cohens_h"] == pytest.approx(1.959964 * math.sqrt(1 / 100 + 1 / 125), rel=1e-6)


# --- Table 5 ---------------------------------------------------------------------------

#: Table 4's successes of 25 (the base first) and Table 5's deltas and codes, per axis
TABLE5 = {
    "horizon": (3, [("10", 0, -0.12, "n"), ("20", 0, -0.12, "n"), ("80", 8, +0.20, "S")]),
    "branching": (5, [("2", 4, -0.04, "n"), ("8", 4, -0.04, "n"), ("16", 5, 0.00, "n")]),
    "observation": (
        10,
        [("partial", 0, -0.40, "M"), ("distractor", 3, -0.28, "S"), ("conflict", 4, -0.24, "S")],
    ),
    "mutation": (2, [("low", 8, +0.24, "S"), ("medium", 6, +0.16, "S"), ("high", 2, 0.00, "n")]),
}
BACKDROP = {"horizon": 40, "branching": 4, "observation": "clean", "mutation": "static"}


def _table4_episodes(paired: bool) -> pd.DataFrame:
    """Table 4's cells as episodes: each axis has its own backdrop in the paper (the four
    ablations ran separately), so each axis is one environment here."""
    rows = []
    for axis, (base_k, levels) in TABLE5.items():
        for i in range(25):
            common = {"env": axis, "model": "haiku", "sc": 10, "dd": 6, "regime": "III", **BACKDROP}
            rows.append({**common, "episode_id": f"{axis}:haiku:{i:016x}", "success": i < base_k})
            for level, k, _, _ in levels:
                value = int(level) if level.isdigit() else level
                rows.append(
                    {
                        **common,
                        axis: value,
                        "episode_id": f"{axis}:haiku:{i:016x}" + (f":{axis}={level}" if paired else ""),
                        "success": i < k,
                    }
                )
    return pd.DataFrame(rows)


@pytest.mark.parametrize("paired", [True, False])
def test_table5_from_table4_as_a_table(paired: bool) -> None:
    """Every delta and code of Table 5, in its order, from Table 4's rates: by the paired
    ablation labels of the episode ids, and by the axis columns alone (older runs)."""
    table = world_effects.ablation_deltas(_table4_episodes(paired))
    for axis, (_, levels) in TABLE5.items():
        rows = table[table["axis"] == axis]
        assert rows["level"].tolist() == [lv for lv, *_ in levels]
        assert [round(d, 2) for d in rows["cliffs_delta"]] == pytest.approx([d for *_, d, _ in levels])
        assert rows["magnitude"].tolist() == [c for *_, c in levels]
        assert rows["backdrop"].nunique() == 1 and rows["backdrop"].iloc[0] == str(BACKDROP[axis])
    assert (
        (table["delta_low"] <= table["cliffs_delta"]) & (table["cliffs_delta"] <= table["delta_high"])
    ).all()
    # partial observation: 0/25 against 10/25, the only level whose interval excludes 0
    excludes = table[(table["delta_high"] < 0) | (table["delta_low"] > 0)]
    assert set(excludes["level"]) == {"partial", "distractor", "low"}


def test_newcombe_interval_by_hand() -> None:
    """Newcombe (1998) Table II, example (a): 56/70 - 48/80 -> 0.0524 to 0.3339."""
    low, high = world_effects.newcombe_interval(56, 70, 48, 80)
    assert (round(low, 4), round(high, 4)) == (0.0524, 0.3339)


def test_ablation_labels_read_the_paired_suffix_only() -> None:
    ids = pd.DataFrame({"episode_id": ["e:a:00ff", "e:a:00ff:branching=8", "e:a:00ff:x", "e:a"]})
    assert world_effects.ablation_labels(ids).tolist() == ["", "branching=8", "", ""]


# --- G1b -------------------------------------------------------------------------------


def _g1b_frame(shifts: dict[str, float], n: int = 30, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for sc, after in ((10, False), (20, True)):
        for _ in range(n):
            base = rng.uniform(0.6, 0.95, size=3)
            down = [shifts[m] if after else 0.0 for m in world_effects.G1B_METRICS]
            jac, valid, check = np.clip(base - down, 0, 1)
            rows.append(
                {
                    "env": "e",
                    "model": "m",
                    "sc": sc,
                    "dd": 1,
                    "steps": 100,
                    "invalid_actions": round(100 * (1 - valid)),
                    "mean_jaccard": jac,
                    "self_check_accuracy": check,
                }
            )
    return pd.DataFrame(rows)


CLIFFS = pd.DataFrame(
    [
        {"env": "e", "model": "m", "dd": 1, "sc_from": 5, "sc_to": 10, "drop": 0.1},
        {"env": "e", "model": "m", "dd": 1, "sc_from": 10, "sc_to": 20, "drop": 0.8},
    ]
)


def test_g1b_tests_the_locked_pair_when_given_and_says_how_the_pair_was_chosen() -> None:
    """Appendix H locks the pair before data collection: with ``pair`` the table is at
    that pair whatever the data's largest drop; without it, the largest drop, marked."""
    episodes, cliffs = world_paper_cases.g1b_grid_episodes(0.3, 20, np.random.default_rng(3))
    picked = world_effects.g1b(episodes, cliffs)
    assert (picked["pair_chosen"] == "largest_drop").all()
    assert picked[["sc_from", "sc_to", "dd"]].iloc[0].tolist() == [20, 30, 2]
    locked = world_effects.g1b(episodes, cliffs, pair=(10, 20, 3))
    assert (locked["pair_chosen"] == "locked").all()
    assert (locked[["sc_from", "sc_to", "dd"]] == [10, 20, 3]).all().all()
    assert (locked["n_from"] == 20).all() and not locked["g1b_passes"].any()
    # a locked pair needs no cliff table: nothing is picked from it
    assert len(world_effects.g1b(episodes, cliffs.iloc[:0], pair=(20, 30, 2))) == 3


def test_a_locked_pair_reaches_g1b_through_the_world_tables() -> None:
    """The analysis stage's path (``world_tables(..., g1b_pair)``) on a played study:
    the config's pair is the table's pair; without one, the data's largest drop."""
    worlds = WorldsSpec(
        environments=["stateful_puzzle"],
        sc=[5, 10, 20],
        dd=[1],
        horizon="relative",
        archetypes=2,
        variants=2,
        agents=[{"name": "bounded-8", "kind": "bounded", "capacity": 8}],
        g1b_pair={"sc_from": 10, "sc_to": 20, "dd": 1},
    )
    rows, _ = run_shard(worlds.study().episodes(0), [AgentSpec("bounded-8", "bounded", {"capacity": 8})], 1.5)
    episodes = pd.DataFrame(rows)
    pair = worlds.g1b_pair
    locked = world_tables(episodes, bootstrap=0, g1b_pair=(pair.sc_from, pair.sc_to, pair.dd))["g1b"]
    assert len(locked) == 3 and (locked["pair_chosen"] == "locked").all()
    assert (locked["sc_from"] == 10).all() and (locked["sc_to"] == 20).all()
    picked = world_tables(episodes, bootstrap=0)["g1b"]  # the cliff is at 5 -> 10
    assert (picked["pair_chosen"] == "largest_drop").all() and (picked["sc_from"] == 5).all()


@pytest.mark.parametrize(
    ("pair", "message"),
    [
        ({"sc_from": 10, "sc_to": 50, "dd": 1}, "g1b_pair.sc_to: 50 is not in the grid's sc"),
        ({"sc_from": 10, "sc_to": 20, "dd": 9}, "g1b_pair.dd: 9 is not in the grid's dd"),
        ({"sc_from": 20, "sc_to": 10, "dd": 1}, "g1b_pair: sc_from (20) must be below sc_to (10)"),
        ({"sc_from": 10, "dd": 1}, "g1b_pair.sc_to"),
    ],
)
def test_a_bad_g1b_pair_is_one_line_naming_the_field_and_exit_2(tmp_path, pair, message) -> None:
    cfg = {
        "run": {"name": "g1b", "seed": 1},
        "worlds": {
            "environments": ["stateful_puzzle"],
            "sc": [10, 20],
            "dd": [1],
            "agents": [{"name": "o", "kind": "oracle"}],
            "g1b_pair": pair,
        },
    }
    path = tmp_path / "g1b.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "out"
    proc = subprocess.run(
        [str(EXE), "run", "--config", str(path), "--out", str(out), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], (proc.returncode, lines)
    assert not out.exists()
    # the good pair passes and reaches the spec the analysis stage reads
    good = load_config_text(cfg, {"sc_from": 10, "sc_to": 20, "dd": 1}, tmp_path)
    assert good.worlds.g1b_pair.sc_from == 10 and good.worlds.g1b_pair.dd == 1


def load_config_text(cfg: dict, pair: dict, tmp_path) -> Config:
    path = tmp_path / "good.yaml"
    path.write_text(yaml.safe_dump({**cfg, "worlds": {**cfg["worlds"], "g1b_pair": pair}}))
    return load_config(path)


def test_g1b_passes_only_when_every_metric_is_significant_and_shifted_by_0_20() -> None:
    full = world_effects.g1b(_g1b_frame(dict.fromkeys(world_effects.G1B_METRICS, 0.4)), CLIFFS)
    assert full["metric"].tolist() == list(world_effects.G1B_METRICS)
    # the trigger pair is the largest drop of the cliff table
    assert (full["sc_from"] == 10).all() and (full["sc_to"] == 20).all()
    assert full["metric_passes"].all() and full["g1b_passes"].all()
    # Holm over the three: the smallest p times 3, then monotone
    p = full["mw_p"].to_numpy()
    assert full["p_holm"].to_numpy() == pytest.approx(
        np.maximum.accumulate(np.sort(p) * [3, 2, 1])[np.argsort(np.argsort(p))]
    )
    assert ((full["hl_low"] <= full["hodges_lehmann"]) & (full["hodges_lehmann"] <= full["hl_high"])).all()
    # self-check moves only 0.1: significant with 30 a cell, but below the shift rule
    small = world_effects.g1b(
        _g1b_frame({"world_state_accuracy": 0.4, "action_validity": 0.4, "self_check_accuracy": 0.1}, n=200),
        CLIFFS,
    )
    check = small[small["metric"] == "self_check_accuracy"].iloc[0]
    assert check["significant"] and not check["shift_met"] and not check["metric_passes"]
    assert not small["g1b_passes"].any()
    # an agent without Self-Diag has no self-check values: that metric fails, so G1b does
    offline = _g1b_frame(dict.fromkeys(world_effects.G1B_METRICS, 0.4)).assign(self_check_accuracy=math.nan)
    got = world_effects.g1b(offline, CLIFFS)
    assert got.loc[got["metric"] == "self_check_accuracy", "n_from"].item() == 0
    assert not got["g1b_passes"].any() and got["metric_passes"].sum() == 2


def test_moses_interval_brackets_a_pure_shift() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=60)
    low, high = world_effects.moses_interval(x + 0.5, x)
    assert low <= 0.5 <= high
    # one pair has no order statistic to bound it: no interval rather than a point
    assert all(math.isnan(v) for v in world_effects.moses_interval([1.0], [0.0]))


# --- Table 1 ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("curve", "shape"),
    [
        ((0.9, 0.9, 0.9, 0.95), "flat"),
        ((1.0, 0.8, 0.8, 0.4), "monotone"),
        ((0.3, 0.7, 0.6, 0.2), "hump"),
        ((0.8, 0.2, 0.3, 0.9), "u-shape"),
        ((0.2, 0.4, 0.6, 0.8), "increasing"),
        ((0.9, 0.5, 0.7, 0.1), "mixed"),
        ((0.5,), "single level"),
    ],
)
def test_curve_shapes_in_table1s_words(curve, shape) -> None:
    assert world_shapes.curve_shape(curve) == shape


def test_table1_rule_selects_only_the_environment_that_passes_all_three() -> None:
    """Table 1's pilots as curves (n = 10 a level): GraphNav hump / u-shape fails (a) and
    (b); ToolDAG flat / monotone fails (a), (b) and (c) at 0 pp; StatefulPuzzle monotone
    for both with a 30 pp smallest drop is selected."""
    curves = {
        "graph_nav": {"mini": (3, 7, 6, 2), "haiku": (8, 2, 3, 9)},
        "tool_dag": {"mini": (5, 5, 5, 5), "haiku": (9, 8, 6, 4)},
        "stateful_puzzle": {"mini": (10, 9, 8, 7), "haiku": (10, 10, 7, 2)},
    }
    rows = [
        (env, model, 10, dd, 10, k)
        for env, by in curves.items()
        for model, ks in by.items()
        for dd, k in zip((1, 2, 4, 6), ks, strict=True)
    ]
    table = world_shapes.environment_selection(_cells(rows)).set_index(["env", "model"])
    assert (
        table.loc[("graph_nav", "mini"), "shape"] == "hump"
        and table.loc[("graph_nav", "haiku"), "shape"] == "u-shape"
    )
    assert (
        table.loc[("tool_dag", "mini"), "shape"] == "flat"
        and table.loc[("tool_dag", "mini"), "max_drop"] == 0.0
    )
    assert table.loc[("tool_dag", "haiku"), "min_max_drop"] == 0.0
    assert round(table.loc[("stateful_puzzle", "haiku"), "min_max_drop"], 2) == 0.30
    selected = table[table["selected"]].index.get_level_values("env").unique().tolist()
    assert selected == ["stateful_puzzle"]
    assert "(b) shapes differ" in table.loc[("graph_nav", "mini"), "reason"]
    assert "(c) min max drop 0 pp < 20 pp" in table.loc[("tool_dag", "mini"), "reason"]
    assert pd.isna(table.loc[("stateful_puzzle", "mini"), "reason"])
    # one agent alone cannot meet (b)
    alone = world_shapes.environment_selection(_cells([r for r in rows if r[1] == "haiku"]))
    assert not alone["selected"].any() and alone["reason"].str.contains("one agent only").all()


# --- W_trans patterns -------------------------------------------------------------------


def test_table2_has_no_band_cell_at_any_dd_so_pattern_b() -> None:
    """Appendix J: the confirmatory grid assigns no cell to the band: W_trans = 0 at every
    dd, constant (B). The 0.72 cell's Wilson interval reaches into the band, so the
    reading is flagged as not stable."""
    cells = _paper_cells()
    row = world_shapes.band_patterns(cells[cells["model"] == "haiku"]).iloc[0]
    assert (row["w_trans"], row["pattern"], row["pattern_name"]) == ("0 0 0 0", "B", "constant")
    assert row["w_trans_high"] == "0 0 1 0" and not row["stable"]


@pytest.mark.parametrize(
    ("widths", "expected"),
    [
        ((2, 1, 1, 1), "A"),
        ((1, 1, 1), "B"),
        ((0, 1, 2), "C"),
        ((3, 2, 2), None),
        ((1, 2, 1), None),
        ((1,), None),
    ],
)
def test_patterns_of_appendix_j(widths, expected) -> None:
    assert world_shapes.pattern(widths) == expected


# --- calibration (small; benchmarks/calibration.py runs them in full) -------------------


@pytest.mark.parametrize(
    "case",
    [
        world_paper_cases.H_CASE,
        world_paper_cases.DELTA_CASE,
        world_paper_cases.G1B_CASE,
        world_paper_cases.G1B_SELECTED_CASE,
        world_paper_cases.SELECTION_CASE,
        world_paper_cases.PATTERN_CASE,
    ],
    ids=lambda c: c.name,
)
def test_each_new_output_finds_its_planted_effect_and_not_its_null(case) -> None:
    result = run_case(case, n_studies=40, seed=0, scale=0.5)
    planted, null = result.arm("planted"), result.arm("null")
    assert planted.rate >= (0.85 if case.measure == "coverage" else 0.8), planted
    assert null.rate <= 0.1, null


# --- the report ------------------------------------------------------------------------


def _section(html: str, ident: str) -> str:
    start = html.index(f'id="{ident}"')
    return html[start : html.index("</div>" if "-" in ident.removeprefix("world-") else "</section>", start)]


def test_the_report_lays_each_table_out_as_the_paper_does() -> None:
    """The paper's own inputs through the report: Table 5 one row per axis with the
    levels side by side, Table 10 one row per pair over its three cells, G1b per metric,
    the W_trans pattern, and Table 1 one row per environment with a shape per agent."""
    from horizonbench.reports.html import render_report
    from test_report_html import _inputs, _scores, _world_tables

    tables = dict(_world_tables(with_models=False))
    env = "tool_dag"
    cells = _paper_cells()
    three = cells[
        [(s, d) in {(10, 1), (10, 6), (20, 1)} for s, d in zip(cells["sc"], cells["dd"], strict=True)]
    ]
    tables["model_pairs"] = world_effects.model_pairs(three).assign(env=env)
    tables["ablation_deltas"] = world_effects.ablation_deltas(_table4_episodes(True)).assign(env=env)
    g1b = _g1b_frame(dict.fromkeys(world_effects.G1B_METRICS, 0.4))
    tables["g1b"] = world_effects.g1b(g1b, CLIFFS).assign(env=env)
    tables["band_patterns"] = world_shapes.band_patterns(cells[cells["model"] == "haiku"]).assign(env=env)
    rows = [
        ("stateful_puzzle", m, 10, dd, 10, k)
        for m, ks in (("a", (10, 9, 8, 7)), ("b", (10, 10, 7, 2)))
        for dd, k in zip((1, 2, 4, 6), ks, strict=True)
    ]
    tables["env_selection"] = world_shapes.environment_selection(_cells(rows))
    html = render_report(**_inputs(_scores()), worlds=tables)

    table5 = _section(html, f"world-{env}-table5")
    assert "partial/distractor/conflict vs. clean" in table5
    assert "-0.40, -0.28, -0.24" in table5 and "M, S, S" in table5
    table10 = _section(html, f"world-{env}-table10")
    assert "haiku − mini" in table10 and "(10, 1)" in table10
    assert "+0.57 M" in table10 and "-0.80 L" in table10 and "-1.50 L" in table10
    g1b_part = _section(html, f"world-{env}-g1b")
    assert g1b_part.count("passes") >= 4 and "self-check accuracy" in g1b_part
    # how the pair was chosen, in its column and the caption (issue 25's review)
    assert "pair chosen" in g1b_part and "<td>largest_drop</td>" in g1b_part.replace(' class="text"', "")
    assert "worlds.g1b_pair" in g1b_part
    assert "B (constant)" in _section(html, f"world-{env}-patterns")
    selection = _section(html, "world-selection")
    assert "a (p̂ per dd)" in selection and "monotone (1.00 0.90 0.80 0.70)" in selection
    assert "not selected" not in selection and "30 pp" in selection
    assert 'href="#world-selection"' in html
