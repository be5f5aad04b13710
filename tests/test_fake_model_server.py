"""The fake model server itself: rate limits, chaos, auth, identity, odd text, batch APIs.

Every test talks to it through the official SDKs, so what is proven here is what the
provider clients in ``horizonbench.models`` will see.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import anthropic
import openai
import pytest

from fake_model_server import FakeModelServer, request_fingerprint, running_fake_server

MESSAGES = [{"role": "user", "content": "three word prompt"}]


def _openai(server: FakeModelServer, key: str = "sk-test-key", **kw: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key=key, max_retries=kw.pop("max_retries", 0), **kw)


def _anthropic(server: FakeModelServer, key: str = "sk-ant-test", **kw: Any) -> anthropic.Anthropic:
    retries = kw.pop("max_retries", 0)
    return anthropic.Anthropic(base_url=server.root_url, api_key=key, max_retries=retries, **kw)


def _chat(client: openai.OpenAI, content: str = "three word prompt", **kw: Any) -> Any:
    return client.chat.completions.create(
        model="gpt-fake", messages=[{"role": "user", "content": content}], **kw
    )


def _message(client: anthropic.Anthropic, content: str = "three word prompt", **kw: Any) -> Any:
    kw.setdefault("max_tokens", 16)
    return client.messages.create(model="claude-fake", messages=[{"role": "user", "content": content}], **kw)


# --- rate limits ------------------------------------------------------------------------------


def test_sliding_window_refuses_the_11th_request_and_admits_after_the_window() -> None:
    with running_fake_server(lambda body: "ok", rpm=600) as server:
        client = _openai(server)
        for _ in range(10):
            _chat(client)
        with pytest.raises(openai.RateLimitError) as info:
            _chat(client)
        headers = info.value.response.headers
        wait_ms = int(headers["retry-after-ms"])
        assert 0 < wait_ms <= 1000
        assert float(headers["retry-after"]) == pytest.approx(wait_ms / 1000, abs=0.002)
        assert info.value.body["code"] == "rate_limit_exceeded"  # OpenAI shape
        time.sleep(wait_ms / 1000 + 0.02)
        _chat(client)  # the oldest requests slid out of the window
        assert server.status_counts == {200: 11, 429: 1}
        assert server.answered == 11
        times = [t for t, _ in server.answer_times]
    # never more than rpm * window / 60 = 10 admitted within any 1 s window
    assert all(sum(1 for u in times if t <= u < t + 1.0) <= 10 for t in times)


def test_sdk_waits_the_retry_after_and_anthropic_shape_without_headers() -> None:
    # 600 rpm over a 0.3 s window: 3 requests per window; the SDK sleeps retry-after and succeeds
    with running_fake_server(lambda body: "ok", rpm=600, window_s=0.3) as server:
        client = _openai(server, max_retries=3)
        started = time.monotonic()
        for _ in range(4):
            _chat(client)
        assert time.monotonic() - started < 1.5
        assert server.status_counts[429] >= 1 and server.answered == 4

    with running_fake_server(lambda body: "ok", rpm=60, retry_after_header=False) as server:
        client = _anthropic(server)
        _message(client)
        with pytest.raises(anthropic.RateLimitError) as info:
            _message(client)
    assert "retry-after" not in info.value.response.headers
    assert "retry-after-ms" not in info.value.response.headers
    assert info.value.body["error"]["type"] == "rate_limit_error"


def test_tpm_counting_requested_tokens() -> None:
    # 600 tpm over 1 s = 10 tokens: 3 prompt words + max_tokens 5 = 8 per request
    with running_fake_server(lambda body: "ok", tpm=600, tpm_counts="requested") as server:
        client = _openai(server)
        _chat(client, max_tokens=5)
        with pytest.raises(openai.RateLimitError) as info:
            _chat(client, max_tokens=5)
        assert info.value.body["type"] == "tokens"
        # the refused request took no budget: 8 + (1 word + max_completion_tokens 1) = 10 fits
        _chat(client, content="hi", max_completion_tokens=1)
        with pytest.raises(openai.RateLimitError):
            _chat(client, content="hi", max_completion_tokens=1)
        assert [tokens for _, tokens in server.answer_times] == [8, 2]


def test_tpm_counting_used_tokens_and_forced_usage() -> None:
    # "used": 3 prompt words + 1 output word = 4 per request -> two fit in 10, the third does not
    with running_fake_server(lambda body: "ok", tpm=600) as server:
        client = _openai(server)
        _chat(client, max_tokens=1000)
        _chat(client, max_tokens=1000)
        with pytest.raises(openai.RateLimitError):
            _chat(client)
        assert [tokens for _, tokens in server.answer_times] == [4, 4]

    # a responder can force the usage figure; that is what "used" counts
    def forced(body: dict[str, Any]) -> dict[str, Any]:
        return {"text": "ok", "stop": "length", "output_tokens": 7}

    with running_fake_server(forced, tpm=600) as server:
        client = _openai(server)
        completion = _chat(client)
        assert completion.usage.completion_tokens == 7
        assert completion.choices[0].finish_reason == "length"
        with pytest.raises(openai.RateLimitError):
            _chat(client)  # 10 used + 10 more > 10
        assert server.answer_times[0][1] == 10


def test_an_oversize_request_passes_an_empty_window() -> None:
    with running_fake_server(lambda body: "ok", tpm=60, tpm_counts="requested") as server:
        client = _anthropic(server)
        _message(client, max_tokens=500)  # 503 tokens > 1 per window, but the window is empty
        with pytest.raises(anthropic.RateLimitError):
            _message(client, max_tokens=1)
        assert server.status_counts == {200: 1, 429: 1}


# --- chaos and forced failures -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "error"),
    [
        ("500", openai.InternalServerError),
        ("503", openai.InternalServerError),
        ("drop", openai.APIConnectionError),
        ("malformed", json.JSONDecodeError),  # NOT an openai.APIError: the SDK lets it through
    ],
)
def test_chaos_kinds_as_seen_by_the_openai_sdk(kind: str, error: type[Exception]) -> None:
    with running_fake_server(lambda body: "ok", chaos={kind: 1.0}) as server:
        with pytest.raises(error) as info:
            _chat(_openai(server))
        if kind in ("500", "503"):
            assert isinstance(info.value, openai.APIStatusError)
            assert info.value.status_code == int(kind)
        assert server.chaos_counts == {kind: 1}
        assert server.answered == 0 and server.answers_per_prompt() == {}


@pytest.mark.parametrize(
    ("kind", "error"),
    [
        ("503", anthropic.ServiceUnavailableError),
        ("drop", anthropic.APIConnectionError),
        ("malformed", json.JSONDecodeError),
    ],
)
def test_chaos_kinds_as_seen_by_the_anthropic_sdk(kind: str, error: type[Exception]) -> None:
    with running_fake_server(lambda body: "ok", chaos={kind: 1.0}) as server, pytest.raises(error):
        _message(_anthropic(server))


def test_chaos_timeout_fires_the_client_timeout_and_does_not_hold_up_shutdown() -> None:
    started = time.monotonic()
    with running_fake_server(lambda body: "ok", chaos={"timeout": 1.0}) as server:
        with pytest.raises(openai.APITimeoutError):
            _chat(_openai(server, timeout=0.5))
        with pytest.raises(anthropic.APITimeoutError):
            _message(_anthropic(server, timeout=0.3))
    assert time.monotonic() - started < 3  # not the 30 s chaos_timeout_s
    assert server.answered == 0


def test_empty_choices_parse_but_carry_no_answer() -> None:
    with running_fake_server(lambda body: "ok", chaos={"empty_choices": 1.0}) as server:
        assert _chat(_openai(server)).choices == []
        assert _message(_anthropic(server)).content is None  # the field is missing
        assert server.answered == 0 and server.status_counts == {200: 2}


def test_chaos_is_reproducible_from_its_seed() -> None:
    def statuses() -> list[int]:
        with running_fake_server(lambda body: "ok", chaos={"500": 0.5}, chaos_seed=7) as server:
            client = _openai(server)
            seen = []
            for _ in range(12):
                try:
                    _chat(client)
                    seen.append(200)
                except openai.InternalServerError:
                    seen.append(500)
            return seen

    first = statuses()
    assert first == statuses()
    assert 200 in first and 500 in first


def test_fail_next_client_errors_and_drop_next() -> None:
    with running_fake_server(lambda body: "ok") as server:
        client = _openai(server)
        for status, error in [
            (400, openai.BadRequestError),
            (403, openai.PermissionDeniedError),
            (404, openai.NotFoundError),
        ]:
            server.fail_next(1, status)
            with pytest.raises(error):
                _chat(client)
        server.fail_next(1, 404)
        with pytest.raises(anthropic.NotFoundError) as info:
            _message(_anthropic(server))
        assert info.value.body["error"]["type"] == "not_found_error"
        server.drop_next(1)
        with pytest.raises(openai.APIConnectionError):
            _chat(client)
        assert _chat(client).choices[0].message.content == "ok"
        assert server.status_counts == {400: 1, 403: 1, 404: 2, 200: 1}


def test_latency_and_in_flight_max() -> None:
    with running_fake_server(lambda body: "ok", latency_s=0.3) as server:
        client = _openai(server)
        durations: list[float] = []

        def call() -> None:
            started = time.monotonic()
            _chat(client)
            durations.append(time.monotonic() - started)

        threads = [threading.Thread(target=call) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(durations) == 4 and min(durations) >= 0.3
        assert max(durations) < 1.0  # answered concurrently
        assert server.in_flight_max == 4


# --- auth -------------------------------------------------------------------------------------


def test_bad_key_gets_401_without_the_key_in_the_body() -> None:
    bad = "sk-wrong-secret-123"
    with running_fake_server(lambda body: "ok", valid_keys={"sk-good"}) as server:
        with pytest.raises(openai.AuthenticationError) as info:
            _chat(_openai(server, key=bad))
        assert info.value.body == {
            "message": "Incorrect API key provided",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_api_key",
        }
        with pytest.raises(anthropic.AuthenticationError) as ainfo:
            _message(_anthropic(server, key=bad))
        assert ainfo.value.body["error"] == {"type": "authentication_error", "message": "invalid x-api-key"}
        for err in (info.value, ainfo.value):
            assert bad not in err.response.text and bad not in str(err)
        # the right key works for both SDKs (Anthropic 2.x sends it as a bearer token)
        assert _chat(_openai(server, key="sk-good")).choices[0].message.content == "ok"
        assert _message(_anthropic(server, key="sk-good")).content[0].text == "ok"

    with running_fake_server(lambda body: "ok", valid_keys={"sk-good"}, echo_auth_in_errors=True) as server:
        with pytest.raises(openai.AuthenticationError) as info:
            _chat(_openai(server, key=bad))
    assert bad in info.value.response.text  # only a careless proxy echoes it


# --- identity and text ------------------------------------------------------------------------


def test_served_model_and_system_fingerprint() -> None:
    with running_fake_server(lambda body: "ok") as server:
        completion = _chat(_openai(server))
        assert (completion.model, completion.system_fingerprint) == ("gpt-fake", "fp_fake")
        assert _message(_anthropic(server)).model == "claude-fake"
    with running_fake_server(
        lambda body: "ok", served_model="gpt-fake-2025-01-01", system_fingerprint="fp_abc"
    ) as server:
        completion = _chat(_openai(server))
        assert (completion.model, completion.system_fingerprint) == ("gpt-fake-2025-01-01", "fp_abc")
        assert _message(_anthropic(server)).model == "gpt-fake-2025-01-01"
    with running_fake_server(lambda body: "ok", system_fingerprint=None) as server:
        assert _chat(_openai(server)).system_fingerprint is None


def test_lone_surrogates_nul_and_huge_text_round_trip() -> None:
    odd = "a\ud800b\x00c\udfff"
    big = "word " * 2_000_000  # 10 MB
    replies = iter([odd, odd, odd, big])
    with running_fake_server(lambda body: next(replies)) as server:
        client = _openai(server)
        raw = client.chat.completions.with_raw_response.create(model="m", messages=MESSAGES)
        assert b"a\\ud800b\\u0000c\\udfff" in raw.http_response.content  # escaped on the wire
        assert raw.parse().choices[0].message.content == odd
        assert _chat(client).choices[0].message.content == odd
        assert _message(_anthropic(server)).content[0].text == odd
        completion = _chat(client)
        assert completion.choices[0].message.content == big
        assert completion.usage.completion_tokens == 2_000_000


# --- counters -----------------------------------------------------------------------------


def test_answers_per_prompt_uses_the_fingerprint_and_the_attempt_header() -> None:
    with running_fake_server(lambda body: "ok") as server:
        client = _openai(server)
        _chat(client)
        _chat(client)
        _chat(client, extra_headers={"x-hb-attempt": "1"})
        _chat(client, content="another prompt", user="inst-9")
        counts = server.answers_per_prompt()
        plain = request_fingerprint(server.requests[0].body)
        assert counts[plain] == 2
        assert counts[request_fingerprint(server.requests[2].body, {"x-hb-attempt": "1"})] == 1
        assert sorted(counts.values()) == [1, 1, 2]
        assert server.repeated_prompts() == {plain: 2}


def test_unknown_routes_are_404() -> None:
    with running_fake_server(lambda body: "ok") as server:
        server.fail_next(1, 500)  # unknown routes do not consume forced failures
        with pytest.raises(openai.NotFoundError):
            _openai(server).models.list()
        with pytest.raises(openai.InternalServerError):
            _chat(_openai(server))
        assert server.status_counts == {404: 1, 500: 1}
        assert [(r.method, r.path) for r in server.requests] == [
            ("GET", "/v1/models"),
            ("POST", "/v1/chat/completions"),
        ]


# --- batches ----------------------------------------------------------------------------------


def _jsonl_line(custom_id: str, content: str) -> str:
    body = {"model": "gpt-fake", "messages": [{"role": "user", "content": content}], "max_tokens": 9}
    return json.dumps({"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body})


def _wait_openai(client: openai.OpenAI, batch_id: str) -> Any:
    deadline = time.monotonic() + 5
    while True:
        batch = client.batches.retrieve(batch_id)
        if batch.status in ("completed", "failed", "cancelled", "expired") or time.monotonic() > deadline:
            return batch
        time.sleep(0.05)


def test_openai_batch_create_poll_results_and_failed_lines() -> None:
    data = "\n".join(_jsonl_line(cid, f"prompt {cid}") for cid in ("a", "b", "c")).encode()
    with running_fake_server(
        lambda body: body["messages"][0]["content"].upper(), batch_fail_ids={"b"}, rpm=60
    ) as server:
        client = _openai(server)
        uploaded = client.files.create(file=("in.jsonl", data), purpose="batch")
        assert (uploaded.purpose, uploaded.bytes, uploaded.filename) == ("batch", len(data), "in.jsonl")
        batch = client.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        assert batch.status == "validating" and batch.request_counts.total == 3
        assert client.batches.retrieve(batch.id).status == "in_progress"
        assert server.batch_lines_answered == 0
        done = _wait_openai(client, batch.id)
        assert done.status == "completed"
        assert (done.request_counts.completed, done.request_counts.failed) == (2, 1)

        out = [json.loads(x) for x in client.files.content(done.output_file_id).text.splitlines()]
        assert sorted(line["custom_id"] for line in out) == ["a", "c"]
        for line in out:
            assert line["error"] is None and line["response"]["status_code"] == 200
            assert line["response"]["body"]["object"] == "chat.completion"
        contents = {x["custom_id"]: x["response"]["body"]["choices"][0]["message"]["content"] for x in out}
        assert contents == {"a": "PROMPT A", "c": "PROMPT C"}
        (err,) = [json.loads(x) for x in client.files.content(done.error_file_id).text.splitlines()]
        assert err["custom_id"] == "b" and err["response"]["status_code"] == 500

        # a resumed client polls the existing batch: nothing is submitted or answered again
        again = _openai(server).batches.retrieve(batch.id)
        assert again.output_file_id == done.output_file_id
        assert server.batches_created == 1 and server.batch_polls[batch.id] >= 3
        assert server.batch_submissions[0].custom_ids == ("a", "b", "c")
        assert server.batch_lines_answered == 2
        assert sorted(server.answers_per_prompt().values()) == [1, 1]
        # batch traffic is not rate limited and takes no sync budget (rpm=60 -> 1 per second)
        assert _chat(client).choices[0].message.content == "THREE WORD PROMPT"
        assert 429 not in server.status_counts


def test_openai_batch_cancel_and_validation_failure() -> None:
    with running_fake_server(lambda body: "ok", batch_fail_shape="error", batch_fail_ids={"x"}) as server:
        client = _openai(server)
        one = client.files.create(file=("a.jsonl", _jsonl_line("x", "hello").encode()), purpose="batch")
        batch = client.batches.create(
            input_file_id=one.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        assert client.batches.cancel(batch.id).status == "cancelling"
        cancelled = client.batches.retrieve(batch.id)
        assert cancelled.status == "cancelled" and cancelled.output_file_id is None

        twice = (_jsonl_line("x", "hello") + "\n" + _jsonl_line("x", "again")).encode()
        dup = client.files.create(file=("d.jsonl", twice), purpose="batch")
        bad = client.batches.create(
            input_file_id=dup.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        failed = _wait_openai(client, bad.id)
        assert failed.status == "failed"
        assert failed.errors.data[0].code == "duplicate_custom_id"

        # the other failed-line shape: response null, error {...}; no output file at all
        ok = client.files.create(file=("o.jsonl", _jsonl_line("x", "hi").encode()), purpose="batch")
        done = _wait_openai(
            client,
            client.batches.create(
                input_file_id=ok.id, endpoint="/v1/chat/completions", completion_window="24h"
            ).id,
        )
        assert done.output_file_id is None
        (line,) = [json.loads(x) for x in client.files.content(done.error_file_id).text.splitlines()]
        assert line["response"] is None and line["error"]["code"] == "server_error"
        assert server.batch_lines_answered == 0 and server.batches_created == 3


def _wait_anthropic(client: anthropic.Anthropic, batch_id: str) -> Any:
    deadline = time.monotonic() + 5
    while True:
        batch = client.messages.batches.retrieve(batch_id)
        if batch.processing_status == "ended" or time.monotonic() > deadline:
            return batch
        time.sleep(0.05)


def test_anthropic_batch_create_poll_results_and_cancel() -> None:
    def params(content: str) -> dict[str, Any]:
        return {"model": "claude-fake", "max_tokens": 9, "messages": [{"role": "user", "content": content}]}

    with running_fake_server(
        lambda body: ("cut", "length"), batch_fail_ids={"bad"}, served_model="claude-served"
    ) as server:
        client = _anthropic(server)
        batch = client.messages.batches.create(
            requests=[
                {"custom_id": "good", "params": params("first prompt")},
                {"custom_id": "bad", "params": params("second prompt")},
            ]
        )
        assert batch.processing_status == "in_progress" and batch.results_url is None
        assert batch.request_counts.processing == 2
        done = _wait_anthropic(client, batch.id)
        assert (done.request_counts.succeeded, done.request_counts.errored) == (1, 1)
        assert done.results_url and done.ended_at is not None
        results = {r.custom_id: r.result for r in client.messages.batches.results(batch.id)}
        assert results["good"].type == "succeeded"
        message = results["good"].message
        assert (message.content[0].text, message.stop_reason, message.model) == (
            "cut",
            "max_tokens",
            "claude-served",
        )
        assert results["bad"].type == "errored" and results["bad"].error.error.type == "api_error"
        # results again: still answered once
        list(client.messages.batches.results(batch.id))
        assert server.batch_lines_answered == 1 and server.batches_created == 1

        other = client.messages.batches.create(requests=[{"custom_id": "c", "params": params("third")}])
        assert client.messages.batches.cancel(other.id).processing_status == "canceling"
        ended = client.messages.batches.retrieve(other.id)
        assert ended.processing_status == "ended" and ended.request_counts.canceled == 1
        (result,) = list(client.messages.batches.results(other.id))
        assert result.result.type == "canceled"
        assert server.batch_lines_answered == 1
        assert [s.provider for s in server.batch_submissions] == ["anthropic", "anthropic"]
