"""Validate stage: run a table's Great Expectations suite; stop the flow if it fails.

The work is ``checks.check_table``, in this process. Tables live in staging until their
suite passes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NONE

from horizonbench.core.errors import ValidationFailed
from horizonbench.schemas.expectations import Suite
from horizonbench.tasks.validate.checks import check_table


@task(name="validate", cache_policy=NONE)
def validate_table(path: str, table: str, suite: Suite, run: str) -> dict[str, Any]:
    """Validate one staged table (a Parquet file, or a folder of parts); raise
    ValidationFailed with the reasons if it fails."""
    logger = get_run_logger()
    summary = check_table(path, table, suite, run)
    if not summary["success"]:
        reasons = "; ".join(summary["failures"]) or "see validation results"
        raise ValidationFailed(
            f"table {table} failed validation ({summary['failed']} of {summary['evaluated']} "
            f"expectations): {reasons}. Nothing downstream was written; details in "
            f"{Path(run) / 'validation'}"
        )
    logger.info("%s: %s expectations passed", table, summary["evaluated"])
    return summary
