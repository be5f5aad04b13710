"""Rough edges a new user met (issue 23), each as the user met it: the installed command,
real subprocesses, real servers on 127.0.0.1. The SIGTERM case lives in
tests/test_interrupts.py and the config-error cases in tests/test_config_strict.py."""

from __future__ import annotations

import json
import math
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import yaml

from fake_model_server import running_fake_server

EXE = Path(sys.executable).with_name("horizonbench")
KEY_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HB_ROUGH_KEY")


def _no_keys(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a user who has set no API key (and no Prefect API)."""
    env = {k: v for k, v in os.environ.items() if k not in KEY_VARS and not k.startswith("PREFECT_API")}
    env.update(extra or {})
    return env


def _api_models(server: Any) -> list[dict[str, Any]]:
    """The three kinds of model configs/api-models.yaml ships, each pointed at the fake
    server so that any request sent would be seen."""
    return [
        {"name": "gpt", "provider": "openai", "model": "gpt-4.1-mini", "base_url": server.base_url},
        {
            "name": "claude",
            "provider": "anthropic",
            "model": "claude-sonnet-4-5",
            "base_url": server.root_url,
        },
        {
            "name": "local",
            "provider": "openai_compatible",
            "model": "solver",
            "base_url": server.base_url,
            "api_key_env": "HB_ROUGH_KEY",
        },
    ]


def _config(path: Path, models: list[dict[str, Any]]) -> Path:
    cfg = {
        "run": {"name": "rough", "seed": 5},
        "families": {
            "maze": {
                "params": {"grid_rows": 5, "grid_cols": 5, "num_keys": 1},
                "sampling": {"count": 4, "shard_size": 4},
                "prompt": {"shots": 0},
            }
        },
        "evaluation": {"samples": 1, "models": models},
        "dask": {"n_workers": 1},
        "analysis": {"bootstrap": 0},
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.mark.flow
def test_a_dry_run_needs_no_api_key_and_a_real_run_still_does(tmp_path, prefect_server):
    with running_fake_server(lambda body: "never") as server:
        cfg = _config(tmp_path / "c.yaml", _api_models(server))
        env = _no_keys({"PREFECT_API_URL": prefect_server})
        dry = subprocess.run(
            [
                str(EXE),
                "run",
                "--config",
                str(cfg),
                "--out",
                str(tmp_path / "dry"),
                "--dry-run",
                "--no-progress",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        real = subprocess.run(
            [str(EXE), "run", "--config", str(cfg), "--out", str(tmp_path / "real"), "--no-progress"],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert server.requests == []
    assert dry.returncode == 0, dry.stderr[-3000:]
    rows = {line.split()[0]: line.split() for line in dry.stdout.splitlines() if line.split()}
    for name in ("gpt", "claude", "local"):
        assert rows[name][1:4] == ["4", "0", "4"], dry.stdout  # attempts, stored, calls
    assert "nothing was sent" in dry.stdout
    # where calls would be sent, the missing key is still one line and exit 2, before anything
    assert real.returncode == 2, real.stderr[-3000:]
    assert real.stderr.strip().splitlines()[-1] == (
        "horizonbench: error: model 'gpt' (provider 'openai') needs an API key in the environment "
        "variable OPENAI_API_KEY, which is not set"
    )
    assert not (tmp_path / "real").exists()


def _serve(tmp_path: Path, home: Path, config: str) -> tuple[subprocess.CompletedProcess[str], float]:
    env = _no_keys({"PREFECT_HOME": str(home)})
    start = time.monotonic()
    proc = subprocess.run(
        [str(EXE), "serve", "--config", config, "--out", str(tmp_path / "n" / "{date}")],
        env=env,
        cwd=tmp_path,  # no prefect.toml, .env or pyproject.toml of ours in the way
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc, time.monotonic() - start


def test_serve_without_an_api_url_says_so_first_in_one_line(tmp_path):
    # the config is missing too: the URL is what the user must fix first, and it is
    # checked before anything is imported or read
    proc, took = _serve(tmp_path, tmp_path / "home", str(tmp_path / "missing.yaml"))
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.splitlines() == [
        "horizonbench: error: PREFECT_API_URL is not set: start a server (prefect server start) and "
        "export PREFECT_API_URL=http://127.0.0.1:4200/api, so the schedule and its runs outlive this process"
    ]
    assert took < 20, f"{took:.1f} s"  # liveness (it once took 57 s), not speed


def test_serve_takes_the_api_url_from_a_prefect_profile(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "profiles.toml").write_text(
        'active = "lasting"\n\n[profiles.lasting]\nPREFECT_API_URL = "http://127.0.0.1:9/api"\n'
    )
    proc, _ = _serve(tmp_path, home, str(tmp_path / "missing.yaml"))
    # past the URL check: the next one (the config) speaks
    assert proc.returncode == 2, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert "no such config file" in last and "PREFECT_API_URL" not in last, last


def _readme_ui_command() -> list[str]:
    """The README's command for a Prefect server on another port, as words."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    lines = [ln for ln in readme.splitlines() if ln.startswith("PREFECT_UI_API_URL=") and "--port" in ln]
    assert len(lines) == 1, "the README shows no (or several) server commands with PREFECT_UI_API_URL"
    return shlex.split(lines[0])


@pytest.mark.flow
def test_the_readme_server_on_another_port_gives_its_ui_the_right_api_url(tmp_path):
    """The UI asks ``/ui-settings`` for its API; with ``--port`` alone Prefect answers
    port 4200. The README's command (port replaced by a free one) must answer its own."""
    words = _readme_ui_command()
    shown = words[words.index("--port") + 1]
    port = _free_port()
    words = [w.replace(shown, str(port)) for w in words]
    setting, exe, args = words[0], words[1], words[2:]
    name, url = setting.split("=", 1)
    assert url == f"http://127.0.0.1:{port}/api" and exe == ".venv/bin/prefect", words
    home = tmp_path / "home"
    home.mkdir()
    from horizonbench.cli.prefect_server import template_path

    if template_path().exists():  # a migrated empty database: no 116 migrations to wait for
        shutil.copyfile(template_path(), home / "prefect.db")
    env = _no_keys({name: url, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"})
    with (tmp_path / "server.log").open("wb") as log:
        server = subprocess.Popen(
            [str(EXE.with_name("prefect")), *args, "--host", "127.0.0.1"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 120  # liveness: a busy 2-core machine takes 10-40 s
            while True:
                assert server.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/ui-settings", timeout=2) as r:
                        settings = json.loads(r.read())
                    break
                except OSError:
                    assert time.monotonic() < deadline, (tmp_path / "server.log").read_text()[-3000:]
                    time.sleep(0.25)
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()
    assert settings["api_url"] == url, settings


def _free_port() -> int:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_horizons_artifact_names_each_eps_row_by_puzzle_mode_and_model(tmp_path):
    """A plan and a rollout of one puzzle fit eps apart; the artifact's rows said only
    "oracle" for both (and for every other puzzle)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from horizonbench.schemas.tables import ANALYSIS_SCHEMAS
    from horizonbench.tasks.report.artifacts import horizon_rows

    schema = ANALYSIS_SCHEMAS["compounding"]
    rows = [
        {"family": family, "model": "oracle", "eps": eps, "eps_low": 0.0, "eps_high": 0.01}
        for family, eps in (("hanoi", 0.0), ("hanoi/rollout", 0.002), ("checkers", 0.001))
    ]
    rows = [{**{f.name: None for f in schema}, **r} for r in rows]
    (tmp_path / "analysis").mkdir()
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), tmp_path / "analysis" / "compounding.parquet")
    eps = [r for r in horizon_rows(tmp_path) if r["quantity"] == "eps"]
    assert [r["of"] for r in eps] == [
        "hanoi / plan / oracle",
        "hanoi / rollout / oracle",
        "checkers / plan / oracle",
    ]
    assert [r["value"] for r in eps] == [0.0, 0.002, 0.001]


def test_the_compare_trend_axis_reaches_the_l0s_not_a_far_upper_end():
    """An upper end far beyond every L0 (here the 198366769.5 a comparison once showed)
    runs to the edge like an unbounded one; the axis stays on the L0s and lower ends."""
    import pandas as pd

    from horizonbench.reports.compare_plots import _top

    rows = pd.DataFrame(
        {
            "L0": [50.0, 60.0, math.inf],
            "L0_low": [30.0, 40.0, 45.0],
            "L0_high": [90.0, 198366769.5, math.inf],
        }
    )
    assert 1.15 * 90.0 <= _top(rows) <= 1.15 * 3 * 60.0
    # every finite end within reach is still on the axis
    assert _top(rows.assign(L0_high=[90.0, 150.0, math.inf])) == pytest.approx(1.15 * 150.0)
