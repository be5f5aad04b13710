"""API keys from a Prefect Secret block, read through a real Prefect API server."""

from __future__ import annotations

import pytest

from fake_model_server import running_fake_server
from horizonbench.core.errors import ConfigError
from horizonbench.core.types import Message
from horizonbench.models.base import AttemptRequest
from horizonbench.models.factory import build_model
from horizonbench.schemas.config import ModelSpec

pytestmark = pytest.mark.flow
KEY = "block-key-NOT-SECRET-456"


def _request() -> AttemptRequest:
    return AttemptRequest(
        instance_id="i",
        family="maze",
        sample=0,
        messages=(Message("user", "hi"),),
        temperature=1.0,
        top_p=0.95,
        max_tokens=16,
        seed=1,
        row={},
    )


def test_key_comes_from_secret_block_when_env_is_unset(prefect_server):
    from prefect.blocks.system import Secret

    Secret(value=KEY).save("hb-test-key", overwrite=True)
    with running_fake_server(lambda body: "Solution: []") as server:
        spec = ModelSpec(
            name="compat",
            provider="openai_compatible",
            model="m",
            base_url=server.base_url,
            api_key_env="HB_TEST_UNSET_KEY",
            api_key_block="hb-test-key",
            max_retries=0,
        )
        model = build_model(spec, environ={})
        completion = model.complete(_request())
        assert completion.text == "Solution: []"
        assert server.requests[-1].headers["authorization"] == f"Bearer {KEY}"
        assert KEY not in repr(model) and KEY not in str(model.identity())


def test_missing_block_and_env_is_a_config_error_naming_both(prefect_server):
    spec = ModelSpec(
        name="gpt",
        provider="openai",
        model="m",
        api_key_env="HB_TEST_UNSET_KEY",
        api_key_block="hb-no-such-block",
    )
    with pytest.raises(ConfigError, match="HB_TEST_UNSET_KEY.*hb-no-such-block"):
        build_model(spec, environ={})
