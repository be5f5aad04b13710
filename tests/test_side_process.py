"""The side process: forked by the command, Great Expectations only there, every
validation of the run done there with the same results, the report's offloaded figures
the same bytes, errors handed back, and the process always reaped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from horizonbench.core.errors import ValidationFailed

PYTHON = sys.executable


PROBE = """
import json, os, signal, sys, threading
from pathlib import Path
import pyarrow as pa, pyarrow.parquet as pq
from horizonbench.tasks.cluster import side_process as vp

SUITE = [
    ("ExpectColumnValuesToNotBeNull", {"column": "instance_id"}),
    ("ExpectColumnValuesToBeUnique", {"column": "instance_id"}),
]
tmp, scenario = Path(sys.argv[1]), sys.argv[2]
def table(name, ids):
    pq.write_table(pa.table({"instance_id": ids, "n": list(range(len(ids)))}), tmp / name)
    return str(tmp / name)
good, bad = table("good.parquet", ["a", "b", "c"]), table("bad.parquet", ["a", "a", "c"])
out = {}
if scenario == "same":
    with vp.side_process() as proc:
        out["forked"] = proc is not None
        there = [vp.check_table(p, "t", SUITE, str(tmp / "forked")) for p in (good, bad)]
        with vp.side_process() as again:
            out["nested_same"] = again is proc
    out["exit"] = proc.poll()
    out["gx_here"] = "great_expectations" in sys.modules
    here = [vp.check_table(p, "t", SUITE, str(tmp / "here")) for p in (good, bad)]
    out["there"], out["equal"] = there, there == here
    out["docs"] = (tmp / "forked" / "validation" / "data_docs" / "index.html").exists()
elif scenario == "error":
    (tmp / "empty").mkdir()
    with vp.side_process() as proc:
        try:
            vp.check_table(str(tmp / "empty"), "t", SUITE, str(tmp / "run"))
        except Exception as err:
            out["error"] = [type(err).__name__, str(err)]
        out["after"] = vp.check_table(good, "t", SUITE, str(tmp / "run"))["success"]
    out["exit"] = proc.poll()
elif scenario == "killed":
    with vp.side_process() as proc:
        os.kill(proc.pid, signal.SIGKILL)
        try:
            vp.check_table(good, "t", SUITE, str(tmp / "run"))
        except RuntimeError as err:
            out["error"] = str(err)
    out["exit"] = proc.poll()
elif scenario == "interrupted":
    try:
        with vp.side_process() as proc:
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        out["exit"] = proc.poll()
elif scenario == "thread":
    stop = threading.Event()
    other = threading.Thread(target=stop.wait, name="someone-elses")
    other.start()
    out["can_fork"] = vp.can_fork()
    with vp.side_process() as proc:
        out["forked"] = proc is not None
        out["success"] = vp.check_table(good, "t", SUITE, str(tmp / "run"))["success"]
    stop.set()
    other.join()
elif scenario == "report":
    from horizonbench.tasks.report.page import build_report
    run = sys.argv[3]
    def page():
        build_report.fn(run, "t", {}, {})
        return (Path(run) / "report" / "index.html").read_text()
    here = page()
    with vp.side_process() as proc:
        out["forked"] = proc is not None
        calls = []
        real = proc.submit
        proc.submit = lambda what, fn, *args: calls.append(fn.__qualname__) or real(what, fn, *args)
        there = page()
    out["offloaded"] = calls
    out["same"] = here == there
    out["figures"] = there.count("<svg")
print(json.dumps(out))
"""


def _probe(tmp_path: Path, scenario: str, *extra: str) -> dict:
    """Each scenario in a new interpreter: this one runs pytest's threads, and the
    command forks only while no thread of anybody else's runs."""
    proc = subprocess.run(
        [PYTHON, "-c", PROBE, str(tmp_path), scenario, *extra], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_tables_are_validated_in_the_forked_process_with_the_same_results(tmp_path) -> None:
    out = _probe(tmp_path, "same")
    assert out["forked"] and out["nested_same"] and out["exit"] == 0
    assert out["gx_here"] is False  # until this process validated on its own
    assert [s["success"] for s in out["there"]] == [True, False]
    assert "expect_column_values_to_be_unique" in out["there"][1]["failures"][0]
    assert out["equal"] and out["docs"]


def test_an_error_of_a_validation_is_raised_in_the_command(tmp_path) -> None:
    out = _probe(tmp_path, "error")
    assert out["error"][0] == ValidationFailed.__name__ and "has no parts" in out["error"][1]
    assert out["after"] is True and out["exit"] == 0


def test_a_killed_validation_process_is_an_error_naming_the_table(tmp_path) -> None:
    out = _probe(tmp_path, "killed")
    assert "the side process stopped while validating t " in out["error"]
    assert out["exit"] == -signal.SIGKILL


def test_an_interrupted_block_stops_the_process_at_once(tmp_path) -> None:
    assert _probe(tmp_path, "interrupted")["exit"] is not None


def test_nothing_is_forked_while_another_thread_runs(tmp_path) -> None:
    """A thread could hold a lock the child would need: then validation stays here."""
    assert _probe(tmp_path, "thread") == {"can_fork": False, "forked": False, "success": True}


RUN_PROBE = """
import json, sys
from pathlib import Path
import psutil
from horizonbench.cli.main import main
cfg, out = sys.argv[1], sys.argv[2]
code = main(["run", "--config", cfg, "--out", out, "--no-progress"])
print(json.dumps({"code": code, "gx": "great_expectations" in sys.modules,
                  "children": [p.pid for p in psutil.Process().children(recursive=True)]}))
"""

CONFIG = """\
run: {name: fork, seed: 4}
families:
  maze:
    params: {grid_rows: 5, grid_cols: 5, num_keys: 1}
    sampling: {count: 6}
    prompt: {shots: 0}
evaluation:
  samples: 1
  models:
    - {name: oracle, provider: offline, kind: oracle}
analysis: {bootstrap: 0}
"""


def test_a_run_validates_in_the_forked_process_and_leaves_no_process_behind(tmp_path) -> None:
    (tmp_path / "c.yaml").write_text(CONFIG)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    timings = tmp_path / "timings.jsonl"
    env.update(
        PREFECT_HOME=str(tmp_path / "home"),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        HORIZONBENCH_TIMINGS=str(timings),
    )
    proc = subprocess.run(
        [PYTHON, "-c", RUN_PROBE, str(tmp_path / "c.yaml"), str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"code": 0, "gx": False, "children": []}
    marks = [json.loads(line) for line in timings.read_text().splitlines()]
    command = next(m["pid"] for m in marks if m["event"] == "cli start")
    (gx,) = [m for m in marks if m["event"] == "gx imported"]
    assert gx["pid"] != command
    validation = tmp_path / "run" / "validation"
    assert json.loads((validation / "instances__maze.json").read_text())["success"]
    assert json.loads((validation / "scores.json").read_text())["success"]
    # the report's seqBench figures drawn in the side process: the same page
    report = _probe(tmp_path, "report", str(tmp_path / "run"))
    assert report["forked"] and report["offloaded"] == ["seqbench_figures"]
    assert report["same"] and report["figures"] >= 10


LARGE_PROBE = """
import argparse, contextlib, json, sys
from horizonbench.cli.main import _warm_up
from horizonbench.schemas.config import parse_config
from horizonbench.tasks.cluster import side_process
cfg = parse_config({
    "run": {"name": "large", "seed": 1},
    "families": {"maze": {"params": {"grid_rows": 5, "grid_cols": 5, "num_keys": 1},
                          "sampling": {"count": int(sys.argv[1])}}},
    "dask": {"n_workers": 1},
}, "probe")
with contextlib.ExitStack() as stack:
    _warm_up(argparse.Namespace(command="generate", dry_run=False), cfg, stack)
    out = {"forked": bool(side_process._ACTIVE), "gx_here": "great_expectations" in sys.modules}
print(json.dumps(out))
"""


def test_only_a_small_run_forks_a_larger_one_keeps_great_expectations_here() -> None:
    """The side process is for the start-up a user waits for; a larger run keeps its
    memory (about 200 MiB less for the process tree) and imports Great Expectations."""
    outs = []
    for count in (10, 101):
        proc = subprocess.run(
            [PYTHON, "-c", LARGE_PROBE, str(count)], capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        outs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert outs == [{"forked": True, "gx_here": False}, {"forked": False, "gx_here": True}]


HOLD_PROBE = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # KeyboardInterrupt, as in a terminal
from horizonbench.tasks.cluster import side_process as vp
with vp.side_process() as proc:
    if sys.argv[1:] == ["busy"]:  # the child in the middle of a call, not reading its pipe
        proc.submit("sleeping", time.sleep, 60)
    print(proc.pid, flush=True)
    time.sleep(60)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _hold(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [PYTHON, "-c", HOLD_PROBE, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    assert _alive(child)
    return proc, child


def _gone(pid: int, within: float = 15.0) -> bool:
    import time

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_ctrl_c_reaches_the_group_and_the_side_process_goes_quietly(tmp_path) -> None:
    """SIGINT to the whole process group, as a terminal sends it: the child ignores it,
    the command stops it on the way out, and nothing prints a traceback."""
    proc, child = _hold(tmp_path)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode != 0  # the probe's own KeyboardInterrupt
    assert _gone(child)
    assert err.count("Traceback") == 1 and "KeyboardInterrupt" in err  # the probe's, not the child's


def test_the_side_process_dies_with_a_killed_command(tmp_path) -> None:
    """Killed while the child is busy (an idle one would read the end of its pipe): the
    kernel sends it SIGTERM (PR_SET_PDEATHSIG); without that it would sleep on."""
    proc, child = _hold(tmp_path, "busy")
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert _gone(child)
