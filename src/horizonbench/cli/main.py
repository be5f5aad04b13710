"""``horizonbench``: generate, run, demo, rebuild and compare from the command line.

Exit codes: 0 done; 1 the run failed (a table broke its suite, a stage crashed);
2 bad command line or bad config, in which case nothing was written; 3 the run finished
but some attempts have no answer or some world episodes of model agents are unfinished
(the last line says how many; rerun to retry them, or, when a budget cap held calls
back, what the run folder has paid, the cap and how to raise it); 4 the run finished
but L bins are short of their quota (the last line lists them;
``sampling.allow_unfilled: true`` accepts that); 130 interrupted by Ctrl-C or SIGTERM
(the last line says what is kept).
``horizonbench status`` exits 0 for a completed run with every output current and
intact, 1 when it is not done, 2 for a folder that is not a run, 3 when an output is
missing or not what the manifest recorded (``--verify``: sha256, else sizes).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import math
import os
import signal
import sys
import threading
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from horizonbench import __version__

DEMO_OUT = "runs/demo"


def _prefect_defaults() -> None:
    """Offline-friendly Prefect settings, unless the user set their own.

    Without PREFECT_API_URL Prefect starts a temporary local server; on a fresh
    PREFECT_HOME that can take longer than its default 20 s start-up timeout.
    """
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    # Great Expectations draws a tqdm bar per validation; ours already say what runs
    os.environ.setdefault("TQDM_DISABLE", "1")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="horizonbench",
        description="Tunable, verifiable sequential-reasoning benchmarks: generate problems, "
        "validate them, evaluate models, fit how success decays with depth, and report.",
    )
    p.add_argument("--version", action="version", version=f"horizonbench {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def common(sp: argparse.ArgumentParser, need_config: bool = True) -> None:
        if need_config:
            sp.add_argument("--config", required=True, metavar="FILE", help="YAML or JSON run config")
            sp.add_argument("--out", required=True, metavar="DIR", help="run folder to write")
        sp.add_argument(
            "--workers", type=int, metavar="N", help="LocalCluster workers (overrides dask.n_workers)"
        )
        sp.add_argument(
            "--dask-address", metavar="ADDR", help="use an existing Dask scheduler, e.g. tcp://host:8786"
        )
        sp.add_argument(
            "--overwrite", action="store_true", help="reuse DIR even if it holds a run of another config"
        )
        sp.add_argument("--no-progress", action="store_true", help="no progress bars")
        sp.add_argument(
            "--scale",
            type=float,
            metavar="F",
            help="a smoke run at a fraction F (0 < F <= 1) of the config's instances, samples, "
            "bins and world cells, with every family, model and stage kept (README: Smoke runs)",
        )
        sp.add_argument(
            "--json",
            action="store_true",
            help="at the end, print the run's status as one JSON object on stdout "
            "(what `horizonbench status --json` prints); other lines go to stderr",
        )

    g = sub.add_parser(
        "generate",
        help="generate and validate instances only",
        description="Generate certified instances on Dask and validate them.",
    )
    common(g)
    r = sub.add_parser(
        "run",
        help="the whole pipeline: generate, validate, evaluate, analyse, report",
        description="Run the whole pipeline. Rerunning into the same DIR resumes: "
        "answers already in the attempt store are not paid for again.",
    )
    common(r)
    r.add_argument(
        "--dry-run",
        action="store_true",
        help="generate the instances, then print the calls, estimated tokens and cost "
        "of the evaluation without calling any model",
    )
    r.add_argument(
        "--budget-usd",
        type=float,
        metavar="X",
        help="the most USD the run folder pays for model calls in all, reruns included "
        "(overrides evaluation.budget_usd; a rerun past the cap sends nothing until it is raised)",
    )
    t = sub.add_parser(
        "train",
        help="RecurrReason's experiment: train sequence models on the step exports, roll them out",
        description="Generate the config's puzzles, export their step tables, train the "
        "'training' section's models (a Prefect task run per puzzle x architecture x "
        "condition), roll them out through the evaluation engine, analyse and report. "
        "Rerunning into the same DIR resumes training from the last checkpoints and reuses "
        "stored answers. Needs the 'train' extra (PyTorch, transformers).",
    )
    common(t)
    d = sub.add_parser(
        "demo",
        help="the offline demo pipeline (no API keys needed)",
        description="Run the built-in offline demo config end to end.",
    )
    d.add_argument("--out", default=DEMO_OUT, metavar="DIR", help=f"run folder (default {DEMO_OUT})")
    d.add_argument("--print-config", action="store_true", help="print the demo config and exit")
    common(d, need_config=False)
    sub.add_parser("families", help="list the problem families", description="List the problem families.")
    e = sub.add_parser(
        "export",
        help="write the puzzle step tables for training (train / validation / OOD)",
        description="Write each puzzle family's step table (current state, move, next state; a "
        "final STOP row at the goal) split 80/20 within each n = 1..7 and OOD for n = 8..10, as "
        "Parquet and/or JSONL files that Hugging Face datasets loads.",
    )
    e.add_argument("--run", required=True, metavar="DIR", help="run folder with instances/")
    e.add_argument(
        "--format",
        default="both",
        choices=["parquet", "jsonl", "both"],
        help="file format (default both)",
    )
    e.add_argument("--dest", metavar="DIR", help="where to write (default DIR/exports)")
    e.add_argument("--seed", type=int, metavar="N", help="split seed (default: the run's seed)")
    e.add_argument(
        "--split",
        choices=["per_n", "pooled"],
        help="per_n: 80/20 within each n = 1..7; pooled: one 80/20 split over n = 1..7, "
        "ceil(0.2 * total) validation (default: the run config's export.split, else per_n)",
    )
    a = sub.add_parser(
        "analyze",
        help="rebuild a finished run's analysis tables from its tables alone",
        description="Rewrite DIR/analysis/ from the scores and episodes tables, with the config "
        "recorded in DIR/manifest.json. No model is called and nothing is generated.",
    )
    a.add_argument("--run", required=True, metavar="DIR", help="a finished run folder (with manifest.json)")
    rep = sub.add_parser(
        "report",
        help="rebuild a finished run's HTML report from its tables and analysis",
        description="Rewrite DIR/report/index.html from the run's tables and analysis tables.",
    )
    rep.add_argument("--run", required=True, metavar="DIR", help="a finished run folder (with manifest.json)")
    st = sub.add_parser(
        "status",
        help="what a run folder holds: done, stale, failed, or still running",
        description="Print the state of a run folder: whether a run holds it now, how the last "
        "run ended, which outputs are current and which an interrupted or failed rerun left stale, "
        "the fitted L0 per model and the report, and every output file that is missing or not what "
        "the manifest recorded (sizes; sha256 with --verify). Exit 0 when the run completed and every "
        "output is current and intact, 1 when it is not done, 2 when DIR is not a run folder, 3 when "
        "an output is damaged (rerun the run's command to repair it).",
    )
    st.add_argument("--run", required=True, metavar="DIR", help="a run folder")
    st.add_argument("--json", action="store_true", help="one JSON object on stdout")
    st.add_argument(
        "--verify",
        action="store_true",
        help="check every output's sha256 against the manifest (reads every file); by default "
        "only their sizes (reads none)",
    )
    s = sub.add_parser(
        "serve",
        help="run the pipeline on a schedule in this long-running process",
        description="Register the nightly deployment on the Prefect server at PREFECT_API_URL and run "
        "its flow runs in this process until stopped. deployment/prefect.yaml with a worker is the "
        "work-pool alternative.",
    )
    s.add_argument("--config", required=True, metavar="FILE", help="YAML or JSON run config")
    s.add_argument(
        "--out",
        default="runs/nightly/{date}",
        metavar="DIR",
        help="run folder; {date} becomes the run's UTC date (default runs/nightly/{date})",
    )
    s.add_argument(
        "--cron", default="0 2 * * *", help="schedule, cron syntax, in --timezone (default '0 2 * * *')"
    )
    s.add_argument(
        "--timezone",
        default="UTC",
        metavar="TZ",
        help="IANA time zone of the cron, e.g. Europe/Berlin (default UTC)",
    )
    s.add_argument("--name", default="nightly", help="deployment name (default nightly)")
    s.add_argument(
        "--notify",
        metavar="TYPE/NAME",
        help="notification block to alert when a run fails or crashes, e.g. slack-webhook/alerts",
    )
    c = sub.add_parser(
        "compare",
        help="one HTML page comparing runs: L0 per model and setting, and its trend",
        description="Compare finished runs: L0 per model and setting with its interval, side by "
        "side; over a series of runs (ordered by start time) the trend of L0 per model and a flag "
        "when a run's L0 differs from the previous run's (a two-sample test on log L0 at 5%). "
        "Writes OUT/index.html and "
        "OUT/compare.parquet.",
    )
    c.add_argument("runs", nargs="*", metavar="DIR", help="finished run folders")
    c.add_argument(
        "--out", required=True, metavar="OUT", help="folder to write index.html and compare.parquet"
    )
    return p


def _fail(message: str, code: int) -> int:
    print(f"horizonbench: error: {message}", file=sys.stderr)
    return code


def _demo_text() -> str:
    return resources.files("horizonbench.configs").joinpath("demo.yaml").read_text(encoding="utf-8")


def _load(args: argparse.Namespace) -> Any:
    from horizonbench.schemas.config import load_config, parse_config

    if args.command == "demo":
        cfg = parse_config(yaml.safe_load(_demo_text()), source="demo config")
    else:
        cfg = load_config(args.config)
    if args.workers is not None or args.dask_address:
        raw = cfg.model_dump(mode="json")
        if args.workers is not None:
            raw["dask"]["n_workers"] = args.workers
        if args.dask_address:
            raw["dask"]["address"] = args.dask_address
        cfg = parse_config(raw, source="command line")
    if getattr(args, "budget_usd", None) is not None:
        raw = cfg.model_dump(mode="json")
        raw["evaluation"]["budget_usd"] = args.budget_usd
        cfg = parse_config(raw, source="--budget-usd")
    if args.scale is not None:
        from horizonbench.schemas.scale import scale_config

        cfg = scale_config(cfg, args.scale, config_source=getattr(args, "config", None) or "demo config")
    return cfg


def _training_problem(cfg: Any, command: str) -> str | None:
    """One line when the command cannot train: ``train`` without a training section, or
    a training section without PyTorch and transformers installed (the ``train`` extra,
    which ``make test`` installs and ``make demo`` does not)."""
    import importlib.util

    if command == "train" and cfg.training is None:
        return (
            "the config has no 'training' section: nothing to train "
            "(configs/recurrreason-train-tiny.yaml has one)"
        )
    if command not in ("run", "train") or cfg.training is None:
        return None
    missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
    if missing:
        return (
            f"the config's 'training' section needs {' and '.join(missing)}, which is not installed: "
            "pip install -e '.[train]' (README: Training sequence models)"
        )
    return None


def _check_api_keys(cfg: Any) -> None:
    """Fail before writing anything when a model's key is missing from the environment.

    Keys kept in Prefect Secret blocks are checked when the flow reads them.
    """
    from horizonbench.models.factory import api_key_for

    for spec in cfg.evaluation.models:
        if spec.provider != "offline" and spec.api_key_block is None:
            api_key_for(spec)


def main(argv: list[str] | None = None) -> int:
    from horizonbench.core.timings import mark

    mark("cli start")
    args = _parser().parse_args(argv)
    if args.command == "families":
        from horizonbench.core.registry import family_names

        print("\n".join(family_names()))
        return 0
    if args.command == "export":
        return _export(args)
    if args.command in ("analyze", "report", "compare"):
        return _rebuild(args)
    if args.command == "status":
        return _status(args)
    if args.command == "serve":
        return _serve(args)
    if args.command == "demo" and args.print_config:
        print(_demo_text(), end="")
        return 0
    if args.workers is not None and args.workers < 1:
        return _fail("--workers must be at least 1", 2)
    budget_usd = getattr(args, "budget_usd", None)
    if budget_usd is not None and not (math.isfinite(budget_usd) and budget_usd >= 0):
        return _fail(f"--budget-usd must be a number of USD, 0 or more (got {budget_usd:g})", 2)
    from horizonbench.cli.prefect_server import spawn_early, stop_early

    # the server's start is the longest step before the flow: it starts before the
    # config is read, and is stopped on the way out if no flow took it over
    _prefect_defaults()  # in the server's environment too
    spawn_early()
    try:
        return _checked_run(args, argv)
    finally:
        stop_early()


def _checked_run(args: argparse.Namespace, argv: list[str] | None) -> int:
    """``main`` for the commands that run a flow: check the config and the run folder,
    then run (exit 2, before anything is written, if a check fails)."""
    from horizonbench.core.errors import ConfigError

    try:
        cfg = _load(args)
    except ConfigError as err:
        return _fail(str(err), 2)
    problem = _training_problem(cfg, args.command)
    if problem:
        return _fail(problem, 2)
    try:
        # keys are checked only where calls would be sent: a dry run sends nothing (its
        # estimate builds each model for its identity alone, which holds no key)
        if args.command != "generate" and not getattr(args, "dry_run", False):
            _check_api_keys(cfg)
    except ConfigError as err:
        return _fail(str(err), 2)
    from horizonbench.schemas.config import check_requests
    from horizonbench.tasks.run_folder.state import check_out

    try:
        check_requests(cfg, "config" if args.command == "demo" else args.config)
    except ConfigError as err:
        return _fail(str(err), 2)
    # {date} (a dated series, as deployments write) resolved once: the checks, the lock
    # and the flow all see the same folder, even across midnight
    from horizonbench.schemas.config import today_utc

    resolved = args.out.replace("{date}", today_utc().isoformat())
    problem = check_out(resolved, cfg.model_dump(mode="json"), args.overwrite)
    if problem:
        return _fail(problem, 2)
    out = Path(resolved)
    if cfg.dask.address:
        from horizonbench.tasks.cluster.client import connect

        try:  # a bad or unreachable address, or workers of another version: one line
            connect(cfg.dask.address).close()
        except ConfigError as err:
            return _fail(str(err), 2)

    from horizonbench.tasks.cluster import progress
    from horizonbench.tasks.run_folder.state import run_lock

    if args.no_progress:
        progress.ENABLED["value"] = False
    previous = signal.signal(signal.SIGTERM, _terminate)
    stdout = sys.stdout
    try:
        # held from here to the end, so a second run into DIR is refused at once
        with (
            run_lock(out, f"horizonbench {args.command}"),
            contextlib.redirect_stdout(sys.stderr if args.json else stdout),
        ):
            code = _execute(args, cfg, out)
    except ConfigError as err:  # the folder is held by another run
        code = _fail(str(err), 2)
    except KeyboardInterrupt as err:
        detail = str(err) or "the tables already written are kept"
        if "rerun" not in detail:
            detail += "; rerun the same command to resume"
        code = _fail(f"interrupted: {detail}", 130)
    finally:
        signal.signal(signal.SIGTERM, previous)
    if args.json and out.is_dir():
        _print_json_status(out, stdout)
    if argv is None:  # the installed command, not a caller in the same process
        _exit_now(code)
    return code


def _print_json_status(out: Path, stream: Any) -> None:
    from horizonbench.core.errors import ConfigError
    from horizonbench.tasks.run_folder.status import run_status

    try:
        info = run_status(out)
    except ConfigError as err:
        info = {"run": str(out.resolve()), "status": "unknown", "problems": [str(err)]}
    print(json.dumps(info, sort_keys=True, default=str), file=stream, flush=True)


def _status(args: argparse.Namespace) -> int:
    from horizonbench.core.errors import ConfigError
    from horizonbench.tasks.run_folder.status import exit_code, format_status, run_status

    try:
        info = run_status(Path(args.run), verify=args.verify)
    except ConfigError as err:
        return _fail(str(err), 2)
    print(json.dumps(info, sort_keys=True, default=str) if args.json else format_status(info))
    return exit_code(info)


def _serve(args: argparse.Namespace) -> int:
    """``serve``: every input checked first (one line, exit 2), then serves until stopped.
    The API URL is checked before the pipeline is imported: the rest can wait for it."""
    from horizonbench.cli.prefect_server import API_URL_REQUIRED, api_url_configured

    if not api_url_configured():
        return _fail(API_URL_REQUIRED, 2)
    from horizonbench.core.errors import ConfigError
    from horizonbench.flows.deployment import serve_nightly

    _prefect_defaults()
    try:
        serve_nightly(args.config, args.out, args.cron, args.timezone, args.name, args.notify)
    except ConfigError as err:
        return _fail(str(err), 2)
    except KeyboardInterrupt:
        return _fail("interrupted: serving stopped", 130)
    return 0


def _exit_now(code: int) -> None:
    """End the process without the interpreter's teardown: after a pipeline, clearing
    thousands of modules and collecting what they hold takes 1-2 s. The atexit handlers
    (logging, multiprocessing, Prefect) still run, and the standard streams are flushed;
    the server and the cluster were stopped already. Not with
    HORIZONBENCH_SEQUENTIAL_STARTUP=1 (the baseline of benchmarks/overhead.py)."""
    import atexit

    from horizonbench.cli.prefect_server import sequential
    from horizonbench.core.timings import mark

    if sequential():
        return
    atexit._run_exitfuncs()
    mark("exit")
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _export(args: argparse.Namespace) -> int:
    from horizonbench.core.errors import ConfigError, ValidationFailed
    from horizonbench.tasks.report.export import EXPORTS_REL, export_run

    run = Path(args.run)
    seed = args.seed
    try:
        recorded = json.loads((run / "manifest.json").read_text(encoding="utf-8"))["config"]
    except (OSError, ValueError, KeyError, TypeError):
        recorded = {}
    if seed is None:
        try:
            seed = int(recorded["run"]["seed"])
        except (ValueError, KeyError, TypeError):
            seed = 0
    chosen = (recorded.get("export") or {}).get("split") if isinstance(recorded, dict) else None
    split = args.split or chosen
    try:
        in_max = int((recorded.get("export") or {}).get("in_distribution_max") or 7)
    except (AttributeError, ValueError, TypeError):
        in_max = 7
    formats = ["parquet", "jsonl"] if args.format == "both" else [args.format]
    try:
        summary = export_run(
            run, formats, seed, Path(args.dest) if args.dest else None, split or "per_n", in_max
        )
    except ConfigError as err:
        return _fail(str(err), 2)
    except ValidationFailed as err:
        return _fail(str(err), 1)
    dest = Path(args.dest) if args.dest else run / EXPORTS_REL
    for name, counts in summary.items():
        parts = ", ".join(
            f"{part} {c['instances']} puzzles / {c['rows']} rows"
            for part, c in counts.items()
            if part not in ("split_rule", "overlap", "in_distribution_max")
        )
        seen = counts["overlap"]["validation"]
        print(
            f"{name} ({counts['split_rule']} split): {parts}; {seen['in_train']} of {seen['steps']} "
            f"validation steps ({100 * seen['share']:.1f}%) repeat a training step"
        )
    print(f"exports: {dest.resolve()}")
    return 0


def _rebuild(args: argparse.Namespace) -> int:
    """``analyze``, ``report`` and ``compare``: inputs are checked first (exit 2, one
    line); then the work runs as a small Prefect flow when an API is configured (it shows
    in the UI), else in-process without starting a temporary Prefect server."""
    from horizonbench.core.errors import ConfigError, HorizonbenchError
    from horizonbench.tasks.report import compare as runs

    _prefect_defaults()
    use_flow = bool(os.environ.get("PREFECT_API_URL"))
    try:
        if args.command == "compare":
            paths, out = [Path(r) for r in args.runs], Path(args.out)
            runs.check_compare(paths, out)
            if use_flow:
                from horizonbench.flows.rebuild import compare_flow

                result = compare_flow([str(p) for p in paths], str(out))
            else:
                result = runs.write_compare(paths, out)
            _print_moves(result)
            print(f"leaderboard: {Path(result['leaderboard']).resolve()}")
            print(f"table: {Path(result['table']).resolve()}")
            print(f"compare: {Path(result['html']).resolve()}")
            return 0
        run = Path(args.run)
        folder = runs.read_run(run)
        if args.command == "analyze":
            runs.analysis_parts(folder)
            if use_flow:
                from horizonbench.flows.rebuild import analyze_flow

                analyze_flow(str(run))
            else:
                runs.rebuild_analysis(run)
            _print_fits(run)
            print(f"analysis: {(run / 'analysis').resolve()}")
            return 0
        runs.report_parts(folder)
        if use_flow:
            from horizonbench.flows.rebuild import report_flow

            report = report_flow(str(run))
        else:
            report = runs.rebuild_report(run)
        print(f"report: {Path(report).resolve()}")
        return 0
    except ConfigError as err:
        return _fail(str(err), 2)
    except HorizonbenchError as err:
        return _fail(str(err), 1)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)


def _print_fits(run: Path) -> None:
    """The L0 lines the analysis task logs, for a rebuild without a Prefect logger."""
    import pandas as pd
    import pyarrow.parquet as pq

    path = run / "analysis" / "fits.parquet"
    if not path.exists():
        return
    for r in pq.read_table(path).to_pandas().itertuples():
        ci = "" if pd.isna(r.L0_low) else f" (interval {r.L0_low:.1f} to {r.L0_high:.1f})"
        print(f"{r.family}/{r.model} {r.method}: L0 = {r.L0:.1f}{ci}")


def _print_moves(result: dict[str, Any]) -> None:
    """One line per model whose latest L0 moved (compare's two-sample test against the
    previous run), with both runs' L0 and intervals."""
    for r in result["latest"].itertuples():
        if r.moved in ("up", "down"):
            success = "" if r.success_definition == "simulation" else f" (success: {r.success_definition})"
            print(
                f"moved {r.moved}: {r.family} [{r.setting_id}] {r.model}{success}: L0 {r.L0:.1f} "
                f"({r.L0_low:.1f} to {r.L0_high:.1f}) in {r.run} against {r.previous_L0:.1f} "
                f"({r.previous_L0_low:.1f} to {r.previous_L0_high:.1f}) in {r.previous_run}"
            )


def _terminate(signum: int, frame: Any) -> None:
    """SIGTERM ends the run like Ctrl-C: answers in flight are kept, servers stopped."""
    raise KeyboardInterrupt("terminated (SIGTERM)")


@contextlib.contextmanager
def collector_paused_for_imports() -> Iterator[None]:
    """Pause the cyclic collector while the command imports its stack, then collect
    once, freeze what survived and turn it back on.

    The imports (Prefect, pandas, Great Expectations, matplotlib: some 400,000 objects)
    allocate enough to set off full collections, each walking every object imported so
    far, and free next to nothing (a 10-instance run's command made 7-8 full passes, most
    of its time in the collector). Side by side on the idle
    machine (medians of 5 interleaved rounds, ``benchmarks/tricks.py --only startup
    --repeat 5`` at 7e39670, 2026-12-03): 0.59 s in the collector with the pause (its
    one ``gc.collect`` included) against 1.25 s without, and 16.3 s of the process
    tree's CPU against 17.4 s (1.10x); the wall time, 11.4 s against 11.3 s, does not
    move, as the command's start-up runs beside the server's. Frozen objects are never
    collected again, which is right for modules, classes and functions that live as
    long as the command; what the imports left as garbage is collected first. It gives
    back the CPU the side process the command used to fork saved (its collections ran
    over a frozen heap), without the fork. The collector is on again whatever the block
    raises (``tests/test_startup.py``)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.collect()
        gc.freeze()
        if was_on:
            gc.enable()


def _warm_up(args: argparse.Namespace, cfg: Any, stack: contextlib.ExitStack) -> None:
    """The command's own start-up work, done while the temporary Prefect server starts
    (a subprocess, on the other core): import the pipeline, start the LocalCluster the
    generation and world stages share, and ready Great Expectations (every command that
    generates or simulates validates tables; the other commands never import it).

    A small run (``tasks.cluster.client.small_run``) has no cluster: its shards run on
    this thread. Great Expectations is imported in a thread while the cluster starts
    (mostly waiting for the worker processes), and every validation and every figure of
    the report happen in this process. (Until issue 24 a small run forked a side
    process for Great Expectations and half the figures: up to 2.5 s of a 10-instance
    run's wall time, for 84 MiB more of the tree's PSS and 180 MiB of its RSS, with a
    fork while native threads ran; ``tasks.cluster.client``'s docstring has the
    figures.)"""
    from horizonbench.core.timings import mark
    from horizonbench.tasks.cluster.client import small_run

    dry = getattr(args, "dry_run", False)
    # the world study (run or demo, not a dry run) simulates on Dask and validates too
    worlds = cfg.worlds is not None and args.command != "generate" and not dry
    validates = bool(cfg.families) or worlds
    inline = small_run(cfg)
    import horizonbench.flows.pipeline  # noqa: F401 - prefect, pandas, the stages

    if not validates:
        mark("imports done")
        return
    from horizonbench.tasks.cluster.client import shared_cluster

    if not inline:
        import distributed  # noqa: F401 - before another thread imports anything
    mark("imports done")
    # Great Expectations (2 s; its first use is the first validation) imports in a
    # thread while the cluster starts, which is mostly waiting for the worker
    # processes; joined before the flow starts, so no other import runs beside it
    gx = threading.Thread(target=_import_gx, name="import-great-expectations", daemon=True)
    gx.start()
    try:
        stack.enter_context(shared_cluster(cfg.dask, tuple(cfg.families), in_process=inline))
        mark("cluster ready")
    finally:
        gx.join()
        mark("gx imported")


def _paused_warm_up(args: argparse.Namespace, cfg: Any, stack: contextlib.ExitStack) -> None:
    with collector_paused_for_imports():
        _warm_up(args, cfg, stack)


def _import_gx() -> None:
    try:
        import great_expectations  # noqa: F401
    except Exception:  # noqa: BLE001 - the first validation imports it again and says why
        pass


def _execute(args: argparse.Namespace, cfg: Any, out: Path) -> int:
    from horizonbench.cli.prefect_server import prefect_api
    from horizonbench.core.errors import ConfigError, HorizonbenchError
    from horizonbench.core.timings import mark

    mark("cli ready")
    try:
        with contextlib.ExitStack() as stack, prefect_api(warm_up=lambda: _paused_warm_up(args, cfg, stack)):
            mark("flow start")
            try:
                return _flows(args, cfg, out)
            finally:
                mark("flow end")
    except ConfigError as err:  # e.g. an API key missing from the environment
        return _fail(str(err), 2)
    except HorizonbenchError as err:
        return _fail(str(err), 1)
    except Exception as err:
        from prefect.exceptions import FailedRun

        if not isinstance(err, FailedRun):
            raise
        # the run finished, but attempts have no answer or episodes are unfinished
        report = out / "report" / "index.html"
        print(f"report: {report.resolve()}" if report.exists() else f"run: {out}")
        return _missing_attempts(out, cfg) or _fail("the run failed (see the Prefect log above)", 1)
    finally:
        mark("cli done")


def _flows(args: argparse.Namespace, cfg: Any, out: Path) -> int:
    from horizonbench.core.timings import mark
    from horizonbench.flows.pipeline import generate_flow, pipeline

    mark("pipeline imported")
    if args.command == "generate":
        result = generate_flow(cfg, str(out), _series(args))
        print(f"instances: {Path(result) / 'instances'}")
        return 0
    if getattr(args, "dry_run", False):
        from horizonbench.tasks.evaluate.estimate import estimate_rows, format_estimate

        generate_flow(cfg, str(out), _series(args))
        if cfg.families:
            print(format_estimate(estimate_rows(cfg, out)))
        if cfg.worlds is not None:
            from horizonbench.tasks.evaluate.world_models import world_estimate_rows

            worlds = len(cfg.worlds.study().episodes(cfg.run.seed))
            offline = sum(1 for a in cfg.worlds.agents if a.kind != "model")
            if offline:
                print(
                    f"world study: {worlds * offline} offline episodes "
                    f"({offline} offline agents x {worlds} worlds), no calls"
                )
            rows = world_estimate_rows(cfg)
            if rows:
                from horizonbench.harness.estimate import format_world_estimate

                print(format_world_estimate(rows))
        return 0
    if args.command == "train":
        from horizonbench.flows.pipeline import train_flow

        result = train_flow(cfg, str(out), _series(args))
    else:
        result = pipeline(cfg, str(out), _series(args))
    print(f"report: {Path(result).resolve()}" if result.endswith(".html") else f"run: {result}")
    return _missing_attempts(out, cfg)


def _series(args: argparse.Namespace) -> str | None:
    """The dated series ``--out`` names (it holds ``{date}``), whose ``latest`` moves."""
    return args.out if "{date}" in args.out else None


def _missing_attempts(out: Path, cfg: Any) -> int:
    """Exit 3 with one line when the finished run left attempts without an answer or
    world episodes of model agents unfinished (the same line the flow run fails with);
    else exit 4 when L bins are short of their quota (and the config does not allow it)."""
    from horizonbench.flows.pipeline import missing_summary, short_bins, silent_models, unfilled_summary
    from horizonbench.tasks.evaluate.world_models import unfinished_summary
    from horizonbench.tasks.run_folder.spend import budget_problem

    try:
        counts = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["counts"]
    except (OSError, ValueError, KeyError):
        return 0
    problems = []
    # a cap that refused calls: what was paid, the cap and how to raise it, at the end
    capped = budget_problem(counts.get("budget"))
    evaluation = counts.get("attempts")
    if evaluation and evaluation["total"]["failed"]:
        for message in silent_models(evaluation):
            print(f"horizonbench: {message}", file=sys.stderr)
        problems.append(missing_summary(evaluation, capped=bool(capped)))
    unfinished = unfinished_summary((counts.get("worlds") or {}).get("models", {}), capped=bool(capped))
    if unfinished:
        problems.append(unfinished)
    if capped and problems:
        problems.append(capped)
    short = short_bins(cfg, counts.get("generation") or [])
    if problems:
        return _fail("; ".join(problems + ([unfilled_summary(short)] if short else [])), 3)
    return _fail(unfilled_summary(short), 4) if short else 0


if __name__ == "__main__":
    raise SystemExit(main())
