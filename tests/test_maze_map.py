"""Tests for the maze violation maps: geometry read back from the SVG itself.

The room centres are recovered from the rooms layer (one square per room, row-major),
and every other layer is checked against them, so the tests do not share the layout
arithmetic of the module under test. Expected model walks are recomputed here from
the plan text alone (before the first violation every move is legal, so the agent is
where the last ``move_to`` said).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from functools import cache

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from horizonbench.core.types import ParsedAnswer, Score, Step
from horizonbench.datasets.maze import MazeFamily, MazeParams
from horizonbench.datasets.maze.family import gold_plan
from horizonbench.datasets.maze.grid import room_names
from horizonbench.datasets.maze.simulator import format_plan
from horizonbench.reports.maze_map import room_cell, violation_map_for_answer, violation_map_svg

FAMILY = MazeFamily()
HOSTILE = "</svg><script>alert(1)</script> & \"double\" 'single' <b>"
SIZE_CAP = 150_000

Point = tuple[float, float]


@cache
def make_row(rows: int, cols: int, keys: int = 2, noise: float = 1.0, seed: int = 0, decoys: int = 2) -> dict:
    """A certified instance (at_most keys: the map is under test, not the key count)."""
    params = MazeParams(
        grid_rows=rows,
        grid_cols=cols,
        num_keys=keys,
        noise_ratio=noise,
        decoy_doors=decoys,
        num_keys_mode="at_most",
    )
    cand = FAMILY.generate_candidate(params, seed, 0)
    assert cand.row is not None, cand.rejection
    return cand.row


def score(row: dict, plan: tuple[Step, ...] | None) -> Score:
    return FAMILY.score(row, ParsedAnswer(plan, None if plan is not None else "no plan found"))


# --- reading the SVG back -------------------------------------------------------------------


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == "svg"
    return root


def layer(root: ET.Element, kind: str) -> ET.Element | None:
    return root.find(f".//*[@data-kind='{kind}']")


def room_centres(root: ET.Element, rows: int, cols: int) -> dict[str, Point]:
    """Room name -> centre, from the rooms layer: one closed square per room, row-major.

    Also checks the squares form the grid: one column x per column, one row y per row,
    increasing left to right and top to bottom.
    """
    rooms = layer(root, "rooms")
    assert rooms is not None and rooms.tag == "path"
    squares = re.findall(r"M(-?\d+) (-?\d+)h(\d+)v(\d+)h-(\d+)z", rooms.attrib["d"])
    assert len(squares) == rows * cols
    assert "".join(f"M{x} {y}h{a}v{b}h-{c}z" for x, y, a, b, c in squares) == rooms.attrib["d"]
    centres = [(int(x) + int(a) / 2, int(y) + int(b) / 2) for x, y, a, b, _ in squares]
    grid = np.array(centres).reshape(rows, cols, 2)
    assert (grid[:, :, 0] == grid[0:1, :, 0]).all() and (grid[:, :, 1] == grid[:, 0:1, 1]).all()
    assert (np.diff(grid[0, :, 0]) > 0).all() and (np.diff(grid[:, 0, 1]) > 0).all()
    return dict(zip(room_names(rows, cols), centres, strict=True))


def polyline(root: ET.Element, kind: str) -> list[Point] | None:
    el = layer(root, kind)
    if el is None:
        return None
    assert el.tag == "polyline"
    return [(float(x), float(y)) for x, y in (p.split(",") for p in el.attrib["points"].split())]


def marker(root: ET.Element) -> tuple[Point, str, int] | None:
    """Centre, room and step of the first-violation ring, if drawn."""
    g = layer(root, "violation")
    if g is None:
        return None
    ring = g.find("circle")
    assert ring is not None
    return (
        (float(ring.attrib["cx"]), float(ring.attrib["cy"])),
        g.attrib["data-room"],
        int(g.attrib["data-step"]),
    )


def all_text(root: ET.Element) -> str:
    return " ".join("".join(el.itertext()) for el in root)


def dedup(names: list[str]) -> list[str]:
    return [n for i, n in enumerate(names) if i == 0 or names[i - 1] != n]


def gold_rooms(row: dict) -> list[str]:
    return [s.arg for s in gold_plan(row) if s.action in ("start", "move_to")]


def expected_walk(plan: tuple[Step, ...], upto: int) -> list[str]:
    """The rooms the agent passes through with the actions before index ``upto``."""
    rooms = [s.arg.strip().upper() for s in plan[:upto] if s.action in ("start", "move_to")]
    return dedup(rooms)


# --- the grid, the gold plan ----------------------------------------------------------------


@pytest.mark.parametrize(("rows", "cols"), [(2, 2), (3, 7), (12, 12), (9, 30)])
def test_one_marker_per_room_and_gold_path_through_the_gold_rooms(rows: int, cols: int) -> None:
    row = make_row(rows, cols, keys=1, seed=rows * 100 + cols)
    root = parse(violation_map_svg(row, None, None))
    assert root.attrib["data-rows"] == str(rows) and root.attrib["data-cols"] == str(cols)
    centres = room_centres(root, rows, cols)
    assert polyline(root, "gold-path") == [centres[n] for n in gold_rooms(row)]


def test_room_names_decode_to_grid_cells() -> None:
    names = room_names(30, 30)
    assert [room_cell(n) for n in names] == [(r, c) for r in range(30) for c in range(30)]
    for bad in ("", "a1", "A0", "1A", "A-1", "<b>", "A1 "):
        assert room_cell(bad) is None


def test_passages_are_the_ones_the_facts_state() -> None:
    """Every stated connection (distractors included) is drawn, and nothing else."""
    row = make_row(8, 8, keys=2, noise=3.0, seed=7)
    root = parse(violation_map_svg(row, None, None))
    centres = room_centres(root, 8, 8)
    d = layer(root, "passages").attrib["d"]  # type: ignore[union-attr]
    drawn = set()
    for x, y, hv, n in re.findall(r"M(\d+) (\d+)([hv])(\d+)", d):
        x, y, n = int(x), int(y), int(n)
        end = (x + n, y) if hv == "h" else (x, y + n)
        drawn.add(frozenset({(float(x), float(y)), (float(end[0]), float(end[1]))}))
    stated = set()
    for fact in row["facts"]:
        m = re.fullmatch(
            r"Room (\S+) and (\S+) are connected by (?:an open|a closed and locked) door\.", fact
        )
        if m:
            stated.add(frozenset({centres[m.group(1)], centres[m.group(2)]}))
    assert drawn == stated and len(stated) > row["solution_length"] // 3
    locked = sum(1 for f in row["facts"] if "closed and locked" in f)
    assert len(layer(root, "doors").findall("g")) == locked  # type: ignore[union-attr]
    keys = {f for f in row["facts"] if f.startswith("Key ")}
    assert len(layer(root, "keys").findall("g")) == len(keys)  # type: ignore[union-attr]


# --- the model's plan and the first violation ---------------------------------------------------


def failing_attempts() -> list[tuple[dict, str, Score]]:
    """Wrong offline answers (noisy executor and random walker) with their scores."""
    out = []
    for i, (rows, cols) in enumerate([(6, 6), (8, 10), (12, 12)]):
        row = make_row(rows, cols, keys=2, seed=10 + i)
        for t in range(40):
            for kind, eps in (("noisy", 0.1), ("random", 0.0)):
                text = FAMILY.offline_answer(row, kind, np.random.default_rng([i, t]), eps)
                sc = FAMILY.score(row, FAMILY.parse_answer(text))
                if not sc.success:
                    out.append((row, text, sc))
    return out


FAILING = failing_attempts()


def test_failing_attempts_are_varied() -> None:
    assert len({sc.violation for _, _, sc in FAILING}) >= 3
    assert any(sc.first_violation_step >= 5 for _, _, sc in FAILING)  # type: ignore[operator]


@pytest.mark.parametrize("case", range(0, len(FAILING), max(1, len(FAILING) // 40)))
def test_model_path_stops_at_the_first_violation(case: int) -> None:
    row, text, sc = FAILING[case]
    plan = FAMILY.parse_answer(text).plan
    assert plan is not None and sc.first_violation_step is not None
    fvs = sc.first_violation_step
    root = parse(violation_map_for_answer(row, text, fvs, violation=sc.violation))
    centres = room_centres(root, row["grid_rows"], row["grid_cols"])
    walk = expected_walk(plan, fvs)
    got = polyline(root, "model-path")
    assert got == ([centres[n] for n in walk] if walk else None)
    # the ring sits where the agent stands when it attempts step fvs: the last room of
    # the walk, or the start room when the very first action is wrong
    here = walk[-1] if walk else row["start_room"]
    assert marker(root) == (centres[here], here, fvs)
    assert f"first violation at step {fvs} (0 = start): {sc.violation}" in all_text(root)
    assert sc.violation in root.find("desc").text  # type: ignore[union-attr,operator]


def test_success_draws_the_whole_plan_and_no_marker() -> None:
    row = make_row(10, 10, keys=3, seed=3)
    gold = gold_plan(row)
    assert score(row, gold).success
    root = parse(violation_map_for_answer(row, "Solution: " + format_plan(gold), None))
    centres = room_centres(root, 10, 10)
    assert (
        polyline(root, "model-path") == polyline(root, "gold-path") == [centres[n] for n in gold_rooms(row)]
    )
    assert marker(root) is None and layer(root, "attempt") is None
    assert "no violation" in all_text(root)


def test_suboptimal_detour_is_marked_where_it_leaves_the_optimal_plans() -> None:
    row = make_row(8, 8, keys=1, seed=5)
    gold = gold_plan(row)
    # step back through the passage just used, and return: legal, two moves too many
    i = next(i for i, s in enumerate(gold) if s.action == "move_to" and i > 1)
    prev = [s.arg for s in gold[:i] if s.action in ("start", "move_to")][-1]
    plan = gold[: i + 1] + (Step("move_to", prev), gold[i]) + gold[i + 1 :]
    sc = score(row, plan)
    assert sc.valid and sc.violation == "suboptimal" and sc.first_violation_step == i + 1
    root = parse(violation_map_svg(row, plan, sc.first_violation_step, violation=sc.violation))
    centres = room_centres(root, 8, 8)
    assert polyline(root, "model-path") == [centres[n] for n in expected_walk(plan, i + 1)]
    assert marker(root) == (centres[gold[i].arg], gold[i].arg, i + 1)
    # the legal rest of the plan is drawn too, from the ring to the goal
    rest = polyline(root, "model-rest")
    assert rest is not None and rest[0] == centres[gold[i].arg] and rest[-1] == centres[row["goal_room"]]
    assert rest[1] == centres[prev]


def test_bad_start_rings_the_start_room() -> None:
    row = make_row(6, 6, keys=1, seed=2)
    gold = gold_plan(row)
    elsewhere = next(n for n in room_names(6, 6) if n != row["start_room"])
    plan = (Step("start", elsewhere),) + gold[1:]
    sc = score(row, plan)
    assert sc.violation == "bad_start" and sc.first_violation_step == 0
    root = parse(violation_map_svg(row, plan, 0, violation=sc.violation))
    centres = room_centres(root, 6, 6)
    assert polyline(root, "model-path") is None
    assert marker(root) == (centres[row["start_room"]], row["start_room"], 0)


def test_missing_rescue_rings_the_last_room() -> None:
    row = make_row(6, 6, keys=1, seed=4)
    plan = gold_plan(row)[:-1]
    sc = score(row, plan)
    assert sc.violation == "no_rescue" and sc.first_violation_step == len(plan)
    root = parse(violation_map_svg(row, plan, sc.first_violation_step))
    centres = room_centres(root, 6, 6)
    assert polyline(root, "model-path") == [centres[n] for n in gold_rooms(row)]
    assert marker(root) == (centres[row["goal_room"]], row["goal_room"], len(plan))
    assert "no rescue at the end" in all_text(root)


def test_attempted_move_is_drawn_to_its_target() -> None:
    row = make_row(6, 6, keys=1, seed=4)
    gold = gold_plan(row)
    far = next(n for n in room_names(6, 6)[::-1] if n not in gold_rooms(row)[:2])
    plan = gold[:1] + (Step("move_to", far),)
    sc = score(row, plan)
    assert sc.violation == "non_adjacent_move" and sc.first_violation_step == 1
    root = parse(violation_map_svg(row, plan, 1))
    centres = room_centres(root, 6, 6)
    target = layer(root, "attempt").find("circle")  # type: ignore[union-attr]
    assert (float(target.attrib["cx"]), float(target.attrib["cy"])) == centres[far]  # type: ignore[union-attr]


def test_unreadable_answer_draws_maze_and_gold_only() -> None:
    row = make_row(6, 6, keys=1, seed=1)
    for text in ("I am not sure.", "", "[('start'"):
        root = parse(violation_map_for_answer(row, text, None, violation="invalid_output"))
        assert "answer not readable as a plan" in all_text(root)
        assert polyline(root, "model-path") is None and marker(root) is None
        assert polyline(root, "gold-path") is not None


def test_unlocatable_steps_end_the_path_without_crashing() -> None:
    row = make_row(6, 6, keys=0, seed=8)
    gold = gold_plan(row)
    assert gold[1].action == "move_to"
    for odd in ("ZZ999", "A0", "<script>", "", "G1", "key 5"):  # G1 is one column off the grid
        plan = gold[:2] + (Step("move_to", odd),) + gold[2:]
        # the caller's step index may be missing, right, late, beyond the plan or negative
        for fvs, upto in ((None, 2), (2, 2), (3, 2), (999, 2), (-4, 0)):
            root = parse(violation_map_svg(row, plan, fvs))
            centres = room_centres(root, 6, 6)
            walk = expected_walk(plan, upto)
            assert polyline(root, "model-path") == ([centres[n] for n in walk] if walk else None)
            assert layer(root, "attempt") is None  # an unknown target has nowhere to be drawn
            if fvs is None:
                assert marker(root) is None
            else:
                assert marker(root)[1] == (walk[-1] if walk else row["start_room"])  # type: ignore[index]


# --- escaping, determinism, accessibility, size ---------------------------------------------


def test_hostile_title_and_answer_are_escaped() -> None:
    row = make_row(5, 5, keys=1, seed=6)
    gold = gold_plan(row)
    answer = f"{HOSTILE}\nSolution: {format_plan(gold[:3])} {HOSTILE}"
    plan = gold[:2] + (Step("move_to", HOSTILE),)
    for svg in (
        violation_map_for_answer(row, answer, 3, title=HOSTILE + "\x00\x1b"),
        violation_map_svg(row, plan, 2, title=HOSTILE, violation=HOSTILE),
        violation_map_svg(row, None, None, title=HOSTILE),
    ):
        assert "<script" not in svg.lower() and "<b>" not in svg
        root = parse(svg)
        assert root.find("title").text.startswith("</svg><script>")  # type: ignore[union-attr]
        assert not [el for el in root.iter() if el.tag not in SVG_TAGS]
    # the offending step's text goes into the legend, escaped
    assert HOSTILE in all_text(parse(violation_map_svg(row, plan, 2, violation="x")))


SVG_TAGS = {"svg", "title", "desc", "g", "path", "rect", "circle", "polyline", "text"}


def test_hostile_facts_do_not_break_the_map() -> None:
    row = dict(make_row(4, 4, keys=0, seed=9))
    row["facts"] = [
        *row["facts"],
        'Room <i>"x"&y</i> and A1 are connected by an open door.',
        "Key 7 is in room <i>.",
    ]
    svg = violation_map_svg(row, gold_plan(row), None, title="t")
    assert "<i>" not in svg
    root = parse(svg)
    room_centres(root, 4, 4)
    assert "off the grid" in all_text(root)


def test_same_inputs_same_bytes() -> None:
    row = make_row(9, 9, keys=2, seed=11)
    text = FAMILY.offline_answer(row, "noisy", np.random.default_rng(1), 0.2)
    sc = FAMILY.score(row, FAMILY.parse_answer(text))
    first = violation_map_for_answer(row, text, sc.first_violation_step, title="m")
    again = violation_map_for_answer(dict(row), str(text), sc.first_violation_step, title="m")
    assert first.encode() == again.encode()
    # and the listing order of the facts does not matter either
    shuffled = dict(row, facts=list(reversed(row["facts"])))
    assert violation_map_for_answer(shuffled, text, sc.first_violation_step, title="m") == first


def test_inline_svg_conventions() -> None:
    row = make_row(7, 7, keys=2, seed=12)
    svg = violation_map_for_answer(row, "no plan", None, title="model x")
    root = parse(svg)
    assert root.attrib["role"] == "img" and root.attrib["width"] == "100%"
    assert root[0].tag == "title" and root[0].text == "model x"
    assert not [el for el in root.iter() if "id" in el.attrib]  # several maps share a page
    for banned in ("xmlns", "href", "url(", "http", "<script", "<style", "<foreignObject", "on"):
        assert not re.search(rf"\s{re.escape(banned)}\w*=", svg) if banned == "on" else banned not in svg
    assert re.fullmatch(r"0 0 \d+ \d+", root.attrib["viewBox"])
    max_px = int(re.search(r"max-width:(\d+)px", root.attrib["style"]).group(1))  # type: ignore[union-attr]
    assert 400 <= max_px <= 640


@pytest.mark.parametrize(("rows", "cols", "noise"), [(40, 40, 20.0), (40, 40, 0.0), (12, 12, 20.0)])
def test_size_and_width_caps(rows: int, cols: int, noise: float) -> None:
    row = make_row(rows, cols, keys=2, noise=noise, seed=1)
    text = FAMILY.offline_answer(row, "noisy", np.random.default_rng(0), 0.02)
    sc = FAMILY.score(row, FAMILY.parse_answer(text))
    svg = violation_map_for_answer(row, text, sc.first_violation_step, title="a model")
    assert len(svg.encode()) < (SIZE_CAP if rows >= 40 else 20_000)
    root = parse(svg)
    room_centres(root, rows, cols)
    width = int(root.attrib["viewBox"].split()[2])
    max_px = int(re.search(r"max-width:(\d+)px", root.attrib["style"]).group(1))  # type: ignore[union-attr]
    assert max_px <= 640 and (max_px == width or rows >= 40)


# --- property ------------------------------------------------------------------------------


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.integers(2, 14),
    cols=st.integers(2, 14),
    keys=st.integers(0, 3),
    noise=st.sampled_from([0.0, 0.5, 2.0]),
    seed=st.integers(0, 2**63 - 1),
    eps=st.sampled_from([0.0, 0.1, 0.5]),
)
def test_any_instance_draws_well_formed(
    rows: int, cols: int, keys: int, noise: float, seed: int, eps: float
) -> None:
    assume(rows * cols >= 2 * (keys + 1))
    params = MazeParams(
        grid_rows=rows, grid_cols=cols, num_keys=keys, noise_ratio=noise, num_keys_mode="at_most"
    )
    row = FAMILY.generate_candidate(params, seed, 0).row
    assert row is not None
    text = FAMILY.offline_answer(row, "noisy", np.random.default_rng(seed % 1000), eps)
    sc = FAMILY.score(row, FAMILY.parse_answer(text))
    root = parse(violation_map_for_answer(row, text, sc.first_violation_step, title=f"seed {seed}"))
    centres = room_centres(root, rows, cols)
    gold = polyline(root, "gold-path")
    assert gold is not None
    assert len(gold) - 1 == sum(1 for s in gold_plan(row) if s.action == "move_to")
    # consecutive gold points are neighbouring rooms: one cell apart on the grid
    step = abs(centres[room_names(rows, cols)[1]][0] - centres[room_names(rows, cols)[0]][0])
    assert all(abs(a[0] - b[0]) + abs(a[1] - b[1]) == step for a, b in zip(gold, gold[1:], strict=False))
    assert (marker(root) is None) == sc.success
