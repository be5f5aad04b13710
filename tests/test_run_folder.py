"""The run folder's lock, state and out-folder check, with real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from horizonbench.tasks.run_folder import state as rf
from horizonbench.tasks.run_folder.status import format_status, lock_is_held, run_status

HOLD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from horizonbench.tasks.run_folder.state import run_lock
    with run_lock(Path(sys.argv[1]), "holder"):
        print("held", flush=True)
        time.sleep(120)
    """
)


def _holder(run: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(run)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_run_is_refused_naming_the_holder_and_a_dead_holders_lock_is_taken_over(tmp_path):
    run = tmp_path / "run"
    proc = _holder(run)
    try:
        assert lock_is_held(run)
        with pytest.raises(rf.RunFolderBusy) as err, rf.run_lock(run, "second"):
            pass
        assert f"pid {proc.pid}" in str(err.value) and "(holder, since" in str(err.value)
    finally:
        proc.send_signal(signal.SIGKILL)  # no cleanup: the lock file stays behind
        proc.wait()
    assert (run / rf.LOCK).exists() and not lock_is_held(run)
    with rf.run_lock(run, "third") as previous:
        assert previous is not None and previous["pid"] == proc.pid
        assert rf.holder(run)["pid"] == os.getpid() and lock_is_held(run)
    assert not lock_is_held(run)


def test_the_lock_is_reentrant_in_one_process(tmp_path):
    with rf.run_lock(tmp_path, "cli"), rf.run_lock(tmp_path, "flow") as previous:
        assert previous is None
    with rf.run_lock(tmp_path, "again"):
        pass


def _config(**changes):
    base = {
        "run": {"name": "r", "seed": 1},
        "dask": {"n_workers": 2, "address": None},
        "evaluation": {"interrupt_grace_s": 10.0, "models": [{"name": "m", "max_concurrency": 4}]},
        "families": {"maze": {"params": {"grid_rows": 4}, "sampling": {"count": 3, "shard_size": None}}},
    }
    for dotted, value in changes.items():
        node = base
        *head, last = dotted.split(".")
        for key in head:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[last] = value
    return base


@pytest.mark.parametrize(
    ("change", "same"),
    [
        ({"dask.n_workers": 1}, True),
        ({"dask.address": "tcp://127.0.0.1:8786"}, True),
        ({"evaluation.models.0.max_concurrency": 64}, True),
        ({"families.maze.sampling.shard_size": 40}, True),
        ({"evaluation.interrupt_grace_s": 1.0}, True),
        ({"run.seed": 2}, False),
        ({"families.maze.params.grid_rows": 5}, False),
        ({"families.maze.sampling.count": 4}, False),
        ({"evaluation.models.0.name": "other"}, False),
    ],
)
def test_only_what_changes_outputs_makes_a_config_different(tmp_path, change, same):
    run = tmp_path / "run"
    run.mkdir()
    rf.begin(run, _config(), "run")
    problem = rf.check_out(run, _config(**change), overwrite=False)
    assert (problem is None) == same, problem
    assert rf.check_out(run, _config(**change), overwrite=True) is None


def test_the_check_survives_a_crash_and_refuses_bad_folders(tmp_path, monkeypatch):
    run = tmp_path / "run"
    run.mkdir()
    rf.begin(run, _config(), "run")  # ... and the run dies: no manifest is ever written
    assert "different config" in rf.check_out(run, _config(**{"run.seed": 9}), overwrite=False)
    assert rf.check_out("", _config(), False) == "--out is empty; name a run folder"
    (tmp_path / "file").write_text("x")
    assert "is not a folder" in rf.check_out(tmp_path / "file", _config(), False)
    project = tmp_path / "project"
    project.mkdir()
    (project / "manifest.json").write_text("{}")  # someone else's manifest
    (project / "setup.py").write_text("")
    assert "holds files that are not a run's (setup.py)" in rf.check_out(project, _config(), False)
    assert "file is not a folder" in rf.check_out(tmp_path / "file" / "run", _config(), False)
    # not writable even for root (permission bits would not bind it)
    assert rf.check_out("/proc/horizonbench/run", _config(), False) == (
        "--out /proc/horizonbench/run: /proc is not writable"
    )


def test_a_rerun_marks_old_outputs_stale_until_rewritten_and_banners_the_old_report(tmp_path):
    run = tmp_path / "run"
    (run / "report").mkdir(parents=True)
    (run / "instances").mkdir()
    (run / "scores").mkdir()
    (run / "report" / "index.html").write_text("<html><body class=x><h1>old</h1></body></html>")
    rf.begin(run, _config(), "run")
    state = rf.read_state(run)
    assert {rel: o["status"] for rel, o in state["outputs"].items()} == {
        "instances": "stale",
        "scores": "stale",
        "report": "stale",
    }
    html = (run / "report" / "index.html").read_text()
    assert html.startswith("<html><body class=x>" + rf.STALE_BANNER) and "STALE" in html
    rf.current(run, "generate")
    info = run_status(run)
    # the process that began it holds no lock: a state left "running" reads as crashed
    assert info["status"] == "crashed" and info["stale"] == ["report", "scores"]
    assert info["current"] == ["instances"] and info["report"] is None
    assert "stale: report, scores" in format_status(info)
    rf.finish(run, "completed")
    assert run_status(run)["status"] == "completed"


def test_latest_points_at_the_newest_run_of_a_series(tmp_path):
    template = str(tmp_path / "nightly" / "{date}")
    for day in ("2026-11-30", "2026-12-01"):
        out = tmp_path / "nightly" / day
        out.mkdir(parents=True)
        (out / "x").write_text(day)
        (out / "manifest.json").write_text("{}")  # a finished run (tasks.run_folder.verify checks it)
        link = rf.point_latest(template, out)
    assert link == tmp_path / "nightly" / "latest"
    assert os.readlink(link) == "2026-12-01" and (link / "x").read_text() == "2026-12-01"
    assert rf.point_latest(str(tmp_path / "fixed"), tmp_path / "fixed") is None


def test_status_of_a_folder_held_by_a_live_run(tmp_path):
    run = tmp_path / "run"
    proc = _holder(run)
    try:
        (run / rf.STATE).write_text(json.dumps({"status": "running", "outputs": {}, "started_at": "t"}))
        info = run_status(run)
        assert info["status"] == "running" and info["holder"]["pid"] == proc.pid
        assert f"pid {proc.pid}" in format_status(info)
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 10
    while lock_is_held(run) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert run_status(run)["status"] == "crashed"
