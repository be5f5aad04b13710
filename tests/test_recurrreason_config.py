"""The shipped configs/recurrreason.yaml regenerates the paper's Table 4: Hanoi and River
Crossing exactly (puzzles and total moves for every n), Checkers' move totals exactly."""

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


def test_checkers_moves_equal_table4_without_the_trivial_puzzles():
    """n = 1..6 here (the rest is the same code on bigger boards, checked by make bench):
    the paper counts two puzzles per n (one for n >= 6) whose start is their goal; they
    are rejected as start_is_goal, and every move total matches."""
    puzzles, moves, rejected = counts("checkers", ns=[1, 2, 3, 4, 5, 6])
    for n in range(1, 7):
        p, m = TABLE4["checkers"][n - 1]
        trivial = 1 if n >= 6 else 2
        assert (puzzles[n], moves[n]) == (p - trivial, m), n
    assert rejected == {"start_is_goal": 11}


def test_blocks_world_asks_each_size_for_what_it_has():
    """Table 4 has 6 Blocks World puzzles at n = 1 (the 6 ordered pairs of its 3 states)
    and up to 100 at every other n: the config asks exactly that, and its requests pass
    the check that refuses a quota a size cannot fill (issue 23: a quota of 100 at n = 1
    ended the README's command with exit code 4)."""
    from horizonbench.schemas.config import check_requests

    cfg = load_config(CONFIG)
    check_requests(cfg, str(CONFIG))
    bins = cfg.families["blocks_world"].sampling.bins
    assert bins is not None and bins.edges() == list(range(1, 11))
    puzzles, _, rejected = counts("blocks_world", ns=[1])
    assert puzzles[1] == 6 and not rejected
    assert [bins.quota(n) for n in bins.edges()] == [6] + [100] * 9
