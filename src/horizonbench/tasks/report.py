"""Report stage: one self-contained HTML page from the analysis tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
from prefect import task
from prefect.cache_policies import NONE

from horizonbench.reports.html import render_report
from horizonbench.schemas.tables import ANALYSIS_SCHEMAS, ATTEMPTS_SCHEMA, SCORES_SCHEMA
from horizonbench.tasks.evaluate import ATTEMPTS_REL
from horizonbench.tasks.score import SCORES_REL
from horizonbench.tasks.storage import write_text

REPORT_REL = "report/index.html"
EXAMPLES_PER_MODEL = 4


def failure_examples(scores: pd.DataFrame, attempts: pd.DataFrame) -> list[dict[str, Any]]:
    """A few failed attempts per model, the shortest problems first (easiest to read)."""
    failed = scores[scores["answered"].astype(bool) & ~scores["success"].astype(bool)]
    if failed.empty:
        return []
    merged = failed.merge(
        attempts[["model", "instance_id", "sample", "response"]], on=["model", "instance_id", "sample"]
    )
    merged = merged.sort_values(["model", "solution_length", "instance_id", "sample"])
    picked = merged.groupby("model", sort=True).head(EXAMPLES_PER_MODEL)
    return [
        {
            "model": r.model,
            "instance_id": r.instance_id,
            "solution_length": int(r.solution_length),
            "violation": r.violation,
            "response": r.response or "",
        }
        for r in picked.itertuples()
    ]


@task(name="report", cache_policy=NONE)
def build_report(run: str, title: str, run_info: dict[str, Any], counts: dict[str, Any]) -> str:
    run_dir = Path(run)
    tables = {
        name: pq.read_table(run_dir / "analysis" / f"{name}.parquet", schema=schema).to_pandas()
        for name, schema in ANALYSIS_SCHEMAS.items()
    }
    scores = pq.read_table(run_dir / SCORES_REL, schema=SCORES_SCHEMA).to_pandas()
    attempts = pq.read_table(run_dir / ATTEMPTS_REL, schema=ATTEMPTS_SCHEMA).to_pandas()
    html = render_report(
        title=title,
        run_info=run_info,
        overall=tables["overall"],
        by_length=tables["by_length"],
        fits=tables["fits"],
        violations=tables["violations"],
        first_violations=tables["first_violations"],
        examples=failure_examples(scores, attempts),
        counts=counts,
    )
    dest = run_dir / REPORT_REL
    write_text(html, dest)
    return str(dest)
