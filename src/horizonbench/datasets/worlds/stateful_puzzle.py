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

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

from horizonbench.datasets.worlds.base import Action, Canonical, Fact, Rng, State, Subgoal, Task, format_fact
from horizonbench.datasets.worlds.environment import EnvironmentBase, entity_kinds
from horizonbench.datasets.worlds.observation import CONFLICT_RATE, PHANTOM_VIEWS, phantom_names
from horizonbench.datasets.worlds.stateful_puzzle_world import ARCHETYPES as ARCHETYPES
from horizonbench.datasets.worlds.stateful_puzzle_world import (
    NAME,
    SC_TABLE,
    World,
    build_world,
    decoy_names,
    solve,
)
from horizonbench.datasets.worlds.stateful_puzzle_world import Archetype as Archetype
from horizonbench.datasets.worlds.stateful_puzzle_world import Components as Components
from horizonbench.datasets.worlds.stateful_puzzle_world import Stage as Stage
from horizonbench.datasets.worlds.stateful_puzzle_world import components as components

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

# --- the environment ---------------------------------------------------------------


#: the entity kinds, in the order the task lists them
_KINDS = ("room", "container", "item", "switch", "decoy", "subgoal")
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


class StatefulPuzzle(EnvironmentBase[World]):
    """StatefulPuzzle: the rules of the module docstring on the shared episode machinery."""

    generate, solver = staticmethod(build_world), staticmethod(solve)
    name, verbs, error_labels, win_message = NAME, VERBS, ERROR_LABELS, "all subgoals done"
    #: the entity kinds ``sc`` counts (switches are fixtures; decoys come from branching)
    sc_kinds = ("room", "container", "item")
    predicates, task_predicates, clashes = PREDICATES, TASK_PREDICATES, _CLASH
    signatures, slot_of_predicate = _SIGNATURES, _SLOT_OF_PREDICATE
    #: where a movable can be: on a floor, in a container, fitted on a host, in the hands
    item_kinds, item_places = _MOVABLE, {"at": "floor", "in": "box", "fitted": "host"}
    conflict_states = {"container": ("open", "closed"), "switch": ("on", "off")}

    # -- reset ---------------------------------------------------------------------

    def _build(self, seed: int, archetype: int) -> int:
        w = self._w
        self._decoys = decoy_names(w, self.spec.branching)
        names = (w.rooms, w.containers, w.items, w.switches, tuple(self._decoys), w.subgoal_names)
        self._entities = dict(zip(_KINDS, names, strict=True))
        self._kind = entity_kinds(self._entities)
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
        self._task = self._make_task()
        self._status_slots = tuple((("status", s.name), s.name) for s in w.stages)
        self._load(self._initial)
        return len(self._initial)

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
        store = self._new_store(facts)
        self._floor: dict[str, set[str]] = {r: set() for r in w.rooms}
        self._contents: dict[str, set[str]] = {b: set() for b in w.containers}
        self._parts: dict[str, set[str]] = {}
        self._held: set[str] = set()
        self._loc: dict[str, Fact] = {}
        self._open: dict[str, bool] = {}
        self._locked: dict[str, bool] = {}
        self._on: dict[str, bool] = {}
        self._ndone = 0
        for f in store.canonical():
            if self._locate(f):
                continue
            p = f[0]
            if p == "done":
                self._ndone += 1
            elif p in ("open", "closed"):
                self._open[f[1]] = p == "open"
            elif p in ("locked", "unlocked"):
                self._locked[f[1]] = p == "locked"
            elif p in ("on", "off"):
                self._on[f[1]] = p == "on"
        self._won = self._ndone == len(w.stages)

    def _holder(self, f: Fact) -> set[str]:
        """The index of the place an item-location fact names: a floor, a container's
        contents, the hands, or the parts fitted onto a host."""
        p = f[0]
        if p == "at":
            return self._floor[f[2]]
        if p == "in":
            return self._contents[f[2]]
        if p == "held":
            return self._held
        return self._parts.setdefault(f[2], set())

    def _place(self, x: str, f: Fact) -> None:
        self._holder(f).add(x)

    def _unplace(self, x: str, f: Fact) -> None:
        self._holder(f).discard(x)

    # -- the task ------------------------------------------------------------------

    def _make_task(self) -> Task:
        w = self._w
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
        comp = SC_TABLE[w.sc]
        goal = tuple(sorted(("done", s.name) for s in w.stages))
        extra = {
            "rooms": comp.rooms,
            "containers": comp.containers,
            "items": comp.items,
            "subgoals": comp.subgoals,
            "switches": len(w.switches),
            "decoys": len(self._decoys),
            "mechanisms": tuple(tuple(kind for kind, _ in st.mechanisms) for st in w.stages),
        }
        text = self._task_text(subgoals, self._entities)
        return self._task_of(text, facts, goal, subgoals, self._entities, extra)

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

    def _label(self, action: Action, unmet: tuple[Fact, ...]) -> str:
        if self._partial and all(self._knows(f) for f in unmet):
            return "stale_room_state"
        if any(f[0] in LOCATION_PREDICATES for f in unmet):
            return "object_location_error"
        return "precondition_violation"

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

    def _mutations(self) -> list[tuple[str, str]]:
        """Close an open container, turn a switch off, move a loose item."""
        w = self._w
        options: list[tuple[str, str]] = []
        options += [("close", b) for b in w.containers if self._open[b]]
        options += [("off", s) for s in w.switches if self._on[s]]
        for x in w.items:
            loc = self._loc[x]
            if loc[0] == "at" or (loc[0] == "in" and self._open[loc[2]]):
                options.append(("move", x))
        return options

    def _mutation(self, kind: str, ent: str) -> tuple[str, ...]:
        if kind == "close":
            self._flip(("open", ent), ("closed", ent))
            self._open[ent] = False
            return (f"{ent} was closed",)
        w = self._w
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
        return self._moved(ent, self._mut_rng.pick(places))

    # -- observation ---------------------------------------------------------------

    def _look(self, action: Action | None) -> Canonical:
        """Partial mode: what the agent sees (its room, its hands, the subgoal statuses),
        recorded as its latest view of each slot shown and of each place looked into."""
        t = self._t
        look_at, loc = self._seen.look_at, self._loc
        r = self._agent
        out: list[Fact] = list(self._doors_of[r])
        shown: list[tuple[Hashable, Fact]] = [(("loc", "agent"), ("at", "agent", r))]
        look_at(("floor", r), t)
        look_at("hands", t)
        hosts: list[str] = []
        for b in self._boxes_in[r]:
            out.append(("at", b, r))
            is_open = self._open[b]
            shown.append((("state", b), ("open", b) if is_open else ("closed", b)))
            if b in self._locked:
                shown.append((("lock", b), ("locked", b) if self._locked[b] else ("unlocked", b)))
            if is_open or b == self._examined:
                look_at(("box", b), t)
                hosts += self._contents[b]
        for sw in self._switches_in[r]:
            out.append(("at", sw, r))
            shown.append((("switch", sw), ("on", sw) if self._on[sw] else ("off", sw)))
        hosts += self._floor[r]
        hosts += self._held
        for h in hosts:
            shown.append((("loc", h), loc[h]))
            look_at(("host", h), t)
            parts = self._parts.get(h)
            if parts:
                shown += [(("loc", p), loc[p]) for p in parts]
        done = self._ndone
        for i, (slot, name) in enumerate(self._status_slots):
            shown.append((slot, ("done" if i < done else "pending", name)))
        self._see(shown, out)
        out.sort()
        return tuple(out)

    def _lie_entities(self) -> tuple[str, ...]:
        w = self._w
        return (*w.items, *w.containers, *w.switches)

    def _lie_places(self, item: str) -> list[Fact]:
        w = self._w
        return [("at", item, r) for r in w.rooms] + [("in", item, b) for b in w.containers]

    def _phantom_facts(self, rng: Rng) -> list[Fact]:
        """A persistent world of rooms, containers, items and switches that do not exist."""
        w = self._w
        rooms = phantom_names("room", len(w.rooms), max(2, len(w.rooms) // 2 + 1))
        boxes = phantom_names("box", len(w.containers), max(1, len(w.containers) // 2))
        items = phantom_names("item", len(w.items), max(2, len(w.items) // 2))
        switches = phantom_names("switch", len(w.switches), max(1, len(w.switches) // 2))
        facts: list[Fact] = [("door", a, b) for a, b in zip(rooms, rooms[1:], strict=False)]
        for b in boxes:
            facts.append(("at", b, rng.pick(rooms)))
            facts.append(("open", b) if rng.chance(0.5) else ("closed", b))
        for x in items:
            facts.append(("in", x, rng.pick(boxes)) if rng.chance(0.4) else ("at", x, rng.pick(rooms)))
        for s in switches:
            facts.append(("at", s, rng.pick(rooms)))
            facts.append(("on", s) if rng.chance(0.5) else ("off", s))
        return facts

    # -- queries -------------------------------------------------------------------

    def _always_observable(self, fact: Fact) -> bool:
        """Static facts (doors, where containers and switches stand, keys and parts):
        the briefing showed them."""
        return self.slot(fact) is None or (
            fact[0] == "at" and self._kind.get(fact[1]) in ("container", "switch")
        )

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

    def _relation_problems(self, fact: Fact) -> list[str]:
        if fact[0] in ("door", "fitted", "part_of") and fact[1] == fact[2]:
            return [f"{format_fact(fact)}: relates {fact[1]} to itself"]
        return []

    # -- snapshots -----------------------------------------------------------------

    def _restore_state(self, state: Any) -> None:
        self._load(state)


#: this module's names (its world's, from stateful_puzzle_world.py, are importable here too)
__all__: Sequence[str] = [
    "CONFLICT_RATE",
    "ERROR_LABELS",
    "LOCATION_PREDICATES",
    "PHANTOM_VIEWS",
    "PREDICATES",
    "StatefulPuzzle",
    "TASK_PREDICATES",
    "VERBS",
]
