"""API providers over real HTTP against a local fake server: mapping, retries, key hygiene."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from engine_helpers import rows_for
from fake_model_server import running_fake_server
from horizonbench.core.errors import ConfigError
from horizonbench.core.types import Message
from horizonbench.models import failures
from horizonbench.models.anthropic_messages import AnthropicModel
from horizonbench.models.attempt_store import AttemptStore
from horizonbench.models.base import AttemptRequest, ModelCallError
from horizonbench.models.factory import build_model
from horizonbench.models.offline import OfflineModel
from horizonbench.models.openai_chat import OpenAIChatModel
from horizonbench.schemas.config import ModelSpec

FAKE_KEY = "test-key-NOT-SECRET-123"


def _request(i: int = 0, *, max_tokens: int = 64, system: bool = True) -> AttemptRequest:
    messages = [Message("user", f"solve puzzle number {i}")]
    if system:
        messages.insert(0, Message("system", "You are a careful planner."))
    return AttemptRequest(
        instance_id=f"inst-{i}",
        family="fake",
        sample=0,
        messages=tuple(messages),
        temperature=0.7,
        top_p=0.9,
        max_tokens=max_tokens,
        seed=2**40 + i,
        row={},
    )


def _openai_spec(base_url: str | None, provider: str = "openai_compatible", **kw: Any) -> ModelSpec:
    fields: dict[str, Any] = {
        "name": "fake-gpt",
        "provider": provider,
        "model": "fake-model",
        "base_url": base_url,
        "max_retries": 2,
        "timeout_s": 10,
        "input_cost_per_mtok": 1.0,
        "output_cost_per_mtok": 2.0,
    }
    fields.update(kw)
    return ModelSpec(**fields)


def _anthropic_spec(root_url: str, **kw: Any) -> ModelSpec:
    fields: dict[str, Any] = {
        "name": "fake-claude",
        "provider": "anthropic",
        "model": "claude-fake",
        "base_url": root_url,
        "max_retries": 2,
        "timeout_s": 10,
        "input_cost_per_mtok": 3.0,
        "output_cost_per_mtok": 15.0,
    }
    fields.update(kw)
    return ModelSpec(**fields)


def _no_key_anywhere(*things: Any) -> None:
    for thing in things:
        assert FAKE_KEY not in (thing if isinstance(thing, str) else repr(thing))


# --- OpenAI-compatible ---------------------------------------------------------------------


def test_openai_compatible_maps_text_tokens_finish_and_cost() -> None:
    with running_fake_server(lambda body: "move B7 then C7") as server:
        model = OpenAIChatModel(_openai_spec(server.base_url), FAKE_KEY)
        completion = model.complete(_request(3))

    assert completion.text == "move B7 then C7"
    assert completion.finish_reason == "stop"
    assert completion.input_tokens == 9  # words of system + user message
    assert completion.output_tokens == 4
    assert completion.cost_usd == pytest.approx((9 * 1.0 + 4 * 2.0) / 1e6)
    assert completion.latency_s > 0

    (req,) = server.requests
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == f"Bearer {FAKE_KEY}"
    body = req.body
    assert body["model"] == "fake-model"
    assert body["messages"][0] == {"role": "system", "content": "You are a careful planner."}
    assert body["temperature"] == 0.7 and body["top_p"] == 0.9
    assert body["max_tokens"] == 64 and "max_completion_tokens" not in body
    assert body["seed"] == (2**40 + 3) % 2**31
    _no_key_anywhere(completion, model, model.identity())


def test_openai_provider_sends_max_completion_tokens() -> None:
    with running_fake_server(lambda body: "ok") as server:
        model = OpenAIChatModel(_openai_spec(server.base_url, provider="openai"), FAKE_KEY)
        model.complete(_request())
    body = server.requests[0].body
    assert body["max_completion_tokens"] == 64 and "max_tokens" not in body


def test_length_finish_reason_is_reported() -> None:
    with running_fake_server(lambda body: ("cut off", "length")) as server:
        completion = OpenAIChatModel(_openai_spec(server.base_url), None).complete(_request())
    assert completion.finish_reason == "length"
    # a compatible server without a key gets the placeholder, never an empty header
    assert server.requests[0].headers["authorization"] == "Bearer EMPTY"


def test_openai_429_is_classified_with_its_hint_and_the_sdk_does_not_retry() -> None:
    """Retries are the engine's alone (they must pass the rate limiter): one try, one request."""
    with running_fake_server(lambda body: "fine") as server:
        server.fail_next(1, status=429)
        model = OpenAIChatModel(_openai_spec(server.base_url), FAKE_KEY)
        with pytest.raises(failures.CallFailure) as info:
            model.complete(_request())
        assert len(server.requests) == 1
        assert model.complete(_request()).text == "fine"
    assert info.value.kind == failures.RATE_LIMIT and info.value.status == 429
    assert info.value.retry_after_s == pytest.approx(0.001)


def test_openai_persistent_500_raises_scrubbed_model_call_error() -> None:
    def broken(body: dict[str, Any]) -> str:
        raise RuntimeError("backend down")

    with running_fake_server(broken, echo_auth_in_errors=True) as server:
        model = OpenAIChatModel(_openai_spec(server.base_url, max_retries=1), FAKE_KEY)
        with pytest.raises(ModelCallError) as info:
            model.complete(_request())
    assert len(server.requests) == 1  # the SDK never retries on its own
    assert info.value.kind == failures.SERVER_ERROR
    message = str(info.value)
    assert "500" in message and "backend down" in message
    assert "[redacted]" in message  # the server echoed the key; we masked it
    _no_key_anywhere(message)


def test_persistent_500_becomes_an_error_row_without_the_key(tmp_path: Path) -> None:
    def broken(body: dict[str, Any]) -> str:
        raise RuntimeError("backend down")

    with running_fake_server(broken, echo_auth_in_errors=True) as server:
        model = OpenAIChatModel(_openai_spec(server.base_url, max_retries=1), FAKE_KEY)
        with AttemptStore(tmp_path / "store.sqlite") as store:
            rows = rows_for([_request(0), _request(1)], model, store, max_concurrency=2)
            assert len(store) == 0  # failures are not stored: a resume retries them
    assert len(server.requests) == 2 * 4  # each attempt: first try + FAST_RETRY's 3 retries
    assert [r["instance_id"] for r in rows] == ["inst-0", "inst-1"]
    for row in rows:
        assert row["response"] is None and row["finish_reason"] is None
        assert row["error"] and "500" in row["error"]
        assert row["reused"] is False
        assert row["error_class"] == "server_error" and row["tries"] == 4
    _no_key_anywhere(json.dumps(rows))
    assert FAKE_KEY.encode() not in (tmp_path / "store.sqlite").read_bytes()


def test_connection_refused_is_a_model_call_error() -> None:
    with running_fake_server(lambda body: "x") as server:
        url = server.base_url
    # the server is gone: the port refuses connections
    model = OpenAIChatModel(_openai_spec(url, max_retries=0), FAKE_KEY)
    with pytest.raises(ModelCallError, match="APIConnectionError") as info:
        model.complete(_request())
    assert info.value.kind == failures.CONNECTION


# --- Anthropic -------------------------------------------------------------------------------


def test_anthropic_maps_text_tokens_stop_reason_and_sends_no_sampling_params() -> None:
    with running_fake_server(lambda body: "go north twice") as server:
        model = AnthropicModel(_anthropic_spec(server.root_url), FAKE_KEY)
        completion = model.complete(_request(5, max_tokens=99))

    assert completion.text == "go north twice"
    assert completion.finish_reason == "stop"
    assert (completion.input_tokens, completion.output_tokens) == (9, 3)
    assert completion.cost_usd == pytest.approx((9 * 3.0 + 3 * 15.0) / 1e6)

    (req,) = server.requests
    assert req.path == "/v1/messages"
    # the 2.x SDK sends the key as a bearer token
    assert req.headers["authorization"] == f"Bearer {FAKE_KEY}"
    body = req.body
    assert body["system"] == "You are a careful planner."
    assert body["messages"] == [{"role": "user", "content": "solve puzzle number 5"}]
    assert body["max_tokens"] == 99
    # API version 2026-10-21 rejects every sampling parameter
    assert "temperature" not in body and "top_p" not in body
    _no_key_anywhere(completion, model, model.identity())


def test_anthropic_joins_system_messages_and_omits_empty_system() -> None:
    req = _request(system=False)
    two_systems = dataclasses.replace(
        req, messages=(Message("system", "A."), Message("system", "B."), *req.messages)
    )
    with running_fake_server(lambda body: "ok") as server:
        model = AnthropicModel(_anthropic_spec(server.root_url), FAKE_KEY)
        model.complete(req)
        model.complete(two_systems)
    assert "system" not in server.requests[0].body
    assert server.requests[1].body["system"] == "A.\n\nB."


def test_anthropic_max_tokens_maps_to_length() -> None:
    with running_fake_server(lambda body: ("half an answ", "length")) as server:
        completion = AnthropicModel(_anthropic_spec(server.root_url), FAKE_KEY).complete(_request())
    assert completion.finish_reason == "length"


def test_anthropic_429_and_scrubbed_500_are_classified_without_sdk_retries() -> None:
    with running_fake_server(lambda body: "fine", echo_auth_in_errors=True) as server:
        model = AnthropicModel(_anthropic_spec(server.root_url, max_retries=1), FAKE_KEY)
        server.fail_next(1, status=429)
        with pytest.raises(failures.CallFailure) as limited:
            model.complete(_request())
        assert limited.value.kind == failures.RATE_LIMIT
        assert model.complete(_request()).text == "fine"
        assert len(server.requests) == 2

        server.fail_next(1, status=500)
        with pytest.raises(ModelCallError) as info:
            model.complete(_request())
    assert len(server.requests) == 3
    assert info.value.kind == failures.SERVER_ERROR
    assert "500" in str(info.value) and "[redacted]" in str(info.value)
    _no_key_anywhere(str(info.value))


# --- factory --------------------------------------------------------------------------------


def test_factory_reads_the_key_from_the_named_env_var() -> None:
    with running_fake_server(lambda body: "ok") as server:
        spec = _openai_spec(server.base_url, api_key_env="HB_TEST_KEY")
        model = build_model(spec, environ={"HB_TEST_KEY": FAKE_KEY})
        model.complete(_request())
    assert isinstance(model, OpenAIChatModel)
    assert server.requests[0].headers["authorization"] == f"Bearer {FAKE_KEY}"


def test_factory_default_env_vars_and_missing_key_errors() -> None:
    openai_spec = _openai_spec("http://127.0.0.1:9/v1", provider="openai")
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        build_model(openai_spec, environ={})
    anthropic_spec = _anthropic_spec("http://127.0.0.1:9")
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        build_model(anthropic_spec, environ={"ANTHROPIC_API_KEY": "  "})
    assert isinstance(build_model(anthropic_spec, environ={"ANTHROPIC_API_KEY": FAKE_KEY}), AnthropicModel)
    # an explicitly named variable is required even for a compatible server
    named = _openai_spec("http://127.0.0.1:9/v1", api_key_env="HB_MISSING_KEY")
    with pytest.raises(ConfigError, match="HB_MISSING_KEY") as info:
        build_model(named, environ={"OTHER": FAKE_KEY})
    _no_key_anywhere(str(info.value))
    # compatible servers need no key by default; offline needs nothing
    assert isinstance(build_model(_openai_spec("http://127.0.0.1:9/v1"), environ={}), OpenAIChatModel)
    offline = ModelSpec(name="oracle", provider="offline", kind="oracle")
    assert isinstance(build_model(offline, environ={}), OfflineModel)


def test_identity_names_endpoint_not_secrets() -> None:
    spec = _openai_spec("http://127.0.0.1:9/v1")
    assert OpenAIChatModel(spec, FAKE_KEY).identity() == {
        "provider": "openai_compatible",
        "model": "fake-model",
        "base_url": "http://127.0.0.1:9/v1",
    }
    default_url = OpenAIChatModel(_openai_spec(None, provider="openai"), FAKE_KEY).identity()["base_url"]
    assert default_url == "https://api.openai.com/v1"
