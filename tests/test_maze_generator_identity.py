"""Maze instances are a pure function of (params, seed, index) across versions.

The digests below were computed with the generator as it stood before the speed-up of
issue 11 (commit 9b1d9bd): any change to the random streams, the tree, the rewind, the
fact rendering or the certificate's figures changes a digest. A deliberate change of
the instances must update them and say so.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from horizonbench.datasets.maze import MazeFamily, MazeParams
from horizonbench.datasets.shards import candidate_seed

FAMILY = MazeFamily()
CANDIDATES_PER_CASE = 8

CASES: list[tuple[dict[str, Any], str]] = [
    (
        dict(grid_rows=5, grid_cols=5, num_keys=0, noise_ratio=0.0, shuffle_ratio=0.0),
        "66569a0c54eb2bb75da185cb9dca4464b0ad1b9afbc7a0a0d114b6118fcbf0b3",
    ),
    (
        dict(
            grid_rows=5, grid_cols=5, num_keys=2, noise_ratio=1.0, shuffle_ratio=1.0, num_keys_mode="at_most"
        ),
        "50a28c33a60245b1cf6986062af02282311afe4996d8eed024fd1bb8c9bbe689",
    ),
    (
        dict(grid_rows=2, grid_cols=9, num_keys=1, noise_ratio=0.5, shuffle_ratio=0.5),
        "e4b67c8ab6f1c57d1372bf0e746becafbcdadf47128bab3342500edcfdadf632",
    ),
    (
        dict(grid_rows=8, grid_cols=13, num_keys=3, noise_ratio=0.3, shuffle_ratio=0.7, decoy_doors=0),
        "7f06303df58f4515ebde44f8f95a5559baffc4acb868bc1b119c430ae1d8ccf4",
    ),
    (
        dict(
            grid_rows=12,
            grid_cols=12,
            num_keys=4,
            noise_ratio=2.0,
            shuffle_ratio=1.0,
            decoy_doors=3,
            num_keys_mode="at_most",
        ),
        "b5e606ad0f4bf39b1ba03c3021d1f953315f5a8d43a15a9c6c5cf26f2bdc0d32",
    ),
    (
        dict(grid_rows=20, grid_cols=20, num_keys=1, noise_ratio=0.0, shuffle_ratio=1.0),
        "661f6f4956b15526b53d3017649cd8b08b58c3f32d55b999058a31a7e5db63d4",
    ),
    (
        dict(grid_rows=30, grid_cols=27, num_keys=0, noise_ratio=1.0, shuffle_ratio=0.25),
        "9ba67542eb37f3e28b788026c58083d2f2007d934ebd14354d78726f8044508a",
    ),
    (
        dict(
            grid_rows=40,
            grid_cols=40,
            num_keys=2,
            noise_ratio=0.0,
            shuffle_ratio=1.0,
            num_keys_mode="at_most",
        ),
        "b09fd19fb2ab408f089eb94ec88c27b79a125248e7c076bf6aeece98d2e5980c",
    ),
    (
        dict(grid_rows=40, grid_cols=40, num_keys=2, noise_ratio=1.0, shuffle_ratio=1.0),
        "2ae3ab795873099cce0a9d415efb70ceb911f0d7df1d2d0d75407ce8f236ee4d",
    ),
    (
        dict(grid_rows=40, grid_cols=40, num_keys=4, noise_ratio=0.5, shuffle_ratio=0.0, decoy_doors=6),
        "bda007b8b9a4a2d39904fdde185fc95e0db0732807d9fcbaee5b38c7cd31a800",
    ),
    (
        dict(grid_rows=3, grid_cols=3, num_keys=3, noise_ratio=1.0, shuffle_ratio=1.0),
        "161efc2762206f1c5bd5e89b293e9e2a03eb6bd9ad37303a5f0ac7b5c5713bd1",
    ),
    (
        dict(
            grid_rows=6, grid_cols=4, num_keys=4, noise_ratio=0.0, shuffle_ratio=0.0, num_keys_mode="at_most"
        ),
        "6b7160dc5d0934832495057d42fa9555ec2d912f2bcefaf50320b42b57e04c05",
    ),
]


def digest(params: dict[str, Any]) -> str:
    """One hash over the rows (and rejections) of the first candidates of a setting."""
    p = MazeParams(**params)
    h = hashlib.sha256()
    for index in range(CANDIDATES_PER_CASE):
        cand = FAMILY.generate_candidate(p, candidate_seed(2024, "maze", index), index)
        h.update(json.dumps([cand.row, cand.rejection], sort_keys=True).encode())
    return h.hexdigest()


@pytest.mark.parametrize(("params", "expected"), CASES, ids=[str(i) for i in range(len(CASES))])
def test_rows_are_identical_to_the_pinned_version(params: dict[str, Any], expected: str) -> None:
    assert digest(params) == expected
