"""Anthropic Messages API.

No sampling parameters are sent (neither ``temperature`` nor ``top_p``): the API version
the installed SDK (2.x) speaks, 2026-10-21, rejects them with HTTP 400 on every model,
even at their defaults, and the SDK has dropped them from ``messages.create``. Anthropic
models therefore sample with their own defaults whatever the config says. The request's
temperature and top_p still enter the attempt key, so changing them never reuses old
answers, and :meth:`AnthropicModel.identity` records ``"sampling": "provider-default"``
so tables can tell these attempts apart.

System messages go to the top-level ``system`` field (the API has no system role);
several are joined with blank lines.
"""

from __future__ import annotations

import time
from typing import Any

import anthropic

from horizonbench.core.errors import ConfigError
from horizonbench.core.types import Completion
from horizonbench.models.base import AttemptRequest, ModelCallError
from horizonbench.schemas.config import ModelSpec

#: passed explicitly so ANTHROPIC_BASE_URL cannot silently redirect calls
ANTHROPIC_BASE_URL = "https://api.anthropic.com"

_STOP_REASONS = {"end_turn": "stop", "max_tokens": "length"}
_MAX_ERROR_CHARS = 500


def _describe_error(err: BaseException, secret: str) -> str:
    """A one-line account of a failed call that is safe to store: never the key."""
    status = getattr(err, "status_code", None)
    head = f"{type(err).__name__}" + (f" (HTTP {status})" if status is not None else "")
    return f"{head}: {err}".replace(secret, "[redacted]")[:_MAX_ERROR_CHARS]


def map_stop_reason(stop_reason: str | None) -> str:
    """Anthropic's stop reasons in OpenAI's vocabulary, so tables compare across providers."""
    if stop_reason is None:
        return "unknown"
    return _STOP_REASONS.get(stop_reason, stop_reason)


class AnthropicModel:
    """Provider ``anthropic``; retries with backoff are the SDK's (``spec.max_retries``)."""

    def __init__(self, spec: ModelSpec, api_key: str | None) -> None:
        if spec.provider != "anthropic" or not spec.model:
            raise ValueError(f"model {spec.name!r} is not an Anthropic model")
        if not api_key:
            raise ConfigError(f"model {spec.name!r}: provider 'anthropic' needs an API key")
        self.name = spec.name
        self._spec = spec
        self._model: str = spec.model
        self._base_url = spec.base_url or ANTHROPIC_BASE_URL
        self._secret = api_key
        self._client = anthropic.Anthropic(
            api_key=api_key,
            base_url=self._base_url,
            timeout=spec.timeout_s,
            max_retries=spec.max_retries,
        )

    def identity(self) -> dict[str, Any]:
        return {
            "provider": "anthropic",
            "model": self._model,
            "base_url": self._base_url,
            "sampling": "provider-default",
        }

    def complete(self, request: AttemptRequest) -> Completion:
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        kwargs: dict[str, Any] = {
            "model": self._model,
            "max_tokens": request.max_tokens,
            "messages": [
                {"role": m.role, "content": m.content} for m in request.messages if m.role != "system"
            ],
        }
        if system:
            kwargs["system"] = system
        start = time.perf_counter()
        try:
            response = self._client.messages.create(**kwargs)
            return self._to_completion(response, time.perf_counter() - start)
        except Exception as err:  # anything at all, malformed replies too: scrub the message
            raise ModelCallError(_describe_error(err, self._secret)) from None

    def _to_completion(self, response: Any, latency: float) -> Completion:
        text = "".join(block.text for block in response.content if getattr(block, "type", None) == "text")
        usage = response.usage
        input_tokens = int(getattr(usage, "input_tokens", 0) or 0)
        output_tokens = int(getattr(usage, "output_tokens", 0) or 0)
        cost = self._spec.cost_usd(input_tokens, output_tokens)
        return Completion(
            text=text,
            finish_reason=map_stop_reason(response.stop_reason),
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            latency_s=latency,
            cost_usd=cost,
        )

    def close(self) -> None:
        """Release pooled HTTP connections (optional: the pool also dies with the process)."""
        self._client.close()

    def __repr__(self) -> str:
        return f"AnthropicModel(name={self.name!r}, model={self._model!r})"
