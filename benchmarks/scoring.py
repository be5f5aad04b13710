"""Scoring throughput (``make bench``): noisy answers to 40x40 B=2 mazes scored per CPU-second,
the straightforward path against the score stage's, and the score stage on a LocalCluster
with one and with two workers (wall time), all in the same run.

The workload has the shape of configs/seqbench-paper.yaml: noisy offline models (eps 0.02
and 0.05), 3 samples each, attempts in the evaluate stage's order (model, instance,
sample), about 5% of them unanswered. Measured:

- ``baseline``: what scoring did before issue 10: every answer read by the general
  reader (``parse_plan_general``) and replayed by ``score_plan``, one score row dict each,
  instance rows as Python dicts (the straightforward loop, in CPU time);
- ``parse_plan + score_plan``: the same loop with the parser's fast path;
- ``score_shard``: the worker's function on the shards of the table (Arrow in, Arrow out);
- ``score_table in-process``: the whole stage in one process (reading, shipping, scoring,
  writing), CPU time;
- ``LocalCluster 1 / 2 workers``: the whole stage on a cluster, wall time, and the speed-up.

    .venv/bin/python benchmarks/scoring.py            # full run (about two minutes)
    .venv/bin/python benchmarks/scoring.py --quick    # smoke run
    .venv/bin/python benchmarks/scoring.py --json out.json
"""

from __future__ import annotations

import os

os.environ["TQDM_DISABLE"] = "1"
os.environ["DO_NOT_TRACK"] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from load import machine_busy_seconds, tree_cpu_seconds  # noqa: E402  (benchmarks/ is on the path)

ROWS = COLS = 40
NUM_KEYS = 2
GOAL = 5_000.0  # noisy answers scored per CPU-second (issue 10)
LABEL = "maze"
MODELS = (("noisy-2pct", 0.02), ("noisy-5pct", 0.05))
SAMPLES = 3


def _log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def build_run(root: Path, instances: int, seed: int = 20_240_601) -> int:
    """Instance table and attempts table of a scoring workload; returns the attempt count."""
    from horizonbench.core.registry import get_family
    from horizonbench.datasets.maze.baselines import noisy_plan
    from horizonbench.datasets.maze.facts import world_from_facts
    from horizonbench.datasets.maze.family import gold_plan
    from horizonbench.datasets.maze.simulator import format_plan
    from horizonbench.datasets.shards import generate_shard
    from horizonbench.schemas.tables import ATTEMPTS_SCHEMA
    from horizonbench.tasks.evaluate import write_attempts
    from horizonbench.tasks.layout import ATTEMPTS_REL, instances_rel
    from horizonbench.tasks.table_parts import PartWriter

    params = {
        "grid_rows": ROWS,
        "grid_cols": COLS,
        "num_keys": NUM_KEYS,
        "num_keys_mode": "at_most",
        "noise_ratio": 0.0,
        "shuffle_ratio": 1.0,
    }
    family = get_family(LABEL)
    rows: list[dict[str, Any]] = []
    start = 0
    while len(rows) < instances:
        got = generate_shard(LABEL, params, seed, start, start + 2 * instances)
        rows += [r for _, _, r, rej in got if rej is None]
        start += 2 * instances
    rows = rows[:instances]
    with PartWriter(root / instances_rel(LABEL), family.instance_schema, "instances") as w:
        w.write(pa.Table.from_pylist(rows, schema=family.instance_schema))
    rng = np.random.default_rng(seed)
    worlds = [world_from_facts(list(r["facts"])) for r in rows]
    golds = [gold_plan(r) for r in rows]
    attempts = []
    for model, eps in MODELS:
        for row, world, gold in zip(rows, worlds, golds, strict=True):
            for sample in range(SAMPLES):
                answered = rng.random() > 0.05
                text = "Solution: " + format_plan(noisy_plan(gold, world, rng, eps)) if answered else None
                attempts.append(
                    {
                        "attempt_key": f"{model}/{row['instance_id']}/{sample}",
                        "model": model,
                        "instance_id": row["instance_id"],
                        "family": LABEL,
                        "sample": sample,
                        "turn": 0,
                        "mode": "plan",
                        "prompt_sha256": "0" * 64,
                        "response": text,
                        "finish_reason": "stop" if answered else None,
                        "input_tokens": 1,
                        "output_tokens": 1,
                        "latency_s": 0.0,
                        "cost_usd": 0.0,
                        "error": None if answered else "429",
                        "error_class": None if answered else "rate_limit",
                        "tries": 1,
                        "reused": False,
                        "via_batch": False,
                        "served_model": None,
                        "system_fingerprint": None,
                    }
                )
    write_attempts(pa.Table.from_pylist(attempts, schema=ATTEMPTS_SCHEMA), root / ATTEMPTS_REL)
    return len(attempts)


# ---------------------------------------------------------------------------------------------
# the straightforward path (kept callable as the baseline)
# ---------------------------------------------------------------------------------------------


def straightforward(run: Path, general: bool) -> tuple[float, int]:
    """Score every attempt one by one from Python dicts, as the score stage did before
    (instance rows and attempts as dicts, a parse and a score_plan per answer, a dict per
    score row, one table at the end). Returns (CPU seconds, answered attempts)."""
    from horizonbench.datasets.maze.family import gold_plan
    from horizonbench.datasets.maze.rules import ACTIONS
    from horizonbench.datasets.maze.simulator import score_plan
    from horizonbench.datasets.plan_parser import parse_plan, parse_plan_general
    from horizonbench.schemas.tables import SCORES_SCHEMA
    from horizonbench.tasks.layout import ATTEMPTS_REL, instances_rel
    from horizonbench.tasks.score_shards import _scored, _unanswered
    from horizonbench.tasks.table_parts import read_parts

    parse = parse_plan_general if general else parse_plan
    c0 = time.process_time()
    attempts = pq.read_table(run / ATTEMPTS_REL).to_pylist()
    instances = {(LABEL, r["instance_id"]): r for r in read_parts(run / instances_rel(LABEL)).to_pylist()}
    out = []
    answered = 0
    order = sorted(range(len(attempts)), key=lambda i: (attempts[i]["family"], attempts[i]["instance_id"]))
    for i in order:
        att = attempts[i]
        row = instances[(att["family"], att["instance_id"])]
        if att["response"] is None:
            out.append((i, _unanswered(att, row, att["error_class"])))
            continue
        answered += 1
        s = score_plan(list(row["facts"]), gold_plan(row), parse(att["response"], task_actions=ACTIONS))
        out.append((i, _scored(att, row, s, "plan")))
    rows = [r for _, r in sorted(out, key=lambda p: p[0])]
    pa.Table.from_pylist(rows, schema=SCORES_SCHEMA)
    return time.process_time() - c0, answered


# ---------------------------------------------------------------------------------------------
# the score stage
# ---------------------------------------------------------------------------------------------


def shard_function(run: Path, rows: int) -> tuple[float, int]:
    """CPU seconds of ``score_shard`` alone over the table's shards of ``rows`` attempts
    (payloads built first). With ``rows`` = one model's attempts, each shard holds one
    model's answers, as the stage's shards of a large run do: each instance's judge (its
    world read from the facts) is made once per model, for ``SAMPLES`` answers."""
    from horizonbench.tasks.layout import ATTEMPTS_REL, instances_rel
    from horizonbench.tasks.score_shards import (
        InstanceIndex,
        ShardSizer,
        iter_shards,
        score_shard,
        shard_payload,
    )

    index = InstanceIndex(run / instances_rel(LABEL), LABEL)
    with pq.ParquetFile(run / ATTEMPTS_REL) as pf:
        payloads = [shard_payload(s, lambda _label: index) for s in iter_shards(pf, ShardSizer(rows), None)]
    cpu = 0.0
    n = 0
    for attempts, instances in payloads:
        batch = score_shard(attempts, instances)
        cpu += batch.cpu_seconds
        n += batch.attempts
    return cpu, n


def stage(run: Path, dest: Path, client: Any = None) -> tuple[float, float, int]:
    """(wall seconds, this process's CPU seconds, rows) of the score stage."""
    from horizonbench.tasks.layout import ATTEMPTS_REL, instances_rel
    from horizonbench.tasks.score_shards import score_table

    t0, c0 = time.perf_counter(), time.process_time()
    n = score_table(run / ATTEMPTS_REL, {LABEL: run / instances_rel(LABEL)}, dest, client)
    return time.perf_counter() - t0, time.process_time() - c0, n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller counts, for a smoke run")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measure (median reported)")
    args = ap.parse_args(argv)

    import horizonbench.tasks.progress as progress

    progress.ENABLED["value"] = False
    reps = max(1, args.repeat)
    n_small, n_big = (60, 400) if args.quick else (300, 4_000)
    results: dict[str, Any] = {"quick": args.quick, "repeat": reps, "goal_per_cpu_s": GOAL}
    with tempfile.TemporaryDirectory(prefix="hb-scoring-") as tmp:
        small, big = Path(tmp) / "small", Path(tmp) / "big"
        t0 = time.perf_counter()
        attempts_small = build_run(small, n_small)
        attempts_big = build_run(big, n_big, seed=7)
        _log(
            f"workloads: {attempts_small:,} and {attempts_big:,} attempts in {time.perf_counter() - t0:.1f}s"
        )
        answered = pq.read_table(small / "attempts/attempts.parquet", columns=["response"])
        n_answered = answered.num_rows - answered["response"].null_count

        # 1. per CPU-second, interleaved rounds: the baselines, the worker's function, the stage
        rates: dict[str, list[float]] = {k: [] for k in ("general", "parse_plan", "shard", "stage")}
        stage(small, Path(tmp) / "warm.parquet")  # warm-up: imports, caches
        for rep in range(reps):
            cpu, n = straightforward(small, general=True)
            rates["general"].append(n / cpu)
            cpu, n = straightforward(small, general=False)
            rates["parse_plan"].append(n / cpu)
            cpu, n = shard_function(small, n_small * SAMPLES)
            rates["shard"].append(n_answered / cpu)
            _, cpu, n = stage(small, Path(tmp) / f"s{rep}.parquet")
            rates["stage"].append(n_answered / cpu)
            _log(f"round {rep + 1}/{reps}: " + ", ".join(f"{k} {v[-1]:,.0f}/s" for k, v in rates.items()))
        assert (Path(tmp) / "s0.parquet").read_bytes() == (Path(tmp) / "warm.parquet").read_bytes()

        # 2. the stage on a LocalCluster, 1 then 2 workers, alternating, wall time
        from distributed import Client, LocalCluster

        walls: dict[int, list[float]] = {1: [], 2: []}
        client_cpu: dict[int, list[float]] = {1: [], 2: []}
        others: dict[int, list[float]] = {1: [], 2: []}
        want = None
        clusters = {
            w: LocalCluster(n_workers=w, threads_per_worker=1, dashboard_address=":0") for w in (1, 2)
        }
        try:
            clients = {w: Client(c) for w, c in clusters.items()}
            for w, client in clients.items():  # warm-up: imports in every worker
                stage(small, Path(tmp) / f"warm{w}.parquet", client)
            for rep in range(reps):
                for w, client in clients.items():
                    dest = Path(tmp) / f"c{w}-{rep}.parquet"
                    busy0, tree0 = machine_busy_seconds(), tree_cpu_seconds()
                    wall, cpu, _ = stage(big, dest, client)
                    busy1, tree1 = machine_busy_seconds(), tree_cpu_seconds()
                    walls[w].append(wall)
                    client_cpu[w].append(cpu)
                    if busy0 is not None and busy1 is not None:
                        others[w].append(max(0.0, (busy1 - busy0) - (tree1 - tree0)) / wall)
                    data = dest.read_bytes()
                    want = want or data
                    assert data == want, "scores differ between runs"
                    dest.unlink()
                    _log(f"LocalCluster {w} worker(s), run {rep + 1}: {wall:.2f}s wall, client {cpu:.2f}s")
                    if others[w]:
                        _log(f"  other processes kept {others[w][-1]:.2f} cores busy meanwhile")
        finally:
            for client in clients.values():
                client.close()
            for c in clusters.values():
                c.close()

    med = {k: statistics.median(v) for k, v in rates.items()}
    speedups = [a / b for a, b in zip(walls[1], walls[2], strict=True)]
    print()
    print(
        f"horizonbench scoring: noisy answers to {ROWS}x{COLS} B={NUM_KEYS} mazes (noise 0), "
        f"{len(MODELS)} noisy models x {SAMPLES} samples; median of {reps}{' (--quick)' * args.quick}; "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}"
    )
    print()
    lines = [
        ("baseline: parse_plan_general + score_plan, one by one", med["general"], 1.0),
        (
            "parse_plan (fast path) + score_plan, one by one",
            med["parse_plan"],
            med["parse_plan"] / med["general"],
        ),
        ("score_shard (the worker's function), a model a shard", med["shard"], med["shard"] / med["general"]),
        ("score_table in-process (read, ship, score, write)", med["stage"], med["stage"] / med["general"]),
    ]
    width = max(len(label) for label, _, _ in lines)
    print(f"{'answered attempts scored per CPU-second'.ljust(width)}  {'median':>8}  {'x baseline':>10}")
    for label, rate, ratio in lines:
        print(f"{label.ljust(width)}  {rate:>8,.0f}  {ratio:>10.2f}")
    print()
    print(
        f"score_table on a LocalCluster, {attempts_big:,} attempts: "
        f"1 worker {statistics.median(walls[1]):.2f}s, 2 workers {statistics.median(walls[2]):.2f}s wall; "
        f"speed-up {statistics.median(speedups):.2f}x "
        f"(runs: {', '.join(f'{s:.2f}' for s in speedups)}); client CPU "
        f"{statistics.median(client_cpu[1]):.2f}s / {statistics.median(client_cpu[2]):.2f}s"
    )
    busy = [x for v in others.values() for x in v]
    if busy:
        print(
            f"other processes kept {statistics.median(busy):.2f} of {os.cpu_count()} cores busy during the "
            "cluster runs (the speed-up needs two idle cores)"
        )
    met = med["shard"] >= GOAL
    print(f"goal: >= {GOAL:,.0f} noisy answers scored per CPU-second: {'MET' if met else 'NOT MET'}")
    if args.json:
        results |= {
            "rates_per_cpu_s": rates,
            "medians": med,
            "cluster": {
                "attempts": attempts_big,
                "wall_s": walls,
                "client_cpu_s": client_cpu,
                "others_cores": others,
                "speedup_2_over_1": speedups,
            },
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        }
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
