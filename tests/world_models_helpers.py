"""Helpers for the world-study tests with model agents (tests/test_world_models_pipeline.py).

A tiny study (graph_nav and tool_dag, sc 5 and 8, dd 1, two archetypes, one variant,
T = ceil(1.5 L*)) with an offline oracle and one model agent whose model is the fake
model server (real HTTP, the real OpenAI SDK) answering as the oracle would, through the
harness prompts (tests/world_agent_server.py). The command runs in its own process
group, like a job started from a terminal, so a test can kill it as a user would.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import yaml

from horizonbench.datasets.worlds.agents import OracleAgent
from horizonbench.schemas.config import Config, parse_config
from horizonbench.tasks.evaluate.world_models import study_episodes
from world_agent_server import WorldAgentPlayer

EXE = Path(sys.executable).with_name("horizonbench")
KEY_ENV = "HB_WORLD_KEY"
KEY = "sk-world-NOT-SECRET-5d2e"
#: the model agent and the evaluation.models entry it plays through
AGENT = "player"
MODEL = "fake-oracle"
#: USD per million tokens, so the estimate and the counts have a cost to check
PRICE_IN, PRICE_OUT = 2.0, 8.0

WORLDS: dict[str, Any] = {
    "environments": ["graph_nav", "tool_dag"],
    "sc": [5, 8],
    "dd": [1],
    "archetypes": 2,
    "variants": 1,
    "horizon_factor": 1.5,
}

#: the columns on which a model agent that plays the oracle must equal the oracle
SAME_AS_ORACLE = ["success", "steps", "mean_jaccard", "tau_w", "tau_a"]
#: the world's identity in both agents' rows (the episode id names the agent)
WORLD_KEY = ["env", "sc", "dd", "archetype", "variant", "seed"]


def model_entry(base_url: str, **kw: Any) -> dict[str, Any]:
    """The openai_compatible entry pointing at a fake server."""
    return {
        "name": MODEL,
        "provider": "openai_compatible",
        "model": "oracle-llm",
        "base_url": base_url,
        "api_key_env": KEY_ENV,
        "max_concurrency": 4,
        "input_cost_per_mtok": PRICE_IN,
        "output_cost_per_mtok": PRICE_OUT,
        "backoff_base_s": 0.01,
        **kw,
    }


def config_data(
    base_url: str, *, model: dict[str, Any] | None = None, oracle: bool = True, **worlds: Any
) -> dict[str, Any]:
    """The study with an oracle (unless ``oracle`` is false: no Dask cluster is then
    started) and the model agent ``player``."""
    agents = [{"name": "oracle", "kind": "oracle"}] if oracle else []
    return {
        "run": {"name": "world-models", "seed": 5},
        "worlds": {
            **WORLDS,
            "agents": [*agents, {"name": AGENT, "kind": "model", "model": MODEL}],
            **worlds,
        },
        "evaluation": {
            "settings": {"temperature": 0, "max_tokens": 2048},
            "models": [model_entry(base_url, **(model or {}))],
            "interrupt_grace_s": 5,
        },
        "dask": {"n_workers": 1},
        "analysis": {"bootstrap": 0},
    }


def write_config(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def study_config(base_url: str = "http://127.0.0.1:9/v1") -> Config:
    return parse_config(config_data(base_url))


def oracle_player() -> WorldAgentPlayer:
    """The responder: answers every harness prompt of the study as the oracle would."""
    return WorldAgentPlayer(study_episodes(study_config()), make_agent=OracleAgent)


def command_env(api_url: str | None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API") and k != KEY_ENV}
    if api_url:
        env["PREFECT_API_URL"] = api_url
    env[KEY_ENV] = KEY
    env.update(extra)
    return env


def run_cmd(cfg: Path, out: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    """``horizonbench run`` to completion."""
    return subprocess.run(
        [str(EXE), "run", "--config", str(cfg), "--out", str(out), "--no-progress", *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def start_cmd(cfg: Path, out: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    """``horizonbench run`` in its own process group (killpg reaches its children)."""
    return subprocess.Popen(
        [str(EXE), "run", "--config", str(cfg), "--out", str(out), "--no-progress"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def wait_answers(server: Any, proc: subprocess.Popen[str], n: int, limit: float = 300) -> None:
    deadline = time.monotonic() + limit
    while server.answered < n:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run never got going"
        time.sleep(0.02)


def episodes(run: Path) -> pd.DataFrame:
    return pq.read_table(run / "episodes" / "part-0.parquet").to_pandas()


def steps(run: Path) -> pd.DataFrame:
    return pq.read_table(run / "steps" / "part-0.parquet").to_pandas()


def comparable(df: pd.DataFrame) -> pd.DataFrame:
    """A table without what depends on the server's speed (``wall_s``: the sum of the
    calls' latencies), in a fixed row order."""
    keys = [c for c in ("episode_id", "step") if c in df.columns]
    return df.drop(columns=["wall_s"], errors="ignore").sort_values(keys).reset_index(drop=True)


def most_in_window(times: list[float], window: float) -> int:
    """The most of ``times`` within any half-open interval of length ``window``."""
    times = sorted(times)
    return max((sum(1 for u in times[i:] if u < t + window) for i, t in enumerate(times)), default=0)
