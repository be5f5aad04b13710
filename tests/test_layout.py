"""The README's "Layout" section matches the folders: every path it names exists, every
folder of ``src/horizonbench`` (and every module of ``tasks/``) is named there.

The section is a code block of entries, two spaces of indent per level: a line whose
first word ends in ``/`` (a folder) or ``.py`` (a module) names a path under the entry
above it at one level less; any other line continues the description of the entry above.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "horizonbench"
ENTRY = re.compile(r"^( *)(\S+)")


def layout_block(readme: str) -> list[str]:
    """The lines of the first code block under ``## Layout``."""
    section = readme.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    return section.split("```", 2)[1].splitlines()[1:]


def named_paths(lines: list[str]) -> list[str]:
    """The paths the block names, relative to the repository root ("src/horizonbench/tasks/")."""
    stack: list[str] = []
    out = []
    for line in lines:
        m = ENTRY.match(line)
        if not m or not (m.group(2).endswith("/") or m.group(2).endswith(".py")):
            continue
        indent = len(m.group(1))
        assert indent % 2 == 0 and indent // 2 <= len(stack), f"bad indent in the Layout section: {line!r}"
        stack = stack[: indent // 2] + [m.group(2)]
        out.append("".join(stack))
    return out


def _readme_paths() -> list[str]:
    return named_paths(layout_block((ROOT / "README.md").read_text(encoding="utf-8")))


def test_every_path_the_layout_names_exists() -> None:
    paths = _readme_paths()
    assert "src/horizonbench/tasks/run_folder/state.py" in paths  # the parse found the tree
    missing = [p for p in paths if not (ROOT / p).exists() or (ROOT / p).is_dir() != p.endswith("/")]
    assert missing == []


def test_every_folder_and_every_task_module_is_named() -> None:
    named = set(_readme_paths())
    folders = {
        f"{p.relative_to(ROOT)}/" for p in PACKAGE.rglob("*") if p.is_dir() and p.name != "__pycache__"
    }
    modules = {str(p.relative_to(ROOT)) for p in (PACKAGE / "tasks").rglob("*.py") if p.name != "__init__.py"}
    assert sorted((folders | modules) - named) == []


def test_the_parse_follows_the_indent() -> None:
    lines = ["a/", "  b/        text", "            more text", "    c.py  module", "  d/", "e/"]
    assert named_paths(lines) == ["a/", "a/b/", "a/b/c.py", "a/d/", "e/"]
