"""The benchmarks' driver and their shared helper: ``make bench`` runs one list, every
entry of it runs, and the benchmarks share one copy of their timing and table code.

The figures themselves are never asserted (a test does not time anything); the smoke
run checks that the throughput table keeps its rows and columns.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from test_readme_commands import script_flags

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"


def _driver():
    sys.path.insert(0, str(BENCH))
    try:
        import run
    finally:
        sys.path.pop(0)
    return run


def _bench(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH / "run.py"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


def test_make_bench_runs_the_driver_alone():
    """The Makefile lists no benchmark itself: the driver's list is the only one."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(r"^bench:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert recipe, "no bench target"
    assert recipe.group(1).strip().splitlines() == ["$(BIN)/python benchmarks/run.py"]


def test_every_benchmark_of_the_list_names_a_script_and_flags_it_has():
    run = _driver()
    names = [b.name for b in run.BENCHMARKS]
    assert len(names) == len(set(names)) >= 11
    for bench in run.BENCHMARKS:
        path = BENCH / bench.script
        assert path.is_file(), bench
        known = script_flags(path)
        for flags in (bench.quick, bench.smoke):
            unknown = [f for f in flags if f.startswith("-") and f not in known]
            assert not unknown, f"{bench.script} has no {unknown}"
    # and the check has teeth: a flag a script lacks is caught
    assert "--smoke" not in script_flags(BENCH / "calibration.py")


def test_the_driver_lists_every_benchmark_and_refuses_an_unknown_name():
    run = _driver()
    listed = _bench("--list")
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[0] for line in listed.stdout.splitlines()] == [b.name for b in run.BENCHMARKS]
    bad = _bench("--only", "throughput,nothere")
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        f"run.py: no benchmark named nothere (known: {', '.join(sorted(b.name for b in run.BENCHMARKS))})"
    ]
    assert bad.stdout == ""


def test_the_driver_runs_the_throughput_table_end_to_end_at_its_smallest():
    """The table ``make bench`` prints first keeps its columns and rows (the numbers are
    whatever this machine gives)."""
    done = _bench("--smoke", "--only", "throughput")
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("measure "))
    assert lines[head].split() == [
        "measure", "median", "min-max", "unit", "x", "baseline", "x", "paper", "other", "load"
    ]  # fmt: skip
    labels = [re.split(r"\s{2,}", line.strip())[0] for line in lines[head + 2 :] if line.strip()][:14]
    assert labels == [
        "baseline: straightforward generator, 1 process",
        "generate_shard, 1 process",
        "rejected candidates (of 40 per run)",
        "generate_shard, noise 1.0, 1 process",
        "sample_family, LocalCluster 1 worker",
        "projection for 1 idle core (certified per CPU-s x 1)",
        "LocalCluster start-up (once, not in rate)",
        "first sample_family (warm-up, not in rate)",
        "score_plan on gold plans (noise 0)",
        "score_plan on noisy answers, eps 0.05 (noise 0)",
        "parse_plan_general on formatted gold plans (the reader without its fast path)",
        "parse_plan on formatted gold plans (fast path)",
        "score_plan on gold plans (noise 1)",
        "reference: paper (~147k mazes/hour, laptop)",
    ]
    assert any(line.startswith("goal: >= 1,000 certified 40x40 B=2 instances") for line in lines)
    assert "=== throughput: exit 0" in done.stderr


#: what common.py holds once: no benchmark may define its own copy
SHARED = {
    "log",
    "_log",
    "machine_busy_seconds",
    "tree_cpu_seconds",
    "run_rounds",
    "print_table",
    "print_ratio_table",
    "Measure",
    "TreeSampler",
    "ServerProcess",
    "_serve",
    "LoadMeter",
}


def _defined(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}


@pytest.mark.parametrize("path", sorted(p for p in BENCH.glob("*.py") if p.name != "common.py"), ids=str)
def test_no_benchmark_keeps_its_own_copy_of_the_shared_helpers(path: Path):
    assert not _defined(path) & SHARED, f"{path.name} defines {_defined(path) & SHARED}: use common.py"
    assert len(path.read_text(encoding="utf-8").splitlines()) <= 500, f"{path.name} is over 500 lines"


def test_the_copy_check_has_teeth(tmp_path: Path):
    copy = tmp_path / "x.py"
    copy.write_text("def _log(msg):\n    print(msg)\n", encoding="utf-8")
    assert _defined(copy) & SHARED == {"_log"}
    assert SHARED - {"_log"} <= _defined(BENCH / "common.py")


def _common():
    sys.path.insert(0, str(BENCH))
    try:
        import common
    finally:
        sys.path.pop(0)
    return common


def test_the_ratio_table_divides_by_the_named_baseline_and_the_reference(capsys):
    common = _common()
    rows = [
        common.Measure("baseline", "slow way", "x/s", [10.0, 30.0, 20.0], vs_reference=True),
        common.Measure("fast", "fast way", "x/s", [40.0], baseline="baseline", vs_reference=True),
        common.Measure(
            "n", "  a count", "items", [3.0, 5.0], integer=True, extra={"runs": [{"others_cores": 1.5}]}
        ),
    ]
    common.print_ratio_table(rows, ("x paper", 10.0))
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == [
        "measure",
        "median",
        "min-max",
        "unit",
        "x",
        "baseline",
        "x",
        "paper",
        "other",
        "load",
    ]
    cells = [re.split(r"\s{2,}", line.strip()) for line in out[2:]]
    assert cells[0] == ["slow way", "20.0", "10.0-30.0", "x/s", "1.00", "2.00", "-"]
    assert cells[1] == ["fast way", "40.0", "-", "x/s", "2.00", "4.00", "-"]
    assert cells[2] == ["a count", "4", "3-5", "items", "-", "-", "1.5 cores"]


def test_child_env_drops_what_it_is_told_and_stays_quiet(monkeypatch):
    common = _common()
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:1/api")
    monkeypatch.setenv("HB_BENCH_KEEP", "1")
    env = common.child_env(drop=("PREFECT_*",), PREFECT_HOME="/tmp/home")
    assert "PREFECT_API_URL" not in env and env["PREFECT_HOME"] == "/tmp/home"
    assert env["HB_BENCH_KEEP"] == "1" and env["TQDM_DISABLE"] == "1"
    assert env["PREFECT_SERVER_ANALYTICS_ENABLED"] == "false"  # set after the drop
    # a name without the star drops that name only
    assert common.child_env(drop=("PREFECT_API",))["PREFECT_API_URL"] == "http://127.0.0.1:1/api"
