"""Breadth-first search over (room, keys held, doors unlocked): the optimality certificate.

Every instance is proven solvable from its own facts, with the gold plan's length
equal to the shortest possible, and the number of distinct optimal plans counted.
At generation time the world comes from the generator's fact items rather than from
parsing the strings again, so the items are first proven to render to exactly the
strings shown: a listing whose text and structure disagree is not certified.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from horizonbench.core.types import Step
from horizonbench.datasets.maze.facts import FACT_TEMPLATES, FactItem, World, world_from_items
from horizonbench.datasets.maze.rules import State, apply_plan, attach_tables, tables_of, transitions


@dataclass
class Solution:
    """Result of the search. ``length`` counts actions including start and rescue.

    ``dist`` and ``on_optimal`` are filled only with ``track=True``: the shortest
    distance of every state seen, and the states that lie on some optimal plan (used
    by the simulator's progress ratio, which must credit any optimal plan, not one).
    """

    length: int | None
    count: int
    dist: dict[State, int] = field(default_factory=dict)
    on_optimal: set[State] = field(default_factory=set)


def _fstring(template: str) -> str:
    """A ``%s`` template as the source of an f-string over the slots ``s``."""
    parts = template.replace("{", "{{").replace("}", "}}").split("%s")
    body = "".join(part + (f"{{s[{i}]}}" if i < len(parts) - 1 else "") for i, part in enumerate(parts))
    return "f" + repr(body)


def _compile_renderer() -> Callable[[Iterable[FactItem]], list[str]]:
    """:func:`render_items`, written as one comprehension of f-strings generated from
    ``FACT_TEMPLATES`` (so the sentences live in one place, facts.py).

    An f-string builds its sentence in one step, about twice as fast as ``%`` on a
    tuple, and the listing is rendered twice per candidate (shown, then checked by the
    certificate). Only a tuple of exactly its template's slot count takes the
    f-string; anything else (an unknown kind, slots that do not fit) goes through
    ``FACT_TEMPLATES[kind] % slots``, which raises wherever
    :func:`~horizonbench.datasets.maze.facts.render_fact` raises (a KeyError, not its
    ValueError, for an unknown kind).
    """
    expr = "T[k] % s"
    for kind, template in reversed(list(FACT_TEMPLATES.items())):
        arity = template.count("%s")
        expr = f"({_fstring(template)} if k == {kind!r} and len(s) == {arity} else {expr})"
    body = f"[{expr} if type(s) is tuple else T[k] % s for k, s in items]"
    namespace: dict[str, Any] = {"T": FACT_TEMPLATES}
    # the source is made from our own six templates, nothing from outside
    exec(compile(f"def render_items(items):\n    return {body}\n", "<maze fact renderer>", "exec"), namespace)
    return namespace["render_items"]  # type: ignore[no-any-return]


#: the sentences of fact items, in order: ``[render_fact(kind, slots) for kind, slots in items]``
#: (the same strings; it fails where render_fact fails, with a KeyError for an unknown
#: kind; see :func:`_compile_renderer`)
render_items = _compile_renderer()


def world_of_listing(items: Sequence[FactItem], facts: Sequence[str]) -> World | None:
    """The world of a generated listing, or None when ``items`` do not render to ``facts``
    one for one (then the search would certify a maze the model is not shown).

    Every item is rendered again here and compared with its string, as
    :func:`render_fact` would render it (one comprehension: it runs once per candidate).
    """
    if len(items) != len(facts):
        return None
    try:
        if render_items(items) != list(facts):
            return None
    except (KeyError, TypeError, ValueError):  # an unknown kind, or slots that do not fit its sentence
        return None
    return _listing_world(items)


def _listing_world(items: Iterable[FactItem]) -> World:
    """``world_from_items(items)`` with the search tables of ``rules.tables_of`` attached,
    built in the same pass over the facts (see ``world_from_items``' ``open_nbrs``). This
    runs once per candidate.
    """
    nbrs: list[list[tuple[int, int, int]]] = []
    world = world_from_items(items, nbrs)
    attach_tables(world, nbrs)
    return world


def gold_violation(world: World, plan: Sequence[Step]) -> str | None:
    """The first violation of a plan that must be legal from start to rescue, or None.

    What the simulator's ``replay`` concludes (a property test holds them together),
    with the steps applied by :func:`~horizonbench.datasets.maze.rules.apply_plan`:
    the gold plan of every candidate is checked, and most of its steps are moves.
    """
    if not plan or plan[0].action != "start" or world.start is None:
        return "bad_start"
    if plan[0].arg != world.rooms[world.start]:
        return "bad_start"
    state, bad = apply_plan(world, (world.start, 0, 0, -1), plan[1:-1])
    if bad is not None:
        return bad
    if plan[-1].action != "rescue" or state[0] != world.goal:
        return "no_rescue"
    return None


def solve(world: World, *, track: bool = False, max_states: int = 2_000_000) -> Solution:
    if world.start is None or world.goal is None:
        return Solution(None, 0)
    if not track:
        return _shortest_plans(world, max_states)
    s0: State = (world.start, 0, 0, -1)
    dist: dict[State, int] = {s0: 0}
    count: dict[State, int] = {s0: 1}
    preds: dict[State, list[State]] = {}
    frontier = [s0]
    depth = 0
    goal = world.goal
    tables = tables_of(world)
    while frontier:
        goals = [s for s in frontier if s[0] == goal and s[3] < 0]
        if goals:
            sol = Solution(depth + 2, sum(count[s] for s in goals))
            if track:
                sol.dist = dist
                sol.on_optimal = _backward_closure(goals, preds)
            return sol
        nxt: list[State] = []
        d1 = depth + 1
        for s in frontier:
            c = count[s]
            for _, _, t in transitions(world, s, tables):
                d = dist.get(t)
                if d is None:
                    dist[t] = d1
                    count[t] = c
                    nxt.append(t)
                    if track:
                        preds[t] = [s]
                elif d == d1:
                    count[t] += c
                    if track:
                        preds[t].append(s)
        if len(dist) > max_states:
            raise RuntimeError(f"state space exceeds {max_states} states")
        frontier = nxt
        depth = d1
    return Solution(None, 0, dist if track else {})


Edge = tuple[int, int, int, int]  # (room reached, moves, door bit or 0, key or -1)


def _shortest_plans(world: World, max_states: int) -> Solution:
    """:func:`solve` without tracking, over corridors contracted to single weighted moves.

    A room with two open doors, no key, that is neither start nor goal (a corridor)
    offers nothing but walking on, and a shortest plan never turns back inside one (it
    would repeat a state): so a run of corridors is one move of its length, and the
    layered search becomes a search by distance buckets over the few rooms where
    something can happen. Lengths and plan counts are those of the plain search (a
    property test holds the two together); this runs once per generated candidate.
    """
    nbrs, keys = tables_of(world)
    goal = world.goal
    # a junction: not two doors, or a key in the room, or a locked door (every locked
    # door has a bit in the tables), or the start or the goal
    junction = [len(nb) != 2 for nb in nbrs]
    for r, ks in world.keys_in_room.items():  # the few rooms with keys (``keys[r]`` is made from these)
        if ks and 0 <= r < len(junction):
            junction[r] = True
    for a, b in world.locks:
        junction[a] = junction[b] = True
    junction[world.start] = junction[goal] = True  # type: ignore[index]
    moves: dict[int, list[Edge]] = {}
    corridors: dict[tuple[int, int], tuple[int, int]] = {}
    s0: State = (world.start, 0, 0, -1)  # type: ignore[assignment]
    seen: dict[State, list[int]] = {s0: [0, 1]}  # state -> [distance, number of shortest plans]
    buckets: dict[int, list[State]] = {0: [s0]}
    while buckets:
        # the next distance anything was reached at: a corridor is one move of many
        # actions, so most distances in between hold nothing
        depth = min(buckets)
        frontier = [s for s in buckets.pop(depth) if seen[s][0] == depth]
        found = [seen[s][1] for s in frontier if s[0] == goal and s[3] < 0]
        if found:
            return Solution(depth + 2, sum(found))
        for s in frontier:
            c = seen[s][1]
            room = s[0]
            edges = moves.get(room)
            if edges is None:
                edges = moves[room] = _contracted_moves(room, nbrs, junction, corridors)
            for t, w in _next_weighted(s, edges, keys[room]):
                d = depth + w
                entry = seen.get(t)
                if entry is None or entry[0] > d:
                    seen[t] = [d, c]
                    buckets.setdefault(d, []).append(t)
                elif entry[0] == d:
                    entry[1] += c
        if len(seen) > max_states:
            raise RuntimeError(f"state space exceeds {max_states} states")
    return Solution(None, 0)


def _contracted_moves(
    room: int,
    nbrs: list[list[tuple[int, int, int]]],
    junction: list[bool],
    corridors: dict[tuple[int, int], tuple[int, int]],
) -> list[Edge]:
    """From ``room``, each door and the room where the corridor behind it ends, with its length.

    ``corridors`` remembers each corridor walked, by (room, first room) -> (end, length),
    and records the way back as it walks: a corridor's rooms have two doors each, so
    walking it from its far end retraces it, and the search reaching that end later
    does not walk it again.
    """
    out: list[Edge] = []
    for nb, bit, key in nbrs[room]:
        if bit:
            out.append((nb, 1, bit, key))
            continue
        known = corridors.get((room, nb))
        if known is not None:
            out.append((known[0], known[1], 0, key))
            continue
        prev, cur, length = room, nb, 1
        while not junction[cur]:
            a, b = nbrs[cur][0][0], nbrs[cur][1][0]
            prev, cur = cur, (b if a == prev else a)
            length += 1
        corridors[(cur, prev)] = (room, length)
        out.append((cur, length, 0, key))
    return out


def _next_weighted(
    s: State, edges: list[Edge], room_keys: list[tuple[int, int, str]]
) -> list[tuple[State, int]]:
    """The next states of :func:`transitions` from ``s`` (moves run to the corridor's end),
    each with the number of actions it takes."""
    room, held, unlocked, pending = s
    out: list[tuple[State, int]] = []
    if pending >= 0:
        for _to, _length, bit, key in edges:
            if bit and not unlocked & bit and key == pending:
                out.append(((room, held, unlocked | bit, -1), 1))
        return out
    usable: list[int] = []
    for to, length, bit, key in edges:
        if bit and not unlocked & bit:
            if key >= 0 and held >> key & 1 and key not in usable:
                usable.append(key)
            continue
        out.append(((to, held, unlocked, -1), length))
    for _key, kbit, _name in room_keys:
        if not held & kbit:
            out.append(((room, held | kbit, unlocked, -1), 1))
    for key in usable:
        out.append(((room, held, unlocked, key), 1))
    return out


def _backward_closure(goals: list[State], preds: dict[State, list[State]]) -> set[State]:
    seen = set(goals)
    stack = list(goals)
    while stack:
        for p in preds.get(stack.pop(), ()):
            if p not in seen:
                seen.add(p)
                stack.append(p)
    return seen
