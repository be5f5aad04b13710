"""The sequence models' texts and tokenizer (pure parts; the tokenizer needs transformers)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blocks_world_strategies import states as bw_states
from horizonbench.core.registry import get_family
from horizonbench.training.decoding import copy_baseline_accuracy
from horizonbench.training.texts import (
    STOP_TEXT,
    at_goal,
    copy_prediction,
    pairs,
    rules_of,
    source_text,
    state_of_source,
    target_text,
)
from horizonbench.training.tokenizer import build_tokenizer

BW = get_family("blocks_world")
HANOI = get_family("hanoi")


@st.composite
def hanoi_states(draw: st.DrawFn) -> tuple[tuple[int, ...], ...]:
    n = draw(st.integers(1, 10))
    pegs = [draw(st.integers(0, 2)) for _ in range(n)]
    return tuple(tuple(d for d in range(n, 0, -1) if pegs[d - 1] == p) for p in range(3))


def test_source_text_names_state_goal_and_sorted_rules():
    assert (
        source_text("[[A], []]", "[[], [A]]", {"b": 2, "a": "x"})
        == "state: [[A], []] goal: [[], [A]] a: x b: 2"
    )


@given(bw_states(), bw_states(), st.integers(2, 6))
def test_blocks_world_source_round_trips_state_and_goal(start, goal, k):
    s, g = BW.puzzle.format_state(start), BW.puzzle.format_state(goal)
    src = source_text(s, g, {"num_stacks": k})
    assert state_of_source(src) == s
    assert at_goal(src) == (s == g)
    assert BW.puzzle.parse_state(state_of_source(src)) == start


@given(bw_states(), bw_states(), st.booleans())
def test_pairs_from_step_rows(cur, nxt, final):
    step = {
        "current_state": BW.puzzle.format_state(cur),
        "next_state": BW.puzzle.format_state(cur if final else nxt),
        "goal_state": BW.puzzle.format_state(nxt),
        "is_final": final,
        "num_stacks": 3,
    }
    [(src, tgt)] = pairs([step], BW.rule_fields)  # pyarrow fields as rule columns
    assert tgt == target_text(step) == (STOP_TEXT if final else step["next_state"])
    assert src == source_text(step["current_state"], step["goal_state"], {"num_stacks": 3})
    assert rules_of(step, ["num_stacks"]) == {"num_stacks": 3}
    if not final:
        assert BW.puzzle.parse_state(tgt) == nxt


def test_copy_baseline_says_stop_at_the_goal_and_copies_elsewhere():
    a, b = "[[A], [], []]", "[[], [A], []]"
    rows = [(source_text(a, a, {}), STOP_TEXT), (source_text(a, b, {}), b), (source_text(a, b, {}), a)]
    assert copy_prediction(rows[0][0]) == STOP_TEXT and copy_prediction(rows[1][0]) == a
    assert copy_baseline_accuracy(rows) == pytest.approx(2 / 3)
    assert copy_baseline_accuracy([]) != copy_baseline_accuracy([])  # NaN


_CORPUS = [
    source_text(BW.puzzle.format_state(s), BW.puzzle.format_state(s), {"num_stacks": 3})
    for s in [(tuple("ABCDEFGHIJ"), (), ())]
] + [
    source_text(
        "[[10, 9, 8, 7, 6, 5, 4, 3, 2, 1], [], []]", "[[], [], []]", {"goal_peg": "C", "start_peg": "A"}
    )
]
_TOKENIZER = build_tokenizer([*_CORPUS, STOP_TEXT])


@settings(max_examples=60, deadline=None)
@given(bw_states())
def test_tokenizer_round_trips_blocks_world_states(state):
    text = BW.puzzle.format_state(state)
    ids = _TOKENIZER(text, add_special_tokens=False)["input_ids"]
    assert _TOKENIZER.unk_token_id not in ids
    decoded = _TOKENIZER.decode(ids, skip_special_tokens=True)
    assert BW.puzzle.parse_state(decoded) == BW.puzzle.parse_state(text)
    assert decoded == text  # the formatter's own spacing comes back


@settings(max_examples=60, deadline=None)
@given(hanoi_states())
def test_tokenizer_round_trips_hanoi_states(state):
    text = HANOI.puzzle.format_state(state)
    decoded = _TOKENIZER.decode(_TOKENIZER(text, add_special_tokens=False)["input_ids"])
    assert HANOI.puzzle.parse_state(decoded) == HANOI.puzzle.parse_state(text)


def test_tokenizer_is_word_level_and_keeps_special_ids(tmp_path):
    from transformers import AutoTokenizer

    tok = build_tokenizer(
        ["state: [[B, A]] goal: [[A, B]] num_stacks: 3", "left: a1 A1 | right: - | boat: left"]
    )
    assert (tok.pad_token_id, tok.eos_token_id, tok.unk_token_id, tok.bos_token_id) == (0, 1, 2, 3)
    assert tok.convert_ids_to_tokens(tok("num_stacks: 3")["input_ids"]) == ["num", "_", "stacks", ":", "3"]
    assert (
        tok.decode(tok("left: a1 A1 | right: - | boat: left")["input_ids"])
        == "left: a1 A1 | right: - | boat: left"
    )
    assert tok("[[Z]]")["input_ids"][2] == tok.unk_token_id
    tok.save_pretrained(tmp_path)
    again = AutoTokenizer.from_pretrained(tmp_path)
    text = "[[B, A], [], []]"
    assert again(text)["input_ids"] == tok(text)["input_ids"]
    assert again.decode(again(text)["input_ids"]) == text
