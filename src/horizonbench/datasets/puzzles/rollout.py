"""Scoring of puzzle answers: whole plans replayed, and step-by-step rollouts.

A rollout is the paper's autoregressive evaluation: from the start, the model writes
the next state, that state becomes the next input, until the goal, a failure, or
T_max = 2 x the optimal length. The first failure ends the episode and names its mode:

- ``invalid_output``: the answer holds no state (or move list) of the puzzle's grammar;
- ``invalid_move``: the state is not one legal move away (or breaks a rule itself);
- ``loop``: a state the episode already visited;
- ``premature_stop``: STOP before the goal;
- ``budget_exceeded``: the answer was cut by the output-token limit, kept apart from
  wrong answers (the model may have been right, the budget was not);
- ``horizon_exceeded``: T_max steps without reaching the goal.

Everything here is pure: an :class:`Episode` is fed answer texts and says what to ask
next, so the same code scores live runs, reruns from the attempt store, and tests.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from horizonbench.datasets.puzzles.base import BadText, IllegalMove, Puzzle, State
from horizonbench.datasets.puzzles.text import MAX_TEXT, list_spans

ROLLOUT_FAILURES = (
    "invalid_output",
    "invalid_move",
    "loop",
    "premature_stop",
    "budget_exceeded",
    "horizon_exceeded",
)

_STOP = re.compile(r"^\W*stop\W*$", re.IGNORECASE)
_MARKER = re.compile(r"next\s+state\s*:", re.IGNORECASE)
_MOVES_MARKER = re.compile(r"moves\s*:", re.IGNORECASE)
_LINE_MOVES_MARKER = re.compile(r"^[ \t>#*_-]*(?:final[ \t]+)?moves[ \t*_]*:", re.IGNORECASE | re.MULTILINE)
#: markers tried, from the last: an answer has one or two; bounds hostile input
_MAX_MARKERS = 16


@dataclass(frozen=True, slots=True)
class StateAnswer:
    """What a rollout answer says: a state, STOP, or why neither could be read."""

    state: State | None = None
    stop: bool = False
    error: str | None = None


def read_state_answer(puzzle: Puzzle, text: str) -> StateAnswer:
    """The state on the answer's last non-empty line (after "Next state:" if present),
    else the rest of the last marker's line (a sentence after the state line does not
    hide it), else the text after the last marker, else the whole text; STOP alone on
    the last line ends the episode."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    if not lines:
        return StateAnswer(error="empty answer")
    last = lines[-1]
    if _STOP.match(last):
        return StateAnswer(stop=True)
    candidates = []
    marked = _MARKER.split(last)
    candidates.append(marked[-1].strip())
    tail = _MARKER.split(text)
    if len(tail) > 1:
        candidates.append(tail[-1].strip().split("\n", 1)[0])
        candidates.append(tail[-1].strip())
    candidates.append(text.strip())
    error = "no state found"
    for cand in candidates:
        if not cand:
            continue
        try:
            return StateAnswer(state=puzzle.parse_state(cand.strip("`").strip()))
        except BadText as exc:
            error = str(exc)
    return StateAnswer(error=error[:200])


def read_plan_answer(puzzle: Puzzle, text: str) -> tuple[list[Any] | None, str | None]:
    """The move list the prompt asks for: the first list of moves after the last
    "Moves:" that has one after it, so a recap of a few moves written after it (a short
    list in a sentence) does not replace it. Markers at the start of a line (also
    ``**Moves:**``, ``Final moves:``) are the answer lines; only when there is none does
    a "moves:" inside a line count. With no marker followed by a list of moves, the
    last list of moves anywhere in the text (a model that revises commits last)."""
    if not isinstance(text, str) or len(text) > MAX_TEXT:
        return None, "answer text missing or too long"
    ends = [m.end() for m in _LINE_MOVES_MARKER.finditer(text)] or [
        m.end() for m in _MOVES_MARKER.finditer(text)
    ]
    error = "no list of moves found"
    for end in reversed(ends[-_MAX_MARKERS:]):
        for start, stop in list_spans(text, end):
            try:
                return puzzle.parse_moves(text[start:stop]), None
            except BadText as exc:
                error = str(exc)
    try:
        return puzzle.parse_moves(text), None
    except BadText as exc:
        error = str(exc)
    return None, error[:200]


@dataclass(frozen=True, slots=True)
class PlanResult:
    success: bool
    valid: bool
    exact_match: bool
    plan_length: int
    legal_moves: int
    violation: str | None
    first_violation_step: int | None
    #: the states the legal prefix visited, start first (the progress measures read them)
    states: tuple[State, ...] = ()

    def optimality_gap(self, optimal: int) -> float | None:
        if not self.success or optimal == 0:
            return 0.0 if self.success else None
        return (self.plan_length - optimal) / optimal


def score_plan(
    puzzle: Puzzle,
    start: State,
    goal: State,
    rules: Mapping[str, Any],
    gold_moves: Sequence[str],
    moves: Sequence[Any],
) -> PlanResult:
    """Replay a parsed whole plan. A legal plan that stops short is ``goal_not_reached``."""
    exact = [puzzle.format_move(m) for m in moves] == list(gold_moves)
    state = start
    states = [start]
    for i, move in enumerate(moves):
        try:
            state = puzzle.apply(state, move, rules)
        except IllegalMove as exc:
            return PlanResult(False, False, exact, len(moves), i, exc.kind, i, tuple(states))
        states.append(state)
    if state != goal:
        return PlanResult(
            False, True, exact, len(moves), len(moves), "goal_not_reached", len(moves), tuple(states)
        )
    return PlanResult(True, True, exact, len(moves), len(moves), None, None, tuple(states))


@dataclass
class Episode:
    """One rollout, fed the model's answers in order."""

    puzzle: Puzzle
    start: State
    goal: State
    rules: Mapping[str, Any]
    n: int
    optimal: int
    state: State = field(init=False)
    visited: set[State] = field(init=False)
    #: the states the episode went through, start first (the progress measures read them)
    path: list[State] = field(init=False)
    steps: int = 0
    legal: int = 0
    failure: str | None = None
    failure_step: int | None = None
    detail: str | None = None
    #: a start that is its goal (0 moves: the paper's trivial Checkers boards) is
    #: solved by answering STOP at the first step; until then it is not over
    stopped: bool = False

    def __post_init__(self) -> None:
        self.state = self.start
        self.visited = {self.start}
        self.path = [self.start]

    @property
    def max_steps(self) -> int:
        return 2 * self.optimal

    @property
    def solved(self) -> bool:
        return self.state == self.goal and (self.optimal > 0 or self.stopped)

    @property
    def done(self) -> bool:
        return self.solved or self.failure is not None

    def feed(self, text: str, finish_reason: str = "stop") -> None:
        """Take the answer to step ``steps + 1``."""
        if self.done:
            raise RuntimeError("episode already ended")
        turn = self.steps
        self.steps += 1
        if finish_reason == "length":
            self._fail("budget_exceeded", turn, "the answer reached the output-token limit")
            return
        answer = read_state_answer(self.puzzle, text)
        if answer.stop:
            if self.state == self.goal:  # only a 0-move puzzle can be asked at its goal
                self.stopped = True
                return
            self._fail("premature_stop", turn, "STOP before the goal")
            return
        if answer.state is None:
            self._fail("invalid_output", turn, answer.error)
            return
        nxt = answer.state
        problem = self.puzzle.check_state(nxt, self.n, self.rules)
        if problem is None and nxt not in {t for _, t in self.puzzle.successors(self.state, self.rules)}:
            problem = "not one legal move from the current state"
        if problem is not None:
            self._fail("invalid_move", turn, problem)
            return
        if nxt in self.visited:
            self._fail("loop", turn, "a state visited before")
            return
        self.legal += 1
        self.visited.add(nxt)
        self.path.append(nxt)
        self.state = nxt
        if not self.solved and self.steps >= self.max_steps:
            self._fail("horizon_exceeded", turn, f"{self.max_steps} steps without reaching the goal")

    def _fail(self, mode: str, turn: int, detail: str | None) -> None:
        self.failure, self.failure_step, self.detail = mode, turn, detail

    def legality_rate(self) -> float:
        """Legal transitions among the states the model wrote (the paper's move legality);
        STOP, cut and unreadable answers count as not legal."""
        return self.legal / self.steps if self.steps else 1.0

    def optimality_gap(self) -> float | None:
        if not self.solved:
            return None
        return (self.steps - self.optimal) / self.optimal if self.optimal else 0.0
