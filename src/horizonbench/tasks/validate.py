"""Validate stage: run a table's Great Expectations suite; stop the flow if it fails.

The result of every run (passed or not) is written to ``<run>/validation/`` so a
failure can be read afterwards. Tables live in staging until their suite passes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from prefect import get_run_logger, task
from prefect.cache_policies import NONE

from horizonbench.core.errors import ValidationFailed
from horizonbench.schemas.expectations import Suite, derived_columns
from horizonbench.tasks.storage import write_json, write_text


def family_columns(table: str, df: pd.DataFrame) -> pd.DataFrame:
    """Checks that need a family's own rules (the schemas layer cannot import families):
    a puzzle table gets ``_trajectory_problem``, "ok" when every state of the
    trajectory is well formed and the moves replay it legally."""
    if not table.startswith("instances/") or "states" not in df or not len(df):
        return df
    from horizonbench.core.registry import get_family

    family = get_family(table.split("/", 1)[1])
    check = getattr(family, "trajectory_problem", None)
    if check is None:
        return df
    out = df.copy()
    out["_trajectory_problem"] = [check(row) for row in out.to_dict("records")]
    return out


def run_suite(df: pd.DataFrame, table: str, suite: Suite, docs_dir: Path | None = None) -> dict[str, Any]:
    """Validate ``df`` with an ephemeral GX context; returns the JSON-able result.

    With ``docs_dir``, GX also renders its data docs (suite and validation pages) there.
    """
    import logging
    import os

    os.environ.setdefault("TQDM_DISABLE", "1")
    import great_expectations as gx  # slow import: only when validating
    from great_expectations.data_context.types.base import ProgressBarsConfig

    for name in ("great_expectations", "great_expectations.data_context.types.base"):
        logging.getLogger(name).setLevel(logging.WARNING)

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    safe = table.replace("/", "__")
    source = context.data_sources.add_pandas(name=f"hb_{safe}")
    asset = source.add_dataframe_asset(name=safe)
    batch = asset.add_batch_definition_whole_dataframe(name=f"{safe}_all")
    gx_suite = context.suites.add(gx.ExpectationSuite(name=f"horizonbench_{safe}"))
    for name, kwargs in suite:
        gx_suite.add_expectation(getattr(gx.expectations, name)(**kwargs))
    definition = context.validation_definitions.add(
        gx.ValidationDefinition(name=f"validate_{safe}", data=batch, suite=gx_suite)
    )
    actions = []
    if docs_dir is not None:
        context.add_data_docs_site(
            site_name="horizonbench",
            site_config={
                "class_name": "SiteBuilder",
                "store_backend": {
                    "class_name": "TupleFilesystemStoreBackend",
                    "base_directory": str(docs_dir.resolve()),
                },
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            },
        )
        actions.append(gx.checkpoint.UpdateDataDocsAction(name="docs", site_names=["horizonbench"]))
    checkpoint = context.checkpoints.add(
        gx.Checkpoint(name=f"check_{safe}", validation_definitions=[definition], actions=actions)
    )
    result = checkpoint.run(batch_parameters={"dataframe": derived_columns(table, family_columns(table, df))})
    (only,) = result.run_results.values()
    return only.to_json_dict()


def failures(result: dict[str, Any]) -> list[str]:
    """One line per failed expectation: what was expected of which column, how many broke it."""
    lines = []
    for r in result.get("results", []):
        if r.get("success"):
            continue
        cfg = r.get("expectation_config", {})
        kwargs = cfg.get("kwargs", {})
        target = (
            kwargs.get("column")
            or kwargs.get("column_list")
            or (f"{kwargs.get('column_A')} vs {kwargs.get('column_B')}" if "column_A" in kwargs else "table")
        )
        res = r.get("result", {}) or {}
        n = res.get("unexpected_count")
        sample = res.get("partial_unexpected_list", [])[:3]
        detail = f"{n} rows fail" if n is not None else f"observed {res.get('observed_value')!r}"
        if sample:
            detail += f", e.g. {sample}"
        lines.append(f"{cfg.get('type')} on {target}: {detail}")
    return lines


def validate_frame(df: pd.DataFrame, table: str, suite: Suite, run: Path) -> dict[str, Any]:
    safe = table.replace("/", "__")
    result = run_suite(df, table, suite, docs_dir=run / "validation" / "data_docs")
    write_json(result, run / "validation" / f"{safe}.json")
    stats = result.get("statistics", {})
    summary = {
        "table": table,
        "success": bool(result.get("success")),
        "evaluated": stats.get("evaluated_expectations"),
        "failed": stats.get("unsuccessful_expectations"),
        "failures": failures(result),
    }
    write_text(_summary_markdown(summary), run / "validation" / f"{safe}.md")
    return summary


def _summary_markdown(summary: dict[str, Any]) -> str:
    head = "PASSED" if summary["success"] else "FAILED"
    lines = [
        f"# {summary['table']}: {head}",
        "",
        f"{summary['evaluated']} expectations, {summary['failed']} failed.",
        "",
    ]
    lines += [f"- {f}" for f in summary["failures"]]
    return "\n".join(lines) + "\n"


@task(name="validate", cache_policy=NONE)
def validate_table(path: str, table: str, suite: Suite, run: str) -> dict[str, Any]:
    """Validate one staged Parquet table; raise ValidationFailed with the reasons if it fails."""
    import pyarrow.parquet as pq

    logger = get_run_logger()
    df = pq.read_table(path).to_pandas()
    summary = validate_frame(df, table, suite, Path(run))
    if not summary["success"]:
        reasons = "; ".join(summary["failures"]) or "see validation results"
        raise ValidationFailed(
            f"table {table} failed validation ({summary['failed']} of {summary['evaluated']} "
            f"expectations): {reasons}. Nothing downstream was written; details in "
            f"{Path(run) / 'validation'}"
        )
    logger.info("%s: %s expectations passed", table, summary["evaluated"])
    return summary
