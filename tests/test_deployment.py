"""The nightly deployment registers with a real Prefect server, schedule and all."""

from __future__ import annotations

import asyncio

import pytest

from conftest import CONFIGS
from horizonbench.core.errors import ConfigError
from horizonbench.flows.deployment import nightly_deployment

pytestmark = pytest.mark.flow


def test_nightly_deployment_is_scheduled_on_the_server(prefect_server, tmp_path):
    from prefect.client.orchestration import get_client

    dep = nightly_deployment(CONFIGS / "small.yaml", out=str(tmp_path / "{date}"), cron="0 2 * * *")
    deployment_id = dep.apply()

    async def read():
        async with get_client() as client:
            return await client.read_deployment(deployment_id)

    stored = asyncio.run(read())
    assert stored.name == "nightly"
    assert [s.schedule.cron for s in stored.schedules] == ["0 2 * * *"]
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
