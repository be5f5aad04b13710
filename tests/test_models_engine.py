"""The evaluation engine: resumability, ordering, retries, limits, stops, reuse, budget,
multi-turn conversations and interrupts, against real SDKs over real HTTP."""

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

from engine_helpers import FAST_RETRY, rows_for, runner_for
from fake_model_server import running_fake_server
from horizonbench.core.registry import register_family
from horizonbench.core.types import Completion, Message
from horizonbench.models import failures
from horizonbench.models.attempt_store import AttemptStore, attempt_key, prompt_sha256
from horizonbench.models.base import AttemptRequest
from horizonbench.models.budget import Budget
from horizonbench.models.engine import (
    Evaluation,
    EvaluationInterrupted,
    ModelRunner,
    attempt_row,
    converse,
    submit_attempts,
)
from horizonbench.models.offline import OfflineModel
from horizonbench.models.openai_chat import OpenAIChatModel
from horizonbench.models.rate_limit import RateLimiter
from horizonbench.models.retry import RetryPolicy
from horizonbench.schemas.config import ModelSpec
from horizonbench.schemas.tables import ATTEMPTS_SCHEMA


def _requests(n: int, family: str = "fake", samples: int = 1, max_tokens: int = 32) -> list[AttemptRequest]:
    return [
        AttemptRequest(
            instance_id=f"inst-{i:03d}",
            family=family,
            sample=s,
            messages=(Message("system", "Plan."), Message("user", f"puzzle {i}")),
            temperature=1.0,
            top_p=0.95,
            max_tokens=max_tokens,
            seed=1000 * i + s,
            row={"answer": f"answer-{i}"},
        )
        for i in range(n)
        for s in range(samples)
    ]


def _echo(body: dict[str, Any]) -> str:
    return "reply to " + body["messages"][-1]["content"]


def _model(base_url: str, name: str = "fake-gpt", key: str | None = None, **kw: Any) -> OpenAIChatModel:
    spec = ModelSpec(
        name=name,
        provider="openai_compatible",
        model=kw.pop("model", "fake-model"),
        base_url=base_url,
        timeout_s=kw.pop("timeout_s", 10),
        **kw,
    )
    return OpenAIChatModel(spec, key)


# --- rows and resumability ----------------------------------------------------------------


def test_rows_match_the_attempts_schema_and_record_the_served_model(tmp_path: Path) -> None:
    with (
        running_fake_server(
            _echo, served_model="fake-model-2026-01-01", system_fingerprint="fp_42"
        ) as server,
        AttemptStore(tmp_path / "s.sqlite") as store,
    ):
        rows = rows_for(_requests(3), _model(server.base_url), store, max_concurrency=2)
    assert [list(r) for r in rows] == [ATTEMPTS_SCHEMA.names] * 3
    table = pa.Table.from_pylist(rows, schema=ATTEMPTS_SCHEMA)  # types and nullability fit
    assert table.num_rows == 3
    first = rows[0]
    assert first["response"] == "reply to puzzle 0" and first["finish_reason"] == "stop"
    assert first["model"] == "fake-gpt" and first["error"] is None and first["error_class"] is None
    assert first["prompt_sha256"] == prompt_sha256(_requests(1)[0].messages)
    assert (first["served_model"], first["system_fingerprint"]) == ("fake-model-2026-01-01", "fp_42")
    assert first["tries"] == 1 and first["turn"] == 0


def test_second_run_reuses_everything_without_http(tmp_path: Path) -> None:
    requests = _requests(6, samples=2)
    with running_fake_server(_echo) as server:
        model = _model(server.base_url)
        with AttemptStore(tmp_path / "s.sqlite") as store:
            first = rows_for(requests, model, store, max_concurrency=4, run_tag="r1")
        assert len(server.requests) == 12
        # a fresh store object on the same file: what a restarted process sees
        with AttemptStore(tmp_path / "s.sqlite") as store:
            assert len(store) == 12
            second = rows_for(requests, model, store, max_concurrency=4, run_tag="r1")
        assert len(server.requests) == 12  # no new HTTP requests
    assert all(not r["reused"] for r in first)
    assert all(r["reused"] and r["tries"] == 0 for r in second)
    strip = ("reused", "tries", "latency_s")
    assert [{k: v for k, v in r.items() if k not in strip} for r in first] == [
        {k: v for k, v in r.items() if k not in strip} for r in second
    ]


def test_failed_attempts_are_rows_and_only_they_are_retried_next_run(tmp_path: Path) -> None:
    requests = _requests(8)
    failing = {"puzzle 2", "puzzle 5", "puzzle 6"}

    def flaky(body: dict[str, Any]) -> str:
        if body["messages"][-1]["content"] in failing:
            raise RuntimeError("overloaded")
        return _echo(body)

    with running_fake_server(flaky) as server, AttemptStore(tmp_path / "s.sqlite") as store:
        model = _model(server.base_url)
        first = rows_for(requests, model, store, max_concurrency=4)
        assert [r["instance_id"] for r in first if r["error"]] == ["inst-002", "inst-005", "inst-006"]
        for row in first:
            if row["error"]:
                assert row["response"] is None and row["error_class"] == "server_error"
                assert row["tries"] == FAST_RETRY.max_retries + 1
        assert len(store) == 5
        seen = len(server.requests)
        server.responder = _echo
        second = rows_for(requests, model, store, max_concurrency=4)
        called = sorted(r.body["messages"][-1]["content"] for r in server.requests[seen:])
        assert called == sorted(failing)  # only the failed ones hit the network
    assert [r["reused"] for r in second] == [r["error"] is None for r in first]
    assert [r["response"] for r in second] == [f"reply to puzzle {i}" for i in range(8)]


def test_order_matches_requests_under_concurrency(tmp_path: Path) -> None:
    jitter = random.Random(7)
    lock = threading.Lock()

    def slow(body: dict[str, Any]) -> str:
        with lock:
            delay = jitter.uniform(0.0, 0.03)
        time.sleep(delay)  # finish out of order
        return _echo(body)

    requests = _requests(20)
    progress: list[int] = []
    with running_fake_server(slow) as server, AttemptStore(tmp_path / "s.sqlite") as store:
        rows = rows_for(
            requests, _model(server.base_url), store, max_concurrency=4, on_progress=progress.append
        )
        assert server.in_flight_max > 1  # the pool really ran calls concurrently
    assert [r["instance_id"] for r in rows] == [r.instance_id for r in requests]
    assert [r["response"] for r in rows] == [f"reply to puzzle {i}" for i in range(20)]
    assert progress == list(range(1, 21))


class _ExplodingModel:
    """A provider that breaks in unexpected ways, with a credential in its message."""

    name = "exploding"

    def identity(self) -> dict[str, Any]:
        return {"provider": "test"}

    def complete(self, request: AttemptRequest) -> Completion:
        if request.sample == 0:
            raise failures.CallFailure(failures.BAD_REQUEST, "HTTP 400: prompt too long", status=400)
        raise RuntimeError("boom; headers were Authorization: Bearer test-key-NOT-SECRET-123")


def test_unexpected_exceptions_become_classified_rows_without_secrets(tmp_path: Path) -> None:
    with AttemptStore(tmp_path / "s.sqlite") as store:
        rows = rows_for(_requests(1, samples=2), _ExplodingModel(), store, max_concurrency=2)
        assert len(store) == 0
    assert rows[0]["error"] == "HTTP 400: prompt too long" and rows[0]["error_class"] == "bad_request"
    assert rows[0]["tries"] == 1  # a 400 is never retried
    assert rows[1]["error"].startswith("RuntimeError: boom") and rows[1]["error_class"] == "other"
    assert "test-key-NOT-SECRET-123" not in rows[1]["error"]
    assert all(r["response"] is None and r["input_tokens"] == 0 for r in rows)


def test_store_hits_take_no_rate_limit_budget(tmp_path: Path) -> None:
    taken: list[float] = []

    class CountingLimiter(RateLimiter):
        def acquire(
            self, tokens: float = 0.0, cancel: threading.Event | None = None, variance: float = 0.0
        ) -> Any:
            taken.append(tokens)
            return super().acquire(tokens, cancel, variance)

    requests = _requests(3)
    limiter = CountingLimiter(None, None)
    with running_fake_server(_echo) as server, AttemptStore(tmp_path / "s.sqlite") as store:
        model = _model(server.base_url)
        rows_for(requests, model, store, limiter=limiter, max_concurrency=2)
        assert len(taken) == 3
        taken.clear()
        rows_for(requests, model, store, limiter=limiter, max_concurrency=2)
        assert taken == []


# --- the retry layer ----------------------------------------------------------------------


def test_retries_pass_the_limiter_and_honour_retry_after(tmp_path: Path) -> None:
    """Every try is admitted by the limiter; a 429's hint pauses everyone."""
    admitted: list[float] = []

    class Recording(RateLimiter):
        def acquire(
            self, tokens: float = 0.0, cancel: threading.Event | None = None, variance: float = 0.0
        ) -> Any:
            got = super().acquire(tokens, cancel, variance)
            admitted.append(time.monotonic())
            return got

    with running_fake_server(_echo) as server, AttemptStore(tmp_path / "s.sqlite") as store:
        server.fail_next(2, status=429)  # the fake sends retry-after-ms: 1
        rows = rows_for(_requests(1), _model(server.base_url), store, limiter=Recording(6000, None))
        assert len(server.requests) == 3
    assert len(admitted) == 3  # both retries went through the limiter
    assert rows[0]["response"] == "reply to puzzle 0" and rows[0]["tries"] == 3


def test_a_retry_after_beyond_the_cap_ends_the_attempt_at_once(tmp_path: Path) -> None:
    with (
        running_fake_server(_echo, rpm=1, window_s=60.0) as server,  # one request per minute
        AttemptStore(tmp_path / "s.sqlite") as store,
    ):
        policy = RetryPolicy(max_retries=5, base_s=0.01, max_backoff_s=0.05, retry_after_cap_s=2.0)
        start = time.monotonic()
        rows = rows_for(_requests(2), _model(server.base_url), store, retry=policy, max_concurrency=1)
        elapsed = time.monotonic() - start
    assert rows[0]["error"] is None
    assert rows[1]["error_class"] == "retry_after_too_long" and "retry_after_cap_s" in rows[1]["error"]
    assert elapsed < 10  # liveness: nobody sat out the minute


def test_chaos_every_attempt_answered_or_classified(tmp_path: Path) -> None:
    chaos = {"500": 0.1, "503": 0.1, "timeout": 0.05, "drop": 0.1, "malformed": 0.1, "empty_choices": 0.05}
    requests = _requests(60)
    with (
        running_fake_server(_echo, chaos=chaos, chaos_seed=3, chaos_timeout_s=5.0) as server,
        AttemptStore(tmp_path / "s.sqlite") as store,
    ):
        policy = RetryPolicy(max_retries=8, base_s=0.01, max_backoff_s=0.05)
        model = _model(server.base_url, timeout_s=0.5)
        rows = rows_for(requests, model, store, retry=policy, max_concurrency=8)
        kinds = server.chaos_counts
    assert all(kinds.get(k, 0) > 0 for k in ("500", "503", "drop", "malformed", "timeout")), kinds
    for row in rows:
        assert (row["response"] is not None) != (row["error_class"] is not None)
        if row["error_class"] is not None:
            assert row["error_class"] in failures.RETRYABLE
    # with 8 retries against ~50% chaos nearly everything gets through
    assert sum(r["response"] is not None for r in rows) >= 55
    assert {r["response"] for r in rows if r["response"]} <= {f"reply to puzzle {i}" for i in range(60)}


def test_a_401_model_stops_after_a_few_calls_while_another_completes(tmp_path: Path) -> None:
    good_key, bad_key = "good-key-NOT-SECRET", "bad-key-NOT-SECRET"
    events: list[str] = []
    with (
        running_fake_server(_echo, valid_keys={good_key}) as server,
        AttemptStore(tmp_path / "s.sqlite") as store,
    ):
        bad = runner_for(
            _model(server.base_url, name="bad", key=bad_key), store, max_concurrency=8, on_event=events.append
        )
        good = runner_for(_model(server.base_url, name="good", key=good_key), store, max_concurrency=8)
        evaluation = Evaluation()
        plans = {r.name: submit_attempts(evaluation, r, _requests(40)) for r in (bad, good)}
        evaluation.run([(name, plan[1]) for name, plan in plans.items()], 80)
        statuses = server.status_counts
    bad_rows = [f.result() for f in plans["bad"][1]]
    good_rows = [f.result() for f in plans["good"][1]]
    assert statuses.get(401) == 3  # the probe: one call at a time until an answer
    assert all(o.answered for o in good_rows)
    classes = sorted(o.error_class for o in bad_rows)
    assert classes == ["auth"] * 3 + ["model_stopped"] * 37
    assert len(events) == 1 and "'bad'" in events[0] and "HTTP 401" in events[0]
    assert bad_key not in events[0]


def test_an_answer_resets_the_401_streak_so_alternating_failures_never_stop_a_model(tmp_path: Path) -> None:
    """``stop_after_errors`` counts *consecutive* 401/403/404 answers: 401, 200, 401,
    200, ... over real HTTP never reaches three in a row, so the model is never stopped
    and every other attempt is answered. Then three 401s in a row do stop it, and the
    next attempt ends as ``model_stopped`` without a call."""
    events: list[str] = []
    with running_fake_server(_echo) as server, AttemptStore(tmp_path / "s.sqlite") as store:
        runner = runner_for(_model(server.base_url), store, stop_after_errors=3, on_event=events.append)
        requests = _requests(24)
        outcomes = []
        for i, request in enumerate(requests[:20]):
            if i % 2 == 0:
                server.fail_next(1, 401)
            outcomes.append(runner.attempt(request))
        assert runner.stopped is None and events == []
        assert [o.error_class for o in outcomes] == ["auth", None] * 10
        assert server.status_counts == {401: 10, 200: 10}
        server.fail_next(3, 401)
        last = [runner.attempt(r) for r in requests[20:]]
        assert [o.error_class for o in last] == ["auth"] * 3 + ["model_stopped"]
        assert server.status_counts == {401: 13, 200: 10}
    assert len(events) == 1 and "3 consecutive HTTP 401" in events[0]


# --- identity and reuse ---------------------------------------------------------------------


def test_reuse_run_store_never(tmp_path: Path) -> None:
    requests = _requests(2)
    with running_fake_server(_echo) as server, AttemptStore(tmp_path / "shared.sqlite") as store:
        model = _model(server.base_url)
        rows_for(requests, model, store, run_tag="night-1")
        assert len(server.requests) == 2
        rows_for(requests, model, store, run_tag="night-1", reuse="run")  # resume: free
        assert len(server.requests) == 2
        again = rows_for(requests, model, store, run_tag="night-2", reuse="run")  # a new night asks again
        assert len(server.requests) == 4 and not any(r["reused"] for r in again)
        shared = rows_for(requests, model, store, run_tag="night-3", reuse="store")  # pinned: share
        assert len(server.requests) == 4 and all(r["reused"] for r in shared)
        rows_for(requests, model, store, run_tag="night-2", reuse="never")
        assert len(server.requests) == 6


def test_attempt_key_is_canonical_and_sensitive_to_what_matters() -> None:
    msgs = (Message("user", "hi"),)
    ident = {"provider": "x", "model": "m", "base_url": "u"}
    base = attempt_key(ident, msgs, 1.0, 0.95, 10, 0)
    assert base == attempt_key({"base_url": "u", "model": "m", "provider": "x"}, msgs, 1.0, 0.95, 10, 0)
    assert base == attempt_key(ident, [{"role": "user", "content": "hi"}], 1, 0.95, 10, 0)
    variants = [
        attempt_key({**ident, "model": "n"}, msgs, 1.0, 0.95, 10, 0),
        attempt_key({**ident, "provider": "y"}, msgs, 1.0, 0.95, 10, 0),
        attempt_key({**ident, "base_url": "v"}, msgs, 1.0, 0.95, 10, 0),
        attempt_key(ident, (Message("user", "hi!"),), 1.0, 0.95, 10, 0),
        attempt_key(ident, (Message("system", "s"), Message("user", "hi")), 1.0, 0.95, 10, 0),
        attempt_key(ident, msgs, 0.5, 0.95, 10, 0),
        attempt_key(ident, msgs, 1.0, 0.9, 10, 0),
        attempt_key(ident, msgs, 1.0, 0.95, 11, 0),
        attempt_key(ident, msgs, 1.0, 0.95, 10, 1),
    ]
    assert len({base, *variants}) == 10
    assert len(base) == 64


def test_store_round_trip_and_first_answer_wins(tmp_path: Path) -> None:
    c1 = Completion("one", "stop", 3, 4, 0.5, 0.01, "m-1", "fp")
    with AttemptStore(tmp_path / "deep" / "s.sqlite") as store:
        assert store.get("k") is None and len(store) == 0
        store.put("k", c1, "tag")
        store.put("k", Completion("two", "length"))
        assert store.get("k") == c1 and store.get("k", "tag") == c1 and store.get("k", "other") is None
        assert "k" in store and len(store) == 1
    with pytest.raises(RuntimeError, match="closed"):
        store.get("k")


@pytest.mark.parametrize("text", ["lone \ud800 surrogate", "nul \x00 inside", "x" * 10_000_000])
def test_any_provider_text_is_stored_tabled_and_scored(tmp_path: Path, text: str) -> None:
    from horizonbench.core.registry import get_family

    with running_fake_server(lambda body: text) as server, AttemptStore(tmp_path / "s.sqlite") as store:
        rows = rows_for(_requests(1), _model(server.base_url), store)
        again = rows_for(_requests(1), _model(server.base_url), store)
    assert rows[0]["error"] is None and again[0]["reused"]
    assert rows[0]["response"] == text.replace("\ud800", "\ufffd")
    pa.Table.from_pylist(rows, schema=ATTEMPTS_SCHEMA)
    maze = get_family("maze")
    assert maze.parse_answer(rows[0]["response"]).plan is None  # parsed, not raised


# --- budget -------------------------------------------------------------------------------


def test_budget_stops_new_calls_and_keeps_what_was_answered(tmp_path: Path) -> None:
    # about 5 words in, 4 words out per call at $1e6/Mtok in and out: ~9 USD a call
    with running_fake_server(_echo) as server, AttemptStore(tmp_path / "s.sqlite") as store:
        spec_model = _model(server.base_url, input_cost_per_mtok=1e6, output_cost_per_mtok=1e6)
        budget = Budget(40.0)
        rows = rows_for(
            _requests(10, max_tokens=4), spec_model, store, budget=budget, price=spec_model.spec.price()
        )
        calls = len(server.requests)
    answered = [r for r in rows if r["response"] is not None]
    assert 1 <= len(answered) < 10 and calls == len(answered)
    assert {r["error_class"] for r in rows if r["response"] is None} == {"budget"}
    assert budget.spent_usd <= 40.0 and budget.exhausted
    assert sum(r["cost_usd"] for r in answered) == pytest.approx(budget.spent_usd)


# --- multi-turn conversations ---------------------------------------------------------------


class _Guessing:
    """Ask, then follow up with the last answer quoted, for ``turns`` turns."""

    def __init__(self, i: int, turns: int = 3) -> None:
        self.i, self.turns = i, turns
        self.messages: list[Message] = [Message("user", f"game {i} turn 0")]

    def _request(self) -> AttemptRequest:
        return AttemptRequest(
            instance_id=f"game-{self.i}",
            family="fake",
            sample=0,
            messages=tuple(self.messages),
            temperature=1.0,
            top_p=1.0,
            max_tokens=16,
            seed=self.i,
            turn=(len(self.messages) - 1) // 2,
        )

    def first(self) -> AttemptRequest:
        return self._request()

    def next(self, completion: Completion) -> AttemptRequest | None:
        turn = (len(self.messages) + 1) // 2
        if turn >= self.turns:
            return None
        self.messages += [
            Message("assistant", completion.text),
            Message("user", f"game {self.i} turn {turn}"),
        ]
        return self._request()


def test_conversations_resume_turn_by_turn(tmp_path: Path) -> None:
    fail_on = {"game 1 turn 2"}

    def responder(body: dict[str, Any]) -> str:
        last = body["messages"][-1]["content"]
        if last in fail_on:
            raise RuntimeError("down")
        return f"saw {len(body['messages'])} messages, last {last}"

    with running_fake_server(responder) as server, AttemptStore(tmp_path / "s.sqlite") as store:
        runner = runner_for(_model(server.base_url), store, max_concurrency=3)
        first = converse([_Guessing(i) for i in range(3)], runner)
        assert [len(t) for t in first] == [3, 3, 3]
        assert first[1][2].error_class == "server_error"  # the failed turn ends that conversation
        assert first[0][2].completion.text == "saw 5 messages, last game 0 turn 2"
        calls = len(server.requests)
        fail_on.clear()
        runner = runner_for(_model(server.base_url), store, max_concurrency=3)
        second = converse([_Guessing(i) for i in range(3)], runner)
        assert len(server.requests) == calls + 1  # only the missing turn was paid for
    assert [[o.reused for o in t] for t in second] == [[True] * 3, [True, True, False], [True] * 3]
    assert [attempt_row(o, "m")["turn"] for o in second[2]] == [0, 1, 2]


# --- interrupts ---------------------------------------------------------------------------


def test_cancel_stops_queued_threads_and_keeps_answers_in_flight(tmp_path: Path) -> None:
    """Threads waiting in the limiter send nothing after the cancel; answers that were in
    flight arrive within the grace period and are stored."""
    with (
        running_fake_server(_echo, latency_s=0.3) as server,
        AttemptStore(tmp_path / "s.sqlite") as store,
    ):
        runner = runner_for(
            _model(server.base_url), store, limiter=RateLimiter(600, None), max_concurrency=16
        )
        evaluation = Evaluation(grace_s=5.0, cancel=runner.cancel)
        _, futures, _ = submit_attempts(evaluation, runner, _requests(100))

        def stop_soon() -> None:
            while server.answered < 15:
                time.sleep(0.01)
            evaluation.stop()

        threading.Thread(target=stop_soon, daemon=True).start()
        with pytest.raises(EvaluationInterrupted) as info:
            evaluation.run([(runner.name, futures)], 100)
        sent = len(server.requests)
        time.sleep(0.5)
        assert len(server.requests) == sent  # nothing sent after the run returned
        assert len(store) == server.answered  # every answer the server sent was stored
        assert info.value.done == len(store) and info.value.total == 100
    assert sent < 40  # the limiter held the rest back (10 per second)


# --- offline baseline -----------------------------------------------------------------------


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
    assert noisy.complete(requests[1]).text == noisy.complete(requests[1]).text
    assert noisy.complete(requests[1]).text != noisy.complete(requests[2]).text

    with AttemptStore(tmp_path / "s.sqlite") as store:
        rows = rows_for(requests, oracle, store, max_concurrency=2)
    assert [r["response"] for r in rows] == [f"answer-{i} is the answer" for i in range(4)]


def test_runner_rejects_bad_settings(tmp_path: Path) -> None:
    with AttemptStore(tmp_path / "s.sqlite") as store:
        with pytest.raises(ValueError, match="max_concurrency"):
            ModelRunner(_ExplodingModel(), store, max_concurrency=0)
        with pytest.raises(ValueError, match="reuse"):
            ModelRunner(_ExplodingModel(), store, reuse="sometimes")


def test_a_slow_model_does_not_hold_up_the_others(tmp_path: Path) -> None:
    """Models run side by side: a model limited to one call a second does not delay a
    fast one (judged by the order of arrival at the server, not by timing)."""
    with running_fake_server(_echo) as server, AttemptStore(tmp_path / "s.sqlite") as store:
        slow = runner_for(
            _model(server.base_url, name="slow", model="slow-model"), store, limiter=RateLimiter(60, None)
        )
        fast = runner_for(_model(server.base_url, name="fast", model="fast-model"), store, max_concurrency=4)
        evaluation = Evaluation()
        plans = [(r.name, submit_attempts(evaluation, r, _requests(n))) for r, n in ((slow, 4), (fast, 30))]
        evaluation.run([(name, plan[1]) for name, plan in plans], 34)
        order = [r.body["model"] for r in server.requests]
    assert order.count("fast-model") == 30 and order.count("slow-model") == 4
    second_slow = [i for i, m in enumerate(order) if m == "slow-model"][1]
    assert all(i < second_slow for i, m in enumerate(order) if m == "fast-model")


class _SlowCounting:
    """Answers after 20 ms and counts its calls (thread-safe)."""

    name = "slow"

    def __init__(self) -> None:
        self.calls = 0
        self._lock = threading.Lock()

    def identity(self) -> dict[str, Any]:
        return {"provider": "test", "model": "slow"}

    def complete(self, request: AttemptRequest) -> Completion:
        with self._lock:
            self.calls += 1
        time.sleep(0.02)
        return Completion(text="ok", finish_reason="stop")


def test_an_interrupt_before_the_wait_still_stops_every_thread(tmp_path):
    """A Ctrl-C that lands after the attempts were submitted but before Evaluation.run
    waits (a loaded machine can be slow to get there) must stop the pools too; without
    the guard the threads would send every remaining attempt before the process exits."""
    model = _SlowCounting()
    with AttemptStore(tmp_path / "s.sqlite") as store:
        runner = runner_for(model, store, max_concurrency=2)
        evaluation = Evaluation(grace_s=1.0)
        with pytest.raises(EvaluationInterrupted) as info:
            with evaluation.guard(200):
                submit_attempts(evaluation, runner, _requests(200))
                time.sleep(0.2)
                raise KeyboardInterrupt
        calls_then = model.calls
        time.sleep(0.3)
        assert model.calls == calls_then  # nothing was sent after the interrupt
        assert calls_then < 60
        assert 0 < info.value.done <= calls_then
        assert info.value.total == 200


class _FullDiskStore(AttemptStore):
    """A store whose disk fills after a few answers (sqlite's own error for it)."""

    def __init__(self, path: Path, room: int) -> None:
        super().__init__(path)
        self.room = room

    def put(self, *args: Any, **kwargs: Any) -> None:
        if self.room <= 0:
            import sqlite3

            raise sqlite3.OperationalError("database or disk is full")
        self.room -= 1
        super().put(*args, **kwargs)


def test_a_broken_store_surfaces_as_itself_not_as_an_interrupt(tmp_path: Path) -> None:
    """A disk that fills mid-run is an error to name, not Ctrl-C: reported as an interrupt
    it said 'rerun the same command to resume' and the run ended cancelled."""
    import sqlite3

    with running_fake_server(_echo) as server, _FullDiskStore(tmp_path / "s.sqlite", room=3) as store:
        with pytest.raises(sqlite3.OperationalError, match="disk is full") as info:
            rows_for(_requests(20), _model(server.base_url), store, max_concurrency=2)
        assert not isinstance(info.value, KeyboardInterrupt)
        assert len(store) == 3  # the answers stored before the disk filled stay
