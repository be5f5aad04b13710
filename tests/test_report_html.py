"""The HTML report is self-contained, escapes model text, and renders reproducibly."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from horizonbench.analysis import summary
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
