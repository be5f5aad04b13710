"""The nightly deployment of the pipeline.

A deployment stores the config *path*, not its contents, so editing the config file
changes what the next night runs without redeploying.
"""

from __future__ import annotations

from pathlib import Path

from prefect.deployments.runner import RunnerDeployment

from horizonbench.core.errors import ConfigError
from horizonbench.flows.pipeline import pipeline
from horizonbench.schemas.config import load_config


def nightly_deployment(
    config: str | Path, out: str = "runs/nightly/{date}", cron: str = "0 2 * * *", name: str = "nightly"
) -> RunnerDeployment:
    """A scheduled deployment of :func:`pipeline`; the config is validated now, not at 2 a.m.

    ``out`` must hold ``{date}`` when the config reuses answers of its own run folder
    (``evaluation.reuse: run``, the default): one folder per night is what keeps a moving
    model alias from being served last night's answers. Configs with ``reuse: never`` or
    ``store`` (pinned snapshots) may write to a fixed folder.
    """
    cfg = load_config(config)
    if "{date}" not in out and cfg.evaluation.reuse == "run" and cfg.evaluation.models:
        raise ConfigError(
            f"out {out!r} has no {{date}}: every night would resume the same run and reuse its "
            "answers; put {date} in out, or set evaluation.reuse to never (or store, for pinned models)"
        )
    return pipeline.to_deployment(
        name=name,
        cron=cron,
        parameters={"config": str(Path(config).resolve()), "out": str(Path(out).resolve())},
        tags=["horizonbench"],
        description="horizonbench pipeline on a schedule; {date} in out is the run's UTC date.",
    )
