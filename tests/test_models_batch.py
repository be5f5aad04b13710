"""Provider batch jobs (models/batch.py) with the real SDKs against the fake server.

Every test runs for both providers: OpenAI Batch (files upload + /v1/batches) and
Anthropic Message Batches. Batches end after ~0.1 s and are polled every 0.02 s.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from engine_helpers import runner_for
from fake_model_server import FakeModelServer, running_fake_server
from horizonbench.core.types import Message
from horizonbench.models.anthropic_messages import AnthropicModel
from horizonbench.models.attempt_store import AttemptStore
from horizonbench.models.base import AttemptRequest
from horizonbench.models.batch import submit_batch_job
from horizonbench.models.budget import Budget
from horizonbench.models.engine import (
    Evaluation,
    EvaluationInterrupted,
    ModelRunner,
    Outcome,
    attempt_row,
)
from horizonbench.models.openai_chat import OpenAIChatModel
from horizonbench.schemas.config import ModelSpec

FAKE_KEY = "test-key-NOT-SECRET-123"
POLL_S = 0.02
DONE_AFTER_S = 0.1
DIRECT_PATHS = {"/v1/chat/completions", "/v1/messages"}
#: USD per million tokens, (input, output), as configured in each spec
PRICES = {"openai": (1.0, 2.0), "anthropic": (3.0, 15.0)}

PROVIDERS = pytest.mark.parametrize("provider", ["openai", "anthropic"])


def _answer(body: dict[str, Any]) -> str:
    return f"route for {body['messages'][-1]['content']}"


def _server(**kw: Any) -> Any:
    kw.setdefault("batch_complete_after_s", DONE_AFTER_S)
    return running_fake_server(_answer, **kw)


def _request(i: int, sample: int = 0) -> AttemptRequest:
    return AttemptRequest(
        instance_id=f"inst-{i}",
        family="fake",
        sample=sample,
        messages=(Message("system", "You are a careful planner."), Message("user", f"puzzle {i}")),
        temperature=1.0,
        top_p=0.95,
        max_tokens=64,
        seed=1000 + i + 7 * sample,
    )


def _spec(provider: str, server: FakeModelServer) -> ModelSpec:
    inp, out = PRICES[provider]
    return ModelSpec(
        name=f"fake-{provider}",
        provider=provider,
        model="gpt-fake" if provider == "openai" else "claude-fake",
        base_url=server.base_url if provider == "openai" else server.root_url,
        timeout_s=10,
        input_cost_per_mtok=inp,
        output_cost_per_mtok=out,
        batch=True,
        batch_poll_s=POLL_S,
    )


def _model(provider: str, server: FakeModelServer) -> OpenAIChatModel | AnthropicModel:
    spec = _spec(provider, server)
    return OpenAIChatModel(spec, FAKE_KEY) if provider == "openai" else AnthropicModel(spec, FAKE_KEY)


def _runner(provider: str, server: FakeModelServer, store: AttemptStore, **kw: Any) -> ModelRunner:
    model = _model(provider, server)
    return runner_for(model, store, price=model.spec.price(), **kw)


def _start(
    runner: ModelRunner, requests: list[AttemptRequest]
) -> tuple[Evaluation, list[Outcome | None], list[Any], list[int]]:
    evaluation = Evaluation(grace_s=0)
    outcomes, futures, todo = submit_batch_job(evaluation, runner, requests, poll_s=POLL_S)
    assert len(futures) == (1 if todo else 0)
    return evaluation, outcomes, futures, todo


def _finish(outcomes: list[Outcome | None], futures: list[Any], todo: list[int]) -> list[Outcome]:
    if futures:
        results = futures[0].result()
        assert len(results) == len(todo)
        for i, outcome in zip(todo, results, strict=True):
            outcomes[i] = outcome
    assert all(o is not None for o in outcomes)
    return [o for o in outcomes if o is not None]


def _run(runner: ModelRunner, requests: list[AttemptRequest]) -> list[Outcome]:
    """One evaluation of ``requests`` as a batch job, like the evaluate stage runs it."""
    evaluation, outcomes, futures, todo = _start(runner, requests)
    evaluation.run([(runner.name, futures)], len(requests))
    runner.close()
    return _finish(outcomes, futures, todo)


def _direct_calls(server: FakeModelServer) -> list[str]:
    return [p for p in server.paths() if p in DIRECT_PATHS]


def _stored_via_batch(path: Path, key: str) -> int | None:
    with sqlite3.connect(path) as conn:
        row = conn.execute("SELECT via_batch FROM attempts WHERE attempt_key = ?", (key,)).fetchone()
    return None if row is None else int(row[0])


def _no_key(*things: Any) -> None:
    for thing in things:
        assert FAKE_KEY not in (thing if isinstance(thing, str) else repr(thing))


# --- 1. one batch answers every attempt once --------------------------------------------------


@PROVIDERS
def test_batch_job_answers_every_attempt_once_at_half_price(provider: str, tmp_path: Path) -> None:
    requests = [_request(i) for i in range(5)]
    with _server() as server, AttemptStore(tmp_path / "s.sqlite") as store:
        runner = _runner(provider, server, store)
        keys = [runner.key(r) for r in requests]
        outcomes = _run(runner, requests)

        assert server.batches_created == 1
        (submission,) = server.batch_submissions
        assert submission.provider == provider and submission.custom_ids == tuple(keys)
        assert _direct_calls(server) == []
        assert server.answered == 0 and server.batch_lines_answered == 5
        assert server.repeated_prompts() == {}
        assert runner.calls == 1
        assert store.open_batches(runner.identity) == []  # collected and closed

        inp, out = PRICES[provider]
        for request, key, outcome in zip(requests, keys, outcomes, strict=True):
            row = attempt_row(outcome, "batch")
            assert row["attempt_key"] == key
            assert row["response"] == f"route for {request.messages[-1].content}"
            assert row["error"] is None and row["error_class"] is None
            assert row["via_batch"] is True and row["reused"] is False
            assert row["input_tokens"] > 0 and row["output_tokens"] > 0
            full = (row["input_tokens"] * inp + row["output_tokens"] * out) / 1e6
            assert row["cost_usd"] == pytest.approx(full / 2)
            stored = store.get(key)
            assert stored is not None and stored.text == row["response"]
            assert stored.cost_usd == pytest.approx(full / 2)
            assert _stored_via_batch(tmp_path / "s.sqlite", key) == 1
        assert outcomes[0].completion is not None
        assert outcomes[0].completion.finish_reason == "stop"


# --- 2. submit, kill, resume --------------------------------------------------------------------


@PROVIDERS
def test_interrupted_batch_is_resumed_not_resubmitted(provider: str, tmp_path: Path) -> None:
    requests = [_request(i) for i in range(4)]
    path = tmp_path / "s.sqlite"
    with _server(batch_complete_after_s=0.4) as server:
        store = AttemptStore(path)
        runner = _runner(provider, server, store)
        keys = [runner.key(r) for r in requests]
        evaluation, outcomes, futures, todo = _start(runner, requests)

        def kill_once_submitted() -> None:
            deadline = time.monotonic() + 5
            while server.batches_created < 1 and time.monotonic() < deadline:
                time.sleep(0.002)
            evaluation.stop()

        killer = threading.Thread(target=kill_once_submitted, daemon=True)
        killer.start()
        try:
            evaluation.run([(runner.name, futures)], len(requests))
        except EvaluationInterrupted as err:
            assert err.done == 0
        else:  # the job noticed the stop itself: every row says so
            first = _finish(outcomes, futures, todo)
            assert {o.error_class for o in first} == {"interrupted"}
        killer.join()
        runner.close()

        (batch_id, open_keys), *more = store.open_batches(runner.identity)
        assert more == [] and sorted(open_keys) == sorted(keys)
        assert all(store.get(k) is None for k in keys)
        assert server.batches_created == 1 and server.batch_lines_answered == 0
        store.close()

        # the next run: a new store object on the same file and a new runner
        with AttemptStore(path) as store2:
            runner2 = _runner(provider, server, store2)
            second = _run(runner2, requests)
            assert server.batches_created == 1  # polled, not submitted again
            assert server.batch_polls[batch_id] >= 2
            assert runner2.calls == 0
            assert [o.completion.text for o in second if o.completion] == [
                f"route for puzzle {i}" for i in range(4)
            ]
            assert all(o.via_batch and not o.reused for o in second)
            assert server.batch_lines_answered == len(requests)
            assert server.repeated_prompts() == {}
            assert len(store2) == len(requests)
            assert store2.open_batches(runner2.identity) == []
            assert _direct_calls(server) == []


# --- 3. failed lines ----------------------------------------------------------------------------


@PROVIDERS
def test_failed_lines_are_rows_not_stored_and_go_into_the_next_batch(provider: str, tmp_path: Path) -> None:
    requests = [_request(i) for i in range(5)]
    with _server() as server, AttemptStore(tmp_path / "s.sqlite") as store:
        keys = [_runner(provider, server, store).key(r) for r in requests]
        server.batch_fail_ids = {keys[1], keys[3]}
        first = _run(_runner(provider, server, store), requests)

        assert [o.error_class for o in first] == [None, "batch_failed", None, "batch_failed", None]
        for i in (1, 3):
            row = attempt_row(first[i], "batch")
            assert row["response"] is None and row["via_batch"] is True and row["cost_usd"] == 0.0
            assert "batch line" in row["error"] and "failed on purpose" in row["error"]
            _no_key(row["error"])
            assert store.get(keys[i]) is None
        assert len(store) == 3
        assert server.batch_lines_answered == 3

        server.batch_fail_ids = set()
        runner = _runner(provider, server, store)
        second = _run(runner, requests)
        assert server.batches_created == 2
        assert server.batch_submissions[1].custom_ids == (keys[1], keys[3])
        assert [o.reused for o in second] == [True, False, True, False, True]
        assert all(o.completion is not None for o in second)
        assert second[1].via_batch and second[3].via_batch
        assert len(store) == 5 and server.batch_lines_answered == 5
        assert server.repeated_prompts() == {}
        assert _direct_calls(server) == []


@pytest.mark.parametrize("shape", ["status_code", "error"])
def test_openai_batch_where_every_line_failed_has_no_output_file(shape: str, tmp_path: Path) -> None:
    requests = [_request(i) for i in range(3)]
    with _server(batch_fail_shape=shape) as server, AttemptStore(tmp_path / "s.sqlite") as store:
        runner = _runner("openai", server, store)
        server.batch_fail_ids = {runner.key(r) for r in requests}
        outcomes = _run(runner, requests)
        assert {o.error_class for o in outcomes} == {"batch_failed"}
        assert all("failed on purpose" in (o.error or "") for o in outcomes)
        assert len(store) == 0 and server.batch_lines_answered == 0
        assert store.open_batches(runner.identity) == []


# --- 4. nothing left to do ----------------------------------------------------------------------


@PROVIDERS
def test_rerun_after_completion_makes_no_http_request(provider: str, tmp_path: Path) -> None:
    requests = [_request(i) for i in range(3)]
    with _server() as server, AttemptStore(tmp_path / "s.sqlite") as store:
        first = _run(_runner(provider, server, store), requests)
        seen = len(server.requests)

        runner = _runner(provider, server, store)
        evaluation, outcomes, futures, todo = _start(runner, requests)
        assert futures == [] and todo == []
        evaluation.run([(runner.name, futures)], len(requests))
        second = _finish(outcomes, futures, todo)
        assert len(server.requests) == seen  # not even a poll
        assert runner.calls == 0
        assert all(o.reused and not o.via_batch for o in second)
        assert [o.completion for o in second] == [o.completion for o in first]


# --- 5. duplicate keys --------------------------------------------------------------------------


@PROVIDERS
def test_duplicate_keys_in_one_job_are_sent_once(provider: str, tmp_path: Path) -> None:
    # 0 twice (equal keys), 0 as another sample (its own key), 1 three times
    requests = [_request(0), _request(1), _request(0), _request(0, sample=1), _request(1), _request(1)]
    with _server() as server, AttemptStore(tmp_path / "s.sqlite") as store:
        runner = _runner(provider, server, store)
        keys = [runner.key(r) for r in requests]
        assert len(set(keys)) == 3
        outcomes = _run(runner, requests)

        (submission,) = server.batch_submissions
        assert submission.custom_ids == tuple(dict.fromkeys(keys))
        assert server.batch_lines_answered == 3
        assert all(o.completion is not None and o.via_batch for o in outcomes)
        assert [o.key for o in outcomes] == keys
        assert outcomes[0].completion == outcomes[2].completion
        assert outcomes[1].completion == outcomes[4].completion == outcomes[5].completion
        assert len(store) == 3


# --- 6. budget ----------------------------------------------------------------------------------


@PROVIDERS
def test_budget_too_small_for_the_batch_submits_nothing(provider: str, tmp_path: Path) -> None:
    requests = [_request(i) for i in range(4)]
    with _server() as server, AttemptStore(tmp_path / "s.sqlite") as store:
        budget = Budget(1e-6)  # the estimate is 4 x 64 output tokens at half price: far more
        runner = _runner(provider, server, store, budget=budget)
        outcomes = _run(runner, requests)

        assert server.requests == []  # no upload, no batch, no call
        assert {o.error_class for o in outcomes} == {"budget"}
        assert all(o.completion is None and "budget" in (o.error or "") for o in outcomes)
        assert budget.exhausted and budget.spent_usd == 0.0
        assert len(store) == 0 and store.open_batches(runner.identity) == []


@PROVIDERS
def test_budget_is_charged_what_the_batch_cost(provider: str, tmp_path: Path) -> None:
    requests = [_request(i) for i in range(4)]
    with _server() as server, AttemptStore(tmp_path / "s.sqlite") as store:
        budget = Budget(1.0)
        outcomes = _run(_runner(provider, server, store, budget=budget), requests)
        cost = sum(o.completion.cost_usd for o in outcomes if o.completion)
        assert cost > 0 and budget.spent_usd == pytest.approx(cost)
        assert not budget.exhausted
        # nothing stays reserved: the whole remaining budget can be reserved again
        assert budget.reserve(1.0 - cost - 1e-12)


# --- provider trouble ---------------------------------------------------------------------------


@PROVIDERS
def test_a_batch_the_provider_lost_is_submitted_again(provider: str, tmp_path: Path) -> None:
    requests = [_request(i) for i in range(2)]
    with _server() as server, AttemptStore(tmp_path / "s.sqlite") as store:
        runner = _runner(provider, server, store)
        keys = [runner.key(r) for r in requests]
        store.add_batch(
            "batch_gone" if provider == "openai" else "msgbatch_gone", runner.name, runner.identity, keys
        )
        outcomes = _run(runner, requests)
        assert all(o.completion is not None for o in outcomes)
        assert server.batches_created == 1
        assert store.open_batches(runner.identity) == []


@PROVIDERS
def test_a_refused_submission_is_a_row_without_the_key(provider: str, tmp_path: Path) -> None:
    requests = [_request(i) for i in range(2)]
    with (
        _server(valid_keys={"another-key"}, echo_auth_in_errors=True) as server,
        AttemptStore(tmp_path / "s.sqlite") as store,
    ):
        budget = Budget(1.0)
        runner = _runner(provider, server, store, budget=budget)
        outcomes = _run(runner, requests)
        assert {o.error_class for o in outcomes} == {"auth"}
        assert server.batches_created == 0
        assert store.open_batches(runner.identity) == []
        _no_key(*(attempt_row(o, "batch") for o in outcomes))
        assert budget.spent_usd == 0.0 and budget.reserve(1.0)  # the reservation was released
