"""The maze's natural-language facts: rendering them, and reading them back as a world.

The simulator reads the world from the very fact strings the model is shown, so a plan
is judged against exactly what the model could know. The generator hands the
certificate its facts already split into (kind, slots) items as well: the certificate
builds the world from those (no parsing) and proves they render to the shown strings.
"""

from __future__ import annotations

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


def _classify(fact: str) -> tuple[str, tuple[str, ...]]:
    """Which template a fact follows, and its slots.

    Dispatch on the first word, then rebuild the fact from the template and compare:
    as strict as a regex, and several times faster on the hundreds of facts of a maze.
    """
    w = fact.split(" ")
    n = len(w)
    head = w[0]
    if head == "Room" and n >= 4:
        a, b = w[1], w[3]
        if fact == OPEN.format(a=a, b=b):
            return "open", (a, b)
        if fact == LOCKED.format(a=a, b=b):
            return "locked", (a, b)
    elif head == "The" and n == 10:
        a, b, k = w[4], w[6], w[9][:-1]
        if k.isdigit() and fact == REQUIRES.format(a=a, b=b, k=k):
            return "requires", (a, b, k)
    elif head == "Key" and n == 6:
        k, r = w[1], w[5][:-1]
        if k.isdigit() and fact == KEY_AT.format(k=k, r=r):
            return "key", (k, r)
    elif head in ("Bob", "Alice") and n == 5:
        r = w[4][:-1]
        if fact == (BOB_AT if head == "Bob" else ALICE_AT).format(r=r):
            return head.lower(), (r,)
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


def world_from_facts(facts: list[str]) -> World:
    """Read a world from fact strings written by this module; other text is an error."""
    return world_from_items([_classify(fact) for fact in facts])


def world_from_items(items: Iterable[FactItem]) -> World:
    """The world a list of fact items describes.

    A "requires key" fact without its "locked door" fact says nothing about passability
    and is ignored; a locked door without a "requires" fact cannot be opened. Does what
    :meth:`World.room` and :meth:`World.connect` do, written out: this runs once per
    generated candidate, over hundreds of facts.
    """
    world = World()
    index, rooms, adj, locks = world.index, world.rooms, world.adj, world.locks
    requires: dict[tuple[str, str], int] = {}
    for kind, g in items:
        if kind == "requires":
            requires[(g[0], g[1])] = int(g[2])
            continue
        if kind == "key":
            r = index.get(g[1])
            if r is None:
                r = index[g[1]] = len(rooms)
                rooms.append(g[1])
                adj.append([])
            keys = world.keys_in_room.setdefault(r, [])
            if int(g[0]) not in keys:  # a repeated fact is one key, not two
                keys.append(int(g[0]))
            continue
        ia = index.get(g[0])
        if ia is None:
            ia = index[g[0]] = len(rooms)
            rooms.append(g[0])
            adj.append([])
        if kind == "bob":
            world.start = ia
            continue
        if kind == "alice":
            world.goal = ia
            continue
        ib = index.get(g[1])
        if ib is None:
            ib = index[g[1]] = len(rooms)
            rooms.append(g[1])
            adj.append([])
        if ib not in adj[ia]:
            adj[ia].append(ib)
            adj[ib].append(ia)
        if kind == "locked":
            locks.setdefault((ia, ib) if ia < ib else (ib, ia), None)
    for (a, b), key in requires.items():
        ia, ib = index.get(a), index.get(b)
        if ia is None or ib is None:
            continue
        door = door_key(ia, ib)
        if door in locks:
            locks[door] = key
    return world
