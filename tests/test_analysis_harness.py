"""Model agents in the world analysis: budget stops count as failures, with the rate
without them and their count beside it, and the ``harness`` table (the memory-mode
comparison) is computed from the episode rows as documented."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
from scipy import stats

from horizonbench.analysis import worlds
from horizonbench.analysis.ablations import ablation_table
from horizonbench.analysis.world_horizons import t_fine
from horizonbench.datasets.worlds.episode import EPISODE_INFO_DEFAULTS
from horizonbench.schemas.tables import EPISODES_SCHEMA, WORLD_ANALYSIS_SCHEMAS
from horizonbench.tasks.analyse import stage as analyse_stage
from horizonbench.tasks.analyse import worlds as world_tasks
from horizonbench.tasks.run_folder.storage import rows_to_table, write_table

NAN = math.nan
LIMIT = "planner at step 2: the prompt needs about 9,000 tokens, which exceeds the context"


def episode(model: str, sc: int, outcome: str, *, n: int = 0, **info: Any) -> dict[str, Any]:
    """One row of the episodes table: the offline defaults of the harness columns
    (EPISODE_INFO_DEFAULTS), overridden by ``info``; ``n`` numbers the seed."""
    success = outcome == "success"
    row: dict[str, Any] = {
        "episode_id": f"graph_nav:{model}:{sc}:{n}",
        "env": "graph_nav",
        "model": model,
        "regime": "III",
        "sc": sc,
        "dd": 1,
        "horizon": 40,
        "branching": 4,
        "observation": "clean",
        "mutation": "static",
        "archetype": 0,
        "variant": 0,
        "seed": 1000 * sc + n,
        "optimal_length": 10,
        "horizon_ratio": 4.0,
        "horizon_short": False,
        "success": success,
        "steps": 10,
        "invalid_actions": 0 if success else 2,
        "first_error": None if success else "locked",
        "error_counts": "" if success else "locked 2",
        "mean_jaccard": 1.0 if success else 0.5,
        "final_jaccard": 1.0 if success else 0.5,
        "consistency_rate": 1.0,
        "dependency_accuracy": 1.0,
        "self_check_accuracy": 1.0,
        "tau_w": NAN if success else 3.0,
        "tau_a": NAN if success else 5.0,
        "lag": NAN if success else -2.0,
        "collapse_onset": NAN if success else 3.0,
        "collapse_type": None if success else "world_state",
        **EPISODE_INFO_DEFAULTS,
        "outcome": outcome,
    }
    if outcome == "budget_exceeded":
        row["budget_detail"] = LIMIT
    row.update(info)
    return row


def frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The rows as the analysis stage reads them: through the episodes schema."""
    return rows_to_table(rows, EPISODES_SCHEMA).to_pandas()


def model_study() -> pd.DataFrame:
    """One model agent over sc 5, 10, 15, 20 (dd 1), 10 episodes per cell:

    - sc 5: 10 won; sc 10: 8 won, 2 lost, plus 4 budget stops; sc 15: every episode a
      budget stop; sc 20: 10 lost, plus 1 budget stop that also had T < L*.
    """
    rows: list[dict[str, Any]] = []
    mem = {"memory": "structured", "prompt_version": "v1", "calls": 30, "steps": 10}

    def add(sc: int, outcome: str, k: int, **extra: Any) -> None:
        for _ in range(k):
            rows.append(episode("m", sc, outcome, n=len(rows), **{**mem, **extra}))

    add(5, "success", 10)
    add(10, "success", 8)
    add(10, "failure", 2)
    add(10, "budget_exceeded", 4, steps=3)
    add(15, "budget_exceeded", 10, steps=1)
    add(20, "failure", 10)
    add(20, "budget_exceeded", 1, horizon_short=True, steps=2)
    return frame(rows)


def test_budget_stops_count_as_failures_with_the_rate_without_them_beside_it():
    eps = model_study()
    tables = worlds.world_tables(eps, bootstrap=0)
    grid = tables["grid"].set_index("sc")
    # every cell any agent could win has a rate; the budget stops are failures in it
    assert list(grid.index) == [5, 10, 15, 20]
    assert grid["n"].tolist() == [10, 14, 10, 10]
    assert grid.loc[10, "p"] == pytest.approx(8 / 14) and grid.loc[15, "p"] == 0.0
    # beside it: the stops per cell and the rate over the episodes that finished
    assert grid["budget_exceeded"].tolist() == [0, 4, 10, 0]
    assert grid["n_finished"].tolist() == [10, 10, 0, 10]
    assert grid.loc[10, "p_finished"] == pytest.approx(0.8) and math.isnan(grid.loc[15, "p_finished"])
    # sc* between 10 (8/14) and 15 (0): had the stops been left out, 10 + 0.3 / 0.8 * 10
    crit = tables["critical_points"].iloc[0]
    assert crit["sc_star"] == pytest.approx(10 + 5 * (8 / 14 - 0.5) / (8 / 14))
    assert (crit["bracket_low"], crit["bracket_high"]) == (10.0, 15.0)
    assert len(tables["contrasts"]) == 3
    lag = tables["lags"].iloc[0]
    assert lag["n_episodes"] == 44 and lag["n_failed"] == 26
    assert tables["step_metrics"]["episodes"].tolist() == [10, 14, 10, 10]
    ex = tables["excluded"].set_index("sc")
    assert ex["episodes"].tolist() == [10, 14, 10, 11]
    assert ex["horizon_short"].tolist() == [0, 0, 0, 1]
    # the stop that also had T < L* is counted once, under T < L*
    assert ex["budget_exceeded"].tolist() == [0, 4, 10, 0]
    assert ex["measured"].tolist() == [10, 14, 10, 10]
    assert (ex["measured"] == grid["n"].reindex(ex.index).fillna(0)).all()
    assert ex.loc[10, "budget_detail"] == LIMIT and ex.loc[15, "budget_detail"] == LIMIT
    assert pd.isna(ex.loc[5, "budget_detail"]) and pd.isna(ex.loc[20, "budget_detail"])


def test_the_issue_22_cell_reads_its_true_rate_not_the_survivors():
    """Issue 22: the episodes that fail run longest and hit the budget; leaving them out
    read a true success of 0.5 as 0.91 (n = 11). Counted as failures, the rate is 0.5,
    and the survivors' 0.91 stays beside it."""
    rows = [episode("m", 40, "success", n=i) for i in range(10)]
    rows += [episode("m", 40, "failure", n=10)]
    rows += [episode("m", 40, "budget_exceeded", n=11 + i) for i in range(9)]
    cell = worlds.grid(frame(rows)).iloc[0]
    assert (cell["n"], cell["successes"], cell["p"]) == (20, 10, 0.5)
    assert (cell["budget_exceeded"], cell["n_finished"]) == (9, 11)
    assert cell["p_finished"] == pytest.approx(10 / 11)
    # a stop is never a success, whatever its row says
    odd = worlds.grid(frame([episode("m", 5, "budget_exceeded", success=True)])).iloc[0]
    assert (odd["successes"], odd["p"]) == (0, 0.0)


def test_format_failures_are_failures_and_counted():
    rows = [episode("m", 5, "success", n=0, memory="structured")]
    rows += [
        episode("m", 5, "format_failure", n=1, memory="structured", collapse_type="format"),
        episode("m", 5, "failure", n=2, memory="structured"),
    ]
    tables = worlds.world_tables(frame(rows), bootstrap=0)
    assert tables["grid"]["p"].tolist() == [pytest.approx(1 / 3)]
    h = tables["harness"].iloc[0]
    assert (h["format_failures"], h["measured"], h["successes"]) == (1, 3, 1)
    st = tables["step_metrics"].iloc[0]
    assert (st["format_collapses"], st["world_state_collapses"]) == (1, 1)


def test_the_example_limit_of_a_cell_does_not_depend_on_row_order():
    rows = [
        episode("m", 5, "budget_exceeded", n=0, memory="summary", budget_detail="wall time 900 s"),
        episode("m", 5, "budget_exceeded", n=1, memory="summary", budget_detail="context 8,192"),
        episode("m", 5, "failure", n=2, memory="summary", budget_detail=None),
    ]
    for order in (rows, rows[::-1]):
        ex = worlds.excluded(frame(order))
        assert ex["budget_detail"].tolist() == ["context 8,192"]
        assert ex[["budget_exceeded", "measured"]].values.tolist() == [[2, 3]]


def wilson(k: int, n: int) -> tuple[float, float]:
    """The textbook Wilson score interval (95%)."""
    z = stats.norm.ppf(0.975)
    centre = (k / n + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(k / n * (1 - k / n) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def hand_made() -> pd.DataFrame:
    """Two memory modes of one model and an offline agent, on graph_nav."""
    s = {"memory": "structured", "prompt_version": "v2"}
    t = {"memory": "transcript", "prompt_version": "v2"}

    def tok(calls: int, repairs: int, fallbacks: int, steps: int, i: int, o: int) -> dict[str, int]:
        return {
            "calls": calls,
            "repairs": repairs,
            "fallbacks": fallbacks,
            "steps": steps,
            "input_tokens": i,
            "output_tokens": o,
        }

    rows = [
        # structured: 1 won, 3 lost (lags -2, +2, -1), 1 budget stop (a failure, lag -1;
        # left out of p_finished only)
        episode("gpt-s", 5, "success", n=0, **s, **tok(12, 1, 0, 4, 1000, 100)),
        episode("gpt-s", 5, "failure", n=1, mean_jaccard=0.5, tau_w=2.0, tau_a=4.0, **s,
                **tok(18, 2, 1, 6, 1500, 150)),
        episode("gpt-s", 10, "failure", n=2, mean_jaccard=0.7, tau_w=3.0, tau_a=1.0, **s,
                **tok(15, 0, 0, 5, 1200, 120)),
        episode("gpt-s", 10, "failure", n=3, mean_jaccard=0.6, tau_w=1.0, tau_a=2.0, **s,
                **tok(15, 0, 0, 5, 1300, 130)),
        episode("gpt-s", 10, "budget_exceeded", n=4, mean_jaccard=0.0, tau_w=0.0, tau_a=1.0,
                **s, **tok(7, 3, 2, 2, 5000, 900)),
        # transcript: every episode stopped by a limit: all failures, nothing finished
        *[
            episode("gpt-t", sc, "budget_exceeded", n=5 + sc, mean_jaccard=0.2, **t,
                    **tok(4, 0, 0, 2, 9000, 50))
            for sc in (5, 10)
        ],
        # an offline agent: no memory mode, no harness row
        *[episode("oracle", sc, "success", n=20 + sc) for sc in (5, 10)],
    ]  # fmt: skip
    return frame(rows)


def test_the_harness_table_on_a_hand_made_study():
    table = worlds.harness(hand_made())
    # world_tables adds the horizon column to every table (worlds.with_horizon)
    assert [*table.columns, "horizon"] == WORLD_ANALYSIS_SCHEMAS["harness"].names
    assert table[["env", "model", "memory"]].values.tolist() == [
        ["graph_nav", "gpt-s", "structured"],
        ["graph_nav", "gpt-t", "transcript"],
    ]
    s, t = table.iloc[0], table.iloc[1]
    assert s["prompt_version"] == "v2"
    # the budget stop is measured, as a failure; p_finished leaves it out
    assert (s["episodes"], s["measured"], s["budget_exceeded"], s["horizon_short"]) == (5, 5, 1, 0)
    assert s["successes"] == 1 and s["p"] == pytest.approx(0.2)
    assert s["p_finished"] == pytest.approx(0.25) and s["format_failures"] == 0
    low, high = wilson(1, 5)
    assert s["wilson_low"] == pytest.approx(low) and s["wilson_high"] == pytest.approx(high)
    # what the harness spent, over all five episodes
    assert (s["steps"], s["calls"], s["repairs"], s["fallbacks"]) == (22, 67, 6, 3)
    assert s["calls_per_step"] == pytest.approx(67 / 22)
    assert (s["input_tokens"], s["output_tokens"]) == (10_000, 1_400)
    # the world-state readouts, over the five measured episodes
    assert s["mean_jaccard"] == pytest.approx((1.0 + 0.5 + 0.7 + 0.6 + 0.0) / 5)
    assert (s["n_failed"], s["lag_count"]) == (4, 4)
    assert s["share_world_first"] == pytest.approx(3 / 4)
    assert s["mean_lag"] == pytest.approx(-2 / 4)
    # a mode whose every episode hit a limit failed them all: 0, and nothing finished
    assert (t["episodes"], t["measured"], t["budget_exceeded"], t["successes"]) == (2, 2, 2, 0)
    assert t["p"] == 0.0 and math.isnan(t["p_finished"])
    assert (t["calls"], t["input_tokens"], t["calls_per_step"]) == (8, 18_000, 2.0)


def test_offline_only_studies_have_an_empty_harness_table_of_the_right_schema():
    offline = frame([episode(a, sc, "success", n=sc) for a in ("oracle", "bounded-4") for sc in (5, 10)])
    tables = worlds.world_tables(offline, bootstrap=0)
    assert tables["harness"].empty
    assert list(tables["harness"].columns) == WORLD_ANALYSIS_SCHEMAS["harness"].names
    assert world_tasks.frame_table(tables["harness"], WORLD_ANALYSIS_SCHEMAS["harness"]).num_rows == 0
    # a frame from before the harness columns also gives an empty table
    legacy = offline.drop(columns=["memory", "outcome", "budget_detail"])
    assert worlds.harness(legacy).empty and len(worlds.grid(legacy)) == 4
    assert (worlds.excluded(legacy)["budget_exceeded"] == 0).all()


def test_every_world_table_matches_its_schema():
    episodes = pd.concat([model_study(), hand_made()], ignore_index=True)
    tables = worlds.world_tables(episodes, bootstrap=0, horizon="paper T=40")
    # Tables 4 and 7 come from every episode, ablated ones included, as the stage writes them
    tables["ablations"] = ablation_table(episodes, "paper T=40")
    tables["t_fine"] = t_fine(tables["ablations"])
    assert set(tables) == set(WORLD_ANALYSIS_SCHEMAS)
    for name, df in tables.items():
        assert list(df.columns) == WORLD_ANALYSIS_SCHEMAS[name].names, name
        # every worlds_* table says how T was set (README: "every worlds_* table has ...")
        assert "horizon" in df.columns and set(df["horizon"]) <= {"paper T=40"}, name
        world_tasks.frame_table(df, WORLD_ANALYSIS_SCHEMAS[name])  # converts without loss of columns


def _run_with_episodes(tmp_path: Path, eps: pd.DataFrame) -> Path:
    run = tmp_path / "run"
    table = pa.Table.from_pandas(eps, schema=EPISODES_SCHEMA, preserve_index=False)
    write_table(table, run / world_tasks.EPISODES_REL, "episodes")
    return run


def test_analyse_worlds_writes_the_harness_table_and_read_world_analysis_reads_it(tmp_path, monkeypatch):
    monkeypatch.setattr(analyse_stage, "get_run_logger", lambda: logging.getLogger("test"))
    run = _run_with_episodes(tmp_path, hand_made())
    cfg = SimpleNamespace(
        worlds=SimpleNamespace(delta0=0.3, horizon_label=lambda: "paper T=40", g1b_pair=None),
        analysis=SimpleNamespace(bootstrap=0),
        run=SimpleNamespace(seed=0),
    )
    paths = analyse_stage.analyse_worlds.fn(cfg, str(run))
    assert Path(paths["harness"]) == run / "analysis" / "worlds_harness.parquet"
    read = world_tasks.read_world_analysis(run)
    assert read is not None and set(read) == set(WORLD_ANALYSIS_SCHEMAS)
    harness = read["harness"]
    assert harness["model"].tolist() == ["gpt-s", "gpt-t"]
    assert harness["budget_exceeded"].tolist() == [1, 2] and harness["calls"].tolist() == [67, 8]
    assert harness["p"].iloc[1] == 0.0 and math.isnan(harness["p_finished"].iloc[1])
    assert read["excluded"]["budget_exceeded"].sum() == 3


def test_a_run_from_before_the_harness_reads_with_an_empty_harness_table(tmp_path):
    eps = frame([episode("oracle", sc, "success", n=sc, horizon_short=sc == 10) for sc in (5, 10)])
    run = tmp_path / "old"
    old_excluded = pa.schema(
        [
            f
            for f in WORLD_ANALYSIS_SCHEMAS["excluded"]
            if f.name not in ("budget_exceeded", "measured", "budget_detail")
        ]
    )
    for name, df in worlds.world_tables(eps, bootstrap=0).items():
        if name == "harness":
            continue  # old runs have no such file
        schema = old_excluded if name == "excluded" else WORLD_ANALYSIS_SCHEMAS[name]
        write_table(world_tasks.frame_table(df, schema), run / f"analysis/worlds_{name}.parquet", name)
    read = world_tasks.read_world_analysis(run)
    assert read is not None
    assert read["harness"].empty and list(read["harness"].columns) == WORLD_ANALYSIS_SCHEMAS["harness"].names
    ex = read["excluded"]
    assert ex["budget_exceeded"].tolist() == [0, 0] and ex["measured"].tolist() == [1, 0]
    assert world_tasks.read_world_analysis(tmp_path / "no-world-study") is None


def test_episodes_stopped_before_their_first_step_are_failures_without_a_jaccard():
    """A context too small for the first prompt stops every episode at step 0: no
    Jaccard. They are failures in the success contrast, absent from the Jaccard test."""
    rows = [
        episode("m", sc, "budget_exceeded", n=10 * sc + i, steps=0, mean_jaccard=NAN, final_jaccard=NAN)
        for sc in (5, 10)
        for i in range(3)
    ]
    rows += [episode("m", 15, "failure", n=200 + i, mean_jaccard=0.2 + 0.1 * i) for i in range(3)]
    tables = worlds.world_tables(frame(rows), bootstrap=0)
    assert tables["grid"]["p"].tolist() == [0.0, 0.0, 0.0]
    c = tables["contrasts"].set_index("sc_from")
    assert c["cohens_h"].tolist() == [0.0, 0.0]
    assert c[["mw_p", "mw_p_holm", "mw_p_bh", "hodges_lehmann", "cliffs_delta"]].isna().all().all()
    assert c["cliffs_delta_label"].isna().all()
    for name, df in tables.items():
        world_tasks.frame_table(df, WORLD_ANALYSIS_SCHEMAS[name])
