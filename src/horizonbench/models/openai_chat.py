"""OpenAI Chat Completions, for OpenAI itself and for OpenAI-compatible servers (vLLM, ...).

The SDK's own retries are off (``max_retries=0``): every try goes through the engine's
retry layer and rate limiter. A failed call raises a classified, key-free
:class:`CallFailure`.
"""

from __future__ import annotations

from typing import Any

import openai
from openai.types.chat import ChatCompletion

from horizonbench.core.errors import ConfigError
from horizonbench.core.text import clean_text
from horizonbench.core.types import Completion
from horizonbench.models import failures as f
from horizonbench.models.base import AttemptRequest
from horizonbench.models.sdk_errors import SdkCalls
from horizonbench.schemas.config import ModelSpec

#: used when a spec gives no base_url; passed explicitly so OPENAI_BASE_URL cannot
#: silently redirect calls (and make the attempt identity lie about where answers came from)
OPENAI_BASE_URL = "https://api.openai.com/v1"

#: placeholder key for compatible servers that need none (the SDK insists on some key)
NO_KEY = "EMPTY"


class OpenAIChatModel(SdkCalls):
    """Providers ``openai`` and ``openai_compatible``.

    Newer OpenAI models reject ``max_tokens``, so provider ``openai`` sends
    ``max_completion_tokens``; compatible servers mostly only know ``max_tokens``.
    The seed is passed on (reduced mod 2**31, which every server accepts); providers
    treat it as best effort, so reproducibility still rests on the attempt store.
    """

    endpoint = "/v1/chat/completions"
    response_type = ChatCompletion

    def __init__(self, spec: ModelSpec, api_key: str | None) -> None:
        if spec.provider not in ("openai", "openai_compatible") or not spec.model:
            raise ValueError(f"model {spec.name!r} is not an OpenAI chat model")
        if spec.provider == "openai" and not api_key:
            raise ConfigError(f"model {spec.name!r}: provider 'openai' needs an API key")
        self.name = spec.name
        self.spec = spec
        self._model: str = spec.model
        self._base_url = spec.base_url or OPENAI_BASE_URL
        self._secret = api_key or None
        self._price = spec.price()
        self.client = openai.OpenAI(
            api_key=api_key or NO_KEY,
            base_url=self._base_url,
            timeout=spec.timeout_s,
            max_retries=0,
        )

    def identity(self) -> dict[str, Any]:
        return {"provider": self.spec.provider, "model": self._model, "base_url": self._base_url}

    def body(self, request: AttemptRequest) -> dict[str, Any]:
        """The request body, as sent directly or as one line of a batch."""
        body: dict[str, Any] = {
            "model": self._model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "temperature": request.temperature,
            "top_p": request.top_p,
            "seed": request.seed % 2**31,
        }
        if self.spec.provider == "openai":
            body["max_completion_tokens"] = request.max_tokens
        else:
            body["max_tokens"] = request.max_tokens
        return body

    def _create(self, body: dict[str, Any]) -> Any:
        return self.client.chat.completions.create(**body)

    def to_completion(self, response: Any, latency: float, *, batch: bool = False) -> Completion:
        choices = getattr(response, "choices", None)
        usage = getattr(response, "usage", None)
        input_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        output_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        if not choices:
            billed = self._price.cost(input_tokens, output_tokens, batch=batch)
            raise f.CallFailure(f.MALFORMED, "the response has no choices", cost_usd=billed)
        choice = choices[0]
        message = getattr(choice, "message", None)
        return Completion(
            # content is None for refusals and tool calls: an empty answer fails parsing
            text=clean_text(getattr(message, "content", None) or ""),
            finish_reason=clean_text(getattr(choice, "finish_reason", None) or "unknown"),
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            latency_s=latency,
            cost_usd=self._price.cost(input_tokens, output_tokens, batch=batch),
            served_model=clean_text(getattr(response, "model", None)) or None,
            system_fingerprint=clean_text(getattr(response, "system_fingerprint", None)) or None,
        )

    def close(self) -> None:
        """Release pooled HTTP connections; calls in flight fail at once."""
        self.client.close()

    def __repr__(self) -> str:
        return f"OpenAIChatModel(name={self.name!r}, model={self._model!r})"
