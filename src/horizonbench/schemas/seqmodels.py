"""Arrow schema of ``<run>/analysis/seqmodels.parquet``: RecurrReason's trained sequence
models, one row per (model, puzzle, split, n) and one per (model, puzzle, split) with n
null (every size of the split pooled).

Kept out of ``schemas/tables.py``'s ANALYSIS_SCHEMAS on purpose: those tables are built
per family label by ``analyse_scores`` for every run, while this one exists only in a run
with a ``training:`` section and needs the instances' splits, which the scores lack.
"""

from __future__ import annotations

import pyarrow as pa

from horizonbench.schemas.tables import with_version

#: the failure modes of a rollout, in the order the report stacks them: the paper's four
#: (Appendix D), then the engine's two budget stops (``datasets/puzzles/rollout.py``
#: ROLLOUT_FAILURES holds the same names; a test keeps the two lists equal)
FAILURE_MODES = (
    "invalid_move",
    "invalid_output",
    "loop",
    "premature_stop",
    "horizon_exceeded",
    "budget_exceeded",
)
#: the splits in the order tables and figures show them
SPLITS = ("train", "validation", "ood")

_S, _I, _F = pa.string(), pa.int64(), pa.float64()

SEQMODELS_SCHEMA = with_version(
    pa.schema(
        [
            pa.field("model", _S, nullable=False),
            pa.field("puzzle", _S, nullable=False),
            pa.field("architecture", _S, nullable=False),
            pa.field("condition", _S, nullable=False),
            pa.field("split", _S, nullable=False),
            #: the puzzle size; null on the row pooling every size of the split
            pa.field("n", _I),
            #: answered rollouts (episodes) and those that reached the goal
            pa.field("episodes", _I, nullable=False),
            pa.field("solved", _I, nullable=False),
            #: solved / episodes with its Wilson 95% interval (null without episodes)
            pa.field("accuracy", _F),
            pa.field("accuracy_low", _F),
            pa.field("accuracy_high", _F),
            pa.field("failed", _I, nullable=False),
            #: each failure mode's share of the failed episodes (null when none failed);
            #: share_other holds failures with no or an unknown mode, so the shares sum to 1
            *(pa.field(f"share_{mode}", _F) for mode in FAILURE_MODES),
            pa.field("share_other", _F),
            #: mean (length - optimal) / optimal over solved episodes only
            pa.field("mean_optimality_gap", _F),
            #: mean share of legal transitions over answered episodes
            pa.field("move_legality_rate", _F),
            #: rollouts without an answer (a provider failure): counted, never scored
            pa.field("unanswered", _I, nullable=False),
        ]
    ),
    "analysis/seqmodels",
)
