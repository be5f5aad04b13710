"""Analyse stage: success against depth, decay fits, violations, per family and model."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from horizonbench.analysis import prompt_example, seqbench, seqbench_sweep, summary, sweep
from horizonbench.analysis.compounding import compounding_tables
from horizonbench.schemas.config import Config
from horizonbench.schemas.tables import ANALYSIS_SCHEMAS, CROSS_FAMILY_TABLES, SCORES_SCHEMA
from horizonbench.tasks.analyse.seqmodels import write_seqmodels
from horizonbench.tasks.run_folder.layout import ATTEMPTS_REL, PROMPTS_REL, SCORES_REL
from horizonbench.tasks.run_folder.storage import write_table


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
    scores: pd.DataFrame,
    bootstrap: int,
    seed: int,
    min_attempts: int,
    bin_width: int = 1,
    *,
    axes: Mapping[str, Mapping[str, Any]] | None = None,
    tokens: pd.DataFrame | None = None,
    prompts: pd.DataFrame | None = None,
) -> dict[str, pd.DataFrame]:
    """All analysis tables, each with a leading ``family`` column (see
    :func:`evaluation_label`).

    ``axes`` (``analysis.sweep.setting_axes`` of the config) lists the family labels of
    sweeps; with it the sweep tables compare them. ``tokens`` (per whole-plan attempt:
    ``family``, ``model``, ``instance_id``, ``sample``, ``mode``, ``turn``,
    ``output_tokens``: see :func:`plan_tokens`) feeds the
    output-token figures; without it they are empty. ``prompts`` (rows of the prompts
    table, see :func:`example_prompt_rows`) gives the example prompts of seqBench's
    Figures 6/7; without it that table is empty.
    """
    lengths = scores[["family", "instance_id", "solution_length"]] if len(scores) else pd.DataFrame()
    per_family = [name for name in ANALYSIS_SCHEMAS if name not in CROSS_FAMILY_TABLES]
    parts: dict[str, list[pd.DataFrame]] = {name: [] for name in per_family}
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
        tables.update(_seqbench_tables(df, str(family), bin_width, tokens))
        for name, t in tables.items():
            parts[name].append(t.assign(family=str(family)))
    out = {}
    for name in per_family:
        schema = ANALYSIS_SCHEMAS[name]
        frames = [f for f in parts[name] if not f.empty]
        df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=schema.names)
        out[name] = df[schema.names]
    out["sweep"] = sweep.settings_table(scores, out["fits"], axes or {}, tokens)
    out["sweep_axes"] = sweep.axis_table(out["sweep"])
    out["sweep_by_length"] = seqbench_sweep.sweep_by_length(scores, out["sweep"], bin_width)
    out["sweep_failed_progress"] = seqbench_sweep.failed_progress(scores, out["sweep"])
    out["sweep_panels"] = seqbench_sweep.sweep_panels(out["sweep_axes"], scores, out["sweep"], tokens)
    no_prompts = pd.DataFrame(columns=["family", "mode", "instance_id", "prompt_sha256", "messages"])
    out["example_prompts"] = prompt_example.example_prompts(
        prompts if prompts is not None else no_prompts, lengths
    )
    return out


def _seqbench_tables(
    df: pd.DataFrame, label: str, bin_width: int, tokens: pd.DataFrame | None
) -> dict[str, pd.DataFrame]:
    """The tables behind seqBench's figures for one family label. Model pairs compare
    models on the instances they share; output tokens need the attempts' token counts
    (whole plans only: a rollout's tokens are spread over its steps)."""
    progress = seqbench.instance_progress(df)
    mine = tokens[tokens["family"].astype(str) == label] if tokens is not None and len(tokens) else None
    return {
        "progress_distribution": seqbench.progress_distribution(df),
        "first_violation_by_length": seqbench.first_violation_by_length(df),
        "violations_by_length": seqbench.violations_by_length(df, bin_width=bin_width),
        "instance_progress": progress,
        "model_pairs": seqbench.model_pairs(progress),
        "tokens_by_length": (
            seqbench.tokens_by_length(df, mine, bin_width=bin_width)
            if mine is not None and len(mine)
            else pd.DataFrame(columns=ANALYSIS_SCHEMAS["tokens_by_length"].names[1:])
        ),
    }


def to_table(df: pd.DataFrame, schema: pa.Schema) -> pa.Table:
    """The analysis table ``df`` with exactly ``schema`` (pandas 3 dtypes never leak
    into it): missing values (NaN, None, NA) become nulls, a column the frame lacks is
    all null, columns outside the schema are left out.

    Column by column, converted whole where the column's dtype plainly fits its type
    (numbers to numbers, booleans to booleans, text to text): ``first_violations`` has a
    row per failed attempt, 700,000 at a million attempts. Any other column, and any
    conversion Arrow refuses (a fractional float for an integer, say), goes value by
    value through Python objects, as ``pa.Table.from_pylist`` would: the table is the
    same whichever path a column took.
    """

    def column(s: pd.Series, typ: pa.DataType) -> pa.Array:
        kind = getattr(s.dtype, "kind", "")
        fits = (
            ((pa.types.is_integer(typ) or pa.types.is_floating(typ)) and kind in ("i", "u", "f"))
            or (pa.types.is_boolean(typ) and kind == "b")
            or (pa.types.is_string(typ) and kind in ("O", "U"))
        )
        if fits:
            try:
                return pa.array(s, type=typ, from_pandas=True)
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
                pass
        return pa.array(s.astype(object).where(s.notna(), None).tolist(), type=typ)

    arrays = [
        column(df[f.name], f.type) if f.name in df.columns else pa.nulls(len(df), f.type) for f in schema
    ]
    return pa.Table.from_arrays(arrays, schema=schema)


def example_prompt_rows(run_dir: Path, scores: pd.DataFrame) -> pd.DataFrame | None:
    """The prompts-table rows of the example prompts (one per family label and mode:
    ``prompt_example.choose_examples``), messages included; None when the run has no
    prompts table. The choice reads the table's small columns, then only the chosen
    instances' messages: the table holds every instance's whole prompt."""
    path = run_dir / PROMPTS_REL
    if not path.exists() or scores.empty:
        return None
    keys = pq.read_table(path, columns=["family", "mode", "instance_id"]).to_pandas()
    chosen = prompt_example.choose_examples(keys, scores)
    if chosen.empty:
        return None
    ids = sorted(set(chosen["instance_id"]))
    rows = pq.read_table(path, filters=[("instance_id", "in", ids)]).to_pandas()
    pick = set(zip(chosen["family"], chosen["mode"], chosen["instance_id"], strict=True))
    mask = [k in pick for k in zip(rows["family"], rows["mode"], rows["instance_id"], strict=True)]
    return rows[mask].reset_index(drop=True)


def plan_tokens(run_dir: Path) -> pd.DataFrame | None:
    """Output tokens of every whole-plan attempt (the scores table does not carry them),
    read column by column; None when the run has no attempts table."""
    path = run_dir / ATTEMPTS_REL
    if not path.exists():
        return None
    columns = ["model", "family", "instance_id", "sample", "mode", "turn", "output_tokens"]
    table = pq.read_table(path, columns=columns, filters=[("mode", "=", "plan")])
    return table.to_pandas()


#: the scores columns the analysis reads (a million attempts: every column costs memory)
SCORE_COLUMNS_READ = frozenset(
    {
        *("answered", "family", "mode", "model", "instance_id", "sample", "solution_length"),
        *("success", "valid", "exact_match", "progress_ratio", "precision", "precision_positional"),
        *("recall", "violation", "first_violation_step", "parse_error"),
        *("n", "optimality_gap", "move_legality_rate", "best_progress"),
        # marks the maze's rows: Figure 10's hazard test reads them at their first deviation
        "num_keys",
    }
)


def write_analysis(cfg: Config, run_dir: Path) -> tuple[dict[str, str], pd.DataFrame]:
    """Every analysis table of the run's answered scores, written to
    ``<run>/analysis/<name>.parquet``; returns their paths and the fits (for the log)."""
    columns = [name for name in SCORES_SCHEMA.names if name in SCORE_COLUMNS_READ]
    scores = answered_scores(
        pq.read_table(run_dir / SCORES_REL, columns=columns, schema=SCORES_SCHEMA).to_pandas()
    )
    tables = analyse_scores(
        scores,
        cfg.analysis.bootstrap,
        cfg.run.seed,
        cfg.analysis.min_attempts_per_bin,
        cfg.analysis.bin_width,
        axes=sweep.setting_axes(cfg.families),
        tokens=plan_tokens(run_dir),
        prompts=example_prompt_rows(run_dir, scores),
    )
    paths = {}
    for name, df in tables.items():
        dest = run_dir / "analysis" / f"{name}.parquet"
        write_table(to_table(df, ANALYSIS_SCHEMAS[name]), dest, f"analysis/{name}")
        paths[name] = str(dest)
    if (seqmodels := write_seqmodels(cfg, run_dir)) is not None:
        paths["seqmodels"] = seqmodels
    return paths, tables["fits"]
