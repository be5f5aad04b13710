"""The report's RecurrReason section: per-step error fits, predicted against observed
success per size n, rollout failure modes, and the maze sections kept to maze rows."""

from __future__ import annotations

import html as htmllib
import math
import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from horizonbench.analysis.failures import choose_failures
from horizonbench.reports.html import render_report
from horizonbench.schemas.tables import ANALYSIS_SCHEMAS, ATTEMPTS_SCHEMA, SCORES_SCHEMA
from horizonbench.tasks.analyse.scores import analyse_scores
from horizonbench.tasks.report.page import failure_examples

HOSTILE = "<script>alert(1)</script>"
MAZE_SECTIONS = ("success", "fits", "metrics", "violations", "first-violation", "bins")
#: optimal length of each puzzle at size n
LENGTH = {"hanoi": lambda n: 2**n - 1, "checkers": lambda n: n * n + 2 * n}
PLAN_FAILURES = ("not_top_disk", "goal_not_reached", "invalid_output")
ROLLOUT_FAILURES = ("invalid_move", "loop", "premature_stop", "budget_exceeded", "invalid_output")


def _row(model: str, family: str, mode: str, iid: str, L: int, ok: bool, **extra: object) -> dict:
    return {
        "model": model,
        "instance_id": iid,
        "family": family,
        "mode": mode,
        "sample": 0,
        "answered": True,
        "solution_length": L,
        "success": ok,
        "valid": ok,
        "exact_match": ok,
        "progress_ratio": 1.0 if ok else 0.5,
        "precision": 1.0 if ok else 0.5,
        "recall": 1.0 if ok else 0.5,
        "plan_length": L,
        **extra,
    }


def _scores(maze_models: tuple[str, ...], puzzle_models: tuple[str, ...]) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    rows = []
    for model in maze_models:
        for i, L in enumerate(rng.integers(5, 40, size=40)):
            ok = bool(rng.random() < 0.97 ** int(L))
            step = None if ok else int(rng.integers(0, L))
            rows.append(
                _row(model, "maze", "plan", f"m{i}", int(L), ok, violation=None if ok else "locked_door")
                | {"first_violation_step": step}
            )
    for model in puzzle_models:
        for family, length in LENGTH.items():
            for mode, failures in (("plan", PLAN_FAILURES), ("rollout", ROLLOUT_FAILURES)):
                for n in range(1, 5):
                    L = length(n)
                    for k in range(6):
                        ok = bool(rng.random() < 0.96**L)
                        rows.append(
                            _row(
                                model,
                                family,
                                mode,
                                f"{family}-n{n}-{k}",
                                L,
                                ok,
                                n=n,
                                violation=None if ok else failures[k % len(failures)],
                                first_violation_step=None if ok else int(rng.integers(0, L)),
                                move_legality_rate=1.0 if ok else 0.8,
                                optimality_gap=(0.0 if k % 2 else 0.25) if ok else None,
                            )
                        )
    return pa.Table.from_pylist(rows, schema=SCORES_SCHEMA).to_pandas()


def _analyse(scores: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The analysis tables as the analyse stage writes them: one evaluation at a time
    ("hanoi" for whole plans, "hanoi/rollout" for rollouts), each led by that label, with
    the tables behind seqBench's further figures for every label too."""
    return analyse_scores(scores, bootstrap=5, seed=0, min_attempts=1, bin_width=5)


def _render(tables: dict[str, pd.DataFrame], examples: list[dict] | None = None, **extra: object) -> str:
    return render_report(
        title="horizonbench: puzzles",
        run_info={"run": "test"},
        tables=tables,
        examples=examples or [],
        counts={},
        **extra,
    )


def _only(tables: dict[str, pd.DataFrame], maze: bool) -> dict[str, pd.DataFrame]:
    """The maze rows (or all the others) of every table."""
    return {name: df[(df["family"] == "maze") == maze].reset_index(drop=True) for name, df in tables.items()}


def _sections(page: str) -> dict[str, str]:
    """Each ``<section>`` of the page by its id (sections do not nest)."""
    return dict(re.findall(r'<section id="([^"]+)">(.*?)</section>', page, re.S))


def _svgs_by_section(page: str) -> dict[str, int]:
    """How many figures (``<svg>`` elements) each section holds, sections without any
    left out; fails unless every ``<svg>`` of the page is in a section."""
    counts = {anchor: body.count("<svg") for anchor, body in _sections(page).items()}
    counts = {anchor: n for anchor, n in counts.items() if n}
    assert sum(counts.values()) == page.count("<svg")
    return counts


def _assert_only_our_script(page: str) -> None:
    """The page's one script is our own inline filter: a bare ``<script>`` (no ``src``,
    no attributes) that nothing in the model text added to."""
    assert re.findall(r"<script\b[^>]*>", page, re.I) == ["<script>"]
    assert len(re.findall(r"</script", page, re.I)) == 1
    assert page.index("<script>") > page.index("</main>")


def _tables_after(page: str, heading: str) -> tuple[list[str], list[list[str]]]:
    """Headers and cell texts of the first table after ``heading``."""
    rest = page[page.index(heading) :]
    table = rest[: rest.index("</table>")]
    headers = [htmllib.unescape(h) for h in re.findall(r"<th[^>]*>([^<]*)</th>", table)]
    rows = [
        [htmllib.unescape(c) for c in re.findall(r"<td[^>]*>([^<]*)</td>", tr)]
        for tr in re.findall(r"<tr>(.*?)</tr>", table, re.S)
        if "<td" in tr
    ]
    return headers, rows


@pytest.fixture(scope="module")
def mixed_tables() -> dict[str, pd.DataFrame]:
    return _analyse(_scores(("maze-model",), ("puzzle-only", "other-puzzler")))


@pytest.fixture(scope="module")
def mixed_html(mixed_tables: dict[str, pd.DataFrame]) -> str:
    return _render(mixed_tables)


def test_puzzle_section_with_maze_and_puzzles(mixed_tables: dict[str, pd.DataFrame], mixed_html: str) -> None:
    assert 'id="puzzles"' in mixed_html and 'href="#puzzles"' in mixed_html
    for anchor in MAZE_SECTIONS:
        assert f'id="{anchor}"' in mixed_html
    # the maze page's figures, section by section, and the puzzle grid
    maze_only = _svgs_by_section(_render(_only(mixed_tables, maze=True)))
    assert set(MAZE_SECTIONS) - {"fits", "bins"} <= set(maze_only)
    assert _svgs_by_section(mixed_html) == {**maze_only, "puzzles": 1}
    for link in re.findall(r'href="#([^"]+)"', mixed_html):
        assert f'id="{link}"' in mixed_html
    # still one self-contained page: our filter script only, nothing fetched
    _assert_only_our_script(mixed_html)
    assert "http:" not in mixed_html and "https:" not in mixed_html


def test_summary_lists_every_family(mixed_html: str) -> None:
    headers, rows = _tables_after(mixed_html, "<h2>Summary</h2>")
    assert headers[:2] == ["family", "model"]
    labels = {(r[0], r[1]) for r in rows}
    assert ("maze", "maze-model") in labels
    for family in ("hanoi", "hanoi/rollout", "checkers", "checkers/rollout"):
        assert (family, "puzzle-only") in labels and (family, "other-puzzler") in labels
    assert len(rows) == 1 + 4 * 2


def test_maze_sections_use_maze_rows_only(mixed_html: str) -> None:
    maze_part = mixed_html[mixed_html.index('id="success"') : mixed_html.index('id="puzzles"')]
    for name in ("puzzle-only", "other-puzzler", "hanoi", "checkers"):
        assert name not in maze_part
    assert "maze-model" in maze_part


def test_eps_table(mixed_html: str) -> None:
    headers, rows = _tables_after(mixed_html, "<h3>Per-step error rate</h3>")
    assert headers == ["family", "mode", "model", "eps", "95% interval", "attempts", "successes", "note"]
    # hanoi before checkers (the paper's order), plan before rollout, then model
    assert [r[:3] for r in rows] == [
        [family, mode, model]
        for family in ("hanoi", "checkers")
        for mode in ("plan", "rollout")
        for model in ("other-puzzler", "puzzle-only")
    ]
    for r in rows:
        eps = float(r[3])
        low, high = (float(x) for x in r[4].split(" – "))
        assert 0 <= low <= eps <= high <= 1
        assert r[5] == "24"


def test_predicted_vs_observed_rows(mixed_html: str) -> None:
    headers, rows = _tables_after(mixed_html, "<h3>Predicted vs observed</h3>")
    assert headers == [
        "family",
        "mode",
        "model",
        "n",
        "mean L",
        "attempts",
        "observed success",
        "predicted success",
        "95% of observed shares",
        "move legality",
        "optimality gap (solved)",
        "distance closed",
        "closest reached",
    ]
    assert len(rows) == 2 * 2 * 2 * 4
    hanoi = [r for r in rows if r[0] == "hanoi" and r[1] == "plan" and r[2] == "puzzle-only"]
    assert [r[3] for r in hanoi] == ["1", "2", "3", "4"]
    assert [r[4] for r in hanoi] == ["1", "3", "7", "15"]
    for r in rows:
        assert r[5] == "6"
        assert r[6].endswith("%") and r[7].endswith("%")
        low, high = (float(x.rstrip("%")) for x in r[8].split(" – "))
        assert low <= float(r[7].rstrip("%")) <= high
        # solved-only: a size nobody solved has no gap, never "nan"
        assert "nan" not in " ".join(r).lower()


def test_failure_mode_table_and_hint(mixed_html: str) -> None:
    section = mixed_html[mixed_html.index('id="puzzles"') :]
    headers, rows = _tables_after(section, "<h3>Failure modes</h3>")
    assert headers == ["family", "mode", "model", "violation", "count", "share"]
    rollout = {r[3] for r in rows if r[1] == "rollout"}
    assert {"invalid_move", "loop", "premature_stop", "budget_exceeded"} <= rollout
    plan = {r[3] for r in rows if r[1] == "plan"}
    assert {"not_top_disk", "goal_not_reached"} <= plan
    assert not {r[0] for r in rows} - {"hanoi", "checkers"}
    for words in ("output-token limit", "visited", "STOP", "twice the optimal"):
        assert words in section


def test_only_puzzles_has_no_maze_sections(mixed_tables: dict[str, pd.DataFrame]) -> None:
    page = _render(_only(mixed_tables, maze=False))
    assert 'id="puzzles"' in page
    for anchor in MAZE_SECTIONS:
        assert f'id="{anchor}"' not in page
        assert f'href="#{anchor}"' not in page
    # the puzzle grid is the page's only figure
    assert _svgs_by_section(page) == {"puzzles": 1}
    assert 'id="summary"' in page and 'id="failures"' in page and 'href="#failures"' in page


def test_only_maze_has_no_puzzle_section(mixed_tables: dict[str, pd.DataFrame]) -> None:
    page = _render(_only(mixed_tables, maze=True))
    assert 'id="puzzles"' not in page and 'href="#puzzles"' not in page
    assert "RecurrReason" not in page
    # every figure is one of the maze sections', each of those but the tables has one
    figures = _svgs_by_section(page)
    assert set(figures) <= set(_sections(page)) - {"puzzles", "summary", "failures", "run"}
    assert set(MAZE_SECTIONS) - {"fits", "bins"} <= set(figures)


def test_identical_inputs_give_identical_bytes(mixed_tables: dict[str, pd.DataFrame]) -> None:
    examples = [{"model": "puzzle-only", "family": "hanoi", "mode": "rollout", "turn": 2, "response": "x"}]
    first = _render(mixed_tables, examples)
    second = _render({name: df.copy() for name, df in mixed_tables.items()}, examples)
    assert first.encode() == second.encode()


def test_svg_ids_are_unique_with_the_puzzle_figure(mixed_html: str) -> None:
    ids = re.findall(r'\bid="([^"]+)"', mixed_html)
    assert len(ids) == len(set(ids))


def test_hostile_model_name_and_response_are_escaped(mixed_tables: dict[str, pd.DataFrame]) -> None:
    tables = {name: df.replace({"model": {"puzzle-only": HOSTILE}}) for name, df in mixed_tables.items()}
    examples = [
        {
            "model": HOSTILE,
            "family": "hanoi",
            "mode": "rollout",
            "turn": 0,
            "instance_id": "hanoi-n1-0",
            "solution_length": 1,
            "violation": "invalid_move",
            "response": HOSTILE,
        }
    ]
    page = _render(tables, examples, failures_total={HOSTILE: 5})
    _assert_only_our_script(page)
    assert "<script>alert" not in page
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt;"
    sections = _sections(page)
    # escaped in the tables, the failing answer and the figure's legend alike
    assert escaped in sections["summary"]
    assert escaped in sections["puzzles"].split("<svg", 1)[1].split("</svg>", 1)[0]
    assert escaped in sections["puzzles"].split("</svg>", 1)[1]
    failures = sections["failures"]
    assert f'<details class="failures" data-model="{escaped}"' in failures
    assert f"<summary>{escaped}: 1 of 5 failing answers shown</summary>" in failures
    assert f"<pre>{escaped}</pre>" in failures


def _frames(**puzzle: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Every analysis table by name, empty but for ``puzzle``."""
    empty = {name: pd.DataFrame(columns=schema.names) for name, schema in ANALYSIS_SCHEMAS.items()}
    return {**empty, **puzzle}


def test_hand_made_rows_are_formatted_as_in_table_11() -> None:
    frames = _frames(
        compounding=pd.DataFrame(
            [
                {
                    "family": "hanoi/rollout",
                    "model": "m",
                    "eps": 0.0123,
                    "eps_low": 0.01,
                    "eps_high": 0.015,
                    "n_attempts": 30,
                    "successes": 12,
                    "converged": True,
                    "note": None,
                }
            ]
        ),
        by_n=pd.DataFrame(
            [
                {
                    "family": "hanoi/rollout",
                    "model": "m",
                    "n": 3,
                    "L_mean": 7.0,
                    "attempts": 10,
                    "successes": 4,
                    "success_rate": 0.4,
                    "predicted": 0.5,
                    "predicted_low": 0.4,
                    "predicted_high": 0.6,
                    "move_legality_mean": 0.95,
                    "optimality_gap_mean": math.nan,
                }
            ]
        ),
    )
    page = render_report(title="t", run_info={}, examples=[], counts={}, tables=frames)
    _, eps_rows = _tables_after(page, "<h3>Per-step error rate</h3>")
    assert eps_rows == [["hanoi", "rollout", "m", "0.0123", "0.01 – 0.015", "30", "12", "—"]]
    _, by_n_rows = _tables_after(page, "<h3>Predicted vs observed</h3>")
    assert by_n_rows == [
        ["hanoi", "rollout", "m", "3", "7", "10", "40.0%", "50.0%", "40.0% – 60.0%", "95.0%", "—"]
    ]
    # no scored maze or summary rows: nothing else breaks
    assert "No model was evaluated" in page
    assert 'id="bins"' not in page


def test_puzzle_rows_without_sizes_still_render() -> None:
    """Violations of a puzzle family but no per-n table: the section shows, the figure
    says why it is empty."""
    frames = _frames(
        violations=pd.DataFrame(
            [{"family": "checkers/rollout", "model": "m", "violation": "loop", "count": 3, "share": 1.0}]
        )
    )
    page = render_report(title="t", run_info={}, examples=[], counts={}, tables=frames)
    assert 'id="puzzles"' in page and "no puzzle attempts" in page
    _, rows = _tables_after(page, "<h3>Failure modes</h3>")
    assert rows == [["checkers", "rollout", "m", "loop", "3", "100.0%"]]


def _attempt(iid: str, mode: str, turn: int, response: str, family: str = "hanoi") -> dict:
    return {
        "attempt_key": f"{iid}-{mode}-{turn}",
        "model": "m",
        "instance_id": iid,
        "family": family,
        "sample": 0,
        "turn": turn,
        "mode": mode,
        "prompt_sha256": "0" * 64,
        "response": response,
        "finish_reason": "stop",
        "input_tokens": 1,
        "output_tokens": 1,
        "latency_s": 0.0,
        "cost_usd": 0.0,
        "tries": 1,
        "reused": False,
        "via_batch": False,
    }


def test_failure_examples_pick_the_failing_rollout_turn() -> None:
    scores = pa.Table.from_pylist(
        [
            _row("m", "hanoi", "rollout", "h1", 7, False, n=3, violation="loop", first_violation_step=2),
            _row("m", "hanoi", "plan", "h1", 7, False, n=3, violation="not_top_disk", first_violation_step=4),
            _row("m", "maze", "plan", "h1", 9, False, violation="locked_door", first_violation_step=1),
            _row("m", "hanoi", "plan", "h2", 3, True, n=2),
        ],
        schema=SCORES_SCHEMA,
    ).to_pandas()
    attempts = pa.Table.from_pylist(
        [
            *(_attempt("h1", "rollout", t, f"rollout turn {t}") for t in range(3)),
            _attempt("h1", "plan", 0, "the whole plan"),
            _attempt("h1", "plan", 0, "a maze plan", family="maze"),
            _attempt("h2", "plan", 0, "solved"),
        ],
        schema=ATTEMPTS_SCHEMA,
    ).to_pandas()
    examples = failure_examples(scores, attempts)
    got = {(e["family"], e["mode"]): (e["response"], e["turn"]) for e in examples}
    assert got == {
        ("hanoi", "rollout"): ("rollout turn 2", 2),
        ("hanoi", "plan"): ("the whole plan", 0),
        ("maze", "plan"): ("a maze plan", 0),
    }
    assert all(set(e) == EXAMPLE_KEYS for e in examples)
    assert {e["violation"]: e["first_violation_step"] for e in examples} == {
        "loop": 2,
        "not_top_disk": 4,
        "locked_door": 1,
    }
    page = render_report(title="t", run_info={}, examples=examples, counts={}, tables=_frames())
    box = re.search(r'<details class="failures" data-model="m"[^>]*>(.*)</details>', page, re.S)
    assert box is not None
    assert "<summary>m: 3 of 3 failing answers shown</summary>" in box.group(1)
    answers = re.findall(
        r'<details class="failure" data-violation="([^"]*)" data-family="([^"]*)" data-l="(\d+)">'
        r"\s*<summary>(.*?)</summary>\s*<pre>(.*?)</pre>",
        box.group(1),
        re.S,
    )
    assert [(v, f, L, text) for v, f, L, _, text in answers] == [
        ("not_top_disk", "hanoi", "7", "the whole plan"),
        ("loop", "hanoi", "7", "rollout turn 2"),
        ("locked_door", "maze", "9", "a maze plan"),
    ]
    summaries = {v: " ".join(line.split()) for v, _, _, line, _ in answers}
    # the turn counts from 0; the page says which rollout step, counting from 1
    assert "· hanoi ·" in summaries["loop"] and "rollout step 3" in summaries["loop"]
    # a whole plan names the step of its first violation, counted from 0
    assert "rollout" not in summaries["not_top_disk"]
    assert "first violation at step 4 (0 = start)" in summaries["not_top_disk"]
    assert "· maze ·" in summaries["locked_door"] and "step 1 (0 = start)" in summaries["locked_door"]


#: what failure_examples says about each failing answer
EXAMPLE_KEYS = {
    "model",
    "family",
    "mode",
    "turn",
    "sample",
    "instance_id",
    "solution_length",
    "L_bin",
    "violation",
    "first_violation_step",
    "response",
}
VIOLATIONS = ("locked_door", "non_adjacent_move", "wrong_key")


def _failing(model: str, lengths: list[int], per_violation: int) -> list[dict]:
    """``per_violation`` failed whole plans of every violation in VIOLATIONS, their
    lengths taken in turn from ``lengths``, and one success."""
    rows = [
        _row(model, "maze", "plan", f"{model}-{v}-{k}", lengths[k % len(lengths)], False, violation=v)
        | {"first_violation_step": 0}
        for v in VIOLATIONS
        for k in range(per_violation)
    ]
    return [*rows, _row(model, "maze", "plan", f"{model}-ok", lengths[0], True)]


def _answers(scores: pd.DataFrame) -> pd.DataFrame:
    """One whole-plan attempt per scored row, its answer naming the row."""
    return pd.DataFrame(
        {
            "model": scores["model"],
            "family": scores["family"],
            "instance_id": scores["instance_id"],
            "sample": scores["sample"],
            "mode": scores["mode"],
            "turn": 0,
            "response": "answer to " + scores["instance_id"],
        }
    )


def test_failure_examples_cap_each_model_and_cover_every_violation_first() -> None:
    rows = [*_failing("many", [12], per_violation=10), *_failing("few", [12], per_violation=1)[1:]]
    scores = pa.Table.from_pylist(rows, schema=SCORES_SCHEMA).to_pandas()
    examples = failure_examples(scores, _answers(scores), per_model=4)
    by_model: dict[str, list[dict]] = {}
    for e in examples:
        by_model.setdefault(e["model"], []).append(e)
    # the cap is per model: the model with two failures keeps both
    assert {m: len(v) for m, v in by_model.items()} == {"many": 4, "few": 2}
    shown = [e["violation"] for e in by_model["many"]]
    # three violations, four places: each violation once before any is repeated
    assert sorted(set(shown)) == sorted(VIOLATIONS)
    assert sorted(shown.count(v) for v in VIOLATIONS) == [1, 1, 2]
    assert {e["violation"] for e in by_model["few"]} == {"non_adjacent_move", "wrong_key"}
    for e in examples:
        assert set(e) == EXAMPLE_KEYS
        assert e["response"] == f"answer to {e['instance_id']}"
        assert e["violation"] in e["instance_id"] and not e["instance_id"].endswith("-ok")
    # the total the page reports is every failure, not the ones shown
    _, totals = choose_failures(scores, 4)
    assert totals == {"few": 2, "many": 30}


def test_failure_examples_cover_every_violation_when_lengths_spread() -> None:
    scores = pa.Table.from_pylist(
        _failing("m", list(range(5, 45, 4)), per_violation=10), schema=SCORES_SCHEMA
    ).to_pandas()
    examples = failure_examples(scores, _answers(scores), per_model=4)
    assert len(examples) == 4
    assert {e["violation"] for e in examples} == set(VIOLATIONS)
