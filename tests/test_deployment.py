"""The nightly deployment registers with a real Prefect server, schedule and all."""

from __future__ import annotations

import asyncio

import pytest

from conftest import CONFIGS
from horizonbench.core.errors import ConfigError
from horizonbench.flows.deployment import (
    ALERT_STATES,
    configure_failure_notification,
    failure_automation,
    nightly_deployment,
    serve_nightly,
)

pytestmark = pytest.mark.flow


def test_nightly_deployment_is_scheduled_on_the_server(prefect_server, tmp_path):
    from prefect.client.orchestration import get_client

    dep = nightly_deployment(
        CONFIGS / "small.yaml", out=str(tmp_path / "{date}"), cron="0 2 * * *", timezone="America/New_York"
    )
    deployment_id = dep.apply()

    async def read():
        async with get_client() as client:
            return await client.read_deployment(deployment_id)

    stored = asyncio.run(read())
    assert stored.name == "nightly"
    assert [(s.schedule.cron, s.schedule.timezone) for s in stored.schedules] == [
        ("0 2 * * *", "America/New_York")
    ]
    # one run at a time: a night that overruns holds the next one back
    assert stored.global_concurrency_limit is not None and stored.global_concurrency_limit.limit == 1
    assert stored.parameters["config"] == str((CONFIGS / "small.yaml").resolve())
    assert stored.parameters["out"].endswith("{date}")


def test_a_bad_config_fails_at_deploy_time(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("families: {maze: {sampling: {count: 0}}}")
    with pytest.raises(ConfigError, match="count"):
        nightly_deployment(bad)


def test_a_fixed_out_folder_would_serve_old_answers_and_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"\{date\}"):
        nightly_deployment(CONFIGS / "small.yaml", out=str(tmp_path / "nightly"))
    never = tmp_path / "never.yaml"
    never.write_text((CONFIGS / "small.yaml").read_text() + "\n")
    import yaml

    data = yaml.safe_load(never.read_text())
    data["evaluation"]["reuse"] = "never"
    never.write_text(yaml.safe_dump(data))
    assert nightly_deployment(never, out=str(tmp_path / "nightly")).name == "nightly"


def test_date_placeholder_becomes_the_utc_date():
    import re

    from horizonbench.flows.pipeline import _resolve

    cfg, run = _resolve(str(CONFIGS / "small.yaml"), "/runs/nightly/{date}")
    assert cfg.run.name == "small"
    assert re.fullmatch(r"/runs/nightly/\d{4}-\d{2}-\d{2}", str(run))


def test_a_bad_cron_or_time_zone_is_one_line_at_deploy_time(tmp_path):
    out = str(tmp_path / "{date}")
    with pytest.raises(ConfigError, match="Invalid timezone") as err:
        nightly_deployment(CONFIGS / "small.yaml", out=out, timezone="Mars/Olympus")
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="Invalid cron"):
        nightly_deployment(CONFIGS / "small.yaml", out=out, cron="0 2 * *")


def test_the_failure_alert_fires_once_per_failed_or_crashed_run_of_one_deployment():
    """The trigger's shape, without a server: the states, the deployment it is bound to,
    one evaluation per flow run, and a notification (not a run) as its action."""
    from uuid import uuid4

    deployment_id, block_id = uuid4(), uuid4()
    automation = failure_automation(deployment_id, block_id, "alert")
    trigger = automation.trigger
    assert (
        trigger.expect
        == {f"prefect.flow-run.{s}" for s in ALERT_STATES}
        == {
            "prefect.flow-run.Failed",
            "prefect.flow-run.Crashed",
        }
    )
    assert trigger.match_related.model_dump() == {  # type: ignore[union-attr]
        "prefect.resource.role": "deployment",
        "prefect.resource.id": f"prefect.deployment.{deployment_id}",
    }
    assert trigger.for_each == {"prefect.resource.id"} and trigger.threshold == 1
    [action] = automation.actions
    assert action.type == "send-notification" and action.block_document_id == block_id
    assert "{{ flow_run.name }}" in action.body and "{{ flow_run.state.name }}" in action.body


def test_serving_without_an_api_url_is_refused_before_anything_starts(monkeypatch, tmp_path):
    """A temporary server inside the serving process would take the schedule and the
    run history with it when the process ends."""
    import prefect
    from prefect.settings import PREFECT_API_URL, temporary_settings

    monkeypatch.setattr(prefect, "serve", lambda *a, **k: pytest.fail("serve() was reached"))
    with temporary_settings(restore_defaults={PREFECT_API_URL}):
        with pytest.raises(ConfigError, match="PREFECT_API_URL"):
            serve_nightly(CONFIGS / "small.yaml", out=str(tmp_path / "{date}"))


def test_serve_registers_the_deployment_and_its_failure_alert(prefect_server, monkeypatch, tmp_path):
    """``horizonbench serve --notify``: the automation names the served deployment and the
    user's block; serving again replaces it instead of adding a second alert."""
    import prefect
    from prefect.blocks.notifications import CustomWebhookNotificationBlock
    from prefect.client.orchestration import get_client

    served = []
    monkeypatch.setattr(prefect, "serve", lambda *deployments, **k: served.extend(deployments))
    CustomWebhookNotificationBlock(name="alerts", url="http://127.0.0.1:9/alert").save(
        "hb-serve-alerts", overwrite=True
    )
    args = (CONFIGS / "small.yaml", str(tmp_path / "{date}"), "30 1 * * *", "Europe/Berlin", "served")
    serve_nightly(*args, notify="custom-webhook/hb-serve-alerts")
    serve_nightly(*args, notify="custom-webhook/hb-serve-alerts")
    assert [d.name for d in served] == ["served", "served"]
    assert served[0].concurrency_limit == 1

    title = "horizonbench: horizonbench/served failed"

    async def read():
        async with get_client() as client:
            deployment = await client.read_deployment_by_name("horizonbench/served")
            block = await client.read_block_document_by_name("hb-serve-alerts", "custom-webhook")
            automations = await client.read_automations_by_name(title)
            # what a redeploy does before it creates the deployment's own `triggers:`
            await client.delete_resource_owned_automations(f"prefect.deployment.{deployment.id}")
            return deployment, block, automations, await client.read_automations_by_name(title)

    deployment, block, automations, after_redeploy = asyncio.run(read())
    assert [(s.schedule.cron, s.schedule.timezone) for s in deployment.schedules] == [
        ("30 1 * * *", "Europe/Berlin")
    ]
    [automation] = automations
    assert automation.trigger.match_related["prefect.resource.id"] == [f"prefect.deployment.{deployment.id}"]
    assert automation.actions[0].block_document_id == block.id
    assert [a.id for a in after_redeploy] == [automation.id]  # not owned: a redeploy keeps it


def test_an_unknown_block_or_deployment_is_one_line(prefect_server):
    with pytest.raises(ConfigError, match="no deployment"):
        configure_failure_notification("horizonbench/no-such", "slack-webhook/alerts")
    with pytest.raises(ConfigError, match="block-type/block-name"):
        configure_failure_notification("horizonbench/nightly", "alerts")
