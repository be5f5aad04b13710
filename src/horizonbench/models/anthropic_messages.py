"""Anthropic Messages API.

No sampling parameters are sent (neither ``temperature`` nor ``top_p``): the API version
the installed SDK (2.x) speaks, 2026-10-21, rejects them with HTTP 400 on every model,
even at their defaults, and the SDK has dropped them from ``messages.create``. Anthropic
models therefore sample with their own defaults whatever the config says. The request's
temperature and top_p still enter the attempt key, so changing them never reuses old
answers, and :meth:`AnthropicModel.identity` records ``"sampling": "provider-default"``
so tables can tell these attempts apart.

System messages go to the top-level ``system`` field (the API has no system role);
several are joined with blank lines. The SDK's retries are off: the engine retries.
"""

from __future__ import annotations

from typing import Any

import anthropic
from anthropic.types import Message as AnthropicMessage

from horizonbench.core.errors import ConfigError
from horizonbench.core.text import clean_text
from horizonbench.core.types import Completion
from horizonbench.models import failures as f
from horizonbench.models.base import AttemptRequest
from horizonbench.models.sdk_errors import SdkCalls
from horizonbench.schemas.config import ModelSpec

#: passed explicitly so ANTHROPIC_BASE_URL cannot silently redirect calls
ANTHROPIC_BASE_URL = "https://api.anthropic.com"

_STOP_REASONS = {"end_turn": "stop", "max_tokens": "length"}


def map_stop_reason(stop_reason: str | None) -> str:
    """Anthropic's stop reasons in OpenAI's vocabulary, so tables compare across providers."""
    if stop_reason is None:
        return "unknown"
    return _STOP_REASONS.get(stop_reason, stop_reason)


class AnthropicModel(SdkCalls):
    """Provider ``anthropic``."""

    response_type = AnthropicMessage

    def __init__(self, spec: ModelSpec, api_key: str | None) -> None:
        if spec.provider != "anthropic" or not spec.model:
            raise ValueError(f"model {spec.name!r} is not an Anthropic model")
        if not api_key:
            raise ConfigError(f"model {spec.name!r}: provider 'anthropic' needs an API key")
        self.name = spec.name
        self.spec = spec
        self._model: str = spec.model
        self._base_url = spec.base_url or ANTHROPIC_BASE_URL
        self._secret = api_key
        self._price = spec.price()
        self.client = anthropic.Anthropic(
            api_key=api_key,
            base_url=self._base_url,
            timeout=spec.timeout_s,
            max_retries=0,
        )

    def identity(self) -> dict[str, Any]:
        return {
            "provider": "anthropic",
            "model": self._model,
            "base_url": self._base_url,
            "sampling": "provider-default",
        }

    def body(self, request: AttemptRequest) -> dict[str, Any]:
        """The request parameters, as sent directly or as one request of a batch."""
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        body: dict[str, Any] = {
            "model": self._model,
            "max_tokens": request.max_tokens,
            "messages": [
                {"role": m.role, "content": m.content} for m in request.messages if m.role != "system"
            ],
        }
        if system:
            body["system"] = system
        return body

    def _create(self, body: dict[str, Any]) -> Any:
        return self.client.messages.create(**body)

    def to_completion(self, response: Any, latency: float, *, batch: bool = False) -> Completion:
        content = getattr(response, "content", None)
        usage = getattr(response, "usage", None)
        input_tokens = int(getattr(usage, "input_tokens", 0) or 0)
        output_tokens = int(getattr(usage, "output_tokens", 0) or 0)
        if content is None:
            billed = self._price.cost(input_tokens, output_tokens, batch=batch)
            raise f.CallFailure(f.MALFORMED, "the response has no content", cost_usd=billed)
        text = "".join(
            getattr(block, "text", "") or "" for block in content if getattr(block, "type", None) == "text"
        )
        return Completion(
            text=clean_text(text),
            finish_reason=clean_text(map_stop_reason(getattr(response, "stop_reason", None))),
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            latency_s=latency,
            cost_usd=self._price.cost(input_tokens, output_tokens, batch=batch),
            served_model=clean_text(getattr(response, "model", None)) or None,
        )

    def close(self) -> None:
        """Release pooled HTTP connections; calls in flight fail at once."""
        self.client.close()

    def __repr__(self) -> str:
        return f"AnthropicModel(name={self.name!r}, model={self._model!r})"
