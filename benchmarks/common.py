"""What every benchmark shares, so each file holds only what it measures.

- a quiet environment for this process and its children (no progress bars, no
  analytics), and one ``log`` to stderr, so the tables on stdout stay clean;
- the machine's *other* load: a benchmark on a shared machine is only readable beside
  the cores other processes kept busy meanwhile (``LoadMeter``);
- interleaved repeats (``run_rounds``): a, b, c, a, b, c, ... so a burst of outside
  load hits every variant rather than one, reported as medians with their min-max;
- peak memory of a command: of its process tree (``TreeSampler``) or of its largest
  process (``run_child(..., memory=True)``, via ``/usr/bin/time -v``);
- a LocalCluster per worker count, all started before anything is timed
  (``worker_clients``), for the 1 -> 2 worker comparisons;
- the fake provider of the tests in a forked child (``ServerProcess``), so its CPU is
  not counted as ours;
- the tables: ``print_table`` (aligned columns) and ``print_ratio_table``
  (medians, min-max and ratios against a baseline row and a reference rate).

Every benchmark script puts ``benchmarks/`` on ``sys.path`` by being run from it
(``python benchmarks/x.py``), so ``from common import ...`` finds this file.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: the CLI of this venv, as a user runs it
CLI = Path(sys.executable).with_name("horizonbench")
QUIET = {"TQDM_DISABLE": "1", "DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}

#: the small run whose fixed cost overhead.py and tricks.py both time: 10 maze instances,
#: two offline models, no cluster, no bootstrap (``.format(name=...)`` names the run)
TEN_INSTANCE_RUN = """\
run: {{name: {name}, seed: 5}}
families:
  maze:
    params: {{grid_rows: 5, grid_cols: 5, num_keys: 1}}
    sampling: {{count: 10, shard_size: 10}}
    prompt: {{shots: 0}}
evaluation:
  samples: 1
  models:
    - {{name: oracle, provider: offline, kind: oracle}}
    - {{name: noisy, provider: offline, kind: noisy, eps: 0.1}}
dask: {{n_workers: 1}}
analysis: {{bootstrap: 0}}
"""


def quiet_environ() -> None:
    """Set :data:`QUIET` in this process (before Prefect or tqdm are imported)."""
    os.environ.update(QUIET)


def child_env(drop: Sequence[str] = (), **extra: str) -> dict[str, str]:
    """This process's environment with :data:`QUIET` and ``extra`` set and the names in
    ``drop`` removed (a name ending in ``*`` drops every name it starts)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not any(k.startswith(d[:-1]) if d.endswith("*") else k == d for d in drop)
    }
    env.update(QUIET)
    env.update(extra)
    return env


def exit_with(main: Callable[[], int]) -> None:
    """Exit with ``main()``'s code; 130 on Ctrl-C without a traceback (a report stopped)."""
    try:
        code = main()
    except KeyboardInterrupt:
        code = 130
    sys.exit(code)


def log(msg: str, tag: str = "bench") -> None:
    """A progress line on stderr (stdout holds the tables)."""
    print(f"[{tag}] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------- the machine's load


def machine_busy_seconds() -> float | None:
    """CPU seconds the whole machine has spent busy since boot (Linux), else None."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = [int(x) for x in fh.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds() -> float:
    """CPU seconds of this process, its live descendants (a cluster's processes) and the
    children it has already waited for (a finished command)."""
    import psutil

    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for child in me.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.Error:
            pass
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    return total + reaped.ru_utime + reaped.ru_stime


class LoadMeter:
    """Wall time, this tree's CPU and the cores *other* processes kept busy over a block.

    ``others_cores`` is None where the machine's busy time cannot be read.
    """

    def __enter__(self) -> LoadMeter:
        self.wall = self.own_cpu = 0.0
        self.others_cores: float | None = None
        self._busy0, self._own0, self._t0 = machine_busy_seconds(), tree_cpu_seconds(), time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        busy1, own1 = machine_busy_seconds(), tree_cpu_seconds()
        self.wall = time.perf_counter() - self._t0
        self.own_cpu = own1 - self._own0
        if self._busy0 is not None and busy1 is not None and self.wall > 0:
            self.others_cores = max(0.0, (busy1 - self._busy0) - self.own_cpu) / self.wall


# ------------------------------------------------------------------------- interleaved repeats

Job = Callable[[int], tuple[float, dict[str, Any]]]


def run_rounds(reps: int, jobs: dict[str, Job]) -> dict[str, tuple[list[float], list[dict[str, Any]]]]:
    """Run every job ``reps`` times, round-robin (a, b, c, a, b, c, ...), so a burst of
    load from elsewhere on a shared machine hits all of them rather than one.

    Each job gets the round number and returns (rate, details). The details gain the
    CPU this process tree used (``own_cpu_s``) and the average number of cores kept
    busy by everything else on the machine meanwhile (``others_cores``).
    """
    out: dict[str, tuple[list[float], list[dict[str, Any]]]] = {k: ([], []) for k in jobs}
    for rep in range(reps):
        for label, job in jobs.items():
            with LoadMeter() as meter:
                rate, info = job(rep)
            info["own_cpu_s"] = round(meter.own_cpu, 3)
            if meter.others_cores is not None:
                info["others_cores"] = round(meter.others_cores, 2)
            out[label][0].append(rate)
            out[label][1].append(info)
            log(f"{label} run {rep + 1}/{reps}: {rate:,.1f}/s {info}")
    return out


def median_spread(values: Sequence[float], fmt: str = "{:.2f}") -> tuple[float | None, str, str]:
    """(median, the median formatted, "min-max" formatted); ``-`` for no values."""
    if not values:
        return None, "-", "-"
    med = statistics.median(values)
    return med, fmt.format(med), f"{fmt.format(min(values))}-{fmt.format(max(values))}"


# ------------------------------------------------------------------------- memory and commands


class TreeSampler:
    """Peaks of the summed RSS and the summed PSS of a process and all its descendants.

    RSS counts a page shared by several processes once in each: a forked child's pages
    shared copy-on-write with its parent (a few hundred MiB of modules) are counted
    twice in the summed RSS. PSS splits each shared
    page among its sharers, so the summed PSS is the tree's real footprint."""

    def __init__(self, pid: int, every: float = 0.1) -> None:
        import psutil

        self.root = psutil.Process(pid)
        self.every = every
        self.peak = 0
        self.peak_pss = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import psutil

        while not self._stop.is_set():
            total = pss = 0
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except psutil.NoSuchProcess:
                return
            for p in procs:
                try:
                    info = p.memory_full_info()
                except psutil.Error:
                    continue
                total += info.rss
                pss += getattr(info, "pss", info.rss)
            self.peak = max(self.peak, total)
            self.peak_pss = max(self.peak_pss, pss)
            self._stop.wait(self.every)

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def run_child(
    cmd: Sequence[str], env: dict[str, str] | None = None, timeout: float | None = None, memory: bool = False
) -> dict[str, Any]:
    """Run a command to its end: ``wall_s``, ``rc`` (or ``"timeout"``), ``stdout``,
    ``stderr`` and, with ``memory``, ``peak_bytes``: the peak resident memory of its
    largest process (``/usr/bin/time -v`` where present, else ``getrusage``, exact only
    when it is the largest child so far; NaN when unknown)."""
    gnu_time = memory and Path("/usr/bin/time").exists()
    full = (["/usr/bin/time", "-v"] if gnu_time else []) + list(cmd)
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(full, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {
            "wall_s": time.perf_counter() - t0,
            "rc": "timeout",
            "stdout": "",
            "stderr": "",
            "peak_bytes": float("nan"),
        }
    wall = time.perf_counter() - t0
    stderr, peak = proc.stderr, float("nan")
    if gnu_time:
        stderr, _, report = proc.stderr.partition("\tCommand being timed:")
        lines = [
            line for line in stderr.splitlines() if not line.startswith("Command exited with non-zero status")
        ]
        stderr = "\n".join(lines)
        for line in report.splitlines():
            if "Maximum resident set size" in line:
                peak = int(line.rsplit(":", 1)[1]) * 1024
    elif memory:
        after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        peak = after * 1024 if after > before else float("nan")
    return {
        "wall_s": wall,
        "rc": proc.returncode,
        "stdout": proc.stdout,
        "stderr": stderr,
        "peak_bytes": peak,
    }


@contextlib.contextmanager
def worker_clients(counts: Sequence[int] = (1, 2)) -> Iterator[dict[int, Any]]:
    """A Dask client per worker count, each on the pipeline's own LocalCluster
    configuration (one thread a worker, no dashboard), all started before anything is
    timed (start-up is ``overhead.py``'s figure) and all closed on every way out: the
    1 -> 2 worker comparisons, which only mean something run side by side."""
    from distributed import Client

    from horizonbench.schemas.config import DaskSpec
    from horizonbench.tasks.cluster.client import _local_cluster

    clusters: dict[int, Any] = {}
    clients: dict[int, Any] = {}
    try:
        for w in counts:
            clusters[w] = _local_cluster(DaskSpec(n_workers=w, threads_per_worker=1), dashboard=False)
            clients[w] = Client(clusters[w])
        yield clients
    finally:
        for client in clients.values():
            client.close()
        for cluster in clusters.values():
            cluster.close()


# ------------------------------------------------------------------------- a fake provider


def _serve(conn: Any, reply: str | Callable[[dict[str, Any]], str], options: dict[str, Any]) -> None:
    from fake_model_server import FakeModelServer

    server = FakeModelServer(reply if callable(reply) else (lambda body: reply), **options)
    server.start()
    conn.send(server.port)
    conn.recv()
    conn.send(
        {
            "answered": server.answered,
            "status_counts": server.status_counts,
            "tokens": sum(t for _, t in server.answer_times),
            "repeated": len(server.repeated_prompts()),
        }
    )
    server.stop()


class ServerProcess:
    """tests/fake_model_server.py in a forked child (its CPU is not this process's);
    ``reply`` may be a closure (forked, not pickled). ``finish`` stops it and returns
    its counters."""

    def __init__(self, reply: str | Callable[[dict[str, Any]], str], **options: Any) -> None:
        tests = str(ROOT / "tests")
        if tests not in sys.path:
            sys.path.insert(0, tests)
        ctx = mp.get_context("fork")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child, reply, options), daemon=True)
        self._proc.start()
        self.port = self._conn.recv()
        self.root_url = f"http://127.0.0.1:{self.port}"
        self.base_url = f"{self.root_url}/v1"

    def finish(self) -> dict[str, Any]:
        self._conn.send("stop")
        counters = self._conn.recv()
        self._proc.join(timeout=10)
        return counters


# ------------------------------------------------------------------------- tables


def print_table(header: Sequence[str], rows: Sequence[Sequence[str]], left: Sequence[int] = (0,)) -> None:
    """Aligned columns under a header and a rule; the columns in ``left`` are
    left-aligned, the others right-aligned."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if i in left else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    print(line(header))
    print("  ".join("-" * w for w in widths).rstrip())
    for r in rows:
        print(line(r))


@dataclass
class Measure:
    """One row of a ratio table: the samples of interleaved runs and what to compare with."""

    key: str
    label: str
    unit: str
    samples: list[float]
    #: key of the measure this one is compared with (None: no ratio)
    baseline: str | None = None
    #: compared with the table's reference rate (the paper's)
    vs_reference: bool = False
    #: a count, printed without decimals
    integer: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @classmethod
    def of_rounds(
        cls, key: str, label: str, unit: str, rounds: tuple[list[float], list[dict[str, Any]]], **kw: Any
    ) -> Measure:
        """A row from one job's :func:`run_rounds` result (its rates, each run's details)."""
        rates, runs = rounds
        extra = {"runs": runs, **kw.pop("extra", {})}
        return cls(key, label, unit, rates, **kw, extra=extra)


def fmt_rate(x: float) -> str:
    """Three significant places, at most: 1,234 / 12.3 / 1.23."""
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:,.1f}"
    return f"{x:,.2f}"


def print_ratio_table(
    measures: Sequence[Measure], reference: tuple[str, float], baseline_key: str = "baseline"
) -> None:
    """Median, min-max, unit, the ratio to the row a measure names as its baseline, the
    ratio to the ``reference`` rate (``(column title, rate)``) and the other load."""
    by_key = {m.key: m for m in measures}
    header = ("measure", "median", "min-max", "unit", "x baseline", reference[0], "other load")
    lines = []
    for m in measures:
        fmt = (lambda x: f"{x:,.0f}") if m.integer else fmt_rate
        spread = f"{fmt(min(m.samples))}-{fmt(max(m.samples))}" if len(m.samples) > 1 else "-"
        ratio = "-"
        if m.baseline is not None and m.baseline in by_key:
            ratio = f"{m.median / by_key[m.baseline].median:,.2f}"
        elif m.key == baseline_key:
            ratio = "1.00"
        ref = f"{m.median / reference[1]:,.2f}" if m.vs_reference else "-"
        others = [d["others_cores"] for d in m.extra.get("runs", []) if "others_cores" in d]
        load = f"{statistics.median(others):.1f} cores" if others else "-"
        lines.append((m.label, fmt(m.median), spread, m.unit, ratio, ref, load))
    print_table(header, lines, left=(0, 2))


def measures_json(measures: Sequence[Measure], reference_rate: float) -> list[dict[str, Any]]:
    """The rows of :func:`print_ratio_table` as JSON objects, with every sample."""
    by_key = {m.key: m for m in measures}
    return [
        {
            "key": m.key,
            "label": m.label.strip(),
            "unit": m.unit,
            "median": m.median,
            "min": min(m.samples),
            "max": max(m.samples),
            "samples": m.samples,
            "ratio_vs_baseline": m.median / by_key[m.baseline].median if m.baseline in by_key else None,
            "ratio_vs_paper": m.median / reference_rate if m.vs_reference else None,
            **m.extra,
        }
        for m in measures
    ]
