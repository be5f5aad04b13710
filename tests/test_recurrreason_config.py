"""The shipped configs/recurrreason.yaml regenerates the paper's Table 4: Hanoi, River
Crossing and Checkers exactly (puzzles and total moves for every n; Checkers with its
start == goal boards, flagged), Blocks World by Algorithm 6's cut-then-drop rule (the
whole Blocks World table, n = 8..10 included, is minutes of BFS: ``make bench``,
benchmarks/puzzles.py, checks its totals against Table 4)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml

from horizonbench.core.registry import get_family
from horizonbench.schemas.config import load_config

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "recurrreason.yaml"
TABLE4 = {
    "hanoi": [
        (6, 6),
        (6, 18),
        (6, 42),
        (6, 90),
        (6, 186),
        (6, 378),
        (6, 762),
        (6, 1530),
        (6, 3066),
        (6, 6138),
    ],
    "river_crossing": [
        (6, 6),
        (18, 30),
        (42, 110),
        (60, 156),
        (124, 456),
        (126, 414),
        (254, 1058),
        (510, 2598),
        (1022, 6186),
        (2046, 14382),
    ],
    "checkers": [
        (4, 6),
        (12, 52),
        (40, 336),
        (140, 1928),
        (504, 10260),
        (1000, 28106),
        (1000, 35924),
        (1000, 45076),
        (1000, 54912),
        (1000, 65894),
    ],
}


def counts(name: str, ns: list[int] | None = None) -> tuple[Counter[int], Counter[int], Counter[str]]:
    raw = yaml.safe_load(CONFIG.read_text())["families"][name]["params"]
    if ns is not None:
        raw = raw | {"ns": ns}
    fam = get_family(name)
    params = fam.params_model.model_validate(raw)
    puzzles: Counter[int] = Counter()
    moves: Counter[int] = Counter()
    rejected: Counter[str] = Counter()
    for i in range(fam.candidate_count(params)):
        cand = fam.generate_candidate(params, 0, i)
        if cand.row is None:
            rejected[cand.rejection or "?"] += 1
        else:
            puzzles[cand.row["n"]] += 1
            moves[cand.row["n"]] += cand.row["solution_length"]
    return puzzles, moves, rejected


def test_the_shipped_config_is_valid():
    cfg = load_config(CONFIG)
    assert set(cfg.families) == {"hanoi", "checkers", "river_crossing", "blocks_world"}
    assert all(spec.modes == ["plan", "rollout"] for spec in cfg.families.values())


@pytest.mark.parametrize("name", ["hanoi", "river_crossing"])
def test_table4_exactly(name):
    puzzles, moves, rejected = counts(name)
    for n, (p, m) in enumerate(TABLE4[name], start=1):
        assert (puzzles[n], moves[n]) == (p, m), n
    if name == "river_crossing":  # the left-out capacities are proved, counted, reported
        assert set(rejected) == {"unsolvable", "capacity_too_small"}


def test_checkers_equals_table4_with_the_trivial_puzzles_flagged():
    """n = 1..6 here (the rest is the same code on bigger boards, checked by make bench):
    the paper counts two puzzles per n (one for n >= 6) whose start is their goal; the
    config keeps them (``keep_trivial``), 0 moves, flagged ``start_is_goal``, and every
    count and move total matches."""
    puzzles, moves, rejected = counts("checkers", ns=[1, 2, 3, 4, 5, 6])
    for n in range(1, 7):
        assert (puzzles[n], moves[n]) == TABLE4["checkers"][n - 1], n
    assert not rejected
    fam = get_family("checkers")
    raw = yaml.safe_load(CONFIG.read_text())["families"]["checkers"]["params"]
    params = fam.params_model.model_validate(raw | {"ns": [1, 2, 3, 4, 5, 6]})
    rows = [fam.generate_candidate(params, 0, i).row for i in range(fam.candidate_count(params))]
    flagged = [r for r in rows if r is not None and r["start_is_goal"]]
    assert len(flagged) == 11 and all(r["solution_length"] == 0 and r["moves"] == [] for r in flagged)
    assert all(r["initial_state"] == r["goal_state"] for r in flagged)
    # without the option (the default) they are rejected, as before
    plain = fam.params_model.model_validate({"ns": [1, 2]})
    reasons = Counter(
        fam.generate_candidate(plain, 0, i).rejection for i in range(fam.candidate_count(plain))
    )
    assert reasons["start_is_goal"] == 4


def test_blocks_world_is_the_paper_reading_and_asks_up_to_100_per_n():
    """Algorithm 6 read literally: 100 per n everywhere ("up to 100 puzzles per N"), the
    requests pass the config check (a quota counts trivial and repeated candidates, so
    every n can fill it), and n = 1 keeps the 6 ordered pairs of its 3 states."""
    from horizonbench.schemas.config import check_requests

    cfg = load_config(CONFIG)
    check_requests(cfg, str(CONFIG))
    spec = cfg.families["blocks_world"]
    bins = spec.sampling.bins
    assert bins is not None and bins.edges() == list(range(1, 11))
    assert [bins.quota(n) for n in bins.edges()] == [100] * 10
    params = spec.params
    assert (params["start_sampler"], params["goal"], params["search"], params["dedup"]) == (
        "blockwise",
        "walk",
        "bfs",
        "after",
    )
    puzzles, moves, rejected = counts("blocks_world", ns=[1])
    # every one of the 300 candidates: the 6 distinct nontrivial pairs, the rest dropped
    assert (puzzles[1], moves[1]) == (6, 6)
    assert set(rejected) == {"start_is_goal", "repeated_pair"}


def test_a_kept_trivial_board_is_solved_by_an_empty_plan_or_stop():
    """The paper's 15 trivial Checkers puzzles are its only reported successes: an empty
    plan solves one, a rollout solves it by answering STOP at the first step, and any
    move (leaving the goal) fails."""
    fam = get_family("checkers")
    params = fam.params_model.model_validate({"ns": [1], "keep_trivial": True})
    rows = [fam.generate_candidate(params, 0, i).row for i in range(fam.candidate_count(params))]
    row = next(r for r in rows if r["start_is_goal"])
    assert fam.score(row, fam.parse_answer("Moves: []")).success
    ep = fam.episode(row)
    assert not ep.done
    ep.feed("STOP")
    assert ep.done and ep.solved and fam.score_episode(row, ep).success
    moved = fam.episode(row)
    nxt = next(t for _, t in fam.puzzle.successors(moved.state, fam.rules_of(row)))
    moved.feed(f"Next state: {fam.puzzle.format_state(nxt)}")
    assert moved.done and not moved.solved and moved.failure is not None


def test_the_instance_suite_holds_the_flag_to_the_ends(tmp_path):
    """Great Expectations: 0 moves only with start_is_goal, and the flag says exactly
    whether the start is the goal."""
    import pyarrow as pa

    from horizonbench.schemas.expectations import puzzle_suite
    from horizonbench.tasks.validate.checks import validate_frame

    fam = get_family("checkers")
    params = fam.params_model.model_validate({"ns": [1, 2], "keep_trivial": True})
    rows = [fam.generate_candidate(params, 0, i).row for i in range(fam.candidate_count(params))]
    df = pa.Table.from_pylist(rows, schema=fam.instance_schema).to_pandas()
    df["_trajectory_problem"] = "ok"  # the validate task adds it (a replay by the family)
    good = validate_frame(df, "instances/checkers", puzzle_suite("checkers"), tmp_path)
    assert good["success"], good["failures"]
    trivial = int(df.index[df["start_is_goal"]][0])
    for flip in (trivial, int(df.index[~df["start_is_goal"]][0])):
        bad = df.copy()
        bad.loc[flip, "start_is_goal"] = not bool(bad.loc[flip, "start_is_goal"])
        result = validate_frame(bad, "instances/checkers", puzzle_suite("checkers"), tmp_path)
        assert not result["success"] and any("start_is_goal" in f for f in result["failures"]), result
