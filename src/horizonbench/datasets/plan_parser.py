"""Turn a model's free-text answer into a plan of ``Step(action, arg)``.

The answer is untrusted: it may be huge, adversarial, or contain code. It is
therefore only ever *read* by a small hand-written scanner and never evaluated
(no ``eval``, no ``ast.literal_eval``); nesting depth, token lengths and the
overall size are bounded so hostile input finishes in roughly linear time.

What a plan is:

- a **step** is an (action, argument) pair. The action is a word of up to 64 letters,
  digits and underscores, not starting with a digit; spaces and hyphens inside it
  become underscores and it is lower-cased (``Move To`` and ``pick-up-key`` are
  ``move_to`` and ``pick_up_key``). The argument is a word, a number or an identifier
  (``A1``, ``5``, ``-2.5``, ``Alice``, ``room_3``; up to 64 characters), optionally
  after one qualifying word (``key 5``, ``Key #5``). A missing argument, ``None`` or
  ``null`` (quoted or not, as the argument or the action), an empty string, a nested
  value or any other text (code, markup, a sentence) makes the pair not a step;
- a **plan** is a non-empty sequence of steps and nothing else, in one of the accepted
  shapes: a Python-like list of pairs (``[('start', 'A1'), ...]``, with any quotes,
  brackets, bare numbers or words), a JSON list of objects or pairs, optionally
  wrapped in ``{"plan": [...]}``, or a contiguous block of ``action: arg`` or
  ``action(arg)`` lines, optionally numbered or bulleted (blank lines do not end a
  block). One item that is not a step makes a list not a plan; a line that is not a
  step ends a block of lines, like prose.

A qualifying word that only names the kind of thing is dropped: ``room J9``,
``key 14``, ``Key #5``, ``door B2``, ``cell A1``, ``node 3`` read as ``J9``, ``14``,
``5``, ``B2``, ``A1``, ``3`` (a model that writes ``('move_to', 'room J9')`` means J9).
Other two-word arguments are kept as written.

Which plan is the answer: the prompt asks for the plan on a line that starts with
``Solution:``. When the answer has such a line (``**Solution:**``, ``## Solution:``,
``Final solution:`` too) with a plan after it, the **first** plan after the last such
line is the answer: what follows it (a recap of a few steps, as lines or as a short
list in a sentence) does not replace it. Otherwise models think aloud and revise, so
the **last** plan is the one scored, whatever actions it uses (an unknown action is
the simulator's to label, as ``unknown_action``). ``task_actions`` (the task's action
vocabulary) only tells plans from lookalikes: text of the same shape that uses none
of the task's actions (``Confidence: high``, ``Note: [('total', '2')]``, ``print(1)``)
is not a plan for the task. Text with no plan is reported as "no plan found", which
the families score ``invalid_output``.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from horizonbench.core.types import ParsedAnswer, Plan, Step

__all__ = ["PairReader", "normal_vocabulary", "parse_plan", "parse_plan_general"]

_MAX_DEPTH = 6  # a wrapped JSON plan needs 3 levels; more is noise or an attack
_MAX_TOKEN = 200  # longer strings or words are not actions or arguments

# Curly quotes become ASCII one-for-one, so character offsets stay valid.
_QUOTES = str.maketrans(
    dict.fromkeys("\u2018\u2019\u201a\u201b", "'") | dict.fromkeys("\u201c\u201d\u201e\u201f", '"')
)
_CLOSERS = {"[": "]", "(": ")"}
_PAIR_OF = {"]": "[", ")": "(", "}": "{"}
_WS = re.compile(r"\s*")
_STRING = {q: re.compile(rf"{q}((?:[^{q}\\\n]|\\.){{0,{_MAX_TOKEN}}}){q}") for q in "'\""}
_BARE = re.compile(rf"[^,:()\[\]{{}}'\"\n]{{1,{_MAX_TOKEN}}}")
_ACTION_OK = re.compile(r"[a-z_][a-z0-9_]{0,63}")
#: a word, number or identifier, optionally after one qualifying word ("key 5", "Key #5")
_ARG_OK = re.compile(r"(?:[A-Za-z]{1,20} )?#?\w{1,64}|[-+]?\d{1,18}(?:\.\d{1,18})?")
_NULLS = frozenset({"none", "null"})
#: a qualifying word before the argument it names: dropped (see the module docstring)
_QUALIFIED = re.compile(r"(?:room|key|door|cell|node)\s#?(\w{1,64})", re.IGNORECASE | re.ASCII)
#: the answer line the prompt asks for; its colon ends the match
_MARKER = re.compile(r"^[ \t>#*_-]*(?:final[ \t]+)?solution[ \t*_]*:", re.IGNORECASE | re.MULTILINE)
T = TypeVar("T")

_WRAPPER_KEYS = ("plan", "solution", "actions", "steps", "answer")
_ARG_KEYS = ("arg", "argument", "target", "room", "key")

_BULLET = r"(?:[-*+\u2022]\s*|\(?\d{1,4}[.):]\s*|step\s*\d{1,4}\s*[.):-]?\s*)?"
_ACTION = r"(?P<action>[A-Za-z_]\w{0,40}(?:[ -]\w{1,40}){0,3})"
_ARG = (
    rf"(?P<arg>'[^'\n]{{0,{_MAX_TOKEN}}}'|\"[^\"\n]{{0,{_MAX_TOKEN}}}\""
    rf"|[^\s'\"()\[\]{{}}:,;]{{1,{_MAX_TOKEN}}})"
)
_LINE_FORMS = (
    re.compile(rf"{_BULLET}{_ACTION}\s*:\s*{_ARG}[.,;]?", re.IGNORECASE | re.ASCII),
    re.compile(rf"{_BULLET}{_ACTION}\(\s*{_ARG}\s*\)[.,;]?", re.IGNORECASE | re.ASCII),
)


class _NotAValue(Exception):
    """Raised inside the scanner; cheaper than threading failure through returns."""


class _Reader:
    """Reads one Python/JSON-like literal without evaluating it.

    Lists and tuples both become ``list``, objects ``dict``, every scalar
    (quoted or bare, numbers included) ``str``: a plan only needs strings.
    """

    def __init__(self, text: str, pos: int) -> None:
        self.text = text
        self.pos = pos

    def _skip_ws(self) -> str:
        self.pos = _WS.match(self.text, self.pos).end()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def value(self, depth: int = 0) -> Any:
        ch = self._skip_ws()
        if ch in ("[", "("):
            return self._sequence(depth, _CLOSERS[ch])
        if ch == "{":
            return self._mapping(depth)
        if ch in ("'", '"'):
            match = _STRING[ch].match(self.text, self.pos)
            if match is None:
                raise _NotAValue
            self.pos = match.end()
            return re.sub(r"\\(.)", r"\1", match.group(1))
        match = _BARE.match(self.text, self.pos) if ch else None
        if match is None:
            raise _NotAValue
        self.pos = match.end()
        return match.group().strip()

    def _items(self, depth: int, closer: str, read_item: Any) -> None:
        # Shared by lists and objects: items separated by commas, trailing comma allowed.
        if depth >= _MAX_DEPTH:
            raise _NotAValue
        self.pos += 1
        while self._skip_ws() != closer:
            read_item(depth + 1)
            ch = self._skip_ws()
            if ch == ",":
                self.pos += 1
            elif ch != closer:
                raise _NotAValue
        self.pos += 1

    def _sequence(self, depth: int, closer: str) -> list[Any]:
        items: list[Any] = []
        self._items(depth, closer, lambda d: items.append(self.value(d)))
        return items

    def _mapping(self, depth: int) -> dict[str, Any]:
        result: dict[str, Any] = {}

        def read_pair(d: int) -> None:
            key = self.value(d)
            if not isinstance(key, str) or self._skip_ws() != ":":
                raise _NotAValue
            self.pos += 1
            result[key.strip().lower()] = self.value(d)

        self._items(depth, "}", read_pair)
        return result


def _normalise_action(raw: str) -> str:
    return re.sub(r"[\s\-]+", "_", _clean(raw).lower())


def _clean(raw: str) -> str:
    return raw.strip().strip("'\"`").strip()


def _make_step(action: Any, arg: Any) -> Step | None:
    """A step only if the action is a word and the argument a word, number or identifier
    (see the module docstring), so prose, code or a null in brackets is not a plan."""
    if not isinstance(action, str) or not isinstance(arg, str):
        return None
    name = _normalise_action(action)
    value = _clean(arg)
    if not _ACTION_OK.fullmatch(name) or not _ARG_OK.fullmatch(value):
        return None
    if name in _NULLS or value.lower() in _NULLS:  # Python's None, JSON's null: nothing
        return None
    qualified = _QUALIFIED.fullmatch(value)
    return Step(name, qualified.group(1) if qualified else value)


def _as_step(item: Any) -> Step | None:
    if isinstance(item, list) and len(item) == 2:
        return _make_step(item[0], item[1])
    if isinstance(item, dict):
        if "action" in item:
            arg = next((item[k] for k in _ARG_KEYS if k in item), None)
            return _make_step(item["action"], arg)
        if len(item) == 1:  # {"move_to": "B1"}
            ((action, arg),) = item.items()
            return _make_step(action, arg)
    return None


def _as_plan(value: Any) -> Plan | None:
    if isinstance(value, dict):
        for key in _WRAPPER_KEYS:
            if key in value and (plan := _as_plan(value[key])) is not None:
                return plan
        return None
    if not isinstance(value, list) or not value:
        return None
    steps: list[Step] = []
    for item in value:
        step = _as_step(item)
        if step is None:
            return None
        steps.append(step)
    return tuple(steps)


def _plausible_starts(text: str) -> list[int]:
    """Positions of ``[``/``{`` that close and are shallow enough to be worth reading.

    One quote-blind pass over the brackets: without it, input like ``"[" * 10**5``
    would start (and abandon) a read at every bracket.
    """
    stack: list[tuple[str, int, int]] = []  # (opener, position, depth of its children)
    open_count = dict.fromkeys("[({", 0)
    starts: list[int] = []
    for match in re.finditer(r"[\[\](){}]", text):
        ch = match.group()
        if ch in _PAIR_OF:
            opener = _PAIR_OF[ch]
            if not open_count[opener]:
                continue  # stray closer
            child_depth = 0
            while True:  # pop unmatched openers down to the partner (quotes, typos)
                popped, pos, depth = stack.pop()
                open_count[popped] -= 1
                child_depth = max(child_depth, depth)
                if popped == opener:
                    break
            if opener in "[{" and child_depth < _MAX_DEPTH:
                starts.append(pos)
            if stack:
                top = stack[-1]
                stack[-1] = (top[0], top[1], max(top[2], child_depth + 1))
        else:
            stack.append((ch, match.start(), 0))
            open_count[ch] += 1
    return sorted(starts)


def _bracket_candidates(text: str) -> list[tuple[int, int, Plan]]:
    """Read a literal at each plausible start; a found plan hides the brackets inside it."""
    found: list[tuple[int, int, Plan]] = []
    covered_until = 0
    for start in _plausible_starts(text):
        if start < covered_until:
            continue
        reader = _Reader(text, start)
        try:
            plan = _as_plan(reader.value())
        except _NotAValue:
            continue
        if plan is not None:
            found.append((start, reader.pos, plan))
            covered_until = reader.pos
    return found


def _line_step(line: str) -> Step | None:
    if ":" not in line and "(" not in line:
        return None
    for form in _LINE_FORMS:
        match = form.fullmatch(line.strip())
        if match is not None:
            arg = match.group("arg")
            return _make_step(match.group("action"), arg if arg[0] in "'\"" else arg.rstrip("."))
    return None


def _line_candidates(text: str) -> list[tuple[int, int, Plan]]:
    """Contiguous ``action: arg`` lines; blank lines do not end a block, prose does."""
    found: list[tuple[int, int, Plan]] = []
    block: list[Step] = []
    block_start = offset = 0
    for line in text.split("\n"):
        step = _line_step(line)
        if step is not None:
            if not block:
                block_start = offset
            block.append(step)
        elif line.strip() and block:
            found.append((block_start, offset, tuple(block)))
            block = []
        offset += len(line) + 1
    if block:
        found.append((block_start, offset, tuple(block)))
    return found


def _overlaps(block: tuple[int, int, Plan], brackets: list[tuple[int, int, Plan]]) -> bool:
    """Lines inside a bracketed plan belong to it; bisect keeps this linear-ish."""
    # Bracket candidates never overlap, so the one starting last before the block ends
    # also ends last; only it can reach back into the block.
    i = bisect.bisect_left(brackets, block[1], key=lambda c: c[0])
    return i > 0 and brackets[i - 1][1] > block[0]


def _choose(
    candidates: list[tuple[int, int, Plan]],
    vocabulary: frozenset[str] | None,
    markers: list[int] | None = None,
) -> Plan | None:
    """The first plan after the last answer marker that has one after it (``markers``:
    where each marker ends, in order), else the last plan; plans, whatever their
    actions, or with a vocabulary only those that use any of it. ``candidates`` are
    sorted by where they start."""
    found = [c for c in candidates if vocabulary is None or any(step.action in vocabulary for step in c[2])]
    if not found:
        return None
    for end in reversed(markers or ()):
        i = bisect.bisect_left(found, end, key=lambda c: c[0])
        if i < len(found):
            return found[i][2]
    return found[-1][2]


def _marker_ends(text: str) -> list[int]:
    """Where each ``Solution:`` line's marker ends."""
    return [m.end() for m in _MARKER.finditer(text)]


def _list_is_answer(s: str, start: int) -> bool:
    """Whether the marker rule leaves the list at ``start`` to the fast path, in a text
    with no bracket before ``start``: only lines can be plans there, and a line that is
    a step holds a ``:`` or a ``(``. So the list is the answer if no such character
    follows the last marker, or if there is no marker at all (then the last plan
    wins). Conservative: a False only sends the answer to the general reader."""
    c = max(s.rfind(":", 0, start), s.rfind("(", 0, start))
    if c < 0:
        return True
    if s[c] == ":" and _MARKER.fullmatch(s, s.rfind("\n", 0, c) + 1, c + 1) is not None:
        return True  # "... Solution: [...]": the usual answer
    return _MARKER.search(s, 0, c) is None


def _normalise_vocabulary(actions: Iterable[str] | None) -> frozenset[str] | None:
    if actions is None:
        return None
    return frozenset(_normalise_action(a) for a in actions if isinstance(a, str))


#: one pair of the usual answer form, ``('move_to', 'B1')``: an action already in its
#: normal form and a plain word argument, each in quotes (ASCII whitespace and word
#: characters inside a pair; groups ``a`` and ``b`` are the quotes' group numbers)
def _pair_source(a: int, b: int) -> str:
    return rf"""(?a:\(\s*(['"])[a-z_][a-z0-9_]{{0,63}}\{a}\s*,\s*(['"])\w{{1,64}}\{b}\s*\))"""


#: the whole list of such pairs, from its ``[`` to its ``]``: pairs separated by commas,
#: a trailing comma allowed, any whitespace between them; possessive, so a near miss
#: fails in linear time
_FAST_LIST = re.compile(rf"\[\s*{_pair_source(1, 2)}(?:\s*,\s*{_pair_source(3, 4)})*+\s*,?\s*\]")
#: the pairs of a list ``_FAST_LIST`` has matched (its quotes are known to pair up)
_FAST_PAIRS = re.compile(r"""\(\s*['"]([a-z_][a-z0-9_]{0,63})['"]\s*,\s*['"](\w{1,64})['"]\s*\)""", re.ASCII)
#: a quoted null anywhere in the list: left to the general reader
_FAST_NULL = re.compile(r"""['"](?:none|null)['"]""", re.IGNORECASE)
_BRACKETS = re.compile(r"[\[\]{}]")


def _fast_pairs(text: str) -> list[tuple[str, str]] | None:
    """The (action, argument) pairs of an answer that ends with one list of plain quoted
    pairs (``... Solution: [('start', 'A1'), ('move_to', 'B1')]``, the form most answers
    take) after text without brackets or braces; None for anything else, which the
    general reader then reads. ``text`` has its curly quotes made ASCII already.

    In such an answer the list is the last candidate, no other candidate can enclose
    it, the answer-line rule leaves it the answer (:func:`_list_is_answer`; otherwise
    the general reader decides), and every pair is a step by the general reader's rules too (a null action or
    argument is left to it): the general reader would choose the same plan, unless the
    task's vocabulary rules it out, which the caller leaves to the general reader.
    tests/test_plan_parser_fast.py checks the agreement on generated and hostile
    answers.
    """
    s = text.rstrip()
    if not s.endswith("]"):
        return None
    start = s.rfind("[")  # pairs of words hold no bracket: this opens the list
    if start < 0 or _BRACKETS.search(s, 0, start) is not None or not _list_is_answer(s, start):
        return None
    if _FAST_LIST.fullmatch(s, start) is None or _FAST_NULL.search(s, start) is not None:
        return None
    body = s[start:]
    # one pass of str.split when the list uses one kind of quote: each pair holds four
    # quotes around its two words, and nothing between pairs is quoted
    if '"' not in body:
        parts = body.split("'")
    elif "'" not in body:
        parts = body.split('"')
    else:
        return _FAST_PAIRS.findall(body)
    return list(zip(parts[1::4], parts[3::4], strict=True))


def _fast_plan(text: str) -> Plan | None:
    """:func:`_fast_pairs` as steps."""
    pairs = _fast_pairs(text)
    return None if pairs is None else tuple(Step(a, b) for a, b in pairs)


def normal_vocabulary(actions: Iterable[str] | None) -> frozenset[str] | None:
    """A task's action vocabulary as :func:`parse_plan` compares it."""
    return _normalise_vocabulary(actions)


#: the inside of one pair of the usual form, between its parentheses
_PAIR_INSIDE = re.compile(r"""\s*(['"])([a-z_][a-z0-9_]{0,63})\1\s*,\s*(['"])(\w{1,64})\3\s*""", re.ASCII)
_LIST_HEAD = re.compile(r"\s*\(")
_LIST_TAIL = re.compile(r"\)\s*,?\s*")
_SEPARATOR = "), ("


class PairReader(Generic[T]):
    """The fast path for readers of many answers: the usual form's plan as items made by
    ``make(action, argument)`` from its pairs, each pair's text read once and then
    remembered (an answer repeats the same few hundred pairs, and so do its neighbours).

    An answer whose pairs are separated by ``"), ("`` (as the prompt's examples are) is
    split there and every piece looked up; other spacing takes :func:`_fast_pairs`.
    Either way :meth:`read` returns the plan :func:`parse_plan` would return with
    ``task_actions=vocabulary``, or None when the fast path does not apply (then ask
    :func:`parse_plan`).
    """

    def __init__(
        self, make: Callable[[str, str], T], vocabulary: Iterable[str] | None = None, memo_size: int = 1 << 16
    ) -> None:
        self.make = make
        self.vocabulary = _normalise_vocabulary(vocabulary)
        self.memo_size = memo_size
        #: the text inside a pair's parentheses -> its item, or None: not a plain pair
        self.memo: dict[str, T | None] = {}
        #: the pieces whose action is in the vocabulary
        self.known: set[str] = set()

    def _inside(self, inside: str) -> T | None:
        m = _PAIR_INSIDE.fullmatch(inside)
        item = None
        if len(self.memo) >= self.memo_size:
            self.memo.clear()
            self.known.clear()
        if m is not None:
            action, arg = m.group(2), m.group(4)
            if action not in _NULLS and arg.lower() not in _NULLS:
                item = self.make(action, arg)
                if self.vocabulary is not None and action in self.vocabulary:
                    self.known.add(inside)
        self.memo[inside] = item
        return item

    def _split(self, s: str, start: int) -> list[str] | None:
        """The insides of the pairs, if the list is split by ``"), ("`` alone."""
        pieces = s[start + 1 : -1].split(_SEPARATOR)
        head = _LIST_HEAD.match(pieces[0])
        cut = pieces[-1].rfind(")")
        if head is None or cut < 0 or _LIST_TAIL.fullmatch(pieces[-1], cut) is None:
            return None
        if len(pieces) == 1:
            if cut < head.end():
                return None
            pieces[0] = pieces[0][head.end() : cut]
        else:
            pieces[0] = pieces[0][head.end() :]
            pieces[-1] = pieces[-1][:cut]
        return pieces

    def read(self, text: Any, max_chars: int = 200_000, max_steps: int = 5_000) -> list[T] | None:
        """``parse_plan(text, task_actions=vocabulary)``'s plan as items, or None: ask it."""
        if not isinstance(text, str) or len(text) > max_chars:
            return None
        s = (text if text.isascii() else text.translate(_QUOTES)).rstrip()
        if not s.endswith("]"):
            return None
        start = s.rfind("[")  # pairs of words hold no bracket: this opens the list
        if start < 0 or _BRACKETS.search(s, 0, start) is not None or not _list_is_answer(s, start):
            return None
        pieces = self._split(s, start)
        items: list[T | None] | None = None
        if pieces is not None:
            memo = self.memo
            try:
                items = list(map(memo.__getitem__, pieces))
            except KeyError:
                items = [memo[p] if p in memo else self._inside(p) for p in pieces]
            if None in items:
                items = None
            elif self.vocabulary is not None and self.known.isdisjoint(pieces):
                return None
        if items is None:
            pairs = _fast_pairs(s)
            if pairs is None:
                return None
            if self.vocabulary is not None and not any(a in self.vocabulary for a, _ in pairs):
                return None
            items = [self.make(a, b) for a, b in pairs]
        if len(items) > max_steps:
            return None
        return items  # type: ignore[return-value]


#: the fast path of :func:`parse_plan`
_STEPS: PairReader[Step] = PairReader(Step)


def parse_plan(
    text: str,
    *,
    task_actions: Iterable[str] | None = None,
    max_chars: int = 200_000,
    max_steps: int = 5_000,
) -> ParsedAnswer:
    """Extract the model's final plan; failures are reported, never raised.

    ``task_actions``: the task's action vocabulary; a candidate using none of it is not
    a plan for the task (see the module docstring). It never rejects a plan for using
    other actions besides. The usual answer form takes a fast path (:func:`_fast_plan`)
    with the same result as the general reader (:func:`parse_plan_general`).
    """
    return _parse(text, task_actions, max_chars, max_steps, fast=True)


def parse_plan_general(
    text: str,
    *,
    task_actions: Iterable[str] | None = None,
    max_chars: int = 200_000,
    max_steps: int = 5_000,
) -> ParsedAnswer:
    """:func:`parse_plan` without the fast path: the reference it is tested against."""
    return _parse(text, task_actions, max_chars, max_steps, fast=False)


def _parse(
    text: str, task_actions: Iterable[str] | None, max_chars: int, max_steps: int, *, fast: bool
) -> ParsedAnswer:
    if not isinstance(text, str):
        return ParsedAnswer(plan=None, error=f"answer is not text (got {type(text).__name__})")
    if len(text) > max_chars:
        return ParsedAnswer(plan=None, error=f"answer too long ({len(text)} characters > {max_chars})")
    if not text.strip():
        return ParsedAnswer(plan=None, error="no plan found (empty answer)")
    try:
        if not text.isascii():
            text = text.translate(_QUOTES)
        steps = _STEPS.read(text, max_chars, 1 << 62) if fast else None
        quick = tuple(steps) if steps is not None else None
        if quick is not None and _choose([(0, len(text), quick)], _normalise_vocabulary(task_actions)):
            # (a list the vocabulary rules out leaves an earlier candidate to the reader)
            if len(quick) > max_steps:
                return ParsedAnswer(plan=None, error=f"plan too long ({len(quick)} steps > {max_steps})")
            return ParsedAnswer(plan=quick, error=None)
        brackets = _bracket_candidates(text)
        lines = [c for c in _line_candidates(text) if not _overlaps(c, brackets)]
        candidates = sorted(brackets + lines, key=lambda c: c[0])
        if not candidates:
            return ParsedAnswer(plan=None, error="no plan found")
        plan = _choose(candidates, _normalise_vocabulary(task_actions), _marker_ends(text))
        if plan is None:
            return ParsedAnswer(plan=None, error="no plan found (none uses the task's actions)")
    except (RecursionError, MemoryError, TypeError, ValueError) as exc:
        # Last-resort guard so one odd answer cannot abort a whole evaluation run.
        return ParsedAnswer(plan=None, error=f"internal parser error: {type(exc).__name__}")
    if len(plan) > max_steps:
        return ParsedAnswer(plan=None, error=f"plan too long ({len(plan)} steps > {max_steps})")
    return ParsedAnswer(plan=plan, error=None)
