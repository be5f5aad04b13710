"""The maze's natural-language facts: rendering them, and reading them back as a world.

The simulator reads the world from the very fact strings the model is shown, so a plan
is judged against exactly what the model could know. The generator hands the
certificate its facts already split into (kind, slots) items as well: the certificate
builds the world from those (no parsing) and proves they render to the shown strings.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

OPEN = "Room {a} and {b} are connected by an open door."
LOCKED = "Room {a} and {b} are connected by a closed and locked door."
REQUIRES = "The locked door between {a} and {b} requires key {k}."
KEY_AT = "Key {k} is in room {r}."
BOB_AT = "Bob is in room {r}."
ALICE_AT = "Alice is in room {r}."

#: a fact as (kind, slots), the slots as they appear in its sentence: "open" and
#: "locked": (room, room); "requires": (room, room, key); "key": (key, room);
#: "bob" and "alice": (room,)
FactItem = tuple[str, tuple[str, ...]]


@dataclass
class World:
    """The maze as the facts describe it, with rooms numbered locally for fast search.

    ``locks`` maps a door (pair of room indices, low first) to the key that opens it,
    or ``None`` when the door is known to be locked but its key is not stated.
    """

    rooms: list[str] = field(default_factory=list)
    index: dict[str, int] = field(default_factory=dict)
    adj: list[list[int]] = field(default_factory=list)
    locks: dict[tuple[int, int], int | None] = field(default_factory=dict)
    keys_in_room: dict[int, list[int]] = field(default_factory=dict)
    start: int | None = None
    goal: int | None = None

    def room(self, name: str) -> int:
        i = self.index.get(name)
        if i is None:
            i = len(self.rooms)
            self.index[name] = i
            self.rooms.append(name)
            self.adj.append([])
        return i

    def connect(self, a: str, b: str) -> tuple[int, int]:
        ia, ib = self.room(a), self.room(b)
        if ib not in self.adj[ia]:
            self.adj[ia].append(ib)
            self.adj[ib].append(ia)
        return (ia, ib) if ia < ib else (ib, ia)


def door_key(ia: int, ib: int) -> tuple[int, int]:
    return (ia, ib) if ia < ib else (ib, ia)


#: every template at once, each slot a run of anything but a space (what splitting the
#: sentence at spaces gives a slot): one match a fact instead of a split, a format and
#: a comparison (tests/test_maze_simulator.py checks it against that reading)
_FACT = re.compile(
    r"Room ([^ ]*) and ([^ ]*) are connected by (?:(an open)|a closed and locked) door\."
    r"|The locked door between ([^ ]*) and ([^ ]*) requires key ([^ ]*)\."
    r"|Key ([^ ]*) is in room ([^ ]*)\."
    r"|(Bob|Alice) is in room ([^ ]*)\."
)


def _classify(fact: str) -> tuple[str, tuple[str, ...]]:
    """Which template a fact follows, and its slots (a key a string of digits); any other
    text is a ValueError. As strict as rebuilding the fact from the template and
    comparing, in one regular-expression match: the scorer reads each instance's hundred
    facts once, and this was most of the world's cost."""
    m = _FACT.fullmatch(fact)
    if m is not None:
        a, b, is_open, da, db, k, key, room, who, at = m.groups()
        if a is not None:
            return ("open" if is_open else "locked"), (a, b)
        if da is not None:
            if k.isdigit():
                return "requires", (da, db, k)
        elif key is not None:
            if key.isdigit():
                return "key", (key, room)
        else:
            return who.lower(), (at,)
    raise ValueError(f"not a maze fact: {fact!r}")


#: the templates with positional slots in ``FactItem`` order, for :func:`render_fact`
#: (``%`` on a tuple of strings: about half the cost of ``str.format`` with names)
FACT_TEMPLATES = {
    "open": OPEN.replace("{a}", "%s").replace("{b}", "%s"),
    "locked": LOCKED.replace("{a}", "%s").replace("{b}", "%s"),
    "requires": REQUIRES.replace("{a}", "%s").replace("{b}", "%s").replace("{k}", "%s"),
    "key": KEY_AT.replace("{k}", "%s").replace("{r}", "%s"),
    "bob": BOB_AT.replace("{r}", "%s"),
    "alice": ALICE_AT.replace("{r}", "%s"),
}


def render_fact(kind: str, slots: tuple[str, ...]) -> str:
    """The sentence of one fact item (the inverse of reading it)."""
    template = FACT_TEMPLATES.get(kind)
    if template is None:
        raise ValueError(f"not a maze fact kind: {kind!r}")
    return template % slots


#: :data:`_FACT` for a listing of facts joined by newlines, one fact a line (no slot
#: holds a newline), each alternative with a group that says which it is
_FACT_LINES = re.compile(
    r"^(?:Room ([^ \n]*) and ([^ \n]*) are connected by (an open|a closed and locked) door\."
    r"|(The) locked door between ([^ \n]*) and ([^ \n]*) requires key ([^ \n]*)\."
    r"|(Key) ([^ \n]*) is in room ([^ \n]*)\."
    r"|(Bob|Alice) is in room ([^ \n]*)\.)$",
    re.MULTILINE,
)


def world_from_facts(facts: list[str]) -> World:
    """Read a world from fact strings written by this module; other text is an error.

    The scorer reads each instance's world once (a hundred facts), and that was a third
    of its CPU: the facts are matched all at once (one regular expression over the
    listing) and the world built from the matches in one pass, the same world that
    :func:`world_from_items` builds from :func:`_classify`'s items (tested). Anything
    unusual (a newline inside a fact, a line that is no fact, a key that is not a
    number) takes that reading, which raises for text that is no fact.
    """
    joined = "\n".join(facts)
    found = _FACT_LINES.findall(joined) if joined.count("\n") == len(facts) - 1 else None
    if found is None or len(found) != len(facts):
        return world_from_items([_classify(fact) for fact in facts])
    world = World()
    index, rooms, adj, locks, keys_in_room = (
        world.index,
        world.rooms,
        world.adj,
        world.locks,
        world.keys_in_room,
    )
    requires: dict[tuple[str, str], int] = {}
    for a, b, door, the, ra, rb, k, key, kn, kr, who, at in found:
        if door:
            ia = index.get(a)
            if ia is None:
                ia = index[a] = len(rooms)
                rooms.append(a)
                adj.append([])
            ib = index.get(b)
            if ib is None:
                ib = index[b] = len(rooms)
                rooms.append(b)
                adj.append([])
            if ib not in adj[ia]:
                adj[ia].append(ib)
                adj[ib].append(ia)
            if door == "a closed and locked":
                locks.setdefault((ia, ib) if ia < ib else (ib, ia), None)
        elif the:
            if not k.isdigit():
                return world_from_items([_classify(fact) for fact in facts])
            requires[(ra, rb)] = int(k)
        elif key:
            if not kn.isdigit():
                return world_from_items([_classify(fact) for fact in facts])
            r = index.get(kr)
            if r is None:
                r = index[kr] = len(rooms)
                rooms.append(kr)
                adj.append([])
            held = keys_in_room.setdefault(r, [])
            if int(kn) not in held:
                held.append(int(kn))
        else:
            r = index.get(at)
            if r is None:
                r = index[at] = len(rooms)
                rooms.append(at)
                adj.append([])
            if who == "Bob":
                world.start = r
            else:
                world.goal = r
    apply_requires(world, requires)
    return world


def apply_requires(world: World, requires: dict[tuple[str, str], int]) -> None:
    """Give each locked door its key from the "requires key" facts (read after all the
    doors, since a fact may come before its door's). A "requires" fact without its
    "locked door" fact says nothing about passability and is ignored."""
    index, locks = world.index, world.locks
    for (a, b), key in requires.items():
        ia, ib = index.get(a), index.get(b)
        if ia is None or ib is None:
            continue
        door = door_key(ia, ib)
        if door in locks:
            locks[door] = key


def world_from_items(
    items: Iterable[FactItem], open_nbrs: list[list[tuple[int, int, int]]] | None = None
) -> World:
    """The world a list of fact items describes.

    A "requires key" fact without its "locked door" fact says nothing about passability
    and is ignored; a locked door without a "requires" fact cannot be opened. Does what
    :meth:`World.room` and :meth:`World.connect` do, written out: this runs once per
    generated candidate, over hundreds of facts.

    ``open_nbrs`` (an empty list), when given, is filled as the rooms connect: per room,
    ``(neighbour, 0, -1)`` for each entry of its adjacency list, every door written open,
    which ``rules.attach_tables`` finishes into the search tables. So the certificate
    gets its world and tables in this one pass over the facts, not a second over every
    room.
    """
    world = World()
    index, rooms, adj, locks, in_room = world.index, world.rooms, world.adj, world.locks, world.keys_in_room
    nbrs = open_nbrs
    requires: dict[tuple[str, str], int] = {}

    def new_room(name: str) -> int:
        """Number a room not seen before (the caller looked it up: most facts name known rooms)."""
        i = index[name] = len(rooms)
        rooms.append(name)
        adj.append([])
        if nbrs is not None:
            nbrs.append([])
        return i

    for kind, g in items:
        if kind != "open":  # most facts are open doors: one comparison for them
            if kind == "requires":
                requires[(g[0], g[1])] = int(g[2])
                continue
            if kind == "key":
                r = index.get(g[1])
                if r is None:
                    r = new_room(g[1])
                keys = in_room.setdefault(r, [])
                if int(g[0]) not in keys:  # a repeated fact is one key, not two
                    keys.append(int(g[0]))
                continue
            if kind == "bob" or kind == "alice":
                r = index.get(g[0])
                if r is None:
                    r = new_room(g[0])
                if kind == "bob":
                    world.start = r
                else:
                    world.goal = r
                continue
        # a connection: "open", "locked" (and any other kind: it must name two rooms)
        ia = index.get(g[0])
        if ia is None:
            ia = new_room(g[0])
        ib = index.get(g[1])
        if ib is None:
            ib = new_room(g[1])
        if ib not in adj[ia]:
            adj[ia].append(ib)
            adj[ib].append(ia)
            if nbrs is not None:
                nbrs[ia].append((ib, 0, -1))
                nbrs[ib].append((ia, 0, -1))
        if kind == "locked":
            locks.setdefault((ia, ib) if ia < ib else (ib, ia), None)
    apply_requires(world, requires)
    return world
