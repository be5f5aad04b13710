"""The export's Great Expectations suite checks the OOD boundary it is given: a study
that moves it (export.in_distribution_max) is checked against its own boundary."""

from __future__ import annotations

import pandas as pd
import pytest

from horizonbench.schemas.expectations import export_suite
from horizonbench.tasks.validate.checks import validate_frame


def _steps(split_of_n: dict[int, str]) -> pd.DataFrame:
    rows = []
    for n, split in split_of_n.items():
        for step in range(2):  # one move and the STOP sentinel
            rows.append(
                {
                    "instance_id": f"p{n}",
                    "family": "hanoi",
                    "n": n,
                    "split": split,
                    "goal_state": "g",
                    "solution_length": 1,
                    "step": step,
                    "current_state": "s" if step == 0 else "g",
                    "move": "m" if step == 0 else "STOP",
                    "next_state": "g",
                    "is_final": step == 1,
                }
            )
    return pd.DataFrame(rows)


@pytest.mark.parametrize(
    ("split_of_n", "in_max", "ok"),
    [
        ({3: "train", 4: "validation", 5: "ood"}, 4, True),
        ({3: "train", 4: "validation", 5: "ood"}, 7, False),  # n = 5 is in distribution at 7
        ({3: "train", 5: "train"}, 4, False),  # n = 5 trained on, above the boundary
        ({3: "ood", 5: "ood"}, 4, False),  # n = 3 held out as OOD, below it
        ({7: "train", 8: "ood"}, 7, True),  # the paper's boundary, the default
    ],
)
def test_the_suite_checks_the_boundary_it_is_given(tmp_path, split_of_n, in_max, ok):
    result = validate_frame(_steps(split_of_n), "export/hanoi", export_suite(in_max), tmp_path)
    assert result["success"] is ok, result["failures"]
    if not ok:
        assert any("_n" in f for f in result["failures"])
