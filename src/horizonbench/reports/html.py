"""Render the analysis tables into one self-contained HTML page.

The page must open offline and years later, so it carries its CSS and figures inline
and loads nothing. Model responses are untrusted text: they go through Jinja2's
autoescaping (never ``|safe``) and are truncated, so a hostile answer can neither
inject markup nor bloat the report. Only our own SVG is marked safe.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import jinja2
import pandas as pd
from markupsafe import Markup

from horizonbench.reports import plots

#: longest excerpt of a model response shown in the report
MAX_RESPONSE_CHARS = 2000
#: most example failures shown, so the page stays readable
MAX_EXAMPLES = 60

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("horizonbench.reports", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)

#: (column, header, kind) for each table; kind picks the number format
_OVERALL = [
    ("model", "model", "text"),
    ("attempts", "attempts", "int"),
    ("instances", "instances", "int"),
    ("success_rate", "success", "pct"),
    ("exact_match_rate", "exact match", "pct"),
    ("valid_rate", "valid plan", "pct"),
    ("progress_ratio_mean", "progress", "num"),
    ("precision_mean", "precision", "num"),
    ("recall_mean", "recall", "num"),
    ("invalid_output_share", "invalid output", "pct"),
]
_FITS = [
    ("model", "model", "text"),
    ("method", "method", "text"),
    ("L0", "L0", "num"),
    ("L0_low", "CI low", "num"),
    ("L0_high", "CI high", "num"),
    ("A", "A", "num"),
    ("n_bins_used", "bins used", "int"),
    ("n_bins_dropped", "bins dropped", "int"),
    ("n_attempts", "attempts", "int"),
    ("converged", "converged", "text"),
    ("note", "note", "text"),
]
_BY_LENGTH = [
    ("model", "model", "text"),
    ("L", "L", "int"),
    ("attempts", "attempts", "int"),
    ("instances", "instances", "int"),
    ("successes", "successes", "int"),
    ("success_rate", "success", "pct"),
    ("exact_match_rate", "exact", "pct"),
    ("valid_rate", "valid", "pct"),
    ("progress_ratio_mean", "progress", "num"),
    ("progress_ratio_sem", "± sem", "num"),
    ("precision_mean", "precision", "num"),
    ("recall_mean", "recall", "num"),
]
_VIOLATIONS = [
    ("model", "model", "text"),
    ("violation", "violation", "text"),
    ("count", "count", "int"),
    ("share", "share", "pct"),
]


def _is_missing(value: Any) -> bool:
    if value is None or value is pd.NA:
        return True
    return isinstance(value, float) and math.isnan(value)


def _format(value: Any, kind: str) -> str:
    """Numbers as a reader wants them; missing values as an em dash, never 'nan'."""
    if _is_missing(value):
        return "—"
    if kind == "text":
        return str(value)
    number = float(value)
    if math.isinf(number):
        return "∞" if number > 0 else "-∞"
    if kind == "int":
        return f"{int(number):,}"
    if kind == "pct":
        return f"{100 * number:.1f}%"
    return f"{number:.4g}"


def _table(df: pd.DataFrame, spec: Sequence[tuple[str, str, str]]) -> dict[str, Any]:
    """Header and pre-formatted cells; columns the frame lacks are skipped."""
    cols = [c for c in spec if c[0] in df.columns]
    rows = [
        [{"text": _format(rec[col], kind), "numeric": kind != "text"} for col, _, kind in cols]
        for rec in df.to_dict("records")
    ]
    return {"headers": [(head, kind != "text") for _, head, kind in cols], "rows": rows}


def _plain(value: Any) -> str:
    """Run-info values as text; nested structures as sorted JSON so output is stable."""
    if isinstance(value, Mapping | list | tuple):
        return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    return "—" if _is_missing(value) else str(value)


def _pairs(info: Mapping[str, Any]) -> list[tuple[str, str]]:
    return [(str(k), _plain(v)) for k, v in info.items()]


def _truncate(text: Any) -> tuple[str, int]:
    """The shown excerpt and how many characters were cut off."""
    if _is_missing(text):
        return "", 0
    s = str(text)
    if len(s) <= MAX_RESPONSE_CHARS:
        return s, 0
    return s[:MAX_RESPONSE_CHARS], len(s) - MAX_RESPONSE_CHARS


def _examples(examples: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for ex in list(examples)[:MAX_EXAMPLES]:
        response, cut = _truncate(ex.get("response"))
        out.append(
            {
                "model": _plain(ex.get("model")),
                "instance_id": _plain(ex.get("instance_id")),
                "solution_length": _plain(ex.get("solution_length")),
                "violation": _plain(ex.get("violation")),
                "response": response,
                "cut": cut,
            }
        )
    return out


def _figures(
    by_length: pd.DataFrame, fits: pd.DataFrame, violations: pd.DataFrame, first_violations: pd.DataFrame
) -> dict[str, Markup]:
    """All figures, marked safe: this SVG is produced by matplotlib from numbers, and
    labels in it (model names, categories) are XML-escaped by matplotlib's writer."""
    return {
        "success_lin": Markup(plots.success_vs_length_svg(by_length, fits, log=False)),
        "success_log": Markup(plots.success_vs_length_svg(by_length, fits, log=True)),
        "metrics": Markup(plots.metrics_vs_length_svg(by_length)),
        "violations": Markup(plots.violations_svg(violations)),
        "first_violation": Markup(plots.first_violation_svg(first_violations)),
    }


def render_report(
    *,
    title: str,
    run_info: dict,
    overall: pd.DataFrame,
    by_length: pd.DataFrame,
    fits: pd.DataFrame,
    violations: pd.DataFrame,
    first_violations: pd.DataFrame,
    examples: list[dict],
    counts: dict,
) -> str:
    """The whole report as one HTML string; identical inputs give identical bytes."""
    has_data = not overall.empty
    context = {
        "title": title,
        "has_data": has_data,
        "overall": _table(overall, _OVERALL),
        "fits": _table(fits, _FITS),
        "by_length": _table(by_length, _BY_LENGTH),
        "violations": _table(violations, _VIOLATIONS),
        "figures": _figures(by_length, fits, violations, first_violations) if has_data else {},
        "examples": _examples(examples),
        "n_examples_total": len(examples),
        "max_examples": MAX_EXAMPLES,
        "max_chars": MAX_RESPONSE_CHARS,
        "run_info": _pairs(run_info),
        "counts": _pairs(counts),
    }
    return _ENV.get_template("report.html").render(**context)
