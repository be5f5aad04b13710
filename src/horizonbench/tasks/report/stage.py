"""Report stage as Prefect runs it: one task run ``report`` writing the run's page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NONE

from horizonbench.tasks.report.page import write_report


@task(name="report", cache_policy=NONE)
def build_report(run: str, title: str, run_info: dict[str, Any], counts: dict[str, Any]) -> str:
    """The report page of ``run`` (``report/index.html``); returns its path."""
    return str(write_report(Path(run), title, run_info, counts))
