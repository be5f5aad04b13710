"""Client-side rate limiting, so a run stays under a provider's per-minute quotas.

The SDKs retry on HTTP 429, but hammering a provider until it pushes back wastes
retries (and, for some providers, counts against the quota). A token bucket per budget
keeps the steady rate at or below the configured requests and tokens per minute.

Burst size: each bucket holds :data:`BURST_SECONDS` (10 s) worth of its per-minute
budget, i.e. one sixth of a minute's budget, and at least one request. Providers
enforce "per minute" limits over shorter windows, so letting a whole minute's budget
out at once would trip them; ten seconds' worth still lets a thread pool start at once.

A request larger than the token bucket (e.g. ``max_tokens`` above 10 s of TPM) waits
until the bucket is full and then drives it negative, so it is admitted instead of
blocking forever, and the debt delays later requests: the long-run rate still holds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from horizonbench.schemas.config import ModelSpec

#: each bucket holds this many seconds' worth of its per-minute budget
BURST_SECONDS = 10.0

# relative float slack, so a sleep of exactly the computed wait is always enough
_EPS = 1e-9


class _Bucket:
    def __init__(self, per_minute: float, now: float, min_capacity: float) -> None:
        if per_minute <= 0:
            raise ValueError(f"a rate limit must be positive, got {per_minute}")
        self.rate = per_minute / 60.0
        self.capacity = max(min_capacity, per_minute * BURST_SECONDS / 60.0)
        self.level = self.capacity
        self.stamp = now

    def refill(self, now: float) -> None:
        if now > self.stamp:
            self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
            self.stamp = now

    def wait_for(self, amount: float) -> float:
        """Seconds until ``amount`` (capped at capacity) is available; 0 if it is now."""
        need = min(amount, self.capacity)
        missing = need - self.level
        return 0.0 if missing <= _EPS * max(1.0, self.capacity) else missing / self.rate


class RateLimiter:
    """Thread-safe token buckets for requests and tokens per minute (either may be None).

    ``clock`` and ``sleep`` are injectable so tests drive time deterministically.
    """

    def __init__(
        self,
        requests_per_minute: float | None,
        tokens_per_minute: float | None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        now = clock()
        self._requests = _Bucket(requests_per_minute, now, 1.0) if requests_per_minute is not None else None
        self._tokens = _Bucket(tokens_per_minute, now, 1.0) if tokens_per_minute is not None else None

    @classmethod
    def for_spec(cls, spec: ModelSpec) -> RateLimiter | None:
        """The limiter a model spec asks for, or None when it sets no limit."""
        if spec.requests_per_minute is None and spec.tokens_per_minute is None:
            return None
        return cls(spec.requests_per_minute, spec.tokens_per_minute)

    @property
    def request_burst(self) -> float | None:
        return self._requests.capacity if self._requests else None

    @property
    def token_burst(self) -> float | None:
        return self._tokens.capacity if self._tokens else None

    def acquire(self, tokens: int = 0) -> None:
        """Block until one request and ``tokens`` tokens fit both budgets, then take them.

        Both are taken together under the lock, so a request never holds one budget
        while waiting for the other.
        """
        if tokens < 0:
            raise ValueError(f"tokens must be non-negative, got {tokens}")
        while True:
            with self._lock:
                now = self._clock()
                wait = 0.0
                for bucket, amount in ((self._requests, 1.0), (self._tokens, float(tokens))):
                    if bucket is not None:
                        bucket.refill(now)
                        wait = max(wait, bucket.wait_for(amount))
                if wait <= 0.0:
                    if self._requests is not None:
                        self._requests.level -= 1.0
                    if self._tokens is not None:
                        self._tokens.level -= float(tokens)
                    return
            # sleep outside the lock so other threads can refill and check meanwhile
            self._sleep(wait)
