"""A world-model study through the whole pipeline as users run it: the command, real
Prefect, a real Dask cluster, the Great Expectations suites, the analysis files and the
report."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

from horizonbench.datasets.worlds.episode import EPISODE_INFO_DEFAULTS
from horizonbench.schemas.expectations import episodes_suite, steps_suite
from horizonbench.tasks.validate.checks import validate_frame

pytestmark = pytest.mark.flow
EXE = Path(sys.executable).with_name("horizonbench")


def _config(path: Path, workers: int, **worlds: Any) -> Path:
    cfg = {
        "run": {"name": "worlds", "seed": 5},
        "worlds": {
            "environments": ["stateful_puzzle", "graph_nav", "tool_dag"],
            "regime": "III",
            "sc": [8, 11, 14, 17],
            "dd": [1, 2],
            "horizon_factor": 1.5,
            "archetypes": 3,
            "variants": 2,
            "shard_size": 7,
            "agents": [
                {"name": "oracle", "kind": "oracle"},
                {"name": "bounded-12", "kind": "bounded", "capacity": 12},
                {"name": "decaying-10", "kind": "decaying", "capacity": 10, "rate": 0.05, "lead": 5},
                {"name": "unusable-50", "kind": "unusable", "rate": 0.5},
            ],
            **worlds,
        },
        "dask": {"n_workers": workers},
        "analysis": {"bootstrap": 100},
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


def _env(api_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env["PREFECT_API_URL"] = api_url
    return env


def _run(cmd: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(EXE), *cmd], env=env, capture_output=True, text=True, timeout=900)


def _episodes_on_two_workers(cfg_path: Path, out: Path) -> Path:
    """The pipeline's world-episodes task and table writer, in a flow of their own on a
    2-worker LocalCluster: the staged episodes and steps tables, in ``out``'s staging.

    Why not a second ``horizonbench run``: the tables are final when staged (validation
    reads them, promotion renames them), so the rest of a run (validation, analysis,
    report and its figures, about half of this test's time) would show nothing more."""
    from prefect import flow

    from horizonbench.schemas.config import load_config
    from horizonbench.tasks.evaluate.world_episodes import run_world_episodes, write_world_tables
    from horizonbench.tasks.run_folder.storage import staged

    cfg = load_config(cfg_path)
    assert cfg.dask.n_workers == 2

    @flow(name="world-episodes-two-workers")
    def episodes_only() -> None:
        done = run_world_episodes(cfg, str(out))
        write_world_tables(out, done["episodes"], done["steps"])

    episodes_only()
    return staged(out, "")


def test_a_world_study_runs_end_to_end_the_same_bytes_on_one_or_two_workers(tmp_path, prefect_server):
    env = _env(prefect_server)
    one = tmp_path / "run1"
    proc = _run(["run", "--config", str(_config(tmp_path / "w1.yaml", 1)), "--out", str(one)], env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    two = _episodes_on_two_workers(_config(tmp_path / "w2.yaml", 2), tmp_path / "run2")
    for rel in ("episodes/part-0.parquet", "steps/part-0.parquet"):
        assert (one / rel).read_bytes() == (two / rel).read_bytes(), rel
    episodes = pq.read_table(one / "episodes/part-0.parquet").to_pandas()
    assert len(episodes) == 3 * 4 * 2 * 3 * 2 * 4
    assert set(episodes["env"]) == {"stateful_puzzle", "graph_nav", "tool_dag"}
    oracle = episodes[episodes["model"] == "oracle"]
    assert oracle["success"].all() and (oracle["mean_jaccard"] == 1.0).all()
    bounded = episodes[episodes["model"] == "bounded-12"]
    assert bounded[bounded["sc"] <= 11]["success"].all()
    assert bounded[bounded["sc"] >= 14]["success"].mean() < 0.3
    steps = pq.read_table(one / "steps/part-0.parquet").to_pandas()
    assert (
        steps.groupby("episode_id").size().sort_index().tolist()
        == episodes.set_index("episode_id")["steps"].sort_index().tolist()
    )
    for name in (
        "grid",
        "critical_points",
        "cliffs",
        "band_widths",
        "contrasts",
        "lags",
        "step_metrics",
        "excluded",
        "harness",
    ):
        assert (one / "analysis" / f"worlds_{name}.parquet").exists(), name
    # the harness table has a row per environment for the one agent that plays through
    # the harness (offline, the unusable agent), none for the others
    harness = pq.read_table(one / "analysis/worlds_harness.parquet").to_pandas()
    assert harness["model"].tolist() == ["unusable-50"] * 3 and (harness["fallbacks"] > 0).all()
    unusable = episodes[episodes["model"] == "unusable-50"]
    assert set(unusable["outcome"]) <= {"success", "failure", "format_failure"}
    assert (unusable["collapse_type"] != "world_state").all()
    # the decaying agent's lags are the planted ones: onset + 2 - (onset + 5) once onset >= 2
    lags = pq.read_table(one / "analysis/worlds_lags.parquet").to_pandas().set_index(["env", "model"])
    d = lags.xs("decaying-10", level="model")
    assert (d["count"] > 0).all() and (d["share_world_first"] == 1.0).all(), d
    crit = pq.read_table(one / "analysis/worlds_critical_points.parquet").to_pandas()
    b = crit[crit["model"] == "bounded-12"]
    assert len(b) == 3 * 2 and b["sc_star"].between(11, 14).all()
    html = (one / "report/index.html").read_text()
    for env_name in ("stateful_puzzle", "graph_nav", "tool_dag"):
        assert f'id="world-{env_name}"' in html
    assert html.count("<svg") >= 3 and "sc*" in html
    for suite in ("episodes", "steps"):
        assert "PASSED" in (one / "validation" / f"{suite}.md").read_text()


def test_the_suites_catch_broken_world_tables(tmp_path):
    rows = [
        {
            "episode_id": "e1",
            "env": "stateful_puzzle",
            "model": "m",
            "regime": "III",
            "sc": 5,
            "dd": 1,
            "horizon": 10,
            "branching": 4,
            "observation": "clean",
            "mutation": "static",
            "archetype": 0,
            "variant": 0,
            "seed": 1,
            "optimal_length": 8,
            "horizon_ratio": 1.25,
            "horizon_short": False,
            "success": True,
            "steps": 6,  # a win shorter than the optimal plan
            "invalid_actions": 0,
            "first_error": None,
            "error_counts": "",
            "mean_jaccard": 1.0,
            "final_jaccard": 1.0,
            "consistency_rate": 1.0,
            "dependency_accuracy": 1.0,
            "self_check_accuracy": 1.0,
            "tau_w": float("nan"),
            "tau_a": float("nan"),
            "lag": float("nan"),
            "collapse_onset": float("nan"),
            "collapse_type": None,
            **EPISODE_INFO_DEFAULTS,
            "outcome": "success",
        }
    ]
    result = validate_frame(pd.DataFrame(rows), "episodes", episodes_suite(["m"]), tmp_path)
    assert not result["success"]
    assert any("_impossible_win" in f for f in result["failures"])
    assert not any("_outcome_consistent" in f for f in result["failures"])
    # a budget stop without the numbers, and an outcome that contradicts success
    for change in (
        {"outcome": "budget_exceeded", "success": False, "steps": 8},
        {"outcome": "failure", "steps": 8},
    ):
        bad = validate_frame(
            pd.DataFrame([{**rows[0], **change}]), "episodes", episodes_suite(["m"]), tmp_path
        )
        assert any("_outcome_consistent" in f for f in bad["failures"]), change
    steps = pd.DataFrame(
        [
            {
                "episode_id": "e1",
                "env": "stateful_puzzle",
                "model": "m",
                "step": 0,
                "action_valid": True,
                "error": "unknown_action",
                "jaccard": 1.0,
                "consistent": True,
                "valid_actions": 3,
            },
            {
                "episode_id": "e1",
                "env": "stateful_puzzle",
                "model": "m",
                "step": 2,
                "action_valid": False,
                "error": None,
                "jaccard": 1.5,
                "consistent": True,
                "valid_actions": 3,
            },
        ]
    )
    result = validate_frame(steps, "steps", steps_suite(), tmp_path)
    failed = " ".join(result["failures"])
    for what in ("_error_matches_validity", "_steps_numbered", "jaccard"):
        assert what in failed, failed


def test_a_bad_world_section_is_one_line_and_exit_2(tmp_path):
    cases = {
        "sc": ({"sc": [2, 5]}, "worlds.sc"),
        "regime": ({"regime": "VI"}, "worlds.regime"),
        "axis": ({"axes": {"noise": "high"}}, "'noise' is not an axis"),
        "obs": ({"axes": {"observation": "foggy"}}, "observation"),
        "agent": ({"agents": [{"name": "b", "kind": "bounded"}]}, "needs 'capacity'"),
        "env": ({"environments": ["maze"]}, "worlds.environments"),
        "dup": (
            {"agents": [{"name": "o", "kind": "oracle"}, {"name": "o", "kind": "oracle"}]},
            "repeated: o",
        ),
        "fixed": ({"regime": "IV"}, "regime IV fixes sc=20"),
    }
    for label, (change, message) in cases.items():
        cfg = _config(tmp_path / f"{label}.yaml", 1, **change)
        proc = subprocess.run(
            [str(EXE), "run", "--config", str(cfg), "--out", str(tmp_path / label), "--dry-run"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 2, (label, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and message in lines[0], (label, lines)
        assert not (tmp_path / label).exists()
