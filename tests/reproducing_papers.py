"""The README's "Reproducing the papers" table: read, checked for completeness, and held
against run folders.

Why a module of its own: the table's promise is that every output it lists exists after a
run of its config. Running every config again would double the shipped-config smoke runs
(the slowest file of ``make test``), so ``tests/test_shipped_configs.py`` checks the rows
of each config on the run folder of its own smoke run (:func:`check_run`), and
``tests/test_reproducing_papers.py`` tests the reader and the table's coverage of the
papers. One reader for both, so the two can never read the table differently.

A row names one or more tables or figures of one paper, then either where they come from
(config, command, output tables under the run folder, report section ids) or, with no
output, why the project cannot produce them. A malformed row is one ``TableError`` line
naming its README line and the problem.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
HEADING = "## Reproducing the papers"
COLUMNS = (
    "paper",
    "table or figure",
    "config",
    "command",
    "output (under the run folder)",
    "report section",
    "not reproduced, or how it differs",
)
#: the papers, as the first column names them
PAPERS = ("seqBench", "RecurrReason", "World-Model Collapse")
#: every numbered table and figure of each paper (read off their captions in
#: /work/shared/papers): each must be named by at least one row
INVENTORY: dict[str, dict[str, range]] = {
    "seqBench": {"Figure": range(1, 17), "Table": range(0)},
    "RecurrReason": {"Figure": range(1, 7), "Table": range(1, 13)},
    "World-Model Collapse": {"Figure": range(1, 8), "Table": range(1, 12)},
}
#: an empty cell
NONE = "—"

_ITEM = re.compile(r"(Table|Figure) (\d+)[a-z]?(?: \([^()]+\))?|Appendix [A-Z] [^,()]+(?: \([^()]+\))?")
_CODE = re.compile(r"`([^`]+)`")
_SECTION_ID = re.compile(r"#[A-Za-z][A-Za-z0-9_.@-]*")
_OUTPUT = re.compile(r"[A-Za-z0-9_.@-]+(?:/[A-Za-z0-9_.@-]+)*")


class TableError(ValueError):
    """The README table is malformed: the message names the line and the problem."""


@dataclass(frozen=True)
class Row:
    """One row of the table; ``line`` is its 1-based line in the README."""

    line: int
    paper: str
    items: tuple[str, ...]
    config: str | None
    command: str | None
    outputs: tuple[str, ...]
    sections: tuple[str, ...]
    gap: str | None

    def numbered(self) -> set[tuple[str, int]]:
        """The numbered tables and figures the row names: ``("Table", 4)``."""
        found = set()
        for item in self.items:
            m = _ITEM.fullmatch(item)
            if m and m.group(1):
                found.add((m.group(1), int(m.group(2))))
        return found


def read_rows(text: str | None = None) -> list[Row]:
    """The rows of the table under :data:`HEADING` in ``text`` (the README by default)."""
    if text is None:
        text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    try:
        start = lines.index(HEADING)
    except ValueError:
        raise TableError(f"README has no '{HEADING}' section") from None
    i = start + 1
    while i < len(lines) and not lines[i].startswith("|"):
        if lines[i].startswith("## "):
            raise TableError(f"line {start + 1}: '{HEADING}' has no table")
        i += 1
    if i == len(lines):
        raise TableError(f"line {start + 1}: '{HEADING}' has no table")
    header = _cells(lines[i], i + 1)
    if tuple(header) != COLUMNS:
        raise TableError(f"line {i + 1}: the header must be {' | '.join(COLUMNS)}, not {' | '.join(header)}")
    rule = _cells(lines[i + 1], i + 2) if i + 1 < len(lines) else []
    if len(rule) != len(COLUMNS) or not all(re.fullmatch(r":?-{3,}:?", c) for c in rule):
        raise TableError(f"line {i + 2}: the header's rule line (| --- | ...) is missing")
    rows = []
    j = i + 2
    while j < len(lines) and lines[j].startswith("|"):
        rows.append(parse_row(lines[j], j + 1))
        j += 1
    if not rows:
        raise TableError(f"line {i + 1}: the table has no rows")
    return rows


def parse_row(text: str, line: int) -> Row:
    """One table line read into a :class:`Row`, or a ``TableError`` naming ``line``."""
    cells = _cells(text, line)
    if len(cells) != len(COLUMNS):
        raise TableError(f"line {line}: {len(cells)} cells, the table has {len(COLUMNS)}")
    paper, items_cell, config_cell, command_cell, output_cell, section_cell, gap_cell = cells
    if paper not in PAPERS:
        raise TableError(f"line {line}: paper {paper!r} is none of {', '.join(PAPERS)}")
    items = tuple(_split(items_cell))
    for item in items:
        if not _ITEM.fullmatch(item):
            raise TableError(f"line {line}: {item!r} is not 'Table N', 'Figure N' or 'Appendix X name'")
    config = _one_code(config_cell, "config", line)
    command = _one_code(command_cell, "command", line)
    outputs = _codes(output_cell, "output", line)
    sections = _codes(section_cell, "report section", line)
    gap = None if gap_cell == NONE else gap_cell
    for path in outputs:
        if not _OUTPUT.fullmatch(path) or ".." in path.split("/"):
            raise TableError(f"line {line}: output {path!r} is not a path inside the run folder")
    for sid in sections:
        if not _SECTION_ID.fullmatch(sid):
            raise TableError(f"line {line}: report section {sid!r} is not an HTML id written #id")
    if not outputs:
        if config or command or sections:
            raise TableError(f"line {line}: a row with no output names no config, command or section")
        if gap is None:
            raise TableError(f"line {line}: a row with no output must say why (last column)")
    else:
        if not config or not command:
            raise TableError(f"line {line}: a row with outputs names its config and command")
        if not config.endswith((".yaml", ".yml", ".json")):
            raise TableError(f"line {line}: config {config!r} is not a config file")
        if f"--config {config}" not in command:
            raise TableError(f"line {line}: the command does not run its config ('--config {config}')")
        if not sections and gap is None:
            raise TableError(f"line {line}: a row with no report section must say why (last column)")
    return Row(line, paper, items, config, command, outputs, sections, gap)


def check_run(rows: Iterable[Row], config: str, run: Path) -> list[str]:
    """What is missing from ``run`` (a finished run folder of ``config``, the
    repository-relative path the rows name) of the rows of that config: one line per
    output that is absent, no readable Parquet table, or has no rows, and per report
    section id the report lacks. Empty when everything is there."""
    problems = []
    report = run / "report" / "index.html"
    html = report.read_text(encoding="utf-8") if report.is_file() else None
    for row in rows:
        if row.config != config:
            continue
        where = f"README line {row.line} ({row.paper} {', '.join(row.items)})"
        for rel in row.outputs:
            path = run / rel
            if not path.exists():
                problems.append(f"{where}: {rel} is missing")
                continue
            try:
                n = pq.read_table(path).num_rows
            except Exception as exc:  # any reader error: the promise is a readable table
                problems.append(f"{where}: {rel} is no readable Parquet table ({type(exc).__name__})")
                continue
            if n == 0:
                problems.append(f"{where}: {rel} has no rows")
        for sid in row.sections:
            if html is None:
                problems.append(f"{where}: the run has no report/index.html")
            elif f'id="{sid[1:]}"' not in html:
                problems.append(f'{where}: report/index.html has no id="{sid[1:]}"')
    return problems


def _cells(text: str, line: int) -> list[str]:
    """A markdown table line's cells, stripped; ``|`` inside backticks does not split."""
    s = text.strip()
    if not (s.startswith("|") and s.endswith("|")) or len(s) < 2:
        raise TableError(f"line {line}: a table line starts and ends with '|'")
    cells, cur, in_code = [], [], False
    for ch in s[1:-1]:
        if ch == "`":
            in_code = not in_code
        if ch == "|" and not in_code:
            cells.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if in_code:
        raise TableError(f"line {line}: an unclosed backtick")
    cells.append("".join(cur).strip())
    return cells


def _split(cell: str) -> list[str]:
    """Comma-separated parts of a cell, commas inside parentheses or backticks kept."""
    parts, cur, depth, in_code = [], [], 0, False
    for ch in cell:
        in_code ^= ch == "`"
        depth += {"(": 1, ")": -1}.get(ch, 0) if not in_code else 0
        if ch == "," and depth == 0 and not in_code:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur).strip())
    return parts


def _codes(cell: str, name: str, line: int) -> tuple[str, ...]:
    """A cell of backticked values separated by commas, or the empty mark."""
    if cell == NONE:
        return ()
    values = []
    for part in _split(cell):
        m = _CODE.fullmatch(part)
        if not m:
            raise TableError(f"line {line}: {name} {part!r} is not `value`, `value`, ... or {NONE}")
        values.append(m.group(1))
    return tuple(values)


def _one_code(cell: str, name: str, line: int) -> str | None:
    values = _codes(cell, name, line)
    if len(values) > 1:
        raise TableError(f"line {line}: one {name} per row, not {len(values)}")
    return values[0] if values else None
