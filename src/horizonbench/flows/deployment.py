"""The nightly deployment of the pipeline, its long-running server and its failure alert.

Two ways to run the pipeline every night, on the same flow and the same parameters:

- ``deployment/prefect.yaml`` (``prefect deploy``): the deployment lives on the Prefect
  server and a worker of a *process* work pool starts each run; the worker can restart,
  move or scale without touching the schedule.
- :func:`serve_nightly` (``horizonbench serve``, ``deployment/nightly.py``): one
  long-running process that is both the deployment and its worker; nothing else to set
  up, but no run starts while it is down.

A deployment stores the config *path*, not its contents, so editing the config file
changes what the next night runs without redeploying.

Both carry a concurrency limit of one: a night that overruns holds the next run back
(enqueued) instead of running two pipelines at once on one machine.

Failure alerts are a Prefect automation (:func:`configure_failure_notification`): a
deployment's own ``triggers:`` in prefect.yaml can only *run* a deployment, so a
"send a notification" action has to be created against the deployment's id, after it
exists; ``deployment/notify.py`` and ``serve_nightly(notify=...)`` do that.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING
from uuid import UUID

from prefect.deployments.runner import RunnerDeployment

from horizonbench.core.errors import ConfigError
from horizonbench.flows.pipeline import pipeline
from horizonbench.schemas.config import load_config

if TYPE_CHECKING:
    from prefect.events.schemas.automations import AutomationCore

DEFAULT_NAME = "nightly"
DEFAULT_OUT = "runs/nightly/{date}"
DEFAULT_CRON = "0 2 * * *"
DEFAULT_TIMEZONE = "UTC"
#: the flow-run states an alert is sent for (a run stopped by a crash of its process or
#: machine ends Crashed, one whose pipeline reported missing answers ends Failed)
ALERT_STATES = ("Failed", "Crashed")
ALERT_SUBJECT = "horizonbench: {{ deployment.name }} run {{ flow_run.name }} {{ flow_run.state.name }}"
ALERT_BODY = (
    "Flow run {{ flow_run.name }} of deployment {{ flow.name }}/{{ deployment.name }} "
    "entered {{ flow_run.state.name }}: {{ flow_run.state.message }}\n"
    "Parameters: {{ flow_run.parameters }}\n"
    "{{ flow_run|ui_url }}"
)


def nightly_schedule(cron: str = DEFAULT_CRON, timezone: str = DEFAULT_TIMEZONE) -> object:
    """A cron schedule in an IANA time zone, checked now (one line, not a traceback).

    The time zone makes "2 a.m." mean local 2 a.m. across daylight-saving changes;
    Prefect's default (UTC) would move the run by an hour twice a year.
    """
    from prefect.client.schemas.schedules import CronSchedule
    from pydantic import ValidationError

    try:
        return CronSchedule(cron=cron, timezone=timezone)
    except ValidationError as err:
        reasons = "; ".join(str(e["msg"]).removeprefix("Value error, ") for e in err.errors())
        raise ConfigError(f"schedule {cron!r} in {timezone!r}: {reasons}") from None


def nightly_deployment(
    config: str | Path,
    out: str = DEFAULT_OUT,
    cron: str = DEFAULT_CRON,
    name: str = DEFAULT_NAME,
    timezone: str = DEFAULT_TIMEZONE,
) -> RunnerDeployment:
    """A scheduled deployment of :func:`pipeline`; the config is validated now, not at 2 a.m.

    ``out`` must hold ``{date}`` when the config reuses answers of its own run folder
    (``evaluation.reuse: run``, the default): one folder per night is what keeps a moving
    model alias from being served last night's answers. Configs with ``reuse: never`` or
    ``store`` (pinned snapshots) may write to a fixed folder. ``{date}`` is the run's UTC
    date (the pipeline resolves it), whatever the schedule's time zone.
    """
    cfg = load_config(config)
    if "{date}" not in out and cfg.evaluation.reuse == "run" and cfg.evaluation.models:
        raise ConfigError(
            f"out {out!r} has no {{date}}: every night would resume the same run and reuse its "
            "answers; put {date} in out, or set evaluation.reuse to never (or store, for pinned models)"
        )
    from prefect.client.schemas.actions import DeploymentScheduleCreate

    schedule = DeploymentScheduleCreate(schedule=nightly_schedule(cron, timezone))
    return pipeline.to_deployment(
        name=name,
        schedules=[schedule],
        concurrency_limit=1,
        parameters={"config": str(Path(config).resolve()), "out": str(Path(out).resolve())},
        tags=["horizonbench"],
        description="horizonbench pipeline on a schedule; {date} in out is the run's UTC date.",
    )


def _require_api() -> str:
    """The API URL a long-running deployment must use.

    Without one, Prefect would start a temporary server inside the process: the schedule,
    the run history and the UI would vanish with it, and nothing could be watched.
    """
    from prefect.settings import PREFECT_API_URL

    url = PREFECT_API_URL.value()
    if not url:
        raise ConfigError(
            "PREFECT_API_URL is not set: start a server (prefect server start) and "
            "export PREFECT_API_URL=http://127.0.0.1:4200/api, so the schedule and its runs "
            "outlive this process"
        )
    return str(url)


def serve_nightly(
    config: str | Path,
    out: str = DEFAULT_OUT,
    cron: str = DEFAULT_CRON,
    timezone: str = DEFAULT_TIMEZONE,
    name: str = DEFAULT_NAME,
    notify: str | None = None,
) -> None:
    """Register the nightly deployment and run its flow runs in this process until stopped.

    Everything is checked before the process settles in (config, ``{date}``, cron and
    time zone, the API, the notification block), so a mistake is one line at start-up
    rather than a failed night. ``notify`` names a notification block
    (``slack-webhook/team-alerts``) to alert when a run fails or crashes.
    """
    from prefect import serve

    deployment = nightly_deployment(config, out, cron, name, timezone)
    _require_api()
    if notify:
        # serve() would apply the deployment too; applying it first gives the id the
        # automation must name (the same deployment: flow and deployment name match)
        deployment_id = deployment.apply()
        configure_failure_notification(deployment_id, notify)
    serve(deployment)


def failure_automation(
    deployment_id: UUID, block_document_id: UUID, name: str, states: tuple[str, ...] = ALERT_STATES
) -> AutomationCore:
    """An automation that sends one notification per flow run of the deployment that
    enters one of ``states``.

    The trigger matches the run's state-change events by their related deployment
    resource, and evaluates each flow run on its own (``for_each``): two failed nights
    are two messages, not one.
    """
    from prefect.events.actions import SendNotification
    from prefect.events.schemas.automations import AutomationCore, EventTrigger, Posture

    trigger = EventTrigger(
        expect={f"prefect.flow-run.{state}" for state in states},
        match={"prefect.resource.id": "prefect.flow-run.*"},
        match_related={
            "prefect.resource.role": "deployment",
            "prefect.resource.id": f"prefect.deployment.{deployment_id}",
        },
        for_each={"prefect.resource.id"},
        posture=Posture.Reactive,
        threshold=1,
        within=timedelta(0),
    )
    action = SendNotification(block_document_id=block_document_id, subject=ALERT_SUBJECT, body=ALERT_BODY)
    return AutomationCore(
        name=name,
        description=f"Notify when a run of deployment {deployment_id} enters {' or '.join(states)}.",
        trigger=trigger,
        actions=[action],
    )


def configure_failure_notification(deployment: str | UUID, block: str, name: str | None = None) -> UUID:
    """Create (or replace, by name) the failure alert of a deployment; returns its id.

    ``deployment`` is an id or ``flow-name/deployment-name`` (``horizonbench/nightly``);
    ``block`` is ``block-type-slug/block-name`` (``slack-webhook/team-alerts``). Replacing
    by name makes the command safe to rerun after a redeploy or a block change. The
    automation is not owned by the deployment, so ``prefect deploy`` (which deletes the
    automations it owns) leaves it in place.
    """
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    _require_api()
    slug, sep, block_name = block.partition("/")
    if not sep or not slug or not block_name:
        raise ConfigError(f"block {block!r}: expected block-type/block-name, e.g. slack-webhook/team-alerts")
    with get_client(sync_client=True) as client:
        try:
            if isinstance(deployment, UUID):
                found = client.read_deployment(deployment)
            else:
                found = client.read_deployment_by_name(deployment)
        except ObjectNotFound:
            raise ConfigError(
                f"no deployment {deployment!s} on the Prefect server (prefect deploy first)"
            ) from None
        try:
            document = client.read_block_document_by_name(block_name, slug, include_secrets=False)
        except ObjectNotFound:
            raise ConfigError(
                f"no {slug} block named {block_name!r} on the Prefect server (create it first, see README)"
            ) from None
        flow = client.read_flow(found.flow_id)
        title = name or f"horizonbench: {flow.name}/{found.name} failed"
        for old in client.read_automations_by_name(title):
            client.delete_automation(old.id)
        return client.create_automation(failure_automation(found.id, document.id, title))
