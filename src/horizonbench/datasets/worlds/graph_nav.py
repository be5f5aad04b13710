"""GraphNav: walk a room-and-door graph to a goal room under key, switch and decoy
constraints (Appendix B of the world-model-collapse paper).

Entities: rooms ``room1..``, locked doors ``door1..``, keys ``key1..``, switches
``switch1..`` and decoys ``decoy1..``.

World
-----
The rooms are split into regions ``R0..Rk``. Inside a region, rooms are joined by open
passages (``passage(a, b)``) in the archetype's shape, so a region is connected. Regions
are joined only by the ``k`` locked doors: ``door<j>`` joins a room of an earlier region
``R<p(j)>`` (its *near side*, ``p(j) < j``) to the *entrance* room of ``R<j>``, and the
parents ``p`` form a tree of regions whose shape is the archetype's (chain, star, tree,
comb...). The agent starts in ``R0``; the goal room lies in ``Rk``. So the only way into
region ``j`` is door ``j``, and every way from the start to the goal passes locked doors:
this is what the reference implementation lacked (its goal was reachable without any
door, so dependency density did nothing).

Each door has ``dd`` requirements, each on its own object: ``held(key)`` (that key in the
agent's hands) or ``on(switch)`` (that switch turned on). ``unlock(door)`` is valid in a
room at the door, while the door is locked and every requirement holds at that moment;
the door then stays unlocked for good and its keys stay in its lock
(``in_lock(key, door)``), no longer in the agent's hands. All the objects of ``door<j>``
lie in region ``R<j-1>`` (``R0`` for door 1), which is reachable only through
``door<j-1>``. So the doors open in order, no work for a door can be done before the
previous door is open, and in the star, comb or tree archetypes, where a door sits in an
earlier region, the agent collects in the region it has just opened and walks back.

The episode is won the moment the agent enters the goal room (``at(agent, goal)``);
there is no declaration to make.

Every requirement is needed on every solution: region ``k`` (the goal's) is entered only
through door ``k``, door ``k`` can only be unlocked with an object of region ``k-1``,
which is entered only through door ``k-1``, and so on; a requirement is false at reset,
must hold when its door is unlocked, and exactly one action can make it true (its
*enabler*, ``Subgoal.enablers``: ``take(key)``, or ``toggle(switch)`` while it is off);
mutations never make it true. The tests check this by exhaustive search over the real
dynamics: without any one enabler, no winning state can be reached.

State cardinality
-----------------
``sc`` is the node count: a world has exactly ``sc`` rooms, so every integer in 3..60
builds a world of its own size (the reference code built the same world for sc 10 and
11, 16 and 17). It has ``k = max(1, isqrt(sc))`` locked doors (:data:`DOORS_TABLE`: 1 at
sc 3, 2 at 4..8, 3 at 9..15, 4 at 16..24, 5 at 25..35, 6 at 36..48, 7 at 49..60) and
``k + 1`` regions, so a region holds about ``sqrt(sc)`` rooms; the archetype splits the
rooms evenly or at random (every region gets at least one). Keys, switches and decoys
are objects, not nodes: they do not count in ``sc`` (:attr:`GraphNav.sc_kinds`).

Dependency density
------------------
``dd`` is the number of requirements of each locked door: ``dd`` objects per door,
``k * dd`` in the world. Requirement ``i`` of door ``j`` (0-based) is a key or a switch
as the archetype's ``mix`` says at position ``(i + j - 1) mod len(mix)``. Each door's
objects are drawn from their own seeded stream after the layout, which does not depend
on ``dd``: the world of ``dd + 1`` is the world of ``dd`` with one more object per door,
so each step of ``dd`` adds at least ``k`` actions to the optimal plan. A door's objects
lie in at most :data:`MAX_OBJECT_ROOMS` rooms of their region, which keeps the solver's
search small.

Branching
---------
``branching = b`` puts ``b - 1`` decoys in every region. A decoy is an item that opens
nothing: it can be taken, dropped and examined, so each one adds valid actions
(``take``/``examine`` where it lies, ``drop``/``examine`` while held) without changing
L*. Decoys fill their region's rooms in order of distance from its entrance (the start
room for ``R0``, the far side of the door into it otherwise), one per room and round
again, without randomness: every solution passes every region's entrance, so from
``b = 2`` on every plan meets decoys, and the same seed gives the same world and the
same optimal plan at every branching level.

Observation modes
-----------------
``clean``: the whole gold state every step. ``partial``: a full briefing at reset, then
only the agent's neighbourhood: its room's passages and doors (with their lock states
and the keys in their locks), its switches with their states, the items on its floor,
the agent's hands, and, after ``examine(door)``, the states of that door's switches
wherever they are. The task, with every door's requirements, is never hidden (the
reference code hid the preconditions in partial mode). ``distractor``: the whole gold
state plus ``max(1, len(gold) // 10)`` facts of a persistent phantom building whose rooms,
doors, keys and switches do not exist (numbered past the real ones): one of
:data:`PHANTOM_VIEWS` subsets drawn at reset, picked at random each step. ``conflict``:
the whole gold state plus, with probability :data:`CONFLICT_RATE` per step, one false
fact for a slot (a door's lock, a switch, a key's place) that did not change this step,
so it contradicts what the previous observation showed.

Mutation
--------
After the agent's action, with the spec's per-step rate (``low`` 0.05, ``medium`` 0.15,
``high`` 0.35), one exogenous change happens, drawn uniformly from the possible ones: a
switch that is on turns off; a key slips from the agent's hands onto the floor of its
room; a key lying on a floor moves to another room of the same region. Decoys and keys in
locks never move, doors never relock. None of these makes a requirement true or moves
the agent, and everything they undo can be redone (the switch's room and the key's
region stay reachable, since doors never relock and regions are connected), so the task
stays solvable.

Error labels
------------
An invalid action changes nothing (time still passes). Its label comes from the gold
preconditions that failed (``StepResult.unmet``), the first that applies in this order:

- ``nonexistent_edge``: the graph has no such way from here: ``go`` to a room with no
  passage or door from the agent's room (its own room included), ``unlock`` or
  ``examine`` of a door that does not open from the agent's room;
- ``already_unlocked``: ``unlock`` of a door that is already unlocked;
- ``stale_inventory``: the action relies on a key or decoy being in the agent's hands
  (``held(x)``) or on this room's floor (``at(x, room)``), it is not, and the agent's
  picture of it is out of date: the agent has held ``x`` before in this episode (it
  dropped it, it slipped, it went into a lock, or the agent holds it now and tries to
  take it), or ``x`` lay where the action needs it at an earlier step and has moved;
- ``missing_key``: a door's lock stops the action: ``go`` through a locked door, or
  ``unlock`` with a requirement unmet (a switch off, a required key never held);
- ``object_not_here``: the key, decoy or switch named is not in the agent's room or
  hands and never was where the action needs it (the wrong room, an item never taken);
- ``unknown_action``: not an action of this world (unknown verb, wrong number of
  arguments, a name that is no entity of the right kind, e.g. a distractor's).

The paper names the first three kinds of failure (``nonexistent_edge``, ``missing_key``,
``stale_inventory``); ``already_unlocked`` and ``object_not_here`` name the remaining ones,
so every invalid action gets exactly one label, and ``stale_inventory`` is never used for
an item the agent had no earlier picture of.

Solver
------
:func:`solve` is exact for the mutation-free world. Since a door's objects lie behind the
previous door, the plan is a chain of stages that cannot help each other: stage ``j``
starts where door ``j-1`` was unlocked (the start room for ``j = 1``), must visit every
room holding an object of door ``j`` (one ``take`` or ``toggle`` per object, each needed
once and never undone) and end at the near side of door ``j`` to unlock it; the last
stage walks through door ``k`` to the goal. A stage's shortest walk is a path version of
the travelling-salesman problem over at most :data:`MAX_OBJECT_ROOMS` rooms with
breadth-first distances in the open part of the graph, solved exactly by Held-Karp
dynamic programming; so L* = walks + ``k * dd`` object actions + ``k`` unlocks. The tests
compare it with a breadth-first search over the real dynamics on small worlds.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from math import isqrt
from typing import Any, ClassVar

from horizonbench.core.seeding import derive_seed
from horizonbench.datasets.worlds.base import (
    N_ARCHETYPES,
    SC_MAX,
    SC_MIN,
    Action,
    Canonical,
    EnvironmentBase,
    Fact,
    FactStore,
    Observation,
    Rng,
    State,
    StepResult,
    Subgoal,
    Task,
    format_action,
    format_fact,
    room_graph,
)

# The region shapes are base.room_graph's, the same layout families StatefulPuzzle uses.

NAME = "graph_nav"

#: verb -> number of arguments
VERBS: Mapping[str, int] = {
    "go": 1,
    "take": 1,
    "drop": 1,
    "toggle": 1,
    "unlock": 1,
    "examine": 1,
    "noop": 0,
}

_ITEMS = frozenset({"key", "decoy"})
#: the argument kinds each verb accepts
_SIGNATURES: Mapping[str, tuple[frozenset[str], ...]] = {
    "go": (frozenset({"room"}),),
    "take": (_ITEMS,),
    "drop": (_ITEMS,),
    "toggle": (frozenset({"switch"}),),
    "unlock": (frozenset({"door"}),),
    "examine": (frozenset({"key", "decoy", "switch", "door"}),),
    "noop": (),
}

ERROR_LABELS: tuple[str, ...] = (
    "nonexistent_edge",
    "already_unlocked",
    "stale_inventory",
    "missing_key",
    "object_not_here",
    "unknown_action",
)

_ROOM = frozenset({"room"})
#: predicate -> the entity kinds of each argument
PREDICATES: Mapping[str, tuple[frozenset[str], ...]] = {
    "at": (frozenset({"agent", "key", "decoy", "switch"}), _ROOM),
    "held": (_ITEMS,),
    "in_lock": (frozenset({"key"}), frozenset({"door"})),
    "passage": (_ROOM, _ROOM),
    "door": (frozenset({"door"}), _ROOM, _ROOM),
    "locked": (frozenset({"door"}),),
    "unlocked": (frozenset({"door"}),),
    "on": (frozenset({"switch"}),),
    "off": (frozenset({"switch"}),),
}
#: predicates of the task specification (``Task.facts``): not world state, never flagged
TASK_PREDICATES = frozenset({"goal", "requires", "after"})
_SLOT_OF_PREDICATE: Mapping[str, str] = {
    "at": "loc",
    "held": "loc",
    "in_lock": "loc",
    "locked": "lock",
    "unlocked": "lock",
    "on": "switch",
    "off": "switch",
}
_CLASH = {
    "loc": "is in two places",
    "lock": "is both locked and unlocked",
    "switch": "is both on and off",
}

#: the most rooms one door's objects are spread over (bounds the solver's search)
MAX_OBJECT_ROOMS = 8
#: how many subsets of the phantom building distractor observations choose from
PHANTOM_VIEWS = 32
#: probability that a conflict-mode observation carries one contradicting fact
CONFLICT_RATE = 0.5

# --- state cardinality ----------------------------------------------------------------


def door_count(sc: int) -> int:
    """The number of locked doors of an ``sc``-room world: ``max(1, isqrt(sc))``."""
    if isinstance(sc, bool) or not isinstance(sc, int) or not SC_MIN <= sc <= SC_MAX:
        raise ValueError(f"sc: must be an integer in {SC_MIN}..{SC_MAX}, got {sc!r}")
    return max(1, isqrt(sc))


#: every supported sc -> its number of locked doors (regions are one more)
DOORS_TABLE: Mapping[int, int] = {sc: door_count(sc) for sc in range(SC_MIN, SC_MAX + 1)}

# --- archetypes -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Archetype:
    """A layout family: how ``regions`` hang together (the parent of each region),
    the shape of the passages inside a region (``rooms``), how rooms are shared among
    regions (``sizes``), where a door and the goal sit in their region (``doors``:
    ``random`` or ``deep``, the room farthest from the region's entrance), where a
    door's objects lie in theirs (``placement``) and the key/switch ``mix``."""

    index: int
    regions: str
    rooms: str
    sizes: str
    doors: str
    placement: str
    mix: tuple[str, ...]


ARCHETYPES: tuple[Archetype, ...] = (
    Archetype(0, "chain", "line", "even", "random", "spread", ("key", "switch")),
    Archetype(1, "star", "ring", "random", "deep", "far", ("switch", "key")),
    Archetype(2, "tree", "star", "even", "deep", "clustered", ("key", "key", "switch")),
    Archetype(3, "comb", "grid", "random", "random", "spread", ("switch", "switch", "key")),
    Archetype(4, "binary", "tree", "even", "random", "far", ("key", "switch", "switch")),
    Archetype(5, "skip", "ladder", "random", "deep", "clustered", ("key", "switch", "key")),
    Archetype(6, "broom", "hubs", "even", "deep", "spread", ("switch", "key", "key")),
    Archetype(7, "chain", "comb", "random", "deep", "far", ("key", "key", "key", "switch")),
    Archetype(8, "tree", "dense", "even", "random", "clustered", ("switch", "key", "switch", "key")),
    Archetype(9, "star", "binary", "random", "random", "spread", ("key", "switch", "switch", "key")),
)
assert len(ARCHETYPES) == N_ARCHETYPES


def _region_parents(shape: str, k: int, rng: Rng) -> tuple[int, ...]:
    """The parent region of regions ``1..k`` (index 0 holds -1 for the root): always an
    earlier region, so the regions form a tree rooted at ``R0``."""
    half = (k + 1) // 2
    parents = [-1]
    for j in range(1, k + 1):
        if shape == "chain":
            p = j - 1
        elif shape == "star":
            p = 0
        elif shape == "tree":
            p = rng.below(j)
        elif shape == "comb":  # even regions form a spine, odd ones hang off it
            p = 2 * ((j - 1) // 2)
        elif shape == "binary":
            p = (j - 1) // 2
        elif shape == "skip":
            p = max(0, j - 2)
        elif shape == "broom":  # a chain for the first half, then a fan
            p = j - 1 if j <= half else half
        else:  # pragma: no cover - the archetype table only names the shapes above
            raise ValueError(f"unknown region shape {shape!r}")
        parents.append(p)
    return tuple(parents)


def _region_sizes(sc: int, n: int, style: str, rng: Rng) -> list[int]:
    """``sc`` rooms shared among ``n`` regions, each at least one."""
    extra = sc - n
    if style == "even":
        base, rest = divmod(extra, n)
        sizes = [1 + base] * n
        for r in rng.sample(range(n), rest):
            sizes[r] += 1
        return sizes
    sizes = [1] * n
    for _ in range(extra):
        sizes[rng.below(n)] += 1
    return sizes


# --- the world ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class World:
    """A generated world (without decoys, which depend on branching): the static layout,
    the doors' requirements and where every object starts. Shared read-only between
    episodes.

    ``regions`` lists each region's rooms, entrance first; ``ends`` maps a door to its
    two rooms in room order, ``near``/``far`` to its side in the parent region and the
    entrance of the region it opens; ``requires``/``objects`` give each door's
    requirement facts and their objects, aligned; ``place`` is where each object starts
    (a switch never moves); ``links`` lists each room's neighbours in room order with the
    door between (``None`` for a passage)."""

    sc: int
    dd: int
    seed: int
    archetype: int
    rooms: tuple[str, ...]
    regions: tuple[tuple[str, ...], ...]
    region_of: Mapping[str, int]
    parents: tuple[int, ...]
    entrances: tuple[str, ...]
    passages: tuple[tuple[str, str], ...]
    doors: tuple[str, ...]
    ends: Mapping[str, tuple[str, str]]
    near: Mapping[str, str]
    far: Mapping[str, str]
    keys: tuple[str, ...]
    switches: tuple[str, ...]
    requires: Mapping[str, tuple[Fact, ...]]
    objects: Mapping[str, tuple[str, ...]]
    door_of: Mapping[str, str]
    place: Mapping[str, str]
    links: Mapping[str, tuple[tuple[str, str | None], ...]]
    start_room: str
    goal_room: str

    def enablers(self, door: str) -> tuple[Action, ...]:
        """The one action that makes each requirement of ``door`` true, aligned."""
        return tuple(("take", x) if p == "held" else ("toggle", x) for p, x in self.requires[door])


def _bfs(
    start: str, links: Mapping[str, Sequence[tuple[str, str | None]]], open_doors: Collection[str]
) -> dict[str, str | None]:
    """Breadth-first search over passages and the doors in ``open_doors``: every
    reachable room -> the room it was first reached from (neighbours in room order, so
    paths are deterministic)."""
    parent: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        r = queue.popleft()
        for s, d in links[r]:
            if s not in parent and (d is None or d in open_doors):
                parent[s] = r
                queue.append(s)
    return parent


def _depths(parent: Mapping[str, str | None]) -> dict[str, int]:
    """Distances from the root of a BFS parent map (insertion order is BFS order)."""
    depth: dict[str, int] = {}
    for r, p in parent.items():
        depth[r] = 0 if p is None else depth[p] + 1
    return depth


@lru_cache(maxsize=512)
def build_world(sc: int, dd: int, seed: int, archetype: int) -> World:
    """The world of ``(sc, dd, seed, archetype)``; all randomness from ``seed``. The
    layout comes from one stream and each door's objects from their own, so the layout
    does not depend on ``dd`` and the objects of ``dd`` are a prefix of those of
    ``dd + 1``."""
    arch = ARCHETYPES[archetype]
    k = DOORS_TABLE[sc]
    rng = Rng(derive_seed(seed, NAME, "layout"))
    rooms = tuple(f"room{i}" for i in range(1, sc + 1))
    order = {r: i for i, r in enumerate(rooms)}

    def pair(a: str, b: str) -> tuple[str, str]:
        return (a, b) if order[a] <= order[b] else (b, a)

    # regions on shuffled labels, so names never reveal the structure
    sizes = _region_sizes(sc, k + 1, arch.sizes, rng)
    labels = rng.shuffled(range(sc))
    regions: list[tuple[str, ...]] = []
    offset = 0
    for size in sizes:
        regions.append(tuple(rooms[labels[p]] for p in range(offset, offset + size)))
        offset += size
    region_of = {r: i for i, members in enumerate(regions) for r in members}
    passages: list[tuple[str, str]] = []
    for members in regions:
        for a, b in sorted(room_graph(arch.rooms, len(members), rng)):
            passages.append(pair(members[a], members[b]))
    passages.sort(key=lambda p: (order[p[0]], order[p[1]]))
    inner: dict[str, list[tuple[str, str | None]]] = {r: [] for r in rooms}
    for a, b in passages:
        inner[a].append((b, None))
        inner[b].append((a, None))

    parents = _region_parents(arch.regions, k, rng)
    start_room = rng.pick(regions[0])
    entrances = (start_room, *(regions[j][0] for j in range(1, k + 1)))
    depth_in = [_depths(_bfs(entrances[i], inner, ())) for i in range(k + 1)]

    def placed(region: int) -> str:
        """A room of ``region`` for a door or the goal: the archetype's choice."""
        members = regions[region]
        if arch.doors == "deep":
            depth = depth_in[region]
            return max(members, key=lambda r: (depth[r], -members.index(r)))
        return rng.pick(members)

    doors = tuple(f"door{j}" for j in range(1, k + 1))
    ends: dict[str, tuple[str, str]] = {}
    near: dict[str, str] = {}
    far: dict[str, str] = {}
    links = {r: list(ns) for r, ns in inner.items()}
    for j, d in enumerate(doors, start=1):
        near[d], far[d] = placed(parents[j]), entrances[j]
        ends[d] = pair(near[d], far[d])
        links[near[d]].append((far[d], d))
        links[far[d]].append((near[d], d))
    goal_room = placed(k)

    # requirements: door j's objects lie in region j - 1, drawn from the door's own stream
    keys: list[str] = []
    switches: list[str] = []
    requires: dict[str, tuple[Fact, ...]] = {}
    objects: dict[str, tuple[str, ...]] = {}
    door_of: dict[str, str] = {}
    place: dict[str, str] = {}
    for j, d in enumerate(doors, start=1):
        orng = Rng(derive_seed(seed, NAME, "objects", j))
        members = regions[j - 1]
        if arch.placement == "clustered":
            pool = orng.sample(members, max(1, (len(members) + 2) // 3))
        elif arch.placement == "far":
            depth = depth_in[j - 1]
            ranked = sorted(members, key=lambda r: (-depth[r], members.index(r)))
            pool = ranked[: max(1, (len(members) + 1) // 2)]
        else:
            pool = list(members)
        if len(pool) > MAX_OBJECT_ROOMS:
            pool = orng.sample(pool, MAX_OBJECT_ROOMS)
        facts: list[Fact] = []
        names: list[str] = []
        for i in range(dd):
            kind = arch.mix[(i + j - 1) % len(arch.mix)]
            if kind == "key":
                name = f"key{len(keys) + 1}"
                keys.append(name)
                facts.append(("held", name))
            else:
                name = f"switch{len(switches) + 1}"
                switches.append(name)
                facts.append(("on", name))
            names.append(name)
            door_of[name] = d
            place[name] = orng.pick(pool)
        requires[d] = tuple(facts)
        objects[d] = tuple(names)

    return World(
        sc=sc,
        dd=dd,
        seed=seed,
        archetype=archetype,
        rooms=rooms,
        regions=tuple(regions),
        region_of=region_of,
        parents=parents,
        entrances=entrances,
        passages=tuple(passages),
        doors=doors,
        ends=ends,
        near=near,
        far=far,
        keys=tuple(keys),
        switches=tuple(switches),
        requires=requires,
        objects=objects,
        door_of=door_of,
        place=place,
        links={r: tuple(sorted(ns, key=lambda n: order[n[0]])) for r, ns in links.items()},
        start_room=start_room,
        goal_room=goal_room,
    )


def decoy_names(world: World, branching: int) -> dict[str, str]:
    """Decoy -> room: ``branching - 1`` decoys per region, filling its rooms in order of
    distance from the region's entrance, round after round (no randomness)."""
    out: dict[str, str] = {}
    for i, members in enumerate(world.regions):
        depth = _depths(_bfs(world.entrances[i], world.links, ()))
        ranked = sorted(members, key=lambda r: (depth[r], members.index(r)))
        for n in range(branching - 1):
            out[f"decoy{len(out) + 1}"] = ranked[n % len(ranked)]
    return out


# --- the solver -----------------------------------------------------------------------


def _walk(parent: Mapping[str, str | None], target: str) -> list[Action]:
    """The ``go`` steps from a BFS root to ``target`` along its parent map."""
    steps: list[Action] = []
    r = target
    before = parent[r]
    while before is not None:
        steps.append(("go", r))
        r, before = before, parent[before]
    steps.reverse()
    return steps


def _best_order(
    start: str, stops: Sequence[str], end: str, dist: Mapping[str, Mapping[str, int]]
) -> list[str]:
    """The order of visiting every room of ``stops`` that makes the walk from ``start``
    to ``end`` shortest (Held-Karp over subsets; ties go to the lower stop index)."""
    m = len(stops)
    full = (1 << m) - 1
    inf = 1 << 30
    cost = [[inf] * m for _ in range(full + 1)]
    back = [[-1] * m for _ in range(full + 1)]
    for i, s in enumerate(stops):
        cost[1 << i][i] = dist[start][s]
    for mask in range(1, full + 1):
        row = cost[mask]
        for i in range(m):
            here = row[i]
            if here >= inf or not mask >> i & 1:
                continue
            di = dist[stops[i]]
            for n in range(m):
                if mask >> n & 1:
                    continue
                nxt = mask | 1 << n
                c = here + di[stops[n]]
                if c < cost[nxt][n]:
                    cost[nxt][n] = c
                    back[nxt][n] = i
    last = min(range(m), key=lambda i: (cost[full][i] + dist[stops[i]][end], i))
    out: list[str] = []
    mask = full
    while last >= 0:
        out.append(stops[last])
        last, mask = back[mask][last], mask & ~(1 << last)
    out.reverse()
    return out


@lru_cache(maxsize=512)
def solve(sc: int, dd: int, seed: int, archetype: int) -> tuple[Action, ...]:
    """An optimal plan for the world of ``build_world(sc, dd, seed, archetype)`` from its
    reset state without mutations (decoys change nothing): stage by stage as described
    in the module docstring."""
    w = build_world(sc, dd, seed, archetype)
    room_order = {r: i for i, r in enumerate(w.rooms)}
    plan: list[Action] = []
    here = w.start_room
    for j, d in enumerate(w.doors):
        opened = frozenset(w.doors[:j])
        by_room: dict[str, list[str]] = {}
        for o in w.objects[d]:
            by_room.setdefault(w.place[o], []).append(o)
        stops = sorted(by_room, key=room_order.__getitem__)
        end = w.near[d]
        trees = {r: _bfs(r, w.links, opened) for r in {here, *stops}}
        dist = {r: _depths(tree) for r, tree in trees.items()}
        dist[end] = _depths(_bfs(end, w.links, opened))
        for stop in _best_order(here, stops, end, dist):
            plan += _walk(trees[here], stop)
            here = stop
            plan += [enabler for enabler in w.enablers(d) if enabler[1] in by_room[stop]]
        plan += _walk(_bfs(here, w.links, opened), end)
        plan.append(("unlock", d))
        here = end
    plan += _walk(_bfs(here, w.links, frozenset(w.doors)), w.goal_room)
    return tuple(plan)


# --- the environment ------------------------------------------------------------------

_PLURAL = {"room": "rooms", "door": "doors", "key": "keys", "switch": "switches", "decoy": "decoys"}


def _item_place(fact: Fact) -> Hashable:
    """Where an item-location fact puts the item, as a place the agent can look at."""
    if fact[0] == "at":
        return ("floor", fact[2])
    if fact[0] == "in_lock":
        return ("lock", fact[2])
    return "hands"


class GraphNav(EnvironmentBase[World]):
    """The GraphNav environment (see the module docstring). One instance runs one
    episode at a time; :meth:`reset` starts a new one."""

    name: ClassVar[str] = NAME
    verbs: ClassVar[Mapping[str, int]] = VERBS
    error_labels: ClassVar[tuple[str, ...]] = ERROR_LABELS
    #: the entity kinds ``sc`` counts: the nodes (keys, switches and decoys are objects)
    sc_kinds: ClassVar[tuple[str, ...]] = ("room",)

    # -- reset -------------------------------------------------------------------------

    def reset(self, seed: int, archetype: int = 0) -> tuple[Observation, Task]:
        self._check_reset(seed, archetype)
        spec = self.spec
        w = build_world(spec.sc, spec.dd, seed, archetype)
        self._world = w
        self._seed, self._archetype = seed, archetype
        self._decoys = decoy_names(w, spec.branching)
        self._items = (*w.keys, *self._decoys)
        self._kind: dict[str, str] = {"agent": "agent"}
        for names, kind in (
            (w.rooms, "room"),
            (w.doors, "door"),
            (w.keys, "key"),
            (w.switches, "switch"),
            (tuple(self._decoys), "decoy"),
        ):
            for n in names:
                self._kind[n] = kind
        self._room_index = {r: i for i, r in enumerate(w.rooms)}
        self._door_fact = {d: ("door", d, *w.ends[d]) for d in w.doors}
        self._doors_at: dict[str, tuple[str, ...]] = {r: () for r in w.rooms}
        for d in w.doors:
            for r in w.ends[d]:
                self._doors_at[r] += (d,)
        self._switches_in: dict[str, tuple[str, ...]] = {r: () for r in w.rooms}
        for s in w.switches:
            self._switches_in[w.place[s]] += (s,)
        self._door_keys = {d: tuple(x for p, x in w.requires[d] if p == "held") for d in w.doors}
        self._door_switches = {d: tuple(x for p, x in w.requires[d] if p == "on") for d in w.doors}
        # go(b) from a: the preconditions besides at(agent, a), for every neighbour
        self._way: dict[tuple[str, str], tuple[Fact, ...]] = {}
        for a in w.rooms:
            for b, d in w.links[a]:
                self._way[(a, b)] = (
                    (self._door_fact[d], ("unlocked", d)) if d else (("passage", *self._pair(a, b)),)
                )
        self._static = self._static_facts()
        self._static_set = frozenset(self._static)
        self._initial = self._initial_facts()
        self._plan = solve(spec.sc, spec.dd, seed, archetype)
        self._task = self._make_task()
        self._partial = spec.observation == "partial"
        self._rate = spec.mutation_rate
        self._mut_rng = Rng(derive_seed(seed, NAME, "mutation"))
        self._obs_rng = Rng(derive_seed(seed, NAME, "observation"))
        self._phantoms = self._make_phantoms() if spec.observation == "distractor" else ()
        self._load(self._initial)
        self._t = 0
        self._ever_held: set[str] = set()
        self._ever_at: set[tuple[str, str]] = {(x, self._loc[x][2]) for x in self._items}
        self._known: dict[Hashable, tuple[Fact, int]] = {}
        self._viewed: dict[Hashable, int] = {}
        self._changed: list[str] = []
        self._examined: str | None = None
        return self._observe("start"), self._task

    def _pair(self, a: str, b: str) -> tuple[str, str]:
        """Two rooms in room order: the spelling of the symmetric relations."""
        index = self._room_index
        return (a, b) if index.get(a, -1) <= index.get(b, -1) else (b, a)

    def _static_facts(self) -> tuple[Fact, ...]:
        w = self._w
        out: list[Fact] = [("passage", a, b) for a, b in w.passages]
        out += self._door_fact.values()
        out += [("at", s, w.place[s]) for s in w.switches]
        return tuple(out)

    def _initial_facts(self) -> list[Fact]:
        w = self._w
        facts = list(self._static)
        facts.append(("at", "agent", w.start_room))
        facts += [("at", x, w.place[x]) for x in w.keys]
        facts += [("at", x, r) for x, r in self._decoys.items()]
        facts += [("locked", d) for d in w.doors]
        facts += [("off", s) for s in w.switches]
        return facts

    def _load(self, facts: Iterable[Fact]) -> None:
        """(Re)build every index from a whole state."""
        w = self._w
        self._store = FactStore(facts)
        self._floor: dict[str, set[str]] = {r: set() for r in w.rooms}
        self._held: set[str] = set()
        self._loc: dict[str, Fact] = {}
        self._locked: dict[str, bool] = {}
        self._on: dict[str, bool] = {}
        kind = self._kind
        for f in self._store.canonical():
            p = f[0]
            if p == "at" and f[1] == "agent":
                self._agent = f[2]
            elif p in ("at", "held", "in_lock") and kind.get(f[1]) in _ITEMS:
                self._loc[f[1]] = f
                if p == "at":
                    self._floor[f[2]].add(f[1])
                elif p == "held":
                    self._held.add(f[1])
            elif p in ("locked", "unlocked"):
                self._locked[f[1]] = p == "locked"
            elif p in ("on", "off"):
                self._on[f[1]] = p == "on"
        self._won = self._agent == w.goal_room
        self._over = self._won

    # -- the task ----------------------------------------------------------------------

    def _make_task(self) -> Task:
        w, spec = self._w, self.spec
        facts: list[Fact] = [("goal", "at", "agent", w.goal_room)]
        subgoals: list[Subgoal] = []
        for j, d in enumerate(w.doors):
            after = w.doors[j - 1] if j else None
            facts += [("requires", d, *p) for p in w.requires[d]]
            if after:
                facts.append(("after", d, after))
            sealed = w.objects[d] if after else ()
            subgoals.append(Subgoal(d, ("unlocked", d), w.requires[d], w.enablers(d), after, sealed))
        entities = {
            "room": w.rooms,
            "door": w.doors,
            "key": w.keys,
            "switch": w.switches,
            "decoy": tuple(self._decoys),
        }
        return Task(
            env=NAME,
            spec=spec,
            seed=self._seed,
            archetype=self._archetype,
            text=self._task_text(entities),
            facts=tuple(sorted(facts)),
            goal=(("at", "agent", w.goal_room),),
            subgoals=tuple(subgoals),
            entities=entities,
            optimal_length=len(self._plan),
            horizon=spec.horizon,
            extra={
                "rooms": len(w.rooms),
                "doors": len(w.doors),
                "regions": tuple(len(members) for members in w.regions),
                "region_parents": w.parents,
                "keys": len(w.keys),
                "switches": len(w.switches),
                "decoys": len(self._decoys),
                "requirement_kinds": tuple(tuple(p[0] for p in w.requires[d]) for d in w.doors),
            },
        )

    def _task_text(self, entities: Mapping[str, tuple[str, ...]]) -> str:
        w = self._w
        lines = ["You walk through a building of rooms joined by open passages and locked doors."]
        lines.append("Entities:")
        for kind, names in entities.items():
            if names:
                lines.append(f"  {_PLURAL[kind]}: {', '.join(names)}")
        lines.append(f"Goal: reach {w.goal_room}; the episode is won the moment you enter it.")
        lines.append("Every door starts locked. unlock(door) works in a room at the door while every")
        lines.append("requirement of the door holds at that moment; the door then stays unlocked and")
        lines.append("the keys it required stay in its lock (you no longer hold them). Requirements:")
        for j, d in enumerate(w.doors):
            a, b = w.ends[d]
            needs = "; ".join(format_fact(p) for p in w.requires[d])
            lines.append(f"  {d} (between {a} and {b}) requires: {needs}.")
            if j:
                lines.append(f"    Its keys and switches lie behind {w.doors[j - 1]}.")
        if self._decoys:
            lines.append("Decoys are items that open nothing.")
        lines += [
            "Actions (here = the room you are in):",
            "  go(room) to a room joined to here by a passage or an unlocked door;",
            "  take(item) a key or decoy from the floor here; drop(item) a held one onto the floor here;",
            "  toggle(switch) here turns it on if off, off if on; unlock(door) a locked door of this room;",
            "  examine(object) looks at a key or decoy here or held, a switch here, or a door of this",
            "  room (showing the state of each switch it requires); noop.",
        ]
        lines.append(f"You have {self.spec.horizon} steps.")
        return "\n".join(lines)

    # -- preconditions -----------------------------------------------------------------

    def _well_formed(self, action: object) -> bool:
        if not isinstance(action, tuple) or not action:
            return False
        sig = _SIGNATURES.get(action[0]) if isinstance(action[0], str) else None
        if sig is None or len(action) != len(sig) + 1:
            return False
        kind = self._kind
        return all(
            isinstance(a, str) and kind.get(a) in allowed for a, allowed in zip(action[1:], sig, strict=True)
        )

    def _door_end(self, d: str) -> str:
        """The side of ``d`` an action on it is bound to: the agent's room when it is at
        the door, else the near side (the one the agent can reach first)."""
        here = self._agent
        return here if here in self._w.ends[d] else self._w.near[d]

    def _pre(self, action: Action) -> tuple[Fact, ...] | None:
        """The gold preconditions of ``action`` now, or None if it is no action here."""
        if not self._well_formed(action):
            return None
        verb = action[0]
        here = self._agent
        at_here = ("at", "agent", here)
        if verb == "go":
            way = self._way.get((here, action[1]))
            if way is None:
                return (at_here, ("passage", *self._pair(here, action[1])))
            return (at_here, *way)
        if verb == "take":
            return (at_here, ("at", action[1], here))
        if verb == "drop":
            return (at_here, ("held", action[1]))
        if verb == "toggle":
            return (at_here, ("at", action[1], here))
        if verb == "unlock":
            d = action[1]
            pre = (("at", "agent", self._door_end(d)), self._door_fact[d], ("locked", d))
            return pre + self._w.requires[d]
        if verb == "examine":
            x = action[1]
            kind = self._kind[x]
            if kind == "door":
                return (("at", "agent", self._door_end(x)), self._door_fact[x])
            if kind != "switch" and x in self._held:
                return (("held", x),)
            return (at_here, ("at", x, here))
        return ()  # noop

    def preconditions(self, action: Action) -> frozenset[Fact] | None:
        pre = self._pre(action)
        return None if pre is None else frozenset(pre)

    # -- step --------------------------------------------------------------------------

    def step(self, action: Action) -> StepResult:
        if self._world is None:
            raise RuntimeError("call reset() first")
        if self._over:
            raise RuntimeError("the episode is over; call reset()")
        self._changed = []
        self._examined = None
        pre = self._pre(action)
        if pre is None:
            valid, error, unmet = False, "unknown_action", ()
        else:
            store = self._store
            unmet = tuple(f for f in pre if f not in store)
            if unmet:
                valid, error = False, self._label(action, unmet)
            else:
                valid, error = True, None
                self._apply(action)
        self._t += 1
        events: tuple[str, ...] = ()
        if self._rate and not self._won and self._t < self.spec.horizon:
            if self._mut_rng.random() < self._rate:
                events = self._mutate()
        self._over = self._won or self._t >= self.spec.horizon
        text = format_action(action) if pre is not None else "(not an action of this world)"
        message = f"{text}: ok" if valid else f"{text}: failed ({error})"
        if self._won:
            message += "; goal reached"
        elif self._over:
            message += "; out of steps"
        return StepResult(
            observation=self._observe(message),
            gold=self._store.canonical(),
            valid=valid,
            error=error,
            done=self._over,
            success=self._won,
            unmet=tuple(sorted(unmet)),
            events=events,
        )

    def _stale(self, fact: Fact) -> bool:
        """A failed item-location precondition on an out-of-date picture (see
        ``stale_inventory`` in the module docstring)."""
        x = fact[1]
        if x in self._ever_held:
            return True
        return fact[0] == "at" and (x, fact[2]) in self._ever_at

    def _label(self, action: Action, unmet: tuple[Fact, ...]) -> str:
        """The error label of failed preconditions, by the priority of the docstring."""
        rank = len(ERROR_LABELS)
        kind = self._kind
        for f in unmet:
            p = f[0]
            if p == "passage" or (p == "at" and f[1] == "agent"):
                return "nonexistent_edge"
            if p == "locked":
                rank = min(rank, 1)
            elif p in ("held", "at") and kind[f[1]] in _ITEMS:
                if self._stale(f):
                    rank = min(rank, 2)
                else:
                    rank = min(rank, 3 if action[0] == "unlock" else 4)
            elif p in ("on", "unlocked"):
                rank = min(rank, 3)
            else:  # a switch that is in another room
                rank = min(rank, 4)
        return ERROR_LABELS[rank]

    def _move(self, x: str, new: Fact) -> None:
        old = self._loc[x]
        if old[0] == "at":
            self._floor[old[2]].discard(x)
        elif old[0] == "held":
            self._held.discard(x)
        if new[0] == "at":
            self._floor[new[2]].add(x)
            self._ever_at.add((x, new[2]))
        elif new[0] == "held":
            self._held.add(x)
            self._ever_held.add(x)
        self._loc[x] = new
        self._store.replace(old, new)
        self._changed.append(x)

    def _flip(self, old: Fact, new: Fact) -> None:
        self._store.replace(old, new)
        self._changed.append(old[1])

    def _apply(self, action: Action) -> None:
        verb = action[0]
        if verb == "go":
            b = action[1]
            self._store.replace(("at", "agent", self._agent), ("at", "agent", b))
            self._agent = b
            self._won = b == self._w.goal_room
        elif verb == "take":
            self._move(action[1], ("held", action[1]))
        elif verb == "drop":
            self._move(action[1], ("at", action[1], self._agent))
        elif verb == "toggle":
            s = action[1]
            on = self._on[s]
            self._flip(("on", s) if on else ("off", s), ("off", s) if on else ("on", s))
            self._on[s] = not on
        elif verb == "unlock":
            d = action[1]
            self._flip(("locked", d), ("unlocked", d))
            self._locked[d] = False
            for key in self._door_keys[d]:
                self._move(key, ("in_lock", key, d))
        elif verb == "examine":
            self._examined = action[1]

    # -- mutation ----------------------------------------------------------------------

    def _mutate(self) -> tuple[str, ...]:
        """One exogenous change, uniform over the possible ones (in world order, so the
        choice never depends on hash order)."""
        w = self._w
        options: list[tuple[str, str]] = [("off", s) for s in w.switches if self._on[s]]
        for key in w.keys:
            p = self._loc[key]
            if p[0] == "held":
                options.append(("slip", key))
            elif p[0] == "at" and len(w.regions[w.region_of[p[2]]]) > 1:
                options.append(("move", key))
        if not options:
            return ()
        kind, ent = self._mut_rng.pick(options)
        if kind == "off":
            self._flip(("on", ent), ("off", ent))
            self._on[ent] = False
            return (f"{ent} was switched off",)
        if kind == "slip":
            self._move(ent, ("at", ent, self._agent))
            return (f"{ent} slipped from the agent's hands onto the floor of {self._agent}",)
        old = self._loc[ent]
        others = [r for r in w.regions[w.region_of[old[2]]] if r != old[2]]
        new = ("at", ent, self._mut_rng.pick(others))
        self._move(ent, new)
        return (f"{ent} was moved: {format_fact(old)} -> {format_fact(new)}",)

    # -- observation -------------------------------------------------------------------

    def _observe(self, message: str) -> Observation:
        mode = self.spec.observation
        gold = self._store.canonical()
        if mode == "clean":
            return Observation(self._t, gold, self._task.facts, message)
        if mode == "partial":
            if self._t == 0:
                self._learn_all(gold)
                return Observation(0, gold, self._task.facts, message)
            return Observation(self._t, self._look(), self._task.facts, message)
        if mode == "distractor":
            extra = self._obs_rng.pick(self._phantoms)
            return Observation(self._t, tuple(sorted(gold + extra)), self._task.facts, message, extra)
        # conflict
        if self._t > 0 and self._obs_rng.random() < CONFLICT_RATE:
            lie = self._conflict_fact()
            if lie is not None:
                return Observation(self._t, tuple(sorted((*gold, lie))), self._task.facts, message, (lie,))
        return Observation(self._t, gold, self._task.facts, message)

    def _look(self) -> Canonical:
        """Partial mode: what the agent sees (its room with its doorways, its hands, and
        an examined door's switches), recorded as its latest view of each slot shown and
        of each place looked at."""
        t = self._t
        w = self._w
        known, viewed = self._known, self._viewed
        r = self._agent
        out: list[Fact] = [("passage", *self._pair(r, s)) for s, d in w.links[r] if d is None]
        shown: list[tuple[Hashable, Fact]] = [(("loc", "agent"), ("at", "agent", r))]
        viewed[("floor", r)] = viewed["hands"] = t
        for d in self._doors_at[r]:
            out.append(self._door_fact[d])
            locked = self._locked[d]
            shown.append((("lock", d), ("locked", d) if locked else ("unlocked", d)))
            viewed[("lock", d)] = t
            if not locked:
                shown += [(("loc", key), ("in_lock", key, d)) for key in self._door_keys[d]]
        switches = self._switches_in[r]
        out += [("at", s, r) for s in switches]
        if self._examined is not None and self._kind[self._examined] == "door":
            switches = switches + self._door_switches[self._examined]
        for s in switches:
            shown.append((("switch", s), ("on", s) if self._on[s] else ("off", s)))
        loc = self._loc
        for x in (*self._floor[r], *self._held):
            shown.append((("loc", x), loc[x]))
        for slot, f in shown:
            known[slot] = (f, t)
            out.append(f)
        return tuple(sorted(set(out)))

    def _learn_all(self, facts: Iterable[Fact]) -> None:
        """Partial mode's briefing: every slot seen now."""
        for f in facts:
            slot = self.slot(f)
            if slot is not None:
                self._known[slot] = (f, self._t)

    def _knows(self, fact: Fact) -> bool:
        """Partial mode: the agent's latest view of ``fact``'s slot showed ``fact``, and,
        for an item, no later look at that place found it gone."""
        slot = self.slot(fact)
        entry = self._known.get(slot) if slot is not None else None
        if entry is None or entry[0] != fact:
            return False
        if self._kind.get(fact[1]) in _ITEMS:
            return self._viewed.get(_item_place(fact), -1) <= entry[1]
        return True

    def _conflict_fact(self) -> Fact | None:
        """A false fact for a slot that did not change this step (so the previous
        observation showed its true value), or None if there is none."""
        w = self._w
        changed = self._changed
        candidates = [e for e in (*w.doors, *w.switches, *w.keys) if e not in changed]
        if not candidates:
            return None
        ent = self._obs_rng.pick(candidates)
        kind = self._kind[ent]
        if kind == "door":
            return ("unlocked", ent) if self._locked[ent] else ("locked", ent)
        if kind == "switch":
            return ("off", ent) if self._on[ent] else ("on", ent)
        places = [("at", ent, r) for r in w.rooms] + [("held", ent)]
        old = self._loc[ent]
        return self._obs_rng.pick([p for p in places if p != old])

    def _make_phantoms(self) -> tuple[Canonical, ...]:
        """A persistent building of entities that do not exist (numbered past the real
        ones), and :data:`PHANTOM_VIEWS` subsets of it of ``max(1, len(gold) // 10)``
        facts (the gold state's size never changes): a distractor observation shows one
        of them."""
        w = self._w
        rng = Rng(derive_seed(self._seed, NAME, "phantoms"))
        rooms = [f"room{len(w.rooms) + i}" for i in range(1, max(3, len(w.rooms) // 3) + 1)]
        doors = [f"door{len(w.doors) + i}" for i in range(1, max(1, len(w.doors) // 2) + 1)]
        keys = [f"key{len(w.keys) + i}" for i in range(1, max(2, len(w.keys) // 2) + 1)]
        switches = [f"switch{len(w.switches) + i}" for i in range(1, max(1, len(w.switches) // 2) + 1)]
        facts: list[Fact] = [("passage", a, b) for a, b in zip(rooms, rooms[1:], strict=False)]
        for d in doors:
            a, b = rng.sample(rooms, 2)
            facts.append(("door", d, a, b))
            facts.append(("locked", d) if rng.chance(0.6) else ("unlocked", d))
        facts += [("at", x, rng.pick(rooms)) for x in keys]
        for s in switches:
            facts.append(("at", s, rng.pick(rooms)))
            facts.append(("on", s) if rng.chance(0.5) else ("off", s))
        k = min(len(facts), max(1, len(self._initial) // 10))
        return tuple(tuple(sorted(rng.sample(facts, k))) for _ in range(PHANTOM_VIEWS))

    # -- queries -----------------------------------------------------------------------

    def gold_state(self) -> Canonical:
        return self._store.canonical()

    def observable_gold(self) -> frozenset[Fact]:
        if not self._partial:
            return self._store.frozen()
        static = self._static_set
        return frozenset(f for f in self._store.canonical() if f in static or self._knows(f))

    def slot(self, fact: Fact) -> Hashable | None:
        kind = _SLOT_OF_PREDICATE.get(fact[0]) if fact else None
        if kind is None or len(fact) < 2:
            return None
        return (kind, fact[1])

    def valid_actions(self) -> tuple[Action, ...]:
        r = self._agent
        locked, on, held = self._locked, self._on, self._held
        acts: list[Action] = [("noop",)]
        acts += [("go", s) for s, d in self._w.links[r] if d is None or not locked[d]]
        for x in self._floor[r]:
            acts.append(("take", x))
            acts.append(("examine", x))
        for x in held:
            acts.append(("drop", x))
            acts.append(("examine", x))
        for s in self._switches_in[r]:
            acts.append(("toggle", s))
            acts.append(("examine", s))
        requires = self._w.requires
        for d in self._doors_at[r]:
            acts.append(("examine", d))
            if locked[d] and all(x in held if p == "held" else on[x] for p, x in requires[d]):
                acts.append(("unlock", d))
        return tuple(sorted(acts))

    @property
    def decoys(self) -> Mapping[str, str]:
        """Decoy -> the room it starts in (from branching)."""
        if self._world is None:
            raise RuntimeError("call reset() first")
        return dict(self._decoys)

    # -- agent-written states ----------------------------------------------------------

    def normalize(self, facts: Iterable[Fact]) -> State:
        out = set()
        rooms = self._room_index
        for f in facts:
            f = tuple(f) if isinstance(f, list | tuple) else f
            if isinstance(f, tuple) and len(f) >= 3 and f[0] in ("passage", "door"):
                a, b = f[-2], f[-1]
                if a in rooms and b in rooms:
                    f = (*f[:-2], *self._pair(a, b))
            out.add(f)
        return frozenset(out)

    def invariant_violations(self, facts: Iterable[Fact]) -> list[str]:
        """Malformed facts (unknown predicate, wrong arity, a name that is no entity or
        of the wrong kind, a room joined to itself) and clashes (two facts of one slot:
        a key in two places, a door locked and unlocked...). Copies of the task
        specification's facts are not world state and are ignored."""
        problems: list[str] = []
        by_slot: dict[Hashable, list[Fact]] = {}
        for f in sorted(self.normalize(facts), key=repr):
            if not isinstance(f, tuple) or not f or not all(isinstance(a, str) for a in f):
                problems.append(f"{f!r} is not a tuple of strings")
                continue
            if f[0] in TASK_PREDICATES:
                continue
            sig = PREDICATES.get(f[0])
            if sig is None:
                problems.append(f"{format_fact(f)}: unknown predicate {f[0]!r}")
                continue
            if len(f) != len(sig) + 1:
                problems.append(f"{format_fact(f)}: {f[0]} takes {len(sig)} argument(s)")
                continue
            bad = False
            for arg, allowed in zip(f[1:], sig, strict=True):
                kind = self._kind.get(arg)
                if kind is None:
                    problems.append(f"{format_fact(f)}: {arg} is no entity of this world")
                    bad = True
                elif kind not in allowed:
                    problems.append(f"{format_fact(f)}: {arg} is a {kind}, not a {'/'.join(sorted(allowed))}")
                    bad = True
            if bad:
                continue
            if f[0] in ("passage", "door") and f[-2] == f[-1]:
                problems.append(f"{format_fact(f)}: joins {f[-1]} to itself")
            slot = self.slot(f)
            if slot is not None:
                by_slot.setdefault(slot, []).append(f)
        for slot, fs in by_slot.items():
            if len(fs) > 1:
                listed = " and ".join(format_fact(f) for f in sorted(fs))
                problems.append(f"{slot[1]} {_CLASH[slot[0]]}: {listed}")  # type: ignore[index]
        return sorted(problems)

    # -- snapshots ---------------------------------------------------------------------

    def snapshot(self) -> Any:
        return (
            self._store.frozen(),
            self._t,
            self._mut_rng.getstate(),
            self._obs_rng.getstate(),
            dict(self._known),
            dict(self._viewed),
            frozenset(self._ever_held),
            frozenset(self._ever_at),
            (self._world, self._seed, self._archetype, self.spec.branching),
        )

    def restore(self, snapshot: Any) -> None:
        facts, t, mut, obs, known, viewed, ever_held, ever_at, episode = snapshot
        same = self._world is not None and episode[0] is self._world
        if not same or episode[1:] != (self._seed, self._archetype, self.spec.branching):
            raise ValueError("snapshot: taken in another episode")
        self._load(facts)
        self._t = t
        self._over = self._won or t >= self.spec.horizon
        self._mut_rng.setstate(mut)
        self._obs_rng.setstate(obs)
        self._known = dict(known)
        self._viewed = dict(viewed)
        self._ever_held = set(ever_held)
        self._ever_at = set(ever_at)
        self._changed = []
        self._examined = None


__all__: Sequence[str] = [
    "ARCHETYPES",
    "Archetype",
    "CONFLICT_RATE",
    "DOORS_TABLE",
    "ERROR_LABELS",
    "GraphNav",
    "MAX_OBJECT_ROOMS",
    "PHANTOM_VIEWS",
    "PREDICATES",
    "TASK_PREDICATES",
    "VERBS",
    "World",
    "build_world",
    "decoy_names",
    "door_count",
    "solve",
]
