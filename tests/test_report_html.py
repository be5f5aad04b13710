"""The HTML report is self-contained, escapes model text, and renders reproducibly."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from horizonbench.analysis import summary, worlds
from horizonbench.reports import plots
from horizonbench.reports.html import MAX_RESPONSE_CHARS, render_report
from horizonbench.schemas.tables import SCORES_SCHEMA

HOSTILE = '<script>alert(1)</script><img src="https://evil.example/x.png">'
#: a src/href (or CSS url()) that would make the browser fetch something
EXTERNAL_REF = re.compile(
    r"""(?:\b(?:src|href)\s*=\s*["']?\s*(?:https?:)?//)|url\(\s*["']?\s*(?:https?:)?//""",
    re.I,
)


def _scores() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for model, eps in (("noisy-0.02", 0.02), ("noisy-0.05", 0.05)):
        for i, L in enumerate(rng.integers(5, 60, size=80)):
            ok = bool(rng.random() < (1 - eps) ** L)
            step = None if ok else int(rng.integers(0, L))
            rows.append(
                {
                    "model": model,
                    "instance_id": f"i{i}",
                    "family": "maze",
                    "mode": "plan",
                    "sample": 0,
                    "answered": True,
                    "solution_length": int(L),
                    "num_keys": 1,
                    "noise_ratio": 0.0,
                    "shuffle_ratio": 0.0,
                    "success": ok,
                    "valid": ok,
                    "exact_match": ok,
                    "progress_ratio": 1.0 if ok else step / L,
                    "precision": 1.0 if ok else 0.6,
                    "precision_positional": 1.0 if ok else 0.2,
                    "recall": 1.0 if ok else step / L,
                    "plan_length": int(L),
                    "violation": None if ok else ("locked_door" if i % 2 else "non_adjacent_move"),
                    "first_violation_step": step,
                    "parse_error": None,
                }
            )
    return pa.Table.from_pylist(rows, schema=SCORES_SCHEMA).to_pandas()


def _maze(table: pd.DataFrame) -> pd.DataFrame:
    """An analysis table as the analyse stage writes it: led by its ``family`` label."""
    return table.assign(family="maze")[["family", *table.columns]]


def _inputs(scores: pd.DataFrame, examples: list[dict] | None = None) -> dict:
    return {
        "title": "horizonbench: test run",
        "run_info": {"run": "test", "seed": 0, "git_sha": "abc123", "versions": {"numpy": np.__version__}},
        "overall": _maze(summary.overall(scores)),
        "by_length": _maze(summary.success_by_length(scores, bin_width=5)),
        "fits": _maze(summary.fit_all(scores, bootstrap=10, seed=0, bin_width=5)),
        "violations": _maze(summary.violation_counts(scores)),
        "first_violations": _maze(summary.first_violation_hist(scores)),
        "examples": examples or [],
        "counts": {
            "instances_per_family": {"maze": 80},
            "candidates_generated": 120,
            "candidates_rejected": 40,
            "unfilled_bins": [],
            "attempts": 160,
        },
    }


@pytest.fixture(scope="module")
def full_html() -> str:
    examples = [
        {
            "model": "noisy-0.02",
            "instance_id": "i3",
            "family": "maze",
            "mode": "plan",
            "turn": 0,
            "solution_length": 40,
            "violation": "locked_door",
            "response": HOSTILE,
        },
        {
            "model": "noisy-0.05",
            "instance_id": "i4",
            "solution_length": 12,
            "violation": "non_adjacent_move",
            "response": "x" * (MAX_RESPONSE_CHARS + 500),
        },
    ]
    return render_report(**_inputs(_scores(), examples))


def test_self_contained(full_html: str) -> None:
    assert full_html.lstrip().lower().startswith("<!doctype html>")
    assert "<svg" in full_html
    assert not EXTERNAL_REF.search(full_html)
    assert "<script" not in full_html.lower()
    assert "<link" not in full_html.lower()


def test_all_sections_present(full_html: str) -> None:
    for anchor in (
        "summary",
        "success",
        "fits",
        "metrics",
        "violations",
        "first-violation",
        "bins",
        "examples",
        "run",
    ):
        assert f'id="{anchor}"' in full_html
    assert "<details" in full_html
    assert "wls_log" in full_html and "binomial_mle" in full_html
    assert full_html.count("<svg") == 5
    # maze only: no puzzle section, and the nav links nowhere it does not lead
    assert 'id="puzzles"' not in full_html and 'href="#puzzles"' not in full_html
    for link in re.findall(r'href="#([^"]+)"', full_html):
        assert f'id="{link}"' in full_html


def test_summary_leads_with_the_family(full_html: str) -> None:
    summary_html = full_html[full_html.index('id="summary"') : full_html.index('id="success"')]
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", summary_html)
    assert headers[:2] == ["family", "model"]
    rows = re.findall(r"<tr><td>([^<]*)</td><td>([^<]*)</td>", summary_html)
    assert rows == [("maze", "noisy-0.02"), ("maze", "noisy-0.05")]


def test_example_header_shows_the_family(full_html: str) -> None:
    header = re.search(r"<header><strong>noisy-0\.02</strong>(.*?)</header>", full_html, re.S)
    assert header is not None
    assert "maze" in header.group(1) and "L = 40" in header.group(1)
    assert "rollout" not in header.group(1)


def test_frames_without_a_family_column_are_maze_tables() -> None:
    """Callers from before the puzzle families pass unlabelled seqBench tables."""
    scores = _scores()
    inputs = {
        **_inputs(scores),
        "overall": summary.overall(scores),
        "by_length": summary.success_by_length(scores, bin_width=5),
        "fits": summary.fit_all(scores, bootstrap=10, seed=0, bin_width=5),
        "violations": summary.violation_counts(scores),
        "first_violations": summary.first_violation_hist(scores),
    }
    html = render_report(**inputs)
    assert html.count("<svg") == 5
    assert 'id="bins"' in html and 'id="puzzles"' not in html


def test_hostile_response_is_escaped(full_html: str) -> None:
    assert "<script>alert(1)</script>" not in full_html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in full_html
    assert "<img" not in full_html


def test_long_response_is_truncated(full_html: str) -> None:
    assert "x" * (MAX_RESPONSE_CHARS + 1) not in full_html
    assert "x" * MAX_RESPONSE_CHARS in full_html
    assert "500 more characters not shown" in full_html


def test_svg_ids_are_unique_across_figures(full_html: str) -> None:
    ids = re.findall(r'\bid="([^"]+)"', full_html)
    assert len(ids) == len(set(ids))


def test_no_url_at_all_without_untrusted_text() -> None:
    """Even SVG namespace declarations are stripped, so nothing can look like a fetch."""
    html = render_report(**_inputs(_scores()))
    assert "http:" not in html and "https:" not in html


def test_renders_with_empty_inputs() -> None:
    empty = pa.Table.from_pylist([], schema=SCORES_SCHEMA).to_pandas()
    html = render_report(**{**_inputs(empty), "run_info": {}, "counts": {}})
    assert "No model was evaluated" in html
    assert not EXTERNAL_REF.search(html)


def test_renders_with_bare_empty_frames() -> None:
    """Callers may pass columnless frames when a stage was skipped entirely."""
    html = render_report(
        title="t",
        run_info={},
        overall=pd.DataFrame(),
        by_length=pd.DataFrame(),
        fits=pd.DataFrame(),
        violations=pd.DataFrame(),
        first_violations=pd.DataFrame(),
        examples=[],
        counts={},
    )
    assert "No model was evaluated" in html


def test_two_renders_are_byte_identical() -> None:
    scores = _scores()
    examples = [
        {
            "model": "m",
            "instance_id": "i",
            "solution_length": 3,
            "violation": "locked_door",
            "response": HOSTILE,
        }
    ]
    first = render_report(**_inputs(scores, examples))
    second = render_report(**_inputs(scores, examples))
    assert first.encode() == second.encode()


# --- world studies with model agents (the harness part) ------------------------------

HOSTILE_MODEL = "gpt<script>alert(2)</script>"
HOSTILE_LIMIT = "planner: <script>alert(3)</script> context exceeded"


def _world_tables(with_models: bool) -> dict[str, pd.DataFrame]:
    """graph_nav with an offline agent, and (``with_models``) two memory modes of a model
    whose name and budget details are hostile; tool_dag offline only."""
    from test_analysis_harness import episode, frame

    rows = []
    for sc in (5, 10, 15):
        for i in range(4):
            rows.append(episode("oracle", sc, "success", n=i))
            rows.append(
                {**episode("bounded-8", sc, "failure" if sc > 5 else "success", n=i), "env": "tool_dag"}
            )
            if with_models:
                stop = sc == 15 or (sc == 10 and i == 0)
                rows.append(
                    episode(
                        HOSTILE_MODEL,
                        sc,
                        "budget_exceeded" if stop else ("success" if sc == 5 else "failure"),
                        n=i,
                        memory="structured",
                        prompt_version="v1",
                        calls=30,
                        repairs=2,
                        fallbacks=1,
                        budget_detail=HOSTILE_LIMIT if stop else None,
                    )
                )
                rows.append(
                    episode(
                        "gpt-summary",
                        sc,
                        "success" if sc < 15 else "failure",
                        n=i,
                        memory="summary",
                        calls=20,
                    )
                )
    return worlds.world_tables(frame(rows), bootstrap=0)


def _world_section(html: str, env: str) -> str:
    start = html.index(f'<section id="world-{env}">')
    return html[start : html.index("</section>", start)]


def test_the_harness_part_compares_memory_modes_and_escapes_model_text() -> None:
    html = render_report(**_inputs(_scores()), worlds=_world_tables(with_models=True))
    assert "<script" not in html.lower()
    assert not EXTERNAL_REF.search(html)
    assert "gpt&lt;script&gt;alert(2)&lt;/script&gt;" in html
    assert "planner: &lt;script&gt;alert(3)&lt;/script&gt; context exceeded" in html
    graph_nav = _world_section(html, "graph_nav")
    assert 'id="world-graph_nav-harness"' in graph_nav
    assert "harness limit, not collapse" in graph_nav and "Harness limits, not collapse" in graph_nav
    part = graph_nav[graph_nav.index('id="world-graph_nav-harness"') :]
    # both memory modes side by side, the calls table, and the cells with budget stops
    assert "structured" in part and "summary" in part
    for header in ("repairs", "fallbacks", "calls / step", "budget_exceeded (left out)"):
        assert f">{header}</th>" in part, header
    budget = part[part.index("Harness limits, not collapse") : part.index("Calls, repairs and fallbacks")]
    cells = re.findall(r"<tr><td>([^<]*)</td><td[^>]*>(\d+)</td><td[^>]*>(\d+)</td>", budget)
    assert cells == [
        ("gpt&lt;script&gt;alert(2)&lt;/script&gt;", "10", "1"),
        ("gpt&lt;script&gt;alert(2)&lt;/script&gt;", "15", "1"),
    ]
    # the cell where every episode hit a limit has no success rate (no row, not 0%)
    cells_table = graph_nav[graph_nav.index("<h3>Cells</h3>") : graph_nav.index("<h3>Cliffs")]
    rows = re.findall(
        r"<tr><td>gpt&lt;script&gt;alert\(2\)&lt;/script&gt;</td><td[^>]*>(\d+)</td>", cells_table
    )
    assert rows == ["5", "10"]
    # only the environment the model agents played has the part; the page stays valid
    assert "harness" not in _world_section(html, "tool_dag").lower()
    assert html.count('id="world-graph_nav-harness"') == 1
    ids = re.findall(r'\bid="([^"]+)"', html)
    assert len(ids) == len(set(ids))


def test_no_harness_part_without_model_agents() -> None:
    html = render_report(**_inputs(_scores()), worlds=_world_tables(with_models=False))
    assert 'id="world-graph_nav"' in html and 'id="world-tool_dag"' in html
    assert "-harness" not in html and "Harness" not in html and "not collapse" not in html


def test_two_world_renders_with_model_agents_are_byte_identical() -> None:
    tables = _world_tables(with_models=True)
    first = render_report(**_inputs(_scores()), worlds=tables)
    assert first.encode() == render_report(**_inputs(_scores()), worlds=tables).encode()


def test_the_phase_diagram_marks_cells_stopped_by_a_harness_limit() -> None:
    tables = _world_tables(with_models=True)
    plain = plots.phase_diagram_svg(tables["grid"], "graph_nav", tables["critical_points"])
    marked = plots.phase_diagram_svg(
        tables["grid"], "graph_nav", tables["critical_points"], tables["excluded"]
    )
    assert "harness" not in plain and "harness" in marked
    assert "+1 limit" in marked  # sc 10: 3 measured, 1 stopped


# --- what the metrics and the fits mean ------------------------------------------------


def _section(html: str, anchor: str) -> str:
    start = html.index(f'<section id="{anchor}">')
    return html[start : html.index("</section>", start)]


def _table_rows(section: str) -> tuple[list[str], list[list[str]]]:
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", section)
    rows = [re.findall(r"<td[^>]*>([^<]*)</td>", tr) for tr in re.findall(r"<tr><td.*?</tr>", section)]
    return headers, rows


def test_each_fit_says_which_success_it_counts(full_html: str) -> None:
    fits = _section(full_html, "fits")
    headers, rows = _table_rows(fits)
    col = headers.index("success counted")
    assert headers.index("method") < col < headers.index("L0")
    assert len(rows) == 4 and [r[col] for r in rows] == ["simulation"] * 4
    text = " ".join(fits.split())
    assert "<strong>simulation</strong>: the plan, replayed in the simulator, is legal" in text
    assert "seqBench’s Figure 1 fits Pass@1 instead, an exact match with the gold plan" in text
    # the summary no longer calls the simulated success Pass@1
    summary_text = " ".join(_section(full_html, "summary").split())
    assert "Success is judged by simulation" in summary_text
    assert "Success is Pass@1" not in summary_text
    assert "Exact match is seqBench’s Pass@1" in summary_text


def test_fits_on_exact_match_say_so() -> None:
    scores = _scores()
    inputs = _inputs(scores)
    inputs["fits"] = _maze(
        summary.fit_all(scores, bootstrap=10, seed=0, bin_width=5, success_definition="exact_match")
    )
    fits = _section(render_report(**inputs), "fits")
    headers, rows = _table_rows(fits)
    assert {r[headers.index("success counted")] for r in rows} == {"exact_match"}
    text = " ".join(fits.split())
    assert "<strong>exact_match</strong>: the plan is identical to the gold plan" in text
    assert "<strong>simulation</strong>" not in text and "Figure 1 fits Pass@1 instead" not in text


def test_a_fits_table_from_before_the_column_was_fitted_on_simulation() -> None:
    scores = _scores()
    inputs = _inputs(scores)
    inputs["fits"] = inputs["fits"].drop(columns="success_definition")
    headers, rows = _table_rows(_section(render_report(**inputs), "fits"))
    assert [r[headers.index("success counted")] for r in rows] == ["simulation"] * 4


def test_both_precisions_are_shown_by_name(full_html: str) -> None:
    scores = _scores()
    expected = summary.overall(scores).set_index("model")
    headers, rows = _table_rows(_section(full_html, "summary"))
    multiset, positional = headers.index("precision (multiset)"), headers.index("precision (positional)")
    assert "precision" not in headers  # never unnamed
    for row in rows:
        model = row[headers.index("model")]
        assert row[multiset] == f"{expected.loc[model, 'precision_mean']:.4g}"
        assert row[positional] == f"{expected.loc[model, 'precision_positional_mean']:.4g}"
        assert row[multiset] != row[positional]
    bins_headers, _ = _table_rows(_section(full_html, "bins"))
    assert "precision (multiset)" in bins_headers and "precision (positional)" in bins_headers


@pytest.mark.parametrize("with_column", [True, False])
def test_violations_show_the_seqbench_category(with_column: bool) -> None:
    scores = _scores()
    inputs = _inputs(scores)
    if not with_column:  # as an analysis table written without the column
        inputs["violations"] = inputs["violations"].drop(columns="category")
    headers, rows = _table_rows(_section(render_report(**inputs), "violations"))
    got = {(r[headers.index("violation")], r[headers.index("seqBench category")]) for r in rows}
    assert got == {("none", "none"), ("locked_door", "locked_door"), ("non_adjacent_move", "adjacency")}
