"""Run attempts against models: reuse stored answers, rate-limit, retry, record every failure.

Design points a caller relies on:

* **One retry layer.** Every try of an attempt, retries included, takes a concurrency
  slot and passes the rate limiter; backoff is exponential with full jitter and never
  shorter than the provider's Retry-After hint. A hint above ``retry_after_cap_s`` ends
  the attempt (``retry_after_too_long``) instead of holding a thread for minutes.
* **Failures are rows, not gaps.** An attempt that fails after its retries comes back
  with ``response=None``, its ``error_class`` (models/failures.py) and the error text;
  nothing is stored, so the next run retries exactly those.
* **A broken model entry stops.** After ``stop_after_errors`` consecutive 401/403/404
  answers the model is stopped with one message naming it and the status; its other
  attempts end as ``model_stopped`` without a call, and other models go on. Until a
  model has answered once, only one of its calls is in flight (a probe), so a wrong key
  costs ``stop_after_errors`` calls.
* **Stored answers** are reused without a call and without rate-limit budget, as the
  reuse policy allows; their rows report the stored tokens, latency and cost with
  ``reused=True``.
* **Interrupts.** :meth:`Evaluation.cancel` (the pipeline calls it on Ctrl-C or
  SIGTERM) stops new tries at once, threads queued in the limiter or in a backoff
  included; calls in flight get ``grace_s`` to answer, and every answer that arrives is
  stored. Then :class:`EvaluationInterrupted` says how many attempts are done.
* Rows come back in the order of the requests, whatever order threads finish in.
"""

from __future__ import annotations

import queue
import random
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from horizonbench.core.text import clean_text
from horizonbench.core.types import Completion
from horizonbench.models import failures as f
from horizonbench.models.attempt_store import AttemptStore, attempt_key, prompt_sha256
from horizonbench.models.base import AttemptRequest, Model
from horizonbench.models.budget import Budget, ModelBudget
from horizonbench.models.concurrency import AdaptiveConcurrency
from horizonbench.models.rate_limit import RateLimiter
from horizonbench.models.retry import RetryPolicy, backoff_delay
from horizonbench.schemas.prices import Price

_MAX_ERROR_CHARS = 500

# Last line of defence for exceptions no provider wrapped: mask anything that looks
# like a credential before it reaches a table.
_SECRET_PATTERNS = [
    re.compile(r"(?i)(bearer\s+)[^\s'\",}]+"),
    re.compile(r"(?i)((?:x-)?api[-_]?key['\"]?\s*[:=]\s*['\"]?)[^\s'\",}]+"),
]


def safe_error(text: str) -> str:
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(r"\1[redacted]", text)
    return clean_text(text)[:_MAX_ERROR_CHARS]


class EvaluationInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped the evaluation; answers that arrived are stored."""

    def __init__(self, done: int, total: int) -> None:
        super().__init__(f"{done} of {total} attempts done and stored; rerun the same command to resume")
        self.done = done
        self.total = total


def prompt_chars(request: AttemptRequest) -> int:
    return sum(len(m.content) for m in request.messages)


@dataclass
class Outcome:
    """What became of one request."""

    request: AttemptRequest
    key: str
    completion: Completion | None
    error: str | None = None
    error_class: str | None = None
    tries: int = 0
    latency_s: float = 0.0
    reused: bool = False
    via_batch: bool = False

    @property
    def answered(self) -> bool:
        return self.completion is not None


class _TokenEstimator:
    """Learns a model's tokens per prompt character and its typical answer length, so
    reservations track reality instead of reserving ``max_tokens`` for every answer.

    The limiter reserves the *mean* (:meth:`expected_output`) with the variance of the
    estimate's error (:meth:`variance`) and keeps a margin on the sum of the errors of
    the calls in flight; :meth:`output_tokens` (mean + 2 deviations) is the cautious
    figure for one call on its own.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.per_char = 0.25
        self.out_mean: float | None = None
        self.out_dev = 0.0
        #: mean squared errors of the estimates (prompt; answer), learned from the answers
        self.in_var = 0.0
        self.out_var = 0.0
        self._seen = 0

    def input_tokens(self, request: AttemptRequest) -> float:
        return prompt_chars(request) * self.per_char

    def output_tokens(self, request: AttemptRequest) -> float:
        if self.out_mean is None:
            return float(request.max_tokens)
        return min(float(request.max_tokens), self.out_mean + 2.0 * self.out_dev + 1.0)

    def expected_output(self, request: AttemptRequest) -> float:
        """The mean answer length (``max_tokens`` until an answer was seen)."""
        if self.out_mean is None:
            return float(request.max_tokens)
        return min(float(request.max_tokens), self.out_mean)

    def variance(self, *, output: bool = True) -> float:
        """Variance of the error of ``input_tokens`` (+ ``expected_output`` if ``output``)."""
        return self.in_var + (self.out_var if output else 0.0)

    def observe(self, request: AttemptRequest, completion: Completion) -> None:
        chars = prompt_chars(request)
        with self._lock:
            # squared errors of the estimates made before this answer; the first answer
            # seeds a wide variance (half its size as a deviation), then a running mean
            # that turns exponential (weight 1/20) once twenty answers were seen
            self._seen += 1
            weight = max(0.05, 1.0 / self._seen)
            out = float(completion.output_tokens)
            in_err = completion.input_tokens - chars * self.per_char if completion.input_tokens > 0 else 0.0
            out_err = out - self.out_mean if self.out_mean is not None else out / 2.0
            self.in_var += weight * (in_err**2 - self.in_var)
            self.out_var += weight * (out_err**2 - self.out_var)
            if chars > 0 and completion.input_tokens > 0:
                self.per_char += 0.2 * (completion.input_tokens / chars - self.per_char)
            if self.out_mean is None:
                self.out_mean = out
            else:
                # a running mean at first, so one odd first answer is not trusted for long
                self.out_dev += 0.1 * (abs(out - self.out_mean) - self.out_dev)
                self.out_mean += max(0.1, 1.0 / self._seen) * (out - self.out_mean)


class ModelRunner:
    """The call path of one model: store lookup, probe/AIMD gate, limiter, retries, stop."""

    def __init__(
        self,
        model: Model,
        store: AttemptStore,
        *,
        limiter: RateLimiter | None = None,
        max_concurrency: int = 4,
        retry: RetryPolicy | None = None,
        stop_after_errors: int = 3,
        tpm_counts_requested: bool = False,
        price: Price | None = None,
        budget: Budget | ModelBudget | None = None,
        reuse: str = "run",
        run_tag: str | None = None,
        cancel: threading.Event | None = None,
        on_event: Callable[[str], None] | None = None,
        rng_seed: int = 0,
        sleep: Callable[[threading.Event, float], bool] | None = None,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
        if reuse not in ("run", "store", "never"):
            raise ValueError(f"reuse must be run, store or never, got {reuse!r}")
        self.model = model
        self.name = model.name
        self.store = store
        self.limiter = limiter
        self.max_concurrency = max_concurrency
        self.gate = AdaptiveConcurrency(max_concurrency)
        self.retry = retry or RetryPolicy()
        self.stop_after_errors = stop_after_errors
        self.tpm_requested = tpm_counts_requested
        self.price = price
        self.budget = budget
        self.reuse = reuse
        self.run_tag = run_tag
        self.cancel = cancel or threading.Event()
        self.on_event = on_event or (lambda message: None)
        self.identity = model.identity()
        self.tokens = _TokenEstimator()
        self._rng = random.Random(rng_seed)
        self._rng_lock = threading.Lock()
        self._lock = threading.Lock()
        self._fatal_streak = 0
        #: the message that stopped the model, once it is stopped
        self.stopped: str | None = None
        self._sleep = sleep or (lambda event, seconds: event.wait(seconds))
        #: calls sent (tries), 429s received, for the manifest and the benchmark
        self.calls = 0
        self.throttled = 0

    # --- keys and reuse ---------------------------------------------------------------

    def key(self, request: AttemptRequest) -> str:
        return attempt_key(
            self.identity,
            request.messages,
            request.temperature,
            request.top_p,
            request.max_tokens,
            request.sample,
            (request.instance_id, request.turn) if request.mode != "plan" else None,
        )

    def lookup(self, key: str) -> Completion | None:
        if self.reuse == "never":
            return None
        return self.store.get(key, self.run_tag if self.reuse == "run" else None)

    def record(self, key: str, completion: Completion, *, via_batch: bool = False) -> None:
        """Store the answer and book its cost in the spend ledger (one transaction)."""
        self.store.put(key, completion, self.run_tag, via_batch=via_batch, model=self.name)

    # --- one attempt ------------------------------------------------------------------

    def attempt(self, request: AttemptRequest, key: str | None = None) -> Outcome:
        """Answer ``request`` from the store or by calling the model; never raises for a
        provider failure (only for a broken store)."""
        key = key or self.key(request)
        stored = self.lookup(key)
        if stored is not None:
            return Outcome(request, key, stored, reused=True)
        return self.call(request, key)

    def _failed(
        self, request: AttemptRequest, key: str, kind: str, message: str, tries: int, start: float
    ) -> Outcome:
        return Outcome(
            request,
            key,
            None,
            error=safe_error(message),
            error_class=kind,
            tries=tries,
            latency_s=time.perf_counter() - start,
        )

    def call(self, request: AttemptRequest, key: str) -> Outcome:
        """Call the model for ``request`` (no store lookup), with every retry."""
        start = time.perf_counter()
        tries = 0
        last: f.CallFailure | None = None
        for retry in range(self.retry.max_retries + 1):
            if self.cancel.is_set():
                return self._failed(request, key, f.INTERRUPTED, "interrupted before an answer", tries, start)
            if self.stopped is not None:
                return self._failed(request, key, f.MODEL_STOPPED, self.stopped, tries, start)
            # the probe/AIMD gate first: estimates made after it use what the answers
            # that came back meanwhile taught us, not the max_tokens of a cold start
            if not self.gate.enter(self.cancel):
                return self._failed(request, key, f.INTERRUPTED, "interrupted before an answer", tries, start)
            in_tokens = self.tokens.input_tokens(request)
            # the mean answer, with the estimate's variance: the limiter's margin is pooled
            # over the calls in flight (models/rate_limit.py), not added to each
            out_tokens = (
                float(request.max_tokens) if self.tpm_requested else self.tokens.expected_output(request)
            )
            variance = self.tokens.variance(output=not self.tpm_requested)
            # a budget is a cap: the answer is reserved at its ceiling (max_tokens), so
            # what is paid stays within it up to the estimate of the prompt's tokens
            cost_estimate = self.price.cost(int(in_tokens), request.max_tokens) if self.price else 0.0
            # waits while calls in flight may leave room; refused once paid + this passes a cap
            if self.budget is not None and not self.budget.reserve(cost_estimate, cancel=self.cancel):
                self.gate.leave(answered=False)
                if self.cancel.is_set():
                    return self._failed(
                        request, key, f.INTERRUPTED, "interrupted before an answer", tries, start
                    )
                why = f"{self.budget.refusal()} before this call"
                return self._failed(request, key, f.BUDGET, why, tries, start)
            answered = throttled = False
            try:
                reservation = (
                    self.limiter.acquire(in_tokens + out_tokens, self.cancel, variance)
                    if self.limiter
                    else None
                )
                if self.limiter is not None and reservation is None:
                    self._settle(cost_estimate, 0.0)
                    return self._failed(
                        request, key, f.INTERRUPTED, "interrupted before an answer", tries, start
                    )
                if self.stopped is not None:  # stopped while we waited
                    self._settle(cost_estimate, 0.0)
                    return self._failed(request, key, f.MODEL_STOPPED, self.stopped, tries, start)
                tries += 1
                with self._lock:
                    self.calls += 1
                try:
                    completion = self.model.complete(request)
                except f.CallFailure as err:
                    last = err
                except Exception as err:  # a provider that raised something unclassified
                    last = f.CallFailure(f.OTHER, f"{type(err).__name__}: {err}")
                else:
                    answered = True
                    self._settle(cost_estimate, completion.cost_usd)
                    if self.limiter is not None and reservation is not None:
                        used = completion.input_tokens + (
                            request.max_tokens if self.tpm_requested else completion.output_tokens
                        )
                        self.limiter.reconcile(reservation, used)
                    self.tokens.observe(request, completion)
                    with self._lock:
                        self._fatal_streak = 0
                    self.record(key, completion)
                    return Outcome(request, key, completion, tries=tries, latency_s=completion.latency_s)
                # a 200 without a usable answer may still be billed (its usage says so)
                self._settle(cost_estimate, last.cost_usd)
                if last.cost_usd:
                    self.store.add_spend(self.name, last.cost_usd, self.run_tag, key)
                throttled = last.kind == f.RATE_LIMIT
            finally:
                # a 429 that names the token limit, with the limiter pacing tokens, is the
                # window's business: fewer calls in flight would not send fewer tokens a
                # second, only lose calls the window has room for. The pause below holds
                # admissions until the provider has room, and the refused call's
                # reservation stays in the window (it is not reconciled): the 429 proved the
                # provider's window fuller than the estimates, and freeing it at once let
                # the next call in to be refused too (0.047 429s per success, not 0.020)
                token_bound = (
                    throttled
                    and last is not None
                    and last.limit == "tokens"
                    and self.limiter is not None
                    and self.limiter.token_capacity is not None
                )
                self.gate.leave(answered=answered, throttled=throttled and not token_bound)
            assert last is not None
            if throttled:
                with self._lock:
                    self.throttled += 1
                if self.limiter is not None and last.retry_after_s:
                    self.limiter.pause(min(last.retry_after_s, self.retry.retry_after_cap_s))
            if last.kind in f.FATAL_FOR_MODEL:
                self._fatal(last)
                return self._failed(request, key, last.kind, last.message, tries, start)
            if not last.retryable:
                return self._failed(request, key, last.kind, last.message, tries, start)
            hint = last.retry_after_s
            if hint is not None and hint > self.retry.retry_after_cap_s:
                message = (
                    f"the provider asked to retry after {hint:.0f} s, beyond retry_after_cap_s "
                    f"({self.retry.retry_after_cap_s:.0f} s): {last.message}"
                )
                return self._failed(request, key, f.RETRY_AFTER_TOO_LONG, message, tries, start)
            if retry == self.retry.max_retries:
                break
            with self._rng_lock:
                delay = backoff_delay(self.retry, retry, hint, self._rng)
            if self._sleep(self.cancel, delay):
                return self._failed(request, key, f.INTERRUPTED, "interrupted during a backoff", tries, start)
        assert last is not None
        return self._failed(request, key, last.kind, f"after {tries} tries: {last.message}", tries, start)

    def _settle(self, estimate: float, actual: float) -> None:
        if self.budget is not None:
            self.budget.settle(estimate, actual)

    def _fatal(self, failure: f.CallFailure) -> None:
        with self._lock:
            self._fatal_streak += 1
            if self._fatal_streak < self.stop_after_errors or self.stopped is not None:
                return
            status = f"HTTP {failure.status}" if failure.status is not None else failure.kind
            self.stopped = (
                f"model {self.name!r} stopped after {self._fatal_streak} consecutive {status} "
                f"({failure.kind}) answers: {failure.message}"
            )
        self.on_event(safe_error(self.stopped))
        self.wake()

    def wake(self) -> None:
        self.gate.wake()
        if self.limiter is not None:
            self.limiter.wake()

    def close(self) -> None:
        """Close the model's HTTP client, so calls still in flight fail at once."""
        close = getattr(self.model, "close", None)
        if callable(close):
            close()


def attempt_row(outcome: Outcome, model: str) -> dict[str, Any]:
    """One attempts-table row (keys and order exactly as ATTEMPTS_SCHEMA); ``model`` is
    the model entry's label (``ModelSpec.name``)."""
    request, completion = outcome.request, outcome.completion
    return {
        "attempt_key": outcome.key,
        "model": model,
        "instance_id": request.instance_id,
        "family": request.family,
        "sample": int(request.sample),
        "turn": int(request.turn),
        "mode": request.mode,
        "prompt_sha256": prompt_sha256(request.messages),
        "response": completion.text if completion else None,
        "finish_reason": completion.finish_reason if completion else None,
        "input_tokens": int(completion.input_tokens) if completion else 0,
        "output_tokens": int(completion.output_tokens) if completion else 0,
        "latency_s": float(completion.latency_s) if completion else float(outcome.latency_s),
        "cost_usd": float(completion.cost_usd) if completion else 0.0,
        "error": outcome.error,
        "error_class": outcome.error_class,
        "tries": int(outcome.tries),
        "reused": outcome.reused,
        "via_batch": outcome.via_batch,
        "served_model": completion.served_model if completion else None,
        "system_fingerprint": completion.system_fingerprint if completion else None,
    }


class TrackedPool:
    """A runner's thread pool that remembers every future it was given, so an
    interrupt can wind them all down, even before :meth:`Evaluation.run` waits."""

    def __init__(self, pool: ThreadPoolExecutor, futures: list[Future[Any]]) -> None:
        self._pool = pool
        self._futures = futures

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        fut = self._pool.submit(fn, *args, **kwargs)
        self._futures.append(fut)
        return fut


@dataclass
class Evaluation:
    """Several models at once, each with its own pool, limits and progress; one cancel.

    ``on_progress(model name, done)`` is called from the calling thread only. Callers
    submit work and then :meth:`run`; wrapping both in :meth:`guard` makes a Ctrl-C
    that lands between the first submit and the wait stop the threads too (they would
    otherwise finish every attempt before the process could exit).
    """

    grace_s: float = 10.0
    on_progress: Callable[[str, int], None] | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    _pools: list[ThreadPoolExecutor] = field(default_factory=list)
    _runners: list[ModelRunner] = field(default_factory=list)
    _futures: list[Future[Any]] = field(default_factory=list)

    def pool(self, runner: ModelRunner, workers: int) -> TrackedPool:
        runner.cancel = self.cancel
        pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix=f"hb-{runner.name}"[:40])
        self._pools.append(pool)
        self._runners.append(runner)
        return TrackedPool(pool, self._futures)

    @contextmanager
    def guard(self, total: int) -> Iterator[None]:
        """Around submitting and :meth:`run`: any interrupt stops every try, keeps the
        answers that arrive within the grace period and raises EvaluationInterrupted."""
        try:
            yield
        except EvaluationInterrupted:
            raise
        except BaseException as err:
            owner = dict.fromkeys(self._futures, "")
            self._wind_down(owner, total)
            if isinstance(err, Exception):
                raise  # an error (a broken store, a bug) is not an interrupt: keep its name
            raise EvaluationInterrupted(self._answered_count(owner), total) from None

    def stop(self) -> None:
        """Stop new tries everywhere (safe from any thread)."""
        self.cancel.set()
        for runner in self._runners:
            runner.wake()

    def run(
        self,
        work: Sequence[tuple[str, Sequence[Future[Any]]]],
        total: int,
    ) -> None:
        """Wait for every future of every model; on an interrupt stop, keep what arrives
        within the grace period, close clients, and raise EvaluationInterrupted."""
        owner = {fut: name for name, futs in work for fut in futs}
        done_per: dict[str, int] = {name: 0 for name, _ in work}
        # completions arrive through a queue: O(1) per future (concurrent.futures.wait
        # over thousands of pending futures costs O(n) per call)
        finished: queue.SimpleQueue[Future[Any]] = queue.SimpleQueue()
        for fut in owner:
            fut.add_done_callback(finished.put)
        left = len(owner)
        try:
            while left and not self.cancel.is_set():
                try:
                    fut = finished.get(timeout=0.25)
                except queue.Empty:
                    continue
                left -= 1
                fut.result()  # a broken store propagates here
                name = owner[fut]
                done_per[name] += 1
                if self.on_progress is not None:
                    self.on_progress(name, done_per[name])
        except BaseException as err:
            self._wind_down(owner, total)
            if isinstance(err, Exception):
                raise  # a broken store or a bug surfaces as itself, after the wind-down
            raise EvaluationInterrupted(self._answered_count(owner), total) from None
        if self.cancel.is_set():  # stopped from another thread (a signal handler, a test)
            self._wind_down(owner, total)
            raise EvaluationInterrupted(self._answered_count(owner), total)
        for pool in self._pools:
            pool.shutdown(wait=True)

    def _wind_down(self, owner: dict[Future[Any], str], total: int) -> None:
        """Stop new tries, keep answers that arrive within the grace period, then close
        clients so what is still in flight fails at once, and join every thread."""
        self.stop()
        deadline = time.monotonic() + self.grace_s
        remaining = {fut for fut in owner if not fut.done()}
        while remaining and time.monotonic() < deadline:
            _, remaining = wait(remaining, timeout=min(0.25, max(0.0, deadline - time.monotonic())))
        for runner in self._runners:
            runner.close()
        for pool in self._pools:
            pool.shutdown(wait=True, cancel_futures=True)

    @staticmethod
    def _answered_count(owner: dict[Future[Any], str]) -> int:
        return sum(
            1
            for fut in owner
            if fut.done() and not fut.cancelled() and fut.exception() is None and _answered(fut.result())
        )


def _answered(result: Any) -> bool:
    if isinstance(result, Outcome):
        return result.answered
    if isinstance(result, list):
        return bool(result) and all(isinstance(o, Outcome) and o.answered for o in result)
    return False


def split_stored(
    runner: ModelRunner, requests: Sequence[AttemptRequest]
) -> tuple[list[str], list[Outcome | None], list[int]]:
    """(keys, outcomes with the reusable stored answers filled in, indices still to do)."""
    keys = [runner.key(r) for r in requests]
    outcomes: list[Outcome | None] = [None] * len(requests)
    todo: list[int] = []
    for i, (request, key) in enumerate(zip(requests, keys, strict=True)):
        stored = runner.lookup(key)
        if stored is not None:
            outcomes[i] = Outcome(request, key, stored, reused=True)
        else:
            todo.append(i)
    return keys, outcomes, todo


def submit_attempts(
    evaluation: Evaluation, runner: ModelRunner, requests: Sequence[AttemptRequest]
) -> tuple[list[Outcome | None], list[Future[Any]], list[int]]:
    """Stored answers at once; the rest as futures on the runner's own pool.

    Returns (outcomes with stored ones filled in, futures, the indices they answer).
    """
    keys, outcomes, todo = split_stored(runner, requests)
    futures: list[Future[Any]] = []
    if todo:
        pool = evaluation.pool(runner, min(runner.max_concurrency, len(todo)))
        futures = [pool.submit(runner.call, requests[i], keys[i]) for i in todo]
    return outcomes, futures, todo


def evaluate(
    requests: Sequence[AttemptRequest],
    runner: ModelRunner,
    *,
    grace_s: float = 10.0,
    on_progress: Callable[[int], None] | None = None,
) -> list[Outcome]:
    """One model's attempts, in request order (the single-model form of :class:`Evaluation`)."""
    evaluation = Evaluation(
        grace_s=grace_s,
        on_progress=(lambda _name, done: on_progress(done)) if on_progress else None,
        cancel=runner.cancel,
    )
    with evaluation.guard(len(requests)):
        outcomes, futures, todo = submit_attempts(evaluation, runner, requests)
        reused = len(requests) - len(todo)
        if on_progress is not None and reused:
            on_progress(reused)
        if evaluation.on_progress is not None:
            evaluation.on_progress = lambda _name, done: on_progress(reused + done)  # type: ignore[misc]
        evaluation.run([(runner.name, futures)], len(requests))
    for i, fut in zip(todo, futures, strict=True):
        outcomes[i] = fut.result()
    return [o for o in outcomes if o is not None]


# --- multi-turn conversations ------------------------------------------------------------


class Conversation(Protocol):
    """An episode whose next request depends on the last answer.

    ``first()`` gives the opening request; ``next(completion)`` the following one (the
    whole history in its messages, ``turn`` one higher), or None when the episode ends.
    Implementations must be deterministic in the answers they see: a rerun replays the
    stored turns without calls and continues where the last run stopped.
    """

    def first(self) -> AttemptRequest: ...

    def next(self, completion: Completion) -> AttemptRequest | None: ...


def run_conversation(runner: ModelRunner, conversation: Conversation, max_turns: int = 1000) -> list[Outcome]:
    """Every turn of one conversation; stops at the first turn that failed (the next run
    resumes there, paying only for turns not yet stored)."""
    turns: list[Outcome] = []
    request: AttemptRequest | None = conversation.first()
    while request is not None and len(turns) < max_turns:
        outcome = runner.attempt(request)
        turns.append(outcome)
        if outcome.completion is None:
            break
        request = conversation.next(outcome.completion)
    return turns


def converse(
    conversations: Sequence[Conversation],
    runner: ModelRunner,
    *,
    grace_s: float = 10.0,
    max_turns: int = 1000,
    on_progress: Callable[[int], None] | None = None,
) -> list[list[Outcome]]:
    """Run many conversations of one model concurrently; turns per conversation, in order."""
    evaluation = Evaluation(
        grace_s=grace_s,
        on_progress=(lambda _name, done: on_progress(done)) if on_progress else None,
        cancel=runner.cancel,
    )
    if not conversations:
        return []
    with evaluation.guard(len(conversations)):
        pool = evaluation.pool(runner, min(runner.max_concurrency, len(conversations)))
        futures = [pool.submit(run_conversation, runner, c, max_turns) for c in conversations]
        evaluation.run([(runner.name, futures)], len(conversations))
    return [fut.result() for fut in futures]
