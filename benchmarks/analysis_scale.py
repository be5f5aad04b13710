"""Analysis and report over a million scored attempts: time and peak memory (``make bench``).

Builds synthetic finished run folders of realistic shape (``synthetic_run.py``: 4 models
x 5 samples, 1-3 kB maze answers, real certified 40x40 mazes as instances), then runs
``horizonbench analyze --run DIR`` and ``horizonbench report --run DIR`` as child
processes and measures each one's wall time and peak resident memory
(``/usr/bin/time -v`` where present, else ``getrusage``). The smallest size is the
baseline of the same run: the table shows how time and memory grow with the number of
attempts (``x rows`` is the growth that would be linear). The analysis runs with the
config's defaults (bootstrap 200).

Goal (issue 9): analyze + report at 1,000,000 attempts in under 60 s and under 2 GB.
A report, not a test: it always exits 0.

    .venv/bin/python benchmarks/analysis_scale.py                      # 100k and 1M
    .venv/bin/python benchmarks/analysis_scale.py --sizes 20000,100000 # quick
    .venv/bin/python benchmarks/analysis_scale.py --keep runs/scale    # keep the folders
    HB_SCALE_SIZES=20000 .venv/bin/python benchmarks/analysis_scale.py
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from common import CLI, child_env, log, print_table, run_child
from synthetic_run import MODELS, SAMPLES, build_run

GOAL_S = 60.0
GOAL_BYTES = 2 * 1024**3
DEFAULT_SIZES = "100000,1000000"


def measure(args: list[str], timeout: float) -> dict[str, Any]:
    """Wall time, peak RSS and exit code of one child process (in process, no server)."""
    done = run_child(args, child_env(drop=("PREFECT_API_URL",)), timeout, memory=True)
    # the command's own last lines
    own = (done["stdout"] + done["stderr"]).strip().splitlines()
    tail = "\n".join(own[-3:]) if done["rc"] else ""
    return {"wall_s": done["wall_s"], "peak_bytes": done["peak_bytes"], "rc": done["rc"], "tail": tail}


def _sizes(text: str) -> list[int]:
    return sorted({int(float(s)) for s in text.replace("_", "").split(",") if s.strip()})


def _fmt_ratio(a: float, b: float) -> str:
    return f"{a / b:.1f}" if b and math.isfinite(a) and math.isfinite(b) else "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        default=os.environ.get("HB_SCALE_SIZES", DEFAULT_SIZES),
        help=f"comma-separated attempt counts, the smallest is the baseline (default {DEFAULT_SIZES}, "
        "or $HB_SCALE_SIZES)",
    )
    parser.add_argument("--keep", metavar="DIR", help="build the run folders in DIR and keep them")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds allowed per command")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    sizes = _sizes(args.sizes)
    hb = [str(CLI)] if CLI.exists() else [sys.executable, "-m", "horizonbench.cli.main"]
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="hb-scale-") as tmp:
        base = Path(args.keep) if args.keep else Path(tmp)
        for size in sizes:
            run = base / f"run-{size}"
            if run.exists():
                shutil.rmtree(run)
            log(f"building a run folder of {size:,} attempts in {run}")
            built = build_run(run, size)
            log(
                f"  {built['rows']:,} rows ({built['failed_rows']:,} failed), {built['build_s']:.1f} s; "
                f"responses {built['response_mb']:.0f} MB, attempts file {built['attempts_file_mb']:.0f} MB, "
                f"scores file {built['scores_file_mb']:.1f} MB"
            )
            row: dict[str, Any] = {"size": size, **built}
            for step in ("analyze", "report"):
                log(f"  horizonbench {step} --run {run}")
                row[step] = measure([*hb, step, "--run", str(run)], args.timeout)
                r = row[step]
                log(f"    {r['wall_s']:.1f} s, peak {r['peak_bytes'] / 2**20:.0f} MiB, exit {r['rc']}")
                if r["rc"] != 0:
                    log(f"    {r['tail']}")
            results.append(row)
            if not args.keep:
                shutil.rmtree(run, ignore_errors=True)
    first = results[0]
    print()
    print(
        f"Analysis and report of a run folder (maze, {len(MODELS)} models x {SAMPLES} samples, "
        f"1-3 kB answers; baseline: {first['rows']:,} attempts, same run)"
    )
    lines = []
    for row in results:
        total = {
            "wall_s": row["analyze"]["wall_s"] + row["report"]["wall_s"],
            "peak_bytes": max(row["analyze"]["peak_bytes"], row["report"]["peak_bytes"]),
        }
        base_total = first["analyze"]["wall_s"] + first["report"]["wall_s"]
        base_peak = max(first["analyze"]["peak_bytes"], first["report"]["peak_bytes"])
        for step, r, b_wall, b_peak in (
            ("analyze", row["analyze"], first["analyze"]["wall_s"], first["analyze"]["peak_bytes"]),
            ("report", row["report"], first["report"]["wall_s"], first["report"]["peak_bytes"]),
            ("analyze + report", total, base_total, base_peak),
        ):
            lines.append(
                (f"{row['rows']:,}", step, f"{r['wall_s']:.1f}", f"{r['peak_bytes'] / 2**20:.0f}")
                + (_fmt_ratio(row["rows"], first["rows"]), _fmt_ratio(r["wall_s"], b_wall))
                + (_fmt_ratio(r["peak_bytes"], b_peak), "" if r.get("rc", 0) == 0 else f"(exit {r['rc']})")
            )
    head = ("attempts", "step", "wall s", "peak MiB", "x rows", "x time", "x memory", "")
    print_table(head, lines, left=(1, 7))
    last = results[-1]
    wall = last["analyze"]["wall_s"] + last["report"]["wall_s"]
    peak = max(last["analyze"]["peak_bytes"], last["report"]["peak_bytes"])
    figures = f"{wall:.1f} s, peak {peak / 2**30:.2f} GiB"
    if last["analyze"]["rc"] != 0 or last["report"]["rc"] != 0:
        verdict = f"NOT MEASURED: a command failed at {last['rows']:,} attempts ({figures})"
    elif last["rows"] < 1_000_000:
        verdict = f"not measured (largest size {last['rows']:,} attempts: {figures})"
    else:
        verdict = f"{'MET' if wall < GOAL_S and peak < GOAL_BYTES else 'MISSED'} ({figures})"
    print(
        f"goal: analyze + report at 1,000,000 attempts in < {GOAL_S:.0f} s and < 2 GB "
        f"(each command's peak): {verdict}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
