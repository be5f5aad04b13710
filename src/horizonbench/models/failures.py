"""Why a model call failed, in words the retry layer and the tables share.

Providers raise :class:`CallFailure` with one of the kinds below; the engine decides
from the kind alone whether to retry, to stop the model, or to give up on the attempt.
Keeping the vocabulary in one place means an ``error_class`` in the attempts table means
the same thing for every provider.
"""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Mapping

#: the provider asked us to slow down (HTTP 429)
RATE_LIMIT = "rate_limit"
#: HTTP 5xx (500, 502, 503, 529 overloaded, ...)
SERVER_ERROR = "server_error"
#: no complete answer within ``timeout_s``
TIMEOUT = "timeout"
#: connection refused, reset or dropped before an answer
CONNECTION = "connection"
#: an HTTP 200 whose body is not a usable answer (bad JSON, no choices)
MALFORMED = "malformed"
#: HTTP 400/413/422: the request itself is wrong; retrying sends the same bytes
BAD_REQUEST = "bad_request"
#: HTTP 401: the key is wrong
AUTH = "auth"
#: HTTP 403: the key may not use this model
PERMISSION = "permission"
#: HTTP 404: no such model or endpoint
NOT_FOUND = "not_found"
#: a Retry-After hint longer than the configured cap
RETRY_AFTER_TOO_LONG = "retry_after_too_long"
#: the model was stopped after repeated auth/permission/not-found answers
MODEL_STOPPED = "model_stopped"
#: ``evaluation.budget_usd`` was reached before this attempt was sent
BUDGET = "budget"
#: Ctrl-C / SIGTERM arrived before the attempt was answered
INTERRUPTED = "interrupted"
#: a batch job reported this line failed, expired or was cancelled
BATCH_FAILED = "batch_failed"
#: anything else a provider raised
OTHER = "other"

#: worth another try after a backoff
RETRYABLE = frozenset({RATE_LIMIT, SERVER_ERROR, TIMEOUT, CONNECTION, MALFORMED})
#: say nothing about the prompt, everything about the model entry: a few in a row stop it
FATAL_FOR_MODEL = frozenset({AUTH, PERMISSION, NOT_FOUND})


class CallFailure(Exception):
    """One failed call, classified. ``message`` is safe to store (no secrets)."""

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        status: int | None = None,
        retry_after_s: float | None = None,
        cost_usd: float = 0.0,
        limit: str | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.retry_after_s = retry_after_s
        #: for a 429, which limit the provider says bound: "tokens", "requests" or None
        #: (not said); a token limit is paced by the rate limiter, not by concurrency
        self.limit = limit
        #: what the provider billed for the call all the same (a 200 whose body reported
        #: usage but held no usable answer); the budget counts it as paid
        self.cost_usd = cost_usd

    @property
    def message(self) -> str:
        return str(self.args[0])

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE


def kind_for_status(status: int) -> str:
    """The failure kind of an HTTP status a provider answered with."""
    if status == 429:
        return RATE_LIMIT
    if status == 401:
        return AUTH
    if status == 403:
        return PERMISSION
    if status == 404:
        return NOT_FOUND
    if status == 408:
        return TIMEOUT
    if status >= 500:
        return SERVER_ERROR
    if 400 <= status < 500:
        return BAD_REQUEST
    return OTHER


#: how providers name the limit a 429 hit: OpenAI "Rate limit reached for ... on tokens per
#: min (TPM)", Anthropic "rate limit of 50,000 input tokens per minute", "... requests per
#: minute"; the fake server says "for tokens per min"
_LIMIT_NAMED = re.compile(
    r"\b(?:(?:input|output)\s+)?(?P<what>tokens?|requests?)\s+per\s+(?:min|minute|day)\b"
    r"|\((?P<short>[IO]?TPM|RPM|TPD|RPD)\)",
    re.IGNORECASE,
)


def limit_named(message: str, error_type: str | None = None) -> str | None:
    """Which limit a 429 says bound: "tokens", "requests", or None when it does not say.

    OpenAI's error body has ``type`` "tokens" or "requests" (also "tokens_usage_based");
    otherwise the message names the unit. None keeps the cautious default (the caller
    treats the 429 as one it cannot attribute)."""
    if error_type:
        kind = error_type.lower()
        if kind.startswith("token"):
            return "tokens"
        if kind.startswith("request"):
            return "requests"
    match = _LIMIT_NAMED.search(message)
    if match is None:
        return None
    word = (match.group("what") or match.group("short")).lower()
    return "requests" if word.startswith(("request", "r")) else "tokens"


def retry_after_seconds(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """The provider's hint in seconds: ``retry-after-ms``, else ``retry-after`` (seconds or
    an HTTP date). None when absent or unreadable; never negative."""
    if not headers:
        return None
    lower = {str(k).lower(): str(v) for k, v in headers.items()}
    ms = lower.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = lower.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))
