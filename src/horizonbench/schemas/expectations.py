"""Great Expectations suites for every table, written as plain data.

Each suite is a list of (expectation class name, keyword arguments). Keeping them as
data means this module imports nothing heavy; the validate task turns them into real
Great Expectations objects (GX takes seconds to import).

Some checks need a value derived from a nested column (the length of the solution,
its first action); ``derived_columns`` computes those before validation, and the
suite checks them like any other column.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

Suite = list[tuple[str, dict[str, Any]]]


def _not_null(*cols: str) -> Suite:
    return [("ExpectColumnValuesToNotBeNull", {"column": c}) for c in cols]


def instance_suite(violations: tuple[str, ...] | None = None) -> Suite:
    """Checks every family's instance table must pass (common columns)."""
    return [
        ("ExpectTableRowCountToBeBetween", {"min_value": 1}),
        *_not_null("instance_id", "family", "seed", "solution", "solution_length", "optimal_plan_count"),
        ("ExpectColumnValuesToBeUnique", {"column": "instance_id"}),
        ("ExpectColumnValuesToBeUnique", {"column": "candidate_index"}),
        ("ExpectColumnValuesToBeBetween", {"column": "solution_length", "min_value": 2}),
        ("ExpectColumnValuesToBeBetween", {"column": "optimal_plan_count", "min_value": 1}),
        ("ExpectColumnValuesToBeBetween", {"column": "seed", "min_value": 0}),
        # solution_length must be the number of actions in the solution
        ("ExpectColumnPairValuesToBeEqual", {"column_A": "solution_length", "column_B": "_solution_actions"}),
    ]


def maze_suite() -> Suite:
    return instance_suite() + [
        *_not_null("facts", "start_room", "goal_room"),
        ("ExpectColumnValuesToBeBetween", {"column": "grid_rows", "min_value": 2}),
        ("ExpectColumnValuesToBeBetween", {"column": "grid_cols", "min_value": 2}),
        ("ExpectColumnValuesToBeBetween", {"column": "num_keys", "min_value": 0}),
        ("ExpectColumnValuesToBeBetween", {"column": "noise_ratio", "min_value": 0.0}),
        ("ExpectColumnValuesToBeBetween", {"column": "shuffle_ratio", "min_value": 0.0, "max_value": 1.0}),
        ("ExpectColumnValuesToBeInSet", {"column": "family", "value_set": ["maze"]}),
        ("ExpectColumnValuesToBeInSet", {"column": "_first_action", "value_set": ["start"]}),
        ("ExpectColumnValuesToBeInSet", {"column": "_last_action", "value_set": ["rescue"]}),
        # every optimal plan rescues: L >= start + rescue; keys add 3 actions each
        (
            "ExpectColumnPairValuesAToBeGreaterThanB",
            {"column_A": "solution_length", "column_B": "_min_length", "or_equal": True},
        ),
        ("ExpectColumnValuesToBeBetween", {"column": "_facts_count", "min_value": 2}),
    ]


def scores_suite(violations: tuple[str, ...]) -> Suite:
    return [
        ("ExpectTableRowCountToBeBetween", {"min_value": 1}),
        *_not_null(
            "model",
            "instance_id",
            "family",
            "sample",
            "answered",
            "success",
            "valid",
            "exact_match",
            "progress_ratio",
            "precision",
            "recall",
            "plan_length",
            "solution_length",
        ),
        ("ExpectCompoundColumnsToBeUnique", {"column_list": ["model", "instance_id", "sample"]}),
        *[
            ("ExpectColumnValuesToBeBetween", {"column": c, "min_value": 0.0, "max_value": 1.0})
            for c in ("progress_ratio", "precision", "recall")
        ],
        ("ExpectColumnValuesToBeBetween", {"column": "plan_length", "min_value": 0}),
        ("ExpectColumnValuesToBeBetween", {"column": "sample", "min_value": 0}),
        ("ExpectColumnValuesToBeInSet", {"column": "violation", "value_set": list(violations)}),
        # a success is valid, has no violation, and has full progress
        ("ExpectColumnValuesToBeInSet", {"column": "_success_inconsistent", "value_set": [False]}),
    ]


def derived_columns(table: str, df: pd.DataFrame) -> pd.DataFrame:
    """Add the helper columns the suites check (prefixed with an underscore)."""
    out = df.copy()
    if table.startswith("instances/"):
        sol = out["solution"]
        out["_solution_actions"] = sol.map(len).astype("int64")
        out["_first_action"] = sol.map(lambda s: s[0]["action"] if len(s) else None)
        out["_last_action"] = sol.map(lambda s: s[-1]["action"] if len(s) else None)
        if "facts" in out:
            out["_facts_count"] = out["facts"].map(len).astype("int64")
        if "num_keys" in out:
            out["_min_length"] = (2 + 3 * out["num_keys"]).astype("int64")
    elif table == "scores":
        bad = out["success"] & (
            ~out["valid"] | out["violation"].notna() | (out["progress_ratio"] < 1.0) | ~out["answered"]
        )
        out["_success_inconsistent"] = bad.astype(bool)
    return out


#: per-family instance suites; a family without one gets the common checks
FAMILY_SUITES = {"maze": maze_suite}


def suite_for_family(name: str) -> Suite:
    return FAMILY_SUITES.get(name, instance_suite)()
