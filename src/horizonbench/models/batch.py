"""Provider batch APIs (OpenAI Batch, Anthropic Message Batches): about half price, slow.

One job per model: the attempts not in the store are submitted as one batch, whose id
is recorded in the attempt store *before* polling starts; the job polls until the batch
ends and stores every answer under its attempt key. A run that crashes or is
interrupted while a batch is open finds the id on the next run and polls that batch
instead of submitting (and paying for) the same lines again. Lines the provider failed
become attempt rows with ``error_class = batch_failed`` and go into the next batch.

Details a caller relies on:

* Requests with equal attempt keys (same prompt, settings and sample) are sent once and
  all get that answer (a repeated ``custom_id`` would fail a whole OpenAI batch).
* A run submits at most one new batch: lines that failed in a batch this run collected
  (its own or a resumed one) are reported, not resubmitted until the next run.
* A batch the provider no longer knows (HTTP 404 on poll) is marked ``lost`` in the
  store and its lines are submitted again; any other failure to poll leaves the batch
  open for the next run, so nothing already paid for is submitted twice.
* Submissions use an HTTP connection pool of their own: closing the model's client on
  an interrupt cannot abort a submission the provider may already have accepted, so
  its id is always recorded (an interrupt then waits at most ``timeout_s`` for it).
* With a budget, the batch's estimated (discounted) cost is reserved before submitting;
  if it does not fit, nothing is sent and every line is a ``budget`` row.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

import anthropic
import openai

from horizonbench.core.types import Completion
from horizonbench.models import failures as f
from horizonbench.models.base import AttemptRequest
from horizonbench.models.engine import Evaluation, ModelRunner, Outcome, safe_error, split_stored
from horizonbench.models.sdk_errors import classify_sdk_error, scrub

_OPENAI_ENDPOINT = "/v1/chat/completions"
_OPENAI_DONE = {"completed", "failed", "expired", "cancelled"}

#: what a finished batch gives back: answers or failures by attempt key, and a note on
#: the batch as a whole (why lines may have no result at all), or None
BatchResults = tuple[dict[str, Completion | f.CallFailure], str | None]


def _describe(error: Any) -> str:
    """A short "type: message" of an error object or dict a batch line carries."""
    if hasattr(error, "model_dump"):
        error = error.model_dump(mode="json")
    if isinstance(error, dict):
        inner = error.get("error")
        if isinstance(inner, dict):
            return _describe(inner)
        kind = error.get("code") or error.get("type")
        message = error.get("message")
        if message is not None:
            return f"{kind}: {message}" if kind else str(message)
    return str(error)


class _Batches:
    """A provider's batch API, reached through the model's own client and secret."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.client = model.client
        self.secret: str | None = getattr(model, "_secret", None)


class _OpenAIBatches(_Batches):
    def submit(self, items: list[tuple[str, AttemptRequest]]) -> str:
        client = self.client.copy(http_client=openai.DefaultHttpxClient())
        try:
            return self._submit(client, items)
        finally:
            client.close()

    def _submit(self, client: openai.OpenAI, items: list[tuple[str, AttemptRequest]]) -> str:
        lines = [
            json.dumps(
                {"custom_id": key, "method": "POST", "url": _OPENAI_ENDPOINT, "body": self.model.body(req)},
                ensure_ascii=True,
            )
            for key, req in items
        ]
        data = ("\n".join(lines) + "\n").encode()
        upload = client.files.create(file=("horizonbench-batch.jsonl", data), purpose="batch")
        batch = client.batches.create(
            input_file_id=upload.id, endpoint=_OPENAI_ENDPOINT, completion_window="24h"
        )
        return str(batch.id)

    def poll(self, batch_id: str) -> bool:
        return self.client.batches.retrieve(batch_id).status in _OPENAI_DONE

    def results(self, batch_id: str) -> BatchResults:
        batch = self.client.batches.retrieve(batch_id)
        out: dict[str, Completion | f.CallFailure] = {}
        # output_file_id is None when every line failed; error_file_id when none did
        for file_id in (batch.error_file_id, batch.output_file_id):
            if not file_id:
                continue
            for line in self.client.files.content(file_id).text.splitlines():
                if not line.strip():
                    continue
                record = json.loads(line)
                key = str(record.get("custom_id"))
                response = record.get("response") or {}
                if response.get("status_code") == 200 and isinstance(response.get("body"), dict):
                    try:
                        out[key] = self.model.completion_from_json(response["body"], batch=True)
                    except f.CallFailure as err:
                        out[key] = err
                else:
                    detail = record.get("error") or response.get("body") or "no response"
                    status = response.get("status_code")
                    head = f"batch line failed (HTTP {status})" if status else "batch line failed"
                    out[key] = f.CallFailure(f.BATCH_FAILED, f"{head}: {_describe(detail)}")
        note = None
        if batch.status != "completed":
            note = f"the batch {batch.status}"
            errors = getattr(batch.errors, "data", None) or []
            if errors:
                note += ": " + "; ".join(_describe(e) for e in errors[:3])
        return out, note


class _AnthropicBatches(_Batches):
    def submit(self, items: list[tuple[str, AttemptRequest]]) -> str:
        client = self.client.copy(http_client=anthropic.DefaultHttpxClient())
        try:
            batch = client.messages.batches.create(
                requests=[{"custom_id": key, "params": self.model.body(req)} for key, req in items]
            )
        finally:
            client.close()
        return str(batch.id)

    def poll(self, batch_id: str) -> bool:
        return self.client.messages.batches.retrieve(batch_id).processing_status == "ended"

    def results(self, batch_id: str) -> BatchResults:
        out: dict[str, Completion | f.CallFailure] = {}
        for item in self.client.messages.batches.results(batch_id):
            result = item.result
            if result.type == "succeeded":
                try:
                    out[item.custom_id] = self.model.completion_from_json(
                        result.message.model_dump(mode="json"), batch=True
                    )
                except f.CallFailure as err:
                    out[item.custom_id] = err
            else:
                error = getattr(result, "error", None)
                detail = f": {_describe(error)}" if error is not None else ""
                out[item.custom_id] = f.CallFailure(f.BATCH_FAILED, f"batch line {result.type}{detail}")
        return out, None


def batch_api(model: Any) -> _OpenAIBatches | _AnthropicBatches:
    provider = model.identity().get("provider")
    if provider == "openai":
        return _OpenAIBatches(model)
    if provider == "anthropic":
        return _AnthropicBatches(model)
    raise ValueError(f"model {model.name!r}: provider {provider!r} has no batch API")


class _Lost(Exception):
    """The provider does not know the batch (HTTP 404)."""


def run_batch(runner: ModelRunner, items: list[tuple[str, AttemptRequest]], poll_s: float) -> list[Outcome]:
    """Collect answers for ``items`` (key, request): resume open batches, submit the rest."""
    api = batch_api(runner.model)
    store = runner.store
    wanted = dict(items)  # equal keys collapse: each is sent once, all get the answer
    results: dict[str, Completion | f.CallFailure] = {}
    notes: dict[str, str] = {}
    start = time.perf_counter()
    max_failures = max(3, runner.retry.max_retries)

    def failure_of(err: Exception) -> f.CallFailure:
        if isinstance(err, f.CallFailure):
            return f.CallFailure(
                err.kind, scrub(err.message, api.secret), status=err.status, retry_after_s=err.retry_after_s
            )
        return classify_sdk_error(err, api.secret)

    def collect(batch_id: str, keys: Sequence[str]) -> tuple[bool, float]:
        """Poll until the batch ends; store its answers. Returns (False, 0) if interrupted
        first, else (True, the cost of its answers). Raises _Lost for a 404 and a
        CallFailure when polling keeps failing or cannot succeed (the batch stays open)."""
        failures = 0
        while True:
            if runner.cancel.is_set():
                return False, 0.0
            try:
                if api.poll(batch_id):
                    got, note = api.results(batch_id)
                    break
                failures = 0
            except Exception as err:
                if runner.cancel.is_set():
                    return False, 0.0  # the engine closed the client on an interrupt
                failure = failure_of(err)
                if failure.kind == f.NOT_FOUND:
                    raise _Lost(failure.message) from None
                failures += 1
                if not failure.retryable or failures > max_failures:
                    raise f.CallFailure(
                        failure.kind, f"polling batch {batch_id}: {failure.message}", status=failure.status
                    ) from None
            if runner.cancel.wait(poll_s):
                return False, 0.0
        in_batch = set(keys)
        spent = 0.0
        for key, value in got.items():
            if key not in in_batch:
                continue  # not a line we sent: never store an answer under a foreign key
            if isinstance(value, Completion):
                # every line the batch answered is stored, also lines this run did not ask
                # for: they were paid for, and the batch is closed now
                runner.record(key, value, via_batch=True)
                spent += value.cost_usd
            results[key] = value
        if note:
            for key in in_batch:
                notes[key] = note
        store.close_batch(batch_id)
        return True, spent

    def outcomes(interrupted: bool) -> list[Outcome]:
        out = []
        for key, request in items:
            value = results.get(key)
            if isinstance(value, Completion):
                out.append(Outcome(request, key, value, tries=1, via_batch=True))
                continue
            if value is None:
                if interrupted:
                    kind, message = f.INTERRUPTED, "interrupted while the batch ran"
                else:
                    kind, message = f.BATCH_FAILED, "no result for this line"
                    if key in notes:
                        message += f" ({notes[key]})"
            else:
                kind, message = value.kind, value.message
            out.append(
                Outcome(
                    request,
                    key,
                    None,
                    error=safe_error(scrub(message, api.secret)),
                    error_class=kind,
                    tries=1,
                    latency_s=time.perf_counter() - start,
                    via_batch=True,
                )
            )
        return out

    try:
        # 1. batches an earlier run submitted and did not collect: poll them, never resubmit
        for batch_id, keys in store.open_batches(runner.identity):
            if not wanted.keys() & set(keys):
                continue
            try:
                done, spent = collect(batch_id, keys)
            except _Lost as err:
                store.close_batch(batch_id, "lost")
                runner.on_event(safe_error(f"model {runner.name!r}: batch {batch_id} is gone ({err})"))
                continue
            if not done:
                return outcomes(True)
            if runner.budget is not None:
                runner.budget.settle(0.0, spent)  # reserved by the run that submitted it
        # 2. the rest, once each, as one new batch
        missing = [(k, r) for k, r in wanted.items() if k not in results and runner.lookup(k) is None]
        if not missing:
            return outcomes(runner.cancel.is_set())
        if runner.cancel.is_set():
            return outcomes(True)
        estimate = 0.0
        if runner.price is not None:
            estimate = sum(
                runner.price.cost(
                    int(runner.tokens.input_tokens(r)), int(runner.tokens.output_tokens(r)), batch=True
                )
                for _, r in missing
            )
        if runner.budget is not None and not runner.budget.reserve(estimate):
            for key, _ in missing:
                results[key] = f.CallFailure(f.BUDGET, f"{runner.budget.refusal()} before this batch")
            return outcomes(False)
        spent = 0.0
        try:
            try:
                batch_id = api.submit(missing)
            except Exception as err:
                raise failure_of(err) from None
            finally:
                runner.calls += 1
            keys = [k for k, _ in missing]
            store.add_batch(batch_id, runner.name, runner.identity, keys)
            try:
                done, spent = collect(batch_id, keys)
            except _Lost as err:
                store.close_batch(batch_id, "lost")
                raise f.CallFailure(f.BATCH_FAILED, f"batch {batch_id} is gone: {err}") from None
        finally:
            if runner.budget is not None:
                # an uncollected batch is still running: its lines are charged when a
                # later run collects them
                runner.budget.settle(estimate, spent)
        return outcomes(not done)
    except f.CallFailure as err:
        for key, _ in items:
            results.setdefault(key, err)
        return outcomes(False)


def submit_batch_job(
    evaluation: Evaluation, runner: ModelRunner, requests: Sequence[AttemptRequest], *, poll_s: float
) -> tuple[list[Outcome | None], list[Future[Any]], list[int]]:
    """Like :func:`submit_attempts`, but the attempts not stored go out as one batch job
    (a single future whose result is their outcomes, in order)."""
    keys, outcomes, todo = split_stored(runner, requests)
    futures: list[Future[Any]] = []
    if todo:
        pool = evaluation.pool(runner, 1)
        futures = [pool.submit(run_batch, runner, [(keys[i], requests[i]) for i in todo], poll_s)]
    return outcomes, futures, todo
