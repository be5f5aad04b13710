"""Every benchmark of ``make bench``, in order: the one list a new benchmark is added to.

Each benchmark is a script of its own in ``benchmarks/`` measuring one thing (its
docstring says what, and how to run it alone); this driver runs them one after another,
each in a fresh Python process as a user would (a benchmark's imports, forks and
clusters never leak into the next), and passes their tables through unchanged.

To add one: write ``benchmarks/<name>.py`` with a ``main`` that prints its table (use
``common.py`` for the timing, the load and the tables), give it a ``--quick`` option or
say which flags make it small, and append a :class:`Benchmark` to :data:`BENCHMARKS`.
``tests/test_benchmarks.py`` checks that every entry names a script and flags it has.

A report: it exits 0 when every benchmark ran to its end, 1 when one failed (the others
still run), 2 for a bad command line.

    .venv/bin/python benchmarks/run.py                        # what make bench runs (about an hour)
    .venv/bin/python benchmarks/run.py --list                 # the benchmarks and what each measures
    .venv/bin/python benchmarks/run.py --only throughput,scoring --quick
    .venv/bin/python benchmarks/run.py --smoke                # each at its smallest settings
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Benchmark:
    """One script of ``make bench``, with the flags of its shorter runs."""

    name: str
    #: the script, in benchmarks/
    script: str
    #: what it measures, one line (``--list``)
    measures: str
    #: flags for ``--quick``: a run of a few minutes at most
    quick: tuple[str, ...] = ("--quick",)
    #: flags for ``--smoke``: the smallest run that still goes through every part
    smoke: tuple[str, ...] = ("--quick",)


BENCHMARKS: list[Benchmark] = [
    Benchmark(
        "throughput",
        "throughput.py",
        "maze generation, certification, scoring and parsing rates against a straightforward generator",
        smoke=("--smoke", "--repeat", "1", "--workers", "1"),
    ),
    Benchmark(
        "scoring",
        "scoring.py",
        "the score stage: answers per CPU-second, 1 -> 2 workers",
        smoke=("--quick", "--repeat", "1"),
    ),
    Benchmark(
        "evaluation",
        "evaluation.py",
        "the evaluation engine against a rate-limited fake provider",
        smoke=("--quick", "--only", "rate"),
    ),
    Benchmark(
        "puzzles",
        "puzzles.py",
        "certifying the whole RecurrReason benchmark (Table 4)",
        smoke=("--quick", "--baseline-sample", "1"),
    ),
    Benchmark("worlds", "worlds.py", "world-model environment steps and the episode loop's overhead"),
    Benchmark("harness", "harness.py", "the agent harness's cost per agent step beyond the model"),
    Benchmark(
        "analysis_scale",
        "analysis_scale.py",
        "analyze + report over up to a million scored attempts: time and peak memory",
        quick=("--sizes", "20000,100000"),
        smoke=("--sizes", "2000,4000"),
    ),
    Benchmark("overhead", "overhead.py", "the fixed cost of a 10-instance run, start-up step by step"),
    Benchmark(
        "tricks",
        "tricks.py",
        "every speed trick on and off side by side: start-up, scoring lanes, shard cache, paused collector",
        smoke=("--quick", "--only", "gc", "--only", "cache"),
    ),
    Benchmark(
        "scale",
        "scale.py",
        "generation's peak memory against instance count, and 1 -> 2 workers",
        smoke=("--quick", "--counts", "200,400", "--speedup-count", "200"),
    ),
    Benchmark(
        "puzzle_progress",
        "puzzle_progress.py",
        "what the puzzles' distance-based progress costs in scoring",
        quick=(),
        smoke=(),
    ),
    Benchmark(
        "training",
        "training.py",
        "tiny sequence models: a Blocks World learning curve, tokens/s per core, rollout steps/s",
        smoke=("--budget", "10", "--candidates", "300"),
    ),
    Benchmark(
        "calibration",
        "calibration.py",
        "the calibration suite: coverage, false positives and power of every analysis output",
        quick=("--studies", "50"),
        smoke=("--studies", "3"),
    ),
    Benchmark(
        "adaptive",
        "adaptive.py",
        "adaptive designs against fixed grids: calls to a 5% L0 interval, episodes to a 1-unit sc* bracket",
        quick=("--quick", "--jobs", "2"),
        smoke=("--seeds", "1", "--scan-studies", "5"),
    ),
]


def selected(only: str | None) -> list[Benchmark]:
    """The benchmarks ``--only`` names (comma-separated), in the list's order; all by default."""
    if not only:
        return list(BENCHMARKS)
    names = [n.strip() for n in only.split(",") if n.strip()]
    known = {b.name for b in BENCHMARKS}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"no benchmark named {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    return [b for b in BENCHMARKS if b.name in names]


def command(bench: Benchmark, size: str) -> list[str]:
    """The command line of one benchmark at ``size`` (``full``, ``quick`` or ``smoke``)."""
    flags = {"full": (), "quick": bench.quick, "smoke": bench.smoke}[size]
    return [sys.executable, str(HERE / bench.script), *flags]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", metavar="NAME,...", help="only these benchmarks (see --list)")
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="each benchmark's shorter run")
    size.add_argument("--smoke", action="store_true", help="each at its smallest settings (does it run)")
    ap.add_argument("--list", action="store_true", help="list the benchmarks and what each measures")
    args = ap.parse_args(argv)
    try:
        benches = selected(args.only)
    except ValueError as err:
        print(f"run.py: {err}", file=sys.stderr)
        return 2
    if args.list:
        width = max(len(b.name) for b in benches)
        for b in benches:
            print(f"{b.name.ljust(width)}  {b.script:<20} {b.measures}")
        return 0
    size_name = "smoke" if args.smoke else "quick" if args.quick else "full"
    failed = []
    for bench in benches:
        cmd = command(bench, size_name)
        print(f"[bench] === {bench.name}: {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        rc = subprocess.run(cmd, cwd=HERE.parent).returncode
        print(f"[bench] === {bench.name}: exit {rc} after {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        if rc != 0:
            failed.append(f"{bench.name} (exit {rc})")
    if failed:
        print(f"run.py: failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
