"""The HTML report is self-contained, escapes model text, and renders reproducibly."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from markupsafe import escape

from horizonbench.analysis import summary, worlds
from horizonbench.analysis.failures import choose_failures
from horizonbench.reports import plots
from horizonbench.reports.html import MAX_RESPONSE_CHARS, render_report
from horizonbench.schemas.tables import SCORES_SCHEMA
from horizonbench.tasks.analyse.scores import analyse_scores
from horizonbench.tasks.report.page import failure_examples

HOSTILE = '<script>alert(1)</script><img src="https://evil.example/x.png">'
#: a src/href (or CSS url()) that would make the browser fetch something
EXTERNAL_REF = re.compile(
    r"""(?:\b(?:src|href)\s*=\s*["']?\s*(?:https?:)?//)|url\(\s*["']?\s*(?:https?:)?//""",
    re.I,
)
#: the analysis tables behind seqBench's further figures, passed as ``tables``
SEQBENCH_TABLES = (
    "progress_distribution",
    "first_violation_by_length",
    "violations_by_length",
    "instance_progress",
    "model_pairs",
    "tokens_by_length",
)
#: what a figure drawn from an empty table says instead
EMPTY_FIGURE = re.compile(r">no (?:scored|failed|two models|whole-plan)[^<]*<")
#: the sections holding the maze figures; the decay fits and the per-bin table have none
MAZE_FIGURE_SECTIONS = (
    "success",
    "metrics",
    "progress-distribution",
    "violations",
    "violations-by-length",
    "first-violation",
    "tokens",
    "pairs",
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


def _seqbench_tables(scores: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The seqBench figure tables as the analyse stage computes them, with an output
    token count for every whole-plan answer."""
    tokens = scores[["family", "model", "instance_id", "sample", "mode"]].assign(
        turn=0, output_tokens=10 * scores["solution_length"]
    )
    tables = analyse_scores(scores, bootstrap=0, seed=0, min_attempts=1, bin_width=5, tokens=tokens)
    return {name: tables[name] for name in SEQBENCH_TABLES}


def _inputs(scores: pd.DataFrame, examples: list[dict] | None = None) -> dict:
    return {
        "title": "horizonbench: test run",
        "tables": _seqbench_tables(scores),
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


def _section(html: str, anchor: str) -> str:
    start = html.index(f'<section id="{anchor}">')
    return html[start : html.index("</section>", start)]


def _svgs_by_section(html: str) -> dict[str, int]:
    """How many ``<svg>`` each section holds, sections without any left out; fails
    unless every ``<svg>`` of the page is in a section (sections do not nest)."""
    sections = re.findall(r'<section id="([^"]+)">(.*?)</section>', html, re.S)
    counts = {anchor: body.count("<svg") for anchor, body in sections if "<svg" in body}
    assert sum(counts.values()) == html.count("<svg")
    return counts


def _assert_only_our_script(html: str) -> None:
    """The page's one script is our own inline filter after the content: a bare
    ``<script>`` (no ``src``, no attributes) that nothing in the model text added to."""
    assert re.findall(r"<script\b[^>]*>", html, re.I) == ["<script>"]
    assert len(re.findall(r"</script", html, re.I)) == 1
    assert html.index("<script>") > html.index("</main>")


def test_self_contained(full_html: str) -> None:
    assert full_html.lstrip().lower().startswith("<!doctype html>")
    assert "<svg" in full_html
    assert not EXTERNAL_REF.search(full_html)
    # one script, our own inline filter of the failing answers: no src, nothing loaded
    _assert_only_our_script(full_html)
    body = full_html[full_html.index("<script>") : full_html.index("</script>")]
    for fetching in ("fetch(", "XMLHttpRequest", "import(", "src", "http"):
        assert fetching not in body
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
        "progress-distribution",
        "violations-by-length",
        "tokens",
        "pairs",
        "failures",
        "run",
    ):
        assert f'id="{anchor}"' in full_html
    assert "<details" in full_html
    assert "wls_prefactor" in full_html and "wls_origin" in full_html and "binomial_mle" in full_html
    # every figure holds one SVG and sits in a maze section; each of those has one
    figures = re.findall(r"<figure[^>]*>(.*?)</figure>", full_html, re.S)
    assert [f.count("<svg") for f in figures] == [1] * len(figures)
    assert len(figures) == full_html.count("<svg")
    assert set(_svgs_by_section(full_html)) == set(MAZE_FIGURE_SECTIONS)
    # the figures have data: none is a placeholder saying its table is empty
    for anchor in MAZE_FIGURE_SECTIONS:
        assert not EMPTY_FIGURE.search(_section(full_html, anchor)), anchor
    assert EMPTY_FIGURE.search(render_report(**{**_inputs(_scores()), "tables": {}}))
    # the model pair table compares the two models on their shared instances
    _, pairs = _table_rows(_section(full_html, "pairs"))
    assert [sorted(row[:2]) for row in pairs] == [["noisy-0.02", "noisy-0.05"]]
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


def _failure_boxes(html: str) -> dict[str, str]:
    """Each model's box of failing answers in the failures section, by model."""
    failures = _section(html, "failures")
    starts = [m.start() for m in re.finditer(r'<details class="failures" ', failures)]
    boxes = [failures[a:b] for a, b in zip(starts, [*starts[1:], len(failures)], strict=True)]
    return {re.search(r'data-model="([^"]*)"', box).group(1): box for box in boxes}


def test_failure_summary_shows_the_family(full_html: str) -> None:
    box = _failure_boxes(full_html)["noisy-0.02"]
    answer = re.search(
        r'<details class="failure" data-violation="locked_door" data-family="maze" data-l="40">'
        r"\s*<summary>(.*?)</summary>",
        box,
        re.S,
    )
    assert answer is not None
    line = " ".join(answer.group(1).split())
    assert "· maze ·" in line and "L = 40" in line and "<code>i3</code>" in line
    assert "rollout" not in line
    # an answer without a family says so by an empty label, never another family's
    other = _failure_boxes(full_html)["noisy-0.05"]
    assert '<details class="failure" data-violation="non_adjacent_move" data-family="" data-l="12">' in other


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
    assert 'id="bins"' in html and 'id="puzzles"' not in html
    # the same maze figures, section by section, as from the labelled tables
    assert _svgs_by_section(html) == _svgs_by_section(render_report(**_inputs(scores)))
    assert set(_svgs_by_section(html)) == set(MAZE_FIGURE_SECTIONS)


def test_hostile_response_is_escaped(full_html: str) -> None:
    assert "<script>alert(1)</script>" not in full_html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in full_html
    assert "<img" not in full_html


def _answers(scores: pd.DataFrame) -> pd.DataFrame:
    """One whole-plan attempt per scored row, its answer naming the row."""
    return scores[["model", "family", "instance_id", "sample", "mode"]].assign(
        turn=0, response="answer to " + scores["model"] + "/" + scores["instance_id"]
    )


def test_failures_say_how_many_of_the_model_total_they_show() -> None:
    scores = _scores()
    failed = scores[scores["answered"] & ~scores["success"]]
    expected = failed.groupby("model").size().to_dict()
    assert min(expected.values()) > 4  # more failures than are shown
    examples = failure_examples(scores, _answers(scores), per_model=4)
    _, totals = choose_failures(scores, 4)
    html = render_report(**_inputs(scores, examples), failures_total=totals)
    boxes = _failure_boxes(html)
    assert sorted(boxes) == sorted(expected)
    for model, total in expected.items():
        assert f"<summary>{model}: 4 of {total} failing answers shown</summary>" in boxes[model]
        answers = re.findall(r"<pre>answer to ([^/]*)/", boxes[model])
        assert answers == [model] * 4
        assert '<output class="count">4 shown</output>' in boxes[model]
    # a model whose answers could not be read still says how many failures it had
    html = render_report(**_inputs(scores, examples), failures_total={**totals, "unread": 7})
    assert "<summary>unread: 0 of 7 failing answers shown</summary>" in _failure_boxes(html)["unread"]


class _Page(HTMLParser):
    """Every start tag with its attributes (character references resolved, as a browser
    reads them) and the text of every ``<pre>``."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.pre: list[str] = []
        self._in_pre = False
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "pre":
            self._in_pre = True
            self.pre.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "pre":
            self._in_pre = False

    def handle_data(self, data: str) -> None:
        if self._in_pre:
            self.pre[-1] += data

    def attrs(self, tag: str, css_class: str) -> list[dict[str, str | None]]:
        return [a for t, a in self.tags if t == tag and a.get("class") == css_class]


def test_hostile_text_in_the_failures_browser_stays_text() -> None:
    """Model names, labels and answers are text: they can neither close an attribute
    nor open an element, in the failures browser or in its data attributes."""
    model = 'm" onmouseover="alert(1)" x="<script>alert(2)</script>'
    violation = 'loop" onmouseover="alert(3)'
    family = 'maze"><script>alert(4)</script>'
    response = '" onmouseover="x</pre><script>alert(5)</script><img src=x onerror="alert(6)">'
    examples = [
        {
            "model": model,
            "family": family,
            "mode": "plan",
            "turn": 0,
            "sample": 0,
            "instance_id": 'i1"><b>',
            "solution_length": 7,
            "violation": violation,
            "first_violation_step": 2,
            "response": response,
        },
        {
            "model": model,
            "family": "maze",
            "mode": "plan",
            "turn": 0,
            "sample": 0,
            "instance_id": "i2",
            "solution_length": 9,
            "violation": "locked_door",
            "first_violation_step": 1,
            "response": "a plain answer",
        },
    ]
    html = render_report(**_inputs(_scores(), examples), failures_total={model: 3})
    page = _Page(html)
    # no element, attribute or script came from the model text
    assert [t for t, _ in page.tags if t == "script"] == ["script"]
    assert not [t for t, _ in page.tags if t in ("img", "b")]
    handlers = {(t, name) for t, a in page.tags for name in a if name.startswith("on")}
    assert handlers == {("form", "onsubmit")}
    _assert_only_our_script(html)
    # the attributes read back exactly as the text they were given
    (box,) = page.attrs("details", "failures")
    assert box["data-model"] == model and set(box) == {"class", "data-model", "open"}
    answers = page.attrs("details", "failure")
    assert [(a["data-violation"], a["data-family"], a["data-l"]) for a in answers] == [
        (violation, family, "7"),
        ("locked_door", "maze", "9"),
    ]
    assert all(set(a) == {"class", "data-violation", "data-family", "data-l"} for a in answers)
    options = {a["value"] for t, a in page.tags if t == "option"}
    assert {violation, family} <= options
    # the answer is the text of its <pre>, whole
    assert page.pre == [response, "a plain answer"]
    failures = _section(html, "failures")
    assert "&lt;/pre&gt;&lt;script&gt;alert(5)&lt;/script&gt;" in failures
    assert f"<summary>{escape(model)}: 2 of 3 failing answers shown</summary>" in failures


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
    _assert_only_our_script(html)
    assert "<script>alert" not in html
    assert not EXTERNAL_REF.search(html)
    assert "gpt&lt;script&gt;alert(2)&lt;/script&gt;" in html
    assert "planner: &lt;script&gt;alert(3)&lt;/script&gt; context exceeded" in html
    graph_nav = _world_section(html, "graph_nav")
    assert 'id="world-graph_nav-harness"' in graph_nav
    assert "budget stops (counted as failures)" in graph_nav and "<h4>Harness limits</h4>" in graph_nav
    part = graph_nav[graph_nav.index('id="world-graph_nav-harness"') :]
    # both memory modes side by side, the calls table, and the cells with budget stops
    assert "structured" in part and "summary" in part
    for header in ("repairs", "fallbacks", "calls / step", "budget stops (failures)", "format failures"):
        assert f">{header}</th>" in part, header
    budget = part[part.index("<h4>Harness limits</h4>") : part.index("Calls, repairs and fallbacks")]
    cells = re.findall(r"<tr><td>([^<]*)</td><td[^>]*>(\d+)</td><td[^>]*>(\d+)</td>", budget)
    assert cells == [
        ("gpt&lt;script&gt;alert(2)&lt;/script&gt;", "10", "1"),
        ("gpt&lt;script&gt;alert(2)&lt;/script&gt;", "15", "1"),
    ]
    # budget stops are failures: the cell where every episode hit a limit reads 0%, and
    # the rate without them stands beside each rate
    cells_table = graph_nav[graph_nav.index("<h3>Cells</h3>") : graph_nav.index("<h3>Cliffs")]
    rows = re.findall(
        r"<tr><td>gpt&lt;script&gt;alert\(2\)&lt;/script&gt;</td><td[^>]*>(\d+)</td>", cells_table
    )
    assert rows == ["5", "10", "15"]
    assert ">success without them</th>" in cells_table and ">budget stops (failures)</th>" in cells_table
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
    assert "at limit" not in plain and "harness" not in marked
    # sc 10: 1 of 4 stopped; sc 15: all 4, a rate of 0 (failures), not a blank cell
    assert "1 at limit" in marked and "4 at limit" in marked


# --- what the metrics and the fits mean ------------------------------------------------


def _table_rows(section: str) -> tuple[list[str], list[list[str]]]:
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", section)
    rows = [re.findall(r"<td[^>]*>([^<]*)</td>", tr) for tr in re.findall(r"<tr><td.*?</tr>", section)]
    return headers, rows


def test_each_fit_says_which_success_it_counts(full_html: str) -> None:
    fits = _section(full_html, "fits")
    headers, rows = _table_rows(fits)
    col = headers.index("success counted")
    assert headers.index("method") < col < headers.index("L0")
    assert len(rows) == 6 and [r[col] for r in rows] == ["simulation"] * 6  # 2 models x 3 fits
    text = " ".join(fits.split())
    assert "<strong>simulation</strong>: the plan, replayed in the simulator, is legal" in text
    assert "seqBench’s Figure 1 fits Pass@1 instead, an exact match with the gold plan" in text
    # the summary no longer calls the simulated success Pass@1
    summary_text = " ".join(_section(full_html, "summary").split())
    assert "Success is judged by simulation" in summary_text
    assert "Success is Pass@1" not in summary_text
    assert "Exact match is seqBench’s Pass@1" in summary_text


def test_the_fits_section_names_the_wls_form_of_the_papers_numbers(full_html: str) -> None:
    """Both WLS forms are named, the paper's L0 is said to be the origin form (with the
    paper's sentence), and no fit is called "the paper's fit" without its form."""
    text = " ".join(_section(full_html, "fits").split())
    headers, rows = _table_rows(_section(full_html, "fits"))
    assert {r[headers.index("method")] for r in rows} == {"wls_prefactor", "wls_origin", "binomial_mle"}
    assert "The paper’s L0 values correspond to <strong>wls_origin</strong>" in text
    assert "“we fit an exponential decay curve P(L)=exp(−L/L0) to the success rates”" in text
    assert "<strong>wls_prefactor</strong> fits log P = log A − L/L0" in text
    page = " ".join(full_html.split())
    assert "paper’s fit" not in page and "paper's fit" not in page


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
    assert [r[headers.index("success counted")] for r in rows] == ["simulation"] * 6


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


def test_the_config_as_run_is_in_the_provenance_block_escaped() -> None:
    inputs = _inputs(_scores())
    inputs["run_info"] = {
        **inputs["run_info"],
        "config": {"run": {"name": "x<b>y"}, "families": {"maze": {"params": {"noise_ratio": 0.5}}}},
    }
    html = render_report(**inputs)
    block = html[
        html.index('<pre class="config">') : html.index("</pre>", html.index('<pre class="config">'))
    ]
    assert "name: x&lt;b&gt;y" in block
    assert "noise_ratio: 0.5" in block
    assert "<dt>config</dt>" not in html  # shown once, as YAML, not as a JSON line
