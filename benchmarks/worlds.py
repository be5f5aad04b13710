"""How fast the world-model environments step, and what an episode costs beyond the
environment (``make bench``).

Figures, measured in this run on this machine, one core, in-process:

- ``env steps/s``: each environment at sc = 20, dd = 4 (Regime III backdrop), stepped
  through a walk of valid actions drawn from a seeded generator (``valid_actions`` is
  called before each step, as an agent harness would; the figure counts steps, and
  the valid-action listing is part of the cost). Goal: at least 20,000 per environment;
- ``bare replay``: the baseline of the loop, the environment alone replaying the
  optimal plan of each world of a batch (reset and steps), per step;
- ``episode loop``: the same worlds through ``run_episode`` with the oracle agent (the
  agent's plan replay, the observable gold state, Jaccard, invariants, gold
  preconditions, the per-step rows); the overhead is ``loop - bare`` per step. Goal:
  under 1 ms;
- ``wmc-fine``: ``horizonbench run --config configs/wmc-fine.yaml`` end to end
  (Prefect, a 2-worker Dask LocalCluster, the suites, the analysis, the report), against
  the same episodes run in this process on one core.

A report, not a test: it always exits 0.

    .venv/bin/python benchmarks/worlds.py [--quick] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import CLI, ROOT, child_env, log, print_table, run_child

ENVS = ("stateful_puzzle", "graph_nav", "tool_dag")
STEP_GOAL = 20_000
OVERHEAD_GOAL_MS = 1.0


def env_steps(name: str, seconds: float) -> dict[str, Any]:
    from horizonbench.datasets.worlds.base import REGIMES, episode_seed
    from horizonbench.datasets.worlds.study import environment_class

    spec = REGIMES["III"].spec(20, 4).replace(horizon=100_000)
    env = environment_class(name)(spec)
    rng = random.Random(0)
    steps = 0
    variant = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        env.reset(episode_seed(0, [name, *spec.cell()], variant % 10, variant), variant % 10)
        variant += 1
        for _ in range(2_000):
            actions = env.valid_actions()
            result = env.step(actions[rng.randrange(len(actions))])
            steps += 1
            if result.done:
                break
    elapsed = time.perf_counter() - t0
    return {"steps": steps, "seconds": elapsed, "steps_per_s": steps / elapsed}


def loop_overhead(name: str, worlds: int) -> dict[str, Any]:
    from horizonbench.datasets.worlds.agents import OracleAgent
    from horizonbench.datasets.worlds.episode import run_episode
    from horizonbench.datasets.worlds.study import Study, environment_class, resolve_horizon

    eps = [resolve_horizon(e, 1.5) for e in Study((name,), "III", (10, 20), (1, 4), 10, 10).episodes(0)][
        :worlds
    ]
    envs = [environment_class(name)(e.spec) for e in eps]
    for env, e in zip(envs, eps, strict=True):  # warm the solvers' caches: both sides reuse them
        env.reset(e.seed, e.archetype)
    t0 = time.perf_counter()
    bare_steps = 0
    for env, e in zip(envs, eps, strict=True):
        env.reset(e.seed, e.archetype)
        for action in env.optimal_plan():
            env.step(action)
            bare_steps += 1
    bare = time.perf_counter() - t0
    t0 = time.perf_counter()
    loop_steps = 0
    for env, e in zip(envs, eps, strict=True):
        loop_steps += len(run_episode(env, OracleAgent(), e).steps)
    loop = time.perf_counter() - t0
    return {
        "worlds": len(eps),
        "bare_ms_per_step": 1000 * bare / bare_steps,
        "loop_ms_per_step": 1000 * loop / loop_steps,
        "overhead_ms_per_step": 1000 * (loop / loop_steps - bare / bare_steps),
        "steps": loop_steps,
    }


def fine_scan(quick: bool) -> dict[str, Any]:
    import yaml

    from horizonbench.datasets.worlds.study import run_shard
    from horizonbench.schemas.config import parse_config
    from horizonbench.tasks.evaluate.world_episodes import agent_specs

    raw = yaml.safe_load((ROOT / "configs" / "wmc-fine.yaml").read_text())
    if quick:
        raw["worlds"]["variants"] = 1
    cfg = parse_config(raw)
    assert cfg.worlds is not None
    eps = cfg.worlds.study().episodes(cfg.run.seed)
    t0 = time.perf_counter()
    rows, _ = run_shard(eps, agent_specs(cfg), cfg.worlds.horizon_factor)
    here = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fine.yaml"
        path.write_text(yaml.safe_dump(raw))
        done = run_child(
            [str(CLI), "run", "--config", str(path), "--out", str(Path(tmp) / "run")], child_env()
        )
    return {
        "episodes": len(rows),
        "in_process_s": here,
        "command_s": done["wall_s"],
        "command_ok": done["rc"] == 0,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="shorter measures")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = ap.parse_args(argv)
    seconds = 1.0 if args.quick else 4.0
    worlds = 20 if args.quick else 100
    out: dict[str, Any] = {"steps": {}, "loop": {}}
    for name in ENVS:
        log(f"{name}: stepping for {seconds:.0f} s")
        out["steps"][name] = env_steps(name, seconds)
        log(f"{name}: episode loop on {worlds} worlds")
        out["loop"][name] = loop_overhead(name, worlds)
    log("wmc-fine: in process, then the command")
    out["fine"] = fine_scan(args.quick)
    print()
    print("World-model environments (one core; sc = 20, dd = 4 for steps/s)")
    lines = []
    for name in ENVS:
        s, lp = out["steps"][name], out["loop"][name]
        lines.append(
            (
                name,
                f"{s['steps_per_s']:,.0f}",
                f"{s['steps_per_s'] / STEP_GOAL:.2f}",
                f"{lp['bare_ms_per_step']:.4f}",
                f"{lp['loop_ms_per_step']:.4f}",
                f"{lp['overhead_ms_per_step']:.4f}",
                f"{lp['loop_ms_per_step'] / lp['bare_ms_per_step']:.1f}",
            )
        )
    head = ("environment", "steps/s", "x goal", "bare ms/step", "loop ms/step", "overhead ms", "loop / bare")
    print_table(head, lines)
    worst_steps = min(out["steps"][n]["steps_per_s"] for n in ENVS)
    worst_over = max(out["loop"][n]["overhead_ms_per_step"] for n in ENVS)
    print(
        f"goal: >= {STEP_GOAL:,} steps/s per environment: {'met' if worst_steps >= STEP_GOAL else 'MISSED'} "
        f"(slowest {worst_steps:,.0f}); loop overhead < {OVERHEAD_GOAL_MS} ms/step: "
        f"{'met' if worst_over < OVERHEAD_GOAL_MS else 'MISSED'} (largest {worst_over:.3f} ms)"
    )
    f = out["fine"]
    print(
        f"wmc-fine ({f['episodes']} episodes): in process on one core {f['in_process_s']:.1f} s; "
        f"`horizonbench run` end to end {f['command_s']:.1f} s{'' if f['command_ok'] else ' (FAILED)'}; "
        f"ratio {f['command_s'] / f['in_process_s']:.2f}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
