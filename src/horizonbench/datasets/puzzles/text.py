"""The one reader of bracketed lists in model answers, shared by the puzzles' parsers.

A model's answer is untrusted text: prose around the list, earlier drafts, typographic
quotes, or input built to hurt the parser. So the reader

- never evaluates anything (no ``eval``, ``ast.literal_eval`` or JSON): it tokenises
  brackets, commas and short atoms, and atoms stay strings (:func:`as_int` converts);
- runs in linear time on any input: one quote-blind pass pairs the brackets, reading a
  list stops at the first level deeper than ``max_depth`` (a list of moves, each a list
  of atoms, is two), atoms are at most 40 characters and texts at most ``MAX_TEXT``;
- reads curly quotes as straight ones, so a model's typographic quotes still read.

The answer's list is the last one (models reason, revise, and commit last):
:func:`last_list` finds the last top-level ``[...]`` that is empty or holds a nested
list, and :func:`last_move_list` the last list of moves.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from horizonbench.datasets.puzzles.base import BadText

MAX_TEXT = 1_000_000
MAX_DEPTH = 2

_QUOTES = str.maketrans(
    dict.fromkeys("\u2018\u2019\u201a\u201b", "'") | dict.fromkeys("\u201c\u201d\u201e\u201f", '"')
)
_BRACKETS = re.compile(r"[\[\]()]")
_SQUARE = re.compile(r"[\[\]]")
_CLOSER = {"[": "]", "(": ")"}
_TOKEN = re.compile(r"""\s*(?:([\[\](),])|'([^'\n]{0,40})'|"([^"\n]{0,40})"|([^\s\[\](),'"]{1,40}))""")
_SPACE = re.compile(r"\s*")
_INT = re.compile(r"[+-]?[0-9]{1,9}")


def answer_text(text: Any, what: str) -> str:
    """``text`` with curly quotes made straight; :class:`BadText` if it is not a string
    or longer than ``MAX_TEXT``."""
    if not isinstance(text, str) or len(text) > MAX_TEXT:
        raise BadText(f"{what} text missing or too long")
    return text.translate(_QUOTES)


def strip_fences(text: str) -> str:
    """Drop surrounding whitespace, backticks and a code-fence language tag."""
    text = text.strip().strip("`").strip()
    return re.sub(r"^(?:json|python|text)\s*\n", "", text, flags=re.IGNORECASE).strip()


def _spans(text: str, inner: bool) -> Iterator[tuple[int, int, int]]:
    """``(start, end, levels)`` of the candidate lists in ``text``, last-ending first:
    each top-level ``[...]`` that is empty or holds a nested list, and with ``inner``
    also each ``[...]`` inside another that holds a nested list.

    One quote-blind pass pairs the square brackets; a stray one in prose stays unpaired
    and encloses nothing. A ``(`` inside a ``[...]`` counts as a nested list (reading
    checks it is closed). Only top-level lists are checked for being empty, and those
    do not overlap, so the whole search stays linear."""
    stack: list[list[int]] = []  # [start, levels of the deepest list inside]
    groups: list[tuple[int, int, int]] = []
    for m in _BRACKETS.finditer(text):
        ch = m.group()
        if ch == "[":
            stack.append([m.start(), 0])
        elif ch == "]" and stack:
            start, inside = stack.pop()
            if stack:
                stack[-1][1] = max(stack[-1][1], inside + 1)
            groups.append((start, m.end(), inside + 1))
        elif ch == "(" and stack:
            stack[-1][1] = max(stack[-1][1], 1)
    outer = len(text) + 1  # the first start among the groups that end later
    for start, end, levels in reversed(groups):
        top = start < outer
        outer = min(outer, start)
        if (levels > 1 and (top or inner)) or (top and levels == 1 and not text[start + 1 : end - 1].strip()):
            yield start, end, levels


def read_list(text: str, start: int = 0, end: int | None = None, *, max_depth: int = MAX_DEPTH) -> list[Any]:
    """``text[start:end]`` read as exactly one list of string atoms and lists (quotes
    and commas optional, round brackets as good as square ones); :class:`BadText`
    naming the problem otherwise. Never evaluates anything."""
    end = len(text) if end is None else end
    root: list[Any] = []
    stack: list[tuple[list[Any], str]] = [(root, "")]
    pos = start
    while pos < end:
        m = _TOKEN.match(text, pos, end)
        if m is None:
            blank = _SPACE.match(text, pos, end)
            if blank is not None and blank.end() == end:
                break
            raise BadText(f"cannot read {text[pos : min(pos + 20, end)]!r} in the list")
        pos = m.end()
        punct, atom = m.group(1), next((g for g in m.groups()[1:] if g is not None), None)
        if punct in ("[", "("):
            if len(stack) > max_depth:
                raise BadText(f"lists nested deeper than {max_depth}")
            child: list[Any] = []
            stack[-1][0].append(child)
            stack.append((child, _CLOSER[punct]))
        elif punct in ("]", ")"):
            if len(stack) == 1 or stack[-1][1] != punct:
                raise BadText(f"unmatched {punct!r} in the list")
            stack.pop()
        elif punct == ",":
            continue
        elif atom is not None and len(stack) > 1:
            stack[-1][0].append(atom.strip())
        else:
            raise BadText(f"{short(atom)} is outside the list")
    if len(stack) != 1 or len(root) != 1:
        raise BadText("the list is not closed")
    return root[0]


def last_list(
    text: Any,
    *,
    missing: str,
    what: str = "answer",
    accept: Callable[[list[Any]], bool] | None = None,
) -> list[Any]:
    """The last top-level list in ``text`` that is empty or holds a nested list (a
    plan, a state), read by :func:`read_list`, whose errors it raises; ``missing`` is
    the message when there is none.

    With ``accept``, lists inside other lists count too, and the last one that reads
    and that ``accept`` takes wins: lists that do not read or that it refuses (a state
    written after the plan, a draft) are passed over."""
    text = answer_text(text, what)
    for start, end, levels in _spans(text, inner=accept is not None):
        if accept is None:
            return read_list(text, start, end)
        if levels > MAX_DEPTH:
            continue  # would not read; skipped unread so that deep nesting stays cheap
        try:
            value = read_list(text, start, end)
        except BadText:
            continue
        if accept(value):
            return value
    raise BadText(missing)


def list_spans(text: str, start: int = 0, limit: int = 4) -> list[tuple[int, int]]:
    """``(start, end)`` of the first ``limit`` top-level ``[...]`` in ``text[start:]``, in
    order (one quote-blind pass, like :func:`last_list`'s; a stray ``]`` is skipped)."""
    spans: list[tuple[int, int]] = []
    depth, opened = 0, -1
    for m in _SQUARE.finditer(text, start):
        if m.group() == "[":
            if depth == 0:
                opened = m.start()
            depth += 1
        elif depth:
            depth -= 1
            if depth == 0:
                spans.append((opened, m.end()))
                if len(spans) >= limit:
                    break
    return spans


def last_move_list(text: Any, as_move: Callable[[list[Any]], Any], example: str) -> list[Any]:
    """The moves of the last list of moves in ``text``: a list of lists of which at
    least one ``as_move`` accepts (None: not a move); a top-level ``[]`` is the empty
    plan. If that last list also holds items that are not moves, the answer is
    malformed rather than an earlier draft being silently preferred."""

    def is_moves(value: list[Any]) -> bool:
        if not all(isinstance(item, list) for item in value):
            return False
        return not value or any(as_move(item) is not None for item in value)

    missing = f"no list of moves found; expected a list like [{example}, ...]"
    value = last_list(text, missing=missing, accept=is_moves)
    moves = [as_move(item) for item in value]
    if None in moves:
        bad = moves.index(None) + 1
        raise BadText(f"item {bad} of the last move list is not a move like {example}")
    return moves


def as_int(atom: Any) -> int | None:
    """The integer an atom spells (``"3"``, ``"-1"``; at most nine digits), or None."""
    return int(atom) if isinstance(atom, str) and _INT.fullmatch(atom) else None


def short(value: Any) -> str:
    """``repr(value)`` cut to 40 characters, for error messages about model text."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


__all__ = [
    "MAX_DEPTH",
    "MAX_TEXT",
    "answer_text",
    "as_int",
    "last_list",
    "last_move_list",
    "list_spans",
    "read_list",
    "short",
    "strip_fences",
]
