"""The fixed cost of a small run (``make bench``): a 10-instance offline run, as a user runs it.

Each run is a fresh subprocess ``horizonbench run --config ten.yaml --out DIR`` without
PREFECT_API_URL (so the command starts its own temporary Prefect server), with a warm
PREFECT_HOME (one prepared by an untimed run first) and with a fresh one (a new empty
folder per run). The same command with HORIZONBENCH_SEQUENTIAL_STARTUP=1 is the
baseline: no warm-up while the server starts (each stage imports and starts what it
needs when it runs) and the flow-run heartbeat kept. Scenarios run round-robin so a
burst of outside load hits all of them. It prints a table of medians (and min-max),
with each optimised figure's ratio to the baseline's; it is a report, not a test: it
always exits 0, whatever the figures.

    .venv/bin/python benchmarks/overhead.py              # 3 runs per scenario (a few minutes)
    .venv/bin/python benchmarks/overhead.py --repeat 5 --json overhead.json
    .venv/bin/python benchmarks/overhead.py --quick      # 1 run per scenario, warm home only

Where the figures come from: the command writes a JSON line per start-up and shut-down
step when HORIZONBENCH_TIMINGS names a file (``horizonbench.cli.prefect_server.mark``);
the stages' times are the task runs' start and end times in the Prefect database of the
run's PREFECT_HOME. XDG_CACHE_HOME points into the benchmark's own folder, so the
database template of new homes (``horizonbench.cli.prefect_server.template_path``) is
the benchmark's: "fresh" runs find it, "first" runs start without one.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import CLI, TEN_INSTANCE_RUN, LoadMeter, child_env, log, median_spread, print_table

CONFIG = TEN_INSTANCE_RUN.format(name="overhead")
STAGES = ("generate", "validate", "evaluate", "score", "analyse", "report")
GOAL_S = 8.0


def _env(home: Path, cache: Path, timings: Path, baseline: bool) -> dict[str, str]:
    extra = {"HORIZONBENCH_SEQUENTIAL_STARTUP": "1"} if baseline else {}
    return child_env(
        drop=("PREFECT_*", "HORIZONBENCH_SEQUENTIAL_STARTUP"),
        PREFECT_HOME=str(home),
        XDG_CACHE_HOME=str(cache),  # where the database template of new homes is kept
        HORIZONBENCH_TIMINGS=str(timings),
        **extra,
    )


def _utc(text: str | None) -> float | None:
    if not text:
        return None
    value = dt.datetime.fromisoformat(text)
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return value.timestamp()


def _task_times(home: Path, flow_run_id: str | None) -> dict[str, float]:
    """Seconds per stage (both validations summed) from the Prefect database."""
    db = home / "prefect.db"
    if not db.exists():
        return {}
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
        if flow_run_id is None:
            row = con.execute("select id from flow_run order by start_time desc limit 1").fetchone()
            flow_run_id = row[0] if row else None
        rows = con.execute(
            "select name, start_time, end_time from task_run where flow_run_id = ?", (flow_run_id,)
        ).fetchall()
        flow = con.execute(
            "select start_time, end_time from flow_run where id = ?", (flow_run_id,)
        ).fetchone()
    out: dict[str, float] = {}
    for name, start, end in rows:
        a, b = _utc(start), _utc(end)
        if a is not None and b is not None:
            stage = name.rsplit("-", 1)[0]
            out[stage] = out.get(stage, 0.0) + (b - a)
    if flow:
        a, b = _utc(flow[0]), _utc(flow[1])
        if a is not None and b is not None:
            out["flow run"] = b - a
    return out


def one_run(home: Path, cache: Path, work: Path, baseline: bool, index: int) -> dict[str, Any]:
    cfg = work / "ten.yaml"
    out = work / f"run-{index}"
    timings = work / f"timings-{index}.jsonl"
    timings.unlink(missing_ok=True)
    t0 = time.time()
    with LoadMeter() as meter:
        proc = subprocess.run(
            [str(CLI), "run", "--config", str(cfg), "--out", str(out), "--no-progress"],
            env=_env(home, cache, timings, baseline),
            capture_output=True,
            text=True,
            timeout=900,
        )
    t_end = time.time()
    shutil.rmtree(out, ignore_errors=True)
    marks: dict[str, float] = {}
    if timings.exists():
        for line in timings.read_text().splitlines():
            d = json.loads(line)
            marks.setdefault(d["event"], d["t"] - t0)
    found = re.search(r"/runs/flow-run/([0-9a-f-]{36})", proc.stdout + proc.stderr)
    tasks = _task_times(home, found.group(1) if found else None)
    return {
        "rc": proc.returncode,
        "total": t_end - t0,
        "other load": meter.others_cores or 0.0,
        "marks": marks,
        "tasks": tasks,
        "stderr": proc.stderr[-2000:],
    }


def rows_of(run: dict[str, Any], baseline: bool) -> dict[str, float | None]:
    """One run's breakdown (seconds); None where a row does not apply."""
    m, t = run["marks"], run["tasks"]

    def span(a: str, b: str) -> float | None:
        return m[b] - m[a] if a in m and b in m else None

    r: dict[str, float | None] = {
        "total wall time": run["total"],
        "other load (cores)": run.get("other load"),
    }
    r["python + CLI start (to config checked)"] = m.get("cli ready")
    if baseline:
        r["imports (pipeline, prefect, pandas)"] = span("flow start", "pipeline imported")
        r["cluster start"] = None  # inside generate
        r["Great Expectations import"] = None  # inside the first validate
    else:
        r["imports (pipeline, prefect, pandas)"] = span("server spawned", "imports done")
        r["cluster start"] = span("imports done", "cluster ready")
        # in a thread of the command, while the cluster starts
        r["Great Expectations import"] = span("imports done", "gx imported")
    healthy = "server healthy" if "server healthy" in m else "server ready"
    r["Prefect server start (spawn to healthy)"] = span("server spawned", healthy)
    r["start-up critical path (to flow start)"] = m.get("flow start")
    for stage in STAGES:
        r[stage] = t.get(stage)
    staged = sum(t.get(s, 0.0) for s in STAGES)
    flow = span("flow start", "flow end")
    r["flow, outside the tasks"] = None if flow is None else flow - staged
    r["server stop (drain + SIGTERM + exit)"] = span("flow end", "server stopped")
    r["database template copied"] = span("cli start", "database seeded")  # before the spawn
    r["interpreter exit"] = None if "cli done" not in m else run["total"] - m["cli done"]
    return r


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3, help="runs per scenario (default 3)")
    ap.add_argument("--quick", action="store_true", help="one run per scenario, warm home only")
    ap.add_argument("--json", metavar="PATH", help="also write every run's figures as JSON")
    args = ap.parse_args()
    repeat = 1 if args.quick else max(1, args.repeat)
    homes = ("warm",) if args.quick else ("warm", "fresh", "first")
    work = Path(tempfile.mkdtemp(prefix="hb-overhead-"))
    (work / "ten.yaml").write_text(CONFIG)
    warm_home, cache = work / "prefect-home-warm", work / "cache"
    log("preparing the warm PREFECT_HOME and the database template (one untimed run)")
    prep = one_run(warm_home, cache, work, False, -1)
    if prep["rc"] != 0:
        log(f"the preparing run failed (exit {prep['rc']}): {prep['stderr']}")
    # "fresh": a new PREFECT_HOME (the template cached); "first": a new PREFECT_HOME and
    # no template yet (the first run of this Prefect version on the machine), whose
    # baseline is the fresh one's (the baseline never uses the template)
    scenarios = [(h, b) for h in homes for b in (True, False) if not (h == "first" and b)]
    results: dict[tuple[str, bool], list[dict[str, Any]]] = {s: [] for s in scenarios}
    n = 0
    for rep in range(repeat):
        for home_kind, baseline in scenarios:
            home = warm_home if home_kind == "warm" else work / f"prefect-home-{home_kind}-{n}"
            run_cache = work / f"cache-{n}" if home_kind == "first" else cache
            run = one_run(home, run_cache, work, baseline, n)
            n += 1
            if home_kind != "warm":
                shutil.rmtree(home, ignore_errors=True)
            label = "baseline" if baseline else "optimised"
            log(f"run {rep + 1}/{repeat} {home_kind:5s} {label:9s}: {run['total']:.2f} s (exit {run['rc']})")
            if run["rc"] != 0:
                log(run["stderr"])
            results[(home_kind, baseline)].append(run)
    shutil.rmtree(work, ignore_errors=True)

    print(
        "\n10-instance offline run (`horizonbench run`, fresh subprocess), "
        f"median of {repeat} (min-max), seconds"
    )
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print("baseline: the same command with HORIZONBENCH_SEQUENTIAL_STARTUP=1 (no overlap, heartbeat kept)")
    for home_kind in homes:
        base_kind = "fresh" if home_kind == "first" else home_kind
        base = [rows_of(r, True) for r in results[(base_kind, True)] if r["rc"] == 0]
        opt = [rows_of(r, False) for r in results[(home_kind, False)] if r["rc"] == 0]
        names = list(rows_of({"total": 0.0, "other load": 0.0, "marks": {}, "tasks": {}}, False))
        title = {
            "warm": "warm (its database migrated by an earlier run)",
            "fresh": "fresh (a new empty folder; the database template cached)",
            "first": "fresh, no template yet (a first run that no `make install` prepared; baseline: fresh)",
        }[home_kind]
        print(f"\nPREFECT_HOME {title}")
        lines = []
        for name in names:
            b_med, b_med_s, b_rng = median_spread([r[name] for r in base if r.get(name) is not None])
            o_med, o_med_s, o_rng = median_spread([r[name] for r in opt if r.get(name) is not None])
            usable = o_med is not None and b_med and not name.startswith("other load")
            lines.append((name, b_med_s, b_rng, o_med_s, o_rng, f"{o_med / b_med:.2f}" if usable else "-"))
        print_table(("row", "baseline", "min-max", "optimised", "min-max", "x base"), lines)
        totals = [r["total wall time"] for r in opt]
        if totals:
            med = statistics.median(totals)
            verdict = "met" if med < GOAL_S else "not met"
            print(f"goal: optimised total under {GOAL_S:.0f} s: median {med:.2f} s, {verdict}")
    print(
        "\nStart-up rows of the optimised run overlap (they run while the server starts);"
        " the critical path row is what they cost together. other load: cores kept busy by"
        " other processes during the run (machine-wide busy time minus this benchmark's"
        " children), the figure to read every time with."
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {f"{h}/{'baseline' if b else 'optimised'}": v for (h, b), v in results.items()},
                indent=2,
                default=str,
            )
        )
    return 0


if __name__ == "__main__":
    try:
        main()
    except Exception as err:  # noqa: BLE001 - a report: always exit 0
        print(f"[bench] overhead benchmark failed: {err!r}", file=sys.stderr)
    raise SystemExit(0)
