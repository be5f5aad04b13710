"""The puzzles through the whole pipeline as users run it: the command, real Prefect,
real Dask, the fake model server over real HTTP, the attempt store, the exports."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml

from fake_model_server import running_fake_server
from horizonbench.core.registry import get_family
from horizonbench.datasets.puzzles.base import bfs_path

pytestmark = pytest.mark.flow
EXE = Path(sys.executable).with_name("horizonbench")
_CURRENT = re.compile(r"Current state: (.+)")
_GOAL = re.compile(r"Goal: (.+)")


def hanoi_solver(body: dict[str, Any]) -> str:
    """A model that reads the step prompt and answers the optimal next state."""
    fam = get_family("hanoi")
    pz = fam.puzzle
    text = body["messages"][-1]["content"]
    state = pz.parse_state(_CURRENT.findall(text)[-1])
    goal = pz.parse_state(_GOAL.findall(text)[-1])
    cert = bfs_path(state, goal, lambda s: pz.successors(s, {}))
    nxt = cert.states[1] if len(cert.states) > 1 else state
    return f"Let me think.\nNext state: {pz.format_state(nxt)}"


def _config(path: Path, models: list[dict[str, Any]], modes: list[str]) -> Path:
    cfg = {
        "run": {"name": "puzzles", "seed": 3},
        "families": {
            "hanoi": {
                "params": {"ns": [2, 3]},
                "sampling": {"all": True, "shard_size": 6},
                "modes": modes,
                "prompt": {"shots": 0},
            }
        },
        "evaluation": {"samples": 1, "models": models},
        "dask": {"n_workers": 1},
        "analysis": {"bootstrap": 0},
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


def _run(cmd: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(EXE), *cmd], env=env, capture_output=True, text=True, timeout=600)


def _env(api_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env["PREFECT_API_URL"] = api_url
    env["HB_KEY"] = "sk-test"
    return env


def test_a_rollout_cut_by_failures_resumes_without_paying_any_step_twice(tmp_path, prefect_server):
    """After 20 answers the server refuses everything (400, not retried): the run ends
    with exit 3 and episodes stopped mid-way. The rerun replays the stored steps from
    the attempt store and pays only for the missing ones: no prompt is answered twice."""
    with running_fake_server(hanoi_solver) as server:
        model = {
            "name": "compat",
            "provider": "openai_compatible",
            "model": "solver",
            "base_url": server.base_url,
            "api_key_env": "HB_KEY",
            "max_concurrency": 4,
            "max_retries": 0,
        }
        cfg = _config(tmp_path / "c.yaml", [model], ["rollout"])
        out = tmp_path / "run"
        env = _env(prefect_server)
        server.fail_after = 20
        # 6 hanoi n=2 (3 steps) + 6 n=3 (7 steps) = 60 steps in all
        first = _run(["run", "--config", str(cfg), "--out", str(out), "--no-progress"], env)
        assert first.returncode == 3, first.stderr[-2000:]
        paid_first = server.answered
        assert 0 < paid_first < 60
        server.fail_after = None
        second = _run(["run", "--config", str(cfg), "--out", str(out), "--no-progress"], env)
        assert second.returncode == 0, second.stderr[-2000:]
        assert server.repeated_prompts() == {}
        assert server.answered == 60
    scores = pq.read_table(out / "scores" / "scores.parquet").to_pylist()
    assert len(scores) == 12 and all(s["success"] and s["mode"] == "rollout" for s in scores)
    attempts = pq.read_table(out / "attempts" / "attempts.parquet").to_pylist()
    assert len(attempts) == 60 and {a["mode"] for a in attempts} == {"rollout"}
    assert sum(a["reused"] for a in attempts) == paid_first


def test_offline_puzzles_both_modes_then_export_loads_in_hf_datasets(tmp_path, prefect_server):
    models = [
        {"name": "oracle", "provider": "offline", "kind": "oracle"},
        {"name": "noisy", "provider": "offline", "kind": "noisy", "eps": 0.2},
        {"name": "random", "provider": "offline", "kind": "random"},
    ]
    cfg = _config(tmp_path / "c.yaml", models, ["plan", "rollout"])
    raw = yaml.safe_load(cfg.read_text())
    raw["families"]["hanoi"]["params"]["ns"] = [1, 2, 3, 8]
    raw["families"]["river_crossing"] = {
        "params": {"ns": [1, 2, 3], "capacities": [2, 3]},
        "sampling": {"all": True, "shard_size": 20},
        "modes": ["plan", "rollout"],
    }
    cfg.write_text(yaml.safe_dump(raw))
    out = tmp_path / "run"
    env = _env(prefect_server)
    res = _run(["run", "--config", str(cfg), "--out", str(out), "--no-progress"], env)
    assert res.returncode == 0, res.stderr[-3000:]
    scores = pq.read_table(out / "scores" / "scores.parquet").to_pandas()
    assert set(scores["mode"]) == {"plan", "rollout"}
    oracle = scores[scores["model"] == "oracle"]
    assert oracle["success"].all()
    by_n = pq.read_table(out / "analysis" / "by_n.parquet").to_pandas()
    assert {"hanoi", "hanoi/rollout", "river_crossing", "river_crossing/rollout"} <= set(by_n["family"])
    comp = pq.read_table(out / "analysis" / "compounding.parquet").to_pandas()
    assert (comp[comp["model"] == "oracle"]["eps"] == 0).all()
    html = (out / "report" / "index.html").read_text()
    assert 'id="puzzles"' in html

    exp = _run(["export", "--run", str(out), "--format", "both"], env)
    assert exp.returncode == 0, exp.stderr
    summary = json.loads((out / "exports" / "export.json").read_text())
    assert summary["hanoi"]["ood"]["instances"] == 6  # n = 8: the 6 peg pairs
    # the step overlap is reported; River Crossing's trajectories share their tails
    assert summary["hanoi"]["split_rule"] == "per_n"
    crossing = summary["river_crossing"]["overlap"]["validation"]
    assert crossing["steps"] == summary["river_crossing"]["validation"]["rows"] and crossing["in_train"] > 0
    assert "validation steps" in exp.stdout and "repeat a training step" in exp.stdout
    # the run's manifest and report carry the same overlap (the generation stats)
    generation = json.loads((out / "manifest.json").read_text())["counts"]["generation"]
    recorded = {g["family"]: g["step_overlap"] for g in generation}
    for name in ("hanoi", "river_crossing"):
        assert recorded[name] == {"split_rule": "per_n", **summary[name]["overlap"]}
    assert f"{crossing['in_train']} of {crossing['steps']}" in html
    pooled = _run(["export", "--run", str(out), "--split", "pooled", "--dest", str(tmp_path / "pooled")], env)
    assert pooled.returncode == 0, pooled.stderr
    again = json.loads((tmp_path / "pooled" / "export.json").read_text())
    # n = 1..3 pooled: ceil(18 / 5) = 4 validation puzzles (per n: 1 + 1 + 1)
    assert again["hanoi"]["split_rule"] == "pooled" and again["hanoi"]["validation"]["instances"] == 4
    # without --split, the run config's export.split decides
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["config"]["export"] = {"split": "pooled"}
    (out / "manifest.json").write_text(json.dumps(manifest))
    argv = ["export", "--run", str(out), "--format", "parquet", "--dest", str(tmp_path / "cfg")]
    by_config = _run(argv, env)
    assert by_config.returncode == 0, by_config.stderr
    assert json.loads((tmp_path / "cfg" / "export.json").read_text())["hanoi"]["split_rule"] == "pooled"
    import datasets

    files = {s: str(out / "exports" / "hanoi" / f"{s}.parquet") for s in ("train", "validation", "ood")}
    ds = datasets.load_dataset("parquet", data_files=files, cache_dir=str(tmp_path / "hf"))
    assert ds["ood"].num_rows == 6 * 256  # 255 moves + the final row, per puzzle
    ids = {s: set(ds[s]["instance_id"]) for s in files}
    assert not ids["train"] & ids["validation"] and len(ids["train"]) + len(ids["validation"]) == 18
    row = ds["ood"][255]
    assert row["is_final"] and row["move"] == "STOP" and row["next_state"] == row["goal_state"]
    js = datasets.load_dataset(
        "json",
        data_files={"train": str(out / "exports" / "hanoi" / "train.jsonl")},
        cache_dir=str(tmp_path / "hf2"),
    )
    assert sorted(js["train"]["instance_id"]) == sorted(ds["train"]["instance_id"])


def test_export_of_a_folder_without_puzzles_is_one_line_exit_2(tmp_path):
    res = _run(["export", "--run", str(tmp_path / "nothing")], dict(os.environ))
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "no instances/ folder" in res.stderr


def test_kill_9_mid_rollout_then_rerun_pays_at_most_the_calls_in_flight(tmp_path, prefect_server):
    """SIGKILL to the command's process group in the middle of the episodes: the rerun
    replays every stored step and finishes; only answers that were in flight (at most
    max_concurrency) can be paid twice."""
    import signal
    import time

    with running_fake_server(hanoi_solver, latency_s=0.15) as server:
        model = {
            "name": "compat",
            "provider": "openai_compatible",
            "model": "solver",
            "base_url": server.base_url,
            "api_key_env": "HB_KEY",
            "max_concurrency": 4,
        }
        cfg = _config(tmp_path / "c.yaml", [model], ["rollout"])
        out = tmp_path / "run"
        env = _env(prefect_server)
        cmd = [str(EXE), "run", "--config", str(cfg), "--out", str(out), "--no-progress"]
        proc = subprocess.Popen(
            cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        deadline = time.monotonic() + 300
        while server.answered < 25:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        paid_before = server.answered
        assert paid_before < 60
        second = _run(["run", "--config", str(cfg), "--out", str(out), "--no-progress"], env)
        assert second.returncode == 0, second.stderr[-2000:]
        repeated = server.repeated_prompts()
        assert sum(v - 1 for v in repeated.values()) <= 4, repeated
        assert server.answered <= 60 + 4
    scores = pq.read_table(out / "scores" / "scores.parquet").to_pylist()
    assert len(scores) == 12 and all(s["success"] for s in scores)
