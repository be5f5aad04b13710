"""Reading untrusted model answers (harness/outputs.py): never raises, never evaluates,
finds the one JSON object wherever the prose puts it, and names the field that is wrong.

The end-to-end side (repairs over real HTTP) is in test_harness.py."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from horizonbench.core.types import Message
from horizonbench.datasets.worlds.base import format_action, format_fact
from horizonbench.harness import prompts as P
from horizonbench.harness.outputs import (
    MAX_ANSWER_CHARS,
    PlannerOutput,
    SelfDiagOutput,
    SummaryOutput,
    UpdaterOutput,
    find_json_object,
    read_output,
)

SCHEMAS = (PlannerOutput, UpdaterOutput, SelfDiagOutput, SummaryOutput)

# --- strategies --------------------------------------------------------------------------

_LOWER = "abcdefghijklmnopqrstuvwxyz"
_TAIL = _LOWER + "0123456789_"
names = st.builds(str.__add__, st.sampled_from(_LOWER + "_"), st.text(_TAIL, max_size=10))
args = st.builds(str.__add__, st.sampled_from(_TAIL), st.text(_TAIL + "-", max_size=10))
facts = st.builds(lambda p, a: (p, *a), names, st.lists(args, min_size=1, max_size=4))
fact_lists = st.lists(facts, max_size=8)
actions = st.builds(lambda v, a: (v, *a), names, st.lists(args, max_size=3))


def _texts(fs: list[tuple[str, ...]]) -> list[str]:
    return [format_fact(f) for f in fs]


@st.composite
def planner_objects(draw: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "action": format_action(draw(actions)),
        "preconditions": _texts(draw(fact_lists)),
        "expected_effects": _texts(draw(fact_lists)),
        "confidence": draw(st.floats(0.0, 1.0)),
    }
    if draw(st.booleans()):
        obj["world_state"] = _texts(draw(fact_lists))
    if draw(st.booleans()):
        obj["reasoning"] = draw(st.text(max_size=40))  # extra keys are ignored
    return obj


updater_objects = st.builds(lambda fs: {"world_state": _texts(fs)}, fact_lists)
selfdiag_objects = st.builds(
    lambda v, m, r: {"valid": v, "missing_preconditions": _texts(m), "replan": r},
    st.booleans(),
    fact_lists,
    st.booleans(),
)
summary_objects = st.builds(lambda s: {"summary": s}, st.text(min_size=1, max_size=200))

VALID = {
    PlannerOutput: planner_objects(),
    UpdaterOutput: updater_objects,
    SelfDiagOutput: selfdiag_objects,
    SummaryOutput: summary_objects,
}

#: prose a model might wrap its answer in: anything but braces
prose = st.text(alphabet=st.characters(blacklist_characters="{}"), max_size=200)

#: values of the wrong JSON type for each kind of field
not_bool = st.one_of(
    st.sampled_from(["yes", "no", "true", "false", "True", 1, 0, None, [], {}]),
    st.text(max_size=10),
    st.integers(),
    st.floats(allow_nan=False),
)
not_number = st.one_of(
    st.sampled_from(["0.9", "1", "high", True, False, None, [0.5], {"p": 0.5}]),
    st.text(max_size=10),
    st.floats(min_value=1.0, exclude_min=True, allow_infinity=False),
    st.floats(max_value=0.0, exclude_max=True, allow_infinity=False),
)
not_fact_list = st.one_of(
    st.sampled_from(["at(agent, room1)", 3, True, {"at": "room1"}, [1, 2], [None], ["not a fact"]]),
    st.text(max_size=20),
    st.lists(st.integers(), min_size=1, max_size=3),
)
not_action = st.one_of(
    st.sampled_from([3, None, True, ["go(room1)"], {"go": "room1"}, "go to room 1", "go(a) go(b)", ""]),
    st.text(alphabet="{}[]<>!?@#$%^&*=+ ", min_size=1, max_size=20),
)
not_summary = st.sampled_from([3, None, True, ["text"], {"summary": "x"}, ""])

WRONG: dict[type, dict[str, Any]] = {
    PlannerOutput: {
        "action": not_action,
        "preconditions": not_fact_list,
        "expected_effects": not_fact_list,
        "confidence": not_number,
        "world_state": not_fact_list,
    },
    UpdaterOutput: {"world_state": not_fact_list},
    SelfDiagOutput: {"valid": not_bool, "replan": not_bool, "missing_preconditions": not_fact_list},
    SummaryOutput: {"summary": not_summary},
}


def _error_field(error: str) -> str:
    """The field an error message names first (``field[.index]: message``)."""
    return error.split(":", 1)[0].split(".", 1)[0].strip()


# --- property tests -----------------------------------------------------------------------


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: s.__name__)
@settings(max_examples=100, deadline=None)
@given(text=st.text())
def test_read_output_never_raises_on_arbitrary_text(schema: type, text: str) -> None:
    parsed, error = read_output(text, schema)
    assert (parsed is None) != (error is None)
    if parsed is None:
        assert isinstance(error, str) and error


json_values = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=10),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None)
@given(value=json_values, cut=st.integers(0, 10_000))
def test_read_output_never_raises_on_json_shaped_text(value: Any, cut: int) -> None:
    """Text that gets past the first checks: JSON values of any shape, cut or padded."""
    text = json.dumps(value)
    cut %= len(text) + 1
    for candidate in (text, text[:cut], "{" + text, text + "}", "note: " + text[cut:]):
        for schema in SCHEMAS:
            parsed, error = read_output(candidate, schema)
            assert (parsed is None) != (error is None)


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: s.__name__)
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), before=prose, after=prose)
def test_a_valid_object_in_prose_round_trips(schema: type, data: Any, before: str, after: str) -> None:
    obj = data.draw(VALID[schema])
    parsed, error = read_output(before + json.dumps(obj) + after, schema)
    assert error is None, error
    assert parsed == schema.model_validate(obj)
    # and what was read is what was written, field by field
    if schema is PlannerOutput:
        assert format_action(parsed.parsed_action) == obj["action"]
        assert _texts(list(parsed.preconditions)) == obj["preconditions"]
        assert _texts(list(parsed.expected_effects)) == obj["expected_effects"]
        assert parsed.confidence == obj["confidence"]
        if "world_state" in obj:
            assert _texts(list(parsed.world_state)) == obj["world_state"]
        else:
            assert parsed.world_state is None
    elif schema is UpdaterOutput:
        assert _texts(list(parsed.world_state)) == obj["world_state"]
    elif schema is SelfDiagOutput:
        assert (parsed.valid, parsed.replan) == (obj["valid"], obj["replan"])
        assert _texts(list(parsed.missing_preconditions)) == obj["missing_preconditions"]
    else:
        assert parsed.summary == obj["summary"]


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: s.__name__)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_wrong_type_is_rejected_naming_the_field(schema: type, data: Any) -> None:
    obj = data.draw(VALID[schema])
    field = data.draw(st.sampled_from(sorted(WRONG[schema])))
    obj[field] = data.draw(WRONG[schema][field])
    parsed, error = read_output(json.dumps(obj), schema)
    assert parsed is None, (field, obj[field])
    assert _error_field(error) == field, error


@pytest.mark.parametrize(
    ("schema", "obj", "field"),
    [
        (SelfDiagOutput, {"valid": "yes"}, "valid"),
        (SelfDiagOutput, {"valid": 1}, "valid"),
        (SelfDiagOutput, {"valid": True, "replan": "no"}, "replan"),
        (PlannerOutput, {"action": "noop", "preconditions": [], "confidence": "0.9"}, "confidence"),
        (PlannerOutput, {"action": "noop", "preconditions": [], "confidence": 1.5}, "confidence"),
        (PlannerOutput, {"action": "noop", "preconditions": [], "confidence": True}, "confidence"),
        (PlannerOutput, {"action": "noop", "confidence": 0.5}, "preconditions"),
        (PlannerOutput, {"preconditions": [], "confidence": 0.5}, "action"),
        (UpdaterOutput, {"world_state": "at(agent, room1)"}, "world_state"),
        (UpdaterOutput, {"world_state": ["at(agent, room1), at(box, room2)"]}, "world_state"),
        (UpdaterOutput, {"state": []}, "world_state"),
        (SummaryOutput, {"summary": ""}, "summary"),
    ],
)
def test_the_documented_wrong_answers(schema: type, obj: dict[str, Any], field: str) -> None:
    """ "yes" is not a verdict and "0.9" is not a confidence; a missing key is an error."""
    parsed, error = read_output(json.dumps(obj), schema)
    assert parsed is None
    assert _error_field(error) == field, error


# --- untrusted text -----------------------------------------------------------------------

GOOD_PLAN = {"action": "go(room2)", "preconditions": ["at(agent, room1)"], "confidence": 0.75}


def test_markup_and_code_are_rejected_or_kept_as_inert_text(tmp_path: Path) -> None:
    canary = tmp_path / "pwned"
    payload = f"__import__('os').system('touch {canary}')"
    # no JSON at all
    for text in ("<script>alert(1)</script>", payload, f"eval({payload!r})", "`rm -rf /`"):
        parsed, error = read_output(text, PlannerOutput)
        assert parsed is None and error == "no JSON object found in the answer"
    # code where an action or a fact must be: rejected, naming the field
    for field, value in (("action", payload), ("action", "<script>alert(1)</script>")):
        parsed, error = read_output(json.dumps({**GOOD_PLAN, field: value}), PlannerOutput)
        assert parsed is None and error.startswith("action: not one action"), error
    parsed, error = read_output(json.dumps({"world_state": ["at(agent, room1)", payload]}), UpdaterOutput)
    assert parsed is None and error.startswith("world_state:"), error
    # a summary is free text: kept verbatim, never run
    parsed, error = read_output(json.dumps({"summary": payload + " <script>x</script>"}), SummaryOutput)
    assert error is None and parsed.summary == payload + " <script>x</script>"
    # a key named like a dunder is just an ignored extra key
    parsed, error = read_output(json.dumps({**GOOD_PLAN, "__class__": payload}), PlannerOutput)
    assert error is None and parsed.action == "go(room2)"
    assert not canary.exists()


@pytest.mark.parametrize(
    "text",
    [
        "Here is my plan.\n" + json.dumps(GOOD_PLAN) + "\nHope that helps!",
        "```json\n" + json.dumps(GOOD_PLAN, indent=2) + "\n```",
        'Thinking... {not json} and {"half": \n then:\n```json\n' + json.dumps(GOOD_PLAN) + "\n```",
        # an example object first, the answer last: the last object wins
        'For example {"action": "noop", "preconditions": [], "confidence": 0.1} but really '
        + json.dumps(GOOD_PLAN),
        # a number past Python's int digit limit before the answer does not hide it
        '{"scratch": ' + "9" * 5000 + "} " + json.dumps(GOOD_PLAN),
        # nested braces inside string values
        json.dumps({**GOOD_PLAN, "note": '{{{ }}} {"a": {}}'}),
    ],
    ids=["prose", "fence", "junk-then-fence", "last-wins", "huge-int", "braces-in-strings"],
)
def test_the_object_is_found_in_prose_and_fences(text: str) -> None:
    parsed, error = read_output(text, PlannerOutput)
    assert error is None, error
    assert (parsed.action, parsed.confidence) == ("go(room2)", 0.75)
    assert parsed.preconditions == (("at", "agent", "room1"),)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "the answer is empty"),
        ("   \n\t ", "the answer is empty"),
        ("x" * (MAX_ANSWER_CHARS + 1), f"the answer is longer than {MAX_ANSWER_CHARS} characters"),
        ("{" * 200_000 + "}" * 200_000, "no JSON object found in the answer"),
        ("[" * 100_000 + "]" * 100_000, "no JSON object found in the answer"),
        ('{"a": ' * 50_000 + "1" + "}" * 50_000, "no JSON object found in the answer"),
        ("[1, 2, 3]", "no JSON object found in the answer"),
        ('{"action": "go(room2)", "preconditions": [at(agent, room1)]', "no JSON object found in the answer"),
    ],
    ids=["empty", "blank", "too-long", "deep-braces", "deep-brackets", "deep-objects", "list", "broken"],
)
def test_unusable_text_is_rejected_quickly_with_a_reason(text: str, expected: str) -> None:
    start = time.perf_counter()
    for schema in SCHEMAS:
        parsed, error = read_output(text, schema)
        assert parsed is None and error == expected
    assert time.perf_counter() - start < 5.0


def test_an_object_wrapping_the_answer_is_not_unwrapped() -> None:
    """The outermost object is the answer: a nested one is not searched for."""
    parsed, error = read_output(json.dumps({"answer": GOOD_PLAN}), PlannerOutput)
    assert parsed is None and error.startswith("action: Field required"), error


def test_a_huge_answer_under_the_limit_still_parses() -> None:
    text = "x" * (MAX_ANSWER_CHARS - 1000) + json.dumps(GOOD_PLAN)
    parsed, error = read_output(text, PlannerOutput)
    assert error is None and parsed.action == "go(room2)"


def test_find_json_object_refuses_non_text() -> None:
    with pytest.raises(ValueError, match="not text"):
        find_json_object(None)  # type: ignore[arg-type]
    parsed, error = read_output(None, SummaryOutput)  # type: ignore[arg-type]
    assert parsed is None and error == "the answer is not text"


# --- the repair request -------------------------------------------------------------------

BASE = (Message("system", "You are the Planner"), Message("user", "## Task\ngo"))


def test_repair_quotes_the_answer_and_the_error() -> None:
    out = P.repair_messages(BASE, "Sure! I will go.", "no JSON object found in the answer")
    assert out[:2] == BASE
    assert out[2] == Message("assistant", "Sure! I will go.")
    assert out[3].role == "user" and "no JSON object found in the answer" in out[3].content


def test_repair_cuts_a_long_answer_and_says_so() -> None:
    answer = "y" * (P.REPAIR_QUOTE_CHARS * 3)
    quoted = P.repair_messages(BASE, answer, "too long")[2].content
    assert quoted.startswith("y" * P.REPAIR_QUOTE_CHARS)
    assert len(quoted) < P.REPAIR_QUOTE_CHARS + 100
    assert f"{len(answer)} characters" in quoted


@pytest.mark.parametrize("answer", ["", "  \n "])
def test_repair_never_sends_an_empty_assistant_message(answer: str) -> None:
    """The Anthropic API refuses empty message content: the repair could never be sent."""
    out = P.repair_messages(BASE, answer, "the answer is empty")
    assert out[2] == Message("assistant", P.EMPTY_ANSWER)
    assert all(m.content.strip() for m in out)
