"""OpenAI Chat Completions, for OpenAI itself and for OpenAI-compatible servers (vLLM, ...).

Retries with backoff are left to the SDK (``spec.max_retries``); what reaches us is a
failure for good, which becomes a ``ModelCallError`` so the engine records it and a
resume retries it. Error text is scrubbed of the API key before it leaves this module,
because it ends up in tables and logs.
"""

from __future__ import annotations

import time
from typing import Any

import openai

from horizonbench.core.errors import ConfigError
from horizonbench.core.types import Completion
from horizonbench.models.base import AttemptRequest, ModelCallError
from horizonbench.schemas.config import ModelSpec

#: used when a spec gives no base_url; passed explicitly so OPENAI_BASE_URL cannot
#: silently redirect calls (and make the attempt identity lie about where answers came from)
OPENAI_BASE_URL = "https://api.openai.com/v1"

#: placeholder key for compatible servers that need none (the SDK insists on some key)
NO_KEY = "EMPTY"

_MAX_ERROR_CHARS = 500


def _scrub(text: str, secret: str | None) -> str:
    if secret and secret != NO_KEY:
        text = text.replace(secret, "[redacted]")
    return text[:_MAX_ERROR_CHARS]


def describe_error(err: BaseException, secret: str | None) -> str:
    """A one-line account of a failed call that is safe to store: never the key."""
    status = getattr(err, "status_code", None)
    head = f"{type(err).__name__}" + (f" (HTTP {status})" if status is not None else "")
    return _scrub(f"{head}: {err}", secret)


class OpenAIChatModel:
    """Providers ``openai`` and ``openai_compatible``.

    Newer OpenAI models reject ``max_tokens``, so provider ``openai`` sends
    ``max_completion_tokens``; compatible servers mostly only know ``max_tokens``.
    The seed is passed on (reduced mod 2**31, which every server accepts); providers
    treat it as best effort, so reproducibility still rests on the attempt store.
    """

    def __init__(self, spec: ModelSpec, api_key: str | None) -> None:
        if spec.provider not in ("openai", "openai_compatible") or not spec.model:
            raise ValueError(f"model {spec.name!r} is not an OpenAI chat model")
        if spec.provider == "openai" and not api_key:
            raise ConfigError(f"model {spec.name!r}: provider 'openai' needs an API key")
        self.name = spec.name
        self._spec = spec
        self._model: str = spec.model
        self._base_url = spec.base_url or OPENAI_BASE_URL
        self._secret = api_key or None
        self._client = openai.OpenAI(
            api_key=api_key or NO_KEY,
            base_url=self._base_url,
            timeout=spec.timeout_s,
            max_retries=spec.max_retries,
        )

    def identity(self) -> dict[str, Any]:
        return {"provider": self._spec.provider, "model": self._model, "base_url": self._base_url}

    def complete(self, request: AttemptRequest) -> Completion:
        kwargs: dict[str, Any] = {
            "model": self._model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "temperature": request.temperature,
            "top_p": request.top_p,
            "seed": request.seed % 2**31,
        }
        if self._spec.provider == "openai":
            kwargs["max_completion_tokens"] = request.max_tokens
        else:
            kwargs["max_tokens"] = request.max_tokens
        start = time.perf_counter()
        try:
            response = self._client.chat.completions.create(**kwargs)
            return self._to_completion(response, time.perf_counter() - start)
        except Exception as err:  # anything at all, malformed replies too: scrub the message
            raise ModelCallError(describe_error(err, self._secret)) from None

    def _to_completion(self, response: Any, latency: float) -> Completion:
        if not response.choices:
            raise ValueError("the response has no choices")
        choice = response.choices[0]
        usage = response.usage
        input_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        output_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        cost = self._spec.cost_usd(input_tokens, output_tokens)
        return Completion(
            # content is None for refusals and tool calls: an empty answer fails parsing
            text=choice.message.content or "",
            finish_reason=choice.finish_reason or "unknown",
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            latency_s=latency,
            cost_usd=cost,
        )

    def close(self) -> None:
        """Release pooled HTTP connections (optional: the pool also dies with the process)."""
        self._client.close()

    def __repr__(self) -> str:
        return f"OpenAIChatModel(name={self.name!r}, model={self._model!r})"
