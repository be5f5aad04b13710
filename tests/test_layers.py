"""No import runs up a floor (DESIGN.md, "Layers"), and the run folder imports no stage.

Every module of ``src/horizonbench`` is parsed (never imported) and every
``horizonbench.*`` import in it, at module level or inside a function, is checked
against the floor map below: a module may import its own floor and the floors beneath,
never one above. Family-specific knowledge reaches the generic code through the family
registry (``core.registry``), so the generic floors never name a family's package.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "horizonbench"

#: the floors, lowest first: a package may import its own floor and those below it
FLOORS: tuple[frozenset[str], ...] = (
    frozenset({"core", "configs", "__init__"}),  # shared vocabulary; data; the version
    frozenset({"analysis", "schemas"}),  # pure statistics; table schemas and config models
    frozenset({"datasets", "models", "harness", "reports", "calibration", "training"}),
    frozenset({"tasks"}),  # the stages and their rooms
    frozenset({"flows"}),  # the only code that knows the order of the stages
    frozenset({"cli"}),
)
FLOOR = {package: level for level, packages in enumerate(FLOORS) for package in packages}


def _package(rel: Path) -> str:
    """The top-level package of a module of horizonbench ("tasks", "core", ...)."""
    return rel.parts[0].removesuffix(".py")


def imported(tree: ast.AST) -> list[tuple[int, str]]:
    """Every absolute ``horizonbench.*`` module a tree imports, with its line."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "horizonbench":  # ``from horizonbench import x``
                out += [(node.lineno, f"horizonbench.{a.name}") for a in node.names]
            else:
                out.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
    return [(line, name) for line, name in out if name.startswith("horizonbench.")]


def modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if "__pycache__" not in p.parts)


def upward_imports(root: Path = SRC) -> list[str]:
    """``path:line: package (floor) imports module (floor)`` for each import up a floor."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        here = _package(rel)
        for line, name in imported(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            there = name.split(".")[1]
            if there not in FLOOR:  # ``from horizonbench import __version__``
                there = "__init__"
            if FLOOR[there] > FLOOR[here]:
                found.append(
                    f"{rel}:{line}: {here} (floor {FLOOR[here]}) imports {name} (floor {FLOOR[there]})"
                )
    return found


def test_every_package_has_a_floor() -> None:
    packages = {_package(p.relative_to(SRC)) for p in modules()}
    assert packages - set(FLOOR) == set(), "a new package of src/horizonbench needs a floor in FLOORS"


def test_no_import_runs_up_a_floor() -> None:
    found = upward_imports()
    assert found == [], "imports that run up a floor:\n" + "\n".join(found)


def test_the_run_folder_imports_no_stage() -> None:
    """``tasks/run_folder`` is what every stage stands on (its package docstring says it
    imports no stage): status and verify read a folder without the stages' imports."""
    bad = []
    for path in sorted((SRC / "tasks" / "run_folder").rglob("*.py")):
        for line, name in imported(ast.parse(path.read_text(encoding="utf-8"))):
            parts = name.split(".")
            if parts[1] == "tasks" and (len(parts) < 3 or parts[2] != "run_folder"):
                bad.append(f"{path.relative_to(SRC)}:{line}: {name}")
    assert bad == []


@pytest.mark.parametrize(
    ("source", "where", "expected"),
    [
        ("from horizonbench.cli.prefect_server import mark\n", "tasks/x.py", 1),
        ("def f():\n    import horizonbench.flows.pipeline\n", "tasks/x.py", 1),
        ("from horizonbench.datasets.maze import categories\n", "analysis/x.py", 1),
        ("from horizonbench import __version__\n", "core/x.py", 0),
        ("from horizonbench.core.registry import get_family\n", "analysis/x.py", 0),
        ("from horizonbench.harness.agent import Agent\n", "datasets/x.py", 0),  # same floor
    ],
)
def test_the_check_sees_an_upward_import(tmp_path: Path, source: str, where: str, expected: int) -> None:
    """The check itself: an import up a floor is found, at module level or inside a
    function; one down or sideways is not."""
    path = tmp_path / where
    path.parent.mkdir(parents=True)
    path.write_text(source)
    assert len(upward_imports(tmp_path)) == expected


def test_failure_categories_reach_the_analysis_through_the_registry() -> None:
    """The generic summary names no family: a plug-in family that declares failure
    categories gets its attempts counted in them, after the maze's, in its order."""
    import pyarrow as pa

    from horizonbench.analysis import summary
    from horizonbench.core.registry import _FAMILIES, get_family, register_family, violation_categories
    from horizonbench.schemas.tables import SCORES_SCHEMA

    maze = type(get_family("maze"))

    class Plugin(maze):  # type: ignore[misc, valid-type]
        name = "zz_plugin"
        categories = ("slipped", "stuck")
        violation_categories = {"slip": "slipped", "stall": "stuck", "locked_door": "stuck"}

    register_family(Plugin.name, Plugin)
    try:
        order, of = violation_categories()
        assert order[-2:] == ("slipped", "stuck") and of["stall"] == "stuck"
        assert of["locked_door"] == "locked_door"  # the first family (by name) keeps its placement
        rows = [("stall", 1), ("slip", 2), (None, 1), ("locked_door", 1), ("mystery", 1)]
        scores = pa.Table.from_pylist(
            [
                {"model": "m", "instance_id": f"i{k}", "family": "zz_plugin", "sample": j}
                | {"solution_length": 5, "num_keys": 0, "noise_ratio": 0.0, "success": v is None}
                | {"valid": True, "exact_match": v is None, "progress_ratio": 0.5, "precision": 0.5}
                | {"recall": 0.5, "plan_length": 5, "violation": v, "first_violation_step": None}
                for k, (v, n) in enumerate(rows)
                for j in range(n)
            ],
            schema=SCORES_SCHEMA,
        ).to_pandas()
        out = summary.violation_category_counts(scores)
        assert out[["category", "count"]].values.tolist() == [
            ["locked_door", 1],
            ["slipped", 2],
            ["stuck", 1],
            ["none", 1],
        ]
    finally:
        _FAMILIES.pop(Plugin.name, None)


def test_prefect_tasks_live_in_their_rooms_stage_module() -> None:
    """``tasks/__init__``'s promise: a stage's Prefect tasks are in its room's
    ``stage.py`` (the evaluate room excepted, for the reason given there), so the plain
    code beside them runs without Prefect."""

    def is_task(decorator: ast.expr) -> bool:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        return isinstance(target, ast.Name) and target.id == "task"

    elsewhere = []
    for path in sorted((SRC / "tasks").rglob("*.py")):
        rel = path.relative_to(SRC / "tasks")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and any(is_task(d) for d in node.decorator_list):
                if rel.name != "stage.py" and rel.parts[0] != "evaluate":
                    elsewhere.append(f"tasks/{rel}: {node.name}")
    assert elsewhere == []
