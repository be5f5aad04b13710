"""Ctrl-C as a user at a terminal sends it: SIGINT to the command's whole process group,
in the default mode (Prefect's temporary server, a LocalCluster). The command exits
within seconds with one line saying what is kept, the flow run is marked Crashed or
Cancelled (read back from the temporary server's own database), nothing prints a
traceback, and no server or worker outlives the command."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from fake_model_server import running_fake_server

pytestmark = pytest.mark.flow
EXE = Path(sys.executable).with_name("horizonbench")


def _as_in_a_terminal() -> None:
    # a test started by a shell without job control inherits SIGINT ignored
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env["PREFECT_HOME"] = str(home)
    env["HB_KEY"] = "sk-test-not-secret"
    return env


def _config(path: Path, count: int, models: list[dict[str, Any]]) -> Path:
    cfg = {
        "run": {"name": "ctrl-c", "seed": 3},
        "families": {
            "maze": {
                "params": {"grid_rows": 40, "grid_cols": 40, "num_keys": 2},
                "sampling": {"count": count},
                "prompt": {"shots": 0},
            }
        },
        "evaluation": {"models": models, "interrupt_grace_s": 2},
        "dask": {"n_workers": 2},
        "analysis": {"bootstrap": 0},
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


def _interrupt_when(proc: subprocess.Popen[str], log: Path, ready: Any, limit: float = 240) -> float:
    deadline = time.monotonic() + limit
    while not ready():
        assert proc.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, "the run never got there: " + log.read_text()[-3000:]
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGINT)
    sent = time.monotonic()
    proc.wait(timeout=60)
    return time.monotonic() - sent


def _flow_states(home: Path) -> list[str]:
    db = home / "prefect.db"
    with sqlite3.connect(db) as con:
        return [r[0] for r in con.execute("select state_type from flow_run")]


def _port_closed(url: str) -> bool:
    host, port = re.match(r"http://([\d.]+):(\d+)", url).groups()  # type: ignore[union-attr]
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex((host, int(port))) != 0


def _check_after(log: Path, home: Path, took: float, proc: subprocess.Popen[str]) -> str:
    text = log.read_text()
    assert proc.returncode == 130, text[-3000:]
    assert took < 15, f"Ctrl-C took {took:.1f} s"  # liveness, not speed
    assert "Traceback" not in text, text[-4000:]
    assert "UserWarning" not in text, text[-2000:]
    last = text.strip().splitlines()[-1]
    assert last.startswith("horizonbench: error: interrupted: "), last
    assert _flow_states(home) in (["CRASHED"], ["CANCELLED"]), _flow_states(home)
    servers = re.findall(r"Starting temporary server on (http://127\.0\.0\.1:\d+)", text)
    assert servers and _port_closed(servers[-1])
    return last


def _start(args: list[str], log: Path, home: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(EXE), *args, "--no-progress"],
        env=_env(home),
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=_as_in_a_terminal,
    )


def test_ctrl_c_during_generation(tmp_path):
    cfg = _config(tmp_path / "c.yaml", 20_000, [])
    log, home, out = tmp_path / "log", tmp_path / "home", tmp_path / "run"
    proc = _start(["generate", "--config", str(cfg), "--out", str(out)], log, home)
    took = _interrupt_when(
        proc, log, lambda: "Beginning flow run" in log.read_text() and time.sleep(3) is None
    )
    last = _check_after(log, home, took, proc)
    assert "generation" in last and "rerun" in last, last
    # the run folder says what it is: not finished, and nothing passes as current
    state = yaml.safe_load((out / "state.json").read_text())
    assert state["status"] in ("cancelled", "crashed") and not (out / "manifest.json").exists()


def test_ctrl_c_during_evaluation(tmp_path):
    with running_fake_server(lambda body: "I do not know.", latency_s=0.5, rpm=6000) as server:
        model = {
            "name": "compat",
            "provider": "openai_compatible",
            "model": "solver",
            "base_url": server.base_url,
            "api_key_env": "HB_KEY",
            "max_concurrency": 8,
        }
        cfg = _config(tmp_path / "c.yaml", 200, [model])
        log, home, out = tmp_path / "log", tmp_path / "home", tmp_path / "run"
        proc = _start(["run", "--config", str(cfg), "--out", str(out)], log, home)
        took = _interrupt_when(proc, log, lambda: server.answered >= 20)
        last = _check_after(log, home, took, proc)
        assert re.search(r"interrupted: \d+ of 200 attempts done and stored", last), last


def test_sigterm_to_run_ends_cancelled(tmp_path):
    """SIGTERM to the command alone (as ``kill PID`` or a process manager sends it) ends the
    run like Ctrl-C: exit 130 (README, "Exit codes"), one line, and ``state.json`` says
    ``cancelled``. Inside a flow run Prefect raises its own TerminationSignal, which the
    run folder once recorded as ``failed``."""
    cfg = _config(tmp_path / "c.yaml", 20_000, [{"name": "oracle", "provider": "offline", "kind": "oracle"}])
    log, home, out = tmp_path / "log", tmp_path / "home", tmp_path / "run"
    proc = _start(["run", "--config", str(cfg), "--out", str(out)], log, home)
    deadline = time.monotonic() + 240
    while "Beginning flow run" not in log.read_text():
        assert proc.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, "the run never started: " + log.read_text()[-3000:]
        time.sleep(0.1)
    time.sleep(2)  # into generation
    os.kill(proc.pid, signal.SIGTERM)
    proc.wait(timeout=60)
    text = log.read_text()
    assert proc.returncode == 130, text[-3000:]
    assert "Traceback" not in text, text[-4000:]
    last = text.strip().splitlines()[-1]
    assert last.startswith("horizonbench: error: interrupted: "), last
    state = json.loads((out / "state.json").read_text())
    assert state["status"] == "cancelled", state["status"]
    assert state["problems"] == ["interrupted by Ctrl-C or SIGTERM"], state["problems"]
    assert not (out / "manifest.json").exists()
