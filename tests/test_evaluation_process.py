"""The evaluation as users run it: the installed command in its own process group,
signals from "a terminal", reruns, exit codes, and the canary key, against the fake
model server (real SDKs, real HTTP) and real Prefect servers."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml

from fake_model_server import running_fake_server

pytestmark = pytest.mark.flow
EXE = Path(sys.executable).with_name("horizonbench")
CANARY = "sk-canary-NOT-SECRET-4f1c2a"


def _config(path: Path, models: list[dict[str, Any]], *, count: int = 40, samples: int = 5) -> Path:
    cfg = {
        "run": {"name": "proc", "seed": 5},
        "families": {
            "maze": {
                "params": {"grid_rows": 5, "grid_cols": 5, "num_keys": 1},
                "sampling": {"count": count, "shard_size": count},
                "prompt": {"shots": 0},
            }
        },
        "evaluation": {"samples": samples, "models": models, "interrupt_grace_s": 10},
        "dask": {"n_workers": 1},
        "analysis": {"bootstrap": 0},
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


def _env(tmp_path: Path, api_url: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env["HB_CANARY_KEY"] = CANARY
    if api_url:
        env["PREFECT_API_URL"] = api_url
    else:
        env["PREFECT_HOME"] = str(tmp_path / "prefect-home")
    return env


def _as_in_a_terminal() -> None:
    """Ctrl-C and Ctrl-\\ as a terminal delivers them. A test run started in the
    background by a shell without job control (``.ci/run &``, ``nohup``) inherits SIGINT
    and SIGQUIT *ignored*, and Python keeps ignoring an inherited SIGINT: the command
    would never see the Ctrl-C this test sends, which no user at a terminal meets."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


def _start(cfg: Path, out: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(EXE), "run", "--config", str(cfg), "--out", str(out), "--no-progress"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, like a job in a terminal
        preexec_fn=_as_in_a_terminal,
    )


def _run(cfg: Path, out: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    """``horizonbench run`` to completion, as a user runs it."""
    return subprocess.run(
        [str(EXE), "run", "--config", str(cfg), "--out", str(out), "--no-progress", *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _model(server: Any, **kw: Any) -> dict[str, Any]:
    return {
        "name": "compat",
        "provider": "openai_compatible",
        "model": "solver",
        "base_url": server.base_url,
        "api_key_env": "HB_CANARY_KEY",
        "requests_per_minute": 1200,
        "max_concurrency": 16,
        **kw,
    }


def _wait_answers(server: Any, proc: subprocess.Popen[str], n: int, limit: float = 300) -> None:
    deadline = time.monotonic() + limit
    while server.answered < n:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run never got going"
        time.sleep(0.05)


def _port_closed(url: str) -> bool:
    host, port = re.match(r"http://([\d.]+):(\d+)", url).groups()  # type: ignore[union-attr]
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex((host, int(port))) != 0


@pytest.mark.parametrize(
    "sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["SIGINT", "SIGTERM", "SIGKILL"]
)
def test_signal_mid_run_then_rerun_pays_only_for_calls_in_flight(sig, tmp_path, prefect_server):
    """SIGINT/SIGTERM: stop at once, keep every answer in flight, exit 130 with the count;
    SIGKILL: at most the calls in flight are paid twice. The rerun completes."""
    with running_fake_server(lambda body: "I do not know.", latency_s=0.3, rpm=1200) as server:
        cfg = _config(tmp_path / "c.yaml", [_model(server)])
        out = tmp_path / "run"
        # SIGTERM and SIGKILL: the command's own temporary Prefect server must go too
        api = prefect_server if sig == signal.SIGINT else None
        proc = _start(cfg, out, _env(tmp_path, api))
        _wait_answers(server, proc, 30)
        requests_at_signal = len(server.requests)
        os.killpg(proc.pid, sig)
        sent_at = time.monotonic()
        stdout, stderr = proc.communicate(timeout=60)
        took = time.monotonic() - sent_at
        requests_then = len(server.requests)
        time.sleep(0.5)
        assert len(server.requests) == requests_then  # nothing more after the process ended
        # threads queued in the limiter sent nothing after the signal (a request already
        # on its way when the signal landed may still arrive)
        assert requests_then - requests_at_signal <= 2
        if sig == signal.SIGKILL:
            assert proc.returncode == -signal.SIGKILL
        else:
            assert proc.returncode == 130, stderr[-2000:]
            assert took < 15  # liveness: Ctrl-C is not a two-minute wait
            last = stderr.strip().splitlines()[-1]
            assert re.search(r"interrupted: \d+ of 200 attempts done and stored", last), last
        if sig != signal.SIGINT:
            started = re.findall(r"Starting temporary server on (http://127\.0\.0\.1:\d+)", stdout + stderr)
            assert started
            # SIGKILL: the kernel sends the server SIGTERM when its parent dies (PDEATHSIG)
            deadline = time.monotonic() + 15
            while not _port_closed(started[-1]) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert _port_closed(started[-1])  # the temporary Prefect server is gone
        first_calls = len(server.requests)

        rerun = _run(cfg, out, _env(tmp_path, prefect_server))
        assert rerun.returncode == 0, rerun.stderr[-3000:]
        repeated = server.repeated_prompts()
        if sig == signal.SIGKILL:
            assert sum(n - 1 for n in repeated.values()) <= 16  # at most the calls in flight
        else:
            assert repeated == {}  # nothing answered twice
        assert server.answered == 200 + sum(n - 1 for n in repeated.values())
        assert len(server.requests) > first_calls
    attempts = pq.read_table(out / "attempts" / "attempts.parquet").to_pandas()
    assert len(attempts) == 200 and attempts.response.notna().all()


def test_missing_attempts_exit_3_and_a_401_model_is_named_while_another_completes(tmp_path, prefect_server):
    with running_fake_server(lambda body: "I do not know.", valid_keys={CANARY}) as server:
        models = [
            _model(server, name="good"),
            # another model id: entries with equal identities share answers by design
            _model(server, name="wrong-key", model="solver-b", api_key_env="HB_WRONG_KEY"),
        ]
        cfg = _config(tmp_path / "c.yaml", models, count=10, samples=2)
        env = _env(tmp_path, prefect_server) | {"HB_WRONG_KEY": "sk-wrong-NOT-SECRET"}
        proc = _run(cfg, tmp_path / "run", env)
        statuses = server.status_counts
    assert proc.returncode == 3, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "horizonbench: error: 20 of 40 attempts have no answer (wrong-key: 20 (auth 3, model_stopped 17))"
    )
    assert "model 'wrong-key' has no answers" in proc.stderr and "HTTP 401" in proc.stderr
    assert statuses.get(401) == 3 and statuses.get(200) == 20
    assert "Traceback" not in proc.stderr
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    models_counts = manifest["counts"]["attempts"]["models"]
    assert models_counts["good"]["answered"] == 20
    assert models_counts["wrong-key"]["failed_by_class"] == {"auth": 3, "model_stopped": 17}
    scores = pq.read_table(tmp_path / "run" / "scores" / "scores.parquet").to_pandas()
    assert (~scores[scores.model == "wrong-key"].answered).all() and len(scores) == 40
    report = (tmp_path / "run" / "report" / "index.html").read_text()
    assert "wrong-key: attempts without an answer" in report
    # a nightly deployment sees it too: the flow run ends Failed with the same line
    import asyncio

    from prefect.client.orchestration import get_client

    async def states() -> list[tuple[str, str]]:
        async with get_client() as client:
            runs = await client.read_flow_runs(limit=200)
            return [(r.state.type.value, r.state.message or "") for r in runs if r.state]

    assert any(
        kind == "FAILED" and message.startswith("20 of 40 attempts have no answer")
        for kind, message in asyncio.run(states())
    )


def test_canary_key_appears_in_no_file_log_or_prefect_record(tmp_path, prefect_server):
    import asyncio

    from prefect.client.orchestration import get_client

    # the server echoes credentials into its error bodies, like a careless proxy
    with running_fake_server(lambda body: "I do not know.", echo_auth_in_errors=True) as server:
        server.fail_next(3, status=500)
        cfg = _config(tmp_path / "c.yaml", [_model(server, backoff_base_s=0.01)], count=5, samples=1)
        proc = _run(cfg, tmp_path / "run", _env(tmp_path, prefect_server))
        assert any(CANARY in json.dumps(r.headers) for r in server.requests)  # it was really used
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert CANARY not in proc.stdout + proc.stderr
    for path in (tmp_path / "run").rglob("*"):
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), path

    async def records() -> str:
        async with get_client() as client:
            runs = await client.read_flow_runs(limit=200)
            logs = await client.read_logs(limit=200)
            return json.dumps(
                [r.model_dump(mode="json") for r in runs] + [lg.model_dump(mode="json") for lg in logs]
            )

    dump = asyncio.run(records())
    assert "proc" in dump  # the records are there...
    assert CANARY not in dump  # ...and the key is not


def test_dry_run_prints_calls_tokens_and_cost_and_calls_nothing(tmp_path, prefect_server):
    with running_fake_server(lambda body: "never") as server:
        model = _model(server, input_cost_per_mtok=2.0, output_cost_per_mtok=8.0)
        cfg = _config(tmp_path / "c.yaml", [model], count=6, samples=2)
        proc = _run(cfg, tmp_path / "run", _env(tmp_path, prefect_server), "--dry-run")
        assert server.requests == []
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = next(line for line in proc.stdout.splitlines() if line.startswith("compat"))
    fields = row.split()
    assert fields[1:4] == ["12", "0", "12"]  # attempts, stored, calls
    output_max = 12 * 8192
    assert fields[5] == f"{output_max:,}"
    input_tokens = int(fields[4].replace(",", ""))
    assert float(fields[6]) == pytest.approx((input_tokens * 2.0 + output_max * 8.0) / 1e6, abs=0.006)
    assert "dry run: 12 calls" in proc.stdout and "nothing was sent" in proc.stdout
    assert not (tmp_path / "run" / "attempts" / "attempts.parquet").exists()


def test_when_no_model_answers_the_run_names_them_and_exits_3_without_tracebacks(tmp_path, prefect_server):
    with running_fake_server(lambda body: "never", valid_keys={"sk-only-this-NOT-SECRET"}) as server:
        cfg = _config(tmp_path / "c.yaml", [_model(server)], count=3, samples=1)
        proc = _run(cfg, tmp_path / "run", _env(tmp_path, prefect_server))
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "ValidationFailed" not in proc.stderr
    # Prefect logs the failed task run with exc_info outside an except block
    assert "NoneType: None" not in proc.stderr, proc.stderr[-3000:]
    assert "model 'compat' has no answers" in proc.stderr and "HTTP 401" in proc.stderr
    assert (
        proc.stderr.strip().splitlines()[-1].startswith("horizonbench: error: 3 of 3 attempts have no answer")
    )
    assert (tmp_path / "run" / "manifest.json").exists()
    assert not (tmp_path / "run" / "report" / "index.html").exists()
