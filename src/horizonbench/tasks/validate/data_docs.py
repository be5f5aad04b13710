"""Great Expectations' data docs, made to work from the run folder with no network.

GX writes an index whose tables are filled in by JavaScript loaded from five CDNs
(bootstrap-table, jQuery, ...): opened offline, or from an archived run folder, it is an
empty page. Its suite and validation pages are rendered HTML, but styled by the same
CDN stylesheets. So, after each validation, every page is rewritten without the
remote scripts and stylesheets (an inline stylesheet keeps the pages legible), and the
index is replaced by a static one built from the pages on disk: every suite and every
validation of the run, linked, with the outcome read from the run's own result files
(``<run>/validation/<table>.json``). GX's own index stays beside it as ``index-gx.html``.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from horizonbench.tasks.run_folder.storage import write_text

OFFLINE_MARK = "<!--horizonbench-offline-->"
GX_INDEX = "index-gx.html"

_REMOTE_TAG = re.compile(
    r"""<script[^>]*\bsrc=["']https?://[^"']*["'][^>]*>\s*</script>\s*"""
    r"""|<link[^>]*\bhref=["']https?://[^"']*["'][^>]*>\s*"""
    r"""|<img[^>]*\bsrc=["']https?://[^"']*["'][^>]*>""",
    re.IGNORECASE,
)
_STYLE = """<style>
body { font: 14px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1200px; padding: 16px; color: #222; }
table { border-collapse: collapse; margin: 8px 0 16px; }
td, th { border: 1px solid #ccc; padding: 4px 8px; vertical-align: top; text-align: left; }
th { background: #f3f3f3; }
.ok { color: #1b7a1b; font-weight: 600; } .bad { color: #b00020; font-weight: 600; }
code { background: #f6f6f6; padding: 0 3px; }
</style>"""


def strip_remote(page: str) -> str:
    """A page without remote scripts and stylesheets, with a small inline stylesheet."""
    if OFFLINE_MARK in page:
        return page
    page = _REMOTE_TAG.sub("", page)
    at = page.lower().find("</head>")
    insert = OFFLINE_MARK + _STYLE
    return page[:at] + insert + page[at:] if at >= 0 else insert + page


def _outcomes(results: Path) -> dict[str, tuple[bool, str]]:
    """GX suite name -> (success, summary) from the run's result files."""
    out: dict[str, tuple[bool, str]] = {}
    for path in sorted(results.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        stats = data.get("statistics") if isinstance(data, dict) else None
        if not stats:
            continue
        suite = data.get("suite_name") or f"horizonbench_{path.stem}"
        failed = stats.get("unsuccessful_expectations")
        out[suite] = (
            bool(data.get("success")),
            f"{stats.get('evaluated_expectations')} expectations, {failed} failed",
        )
    return out


def build_index(docs: Path, results: Path) -> str:
    """The static index: one row per suite, with its validations (newest first)."""
    suites = sorted(p.stem for p in (docs / "expectations").glob("*.html"))
    rows = []
    outcomes = _outcomes(results)
    for suite in suites:
        runs = sorted((docs / "validations" / suite).rglob("*.html"), reverse=True)
        links = "<br>".join(
            f'<a href="{html.escape(p.relative_to(docs).as_posix())}">{html.escape(p.parent.name)}</a>'
            for p in runs
        )
        success, summary = outcomes.get(suite, (None, ""))
        verdict = (
            ""
            if success is None
            else ('<span class="ok">passed</span>' if success else '<span class="bad">FAILED</span>')
        )
        table = suite.removeprefix("horizonbench_").replace("__", "/")
        suite_link = f'<a href="expectations/{html.escape(suite)}.html">suite</a>'
        rows.append(
            f"<tr><td><code>{html.escape(table)}</code></td><td>{verdict} {html.escape(summary)}</td>"
            f"<td>{suite_link}</td><td>{links or 'none'}</td></tr>"
        )
    body = "\n".join(rows) or '<tr><td colspan="4">no validations yet</td></tr>'
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>Validation results</title>'
        f"{OFFLINE_MARK}{_STYLE}</head><body>\n<h1>Great Expectations: every table of this run</h1>\n"
        "<p>Each table's expectation suite and its validation results (one per part of a "
        "partitioned table). The outcome is the run's own record in <code>validation/</code>. "
        f'GX\'s own index (it needs the network): <a href="{GX_INDEX}">{GX_INDEX}</a>.</p>\n'
        "<table><tr><th>table</th><th>outcome</th><th>expectations</th><th>validation results</th></tr>\n"
        f"{body}\n</table></body></html>\n"
    )


def make_offline(docs: Path, results: Path) -> None:
    """Rewrite the data docs under ``docs`` to render offline (idempotent)."""
    if not docs.is_dir():
        return
    index = docs / "index.html"
    if index.exists():
        text = index.read_text(encoding="utf-8")
        if OFFLINE_MARK not in text:  # GX wrote it anew: keep it beside ours
            write_text(text, docs / GX_INDEX)
    for page in sorted(docs.rglob("*.html")):
        if page == index or page.name == GX_INDEX:
            continue
        text = page.read_text(encoding="utf-8")
        if OFFLINE_MARK not in text:
            write_text(strip_remote(text), page)
    write_text(build_index(docs, results), index)
