"""Checkers Jumping (appendix F of the RecurrReason paper): a row of ``2n + 1`` cells
with ``n`` red (``R``) and ``n`` blue (``B``) checkers and one gap (``_``).

A state is the board string itself, e.g. ``"RR_BB"``, which is also its text form. A
move is ``(colour, from_cell, to_cell)`` with 0-based cells, written ``["R", 1, 2]``.
A checker either slides one cell into the gap next to it or jumps over exactly one
checker of the other colour into the gap just beyond it.

The rules of an instance are ``{"orientation", "forward_only"}``:

- ``orientation`` names the goal. ``red_right``: every blue checker on the left, every
  red one on the right, the gap in the middle (``"BB_RR"``); ``red_left`` the opposite
  (``"RR_BB"``). All starts of one (n, orientation) share this goal.
- ``forward_only`` is the paper's direction rule (red only towards its goal side, blue
  only towards the other), which "only applies when all the red checkers are on one side
  and all the blue checkers are on the other": it is True for the classic start of the
  orientation (``"RR_BB"`` for ``red_right``) and False for every other start, where
  checkers may slide or jump in either direction.

The configurations of a size are all boards with the gap in the centre (2 * C(2n, n)
over both orientations), which reproduces the paper's Table 4 counts exactly for
n = 1..5 (4, 12, 40, 140, 504 puzzles; 6, 52, 336, 1928, 10260 optimal moves). Larger
sizes are a seeded uniform sample. (The paper's sets for n = 6..10 are, by their move
totals, the first 500 boards of each orientation in this order, which leans towards
boards that begin with blue checkers.) The two boards that already are their
orientation's goal are listed too (the family adapter drops them as ``start_is_goal``).

Certificates. Without the direction rule every move can be undone, so the states that
lead to a board are the ones reached from it, and one backward BFS from the shared goal
certifies every free start of that (n, orientation). It runs over all
(2n + 1) * C(2n, n) boards (3.9M at n = 10), which a BFS over board strings does in
about 20 s per goal at n = 10; here the boards are coded as integers (gap cell and a
bit mask of the red checkers) and the BFS expands a whole layer at a time with numpy
(about 0.5 s), producing exactly the same distances (the tests compare it with
:func:`~horizonbench.datasets.puzzles.base.distance_map` over strings). The map is cached
per (n, orientation) and read off by :func:`~horizonbench.datasets.puzzles.base.descend`
with the board-string moves. The classic forward-only start gets its own BFS (its
optimum is (n + 1)^2 - 1).
"""

from __future__ import annotations

import hashlib
import re
from array import array
from collections.abc import Callable, Iterator, Mapping
from functools import lru_cache
from math import comb
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from horizonbench.datasets.puzzles.base import (
    MAX_N,
    BadText,
    Certificate,
    Configuration,
    IllegalMove,
    Sizes,
    Unsolved,
    bfs_distance,
    bfs_path,
    descend,
    pick_by_kind,
    pick_wrong_successor,
)
from horizonbench.datasets.puzzles.text import as_int, last_move_list

CheckersMove = tuple[str, int, int]
Rules = Mapping[str, Any]
#: the direction of each colour under the forward-only rule (+1: towards higher cells);
#: None when checkers may move both ways
Steps = Mapping[str, int] | None

ORIENTATIONS = ("red_right", "red_left")
_STEPS: dict[str, dict[str, int]] = {"red_right": {"R": 1, "B": -1}, "red_left": {"R": -1, "B": 1}}
_OTHER = {"R": "B", "B": "R"}
_COLOUR_WORDS = {"R": "R", "B": "B", "RED": "R", "BLUE": "B"}
_QUOTES = "`'\"\u2018\u2019\u201c\u201d"
#: a board without its gap as binary digits (red = 1), read by ``int(..., 2)``
_BITS = str.maketrans("RB", "10", "_")
#: the distance code of a board the backward search never reached
_UNREACHED = 255


class CheckersParams(BaseModel):
    """Generation parameters. There are 2 * C(2n, n) centre-gap boards (369,512 at
    n = 10); sizes with more than ``max_configurations_per_n`` are a uniform sample of
    that many boards drawn with ``sample_seed`` (see :func:`_chosen_indices`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ns: Sizes
    max_configurations_per_n: int = Field(default=1000, ge=1)
    #: above the cap: "uniform", a seeded uniform sample; "first", the first half of the
    #: cap of each orientation in lexicographic order, which is what the paper's Table 4
    #: holds for n = 6..10 (its move totals are reproduced exactly)
    selection: Literal["uniform", "first"] = "uniform"
    sample_seed: int = Field(default=0, ge=0)
    node_limit: int = Field(default=5_000_000, ge=1)
    #: keep the boards whose start is the goal, as 0-move puzzles flagged
    #: ``start_is_goal`` (the paper's Table 4 counts these 15; its every reported
    #: Checkers success is one); False drops them (the family adapter's default)
    keep_trivial: bool = False


def canonical_start(n: int, orientation: str) -> str:
    """All red checkers on one side of the centre gap, all blue on the other, each
    colour on the side away from its goal: the paper's start, the only one with the
    forward-only rule."""
    return "R" * n + "_" + "B" * n if orientation == "red_right" else "B" * n + "_" + "R" * n


def canonical_goal(n: int, orientation: str) -> str:
    """The goal every start of this (n, orientation) shares: the canonical start mirrored."""
    return canonical_start(n, orientation)[::-1]


def board_of_rank(n: int, rank: int) -> str:
    """The centre-gap board of lexicographic rank ``rank`` (0 <= rank < C(2n, n));
    ``'B' < 'R'``, so rank 0 is ``"B..B_R..R"`` and the last is ``"R..R_B..B"``."""
    cells: list[str] = []
    blue, red = n, n
    for _ in range(2 * n):
        with_blue = comb(blue + red - 1, blue - 1) if blue else 0
        if rank < with_blue:
            cells.append("B")
            blue -= 1
        else:
            rank -= with_blue
            cells.append("R")
            red -= 1
    return "".join(cells[:n]) + "_" + "".join(cells[n:])


def _orientation(rules: Rules) -> str:
    orientation = rules.get("orientation")
    if orientation not in _STEPS:
        raise ValueError(f"checkers orientation must be one of {ORIENTATIONS}, not {orientation!r}")
    return str(orientation)


def _steps(rules: Rules) -> Steps:
    """The forward directions if the instance has the direction rule, else None."""
    orientation = _orientation(rules)
    forward_only = rules.get("forward_only")
    if not isinstance(forward_only, bool | np.bool_):
        raise ValueError(f"checkers forward_only must be true or false, not {forward_only!r}")
    return _STEPS[orientation] if forward_only else None


def _moved(state: str, src: int, dst: int) -> str:
    """``state`` with the checker on ``src`` put on the gap at ``dst``."""
    c = state[src]
    if src < dst:
        return state[:src] + "_" + state[src + 1 : dst] + c + state[dst + 1 :]
    return state[:dst] + c + state[dst + 1 : src] + "_" + state[src + 1 :]


def _moves(state: str, steps: Steps) -> Iterator[tuple[CheckersMove, str]]:
    """Legal moves, by increasing from-cell: only the up to four checkers within two
    cells of the gap can move, forward only if ``steps`` is given."""
    gap = state.find("_")
    size = len(state)
    for src in (gap - 2, gap - 1, gap + 1, gap + 2):
        if not 0 <= src < size:
            continue
        c = state[src]
        if steps is not None and (gap - src) * steps[c] < 0:
            continue
        if abs(gap - src) == 1 or state[(src + gap) // 2] == _OTHER[c]:
            yield (c, src, gap), _moved(state, src, gap)


def _free_moves(state: str) -> Iterator[tuple[CheckersMove, str]]:
    return _moves(state, None)


def _space_size(n: int) -> int:
    """Boards of size n: a gap cell and the red cells among the other 2n."""
    return (2 * n + 1) * comb(2 * n, n)


# --- the shared backward search -----------------------------------------------------
#
# A board of size n is coded as ``gap * C(2n, n) + rank(mask)``: ``gap`` its gap cell
# and ``mask`` its 2n checkers read left to right, skipping the gap, as binary digits
# (red = 1, so the leftmost checker is the highest bit). A slide moves the gap by one
# and keeps the mask; a jump moves it by two and swaps the two checker bits it passes,
# which must differ (the jumped checker is of the other colour).


@lru_cache(maxsize=MAX_N)
def _mask_index(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The 2n-bit masks with n red bits, ascending, and the rank of every 2n-bit mask
    among them (-1 for the others)."""
    every = np.arange(1 << (2 * n), dtype=np.int32)
    masks = every[np.bitwise_count(every) == n]
    rank = np.full(1 << (2 * n), -1, dtype=np.int32)
    rank[masks] = np.arange(masks.size, dtype=np.int32)
    return masks, rank


@lru_cache(maxsize=MAX_N)
def _rank_array(n: int) -> array[int]:
    """The rank table of :func:`_mask_index` as a plain array: the descents index it
    once per candidate move, several times faster than indexing numpy."""
    ranks = array("q")
    ranks.frombytes(_mask_index(n)[1].astype(np.int64).tobytes())
    return ranks


def _code(n: int, board: str) -> int:
    masks, rank = _mask_index(n)
    return board.find("_") * masks.size + int(rank[int(board.translate(_BITS), 2)])


def _neighbour_codes(n: int, codes: np.ndarray) -> np.ndarray:
    """The codes one free move away from each of ``codes`` (with repeats)."""
    masks, rank = _mask_index(n)
    per, width = masks.size, 2 * n
    gap, r = np.divmod(codes, per)
    mask = masks[r]
    out = [codes[gap >= 1] - per, codes[gap < width] + per]
    # A jump from the left passes checkers gap-2 and gap-1 (bits width-gap+1 and
    # width-gap); one from the right passes checkers gap and gap+1 (bits width-gap-1
    # and width-gap-2). ``low`` is the lower bit of the pair.
    for ok_side, low, shift in ((gap >= 2, width - gap, -2), (gap + 2 <= width, width - 2 - gap, 2)):
        g, m, lo = gap[ok_side], mask[ok_side], low[ok_side]
        pair = (m >> lo) & 3
        differ = (pair == 1) | (pair == 2)
        out.append((g[differ] + shift) * per + rank[m[differ] ^ (3 << lo[differ])])
    return np.concatenate(out)


def _free_bfs(n: int, goal: str) -> np.ndarray:
    """Free-move distance of every board code to ``goal`` (``_UNREACHED`` if none): a
    BFS that expands a whole layer per step. Moves are reversible, so the neighbours
    used as successors are also the predecessors."""
    size = _space_size(n)
    dist = np.full(size, _UNREACHED, dtype=np.uint8)
    claim = np.empty(size, dtype=np.int32)
    frontier = np.array([_code(n, goal)], dtype=np.int32)
    dist[frontier] = 0
    depth = 0
    while frontier.size:
        depth += 1
        if depth >= _UNREACHED:  # pragma: no cover - the deepest board at n = 10 is 128 moves away
            raise OverflowError(f"checkers distances of size {n} do not fit in a byte")
        fresh = _neighbour_codes(n, frontier)
        fresh = fresh[dist[fresh] == _UNREACHED]
        # keep each new code once: the last write of its position in ``fresh`` wins
        order = np.arange(fresh.size, dtype=np.int32)
        claim[fresh] = order
        fresh = fresh[claim[fresh] == order]
        dist[fresh] = depth
        frontier = fresh
    return dist


class _DistanceTable(Mapping[str, int]):
    """A read-only ``board -> distance`` view of a coded distance array, as
    :func:`~horizonbench.datasets.puzzles.base.descend` reads it. Boards of another
    size or make-up, and boards the search never reached, are not in it."""

    def __init__(self, n: int, dist: np.ndarray) -> None:
        self._n = n
        self._cells = 2 * n + 1
        self._per = comb(2 * n, n)
        self._ranks = _rank_array(n)
        self._dist = dist.tobytes()  # indexing bytes gives plain ints, fast
        self._reached = int(np.count_nonzero(dist != _UNREACHED))

    def get(self, board: Any, default: Any = None) -> Any:
        if (
            not isinstance(board, str)
            or len(board) != self._cells
            or board.count("R") != self._n
            or board.count("B") != self._n
        ):
            return default
        gap = board.find("_")
        if gap < 0:
            return default
        d = self._dist[gap * self._per + self._ranks[int(board.translate(_BITS), 2)]]
        return default if d == _UNREACHED else d

    def __getitem__(self, board: str) -> int:
        d = self.get(board)
        if d is None:
            raise KeyError(board)
        return d

    def __contains__(self, board: object) -> bool:
        return self.get(board) is not None

    def __len__(self) -> int:
        return self._reached

    def __iter__(self) -> Iterator[str]:
        masks, _ = _mask_index(self._n)
        width = 2 * self._n
        to_cells = str.maketrans("10", "RB")
        for code in np.flatnonzero(np.frombuffer(self._dist, dtype=np.uint8) != _UNREACHED):
            gap, r = divmod(int(code), self._per)
            cells = format(int(masks[r]), f"0{width}b").translate(to_cells)
            yield cells[:gap] + "_" + cells[gap:]


#: scoring reads the free-move map of sizes up to this many boards (every size: n = 10
#: has 3.9M), as the certificates do
_SCORING_MAP_LIMIT = 5_000_000


@lru_cache(maxsize=4096)
def _directed_distance(state: str, goal: str, steps: tuple[tuple[str, int], ...] | None) -> int | None:
    """BFS distance under the direction rule (the classic start's puzzle: every move goes
    forward, so the boards reachable from a state are few)."""
    rule = dict(steps) if steps is not None else None
    return bfs_distance(state, goal, lambda s: _moves(s, rule), 2_000_000)


@lru_cache(maxsize=2 * MAX_N)
def _goal_distances(n: int, orientation: str) -> _DistanceTable:
    """Free-move distances to the goal of (n, orientation) from every board: one search
    shared by all free starts of that size and orientation."""
    return _DistanceTable(n, _free_bfs(n, canonical_goal(n, orientation)))


# --- the candidate set ----------------------------------------------------------------


def _seed_rng(seed: int, n: int) -> np.random.Generator:
    # sha256 rather than hash(): the sample must not depend on the interpreter's hash seed
    digest = hashlib.sha256(f"checkers:{seed}:{n}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "big"))


def _chosen_indices(n: int, cap: int, seed: int, selection: str = "uniform") -> list[int]:
    """Indices into the enumeration (the red_right boards by rank, then the red_left
    ones), ascending. All of them if there are at most ``cap``; else a uniform sample
    of ``cap`` that always holds both canonical starts (red_right's is its last board,
    red_left's its first) and never the two boards that are their own goal (red_right's
    first, red_left's last), so it has ``cap`` puzzles to solve."""
    per = comb(2 * n, n)
    total = 2 * per
    if total <= cap:
        return list(range(total))
    if selection == "first":
        half = cap // 2
        return list(range(half)) + list(range(per, per + cap - half))
    keep = [per - 1, per][:cap]
    free = np.ones(total, dtype=bool)
    free[[0, per - 1, per, total - 1]] = False
    pool = np.flatnonzero(free)
    take = min(cap - len(keep), pool.size)
    picked = _seed_rng(seed, n).choice(pool, size=take, replace=False)
    return sorted(keep + [int(i) for i in picked])


class Checkers:
    """Checkers Jumping rules, text forms and certificates."""

    name: ClassVar[str] = "checkers"
    action: ClassVar[str] = "move_checker"
    #: ``no_checker``: no checker of the named colour on the from-cell (wrong colour, the
    #: gap, off the board, or not a colour); ``wrong_direction``: under the forward-only
    #: rule, the move goes backward for that colour; ``bad_jump``: a distance other than
    #: 1 or 2 cells, or a jump over a checker of the same colour; ``no_gap_target``: the
    #: to-cell is not the gap (occupied or off the board).
    violations: ClassVar[tuple[str, ...]] = ("no_checker", "wrong_direction", "bad_jump", "no_gap_target")
    params_model: ClassVar[type[BaseModel]] = CheckersParams

    # --- configurations and certificates ----------------------------------------------

    def configurations(self, n: int, params: BaseModel, seed: int) -> list[Configuration]:
        """Every board with the gap in the centre, red_right boards first, each
        orientation in lexicographic order, sampled above ``max_configurations_per_n``.
        The sample is drawn with ``params.sample_seed``; ``seed`` is not used (the family
        passes the same value), so the candidates depend on the parameters alone."""
        if not isinstance(params, CheckersParams):
            raise TypeError(f"checkers configurations need CheckersParams, not {type(params).__name__}")
        per = comb(2 * n, n)
        configs = []
        for i in _chosen_indices(n, params.max_configurations_per_n, params.sample_seed, params.selection):
            orientation = ORIENTATIONS[i // per]
            board = board_of_rank(n, i % per)
            configs.append(
                Configuration(
                    n=n,
                    rules={
                        "orientation": orientation,
                        "forward_only": board == canonical_start(n, orientation),
                    },
                    start=board,
                    goal=canonical_goal(n, orientation),
                    label=f"{orientation} {board}",
                )
            )
        return configs

    def certify(self, config: Configuration, node_limit: int) -> Certificate | Unsolved:
        """A free start heading for its orientation's goal descends the cached map of
        that goal; the map covers every board, so a start outside it is proved
        unsolvable, and a limit below the number of boards gives up before searching.
        Anything else (the forward-only start, another goal) gets its own BFS."""
        steps = _steps(config.rules)
        orientation = _orientation(config.rules)
        if steps is None and config.goal == canonical_goal(config.n, orientation):
            if _space_size(config.n) > node_limit:
                return Unsolved("node_limit", 0)
            return descend(config.start, _goal_distances(config.n, orientation), _free_moves)
        return bfs_path(config.start, config.goal, lambda s: _moves(s, steps), node_limit)

    def distance_to(self, goal: str, rules: Rules, n: int) -> Callable[[str], int | None]:
        """Moves from a board to ``goal``: a look-up in the orientation's cached free-move
        map (the certificates' own) for a free puzzle heading for its canonical goal,
        else a BFS under the instance's direction rule; None if unreachable."""
        steps = _steps(rules)
        orientation = _orientation(rules)
        if steps is None and goal == canonical_goal(n, orientation) and _space_size(n) <= _SCORING_MAP_LIMIT:
            return _goal_distances(n, orientation).get
        rule = None if steps is None else tuple(sorted(steps.items()))
        return lambda state: _directed_distance(state, goal, rule)

    # --- rules ------------------------------------------------------------------------

    def successors(self, state: str, rules: Rules) -> Iterator[tuple[CheckersMove, str]]:
        return _moves(state, _steps(rules))

    def apply(self, state: str, move: CheckersMove, rules: Rules) -> str:
        colour, src, dst = move
        steps = _steps(rules)
        size = len(state)
        if colour not in _OTHER or not 0 <= src < size or state[src] != colour:
            here = repr(state[src]) if 0 <= src < size else "off the board"
            raise IllegalMove("no_checker", f"cell {src} holds no {colour!r} checker (it is {here})")
        if steps is not None and (dst - src) * steps[colour] < 0:
            raise IllegalMove(
                "wrong_direction",
                f"{colour} checkers only move {'right' if steps[colour] > 0 else 'left'} in a puzzle "
                f"from the classic start, not from {src} to {dst}",
            )
        if abs(dst - src) not in (1, 2):
            raise IllegalMove("bad_jump", f"a move covers 1 cell (slide) or 2 (jump), not {abs(dst - src)}")
        if not 0 <= dst < size or state[dst] != "_":
            raise IllegalMove("no_gap_target", f"cell {dst} is not the gap")
        over = state[(src + dst) // 2]
        if abs(dst - src) == 2 and over != _OTHER[colour]:
            raise IllegalMove("bad_jump", f"a checker jumps only over one of the other colour, not {over!r}")
        return _moved(state, src, dst)

    def check_state(self, state: Any, n: int, rules: Rules) -> str | None:
        if not isinstance(state, str):
            return "a state is a row of cells R, B and _"
        if len(state) != 2 * n + 1:
            return f"the board has {2 * n + 1} cells, not {len(state)}"
        for sym, want in (("R", n), ("B", n), ("_", 1)):
            if state.count(sym) != want:
                return f"the board needs {want} of {sym!r}, not {state.count(sym)}"
        return None

    # --- text -------------------------------------------------------------------------

    def format_state(self, state: str) -> str:
        return state

    def parse_state(self, text: str) -> str:
        cells = re.sub(r"\s+", "", text.strip().strip(_QUOTES)).upper()
        if not cells:
            raise BadText("empty checkers board; expected cells like RR_BB")
        bad = next((ch for ch in cells if ch not in "RB_"), None)
        if bad is not None:
            raise BadText(f"unexpected {bad!r} in a checkers board; the cells are R, B and _ (e.g. RR_BB)")
        return cells

    def format_move(self, move: CheckersMove) -> str:
        colour, src, dst = move
        return f'["{colour}", {src}, {dst}]'

    def parse_moves(self, text: str) -> list[CheckersMove]:
        return last_move_list(text, _as_move, '["R", 1, 2]')

    # --- mistakes for the noisy baselines ---------------------------------------------

    def illegal_move(self, state: str, rules: Rules, rng: np.random.Generator) -> CheckersMove:
        """A plausible slip: a backward step (only where the direction rule holds), a
        step onto a checker, a jump over one's own colour or too far, or naming the
        wrong colour (always available)."""
        return pick_by_kind(_illegal_candidates(state, _steps(rules)), rng)

    def wrong_successor(self, state: str, rules: Rules, rng: np.random.Generator) -> str:
        """A backward move (only where the direction rule holds), two moves at once, a
        swap that leaves the gap, a three-cell move, or (always possible) a checker
        changing colour."""
        steps = _steps(rules)
        return pick_wrong_successor(state, _moves(state, steps), _wrong_candidates(state, steps), rng)

    def describe_rules(self, rules: Rules, n: int) -> str:
        """The examples are the first two moves from this orientation's classic start,
        legal with and without the direction rule."""
        orientation = _orientation(rules)
        steps = _steps(rules)
        red, blue = ("right", "left") if orientation == "red_right" else ("left", "right")
        forward = _STEPS[orientation]
        size = 2 * n + 1
        first = ("R", n - forward["R"], n)
        second = ("B", n - forward["R"] - 2 * forward["B"], n - forward["R"])
        start, goal = canonical_start(n, orientation), canonical_goal(n, orientation)
        if steps is not None:
            direction = (
                f"This puzzle starts from the classic position {start} (all red checkers on one "
                "side of the gap, all blue ones on the other), so the direction rule holds: "
                f"red checkers only ever move {red} and blue checkers only ever move {blue}; "
                "no checker moves backward."
            )
        else:
            direction = (
                f"This puzzle does not start from the classic position {start}, so there is no "
                "direction rule: any checker may move left or right."
            )
        return (
            f"Checkers Jumping on a row of {size} cells numbered 0 to {size - 1} from left to "
            f"right, holding {n} red checkers (R), {n} blue checkers (B) and one empty cell, "
            "the gap (_).\n"
            "Rules: one checker moves at a time, always into the gap: it either slides one "
            "cell into the gap next to it, or jumps over exactly one neighbouring checker of "
            "the other colour into the gap just beyond that checker. Jumping over a checker "
            "of the same colour, or over more than one checker, is not allowed. "
            f"{direction}\n"
            f"Goal: every blue checker on the {blue}, every red checker on the {red} and the "
            f"gap in the middle, i.e. {goal}.\n"
            f"State format: the cells from left to right as one string, for example {start}.\n"
            f'Move format: ["colour", from cell, to cell], cells counted from 0; for example '
            f"{self.format_move(first)} moves the red checker on cell {first[1]} to cell "
            f"{first[2]}. A whole solution is a list of moves, for example "
            f"[{self.format_move(first)}, {self.format_move(second)}]."
        )


def _as_move(item: list[Any]) -> CheckersMove | None:
    """``[colour, from, to]`` with any quoting; None if the item is not shaped like a move.
    Colour words other than R/B/red/blue are kept (apply reports ``no_checker``)."""
    if len(item) != 3:
        return None
    colour, src, dst = item[0], as_int(item[1]), as_int(item[2])
    if not isinstance(colour, str) or colour.lstrip("+-").isdigit() or src is None or dst is None:
        return None
    return (_COLOUR_WORDS.get(colour.upper(), colour.upper()), src, dst)


def _illegal_candidates(state: str, steps: Steps) -> list[list[CheckersMove]]:
    """Illegal moves grouped by mistake; the last group (a checker called by the other
    colour's name, moving towards the gap) is never empty (n >= 1)."""
    gap, size = state.find("_"), len(state)
    backward, onto_checker, bad_jump, wrong_colour = [], [], [], []
    for p, c in enumerate(state):
        if c == "_":
            continue
        if steps is not None and 0 <= p - steps[c] < size:
            backward.append((c, p, p - steps[c]))
        for q in (p - 1, p + 1):
            if 0 <= q < size and state[q] != "_":
                onto_checker.append((c, p, q))
        if abs(gap - p) == 2 and state[(p + gap) // 2] == c:
            bad_jump.append((c, p, gap))
        if abs(gap - p) == 3:
            bad_jump.append((c, p, gap))
        wrong_colour.append((_OTHER[c], p, p + (1 if gap > p else -1)))
    return [backward, onto_checker, bad_jump, wrong_colour]


def _wrong_candidates(state: str, steps: Steps) -> list[list[str]]:
    """Wrong next states grouped by mistake; the last group (a recoloured checker) is
    never empty (n >= 1). Legal ones are filtered out by the caller."""
    gap, size = state.find("_"), len(state)
    backward, far = [], []
    for src in range(max(0, gap - 3), min(size, gap + 4)):
        if src == gap:
            continue
        c = state[src]
        if steps is not None and (gap - src) * steps[c] < 0:
            if abs(gap - src) == 1 or (abs(gap - src) == 2 and state[(src + gap) // 2] == _OTHER[c]):
                backward.append(_moved(state, src, gap))
        if abs(gap - src) == 3:
            far.append(_moved(state, src, gap))
    two_moves = [u for _, t in _moves(state, steps) for _, u in _moves(t, steps)]
    swaps = [
        state[:i] + state[i + 1] + state[i] + state[i + 2 :]
        for i in range(size - 1)
        if {state[i], state[i + 1]} == {"R", "B"}
    ]
    recolour = [state[:i] + _OTHER[c] + state[i + 1 :] for i, c in enumerate(state) if c != "_"]
    return [backward, two_moves, swaps, far, recolour]


__all__ = ["ORIENTATIONS", "Checkers", "CheckersParams", "board_of_rank", "canonical_goal", "canonical_start"]
