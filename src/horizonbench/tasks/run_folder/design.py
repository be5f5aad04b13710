"""The adaptive design in the run folder (``adaptive/design.parquet``) and what the stages
read from it: the analysis chooses the next wave, and generation and evaluation follow it
through this file, never by a call around the stages (DESIGN.md).

A model's instances in a bin are the first ``quota`` of that bin's instances in candidate
order, so a later wave only ever adds instances; the instance table holds the most any
model asked (``wave_config``), and every model pays only for its own.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from horizonbench.schemas.config import BinSpec, Config
from horizonbench.schemas.horizons import DESIGN_SCHEMA
from horizonbench.tasks.run_folder.layout import DESIGN_REL
from horizonbench.tasks.run_folder.storage import write_table

#: (family label, model) -> bin lower edge -> instances asked so far
Quotas = dict[tuple[str, str], dict[int, int]]


def adaptive_labels(cfg: Config) -> list[str]:
    """The family labels sampled in waves."""
    return [label for label, spec in cfg.families.items() if spec.sampling.adaptive is not None]


def read_design(run: Path) -> pd.DataFrame:
    path = run / DESIGN_REL
    if not path.exists():
        return pd.DataFrame(columns=DESIGN_SCHEMA.names)
    return pq.read_table(path, schema=DESIGN_SCHEMA).to_pandas()


def write_design(run: Path, rows: Iterable[Mapping[str, Any]]) -> Path:
    import pyarrow as pa

    table = pa.Table.from_pylist(
        sorted(rows, key=lambda r: (r["family"], r["model"], r["wave"], r["bin"])), schema=DESIGN_SCHEMA
    )
    return write_table(table, run / DESIGN_REL, "adaptive/design")


def quotas(design: pd.DataFrame) -> Quotas:
    out: Quotas = defaultdict(dict)
    sums = design.groupby(["family", "model", "bin"], sort=True)["new"].sum()
    for (family, model, lo), new in sums.items():
        out[(str(family), str(model))][int(lo)] = int(new)
    return dict(out)


def bin_of(bins: BinSpec, length: int) -> int | None:
    if not bins.min <= length < bins.max:
        return None
    return bins.min + (length - bins.min) // bins.width * bins.width


def rows_for_model(
    bins: BinSpec, rows: list[dict[str, Any]], quota: Mapping[int, int], difficulty: Any
) -> list[dict[str, Any]]:
    """The instances one model answers: the first ``quota[bin]`` of each bin, in the
    rows' (candidate) order. ``difficulty(row)`` is the family's binning coordinate."""
    seen: dict[int, int] = defaultdict(int)
    out = []
    for row in rows:
        lo = bin_of(bins, int(difficulty(row)))
        if lo is None or seen[lo] >= quota.get(lo, 0):
            continue
        seen[lo] += 1
        out.append(row)
    return out


def wave_config(cfg: Config, design: Quotas) -> Config:
    """The config a wave generates with: each adaptive label's bins keep the most any
    model asked (0 where no model asked: such a bin closes at once)."""
    families = dict(cfg.families)
    for label in adaptive_labels(cfg):
        spec = families[label]
        bins = spec.sampling.bins
        assert bins is not None
        most = {lo: 0 for lo in bins.edges()}
        for (family, _model), asked in design.items():
            if family == label:
                for lo, q in asked.items():
                    most[lo] = max(most.get(lo, 0), q)
        # model_copy does not validate: a quota of 0 is a wave's own, never a user's
        sampling = spec.sampling.model_copy(update={"bins": bins.model_copy(update={"quotas": most})})
        families[label] = spec.model_copy(update={"sampling": sampling})
    return cfg.model_copy(update={"families": families})
