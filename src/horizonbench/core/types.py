"""Value types shared by datasets, models, analysis and the pipeline."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True, slots=True)
class Step:
    """One action of a plan, e.g. ``Step("move_to", "B7")``."""

    action: str
    arg: str

    def as_dict(self) -> dict[str, str]:
        return {"action": self.action, "arg": self.arg}


Plan = tuple[Step, ...]


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message; providers translate these to their own wire format."""

    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(frozen=True, slots=True)
class ParsedAnswer:
    """What the parser made of a model's text: a plan, or the reason there is none."""

    plan: Plan | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.plan is not None


@dataclass(frozen=True, slots=True)
class Score:
    """What a family's simulator concludes about one attempt.

    ``violation`` is ``None`` for a successful plan; otherwise one of the family's
    violation categories (for mazes: ``non_adjacent_move``, ``locked_door``, ...).
    ``first_violation_step`` is the 0-based index of the offending action, or
    ``None`` when the plan succeeds. A legal but suboptimal plan has its violation at
    the first action that leaves every optimal plan.
    """

    success: bool
    valid: bool
    exact_match: bool
    progress_ratio: float
    precision: float
    recall: float
    plan_length: int
    violation: str | None
    first_violation_step: int | None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A generated candidate: a certified instance row, or why it was rejected."""

    row: dict[str, Any] | None
    rejection: str | None = None
    #: a rejected candidate that still takes a quota slot, by its difficulty: the
    #: paper's Algorithm 6 keeps the first M solved candidates, trivial and repeated
    #: ones included, and only then drops those (Blocks World ``dedup: after``)
    quota_difficulty: int | None = None


@dataclass(frozen=True, slots=True)
class Completion:
    """One model answer with the bookkeeping the attempts table records."""

    text: str
    finish_reason: str
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    cost_usd: float = 0.0
    #: the model the provider says answered (a moving alias resolves to a snapshot)
    served_model: str | None = None
    #: OpenAI's ``system_fingerprint``: the serving configuration behind the answer
    system_fingerprint: str | None = None
