"""Backoff between tries of one attempt: exponential with full jitter, hints honoured.

The SDKs' own retries are switched off: they would retry behind the rate limiter's
back and spend a sub-second Retry-After hint's whole budget in a second or two. Ours
pass the limiter on every try, wait at least what the provider asked, and spread
retries at random (full jitter) so threads that failed together do not return together.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    #: tries after the first; a failure still retryable after these ends the attempt
    max_retries: int = 8
    #: the first backoff is drawn from [0, base_s]; each retry doubles the ceiling
    base_s: float = 1.0
    #: ceiling of one backoff
    max_backoff_s: float = 60.0
    #: a Retry-After hint longer than this ends the attempt instead of holding a thread
    retry_after_cap_s: float = 120.0

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.base_s < 0 or self.max_backoff_s < 0 or self.retry_after_cap_s < 0:
            raise ValueError("retry settings must be non-negative")


def backoff_delay(policy: RetryPolicy, retry: int, hint_s: float | None, rng: random.Random) -> float:
    """Seconds to wait before retry number ``retry`` (0-based).

    Full jitter: uniform in [0, min(max_backoff, base * 2**retry)]; never less than the
    provider's hint. The caller has already refused hints above the cap.
    """
    ceiling = min(policy.max_backoff_s, policy.base_s * (2.0 ** min(retry, 62)))
    delay = rng.uniform(0.0, ceiling)
    if hint_s is not None:
        delay = max(delay, hint_s)
    return delay
