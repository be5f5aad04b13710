"""Per-model evaluation as Prefect task runs (issue 11): one ``evaluate-<model>`` task run
per model beside the shared engine, read back through the Prefect client from a real
API server; their states (Completed, Failed for a model that cannot answer, Cancelled
on Ctrl-C) and that the models ran at the same time."""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
from concurrent.futures import Future
from typing import Any

import pytest
from prefect.exceptions import FailedRun

from fake_model_server import running_fake_server
from horizonbench.core.types import Completion
from horizonbench.models.attempt_store import AttemptStore
from horizonbench.models.base import AttemptRequest
from horizonbench.models.engine import ModelRunner, Outcome
from horizonbench.models.offline import OfflineModel
from horizonbench.schemas.config import ModelSpec, parse_config
from horizonbench.tasks.evaluate.attempts import (
    ModelShare,
    evaluate_model,
    is_store_contention,
    model_is_broken,
    model_task_runner,
    state_message,
)

KEY = "tasks-key-NOT-SECRET-314"


# --- the model task's state, without a server ---------------------------------------------


def _share(answers: list[bool], *, cancel: bool = False, stopped: str | None = None) -> ModelShare:
    """A share of one offline model whose calls are done: True answered, False failed."""
    spec = ModelSpec.model_validate({"name": "m", "provider": "offline", "kind": "oracle"})
    runner = ModelRunner(OfflineModel(spec), AttemptStore(":memory:"))
    runner.stopped = stopped
    futures: list[Future[Any]] = []
    for i, ok in enumerate(answers):
        request = AttemptRequest(f"i{i}", "maze", 0, (), temperature=0.0, top_p=1.0, max_tokens=8, seed=i)
        completion = (
            Completion(text="x", finish_reason="stop", input_tokens=1, output_tokens=1) if ok else None
        )
        fut: Future[Any] = Future()
        fut.set_result(Outcome(request, f"k{i}", completion, error_class=None if ok else "timeout"))
        futures.append(fut)
    event = threading.Event()
    if cancel:
        event.set()
    return ModelShare(spec, runner, ([None] * len(answers), futures, list(range(len(answers)))), [], event)


def test_a_model_with_some_failed_attempts_completes_with_them_in_its_message():
    state = evaluate_model.fn(_share([True, True, False]))
    assert state.is_completed()
    assert (
        state.message == "2 of 3 attempts answered (0 reused); 1 failed (timeout 1), retried by the next run"
    )


def test_a_model_that_cannot_answer_fails_and_an_interrupted_one_is_cancelled():
    assert evaluate_model.fn(_share([False, False])).is_failed()
    stopped = evaluate_model.fn(
        _share([True, False], stopped="model 'm' stopped after 3 consecutive HTTP 401")
    )
    assert stopped.is_failed() and "HTTP 401" in (stopped.message or "")
    cancelled = evaluate_model.fn(_share([True, False], cancel=True))
    assert cancelled.is_cancelled() and cancelled.message == "interrupted: 1 of 2 attempts done and stored"


def test_a_budget_cap_is_not_a_broken_model():
    counts = {"answered": 0, "attempts": 2, "reused": 0, "failed": 2, "stopped": None}
    assert not model_is_broken(counts | {"failed_by_class": {"budget": 2}})
    assert model_is_broken(counts | {"failed_by_class": {"budget": 1, "timeout": 1}})
    assert "budget 1, timeout 1" in state_message(counts | {"failed_by_class": {"budget": 1, "timeout": 1}})


def test_only_a_locked_attempt_store_is_retried():
    from prefect.states import Failed

    assert is_store_contention(None, None, Failed(data=sqlite3.OperationalError("database is locked")))
    assert not is_store_contention(None, None, Failed(data=sqlite3.OperationalError("no such table: x")))
    assert not is_store_contention(None, None, Failed(data=RuntimeError("database is locked")))


def test_called_outside_a_run_no_task_runs_are_made():
    """``evaluate_models.fn`` (benchmarks, scripts) must not start a temporary server."""
    with model_task_runner(2) as runner:
        assert runner is None


# --- through the pipeline, against a real Prefect API server -----------------------------


def _task_runs(flow_run_id: Any) -> list[Any]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        return client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))


def _model(server: Any, name: str, model: str, **kw: Any) -> dict[str, Any]:
    return {
        "name": name,
        "provider": "openai_compatible",
        "model": model,  # distinct ids: entries with equal identities share answers by design
        "base_url": server.base_url,
        "api_key_env": "HB_TASKS_KEY",
        "max_concurrency": 2,
        **kw,
    }


def test_each_model_is_a_task_run_with_its_state_and_they_overlap(prefect_server, tmp_path, monkeypatch):
    from horizonbench.flows.pipeline import pipeline

    monkeypatch.setenv("HB_TASKS_KEY", KEY)
    monkeypatch.setenv("HB_TASKS_WRONG", "sk-wrong-NOT-SECRET")
    # 8 attempts per model, 2 at a time, 0.25 s each: about a second of calls per model
    with running_fake_server(lambda body: "I do not know.", latency_s=0.25, valid_keys={KEY}) as server:
        cfg = parse_config(
            {
                "run": {"name": "tasks", "seed": 4},
                "families": {
                    "maze": {
                        "params": {"grid_rows": 5, "grid_cols": 5, "num_keys": 1},
                        "sampling": {"count": 4, "shard_size": 4},
                        "prompt": {"shots": 0},
                    }
                },
                "evaluation": {
                    "samples": 2,
                    "models": [
                        _model(server, "alpha", "solver-a"),
                        _model(server, "beta", "solver-b"),
                        _model(server, "wrong-key", "solver-c", api_key_env="HB_TASKS_WRONG"),
                    ],
                },
                "dask": {"n_workers": 1},
                "analysis": {"bootstrap": 0},
            }
        )
        # the wrong key leaves attempts without an answer: the flow run ends Failed
        state = pipeline(cfg, str(tmp_path / "run"), return_state=True)
    assert state.is_failed()
    with pytest.raises(FailedRun):
        state.result()
    runs = {t.name: t for t in _task_runs(state.state_details.flow_run_id)}
    assert {"evaluate", "evaluate-alpha", "evaluate-beta", "evaluate-wrong-key"} <= set(runs), sorted(runs)
    alpha, beta, wrong = runs["evaluate-alpha"], runs["evaluate-beta"], runs["evaluate-wrong-key"]
    assert alpha.state.is_completed() and beta.state.is_completed()
    assert alpha.state.message == "8 of 8 attempts answered (0 reused)"
    assert wrong.state.is_failed()
    assert "0 of 8 attempts answered" in wrong.state.message and "HTTP 401" in wrong.state.message
    # each lasted as long as its model's calls (4 rounds of 0.25 s), and they ran side by side
    for run in (alpha, beta):
        assert (run.end_time - run.start_time).total_seconds() >= 0.9
    assert max(alpha.start_time, beta.start_time) < min(alpha.end_time, beta.end_time)
    # inside the evaluate task run, which outlasts them
    evaluate = runs["evaluate"]
    assert evaluate.start_time <= min(r.start_time for r in (alpha, beta, wrong))
    assert evaluate.end_time >= max(r.end_time for r in (alpha, beta, wrong))
    parents = {i.id for r in (alpha, beta, wrong) for i in r.task_inputs.get("__parents__", [])}
    assert parents == {evaluate.id}


def test_ctrl_c_ends_the_model_task_run_cancelled_with_its_count(prefect_server, tmp_path):
    """SIGINT mid-run: the model's task run is Cancelled with what is kept, never left Running."""
    from test_evaluation_process import _config, _env, _model, _start, _wait_answers

    with running_fake_server(lambda body: "I do not know.", latency_s=0.3, rpm=1200) as server:
        cfg = _config(tmp_path / "c.yaml", [_model(server)])
        proc = _start(cfg, tmp_path / "run", _env(tmp_path, prefect_server))
        _wait_answers(server, proc, 30)
        os.killpg(proc.pid, signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr[-2000:]
    last = stderr.strip().splitlines()[-1]
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        flow_runs = [r for r in client.read_flow_runs() if "run:proc" in (r.tags or [])]
    newest = max(flow_runs, key=lambda r: r.created)
    runs = {t.name: t for t in _task_runs(newest.id)}
    model_run = runs["evaluate-compat"]
    assert model_run.state.is_cancelled(), model_run.state
    message = model_run.state.message or ""
    assert message.startswith("interrupted: ") and message.endswith(" of 200 attempts done and stored")
    kept = int(message.split()[1])
    assert 30 <= kept <= int(last.split("interrupted: ")[1].split()[0])  # no more than the run says
