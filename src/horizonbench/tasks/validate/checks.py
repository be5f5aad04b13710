"""Great Expectations suites run on a run's tables: the work of the validate stage.

The result of every run (passed or not) is written to ``<run>/validation/`` so a
failure can be read afterwards. Tables live in staging until their suite passes.

Plain functions, no Prefect: ``tasks.validate.stage`` is the Prefect task around them.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from horizonbench.core.errors import ValidationFailed
from horizonbench.schemas.expectations import Suite, derived_columns
from horizonbench.tasks.run_folder.storage import write_json, write_text
from horizonbench.tasks.run_folder.table_parts import part_files, read_parts

#: rows turned into pandas at once while validating a part (nested cells are Python
#: objects there: a 40x40 maze's solution is about 80 dicts)
VALIDATION_BATCH_ROWS = 1_000


def family_columns(table: str, df: pd.DataFrame) -> pd.DataFrame:
    """Checks that need a family's own rules (the schemas layer cannot import families):
    a puzzle table gets ``_trajectory_problem``, "ok" when every state of the
    trajectory is well formed and the moves replay it legally."""
    if not table.startswith("instances/") or "states" not in df or not len(df) or "_trajectory_problem" in df:
        return df
    from horizonbench.core.registry import get_family

    family = get_family(table.split("/", 1)[1])
    check = getattr(family, "trajectory_problem", None)
    if check is None:
        return df
    out = df.copy()
    out["_trajectory_problem"] = [check(row) for row in out.to_dict("records")]
    return out


#: the ephemeral Great Expectations context of the run folder being validated, by its
#: data docs folder: one context for every table of a run (a new one costs a tenth of a
#: second, and the data docs index it writes then lists every table, not only the last)
_CONTEXTS: dict[str, Any] = {}


def _context(docs_dir: Path | None) -> Any:
    """The shared context for ``docs_dir`` (a new one when the run folder changes;
    ``None``: a context without data docs)."""
    import great_expectations as gx  # slow import: only when validating
    from great_expectations.data_context.types.base import ProgressBarsConfig

    key = "" if docs_dir is None else str(docs_dir.resolve())
    context = _CONTEXTS.get(key)
    if context is not None:
        return context
    _CONTEXTS.clear()  # a context holds its run's results: never two runs' at once
    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    if docs_dir is not None:
        context.add_data_docs_site(
            site_name="horizonbench",
            site_config={
                "class_name": "SiteBuilder",
                "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": key},
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            },
        )
    _CONTEXTS[key] = context
    return context


def _forget(context: Any, safe: str) -> None:
    """Remove what an earlier validation of the same table in this context added (a
    rerun in one process); its results stay in the data docs."""
    for factory, name in (
        (context.checkpoints, f"check_{safe}"),
        (context.validation_definitions, f"validate_{safe}"),
        (context.suites, f"horizonbench_{safe}"),
    ):
        try:
            factory.delete(name)
        except Exception:  # noqa: BLE001 - GX raises its own error types for "not there"
            pass
    if f"hb_{safe}" in context.data_sources.all():
        context.data_sources.delete(f"hb_{safe}")


def run_suite(df: pd.DataFrame, table: str, suite: Suite, docs_dir: Path | None = None) -> dict[str, Any]:
    """Validate ``df`` in the run's ephemeral GX context; returns the JSON-able result.

    With ``docs_dir``, GX also renders its data docs (suite and validation pages) there.
    The suite is handed to GX whole: added one expectation at a time, GX serialises the
    suite again for each (0.12-0.17 s for the maze suite's 26, against 0.007 s).
    """
    import logging
    import os

    os.environ.setdefault("TQDM_DISABLE", "1")
    import great_expectations as gx  # slow import: only when validating

    for name in ("great_expectations", "great_expectations.data_context.types.base"):
        logging.getLogger(name).setLevel(logging.WARNING)

    context = _context(docs_dir)
    safe = table.replace("/", "__")
    _forget(context, safe)
    source = context.data_sources.add_pandas(name=f"hb_{safe}")
    asset = source.add_dataframe_asset(name=safe)
    batch = asset.add_batch_definition_whole_dataframe(name=f"{safe}_all")
    expectations = [getattr(gx.expectations, name)(**kwargs) for name, kwargs in suite]
    gx_suite = context.suites.add(gx.ExpectationSuite(name=f"horizonbench_{safe}", expectations=expectations))
    definition = context.validation_definitions.add(
        gx.ValidationDefinition(name=f"validate_{safe}", data=batch, suite=gx_suite)
    )
    actions = []
    if docs_dir is not None:
        actions.append(gx.checkpoint.UpdateDataDocsAction(name="docs", site_names=["horizonbench"]))
    checkpoint = context.checkpoints.add(
        gx.Checkpoint(name=f"check_{safe}", validation_definitions=[definition], actions=actions)
    )
    try:
        result = checkpoint.run(
            batch_parameters={"dataframe": derived_columns(table, family_columns(table, df))}
        )
    finally:
        # the data source's asset may keep the batch's frame: a part's frame must not
        # outlive its validation (the suite and the result stay, for the data docs)
        context.checkpoints.delete(f"check_{safe}")
        context.validation_definitions.delete(f"validate_{safe}")
        context.data_sources.delete(f"hb_{safe}")
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


def slim_part(part: Path, table: str) -> pd.DataFrame:
    """A part of a partitioned table as its suite sees it, read a row group at a time:
    the helper columns derived, then every nested column (facts, solution, states)
    replaced by its length, null where it was null. A 40x40 maze's facts cost tens of
    kilobytes in pandas; the suite only asks that they are there and how many."""
    import pyarrow.parquet as pq

    frames = []
    with pq.ParquetFile(part) as pf:
        nested = [f.name for f in pf.schema_arrow if pa.types.is_nested(f.type)]
        for batch in pf.iter_batches(batch_size=VALIDATION_BATCH_ROWS):
            if "facts" in batch.schema.names:  # counted in Arrow: never a Python string each
                count = pc.list_value_length(batch.column("facts"))
                batch = batch.append_column("_facts_count", count.cast(pa.int64()))
                batch = batch.set_column(batch.schema.get_field_index("facts"), "facts", count)
            df = derived_columns(table, family_columns(table, batch.to_pandas()))
            for col in nested:
                if col != "facts":
                    df[col] = pd.array([None if v is None else len(v) for v in df[col]], dtype="Int64")
                else:
                    df[col] = df[col].astype("Int64")
            frames.append(df)
        if not frames:
            return derived_columns(table, family_columns(table, pf.read().to_pandas()))
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


def validate_parts(folder: Path, table: str, suite: Suite, run: Path) -> dict[str, Any]:
    """Run the suite on every part, and the uniqueness checks once over all parts' key
    columns (a duplicate may sit in two parts); one summary for the whole table."""
    parts = part_files(folder)
    if not parts:
        raise ValidationFailed(f"table {table} has no parts in {folder}")
    summaries = []
    for i, part in enumerate(parts):
        name = table if len(parts) == 1 else f"{table}/{part.stem}"
        summaries.append(validate_frame(slim_part(part, table), name, suite, run))
        if i + 1 < len(parts):
            # a Great Expectations run leaves reference cycles behind: without a
            # collection each part's frame lingered and ten parts took the client from
            # 570 to 770 MiB; not after the last (a full collection of the flow's heap
            # costs 0.2-0.3 s, and one frame waits for the next automatic one)
            gc.collect()
    unique = [kw["column"] for n, kw in suite if n == "ExpectColumnValuesToBeUnique"]
    if len(parts) > 1 and unique:
        summaries.append(unique_across_parts(folder, f"keys/{table}", unique, run))
    return {
        "table": table,
        "success": all(s["success"] for s in summaries),
        "evaluated": sum(s["evaluated"] or 0 for s in summaries),
        "failed": sum(s["failed"] or 0 for s in summaries),
        "failures": [
            f"{s['table']}: {f}" if s["table"] != table else f for s in summaries for f in s["failures"]
        ],
        "parts": len(parts),
    }


def unique_across_parts(folder: Path, table: str, columns: list[str], run: Path) -> dict[str, Any]:
    """The suite's uniqueness checks over every part at once, counted in Arrow one column
    at a time: a pandas frame of a million ids, checked by Great Expectations, took
    the client from about 570 to 890 MiB; Arrow's hash count takes a few tens."""
    failed = []
    for column in columns:
        counts = pc.value_counts(read_parts(folder, columns=[column]).column(column))
        dup = counts.filter(pc.greater(counts.field("counts"), 1))
        if len(dup):
            sample = dup.field("values")[:3].to_pylist()
            failed.append(
                f"ExpectColumnValuesToBeUnique on {column}: {len(dup)} values in more than one row "
                f"(across parts), e.g. {sample}"
            )
    summary = {
        "table": table,
        "success": not failed,
        "evaluated": len(columns),
        "failed": len(failed),
        "failures": failed,
    }
    safe = table.replace("/", "__")
    write_json(summary, run / "validation" / f"{safe}.json")
    write_text(_summary_markdown(summary), run / "validation" / f"{safe}.md")
    return summary


def check_table(path: str, table: str, suite: Suite, run: str) -> dict[str, Any]:
    """Validate one staged table (a Parquet file, or a folder of parts) and rewrite the
    data docs to open offline; the summary says whether it passed and why not."""
    import pyarrow.parquet as pq

    from horizonbench.tasks.validate.data_docs import make_offline

    if Path(path).is_dir():
        summary = validate_parts(Path(path), table, suite, Path(run))
    else:
        summary = validate_frame(pq.read_table(path).to_pandas(), table, suite, Path(run))
    # passed or not, the data docs open offline and list every table validated so far
    make_offline(Path(run) / "validation" / "data_docs", Path(run) / "validation")
    return summary
