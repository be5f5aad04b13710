"""The calibration figures the world-model report captions quote are the ones
benchmarks/README.md records from its command.

The captions of Tables 5 and 10 state a coverage and a false-positive rate; they were
copied from the suite's 200-study run, and nothing else ties the two, so a case that
changes would leave the report quoting old numbers. This test reads both and compares.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "src" / "horizonbench" / "reports" / "templates" / "_world_papers.html"
BENCH = ROOT / "benchmarks" / "README.md"

#: the caption's wording -> the name of its row in benchmarks/README.md's table
CASES = {
    "planted h": "Cohen's h between agents (Table 10)",
    "planted δ": "Cliff's delta of an ablation (Table 5)",
}


def recorded(case: str, arm: str) -> float:
    """The observed figure of one arm of one case in benchmarks/README.md."""
    for line in BENCH.read_text().splitlines():
        if line.startswith(case) and re.search(rf"\s{arm}\s", line):
            # planted: arm, measure, goal, observed; null: arm, "false positives", "<=", goal, observed
            cells = line[len(case) :].split()
            return float(cells[5] if arm == "null" else cells[3])
    raise AssertionError(f"benchmarks/README.md has no {arm} row for {case!r}")


def quoted(phrase: str) -> tuple[float, float]:
    """(coverage, false positives) in the caption sentence that names ``phrase``."""
    text = " ".join(TEMPLATE.read_text().split())
    pattern = (
        rf"covered a {re.escape(phrase)} of \S+ in ([0-9.]+) of studies"
        r" and excluded 0 \D*? in ([0-9]+\.[0-9]+)"
    )
    m = re.search(pattern, text)
    assert m, f"no calibration sentence for {phrase!r} in {TEMPLATE.name}"
    return float(m.group(1)), float(m.group(2))


@pytest.mark.parametrize("phrase", sorted(CASES))
def test_a_caption_quotes_the_recorded_calibration(phrase: str) -> None:
    coverage, false_positives = quoted(phrase)
    case = CASES[phrase]
    assert coverage == recorded(case, "planted")
    assert false_positives == recorded(case, "null")
