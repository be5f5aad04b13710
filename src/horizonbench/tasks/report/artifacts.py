"""What a flow run shows in the Prefect UI: a summary, the fitted horizons, the report.

The pieces are built from the run folder's own files (counts, validation results,
analysis tables), so the UI shows exactly what the folder holds. Building them is pure
(:func:`summary_markdown`, :func:`horizon_rows`); :func:`publish` is the only part that
talks to Prefect, and it runs inside the flow.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from horizonbench.tasks.run_folder.spend import spend_lines

#: the analysis tables whose rows go into the horizon table artifact
_HORIZONS = (
    ("analysis/fits.parquet", "L0", ("family", "model", "method"), ("L0", "L0_low", "L0_high")),
    # "family" is the puzzle and its mode ("hanoi", "hanoi/rollout"): named in full
    ("analysis/compounding.parquet", "eps", ("family", "model"), ("eps", "eps_low", "eps_high")),
    (
        "analysis/worlds_critical_points.parquet",
        "sc*",
        ("env", "model", "dd"),
        ("sc_star", "sc_star_low", "sc_star_high"),
    ),
)


def artifact_key(*parts: str) -> str:
    """Prefect artifact keys allow lowercase letters, digits and dashes only."""
    return re.sub(r"[^a-z0-9]+", "-", "-".join(parts).lower()).strip("-")[:100] or "horizonbench"


def _number(value: Any) -> float | None:
    if value is None:
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x


def horizon_rows(run: Path) -> list[dict[str, Any]]:
    """One row per fitted quantity: L0 per (family, model, method), eps of the
    compounding fit, sc* of a world study; each with its interval."""
    import pyarrow.parquet as pq

    rows = []
    for rel, quantity, keys, (value, low, high) in _HORIZONS:
        path = run / rel
        if not path.exists():
            continue
        table = pq.read_table(path)
        if value not in table.column_names:
            continue
        for rec in table.to_pylist():
            rows.append(
                {
                    "quantity": quantity,
                    "of": " / ".join(_label(quantity, k, rec.get(k)) for k in keys if k in rec),
                    "value": _number(rec.get(value)),
                    "low": _number(rec.get(low)),
                    "high": _number(rec.get(high)),
                }
            )
    return rows


def _label(quantity: str, key: str, value: Any) -> str:
    """A key's value as the horizon table names it. An eps row's family becomes puzzle
    and mode ("hanoi / plan", "hanoi / rollout"): the two modes fit eps apart, and a row
    named by its model alone could not tell them (or two puzzles) apart."""
    if quantity == "eps" and key == "family":
        puzzle, _, mode = str(value).partition("/")
        return f"{puzzle} / {mode or 'plan'}"
    return str(value)


def card_lines(run: Path) -> list[str]:
    """The horizon card (``analysis/horizons.parquet``) as markdown: a table per model,
    so the summary answers "how far does each model reason?" before anything else."""
    import pyarrow.parquet as pq

    from horizonbench.tasks.run_folder.layout import HORIZONS_REL

    path = run / HORIZONS_REL
    if not path.exists():
        return []
    rows = pq.read_table(path).to_pylist()
    if not rows:
        return []
    lines = ["## Horizon card", ""]
    for model in dict.fromkeys(r["model"] for r in rows):
        lines += [f"**{model}**", "", "| family | metric | value | 95% interval | attempts | design |"]
        lines.append("|---|---|---|---|---|---|")
        for r in (r for r in rows if r["model"] == model):
            low, high = _number(r["low"]), _number(r["high"])
            interval = f"{_fmt(low)} to {_fmt(high)}" if low is not None and high is not None else "none"
            lines.append(
                f"| {r['family']} | {r['metric']} | {_fmt(_number(r['value'])) or 'none'} | {interval} | "
                f"{r['n_attempts']} | {r['design']} |"
            )
        lines.append("")
    return lines


def validation_rows(run: Path) -> list[dict[str, Any]]:
    """Each validated table's result, from ``<run>/validation/*.json``."""
    rows = []
    for path in sorted((run / "validation").glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if "statistics" in data:  # a Great Expectations result
            stats = data["statistics"]
            rows.append(
                {
                    "table": path.stem.replace("__", "/"),
                    "success": bool(data.get("success")),
                    "evaluated": stats.get("evaluated_expectations"),
                    "failed": stats.get("unsuccessful_expectations"),
                }
            )
        elif "success" in data:  # a summary of parts or keys
            rows.append(
                {
                    "table": data.get("table", path.stem.replace("__", "/")),
                    "success": bool(data["success"]),
                    "evaluated": data.get("evaluated"),
                    "failed": data.get("failed"),
                }
            )
    return rows


def _fmt(x: float | None) -> str:
    return "" if x is None else f"{x:.3g}"


def summary_markdown(title: str, run: Path, counts: dict[str, Any], problems: list[str]) -> str:
    """The run's summary artifact: what was generated, answered, validated, and what
    went wrong."""
    lines = [f"# {title}", "", f"Run folder: `{run.resolve()}`", ""]
    if problems:
        lines += ["**Problems:**", ""] + [f"- {p}" for p in problems] + [""]
    lines += card_lines(run)
    gen = counts.get("generation") or []
    if gen:
        lines += ["## Instances", "", "| family | kept | candidates | certified | short bins |"]
        lines.append("|---|---|---|---|---|")
        for st in gen:
            lines.append(
                f"| {st.get('family')} | {st.get('kept')} | {st.get('candidates_considered')} | "
                f"{st.get('candidates_certified')} | {len(st.get('unfilled_bins') or {})} |"
            )
        lines.append("")
    attempts = counts.get("attempts") or {}
    models = attempts.get("models") or {}
    if models:
        lines += ["## Attempts", "", "| model | answered | failed |", "|---|---|---|"]
        for name, c in sorted(models.items()):
            lines.append(f"| {name} | {c.get('answered', 0)} | {c.get('failed', 0)} |")
        total = attempts.get("total") or {}
        lines += ["", f"{total.get('answered', 0)} answered, {total.get('failed', 0)} without an answer.", ""]
    if counts.get("budget"):  # what the run folder has paid for calls, reruns included
        lines += ["## Budget", ""] + [f"- {k}: {v}" for k, v in spend_lines(counts["budget"]).items()]
        lines.append("")
    worlds = counts.get("worlds") or {}
    if worlds.get("episodes"):
        lines += [f"World study: {worlds['episodes']} episodes, {worlds.get('successes', 0)} successes.", ""]
    checks = validation_rows(run)
    if checks:
        lines += ["## Validation", "", "| table | result | expectations | failed |", "|---|---|---|---|"]
        for c in checks:
            result = "passed" if c["success"] else "FAILED"
            lines.append(f"| {c['table']} | {result} | {c['evaluated']} | {c['failed']} |")
        lines.append("")
    return "\n".join(lines)


def publish(title: str, run: Path, counts: dict[str, Any], problems: list[str], report: Path | None) -> None:
    """Create the run's artifacts in the current flow run (summary, horizons, report)."""
    from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_table_artifact

    name = artifact_key(title)
    create_markdown_artifact(
        key=artifact_key(name, "summary"),
        markdown=summary_markdown(title, run, counts, problems),
        description="counts, validation results and problems of the run",
    )
    rows = horizon_rows(run)
    if rows:
        create_table_artifact(
            key=artifact_key(name, "horizons"),
            table=[{k: (_fmt(v) if isinstance(v, float) else v) for k, v in r.items()} for r in rows],
            description="fitted horizons with their intervals: L0 (decay of success with depth), "
            "eps (per-step error), sc* (critical point of a world study)",
        )
    if report is not None and report.exists():
        create_link_artifact(
            key=artifact_key(name, "report"),
            link=report.resolve().as_uri(),
            link_text=f"HTML report of {title}",
            description="the self-contained report (open the file on the machine that ran it)",
        )
