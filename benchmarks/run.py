"""Throughput report for maze generation, certification, scoring and parsing (``make bench``).

Prints a table of rates (median of 3 runs, with the min-max spread) and their ratios
against a deliberately straightforward reference generator written below, measured in
the same run on the same machine, and against the paper's ~40 mazes/s. It is a report,
not a test: it always exits 0, whatever the figures. The one-process generation figures
(and the goal) count certified instances per CPU-second of the process, so load from
elsewhere on a shared machine does not move them; the LocalCluster figure is wall-clock.

    .venv/bin/python benchmarks/run.py            # full run (a few minutes on 2 cores)
    .venv/bin/python benchmarks/run.py --quick    # smoke run (well under a minute)
    .venv/bin/python benchmarks/run.py --json out.json --workers 2
"""

from __future__ import annotations

import os

os.environ["TQDM_DISABLE"] = "1"
os.environ["DO_NOT_TRACK"] = "1"
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from typing import Any  # noqa: E402

import networkx as nx  # noqa: E402
from load import machine_busy_seconds, tree_cpu_seconds  # noqa: E402  (benchmarks/ is on the path)

ROWS = COLS = 40
NUM_KEYS = 2
#: "about 147,000 base mazes in about an hour on a laptop"
PAPER_RATE = 147_000 / 3600.0
#: certified instances per CPU-second of one process (issue 11); CPU time, so that load
#: from elsewhere on a shared machine does not move the figure
GOAL_RATE = 1_000.0


def maze_params(noise: float) -> dict[str, Any]:
    return {
        "grid_rows": ROWS,
        "grid_cols": COLS,
        "num_keys": NUM_KEYS,
        # keep mazes whose rewind placed fewer keys, as the baseline generator does
        "num_keys_mode": "at_most",
        "noise_ratio": noise,
        "shuffle_ratio": 1.0,
    }


# ---------------------------------------------------------------------------------------------
# Baseline: what a first, straightforward implementation would do.
#
# Pure-Python randomised Kruskal (shuffled wall list + union-find), the same rewind
# construction (seqBench Algorithm 1) on a networkx graph with networkx shortest paths,
# the same fact sentences, shuffle and decoy doors, then a certificate read back from the
# fact strings: a plain layered BFS over (room, keys held, doors unlocked, pending key)
# with frozensets, counting optimal plans, and a replay of the gold plan. It produces the
# same kind of certified 40x40, B=2 instance as horizonbench's maze family.
# ---------------------------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------------------------
# Measurement
# ---------------------------------------------------------------------------------------------


@dataclass
class Measure:
    key: str
    label: str
    unit: str
    samples: list[float]
    #: key of the measure this one is compared with (None: no ratio)
    baseline: str | None = None
    vs_paper: bool = False
    #: a count, printed without decimals
    integer: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)


def _log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


Job = Callable[[int], tuple[float, dict[str, Any]]]


def run_rounds(reps: int, jobs: dict[str, Job]) -> dict[str, tuple[list[float], list[dict[str, Any]]]]:
    """Run every job ``reps`` times, round-robin (a, b, c, a, b, c, ...), so a burst of
    load from elsewhere on a shared machine hits all of them rather than one.

    Each job gets the round number and returns (rate, details). The details gain the
    CPU this process tree used (``own_cpu_s``) and the average number of cores kept
    busy by everything else on the machine meanwhile (``others_cores``).
    """
    out: dict[str, tuple[list[float], list[dict[str, Any]]]] = {k: ([], []) for k in jobs}
    for rep in range(reps):
        for label, job in jobs.items():
            busy0, own0, t0 = machine_busy_seconds(), tree_cpu_seconds(), time.perf_counter()
            rate, info = job(rep)
            busy1, own1, wall = machine_busy_seconds(), tree_cpu_seconds(), time.perf_counter() - t0
            info["own_cpu_s"] = round(own1 - own0, 3)
            if busy0 is not None and busy1 is not None and wall > 0:
                info["others_cores"] = round(max(0.0, (busy1 - busy0) - (own1 - own0)) / wall, 2)
            out[label][0].append(rate)
            out[label][1].append(info)
            _log(f"{label} run {rep + 1}/{reps}: {rate:,.1f}/s {info}")
    return out


def gen_in_process(noise: float, count: int, seed: int) -> tuple[float, dict[str, Any]]:
    """Certified instances per CPU-second (``process_time``) of ``generate_shard`` in this process."""
    from horizonbench.datasets.shards import generate_shard

    t0, c0 = time.perf_counter(), time.process_time()
    result = generate_shard("maze", maze_params(noise), seed, 0, count)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    certified = sum(1 for _, _, _, rejection in result if rejection is None)
    return certified / cpu, {
        "candidates": count,
        "certified": certified,
        "rejected": count - certified,
        "seconds": round(dt, 3),
        "cpu_seconds": round(cpu, 3),
    }


def gen_baseline(noise: float, count: int, seed: int) -> tuple[float, dict[str, Any]]:
    """The reference generator's certified instances per CPU-second, measured as
    :func:`gen_in_process` is, so their ratio is the speed-up."""
    from horizonbench.datasets.shards import candidate_seed

    t0, c0 = time.perf_counter(), time.process_time()
    certified = 0
    for index in range(count):
        s = candidate_seed(seed, "maze", index)
        if baseline_candidate(ROWS, COLS, NUM_KEYS, noise, 1.0, s) is not None:
            certified += 1
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    return certified / cpu, {
        "candidates": count,
        "certified": certified,
        "rejected": count - certified,
        "seconds": round(dt, 3),
        "cpu_seconds": round(cpu, 3),
    }


def gen_cluster(
    client: Any, count: int, seed: int, window: int, shard_size: int | None = None
) -> tuple[float, dict[str, Any]]:
    """The pipeline's own path: ``sample_family`` with the default shard size (200)."""
    from horizonbench.schemas.config import FamilySpec, SamplingSpec
    from horizonbench.tasks.generate.instances import sample_family

    sampling = (
        SamplingSpec(count=count) if shard_size is None else SamplingSpec(count=count, shard_size=shard_size)
    )
    spec = FamilySpec(params=maze_params(0.0), sampling=sampling)
    t0 = time.perf_counter()
    selector = sample_family(client, "maze", spec, seed, window)
    dt = time.perf_counter() - t0
    kept = selector.kept  # a count, or (before the staged tables) the kept rows themselves
    return selector.certified / dt, {
        "kept": kept if isinstance(kept, int) else len(kept),
        "considered": selector.considered,
        "certified": selector.certified,
        "rejected": sum(selector.rejections.values()),
        "seconds": round(dt, 3),
    }


def scoring_inputs(noise: float, count: int, seed: int) -> list[tuple[list[str], Any, str]]:
    from horizonbench.datasets.maze.family import gold_plan
    from horizonbench.datasets.maze.simulator import format_plan
    from horizonbench.datasets.shards import generate_shard

    rows = [r for _, _, r, rej in generate_shard("maze", maze_params(noise), seed, 0, count) if rej is None]
    return [(list(r["facts"]), gold_plan(r), format_plan(gold_plan(r))) for r in rows]


def _repeat(inputs: list[Any], min_seconds: float, one: Any) -> tuple[float, int, int, float]:
    """Run ``one(item)`` over ``inputs`` until ``min_seconds`` pass: (rate, done, hits, seconds)."""
    done, hits = 0, 0
    t0 = time.perf_counter()
    while True:
        hits += sum(bool(one(item)) for item in inputs)
        done += len(inputs)
        dt = time.perf_counter() - t0
        if dt >= min_seconds:
            return done / dt, done, hits, dt


def time_scoring(
    inputs: list[tuple[list[str], Any, Any]], min_seconds: float
) -> tuple[float, dict[str, Any]]:
    """Score each (facts, gold, plan) repeatedly for at least ``min_seconds``."""
    from horizonbench.core.types import ParsedAnswer
    from horizonbench.datasets.maze.simulator import score_plan

    def one(item: tuple[list[str], Any, Any]) -> bool:
        facts, gold, plan = item
        return score_plan(facts, gold, ParsedAnswer(plan=tuple(plan))).success

    rate, done, successes, dt = _repeat(inputs, min_seconds, one)
    return rate, {"attempts": done, "successes": successes, "seconds": round(dt, 3)}


def gold_answers(inputs: list[tuple[list[str], Any, str]]) -> list[tuple[list[str], Any, Any]]:
    return [(facts, gold, gold) for facts, gold, _ in inputs]


def noisy_inputs(
    inputs: list[tuple[list[str], Any, str]], eps: float, seed: int
) -> list[tuple[list[str], Any, Any]]:
    """The same instances with answers from the noisy baseline: mostly failures, which
    need the full search for their progress ratio (successes skip it)."""
    import numpy as np

    from horizonbench.datasets.maze.baselines import noisy_plan
    from horizonbench.datasets.maze.facts import world_from_facts

    rng = np.random.default_rng(seed)
    return [(facts, gold, noisy_plan(gold, world_from_facts(facts), rng, eps)) for facts, gold, _ in inputs]


def time_parsing(
    inputs: list[tuple[list[str], Any, str]], min_seconds: float, general: bool = False
) -> tuple[float, dict[str, Any]]:
    """Answers parsed per second; ``general``: without the fast path for the usual form."""
    from horizonbench.datasets.maze.rules import ACTIONS
    from horizonbench.datasets.plan_parser import parse_plan, parse_plan_general

    parse = parse_plan_general if general else parse_plan

    def one(item: tuple[list[str], Any, str]) -> bool:
        _, gold, text = item
        return parse(text, task_actions=ACTIONS).plan == gold

    rate, done, matched, dt = _repeat(inputs, min_seconds, one)
    return rate, {"answers": done, "matched_gold": matched, "seconds": round(dt, 3)}


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------


def _fmt(x: float) -> str:
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:,.1f}"
    return f"{x:,.2f}"


def print_table(measures: list[Measure]) -> None:
    by_key = {m.key: m for m in measures}
    header = ("measure", "median", "min-max", "unit", "x baseline", "x paper", "other load")
    lines = []
    for m in measures:
        fmt = (lambda x: f"{x:,.0f}") if m.integer else _fmt
        spread = f"{fmt(min(m.samples))}-{fmt(max(m.samples))}" if len(m.samples) > 1 else "-"
        ratio = "-"
        if m.baseline is not None and m.baseline in by_key:
            ratio = f"{m.median / by_key[m.baseline].median:,.2f}"
        elif m.key == "baseline":
            ratio = "1.00"
        paper = f"{m.median / PAPER_RATE:,.2f}" if m.vs_paper else "-"
        others = [d["others_cores"] for d in m.extra.get("runs", []) if "others_cores" in d]
        load = f"{statistics.median(others):.1f} cores" if others else "-"
        lines.append((m.label, fmt(m.median), spread, m.unit, ratio, paper, load))
    widths = [max(len(r[i]) for r in [header, *lines]) for i in range(len(header))]

    def row(cells: tuple[str, ...]) -> str:
        first = cells[0].ljust(widths[0])
        rest = [
            c.rjust(w) if i != 2 else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells[1:], widths[1:], strict=True), 1)
        ]
        return "  ".join([first, *rest])

    print(row(header))
    print("  ".join("-" * w for w in widths))
    for line in lines:
        print(row(line))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller counts, for a smoke run")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    ap.add_argument("--workers", type=int, default=2, help="LocalCluster workers (default 2)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measure (median reported)")
    args = ap.parse_args(argv)

    import horizonbench.tasks.cluster.progress as progress

    progress.ENABLED["value"] = False

    if args.quick:
        n_local, n_cluster, n_noise, n_base, n_score, min_s = 300, 1_000, 200, 30, 20, 0.5
    else:
        n_local, n_cluster, n_noise, n_base, n_score, min_s = 3_000, 10_000, 2_000, 300, 100, 3.0
    reps = max(1, args.repeat)
    measures: list[Measure] = []
    seed0 = 20_240_601  # run r uses seed0 + r, so every run is different work but reproducible

    # warm-up: imports, lru caches, numpy/scipy first-call costs
    gen_in_process(0.0, 20, 1)
    gen_baseline(0.0, 3, 1)

    # 5., 1., 3.: the baseline and generate_shard in-process (noise 0 and 1), interleaved
    res = run_rounds(
        reps,
        {
            "baseline (pure Python + networkx)": lambda r: gen_baseline(0.0, n_base, seed0 + r),
            "generate_shard noise 0": lambda r: gen_in_process(0.0, n_local, seed0 + r),
            "generate_shard noise 1.0": lambda r: gen_in_process(1.0, n_noise, seed0 + r),
        },
    )
    rates, det = res["baseline (pure Python + networkx)"]
    measures.append(
        Measure(
            "baseline",
            "baseline: straightforward generator, 1 process",
            "certified/CPU-s",
            rates,
            vs_paper=True,
            extra={"runs": det},
        )
    )
    rates, det = res["generate_shard noise 0"]
    measures.append(
        Measure(
            "in_process",
            "generate_shard, 1 process",
            "certified/CPU-s",
            rates,
            baseline="baseline",
            vs_paper=True,
            extra={"runs": det},
        )
    )
    measures.append(
        Measure(
            "in_process_rejected",
            f"  rejected candidates (of {n_local:,} per run)",
            "candidates",
            [float(d["rejected"]) for d in det],
            integer=True,
        )
    )
    rates, det = res["generate_shard noise 1.0"]
    measures.append(
        Measure(
            "in_process_noise1",
            "generate_shard, noise 1.0, 1 process",
            "certified/CPU-s",
            rates,
            baseline="baseline",
            vs_paper=True,
            extra={"runs": det},
        )
    )

    # 2. the pipeline path on a LocalCluster
    from horizonbench.schemas.config import DaskSpec
    from horizonbench.tasks.cluster.client import dask_client

    spec = DaskSpec(n_workers=args.workers)
    t0 = time.perf_counter()
    with dask_client(spec) as client:
        startup = time.perf_counter() - t0
        workers = len(client.scheduler_info().get("workers", {})) or spec.n_workers  # type: ignore[attr-defined]
        window = max(2, 3 * workers * spec.threads_per_worker)  # as generate_instances does
        _log(f"LocalCluster up in {startup:.2f}s with {workers} workers, window {window}")
        t1 = time.perf_counter()
        gen_cluster(client, 20 * window, 7, window, shard_size=20)  # warm-up: imports in every worker
        warmup = time.perf_counter() - t1
        res = run_rounds(
            reps,
            {"sample_family on LocalCluster": lambda r: gen_cluster(client, n_cluster, seed0 + r, window)},
        )
        rates, det = res["sample_family on LocalCluster"]
        cluster_det = det
    measures.append(
        Measure(
            "cluster",
            f"sample_family, LocalCluster {workers} worker{'s' if workers > 1 else ''}",
            "certified/s",
            rates,
            baseline="baseline",
            vs_paper=True,
            extra={"runs": det, "workers": workers, "window": window},
        )
    )
    cpu_count = os.cpu_count() or 1
    # the cluster can use at most one core per worker thread
    cores = min(cpu_count, workers * spec.threads_per_worker)
    projected = [d["certified"] / d["own_cpu_s"] * cores for d in det if d.get("own_cpu_s")]
    if projected:
        measures.append(
            Measure(
                "cluster_projected",
                f"  projection for {cores} idle core{'s' if cores > 1 else ''} "
                f"(certified per CPU-s x {cores})",
                "certified/s",
                projected,
                baseline="baseline",
                vs_paper=True,
            )
        )
    measures.append(Measure("cluster_startup", "  LocalCluster start-up (once, not in rate)", "s", [startup]))
    measures.append(Measure("cluster_warmup", "  first sample_family (warm-up, not in rate)", "s", [warmup]))

    # 4. scoring and parsing throughput on gold plans
    for noise in (0.0, 1.0):
        inputs = scoring_inputs(noise, n_score, 99)
        tag = f"noise {noise:g}"
        answers = gold_answers(inputs)
        time_scoring(answers[:5], 0.0)
        res = run_rounds(reps, {f"score_plan {tag}": lambda r, i=answers: time_scoring(i, min_s)})
        rates, det = res[f"score_plan {tag}"]
        measures.append(
            Measure(
                f"score_{tag}", f"score_plan on gold plans ({tag})", "attempts/s", rates, extra={"runs": det}
            )
        )
        if noise == 0.0:
            noisy = noisy_inputs(inputs, 0.05, 7)
            res = run_rounds(reps, {"score noisy": lambda r, i=noisy: time_scoring(i, min_s)})
            rates, det = res["score noisy"]
            measures.append(
                Measure(
                    "score_noisy",
                    "score_plan on noisy answers, eps 0.05 (noise 0)",
                    "attempts/s",
                    rates,
                    extra={"runs": det},
                )
            )
            res = run_rounds(
                reps,
                {
                    "parse_general": lambda r, i=inputs: time_parsing(i, min_s, general=True),
                    "parse_plan": lambda r, i=inputs: time_parsing(i, min_s),
                },
            )
            rates, det = res["parse_general"]
            measures.append(
                Measure(
                    "parse_general",
                    "parse_plan_general on formatted gold plans (the reader without its fast path)",
                    "answers/s",
                    rates,
                    extra={"runs": det},
                )
            )
            rates, det = res["parse_plan"]
            measures.append(
                Measure(
                    "parse",
                    "parse_plan on formatted gold plans (fast path)",
                    "answers/s",
                    rates,
                    baseline="parse_general",
                    extra={"runs": det},
                )
            )

    measures.append(
        Measure(
            "paper",
            "reference: paper (~147k mazes/hour, laptop)",
            "mazes/s",
            [PAPER_RATE],
            baseline="baseline",
            vs_paper=True,
        )
    )

    goal_rate = next(m for m in measures if m.key == "in_process").median
    met = goal_rate >= GOAL_RATE
    print()
    print(
        f"horizonbench throughput: {ROWS}x{COLS} mazes, B={NUM_KEYS}, shuffle 1.0, noise 0 unless stated; "
        f"median of {reps} run{'s' if reps > 1 else ''}{' (--quick)' if args.quick else ''}; "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}"
    )
    print()
    print_table(measures)
    print()
    print(
        f"goal: >= {GOAL_RATE:,.0f} certified {ROWS}x{COLS} B={NUM_KEYS} instances per CPU-second, "
        f"one process (generate_shard): {'MET' if met else 'NOT MET'} ({goal_rate:,.0f}/CPU-s)"
    )

    cluster_others = [d["others_cores"] for d in cluster_det if "others_cores" in d]
    if cluster_others and projected and statistics.median(cluster_others) >= 0.25:
        print(
            f"note: other processes kept {statistics.median(cluster_others):.1f} of {cpu_count} cores busy "
            f"during the LocalCluster runs; the CPU-time projection for an idle machine is "
            f"{statistics.median(projected):,.0f}/s (a projection, not a measurement)."
        )

    if args.json:
        by_key = {m.key: m for m in measures}
        out = {
            "quick": args.quick,
            "repeat": reps,
            "workers": args.workers,
            "grid": [ROWS, COLS],
            "num_keys": NUM_KEYS,
            "machine": {
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "platform": platform.platform(),
            },
            "goal": {"rate": GOAL_RATE, "unit": "certified/CPU-s", "measured": goal_rate, "met": met},
            "others_cores_during_cluster": statistics.median(cluster_others) if cluster_others else None,
            "paper_rate": PAPER_RATE,
            "measures": [
                {
                    "key": m.key,
                    "label": m.label.strip(),
                    "unit": m.unit,
                    "median": m.median,
                    "min": min(m.samples),
                    "max": max(m.samples),
                    "samples": m.samples,
                    "ratio_vs_baseline": (
                        m.median / by_key[m.baseline].median if m.baseline in by_key else None
                    ),
                    "ratio_vs_paper": m.median / PAPER_RATE if m.vs_paper else None,
                    **m.extra,
                }
                for m in measures
            ],
        }
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=2, default=str)
            fh.write("\n")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
