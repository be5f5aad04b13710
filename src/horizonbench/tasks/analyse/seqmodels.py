"""Analyse stage, training studies: the trained sequence models' table
(``analysis/seqmodels.py``) written to ``<run>/analysis/seqmodels.parquet``.

Glue only: the splits come from the instances (``assign_splits`` over each trained
puzzle's rows, with the run's seed and the export's rule, as the export and the train
stage split them), the model labels from the training section, the episodes from the
scores table's rollout rows (unanswered ones included: the table counts them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from horizonbench.analysis.seqmodels import seqmodel_table
from horizonbench.schemas.seqmodels import SEQMODELS_SCHEMA
from horizonbench.schemas.tables import SCORES_SCHEMA
from horizonbench.tasks.run_folder.layout import SCORES_REL
from horizonbench.tasks.run_folder.storage import write_table

SEQMODELS_REL = "analysis/seqmodels.parquet"
_COLUMNS = [
    *("model", "instance_id", "family", "mode", "answered", "success", "violation"),
    *("n", "optimality_gap", "move_legality_rate"),
]


def instance_splits(cfg: Any, run_dir: Path, puzzles: list[str]) -> dict[str, str]:
    """instance_id -> split over the instance rows of ``puzzles``."""
    from horizonbench.datasets.puzzles.steps import assign_splits
    from horizonbench.tasks.evaluate.attempts import instance_rows

    splits: dict[str, str] = {}
    boundary = getattr(cfg.export, "in_distribution_max", 7)
    for family in puzzles:
        splits.update(assign_splits(instance_rows(run_dir, family), cfg.run.seed, cfg.export.split, boundary))
    return splits


def write_seqmodels(cfg: Any, run_dir: Path) -> str | None:
    """Write the table when the config trains models; its path, or None without a
    training section."""
    training = getattr(cfg, "training", None)
    if training is None:
        return None
    from horizonbench.schemas.config import training_puzzles
    from horizonbench.tasks.analyse.scores import to_table

    scores = pq.read_table(
        run_dir / SCORES_REL, columns=_COLUMNS, schema=SCORES_SCHEMA, filters=[("mode", "=", "rollout")]
    ).to_pandas()
    splits = instance_splits(cfg, run_dir, training_puzzles(cfg))
    table = seqmodel_table(scores, splits, training.model_names())
    dest = run_dir / SEQMODELS_REL
    write_table(to_table(table, SEQMODELS_SCHEMA), dest, "analysis/seqmodels")
    return str(dest)
