"""Small flows over finished run folders: rebuild the analysis, rebuild the report,
compare runs. Each calls the stages of ``tasks/report/compare.py``; inside these flows the
analysis and report stages run as Prefect tasks, so a rebuild shows in the UI like a
run. The command line uses them when ``PREFECT_API_URL`` is set, and calls the same
functions directly otherwise (no temporary server for seconds of work)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger

from horizonbench.tasks.report.compare import rebuild_analysis, rebuild_report, write_compare


@flow(name="horizonbench-analyze", validate_parameters=False)
def analyze_flow(run: str) -> dict[str, str]:
    """Rewrite ``<run>/analysis/*`` from the run's tables and recorded config."""
    return rebuild_analysis(Path(run))


@flow(name="horizonbench-report", validate_parameters=False)
def report_flow(run: str) -> str:
    """Rewrite ``<run>/report/index.html`` from the run's tables and analysis."""
    return rebuild_report(Path(run))


@flow(name="horizonbench-compare", validate_parameters=False)
def compare_flow(runs: list[str], out: str) -> dict[str, Any]:
    """Write ``<out>/index.html`` and ``<out>/compare.parquet`` comparing ``runs``."""
    result = write_compare([Path(r) for r in runs], Path(out))
    get_run_logger().info("comparison of %d runs: %s", len(result["runs"]), result["html"])
    return result
