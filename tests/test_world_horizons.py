"""Both horizons of a world study (``worlds.horizon: paper | relative``), the cells no
agent can win at the paper's T, the T scan as Table 7, the fine-scan curve and the
world-only report's summary. Episodes come from the real environments and agents
(``run_shard``), a few worlds per cell, so every test takes seconds."""

from __future__ import annotations

import math
import re
from typing import Any

import pandas as pd
import pytest
from pydantic import ValidationError

from horizonbench.analysis.ablations import ablation_table
from horizonbench.analysis.world_horizons import horizon_check, t_fine
from horizonbench.analysis.worlds import world_tables
from horizonbench.datasets.worlds.study import AgentSpec, run_shard
from horizonbench.reports.html import render_report
from horizonbench.reports.world_parts import horizon_note
from horizonbench.schemas.config import WorldsSpec

AGENTS = [{"name": "oracle", "kind": "oracle"}, {"name": "bounded-12", "kind": "bounded", "capacity": 12}]


def spec(**worlds: Any) -> WorldsSpec:
    base = {
        "environments": ["stateful_puzzle"],
        "regime": "III",
        "archetypes": 2,
        "variants": 2,
        "agents": AGENTS,
    }
    return WorldsSpec(**{**base, **worlds})


def played(worlds: WorldsSpec, seed: int = 0) -> tuple[pd.DataFrame, str]:
    """The study's episode table (every agent on every world) and its horizon label."""
    agents = [
        AgentSpec(a.name, a.kind, {"capacity": a.capacity} if a.capacity else {}) for a in worlds.agents
    ]
    rows, _ = run_shard(worlds.study().episodes(seed), agents, worlds.horizon_factor)
    return pd.DataFrame(rows), worlds.horizon_label()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"horizon": "fixed"}, "horizon: give paper (the regime's fixed T of Table 11) or relative"),
        ({"horizon": 40}, "horizon: give paper"),
        (
            {"horizon": "paper", "horizon_factor": 2.0},
            "horizon: paper uses the regime's fixed T; drop horizon_factor",
        ),
    ],
)
def test_a_bad_horizon_is_one_line_naming_the_field(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as err:
        spec(sc=[10], dd=[1], **fields)
    assert message in str(err.value)
    assert err.value.error_count() == 1


def test_each_setting_is_named_and_relative_alone_gets_its_factor() -> None:
    assert spec(sc=[10], dd=[1]).horizon_label() == "paper T=40"
    assert spec(sc=[10], dd=[1], horizon="paper").horizon_mode == "paper"
    relative = spec(sc=[10], dd=[1], horizon="relative")
    assert relative.horizon_factor == 1.5 and relative.horizon_label() == "relative T=ceil(1.5 L*)"
    # the configs from before the setting (a factor alone) read as relative
    assert spec(sc=[10], dd=[1], horizon_factor=2.0).horizon_label() == "relative T=ceil(2 L*)"
    assert spec(sc=[10], dd=[1], horizon="relative", horizon_factor=3.0).study().horizon_factor == 3.0


@pytest.fixture(scope="module")
def paper_run() -> tuple[pd.DataFrame, str]:
    """sc 10 (every world fits in T = 40) and sc 40 (no world does: L* > 40 always)."""
    return played(spec(sc=[10, 40], dd=[1], horizon="paper"))


def test_at_the_paper_t_a_cell_no_agent_can_win_keeps_its_row(paper_run) -> None:
    episodes, label = paper_run
    tables = world_tables(episodes, bootstrap=20, horizon=label)
    grid = tables["grid"].set_index(["model", "sc"])
    for model in ("oracle", "bounded-12"):
        dead = grid.loc[(model, 40)]
        assert dead["n"] == 0 and dead["n_unwinnable"] == 4 and math.isnan(dead["p"])
        assert grid.loc[(model, 10)]["n"] == 4 and grid.loc[(model, 10)]["n_unwinnable"] == 0
    assert set(tables["grid"]["horizon"]) == {"paper T=40"}
    assert set(tables["critical_points"]["horizon"]) == {"paper T=40"}
    # an unwinnable cell is no rate of 0: no cliff, band or crossing reads it
    assert tables["cliffs"].empty and (tables["band_widths"]["w_trans"] == 0).all()
    check = horizon_check(episodes, label).set_index("sc")
    assert check.loc[40, "unwinnable"] == check.loc[40, "worlds"] == 4
    assert check.loc[40, "unwinnable_at_regime_t"] == 4 and check.loc[10, "unwinnable"] == 0
    assert check.loc[40, "lstar_min"] > 40


def test_the_grid_reads_as_the_paper_does_with_unwinnable_worlds_as_failures(paper_run) -> None:
    episodes, label = paper_run
    # one cell of 4 worlds that fit in T = 40 and 4 that do not (sc 40's, relabelled sc 10)
    mixed = episodes.assign(sc=10)
    grid = world_tables(mixed, bootstrap=0, horizon=label)["grid"].set_index("model")
    oracle = grid.loc["oracle"]
    assert (oracle["n"], oracle["n_unwinnable"], oracle["successes"]) == (4, 4, 4)
    assert oracle["p"] == 1.0 and oracle["p_all"] == 0.5
    assert 0.0 < oracle["p_all_low"] < 0.5 < oracle["p_all_high"] < 1.0
    for _, row in grid.iterrows():
        assert row["p_all"] == row["successes"] / (row["n"] + row["n_unwinnable"])
    # a cell no world of which fits in T reads 0 out of 4 here, never a blank
    dead = world_tables(episodes, bootstrap=0, horizon=label)["grid"].set_index(["model", "sc"])
    assert (dead.xs(40, level="sc")["p_all"] == 0.0).all()
    assert (dead.xs(40, level="sc")["p_all_high"] > 0.0).all()


def test_every_world_table_names_its_horizon(paper_run) -> None:
    episodes, label = paper_run
    for name, table in world_tables(episodes, bootstrap=0, horizon=label).items():
        assert "horizon" in table.columns, name
        assert set(table["horizon"]) <= {label}, name


def test_a_relative_run_says_what_the_paper_t_would_cut() -> None:
    episodes, label = played(spec(sc=[10, 40], dd=[1], horizon="relative"))
    tables = world_tables(episodes, bootstrap=20, horizon=label)
    assert (tables["grid"]["n_unwinnable"] == 0).all() and (tables["grid"]["n"] == 4).all()
    check = tables["horizons"].set_index("sc")
    assert check.loc[40, "unwinnable"] == 0 and check.loc[40, "unwinnable_at_regime_t"] == 4
    note = horizon_note(tables, "stateful_puzzle")
    assert note.startswith("Horizon: relative T=ceil(1.5 L*)")
    assert "At the paper's T = 40 (horizon: paper), 4 of 8 worlds (50%) would be unwinnable" in note
    assert "no agent could win sc 40 at dd 1 at all" in note


def test_a_paper_run_names_the_cells_t_forbids(paper_run) -> None:
    episodes, label = paper_run
    note = horizon_note(world_tables(episodes, bootstrap=20, horizon=label), "stateful_puzzle")
    assert note.startswith("Horizon: paper T=40. 4 of 8 worlds are longer than T")
    assert "no agent can win sc 40 at dd 1 (hatched, n 0)" in note
    assert "The grid's p_all counts them as failures, as the paper's Table 2 does." in note


def test_the_paper_table_captions_name_the_horizon(paper_run) -> None:
    episodes, label = paper_run
    html = _report(world_tables(episodes, bootstrap=0, horizon=label))
    ids = [
        "world-selection",
        *(f"world-stateful_puzzle-{p}" for p in ("table5", "table10", "g1b", "patterns")),
    ]
    shown = [i for i in ids if f'id="{i}"' in html]
    assert {"world-selection", "world-stateful_puzzle-table10"} <= set(shown)
    for section in shown:
        caption = re.search(rf'id="{section}">.*?<p>(.*?)</p>', html, re.S).group(1)
        assert caption.startswith("Horizon: paper T=40."), section


def test_the_t_scan_is_table_7_on_the_same_worlds() -> None:
    worlds = spec(sc=[10], dd=[6], horizon="paper", ablations={"T": [12, 80]})
    episodes, label = played(worlds)
    table = t_fine(ablation_table(episodes, label))
    oracle = table[table["model"] == "oracle"].set_index("t")
    assert list(oracle.index) == [12, 40, 80]
    assert list(oracle["coarse_reference"]) == [False, True, True]
    assert set(table["horizon"]) == {"paper T=40"}
    # only T changes between levels: the same worlds, so L* > T at 12 is all that moves
    per_t = episodes.groupby("horizon")["seed"].apply(lambda s: tuple(sorted(set(s))))
    assert per_t.loc[12] == per_t.loc[40] == per_t.loc[80]
    lstar = episodes[(episodes["horizon"] == 40) & (episodes["model"] == "oracle")]["optimal_length"]
    assert oracle.loc[12, "n_unwinnable"] == int((lstar > 12).sum()) == 4
    assert oracle.loc[12, "n"] == 0 and math.isnan(oracle.loc[12, "p"]) and oracle.loc[12, "p_all"] == 0.0
    assert oracle.loc[80, "p"] == 1.0 and oracle.loc[80, "wilson_low"] < 1.0
    # one T per cell is no scan
    assert t_fine(ablation_table(played(spec(sc=[10], dd=[6]))[0], "paper T=40")).empty
    # the report lays it out as Table 7, starred levels and all, with its curve
    tables = world_tables(episodes, bootstrap=20, horizon=label)
    tables["t_fine"] = table
    section = re.search(r'<div id="world-stateful_puzzle-t-fine">(.*?)</div>\s*\n', _report(tables), re.S)
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", section.group(1)))
    assert "T scan (the paper's T-Fine, Table 7)" in text
    assert re.search(r"12 bounded-12 0 0 .*? 40\* bounded-12 .*? 80\* oracle 4 4", text), text
    assert 'id="tfine-stateful_puzzle' in section.group(1)
    # T = 12 fits no world: keyed once as unwinnable, never a rate of 0
    assert section.group(1).count("T &lt; L*: no world fits (unwinnable)") == 1


def _report(tables: dict[str, pd.DataFrame]) -> str:
    return render_report(title="worlds", run_info={}, examples=[], counts={}, worlds=tables)


def test_a_world_only_report_opens_with_its_own_summary(paper_run) -> None:
    episodes, label = paper_run
    html = _report(world_tables(episodes, bootstrap=20, horizon=label))
    summary = re.sub(r"\s+", " ", re.search(r'<section id="summary">(.*?)</section>', html, re.S).group(1))
    assert "No model was evaluated" not in summary
    assert "How success collapses with logical depth L" not in html  # the maze's lead
    assert "Where agents' world models collapse" in html
    assert "World-model study: 1 environment (stateful_puzzle)" in summary
    assert summary.count("paper T=40") == 2  # one row per agent names the horizon
    assert "<td>stateful_puzzle</td><td>bounded-12</td>" in re.sub(r'\s*class="num"', "", summary)
    # the phase diagram marks the dead cells and names the horizon
    figure = re.search(r'<svg[^>]*>(?:(?!</svg>).)*id="phase-stateful_puzzle.*?</svg>', html, re.S).group(0)
    assert figure.count("4 of 4") == 2  # the sc 40 cell of each agent: hatched, "T < L*", 4 of 4
    assert "horizon paper T=40 (hatched: unwinnable" in html


def test_a_fine_scan_is_drawn_as_curves_not_a_one_row_heatmap() -> None:
    episodes, label = played(spec(sc=[10, 11, 12, 13, 14], dd=[1], horizon="relative"))
    html = _report(world_tables(episodes, bootstrap=20, horizon=label))
    assert 'id="scan-stateful_puzzle' in html and 'id="phase-stateful_puzzle' not in html
    assert "n=4n=4" not in html.replace("\n", "")
    assert "state cardinality sc" in html and "dd = 1, horizon relative T=ceil(1.5 L*)" in html
    # a grid of several dd stays a phase diagram
    episodes, label = played(spec(sc=[10, 12, 14], dd=[1, 2], horizon="relative"))
    html = _report(world_tables(episodes, bootstrap=20, horizon=label))
    assert 'id="phase-stateful_puzzle' in html and 'id="scan-stateful_puzzle' not in html
    # its title names the horizon, and claims no hatched cell where every world fits
    assert "stateful_puzzle, horizon relative T=ceil(1.5 L*)</text>" in html.replace("\n", "")


def test_a_run_from_before_the_horizon_columns_still_renders(paper_run) -> None:
    """Read back with today's schema, an old grid has null ``n_unwinnable`` and
    ``horizon`` (and no ``horizons`` table): the report draws it and says so."""
    episodes, _ = paper_run
    tables = world_tables(episodes, bootstrap=20)
    old = tables["grid"][tables["grid"]["n"] > 0]  # old grids had no unwinnable rows
    tables["grid"] = old.assign(n_unwinnable=float("nan"), horizon=None)
    tables["horizons"] = tables["horizons"].iloc[0:0]
    html = _report(tables)
    assert "Horizon: not recorded (a run from before the horizon setting)." in html
    assert 'id="phase-stateful_puzzle' in html
