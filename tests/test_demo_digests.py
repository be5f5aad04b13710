"""The demo's tables, report and exit code are pinned bytes: a change to them is a choice.

Issue 24 rearranged the code and promised users nothing changed; this test held the demo's
bytes to those of commit c527958, the code before the refactor. Issue 25 then changed the
outputs on purpose (new analysis tables, report sections, the demo's prompt ablation and
mutation ablation), so the digests were recorded again from the code that made the change,
with the commands the file names; the commit is in each entry's ``recorded_from``. This
test pins the sha256 of every table (each Parquet file of the run folder outside the shard
cache ``cache/``), of ``report/index.html`` and the exit code of the demo that the test
session runs once (``horizonbench demo --scale 0.1``, shared with the browser and
shipped-config tests: tests/demo_run.py). The file also holds the digests of ``make
demo``'s full run, checked by hand (below): the full demo costs 95-105 CPU-s, too much for
every ``make test``; the scaled one runs every family, sweep setting, mode, model,
environment, agent and stage. Any later change to the demo's outputs records them again,
and its commit message says why the bytes moved.

Which bytes vary by nature was measured, not guessed: c527958's full demo run three
times (two folders, with and without ``--no-progress``) and every file compared. Only two
things in the pinned outputs differ between runs, and they are normalised here:

- ``latency_s`` of ``attempts/attempts.parquet``: each offline call's measured wall
  time. That table's digest covers its Parquet layout (writer, row groups, codecs) and
  its Arrow data with ``latency_s`` set to 0.0 where present; every other column counts.
- the report's ``git_sha`` line (``<dt>git_sha</dt><dd>...</dd>``): the commit the code
  runs from, with ``-dirty`` for a checkout with edits. It differs before and after any
  commit by design. Every other byte of the report, the SVG figures included, was
  identical run to run.

Not pinned: the manifest, state.json, the attempt store and its run tag, the validation
results and Data Docs (timestamps and run ids), and the shard cache (which may live outside
the run folder: ``generation.cache_dir``). The digests also hold for one set of package versions: pyarrow
writes its version into every file and the report lists the versions; after a change to
requirements.lock, record again from the commit before the change.

Check ``make demo``'s run folder, or record digests for a run (``--entry`` names which)::

    .venv/bin/python tests/test_demo_digests.py check runs/demo --entry "make demo"
    .venv/bin/python tests/test_demo_digests.py record DIR --entry NAME --argv ARGS \\
        --exit-code 0 --commit SHA --command "..."
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from demo_run import ARGV

DIGESTS = Path(__file__).with_name("demo_digests.json")
REPORT = "report/index.html"
ATTEMPTS = "attempts/attempts.parquet"
#: columns whose values are measured, not computed: zeroed before hashing
MEASURED = {ATTEMPTS: ("latency_s",)}
GIT_SHA = re.compile(rb"(<dt>git_sha</dt><dd>)[^<]*(</dd>)")
#: folders of the run whose Parquet files are no output of the demo
NOT_TABLES = ("cache/",)
#: the digests file's entries: the test session's shared demo and ``make demo``'s run
TEST_ENTRY = "shared test run"
FULL_ENTRY = "make demo"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _table_digest(path: Path, measured: tuple[str, ...]) -> str:
    """The file's bytes when every one is computed; otherwise its Parquet layout plus
    its Arrow data with the measured columns zeroed (nulls kept)."""
    if not measured:
        return _sha(path.read_bytes())
    f = pq.ParquetFile(path)
    meta = f.metadata
    layout = {
        "created_by": meta.created_by,
        "format_version": meta.format_version,
        "row_groups": [meta.row_group(i).num_rows for i in range(meta.num_row_groups)],
        "codecs": [meta.row_group(0).column(j).compression for j in range(meta.num_columns)]
        if meta.num_row_groups
        else [],
    }
    table = f.read()
    for name in measured:
        i = table.schema.get_field_index(name)
        col = table.column(i)
        zero = pc.if_else(pc.is_null(col), pa.scalar(None, col.type), pa.scalar(0.0, col.type))
        table = table.set_column(i, table.schema.field(i), zero)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return _sha(json.dumps(layout, sort_keys=True).encode() + sink.getvalue().to_pybytes())


def _report_digest(path: Path) -> str:
    html = path.read_bytes()
    normalised, n = GIT_SHA.subn(rb"\1GIT_SHA\2", html)
    # a report that no longer shows the line at all differs from the pinned one anyway
    return _sha(normalised) if n == 1 else _sha(html)


def digests(run: Path) -> dict[str, str]:
    """Relative path -> digest for every table of the run and its report."""
    out = {}
    for path in sorted(run.rglob("*.parquet")):
        rel = path.relative_to(run).as_posix()
        if not rel.startswith(NOT_TABLES):
            out[rel] = _table_digest(path, MEASURED.get(rel, ()))
    report = run / REPORT
    if report.is_file():
        out[REPORT] = _report_digest(report)
    return out


def differences(pinned: dict[str, str], seen: dict[str, str]) -> list[str]:
    """One line per output that is new, missing or has other bytes."""
    lines = [f"missing: {k}" for k in sorted(pinned.keys() - seen.keys())]
    lines += [f"new: {k}" for k in sorted(seen.keys() - pinned.keys())]
    lines += [f"changed: {k}" for k in sorted(pinned.keys() & seen.keys()) if pinned[k] != seen[k]]
    return lines


def _pinned(entry: str) -> dict:
    return json.loads(DIGESTS.read_text(encoding="utf-8"))["runs"][entry]


@pytest.mark.flow
def test_the_demo_writes_the_pinned_tables_report_and_exit_code(shared_demo_run):
    pinned = _pinned(TEST_ENTRY)
    # the shared run is the one the digests were recorded for
    assert pinned["argv"] == ARGV
    assert shared_demo_run.exit_code == pinned["exit_code"], shared_demo_run.stderr_tail
    diff = differences(pinned["files"], digests(shared_demo_run.path))
    assert diff == [], f"the demo's outputs differ from {pinned['recorded_from']}'s:\n" + "\n".join(diff)


@pytest.mark.parametrize("entry", [TEST_ENTRY, FULL_ENTRY])
def test_the_pins_cover_every_table_kind_and_the_report(entry):
    """The digests file holds what the docstring says: the report, the instance tables of
    every family and sweep setting, scores, attempts, episodes and analysis tables."""
    pinned = _pinned(entry)
    files = pinned["files"]
    assert pinned["exit_code"] == 0 and re.fullmatch(r"[0-9a-f]{40}( .*)?", pinned["recorded_from"])
    assert REPORT in files and ATTEMPTS in files and "scores/scores.parquet" in files
    assert {"episodes/part-0.parquet", "steps/part-0.parquet", "prompts/prompts.parquet"} <= files.keys()
    families = {k.split("/")[1] for k in files if k.startswith("instances/")}
    assert families == {
        "maze",
        "maze@noise-2",
        "maze@keys-1",
        "maze@shots-0",
        "hanoi",
        "checkers",
        "river_crossing",
        "blocks_world",
    }
    assert sum(k.startswith("analysis/") for k in files) >= 20
    assert all(re.fullmatch(r"[0-9a-f]{64}", v) for v in files.values())


def test_a_changed_value_a_changed_caption_and_a_missing_table_are_each_seen(tmp_path):
    """The digests see one changed cell, one changed byte of the report and a table gone,
    and ignore exactly the normalised fields (latency_s, the git_sha line)."""
    run = tmp_path / "run"
    (run / "attempts").mkdir(parents=True)
    (run / "scores").mkdir()
    (run / "report").mkdir()
    (run / "cache" / "shards").mkdir(parents=True)
    attempts = pa.table({"model": ["a", "b"], "latency_s": [0.25, 0.5]})
    pq.write_table(attempts, run / ATTEMPTS)
    pq.write_table(pa.table({"success": [True, False]}), run / "scores" / "scores.parquet")
    pq.write_table(pa.table({"x": [1]}), run / "cache" / "shards" / "s.parquet")
    page = "<figcaption>Success against L</figcaption><dt>git_sha</dt><dd>{}</dd>"
    (run / REPORT).write_text(page.format("abc123"))
    before = digests(run)
    assert set(before) == {ATTEMPTS, "scores/scores.parquet", REPORT}

    # what varies by nature does not count
    pq.write_table(attempts.set_column(1, "latency_s", pa.array([0.75, 0.125])), run / ATTEMPTS)
    (run / REPORT).write_text(page.format("def456-dirty"))
    pq.write_table(pa.table({"x": [2]}), run / "cache" / "shards" / "s.parquet")
    assert differences(before, digests(run)) == []

    # what is computed does
    pq.write_table(attempts.set_column(0, "model", pa.array(["a", "c"])), run / ATTEMPTS)
    (run / REPORT).write_text(page.format("abc123").replace("against", "versus"))
    pq.write_table(pa.table({"success": [True, True]}), run / "scores" / "scores.parquet")
    assert differences(before, digests(run)) == [
        f"changed: {ATTEMPTS}",
        f"changed: {REPORT}",
        "changed: scores/scores.parquet",
    ]
    (run / "scores" / "scores.parquet").unlink()
    assert "missing: scores/scores.parquet" in differences(before, digests(run))


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Check or record the demo's pinned digests.")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="compare a demo run folder with tests/demo_digests.json")
    check.add_argument("run", type=Path)
    check.add_argument("--entry", default=FULL_ENTRY, help=f"which digests (default {FULL_ENTRY!r})")
    record = sub.add_parser("record", help="write one entry of tests/demo_digests.json from a run folder")
    record.add_argument("run", type=Path)
    record.add_argument("--entry", required=True, help=f"{TEST_ENTRY!r} or {FULL_ENTRY!r}")
    record.add_argument("--argv", required=True, help="the horizonbench arguments, --out left out")
    record.add_argument("--exit-code", type=int, required=True, help="the demo command's exit code")
    record.add_argument("--commit", required=True, help="the commit whose code ran the demo")
    record.add_argument("--command", required=True, help="the commands that made the run folder")
    args = parser.parse_args(argv)
    if not (args.run / REPORT).is_file():
        print(f"{args.run}: no {REPORT}: not a demo run folder", file=sys.stderr)
        return 2
    if args.command == "check":
        pinned = _pinned(args.entry)
        diff = differences(pinned["files"], digests(args.run))
        print("\n".join(diff) or f"same as {pinned['recorded_from']}: {len(pinned['files'])} outputs")
        return 1 if diff else 0
    data = json.loads(DIGESTS.read_text(encoding="utf-8")) if DIGESTS.exists() else {}
    data["normalised"] = {ATTEMPTS: "latency_s set to 0.0", REPORT: "the git_sha line"}
    data.setdefault("runs", {})[args.entry] = {
        "argv": args.argv.split(),
        "recorded_from": args.commit,
        "command": args.command,
        "exit_code": args.exit_code,
        "files": digests(args.run),
    }
    tmp = DIGESTS.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(DIGESTS)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
