"""The README's "Reproducing the papers" table: complete, well formed, and held to its
run folders.

What each row promises (an output table with rows, a report section) is checked on the
smoke run of its config in ``tests/test_shipped_configs.py`` (``check_run`` after each
run), so no config runs twice; here: the reader (tests/reproducing_papers.py) on the real
README and on generated tables, a malformed row failing with one line naming it, every
numbered table and figure of the three papers named by a row, every row's config a
shipped config that the smoke runs cover, and ``check_run`` finding each kind of missing
output on a run folder built by hand.
"""

from __future__ import annotations

import dataclasses
import string
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reproducing_papers import (
    COLUMNS,
    HEADING,
    INVENTORY,
    NONE,
    PAPERS,
    ROOT,
    Row,
    TableError,
    check_run,
    parse_row,
    read_rows,
)
from test_shipped_configs import CONFIGS, SMOKE_CONFIGS


@pytest.fixture(scope="module")
def rows() -> list[Row]:
    return read_rows()


def test_every_numbered_table_and_figure_of_the_papers_has_a_row(rows):
    named: dict[str, set[tuple[str, int]]] = {p: set() for p in PAPERS}
    for row in rows:
        named[row.paper] |= row.numbered()
    for paper, kinds in INVENTORY.items():
        wanted = {(kind, n) for kind, numbers in kinds.items() for n in numbers}
        missing = sorted(wanted - named[paper])
        assert not missing, f"{paper}: no row for {', '.join(f'{k} {n}' for k, n in missing)}"
        # a typo ('Figure 17' of a paper with 16) names nothing the paper has
        extra = sorted(named[paper] - wanted)
        assert not extra, f"{paper} has no {', '.join(f'{k} {n}' for k, n in extra)}"


def test_every_row_with_outputs_names_a_config_the_smoke_runs_cover(rows):
    """A config outside the smoke runs would leave its rows unchecked."""
    smoke = {p.relative_to(ROOT).as_posix() for p in SMOKE_CONFIGS}
    assert {p.relative_to(ROOT).as_posix() for p in CONFIGS} - smoke == {"src/horizonbench/configs/demo.yaml"}
    for row in rows:
        if row.outputs:
            assert row.config in smoke, f"README line {row.line}: {row.config} is not a shipped config"


def test_rows_with_outputs_and_rows_without(rows):
    """Most rows are reproducible; those that are not say why (the reader insists)."""
    with_outputs = [r for r in rows if r.outputs]
    assert len(with_outputs) >= 20
    assert all(r.gap for r in rows if not r.outputs)


# --- the reader ---------------------------------------------------------------------------

_HEADER = "| " + " | ".join(COLUMNS) + " |\n| " + " | ".join("---" for _ in COLUMNS) + " |\n"
_GOOD = (
    "| seqBench | Figure 1 | `configs/figure1.yaml`"
    " | `horizonbench run --config configs/figure1.yaml --out r`"
    " | `analysis/fits.parquet`, `instances/maze` | `#fits` | — |"
)
_NO_DATA = "| RecurrReason | Table 3 | — | — | — | — | notation, no data |"


def _readme(*lines: str) -> str:
    return (
        f"# x\n\n{HEADING}\n\nSome words.\n\n{_HEADER}"
        + "".join(f"{line}\n" for line in lines)
        + "\n## Next\n"
    )


def test_the_reader_reads_a_row_with_outputs_and_one_without():
    good, no_data = read_rows(_readme(_GOOD, _NO_DATA))
    assert good == Row(
        line=9,
        paper="seqBench",
        items=("Figure 1",),
        config="configs/figure1.yaml",
        command="horizonbench run --config configs/figure1.yaml --out r",
        outputs=("analysis/fits.parquet", "instances/maze"),
        sections=("#fits",),
        gap=None,
    )
    assert no_data.outputs == () and no_data.config is None and no_data.gap == "notation, no data"
    assert no_data.numbered() == {("Table", 3)}


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("| seqBench | Figure 1 | — | — | — | — |", "6 cells, the table has 7"),
        (_NO_DATA.replace("RecurrReason", "seqbench"), "paper 'seqbench' is none of"),
        (_NO_DATA.replace("Table 3", "Tab. 3"), "'Tab. 3' is not 'Table N'"),
        (_NO_DATA.replace("notation, no data", NONE), "a row with no output must say why"),
        (_GOOD.replace("`configs/figure1.yaml` |", "— |"), "names its config and command"),
        (
            _GOOD.replace("--config configs/figure1.yaml", "--config configs/demo.yaml"),
            "does not run its config",
        ),
        (_GOOD.replace("`#fits` | — |", "— | — |"), "no report section must say why"),
        (_GOOD.replace("`analysis/fits.parquet`", "analysis/fits.parquet"), "is not `value`"),
        (_GOOD.replace("`analysis/fits.parquet`", "`../fits.parquet`"), "not a path inside the run folder"),
        (_GOOD.replace("`#fits`", "`fits`"), "is not an HTML id"),
        (_GOOD.replace("`#fits`", "`#fits"), "an unclosed backtick"),
        (_NO_DATA.replace("| — | notation", "| `#fits` | notation"), "names no config, command or section"),
    ],
)
def test_a_malformed_row_fails_with_one_line_naming_it(line, problem):
    with pytest.raises(TableError) as info:
        read_rows(_readme(_GOOD, line))
    message = str(info.value)
    assert message.startswith("line 10: ") and problem in message and "\n" not in message, message


def test_a_malformed_table_fails_with_one_line():
    for text, problem in [
        ("# x\n", "has no '## Reproducing the papers' section"),
        (f"{HEADING}\n\nno table\n\n## Next\n| a |\n", "has no table"),
        (f"{HEADING}\n\n| paper | config |\n| --- | --- |\n", "the header must be"),
        (f"{HEADING}\n\n" + _HEADER.splitlines()[0] + "\n" + _GOOD + "\n", "rule line"),
        (f"{HEADING}\n\n{_HEADER}\n", "no rows"),
    ]:
        with pytest.raises(TableError, match=problem) as info:
            read_rows(text)
        assert "\n" not in str(info.value)


_WORD = st.text(string.ascii_letters + string.digits + " .;:'()-=*", min_size=1, max_size=30).map(str.strip)
_PATH = st.lists(
    st.text(string.ascii_lowercase + "_@.-", min_size=1, max_size=12), min_size=1, max_size=3
).map("/".join)
_ITEMS = st.lists(
    st.tuples(
        st.sampled_from(["Table", "Figure"]), st.integers(1, 40), st.sampled_from(["", "a", " (left)"])
    ).map(lambda t: f"{t[0]} {t[1]}{t[2]}"),
    min_size=1,
    max_size=4,
)


@st.composite
def _rows(draw) -> Row:
    items = tuple(draw(_ITEMS))
    gap = draw(st.one_of(st.none(), _WORD.filter(lambda w: w and w != NONE)))
    if draw(st.booleans()):
        config = f"configs/{draw(st.from_regex(r'[a-z][a-z0-9-]{0,10}', fullmatch=True))}.yaml"
        command = f"horizonbench run --config {config} --out runs/{draw(_PATH)}"
        outputs = tuple(
            p for p in draw(st.lists(_PATH, min_size=1, max_size=3)) if ".." not in p.split("/")
        ) or ("scores/scores.parquet",)
        sections = tuple(
            f"#{s}"
            for s in draw(st.lists(st.from_regex(r"[a-z][a-z0-9_@.-]{0,12}", fullmatch=True), max_size=3))
        )
        if not sections and gap is None:
            gap = "why"
    else:
        config = command = None
        outputs, sections = (), ()
        gap = gap or "why"
    return Row(0, draw(st.sampled_from(PAPERS)), items, config, command, outputs, sections, gap)


def _render(row: Row) -> str:
    def codes(values: tuple[str, ...]) -> str:
        return ", ".join(f"`{v}`" for v in values) or NONE

    cells = [
        row.paper,
        ", ".join(row.items),
        codes((row.config,) if row.config else ()),
        codes((row.command,) if row.command else ()),
        codes(row.outputs),
        codes(row.sections),
        row.gap or NONE,
    ]
    return "| " + " | ".join(cells) + " |"


@settings(max_examples=200, deadline=None)
@given(st.lists(_rows(), min_size=1, max_size=5))
def test_the_reader_reads_back_any_table_it_accepts(drawn):
    """Round trip: a table written from rows reads back as those rows, line numbers and all."""
    text = _readme(*(_render(r) for r in drawn))
    got = read_rows(text)
    assert [dataclasses.replace(r, line=0) for r in got] == drawn
    assert [r.line for r in got] == list(range(9, 9 + len(drawn)))


@settings(max_examples=200, deadline=None)
@given(_rows(), st.integers(0, 6), st.sampled_from(["", "`", "| x"]))
def test_a_damaged_row_is_read_or_refused_never_misread(row, cell, damage):
    """A row with one cell damaged either reads as a row the rules allow or fails with a
    TableError: never another exception."""
    cells = _render(row)[2:-2].split(" | ")
    cells[cell] = cells[cell] + damage
    try:
        parse_row("| " + " | ".join(cells) + " |", 3)
    except TableError as exc:
        assert str(exc).startswith("line 3: ")


def test_the_readme_table_reads(rows):
    """The real README: the reader's own rules hold for every row (read_rows raised
    otherwise), and each row's line is where the README has it."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    for row in rows:
        assert lines[row.line - 1].startswith(f"| {row.paper} | ")


# --- check_run on a run folder built by hand ---------------------------------------------


def _table(path: Path, n: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"x": list(range(n))}), path)


def test_check_run_finds_each_kind_of_missing_output(tmp_path):
    rows = read_rows(
        _readme(
            "| seqBench | Figure 1 | `configs/a.yaml` | `horizonbench run --config configs/a.yaml --out r` | "
            "`analysis/good.parquet`, `instances/maze`, `analysis/empty.parquet`, `analysis/gone.parquet`, "
            "`analysis/junk.parquet` | `#fits`, `#absent` | — |",
            "| seqBench | Figure 2 | `configs/b.yaml` | `horizonbench run --config configs/b.yaml --out r` | "
            "`analysis/other.parquet` | `#other` | — |",
        )
    )
    run = tmp_path / "run"
    _table(run / "analysis" / "good.parquet", 3)
    _table(run / "instances" / "maze" / "part-00000.parquet", 2)  # a parted table: its folder
    _table(run / "analysis" / "empty.parquet", 0)
    (run / "analysis" / "junk.parquet").write_bytes(b"not parquet")
    (run / "report").mkdir()
    (run / "report" / "index.html").write_text('<section id="fits"></section>', encoding="utf-8")

    problems = check_run(rows, "configs/a.yaml", run)
    assert [p.split(": ", 1)[1] for p in problems] == [
        "analysis/empty.parquet has no rows",
        "analysis/gone.parquet is missing",
        "analysis/junk.parquet is no readable Parquet table (ArrowInvalid)",
        'report/index.html has no id="absent"',
    ]
    assert all(p.startswith("README line 9 (seqBench Figure 1)") for p in problems)
    # only the rows of the config asked for
    assert check_run(rows, "configs/c.yaml", run) == []
    # a run with no report: every section is missing
    (run / "report" / "index.html").unlink()
    assert sum("has no report/index.html" in p for p in check_run(rows, "configs/a.yaml", run)) == 2


def test_check_run_passes_a_complete_run(tmp_path):
    rows = read_rows(_readme(_GOOD))
    run = tmp_path / "run"
    _table(run / "analysis" / "fits.parquet", 1)
    _table(run / "instances" / "maze" / "part-00000.parquet", 1)
    (run / "report").mkdir()
    (run / "report" / "index.html").write_text('<h2 id="fits">Fits</h2>', encoding="utf-8")
    assert check_run(rows, "configs/figure1.yaml", run) == []
