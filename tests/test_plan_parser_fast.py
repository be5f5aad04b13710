"""The parser's fast path returns exactly what the general reader returns, on generated
answers of the usual form, on its near misses, and on hostile text."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from horizonbench.core.types import Step
from horizonbench.datasets.plan_parser import _fast_plan, parse_plan, parse_plan_general

MAZE_ACTIONS = ("start", "move_to", "pick_up_key", "use_key", "unlock_and_open_door_to", "rescue")
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

actions = st.one_of(
    st.sampled_from(MAZE_ACTIONS),
    st.sampled_from(("Start", "move to", "none", "NULL", "walk-to", "x y z", "1bad", "")),
    st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True),
)
args = st.one_of(
    st.from_regex(r"[A-Z]{1,2}[0-9]{1,2}", fullmatch=True),
    st.sampled_from(("Alice", "5", "None", "null", "key 5", "#3", "-2.5", "", "a'b", 'x"y', "é1")),
    st.text(alphabet="ab1_ -#'\"()", max_size=6),
)
quotes = st.sampled_from(["'", '"', "\u2018", "\u201c", ""])
space = st.sampled_from(["", " ", "  ", "\n", "\t", "\n  "])


@st.composite
def answers(draw) -> str:
    pairs = draw(st.lists(st.tuples(actions, args, quotes, quotes), min_size=0, max_size=8))
    sep = draw(space)
    items = [f"({sep}{qa}{a}{qa},{draw(space)}{qb}{b}{qb}{sep})" for a, b, qa, qb in pairs]
    body = f",{draw(space)}".join(items) + draw(st.sampled_from(["", ",", ", ", " ,"]))
    text = f"{draw(space)}[{draw(space)}{body}{draw(space)}]{draw(space)}"
    before = draw(
        st.sampled_from(
            [
                "",
                "Plan:\n",
                "Solution: ",
                "[('start', 'A1')]\n",
                "move_to: B2\n",
                "start(A1)\nmove_to: B2\n",
                "I think (roughly) this:\n1. move_to: C3\n",
                "{'plan': ",
                "Confidence: high. ",
                # issue 22: the first plan after the answer line is the answer
                "Solution:\nmove_to: B2\nRecap, the list\n",
                "**Solution:** start(A1)\n",
                "Final solution: see the list\n",
                "Draft: move_to: B2\n\nSolution:\n",
                "Solution: start: A1\n(then) ",
            ]
        )
    )
    after = draw(st.sampled_from(["", "\nDone.", "\n[('rescue', 'Alice')]", "]"]))
    return before + text + after


def _same(text: str) -> None:
    for vocabulary in (None, MAZE_ACTIONS, ("fly",)):
        assert parse_plan(text, task_actions=vocabulary) == parse_plan_general(
            text, task_actions=vocabulary
        ), (
            text,
            vocabulary,
        )
    assert parse_plan(text, max_steps=2) == parse_plan_general(text, max_steps=2)


@SETTINGS
@given(answers())
def test_the_fast_path_agrees_with_the_general_reader_on_generated_answers(text: str) -> None:
    _same(text)


@SETTINGS
@given(st.text(alphabet="[](){},:'\" \n\tabAB01_-#\u2018\u2019\u201c\u201d", max_size=120))
def test_the_fast_path_agrees_on_hostile_text(text: str) -> None:
    _same(text)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(MAZE_ACTIONS), st.from_regex(r"[A-Z][0-9]{1,2}", fullmatch=True)),
        min_size=1,
    )
)
def test_the_usual_form_takes_the_fast_path(pairs) -> None:
    """Control: the agreement above is not vacuous; the usual answers do go the fast way."""
    text = (
        "Reasoning: go around the door.\nSolution: [" + ", ".join(f"('{a}', '{b}')" for a, b in pairs) + "]"
    )
    assert _fast_plan(text) is not None
    assert parse_plan(text).plan == tuple(Step(a, b) for a, b in pairs)


MARKER_FRAGMENTS = [
    "Solution:",
    "solution :",
    "**Solution:** ",
    "## Final solution:",
    "\n",
    " ",
    "start: A1",
    "move_to(B2)",
    "(",
    ":",
    "Recap",
    "[('start', 'A1')]",
    "[('move_to', 'B2'), ('rescue', 'Alice')]",
]


@SETTINGS
@given(st.lists(st.sampled_from(MARKER_FRAGMENTS), max_size=14).map("".join))
def test_the_fast_path_agrees_around_answer_lines(text: str) -> None:
    _same(text)


def test_a_plan_after_the_answer_line_beats_a_later_list() -> None:
    text = "Solution:\nstart: A1\nrescue: Alice\n\nIn short [('start', 'B2')]"
    assert _fast_plan(text) is None
    assert parse_plan(text).plan == (Step("start", "A1"), Step("rescue", "Alice"))
    _same(text)


def test_near_misses_are_left_to_the_general_reader() -> None:
    for text in (
        "[('start', 'A1')] and then [('start', 'B2')]",  # two drafts: the last one wins
        "[('start', None)]",
        "[('Move To', 'B1')]",
        "[('start', 'key 5')]",
        "[('start', 'A1'),]]",
        "[('start', 'A1')",
        "[('start', \"A1')]",
    ):
        assert _fast_plan(text) is None, text
        _same(text)
