"""The typed answers of the three harness calls, and reading them from untrusted text.

A model's answer is text. :func:`read_output` finds the one JSON object in it (bare,
in a code fence, or after some prose), validates it with the role's pydantic model and
reads every fact and action with the environment grammar's strict parsers
(:func:`~horizonbench.datasets.worlds.base.parse_facts`,
:func:`~horizonbench.datasets.worlds.base.parse_action`). Nothing is ever evaluated.
When the answer cannot be used, the error says what is wrong in words a model can act
on: the harness shows it in the repair request.

Extra keys (a model's "reasoning", say) are ignored; missing or mistyped keys are
errors. Booleans must be JSON booleans and numbers JSON numbers: "yes" is not a
verdict and "0.9" is not a confidence.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
    field_validator,
)

from horizonbench.datasets.worlds.base import (
    MAX_ACTION_TEXT,
    Action,
    BadText,
    Fact,
    parse_action,
    parse_facts,
)

#: answers longer than this are not read (a correct one is far shorter)
MAX_ANSWER_CHARS = 400_000
#: the most opening braces tried when the answer is not a bare JSON object
_MAX_OBJECT_STARTS = 64
#: the most facts one list may hold
MAX_LIST_FACTS = 5_000


def _fact(text: Any) -> Fact:
    if not isinstance(text, str):
        raise ValueError(f"a fact must be a string like at(agent, room1), got {type(text).__name__}")
    try:
        facts = parse_facts(text)
    except BadText as err:
        raise ValueError(str(err)) from None
    if len(facts) != 1:
        raise ValueError(f"each list item must be exactly one fact, got {len(facts)} in {text[:80]!r}")
    return facts[0]


def _fact_list(value: Any) -> tuple[Fact, ...]:
    """A JSON list of fact strings, each read strictly (one fact per item)."""
    if not isinstance(value, list):
        raise ValueError("must be a JSON list of fact strings")
    if len(value) > MAX_LIST_FACTS:
        raise ValueError(f"more than {MAX_LIST_FACTS} facts")
    return tuple(_fact(item) for item in value)


#: a list of facts in an answer
Facts = Annotated[tuple[Fact, ...], BeforeValidator(_fact_list)]


class _Output(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class PlannerOutput(_Output):
    """The Planner's proposal: exactly one action, the facts it believes the action
    needs, the facts it expects to hold afterwards, and its confidence. In memory modes
    without an Updater state, ``world_state`` is the Planner's own picture of the world."""

    action: str = Field(max_length=MAX_ACTION_TEXT)
    preconditions: Facts
    expected_effects: Facts = ()
    confidence: float = Field(ge=0.0, le=1.0, strict=True)
    world_state: Facts | None = None

    @field_validator("action")
    @classmethod
    def _read_action(cls, value: str) -> str:
        try:
            parse_action(value)
        except BadText as err:
            raise ValueError(f"not one action in function form: {err}") from None
        return value.strip()

    @property
    def parsed_action(self) -> Action:
        return parse_action(self.action)


class PlannerStateOutput(PlannerOutput):
    """The Planner's answer in the memory modes without an Updater state (summary,
    transcript): ``world_state`` is required there, so an answer without it is repaired
    like any other unusable answer instead of silently keeping an older picture."""

    world_state: Facts


class UpdaterOutput(_Output):
    """The Updater's complete world state after the latest observation."""

    world_state: Facts


class SummaryOutput(_Output):
    """The rolling natural-language summary of the summary memory mode."""

    summary: str = Field(min_length=1, max_length=20_000)


class SelfDiagOutput(_Output):
    """Self-Diag's judgment of the proposed action (recorded, never used to gate it)."""

    valid: StrictBool
    missing_preconditions: Facts = ()
    replan: StrictBool = False


OutputT = TypeVar("OutputT", bound=_Output)


def find_json_object(text: str) -> dict[str, Any]:
    """The JSON object in ``text``: the whole text, else the last object that parses
    starting at one of the first opening braces (so prose or a code fence around it
    does not matter). Raises ValueError saying why none was found."""
    if not isinstance(text, str):
        raise ValueError("the answer is not text")
    if len(text) > MAX_ANSWER_CHARS:
        raise ValueError(f"the answer is longer than {MAX_ANSWER_CHARS} characters")
    stripped = text.strip()
    if not stripped:
        raise ValueError("the answer is empty")
    try:
        value = json.loads(stripped)
    except (ValueError, RecursionError):  # ValueError: also a number past Python's digit limit
        value = None
    if isinstance(value, dict):
        return value
    decoder = json.JSONDecoder()
    found: dict[str, Any] | None = None
    pos = stripped.find("{")
    tries = 0
    while pos != -1 and tries < _MAX_OBJECT_STARTS:
        tries += 1
        try:
            value, end = decoder.raw_decode(stripped, pos)
        except (ValueError, RecursionError):
            pos = stripped.find("{", pos + 1)
            continue
        if isinstance(value, dict):
            found = value
        pos = stripped.find("{", end)
    if found is None:
        raise ValueError("no JSON object found in the answer")
    return found


def _describe(err: ValidationError) -> str:
    parts = []
    for e in err.errors()[:3]:
        where = ".".join(str(p) for p in e["loc"]) or "the object"
        msg = e["msg"].removeprefix("Value error, ")
        parts.append(f"{where}: {msg}")
    more = len(err.errors()) - 3
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def read_output(text: str, model: type[OutputT]) -> tuple[OutputT | None, str | None]:
    """(the validated output, None) or (None, what is wrong with the answer)."""
    try:
        data = find_json_object(text)
    except ValueError as err:
        return None, str(err)
    try:
        return model.model_validate(data), None
    except ValidationError as err:
        return None, _describe(err)[:600]
