"""What a run folder holds right now: done, stale, failed, or still running.

Read by ``horizonbench status --run DIR`` and, as JSON, by ``--json`` at the end of a
run. It reads only small files (``state.json``, ``manifest.json``, the analysis fits)
and tries the lock, so it never waits for a running run or imports the stages.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from horizonbench.core.errors import ConfigError
from horizonbench.tasks.run_folder.spend import folder_spend, spend_lines
from horizonbench.tasks.run_folder.state import STATE, holder, lock_is_held, read_state

#: exit codes of ``horizonbench status``: 0 completed, every output current and intact;
#: 1 not done (running, failed, crashed, cancelled, or outputs stale); 2 not a run folder
#: (the CLI's bad-input code); 3 damaged: an output is missing or not what the manifest
#: recorded (``tasks.run_folder.verify``), whatever the state says; a rerun repairs it
DONE, NOT_DONE, DAMAGED = 0, 1, 3


def _fits(run: Path) -> list[dict[str, Any]]:
    path = run / "analysis" / "fits.parquet"
    if not path.exists():
        return []
    import pyarrow.parquet as pq

    cols = ["family", "model", "method", "L0", "L0_low", "L0_high"]
    try:  # changed in place at the same size (found by --verify only): no fits to show
        table = pq.read_table(path)
    except (OSError, ValueError):
        return []
    have = [c for c in cols if c in table.column_names]
    return [{k: _json_number(v) for k, v in row.items()} for row in table.select(have).to_pylist()]


def _json_number(value: Any) -> Any:
    """JSON has no inf or nan (an oracle's L0 is inf): those become the strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def run_status(run: Path, verify: bool = False) -> dict[str, Any]:
    """The folder's status as plain data (what ``--json`` prints).

    The outputs are checked against the manifest (``tasks.run_folder.verify``): their sizes, and
    with ``verify`` their sha256 too. ``damaged`` lists every file that is missing or
    changed (an output with one leaves ``current``); ``checked`` says how deep the check
    went (``None`` while a run writes the folder, or without a manifest)."""
    if not run.is_dir():
        raise ConfigError(f"--run {run}: no such folder")
    state = read_state(run)
    manifest_path = run / "manifest.json"
    manifest: dict[str, Any] | None = None
    if manifest_path.exists():
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            manifest = None
    if state is None and manifest is None:
        raise ConfigError(f"--run {run}: not a run folder (no {STATE} or manifest.json)")
    running = lock_is_held(run)
    if state is None:  # a folder from before run states: finished if it has a manifest
        status, outputs, problems = "completed", {}, []
    else:
        status = state.get("status", "unknown")
        outputs = state.get("outputs") or {}
        problems = list(state.get("problems") or [])
        if status == "running" and not running:
            status = "crashed"
            problems.append("the run stopped without finishing (no process holds the folder)")
    report = run / "report" / "index.html"
    by_status: dict[str, list[str]] = {}
    for rel, info in sorted(outputs.items()):
        by_status.setdefault(info.get("status", "unknown"), []).append(rel)
    stale = by_status.get("stale", [])
    damaged, checked = _damaged(run, manifest, running, verify)
    broken = {d["output"] for d in damaged}
    return {
        "run": str(run.resolve()),
        "status": status,
        "running": running,
        "holder": holder(run) if running else None,
        "started_at": (state or {}).get("started_at") or (manifest or {}).get("started_at"),
        "finished_at": (state or {}).get("finished_at") or (manifest or {}).get("finished_at"),
        "current": [rel for rel in by_status.get("current", []) if rel not in broken],
        "stale": stale,
        "damaged": damaged,
        "checked": checked,
        "problems": problems,
        # paid and left, in total and per model, from the attempt store's ledger (live)
        "budget": folder_spend(run),
        "counts": (manifest or {}).get("counts") if status == "completed" else None,
        "report": str(report.resolve()) if report.exists() and not {"report"} & {*stale, *broken} else None,
        "fits": _fits(run) if status == "completed" and "analysis" not in broken else [],
    }


def _damaged(
    run: Path, manifest: dict[str, Any] | None, running: bool, hashes: bool
) -> tuple[list[dict[str, str]], str | None]:
    """The damaged files, as dicts, and the depth of the check (see ``run_status``)."""
    if manifest is None or running:
        return [], None
    from horizonbench.tasks.run_folder.verify import check

    return [d.as_dict() for d in check(run, manifest, hashes=hashes)], "sha256" if hashes else "size"


def format_status(info: dict[str, Any]) -> str:
    """The human-readable lines of ``horizonbench status``."""
    lines = [f"run: {info['run']}", f"status: {info['status']}"]
    if info["holder"]:
        h = info["holder"]
        lines[-1] += f" (pid {h.get('pid')} on {h.get('host')}, since {h.get('started_at')})"
    elif info["finished_at"]:
        lines[-1] += f" ({info['started_at']} to {info['finished_at']})"
    lines.append("current: " + (", ".join(info["current"]) or "nothing"))
    if info["stale"]:
        lines.append("stale: " + ", ".join(info["stale"]) + " (an earlier run's; not rewritten yet)")
    for damage in info.get("damaged") or []:
        lines.append(f"damaged: {damage['path']} {damage['problem']}")
    if info.get("damaged"):
        lines.append("rerun the command that wrote the run to repair the damaged outputs")
    elif info.get("checked"):
        how = "sizes and sha256" if info["checked"] == "sha256" else "sizes; --verify checks sha256 too"
        lines.append(f"verified: every output as the manifest recorded ({how})")
    for problem in info["problems"]:
        lines.append(f"problem: {problem}")
    for label, text in spend_lines(info["budget"]).items() if info.get("budget") else ():
        lines.append(f"{label}: {text}")
    for fit in info["fits"]:
        ci = ""
        if fit.get("L0_low") is not None and fit.get("L0_high") is not None:
            ci = f" ({_shown(fit['L0_low'])} to {_shown(fit['L0_high'])})"
        if fit.get("L0") is not None:
            lines.append(
                f"L0 {fit['family']}/{fit['model']} {fit.get('method', '')}: {_shown(fit['L0'])}{ci}"
            )
    if info["report"]:
        lines.append(f"report: {info['report']}")
    return "\n".join(lines)


def _shown(value: Any) -> str:
    return f"{value:.1f}" if isinstance(value, (int, float)) else str(value)


def exit_code(info: dict[str, Any]) -> int:
    if info.get("damaged"):
        return DAMAGED
    return DONE if info["status"] == "completed" and not info["stale"] else NOT_DONE
