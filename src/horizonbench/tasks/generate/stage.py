"""Generate stage as Prefect runs it: one task run ``generate`` and, inside it, one
``generate-<label>`` per family label, so the UI shows which table took how long. The
work is :func:`~horizonbench.tasks.generate.instances.generate_all`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NONE

from horizonbench.schemas.config import Config
from horizonbench.tasks.cluster.client import lost_cluster
from horizonbench.tasks.generate.instances import generate_all
from horizonbench.tasks.run_folder.layout import instances_rel


@task(name="generate-table", cache_policy=NONE)
def _generate_table(label: str, work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """One family label's instance table, a task run of its own (``generate-<label>``)."""
    return work()


def _as_task(label: str, work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    return _generate_table.with_options(task_run_name=f"generate-{instances_rel(label)}")(label, work)


@task(name="generate", cache_policy=NONE, retries=2, retry_delay_seconds=5, retry_condition_fn=lost_cluster)
def generate_instances(cfg: Config, run: str) -> list[dict[str, Any]]:
    """Generate every family's instances into staging; returns per-family statistics.
    Each table is a task run inside this one, named for it, so the UI shows which
    table took how long and which one an interrupt or a failure stopped."""
    logger = get_run_logger()
    return generate_all(cfg, Path(run), logger.info, _as_task)
