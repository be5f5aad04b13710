"""Any :class:`~horizonbench.datasets.puzzles.base.Puzzle` as a horizonbench family.

The candidate space of a puzzle family is the concatenation, over the configured sizes
``ns``, of the puzzle's configurations; candidate ``index`` is configuration ``index``
of that list. The list depends on the parameters only (``sample_seed`` for the sampled
ones), never on the run seed: the puzzles are a fixed benchmark, as in the paper, and a
run seed changes the model samples, not the questions.

Instances that share a goal are certified by one search from the goal, cached per
process (see each puzzle's ``certify``); every certificate is replayed before its row
is written.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from horizonbench.core.answer_styles import PlanPieces
from horizonbench.core.hazard import PlantedTruth, step_rate
from horizonbench.core.types import Candidate, Message, ParsedAnswer, Score, Step
from horizonbench.datasets.puzzles import prompt
from horizonbench.datasets.puzzles.base import (
    BadText,
    Certificate,
    Configuration,
    IllegalMove,
    Puzzle,
    State,
    Unsolved,
    replay,
    trajectory_ok,
)
from horizonbench.datasets.puzzles.rollout import ROLLOUT_FAILURES, Episode, read_plan_answer, score_plan
from horizonbench.datasets.puzzles.text import as_int, read_list
from horizonbench.schemas.tables import COMMON_INSTANCE_FIELDS

#: whole-plan outcomes beyond the puzzle's own illegal-move kinds
PLAN_FAILURES = ("invalid_output", "goal_not_reached")


class PuzzlePrompt(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    #: include one worked example (a certified puzzle of size 2 of the same kind)
    shots: int = Field(default=1, ge=0, le=1)


def puzzle_fields(rule_fields: Sequence[pa.Field]) -> list[pa.Field]:
    """Instance columns of every puzzle family, then the puzzle's own rule columns."""
    return COMMON_INSTANCE_FIELDS + [
        pa.field("n", pa.int32(), nullable=False),
        pa.field("label", pa.string(), nullable=False),
        pa.field("initial_state", pa.string(), nullable=False),
        pa.field("goal_state", pa.string(), nullable=False),
        #: the optimal move list, one move per entry in the puzzle's move format
        pa.field("moves", pa.list_(pa.string()), nullable=False),
        #: the optimal trajectory: solution_length + 1 states, start to goal
        pa.field("states", pa.list_(pa.string()), nullable=False),
        #: search nodes of the certificate (a shared distance map counts whole)
        pa.field("search_nodes", pa.int64(), nullable=False),
        #: the start is the goal (0 moves): kept only by the paper's Checkers reading
        #: (``keep_trivial``), where Table 4 counts them; never drawn by default
        pa.field("start_is_goal", pa.bool_(), nullable=False),
        *rule_fields,
    ]


def _params_key(params: BaseModel) -> str:
    return json.dumps(params.model_dump(mode="json"), sort_keys=True)


@lru_cache(maxsize=32)
def _repeats(puzzle_cls: type, params_json: str) -> frozenset[int]:
    """Indices of candidates whose (n, rules, start, goal) an earlier candidate has."""
    seen: set[tuple[Any, ...]] = set()
    out = set()
    for i, c in enumerate(_space(puzzle_cls, params_json)):
        key = (c.n, json.dumps(dict(c.rules), sort_keys=True), c.start, c.goal)
        if key in seen:
            out.add(i)
        seen.add(key)
    return frozenset(out)


@lru_cache(maxsize=32)
def _space(puzzle_cls: type, params_json: str) -> tuple[Configuration, ...]:
    puzzle: Puzzle = puzzle_cls()
    params = puzzle.params_model.model_validate_json(params_json)
    seed = int(getattr(params, "sample_seed", 0))
    out: list[Configuration] = []
    for n in params.ns:  # type: ignore[attr-defined]
        out.extend(puzzle.configurations(n, params, seed))
    return tuple(out)


def instance_id(family: str, config: Configuration, puzzle: Puzzle) -> str:
    """Content-addressed: the same puzzle has the same id in every run and benchmark."""
    h = hashlib.sha256()
    for part in (
        family,
        str(config.n),
        json.dumps(dict(config.rules), sort_keys=True),
        puzzle.format_state(config.start),
        puzzle.format_state(config.goal),
    ):
        h.update(part.encode())
        h.update(b"\x1f")
    return f"{family}-{h.hexdigest()[:16]}"


class PuzzleFamily:
    """The family protocol over a puzzle; subclasses set ``puzzle_cls`` and ``rule_fields``."""

    name: ClassVar[str]
    puzzle_cls: ClassVar[type]
    rule_fields: ClassVar[list[pa.Field]]
    prompt_model: ClassVar[type[BaseModel]] = PuzzlePrompt
    #: rule columns the worked example must share with the instance (they change the rules)
    example_rules: ClassVar[tuple[str, ...]] = ()
    #: evaluation modes: "plan" (one answer, replayed) and "rollout" (one call per step)
    modes: ClassVar[tuple[str, ...]] = ("plan", "rollout")

    def __init__(self) -> None:
        self.puzzle: Puzzle = self.puzzle_cls()

    # --- class-level protocol attributes, derived from the puzzle ---------------------

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if hasattr(cls, "puzzle_cls"):
            cls.params_model = cls.puzzle_cls.params_model  # type: ignore[attr-defined]
            cls.instance_schema = pa.schema(puzzle_fields(cls.rule_fields))  # type: ignore[attr-defined]
            cls.violations = tuple(  # type: ignore[attr-defined]
                dict.fromkeys((*PLAN_FAILURES, *cls.puzzle_cls.violations, *ROLLOUT_FAILURES))
            )

    # --- generation -------------------------------------------------------------------

    def candidate_count(self, params: BaseModel) -> int:
        """Size of the candidate space: the generator never asks beyond it."""
        return len(_space(self.puzzle_cls, _params_key(self._params(params))))

    def candidate_difficulty(self, params: BaseModel, index: int) -> int | None:
        """The n of candidate ``index``, known before certifying it (shards skip the
        candidates of sizes whose quota is already full)."""
        space = _space(self.puzzle_cls, _params_key(self._params(params)))
        return space[index].n if index < len(space) else None

    def request_problems(self, params: BaseModel, sampling: Any) -> list[str]:
        """Bin quotas no run of these params can fill, as ``field: reason`` lines (empty
        when none). A bin of sizes n holds at most the candidates of those sizes whose
        start is not their goal, so a larger quota is known to fail before anything is
        generated; a quota within it may still fall short (unsolvable candidates), and
        that run ends with exit code 4 as before. Why at config time: RecurrReason's
        Blocks World has 6 puzzles at n = 1, and a quota of 100 there cost a whole
        generation before the run failed."""
        bins = getattr(sampling, "bins", None)
        if bins is None:
            return []
        p = self._params(params)
        space = _space(self.puzzle_cls, _params_key(p))
        # with ``dedup: after`` every candidate can take a slot (trivial ones too), and a
        # bin holds "up to" its quota (Algorithm 6); otherwise trivial ones never count
        after = getattr(p, "dedup", "before") == "after"
        per_n = Counter(c.n for c in space if after or c.start != c.goal)
        short = []
        for lo in bins.edges():
            hi = min(lo + bins.width, bins.max) - 1
            have = sum(per_n[n] for n in range(lo, hi + 1))
            if have < bins.quota(lo):
                sizes = f"n = {lo}" if hi == lo else f"n = {lo}-{hi}"
                short.append((lo, f"{sizes}: {have} of {bins.quota(lo)}", have))
        if not short:
            return []
        shown = ", ".join(text for _, text, _ in short[:6]) + (" ..." if len(short) > 6 else "")
        fix = ", ".join(f"{lo}: {have}" for lo, _, have in short if have > 0)
        hints = [f"give them quotas they can fill (quotas: {{{fix}}})"] if fix else []
        if any(have == 0 for *_, have in short):
            hints.append("narrow the bins to the sizes in params.ns")
        hint = ", and ".join(hints)
        return [
            f"sampling.bins: {len(short)} of {len(bins.edges())} bins ask for more {self.name} puzzles "
            f"than these params have ({shown}); {hint}"
        ]

    def _params(self, params: BaseModel | Mapping[str, Any]) -> BaseModel:
        model = self.puzzle.params_model
        if isinstance(params, model):
            return params
        return model.model_validate(params.model_dump() if isinstance(params, BaseModel) else params)

    def generate_candidate(self, params: BaseModel, seed: int, index: int) -> Candidate:
        p = self._params(params)
        space = _space(self.puzzle_cls, _params_key(p))
        if index >= len(space):
            return Candidate(None, "beyond_candidate_space")
        config = space[index]
        # Algorithm 6 read literally (``dedup: after``): a trivial or repeated candidate
        # counts as solved toward the first M per n, and is dropped after that cut
        after = getattr(p, "dedup", "before") == "after"
        if config.start == config.goal:
            if getattr(p, "keep_trivial", False):  # the paper keeps them, 0 moves
                return Candidate(self.row(config, Certificate((config.start,), ()), seed, index))
            return Candidate(None, "start_is_goal", config.n if after else None)
        cert = self._certify(p, config)
        if not isinstance(cert, Certificate):
            return Candidate(None, cert.reason)
        if not trajectory_ok(self.puzzle, config, cert):
            return Candidate(None, "certificate_invalid")
        if after and index in _repeats(self.puzzle_cls, _params_key(p)):
            return Candidate(None, "repeated_pair", config.n)
        return Candidate(self.row(config, cert, seed, index))

    def _certify(self, p: BaseModel, config: Configuration) -> Certificate | Unsolved:
        """The puzzle's certificate; a puzzle with a choice of search (Blocks World's
        ``search``) is told which."""
        search = getattr(p, "search", None)
        if search is None:
            return self.puzzle.certify(config, int(p.node_limit))  # type: ignore[attr-defined]
        return self.puzzle.certify(config, int(p.node_limit), search)  # type: ignore[attr-defined,call-arg]

    def row(self, config: Configuration, cert: Certificate, seed: int, index: int) -> dict[str, Any]:
        pz = self.puzzle
        moves = [pz.format_move(m) for m in cert.moves]
        row: dict[str, Any] = {
            "instance_id": instance_id(self.name, config, pz),
            "family": self.name,
            "seed": seed,
            "candidate_index": index,
            "solution": [{"action": pz.action, "arg": m} for m in moves],
            "solution_length": cert.length,
            "optimal_plan_count": None,
            "n": config.n,
            "label": config.label,
            "initial_state": pz.format_state(config.start),
            "goal_state": pz.format_state(config.goal),
            "moves": moves,
            "states": [pz.format_state(s) for s in cert.states],
            "search_nodes": cert.nodes,
            "start_is_goal": config.start == config.goal,
        }
        for f in self.rule_fields:
            row[f.name] = config.rules[f.name]
        return row

    def difficulty(self, row: Mapping[str, Any]) -> int:
        """Sampling quotas are per size n (the paper keeps the first M solved per n)."""
        return int(row["n"])

    # --- prompts ----------------------------------------------------------------------

    def rules_of(self, row: Mapping[str, Any]) -> dict[str, Any]:
        return {f.name: _plain(row[f.name]) for f in self.rule_fields}

    def _example(self, row: Mapping[str, Any]) -> dict[str, Any] | None:
        """Never the asked puzzle itself: the example has another size (2, or 3 for n=2)."""
        rules = {k: v for k, v in self.rules_of(row).items() if k in self.example_rules}
        size = 3 if int(row["n"]) == 2 else 2
        return _worked_example(type(self), json.dumps(rules, sort_keys=True), size)

    def render_prompt(self, row: Mapping[str, Any], prompt_settings: BaseModel) -> list[Message]:
        ps = PuzzlePrompt.model_validate(
            prompt_settings.model_dump() if isinstance(prompt_settings, BaseModel) else prompt_settings
        )
        rules_text = self.puzzle.describe_rules(self.rules_of(row), int(row["n"]))
        example = self._example(row) if ps.shots else None
        return prompt.plan_messages(rules_text, row["initial_state"], row["goal_state"], example)

    def step_prompt(
        self, row: Mapping[str, Any], prompt_settings: BaseModel, state: State, step: int
    ) -> list[Message]:
        ps = PuzzlePrompt.model_validate(
            prompt_settings.model_dump() if isinstance(prompt_settings, BaseModel) else prompt_settings
        )
        rules_text = self.puzzle.describe_rules(self.rules_of(row), int(row["n"]))
        example = self._example(row) if ps.shots else None
        pair = tuple(example["states"][:2]) if example and len(example["states"]) > 1 else None
        return prompt.step_messages(
            rules_text,
            row["goal_state"],
            self.puzzle.format_state(state),
            step,
            2 * int(row["solution_length"]),
            pair,
        )

    # --- whole-plan scoring -----------------------------------------------------------

    def move_list(self, texts: Iterable[str]) -> list[Any]:
        """Moves from their stored text forms (one per entry, as in ``row["moves"]`` and a
        parsed plan's steps): read as one list, with the puzzle's own parser."""
        return self.puzzle.parse_moves("[" + ", ".join(texts) + "]")

    def parse_answer(self, text: str) -> ParsedAnswer:
        moves, error = read_plan_answer(self.puzzle, text)
        if moves is None:
            return ParsedAnswer(None, error)
        return ParsedAnswer(tuple(Step(self.puzzle.action, self.puzzle.format_move(m)) for m in moves))

    def score(self, row: Mapping[str, Any], parsed: ParsedAnswer) -> Score:
        """Replay the plan. Success is the goal reached by legal moves, as in the paper;
        how far from optimal a success is goes to ``optimality_gap``, not to a violation."""
        optimal = int(row["solution_length"])
        if parsed.plan is None:
            return _failed_score("invalid_output", 0, parsed.error)
        res = score_plan(
            self.puzzle,
            self.start(row),
            self.goal(row),
            self.rules_of(row),
            list(row["moves"]),
            self.move_list(s.arg for s in parsed.plan),
        )
        legality = res.legal_moves / res.plan_length if res.plan_length else (1.0 if res.success else 0.0)
        progress, best = self.goal_progress(row, res.states)
        violation, first = res.violation, res.first_violation_step
        return Score(
            success=res.success,
            valid=res.valid,
            exact_match=res.exact_match,
            progress_ratio=progress,
            precision=math.nan,
            recall=math.nan,
            plan_length=res.plan_length,
            violation=violation,
            first_violation_step=first,
            extra={
                "mode": "plan",
                "optimality_gap": res.optimality_gap(optimal),
                "move_legality_rate": legality,
                "legal_move_coverage": _coverage(res.legal_moves, res.success, optimal),
                "best_progress": best,
                "steps_taken": res.plan_length,
                "parse_error": None,  # a plan that reached scoring was read
            },
        )

    def trajectory_problem(self, row: Mapping[str, Any]) -> str:
        """ "ok", or what is wrong with the row's certificate (validation replays it)."""
        pz, rules = self.puzzle, self.rules_of(row)
        try:
            states = [pz.parse_state(t) for t in row["states"]]
            moves = self.move_list(row["moves"])
        except BadText as exc:
            return f"unparsable: {exc}"
        for st in states:
            why = pz.check_state(st, int(row["n"]), rules)
            if why is not None:
                return f"bad state: {why}"
        try:
            walked = replay(pz, states[0], moves, rules)
        except IllegalMove as exc:
            return f"illegal move: {exc}"
        return "ok" if walked == states else "trajectory does not match its moves"

    def goal_progress(self, row: Mapping[str, Any], states: Sequence[State]) -> tuple[float, float]:
        """(progress, best progress) of a trajectory: the share of the start's distance
        to the goal that its last state closed, ``1 - d(last) / d(start)`` clipped to
        [0, 1], and the same for the closest state it reached.

        Why: counting legal moves (the old progress and recall) gave a random walk that
        never reaches the goal 1.0 (issue 22); the distance map of the certificate says
        how far from the goal each state is. A state the goal cannot be reached from
        closes nothing (progress 0).

        Kept cheap for scoring: the maps of Hanoi, Checkers and River Crossing are the
        certificates' cached ones (one look-up a state); Blocks World searches (A*), so
        a state of the gold trajectory is read off the row, the last state is searched
        only up to d(start) (at or past it, the clipped progress is 0 whatever the
        exact distance), and the closest of the others comes from ONE search from all of
        them, given up once it cannot beat the best so far.
        """
        optimal = int(row["solution_length"])
        if optimal <= 0 or not states:
            return 1.0, 1.0
        pz, goal, rules, n = self.puzzle, self.goal(row), self.rules_of(row), int(row["n"])
        # the gold trajectory's distances are known: read them off the row first (a
        # puzzle whose instance has no cached map, like Checkers' forward-only start,
        # would search for each)
        known = {text: optimal - i for i, text in enumerate(row["states"])}
        if not getattr(pz, "searched_distances", False):
            lookup = pz.distance_to(goal, rules, n)

            def distance(state: State) -> int | None:
                d = known.get(pz.format_state(state))
                return lookup(state) if d is None else d

            ds = [distance(s) for s in dict.fromkeys(states)]
            reached = [d for d in ds if d is not None]
            final = 0 if states[-1] == goal else distance(states[-1])
            best = min(reached, default=optimal)
        else:
            # a search per state is too slow: the gold trajectory's states are read off
            # the row, the last state is searched, and the closest of the rest comes from
            # one search from all of them at once, bounded by the best so far
            best, others = optimal, []
            for s in dict.fromkeys(states):
                d = known.get(pz.format_state(s))
                if d is None:
                    others.append(s)
                else:
                    best = min(best, d)
            last = states[-1]
            final = known.get(pz.format_state(last))
            if final is None:
                # bounded at d(start): a last state at least that far closed nothing, and
                # its exact distance (a long search) would not change the clipped 0
                final = pz.closest_distance([last], goal, rules, n, optimal)
            if final is not None:
                best = min(best, final)
            others = [s for s in others if s != last]
            if others and best > 0:
                near = pz.closest_distance(others, goal, rules, n, best)
                if near is not None:
                    best = min(best, near)
        progress = 0.0 if final is None else min(1.0, max(0.0, 1.0 - final / optimal))
        return progress, 1.0 - best / optimal

    # --- rollouts ---------------------------------------------------------------------

    def start(self, row: Mapping[str, Any]) -> State:
        return self.puzzle.parse_state(row["initial_state"])

    def goal(self, row: Mapping[str, Any]) -> State:
        return self.puzzle.parse_state(row["goal_state"])

    def episode(self, row: Mapping[str, Any]) -> Episode:
        return Episode(
            self.puzzle,
            self.start(row),
            self.goal(row),
            self.rules_of(row),
            int(row["n"]),
            int(row["solution_length"]),
        )

    def score_episode(self, row: Mapping[str, Any], ep: Episode) -> Score:
        optimal = int(row["solution_length"])
        progress, best = self.goal_progress(row, ep.path)
        return Score(
            success=ep.solved,
            valid=ep.failure is None,
            exact_match=False,
            progress_ratio=progress,
            precision=math.nan,
            recall=math.nan,
            plan_length=ep.steps,
            violation=ep.failure,
            first_violation_step=ep.failure_step,
            extra={
                "mode": "rollout",
                "optimality_gap": ep.optimality_gap(),
                "move_legality_rate": ep.legality_rate(),
                "legal_move_coverage": _coverage(ep.legal, ep.solved, optimal),
                "best_progress": best,
                "steps_taken": ep.steps,
                "parse_error": ep.detail if ep.failure == "invalid_output" else None,
            },
        )

    # --- offline baselines ------------------------------------------------------------

    def offline_answer(
        self, row: Mapping[str, Any], kind: str, rng: np.random.Generator, eps: float | PlantedTruth
    ) -> str:
        """A whole plan. ``noisy`` replaces each gold move, independently with probability
        eps (or ``hazard(i)`` for move i, given a :class:`PlantedTruth`), by an illegal one
        and stops there, so it succeeds with (1 - eps)^L (``prod (1 - hazard(i))``)
        exactly; ``random`` walks L legal moves at random."""
        return _moves_text(self._intended_moves(row, kind, rng, eps))

    def offline_pieces(
        self, row: Mapping[str, Any], kind: str, rng: np.random.Generator, eps: float | PlantedTruth
    ) -> PlanPieces:
        """:meth:`offline_answer`'s intended moves (same draws) in the forms the answer
        styles arrange."""
        moves = self._intended_moves(row, kind, rng, eps)
        items = [read_list(m) for m in moves]
        head = moves[:2]
        return PlanPieces(
            marker="Moves:",
            plan=_list_text(moves),
            draft=_list_text(moves[: len(moves) // 2]) if len(moves) > 1 else None,
            json=json.dumps({"moves": [[_json_atom(a) for a in item] for item in items]}),
            recap_list=f"To recap, the first moves are {_list_text(head)} and so on." if head else None,
            recap_lines="\n".join(f"Move {i} is {m}" for i, m in enumerate(head, 1)) if head else None,
        )

    def _intended_moves(
        self, row: Mapping[str, Any], kind: str, rng: np.random.Generator, eps: float | PlantedTruth
    ) -> list[str]:
        pz, rules = self.puzzle, self.rules_of(row)
        gold = list(row["moves"])
        if kind == "oracle":
            return gold
        state = self.start(row)
        if kind == "noisy":
            out: list[str] = []
            for i, (move_text, move) in enumerate(zip(gold, self.move_list(gold), strict=True), start=1):
                if rng.random() < step_rate(eps, i):
                    out.append(pz.format_move(pz.illegal_move(state, rules, rng)))
                    return out
                out.append(move_text)
                state = pz.apply(state, move, rules)
            return out
        if kind != "random":
            raise ValueError(f"unknown offline baseline {kind!r}")
        walk: list[str] = []
        for _ in range(len(gold)):
            options = list(pz.successors(state, rules))
            if not options:
                break
            move, state = options[int(rng.integers(len(options)))]
            walk.append(pz.format_move(move))
        return walk

    def offline_step(
        self, row: Mapping[str, Any], state_text: str, kind: str, rng: np.random.Generator, eps: float
    ) -> str:
        """One rollout answer from ``state_text``: the oracle follows the certificate, the
        noisy baseline writes a state one legal move cannot reach with probability eps
        (so an episode succeeds with (1 - eps)^L), the random one a random legal next state."""
        nxt = self._intended_step(row, state_text, kind, rng, eps)
        return "STOP" if nxt is None else f"Next state: {nxt}"

    def offline_step_pieces(
        self, row: Mapping[str, Any], state_text: str, kind: str, rng: np.random.Generator, eps: float
    ) -> PlanPieces | None:
        """:meth:`offline_step`'s intended next state (same draws) in the forms the answer
        styles arrange; None for STOP. A state has no JSON form here (the step prompt asks
        for a line), so the ``json`` style writes it fenced; its recap is a sentence after
        the state line."""
        nxt = self._intended_step(row, state_text, kind, rng, eps)
        if nxt is None:
            return None
        return PlanPieces(
            marker="Next state:",
            plan=nxt,
            draft=state_text if state_text != nxt else None,
            recap_list="That is one move from the current state, and I stop there for this turn.",
        )

    def _intended_step(
        self, row: Mapping[str, Any], state_text: str, kind: str, rng: np.random.Generator, eps: float
    ) -> str | None:
        """The next state an offline baseline means to write, or None for STOP."""
        pz, rules = self.puzzle, self.rules_of(row)
        state = pz.parse_state(state_text)
        if kind == "noisy" and rng.random() < eps:
            return pz.format_state(pz.wrong_successor(state, rules, rng))
        states = list(row["states"])
        here = pz.format_state(state)
        if kind in ("oracle", "noisy") and here in states[:-1]:
            return str(states[states.index(here) + 1])
        if state == self.goal(row):
            return None
        options = [t for _, t in pz.successors(state, rules)]
        if not options:
            return None
        return pz.format_state(options[int(rng.integers(len(options)))])


def _coverage(legal: int, success: bool, optimal: int) -> float:
    """Legal moves made, as a share of the optimal length (capped at 1; 1 for a success):
    what the puzzles called recall and progress before issue 22. It counts moves, not
    progress: a legal random walk of L moves scores 1.0."""
    if success:
        return 1.0
    return min(legal, optimal) / optimal if optimal else 0.0


def _moves_text(moves: Sequence[str]) -> str:
    return f"Moves: {_list_text(moves)}"


def _list_text(moves: Sequence[str]) -> str:
    return f"[{', '.join(moves)}]"


def _json_atom(atom: Any) -> Any:
    """An atom of a move as JSON writes it: a number as a number, a name as a string."""
    if isinstance(atom, list):
        return [_json_atom(a) for a in atom]
    n = as_int(atom)
    return atom if n is None else n


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _failed_score(violation: str, plan_length: int, parse_error: str | None) -> Score:
    return Score(
        success=False,
        valid=False,
        exact_match=False,
        progress_ratio=0.0,
        precision=math.nan,
        recall=math.nan,
        plan_length=plan_length,
        violation=violation,
        first_violation_step=0,
        extra={
            "mode": "plan",
            "optimality_gap": None,
            "move_legality_rate": 0.0,
            "legal_move_coverage": 0.0,
            "best_progress": 0.0,
            "steps_taken": 0,
            "parse_error": parse_error,
        },
    )


@lru_cache(maxsize=64)
def _worked_example(family_cls: type, rules_json: str, size: int) -> dict[str, Any] | None:
    """A certified puzzle of another size with the same example rules (boat capacity,
    stacks, direction), shown in the prompt: the first of that size's configurations
    whose certificate has at least two moves."""
    fam: PuzzleFamily = family_cls()
    rules = json.loads(rules_json)
    params = fam.puzzle.params_model.model_validate({"ns": [size]})
    for config in fam.puzzle.configurations(size, params, 0):
        if any(config.rules.get(k) != v for k, v in rules.items()) or config.start == config.goal:
            continue
        cert = fam.puzzle.certify(config, int(params.node_limit))  # type: ignore[attr-defined]
        if isinstance(cert, Certificate) and cert.length >= 2:
            return fam.row(config, cert, 0, 0)
    return None


__all__ = ["PuzzleFamily", "PuzzlePrompt", "puzzle_fields"]
