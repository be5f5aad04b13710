"""deployment/prefect.yaml end to end, with real parts on 127.0.0.1 (issue 11, deployments).

A ``prefect server start`` on a free port with a PREFECT_HOME of its own, the process work
pool, ``prefect deploy`` of the checked-in prefect.yaml (pointed at the small offline
config and a temporary out folder), the failure alert of ``deployment/notify.py`` aimed at
a webhook served by this test, and one process worker that runs two flow runs: the
nightly pipeline, which must complete and leave a manifest and a report, and one with a
missing config, which must fail and make the automation call the webhook. The two runs
are created together, so the deployment's concurrency limit of one must hold one back.

Every process started here (server, worker and the flow runs it spawned, CLI commands)
is stopped on every way out: each runs in a session of its own and is killed as a group.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import CONFIGS

pytestmark = pytest.mark.flow

REPO = Path(__file__).resolve().parents[1]
PREFECT_YAML = REPO / "deployment" / "prefect.yaml"
BIN = Path(sys.executable).parent
#: a server on a fresh database on a busy 2-core machine: 10-40 s; more is a failure
SERVER_START_TIMEOUT_S = 120.0
#: the two flow runs one after the other (the concurrency limit), from worker start: 40-80 s
#: on a busy 2-core machine
RUNS_TIMEOUT_S = 240.0
STOP_TIMEOUT_S = 10.0


def _free_port() -> int:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _stop_tree(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process's group and every descendant (the worker's flow runs may sit
    in sessions of their own), wait, then SIGKILL what is left; always reaped."""
    import psutil

    try:
        children = psutil.Process(process.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        children = []
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            pass
        for child in children:
            try:
                child.send_signal(sig)
            except psutil.NoSuchProcess:
                pass
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            continue
        _gone, alive = psutil.wait_procs(children, timeout=STOP_TIMEOUT_S if sig == signal.SIGTERM else 2)
        if not alive:
            return
        children = alive


@contextmanager
def _background(cmd: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A long-running command in a session of its own, its output in ``log``."""
    with open(log, "wb") as out:
        process = subprocess.Popen(
            cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            yield process
        finally:
            _stop_tree(process)


def _run(cmd: list[str], env: dict[str, str], timeout: float = 120.0) -> str:
    """A CLI command to completion (its whole group killed on a timeout); its output."""
    process = subprocess.Popen(
        cmd,
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        out, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop_tree(process)
        out, _ = process.communicate()
        raise AssertionError(f"{' '.join(cmd)} timed out after {timeout:.0f} s:\n{out.decode()}") from None
    finally:
        if process.poll() is None:
            _stop_tree(process)
    text = out.decode(errors="replace")
    assert process.returncode == 0, f"{' '.join(cmd)} exited {process.returncode}:\n{text}"
    return text


@dataclass
class Server:
    """A running ``prefect server start`` and the environment that talks to it."""

    api_url: str
    env: dict[str, str]
    home: Path
    log: Path


def _seed_home(home: Path) -> None:
    """Start the new database from the migrated empty template when there is one (the
    same one the CLI uses): a fresh database, without 116 migrations on the critical path."""
    from horizonbench.cli.prefect_server import template_path

    template = template_path()
    if template.exists():
        shutil.copyfile(template, home / "prefect.db")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``prefect server start`` on 127.0.0.1, a free port and a PREFECT_HOME of its own."""
    root = tmp_path_factory.mktemp("prefect-yaml")
    home = root / "prefect-home"
    home.mkdir()
    _seed_home(home)
    port = _free_port()
    api_url = f"http://127.0.0.1:{port}/api"
    env = {
        **os.environ,
        "PREFECT_HOME": str(home),
        "PREFECT_API_URL": api_url,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",
        "PREFECT_UI_ENABLED": "false",  # the test reads the API only
        "PREFECT_SERVER_LOGGING_LEVEL": "WARNING",
        # a run held back by the deployment's concurrency limit retries after 2 s, not 30
        "PREFECT_SERVER_DEPLOYMENTS_CONCURRENCY_SLOT_WAIT_SECONDS": "2",
        # the worker looks for runs every second (10 s by default)
        "PREFECT_WORKER_QUERY_SECONDS": "1",
        # `{{ $PWD }}` in prefect.yaml's pull step: what a shell in REPO would say
        "PWD": str(REPO),
    }
    log = root / "server.log"
    cmd = [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)]
    with _background(cmd, env, log) as process:
        started = time.monotonic()
        deadline = started + SERVER_START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                pytest.fail(f"prefect server start exited with {process.returncode}:\n{_tail(log)}")
            try:
                with urllib.request.urlopen(f"{api_url}/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(
                    f"prefect server start on port {port} was not healthy after "
                    f"{SERVER_START_TIMEOUT_S:.0f} s (a busy machine?):\n{_tail(log)}"
                )
            time.sleep(0.25)
        print(f"prefect server start: healthy after {time.monotonic() - started:.1f} s")
        yield Server(api_url=api_url, env=env, home=home, log=log)


@contextmanager
def _api(server: Server) -> Iterator[None]:
    """This process's Prefect client settings aimed at the test's server."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
        yield


@dataclass
class Webhook:
    """A local HTTP endpoint that records what the notification block posts."""

    url: str
    received: list[dict[str, Any]] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)


@pytest.fixture(scope="module")
def webhook() -> Iterator[Webhook]:
    """The stand-in for Slack: the server's automation posts here on a failed run."""
    hook = Webhook(url="")

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server API
            length = int(self.headers.get("Content-Length") or 0)
            hook.received.append(json.loads(self.rfile.read(length) or b"{}"))
            hook.arrived.set()
            self.send_response(200)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    hook.url = f"http://127.0.0.1:{httpd.server_address[1]}/alert"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield hook
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


@dataclass
class Nightly:
    """What the module's one deployment-and-runs scenario leaves to check."""

    deployment_id: Any
    automation_id: Any
    good: Any
    bad: Any
    out: Path
    worker_log: Path
    #: seconds each step took (deploy, alert, runs), for a failure message and -s
    phases: dict[str, float]


@pytest.fixture(scope="module")
def nightly(server: Server, webhook: Webhook, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nightly]:
    """Work pool, ``prefect deploy`` of deployment/prefect.yaml, the failure alert, two
    flow runs and one worker until both have ended."""
    from prefect.blocks.notifications import CustomWebhookNotificationBlock
    from prefect.client.orchestration import get_client
    from prefect.deployments import run_deployment

    from horizonbench.flows.deployment import configure_failure_notification

    root = tmp_path_factory.mktemp("nightly")
    out = root / "runs"
    phases: dict[str, float] = {}
    clock = time.monotonic()

    def lap(name: str) -> None:
        nonlocal clock
        now = time.monotonic()
        phases[name] = round(now - clock, 1)
        clock = now

    spec = yaml.safe_load(PREFECT_YAML.read_text(encoding="utf-8"))
    pool = spec["deployments"][0]["work_pool"]["name"]
    prefect = str(BIN / "prefect")
    _run([prefect, "--no-prompt", "work-pool", "create", pool, "--type", "process"], server.env)
    _run(
        [
            prefect,
            "--no-prompt",
            "deploy",
            "--prefect-file",
            str(PREFECT_YAML.relative_to(REPO)),
            "--name",
            "nightly",
            "--param",
            f"config={CONFIGS / 'small.yaml'}",
            "--param",
            f"out={out}/{{date}}",
        ],
        server.env,
    )
    lap("work pool and prefect deploy")
    with _api(server):
        CustomWebhookNotificationBlock(
            name="horizonbench test",
            url=webhook.url,
            json_data={"subject": "{{subject}}", "body": "{{body}}"},
        ).save("hb-test-alerts")
        automation_id = configure_failure_notification(
            "horizonbench/nightly", "custom-webhook/hb-test-alerts"
        )
        good = run_deployment("horizonbench/nightly", timeout=0)
        bad = run_deployment(
            "horizonbench/nightly",
            parameters={"config": str(root / "no-such-config.yaml")},
            timeout=0,
        )
        lap("alert and two runs created")
        worker_log = root / "worker.log"
        worker = [prefect, "worker", "start", "--pool", pool, "--name", "hb-test-worker"]
        with _background(worker, server.env, worker_log) as process:
            deadline = time.monotonic() + RUNS_TIMEOUT_S
            with get_client(sync_client=True) as client:
                while True:
                    runs = [client.read_flow_run(r.id) for r in (good, bad)]
                    if all(r.state is not None and r.state.is_final() for r in runs):
                        break
                    if process.poll() is not None:
                        pytest.fail(f"the worker exited with {process.returncode}:\n{_tail(worker_log)}")
                    if time.monotonic() > deadline:
                        states = [r.state.name if r.state else None for r in runs]
                        pytest.fail(
                            f"flow runs not finished after {RUNS_TIMEOUT_S:.0f} s ({states}; "
                            f"steps so far {phases}):\n{_tail(worker_log)}"
                        )
                    time.sleep(1)
        lap("worker ran both")
    print(f"deployment steps (s): {phases}")
    yield Nightly(runs[0].deployment_id, automation_id, runs[0], runs[1], out, worker_log, phases)


def test_the_nightly_run_completes_and_leaves_a_manifest_and_a_report(nightly: Nightly) -> None:
    assert nightly.good.state.is_completed(), (
        f"{nightly.good.state.name}: {nightly.good.state.message}\n{_tail(nightly.worker_log)}"
    )
    # {date} in out became the run's UTC date (beside it, a series may keep a `latest` pointer)
    run = nightly.out / time.strftime("%Y-%m-%d", time.gmtime(nightly.good.start_time.timestamp()))
    dated = [
        p.name for p in nightly.out.iterdir() if p.is_dir() and not p.is_symlink() and p.name[:1].isdigit()
    ]
    assert dated == [run.name], sorted(p.name for p in nightly.out.iterdir())
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["config"]["run"]["name"] == "small"
    assert (run / "report" / "index.html").stat().st_size > 0
    assert (nightly.out / "latest").resolve() == run.resolve()  # the series points at it


def test_the_workers_run_left_its_artifacts_and_tags_on_the_server(server: Server, nightly: Nightly) -> None:
    """What the UI shows of a run a worker completed, read back through the client."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    with _api(server), get_client(sync_client=True) as client:
        flow_run = client.read_flow_run(nightly.good.id)
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[nightly.good.id]))
        )
    assert {"run:small", "family:maze", "model:oracle"} <= set(flow_run.tags)
    assert flow_run.name.startswith("small-")
    keys = {a.key: a for a in artifacts}
    assert set(keys) == {
        "horizonbench-small-summary",
        "horizonbench-small-horizons",
        "horizonbench-small-report",
    }
    assert "| maze |" in keys["horizonbench-small-summary"].data
    assert "L0" in keys["horizonbench-small-horizons"].data


def test_the_deployment_has_the_yaml_schedule_time_zone_and_a_limit_of_one(
    server: Server, nightly: Nightly
) -> None:
    from prefect.client.orchestration import get_client

    wanted = yaml.safe_load(PREFECT_YAML.read_text(encoding="utf-8"))["deployments"][0]
    with _api(server), get_client(sync_client=True) as client:
        deployment = client.read_deployment(nightly.deployment_id)
        pool = client.read_work_pool(deployment.work_pool_name)
    assert deployment.name == "nightly"
    assert pool.type == "process"
    schedules = [(s.schedule.cron, s.schedule.timezone) for s in deployment.schedules]
    assert schedules == [(s["cron"], s["timezone"]) for s in wanted["schedules"]]
    assert schedules[0][1] != "UTC"  # the file names a zone of its own
    assert deployment.global_concurrency_limit is not None
    assert deployment.global_concurrency_limit.limit == 1
    assert deployment.concurrency_options is not None
    assert deployment.concurrency_options.collision_strategy == "ENQUEUE"
    # the pull step sets the working directory to where `prefect deploy` ran
    assert deployment.pull_steps == [
        {"prefect.deployments.steps.set_working_directory": {"directory": str(REPO)}}
    ]
    assert deployment.entrypoint == "horizonbench.flows.pipeline:pipeline"
    assert deployment.parameters["config"] == str(CONFIGS / "small.yaml")


def test_the_limit_of_one_held_one_run_back(server: Server, nightly: Nightly) -> None:
    """Both runs were due at once; one waited for the other's slot and they never overlapped."""
    from prefect.client.orchestration import get_client

    with _api(server), get_client(sync_client=True) as client:
        history = {
            r.id: [s.name for s in client.read_flow_run_states(r.id)] for r in (nightly.good, nightly.bad)
        }
    assert any("AwaitingConcurrencySlot" in names for names in history.values()), history
    first, second = sorted((nightly.good, nightly.bad), key=lambda r: r.start_time)
    assert first.end_time <= second.start_time, (first.end_time, second.start_time)


def test_a_failed_run_notifies_the_block_the_user_named(
    server: Server, webhook: Webhook, nightly: Nightly
) -> None:
    from prefect.client.orchestration import get_client

    assert nightly.bad.state.is_failed(), nightly.bad.state
    with _api(server), get_client(sync_client=True) as client:
        automation = client.read_automation(nightly.automation_id)
    assert automation is not None and automation.enabled
    assert automation.trigger.expect == {"prefect.flow-run.Failed", "prefect.flow-run.Crashed"}
    assert [a.type for a in automation.actions] == ["send-notification"]
    # the triggers and actions services run a few seconds behind the state change
    assert webhook.arrived.wait(60), f"no notification arrived:\n{_tail(server.log)}"
    assert len(webhook.received) == 1, webhook.received  # not for the completed run
    body = webhook.received[0]["body"]
    assert nightly.bad.name in body and "Failed" in body and "nightly" in body
