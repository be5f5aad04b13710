"""Generation at scale (``make bench``): memory against instance count, and 1 -> 2 workers.

Two figures, each against a baseline measured in the same run on the same machine:

- **Peak memory of the whole process tree** (the command, its Dask workers and its
  temporary Prefect server, summed, sampled every 0.1 s) while ``horizonbench generate``
  makes 40x40, B = 2 mazes, at three counts. The figure is the slope (MiB per 10,000
  instances, a least-squares line through the three peaks) and the line's value at a
  million; the ratios are against the smallest count. A flat curve is the goal: the
  issue asks for under 1.5 GB at 1,000,000 instances.
- **Speed-up of two workers over one**: ``sample_family`` streaming into a real
  instance table on a LocalCluster of one worker and on one of two, both started and
  warmed first, the same candidates, three runs alternating; cluster start-up excluded
  (it is in ``benchmarks/overhead.py``). 12,000 instances by default (about 8 s on one
  worker): in a run of two or three seconds the first wave and the last shards, which
  one worker cannot share with another, weigh more than in the studies the cluster is
  for. The goal is 1.7x.

It is a report, not a test: it always exits 0, whatever the figures.

    .venv/bin/python benchmarks/scale.py            # 5k, 20k, 100k instances (several minutes)
    .venv/bin/python benchmarks/scale.py --quick    # 1k, 3k, 6k instances
    .venv/bin/python benchmarks/scale.py --counts 1000000   # the goal's own count (~15 min)
"""

from __future__ import annotations

from common import quiet_environ

quiet_environ()

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from common import CLI, LoadMeter, TreeSampler, log, print_table, worker_clients  # noqa: E402

PARAMS = {"grid_rows": 40, "grid_cols": 40, "num_keys": 2, "num_keys_mode": "at_most"}
MEMORY_GOAL_MIB = 1.5 * 1000**3 / 2**20  # 1.5 GB
SPEEDUP_GOAL = 1.7


def _config(count: int, folder: Path) -> Path:
    path = folder / f"gen-{count}.json"
    cfg = {
        "run": {"name": f"scale-{count}", "seed": 11},
        "families": {"maze": {"params": PARAMS, "sampling": {"count": count, "max_candidates": 10 * count}}},
        "dask": {"n_workers": 2},
    }
    path.write_text(json.dumps(cfg))
    return path


def peak_memory(count: int, folder: Path) -> dict[str, Any]:
    """``horizonbench generate`` as a user runs it, the tree's peak RSS sampled."""
    cfg = _config(count, folder)
    out = folder / f"run-{count}"
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [str(CLI), "generate", "--config", str(cfg), "--out", str(out), "--no-progress"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    with TreeSampler(proc.pid) as sampler:
        _, err = proc.communicate()
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        log(f"generate {count} failed ({proc.returncode}): {err[-2000:]}")
    parts = sorted((out / "instances" / "maze").glob("part-*.parquet"))
    size = sum(p.stat().st_size for p in parts)
    return {
        "count": count,
        "peak_rss_mib": sampler.peak / 2**20,
        "peak_mib": sampler.peak_pss / 2**20,
        "wall_s": wall,
        "parts": len(parts),
        "table_mib": size / 2**20,
        "ok": proc.returncode == 0,
    }


def _line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0
    return slope, my - slope * mx


def speedup(count: int, folder: Path, repeat: int = 3) -> dict[str, Any]:
    """The same candidates on one worker, then two, ``repeat`` times alternating (the
    machine's speed drifts by tens of percent over minutes: only runs side by side
    compare). Both clusters start first and every worker is warmed by ``warm_worker``,
    as the command's own cluster is; start-up is excluded (``benchmarks/overhead.py``
    has it). Per run: wall time, the CPU of the whole process tree and of the shards
    alone, and what other processes used meanwhile."""
    from horizonbench.core.registry import get_family
    from horizonbench.schemas.config import FamilySpec
    from horizonbench.tasks.cluster import progress
    from horizonbench.tasks.cluster.client import warm_worker
    from horizonbench.tasks.generate.instances import sample_family
    from horizonbench.tasks.run_folder.table_parts import PartWriter, same_bytes

    progress.ENABLED["value"] = False
    schema = get_family("maze").instance_schema
    spec = FamilySpec.model_validate({"params": PARAMS, "sampling": {"count": count}})
    out: dict[str, Any] = {"count": count, "repeat": repeat}
    runs: dict[int, list[dict[str, float]]] = {1: [], 2: []}
    with worker_clients((1, 2)) as clients:
        for client in clients.values():
            client.run(warm_worker, ("maze",))
        identical = True
        for rep in range(repeat):
            for workers in (1, 2):
                dest = folder / f"speedup-{workers}-{rep}"
                with LoadMeter() as meter, PartWriter(dest, schema, "instances/maze") as writer:
                    selector = sample_family(
                        clients[workers], "maze", spec, 5, 3 * workers, writer.write, workers
                    )
                wall = meter.wall
                run = {"wall": wall, "tree_cpu": meter.own_cpu, "kept": selector.kept}
                if meter.others_cores is not None:
                    run["others"] = meter.others_cores
                runs[workers].append(run)
                log(
                    f"{count:,} instances on {workers} worker(s), run {rep + 1}: {wall:.2f} s wall, "
                    f"tree {run['tree_cpu']:.2f} s CPU, other processes {run.get('others', 0.0):.2f} cores"
                )
            identical &= same_bytes(folder / f"speedup-1-{rep}", folder / f"speedup-2-{rep}")
    ratios = [a["wall"] / b["wall"] for a, b in zip(runs[1], runs[2], strict=True)]
    out["runs"] = runs
    out["ratios"] = ratios
    out["ratio"] = statistics.median(ratios)
    for w in (1, 2):
        out[f"wall_{w}"] = statistics.median(r["wall"] for r in runs[w])
        out[f"tree_cpu_{w}"] = statistics.median(r["tree_cpu"] for r in runs[w])
    others = [r["others"] for w in (1, 2) for r in runs[w] if "others" in r]
    out["others_max"] = max(others, default=None)
    out["identical"] = identical
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller counts")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    ap.add_argument("--counts", metavar="N,N,...", help="instance counts (e.g. 1000000: about 15 min idle)")
    ap.add_argument(
        "--speedup-count", type=int, default=None, help="instances of the 1 -> 2 worker runs (default 12,000)"
    )
    args = ap.parse_args(argv)
    counts = [1_000, 3_000, 6_000] if args.quick else [5_000, 20_000, 100_000]
    if args.counts:
        counts = sorted(int(c) for c in args.counts.split(","))
    result: dict[str, Any] = {"memory": [], "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="hb-scale-") as tmp:
        folder = Path(tmp)
        for n in counts:
            log(f"generate {n:,} 40x40 mazes, sampling the process tree's memory")
            result["memory"].append(peak_memory(n, folder))
        log("1 -> 2 workers")
        result["speedup"] = speedup(
            args.speedup_count or (1_000 if args.quick else 12_000), folder, 1 if args.quick else 3
        )
    mem = result["memory"]
    xs, ys = [m["count"] for m in mem], [m["peak_mib"] for m in mem]
    if len(mem) > 1:
        slope, icept = _line(xs, ys)
        per_decade, at_one = _line([math.log10(x) for x in xs], ys)
    else:
        slope, icept, per_decade, at_one = 0.0, ys[0], 0.0, ys[0] - 0.0
    # a straight line through the peaks is an upper bound when the curve bends over
    at_million = icept + slope * 1_000_000
    at_million_log = at_one + per_decade * 6
    result["slope_mib_per_10k"] = slope * 10_000
    result["at_million_mib"] = at_million
    result["per_decade_mib"] = per_decade
    result["at_million_log_mib"] = at_million_log
    base = mem[0]
    print()
    print("Generation at scale: 40x40 mazes, B = 2 (horizonbench generate, 2 workers)")
    print_table(
        (
            "instances",
            "peak tree PSS MiB",
            "RSS MiB",
            "x memory",
            "x count",
            "wall s",
            "parts",
            "table MiB",
            "",
        ),
        [
            (
                f"{m['count']:,}",
                f"{m['peak_mib']:,.0f}",
                f"{m['peak_rss_mib']:,.0f}",
                f"{m['peak_mib'] / base['peak_mib']:.2f}",
                f"{m['count'] / base['count']:.0f}",
                f"{m['wall_s']:.1f}",
                str(m["parts"]),
                f"{m['table_mib']:.1f}",
                "" if m["ok"] else "FAILED",
            )
            for m in mem
        ],
        left=(8,),
    )
    measured = [m for m in mem if m["count"] >= 1_000_000]
    if measured:
        peak = measured[-1]["peak_mib"]
        met = "met" if peak < MEMORY_GOAL_MIB else "MISSED"
        verdict = f"measured at {measured[-1]['count']:,}: {peak:,.0f} MiB, {met}"
    else:
        verdict = (
            f"straight line {'met' if at_million < MEMORY_GOAL_MIB else 'MISSED'}, "
            f"log line {'met' if at_million_log < MEMORY_GOAL_MIB else 'MISSED'}"
        )
    if len(mem) > 1:
        print(
            f"slope {slope * 10_000:,.1f} MiB per 10k instances, {per_decade:,.0f} MiB per tenfold count; "
            f"at 1,000,000: {at_million:,.0f} MiB on the straight line (an upper bound), "
            f"{at_million_log:,.0f} MiB on the log line"
        )
    print(f"goal: < {MEMORY_GOAL_MIB:,.0f} MiB (1.5 GB) at 1,000,000 instances: {verdict}")
    s = result["speedup"]
    print()
    print(
        f"sample_family on a LocalCluster, {s['count']:,} instances, start-up excluded, "
        f"{s['repeat']} interleaved runs, medians:"
    )
    print(f"  1 worker  {s['wall_1']:8.2f} s wall, {s['tree_cpu_1']:.2f} s CPU of the process tree")
    print(f"  2 workers {s['wall_2']:8.2f} s wall, {s['tree_cpu_2']:.2f} s CPU of the process tree")
    runs_text = ", ".join(f"{r:.2f}" for r in s["ratios"])
    print(
        f"  speed-up {s['ratio']:.2f}x (runs: {runs_text}; goal {SPEEDUP_GOAL}x: "
        f"{'met' if s['ratio'] >= SPEEDUP_GOAL else 'MISSED'}); tables identical: {s['identical']}"
        + (f"; other processes used up to {s['others_max']:.2f} cores" if s["others_max"] is not None else "")
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
