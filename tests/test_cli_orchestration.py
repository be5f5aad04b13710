"""The command as a nightly job meets it: a folder another run holds, a folder that
cannot be written, a scheduler that is not there or runs another version, short bins,
the status of a folder and the machine-readable end of a run. Real processes, a real
Dask scheduler and workers on 127.0.0.1."""

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
import yaml

from conftest import CONFIGS
from horizonbench import __version__

pytestmark = pytest.mark.flow
EXE = Path(sys.executable).with_name("horizonbench")


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env["PREFECT_HOME"] = str(tmp_path / "prefect-home")
    return env


def _cli(tmp_path: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(EXE), *args], env=_env(tmp_path), capture_output=True, text=True, timeout=timeout, cwd=tmp_path
    )


def _config(tmp_path: Path, **sampling: object) -> Path:
    data = yaml.safe_load((CONFIGS / "small.yaml").read_text())
    data["families"]["maze"]["sampling"].update(sampling)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _one_line_exit_2(proc: subprocess.CompletedProcess[str], needle: str) -> None:
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.strip().splitlines() if line.startswith("horizonbench: error:")]
    assert len(lines) == 1 and needle in lines[0], proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


def test_bad_folders_and_addresses_are_one_line_exit_2_with_nothing_created(tmp_path):
    cfg = _config(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    _one_line_exit_2(_cli(tmp_path, "generate", "--config", str(cfg), "--out", ""), "--out is empty")
    _one_line_exit_2(
        _cli(tmp_path, "generate", "--config", str(cfg), "--out", "/proc/hb/run"), "/proc is not writable"
    )
    started = time.monotonic()
    proc = _cli(
        tmp_path, "generate", "--config", str(cfg), "--out", "r", "--dask-address", "tcp://127.0.0.1:1"
    )
    _one_line_exit_2(
        proc, "--dask-address tcp://127.0.0.1:1: no Dask scheduler answered (Connection refused)"
    )
    assert time.monotonic() - started < 60  # not Dask's retries for the whole timeout
    _one_line_exit_2(
        _cli(tmp_path, "generate", "--config", str(cfg), "--out", "r", "--dask-address", "nonsense"),
        "give a scheduler address like tcp://host:8786",
    )
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "notes.txt").write_text("mine")
    _one_line_exit_2(
        _cli(tmp_path, "generate", "--config", str(cfg), "--out", "project"),
        "holds files that are not a run's",
    )
    after = sorted(p.name for p in tmp_path.iterdir() if p.name not in ("prefect-home", "project"))
    assert after == before  # no run folder, no manifest, nothing


PRELOAD = textwrap.dedent(
    """
    # a worker of another horizonbench release, as an outdated image in a cluster would be
    import horizonbench.tasks.cluster.client as cluster
    cluster.__version__ = "0.0.0-other"
    """
)


def _dask(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(Path(sys.executable).with_name("dask")), *args],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        text=True,
    )


def test_workers_of_another_version_are_refused_at_connect(tmp_path):
    from distributed import Client

    (tmp_path / "other_version.py").write_text(PRELOAD)
    port = 20000 + os.getpid() % 20000
    address = f"tcp://127.0.0.1:{port}"
    procs = [_dask(tmp_path, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard")]
    try:
        time.sleep(2)
        procs.append(_dask(tmp_path, "worker", address, "--nworkers", "1", "--preload", "other_version.py"))
        with Client(address, timeout=60) as client:
            client.wait_for_workers(1, timeout=120)
        cfg = _config(tmp_path)
        proc = _cli(tmp_path, "generate", "--config", str(cfg), "--out", "r", "--dask-address", address)
        _one_line_exit_2(proc, f"workers run another horizonbench than this client's {__version__}")
        assert "0.0.0-other" in proc.stderr and not (tmp_path / "r").exists()
    finally:
        for p in procs:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def test_a_second_run_into_a_folder_is_refused_and_the_first_completes(tmp_path):
    cfg = _config(tmp_path)
    first = subprocess.Popen(
        [str(EXE), "run", "--config", str(cfg), "--out", "run", "--no-progress"],
        env=_env(tmp_path),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 300
    while not (tmp_path / "run" / "state.json").exists():
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()
        time.sleep(0.1)
    started = time.monotonic()
    second = _cli(tmp_path, "run", "--config", str(cfg), "--out", "run", "--no-progress")
    _one_line_exit_2(second, f"--out run is in use by pid {first.pid} on ")
    assert time.monotonic() - started < 60  # refused at once, not after the first run
    _, err = first.communicate(timeout=600)
    assert first.returncode == 0, err[-3000:]
    status = _cli(tmp_path, "status", "--run", "run", "--json")
    assert status.returncode == 0, status.stderr
    info = json.loads(status.stdout)
    assert info["status"] == "completed" and not info["stale"] and info["report"].endswith("index.html")
    text = _cli(tmp_path, "status", "--run", "run")
    assert text.returncode == 0 and "status: completed" in text.stdout and "L0 maze/noisy" in text.stdout
    _one_line_exit_2(_cli(tmp_path, "status", "--run", "."), "not a run folder")


def test_short_bins_exit_4_with_the_list_and_json_on_stdout(tmp_path):
    cfg = _config(tmp_path, max_candidates=60)
    proc = _cli(tmp_path, "generate", "--config", str(cfg), "--out", "short", "--json", "--no-progress")
    assert proc.returncode == 4, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("horizonbench: error: bins short of quota: maze: ") and "allow_unfilled" in last
    info = json.loads(proc.stdout)  # stdout holds the JSON object and nothing else
    assert info["status"] == "failed" and "bins short of quota" in info["problems"][0]
    allowed = _config(tmp_path, max_candidates=60, allow_unfilled=True)
    ok = _cli(tmp_path, "generate", "--config", str(allowed), "--out", "short", "--no-progress")
    assert ok.returncode == 0, ok.stderr[-3000:]


def test_serve_without_a_prefect_server_is_one_line_exit_2(tmp_path):
    # a fresh process: no API configured in the environment, a profile or settings (a
    # test in this process may have pointed Prefect's settings at a test server)
    proc = _cli(tmp_path, "serve", "--config", str(CONFIGS / "small.yaml"), timeout=120)
    _one_line_exit_2(proc, "PREFECT_API_URL")


def test_a_dated_out_folder_is_one_run_of_a_series_with_a_latest_pointer(tmp_path):
    import datetime as dt

    cfg = _config(tmp_path)
    proc = _cli(tmp_path, "generate", "--config", str(cfg), "--out", "series/{date}", "--no-progress")
    assert proc.returncode == 0, proc.stderr[-3000:]
    day = dt.datetime.now(dt.UTC).date().isoformat()
    assert sorted(p.name for p in (tmp_path / "series").iterdir()) == [day, "latest"]
    assert os.readlink(tmp_path / "series" / "latest") == day
    assert json.loads((tmp_path / "series" / "latest" / "state.json").read_text())["status"] == "completed"
