"""A nightly series: the second night over an unchanged config reuses every instance
shard (its shared shard cache) and every answer (its shared attempt store, pinned
models), so it calls no model; ``run.seed: nightly`` draws new instances instead."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
import yaml

from fake_model_server import running_fake_server
from horizonbench.schemas.config import parse_config

pytestmark = pytest.mark.flow


def _config(tmp_path, base_url: str, seed: object = 7) -> dict:
    return {
        "run": {"name": "nightly", "seed": seed},
        "families": {
            "maze": {
                "params": {"grid_rows": 6, "grid_cols": 6, "num_keys": 1},
                "sampling": {"count": 12},
                "prompt": {"shots": 0},
            }
        },
        "evaluation": {
            "samples": 2,
            "store": str(tmp_path / "series" / "store.sqlite"),
            "reuse": "store",  # pinned snapshots: an answer is an answer across nights
            "models": [
                {
                    "name": "pinned",
                    "provider": "openai_compatible",
                    "model": "solver-2026-11-01",
                    "base_url": base_url,
                    "api_key_env": "HB_NIGHTLY_KEY",
                }
            ],
        },
        "generation": {"cache_dir": str(tmp_path / "series" / "shards")},
        "dask": {"n_workers": 1},
        "analysis": {"bootstrap": 0},
    }


def _generated(out) -> int:
    counts = json.loads((out / "manifest.json").read_text())["counts"]["generation"]
    return sum(st["candidates_generated"] for st in counts)


def test_a_second_night_calls_no_model_and_generates_nothing(prefect_server, tmp_path, monkeypatch):
    from horizonbench.flows.pipeline import pipeline

    monkeypatch.setenv("HB_NIGHTLY_KEY", "sk-test-not-secret")
    with running_fake_server(lambda body: "I do not know.") as server:
        cfg = parse_config(_config(tmp_path, server.base_url))
        first = tmp_path / "series" / "2026-11-30"
        pipeline(cfg, str(first))
        calls = len(server.requests)
        assert calls == 24 and _generated(first) > 0
        second = tmp_path / "series" / "2026-12-01"
        pipeline(cfg, str(second))
        assert len(server.requests) == calls  # not one call the second night
        assert _generated(second) == 0
        for rel in ("instances/maze/part-00000.parquet", "scores/scores.parquet"):
            assert (first / rel).read_bytes() == (second / rel).read_bytes(), rel
        answers = [
            pq.read_table(
                out / "attempts" / "attempts.parquet", columns=["attempt_key", "response"]
            ).to_pylist()
            for out in (first, second)
        ]
        assert answers[0] == answers[1]  # the same answers, marked reused the second night

        # the nightly seed: the same config draws instances no model has seen
        data = _config(tmp_path, server.base_url, seed="nightly")
        fresh = tmp_path / "series" / "fresh"
        pipeline(parse_config(data), str(fresh))
        assert len(server.requests) == calls + 24
        recorded = json.loads((fresh / "manifest.json").read_text())["config"]["run"]
        assert recorded["seed_from"].startswith("nightly:") and isinstance(recorded["seed"], int)


def test_yaml_spells_the_nightly_seed(tmp_path):
    text = "run: {name: n, seed: nightly}\nfamilies: {maze: {params: {grid_rows: 4, grid_cols: 4}}}"
    data = yaml.safe_load(text)
    data["families"]["maze"]["sampling"] = {"count": 1}
    assert parse_config(data).run.seed_from.startswith("nightly:")
