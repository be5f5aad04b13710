"""Translate what the openai and anthropic SDKs raise into :class:`CallFailure`.

Both SDKs are generated from the same template (``APIStatusError`` with the HTTP
response, ``APITimeoutError`` a subclass of ``APIConnectionError``,
``APIResponseValidationError`` for bodies that do not fit), so one function serves
both. Messages are scrubbed of the API key before they leave here: they end up in
tables and logs.
"""

from __future__ import annotations

import json
import sys

import httpx
import pydantic

from horizonbench.models import failures as f

_MAX_ERROR_CHARS = 500


def scrub(text: str, secret: str | None) -> str:
    if secret:
        text = text.replace(secret, "[redacted]")
    return text[:_MAX_ERROR_CHARS]


def _sdk(name: str) -> tuple[type[BaseException], ...]:
    """The error class ``name`` of each SDK that is loaded. An SDK that was never
    imported raised nothing, so an offline run need not import either to classify."""
    return tuple(getattr(sys.modules[m], name) for m in ("openai", "anthropic") if m in sys.modules)


def classify_sdk_error(err: BaseException, secret: str | None) -> f.CallFailure:
    """One classified, secret-free failure for anything an SDK call raised."""
    if isinstance(err, f.CallFailure):
        return err
    status: int | None = getattr(err, "status_code", None)
    head = type(err).__name__ + (f" (HTTP {status})" if status is not None else "")
    message = scrub(f"{head}: {err}", secret)
    if isinstance(err, _sdk("APIStatusError")):
        assert status is not None
        headers = getattr(err.response, "headers", None)
        hint = f.retry_after_seconds(headers)
        kind = f.kind_for_status(status)
        limit = f.limit_named(message, getattr(err, "type", None)) if kind == f.RATE_LIMIT else None
        # Anthropic says 529 when overloaded; kind_for_status maps every 5xx alike
        return f.CallFailure(kind, message, status=status, retry_after_s=hint, limit=limit)
    if isinstance(err, (*_sdk("APITimeoutError"), httpx.TimeoutException)):
        return f.CallFailure(f.TIMEOUT, message)
    if isinstance(err, _sdk("APIResponseValidationError")):
        return f.CallFailure(f.MALFORMED, message, status=status)
    if isinstance(err, (*_sdk("APIConnectionError"), httpx.TransportError)):
        return f.CallFailure(f.CONNECTION, message)
    if isinstance(
        err, json.JSONDecodeError | pydantic.ValidationError | KeyError | TypeError | AttributeError
    ):
        return f.CallFailure(f.MALFORMED, message)
    return f.CallFailure(f.OTHER, message)
