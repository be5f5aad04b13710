"""Table 4 (analysis/ablations.py), its figures (reports/ablation_parts.py) and its
calibration: the paired statistics, a planted axis effect found with real offline agents
and nothing where the agents ignore the axis, the grid kept free of ablated episodes,
and the table written by the analysis stage."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from horizonbench.analysis import ablations
from horizonbench.analysis.world_effects import newcombe_interval
from horizonbench.analysis.worlds import world_tables
from horizonbench.calibration.base import load_cases, run_case
from horizonbench.datasets.worlds.study import AgentSpec, run_shard
from horizonbench.reports import ablation_parts
from horizonbench.schemas.worlds import Study

# --- the statistics ------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 30), st.integers(0, 30), st.integers(0, 30), st.integers(0, 30))
def test_the_paired_interval_holds_its_difference_inside_minus_one_to_one(a, b, c, d):
    diff, low, high = ablations.paired_newcombe(a, b, c, d)
    if a + b + c + d == 0:
        assert math.isnan(diff)
        return
    assert diff == pytest.approx((b - c) / (a + b + c + d))
    assert -1.0 <= low <= diff + 1e-12 and diff - 1e-12 <= high <= 1.0


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 40), st.integers(1, 40))
def test_uncorrelated_pairs_give_the_independent_interval(k1, k2):
    """With phi = 0 (a table whose cells are the product of its margins) Newcombe's
    paired interval is his independent one on the same margins."""
    n = 40
    a, b, c, d = k1 * k2, k1 * (n - k2), (n - k1) * k2, (n - k1) * (n - k2)
    _, low, high = ablations.paired_newcombe(a, b, c, d)
    ind_low, ind_high = newcombe_interval(k1 * n, n * n, k2 * n, n * n)
    assert low == pytest.approx(ind_low, abs=1e-9) and high == pytest.approx(ind_high, abs=1e-9)


def test_pairing_narrows_the_interval_when_worlds_agree():
    """30 worlds won at both, 60 lost at both, 10 won only at the backdrop: the paired
    interval is narrower than the unpaired one on the same rates."""
    _, low, high = ablations.paired_newcombe(30, 0, 10, 60)
    ind_low, ind_high = newcombe_interval(30, 100, 40, 100)
    assert high - low < 0.6 * (ind_high - ind_low)
    assert high < 0  # ten discordant pairs, all one way, is an effect


def test_mcnemar_and_holm():
    assert ablations.mcnemar_exact(0, 10) == pytest.approx(2 * 0.5**10)
    assert ablations.mcnemar_exact(0, 0) == 1.0
    assert ablations.holm([0.01, 0.04, 0.03, math.nan]) == pytest.approx(
        [0.03, 0.06, 0.06, math.nan], nan_ok=True
    )


# --- real offline agents: a planted axis and a null ------------------------------------

LEVELS = {"branching": (2, 8), "observation": ("partial",), "mutation": ("high",)}


def _run(root: int, worlds: int = 10) -> pd.DataFrame:
    study = Study(("stateful_puzzle",), "III", (10,), (6,), worlds, 1, ablations=LEVELS)
    rows, _ = run_shard(study.episodes(root), [AgentSpec("oracle", "oracle")])
    return pd.DataFrame(rows)


@pytest.mark.parametrize("root", [0, 1, 2])
def test_a_mutating_world_is_found_and_branching_and_observation_are_not(root):
    """The oracle follows its plan: a world that mutates under it breaks the plan
    (planted: success depends on mutation), while decoys and partial views change
    nothing it does (null). Over three seeds the table flags mutation alone, paired on
    every world."""
    table = ablations.ablation_table(_run(root), "paper T=40")
    found = ablations.flagged(table)
    assert set(zip(found["axis"], found["level"], strict=True)) == {("mutation", "high")}
    ablated = table[~table["is_backdrop"]]
    assert ablated["paired"].all()
    null = ablated[ablated["axis"] != "mutation"]
    assert (null["diff"] == 0).all() and (null["p_value"] == 1).all()
    backdrops = table[table["is_backdrop"]]
    assert set(backdrops["level"]) == {"4", "clean", "static"} and (backdrops["p"] == 1).all()


def test_the_grid_reads_the_backdrop_only():
    """Ablated levels never enter a grid cell: the cell's n is the backdrop's worlds."""
    episodes = _run(0)
    tables = world_tables(episodes)
    assert tables["grid"]["n"].tolist() == [10]
    assert tables["grid"]["p"].tolist() == [1.0]  # the mutating worlds would pull it down


def test_a_run_without_ablations_has_an_empty_table():
    study = Study(("stateful_puzzle",), "III", (5,), (1,), 2, 1)
    rows, _ = run_shard(study.episodes(0), [AgentSpec("oracle", "oracle")])
    table = ablations.ablation_table(pd.DataFrame(rows))
    assert table.empty and list(table.columns) == ablations.ABLATION_COLUMNS


def test_an_unwinnable_level_is_shown_not_zeroed():
    """T = 5 fits no world: n 0 and no rate, its episodes counted as unwinnable, and the
    rate with them as failures is 0 (the paper's reading of T = 10)."""
    study = Study(("stateful_puzzle",), "III", (10,), (6,), 3, 1, ablations={"horizon": (5,)})
    rows, _ = run_shard(study.episodes(0), [AgentSpec("oracle", "oracle")])
    table = ablations.ablation_table(pd.DataFrame(rows))
    short = table[table["level"] == "5"].iloc[0]
    assert short["n"] == 0 and math.isnan(short["p"]) and short["n_unwinnable"] == 3 and short["p_all"] == 0
    assert short["paired"] and math.isnan(short["diff"])  # the same worlds, none measured at T = 5
    rows = ablation_parts.ablation_rows({"ablations": table}, "stateful_puzzle")
    assert rows.loc[rows["level"] == "5", "pairing"].item() == "paired, no world measured at both"
    assert list(rows["level"]) == ["5", "40"]  # levels ascending, the backdrop among them


# --- calibration over simulated studies ---------------------------------------------


def test_the_calibration_finds_the_planted_axis_and_nothing_in_the_null():
    case = load_cases()["one-axis ablation found (Table 4, paired)"]
    result = run_case(case, n_studies=12, seed=0, scale=1.0)
    assert result.arm("planted").hits >= 8  # 0.875 over 200 studies (the suite's run)
    assert result.arm("null").hits <= 1


# --- the report ---------------------------------------------------------------------


def test_the_figure_and_table_show_every_level_and_name_the_backdrop():
    table = ablations.ablation_table(_run(0, worlds=4), "paper T=40")
    tables = {"ablations": table}
    svg = str(ablation_parts.ablation_figure(tables, "stateful_puzzle"))
    for text in ("branching factor", "observation mode", "mutation level", "partial", "(backdrop)", "oracle"):
        assert text in svg
    assert "horizon T" not in svg  # the horizon was not ablated: no panel for it
    rows = ablation_parts.ablation_rows(tables, "stateful_puzzle")
    assert rows.loc[rows["is_backdrop"], "level_label"].str.endswith("*").all()
    assert set(rows.loc[~rows["is_backdrop"], "pairing"]) == {"paired, 4 worlds"}
    caption = ablation_parts.ablation_caption(tables, "stateful_puzzle")
    assert "world by world" in caption and "independent" not in caption
    assert ablation_parts.ablation_figure({"ablations": table.iloc[0:0]}, "stateful_puzzle") is None


def test_the_cross_sections_draw_each_dd_and_each_sc():
    grid = pd.DataFrame(
        [
            {
                "env": "e",
                "model": m,
                "sc": sc,
                "dd": dd,
                "n": 10,
                "p": 0.5,
                "wilson_low": 0.2,
                "wilson_high": 0.8,
            }
            for m in ("a", "b")
            for sc in (5, 10, 20)
            for dd in (1, 6)
        ]
    )
    svg = str(ablation_parts.cross_section_figure({"grid": grid}, "e"))
    for text in (
        "dd = 1",
        "dd = 6",
        "sc = 5",
        "sc = 10",
        "sc = 20",
        "state cardinality sc",
        "dependency density dd",
    ):
        assert text in svg
    one_dd = grid[grid["dd"] == 1]
    assert (
        ablation_parts.cross_section_figure({"grid": one_dd}, "e") is None
    )  # a fine scan: a curve elsewhere


# --- the analysis stage writes it ------------------------------------------------------


def test_the_analysis_stage_writes_the_ablations_table(tmp_path):
    from horizonbench.schemas.config import parse_config
    from horizonbench.schemas.tables import EPISODES_SCHEMA
    from horizonbench.tasks.analyse.worlds import frame_table, read_world_analysis, write_world_analysis
    from horizonbench.tasks.run_folder.layout import EPISODES_REL

    cfg = parse_config(
        {
            "run": {"name": "abl", "seed": 0},
            "worlds": {
                "environments": ["stateful_puzzle"],
                "sc": [5],
                "dd": [2],
                "archetypes": 2,
                "variants": 1,
                "ablations": {"mutation": ["high"]},
                "agents": [{"name": "oracle", "kind": "oracle"}],
            },
        }
    )
    rows, _ = run_shard(cfg.worlds.study().episodes(0), [AgentSpec("oracle", "oracle")])
    episodes = pd.DataFrame(rows).reindex(columns=EPISODES_SCHEMA.names)
    dest = tmp_path / EPISODES_REL
    dest.parent.mkdir(parents=True)
    pq.write_table(frame_table(episodes, EPISODES_SCHEMA), dest)
    paths, _ = write_world_analysis(cfg, tmp_path)
    written = pq.read_table(paths["ablations"]).to_pandas()
    assert paths["ablations"].endswith("analysis/worlds_ablations.parquet")
    assert list(written["level"]) == ["static", "high"] and written["horizon"].eq("paper T=40").all()
    back = read_world_analysis(tmp_path)
    assert back is not None and len(back["ablations"]) == 2
    assert np.isfinite(written.loc[1, "diff"])


def test_a_whole_ablated_grid_wraps_its_panels_and_names_its_cells_in_short():
    """An ablation on every cell of a grid (the demo's: 10 cells) draws at most
    MAX_PANELS_PER_ROW panels a row and a title that counts the cells instead of naming
    each; one strip of ten panels ran to 1,924 pt and its title off the figure."""
    grid = ((5, 6, 7, 8, 9), (1, 2))
    study = Study(("stateful_puzzle",), "III", *grid, 2, 1, ablations={"mutation": ("high",)})
    rows, _ = run_shard(study.episodes(0), [AgentSpec("oracle", "oracle")])
    tables = {"ablations": ablations.ablation_table(pd.DataFrame(rows), "paper T=40")}
    svg = str(ablation_parts.ablation_figure(tables, "stateful_puzzle"))
    assert "10 cells (sc 5, 6, 7, 8, 9 x dd 1, 2)" in svg
    assert "sc = 5, dd = 1, sc = 5" not in svg
    width = float(re.search(r'<svg[^>]* width="([0-9.]+)pt"', svg).group(1))
    per_panel = 2.6 * 72  # the figure's inches per panel, in points
    assert width < (ablation_parts.MAX_PANELS_PER_ROW + 1) * per_panel  # ten in a row: 1,924
    assert svg.count("mutation level (sc") == 10  # every cell still has its panel
