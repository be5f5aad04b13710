"""The step table of RecurrReason's section 3, and its train / validation / OOD splits.

Each optimal trajectory of L moves gives L + 1 rows (current state, move, next state,
goal); the last row is a sentinel at the goal (move ``STOP``, next state = the goal),
which teaches a sequence model when to stop, as the rollout grammar expects. Splits are
made per instance, never per row, so no trajectory is split across train and
validation: sizes 1..7 are split 80/20 with a seeded permutation of the instance ids,
and sizes 8..10 form the out-of-distribution set. ``per_n`` splits within each size (the
paper's text); ``pooled`` splits all of n = 1..7 at once with a validation part of
ceil(0.2 * total) instances, as sklearn's ``train_test_split`` rounds, which is what the
paper's validation percentages imply (9 of 42 Hanoi puzzles, 110 of 549 Blocks World).

Instances differ, steps need not: two trajectories can pass through the same state on
the way to the same goal, so a validation step may repeat a training step, input and
target. :func:`step_overlap` measures how many do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import numpy as np

from horizonbench.core.seeding import derive_seed

SENTINEL_MOVE = "STOP"
SPLITS = ("train", "validation", "ood")
#: the largest size that is split into train and validation; larger sizes are OOD
IN_DISTRIBUTION_MAX_N = 7
TRAIN_SHARE = 0.8


SplitRule = Literal["per_n", "pooled"]


def assign_splits(
    rows: Iterable[Mapping[str, Any]],
    seed: int,
    rule: SplitRule = "per_n",
    in_distribution_max: int = IN_DISTRIBUTION_MAX_N,
) -> dict[str, str]:
    """instance_id -> split. Depends only on the seed and the set of instance ids (not on
    row order), so the same benchmark always splits the same way. ``per_n``: round(0.8
    * count) of each size train; ``pooled``: n = 1..7 of a family shuffled together and
    ceil(0.2 * total) of them validation. Sizes above ``in_distribution_max`` (the
    paper's 7) are OOD."""
    by_n: dict[tuple[str, int], list[str]] = {}
    for r in rows:
        by_n.setdefault((str(r["family"]), int(r["n"])), []).append(str(r["instance_id"]))
    out: dict[str, str] = {}
    pools: dict[str, list[str]] = {}
    for (family, n), ids in sorted(by_n.items()):
        ids = sorted(ids)
        if n > in_distribution_max:
            out.update(dict.fromkeys(ids, "ood"))
            continue
        if rule == "pooled":
            pools.setdefault(family, []).extend(ids)
            continue
        order = np.random.default_rng(derive_seed(seed, "split", family, n)).permutation(len(ids))
        n_train = int(round(TRAIN_SHARE * len(ids)))
        for rank, i in enumerate(order):
            out[ids[int(i)]] = "train" if rank < n_train else "validation"
    for family, ids in sorted(pools.items()):
        ids = sorted(ids)
        order = np.random.default_rng(derive_seed(seed, "split", family, "pooled")).permutation(len(ids))
        n_train = len(ids) - pooled_validation_size(len(ids))
        for rank, i in enumerate(order):
            out[ids[int(i)]] = "train" if rank < n_train else "validation"
    return out


def pooled_validation_size(total: int) -> int:
    """ceil(0.2 * total), computed exactly (sklearn rounds the test part up): 9 of 42
    Hanoi puzzles, 110 of 549 Blocks World, 540 of 2,700 Checkers."""
    tenths = round((1 - TRAIN_SHARE) * 10)  # 2, in integers: no float rounding at .0
    return -(-total * tenths // 10)


def step_overlap(steps: Iterable[Mapping[str, Any]], rule_columns: Sequence[str]) -> dict[str, Any]:
    """How many validation (and OOD) steps repeat a training step exactly: the same
    input (rule columns, current state, goal) and the same target (move, next state).

    Why: splits are by instance, yet a validation step seen verbatim in training tests
    memory, not generalisation; the paper's per-step accuracies do not say how many."""

    def key(s: Mapping[str, Any]) -> tuple[Any, ...]:
        return (
            *(s[c] for c in rule_columns),
            s["current_state"],
            s["goal_state"],
            s["move"],
            s["next_state"],
        )

    seen: set[tuple[Any, ...]] = set()
    held: dict[str, list[tuple[Any, ...]]] = {"validation": [], "ood": []}
    for s in steps:
        if s["split"] == "train":
            seen.add(key(s))
        elif s["split"] in held:
            held[s["split"]].append(key(s))
    out: dict[str, Any] = {}
    for split, keys in held.items():
        repeated = sum(k in seen for k in keys)
        out[split] = {
            "steps": len(keys),
            "in_train": repeated,
            "share": repeated / len(keys) if keys else 0.0,
        }
    return out


def split_overlap(
    rows: Sequence[Mapping[str, Any]],
    seed: int,
    rule: SplitRule,
    rule_columns: Sequence[str],
    in_distribution_max: int = IN_DISTRIBUTION_MAX_N,
) -> dict[str, Any]:
    """:func:`step_overlap` of the instances as ``horizonbench export`` splits them (same
    seed and rule), for the generation stats and the report."""
    splits = assign_splits(rows, seed, rule, in_distribution_max)
    steps = (s for r in rows for s in step_rows(r, splits[str(r["instance_id"])], rule_columns))
    return {"split_rule": rule, **step_overlap(steps, rule_columns)}


def step_rows(row: Mapping[str, Any], split: str, rule_columns: Sequence[str]) -> list[dict[str, Any]]:
    """The L + 1 step rows of one instance."""
    states, moves = list(row["states"]), list(row["moves"])
    base = {
        "instance_id": row["instance_id"],
        "family": row["family"],
        "n": int(row["n"]),
        "split": split,
        "goal_state": row["goal_state"],
        "solution_length": int(row["solution_length"]),
        **{c: _plain(row[c]) for c in rule_columns},
    }
    out = []
    for t in range(len(states)):
        final = t == len(moves)
        out.append(
            {
                **base,
                "step": t,
                "current_state": states[t],
                "move": SENTINEL_MOVE if final else moves[t],
                "next_state": states[t] if final else states[t + 1],
                "is_final": final,
            }
        )
    return out


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value
