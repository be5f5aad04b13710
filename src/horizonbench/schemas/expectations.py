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

from horizonbench.core.registry import family_of

Suite = list[tuple[str, dict[str, Any]]]


def _not_null(*cols: str) -> Suite:
    return [("ExpectColumnValuesToNotBeNull", {"column": c}) for c in cols]


def instance_suite(min_length: int = 1) -> Suite:
    """Checks every family's instance table must pass (common columns)."""
    return [
        ("ExpectTableRowCountToBeBetween", {"min_value": 1}),
        *_not_null("instance_id", "family", "seed", "solution", "solution_length"),
        ("ExpectColumnValuesToBeUnique", {"column": "instance_id"}),
        ("ExpectColumnValuesToBeUnique", {"column": "candidate_index"}),
        ("ExpectColumnValuesToBeBetween", {"column": "solution_length", "min_value": min_length}),
        ("ExpectColumnValuesToBeBetween", {"column": "seed", "min_value": 0}),
        # solution_length must be the number of actions in the solution
        ("ExpectColumnPairValuesToBeEqual", {"column_A": "solution_length", "column_B": "_solution_actions"}),
    ]


def maze_suite() -> Suite:
    return instance_suite(min_length=2) + [
        *_not_null("facts", "start_room", "goal_room", "optimal_plan_count"),
        ("ExpectColumnValuesToBeBetween", {"column": "optimal_plan_count", "min_value": 1}),
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


#: each puzzle's own rule columns and the values they may take
_PUZZLE_RULES: dict[str, Suite] = {
    "hanoi": [
        ("ExpectColumnValuesToBeInSet", {"column": "start_peg", "value_set": ["A", "B", "C"]}),
        ("ExpectColumnValuesToBeInSet", {"column": "goal_peg", "value_set": ["A", "B", "C"]}),
        ("ExpectColumnPairValuesToBeEqual", {"column_A": "_pegs_differ", "column_B": "_true"}),
    ],
    "checkers": [
        ("ExpectColumnValuesToBeInSet", {"column": "orientation", "value_set": ["red_right", "red_left"]}),
    ],
    "river_crossing": [
        ("ExpectColumnValuesToBeBetween", {"column": "boat_capacity", "min_value": 1, "max_value": 10}),
        ("ExpectColumnValuesToBeInSet", {"column": "start_bank", "value_set": ["left", "right"]}),
    ],
    "blocks_world": [
        ("ExpectColumnValuesToBeBetween", {"column": "num_stacks", "min_value": 2, "max_value": 6}),
    ],
}


def puzzle_suite(name: str) -> Suite:
    """A RecurrReason puzzle table: sizes in range, every state of every trajectory
    parses as a well-formed state, the trajectory replays legally from the initial to
    the goal state, and the lengths agree (moves = L, states = L + 1)."""
    return instance_suite(min_length=0) + [
        *_not_null("n", "label", "initial_state", "goal_state", "moves", "states", "start_is_goal"),
        # 0 moves only for a start that is its goal (the paper's Checkers keeps those,
        # flagged), and the flag says exactly that
        (
            "ExpectColumnPairValuesAToBeGreaterThanB",
            {"column_A": "solution_length", "column_B": "_puzzle_min_length", "or_equal": True},
        ),
        ("ExpectColumnPairValuesToBeEqual", {"column_A": "start_is_goal", "column_B": "_same_ends"}),
        ("ExpectColumnValuesToBeInSet", {"column": "family", "value_set": [name]}),
        ("ExpectColumnValuesToBeBetween", {"column": "n", "min_value": 1, "max_value": 10}),
        ("ExpectColumnPairValuesToBeEqual", {"column_A": "solution_length", "column_B": "_moves_count"}),
        ("ExpectColumnPairValuesToBeEqual", {"column_A": "_states_count", "column_B": "_length_plus_one"}),
        ("ExpectColumnPairValuesToBeEqual", {"column_A": "initial_state", "column_B": "_first_state"}),
        ("ExpectColumnPairValuesToBeEqual", {"column_A": "goal_state", "column_B": "_last_state"}),
        ("ExpectColumnValuesToBeInSet", {"column": "_trajectory_problem", "value_set": ["ok"]}),
        *_PUZZLE_RULES.get(name, []),
    ]


def export_suite(in_distribution_max: int = 7) -> Suite:
    """The step table of a training export: splits complete and disjoint by instance, and
    OOD exactly the sizes above ``in_distribution_max`` (``export.in_distribution_max``)."""
    return [
        ("ExpectTableRowCountToBeBetween", {"min_value": 1}),
        *_not_null("instance_id", "n", "step", "current_state", "move", "next_state", "goal_state", "split"),
        ("ExpectColumnValuesToBeInSet", {"column": "split", "value_set": ["train", "validation", "ood"]}),
        ("ExpectColumnValuesToBeBetween", {"column": "n", "min_value": 1, "max_value": 10}),
        ("ExpectCompoundColumnsToBeUnique", {"column_list": ["instance_id", "step"]}),
        # every instance in exactly one split, and the split matches its n
        ("ExpectColumnValuesToBeInSet", {"column": "_splits_per_instance", "value_set": [1]}),
        ("ExpectColumnValuesToBeBetween", {"column": "_in_distribution_n", "max_value": in_distribution_max}),
        ("ExpectColumnValuesToBeBetween", {"column": "_ood_n", "min_value": in_distribution_max + 1}),
        # each instance has L + 1 rows, the last one the sentinel at the goal
        ("ExpectColumnValuesToBeInSet", {"column": "_rows_complete", "value_set": [True]}),
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
            "plan_length",
            "solution_length",
        ),
        # ids are unique within a family label only (sweep settings share them)
        (
            "ExpectCompoundColumnsToBeUnique",
            {"column_list": ["model", "family", "instance_id", "mode", "sample"]},
        ),
        *[
            ("ExpectColumnValuesToBeBetween", {"column": c, "min_value": 0.0, "max_value": 1.0})
            # null precision/recall (puzzles) and null puzzle columns (maze) are skipped
            for c in ("progress_ratio", "precision", "recall", "legal_move_coverage", "best_progress")
        ],
        ("ExpectColumnValuesToBeBetween", {"column": "plan_length", "min_value": 0}),
        ("ExpectColumnValuesToBeBetween", {"column": "sample", "min_value": 0}),
        ("ExpectColumnValuesToBeInSet", {"column": "violation", "value_set": list(violations)}),
        # a success is valid, has no violation, and has full progress
        ("ExpectColumnValuesToBeInSet", {"column": "_success_inconsistent", "value_set": [False]}),
    ]


#: environments, observation modes, mutation levels and collapse types of world studies
WORLD_ENVS = ["stateful_puzzle", "graph_nav", "tool_dag"]
_OBSERVATIONS = ["clean", "partial", "distractor", "conflict"]
_MUTATIONS = ["static", "low", "medium", "high"]
_OUTCOMES = ["success", "failure", "budget_exceeded", "format_failure"]
_MEMORY_MODES = ["structured", "summary", "transcript"]
_COLLAPSE_TYPES = ["world_state", "action_validity", "self_check", "compound", "format"]


def episodes_suite(models: list[str]) -> Suite:
    """The world-model episodes table: one row per agent episode, every axis in range,
    no win shorter than the optimal plan or longer than the horizon, rates in [0, 1];
    the outcome agrees with success, only a ``budget_exceeded`` episode may have no step
    and it always says which limit it reached, and fallbacks never outnumber calls."""
    return [
        ("ExpectTableRowCountToBeBetween", {"min_value": 1}),
        *_not_null(
            "episode_id", "env", "model", "sc", "dd", "seed", "horizon", "optimal_length", "success", "steps"
        ),
        ("ExpectColumnValuesToBeUnique", {"column": "episode_id"}),
        # a world (seed) is played once per agent and setting of the secondary axes: the
        # paired ablations (worlds.ablations) replay the backdrop's worlds
        (
            "ExpectCompoundColumnsToBeUnique",
            {"column_list": ["env", "model", "seed", "horizon", "branching", "observation", "mutation"]},
        ),
        ("ExpectColumnValuesToBeInSet", {"column": "env", "value_set": WORLD_ENVS}),
        ("ExpectColumnValuesToBeInSet", {"column": "model", "value_set": models}),
        ("ExpectColumnValuesToBeInSet", {"column": "observation", "value_set": _OBSERVATIONS}),
        ("ExpectColumnValuesToBeInSet", {"column": "mutation", "value_set": _MUTATIONS}),
        ("ExpectColumnValuesToBeInSet", {"column": "collapse_type", "value_set": _COLLAPSE_TYPES}),
        ("ExpectColumnValuesToBeBetween", {"column": "sc", "min_value": 3, "max_value": 60}),
        ("ExpectColumnValuesToBeBetween", {"column": "dd", "min_value": 1, "max_value": 12}),
        ("ExpectColumnValuesToBeBetween", {"column": "optimal_length", "min_value": 1}),
        ("ExpectColumnValuesToBeBetween", {"column": "steps", "min_value": 0}),
        ("ExpectColumnValuesToBeInSet", {"column": "outcome", "value_set": _OUTCOMES}),
        ("ExpectColumnValuesToBeInSet", {"column": "memory", "value_set": _MEMORY_MODES}),
        ("ExpectColumnValuesToBeBetween", {"column": "calls", "min_value": 0}),
        ("ExpectColumnValuesToBeBetween", {"column": "output_tokens", "min_value": 0}),
        ("ExpectColumnValuesToBeInSet", {"column": "_outcome_consistent", "value_set": [True]}),
        ("ExpectColumnValuesToBeBetween", {"column": "mean_jaccard", "min_value": 0.0, "max_value": 1.0}),
        ("ExpectColumnValuesToBeBetween", {"column": "consistency_rate", "min_value": 0.0, "max_value": 1.0}),
        (
            "ExpectColumnPairValuesAToBeGreaterThanB",
            {"column_A": "horizon", "column_B": "steps", "or_equal": True},
        ),
        ("ExpectColumnValuesToBeInSet", {"column": "_impossible_win", "value_set": [False]}),
    ]


def steps_suite(min_rows: int = 1) -> Suite:
    """The world-model steps table: one row per (episode, step), numbered from 0, an
    error label exactly on the invalid actions, fidelity in [0, 1]. ``min_rows`` is 0
    only when every episode ended over budget before its first step."""
    return [
        ("ExpectTableRowCountToBeBetween", {"min_value": min_rows}),
        *_not_null("episode_id", "env", "model", "step", "action_valid", "jaccard", "consistent"),
        ("ExpectCompoundColumnsToBeUnique", {"column_list": ["episode_id", "step"]}),
        ("ExpectColumnValuesToBeInSet", {"column": "env", "value_set": WORLD_ENVS}),
        ("ExpectColumnValuesToBeBetween", {"column": "step", "min_value": 0}),
        ("ExpectColumnValuesToBeBetween", {"column": "jaccard", "min_value": 0.0, "max_value": 1.0}),
        ("ExpectColumnValuesToBeBetween", {"column": "valid_actions", "min_value": 0}),
        ("ExpectColumnValuesToBeInSet", {"column": "_error_matches_validity", "value_set": [True]}),
        ("ExpectColumnValuesToBeInSet", {"column": "_steps_numbered", "value_set": [True]}),
    ]


def derived_columns(table: str, df: pd.DataFrame) -> pd.DataFrame:
    """Add the helper columns the suites check (prefixed with an underscore)."""
    if "_solution_actions" in df:  # derived already, batch by batch (``tasks.validate.checks``)
        return df
    out = df.copy()
    if table.startswith("instances/"):
        sol = out["solution"]
        out["_solution_actions"] = sol.map(len).astype("int64")
        out["_first_action"] = sol.map(lambda s: s[0]["action"] if len(s) else None)
        out["_last_action"] = sol.map(lambda s: s[-1]["action"] if len(s) else None)
        if "facts" in out and "_facts_count" not in out:
            out["_facts_count"] = out["facts"].map(len).astype("int64")
        if "num_keys" in out:
            out["_min_length"] = (2 + 3 * out["num_keys"]).astype("int64")
        if "states" in out:
            out = _puzzle_columns(out)
    elif table.startswith("export"):
        per = out.groupby("instance_id")
        out["_splits_per_instance"] = per["split"].transform("nunique").astype("int64")
        # n of in-distribution rows (0 for OOD rows) and of OOD rows (a large n for the
        # others): the suite bounds each by the export's in_distribution_max
        ood = out["split"] == "ood"
        out["_in_distribution_n"] = out["n"].where(~ood, 0).astype("int64")
        out["_ood_n"] = out["n"].where(ood, 1_000_000).astype("int64")
        rows = per["step"].transform("size")
        sentinel = per["is_final"].transform("sum")
        expected = per["solution_length"].transform("first") + 1
        out["_rows_complete"] = ((rows == expected) & (sentinel == 1)).astype(bool)
    elif table == "episodes":
        out["_impossible_win"] = (out["success"] & (out["steps"] < out["optimal_length"])).astype(bool)
        budget = out["outcome"] == "budget_exceeded"
        out["_outcome_consistent"] = (
            (out["success"] == (out["outcome"] == "success"))
            & (budget == out["budget_detail"].notna())
            & ((out["steps"] >= 1) | budget)
            & (out["fallbacks"] <= out["calls"])
        ).astype(bool)
    elif table == "steps":
        out["_error_matches_validity"] = (out["error"].isna() == out["action_valid"]).astype(bool)
        out["_steps_numbered"] = (out.groupby("episode_id", sort=False).cumcount() == out["step"]).astype(
            bool
        )
    elif table == "scores":
        bad = out["success"] & (
            ~out["valid"] | out["violation"].notna() | (out["progress_ratio"] < 1.0) | ~out["answered"]
        )
        out["_success_inconsistent"] = bad.astype(bool)
    return out


def _puzzle_columns(out: pd.DataFrame) -> pd.DataFrame:
    """Lengths and ends of the trajectory; ``_trajectory_problem`` (a replay of every
    trajectory by the family's own rules) is added by the validate task, which may
    import the families."""
    out["_moves_count"] = out["moves"].map(len).astype("int64")
    out["_states_count"] = out["states"].map(len).astype("int64")
    out["_length_plus_one"] = (out["solution_length"] + 1).astype("int64")
    out["_first_state"] = out["states"].map(lambda s: s[0] if len(s) else None)
    out["_last_state"] = out["states"].map(lambda s: s[-1] if len(s) else None)
    if "start_is_goal" in out:
        out["_puzzle_min_length"] = (~out["start_is_goal"].astype(bool)).astype("int64")
        out["_same_ends"] = (out["initial_state"] == out["goal_state"]).astype(bool)
    if "start_peg" in out:
        out["_pegs_differ"] = (out["start_peg"] != out["goal_peg"]).astype(bool)
        out["_true"] = True
    return out


#: per-family instance suites; a family without one gets the common checks
FAMILY_SUITES = {"maze": maze_suite}
PUZZLES = ("hanoi", "checkers", "river_crossing", "blocks_world")


def suite_for_family(name: str) -> Suite:
    """The instance suite of a family or a family label (a sweep setting's table is its
    family's)."""
    name = family_of(name)
    if name in PUZZLES:
        return puzzle_suite(name)
    return FAMILY_SUITES.get(name, instance_suite)()
