"""How fast horizonbench makes certified 40x40, B=2 mazes, against a straightforward generator.

Rows of the throughput table (``benchmarks/throughput.py``), median of interleaved runs:
the reference generator of ``maze_reference.py`` (the baseline every ``x baseline``
divides by), ``generate_shard`` in one process at noise 0 and 1.0 (certified instances
per CPU-second, so load from elsewhere on a shared machine does not move them), the
pipeline's ``sample_family`` on a LocalCluster (wall-clock; with its projection for an
idle machine, its start-up and its first call), and the paper's ~40 mazes/s. The goal
(issue 11): >= 1,000 certified instances per CPU-second in one process.

    .venv/bin/python benchmarks/generation.py [--quick] [--repeat N] [--workers N]

A report, not a test: it always exits 0.
"""

from __future__ import annotations

from common import quiet_environ

quiet_environ()

import argparse  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any  # noqa: E402

from common import Measure, log, print_ratio_table, run_rounds  # noqa: E402
from maze_reference import COLS, NUM_KEYS, ROWS, baseline_candidate, maze_params  # noqa: E402

#: "about 147,000 base mazes in about an hour on a laptop"
PAPER_RATE = 147_000 / 3600.0
#: certified instances per CPU-second of one process (issue 11); CPU time, so that load
#: from elsewhere on a shared machine does not move the figure
GOAL_RATE = 1_000.0
#: run r uses SEED0 + r, so every run is different work but reproducible
SEED0 = 20_240_601


@dataclass(frozen=True)
class Sizes:
    """Candidates per run: in process (noise 0 and 1), on the cluster, of the baseline."""

    local: int
    cluster: int
    noise: int
    base: int


SIZES = {
    "full": Sizes(3_000, 10_000, 2_000, 300),
    "quick": Sizes(300, 1_000, 200, 30),
    "smoke": Sizes(40, 80, 20, 4),
}


def _per_cpu_second(count: int, certify: Callable[[], int]) -> tuple[float, dict[str, Any]]:
    """Certified instances per CPU-second (``process_time``) of ``certify()`` over
    ``count`` candidates, in this process."""
    t0, c0 = time.perf_counter(), time.process_time()
    certified = certify()
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    return certified / cpu, {
        "candidates": count,
        "certified": certified,
        "rejected": count - certified,
        "seconds": round(dt, 3),
        "cpu_seconds": round(cpu, 3),
    }


def gen_in_process(noise: float, count: int, seed: int) -> tuple[float, dict[str, Any]]:
    """``generate_shard`` in this process."""
    from horizonbench.datasets.shards import generate_shard

    def certify() -> int:
        result = generate_shard("maze", maze_params(noise), seed, 0, count)
        return sum(1 for _, _, _, rejection in result if rejection is None)

    return _per_cpu_second(count, certify)


def gen_baseline(noise: float, count: int, seed: int) -> tuple[float, dict[str, Any]]:
    """The reference generator on the same candidate seeds, measured as
    :func:`gen_in_process` is, so their ratio is the speed-up."""
    from horizonbench.datasets.shards import candidate_seed

    def certify() -> int:
        seeds = (candidate_seed(seed, "maze", index) for index in range(count))
        return sum(baseline_candidate(ROWS, COLS, NUM_KEYS, noise, 1.0, s) is not None for s in seeds)

    return _per_cpu_second(count, certify)


def gen_cluster(
    client: Any, count: int, seed: int, window: int, shard_size: int | None = None
) -> tuple[float, dict[str, Any]]:
    """The pipeline's own path: ``sample_family`` with the default shard size (200)."""
    from horizonbench.schemas.config import FamilySpec, SamplingSpec
    from horizonbench.tasks.generate.instances import sample_family

    sampling = (
        SamplingSpec(count=count) if shard_size is None else SamplingSpec(count=count, shard_size=shard_size)
    )
    spec = FamilySpec(params=maze_params(0.0), sampling=sampling)
    t0 = time.perf_counter()
    selector = sample_family(client, "maze", spec, seed, window)
    dt = time.perf_counter() - t0
    return selector.certified / dt, {
        "kept": selector.kept,
        "considered": selector.considered,
        "certified": selector.certified,
        "rejected": sum(selector.rejections.values()),
        "seconds": round(dt, 3),
    }


def measures(size: str, reps: int, workers: int) -> tuple[list[Measure], dict[str, Any]]:
    """The generation rows (the paper's last) and what the summary lines need."""
    n = SIZES[size]
    out: list[Measure] = []
    # warm-up: imports, lru caches, numpy/scipy first-call costs
    gen_in_process(0.0, 20, 1)
    gen_baseline(0.0, 3, 1)

    # the baseline and generate_shard in-process (noise 0 and 1), interleaved
    res = run_rounds(
        reps,
        {
            "baseline (pure Python + networkx)": lambda r: gen_baseline(0.0, n.base, SEED0 + r),
            "generate_shard noise 0": lambda r: gen_in_process(0.0, n.local, SEED0 + r),
            "generate_shard noise 1.0": lambda r: gen_in_process(1.0, n.noise, SEED0 + r),
        },
    )
    unit = "certified/CPU-s"
    base, local, noisy = res.values()
    label = "baseline: straightforward generator, 1 process"
    out.append(Measure.of_rounds("baseline", label, unit, base, vs_reference=True))
    vs = {"baseline": "baseline", "vs_reference": True}
    out.append(Measure.of_rounds("in_process", "generate_shard, 1 process", unit, local, **vs))
    label = f"  rejected candidates (of {n.local:,} per run)"
    rejected = [float(d["rejected"]) for d in local[1]]
    out.append(Measure("in_process_rejected", label, "candidates", rejected, integer=True))
    out.append(
        Measure.of_rounds("in_process_noise1", "generate_shard, noise 1.0, 1 process", unit, noisy, **vs)
    )
    cluster, info = cluster_measures(n.cluster, reps, workers)
    return out + cluster, info


def cluster_measures(count: int, reps: int, n_workers: int) -> tuple[list[Measure], dict[str, Any]]:
    """The pipeline path on a LocalCluster: its rate, the projection for idle cores,
    its start-up and first call."""
    from horizonbench.schemas.config import DaskSpec
    from horizonbench.tasks.cluster.client import dask_client

    spec = DaskSpec(n_workers=n_workers)
    t0 = time.perf_counter()
    with dask_client(spec) as client:
        startup = time.perf_counter() - t0
        workers = len(client.scheduler_info().get("workers", {})) or spec.n_workers  # type: ignore[attr-defined]
        window = max(2, 3 * workers * spec.threads_per_worker)  # as generate_instances does
        log(f"LocalCluster up in {startup:.2f}s with {workers} workers, window {window}")
        t1 = time.perf_counter()
        gen_cluster(client, 20 * window, 7, window, shard_size=20)  # warm-up: imports in every worker
        warmup = time.perf_counter() - t1
        res = run_rounds(
            reps,
            {"sample_family on LocalCluster": lambda r: gen_cluster(client, count, SEED0 + r, window)},
        )
        rounds = res["sample_family on LocalCluster"]
    label = f"sample_family, LocalCluster {workers} worker{'s' if workers > 1 else ''}"
    extra = {"workers": workers, "window": window}
    out = [
        Measure.of_rounds(
            "cluster", label, "certified/s", rounds, baseline="baseline", vs_reference=True, extra=extra
        )
    ]
    det = rounds[1]
    cpu_count = os.cpu_count() or 1
    # the cluster can use at most one core per worker thread
    cores = min(cpu_count, workers * spec.threads_per_worker)
    projected = [d["certified"] / d["own_cpu_s"] * cores for d in det if d.get("own_cpu_s")]
    if projected:
        out.append(
            Measure(
                "cluster_projected",
                f"  projection for {cores} idle core{'s' if cores > 1 else ''} "
                f"(certified per CPU-s x {cores})",
                "certified/s",
                projected,
                baseline="baseline",
                vs_reference=True,
            )
        )
    out.append(Measure("cluster_startup", "  LocalCluster start-up (once, not in rate)", "s", [startup]))
    out.append(Measure("cluster_warmup", "  first sample_family (warm-up, not in rate)", "s", [warmup]))
    others = [d["others_cores"] for d in det if "others_cores" in d]
    return out, {"cluster_others": others, "projected": projected, "cpus": cpu_count}


def paper_measure() -> Measure:
    """The reference row: the paper's rate."""
    return Measure(
        "paper",
        "reference: paper (~147k mazes/hour, laptop)",
        "mazes/s",
        [PAPER_RATE],
        baseline="baseline",
        vs_reference=True,
    )


def summary(rows: list[Measure], info: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """The goal line and the load note under the table, and the goal as JSON."""
    import statistics

    goal_rate = next(m for m in rows if m.key == "in_process").median
    met = goal_rate >= GOAL_RATE
    lines = [
        f"goal: >= {GOAL_RATE:,.0f} certified {ROWS}x{COLS} B={NUM_KEYS} instances per CPU-second, "
        f"one process (generate_shard): {'MET' if met else 'NOT MET'} ({goal_rate:,.0f}/CPU-s)"
    ]
    others, projected = info["cluster_others"], info["projected"]
    if others and projected and statistics.median(others) >= 0.25:
        lines.append(
            f"note: other processes kept {statistics.median(others):.1f} of {info['cpus']} cores busy "
            f"during the LocalCluster runs; the CPU-time projection for an idle machine is "
            f"{statistics.median(projected):,.0f}/s (a projection, not a measurement)."
        )
    goal = {"rate": GOAL_RATE, "unit": "certified/CPU-s", "measured": goal_rate, "met": met}
    return lines, goal


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller counts, for a smoke run")
    ap.add_argument(
        "--smoke", action="store_true", help="the smallest counts: does it run (figures meaningless)"
    )
    ap.add_argument("--workers", type=int, default=2, help="LocalCluster workers (default 2)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measure (median reported)")
    args = ap.parse_args(argv)
    import horizonbench.tasks.cluster.progress as progress

    progress.ENABLED["value"] = False
    size = "smoke" if args.smoke else "quick" if args.quick else "full"
    rows, info = measures(size, max(1, args.repeat), args.workers)
    rows.append(paper_measure())
    print()
    print_ratio_table(rows, ("x paper", PAPER_RATE))
    print()
    print("\n".join(summary(rows, info)[0]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
