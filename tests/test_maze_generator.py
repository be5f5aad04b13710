"""Tests for the maze generator: grid naming, Kruskal trees, rewind construction, the
key count (exact or at most), facts, noise and shuffle, certification and determinism."""

from __future__ import annotations

import re
from collections.abc import Callable

import networkx as nx
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from horizonbench.core.types import ParsedAnswer, Step
from horizonbench.datasets.maze import MazeFamily, MazeParams
from horizonbench.datasets.maze import facts as F
from horizonbench.datasets.maze.certificate import solve
from horizonbench.datasets.maze.facts import world_from_facts
from horizonbench.datasets.maze.family import MAZE_SCHEMA, NUM_KEYS_SHORT, gold_plan
from horizonbench.datasets.maze.generator import generate_maze
from horizonbench.datasets.maze.grid import column_letters, kruskal_tree, room_index, room_names
from horizonbench.datasets.maze.simulator import replay, score_plan
from horizonbench.datasets.shards import candidate_seed, generate_shard
from horizonbench.schemas.config import FamilySpec
from horizonbench.tasks.cluster import progress
from horizonbench.tasks.generate.instances import GenerationStats, sample_family

FAMILY = MazeFamily()
SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ROOM = r"([A-Z]+[0-9]+)"
TEMPLATES = {
    "open": re.compile(rf"^Room {ROOM} and {ROOM} are connected by an open door\.$"),
    "locked": re.compile(rf"^Room {ROOM} and {ROOM} are connected by a closed and locked door\.$"),
    "requires": re.compile(rf"^The locked door between {ROOM} and {ROOM} requires key ([0-9]+)\.$"),
    "key": re.compile(rf"^Key ([0-9]+) is in room {ROOM}\.$"),
    "bob": re.compile(rf"^Bob is in room {ROOM}\.$"),
    "alice": re.compile(rf"^Alice is in room {ROOM}\.$"),
}


def classify(fact: str) -> tuple[str, tuple[str, ...]]:
    hits = [(kind, m.groups()) for kind, pat in TEMPLATES.items() if (m := pat.match(fact))]
    assert len(hits) == 1, f"fact matches {len(hits)} templates: {fact!r}"
    return hits[0]


def test_templates_agree_with_facts_module() -> None:
    # the test's own copy of the six templates must render what facts.py renders
    samples = {
        "open": F.OPEN.format(a="A1", b="B1"),
        "locked": F.LOCKED.format(a="A1", b="B1"),
        "requires": F.REQUIRES.format(a="A1", b="B1", k=7),
        "key": F.KEY_AT.format(k=7, r="C3"),
        "bob": F.BOB_AT.format(r="AA12"),
        "alice": F.ALICE_AT.format(r="Z9"),
    }
    for kind, text in samples.items():
        assert classify(text)[0] == kind


# --- parameter strategies ------------------------------------------------------------


@st.composite
def maze_params(draw: st.DrawFn, max_side: int = 12) -> MazeParams:
    rows = draw(st.integers(2, max_side))
    cols = draw(st.integers(2, max_side))
    keys = draw(st.integers(0, 4))
    assume(rows * cols >= 2 * (keys + 1))
    return MazeParams(
        grid_rows=rows,
        grid_cols=cols,
        num_keys=keys,
        noise_ratio=draw(st.floats(0.0, 2.0, allow_nan=False)),
        shuffle_ratio=draw(st.floats(0.0, 1.0, allow_nan=False)),
        decoy_doors=draw(st.integers(0, 3)),
        num_keys_mode=draw(st.sampled_from(["exact", "at_most"])),
    )


SEEDS = st.integers(0, 2**63 - 1)


def make_row(params: MazeParams, seed: int, index: int = 0) -> dict:
    """The certified row of a candidate. In a hypothesis test, a candidate that exact
    mode rejects for its key count is skipped; anything else rejected fails the test."""
    cand = FAMILY.generate_candidate(params, seed, index)
    if cand.rejection == NUM_KEYS_SHORT and params.num_keys_mode == "exact":
        assume(False)
    assert cand.row is not None, f"rejected ({cand.rejection}) params={params!r} seed={seed}"
    assert cand.rejection is None
    return cand.row


def with_(params: MazeParams, **changes: object) -> MazeParams:
    return MazeParams(**{**params.model_dump(), **changes})


# --- grid naming ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("col", "name"),
    [
        (0, "A"),
        (1, "B"),
        (25, "Z"),
        (26, "AA"),
        (27, "AB"),
        (51, "AZ"),
        (52, "BA"),
        (701, "ZZ"),
        (702, "AAA"),
    ],
)
def test_column_letters(col: int, name: str) -> None:
    assert column_letters(col) == name


def test_column_letters_rejects_negative() -> None:
    with pytest.raises(ValueError):
        column_letters(-1)


@given(st.integers(0, 20_000))
@settings(max_examples=200, deadline=None)
def test_column_letters_is_bijective_base26(col: int) -> None:
    name = column_letters(col)
    assert re.fullmatch(r"[A-Z]+", name)
    value = 0
    for ch in name:
        value = value * 26 + (ord(ch) - ord("A") + 1)
    assert value - 1 == col
    if col > 0:
        prev = column_letters(col - 1)
        assert (len(prev), prev) < (len(name), name)


def test_room_names() -> None:
    names = room_names(3, 30)
    assert len(names) == 90 == len(set(names))
    assert "AD3" in names
    assert names[0] == "A1" and names[29] == "AD1" and names[30] == "A2" and names[-1] == "AD3"
    idx = room_index(3, 30)
    assert all(idx[n] == i for i, n in enumerate(names))


# --- Kruskal spanning tree -----------------------------------------------------------------


@given(st.integers(1, 14), st.integers(1, 14), st.integers(0, 2**32))
@settings(max_examples=150, deadline=None)
def test_kruskal_tree_is_spanning_tree(rows: int, cols: int, seed: int) -> None:
    assume(rows * cols >= 2)
    u, v = kruskal_tree(rows, cols, np.random.default_rng(seed))
    n = rows * cols
    assert u.shape == v.shape == (n - 1,)
    assert np.all(u < v)
    g = nx.Graph()
    g.add_nodes_from(range(n))
    for a, b in zip(u.tolist(), v.tolist(), strict=True):
        ra, ca = divmod(a, cols)
        rb, cb = divmod(b, cols)
        assert abs(ra - rb) + abs(ca - cb) == 1, "tree edge is not a grid wall"
        g.add_edge(a, b)
    assert g.number_of_edges() == n - 1
    assert nx.is_tree(g)
    # deterministic in the generator state
    u2, v2 = kruskal_tree(rows, cols, np.random.default_rng(seed))
    assert np.array_equal(u, u2) and np.array_equal(v, v2)


def test_kruskal_trees_vary_with_seed() -> None:
    trees = {
        tuple(zip(*(a.tolist() for a in kruskal_tree(6, 6, np.random.default_rng(s))), strict=True))
        for s in range(20)
    }
    assert len(trees) > 15


# --- generated instances are certified -------------------------------------------------------


def check_gold_structure(row: dict, params: MazeParams) -> None:
    gold = gold_plan(row)
    assert row["solution_length"] == len(gold) == len(row["solution"])
    assert gold[0] == Step("start", row["start_room"])
    assert gold[-1] == Step("rescue", "Alice")
    assert all(s.action != "start" for s in gold[1:])
    assert all(s.action != "rescue" for s in gold[:-1])
    for i, s in enumerate(gold):
        if s.action == "use_key":
            assert gold[i + 1].action == "unlock_and_open_door_to"
            # the door opened is the one walked through next
            assert gold[i + 2] == Step("move_to", gold[i + 1].arg)
        if s.action == "unlock_and_open_door_to":
            assert gold[i - 1].action == "use_key"
    assert row["num_keys"] <= params.num_keys == row["target_num_keys"]
    if params.num_keys_mode == "exact":
        assert row["num_keys"] == params.num_keys
    assert sum(s.action == "pick_up_key" for s in gold) == row["num_keys"]
    assert sum(s.action == "use_key" for s in gold) == row["num_keys"]
    assert row["optimal_plan_count"] >= 1
    names = set(room_names(params.grid_rows, params.grid_cols))
    assert row["start_room"] in names and row["goal_room"] in names
    assert row["start_room"] != row["goal_room"]


@given(maze_params(), SEEDS)
@SETTINGS
def test_candidate_is_certified_and_gold_is_optimal(params: MazeParams, seed: int) -> None:
    row = make_row(params, seed, index=3)
    check_gold_structure(row, params)
    facts = row["facts"]
    gold = gold_plan(row)
    sc = score_plan(facts, gold, ParsedAnswer(gold))
    assert sc.success and sc.valid and sc.exact_match
    assert sc.violation is None and sc.first_violation_step is None
    assert sc.progress_ratio == 1.0 and sc.precision == 1.0 and sc.recall == 1.0
    assert sc.plan_length == len(gold)
    world = world_from_facts(facts)
    sol = solve(world)
    assert sol.length == row["solution_length"]
    assert sol.count == row["optimal_plan_count"]
    assert replay(world, gold) is None
    assert row["candidate_index"] == 3 and row["seed"] == seed
    assert row["family"] == "maze" and row["instance_id"] == f"maze-{seed:016x}"
    assert FAMILY.difficulty(row) == row["solution_length"]
    assert row["supporting_facts"] + row["distracting_facts"] == len(facts)
    assert row["noise_ratio"] == pytest.approx(row["distracting_facts"] / row["supporting_facts"])
    # the row fits the declared Arrow schema
    table = pa.Table.from_pylist([row], schema=MAZE_SCHEMA)
    assert table.num_rows == 1


def test_only_the_key_count_rejects_over_many_small_grids() -> None:
    # at_most never rejects (the certificate always agrees with the construction);
    # exact rejects exactly the candidates whose rewind placed fewer keys, and keeps
    # the others unchanged
    rejections = []
    short = 0
    rng = np.random.default_rng(123)
    for i in range(400):
        rows, cols = (int(x) for x in rng.integers(2, 13, size=2))
        keys = int(rng.integers(0, 5))
        if rows * cols < 2 * (keys + 1):
            continue
        p = MazeParams(
            grid_rows=rows,
            grid_cols=cols,
            num_keys=keys,
            noise_ratio=float(rng.uniform(0, 2)),
            shuffle_ratio=float(rng.uniform(0, 1)),
            decoy_doors=int(rng.integers(0, 4)),
            num_keys_mode="at_most",
        )
        loose = FAMILY.generate_candidate(p, i, i)
        exact = FAMILY.generate_candidate(with_(p, num_keys_mode="exact"), i, i)
        if loose.row is None:
            rejections.append((loose.rejection, p, i))
            continue
        if loose.row["num_keys"] < keys:
            short += 1
            assert exact == type(exact)(None, NUM_KEYS_SHORT)
        else:
            assert exact.row == loose.row and exact.rejection is None
    assert rejections == []
    assert short > 0  # small grids do wall the rewind in: the comparison saw both cases


@pytest.mark.parametrize(("keys", "seed"), [(0, 1), (2, 2), (4, 3), (8, 4), (12, 5)])
def test_large_grid_candidates(keys: int, seed: int) -> None:
    params = MazeParams(grid_rows=40, grid_cols=40, num_keys=keys, noise_ratio=1.0, shuffle_ratio=0.5)
    # with many keys even a 40x40 rewind is often walled in early (about 2 in 3 at B = 8,
    # 19 in 20 at B = 12): exact mode rejects those, so take the first seed it keeps
    cands = (FAMILY.generate_candidate(params, s, 0) for s in range(seed, seed + 200))
    row = next(c.row for c in cands if c.rejection != NUM_KEYS_SHORT)
    assert row is not None and row["num_keys"] == keys
    check_gold_structure(row, params)
    gold = gold_plan(row)
    sc = score_plan(row["facts"], gold, ParsedAnswer(gold))
    assert sc.success and sc.exact_match and sc.progress_ratio == 1.0
    assert solve(world_from_facts(row["facts"])).length == len(gold)
    # the pool of a 40x40 maze is far larger than the supporting facts
    assert row["distracting_facts"] == row["supporting_facts"]


def test_keys_reach_target_on_roomy_grids() -> None:
    # the rewind construction can stop early only when a region is a single cell;
    # on roomy grids it usually places all B doors
    p = MazeParams(grid_rows=12, grid_cols=12, num_keys=3, num_keys_mode="at_most")
    got = [make_row(p, s)["num_keys"] for s in range(40)]
    assert sum(k == 3 for k in got) >= 30


# --- the key count: exact (default) or at most ------------------------------------------------


def test_num_keys_mode_is_exact_by_default_and_validated() -> None:
    assert MazeParams(grid_rows=5, grid_cols=5).num_keys_mode == "exact"
    assert MazeParams(grid_rows=5, grid_cols=5, num_keys_mode="at_most").num_keys_mode == "at_most"
    with pytest.raises(ValueError):
        MazeParams(grid_rows=5, grid_cols=5, num_keys_mode="about")


@given(st.integers(2, 9), st.integers(2, 9), st.integers(0, 6), SEEDS)
@settings(max_examples=300, deadline=None)
def test_exact_mode_keeps_only_the_asked_number_of_keys(rows: int, cols: int, keys: int, seed: int) -> None:
    assume(rows * cols >= 2 * (keys + 1))
    exact = MazeParams(grid_rows=rows, grid_cols=cols, num_keys=keys)
    cand = FAMILY.generate_candidate(exact, seed, 0)
    loose = FAMILY.generate_candidate(with_(exact, num_keys_mode="at_most"), seed, 0)
    assert loose.row is not None  # at_most keeps every certified maze
    if cand.row is None:
        # rejected for its key count, and only when the rewind really stopped short
        assert cand.rejection == NUM_KEYS_SHORT
        assert loose.row["num_keys"] < keys
    else:
        # the effective B (doors on the gold path, keys picked up) is the config's
        gold = gold_plan(cand.row)
        assert cand.row["num_keys"] == cand.row["target_num_keys"] == keys
        assert sum(s.action == "pick_up_key" for s in gold) == keys
        assert sum(s.action == "unlock_and_open_door_to" for s in gold) == keys
        assert cand.row == loose.row


def test_at_most_mode_keeps_fewer_keys_on_small_grids() -> None:
    exact = MazeParams(grid_rows=3, grid_cols=3, num_keys=3)
    loose = with_(exact, num_keys_mode="at_most")
    got = [make_row(loose, s)["num_keys"] for s in range(60)]
    assert min(got) < 3 and max(got) == 3 and all(k >= 1 for k in got)
    rejected = [FAMILY.generate_candidate(exact, s, 0).rejection for s in range(60)]
    assert [r == NUM_KEYS_SHORT for r in rejected] == [k < 3 for k in got]


class _InlineClient:
    """Just enough of a Dask client for ``sample_family``: runs each shard when submitted."""

    class _Done:
        def __init__(self, value: object) -> None:
            self.value = value

        def result(self) -> object:
            return self.value

        def cancel(self) -> None:
            pass

    def submit(self, fn: Callable[..., object], *args: object, pure: bool = True) -> _Done:
        return self._Done(fn(*args))


def test_key_count_rejections_are_counted_by_the_generate_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(progress.ENABLED, "value", False)
    params = {"grid_rows": 4, "grid_cols": 4, "num_keys": 3}
    sampling = {"count": 30, "shard_size": 16, "max_candidates": 5000}
    spec = FamilySpec.model_validate({"params": params, "sampling": sampling})
    kept: list[dict] = []
    selector = sample_family(_InlineClient(), "maze", spec, root_seed=9, window=2, sink=_collect(kept))
    # the same candidates, one by one: the short ones are exactly those counted
    short = sum(
        FAMILY.generate_candidate(MazeParams(**params), candidate_seed(9, "maze", i), i).rejection
        == NUM_KEYS_SHORT
        for i in range(selector.considered)
    )
    assert short > 0
    assert dict(selector.rejections) == {NUM_KEYS_SHORT: short}
    assert selector.considered == selector.certified + short and selector.kept == len(kept) == 30
    assert all(row["num_keys"] == 3 for row in kept)
    stats = GenerationStats("maze", selector.kept, selector.considered, selector.certified)
    stats.rejections = dict(selector.rejections)
    assert stats.as_dict()["rejections"] == {NUM_KEYS_SHORT: short}
    # at_most: nothing rejected, and some kept instances have fewer keys
    loose = FamilySpec.model_validate(
        {"params": {**params, "num_keys_mode": "at_most"}, "sampling": sampling}
    )
    kept = []
    selector = sample_family(_InlineClient(), "maze", loose, root_seed=9, window=2, sink=_collect(kept))
    assert not selector.rejections and min(r["num_keys"] for r in kept) < 3


def _collect(rows: list[dict]) -> Callable[[pa.Table], None]:
    return lambda table: rows.extend(table.to_pylist())


# --- noise -----------------------------------------------------------------------------


def connection_pairs(facts: list[str]) -> list[frozenset[str]]:
    out = []
    for f in facts:
        kind, g = classify(f)
        if kind in ("open", "locked"):
            out.append(frozenset(g[:2]))
    return out


@given(maze_params(), SEEDS, st.floats(0.01, 3.0, allow_nan=False))
@SETTINGS
def test_noise_never_changes_the_optimal_plan(params: MazeParams, seed: int, x: float) -> None:
    clean = make_row(with_(params, noise_ratio=0.0), seed)
    noisy = make_row(with_(params, noise_ratio=x), seed)
    assert noisy["solution"] == clean["solution"]
    assert noisy["solution_length"] == clean["solution_length"]
    assert noisy["optimal_plan_count"] == clean["optimal_plan_count"]
    assert noisy["start_room"] == clean["start_room"] and noisy["goal_room"] == clean["goal_room"]
    assert set(clean["facts"]) <= set(noisy["facts"])
    assert clean["distracting_facts"] == 0
    supporting = clean["supporting_facts"]
    assert len(clean["facts"]) == supporting == noisy["supporting_facts"]
    # distractor pool: every off-path tree edge, plus per decoy door a "requires" fact
    # and a key location
    n = params.grid_rows * params.grid_cols
    off_path = (n - 1) - len(connection_pairs(clean["facts"]))
    pool = off_path + 2 * min(params.decoy_doors, off_path)
    expected = min(int(round(x * supporting)), pool)
    assert noisy["distracting_facts"] == expected
    assert len(noisy["facts"]) == supporting + expected
    assert len(set(noisy["facts"])) == len(noisy["facts"])


@given(maze_params(), SEEDS, st.floats(0.0, 3.0, allow_nan=False), st.floats(0.0, 3.0, allow_nan=False))
@SETTINGS
def test_noise_levels_are_nested(params: MazeParams, seed: int, a: float, b: float) -> None:
    lo, hi = sorted((a, b))
    facts_lo = make_row(with_(params, noise_ratio=lo), seed)["facts"]
    facts_hi = make_row(with_(params, noise_ratio=hi), seed)["facts"]
    assert set(facts_lo) <= set(facts_hi)


# --- shuffle -------------------------------------------------------------------------


@given(maze_params(), SEEDS, st.floats(0.0, 1.0, allow_nan=False))
@SETTINGS
def test_shuffle_changes_order_only(params: MazeParams, seed: int, s: float) -> None:
    base = make_row(with_(params, shuffle_ratio=0.0), seed)
    shuf = make_row(with_(params, shuffle_ratio=s), seed)
    assert sorted(base["facts"]) == sorted(shuf["facts"])
    assert base["solution"] == shuf["solution"]
    assert base["shuffle_ratio"] == 0.0
    n = len(base["facts"])
    k = int(round(s * n))
    expected = k if k >= 2 else 0
    moved = sum(a != b for a, b in zip(base["facts"], shuf["facts"], strict=True))
    assert moved == expected
    assert shuf["shuffle_ratio"] == pytest.approx(expected / n)
    assert shuf["target_shuffle_ratio"] == s


@given(maze_params(), SEEDS)
@SETTINGS
def test_unshuffled_listing_is_in_path_order(params: MazeParams, seed: int) -> None:
    row = make_row(with_(params, shuffle_ratio=0.0, noise_ratio=0.0), seed)
    facts = row["facts"]
    gold = gold_plan(row)
    assert facts[0] == f"Bob is in room {row['start_room']}."
    assert facts[-1] == f"Alice is in room {row['goal_room']}."
    # connection facts appear in the order the gold walk first crosses them
    walk_edges: list[frozenset[str]] = []
    here = gold[0].arg
    for step in gold[1:]:
        if step.action == "move_to":
            e = frozenset((here, step.arg))
            if e not in walk_edges:
                walk_edges.append(e)
            here = step.arg
    assert connection_pairs(facts) == walk_edges
    # key facts come in pick-up order
    keys_listed = [classify(f)[1][0] for f in facts if classify(f)[0] == "key"]
    assert keys_listed == [s.arg for s in gold if s.action == "pick_up_key"]


# --- facts are well formed and true ----------------------------------------------------------


@given(maze_params(), SEEDS)
@SETTINGS
def test_facts_are_well_formed_and_true(params: MazeParams, seed: int) -> None:
    rows, cols = params.grid_rows, params.grid_cols
    row = make_row(params, seed)
    names = room_index(rows, cols)
    # the maze is built from stream 0 of the seed, Kruskal first
    tu, tv = kruskal_tree(rows, cols, np.random.default_rng([seed, 0]))
    tree = {
        frozenset((room_names(rows, cols)[a], room_names(rows, cols)[b]))
        for a, b in zip(tu.tolist(), tv.tolist(), strict=True)
    }

    kinds: dict[str, int] = {}
    conn: dict[frozenset[str], str] = {}
    requires: dict[frozenset[str], str] = {}
    key_room: dict[str, str] = {}
    for fact in row["facts"]:
        kind, g = classify(fact)
        kinds[kind] = kinds.get(kind, 0) + 1
        rooms_here = [x for x in g if not x.isdigit()]
        for r in rooms_here:
            assert r in names, f"{r} is not a room of a {rows}x{cols} grid"
        if kind in ("open", "locked"):
            e = frozenset(g[:2])
            assert len(e) == 2
            assert e in tree, f"connection {sorted(e)} is not an edge of the Kruskal tree"
            assert e not in conn, f"door {sorted(e)} described twice"
            conn[e] = kind
        elif kind == "requires":
            e = frozenset(g[:2])
            assert e in tree
            assert e not in requires
            requires[e] = g[2]
        elif kind == "key":
            assert g[0] not in key_room, f"key {g[0]} is in two rooms"
            key_room[g[0]] = g[1]
    assert kinds["bob"] == 1 and kinds["alice"] == 1
    assert f"Bob is in room {row['start_room']}." in row["facts"]
    assert f"Alice is in room {row['goal_room']}." in row["facts"]
    # a door that requires a key is locked wherever its connection is shown
    for e in requires:
        assert conn.get(e, "locked") == "locked"
    # every door requires a different key
    assert len(set(requires.values())) == len(requires)
    # every door on the gold walk is shown, with its key and the key's room
    gold = gold_plan(row)
    for i, s in enumerate(gold):
        if s.action == "use_key":
            door_to = gold[i + 1].arg
            here = next(g.arg for g in reversed(gold[:i]) if g.action in ("start", "move_to"))
            e = frozenset((here, door_to))
            assert conn[e] == "locked" and requires[e] == s.arg
            assert s.arg in key_room


def test_distractors_are_true_with_full_noise() -> None:
    # maximal noise shows the whole pool: the listed connections are exactly the tree
    for seed in range(30):
        params = MazeParams(
            grid_rows=5, grid_cols=6, num_keys=2, noise_ratio=20.0, decoy_doors=2, num_keys_mode="at_most"
        )
        row = make_row(params, seed)
        tu, tv = kruskal_tree(5, 6, np.random.default_rng([seed, 0]))
        names = room_names(5, 6)
        tree = {frozenset((names[a], names[b])) for a, b in zip(tu.tolist(), tv.tolist(), strict=True)}
        assert set(connection_pairs(row["facts"])) == tree
        assert len(connection_pairs(row["facts"])) == len(tree) == 29
        locked = sum(classify(f)[0] == "locked" for f in row["facts"])
        reqs = sum(classify(f)[0] == "requires" for f in row["facts"])
        keys = sum(classify(f)[0] == "key" for f in row["facts"])
        decoys = locked - row["num_keys"]
        assert 0 <= decoys <= 2
        assert reqs == locked and keys == locked


# --- determinism -----------------------------------------------------------------------


@given(maze_params(), SEEDS, st.integers(0, 10**6))
@settings(max_examples=60, deadline=None)
def test_generation_is_deterministic(params: MazeParams, seed: int, index: int) -> None:
    a = FAMILY.generate_candidate(params, seed, index)
    b = MazeFamily().generate_candidate(MazeParams(**params.model_dump()), seed, index)
    assert a == b
    assert a.row is not None or (a.rejection == NUM_KEYS_SHORT and params.num_keys_mode == "exact")


def test_generate_maze_is_pure() -> None:
    a = generate_maze(7, 9, 3, 1.5, 0.7, 2, 42)
    b = generate_maze(7, 9, 3, 1.5, 0.7, 2, 42)
    assert a == b
    c = generate_maze(7, 9, 3, 1.5, 0.7, 2, 43)
    assert c != a


def test_different_seeds_give_different_mazes() -> None:
    params = MazeParams(grid_rows=8, grid_cols=8, num_keys=2, noise_ratio=0.5, num_keys_mode="at_most")
    facts = {tuple(make_row(params, s)["facts"]) for s in range(30)}
    assert len(facts) == 30


def test_generate_shard_is_deterministic() -> None:
    params = {"grid_rows": 6, "grid_cols": 7, "num_keys": 2, "noise_ratio": 0.5, "shuffle_ratio": 0.5}
    a = generate_shard("maze", params, 7, 0, 25)
    b = generate_shard("maze", params, 7, 0, 25)
    assert a == b
    assert [t[0] for t in a] == list(range(25))
    for index, length, row, rejection in a:
        if rejection == NUM_KEYS_SHORT:
            assert row is None and length is None
            continue
        assert rejection is None and row is not None
        assert row["candidate_index"] == index
        assert row["seed"] == candidate_seed(7, "maze", index)
        assert length == row["solution_length"]
    # a different root seed changes the mazes
    c = generate_shard("maze", params, 8, 0, 25)
    assert [t[2] and t[2]["facts"] for t in c] != [t[2] and t[2]["facts"] for t in a]


def test_generate_shard_keep_lengths_drops_rows_but_keeps_lengths() -> None:
    params = {"grid_rows": 6, "grid_cols": 6, "num_keys": 1}
    full = generate_shard("maze", params, 3, 0, 40)
    lengths = [t[1] for t in full]
    lo, hi = sorted(lengths)[10], sorted(lengths)[30]
    cut = generate_shard("maze", params, 3, 0, 40, wanted=range(lo, hi))
    assert [t[1] for t in cut] == lengths
    for (_, length, row, rej), (_, _, full_row, _) in zip(cut, full, strict=True):
        assert rej is None
        if lo <= length < hi:
            assert row == full_row
        else:
            assert row is None


def test_candidate_seed_ignores_noise_and_shuffle() -> None:
    # the same root seed gives the same base maze at every noise / shuffle level
    base = {"grid_rows": 6, "grid_cols": 6, "num_keys": 2}
    a = generate_shard("maze", {**base, "noise_ratio": 0.0, "shuffle_ratio": 0.0}, 11, 0, 10)
    b = generate_shard("maze", {**base, "noise_ratio": 1.0, "shuffle_ratio": 1.0}, 11, 0, 10)
    for (_, la, ra, rej_a), (_, lb, rb, rej_b) in zip(a, b, strict=True):
        assert la == lb and rej_a == rej_b  # also the key count: it is the base maze's
        if ra is None:
            continue
        assert ra["solution"] == rb["solution"]
        assert set(ra["facts"]) <= set(rb["facts"])
