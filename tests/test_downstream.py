"""The run folder as other tools see it: every Parquet table of a finished nightly run,
read through the series' ``latest`` pointer with pandas, pyarrow, DuckDB and polars.

Issue 11 promises that a run folder is a documented set of Parquet datasets. The
promise is only worth something if it is checked against a real run and the README at
once, so this module runs one small pipeline (a maze, a puzzle in both modes and an
offline world study) into a dated series and then:

- enumerates the tables from the folder (never from a list kept here), so a table
  added later is read by all four readers and must be documented before it passes;
- requires every Parquet file to match a path pattern of the README's dataset table,
  its ``horizonbench_table`` metadata to name that dataset, and ``state.json`` to mark
  it current under the stage the README says writes it;
- checks rows, columns and types against ``schemas/tables.py`` in every reader, that the
  four readers return the same data, that the README's keys are unique, and that the
  README's joins hold;
- runs the README's reading example exactly as printed.

A reader that fails is reported as the table and the reader's own error, every table at
once, so a bug in one table does not hide the others.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
import yaml

from conftest import CONFIGS
from horizonbench.core.registry import get_family
from horizonbench.schemas.horizons import DESIGN_SCHEMA, HORIZONS_SCHEMA, WAVES_SCHEMA
from horizonbench.schemas.tables import (
    ANALYSIS_SCHEMAS,
    ATTEMPTS_SCHEMA,
    EPISODES_SCHEMA,
    PROMPTS_SCHEMA,
    SCHEMA_VERSION,
    SCORES_SCHEMA,
    STEPS_SCHEMA,
    WORLD_ANALYSIS_SCHEMAS,
)
from horizonbench.tasks.run_folder.state import LATEST, STATE

pytestmark = pytest.mark.flow

README = Path(__file__).resolve().parents[1] / "README.md"
SECTION = "## Run folder and tables"
#: the sentence that introduces the example the test runs
EXAMPLE_INTRO = "Reading them"
PART_FILE = re.compile(r"part-\d+\.parquet$")


# ------------------------------------------------------------------------ the README


def readme_section() -> str:
    """The README's run-folder section: from its heading to the next ``## ``."""
    text = README.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    return text[start : end if end >= 0 else len(text)]


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    """A README path pattern as a regex: ``<name>`` is one path component, ``NNNNN`` a
    part number, ``{a,b}`` one of the listed names (so a new analysis table is not
    documented until it is listed)."""
    out = []
    for token in re.split(r"(<[^>]+>|\{[^}]+\}|NNNNN)", pattern):
        if token.startswith("<"):
            out.append(r"[^/]+")
        elif token.startswith("{"):
            out.append("(?:" + "|".join(re.escape(t.strip()) for t in token[1:-1].split(",")) + ")")
        elif token == "NNNNN":
            out.append(r"\d{5}")
        else:
            out.append(re.escape(token))
    return re.compile("".join(out) + "$")


@dataclass(frozen=True)
class Documented:
    """One row of the README's dataset table."""

    dataset: str
    pattern: str
    regex: re.Pattern[str]
    key: tuple[str, ...]
    stage: str


def documented() -> list[Documented]:
    """The README's dataset table, parsed: rows whose path cell is one backticked pattern."""
    rows = []
    for line in readme_section().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or not re.fullmatch(r"`[^`]+\.parquet`", cells[1]):
            continue
        dataset, path, _row, key, stage = cells
        pattern = path.strip("`")
        rows.append(
            Documented(
                dataset=dataset,
                pattern=pattern,
                regex=_pattern_regex(pattern),
                key=tuple(re.findall(r"`([^`]+)`", key)),
                stage=stage.strip("`"),
            )
        )
    return rows


def doc_for(rel: str, docs: list[Documented]) -> Documented | None:
    return next((d for d in docs if d.regex.match(rel)), None)


# ----------------------------------------------------------------------- the tables


@dataclass(frozen=True)
class Table:
    """A dataset of the run: a single file, or the folder of a parted table."""

    rel: str  # the dataset's path in the run folder (a folder for parted tables)
    path: Path
    files: tuple[Path, ...]

    @property
    def parted(self) -> bool:
        return self.path.is_dir()

    @property
    def glob(self) -> str:
        """What DuckDB and polars are given: the parts by glob, or the file."""
        return str(self.path / "*.parquet") if self.parted else str(self.path)

    @property
    def name(self) -> str:
        """The ``horizonbench_table`` a file of this dataset should carry:
        ``instances/maze``, ``analysis/fits``, ``scores`` (not ``scores/scores``)."""
        stem = self.rel.removesuffix(".parquet")
        head, _, tail = stem.rpartition("/")
        return head if head and head == tail else stem


def run_tables(run: Path) -> list[Table]:
    """Every Parquet dataset in the folder, found by walking it (none listed by hand)."""
    groups: dict[Path, list[Path]] = {}
    for f in sorted(run.rglob("*.parquet")):
        key = f.parent if PART_FILE.search(f.name) else f
        groups.setdefault(key, []).append(f)
    return [Table(str(p.relative_to(run)), p, tuple(fs)) for p, fs in sorted(groups.items())]


def expected_schema(name: str) -> pa.Schema:
    """The schema ``schemas/tables.py`` (or the family) declares for a dataset name."""
    fixed = {
        "attempts": ATTEMPTS_SCHEMA,
        "prompts": PROMPTS_SCHEMA,
        "scores": SCORES_SCHEMA,
        "episodes": EPISODES_SCHEMA,
        "steps": STEPS_SCHEMA,
        "attempts/world_attempts": ATTEMPTS_SCHEMA,
        "analysis/horizons": HORIZONS_SCHEMA,
        "analysis/adaptive": WAVES_SCHEMA,
        "adaptive/design": DESIGN_SCHEMA,
    }
    if name in fixed:
        return fixed[name]
    if name.startswith("instances/"):
        return get_family(name.split("/", 1)[1]).instance_schema
    if name.startswith("analysis/worlds_"):
        return WORLD_ANALYSIS_SCHEMAS[name.removeprefix("analysis/worlds_")]
    if name.startswith("analysis/"):
        return ANALYSIS_SCHEMAS[name.removeprefix("analysis/")]
    raise KeyError(f"no schema declared for {name}")


# ------------------------------------------------------------------------- the run

#: a maze (small.yaml), a puzzle in both modes and an offline world study: every stage
#: that writes a table, in about a minute
WORLDS: dict[str, Any] = {
    "environments": ["graph_nav", "tool_dag"],
    "sc": [5, 8],
    "dd": [1],
    "archetypes": 2,
    "variants": 1,
    "horizon_factor": 1.5,
    "agents": [{"name": "oracle", "kind": "oracle"}, {"name": "bounded-6", "kind": "bounded", "capacity": 6}],
}


def config() -> dict[str, Any]:
    cfg = yaml.safe_load((CONFIGS / "small.yaml").read_text())
    cfg["families"]["hanoi"] = {
        "params": {"ns": [1, 2, 3]},
        "sampling": {"all": True, "shard_size": 6},
        "modes": ["plan", "rollout"],
    }
    cfg["worlds"] = WORLDS
    return cfg


@dataclass(frozen=True)
class Series:
    root: Path  # the folder that holds runs/ (where the README example runs)
    latest: Path  # runs/nightly/latest, unresolved
    wall_s: float


@pytest.fixture(scope="module")
def series(prefect_server: str, tmp_path_factory: pytest.TempPathFactory) -> Series:
    from horizonbench.flows.pipeline import pipeline

    root = tmp_path_factory.mktemp("downstream")
    started = time.monotonic()
    pipeline(config(), str(root / "runs" / "nightly" / "{date}"))
    return Series(root, root / "runs" / "nightly" / LATEST, time.monotonic() - started)


@pytest.fixture(scope="module")
def tables(series: Series) -> list[Table]:
    found = run_tables(series.latest)
    assert found, "no Parquet table in the run"
    return found


# ------------------------------------------------------------------------- the tests


def test_readme_patterns_cover_only_what_they_list() -> None:
    """The coverage check has teeth: a table the README does not list is not covered."""
    docs = documented()
    assert doc_for("instances/maze@noise-0.5/part-00012.parquet", docs).dataset == "instances"
    assert doc_for("analysis/fits.parquet", docs).stage == "analyse"
    assert doc_for("analysis/worlds_grid.parquet", docs).dataset == "world analysis"
    assert doc_for("scores/scores.parquet", docs).key == ("model", "family", "mode", "instance_id", "sample")
    for rel in ("analysis/new_table.parquet", "instances/maze/part-1.parquet", "scores/other.parquet"):
        assert doc_for(rel, docs) is None, rel


def test_latest_points_at_the_completed_dated_run(series: Series) -> None:
    from horizonbench.tasks.run_folder.status import run_status

    link = series.latest
    assert link.is_symlink()
    target = os.readlink(link)
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", target), target  # relative: the series can move
    dated = [p.name for p in link.parent.iterdir() if p.name != LATEST]
    assert dated == [target]
    state = json.loads((link / STATE).read_text())
    assert state["status"] == "completed" and state["problems"] == []
    not_current = {rel: o["status"] for rel, o in state["outputs"].items() if o["status"] != "current"}
    assert not not_current
    info = run_status(link)
    assert info["status"] == "completed" and info["stale"] == []
    manifest = json.loads((link / "manifest.json").read_text())
    for table in run_tables(link):
        for f in table.files:
            assert str(f.relative_to(link)) in manifest["content_sha256"], f


def test_the_run_writes_every_kind_of_table(tables: list[Table]) -> None:
    """The run exercises each stage's tables (else the checks below prove little)."""
    rels = {t.rel for t in tables}
    for rel in ("instances/maze", "instances/hanoi", "prompts/prompts.parquet", "attempts/attempts.parquet"):
        assert rel in rels
    for rel in ("scores/scores.parquet", "episodes", "steps", "analysis/fits.parquet"):
        assert rel in rels
    assert any(r.startswith("analysis/worlds_") for r in rels)


def test_every_parquet_file_is_documented_and_tracked(series: Series, tables: list[Table]) -> None:
    """Each file matches a README path pattern, names its dataset in its metadata, and is
    marked current in state.json under the stage the README says writes it."""
    docs = documented()
    assert len(docs) >= 10, "the README's dataset table was not found"
    outputs = json.loads((series.latest / STATE).read_text())["outputs"]
    problems = []
    for table in tables:
        for f in table.files:
            rel = str(f.relative_to(series.latest))
            doc = doc_for(rel, docs)
            if doc is None:
                problems.append(f"{rel}: no path pattern in the README's dataset table ({SECTION})")
                continue
            meta = pq.read_schema(f).metadata or {}
            if meta.get(b"schema_version") != SCHEMA_VERSION.encode():
                problems.append(f"{rel}: schema_version {meta.get(b'schema_version')!r}")
            if meta.get(b"horizonbench_table") != table.name.encode():
                named = meta.get(b"horizonbench_table")
                problems.append(f"{rel}: horizonbench_table {named!r}, not {table.name!r}")
            owner = next((o for o in outputs if rel == o or rel.startswith(o + "/")), None)
            if owner is None:
                problems.append(f"{rel}: not under any output of state.json")
            elif (outputs[owner]["stage"], outputs[owner]["status"]) != (doc.stage, "current"):
                problems.append(f"{rel}: state.json {outputs[owner]}, README says stage {doc.stage}")
    assert not problems, "\n".join(problems)


def test_every_column_is_documented(tables: list[Table]) -> None:
    """Each column of each table is named (in backticks) in the README section."""
    section = readme_section()
    missing = {
        t.rel: [n for n in pq.read_schema(t.files[0]).names if f"`{n}`" not in section] for t in tables
    }
    missing = {rel: cols for rel, cols in missing.items() if cols}
    assert not missing, f"columns not documented in {SECTION}: {missing}"


def _nan_as_null(table: pa.Table) -> pa.Table:
    """Undefined floats are NaN in the files (a fit that did not bracket, a lag of a
    success); pandas hands them back as missing values and Arrow compares NaN unequal,
    so both become null before the readers are compared."""
    for i, field in enumerate(table.schema):
        if pa.types.is_floating(field.type):
            col = table.column(i)
            table = table.set_column(i, field, pc.if_else(pc.is_nan(col), pa.scalar(None, field.type), col))
    return table


def _readers(table: Table, con: duckdb.DuckDBPyConnection) -> dict[str, Callable[[], pa.Table]]:
    """The same dataset read whole by each tool, as Arrow (to compare them)."""
    return {
        "pyarrow.dataset": lambda: ds.dataset(table.path, format="parquet").to_table(),
        "pandas": lambda: pa.Table.from_pandas(pd.read_parquet(table.path), preserve_index=False),
        "duckdb": lambda: con.sql(f"SELECT * FROM read_parquet('{table.glob}')").to_arrow_table(),
        "polars": lambda: pl.scan_parquet(table.glob).collect().to_arrow(),
    }


def test_every_table_reads_the_same_in_pandas_pyarrow_duckdb_and_polars(tables: list[Table]) -> None:
    con = duckdb.connect()
    problems = []
    for table in tables:
        try:
            schema = expected_schema(table.name)
        except KeyError as err:
            problems.append(f"{table.rel}: {err}")
            continue
        rows = sum(pq.ParquetFile(f).metadata.num_rows for f in table.files)
        dataset_schema = ds.dataset(table.path, format="parquet").schema.remove_metadata()
        if not dataset_schema.equals(schema.remove_metadata()):
            problems.append(f"{table.rel}: schema differs from schemas/tables.py:\n{dataset_schema}")
        reference = None
        for reader, read in _readers(table, con).items():
            try:
                got = read()
            except Exception as err:  # the reader's own error is the finding
                problems.append(f"{table.rel}: {reader} cannot read it: {type(err).__name__}: {err}")
                continue
            if got.num_rows != rows or got.column_names != schema.names:
                problems.append(
                    f"{table.rel}: {reader} gives {got.num_rows} rows (files: {rows}), "
                    f"columns {got.column_names} (schema: {schema.names})"
                )
                continue
            try:
                got = _nan_as_null(got.cast(schema.remove_metadata()))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
                problems.append(f"{table.rel}: {reader}'s types do not cast to the schema: {err}")
                continue
            if reference is None:
                reference = got
            elif not got.equals(reference):
                problems.append(f"{table.rel}: {reader} returns other values than pyarrow.dataset")
        # polars' schema without reading the data (what a lazy query plans on)
        names = pl.scan_parquet(table.glob).collect_schema().names()
        if names != schema.names:
            problems.append(f"{table.rel}: polars scan schema {names}")
    assert not problems, "\n".join(problems)


def test_documented_keys_are_unique(series: Series, tables: list[Table]) -> None:
    docs = documented()
    checked = 0
    problems = []
    for table in tables:
        doc = doc_for(str(table.files[0].relative_to(series.latest)), docs)
        if doc is None or not doc.key:
            continue
        cols = ", ".join(doc.key)
        dups = duckdb.sql(
            f"SELECT count(*) FROM (SELECT {cols}, count(*) AS n FROM read_parquet('{table.glob}') "
            "GROUP BY ALL HAVING n > 1)"
        ).fetchall()[0][0]
        checked += 1
        if dups:
            problems.append(f"{table.rel}: {dups} values of the key ({cols}) repeat")
    assert checked >= 6 and not problems, "\n".join(problems) or f"only {checked} keys checked"


def test_stable_joins_in_duckdb(series: Series) -> None:
    """The README's joins keep every row: each score, prompt and attempt finds its
    instance, each score its attempts, each first prompt its prompt row, each step its
    episode."""
    run = series.latest
    inst = f"read_parquet('{run}/instances/*/*.parquet', union_by_name = true)"
    scores = f"read_parquet('{run}/scores/scores.parquet')"
    attempts = f"read_parquet('{run}/attempts/attempts.parquet')"
    prompts = f"read_parquet('{run}/prompts/prompts.parquet')"

    def count(sql: str) -> int:
        return duckdb.sql(sql).fetchall()[0][0]

    for table in (scores, prompts, attempts):
        n = count(f"SELECT count(*) FROM {table}")
        assert n > 0
        assert count(f"SELECT count(*) FROM {table} JOIN {inst} USING (family, instance_id)") == n, table
    score_key = "model, family, mode, instance_id, sample"
    n_scores = count(f"SELECT count(*) FROM {scores}")
    assert count(f"SELECT count(*) FROM {scores} SEMI JOIN {attempts} USING ({score_key})") == n_scores
    first = f"(SELECT * FROM {attempts} WHERE turn = 0)"
    assert count(f"SELECT count(*) FROM {first} ANTI JOIN {prompts} USING (prompt_sha256)") == 0
    steps = f"read_parquet('{run}/steps/*.parquet')"
    episodes = f"read_parquet('{run}/episodes/*.parquet')"
    n_steps = count(f"SELECT count(*) FROM {steps}")
    assert count(f"SELECT count(*) FROM {steps} JOIN {episodes} USING (episode_id)") == n_steps > 0


def readme_example() -> str:
    """The README's reading example: the first python block after its introduction."""
    section = readme_section()
    found = re.search(r"```python\n(.*?)```", section[section.index(EXAMPLE_INTRO) :], re.S)
    assert found, "no python example in the README section"
    return found.group(1)


def test_readme_example_runs_as_printed(series: Series, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(series.root)
    scope: dict[str, Any] = {}
    exec(compile(readme_example(), "README.md example", "exec"), scope)  # noqa: S102
    run = series.latest
    assert len(scope["instances"]) == pq.ParquetDataset(run / "instances" / "maze").read().num_rows
    scores = scope["scores"]
    assert len(scores) == pq.read_metadata(run / "scores" / "scores.parquet").num_rows
    by_length = scope["success_by_length"]
    assert by_length["attempts"].sum() == scores["answered"].sum()
    assert set(by_length["family"]) == {"maze", "hanoi"} and set(by_length["mode"]) == {"plan", "rollout"}
    fits = scope["fits"]
    assert fits.height > 0 and set(fits["model"]) == {"oracle", "noisy"}
    per_episode = scope["steps_per_episode"]
    assert per_episode.height == pq.read_metadata(run / "episodes" / "part-0.parquet").num_rows
    assert (per_episode["step_rows"] == per_episode["steps"]).all()
