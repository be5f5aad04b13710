"""What the agent harness costs per agent step, beyond the model (``make bench``).

The model is the fake agent of the tests (tests/world_agent_server.py) playing the
oracle: it answers every harness call at once with the JSON the oracle's step implies,
so every episode is solved in L* steps of 3 calls (structured memory) and the figures
are the harness's own. Worlds: the three environments at sc = 10 and 20, dd = 2 (Regime
III backdrop, T = 1.5 L*), 10 worlds each. Figures per agent step, in this process:

- ``offline oracle``: the baseline measured in the same run, the episode loop with the
  offline oracle agent (environment, scoring, per-step rows), no harness;
- ``harness, in-process model``: the harness with the fake agent called directly (no
  engine, no HTTP): prompt building, reading and validating three JSON answers, and
  the same scoring; the fake agent's own time is measured and taken off;
- ``+ engine and store``: the same through the evaluation engine's ModelRunner and a
  SQLite attempt store (keys, a lookup and a durable write per call). Goal: under 2 ms
  per step, everything but the model included;
- ``+ HTTP (fake server)``: the whole path, the OpenAI SDK over real HTTP to the fake
  server in a child process at zero latency; ``outside the call`` is the step's wall
  time minus the time spent inside ``Model.complete``.

Each path runs twice over the same worlds and keeps its faster round (the first also
warms the environments' solver caches, which every path shares).

A report, not a test: it always exits 0.

    .venv/bin/python benchmarks/harness.py [--quick] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import ROOT, ServerProcess, log, print_table

sys.path.insert(0, str(ROOT / "tests"))  # the fake agent (world_agent_server.py)

ENVS = ("stateful_puzzle", "graph_nav", "tool_dag")
GOAL_MS = 2.0


def _episodes(worlds: int) -> list[Any]:
    from horizonbench.datasets.worlds.study import Study, resolve_horizon

    out = []
    for env in ENVS:
        eps = Study((env,), "III", (10, 20), (2,), 10, 10).episodes(0)
        out.extend(resolve_horizon(e, 1.5) for e in eps[: worlds // 2] + eps[-(worlds - worlds // 2) :])
    return out


def _player(episodes: list[Any]) -> Any:
    from horizonbench.datasets.worlds.agents import OracleAgent
    from world_agent_server import WorldAgentPlayer

    return WorldAgentPlayer(episodes, lambda: OracleAgent("m"))


def _body(request: Any) -> dict[str, Any]:
    return {"model": "fake", "messages": [{"role": m.role, "content": m.content} for m in request.messages]}


class _Timed:
    """A Model answering from the fake agent in-process; counts the time inside."""

    def __init__(self, player: Any) -> None:
        self.name = "m"
        self.player = player
        self.inside = 0.0

    def identity(self) -> dict[str, Any]:
        return {"provider": "bench", "model": "fake"}

    def complete(self, request: Any) -> Any:
        from horizonbench.core.types import Completion

        t0 = time.perf_counter()
        text = self.player(_body(request))
        self.inside += time.perf_counter() - t0
        return Completion(text=text, finish_reason="stop", input_tokens=100, output_tokens=len(text) // 4)


def offline(episodes: list[Any]) -> tuple[int, float]:
    from horizonbench.datasets.worlds.agents import OracleAgent
    from horizonbench.datasets.worlds.episode import run_episode
    from horizonbench.datasets.worlds.study import environment_class

    steps, t0 = 0, time.perf_counter()
    for ep in episodes:
        steps += run_episode(environment_class(ep.env)(ep.spec), OracleAgent("m"), ep).episode["steps"]
    return steps, time.perf_counter() - t0


def harness(episodes: list[Any], call_of: Any) -> tuple[int, float, float]:
    """(steps, wall seconds, seconds inside the model) for every episode."""
    from horizonbench.datasets.worlds.episode import episode_id, run_episode
    from horizonbench.datasets.worlds.study import environment_class
    from horizonbench.harness.agent import HarnessAgent, HarnessSettings

    call, inside = call_of
    steps, t0 = 0, time.perf_counter()
    for ep in episodes:
        agent = HarnessAgent("m", call, HarnessSettings(), episode_id=episode_id(ep.env, "m", ep.seed))
        steps += run_episode(environment_class(ep.env)(ep.spec), agent, ep).episode["steps"]
    return steps, time.perf_counter() - t0, inside()


def in_process(player: Any) -> Any:
    from horizonbench.models.engine import Outcome

    model = _Timed(player)

    def call(request: Any) -> Outcome:
        return Outcome(request, "k", model.complete(request))

    return call, lambda: model.inside


def with_engine(player: Any, store: Any) -> Any:
    from horizonbench.models.engine import ModelRunner

    model = _Timed(player)
    runner = ModelRunner(model, store, reuse="never")
    return runner.attempt, lambda: model.inside


def over_http(port: int, store: Any) -> Any:
    from horizonbench.models.engine import ModelRunner
    from horizonbench.models.openai_chat import OpenAIChatModel
    from horizonbench.schemas.config import ModelSpec

    spec = ModelSpec(name="m", provider="openai", model="fake", base_url=f"http://127.0.0.1:{port}/v1")
    model = OpenAIChatModel(spec, "sk-bench")
    inside = [0.0]
    complete = model.complete

    def timed(request: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return complete(request)
        finally:
            inside[0] += time.perf_counter() - t0

    model.complete = timed  # type: ignore[method-assign]
    runner = ModelRunner(model, store, reuse="never")
    return runner.attempt, lambda: inside[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4 worlds per environment instead of 10")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    worlds = 4 if args.quick else 10
    from horizonbench.models.attempt_store import AttemptStore

    episodes = _episodes(worlds)
    log(f"harness: {len(episodes)} worlds, building the fake agent's traces")
    player = _player(episodes)
    rows: dict[str, dict[str, float]] = {}

    def keep(name: str, steps: int, ms: float, **extra: float) -> None:
        # the best of the rounds: the first round also warms the solvers' caches
        if name not in rows or ms < rows[name]["ms_per_step"]:
            rows[name] = {"steps": steps, "ms_per_step": ms, **extra}

    with tempfile.TemporaryDirectory() as tmp:
        # its own player, in a forked child: the server's answers are not our CPU
        server = ServerProcess(_player(episodes))
        port = server.port
        for round_ in range(2):
            steps, wall = offline(episodes)
            keep("offline oracle (baseline)", steps, 1e3 * wall / steps)
            steps, wall, inside = harness(episodes, in_process(player))
            keep("harness, in-process model", steps, 1e3 * (wall - inside) / steps)
            with AttemptStore(Path(tmp) / f"a{round_}.sqlite") as store:
                steps, wall, inside = harness(episodes, with_engine(player, store))
            keep("+ engine and store", steps, 1e3 * (wall - inside) / steps)
            with AttemptStore(Path(tmp) / f"b{round_}.sqlite") as store:
                steps, wall, inside = harness(episodes, over_http(port, store))
            keep(
                "+ HTTP (fake server)",
                steps,
                1e3 * wall / steps,
                outside_call_ms=1e3 * (wall - inside) / steps,
            )
        server.finish()
    base = rows["offline oracle (baseline)"]["ms_per_step"]
    own = rows["harness, in-process model"]["ms_per_step"]
    engine = rows["+ engine and store"]["ms_per_step"]
    print()
    print(f"Agent harness per agent step (3 calls; {len(episodes)} worlds, oracle-playing fake model)")
    print_table(
        ("path", "steps", "ms/step", "x offline", "outside call ms"),
        [
            (
                name,
                f"{r['steps']:.0f}",
                f"{r['ms_per_step']:.2f}",
                f"{r['ms_per_step'] / base:.1f}",
                f"{r['outside_call_ms']:.2f}" if "outside_call_ms" in r else "",
            )
            for name, r in rows.items()
        ],
    )
    verdict = "meets" if engine < GOAL_MS else "misses"
    print(
        f"harness per step (prompts, validation, scoring): {own:.2f} ms, {own - base:.2f} ms above the "
        f"offline loop; with the engine and store {engine:.2f} ms: {verdict} the {GOAL_MS} ms goal"
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps({"rows": rows, "harness_ms": own, "with_engine_ms": engine}, indent=2)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
