"""The model interface every provider and offline baseline implements."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from horizonbench.core.types import Completion, Message
from horizonbench.models.failures import CallFailure


@dataclass(frozen=True, slots=True)
class AttemptRequest:
    """Everything needed to produce one answer: one attempt, or one turn of a conversation.

    ``messages`` is the whole conversation so far (system, user and assistant turns);
    the attempt key covers all of it, so each turn of a multi-turn episode is stored
    and reused on its own. ``row`` is the instance row; only offline baselines look at
    it (API models see ``messages`` alone). ``seed`` is derived from (root seed, model,
    instance, sample), so offline baselines are reproducible and API calls can pass it
    on where supported. ``turn`` is 0 for single-turn attempts. ``mode`` is how the
    family is evaluated (``plan`` or ``rollout``); ``context`` is what an offline
    baseline may read beyond the row (a rollout's current state). Neither ``row`` nor
    ``context`` is part of the attempt key: API models never see them.
    """

    instance_id: str
    family: str
    sample: int
    messages: tuple[Message, ...]
    temperature: float
    top_p: float
    max_tokens: int
    seed: int
    row: Mapping[str, Any] = field(default_factory=dict)
    turn: int = 0
    mode: str = "plan"
    context: Mapping[str, Any] = field(default_factory=dict)


class Model(Protocol):
    """Anything that answers prompts."""

    #: label used in tables and the report (ModelSpec.name)
    name: str

    def identity(self) -> dict[str, Any]:
        """What makes an answer reusable: provider, model id, base URL. Never secrets."""
        ...

    def complete(self, request: AttemptRequest) -> Completion:
        """One try. Raises :class:`CallFailure` (classified, secret-free) when it fails."""
        ...


#: kept for callers of the first release; every failure is now a classified CallFailure
ModelCallError = CallFailure
