"""The rules of the maze: what each action needs and what it changes.

A state is ``(room, held_keys_bitmask, unlocked_doors_bitmask, pending_key)``;
``pending_key`` is the key just announced by ``use_key`` (-1 when none), because
``use_key`` must come right before ``unlock_and_open_door_to``. The certificate's
search and the simulator's replay share these rules, so they cannot disagree.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from horizonbench.core.types import Step
from horizonbench.datasets.maze.facts import World, door_key

ACTIONS = frozenset({"start", "move_to", "pick_up_key", "use_key", "unlock_and_open_door_to", "rescue"})
RESCUE_TARGET = "Alice"

#: violation categories, in the order the report lists them
VIOLATIONS = (
    "invalid_output",
    "bad_start",
    "non_adjacent_move",
    "locked_door",
    "key_not_held",
    "wrong_key",
    "key_not_in_room",
    "use_key_without_unlock",
    "unlock_without_use_key",
    "not_locked",
    "rescue_elsewhere",
    "rescue_wrong_target",
    "no_rescue",
    "after_rescue",
    "unknown_action",
    "suboptimal",
)

State = tuple[int, int, int, int]

_KEY_ARG = re.compile(r"^\s*(?:key\s*#?\s*)?(\d{1,9})\s*$", re.IGNORECASE)


def key_arg(arg: str) -> int | None:
    """Models write '5', 'key 5' or 'Key #5'; all mean key 5."""
    m = _KEY_ARG.match(arg)
    return int(m.group(1)) if m else None


def normalize_step(step: Step) -> Step:
    """Canonical spelling of a step, so 'b7' and 'B7', 'key 5' and '5' compare equal."""
    action = step.action
    if action in ("pick_up_key", "use_key"):
        k = key_arg(step.arg)
        return Step(action, str(k) if k is not None else step.arg.strip())
    if action == "rescue":
        return Step(action, step.arg.strip().capitalize())
    return Step(action, step.arg.strip().upper())


def door_bits(world: World) -> dict[tuple[int, int], int]:
    bits = getattr(world, "_door_bits", None)
    if bits is None:
        bits = {door: 1 << i for i, door in enumerate(sorted(world.locks))}
        world._door_bits = bits  # type: ignore[attr-defined]
    return bits


Tables = tuple[list[list[tuple[int, int, int]]], list[list[tuple[int, int, str]]]]


def _tables(world: World) -> Tables:
    """Per room: (neighbour, door bit or 0, key or -1) and (key, key bit, key name).

    Built once per world; the search touches every room many times. Every door is
    written open first and the few locked ones patched after (a maze has hundreds of
    doors and a handful of locks): this runs once per generated candidate.
    """
    tables = getattr(world, "_tables", None)
    if tables is None:
        tables = attach_tables(world, [[(nb, 0, -1) for nb in adj] for adj in world.adj])
    return tables


#: the key list of a room without keys (shared: the tables are only ever read)
_NO_KEYS: list[tuple[int, int, str]] = []


def attach_tables(world: World, open_nbrs: list[list[tuple[int, int, int]]]) -> Tables:
    """Finish and attach the tables of :func:`tables_of` from ``open_nbrs``: per room,
    ``(nb, 0, -1)`` for each ``nb`` of ``world.adj[room]``, in that order (every door
    written open). A builder that reads the world from its facts can write these as it
    connects rooms (``certificate``) instead of a second pass over every room here.
    """
    bits = door_bits(world)
    adjs = world.adj
    nbrs = open_nbrs
    for door, key in world.locks.items():
        entry_key = -1 if key is None else key
        a, b = door
        if a > b:  # not a door of this world: doors are written low room first
            continue
        for room, other in ((a, b), (b, a)):
            if 0 <= room < len(adjs):
                row = nbrs[room]
                for i, nb in enumerate(adjs[room]):
                    if nb == other:
                        row[i] = (nb, bits[door], entry_key)
    n = len(world.rooms)
    keys = [_NO_KEYS] * n
    for r, in_room in world.keys_in_room.items():
        if 0 <= r < n:
            keys[r] = [(k, 1 << k, str(k)) for k in in_room]
    tables = (nbrs, keys)
    world._tables = tables  # type: ignore[attr-defined]
    return tables


def transitions(world: World, state: State, tables: Tables | None = None) -> list[tuple[str, str, State]]:
    """Every legal action from ``state`` except ``rescue``, as (action, argument, next state).

    ``use_key`` is offered only next to a door that key opens: announcing a key with
    no door to open is never part of a shortest plan, and leaving it out keeps the
    search small. Plain tuples, because the certificate's search calls this for every
    state it visits (and passes ``tables``, from :func:`tables_of`, to save a look-up).
    """
    room, held, unlocked, pending = state
    nbrs, keys = tables or _tables(world)
    rooms = world.rooms
    out: list[tuple[str, str, State]] = []
    if pending >= 0:
        for nb, bit, key in nbrs[room]:
            if bit and not unlocked & bit and key == pending:
                out.append(("unlock_and_open_door_to", rooms[nb], (room, held, unlocked | bit, -1)))
        return out
    usable: list[int] = []
    for nb, bit, key in nbrs[room]:
        if bit and not unlocked & bit:
            if key >= 0 and held >> key & 1 and key not in usable:
                usable.append(key)
            continue
        out.append(("move_to", rooms[nb], (nb, held, unlocked, -1)))
    for _key, kbit, kname in keys[room]:
        if not held & kbit:
            out.append(("pick_up_key", kname, (room, held | kbit, unlocked, -1)))
    for key in sorted(usable):
        out.append(("use_key", str(key), (room, held, unlocked, key)))
    return out


tables_of = _tables


def successors(world: World, state: State) -> list[tuple[Step, State]]:
    """:func:`transitions` with each action as a :class:`Step`."""
    return [(Step(a, arg), t) for a, arg, t in transitions(world, state)]


def apply_plan(world: World, state: State, steps: Iterable[Step]) -> tuple[State, str | None]:
    """:func:`apply` over ``steps`` in turn: the state after them all, or the state and
    the violation of the first one that breaks a rule.

    A plan is mostly moves through open or already unlocked doors, and the check of a
    gold plan runs once per generated candidate: such a move is taken here without a
    call; anything else (and any move that is not legal) goes through :func:`apply`,
    which decides, so the two cannot disagree on what a violation is.
    """
    index, adj, locks = world.index, world.adj, world.locks
    bits = door_bits(world)
    # the rooms with a locked door: a move from any other room needs no door look-up
    locked_rooms = {room for door in locks for room in door}
    room, held, unlocked, pending = state
    for step in steps:
        if pending < 0 and step.action == "move_to":
            nb = index.get(step.arg)
            if nb is not None and nb in adj[room]:
                if room not in locked_rooms:
                    room = nb
                    continue
                door = (room, nb) if room < nb else (nb, room)
                if door not in locks or unlocked & bits[door]:
                    room = nb
                    continue
        (room, held, unlocked, pending), bad = apply(world, (room, held, unlocked, pending), step)
        if bad is not None:
            return (room, held, unlocked, pending), bad
    return (room, held, unlocked, pending), None


def apply(world: World, state: State, step: Step) -> tuple[State, str | None]:
    """The state after ``step`` (normalised), or the violation it commits."""
    room, held, unlocked, pending = state
    action = step.action
    if action not in ACTIONS:
        return state, "unknown_action"
    if pending >= 0 and action != "unlock_and_open_door_to":
        return state, "use_key_without_unlock"
    if action == "move_to":
        nb = world.index.get(step.arg)
        if nb is None or nb not in world.adj[room]:
            return state, "non_adjacent_move"
        door = door_key(room, nb)
        if door in world.locks and not unlocked & door_bits(world)[door]:
            return state, "locked_door"
        return (nb, held, unlocked, -1), None
    if action == "pick_up_key":
        key = key_arg(step.arg)
        if key is None or key not in world.keys_in_room.get(room, ()) or held >> key & 1:
            return state, "key_not_in_room"
        return (room, held | 1 << key, unlocked, -1), None
    if action == "use_key":
        key = key_arg(step.arg)
        if key is None or not held >> key & 1:
            return state, "key_not_held"
        return (room, held, unlocked, key), None
    if action == "unlock_and_open_door_to":
        if pending < 0:
            return state, "unlock_without_use_key"
        nb = world.index.get(step.arg)
        if nb is None or nb not in world.adj[room]:
            return state, "non_adjacent_move"
        door = door_key(room, nb)
        if door not in world.locks or unlocked & door_bits(world)[door]:
            return state, "not_locked"
        if world.locks[door] != pending:
            return state, "wrong_key"
        return (room, held, unlocked | door_bits(world)[door], -1), None
    if action == "rescue":
        if room != world.goal:
            return state, "rescue_elsewhere"
        if step.arg.strip().lower() != RESCUE_TARGET.lower():
            return state, "rescue_wrong_target"
        return state, None
    # "start" anywhere but first
    return state, "bad_start"
