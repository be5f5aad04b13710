"""GraphNav's worlds: door counts, archetypes, generation, decoys and the exact solver
(the rules they follow are in :mod:`horizonbench.datasets.worlds.graph_nav`).

Pure: all randomness comes from the episode seed, the layout from one
:func:`derive_seed` stream and each door's objects from their own.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from math import isqrt

from horizonbench.core.seeding import derive_seed
from horizonbench.datasets.worlds.base import Action, Fact, Rng, WorldKey, room_graph
from horizonbench.schemas.worlds import N_ARCHETYPES, SC_MAX, SC_MIN

# The region shapes are base.room_graph's, the same layout families StatefulPuzzle uses.

NAME = "graph_nav"
#: the most rooms one door's objects are spread over (bounds the solver's search)
MAX_OBJECT_ROOMS = 8

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
class World(WorldKey):
    """A generated world (without decoys, which depend on branching): the static layout,
    the doors' requirements and where every object starts. Shared read-only between
    episodes.

    ``regions`` lists each region's rooms, entrance first; ``ends`` maps a door to its
    two rooms in room order, ``near``/``far`` to its side in the parent region and the
    entrance of the region it opens; ``requires``/``objects`` give each door's
    requirement facts and their objects, aligned; ``place`` is where each object starts
    (a switch never moves); ``links`` lists each room's neighbours in room order with the
    door between (``None`` for a passage)."""

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

    links_t = {r: tuple(sorted(ns, key=lambda n: order[n[0]])) for r, ns in links.items()}
    return World(
        sc=sc, dd=dd, seed=seed, archetype=archetype,
        rooms=rooms, regions=tuple(regions), region_of=region_of, parents=parents, entrances=entrances,
        passages=tuple(passages), links=links_t, start_room=start_room, goal_room=goal_room,
        doors=doors, ends=ends, near=near, far=far,
        keys=tuple(keys), switches=tuple(switches), requires=requires, objects=objects, door_of=door_of,
        place=place,
    )  # fmt: skip


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


__all__: Sequence[str] = [
    "ARCHETYPES",
    "Archetype",
    "DOORS_TABLE",
    "MAX_OBJECT_ROOMS",
    "NAME",
    "World",
    "build_world",
    "decoy_names",
    "door_count",
    "solve",
]
