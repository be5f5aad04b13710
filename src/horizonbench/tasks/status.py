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
from horizonbench.tasks.run_folder import STATE, holder, lock_is_held, read_state

#: exit codes of ``horizonbench status``
DONE, NOT_DONE = 0, 1


def _fits(run: Path) -> list[dict[str, Any]]:
    path = run / "analysis" / "fits.parquet"
    if not path.exists():
        return []
    import pyarrow.parquet as pq

    cols = ["family", "model", "method", "L0", "L0_low", "L0_high"]
    table = pq.read_table(path)
    have = [c for c in cols if c in table.column_names]
    return [{k: _json_number(v) for k, v in row.items()} for row in table.select(have).to_pylist()]


def _json_number(value: Any) -> Any:
    """JSON has no inf or nan (an oracle's L0 is inf): those become the strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def run_status(run: Path) -> dict[str, Any]:
    """The folder's status as plain data (what ``--json`` prints)."""
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
    return {
        "run": str(run.resolve()),
        "status": status,
        "running": running,
        "holder": holder(run) if running else None,
        "started_at": (state or {}).get("started_at") or (manifest or {}).get("started_at"),
        "finished_at": (state or {}).get("finished_at") or (manifest or {}).get("finished_at"),
        "current": by_status.get("current", []),
        "stale": stale,
        "problems": problems,
        "counts": (manifest or {}).get("counts") if status == "completed" else None,
        "report": str(report.resolve()) if report.exists() and "report" not in stale else None,
        "fits": _fits(run) if status == "completed" else [],
    }


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
    for problem in info["problems"]:
        lines.append(f"problem: {problem}")
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
    return DONE if info["status"] == "completed" and not info["stale"] else NOT_DONE
