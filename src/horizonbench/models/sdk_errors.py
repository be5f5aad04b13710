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
import time
from typing import Any, ClassVar

import httpx
import pydantic

from horizonbench.core.types import Completion
from horizonbench.models import failures as f
from horizonbench.models.base import AttemptRequest

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


class SdkCalls:
    """The call around the SDK that both provider models make the same way: time it, and
    turn anything it raises into a scrubbed :class:`CallFailure`; the same for a batch
    result line. A model says how it calls its SDK (:meth:`_create`), which SDK type a
    result line validates into (``response_type``), and how a response becomes a
    :class:`Completion` (``body``, ``to_completion``)."""

    response_type: ClassVar[type[pydantic.BaseModel]]
    _secret: str | None

    def _create(self, body: dict[str, Any]) -> Any:
        raise NotImplementedError

    def body(self, request: AttemptRequest) -> dict[str, Any]:
        raise NotImplementedError

    def to_completion(self, response: Any, latency: float, *, batch: bool = False) -> Completion:
        raise NotImplementedError

    def complete(self, request: AttemptRequest) -> Completion:
        start = time.perf_counter()
        try:
            response = self._create(self.body(request))
        except Exception as err:  # anything at all: classified and scrubbed
            raise classify_sdk_error(err, self._secret) from None
        return self.to_completion(response, time.perf_counter() - start)

    def completion_from_json(self, body: dict[str, Any], *, batch: bool = False) -> Completion:
        """A response body from a batch result line."""
        try:
            response = self.response_type.model_validate(body)
        except Exception as err:
            raise classify_sdk_error(err, self._secret) from None
        return self.to_completion(response, 0.0, batch=batch)
