"""Tests for the untrusted-answer plan parser: formats, last-plan-wins, safety, limits."""

from __future__ import annotations

import json
import os
import string
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from horizonbench.core.types import ParsedAnswer, Step
from horizonbench.datasets.plan_parser import parse_plan

PWNED = "/tmp/pwned_hb"

EXPECTED = (
    Step("start", "A1"),
    Step("move_to", "B1"),
    Step("pick_up_key", "5"),
    Step("rescue", "Alice"),
)


def plan_of(text: str, **kwargs: object) -> tuple[Step, ...] | None:
    result = parse_plan(text, **kwargs)  # type: ignore[arg-type]
    assert (result.plan is None) != (result.error is None)
    return result.plan


def assert_well_formed(result: object) -> None:
    assert isinstance(result, ParsedAnswer)
    assert (result.plan is None) != (result.error is None)
    if result.plan is not None:
        assert len(result.plan) >= 1
        assert all(isinstance(s, Step) for s in result.plan)
    else:
        assert isinstance(result.error, str) and result.error
        assert not result.error.startswith("internal parser error")


# --- Python-style lists of pairs -------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "[('start', 'A1'), ('move_to', 'B1'), ('pick_up_key', '5'), ('rescue', 'Alice')]",
        '[("start", "A1"), ("move_to", "B1"), ("pick_up_key", "5"), ("rescue", "Alice")]',
        "[(\u2018start\u2019, \u2018A1\u2019), (\u201cmove_to\u201d, \u201cB1\u201d), "
        "('pick_up_key', '5'), ('rescue', 'Alice')]",
        "[(' start ', ' A1 '), (' move_to ', ' B1 '), ('pick_up_key ', '  5'), ('rescue','Alice')]",
        "[('start', 'A1'), ('move_to', 'B1'), ('pick_up_key', 5), ('rescue', 'Alice')]",
        "[['start', 'A1'], ['move_to', 'B1'], ['pick_up_key', '5'], ['rescue', 'Alice']]",
        "[('start', 'A1'), ('move_to', 'B1'), ('pick_up_key', '5'), ('rescue', 'Alice'),]",
        "[\n  ('start', 'A1'),\n  ('move_to', 'B1'),\n  ('pick_up_key', '5'),\n  ('rescue', 'Alice'),\n]",
        "Solution: [('start', 'A1'), ('move_to', 'B1'), ('pick_up_key', '5'), ('rescue', 'Alice')]",
        "YOUR SOLUTION:\n[('start', 'A1'), ('move_to', 'B1'), ('pick_up_key', '5'), ('rescue', 'Alice')]",
        "```python\n[('start', 'A1'), ('move_to', 'B1'), ('pick_up_key', '5'), ('rescue', 'Alice')]\n```",
        "```\nplan = [('start', 'A1'), ('move_to', 'B1'),\n ('pick_up_key', '5'), "
        "('rescue', 'Alice')]\n```\nDone.",
        "[(start, A1), (move_to, B1), (pick_up_key, 5), (rescue, Alice)]",
        "[('Start', 'A1'), ('Move To', 'B1'), ('pick-up-key', '5'), ('RESCUE', 'Alice')]",
    ],
)
def test_python_list_variants(text: str) -> None:
    assert plan_of(text) == EXPECTED


def test_args_keep_case_and_inner_text() -> None:
    assert plan_of("[('rescue', 'McAlice'), ('move_to', 'b7')]") == (
        Step("rescue", "McAlice"),
        Step("move_to", "b7"),
    )


def test_brackets_inside_quoted_args_do_not_confuse_the_reader() -> None:
    assert plan_of("[('say', '['), ('say', ']]')]") == (Step("say", "["), Step("say", "]]"))


# --- action: arg lines -------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "start: A1\nmove_to: B1\npick_up_key: 5\nrescue: Alice",
        "1. start: A1\n2. move_to: B1\n3. pick_up_key: 5\n4. rescue: Alice",
        "- start: A1\n- move_to: B1\n* pick_up_key: 5\n- rescue: Alice",
        "Step 1: start: A1\nStep 2: move_to: B1\nStep 3: pick_up_key: 5\nStep 4: rescue: Alice",
        "1) start(A1)\n2) move_to('B1')\n3) pick_up_key(5)\n4) rescue(\"Alice\")",
        "Plan:\n\n1. Start: A1\n\n2. Move To: B1.\n\n3. pick-up-key: '5'\n\n4. rescue: Alice\n",
        "Solution:\n```\nstart: A1\nmove_to: B1\npick_up_key: 5\nrescue: Alice\n```",
    ],
)
def test_line_variants(text: str) -> None:
    assert plan_of(text) == EXPECTED


def test_lines_block_ends_at_prose() -> None:
    text = "start: A1\nmove_to: B1\nThat was a draft, here is the answer\nstart: A2\nrescue: Bob"
    assert plan_of(text) == (Step("start", "A2"), Step("rescue", "Bob"))


def test_space_form_is_not_a_step() -> None:
    assert plan_of("move_to B1\nstart A1") is None


# --- JSON -----------------------------------------------------------------------------


@pytest.mark.parametrize("arg_key", ["arg", "argument", "target", "room", "key"])
def test_json_objects_with_any_arg_key(arg_key: str) -> None:
    payload = [{"action": s.action, arg_key: s.arg} for s in EXPECTED]
    assert plan_of(json.dumps(payload)) == EXPECTED


@pytest.mark.parametrize("wrapper", ["plan", "solution", "actions"])
def test_json_wrapped_list(wrapper: str) -> None:
    payload = {"reasoning": "go east [then] north", wrapper: [[s.action, s.arg] for s in EXPECTED]}
    assert plan_of("Answer:\n```json\n" + json.dumps(payload, indent=2) + "\n```") == EXPECTED


def test_json_numbers_and_pairs() -> None:
    text = (
        '[["start", "A1"], ["move_to", "B1"], {"action": "pick_up_key", "key": 5}, '
        '{"action": "rescue", "target": "Alice"}]'
    )
    assert plan_of(text) == EXPECTED


# --- choosing among drafts ------------------------------------------------------------


def test_last_plan_wins() -> None:
    text = (
        "Draft: [('start', 'A1'), ('move_to', 'C3')]\n"
        "Hmm, C3 is not adjacent. Wait, correction:\n"
        "[('start', 'A1'), ('move_to', 'B1')]\n"
        "I am confident (really) in this [final] answer."
    )
    assert plan_of(text) == (Step("start", "A1"), Step("move_to", "B1"))


def test_last_plan_wins_across_formats() -> None:
    text = "[('start', 'A1')]\nActually:\n1. start: A2\n2. move_to: B2"
    assert plan_of(text) == (Step("start", "A2"), Step("move_to", "B2"))


def test_allowed_actions_prefers_last_fully_allowed_candidate() -> None:
    text = "[('start', 'A1'), ('move_to', 'B1')]\nNote: [('total', '2'), ('cost', '7')]"
    allowed = frozenset({"start", "move_to"})
    assert plan_of(text) == (Step("total", "2"), Step("cost", "7"))
    assert plan_of(text, allowed_actions=allowed) == (Step("start", "A1"), Step("move_to", "B1"))


def test_allowed_actions_never_rejects_a_plan() -> None:
    text = "[('start', 'A1'), ('teleport', 'Z9')]"
    assert plan_of(text, allowed_actions=frozenset({"start"})) == (
        Step("start", "A1"),
        Step("teleport", "Z9"),
    )


# --- errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n",
        "I could not find a solution.",
        "[]",
        "[1, 2, 3]",
        "{'plan': []}",
        "[('start')]",
        "[('start', 'A1', 'extra')]",
        "[('123', 'A1')]",
    ],
)
def test_no_plan_found(text: str) -> None:
    result = parse_plan(text)
    assert result.plan is None and result.error is not None
    assert result.error.startswith("no plan found")


def test_non_string_input_is_an_error_not_an_exception() -> None:
    for value in (None, 42, b"[('start', 'A1')]", ["start", "A1"]):
        result = parse_plan(value)  # type: ignore[arg-type]
        assert result.plan is None and "not text" in (result.error or "")


def test_too_long_answer_is_refused_before_scanning() -> None:
    result = parse_plan("[('start', 'A1')]" + " " * 100, max_chars=50)
    assert result.plan is None
    assert result.error == "answer too long (117 characters > 50)"


def test_too_many_steps() -> None:
    text = repr([("move_to", f"B{i}") for i in range(11)])
    assert plan_of(text, max_steps=11) is not None
    result = parse_plan(text, max_steps=10)
    assert result.plan is None and result.error == "plan too long (11 steps > 10)"


# --- properties -----------------------------------------------------------------------

FRAGMENTS = [
    "[('",
    "')",
    "', '",
    "move_to",
    "start",
    "{",
    "}",
    '"',
    "'",
    "```",
    "[",
    "]",
    "(",
    ")",
    ",",
    ":",
    "\n",
    " ",
    "A1",
    "\u2018",
    "\u201d",
    "1. ",
    "- ",
    "\\",
    '{"plan": ',
    '"action": ',
    "5",
]


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_never_raises_on_arbitrary_text(text: str) -> None:
    assert_well_formed(parse_plan(text))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=60).map("".join))
def test_never_raises_on_fragment_soup(text: str) -> None:
    assert_well_formed(parse_plan(text))
    assert_well_formed(parse_plan(text, allowed_actions=frozenset({"start", "move_to"})))


actions = st.from_regex(r"[a-z_]{1,20}", fullmatch=True)
args = st.text(alphabet=string.ascii_letters + string.digits, min_size=1, max_size=12)
plans = st.lists(st.builds(Step, actions, args), min_size=1, max_size=25).map(tuple)
prose = st.text(alphabet=string.ascii_letters + string.digits + " .,!?'-", max_size=80)


def render(plan: tuple[Step, ...], style: str) -> str:
    if style == "python":
        return repr([(s.action, s.arg) for s in plan])
    if style == "json":
        return json.dumps([s.as_dict() for s in plan])
    if style == "json_wrapped":
        return json.dumps({"plan": [[s.action, s.arg] for s in plan]}, indent=2)
    return "\n".join(f"{i}. {s.action}: {s.arg}" for i, s in enumerate(plan, 1))


@settings(max_examples=300, deadline=None)
@given(plans, st.sampled_from(["python", "json", "json_wrapped", "lines"]), prose, prose)
def test_round_trip(plan: tuple[Step, ...], style: str, before: str, after: str) -> None:
    text = f"{before}\n{render(plan, style)}\n{after}"
    assert plan_of(text) == plan


@settings(max_examples=200, deadline=None)
@given(plans, plans, prose)
def test_later_plan_beats_earlier_draft(
    draft: tuple[Step, ...], final: tuple[Step, ...], between: str
) -> None:
    text = f"{render(draft, 'python')}\n{between}\n{render(final, 'json')}"
    assert plan_of(text) == final


HOSTILE = [
    "__import__('os').system('touch /tmp/pwned_hb')",
    "[__import__('os').system('touch /tmp/pwned_hb')]",
    "[('start', __import__('os').system('touch /tmp/pwned_hb'))]",
    "eval(\"__import__('os').system('touch /tmp/pwned_hb')\")",
    "exec('import os; os.system(\"touch /tmp/pwned_hb\")')",
    "[(lambda: __import__('os').system('touch /tmp/pwned_hb'))(), ('a', 'b')]",
    "[" * 100_000,
    "[(" * 50_000,
    "{" * 100_000,
    "[" * 50_000 + "]" * 50_000,
    "[1," * 60_000,
    "['" * 90_000,
    "[]" * 99_999,
    "[(" * 30_000 + ")]" * 30_000,
    "start(" * 30_000,
    "a: " * 60_000,
    "[('a', 'b')]\n" * 14_000,
]


@pytest.mark.parametrize("text", HOSTILE, ids=lambda t: repr(t[:24]))
def test_hostile_text_is_fast_and_harmless(text: str) -> None:
    if os.path.exists(PWNED):
        os.remove(PWNED)
    started = time.perf_counter()
    result = parse_plan(text)
    assert time.perf_counter() - started < 2.0
    assert_well_formed(result)
    assert not os.path.exists(PWNED)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300), st.integers(min_value=0, max_value=300))
def test_max_chars_respected(text: str, max_chars: int) -> None:
    result = parse_plan(text, max_chars=max_chars)
    if len(text) > max_chars:
        assert result.plan is None and (result.error or "").startswith("answer too long")
    else:
        assert_well_formed(result)


@settings(max_examples=200, deadline=None)
@given(plans, st.integers(min_value=1, max_value=30), st.sampled_from(["python", "lines"]))
def test_max_steps_respected(plan: tuple[Step, ...], max_steps: int, style: str) -> None:
    result = parse_plan(render(plan, style), max_steps=max_steps)
    if len(plan) > max_steps:
        assert result.plan is None and (result.error or "").startswith("plan too long")
    else:
        assert result.plan == plan
