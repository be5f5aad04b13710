"""Every speed trick on and off in the same run (``make bench``; issue 24, deliverable 5).

Each trick is measured against the same work without it, the variants interleaved (a, b,
a, b, ...) so that a burst of outside load hits all of them, and printed as medians with
their min-max and the ratio to the baseline row measured in the same run. It is a
report, not a test: it always exits 0, whatever the figures. The "other load" column is
the cores other processes kept busy meanwhile (``common.LoadMeter``); ``--load N``
starts N busy-looping processes of its own for the whole run, to measure a loaded
machine on purpose.

- ``startup``: a 10-instance offline run as a user runs it (a fresh subprocess, no
  PREFECT_API_URL, a warm PREFECT_HOME), wall time, the CPU of the whole process tree
  and its peak memory (summed PSS), and the command's CPU inside the collector's passes
  (``gc.callbacks``), against the same run with one trick off:
  ``cluster``: the inline client off (a LocalCluster of one worker process, as a run
  above ``SMALL_RUN_MAX`` instances gets; ``tasks.cluster.client``); ``collector on at
  start-up``: the imports without ``cli.main.collector_paused_for_imports``; and a new
  PREFECT_HOME with the database template against one without (116 migrations;
  ``cli.prefect_server``).
- ``server``: the temporary Prefect server alone, started on a warm PREFECT_HOME told to
  skip Prefect's block-type check (what the mark beside the database says) and not:
  the server's own CPU and its time to ``/api/health``.
- ``lanes``: the score stage of noisy answers to 40x40 mazes on a LocalCluster of two
  workers, with lanes that take over half of the largest range left against lanes that
  only score their own range (``tasks.score.lanes.Lanes``): wall time.
- ``cache``: generating the demo's mazes into a new run folder with an empty and with a
  full shared shard cache, and again into a finished run's folder with its own cache
  (pruned to its tables' bytes): wall and CPU time of this process (generation runs
  inline here), and the bytes each cache holds against the instance table's
  (``tasks.generate.shard_cache``).
- ``gc``: the workers' functions with the cyclic collector paused (``gc_paused``)
  against on: ``generate_shard`` over 20x20 mazes and ``score_source`` over the
  ``lanes`` workload, CPU time of the calling thread.

    .venv/bin/python benchmarks/tricks.py --only startup --repeat 5   # --load 2: two busy processes
    .venv/bin/python benchmarks/tricks.py --quick    # one round, small workloads (a smoke run)
"""

from __future__ import annotations

from common import TEN_INSTANCE_RUN, quiet_environ

quiet_environ()

import argparse  # noqa: E402
import contextlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from common import LoadMeter, TreeSampler, child_env, log, print_table  # noqa: E402

TEN = TEN_INSTANCE_RUN.format(name="tricks")
#: the CPU the command spends in the collector's passes, written to $TRICKS_GC at exit
GC_TIMER = """import atexit, gc, os, time
t = [0.0, 0.0]
def cb(phase, _info):
    if phase == "start":
        t[0] = time.process_time()
    else:
        t[1] += time.process_time() - t[0]
gc.callbacks.append(cb)
atexit.register(lambda: open(os.environ["TRICKS_GC"], "w").write(str(t[1])))
"""
#: the command, with a patch applied first (a trick turned off for that variant only)
LAUNCH = "import sys\n{patch}\n" + GC_TIMER + "from horizonbench.cli.main import main\nsys.exit(main())\n"
NO_INLINE = "import horizonbench.tasks.cluster.client as c; c.SMALL_RUN_MAX = 0"
GC_ON = "import horizonbench.cli.main as m; m._paused_warm_up = m._warm_up"

Sample = dict[str, float]


# ------------------------------------------------------------------------- helpers


@contextlib.contextmanager
def extra_load(n: int) -> Iterator[None]:
    """``n`` processes that spin for the block: a loaded machine on purpose. Started by
    a shell that exits at once, so they are not this process's descendants (their CPU
    would count as the benchmark's own)."""
    spin = ["sh", "-c", f"{sys.executable} -c 'while True: pass' >/dev/null 2>&1 & echo $!"]
    pids = [int(subprocess.run(spin, capture_output=True, text=True, check=True).stdout) for _ in range(n)]
    try:
        yield
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)


def interleave(reps: int, variants: dict[str, Callable[[int], Sample]]) -> dict[str, list[Sample]]:
    """Each variant ``reps`` times, round-robin; each sample gains ``others_cores``."""
    out: dict[str, list[Sample]] = {k: [] for k in variants}
    for rep in range(reps):
        for name, run in variants.items():
            with LoadMeter() as meter:
                sample = run(rep)
            if meter.others_cores is not None:
                sample["others_cores"] = meter.others_cores
            out[name].append(sample)
            log(f"{name} {rep + 1}/{reps}: " + ", ".join(f"{k} {v:.2f}" for k, v in sample.items()), "tricks")
    return out


def table(
    results: dict[str, list[Sample]], figures: tuple[tuple[str, str, str], ...], baseline: str
) -> list[dict[str, Any]]:
    """Print medians (min-max) of ``figures`` ((key, title, format)) per variant and the
    median of the per-round ratios to ``baseline``; returns the rows as JSON objects."""
    header = ["variant"]
    for _, title, _ in figures:
        header += [title, f"x {baseline}"]
    header.append("other load")
    rows, out = [], []
    for name, samples in results.items():
        cells, row = [name], {"variant": name}
        for key, _, fmt in figures:
            if not (values := [s[key] for s in samples if key in s]):
                cells += ["-", "-"]
                continue
            med = statistics.median(values)
            spread = f" ({fmt.format(min(values))}-{fmt.format(max(values))})" if len(values) > 1 else ""
            ratios = [s[key] / b[key] for s, b in zip(samples, results[baseline], strict=False) if b.get(key)]
            ratio = statistics.median(ratios) if ratios else float("nan")
            cells += [fmt.format(med) + spread, "-" if ratio != ratio else f"{ratio:.2f}"]
            row[key] = {"median": med, "min": min(values), "max": max(values), f"ratio_vs_{baseline}": ratio}
        others = [s["others_cores"] for s in samples if "others_cores" in s]
        cells.append(f"{statistics.median(others):.1f} cores" if others else "-")
        rows.append(cells)
        out.append(row)
    print_table(header, rows)
    print()
    return out


# ------------------------------------------------------------------------- startup


def startup(work: Path, reps: int) -> list[dict[str, Any]]:
    """The 10-instance run: the default, and each start-up trick off."""
    cfg = work / "ten.yaml"
    cfg.write_text(TEN, encoding="utf-8")
    warm, xdg, runs = work / "home", work / "xdg", work / "runs"
    runs.mkdir(exist_ok=True)

    def env(home: Path, cache: Path) -> dict[str, str]:
        return child_env(
            drop=("PREFECT_*", "HORIZONBENCH_*"), PREFECT_HOME=str(home), XDG_CACHE_HOME=str(cache)
        )

    counter = iter(range(1_000_000))

    def command(
        patch: str = "", home: Callable[[], Path] = lambda: warm, cache: Callable[[], Path] = lambda: xdg
    ) -> Callable[[int], Sample]:
        def run(_rep: int) -> Sample:
            out, gc_file = runs / f"run-{next(counter)}", work / "gc-seconds"
            argv = [
                sys.executable,
                "-c",
                LAUNCH.format(patch=patch),
                "run",
                "--config",
                str(cfg),
                "--out",
                str(out),
            ]
            t0 = time.perf_counter()
            with LoadMeter() as meter:
                environ = env(home(), cache()) | {"TRICKS_GC": str(gc_file)}
                proc = subprocess.Popen(argv, env=environ, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                with TreeSampler(proc.pid) as mem:
                    _, err = proc.communicate()
            wall = time.perf_counter() - t0
            if proc.returncode != 0:
                log(f"exit {proc.returncode}: {err.decode(errors='replace')[-2000:]}", "tricks")
            shutil.rmtree(out, ignore_errors=True)
            sample = {"wall_s": wall, "cpu_s": meter.own_cpu, "pss_mib": mem.peak_pss / 2**20}
            with contextlib.suppress(OSError, ValueError):
                sample["gc_s"] = float(gc_file.read_text(encoding="utf-8"))
            return sample

        return run

    log("warming a PREFECT_HOME and making the database template (untimed)", "tricks")
    command()(0)
    if not reps:  # the warm home only (for ``server``)
        return []

    homes = (work / f"home-{i}" for i in range(1_000_000))
    caches = (work / f"xdg-{i}" for i in range(1_000_000))
    variants = {
        "default": command(),
        "cluster": command(NO_INLINE),
        "collector on at start-up": command(GC_ON),
        "new home": command(home=lambda: next(homes)),
        "new home, no template": command(home=lambda: next(homes), cache=lambda: next(caches)),
    }
    print("startup: a 10-instance offline run, the process tree; the command's CPU in gc (medians, min-max)")
    figures = (
        ("wall_s", "wall s", "{:.1f}"),
        ("cpu_s", "CPU s", "{:.1f}"),
        ("pss_mib", "peak PSS MiB", "{:.0f}"),
    )
    return table(interleave(reps, variants), (*figures, ("gc_s", "in gc s", "{:.2f}")), "default")


# ------------------------------------------------------------------------- server


def server(work: Path, reps: int) -> list[dict[str, Any]]:
    """The server's start with Prefect's block-type check skipped (the blocks mark) and not."""
    from horizonbench.cli import prefect_server as ps

    home = work / "home"
    if not home.exists():
        startup(work, 0)  # a warm home (its untimed run)
    os.environ.update(PREFECT_HOME=str(home), XDG_CACHE_HOME=str(work / "xdg"))
    os.environ.pop("PREFECT_API_URL", None)

    def start(skip: bool) -> Callable[[int], Sample]:
        def one(_rep: int) -> Sample:
            srv = ps.TemporaryServer()
            srv.blocks_registered = skip  # home_db stays None: no mark is written
            t0 = time.perf_counter()
            srv.spawn()
            proc = srv.process
            assert proc is not None
            srv.wait_ready(120)
            ready = time.perf_counter() - t0
            proc.terminate()
            _, _, usage = os.wait4(proc.pid, 0)
            srv.process = None
            return {"ready_s": ready, "server_cpu_s": usage.ru_utime + usage.ru_stime}

        return one

    results = interleave(reps, {"block check skipped": start(True), "block check": start(False)})
    print("server: the temporary Prefect server's start on a warm home (medians, min-max)")
    figures = (("ready_s", "to healthy s", "{:.1f}"), ("server_cpu_s", "server CPU s", "{:.2f}"))
    return table(results, figures, "block check skipped")


# ------------------------------------------------------------------------- lanes


def lanes(work: Path, reps: int, instances: int) -> list[dict[str, Any]]:
    """The score stage on two workers: lanes that take over half a range, and without."""
    from distributed import Client, LocalCluster
    from scoring import LABEL, build_run

    from horizonbench.tasks.run_folder.layout import ATTEMPTS_REL, instances_rel
    from horizonbench.tasks.score import lanes

    log(f"building the scoring workload ({instances} instances)", "tricks")
    run = work / "scoring"
    attempts = build_run(run, instances)
    steal = lanes.Lanes._steal
    counter = iter(range(1_000_000))

    def stage(client: Any, take_over: bool) -> Callable[[int], Sample]:
        def one(_rep: int) -> Sample:
            lanes.Lanes._steal = steal if take_over else (lambda self, lane, least: False)  # type: ignore[method-assign]
            dest = work / f"scores-{next(counter)}.parquet"
            try:
                t0 = time.perf_counter()
                lanes.score_table(run / ATTEMPTS_REL, {LABEL: run / instances_rel(LABEL)}, dest, client)
                return {"wall_s": time.perf_counter() - t0}
            finally:
                lanes.Lanes._steal = steal  # type: ignore[method-assign]
                dest.unlink(missing_ok=True)

        return one

    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        client.wait_for_workers(2)
        stage(client, True)(0)  # the workers import the family (untimed)
        variants = {"lanes take over": stage(client, True), "own range only": stage(client, False)}
        results = interleave(reps, variants)
    print(f"lanes: the score stage of {attempts:,} answers on a LocalCluster of 2 workers (medians, min-max)")
    return table(results, (("wall_s", "wall s", "{:.2f}"),), "lanes take over")


# ------------------------------------------------------------------------- shard cache

CACHE_MAZE = {
    "params": {"grid_rows": 12, "grid_cols": 12, "num_keys": 2, "noise_ratio": 0.0, "shuffle_ratio": 1.0},
    "sampling": {"bins": {"min": 10, "max": 70, "width": 5, "per_bin": 10}, "shard_size": 100},
}


def cache(work: Path, reps: int, per_bin: int) -> list[dict[str, Any]]:
    """Generation (inline, as a small run generates) into a new run folder from an
    empty and from a full shared cache, and into a finished run's folder again from its
    own cache (pruned to the bytes of its tables); the disk each cache holds."""
    from horizonbench.schemas.config import parse_config
    from horizonbench.tasks.cluster.client import shared_cluster
    from horizonbench.tasks.generate.instances import generate_all
    from horizonbench.tasks.generate.shard_cache import CACHE_REL, folder_bytes
    from horizonbench.tasks.run_folder.table_parts import part_files

    counter = iter(range(1_000_000))
    spec = CACHE_MAZE | {
        "sampling": CACHE_MAZE["sampling"] | {"bins": CACHE_MAZE["sampling"]["bins"] | {"per_bin": per_bin}}
    }

    def config(cache_dir: Path | None) -> Any:
        generation = {} if cache_dir is None else {"cache_dir": str(cache_dir)}
        return parse_config({"run": {"seed": 7}, "families": {"maze": spec}, "generation": generation})

    def generate(cache_dir: Path | None, run: Path | None = None) -> Sample:
        """Generate into ``run`` (a new folder by default) with the shared cache
        ``cache_dir`` (None: the run's own, ``<run>/cache/shards``)."""
        folder = run or work / f"gen-{next(counter)}"
        cfg = config(cache_dir)
        t0, c0 = time.perf_counter(), time.process_time()
        with shared_cluster(cfg.dask, ("maze",), in_process=True):
            generate_all(cfg, folder)
        sample = {"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0}
        table_bytes = sum(f.stat().st_size for f in part_files(folder / ".staging" / "instances" / "maze"))
        cache_bytes = folder_bytes(cache_dir or folder / CACHE_REL)
        sample["table_mb"], sample["cache_mb"] = table_bytes / 1e6, cache_bytes / 1e6
        if run is None:
            shutil.rmtree(folder, ignore_errors=True)
        return sample

    full, own = work / "cache-full", work / "gen-own"
    log("filling a shared shard cache and a run's own (untimed)", "tricks")
    generate(full)
    generate(None, own)

    def cold(_rep: int) -> Sample:
        empty = work / f"cache-empty-{next(counter)}"
        try:
            return generate(empty)
        finally:
            shutil.rmtree(empty, ignore_errors=True)

    variants = {
        "no cache": cold,
        "shared cache, full": lambda _rep: generate(full),
        "rerun, own cache": lambda _rep: generate(None, own),
    }
    results = interleave(reps, variants)
    print(
        "cache: generating the demo's 12x12 mazes (inline) into a new run folder with an empty and "
        "a full shared cache, and again into a finished run's folder with its own cache, "
        "pruned to its tables (medians, min-max)"
    )
    return table(
        results,
        (
            ("wall_s", "wall s", "{:.2f}"),
            ("cpu_s", "CPU s", "{:.2f}"),
            ("table_mb", "table MB", "{:.2f}"),
            ("cache_mb", "cache MB", "{:.2f}"),
        ),
        "no cache",
    )


# ------------------------------------------------------------------------- the paused collector


def collector(work: Path, reps: int, candidates: int, instances: int) -> list[dict[str, Any]]:
    """The workers' functions with the cyclic collector paused, and on; with it on, the
    CPU spent inside its passes too (``gc.callbacks``): that is what pausing saves, a
    figure the noise of a shared machine does not blur as it blurs a difference of two
    CPU times."""
    import gc

    from scoring import build_run, shard_function

    import horizonbench.datasets.shards as ds
    from horizonbench.tasks.score import shards as ss

    run = work / "scoring"
    if not run.exists():
        log(f"building the scoring workload ({instances} instances)", "tricks")
        build_run(run, instances)
    paused = ds.gc_paused
    inside = {"cpu": 0.0, "began": 0.0}

    def passes(phase: str, _info: dict[str, Any]) -> None:
        if phase == "start":
            inside["began"] = time.thread_time()
        else:
            inside["cpu"] += time.thread_time() - inside["began"]

    def job(pause: bool) -> Callable[[int], Sample]:
        def one(_rep: int) -> Sample:
            ds.gc_paused = ss.gc_paused = paused if pause else contextlib.nullcontext  # type: ignore[assignment]
            gc.callbacks.append(passes)
            try:
                inside["cpu"] = 0.0
                t0 = time.thread_time()
                ds.generate_shard("maze", {"grid_rows": 20, "grid_cols": 20, "num_keys": 1}, 7, 0, candidates)
                gen, gen_gc = time.thread_time() - t0, inside["cpu"]
                inside["cpu"] = 0.0
                score, _ = shard_function(run, 1_800, 32)
                return {
                    "generate_cpu_s": gen,
                    "generate_gc_pct": 100 * gen_gc / gen,
                    "score_cpu_s": score,
                    "score_gc_pct": 100 * inside["cpu"] / score,
                }
            finally:
                gc.callbacks.remove(passes)
                ds.gc_paused = ss.gc_paused = paused  # type: ignore[assignment]

        return one

    results = interleave(reps, {"paused": job(True), "collector on": job(False)})
    print(
        f"gc: generate_shard of {candidates} 20x20 mazes and score_source over the scoring workload, "
        "CPU and the share of it inside the collector's passes (medians, min-max)"
    )
    return table(
        results,
        (
            ("generate_cpu_s", "generate CPU s", "{:.2f}"),
            ("generate_gc_pct", "in gc %", "{:.1f}"),
            ("score_cpu_s", "score CPU s", "{:.2f}"),
            ("score_gc_pct", "in gc %", "{:.1f}"),
        ),
        "paused",
    )


# ------------------------------------------------------------------------- main

SECTIONS = ("startup", "server", "lanes", "cache", "gc")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=SECTIONS, action="append", help="one section (repeatable)")
    ap.add_argument("--repeat", type=int, default=3, help="interleaved rounds per section (default 3)")
    ap.add_argument("--load", type=int, default=0, metavar="N", help="N busy processes beside the benchmark")
    ap.add_argument("--quick", action="store_true", help="one round, small workloads (a smoke run)")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = ap.parse_args(argv)
    reps = 1 if args.quick else max(1, args.repeat)
    scale = {
        "instances": 500 if args.quick else 2_000,
        "candidates": 100 if args.quick else 400,
        "per_bin": 2 if args.quick else 10,
    }
    print(
        f"tricks: {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, {os.cpu_count()} cores, "
        f"{reps} interleaved rounds, {args.load} extra busy processes"
    )
    print()
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="horizonbench-tricks-") as tmp, extra_load(args.load):
        work = Path(tmp)
        for name in args.only or SECTIONS:
            if name == "startup":
                out[name] = startup(work, reps)
            elif name == "server":
                out[name] = server(work, reps)
            elif name == "lanes":
                out[name] = lanes(work, reps, scale["instances"])
            elif name == "cache":
                out[name] = cache(work, reps, scale["per_bin"])
            else:
                out[name] = collector(work, reps, scale["candidates"], scale["instances"])
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
