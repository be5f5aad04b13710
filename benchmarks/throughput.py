"""The throughput table of ``make bench``: maze generation, certification, scoring and parsing.

Prints a table of rates (median of 3 interleaved runs, with the min-max spread) and their
ratios against a deliberately straightforward reference generator
(``maze_reference.py``), measured in the same run on the same machine, and against the
paper's ~40 mazes/s. The rows come from ``generation.py`` (the generators) and
``parse_and_score.py`` (one answer read and judged); this file only puts them in one
table. It is a report, not a test: it always exits 0, whatever the figures. The
one-process generation figures (and the goal) count certified instances per CPU-second
of the process, so load from elsewhere on a shared machine does not move them; the
LocalCluster figure is wall-clock.

    .venv/bin/python benchmarks/throughput.py            # full run (a few minutes on 2 cores)
    .venv/bin/python benchmarks/throughput.py --quick    # smoke run (well under a minute)
    .venv/bin/python benchmarks/throughput.py --json out.json --workers 2
"""

from __future__ import annotations

from common import quiet_environ

quiet_environ()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402

import generation  # noqa: E402
import parse_and_score  # noqa: E402
from common import exit_with, measures_json, print_ratio_table  # noqa: E402
from maze_reference import COLS, NUM_KEYS, ROWS  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller counts, for a smoke run")
    ap.add_argument(
        "--smoke", action="store_true", help="the smallest counts: does it run (figures meaningless)"
    )
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    ap.add_argument("--workers", type=int, default=2, help="LocalCluster workers (default 2)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measure (median reported)")
    args = ap.parse_args(argv)

    import horizonbench.tasks.cluster.progress as progress

    progress.ENABLED["value"] = False
    size = "smoke" if args.smoke else "quick" if args.quick else "full"
    reps = max(1, args.repeat)
    rows, info = generation.measures(size, reps, args.workers)
    rows += parse_and_score.measures(size, reps)
    rows.append(generation.paper_measure())
    summary, goal = generation.summary(rows, info)

    print()
    print(
        f"horizonbench throughput: {ROWS}x{COLS} mazes, B={NUM_KEYS}, shuffle 1.0, noise 0 unless stated; "
        f"median of {reps} run{'s' if reps > 1 else ''}{f' (--{size})' if size != 'full' else ''}; "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}"
    )
    print()
    print_ratio_table(rows, ("x paper", generation.PAPER_RATE))
    print()
    print("\n".join(summary))

    if args.json:
        others = info["cluster_others"]
        out = {
            "quick": args.quick,
            "repeat": reps,
            "workers": args.workers,
            "grid": [ROWS, COLS],
            "num_keys": NUM_KEYS,
            "machine": {
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "platform": platform.platform(),
            },
            "goal": goal,
            "others_cores_during_cluster": statistics.median(others) if others else None,
            "paper_rate": generation.PAPER_RATE,
            "measures": measures_json(rows, generation.PAPER_RATE),
        }
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=2, default=str)
            fh.write("\n")
    return 0


if __name__ == "__main__":
    exit_with(main)
