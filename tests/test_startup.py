"""The start-up and shut-down of a command (issue 10): what is imported when, the
temporary Prefect server stopped on every way out, the shared LocalCluster, the
database template of a new PREFECT_HOME, and the exit that skips the interpreter's
teardown. No test here checks a duration."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from horizonbench.cli import prefect_server as ps
from horizonbench.core import timings

PYTHON = sys.executable


def _run_py(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-c", code], capture_output=True, text=True, timeout=300, env=env or dict(os.environ)
    )


def test_the_pipeline_and_the_rebuild_commands_import_no_great_expectations() -> None:
    probe = """
import sys
from horizonbench.cli import main
from horizonbench.flows import pipeline, rebuild
from horizonbench.tasks.analyse import scores as analyse
from horizonbench.tasks.report import compare
from horizonbench.tasks.evaluate import attempts as evaluate
from horizonbench.tasks.report import page as report
from horizonbench.tasks.score import stage as score
from horizonbench.tasks.validate import stage as validate
print("great_expectations" in sys.modules, "prefect.server.api.server" in sys.modules)
"""
    out = _run_py(probe)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]


def test_the_cli_spawns_the_server_without_importing_prefects_server_code() -> None:
    """The client never imports prefect.server (2.7 s): the server is a subprocess."""
    probe = """
import sys
from horizonbench.cli.prefect_server import TemporaryServer
s = TemporaryServer(); s.port = 8123
cmd = s.command()
print(cmd[1:3] == ["-m", "uvicorn"], "prefect.server.api.server:create_app" in cmd, "prefect" in sys.modules)
"""
    out = _run_py(probe)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True", "False"]


def test_a_rebuild_command_in_a_fresh_process_imports_no_great_expectations(tmp_path) -> None:
    """``horizonbench report`` on a folder that is not a run fails its input check
    (exit 2) without having imported Great Expectations or started a server."""
    probe = f"""
import sys
from horizonbench.cli.main import main
code = main(["report", "--run", {str(tmp_path)!r}])
print(code, "great_expectations" in sys.modules)
"""
    out = _run_py(probe)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-2:] == ["2", "False"]


def test_the_collector_is_paused_for_the_imports_and_on_again_after() -> None:
    """``collector_paused_for_imports``: off inside the block; afterwards on again (even
    when the block raised) with what the imports made frozen; a collector that was off
    stays off."""
    probe = """
import gc
from horizonbench.cli.main import collector_paused_for_imports
out = [gc.isenabled()]
try:
    with collector_paused_for_imports():
        out.append(gc.isenabled())
        import pandas
        raise RuntimeError("a bad config")
except RuntimeError:
    pass
out += [gc.isenabled(), gc.get_freeze_count() > 10_000]
gc.disable()
with collector_paused_for_imports():
    pass
out.append(gc.isenabled())
print(*out)
"""
    out = _run_py(probe)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "False", "True", "True", "False"]


# --- the temporary server, with a stand-in that answers /api/health ------------------------


class FakeServer(ps.TemporaryServer):
    """A plain HTTP server whose folder has api/health: the same spawn, wait and stop."""

    root: Path

    def command(self) -> list[str]:
        return [
            PYTHON,
            "-m",
            "http.server",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--directory",
            str(self.root),
        ]


@pytest.fixture
def fake_server(tmp_path, monkeypatch):
    (tmp_path / "api").mkdir()
    (tmp_path / "api" / "health").write_text("ok")
    FakeServer.root = tmp_path
    made: list[FakeServer] = []

    def make() -> FakeServer:
        server = FakeServer()
        made.append(server)
        return server

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setattr(ps, "TemporaryServer", make)
    monkeypatch.setattr(ps, "_default_db", lambda: None)  # leave the test's Prefect home alone
    return made


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _gone(server: ps.TemporaryServer, pid: int) -> bool:
    assert server.process is None  # reaped
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return not _port_open(server.port or 0)
    return False


def test_the_server_is_stopped_after_a_normal_exit(fake_server) -> None:
    warmed = []
    with ps.prefect_api(warm_up=lambda: warmed.append(os.environ.get("PREFECT_API_URL"))) as url:
        (server,) = fake_server
        pid = server.process.pid
        assert url == server.api_url == os.environ["PREFECT_API_URL"]
        # the warm-up already saw the URL (Dask workers it starts inherit it)
        assert warmed == [url]
        assert _port_open(server.port)
        from prefect.settings import get_current_settings

        # no flow-run heartbeat against a server that ends with the command
        assert get_current_settings().flows.heartbeat_frequency is None
        assert get_current_settings().api.url == url
    assert "PREFECT_API_URL" not in os.environ
    assert _gone(server, pid)


@pytest.mark.parametrize("where", ["body", "warm_up"])
@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_the_server_is_stopped_when_the_body_or_the_warm_up_raises(fake_server, where, error) -> None:
    def boom() -> None:
        raise error("boom")

    with pytest.raises(error):
        with ps.prefect_api(warm_up=boom if where == "warm_up" else None):
            boom()
    (server,) = fake_server
    assert server.process is None
    assert "PREFECT_API_URL" not in os.environ


def test_the_server_is_stopped_when_the_wait_is_interrupted(fake_server, monkeypatch) -> None:
    """Ctrl-C while waiting for the server's health: the process is ended and reaped."""
    spawned = []

    def interrupted(self, timeout: float) -> None:
        spawned.append(self.process.pid)
        raise KeyboardInterrupt

    monkeypatch.setattr(FakeServer, "wait_ready", interrupted)
    with pytest.raises(KeyboardInterrupt):
        with ps.prefect_api():
            pass
    (server,) = fake_server
    assert _gone(server, spawned[0])


def test_a_server_that_dies_while_starting_is_an_error_and_is_reaped(fake_server, monkeypatch) -> None:
    monkeypatch.setattr(FakeServer, "command", lambda self: [PYTHON, "-c", "raise SystemExit(7)"])
    with pytest.raises(RuntimeError, match="exited with code 7"):
        with ps.prefect_api():
            pass
    (server,) = fake_server
    assert server.process is None


def test_a_server_that_ignores_sigterm_is_killed_after_the_bounded_wait(fake_server, monkeypatch) -> None:
    monkeypatch.setattr(ps, "STOP_TIMEOUT_S", 0.5)
    stubborn = (
        "import signal, sys, runpy; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "sys.argv = ['http.server', sys.argv[1], '--bind', '127.0.0.1', '--directory', sys.argv[2]]; "
        "runpy.run_module('http.server', run_name='__main__')"
    )
    monkeypatch.setattr(
        FakeServer, "command", lambda self: [PYTHON, "-c", stubborn, str(self.port), str(self.root)]
    )
    with ps.prefect_api():
        (server,) = fake_server
        pid = server.process.pid
    assert _gone(server, pid)


def test_with_an_api_url_nothing_is_started_and_the_warm_up_still_runs(monkeypatch) -> None:
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
    spawned = []
    monkeypatch.setattr(ps.TemporaryServer, "spawn", lambda self: spawned.append(self))
    warmed = []
    with ps.prefect_api(warm_up=lambda: warmed.append(1)) as url:
        assert url == "http://127.0.0.1:9/api"
    assert spawned == [] and warmed == [1]


def test_sequential_start_up_skips_the_warm_up(fake_server, monkeypatch) -> None:
    monkeypatch.setenv(ps.SEQUENTIAL_ENV, "1")
    warmed = []
    with ps.prefect_api(warm_up=lambda: warmed.append(1)):
        from prefect.settings import get_current_settings

        assert get_current_settings().flows.heartbeat_frequency is not None
    assert warmed == []


def test_timings_are_written_only_when_asked(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(timings.TIMINGS_ENV, raising=False)
    timings.mark("nothing")
    path = tmp_path / "t.jsonl"
    monkeypatch.setenv(timings.TIMINGS_ENV, str(path))
    timings.mark("one")
    timings.mark("two")
    events = [json.loads(line)["event"] for line in path.read_text().splitlines()]
    assert events == ["one", "two"]


# --- the database template of a new PREFECT_HOME ------------------------------------------

TEMPLATE_PROBE = """
import json, sqlite3, sys
from horizonbench.cli import prefect_server as ps
db = ps._default_db()
out = {"db": str(db) if db else None, "template": str(ps.template_path())}
if sys.argv[1] == "save" and db is not None:
    db.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(db) as con:
        con.execute("create table alembic_version (version_num text)")
        con.execute("insert into alembic_version values ('head')")
    ps._save_template(db)
if sys.argv[1] == "seed" and db is not None:
    out["seeded"] = ps._seed_database(db)
    with sqlite3.connect(db) as con:
        out["rows"] = con.execute("select version_num from alembic_version").fetchall()
print(json.dumps(out))
"""


def _template_probe(tmp_path: Path, home: Path, action: str, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(home), XDG_CACHE_HOME=str(tmp_path / "cache"), **extra)
    proc = subprocess.run(
        [PYTHON, "-c", TEMPLATE_PROBE, action], capture_output=True, text=True, timeout=300, env=env
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_new_prefect_home_starts_from_the_template_the_first_one_saved(tmp_path) -> None:
    first = _template_probe(tmp_path, tmp_path / "home-1", "save")
    assert first["db"] == str(tmp_path / "home-1" / "prefect.db")
    assert Path(first["template"]).exists()
    assert Path(first["template"]).parent == tmp_path / "cache" / "horizonbench"
    second = _template_probe(tmp_path, tmp_path / "home-2", "seed")
    assert second["seeded"] is True
    assert second["rows"] == [["head"]]
    # a home whose database exists is left alone; so is a database of the user's own
    assert _template_probe(tmp_path, tmp_path / "home-2", "none")["db"] is None
    custom = _template_probe(
        tmp_path,
        tmp_path / "home-3",
        "none",
        PREFECT_API_DATABASE_CONNECTION_URL=f"sqlite+aiosqlite:///{tmp_path / 'elsewhere.db'}",
    )
    assert custom["db"] is None
    # ... or in a profile of the new home
    home = tmp_path / "home-4"
    home.mkdir()
    url = f"sqlite+aiosqlite:///{tmp_path / 'profiled.db'}"
    (home / "profiles.toml").write_text(
        f'active = "default"\n[profiles.default]\nPREFECT_API_DATABASE_CONNECTION_URL = "{url}"\n'
    )
    assert _template_probe(tmp_path, home, "none")["db"] is None


def test_the_install_makes_the_template_once_and_leaves_the_users_home_alone(tmp_path) -> None:
    """``python -m horizonbench.cli.prefect_server template`` (``make install`` runs it):
    a real server migrates a database of its own and stops; the template holds the
    migrated schema and the block types, its mark names this environment, and a new
    home is seeded from it. The user's PREFECT_HOME, with a profile that would move
    the database, is not touched; a second call starts no server."""
    home = tmp_path / "user-home"
    home.mkdir()
    url = f"sqlite+aiosqlite:///{tmp_path / 'users-own.db'}"
    (home / "profiles.toml").write_text(
        f'active = "default"\n[profiles.default]\nPREFECT_API_DATABASE_CONNECTION_URL = "{url}"\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(home), XDG_CACHE_HOME=str(tmp_path / "cache"))
    env[timings.TIMINGS_ENV] = str(tmp_path / "t.jsonl")

    def install() -> list[str]:
        (tmp_path / "t.jsonl").unlink(missing_ok=True)
        proc = subprocess.run(
            [PYTHON, "-m", "horizonbench.cli.prefect_server", "template"],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "Traceback" not in proc.stderr
        marks = tmp_path / "t.jsonl"
        lines = marks.read_text().splitlines() if marks.exists() else []
        return [json.loads(line)["event"] for line in lines]

    events = install()
    assert "server spawned" in events and "template saved" in events
    template = tmp_path / "cache" / "horizonbench"
    (db,) = template.glob("prefect-*-empty.db")
    with sqlite3.connect(db) as con:
        assert con.execute("select version_num from alembic_version").fetchall()
        assert con.execute("select count(*) from block_type").fetchone()[0] > 0
    key = subprocess.run(
        [PYTHON, "-c", "from horizonbench.cli import prefect_server as ps; print(ps.environment_key())"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout.strip()
    assert db.with_suffix(".blocks").read_text() == key
    assert sorted(p.name for p in home.iterdir()) == ["profiles.toml"]
    assert not (tmp_path / "users-own.db").exists()
    assert install() == []  # made already: nothing started
    wrong = subprocess.run(
        [PYTHON, "-m", "horizonbench.cli.prefect_server", "templat"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert wrong.returncode == 2 and wrong.stderr.strip().count("\n") == 0 and "usage" in wrong.stderr
    seeded = _template_probe(tmp_path, tmp_path / "new-home", "seed")
    assert seeded["seeded"] is True and seeded["rows"]


# --- block types registered once per database and environment --------------------------------

BLOCKS_PROBE = """
import json, sqlite3
from pathlib import Path
import psutil
from horizonbench.cli import prefect_server as ps
with ps.prefect_api() as url:
    port = url.rsplit(":", 1)[1].split("/")[0]
    (server,) = [p for p in psutil.process_iter(["cmdline"])
                 if "create_app" in " ".join(p.info["cmdline"] or ()) and port in p.info["cmdline"]]
    env = server.environ()
db = ps._prefect_home() / "prefect.db"
with sqlite3.connect(db) as con:
    types = con.execute("select count(*) from block_type").fetchone()[0]
print(json.dumps({"skip": {k: env.get(k) for k in ps._BLOCK_SETTINGS}, "types": types}))
"""


def _blocks_probe(tmp_path: Path, home: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        PREFECT_HOME=str(home),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        DO_NOT_TRACK="1",
        # as the CLI sets it: a first start migrates the database, slow on a loaded machine
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="120",
        **extra,
    )
    proc = subprocess.run([PYTHON, "-c", BLOCKS_PROBE], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_block_types_are_registered_once_per_database_and_environment(tmp_path) -> None:
    """The first server on a database registers Prefect's block types; the next one is
    told to skip that (about 1 s of its start), and the types are still there. A home
    seeded from the template skips too; a new database file, or a user's own setting,
    brings Prefect's behaviour back."""
    registered = {k: None for k in ps._BLOCK_SETTINGS}
    skipped = dict.fromkeys(ps._BLOCK_SETTINGS, "false")
    home = tmp_path / "home"
    first = _blocks_probe(tmp_path, home)
    assert first["skip"] == registered and first["types"] > 0
    assert (home / ps.BLOCKS_MARK).exists()
    second = _blocks_probe(tmp_path, home)
    assert second == {"skip": skipped, "types": first["types"]}
    # a new home copies the template, which the first server's registered types came with
    seeded = _blocks_probe(tmp_path, tmp_path / "home-2")
    assert seeded == {"skip": skipped, "types": first["types"]}
    # the database replaced by another file: registered again
    db = home / "prefect.db"
    copy = home / "copy.db"
    copy.write_bytes(db.read_bytes())
    for extra in home.glob("prefect.db-*"):
        extra.unlink()
    os.replace(copy, db)
    assert _blocks_probe(tmp_path, home)["skip"] == registered
    # the user's own setting wins
    own = _blocks_probe(tmp_path, home, PREFECT_API_BLOCKS_REGISTER_ON_START="true")
    assert own["skip"] == {
        "PREFECT_API_BLOCKS_REGISTER_ON_START": "true",
        "PREFECT_MEMOIZE_BLOCK_AUTO_REGISTRATION": None,
    }


def test_the_block_mark_names_the_environment(tmp_path, monkeypatch) -> None:
    """A mark from another environment (a package installed, upgraded or removed since)
    or an unreadable one does not skip the registration."""
    db = tmp_path / "prefect.db"
    db.write_bytes(b"")
    ps._note_blocks_registered(db)
    assert ps._blocks_registered(db, seeded=False)
    monkeypatch.setattr(ps, "environment_key", lambda: "another environment")
    assert not ps._blocks_registered(db, seeded=False)
    (tmp_path / ps.BLOCKS_MARK).write_text("not json")
    assert not ps._blocks_registered(db, seeded=False)


# --- the shared LocalCluster ----------------------------------------------------------------


def test_dask_client_uses_the_shared_cluster_and_the_block_closes_it() -> None:
    from horizonbench.schemas.config import DaskSpec
    from horizonbench.tasks.cluster.client import _SHARED, dask_client, shared_cluster

    spec = DaskSpec(n_workers=1, processes=False)
    with shared_cluster(spec, ("maze",)) as cluster:
        address = cluster.scheduler_address
        for _ in range(2):  # two stages, one cluster
            with dask_client(spec) as client:
                assert client.scheduler.address == address
                assert client.submit(sum, [1, 2]).result() == 3
        assert cluster.status.name == "running"
        with shared_cluster(spec) as again:  # nested: the same cluster, not a second one
            assert again is cluster
    assert _SHARED == {}
    assert cluster.status.name == "closed"
    with dask_client(spec) as client:  # outside the block: a cluster of its own
        assert client.scheduler.address != address


def _config(**changes: object) -> object:
    from horizonbench.schemas.config import parse_config

    raw: dict[str, object] = {
        "run": {"name": "small", "seed": 1},
        "families": {"maze": {"params": {"grid_rows": 5, "grid_cols": 5}, "sampling": {"count": 10}}},
        "evaluation": {"models": [{"name": "oracle", "provider": "offline", "kind": "oracle"}]},
        "dask": {"n_workers": 2},
    }
    raw.update(changes)
    return parse_config(raw, source="test")


SMALL_CONFIG = """\
run: {name: small, seed: 3}
families:
  maze:
    params: {grid_rows: 5, grid_cols: 5, num_keys: 1}
    sampling: {count: 6}
"""


def test_a_small_run_generates_in_process_and_a_larger_one_on_worker_processes() -> None:
    from horizonbench.tasks.cluster.client import SMALL_RUN_MAX, small_run

    maze = {"params": {"grid_rows": 5, "grid_cols": 5}}
    assert small_run(_config())
    assert not small_run(_config(families={"maze": {**maze, "sampling": {"count": SMALL_RUN_MAX + 1}}}))
    bins = {"min": 2, "max": 12, "width": 1, "per_bin": 10}  # 10 bins of 10: at the limit
    assert small_run(_config(families={"maze": {**maze, "sampling": {"bins": bins}}}))
    # sweep settings are instance tables of their own: three settings of 40
    swept = {**maze, "sampling": {"count": 40}, "sweep": [{"name": "a"}, {"name": "b"}]}
    assert not small_run(_config(families={"maze": swept}))
    assert not small_run(_config(families={"hanoi": {"params": {"ns": [1, 2]}, "sampling": {"all": True}}}))
    assert not small_run(_config(dask={"address": "tcp://127.0.0.1:8786"}))


def test_a_small_run_has_no_cluster_its_shards_run_on_the_calling_thread(tmp_path) -> None:
    """In a small run's block every client is the inline one: no distributed import, a
    shard runs on the submitting thread and its error is raised by ``result()``; the
    score stage scores in this process. Outside the block a real cluster is made."""
    import threading

    from horizonbench.schemas.config import DaskSpec
    from horizonbench.tasks.cluster.client import InlineClient, dask_client, is_inline, shared_cluster

    spec = DaskSpec(n_workers=2)
    with shared_cluster(spec, ("maze",), in_process=True) as shared:
        assert isinstance(shared, InlineClient)
        with dask_client(spec) as client:
            assert is_inline(client) and client is shared
            assert client.submit(threading.get_ident, pure=False).result() == threading.get_ident()
            failed = client.submit(int, "not a number")
            with pytest.raises(ValueError):
                failed.result()
            assert len(client.scheduler_info()["workers"]) == 1
    with dask_client(DaskSpec(n_workers=1, processes=False)) as client:
        assert not is_inline(client)


def test_a_small_run_imports_no_distributed(tmp_path) -> None:
    """The installed command's small run never imports distributed (0.3 s of imports
    and an event loop on the command's core for the whole run)."""
    probe = f"""
import sys
from pathlib import Path
from horizonbench.cli.main import main
Path({str(tmp_path / "c.yaml")!r}).write_text({SMALL_CONFIG!r})
cfg, out = {str(tmp_path / "c.yaml")!r}, {str(tmp_path / "run")!r}
code = main(["generate", "--config", cfg, "--out", out, "--no-progress"])
print(code, "distributed" in sys.modules)
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(tmp_path / "home"), XDG_CACHE_HOME=str(tmp_path / "cache"))
    out = _run_py(probe, env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-2:] == ["0", "False"]


def test_a_bad_config_stops_the_server_started_before_it_was_read(tmp_path) -> None:
    """The server is spawned before the config is read; a config error (exit 2) stops it."""
    (tmp_path / "bad.yaml").write_text("run: {name: x, seed: 1}\nfamilies: {}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        PREFECT_HOME=str(tmp_path / "home"),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        HORIZONBENCH_TIMINGS=str(tmp_path / "t.jsonl"),
    )
    exe = Path(sys.executable).with_name("horizonbench")
    cmd = [str(exe), "run", "--config", str(tmp_path / "bad.yaml"), "--out", str(tmp_path / "run")]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    events = [json.loads(line)["event"] for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert events == ["cli start", "server spawned", "server stopped"]
    assert not (tmp_path / "run").exists()


# --- the exit ------------------------------------------------------------------------------


def test_the_installed_commands_exit_keeps_its_code_output_and_atexit_handlers() -> None:
    probe = """
import atexit, sys
atexit.register(lambda: print("atexit ran"))
from horizonbench.cli.main import _exit_now
print("report: x")
sys.stderr.write("last line")
_exit_now(3)
print("not reached")
"""
    out = _run_py(probe)
    assert out.returncode == 3
    assert out.stdout.split("\n")[:2] == ["report: x", "atexit ran"]
    assert out.stderr.endswith("last line")


def test_the_cli_waits_for_the_whole_exit_when_called_in_process(monkeypatch) -> None:
    """main([...]) (tests, callers) returns its code; only the installed command exits."""
    from horizonbench.cli import main as cli

    called = []
    monkeypatch.setattr(cli, "_exit_now", lambda code: called.append(code))
    assert cli.main(["families"]) == 0
    assert called == []


def test_a_real_run_leaves_no_server_behind(tmp_path) -> None:
    """The installed command with its own temporary Prefect server: exit 0, the report,
    the server's port closed, and the start-up steps in their order."""
    import yaml

    cfg = {
        "run": {"name": "startup", "seed": 5},
        "families": {
            "maze": {
                "params": {"grid_rows": 5, "grid_cols": 5, "num_keys": 1},
                "sampling": {"count": 10, "shard_size": 10},
                "prompt": {"shots": 0},
            }
        },
        "evaluation": {"samples": 1, "models": [{"name": "oracle", "provider": "offline", "kind": "oracle"}]},
        "dask": {"n_workers": 1},
        "analysis": {"bootstrap": 0},
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        PREFECT_HOME=str(tmp_path / "home"),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        HORIZONBENCH_TIMINGS=str(tmp_path / "t.jsonl"),
    )
    exe = Path(sys.executable).with_name("horizonbench")
    proc = subprocess.run(
        [
            str(exe),
            "run",
            "--config",
            str(tmp_path / "c.yaml"),
            "--out",
            str(tmp_path / "run"),
            "--no-progress",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "run" / "report" / "index.html").exists()
    events = [json.loads(line)["event"] for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    order = [
        "server spawned",
        "imports done",
        "cluster ready",
        "gx imported",
        "server ready",
        "flow start",
    ]
    assert [e for e in events if e in order] == order
    assert "side process forked" not in events  # Great Expectations and the figures run here
    assert events[-4:] == ["drained", "server stopped", "cli done", "exit"]
    # the first new home's database became the template
    assert "template saved" in events
    logs = proc.stdout + proc.stderr
    port = int(logs.split("Starting temporary server on http://127.0.0.1:")[-1].split()[0])
    deadline = time.monotonic() + 10
    while _port_open(port) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _port_open(port)


def test_a_cluster_closes_with_its_workers_heartbeats_stopped_first() -> None:
    """``_stop_heartbeat`` (run on every worker before any close, after Ctrl-C too)
    stops the heartbeat whose race with the closing scheduler logged a traceback."""
    from horizonbench.schemas.config import DaskSpec
    from horizonbench.tasks.cluster.client import _stop_heartbeat, dask_client

    def running(dask_worker) -> bool:
        return dask_worker.periodic_callbacks["heartbeat"].is_running()

    with dask_client(DaskSpec(n_workers=1, processes=False)) as client:
        assert all(client.run(running).values())
        client.run(_stop_heartbeat)
        assert not any(client.run(running).values())


def test_closing_waits_a_bounded_time_for_workers_that_do_not_answer() -> None:
    """A worker that is gone or stuck does not hold the command up on its way out: the
    heartbeats are asked to stop for at most ``STOP_HEARTBEATS_TIMEOUT_S``, then the
    cluster closes regardless (a client whose ``run`` never returns, standing in for
    such a worker)."""
    import threading

    from horizonbench.tasks.cluster import client as cl

    closed: list[str] = []
    never = threading.Event()

    class Stuck:
        def run(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            never.wait(60)

        def close(self) -> None:
            closed.append("client")

    class Cluster:
        def close(self) -> None:
            closed.append("cluster")

    t0 = time.monotonic()
    cl._close(Stuck(), Cluster())
    took = time.monotonic() - t0
    never.set()
    assert closed == ["client", "cluster"]
    assert cl.STOP_HEARTBEATS_TIMEOUT_S <= took < cl.STOP_HEARTBEATS_TIMEOUT_S + 5  # liveness
