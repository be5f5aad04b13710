"""The report's sequence-model section (RecurrReason's Tables 2, 5-9, Figures 1-2 and
the trained models' eps): present with its tables and figures when the run has the
seqmodels table, absent without it, model names escaped."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from horizonbench.analysis.seqmodels import seqmodel_table
from horizonbench.reports.html import render_report
from horizonbench.schemas.seqmodels import FAILURE_MODES, SEQMODELS_SCHEMA
from horizonbench.schemas.tables import ANALYSIS_SCHEMAS
from horizonbench.tasks.analyse.scores import to_table
from horizonbench.tasks.report.page import write_report

HOSTILE = "<b>gpt2</b>&-scratch"
LABELS = {"t5-fine_tuned": ("t5", "fine_tuned"), HOSTILE: ("gpt2", "scratch")}
PUZZLES = ("hanoi", "blocks_world")


def _tables() -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(0)
    rows, splits = [], {}
    for model in LABELS:
        for puzzle in PUZZLES:
            for n in range(1, 10):
                split = "validation" if n <= 7 else "ood"
                for k in range(6):
                    iid = f"{puzzle}-{n}-{k}"
                    splits[iid] = split
                    ok = bool(rng.random() < 0.9 / n)
                    rows.append(
                        {
                            "model": model,
                            "instance_id": iid,
                            "family": puzzle,
                            "mode": "rollout",
                            "answered": k != 5 or n != 2,
                            "success": ok,
                            "violation": None if ok else FAILURE_MODES[k % 4],
                            "n": n,
                        }
                    )
    seq = seqmodel_table(pd.DataFrame(rows), splits, LABELS)
    compounding = pd.DataFrame(
        [
            {"family": f"{p}/rollout", "model": m, "eps": 0.1, "eps_low": 0.05, "eps_high": 0.2}
            | {"n_attempts": 54, "successes": 10, "converged": True, "note": None}
            for m in LABELS
            for p in PUZZLES
        ]
    )
    return {"seqmodels": seq, "compounding": compounding}


def _render(tables: dict[str, pd.DataFrame]) -> str:
    return render_report(title="t", run_info={"run": "test"}, examples=[], counts={}, tables=tables)


def _section(page: str) -> str:
    found = re.findall(r'<section id="seqmodels">(.*?)</section>', page, re.S)
    assert len(found) == 1
    return found[0]


def test_section_tables_and_figures() -> None:
    body = _section(_render(_tables()))
    for anchor in ("table2", "per-puzzle", "figure1", "figure2", "eps"):
        assert f'id="seqmodels-{anchor}"' in body
    assert body.count("<svg") == 2
    assert body.count("<table") == 1 + len(PUZZLES) + 1 + 1  # Table 2, Tables 5-8, Table 9, eps
    # the paper's numbers beside ours: Table 8 (blocks_world, t5 fine_tuned) and Table 2
    assert "97.27%" in body and "81.00%" in body
    assert "100.0 / 0.0 / 0.0 / 0.0" in body  # Table 9: hanoi, T5 PT FT, validation
    assert "validation (V)" in body and "OOD (O)" in body
    # one unanswered rollout per model and puzzle, counted apart
    assert "4 rollout(s) got no answer" in " ".join(body.split())


def test_model_names_escaped() -> None:
    page = _render(_tables())
    assert HOSTILE not in page
    assert "<b>gpt2</b>" not in page
    assert "&lt;b&gt;gpt2&lt;/b&gt;&amp;-scratch" in _section(page)


def test_no_section_without_table() -> None:
    assert 'id="seqmodels"' not in _render({"seqmodels": SEQMODELS_SCHEMA.empty_table().to_pandas()})
    assert 'id="seqmodels"' not in _render({})


def test_write_report_reads_the_table(tmp_path) -> None:
    """The report stage picks analysis/seqmodels.parquet up from the run folder."""
    run = tmp_path / "run"
    (run / "analysis").mkdir(parents=True)
    tables = _tables()
    pq.write_table(to_table(tables["seqmodels"], SEQMODELS_SCHEMA), run / "analysis" / "seqmodels.parquet")
    pq.write_table(
        to_table(tables["compounding"], ANALYSIS_SCHEMAS["compounding"]),
        run / "analysis" / "compounding.parquet",
    )
    page = write_report(run, "t", {"run": "test"}, {}).read_text(encoding="utf-8")
    body = _section(page)
    assert "0.1" in body and "blocks_world" in body
