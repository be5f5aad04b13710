"""Small certified puzzle rows for the tests that score, parse or answer them.

One generator loop for every puzzle test file, so a change to how candidates are drawn
(the seed 1000 + i, the index i) is made once."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from horizonbench.core.registry import get_family

PUZZLES = ("hanoi", "checkers", "river_crossing", "blocks_world")
#: sizes small enough for a test, every family at its smallest interesting n
SMALL: dict[str, dict[str, Any]] = {
    "hanoi": {"ns": [1, 2, 3]},
    "checkers": {"ns": [1, 2, 3]},
    "river_crossing": {"ns": [1, 2, 3], "capacities": [2, 3]},
    "blocks_world": {"ns": [2, 3, 4], "per_n": 4, "alpha": 2},
}


def puzzle_rows(name: str, params: Mapping[str, Any] | None = None, limit: int = 200) -> list[dict]:
    """The certified rows among the first ``limit`` candidates of ``name`` at ``params``
    (default :data:`SMALL`)."""
    fam = get_family(name)
    model = fam.params_model.model_validate(dict(params if params is not None else SMALL[name]))
    out = []
    for i in range(min(limit, fam.candidate_count(model))):
        cand = fam.generate_candidate(model, 1000 + i, i)
        if cand.row is not None:
            out.append(cand.row)
    return out
