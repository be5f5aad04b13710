"""StatefulPuzzle: the paper's confirmatory world-model environment (Appendix B).

The agent moves items between rooms and containers to finish an ordered chain of
subgoals. Every entity has a name: ``room1..``, ``box1..`` (containers), ``item1..``,
``switch1..``, ``decoy1..`` and subgoals ``sg1..``.

World
-----
Rooms are joined by doors (a graph whose shape is the archetype's). Containers stand in
rooms and are open or closed; a locked one opens only after ``use(key, box)``. Items lie
on a room's floor, inside a container, in the agent's hands, or fitted onto another item
(a *part*, carried with its host). Switches are fixed in rooms, on or off.

Subgoal ``sg<j>`` asks for one item in one place (``in(item, box)`` or, on a floor,
``at(item, room)``) and is closed by the action ``finish_subgoal(sg<j>)``, which is valid
only when, at that moment, the placement holds, ``sg<j-1>`` is done, and each of the
subgoal's ``dd`` preconditions holds. A precondition is one of

- ``on(switch)``: the subgoal's switch was activated (``activate``), in its room;
- ``held(item)``: the subgoal's tool is in the agent's hands (``take``);
- ``fitted(part, target)``: the part was fitted onto the target (``combine``, both held);
- ``unlocked(box)``: the subgoal's (container) destination was unlocked with its key
  (``use``, key held, in the box's room).

Each precondition names its own switch, tool, part or lock: no two preconditions share
one. Items serve as tools, parts and keys while spare items (those that are not targets)
last; the rest are switches, so a world has ``dd * subgoals`` mechanisms whatever its
``sc``. Switches are fixtures and do not count in ``sc``.

The chain is physical: every object of subgoal ``j > 1`` (its target, tools, parts, key,
switches) is *sealed* until ``sg<j-1>`` is done: ``take`` and ``activate`` on it need
``done(sg<j-1>)``. So no work for a later subgoal can be done early, and finishing is
never a declaration: the exploit "finish everything at once" does not exist.

Every precondition is needed on every solution: it is false at reset, it must hold when
the subgoal is finished, and exactly one action can make it true (its *enabler*,
``Subgoal.enablers``); mutations never make it true. The tests check this by exhaustive
search over the real dynamics: without the enabler, no state where the task is won can
be reached.

State cardinality
-----------------
``sc = rooms + containers + items``. Every integer ``sc`` in 3..60 maps to its own
``(rooms, containers, items, subgoals)`` (:data:`SC_TABLE`): rooms, containers and
subgoals are linear interpolations, rounded half up, between the anchors

=====  =====  ==========  =====  ========
sc     rooms  containers  items  subgoals
=====  =====  ==========  =====  ========
3      1      1           1      1
5      2      1           2      2
10     3      3           4      3
20     5      6           9      4
40     8      12          20     6
60     11     18          31     8
=====  =====  ==========  =====  ========

(the paper's four anchors plus the two ends), items are the rest, and subgoals are at
most items. Each step of ``sc`` adds exactly one room, container or item, so no two
values of ``sc`` build the same world.

Branching
---------
``branching = b`` puts ``b // 2`` decoy items on the floor of every room. A decoy can be
taken, put and examined, and takes part in nothing, so each one adds valid actions
(``take``/``examine`` where it lies, one ``put`` per open container and floor once held)
without changing L*. Decoys are placed without randomness, so the same seed gives the
same world, and the same optimal plan, at every branching level.

Observation modes
-----------------
``clean``: the whole gold state every step. ``partial``: a full briefing at reset, then
only the agent's room (its doors, containers with their state and, when open or just
examined, their contents; its switches; the items on its floor), the agent's hands and
the subgoal statuses; the task is never hidden. ``distractor``: the whole gold state plus
``max(1, len(gold) // 10)`` facts of a persistent phantom world whose rooms,
containers, items and switches do not exist (numbered past the real ones): one of 32
subsets drawn at reset, picked at random each step.
``conflict``: the whole gold state plus, with probability 1/2 per step, one false fact
for a slot (an item's place, a container's or a switch's state) that did not change this
step, so it contradicts what the previous observation showed.

Mutation
--------
After the agent's action, with the spec's per-step rate (``low`` 0.05, ``medium``
0.15, ``high`` 0.35), one exogenous change happens, drawn uniformly from all the
possible ones: close an open container, turn an on switch off, or move a loose item (on
a floor or in an open container, not a decoy) to a uniformly drawn other floor or open
container, never into the destination of its pending subgoal. None of these makes a
precondition or a placement true, and everything they undo can be redone, so the task
stays solvable.

Error labels
------------
An invalid action changes nothing (time still passes). Its label comes from the gold
preconditions that failed (``StepResult.unmet``):

- ``stale_room_state``: (partial observation only) every failed precondition is what the
  agent last saw for that slot, and the world changed out of its sight since: it acted
  on a stale picture of a room it could not see;
- ``object_location_error``: an object is not where the action needs it (a failed
  ``at``, ``in``, ``held``, ``fitted`` or ``door`` fact): the item is elsewhere, the
  container is in another room, there is no door, the placement of a subgoal is missing;
- ``precondition_violation``: everything is in place but a state precondition fails (a
  closed or locked container, a switch already on, a wrong key, a sealed object, a
  subgoal finished out of order or with a precondition missing);
- ``unknown_action``: not an action of this world (unknown verb, wrong number of
  arguments, a name that is no entity of the right kind, e.g. a distractor's).

Solver
------
:func:`solve` is exact for the mutation-free world. Since later objects are sealed, the
plan is a chain of stages; within a stage every needed action is known (each enabler,
``take``/``put`` of the target, ``open`` of each closed container in the way) and none
is ever undone in an optimal plan, so the search is A* over (stage, done actions, room)
with shortest paths between rooms, doing at once any available action in the current
room or needing no room (never worse), and an admissible, consistent heuristic
(remaining actions plus the farthest remaining room). The tests compare its length with
a breadth-first search over the real dynamics on small worlds.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
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

NAME = "stateful_puzzle"

#: verb -> number of arguments
VERBS: Mapping[str, int] = {
    "go": 1,
    "take": 1,
    "put": 2,
    "open": 1,
    "close": 1,
    "use": 2,
    "combine": 2,
    "activate": 1,
    "examine": 1,
    "finish_subgoal": 1,
    "noop": 0,
}

#: the argument kinds each verb accepts
_SIGNATURES: Mapping[str, tuple[frozenset[str], ...]] = {
    "go": (frozenset({"room"}),),
    "take": (frozenset({"item", "decoy"}),),
    "put": (frozenset({"item", "decoy"}), frozenset({"container", "room"})),
    "open": (frozenset({"container"}),),
    "close": (frozenset({"container"}),),
    "use": (frozenset({"item", "decoy"}), frozenset({"container"})),
    "combine": (frozenset({"item", "decoy"}), frozenset({"item", "decoy"})),
    "activate": (frozenset({"switch"}),),
    "examine": (frozenset({"container", "switch", "item", "decoy"}),),
    "finish_subgoal": (frozenset({"subgoal"}),),
    "noop": (),
}

ERROR_LABELS: tuple[str, ...] = (
    "precondition_violation",
    "object_location_error",
    "stale_room_state",
    "unknown_action",
)

_MOVABLE = frozenset({"item", "decoy"})
#: predicate -> the entity kinds of each argument
PREDICATES: Mapping[str, tuple[frozenset[str], ...]] = {
    "at": (frozenset({"agent", "item", "decoy", "container", "switch"}), frozenset({"room"})),
    "in": (_MOVABLE, frozenset({"container"})),
    "held": (_MOVABLE,),
    "fitted": (frozenset({"item"}), frozenset({"item"})),
    "door": (frozenset({"room"}), frozenset({"room"})),
    "open": (frozenset({"container"}),),
    "closed": (frozenset({"container"}),),
    "locked": (frozenset({"container"}),),
    "unlocked": (frozenset({"container"}),),
    "on": (frozenset({"switch"}),),
    "off": (frozenset({"switch"}),),
    "done": (frozenset({"subgoal"}),),
    "pending": (frozenset({"subgoal"}),),
    "key_of": (frozenset({"item"}), frozenset({"container"})),
    "part_of": (frozenset({"item"}), frozenset({"item"})),
}
#: predicates of the task specification (``Task.facts``): not world state, never flagged
TASK_PREDICATES = frozenset({"goal", "requires", "after", "sealed_until"})
#: predicates that say where something is: their failure is an object_location_error
LOCATION_PREDICATES = frozenset({"at", "in", "held", "fitted", "door"})
_SLOT_OF_PREDICATE: Mapping[str, str] = {
    "at": "loc",
    "in": "loc",
    "held": "loc",
    "fitted": "loc",
    "open": "state",
    "closed": "state",
    "locked": "lock",
    "unlocked": "lock",
    "on": "switch",
    "off": "switch",
    "done": "status",
    "pending": "status",
}

_CLASH = {"loc": "is in two places", "state": "is both open and closed", "status": "is both done and pending"}

#: how many subsets of the phantom world distractor observations choose from
PHANTOM_VIEWS = 32
#: probability that a conflict-mode observation carries one contradicting fact
CONFLICT_RATE = 0.5

# --- state cardinality -------------------------------------------------------------

_ROOM_ANCHORS = ((3, 1), (5, 2), (10, 3), (20, 5), (40, 8), (60, 11))
_CONTAINER_ANCHORS = ((3, 1), (5, 1), (10, 3), (20, 6), (40, 12), (60, 18))
_SUBGOAL_ANCHORS = ((3, 1), (5, 2), (10, 3), (20, 4), (40, 6), (60, 8))


@dataclass(frozen=True, slots=True)
class Components:
    """What ``sc`` builds: ``rooms + containers + items == sc``."""

    rooms: int
    containers: int
    items: int
    subgoals: int


def _interpolate(anchors: Sequence[tuple[int, int]], x: int) -> int:
    """Piecewise-linear through ``anchors``, rounded half up (exact arithmetic)."""
    for (x0, y0), (x1, y1) in zip(anchors, anchors[1:], strict=False):
        if x0 <= x <= x1:
            value = Fraction(y0) + Fraction(y1 - y0, x1 - x0) * (x - x0)
            return math.floor(value + Fraction(1, 2))
    raise ValueError(f"sc: must be in {SC_MIN}..{SC_MAX}, got {x}")


def components(sc: int) -> Components:
    """The world size of ``sc`` (see the module docstring for the rule)."""
    rooms = _interpolate(_ROOM_ANCHORS, sc)
    containers = _interpolate(_CONTAINER_ANCHORS, sc)
    items = sc - rooms - containers
    subgoals = min(_interpolate(_SUBGOAL_ANCHORS, sc), items)
    return Components(rooms, containers, items, subgoals)


#: every supported sc -> its components
SC_TABLE: Mapping[int, Components] = {sc: components(sc) for sc in range(SC_MIN, SC_MAX + 1)}

# --- archetypes --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Archetype:
    """A layout family: the room graph's ``shape``, the order in which precondition
    ``kinds`` are tried, whether destinations are containers or floors
    (``destinations``), how likely an item starts inside a container (``in_box``) and
    how containers spread over rooms (``spread``)."""

    index: int
    shape: str
    kinds: tuple[str, str, str, str]
    destinations: str
    in_box: float
    spread: str


ARCHETYPES: tuple[Archetype, ...] = (
    Archetype(0, "line", ("switch", "tool", "part", "lock"), "containers", 0.5, "even"),
    Archetype(1, "ring", ("tool", "switch", "lock", "part"), "alternate", 0.3, "random"),
    Archetype(2, "star", ("part", "switch", "tool", "lock"), "containers", 0.6, "even"),
    Archetype(3, "grid", ("lock", "tool", "switch", "part"), "floors_first", 0.4, "clustered"),
    Archetype(4, "tree", ("switch", "part", "lock", "tool"), "alternate", 0.5, "random"),
    Archetype(5, "ladder", ("tool", "part", "switch", "lock"), "containers", 0.2, "even"),
    Archetype(6, "hubs", ("lock", "switch", "part", "tool"), "floors_first", 0.7, "random"),
    Archetype(7, "comb", ("part", "lock", "tool", "switch"), "alternate", 0.4, "clustered"),
    Archetype(8, "dense", ("switch", "lock", "tool", "part"), "containers", 0.5, "random"),
    Archetype(9, "binary", ("tool", "lock", "part", "switch"), "floors_first", 0.3, "even"),
)
assert len(ARCHETYPES) == N_ARCHETYPES


# --- the world ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Stage:
    """One subgoal's construction: target item, destination (container or room), its
    mechanisms as ``(kind, entity)`` (entity: the switch, tool, part or key), and the
    resulting precondition facts and enablers, aligned."""

    name: str
    target: str
    destination: str
    mechanisms: tuple[tuple[str, str], ...]
    preconditions: tuple[Fact, ...]
    enablers: tuple[Action, ...]
    goal: Fact


@dataclass(frozen=True, slots=True)
class World:
    """A generated world (without decoys, which depend on branching): static layout,
    roles and the initial placement. Shared read-only between episodes."""

    sc: int
    dd: int
    seed: int
    archetype: int
    rooms: tuple[str, ...]
    containers: tuple[str, ...]
    items: tuple[str, ...]
    switches: tuple[str, ...]
    doors: tuple[tuple[str, str], ...]
    neighbors: Mapping[str, tuple[str, ...]]
    room_of: Mapping[str, str]
    keys: Mapping[str, str]
    parts: Mapping[str, str]
    stages: tuple[Stage, ...]
    stage_of: Mapping[str, int]
    start_room: str
    start_loc: Mapping[str, Fact]

    @property
    def subgoal_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.stages)


def _pick_location(
    rng: Rng,
    arch: Archetype,
    rooms: Sequence[str],
    boxes: Sequence[str],
    ok: Any,
) -> Fact | None:
    """A start location ``("at", _, room)`` / ``("in", _, box)`` (item left blank) that
    ``ok`` accepts: random tries first, then the first acceptable one in a fixed order."""
    for _ in range(12):
        if boxes and rng.random() < arch.in_box:
            where = ("in", "", rng.pick(boxes))
        else:
            where = ("at", "", rng.pick(rooms))
        if ok(where):
            return where
    for where in [("in", "", b) for b in boxes] + [("at", "", r) for r in rooms]:
        if ok(where):
            return where
    return None


@lru_cache(maxsize=512)
def build_world(sc: int, dd: int, seed: int, archetype: int) -> World:
    """The world of ``(sc, dd, seed, archetype)``; all randomness from ``seed``."""
    comp = SC_TABLE[sc]
    arch = ARCHETYPES[archetype]
    rng = Rng(derive_seed(seed, NAME, "layout"))
    rooms = tuple(f"room{i}" for i in range(1, comp.rooms + 1))
    boxes = tuple(f"box{i}" for i in range(1, comp.containers + 1))
    items = tuple(f"item{i}" for i in range(1, comp.items + 1))
    k = comp.subgoals

    # rooms: the shape on shuffled labels, so names never reveal the structure
    labels = rng.shuffled(range(comp.rooms))
    edges = room_graph(arch.shape, comp.rooms, rng)
    pairs = sorted((min(labels[a], labels[b]), max(labels[a], labels[b])) for a, b in edges)
    doors = tuple((rooms[a], rooms[b]) for a, b in pairs)
    neighbors = {r: [] for r in rooms}
    for a, b in doors:
        neighbors[a].append(b)
        neighbors[b].append(a)
    order = {r: i for i, r in enumerate(rooms)}
    neighbors_t = {r: tuple(sorted(ns, key=order.__getitem__)) for r, ns in neighbors.items()}

    room_of: dict[str, str] = {}
    if arch.spread == "even":
        cycle = rng.shuffled(rooms)
        for i, b in enumerate(boxes):
            room_of[b] = cycle[i % len(cycle)]
    elif arch.spread == "clustered":
        chosen = rng.sample(rooms, max(1, (len(rooms) + 1) // 2))
        for b in boxes:
            room_of[b] = rng.pick(chosen)
    else:
        for b in boxes:
            room_of[b] = rng.pick(rooms)

    # targets and destinations
    shuffled = rng.shuffled(items)
    targets, spare = shuffled[:k], shuffled[k:]
    free_boxes = rng.shuffled(boxes)
    destinations: list[str] = []
    for j in range(k):
        if arch.destinations == "containers":
            want_box = True
        elif arch.destinations == "alternate":
            want_box = j % 2 == 0
        else:
            want_box = j % 2 == 1
        if comp.rooms == 1 or (want_box and free_boxes):
            if free_boxes:
                destinations.append(free_boxes.pop())
            else:  # one room and more subgoals than containers: containers are reused
                destinations.append(boxes[j % len(boxes)])
        else:
            destinations.append(rng.pick(rooms))
    dest_uses = {d: destinations.count(d) for d in destinations}

    # mechanisms: kinds in the archetype's order, items while spare ones last
    mechanisms: list[list[tuple[str, str]]] = [[] for _ in range(k)]
    switches: list[str] = []
    keys: dict[str, str] = {}
    parts: dict[str, str] = {}
    locked: set[str] = set()
    for slot in range(dd):
        for j in range(k):
            start = (slot + j) % 4
            prefs = arch.kinds[start:] + arch.kinds[:start]
            for kind in prefs:
                if kind == "switch":
                    name = f"switch{len(switches) + 1}"
                    switches.append(name)
                    room_of[name] = rng.pick(rooms)
                    mechanisms[j].append(("switch", name))
                    break
                if not spare:
                    continue
                if kind == "lock":
                    d = destinations[j]
                    if d not in room_of or d in locked or dest_uses[d] > 1:
                        continue
                    key = spare.pop(0)
                    keys[key] = d
                    locked.add(d)
                    mechanisms[j].append(("lock", key))
                    break
                item = spare.pop(0)
                if kind == "part":
                    parts[item] = targets[j]
                mechanisms[j].append((kind, item))
                break
    fillers = set(spare)

    stages: list[Stage] = []
    stage_of: dict[str, int] = {}
    for j in range(k):
        x, d = targets[j], destinations[j]
        pre: list[Fact] = []
        ena: list[Action] = []
        for kind, ent in mechanisms[j]:
            if kind == "switch":
                pre.append(("on", ent))
                ena.append(("activate", ent))
            elif kind == "tool":
                pre.append(("held", ent))
                ena.append(("take", ent))
            elif kind == "part":
                pre.append(("fitted", ent, x))
                ena.append(("combine", x, ent))
            else:
                pre.append(("unlocked", d))
                ena.append(("use", ent, d))
            stage_of[ent] = j + 1
        stage_of[x] = j + 1
        goal = ("in", x, d) if d in room_of else ("at", x, d)
        stages.append(Stage(f"sg{j + 1}", x, d, tuple(mechanisms[j]), tuple(pre), tuple(ena), goal))

    # initial placement: role items never start in a locked container; a target never
    # starts in its destination (nor, for a floor destination, in that room)
    start_loc: dict[str, Fact] = {}
    destination_of = {s.target: s.destination for s in stages}
    unlocked_boxes = [b for b in boxes if b not in locked]
    for item in items:
        d = destination_of.get(item)

        def ok(where: Fact, item: str = item, d: str | None = d) -> bool:
            if where[0] == "in" and where[2] in locked and item not in fillers:
                return False
            if d is None:
                return True
            place_room = room_of[where[2]] if where[0] == "in" else where[2]
            if d in room_of:
                return where[2] != d
            return place_room != d

        pool = list(boxes) if item in fillers else unlocked_boxes
        where = _pick_location(rng, arch, rooms, pool, ok)
        if where is None:  # pragma: no cover - a target always has a room or box to start in
            raise AssertionError(f"no start location for {item}")
        start_loc[item] = (where[0], item, where[2])

    return World(
        sc=sc,
        dd=dd,
        seed=seed,
        archetype=archetype,
        rooms=rooms,
        containers=boxes,
        items=items,
        switches=tuple(switches),
        doors=doors,
        neighbors=neighbors_t,
        room_of=room_of,
        keys=keys,
        parts=parts,
        stages=tuple(stages),
        stage_of=stage_of,
        start_room=rng.pick(rooms),
        start_loc=start_loc,
    )


def decoy_names(world: World, branching: int) -> dict[str, str]:
    """Decoy -> room: ``branching // 2`` decoys on every room's floor."""
    per_room = branching // 2
    out: dict[str, str] = {}
    for r in world.rooms:
        for _ in range(per_room):
            out[f"decoy{len(out) + 1}"] = r
    return out


# --- the solver --------------------------------------------------------------------


def _shortest_paths(world: World) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, str]]]:
    """Distances and the next room on a shortest path, from every room (BFS, neighbours
    in room order, so paths are deterministic)."""
    dist: dict[str, dict[str, int]] = {}
    step: dict[str, dict[str, str]] = {}
    for target in world.rooms:  # BFS from the target gives every room's next hop to it
        d = {target: 0}
        queue = deque([target])
        while queue:
            r = queue.popleft()
            for s in world.neighbors[r]:
                if s not in d:
                    d[s] = d[r] + 1
                    queue.append(s)
        for r in world.rooms:
            dist.setdefault(r, {})[target] = d[r]
            if r != target:
                step.setdefault(r, {})[target] = next(s for s in world.neighbors[r] if d[s] == d[r] - 1)
    return dist, step


class _StageTasks:
    """The actions of one stage, each once, with the ones that must come first."""

    def __init__(self, world: World, opened: set[str], unlocked: set[str]) -> None:
        self.world, self.opened, self.unlocked = world, opened, unlocked
        self.tasks: list[tuple[Action, str | None, list[int]]] = []
        self.index: dict[Action, int] = {}

    def add(self, action: Action, room: str | None, pre: list[int]) -> int:
        if action not in self.index:
            self.index[action] = len(self.tasks)
            self.tasks.append((action, room, pre))
        return self.index[action]

    def open_box(self, box: str) -> list[int]:
        """The ``open`` task a closed box needs (after its ``use`` if locked), if any."""
        if box in self.opened:
            return []
        pre: list[int] = []
        if box in self.world.keys.values() and box not in self.unlocked:
            key = next(k for k, b in self.world.keys.items() if b == box)
            pre = [self.index[("use", key, box)]]
        return [self.add(("open", box), self.world.room_of[box], pre)]

    def take(self, item: str) -> int:
        where = self.world.start_loc[item]
        if where[0] == "in":
            return self.add(("take", item), self.world.room_of[where[2]], self.open_box(where[2]))
        return self.add(("take", item), where[2], [])


def _stage_tasks(world: World) -> list[list[tuple[Action, str | None, int]]]:
    """Per stage, every action an optimal plan does in it: ``(action, room or None for
    anywhere, bitmask of the tasks that must come first)``. Containers opened and
    unlocked in earlier stages stay so (an optimal plan never closes one)."""
    opened: set[str] = set()
    unlocked: set[str] = set()
    out: list[list[tuple[Action, str | None, int]]] = []
    for stage in world.stages:
        st = _StageTasks(world, opened, unlocked)
        x, d = stage.target, stage.destination
        take_x = st.take(x)
        combines: list[int] = []
        for kind, ent in stage.mechanisms:
            if kind == "switch":
                st.add(("activate", ent), world.room_of[ent], [])
            elif kind == "tool":
                st.take(ent)
            elif kind == "part":
                combines.append(st.add(("combine", x, ent), None, [take_x, st.take(ent)]))
            else:
                st.add(("use", ent, d), world.room_of[d], [st.take(ent)])
        if d in world.room_of:
            st.add(("put", x, d), world.room_of[d], [take_x, *combines, *st.open_box(d)])
        else:
            st.add(("put", x, d), d, [take_x, *combines])
        st.add(("finish_subgoal", stage.name), None, list(range(len(st.tasks))))
        for action, _, _ in st.tasks:
            if action[0] == "open":
                opened.add(action[1])
            elif action[0] == "use":
                unlocked.add(action[2])
        out.append([(a, room, sum(1 << p for p in pre)) for a, room, pre in st.tasks])
    return out


@lru_cache(maxsize=512)
def solve(sc: int, dd: int, seed: int, archetype: int) -> tuple[Action, ...]:
    """An optimal plan for the world of ``build_world(sc, dd, seed, archetype)`` from
    its reset state without mutations (decoys change nothing): A* as described in the
    module docstring."""
    world = build_world(sc, dd, seed, archetype)
    dist, hop = _shortest_paths(world)
    stages = _stage_tasks(world)
    n_stages = len(stages)
    full = [(1 << len(t)) - 1 for t in stages]
    tail = [sum(len(t) for t in stages[j + 1 :]) for j in range(n_stages)] + [0]

    def closure(j: int, mask: int, room: str) -> tuple[int, int, list[Action]]:
        done: list[Action] = []
        while j < n_stages:
            tasks = stages[j]
            progress = True
            while progress:
                progress = False
                for i, (action, where, pre) in enumerate(tasks):
                    bit = 1 << i
                    if not mask & bit and pre & mask == pre and (where is None or where == room):
                        mask |= bit
                        done.append(action)
                        progress = True
            if mask != full[j]:
                break
            j, mask = j + 1, 0
        return j, mask, done

    def heuristic(j: int, mask: int, room: str) -> int:
        if j >= n_stages:
            return 0
        far = 0
        remaining = 0
        for i, (_, where, _) in enumerate(stages[j]):
            if not mask >> i & 1:
                remaining += 1
                if where is not None:
                    far = max(far, dist[room][where])
        return remaining + far + tail[j]

    def walk(a: str, b: str) -> list[Action]:
        moves = []
        while a != b:
            a = hop[a][b]
            moves.append(("go", a))
        return moves

    j0, m0, first = closure(0, 0, world.start_room)
    start = (j0, m0, world.start_room)
    best = {start: len(first)}
    Key = tuple[int, int, str]
    parent: dict[Key, tuple[Key | None, list[Action]]] = {start: (None, first)}
    heap = [(len(first) + heuristic(*start), len(first), 0, start)]
    counter = 1
    while heap:
        _, g, _, key = heapq.heappop(heap)
        if g > best[key]:
            continue
        j, mask, room = key
        if j >= n_stages:
            plan: list[Action] = []
            node: Key | None = key
            while node is not None:
                prev, segment = parent[node]
                plan[:0] = segment
                node = prev
            return tuple(plan)
        for i, (action, where, pre) in enumerate(stages[j]):
            if mask >> i & 1 or pre & mask != pre or where is None:
                continue
            nj, nmask, extra = closure(j, mask | 1 << i, where)
            cost = g + dist[room][where] + 1 + len(extra)
            nkey = (nj, nmask, where)
            if cost < best.get(nkey, 1 << 30):
                best[nkey] = cost
                parent[nkey] = (key, [*walk(room, where), action, *extra])
                heapq.heappush(heap, (cost + heuristic(*nkey), cost, counter, nkey))
                counter += 1
    raise AssertionError("the world has no solution")  # pragma: no cover - worlds are built solvable


# --- the environment ---------------------------------------------------------------


_PLURAL = {
    "room": "rooms",
    "container": "containers",
    "item": "items",
    "switch": "switches",
    "decoy": "decoys",
}


def _natural(name: str) -> tuple[str, int]:
    """``item10`` after ``item9``: the name's letters, then its number."""
    stem = name.rstrip("0123456789")
    return stem, int(name[len(stem) :] or 0)


def _loc_key(fact: Fact) -> Hashable:
    """Where an item-location fact puts the item, as a viewable place."""
    if fact[0] == "at":
        return ("floor", fact[2])
    if fact[0] == "in":
        return ("box", fact[2])
    if fact[0] == "fitted":
        return ("host", fact[2])
    return "hands"


class StatefulPuzzle(EnvironmentBase[World]):
    """The StatefulPuzzle environment (see the module docstring). One instance runs one
    episode at a time; :meth:`reset` starts a new one."""

    name: ClassVar[str] = NAME
    verbs: ClassVar[Mapping[str, int]] = VERBS
    error_labels: ClassVar[tuple[str, ...]] = ERROR_LABELS
    #: the entity kinds ``sc`` counts (switches are fixtures; decoys come from branching)
    sc_kinds: ClassVar[tuple[str, ...]] = ("room", "container", "item")

    # -- reset ---------------------------------------------------------------------

    def reset(self, seed: int, archetype: int = 0) -> tuple[Observation, Task]:
        self._check_reset(seed, archetype)
        spec = self.spec
        w = build_world(spec.sc, spec.dd, seed, archetype)
        self._world = w
        self._seed, self._archetype = seed, archetype
        self._decoys = decoy_names(w, spec.branching)
        self._kind: dict[str, str] = {"agent": "agent"}
        for names, kind in (
            (w.rooms, "room"),
            (w.containers, "container"),
            (w.items, "item"),
            (w.switches, "switch"),
            (tuple(self._decoys), "decoy"),
            (w.subgoal_names, "subgoal"),
        ):
            for n in names:
                self._kind[n] = kind
        self._room_index = {r: i for i, r in enumerate(w.rooms)}
        self._boxes_in = {r: tuple(b for b in w.containers if w.room_of[b] == r) for r in w.rooms}
        self._switches_in = {r: tuple(s for s in w.switches if w.room_of[s] == r) for r in w.rooms}
        self._doors_of = {r: tuple(self._door(r, s) for s in w.neighbors[r]) for r in w.rooms}
        self._key_of = {box: key for key, box in w.keys.items()}
        self._gate: dict[str, Fact] = {
            ent: ("done", w.stages[j - 2].name) for ent, j in w.stage_of.items() if j >= 2
        }
        self._stage_by_name = {s.name: i for i, s in enumerate(w.stages)}
        self._movable = tuple(w.items) + tuple(self._decoys)
        self._static = self._static_facts()
        self._initial = self._initial_facts()
        self._plan = solve(spec.sc, spec.dd, seed, archetype)
        self._task = self._make_task()
        self._partial = spec.observation == "partial"
        self._rate = spec.mutation_rate
        self._mut_rng = Rng(derive_seed(seed, NAME, "mutation"))
        self._obs_rng = Rng(derive_seed(seed, NAME, "observation"))
        self._status_slots = tuple((("status", s.name), s.name) for s in w.stages)
        self._phantoms = self._make_phantoms() if spec.observation == "distractor" else ()
        self._load(self._initial)
        self._t = 0
        self._known: dict[Hashable, tuple[Fact, int]] = {}
        self._viewed: dict[Hashable, int] = {}
        self._changed: list[str] = []
        self._examined: str | None = None
        return self._observe("start"), self._task

    def _door(self, a: str, b: str) -> Fact:
        if self._room_index.get(a, 0) <= self._room_index.get(b, 0):
            return ("door", a, b)
        return ("door", b, a)

    def _static_facts(self) -> tuple[Fact, ...]:
        w = self._w
        out: list[Fact] = [("door", a, b) for a, b in w.doors]
        out += [("at", e, w.room_of[e]) for e in (*w.containers, *w.switches)]
        out += [("key_of", k, b) for k, b in w.keys.items()]
        out += [("part_of", p, h) for p, h in w.parts.items()]
        return tuple(out)

    def _initial_facts(self) -> list[Fact]:
        w = self._w
        facts = list(self._static)
        facts.append(("at", "agent", w.start_room))
        facts += list(w.start_loc.values())
        facts += [("at", d, r) for d, r in self._decoys.items()]
        facts += [("closed", b) for b in w.containers]
        facts += [("locked", b) for b in w.keys.values()]
        facts += [("off", s) for s in w.switches]
        facts += [("pending", s.name) for s in w.stages]
        return facts

    def _load(self, facts: Iterable[Fact]) -> None:
        """(Re)build every index from a whole state."""
        w = self._w
        self._store = FactStore(facts)
        self._floor: dict[str, set[str]] = {r: set() for r in w.rooms}
        self._contents: dict[str, set[str]] = {b: set() for b in w.containers}
        self._parts: dict[str, set[str]] = {}
        self._held: set[str] = set()
        self._loc: dict[str, Fact] = {}
        self._open: dict[str, bool] = {}
        self._locked: dict[str, bool] = {}
        self._on: dict[str, bool] = {}
        self._ndone = 0
        for f in self._store.canonical():
            p = f[0]
            if p == "at" and f[1] == "agent":
                self._agent = f[2]
            elif p in ("at", "in", "held", "fitted") and self._kind.get(f[1]) in _MOVABLE:
                self._loc[f[1]] = f
                self._place(f[1], f)
            elif p in ("open", "closed"):
                self._open[f[1]] = p == "open"
            elif p in ("locked", "unlocked"):
                self._locked[f[1]] = p == "locked"
            elif p in ("on", "off"):
                self._on[f[1]] = p == "on"
            elif p == "done":
                self._ndone += 1
        self._won = self._ndone == len(w.stages)
        self._over = self._won

    def _place(self, x: str, f: Fact) -> None:
        p = f[0]
        if p == "at":
            self._floor[f[2]].add(x)
        elif p == "in":
            self._contents[f[2]].add(x)
        elif p == "held":
            self._held.add(x)
        else:
            self._parts.setdefault(f[2], set()).add(x)

    def _unplace(self, x: str, f: Fact) -> None:
        p = f[0]
        if p == "at":
            self._floor[f[2]].discard(x)
        elif p == "in":
            self._contents[f[2]].discard(x)
        elif p == "held":
            self._held.discard(x)
        else:
            self._parts[f[2]].discard(x)

    # -- the task ------------------------------------------------------------------

    def _make_task(self) -> Task:
        w, spec = self._w, self.spec
        facts: list[Fact] = []
        subgoals: list[Subgoal] = []
        sealed_by: dict[int, list[str]] = {}
        for ent, j in w.stage_of.items():
            sealed_by.setdefault(j, []).append(ent)
        for j, st in enumerate(w.stages):
            after = w.stages[j - 1].name if j else None
            sealed = tuple(sorted(sealed_by.get(j + 1, []), key=_natural)) if after else ()
            facts.append(("goal", st.name, *st.goal))
            facts += [("requires", st.name, *p) for p in st.preconditions]
            if after:
                facts.append(("after", st.name, after))
                facts += [("sealed_until", e, after) for e in sealed]
            subgoals.append(Subgoal(st.name, st.goal, st.preconditions, st.enablers, after, sealed))
        facts += [f for f in self._static if f[0] in ("key_of", "part_of")]
        entities = {
            "room": w.rooms,
            "container": w.containers,
            "item": w.items,
            "switch": w.switches,
            "decoy": tuple(self._decoys),
            "subgoal": w.subgoal_names,
        }
        comp = SC_TABLE[w.sc]
        return Task(
            env=NAME,
            spec=spec,
            seed=self._seed,
            archetype=self._archetype,
            text=self._task_text(subgoals, entities),
            facts=tuple(sorted(facts)),
            goal=tuple(sorted(("done", s.name) for s in w.stages)),
            subgoals=tuple(subgoals),
            entities=entities,
            optimal_length=len(self._plan),
            horizon=spec.horizon,
            extra={
                "rooms": comp.rooms,
                "containers": comp.containers,
                "items": comp.items,
                "subgoals": comp.subgoals,
                "switches": len(w.switches),
                "decoys": len(self._decoys),
                "mechanisms": tuple(tuple(kind for kind, _ in st.mechanisms) for st in w.stages),
            },
        )

    def _task_text(self, subgoals: Sequence[Subgoal], entities: Mapping[str, tuple[str, ...]]) -> str:
        lines = ["You act in a world of rooms joined by doors, containers (open or closed, some locked),"]
        lines.append("items, switches and decoys. Entities:")
        for kind, names in entities.items():
            if names and kind != "subgoal":
                lines.append(f"  {_PLURAL[kind]}: {', '.join(names)}")
        lines.append("Finish the subgoals in order, each with finish_subgoal(<name>) once, at that moment,")
        lines.append("its placement and all its requirements hold and the previous subgoal is done:")
        for sg in subgoals:
            pred, item, where = sg.target
            place = f"{item} in {where}" if pred == "in" else f"{item} on the floor of {where}"
            needs = "; ".join(format_fact(p) for p in sg.preconditions)
            lines.append(f"  {sg.name}: {place}. Requires: {needs}.")
            if sg.after:
                sealed = ", ".join(sg.sealed)
                lines.append(f"    Sealed until {sg.after} is done (cannot be taken or activated): {sealed}.")
        rules = [f for f in self._static if f[0] in ("key_of", "part_of")]
        if rules:
            lines.append("Keys and parts: " + "; ".join(format_fact(f) for f in rules) + ".")
        lines += [
            "Actions (here = in the agent's room):",
            "  go(room) through a door; take(item) from the floor or an open container here;",
            "  put(item, container) into an open container here; put(item, room) on this room's floor;",
            "  open(container), close(container) here; use(key, container) unlocks a locked one here;",
            "  combine(item, part) fits a held part onto a held item; activate(switch) here turns it on;",
            "  examine(object) looks at a container (inside too, even closed), switch or item here;",
            "  finish_subgoal(subgoal); noop.",
        ]
        lines.append(f"You have {self.spec.horizon} steps.")
        return "\n".join(lines)

    # -- preconditions -------------------------------------------------------------

    def _well_formed(self, action: object) -> bool:
        if not isinstance(action, tuple) or not action:
            return False
        sig = _SIGNATURES.get(action[0]) if isinstance(action[0], str) else None
        if sig is None or len(action) != len(sig) + 1:
            return False
        kind = self._kind
        args = zip(action[1:], sig, strict=True)
        return all(isinstance(a, str) and kind.get(a) in allowed for a, allowed in args)

    def _visible(self, x: str) -> tuple[Fact, ...]:
        loc = self._loc[x]
        p = loc[0]
        if p == "at":
            return (("at", "agent", loc[2]), loc)
        if p == "in":
            box = loc[2]
            return (("at", "agent", self._w.room_of[box]), loc, ("open", box))
        if p == "held":
            return (loc,)
        return (loc, *self._visible(loc[2]))

    def _pre(self, action: Action) -> tuple[Fact, ...] | None:
        """The gold preconditions of ``action`` now, or None if it is no action here."""
        if not self._well_formed(action):
            return None
        verb = action[0]
        here = ("at", "agent", self._agent)
        room_of = self._w.room_of
        if verb == "go":
            return (here, self._door(self._agent, action[1]))
        if verb == "take":
            x = action[1]
            loc = self._loc[x]
            if loc[0] == "at":
                pre: tuple[Fact, ...] = (("at", "agent", loc[2]), loc)
            elif loc[0] == "in":
                pre = (("at", "agent", room_of[loc[2]]), loc, ("open", loc[2]))
            else:
                pre = (here, ("at", x, self._agent))
            gate = self._gate.get(x)
            return (*pre, gate) if gate else pre
        if verb == "put":
            x, d = action[1], action[2]
            if d in room_of:
                return (("held", x), ("at", "agent", room_of[d]), ("open", d))
            return (("held", x), ("at", "agent", d))
        if verb == "open":
            box = action[1]
            pre = (("at", "agent", room_of[box]), ("closed", box))
            return (*pre, ("unlocked", box)) if box in self._locked else pre
        if verb == "close":
            return (("at", "agent", room_of[action[1]]), ("open", action[1]))
        if verb == "use":
            key, box = action[1], action[2]
            return (("held", key), ("at", "agent", room_of[box]), ("locked", box), ("key_of", key, box))
        if verb == "combine":
            x, part = action[1], action[2]
            return (("held", x), ("held", part), ("part_of", part, x))
        if verb == "activate":
            s = action[1]
            pre = (("at", "agent", room_of[s]), ("off", s))
            gate = self._gate.get(s)
            return (*pre, gate) if gate else pre
        if verb == "examine":
            o = action[1]
            if o in room_of:
                return (("at", "agent", room_of[o]),)
            return self._visible(o)
        if verb == "finish_subgoal":
            j = self._stage_by_name[action[1]]
            st = self._w.stages[j]
            pre = (("pending", st.name), st.goal, *st.preconditions)
            return (*pre, ("done", self._w.stages[j - 1].name)) if j else pre
        return ()  # noop

    def preconditions(self, action: Action) -> frozenset[Fact] | None:
        pre = self._pre(action)
        return None if pre is None else frozenset(pre)

    # -- step ----------------------------------------------------------------------

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
                valid, error = False, self._label(unmet)
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
        if valid:
            message = f"{text}: ok"
        else:
            message = f"{text}: failed ({error})"
        if self._won:
            message += "; all subgoals done"
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

    def _label(self, unmet: tuple[Fact, ...]) -> str:
        if self._partial and all(self._knows(f) for f in unmet):
            return "stale_room_state"
        if any(f[0] in LOCATION_PREDICATES for f in unmet):
            return "object_location_error"
        return "precondition_violation"

    def _move(self, x: str, new: Fact) -> None:
        old = self._loc[x]
        self._unplace(x, old)
        self._place(x, new)
        self._loc[x] = new
        self._store.replace(old, new)
        self._changed.append(x)

    def _flip(self, old: Fact, new: Fact) -> None:
        self._store.replace(old, new)
        self._changed.append(old[1])

    def _apply(self, action: Action) -> None:
        verb = action[0]
        if verb == "go":
            self._store.replace(("at", "agent", self._agent), ("at", "agent", action[1]))
            self._agent = action[1]
        elif verb == "take":
            self._move(action[1], ("held", action[1]))
        elif verb == "put":
            x, d = action[1], action[2]
            self._move(x, ("in", x, d) if d in self._w.room_of else ("at", x, d))
        elif verb == "open":
            self._flip(("closed", action[1]), ("open", action[1]))
            self._open[action[1]] = True
        elif verb == "close":
            self._flip(("open", action[1]), ("closed", action[1]))
            self._open[action[1]] = False
        elif verb == "use":
            self._flip(("locked", action[2]), ("unlocked", action[2]))
            self._locked[action[2]] = False
        elif verb == "combine":
            self._move(action[2], ("fitted", action[2], action[1]))
        elif verb == "activate":
            self._flip(("off", action[1]), ("on", action[1]))
            self._on[action[1]] = True
        elif verb == "examine":
            self._examined = action[1]
        elif verb == "finish_subgoal":
            self._flip(("pending", action[1]), ("done", action[1]))
            self._ndone += 1
            self._won = self._ndone == len(self._w.stages)

    # -- mutation ------------------------------------------------------------------

    def _mutate(self) -> tuple[str, ...]:
        """One exogenous change, uniform over the possible ones (world order, so the
        choice never depends on hash order)."""
        w = self._w
        options: list[tuple[str, str]] = []
        options += [("close", b) for b in w.containers if self._open[b]]
        options += [("off", s) for s in w.switches if self._on[s]]
        for x in w.items:
            loc = self._loc[x]
            if loc[0] == "at" or (loc[0] == "in" and self._open[loc[2]]):
                options.append(("move", x))
        if not options:
            return ()
        kind, ent = self._mut_rng.pick(options)
        if kind == "close":
            self._flip(("open", ent), ("closed", ent))
            self._open[ent] = False
            return (f"{ent} was closed",)
        if kind == "off":
            self._flip(("on", ent), ("off", ent))
            self._on[ent] = False
            return (f"{ent} was switched off",)
        old = self._loc[ent]
        j = w.stage_of.get(ent)
        forbidden = None
        if j is not None and w.stages[j - 1].target == ent:
            stage = w.stages[j - 1]
            if ("pending", stage.name) in self._store:
                forbidden = stage.goal
        places = [("at", ent, r) for r in w.rooms] + [("in", ent, b) for b in w.containers if self._open[b]]
        places = [p for p in places if p != old and p != forbidden]
        if not places:
            return ()
        new = self._mut_rng.pick(places)
        self._move(ent, new)
        return (f"{ent} was moved: {format_fact(old)} -> {format_fact(new)}",)

    # -- observation ---------------------------------------------------------------

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
        """Partial mode: what the agent sees (its room, its hands, the subgoal statuses),
        recorded as its latest view of each slot shown and of each place looked into."""
        t = self._t
        known, viewed, loc = self._known, self._viewed, self._loc
        r = self._agent
        out: list[Fact] = list(self._doors_of[r])
        shown: list[tuple[Hashable, Fact]] = [(("loc", "agent"), ("at", "agent", r))]
        viewed[("floor", r)] = viewed["hands"] = t
        hosts: list[str] = []
        for b in self._boxes_in[r]:
            out.append(("at", b, r))
            is_open = self._open[b]
            shown.append((("state", b), ("open", b) if is_open else ("closed", b)))
            if b in self._locked:
                shown.append((("lock", b), ("locked", b) if self._locked[b] else ("unlocked", b)))
            if is_open or b == self._examined:
                viewed[("box", b)] = t
                hosts += self._contents[b]
        for sw in self._switches_in[r]:
            out.append(("at", sw, r))
            shown.append((("switch", sw), ("on", sw) if self._on[sw] else ("off", sw)))
        hosts += self._floor[r]
        hosts += self._held
        for h in hosts:
            shown.append((("loc", h), loc[h]))
            viewed[("host", h)] = t
            parts = self._parts.get(h)
            if parts:
                shown += [(("loc", p), loc[p]) for p in parts]
        done = self._ndone
        for i, (slot, name) in enumerate(self._status_slots):
            shown.append((slot, ("done" if i < done else "pending", name)))
        for slot, f in shown:
            known[slot] = (f, t)
            out.append(f)
        out.sort()
        return tuple(out)

    def _learn_all(self, facts: Iterable[Fact]) -> None:
        """Partial mode's briefing: every slot seen now."""
        for f in facts:
            slot = self.slot(f)
            if slot is not None:
                self._known[slot] = (f, self._t)

    def _knows(self, fact: Fact) -> bool:
        """Partial mode: the agent's latest view of ``fact``'s slot showed ``fact``
        (and no later view of the place contradicted it)."""
        slot = self.slot(fact)
        entry = self._known.get(slot) if slot is not None else None
        if entry is None or entry[0] != fact:
            return False
        if slot[0] == "loc" and self._kind.get(fact[1]) in _MOVABLE:
            return self._viewed.get(_loc_key(fact), -1) <= entry[1]
        return True

    def _conflict_fact(self) -> Fact | None:
        """A false fact for a slot that did not change this step (so the previous
        observation showed its true value), or None if there is none."""
        w = self._w
        candidates = [e for e in (*w.items, *w.containers, *w.switches) if e not in self._changed]
        if not candidates:
            return None
        ent = self._obs_rng.pick(candidates)
        kind = self._kind[ent]
        if kind == "container":
            return ("closed", ent) if self._open[ent] else ("open", ent)
        if kind == "switch":
            return ("off", ent) if self._on[ent] else ("on", ent)
        old = self._loc[ent]
        places = [("at", ent, r) for r in w.rooms] + [("in", ent, b) for b in w.containers]
        return self._obs_rng.pick([p for p in places if p != old])

    def _make_phantoms(self) -> tuple[Canonical, ...]:
        """A persistent world of entities that do not exist (numbered past the real
        ones), and :data:`PHANTOM_VIEWS` subsets of it of ``max(1, len(gold) // 10)``
        facts (the gold state's size never changes): a distractor observation shows one
        of them."""
        w = self._w
        rng = Rng(derive_seed(self._seed, NAME, "phantoms"))
        rooms = [f"room{len(w.rooms) + i}" for i in range(1, max(2, len(w.rooms) // 2 + 1) + 1)]
        boxes = [f"box{len(w.containers) + i}" for i in range(1, max(1, len(w.containers) // 2) + 1)]
        items = [f"item{len(w.items) + i}" for i in range(1, max(2, len(w.items) // 2) + 1)]
        switches = [f"switch{len(w.switches) + i}" for i in range(1, max(1, len(w.switches) // 2) + 1)]
        facts: list[Fact] = [("door", a, b) for a, b in zip(rooms, rooms[1:], strict=False)]
        for b in boxes:
            facts.append(("at", b, rng.pick(rooms)))
            facts.append(("open", b) if rng.chance(0.5) else ("closed", b))
        for x in items:
            facts.append(("in", x, rng.pick(boxes)) if rng.chance(0.4) else ("at", x, rng.pick(rooms)))
        for s in switches:
            facts.append(("at", s, rng.pick(rooms)))
            facts.append(("on", s) if rng.chance(0.5) else ("off", s))
        k = min(len(facts), max(1, len(self._initial) // 10))
        return tuple(tuple(sorted(rng.sample(facts, k))) for _ in range(PHANTOM_VIEWS))

    # -- queries -------------------------------------------------------------------

    def gold_state(self) -> Canonical:
        return self._store.canonical()

    def observable_gold(self) -> frozenset[Fact]:
        if not self._partial:
            return self._store.frozen()
        out = set()
        for f in self._store.canonical():
            slot = self.slot(f)
            if slot is None or (f[0] == "at" and self._kind.get(f[1]) in ("container", "switch")):
                out.add(f)  # static facts: the briefing showed them
            elif self._knows(f):
                out.add(f)
        return frozenset(out)

    def slot(self, fact: Fact) -> Hashable | None:
        kind = _SLOT_OF_PREDICATE.get(fact[0]) if fact else None
        if kind is None or len(fact) < 2:
            return None
        return (kind, fact[1])

    def valid_actions(self) -> tuple[Action, ...]:
        w = self._w
        store = self._store
        r = self._agent
        acts: list[Action] = [("noop",)]
        acts += [("go", s) for s in w.neighbors[r]]
        held = sorted(self._held)
        visible: list[str] = list(self._floor[r])
        for x in held:
            acts.append(("put", x, r))
            acts.append(("examine", x))
        for b in self._boxes_in[r]:
            acts.append(("examine", b))
            if self._open[b]:
                acts.append(("close", b))
                visible += self._contents[b]
                acts += [("put", x, b) for x in held]
            elif self._locked.get(b):
                key = self._key_of[b]
                if key in self._held:
                    acts.append(("use", key, b))
            else:
                acts.append(("open", b))
        for x in visible:
            acts.append(("examine", x))
            gate = self._gate.get(x)
            if gate is None or gate in store:
                acts.append(("take", x))
        for h in visible + held:
            acts += [("examine", p) for p in self._parts.get(h, ())]
        for x in held:
            part_host = w.parts.get(x)
            if part_host is not None and part_host in self._held:
                acts.append(("combine", part_host, x))
        for s in self._switches_in[r]:
            acts.append(("examine", s))
            gate = self._gate.get(s)
            if not self._on[s] and (gate is None or gate in store):
                acts.append(("activate", s))
        if not self._won:
            nxt = ("finish_subgoal", w.stages[self._ndone].name)
            if all(f in store for f in self._pre(nxt) or ()):
                acts.append(nxt)
        return tuple(sorted(set(acts)))

    # -- agent-written states ------------------------------------------------------

    def normalize(self, facts: Iterable[Fact]) -> State:
        out = set()
        for f in facts:
            f = tuple(f) if isinstance(f, list | tuple) else f
            rooms = self._room_index
            if isinstance(f, tuple) and len(f) == 3 and f[0] == "door" and f[1] in rooms and f[2] in rooms:
                f = self._door(f[1], f[2])
            out.add(f)
        return frozenset(out)

    def invariant_violations(self, facts: Iterable[Fact]) -> list[str]:
        """Malformed facts (unknown predicate, wrong arity, a name that is no entity or
        of the wrong kind, a relation of a thing to itself) and clashes (two facts of one
        slot: an item in two places, a container open and closed...). Copies of the
        task specification's facts are not world state and are ignored."""
        problems: list[str] = []
        by_slot: dict[Hashable, list[Fact]] = {}
        for f in sorted(self.normalize(facts), key=repr):
            if not isinstance(f, tuple) or not f or not all(isinstance(a, str) for a in f):
                problems.append(f"{f!r} is not a tuple of strings")
                continue
            sig = PREDICATES.get(f[0])
            if f[0] in TASK_PREDICATES:
                continue
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
            if f[0] in ("door", "fitted", "part_of") and f[1] == f[2]:
                problems.append(f"{format_fact(f)}: relates {f[1]} to itself")
            slot = self.slot(f)
            if slot is not None:
                by_slot.setdefault(slot, []).append(f)
        for slot, fs in by_slot.items():
            if len(fs) > 1:
                listed = " and ".join(format_fact(f) for f in sorted(fs))
                what = _CLASH.get(slot[0], "has two values")
                problems.append(f"{slot[1]} {what}: {listed}")
        return sorted(problems)

    # -- snapshots -----------------------------------------------------------------

    def snapshot(self) -> Any:
        return (
            self._store.frozen(),
            self._t,
            self._mut_rng.getstate(),
            self._obs_rng.getstate(),
            dict(self._known),
            dict(self._viewed),
            (self._world, self._seed, self._archetype),
        )

    def restore(self, snapshot: Any) -> None:
        facts, t, mut, obs, known, viewed, episode = snapshot
        same = self._world is not None and episode[0] is self._world
        if not same or episode[1:] != (self._seed, self._archetype):
            raise ValueError("snapshot: taken in another episode")
        self._load(facts)
        self._t = t
        self._over = self._won or t >= self.spec.horizon
        self._mut_rng.setstate(mut)
        self._obs_rng.setstate(obs)
        self._known = dict(known)
        self._viewed = dict(viewed)
        self._changed = []
        self._examined = None


__all__: Sequence[str] = [
    "ARCHETYPES",
    "Archetype",
    "CONFLICT_RATE",
    "Components",
    "ERROR_LABELS",
    "LOCATION_PREDICATES",
    "PHANTOM_VIEWS",
    "PREDICATES",
    "SC_TABLE",
    "Stage",
    "TASK_PREDICATES",
    "StatefulPuzzle",
    "VERBS",
    "World",
    "build_world",
    "components",
    "decoy_names",
    "solve",
]
