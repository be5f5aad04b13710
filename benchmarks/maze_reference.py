"""A deliberately straightforward maze generator: the baseline of the throughput table.

What a first implementation would do: pure-Python randomised Kruskal (shuffled wall list
+ union-find), the same rewind construction (seqBench Algorithm 1) on a networkx graph
with networkx shortest paths, the same fact sentences, shuffle and decoy doors, then a
certificate read back from the fact strings: a plain layered BFS over (room, keys held,
doors unlocked, pending key) with frozensets, counting optimal plans, and a replay of
the gold plan. It produces the same kind of certified 40x40, B=2 instance as
horizonbench's maze family, so ``benchmarks/generation.py`` can divide by its rate and
``benchmarks/doc_figures.py baseline`` compare its mazes with ours.

Not a benchmark itself: a module the benchmarks import.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

ROWS = COLS = 40
NUM_KEYS = 2


def maze_params(noise: float) -> dict[str, Any]:
    """horizonbench's maze parameters for the same kind of instance."""
    return {
        "grid_rows": ROWS,
        "grid_cols": COLS,
        "num_keys": NUM_KEYS,
        # keep mazes whose rewind placed fewer keys, as the baseline generator does
        "num_keys_mode": "at_most",
        "noise_ratio": noise,
        "shuffle_ratio": 1.0,
    }


_OPEN = "Room {a} and {b} are connected by an open door."
_LOCKED = "Room {a} and {b} are connected by a closed and locked door."
_REQUIRES = "The locked door between {a} and {b} requires key {k}."
_KEY_AT = "Key {k} is in room {r}."
_BOB_AT = "Bob is in room {r}."
_ALICE_AT = "Alice is in room {r}."
_ROOM_RE = r"([A-Z]+[0-9]+)"
_FACT_RES = [
    ("open", re.compile(rf"Room {_ROOM_RE} and {_ROOM_RE} are connected by an open door\.")),
    ("locked", re.compile(rf"Room {_ROOM_RE} and {_ROOM_RE} are connected by a closed and locked door\.")),
    ("requires", re.compile(rf"The locked door between {_ROOM_RE} and {_ROOM_RE} requires key ([0-9]+)\.")),
    ("key", re.compile(rf"Key ([0-9]+) is in room {_ROOM_RE}\.")),
    ("bob", re.compile(rf"Bob is in room {_ROOM_RE}\.")),
    ("alice", re.compile(rf"Alice is in room {_ROOM_RE}\.")),
]


def _col_letters(col: int) -> str:
    out = ""
    n = col + 1
    while n:
        n, rem = divmod(n - 1, 26)
        out = chr(ord("A") + rem) + out
    return out


def _room_name(cell: int, cols: int) -> str:
    return f"{_col_letters(cell % cols)}{cell // cols + 1}"


def _edge(a: Any, b: Any) -> tuple[Any, Any]:
    return (a, b) if a < b else (b, a)


class _UnionFind:
    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, a: int) -> int:
        parent = self.parent
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    def union(self, a: int, b: int) -> bool:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        self.parent[ra] = rb
        return True


def _baseline_kruskal(rows: int, cols: int, rnd: random.Random) -> nx.Graph:
    n = rows * cols
    walls = []
    for r in range(rows):
        for c in range(cols):
            i = r * cols + c
            if c + 1 < cols:
                walls.append((i, i + 1))
            if r + 1 < rows:
                walls.append((i, i + cols))
    rnd.shuffle(walls)
    uf = _UnionFind(n)
    tree = nx.Graph()
    tree.add_nodes_from(range(n))
    joined = 0
    for a, b in walls:
        if uf.union(a, b):
            tree.add_edge(a, b)
            joined += 1
            if joined == n - 1:  # (not tree.number_of_edges(): that is O(n) in networkx)
                break
    return tree


def _baseline_rewind(
    tree: nx.Graph, num_keys: int, rnd: random.Random
) -> tuple[int, int, list[tuple[int, tuple[int, int], list[int]]]]:
    n = tree.number_of_nodes()
    goal = rnd.randrange(n)
    x = goal
    locked: list[tuple[int, int]] = []
    segments: list[tuple[int, tuple[int, int], list[int]]] = []
    # Locked doors are taken out of the tree while searching and put back afterwards
    # (cheaper than nx.restricted_view or copying the graph, which both cost ~4x the BFS).
    for _ in range(num_keys):
        paths = nx.single_source_shortest_path(tree, x)
        cells = [c for c in paths if c != x]
        if not cells:
            break
        key_cell = rnd.choice(cells)
        path = paths[key_cell]  # x ... key_cell
        j = rnd.randrange(len(path) - 1)
        door = _edge(path[j], path[j + 1])
        locked.append(door)
        tree.remove_edge(*door)
        segments.append((key_cell, door, path[::-1]))
        x = key_cell
    tree.add_edges_from(locked)
    if not segments:  # B = 0: a random start reachable from the goal
        paths = nx.single_source_shortest_path(tree, goal)
        start = rnd.choice([c for c in paths if c != goal])
        return start, goal, [(-1, (-1, -1), paths[start][::-1])]
    segments.reverse()
    return x, goal, segments


@dataclass
class _World:
    graph: nx.Graph = field(default_factory=nx.Graph)
    locks: dict[tuple[str, str], int | None] = field(default_factory=dict)
    keys_in_room: dict[str, list[int]] = field(default_factory=dict)
    start: str | None = None
    goal: str | None = None


def _baseline_world(facts: list[str]) -> _World:
    world = _World()
    requires: dict[tuple[str, str], int] = {}
    for fact in facts:
        for kind, pattern in _FACT_RES:  # noqa: B007 (kind is used after the loop)
            m = pattern.fullmatch(fact)
            if m:
                break
        else:
            raise ValueError(f"not a fact: {fact!r}")
        g = m.groups()
        if kind == "open":
            world.graph.add_edge(g[0], g[1])
        elif kind == "locked":
            world.graph.add_edge(g[0], g[1])
            world.locks.setdefault(_edge(g[0], g[1]), None)
        elif kind == "requires":
            requires[_edge(g[0], g[1])] = int(g[2])
        elif kind == "key":
            world.keys_in_room.setdefault(g[1], []).append(int(g[0]))
        elif kind == "bob":
            world.start = g[0]
        else:
            world.goal = g[0]
    for door, key in requires.items():
        if door in world.locks:
            world.locks[door] = key
    return world


_BState = tuple[str, frozenset, frozenset, int | None]


def _baseline_successors(world: _World, state: _BState) -> set[_BState]:
    room, held, unlocked, pending = state
    out: set[_BState] = set()
    if pending is not None:  # only the unlock that use_key announced
        for nb in world.graph[room]:
            door = _edge(room, nb)
            if door in world.locks and door not in unlocked and world.locks[door] == pending:
                out.add((room, held, unlocked | {door}, None))
        return out
    for nb in world.graph[room]:
        door = _edge(room, nb)
        if door in world.locks and door not in unlocked:
            key = world.locks[door]
            if key is not None and key in held:
                out.add((room, held, unlocked, key))  # use_key
            continue
        out.add((nb, held, unlocked, None))  # move_to
    for key in world.keys_in_room.get(room, ()):
        if key not in held:
            out.add((room, held | {key}, unlocked, None))  # pick_up_key
    return out


def _baseline_solve(world: _World) -> tuple[int | None, int]:
    """(optimal plan length including start and rescue, number of optimal plans)."""
    if world.start is None or world.goal is None:
        return None, 0
    s0: _BState = (world.start, frozenset(), frozenset(), None)
    dist = {s0: 0}
    count = {s0: 1}
    frontier = [s0]
    depth = 0
    while frontier:
        goals = [s for s in frontier if s[0] == world.goal and s[3] is None]
        if goals:
            return depth + 2, sum(count[s] for s in goals)
        nxt = []
        for s in frontier:
            for t in _baseline_successors(world, s):
                if t not in dist:
                    dist[t] = depth + 1
                    count[t] = count[s]
                    nxt.append(t)
                elif dist[t] == depth + 1:
                    count[t] += count[s]
        frontier = nxt
        depth += 1
    return None, 0


def _baseline_replay(world: _World, plan: list[tuple[str, str]]) -> bool:
    if not plan or plan[0] != ("start", world.start):
        return False
    room, held, unlocked, pending = world.start, set(), set(), None
    for action, arg in plan[1:]:
        if pending is not None and action != "unlock_and_open_door_to":
            return False
        if action == "move_to":
            door = _edge(room, arg)
            if not world.graph.has_edge(room, arg) or (door in world.locks and door not in unlocked):
                return False
            room = arg
        elif action == "pick_up_key":
            if int(arg) not in world.keys_in_room.get(room, ()) or int(arg) in held:
                return False
            held.add(int(arg))
        elif action == "use_key":
            if int(arg) not in held:
                return False
            pending = int(arg)
        elif action == "unlock_and_open_door_to":
            door = _edge(room, arg)
            if pending is None or not world.graph.has_edge(room, arg) or world.locks.get(door) != pending:
                return False
            unlocked.add(door)
            pending = None
        elif action == "rescue":
            return room == world.goal
        else:
            return False
    return False


def baseline_candidate(
    rows: int, cols: int, num_keys: int, noise: float, shuffle: float, seed: int
) -> dict[str, Any] | None:
    """One candidate; the instance row if it is certified, else None."""
    rnd = random.Random(seed)
    n = rows * cols
    tree = _baseline_kruskal(rows, cols, rnd)
    start, goal, segments = _baseline_rewind(tree, num_keys, rnd)
    path_doors = [door for key_cell, door, _ in segments if key_cell >= 0]
    path_edges = {_edge(a, b) for _, _, path in segments for a, b in zip(path, path[1:], strict=False)}
    off_edges = [e for e in (_edge(a, b) for a, b in tree.edges()) if e not in path_edges]
    decoys = rnd.sample(off_edges, min(num_keys, len(off_edges)))
    decoy_cells = [rnd.randrange(n) for _ in decoys]
    total_keys = len(path_doors) + len(decoys)
    key_of_door = dict(
        zip(path_doors + decoys, rnd.sample(range(1, max(10, 4 * total_keys) + 1), total_keys), strict=True)
    )

    def name(cell: int) -> str:
        return _room_name(cell, cols)

    def connection(a: int, b: int, template: str, **kw: Any) -> str:
        if rnd.random() < 0.5:
            a, b = b, a
        return template.format(a=name(a), b=name(b), **kw)

    # gold plan and supporting facts, walking the segments forward
    plan = [("start", name(start))]
    support = [_BOB_AT.format(r=name(start))]
    unlocked: set[tuple[int, int]] = set()
    listed: set[tuple[int, int]] = set()  # a path may cross an edge twice; list it once
    for key_cell, door, path in segments:
        if key_cell >= 0:
            plan.append(("pick_up_key", str(key_of_door[door])))
            support.append(_KEY_AT.format(k=key_of_door[door], r=name(key_cell)))
        for a, b in zip(path, path[1:], strict=False):
            e = _edge(a, b)
            if e in key_of_door and e not in unlocked:
                plan.append(("use_key", str(key_of_door[e])))
                plan.append(("unlock_and_open_door_to", name(b)))
                unlocked.add(e)
                if e not in listed:
                    support.append(connection(a, b, _LOCKED))
                    support.append(connection(a, b, _REQUIRES, k=key_of_door[e]))
            elif e not in listed:
                support.append(connection(a, b, _OPEN))
            listed.add(e)
            plan.append(("move_to", name(b)))
    plan.append(("rescue", "Alice"))
    support.append(_ALICE_AT.format(r=name(goal)))

    # distractors: off-path connections, and each decoy door's "requires" fact and key location
    pool = (
        [("edge", e) for e in off_edges]
        + [("requires", i) for i in range(len(decoys))]
        + [("key", i) for i in range(len(decoys))]
    )
    n_noise = min(round(noise * len(support)), len(pool))
    noise_facts = []
    for kind, item in rnd.sample(pool, n_noise):
        if kind == "edge":
            noise_facts.append(connection(*item, _LOCKED if item in key_of_door else _OPEN))
        elif kind == "requires":
            e = decoys[item]
            noise_facts.append(connection(*e, _REQUIRES, k=key_of_door[e]))
        else:
            noise_facts.append(_KEY_AT.format(k=key_of_door[decoys[item]], r=name(decoy_cells[item])))
    facts = support + noise_facts
    moved = rnd.sample(range(len(facts)), round(shuffle * len(facts)))
    values = [facts[i] for i in moved]
    rnd.shuffle(values)
    for i, v in zip(moved, values, strict=True):
        facts[i] = v

    # certificate from the facts as shown
    world = _baseline_world(facts)
    length, n_optimal = _baseline_solve(world)
    if length is None or length != len(plan) or not _baseline_replay(world, plan):
        return None
    return {
        "instance_id": f"maze-{seed:016x}",
        "seed": seed,
        "solution": [{"action": a, "arg": x} for a, x in plan],
        "solution_length": len(plan),
        "optimal_plan_count": n_optimal,
        "start_room": name(start),
        "goal_room": name(goal),
        "facts": facts,
    }
