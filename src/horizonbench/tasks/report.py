"""Report stage: one self-contained HTML page from the analysis tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from prefect import task
from prefect.cache_policies import NONE

from horizonbench.reports.html import render_report
from horizonbench.schemas.tables import ANALYSIS_SCHEMAS, ATTEMPTS_SCHEMA, SCORES_SCHEMA
from horizonbench.tasks.evaluate import ATTEMPTS_REL
from horizonbench.tasks.score import SCORES_REL
from horizonbench.tasks.storage import write_text
from horizonbench.tasks.worlds import read_world_analysis

REPORT_REL = "report/index.html"
#: failed attempts shown per model and evaluation (family and mode)
EXAMPLES_PER_EVALUATION = 4
#: what identifies the attempt row holding a failing answer
_ATTEMPT_KEY = ["model", "family", "instance_id", "sample", "mode", "turn"]


def _modes(df: pd.DataFrame) -> pd.Series:
    """Each row's mode; tables from before rollouts (no ``mode``) hold whole plans."""
    if "mode" not in df.columns:
        return pd.Series("plan", index=df.index, dtype=object)
    return df["mode"].astype(object).where(df["mode"].notna(), "plan")


def failure_examples(scores: pd.DataFrame, attempts: pd.DataFrame) -> list[dict[str, Any]]:
    """A few failed attempts per model and evaluation (family and mode), the shortest
    problems first (easiest to read).

    A whole plan's answer is its one attempt row (turn 0). A rollout has a row per step,
    and the answer worth reading is the one that ended the episode: the row whose
    ``turn`` is the episode's ``first_violation_step``.
    """
    failed = scores[scores["answered"].astype(bool) & ~scores["success"].astype(bool)]
    if failed.empty:
        return []
    mode = _modes(failed)
    step = pd.to_numeric(failed["first_violation_step"], errors="coerce")
    # a rollout failure always names its step; -1 matches no row if one ever does not
    turn = step.where(mode == "rollout", 0).fillna(-1).astype("int64")
    failed = failed.assign(mode=mode, turn=turn)
    answers = attempts.assign(
        mode=_modes(attempts),
        turn=attempts["turn"].astype("int64") if "turn" in attempts.columns else 0,
    )[[*_ATTEMPT_KEY, "response"]]
    merged = failed.merge(answers, on=_ATTEMPT_KEY)
    merged = merged.sort_values(
        ["model", "family", "mode", "solution_length", "instance_id", "sample"], kind="mergesort"
    )
    picked = merged.groupby(["model", "family", "mode"], sort=True).head(EXAMPLES_PER_EVALUATION)
    return [
        {
            "model": r.model,
            "family": r.family,
            "mode": r.mode,
            "turn": int(r.turn),
            "instance_id": r.instance_id,
            "solution_length": int(r.solution_length),
            "violation": r.violation,
            "response": r.response or "",
        }
        for r in picked.itertuples()
    ]


def _read(path: Path, schema: pa.Schema) -> pd.DataFrame:
    """A table of the run, or an empty one of the same columns when the run has none
    (a world study alone has no attempts or family analysis)."""
    if not path.exists():
        return schema.empty_table().to_pandas()
    return pq.read_table(path, schema=schema).to_pandas()


@task(name="report", cache_policy=NONE)
def build_report(run: str, title: str, run_info: dict[str, Any], counts: dict[str, Any]) -> str:
    run_dir = Path(run)
    tables = {
        name: _read(run_dir / "analysis" / f"{name}.parquet", schema)
        for name, schema in ANALYSIS_SCHEMAS.items()
    }
    scores = _read(run_dir / SCORES_REL, SCORES_SCHEMA)
    attempts = _read(run_dir / ATTEMPTS_REL, ATTEMPTS_SCHEMA)
    examples = failure_examples(scores, attempts) if len(scores) and len(attempts) else []
    html = render_report(
        title=title,
        run_info=run_info,
        overall=tables["overall"],
        by_length=tables["by_length"],
        fits=tables["fits"],
        violations=tables["violations"],
        first_violations=tables["first_violations"],
        examples=examples,
        counts=counts,
        compounding=tables["compounding"],
        by_n=tables["by_n"],
        worlds=read_world_analysis(run_dir),
    )
    dest = run_dir / REPORT_REL
    write_text(html, dest)
    return str(dest)
