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

from horizonbench.analysis import summary
from horizonbench.analysis.compounding import compounding_tables
from horizonbench.reports.html import render_report
from horizonbench.schemas.tables import ANALYSIS_SCHEMAS, ATTEMPTS_SCHEMA, SCORES_SCHEMA
from horizonbench.tasks.report import failure_examples

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
    ("hanoi" for whole plans, "hanoi/rollout" for rollouts), each led by that label."""
    label = scores["family"] + scores["mode"].map(lambda m: "" if m == "plan" else f"/{m}")
    parts: dict[str, list[pd.DataFrame]] = {name: [] for name in ANALYSIS_SCHEMAS}
    for family, df in scores.groupby(label, sort=True):
        df = df.reset_index(drop=True)
        tables = {
            "overall": summary.overall(df),
            "by_length": summary.success_by_length(df, bin_width=5),
            "fits": summary.fit_all(df, bootstrap=5, seed=0, bin_width=5),
            "violations": summary.violation_counts(df),
            "first_violations": summary.first_violation_hist(df),
        }
        tables["compounding"], tables["by_n"] = compounding_tables(df)
        for name, table in tables.items():
            if not table.empty:
                parts[name].append(table.assign(family=family))
    return {
        name: pd.concat(parts[name], ignore_index=True)[schema.names]
        if parts[name]
        else pd.DataFrame(columns=schema.names)
        for name, schema in ANALYSIS_SCHEMAS.items()
    }


def _render(tables: dict[str, pd.DataFrame], examples: list[dict] | None = None) -> str:
    return render_report(
        title="horizonbench: puzzles",
        run_info={"run": "test"},
        overall=tables["overall"],
        by_length=tables["by_length"],
        fits=tables["fits"],
        violations=tables["violations"],
        first_violations=tables["first_violations"],
        examples=examples or [],
        counts={},
        compounding=tables["compounding"],
        by_n=tables["by_n"],
    )


def _only(tables: dict[str, pd.DataFrame], maze: bool) -> dict[str, pd.DataFrame]:
    """The maze rows (or all the others) of every table."""
    return {name: df[(df["family"] == "maze") == maze].reset_index(drop=True) for name, df in tables.items()}


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


def test_puzzle_section_with_maze_and_puzzles(mixed_html: str) -> None:
    assert 'id="puzzles"' in mixed_html and 'href="#puzzles"' in mixed_html
    for anchor in MAZE_SECTIONS:
        assert f'id="{anchor}"' in mixed_html
    # five maze figures and the puzzle grid
    assert mixed_html.count("<svg") == 6
    for link in re.findall(r'href="#([^"]+)"', mixed_html):
        assert f'id="{link}"' in mixed_html
    # still one self-contained page
    assert "<script" not in mixed_html.lower() and "http:" not in mixed_html and "https:" not in mixed_html


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
        "predicted 95% interval",
        "move legality",
        "optimality gap (solved)",
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
    assert page.count("<svg") == 1
    assert 'id="summary"' in page and 'id="examples"' in page


def test_only_maze_has_no_puzzle_section(mixed_tables: dict[str, pd.DataFrame]) -> None:
    page = _render(_only(mixed_tables, maze=True))
    assert 'id="puzzles"' not in page and 'href="#puzzles"' not in page
    assert "RecurrReason" not in page
    assert page.count("<svg") == 5


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
    page = _render(tables, examples)
    assert "<script" not in page.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    # escaped in the tables, the example and the figure's legend alike
    assert page.count("&lt;script&gt;") >= 4


def _frames(**puzzle: pd.DataFrame) -> dict:
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
    page = render_report(title="t", run_info={}, examples=[], counts={}, **frames)
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
    page = render_report(title="t", run_info={}, examples=[], counts={}, **frames)
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
    page = render_report(title="t", run_info={}, examples=examples, counts={}, **_frames())
    headers = re.findall(r"<header><strong>m</strong>(.*?)</header>", page, re.S)
    rollout = [h for h in headers if "rollout" in h]
    assert len(headers) == 3 and len(rollout) == 1
    # the turn counts from 0; the page says which step, counting from 1
    assert "hanoi" in rollout[0] and "step 3" in rollout[0] and "loop" in rollout[0]
