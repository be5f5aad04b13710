"""Run many attempts against one model: reuse stored answers, rate-limit, record failures.

Design points a caller relies on:

* Rows come back in the order of ``requests``, whatever order threads finish in, so
  tables are byte-identical between runs.
* A stored answer is reused without a call and without consuming rate-limit budget;
  its row reports the stored tokens, latency and cost (what the answer cost when it
  was made) with ``reused=True``.
* A failed call never raises: the row gets ``response=None`` and the error text, and
  nothing is stored, so the next run retries it. Only interrupts (Ctrl-C) and store
  failures propagate; queued work is cancelled and every answer received so far is
  already committed.
* Token estimate for the limiter: prompt characters / 4 + ``max_tokens``. Providers
  count the requested ``max_tokens`` against a tokens-per-minute quota when the
  request arrives, so reserving it keeps us under the quota rather than tripping it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from typing import Any

from horizonbench.core.types import Completion
from horizonbench.models.attempt_store import AttemptStore, attempt_key, prompt_sha256
from horizonbench.models.base import AttemptRequest, Model, ModelCallError
from horizonbench.models.rate_limit import RateLimiter

_MAX_ERROR_CHARS = 500

# Last line of defence for exceptions no provider wrapped: mask anything that looks
# like a credential before it reaches a table.
_SECRET_PATTERNS = [
    re.compile(r"(?i)(bearer\s+)[^\s'\",}]+"),
    re.compile(r"(?i)((?:x-)?api[-_]?key['\"]?\s*[:=]\s*['\"]?)[^\s'\",}]+"),
]


def _safe_error(err: BaseException) -> str:
    if isinstance(err, ModelCallError):
        text = str(err) or "ModelCallError"
    else:
        text = f"{type(err).__name__}: {err}"
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(r"\1[redacted]", text)
    return text[:_MAX_ERROR_CHARS]


def estimate_tokens(request: AttemptRequest) -> int:
    """Tokens to reserve against a TPM budget: ~4 characters per prompt token + max_tokens."""
    chars = sum(len(m.content) for m in request.messages)
    return chars // 4 + request.max_tokens


def _row(
    request: AttemptRequest,
    model_name: str,
    key: str,
    completion: Completion | None,
    *,
    error: str | None = None,
    latency_s: float = 0.0,
    reused: bool = False,
) -> dict[str, Any]:
    # keys and order exactly as ATTEMPTS_SCHEMA
    return {
        "attempt_key": key,
        "model": model_name,
        "instance_id": request.instance_id,
        "family": request.family,
        "sample": int(request.sample),
        "prompt_sha256": prompt_sha256(request.messages),
        "response": completion.text if completion else None,
        "finish_reason": completion.finish_reason if completion else None,
        "input_tokens": int(completion.input_tokens) if completion else 0,
        "output_tokens": int(completion.output_tokens) if completion else 0,
        "latency_s": float(completion.latency_s) if completion else float(latency_s),
        "cost_usd": float(completion.cost_usd) if completion else 0.0,
        "error": error,
        "reused": reused,
    }


def evaluate(
    requests: Sequence[AttemptRequest],
    model: Model,
    store: AttemptStore,
    *,
    limiter: RateLimiter | None,
    max_concurrency: int,
    on_progress: Callable[[int], None] | None = None,
) -> list[dict[str, Any]]:
    """One attempts-table row per request, in request order.

    ``on_progress(done)`` gets the cumulative number of finished attempts (reused ones
    count at once). It is always called from the calling thread, so it need not be
    thread-safe.
    """
    if max_concurrency < 1:
        raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
    identity = model.identity()
    keys = [
        attempt_key(identity, r.messages, r.temperature, r.top_p, r.max_tokens, r.sample) for r in requests
    ]
    rows: list[dict[str, Any] | None] = [None] * len(requests)

    todo: list[int] = []
    for i, (request, key) in enumerate(zip(requests, keys, strict=True)):
        stored = store.get(key)
        if stored is not None:
            rows[i] = _row(request, model.name, key, stored, reused=True)
        else:
            todo.append(i)
    done = len(requests) - len(todo)
    if on_progress is not None and done:
        on_progress(done)

    def attempt(i: int) -> dict[str, Any]:
        request, key = requests[i], keys[i]
        if limiter is not None:
            limiter.acquire(estimate_tokens(request))
        start = time.perf_counter()
        try:
            completion = model.complete(request)
        except Exception as err:  # a provider failing must not stop the batch
            return _row(
                request,
                model.name,
                key,
                None,
                error=_safe_error(err),
                latency_s=time.perf_counter() - start,
            )
        store.put(key, completion)
        return _row(request, model.name, key, completion)

    if todo:
        pool = ThreadPoolExecutor(
            max_workers=min(max_concurrency, len(todo)), thread_name_prefix="hb-attempt"
        )
        try:
            futures: dict[Future[dict[str, Any]], int] = {pool.submit(attempt, i): i for i in todo}
            for future in as_completed(futures):
                rows[futures[future]] = future.result()
                done += 1
                if on_progress is not None:
                    on_progress(done)
        except BaseException:
            # on an interrupt, drop queued attempts and return at once rather than wait
            # (up to timeout_s) for calls in flight; their answers may still get stored
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)

    finished = [row for row in rows if row is not None]
    assert len(finished) == len(requests), "every attempt yields a row"
    return finished
