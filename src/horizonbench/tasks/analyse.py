"""Analyse stage: success against depth, decay fits, violations, per family and model."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from prefect import get_run_logger, task
from prefect.cache_policies import NONE

from horizonbench.analysis import summary
from horizonbench.analysis.compounding import compounding_tables
from horizonbench.schemas.config import Config
from horizonbench.schemas.tables import ANALYSIS_SCHEMAS, SCORES_SCHEMA
from horizonbench.tasks.score import SCORES_REL
from horizonbench.tasks.storage import write_table


def answered_scores(scores: pd.DataFrame) -> pd.DataFrame:
    """Only attempts that got an answer enter rates and fits; the others are counted in
    the manifest and the report, never scored as failures of the model."""
    return scores[scores["answered"].astype(bool)].reset_index(drop=True)


def evaluation_label(scores: pd.DataFrame) -> pd.Series:
    """The ``family`` of analysis tables: the family name for whole plans, and
    ``<family>/rollout`` for rollouts, so the two modes are never pooled."""
    mode = scores["mode"] if "mode" in scores else pd.Series("plan", index=scores.index)
    return scores["family"].astype(str) + mode.astype(str).map(lambda m: "" if m == "plan" else f"/{m}")


def analyse_scores(
    scores: pd.DataFrame, bootstrap: int, seed: int, min_attempts: int, bin_width: int = 1
) -> dict[str, pd.DataFrame]:
    """All analysis tables, each with a leading ``family`` column (see
    :func:`evaluation_label`)."""
    parts: dict[str, list[pd.DataFrame]] = {name: [] for name in ANALYSIS_SCHEMAS}
    scores = scores.assign(family=evaluation_label(scores)) if len(scores) else scores
    for family, part in scores.groupby("family", sort=True):
        df = part.reset_index(drop=True)  # the summary functions build frames on a 0..n-1 index
        tables = {
            "overall": summary.overall(df),
            "by_length": summary.success_by_length(df, bin_width=bin_width),
            "fits": summary.fit_all(
                df, bootstrap=bootstrap, seed=seed, min_attempts_per_bin=min_attempts, bin_width=bin_width
            ),
            "violations": summary.violation_counts(df),
            "first_violations": summary.first_violation_hist(df),
        }
        tables["compounding"], tables["by_n"] = compounding_tables(df)
        for name, t in tables.items():
            parts[name].append(t.assign(family=str(family)))
    out = {}
    for name, schema in ANALYSIS_SCHEMAS.items():
        frames = [f for f in parts[name] if not f.empty]
        df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=schema.names)
        out[name] = df[schema.names]
    return out


def to_table(df: pd.DataFrame, schema: pa.Schema) -> pa.Table:
    """Convert through Python objects so pandas 3 dtypes never leak into the schema."""
    return pa.Table.from_pylist(df.astype(object).where(df.notna(), None).to_dict("records"), schema=schema)


@task(name="analyse", cache_policy=NONE)
def analyse(cfg: Config, run: str) -> dict[str, str]:
    logger = get_run_logger()
    run_dir = Path(run)
    scores = answered_scores(pq.read_table(run_dir / SCORES_REL, schema=SCORES_SCHEMA).to_pandas())
    tables = analyse_scores(
        scores,
        cfg.analysis.bootstrap,
        cfg.run.seed,
        cfg.analysis.min_attempts_per_bin,
        cfg.analysis.bin_width,
    )
    paths = {}
    for name, df in tables.items():
        dest = run_dir / "analysis" / f"{name}.parquet"
        write_table(to_table(df, ANALYSIS_SCHEMAS[name]), dest, f"analysis/{name}")
        paths[name] = str(dest)
    fits = tables["fits"]
    for r in fits.itertuples():
        ci = "" if pd.isna(r.L0_low) else f" (interval {r.L0_low:.1f} to {r.L0_high:.1f})"
        logger.info("%s/%s %s: L0 = %.1f%s", r.family, r.model, r.method, r.L0, ci)
    return paths
