"""API models through the whole pipeline: the official openai and anthropic SDKs talk
over real HTTP to a model server the test starts on 127.0.0.1."""

from __future__ import annotations

import re
from collections import deque

import pyarrow.parquet as pq
import pytest

from fake_model_server import running_fake_server
from horizonbench.core.types import Step
from horizonbench.datasets.maze.facts import world_from_facts
from horizonbench.datasets.maze.rules import successors
from horizonbench.datasets.maze.simulator import format_plan
from horizonbench.schemas.config import parse_config

pytestmark = pytest.mark.flow
KEY = "pipeline-key-NOT-SECRET-789"
HOSTILE = "<script>alert('x')</script> __import__('os').system('touch /tmp/hb_pwned')"


def _prompt_text(body: dict) -> str:
    msgs = body.get("messages", [])
    return msgs[-1]["content"] if isinstance(msgs[-1]["content"], str) else msgs[-1]["content"][0]["text"]


def solve_from_prompt(body: dict) -> str:
    """A 'model' that reads the facts from the prompt and searches for a shortest plan."""
    text = _prompt_text(body)
    facts_block = text.rsplit("Facts:\n", 1)[1].split("\n\nYOUR SOLUTION:")[0]
    world = world_from_facts([f for f in facts_block.splitlines() if f.strip()])
    start = (world.start, 0, 0, -1)
    parent = {start: None}
    queue = deque([start])
    while queue:
        s = queue.popleft()
        if s[0] == world.goal and s[3] < 0:
            steps = [Step("rescue", "Alice")]
            while parent[s] is not None:
                s, step = parent[s]
                steps.append(step)
            steps.append(Step("start", world.rooms[world.start]))
            return "Let me think.\nSolution: " + format_plan(steps[::-1])
        for step, t in successors(world, s):
            if t not in parent:
                parent[t] = (s, step)
                queue.append(t)
    return "I give up."


def test_pipeline_with_openai_compatible_and_anthropic_models(prefect_server, tmp_path, monkeypatch):
    from horizonbench.flows.pipeline import pipeline

    monkeypatch.setenv("HB_FAKE_KEY", KEY)

    def responder(body: dict) -> str:
        return HOSTILE if body.get("model") == "hostile" else solve_from_prompt(body)

    with running_fake_server(responder) as server:
        cfg = parse_config(
            {
                "run": {"name": "api", "seed": 3},
                "families": {
                    "maze": {
                        "params": {"grid_rows": 5, "grid_cols": 5, "num_keys": 1},
                        "sampling": {"count": 6, "shard_size": 6},
                        "prompt": {"shots": 1},
                    }
                },
                "evaluation": {
                    "models": [
                        {
                            "name": "compat",
                            "provider": "openai_compatible",
                            "model": "solver",
                            "base_url": server.base_url,
                            "api_key_env": "HB_FAKE_KEY",
                            "requests_per_minute": 6000,
                            "max_concurrency": 3,
                        },
                        {
                            "name": "claude-fake",
                            "provider": "anthropic",
                            "model": "solver",
                            "base_url": server.root_url,
                            "api_key_env": "HB_FAKE_KEY",
                        },
                        {
                            "name": "hostile",
                            "provider": "openai_compatible",
                            "model": "hostile",
                            "base_url": server.base_url,
                        },
                    ]
                },
                "dask": {"n_workers": 1},
                "analysis": {"bootstrap": 10},
            }
        )
        report = pipeline(cfg, str(tmp_path))
        calls = len(server.requests)
        assert calls == 18
        assert {r.path for r in server.requests} == {"/v1/chat/completions", "/v1/messages"}

        scores = pq.read_table(tmp_path / "scores" / "scores.parquet").to_pandas()
        assert scores[scores.model == "compat"].success.all()
        assert scores[scores.model == "claude-fake"].success.all()
        hostile = scores[scores.model == "hostile"]
        assert (hostile.violation == "invalid_output").all() and not hostile.success.any()

        # nothing anywhere in the run folder holds the key
        for path in tmp_path.rglob("*"):
            if path.is_file():
                assert KEY.encode() not in path.read_bytes(), path

        html = open(report).read()
        assert "<script>alert" not in html
        assert "&lt;script&gt;" in html

        # resuming pays for nothing
        pipeline(cfg, str(tmp_path))
        assert len(server.requests) == calls
    assert not re.search("hb_pwned", " ".join(p.name for p in tmp_path.rglob("*")))
