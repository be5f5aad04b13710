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

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

from horizonbench.datasets.worlds.base import Action, Canonical, Fact, Rng, State, Subgoal, Task, format_fact
from horizonbench.datasets.worlds.environment import EnvironmentBase, entity_kinds
from horizonbench.datasets.worlds.graph_nav_world import ARCHETYPES as ARCHETYPES
from horizonbench.datasets.worlds.graph_nav_world import DOORS_TABLE as DOORS_TABLE
from horizonbench.datasets.worlds.graph_nav_world import MAX_OBJECT_ROOMS as MAX_OBJECT_ROOMS
from horizonbench.datasets.worlds.graph_nav_world import NAME, World, build_world, decoy_names, solve
from horizonbench.datasets.worlds.graph_nav_world import Archetype as Archetype
from horizonbench.datasets.worlds.graph_nav_world import door_count as door_count
from horizonbench.datasets.worlds.observation import CONFLICT_RATE, PHANTOM_VIEWS, phantom_names

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


# --- the environment ------------------------------------------------------------------

#: the entity kinds, in the order the task lists them
_KINDS = ("room", "door", "key", "switch", "decoy")
_PLURAL = {"room": "rooms", "door": "doors", "key": "keys", "switch": "switches", "decoy": "decoys"}


class GraphNav(EnvironmentBase[World]):
    """GraphNav: the rules of the module docstring, on the shared episode machinery."""

    #: the entity kinds ``sc`` counts: the nodes (keys, switches and decoys are objects)
    name, verbs, error_labels, sc_kinds = NAME, VERBS, ERROR_LABELS, ("room",)
    generate, solver = staticmethod(build_world), staticmethod(solve)
    predicates, task_predicates, signatures = PREDICATES, TASK_PREDICATES, _SIGNATURES
    slot_of_predicate, clashes = _SLOT_OF_PREDICATE, _CLASH
    #: where an item can be: on a floor, in a door's lock, in the hands (any other fact)
    item_kinds, item_places = _ITEMS, {"at": "floor", "in_lock": "lock"}
    conflict_states = {"door": ("locked", "unlocked"), "switch": ("on", "off")}

    # -- reset -------------------------------------------------------------------------

    def _build(self, seed: int, archetype: int) -> int:
        w = self._w
        self._decoys = decoy_names(w, self.spec.branching)
        self._items = (*w.keys, *self._decoys)
        names = (w.rooms, w.doors, w.keys, w.switches, tuple(self._decoys))
        self._entities = dict(zip(_KINDS, names, strict=True))
        self._kind = entity_kinds(self._entities)
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
        self._task = self._make_task()
        self._ever_held: set[str] = set()
        self._ever_at: set[tuple[str, str]] = set()
        self._load(self._initial)  # every item starts on a floor: _ever_at holds its start
        return len(self._initial)

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
        store = self._new_store(facts)
        self._floor: dict[str, set[str]] = {r: set() for r in w.rooms}
        self._held: set[str] = set()
        self._loc: dict[str, Fact] = {}
        self._locked: dict[str, bool] = {}
        self._on: dict[str, bool] = {}
        for f in store.canonical():
            if self._locate(f):
                continue
            p = f[0]
            if p in ("locked", "unlocked"):
                self._locked[f[1]] = p == "locked"
            elif p in ("on", "off"):
                self._on[f[1]] = p == "on"
        self._won = self._agent == w.goal_room

    # -- the task ----------------------------------------------------------------------

    def _make_task(self) -> Task:
        w = self._w
        facts: list[Fact] = [("goal", "at", "agent", w.goal_room)]
        subgoals: list[Subgoal] = []
        for j, d in enumerate(w.doors):
            after = w.doors[j - 1] if j else None
            facts += [("requires", d, *p) for p in w.requires[d]]
            if after:
                facts.append(("after", d, after))
            sealed = w.objects[d] if after else ()
            subgoals.append(Subgoal(d, ("unlocked", d), w.requires[d], w.enablers(d), after, sealed))
        goal = (("at", "agent", w.goal_room),)
        extra = {
            "rooms": len(w.rooms),
            "doors": len(w.doors),
            "regions": tuple(len(members) for members in w.regions),
            "region_parents": w.parents,
            "keys": len(w.keys),
            "switches": len(w.switches),
            "decoys": len(self._decoys),
            "requirement_kinds": tuple(tuple(p[0] for p in w.requires[d]) for d in w.doors),
        }
        return self._task_of(self._task_text(self._entities), facts, goal, subgoals, self._entities, extra)

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

    def _unplace(self, x: str, f: Fact) -> None:
        if f[0] == "at":
            self._floor[f[2]].discard(x)
        elif f[0] == "held":
            self._held.discard(x)

    def _place(self, x: str, f: Fact) -> None:
        """Index item ``x`` at ``f``, remembering every place the agent may picture it."""
        if f[0] == "at":
            self._floor[f[2]].add(x)
            self._ever_at.add((x, f[2]))
        elif f[0] == "held":
            self._held.add(x)
            self._ever_held.add(x)

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

    def _mutations(self) -> list[tuple[str, str]]:
        """Turn a switch off, let a held key slip, move a key lying on a floor."""
        w = self._w
        options: list[tuple[str, str]] = [("off", s) for s in w.switches if self._on[s]]
        for key in w.keys:
            p = self._loc[key]
            if p[0] == "held":
                options.append(("slip", key))
            elif p[0] == "at" and len(w.regions[w.region_of[p[2]]]) > 1:
                options.append(("move", key))
        return options

    def _mutation(self, kind: str, ent: str) -> tuple[str, ...]:
        if kind == "slip":
            self._move(ent, ("at", ent, self._agent))
            return (f"{ent} slipped from the agent's hands onto the floor of {self._agent}",)
        w = self._w
        room = self._loc[ent][2]
        others = [r for r in w.regions[w.region_of[room]] if r != room]
        return self._moved(ent, ("at", ent, self._mut_rng.pick(others)))

    # -- observation -------------------------------------------------------------------

    def _look(self, action: Action | None) -> Canonical:
        """Partial mode: what the agent sees (its room with its doorways, its hands, and
        an examined door's switches), recorded as its latest view of each slot shown and
        of each place looked at."""
        t = self._t
        w = self._w
        look_at = self._seen.look_at
        r = self._agent
        out: list[Fact] = [("passage", *self._pair(r, s)) for s, d in w.links[r] if d is None]
        shown: list[tuple[Hashable, Fact]] = [(("loc", "agent"), ("at", "agent", r))]
        look_at(("floor", r), t)
        look_at("hands", t)
        for d in self._doors_at[r]:
            out.append(self._door_fact[d])
            locked = self._locked[d]
            shown.append((("lock", d), ("locked", d) if locked else ("unlocked", d)))
            look_at(("lock", d), t)
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
        self._see(shown, out)
        return tuple(sorted(set(out)))

    def _lie_entities(self) -> tuple[str, ...]:
        w = self._w
        return (*w.doors, *w.switches, *w.keys)

    def _lie_places(self, item: str) -> list[Fact]:
        return [("at", item, r) for r in self._w.rooms] + [("held", item)]

    def _phantom_facts(self, rng: Rng) -> list[Fact]:
        """A persistent building of rooms, doors, keys and switches that do not exist."""
        w = self._w
        rooms = phantom_names("room", len(w.rooms), max(3, len(w.rooms) // 3))
        doors = phantom_names("door", len(w.doors), max(1, len(w.doors) // 2))
        keys = phantom_names("key", len(w.keys), max(2, len(w.keys) // 2))
        switches = phantom_names("switch", len(w.switches), max(1, len(w.switches) // 2))
        facts: list[Fact] = [("passage", a, b) for a, b in zip(rooms, rooms[1:], strict=False)]
        for d in doors:
            a, b = rng.sample(rooms, 2)
            facts.append(("door", d, a, b))
            facts.append(("locked", d) if rng.chance(0.6) else ("unlocked", d))
        facts += [("at", x, rng.pick(rooms)) for x in keys]
        for s in switches:
            facts.append(("at", s, rng.pick(rooms)))
            facts.append(("on", s) if rng.chance(0.5) else ("off", s))
        return facts

    # -- queries -----------------------------------------------------------------------

    def _always_observable(self, fact: Fact) -> bool:
        return fact in self._static_set

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

    def _relation_problems(self, fact: Fact) -> list[str]:
        if fact[0] in ("passage", "door") and fact[-2] == fact[-1]:
            return [f"{format_fact(fact)}: joins {fact[-1]} to itself"]
        return []

    # -- snapshots ---------------------------------------------------------------------

    def _state_snapshot(self) -> Any:
        return (self._store.frozen(), frozenset(self._ever_held), frozenset(self._ever_at))

    def _restore_state(self, state: Any) -> None:
        facts, ever_held, ever_at = state
        self._load(facts)
        self._ever_held = set(ever_held)
        self._ever_at = set(ever_at)


#: this module's names (its world's, from graph_nav_world.py, are importable here too)
__all__: Sequence[str] = [
    "CONFLICT_RATE",
    "ERROR_LABELS",
    "GraphNav",
    "PHANTOM_VIEWS",
    "PREDICATES",
    "TASK_PREDICATES",
    "VERBS",
]
