"""Write the run's horizon card (``analysis/horizons.parquet``) from its analysis tables:
the last step of the analysis, after the family fits and the world study."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from horizonbench.analysis.horizons import card_rows
from horizonbench.schemas.config import Config
from horizonbench.schemas.horizons import HORIZONS_SCHEMA
from horizonbench.tasks.analyse.scores import to_table
from horizonbench.tasks.run_folder.design import adaptive_labels
from horizonbench.tasks.run_folder.layout import HORIZONS_REL, WORLD_ANALYSIS_PREFIX
from horizonbench.tasks.run_folder.storage import write_table


def _table(path: Path) -> pd.DataFrame:
    return pq.read_table(path).to_pandas() if path.exists() else pd.DataFrame()


def horizon_card(cfg: Config, run: Path) -> pd.DataFrame:
    """The card of the run folder's analysis as it stands (empty without any fit)."""
    return card_rows(
        _table(run / "analysis" / "fits.parquet"),
        _table(run / "analysis" / "compounding.parquet"),
        _table(run / f"{WORLD_ANALYSIS_PREFIX}critical_points.parquet"),
        _table(run / f"{WORLD_ANALYSIS_PREFIX}grid.parquet"),
        adaptive_labels(cfg),
        sc_scan=cfg.worlds is not None and cfg.worlds.sc_scan is not None,
    )


def write_horizons(cfg: Config, run: Path) -> tuple[Path, pd.DataFrame]:
    card = horizon_card(cfg, run)
    dest = write_table(to_table(card, HORIZONS_SCHEMA), run / HORIZONS_REL, "analysis/horizons")
    return dest, card
