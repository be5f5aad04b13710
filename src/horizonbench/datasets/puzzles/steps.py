"""The step table of RecurrReason's section 3, and its train / validation / OOD splits.

Each optimal trajectory of L moves gives L + 1 rows (current state, move, next state,
goal); the last row is a sentinel at the goal (move ``STOP``, next state = the goal),
which teaches a sequence model when to stop, as the rollout grammar expects. Splits are
made per instance, never per row, so no trajectory is split across train and
validation: sizes 1..7 are split 80/20 within each size with a seeded permutation of
the instance ids, and sizes 8..10 form the out-of-distribution set.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from horizonbench.core.seeding import derive_seed

SENTINEL_MOVE = "STOP"
SPLITS = ("train", "validation", "ood")
#: the largest size that is split into train and validation; larger sizes are OOD
IN_DISTRIBUTION_MAX_N = 7
TRAIN_SHARE = 0.8


def assign_splits(rows: Iterable[Mapping[str, Any]], seed: int) -> dict[str, str]:
    """instance_id -> split. Depends only on the seed and the set of instance ids (not on
    row order), so the same benchmark always splits the same way."""
    by_n: dict[tuple[str, int], list[str]] = {}
    for r in rows:
        by_n.setdefault((str(r["family"]), int(r["n"])), []).append(str(r["instance_id"]))
    out: dict[str, str] = {}
    for (family, n), ids in sorted(by_n.items()):
        ids = sorted(ids)
        if n > IN_DISTRIBUTION_MAX_N:
            out.update(dict.fromkeys(ids, "ood"))
            continue
        order = np.random.default_rng(derive_seed(seed, "split", family, n)).permutation(len(ids))
        n_train = int(round(TRAIN_SHARE * len(ids)))
        for rank, i in enumerate(order):
            out[ids[int(i)]] = "train" if rank < n_train else "validation"
    return out


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
