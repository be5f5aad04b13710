"""The temporary Prefect server a command starts when no PREFECT_API_URL is set.

Prefect would start one itself, but as a child in our process group: Ctrl-C in a
terminal reaches it first, the server dies while the flow still reports its state, and
the client retries for minutes. Started here in a session of its own, it outlives the
signal, the flow records what happened, and this module stops it on the way out (on
SIGTERM too, which the CLI turns into an interrupt). Dask workers inherit the URL from
the environment, so they never start servers of their own.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def _die_with_parent() -> None:
    """On Linux, SIGTERM the server when the CLI process dies, even by SIGKILL (its own
    session shields it from the terminal's signals, so nothing else would stop it)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except OSError:
            pass


def _server_class() -> Any:
    from prefect.server.api.server import SubprocessASGIServer

    class DetachedServer(SubprocessASGIServer):
        """Prefect's subprocess server, in its own session (no terminal signals)."""

        def _run_uvicorn_command(self) -> subprocess.Popen[Any]:
            real_popen = subprocess.Popen

            def popen(*args: Any, **kwargs: Any) -> subprocess.Popen[Any]:
                kwargs.setdefault("start_new_session", True)
                kwargs.setdefault("preexec_fn", _die_with_parent)
                return real_popen(*args, **kwargs)

            subprocess.Popen = popen  # type: ignore[misc]
            try:
                return super()._run_uvicorn_command()
            finally:
                subprocess.Popen = real_popen  # type: ignore[misc]

    return DetachedServer


@contextmanager
def prefect_api() -> Iterator[str | None]:
    """Yield the API URL in use; start (and finally stop) a detached server if none is set."""
    if os.environ.get("PREFECT_API_URL"):
        yield os.environ["PREFECT_API_URL"]
        return
    from prefect.settings import PREFECT_API_URL, temporary_settings

    server = _server_class()()
    try:
        server.start()
        os.environ["PREFECT_API_URL"] = server.api_url
        with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
            yield server.api_url
    finally:
        _drain_prefect_workers()
        os.environ.pop("PREFECT_API_URL", None)
        server.stop()


def _drain_prefect_workers() -> None:
    """Send queued logs and events while the server still listens (else Prefect prints
    "Error logging to API" after it stops)."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for worker in (APILogWorker, EventsWorker):
        try:
            worker.drain_all(timeout=5)
        except Exception:  # noqa: BLE001 - best effort on the way out
            pass
