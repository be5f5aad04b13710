"""The temporary Prefect server a command starts when no PREFECT_API_URL is set.

Prefect would start one itself, but as a child in our process group: Ctrl-C in a
terminal reaches it first, the server dies while the flow still reports its state, and
the client retries for minutes. Started here in a session of its own, it outlives the
signal, the flow records what happened, and this module stops it on the way out (on
SIGTERM too, which the CLI turns into an interrupt; on SIGKILL the kernel sends it
SIGTERM, see ``_die_with_parent``). Dask workers inherit the URL from the environment,
so they never start servers of their own.

The server is Prefect's own app under uvicorn, launched with the command Prefect's
``SubprocessASGIServer`` uses, but without importing ``prefect.server`` here (2.7 s of
imports the client never needs) and without waiting for it: the command spawns it
first and does its own start-up work (imports, the Dask cluster, Great Expectations)
on the other core while the server imports and migrates its database, then waits for
``/api/health``. ``HORIZONBENCH_SEQUENTIAL_STARTUP=1`` turns that off (no warm-up, the
flow-run heartbeat kept): the baseline ``benchmarks/overhead.py`` compares against.

A new PREFECT_HOME's database is copied from a template (``template_path``: the first
database this Prefect version migrated here, saved before any run was written to it):
the 116 migrations of a fresh SQLite database take 5-10 s of the server's start.

The server's start also registers Prefect's block types in its database, unless a hash
of every block class it can load says nothing changed since the last time: computing
that hash imports every installed Prefect collection (prefect-dask, and with it
distributed) and hashes the block registry, about 1 s of the server's CPU on every
start. The database does not change between our runs, so after a server has started
on it we note, beside it, the database file and the Python environment it was started
in (``BLOCKS_MARK``); while both are unchanged the next server is told to skip the
registration. Any install, upgrade or removal of a package changes the modification
time of its site-packages folder, and a new database file a new inode, so either one
brings the registration back.

What the template and the mark buy (issue 24), side by side on the loaded machine
(2026-12-03; other processes kept 1.2-1.7 of the 2 cores busy). A 10-instance run on a
new PREFECT_HOME used 24.5 s of CPU (the process tree) seeded from the template and
35.4 s migrating its database (1.44x), and 558 MiB of PSS against 605 MiB (medians of
5 interleaved rounds, ``benchmarks/tricks.py --only startup --repeat 5`` at dc065bc;
its wall times, 73 s and 84 s, were within the noise); on the idle machine an hour
later (the same command at 7e39670) 10.9 s of wall time and 16.4 s of CPU against
17.9 s and 26.1 s (per-round ratios 1.60 and 1.58). The server alone on a warm
home, told to skip the block-type check or not: 4.86 s of its CPU against 5.18 s
(1.06x) and 8.5 s against 9.0 s to ``/api/health`` (medians of 5 interleaved rounds,
``benchmarks/tricks.py --only server --repeat 5``). What guards them:
``tests/test_startup.py`` (a new home starts from the template the first one saved,
``make install`` makes it once and leaves the user's home alone, the registration runs
once per database and environment, the mark names the environment).

``HORIZONBENCH_TIMINGS=FILE`` appends one JSON line per start-up/shut-down step
(``{"event": ..., "t": unix time}``) to FILE, for ``benchmarks/overhead.py``.
"""

from __future__ import annotations

import ctypes
import hashlib
import http.client
import importlib.util
import json
import logging
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from horizonbench.core.timings import TIMINGS_ENV, mark

SEQUENTIAL_ENV = "HORIZONBENCH_SEQUENTIAL_STARTUP"
#: how long a stopping server may take to exit after SIGTERM before it is killed
STOP_TIMEOUT_S = 5.0
#: how long the queued logs and events may take to reach the server on the way out
DRAIN_TIMEOUT_S = 5.0
#: beside the default database: which database file and environment had their block
#: types registered by a server of ours (see the module's docstring)
BLOCKS_MARK = "horizonbench-blocks.json"
#: Prefect's own switches of the registration: a user's setting of either is kept
_BLOCK_SETTINGS = ("PREFECT_API_BLOCKS_REGISTER_ON_START", "PREFECT_MEMOIZE_BLOCK_AUTO_REGISTRATION")


def sequential() -> bool:
    return os.environ.get(SEQUENTIAL_ENV, "").strip() not in ("", "0", "false", "no")


def _die_with_parent() -> None:
    """On Linux, SIGTERM the server when the CLI process dies, even by SIGKILL (its own
    session shields it from the terminal's signals, so nothing else would stop it)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except OSError:
            pass


def _logger() -> logging.Logger:
    return logging.getLogger("prefect")  # the logger Prefect's own server messages use


class TemporaryServer:
    """Prefect's API server in a subprocess of its own session, on a free local port."""

    port_range = range(8000, 9000)

    def __init__(self) -> None:
        self.port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.ready = False
        #: the new PREFECT_HOME's database (None: it existed), and whether it was seeded
        #: from the template; set by ``prepare``
        self.new_db: Path | None = None
        self.seeded = False
        #: the default database, when no setting may move it (None: another database)
        self.home_db: Path | None = None
        #: whether the server may skip registering block types (``BLOCKS_MARK``)
        self.blocks_registered = False

    def prepare(self) -> None:
        """Seed a new PREFECT_HOME's database from the template, and find out whether
        its block types are registered already (before ``spawn``)."""
        if sequential():
            return
        self.new_db = _default_db()
        self.seeded = self.new_db is not None and _seed_database(self.new_db)
        self.home_db = _home_db()
        if self.home_db is not None and not any(k in os.environ for k in _BLOCK_SETTINGS):
            self.blocks_registered = _blocks_registered(self.home_db, self.seeded)

    @property
    def address(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_url(self) -> str:
        return f"{self.address}/api"

    @staticmethod
    def _port_free(port: int) -> bool:
        with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                return False
            return True

    def _free_port(self) -> int:
        for _ in range(20):
            port = random.choice(self.port_range)
            if self._port_free(port):
                return port
        raise RuntimeError("no free port for the temporary Prefect server")

    def command(self) -> list[str]:
        """The command Prefect's ``SubprocessASGIServer`` runs (uvicorn, Prefect's app)."""
        spec = importlib.util.find_spec("prefect")
        assert spec is not None and spec.origin is not None, "prefect is not installed"
        return [
            sys.executable,
            "-m",
            "uvicorn",
            "--app-dir",
            str(Path(spec.origin).parent.parent),
            "--factory",
            "prefect.server.api.server:create_app",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--log-level",
            "error",
            "--lifespan",
            "on",
        ]

    def spawn(self) -> None:
        """Launch the server (returns at once; ``wait_ready`` waits for it)."""
        self.port = self._free_port()
        env = {
            **os.environ,
            "PREFECT_UI_ENABLED": "0",
            "PREFECT__SERVER_EPHEMERAL": "1",
            "PREFECT__SERVER_FINAL": "1",
        }
        env.pop("PREFECT_API_URL", None)
        if self.blocks_registered:
            env.update(dict.fromkeys(_BLOCK_SETTINGS, "false"))
        self.process = subprocess.Popen(
            self.command(),
            env=env,
            start_new_session=True,  # no terminal signals
            preexec_fn=_die_with_parent,
        )
        mark("server spawned")
        if os.environ.get(TIMINGS_ENV):
            # when the server itself became healthy (wait_ready only looks after the
            # warm-up): for benchmarks/overhead.py, a request every 50 ms meanwhile
            import threading

            threading.Thread(
                target=self._watch, args=(self.process,), name="horizonbench-server-watch", daemon=True
            ).start()

    def _watch(self, process: subprocess.Popen[bytes]) -> None:
        while self.process is process and process.poll() is None:
            if self._healthy():
                mark("server healthy")
                return
            time.sleep(0.05)

    def _healthy(self) -> bool:
        with closing(http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)) as conn:
            try:
                conn.request("GET", "/api/health")
                return conn.getresponse().status == 200
            except OSError:
                return False

    def wait_ready(self, timeout: float) -> None:
        """Wait for ``/api/health``; respawn on another port if this one was taken."""
        assert self.process is not None
        import prefect  # noqa: F401 - sets up Prefect's logging (already imported by a warm-up)

        _logger().info(
            "Starting temporary server on %s\nSee https://www.prefect.io/docs/v3/concepts/server"
            "#how-to-guides for more information on running a dedicated Prefect server.",
            self.address,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code == 3:  # uvicorn: the address is in use (another process took the port)
                self.spawn()
                os.environ["PREFECT_API_URL"] = self.api_url
                continue
            if code is not None:
                raise RuntimeError(f"the temporary Prefect server exited with code {code} while starting")
            if self._healthy():
                self.ready = True
                mark("server ready")
                if self.home_db is not None and (self.seeded or not self.blocks_registered):
                    _note_blocks_registered(self.home_db)
                return
            time.sleep(0.05)
        raise RuntimeError(
            f"timed out after {timeout:.0f} s waiting for the temporary Prefect server on {self.address} "
            "(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS)"
        )

    def stop(self) -> None:
        """SIGTERM, a bounded wait, then SIGKILL; the process is always reaped."""
        if self.process is None:
            return
        if self.ready:
            _logger().info("Stopping temporary server on %s", self.address)
        try:
            self.process.terminate()
            try:
                self.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        finally:
            self.process = None
            self.ready = False
            mark("server stopped")


def _default_db() -> Path | None:
    """The server's SQLite file when it is Prefect's default one (in PREFECT_HOME) and
    does not exist yet, else None. Cheap when the file exists (no Prefect import)."""
    home = _prefect_home()
    if (home / "prefect.db").exists():
        return None
    if not _settings_elsewhere(home):
        return home / "prefect.db"  # Prefect's default, without importing Prefect (1 s)
    from prefect.settings import get_current_settings

    settings = get_current_settings()
    url = settings.server.database.connection_url
    text = url.get_secret_value() if hasattr(url, "get_secret_value") else url
    db = Path(settings.home).expanduser() / "prefect.db"
    if text != f"sqlite+aiosqlite:///{db}" or db.exists():
        return None
    return db


def _prefect_home() -> Path:
    return Path(os.environ.get("PREFECT_HOME") or Path.home() / ".prefect").expanduser()


#: what ``serve`` says at once when no lasting server is configured
API_URL_REQUIRED = (
    "PREFECT_API_URL is not set: start a server (prefect server start) and "
    "export PREFECT_API_URL=http://127.0.0.1:4200/api, so the schedule and its runs "
    "outlive this process"
)


def api_url_configured() -> bool:
    """Whether Prefect would talk to a configured API rather than a temporary server.

    ``serve`` asks this before it imports anything else, so a user who forgot the URL
    hears it in a second, not after the pipeline's imports and the config's checks
    (57 s on a busy machine). Without the variable, Prefect is imported (3 s) only when
    a profile or a settings file may set the URL (``_settings_elsewhere``)."""
    if os.environ.get("PREFECT_API_URL"):
        return True
    if not _settings_elsewhere(_prefect_home()):
        return False
    from prefect.settings import PREFECT_API_URL

    return bool(PREFECT_API_URL.value())


def _home_db() -> Path | None:
    """The default database (``prefect.db`` in PREFECT_HOME) when nothing may set
    another one, else None (without importing Prefect)."""
    home = _prefect_home()
    return None if _settings_elsewhere(home) else home / "prefect.db"


def environment_key() -> str:
    """A hash of the Python environment the server's block types come from: the
    interpreter, and the modification time of every package folder on ``sys.path``
    (an install, upgrade or removal adds or removes a ``*.dist-info`` entry there)."""
    parts = [sys.executable]
    for entry in sys.path:
        if entry.rstrip("/").endswith(("site-packages", "dist-packages")):
            try:
                parts.append(f"{entry}:{os.stat(entry).st_mtime_ns}")
            except OSError:
                continue
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except OSError:
        return None


def _blocks_registered(db: Path, seeded: bool) -> bool:
    """Whether a server of ours registered the block types of this environment in
    this database file: the mark beside it names both, or the database was just copied
    from a template whose mark names this environment."""
    key = environment_key()
    if seeded:
        try:
            return _template_mark().read_text(encoding="utf-8") == key
        except OSError:
            return False
    inode = _inode(db)
    if inode is None:
        return False
    try:
        noted = json.loads((db.parent / BLOCKS_MARK).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(noted, dict) and noted.get("environment") == key and noted.get("inode") == inode


def _note_blocks_registered(db: Path) -> None:
    """Record that a server started on ``db`` in this environment (its block types are
    registered, or were found current by Prefect's own check); best effort, atomic."""
    inode = _inode(db)
    if inode is None:
        return
    target = db.parent / BLOCKS_MARK
    partial = target.with_name(f".{target.name}.{os.getpid()}")
    try:
        partial.write_text(json.dumps({"environment": environment_key(), "inode": inode}), encoding="utf-8")
        os.replace(partial, target)
    except OSError:
        partial.unlink(missing_ok=True)


def _settings_elsewhere(home: Path) -> bool:
    """Whether any source but the defaults may set Prefect's database: a setting in the
    environment, a profile, or a settings file of the working folder."""
    if any(
        k.startswith(("PREFECT_SERVER_DATABASE", "PREFECT_API_DATABASE", "PREFECT_PROFILE"))
        for k in os.environ
    ):
        return True
    if (home / "profiles.toml").exists() or Path("prefect.toml").exists() or Path(".env").exists():
        return True
    try:
        return "tool.prefect" in Path("pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return False


def template_path() -> Path:
    """Where a migrated, empty Prefect database is kept for this Prefect version."""
    from importlib.metadata import version

    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser()
    return cache / "horizonbench" / f"prefect-{version('prefect')}-empty.db"


def _template_mark() -> Path:
    """Beside the template: the environment whose block types it holds."""
    return template_path().with_suffix(".blocks")


def _seed_database(db: Path) -> bool:
    """Start a new PREFECT_HOME's database from the template, if there is one: the
    server then finds it migrated (a fresh database runs 116 migrations, 5-10 s)."""
    template = template_path()
    if not template.exists():
        return False
    try:
        db.parent.mkdir(parents=True, exist_ok=True)
        partial = db.with_name(f".{db.name}.{os.getpid()}")
        import shutil

        shutil.copyfile(template, partial)
        os.replace(partial, db)
    except OSError:
        return False
    mark("database seeded")
    return True


def _save_template(db: Path) -> None:
    """Keep the database the server just migrated (no run in it yet) as the template
    for the next new PREFECT_HOME; best effort, atomic."""
    import sqlite3

    template = template_path()
    try:
        template.parent.mkdir(parents=True, exist_ok=True)
        partial = template.with_name(f".{template.name}.{os.getpid()}")
        with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as src:
            with closing(sqlite3.connect(partial)) as dst:
                src.backup(dst)
        os.replace(partial, template)
        # the server that migrated it registered the block types of this environment
        mark_partial = _template_mark().with_name(f".{_template_mark().name}.{os.getpid()}")
        mark_partial.write_text(environment_key(), encoding="utf-8")
        os.replace(mark_partial, _template_mark())
    except (OSError, sqlite3.Error):
        return
    mark("template saved")


def ensure_template(timeout: float = 120.0) -> bool:
    """Migrate an empty database for this Prefect version once, if none is kept yet,
    and keep it as the template (``make install`` runs this): otherwise the first
    command on a machine waits for the migrations (measured: 9.8 s for a 10-instance
    run, against 5.6 s for every run after it). A server of its own starts on a
    temporary PREFECT_HOME whose database the environment names (no profile or
    settings file can move it), and stops; the user's PREFECT_HOME is not touched.
    Returns whether a template is there now."""
    if template_path().exists():
        return True
    import tempfile

    keep = {k: v for k, v in os.environ.items() if k.startswith("PREFECT_")}
    with tempfile.TemporaryDirectory(prefix="horizonbench-template-") as home:
        db = Path(home) / "prefect.db"
        for key in keep:
            del os.environ[key]
        os.environ["PREFECT_HOME"] = home
        os.environ["PREFECT_SERVER_DATABASE_CONNECTION_URL"] = f"sqlite+aiosqlite:///{db}"
        os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"  # no network here
        server = TemporaryServer()
        try:
            server.spawn()
            server.wait_ready(timeout)
            _save_template(db)
        except (OSError, RuntimeError) as err:
            print(f"horizonbench: no Prefect database template made ({err})", file=sys.stderr)
        finally:
            server.stop()
            for key in [k for k in os.environ if k.startswith("PREFECT_")]:
                del os.environ[key]
            os.environ.update(keep)
    return template_path().exists()


def _startup_timeout() -> float:
    from prefect.settings import PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS

    return float(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value())


#: the server ``spawn_early`` started, until ``prefect_api`` takes it over
_EARLY: dict[str, TemporaryServer] = {}


def spawn_early() -> None:
    """Spawn the temporary server now, before the command reads its config (about
    0.5 s of imports and checks the server need not wait for: its own start is the
    longest step before the flow). ``prefect_api`` adopts it; a command that ends
    before that (a bad config, a taken --out) stops it with ``stop_early``. Nothing
    happens with PREFECT_API_URL set or HORIZONBENCH_SEQUENTIAL_STARTUP=1."""
    if os.environ.get("PREFECT_API_URL") or sequential() or _EARLY:
        return
    server = TemporaryServer()
    server.prepare()
    server.spawn()
    _EARLY["server"] = server


def stop_early() -> None:
    """Stop the server ``spawn_early`` started if no ``prefect_api`` took it over."""
    server = _EARLY.pop("server", None)
    if server is not None:
        server.stop()


@contextmanager
def prefect_api(warm_up: Callable[[], Any] | None = None) -> Iterator[str | None]:
    """Yield the API URL in use; start (and finally stop) a detached server if none is set.

    ``warm_up`` runs while the server starts (not at all with
    HORIZONBENCH_SEQUENTIAL_STARTUP=1: each stage then imports and starts what it needs
    when it runs); the server is stopped whatever it raises.
    """
    if os.environ.get("PREFECT_API_URL"):
        stop_early()  # (none: spawn_early saw the same variable)
        if warm_up is not None and not sequential():
            warm_up()
        yield os.environ["PREFECT_API_URL"]
        return
    server = _EARLY.pop("server", None)
    try:
        if server is None:
            server = TemporaryServer()
            server.prepare()
            server.spawn()
        # in the environment at once: Dask workers spawned by the warm-up inherit it
        os.environ["PREFECT_API_URL"] = server.api_url
        if warm_up is not None and not sequential():
            warm_up()
        server.wait_ready(_startup_timeout())
        if server.new_db is not None and not server.seeded:
            _save_template(server.new_db)
        import prefect.settings as ps

        updates: dict[Any, Any] = {ps.PREFECT_API_URL: server.api_url}
        if not sequential():
            # flow-run heartbeats tell a lasting server that a run crashed; this server
            # ends with the command, and stopping the heartbeat thread costs up to 1 s
            updates[ps.PREFECT_FLOWS_HEARTBEAT_FREQUENCY] = None
        with ps.temporary_settings(updates=updates):
            yield server.api_url
    finally:
        try:
            if server is not None and server.ready:
                _drain_prefect_workers()
        finally:
            os.environ.pop("PREFECT_API_URL", None)
            if server is not None:
                server.stop()


def _drain_prefect_workers() -> None:
    """Send queued logs and events while the server still listens (else Prefect prints
    "Error logging to API" after it stops)."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for worker in (APILogWorker, EventsWorker):
        try:
            worker.drain_all(timeout=DRAIN_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - best effort on the way out
            pass
    mark("drained")


if __name__ == "__main__":
    # ``python -m horizonbench.cli.prefect_server template``: what ``make install`` runs
    if sys.argv[1:] != ["template"]:
        print("usage: python -m horizonbench.cli.prefect_server template", file=sys.stderr)
        sys.exit(2)
    if not template_path().exists():
        print("horizonbench: migrating an empty Prefect database once, for new Prefect homes", flush=True)
    ensure_template()
