"""The evaluation engine: resumability, ordering, rate limiting, the offline baseline."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fake_model_server import running_fake_server
from horizonbench.core.registry import register_family
from horizonbench.core.types import Completion, Message
from horizonbench.models.attempt_store import AttemptStore, attempt_key, prompt_sha256
from horizonbench.models.base import AttemptRequest, ModelCallError
from horizonbench.models.engine import estimate_tokens, evaluate
from horizonbench.models.offline import OfflineModel
from horizonbench.models.openai_chat import OpenAIChatModel
from horizonbench.models.rate_limit import BURST_SECONDS, RateLimiter
from horizonbench.schemas.config import ModelSpec
from horizonbench.schemas.tables import ATTEMPTS_SCHEMA


def _requests(n: int, family: str = "fake", samples: int = 1) -> list[AttemptRequest]:
    return [
        AttemptRequest(
            instance_id=f"inst-{i:03d}",
            family=family,
            sample=s,
            messages=(Message("system", "Plan."), Message("user", f"puzzle {i}")),
            temperature=1.0,
            top_p=0.95,
            max_tokens=32,
            seed=1000 * i + s,
            row={"answer": f"answer-{i}"},
        )
        for i in range(n)
        for s in range(samples)
    ]


def _echo(body: dict[str, Any]) -> str:
    return "reply to " + body["messages"][-1]["content"]


def _model(base_url: str) -> OpenAIChatModel:
    spec = ModelSpec(
        name="fake-gpt",
        provider="openai_compatible",
        model="fake-model",
        base_url=base_url,
        max_retries=1,
        timeout_s=10,
    )
    return OpenAIChatModel(spec, None)


# --- rows and resumability ----------------------------------------------------------------


def test_rows_match_the_attempts_schema(tmp_path: Path) -> None:
    with running_fake_server(_echo) as server, AttemptStore(tmp_path / "s.sqlite") as store:
        rows = evaluate(_requests(3), _model(server.base_url), store, limiter=None, max_concurrency=2)
    assert [list(r) for r in rows] == [ATTEMPTS_SCHEMA.names] * 3
    table = pa.Table.from_pylist(rows, schema=ATTEMPTS_SCHEMA)  # types and nullability fit
    assert table.num_rows == 3
    first = rows[0]
    assert first["response"] == "reply to puzzle 0" and first["finish_reason"] == "stop"
    assert first["model"] == "fake-gpt" and first["error"] is None
    assert first["prompt_sha256"] == prompt_sha256(_requests(1)[0].messages)


def test_second_run_reuses_everything_without_http(tmp_path: Path) -> None:
    requests = _requests(6, samples=2)
    with running_fake_server(_echo) as server:
        model = _model(server.base_url)
        with AttemptStore(tmp_path / "s.sqlite") as store:
            first = evaluate(requests, model, store, limiter=None, max_concurrency=4)
        assert len(server.requests) == 12
        # a fresh store object on the same file: what a restarted process sees
        with AttemptStore(tmp_path / "s.sqlite") as store:
            assert len(store) == 12
            second = evaluate(requests, model, store, limiter=None, max_concurrency=4)
        assert len(server.requests) == 12  # no new HTTP requests
    assert all(not r["reused"] for r in first)
    assert all(r["reused"] for r in second)
    strip = ("reused",)
    assert [{k: v for k, v in r.items() if k not in strip} for r in first] == [
        {k: v for k, v in r.items() if k not in strip} for r in second
    ]


def test_interrupted_run_resumes_only_failed_attempts(tmp_path: Path) -> None:
    requests = _requests(8)
    failing = {"puzzle 2", "puzzle 5", "puzzle 6"}

    def flaky(body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        if prompt in failing:
            raise RuntimeError("overloaded")
        return _echo(body)

    # same server (same base URL, so the same model identity), now healthy on resume
    with running_fake_server(flaky) as server, AttemptStore(tmp_path / "s.sqlite") as store:
        model = _model(server.base_url)
        first = evaluate(requests, model, store, limiter=None, max_concurrency=4)
        errors = [r["instance_id"] for r in first if r["error"]]
        assert errors == ["inst-002", "inst-005", "inst-006"]
        assert all(r["response"] is None for r in first if r["error"])
        assert len(store) == 5

        seen = len(server.requests)
        server.responder = _echo
        second = evaluate(requests, model, store, limiter=None, max_concurrency=4)
        called = sorted(r.body["messages"][-1]["content"] for r in server.requests[seen:])
        assert called == sorted(failing)  # only the failed ones hit the network
    assert [r["reused"] for r in second] == [r["error"] is None for r in first]
    assert all(r["error"] is None for r in second)
    assert [r["response"] for r in second] == [f"reply to puzzle {i}" for i in range(8)]


def test_order_matches_requests_under_concurrency(tmp_path: Path) -> None:
    jitter = random.Random(7)
    lock = threading.Lock()
    in_flight = {"now": 0, "max": 0}

    def slow(body: dict[str, Any]) -> str:
        with lock:
            in_flight["now"] += 1
            in_flight["max"] = max(in_flight["max"], in_flight["now"])
            delay = jitter.uniform(0.0, 0.03)
        time.sleep(delay)  # finish out of order
        with lock:
            in_flight["now"] -= 1
        return _echo(body)

    requests = _requests(20)
    progress: list[int] = []
    with running_fake_server(slow) as server, AttemptStore(tmp_path / "s.sqlite") as store:
        rows = evaluate(
            requests,
            _model(server.base_url),
            store,
            limiter=None,
            max_concurrency=4,
            on_progress=progress.append,
        )
    assert [r["instance_id"] for r in rows] == [r.instance_id for r in requests]
    assert [r["response"] for r in rows] == [f"reply to puzzle {i}" for i in range(20)]
    assert in_flight["max"] > 1  # the pool really ran calls concurrently
    assert progress == list(range(1, 21))


class _ExplodingModel:
    """A provider that breaks in unexpected ways, with a credential in its message."""

    name = "exploding"

    def identity(self) -> dict[str, Any]:
        return {"provider": "test"}

    def complete(self, request: AttemptRequest) -> Completion:
        if request.sample == 0:
            raise ModelCallError("gave up after retries")
        raise RuntimeError("boom; headers were Authorization: Bearer test-key-NOT-SECRET-123")


def test_unexpected_exceptions_become_error_rows(tmp_path: Path) -> None:
    with AttemptStore(tmp_path / "s.sqlite") as store:
        rows = evaluate(_requests(1, samples=2), _ExplodingModel(), store, limiter=None, max_concurrency=2)
        assert len(store) == 0
    assert rows[0]["error"] == "gave up after retries"
    assert rows[1]["error"].startswith("RuntimeError: boom")
    assert "test-key-NOT-SECRET-123" not in rows[1]["error"]
    assert all(r["response"] is None and r["input_tokens"] == 0 for r in rows)


def test_store_hits_take_no_rate_limit_budget(tmp_path: Path) -> None:
    calls: list[int] = []

    class CountingLimiter(RateLimiter):
        def acquire(self, tokens: int = 0) -> None:
            calls.append(tokens)

    requests = _requests(3)
    limiter = CountingLimiter(None, None)
    with running_fake_server(_echo) as server, AttemptStore(tmp_path / "s.sqlite") as store:
        model = _model(server.base_url)
        evaluate(requests, model, store, limiter=limiter, max_concurrency=2)
        assert sorted(calls) == sorted(estimate_tokens(r) for r in requests)
        calls.clear()
        evaluate(requests, model, store, limiter=limiter, max_concurrency=2)
        assert calls == []


# --- attempt store ----------------------------------------------------------------------------


def test_attempt_key_is_canonical_and_sensitive_to_what_matters() -> None:
    msgs = (Message("user", "hi"),)
    ident = {"provider": "x", "model": "m"}
    base = attempt_key(ident, msgs, 1.0, 0.95, 10, 0)
    assert base == attempt_key({"model": "m", "provider": "x"}, msgs, 1.0, 0.95, 10, 0)
    assert base == attempt_key(ident, [{"role": "user", "content": "hi"}], 1, 0.95, 10, 0)
    variants = [
        attempt_key({**ident, "model": "n"}, msgs, 1.0, 0.95, 10, 0),
        attempt_key(ident, (Message("user", "hi!"),), 1.0, 0.95, 10, 0),
        attempt_key(ident, msgs, 0.5, 0.95, 10, 0),
        attempt_key(ident, msgs, 1.0, 0.9, 10, 0),
        attempt_key(ident, msgs, 1.0, 0.95, 11, 0),
        attempt_key(ident, msgs, 1.0, 0.95, 10, 1),
    ]
    assert len({base, *variants}) == 7
    assert len(base) == 64


def test_store_round_trip_and_first_answer_wins(tmp_path: Path) -> None:
    c1 = Completion("one", "stop", 3, 4, 0.5, 0.01)
    with AttemptStore(tmp_path / "deep" / "s.sqlite") as store:
        assert store.get("k") is None and len(store) == 0
        store.put("k", c1)
        store.put("k", Completion("two", "length"))
        assert store.get("k") == c1
        assert "k" in store and len(store) == 1
    with pytest.raises(RuntimeError, match="closed"):
        store.get("k")


# --- rate limiter ----------------------------------------------------------------------------


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.slept = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds > 0
        self.now += seconds
        self.slept += seconds


@settings(max_examples=150, deadline=None)
@given(
    rpm=st.floats(min_value=1.0, max_value=100_000.0, allow_nan=False),
    n=st.integers(min_value=1, max_value=300),
)
def test_requests_per_minute_sleep_total(rpm: float, n: int) -> None:
    clock = FakeClock()
    limiter = RateLimiter(rpm, None, clock=clock, sleep=clock.sleep)
    for _ in range(n):
        limiter.acquire()
    burst = max(1.0, rpm * BURST_SECONDS / 60.0)
    expected = max(0.0, (n - burst) * 60.0 / rpm)
    assert limiter.request_burst == pytest.approx(burst)
    assert clock.slept == pytest.approx(expected, rel=1e-6, abs=1e-6)


@settings(max_examples=60, deadline=None)
@given(
    tpm=st.floats(min_value=100.0, max_value=1e6, allow_nan=False),
    tokens=st.lists(st.integers(min_value=0, max_value=50_000), min_size=1, max_size=40),
)
def test_tokens_per_minute_long_run_rate_holds(tpm: float, tokens: list[int]) -> None:
    """Oversized requests are admitted (never deadlock) and the long-run rate still holds."""
    clock = FakeClock()
    limiter = RateLimiter(None, tpm, clock=clock, sleep=clock.sleep)
    for t in tokens:
        limiter.acquire(t)
    burst = tpm * BURST_SECONDS / 60.0
    # everything taken beyond the initial burst must have been paid for in time
    # (the last request may leave the bucket in debt, hence "<= tokens before it")
    earned = clock.slept * tpm / 60.0
    assert burst + earned >= sum(tokens[:-1]) - 1e-6 * max(1.0, sum(tokens))


def test_both_budgets_bind_and_time_refills() -> None:
    clock = FakeClock()
    limiter = RateLimiter(60.0, 600.0, clock=clock, sleep=clock.sleep)
    # bursts: 10 requests, 100 tokens; refill: 1 request/s, 10 tokens/s
    limiter.acquire(100)
    assert clock.slept == 0.0
    limiter.acquire(50)  # token bucket empty: 50 tokens take 5 s
    assert clock.slept == pytest.approx(5.0)
    clock.now += 60.0  # idle time refills both, capped at the burst
    limiter.acquire(100)
    assert clock.slept == pytest.approx(5.0)


def test_limiter_without_budgets_never_sleeps() -> None:
    clock = FakeClock()
    limiter = RateLimiter(None, None, clock=clock, sleep=clock.sleep)
    for _ in range(1000):
        limiter.acquire(10**6)
    assert clock.slept == 0.0
    assert RateLimiter.for_spec(ModelSpec(name="o", provider="offline", kind="oracle")) is None
    with pytest.raises(ValueError):
        limiter.acquire(-1)


def test_limiter_is_thread_safe() -> None:
    """Many threads, a fake clock: every acquisition is accounted for exactly once."""
    lock = threading.Lock()
    clock = FakeClock()

    def sleep(seconds: float) -> None:
        with lock:
            clock.sleep(seconds)

    limiter = RateLimiter(600.0, None, clock=clock, sleep=sleep)
    threads = [threading.Thread(target=lambda: [limiter.acquire() for _ in range(25)]) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # 200 requests at 10/s with a burst of 100 need at least 10 s of (fake) time
    assert clock.now - 1000.0 >= 10.0 - 1e-6


# --- offline baseline ------------------------------------------------------------------------


class _FakeFamily:
    name: ClassVar[str] = "hb-test-fake"

    def offline_answer(self, row: Mapping[str, Any], kind: str, rng: np.random.Generator, eps: float) -> str:
        if kind == "oracle":
            return f"{row['answer']} is the answer"
        return f"{kind} {eps} {int(rng.integers(0, 10**9))}"


def test_offline_model_with_a_registered_family(tmp_path: Path) -> None:
    register_family(_FakeFamily.name, _FakeFamily)
    oracle = OfflineModel(ModelSpec(name="oracle", provider="offline", kind="oracle"))
    noisy = OfflineModel(ModelSpec(name="noisy", provider="offline", kind="noisy", eps=0.1))
    requests = _requests(4, family=_FakeFamily.name)

    completion = oracle.complete(requests[0])
    assert completion.text == "answer-0 is the answer"
    assert completion.finish_reason == "stop" and completion.cost_usd == 0.0
    assert (completion.input_tokens, completion.output_tokens) == (3, 4)
    assert oracle.identity() == {"provider": "offline", "kind": "oracle", "eps": 0.0}

    # seeded by the request: reproducible across calls, different across seeds
    assert noisy.complete(requests[1]).text == noisy.complete(requests[1]).text
    assert noisy.complete(requests[1]).text != noisy.complete(requests[2]).text
    assert noisy.complete(requests[1]).text.startswith("noisy 0.1 ")

    with AttemptStore(tmp_path / "s.sqlite") as store:
        rows = evaluate(requests, oracle, store, limiter=None, max_concurrency=2)
    assert [r["response"] for r in rows] == [f"answer-{i} is the answer" for i in range(4)]
    assert [r["model"] for r in rows] == ["oracle"] * 4


def test_interrupt_propagates_and_keeps_answers_so_far(tmp_path: Path) -> None:
    class Interrupted:
        name = "interrupted"

        def identity(self) -> dict[str, Any]:
            return {"provider": "test"}

        def complete(self, request: AttemptRequest) -> Completion:
            if request.instance_id == "inst-003":
                raise KeyboardInterrupt
            return Completion(f"ok {request.instance_id}", "stop")

    requests = _requests(8)
    with AttemptStore(tmp_path / "s.sqlite") as store:
        with pytest.raises(KeyboardInterrupt):
            evaluate(requests, Interrupted(), store, limiter=None, max_concurrency=1)
        keys = [
            attempt_key({"provider": "test"}, r.messages, r.temperature, r.top_p, r.max_tokens, 0)
            for r in requests
        ]
        # answers before the interrupt were committed; queued work was cancelled (the
        # worker may finish the one item it had already picked up)
        assert all(k in store for k in keys[:3])
        assert len(store) < 7
