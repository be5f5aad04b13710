"""The nightly deployment of the pipeline.

A deployment stores the config *path*, not its contents, so editing the config file
changes what the next night runs without redeploying.
"""

from __future__ import annotations

from pathlib import Path

from prefect.deployments.runner import RunnerDeployment

from horizonbench.flows.pipeline import pipeline
from horizonbench.schemas.config import load_config


def nightly_deployment(
    config: str | Path, out: str = "runs/nightly/{date}", cron: str = "0 2 * * *", name: str = "nightly"
) -> RunnerDeployment:
    """A scheduled deployment of :func:`pipeline`; the config is validated now, not at 2 a.m."""
    load_config(config)
    return pipeline.to_deployment(
        name=name,
        cron=cron,
        parameters={"config": str(Path(config).resolve()), "out": str(Path(out).resolve())},
        tags=["horizonbench"],
        description="horizonbench pipeline on a schedule; {date} in out is the run's UTC date.",
    )
