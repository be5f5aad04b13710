"""The model interface every provider and offline baseline implements."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from horizonbench.core.types import Completion, Message


@dataclass(frozen=True, slots=True)
class AttemptRequest:
    """Everything needed to produce one attempt.

    ``row`` is the instance row; only offline baselines look at it (API models see
    ``messages`` alone). ``seed`` is derived from (root seed, model, instance, sample),
    so offline baselines are reproducible and API calls can pass it on where supported.
    """

    instance_id: str
    family: str
    sample: int
    messages: tuple[Message, ...]
    temperature: float
    top_p: float
    max_tokens: int
    seed: int
    row: Mapping[str, Any]


class Model(Protocol):
    """Anything that answers prompts."""

    #: label used in tables and the report (ModelSpec.name)
    name: str

    def identity(self) -> dict[str, Any]:
        """What makes an answer reusable: provider, model id, base URL. Never secrets."""
        ...

    def complete(self, request: AttemptRequest) -> Completion:
        """One answer. Raises ``ModelCallError`` when the call fails for good."""
        ...


class ModelCallError(Exception):
    """A call that failed after the provider's retries; recorded, then retried on resume."""
