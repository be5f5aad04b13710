"""A second process forked from the command as it starts: Great Expectations and half
of the report's figures.

A command's own work runs on the one core its interpreter lock lets it use. Importing
Great Expectations costs about 2 s of CPU and each table's checkpoint and data docs a
few tenths more, before and during the flow, while the other core is busy starting
Prefect's temporary server and then idle for most of the flow; the report's figures are
about three quarters of the flow's own CPU. So the command forks once the imports it
shares with Great Expectations are done (the child shares them, copy-on-write: a new
interpreter would import them again, 1-2 s more CPU in all, measured), and the child
imports Great Expectations on whichever core is free while the command goes on
importing Prefect and the stages. Every validation of
the run happens there (``check_table``), so the command never imports Great
Expectations, and the report draws half its figures there while the command draws the
other half (``offload``).

What the command imports before it forks (``SHARED_IMPORTS``) is what both need:
Great Expectations alone costs the child 3.2 s of CPU after pandas, numpy and pyarrow,
2.0 s once scipy, jinja2, jsonschema and packaging are in too (measured), and the
command imports all of these anyway; matplotlib and the figure code come along, for the
child's half of the report.

Forking is safe here because it happens before anything starts a thread that could
hold a lock the child needs (Prefect, Dask and the log workers start later); with any
other thread running, with ``HORIZONBENCH_SEQUENTIAL_STARTUP=1`` or off Linux nothing
is forked and the command does all of it itself. One request at a
time, over a pipe of its own (a function and its arguments pickled, by reference, and
the answer; never stdout, where a library could print); the run's validations share
one Great Expectations context there, so its data docs list every table of the run.
The child ignores SIGINT (Ctrl-C in a terminal reaches the whole process group; the
command stops it on the way out, as it stops its Dask workers), gets SIGTERM when the
command dies, even by SIGKILL, and ends with ``os._exit``: it never runs the command's
own clean-up code.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

#: how long the process may take to exit once asked to, before it is killed
STOP_TIMEOUT_S = 5.0
#: threads that may run while the command forks: they take no lock the child uses
FORK_SAFE_THREADS = ("horizonbench-server-watch",)
#: imported by the command before it forks (see the module's docstring)
SHARED_IMPORTS = (
    "numpy",
    "pandas",
    "pyarrow.parquet",
    "scipy.optimize",
    "scipy.sparse.csgraph",
    "scipy.special",
    "jinja2",
    "jsonschema",
    "packaging.version",
    "horizonbench.reports.seqbench_parts",
)


class SideProcess:
    """The forked child and the command's ends of its two pipes; one request at a time."""

    def __init__(self, pid: int, send_fd: int, recv_fd: int) -> None:
        from multiprocessing.connection import Connection

        self.pid = pid
        self.returncode: int | None = None
        self._send = Connection(send_fd, readable=False)
        self._recv = Connection(recv_fd, writable=False)
        self._lock = threading.Lock()

    def call(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` in the child; its exception raised here. ``what`` names the
        work in the error when the child is gone."""
        with self._lock:
            try:
                self._send.send((fn, args))
                ok, value = self._recv.recv()
            except (EOFError, OSError):
                raise RuntimeError(
                    f"the side process stopped while {what} (exit status {self.poll()})"
                ) from None
        if ok:
            return value
        raise value

    def submit(self, what: str, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """``call`` on a thread of this process (it waits on the pipe, without the
        interpreter lock): the command goes on with its own work meanwhile."""
        future: Future[Any] = Future()

        def run() -> None:
            try:
                future.set_result(self.call(what, fn, *args))
            except BaseException as err:  # noqa: BLE001 - read by whoever waits on it
                future.set_exception(err)

        threading.Thread(target=run, name="horizonbench-side-call", daemon=True).start()
        return future

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                return -1
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def _wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.poll() is None:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def stop(self, at_once: bool = False) -> None:
        """Close its pipe (it exits when it reads the end), or SIGTERM it at once; then
        wait, and SIGKILL it if it does not exit. Always reaped."""
        for conn in (self._send, self._recv):
            conn.close()
        if at_once and self.poll() is None:
            os.kill(self.pid, signal.SIGTERM)
        if not self._wait(STOP_TIMEOUT_S):
            os.kill(self.pid, signal.SIGTERM)
            if not self._wait(STOP_TIMEOUT_S):
                os.kill(self.pid, signal.SIGKILL)
                self._wait(STOP_TIMEOUT_S)


def can_fork() -> bool:
    """Whether forking now is safe: on Linux (macOS's system libraries, Accelerate's
    BLAS among them, are not safe to use in a forked child), and no thread but ours runs."""
    if not sys.platform.startswith("linux"):
        return False
    others = [t for t in threading.enumerate() if t is not threading.current_thread()]
    return all(t.name in FORK_SAFE_THREADS for t in others)


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except OSError:
            pass


def fork() -> SideProcess | None:
    """Fork the side process (None when ``can_fork`` says no)."""
    if not can_fork():
        return None
    request_r, request_w = os.pipe()
    answer_r, answer_w = os.pipe()
    for stream in (sys.stdout, sys.stderr):  # nothing buffered is written twice
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    # the objects of the command's imports out of the child's collections: a full
    # collection writes to every object it visits, which copies every page of the
    # shared heap into the child (0.5-0.9 s of its CPU while importing, measured)
    gc.freeze()
    pid = os.fork()
    if pid:
        gc.unfreeze()  # the command collects as before
    if pid == 0:  # the child: never returns into the command's code
        code = 0
        try:
            # not the command's handlers: its SIGTERM handler raises KeyboardInterrupt,
            # which here would print a traceback wherever the child happened to be
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            _die_with_parent()
            os.close(request_w)
            os.close(answer_r)
            serve(request_r, answer_w)
        except BaseException:  # noqa: BLE001 - reported by the command as a stopped process
            code = 1
        finally:
            os._exit(code)
    os.close(request_r)
    os.close(answer_w)
    return SideProcess(pid, request_w, answer_r)


#: the process ``side_process`` forked, while its block lasts
_ACTIVE: dict[str, SideProcess] = {}


@contextlib.contextmanager
def side_process() -> Iterator[SideProcess | None]:
    """Fork the side process for the block (if safe); stopped when the block ends, at
    once when it ends by an error or an interrupt (work still running there is of a run
    that is ending)."""
    if _ACTIVE:
        yield _ACTIVE["process"]
        return
    import importlib

    for name in SHARED_IMPORTS:
        importlib.import_module(name)
    proc = fork()
    if proc is None:
        yield None
        return
    from horizonbench.core.timings import mark

    mark("side process forked")
    _ACTIVE["process"] = proc
    failed = False
    try:
        yield proc
    except BaseException:
        failed = True
        raise
    finally:
        _ACTIVE.pop("process", None)
        proc.stop(at_once=failed)


def check_table(path: str, table: str, suite: Any, run: str) -> dict[str, Any]:
    """``validation.check_table`` in the side process when one runs, else here."""
    from horizonbench.tasks.validate.checks import check_table as check_here

    proc = _ACTIVE.get("process")
    if proc is None:
        return check_here(path, table, suite, run)
    return proc.call(f"validating {table}", check_here, path, table, suite, run)


def offload(fn: Callable[..., Any], *args: Any) -> Future[Any] | None:
    """``fn(*args)`` started in the side process, or None when there is none (the
    caller then calls it itself). ``fn`` must be importable by name there."""
    proc = _ACTIVE.get("process")
    if proc is None:
        return None
    return proc.submit(f"running {fn.__qualname__}", fn, *args)


def serve(read_fd: int, write_fd: int) -> None:
    """The child's loop: import, then answer requests until the pipe closes. A failed
    call goes back to the command as its exception (its text if it does not pickle)."""
    from multiprocessing.connection import Connection

    os.environ.setdefault("TQDM_DISABLE", "1")
    import great_expectations  # noqa: F401 - its first use is the flow's first validation

    import horizonbench.tasks.validate.checks  # noqa: F401
    from horizonbench.core.timings import mark

    mark("gx imported")
    recv, send = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    while True:
        try:
            fn, args = recv.recv()
        except (EOFError, OSError):
            return
        try:
            answer: tuple[bool, Any] = (True, fn(*args))
        except Exception as err:  # noqa: BLE001 - handed to the caller, who raises it
            answer = (False, err)
        try:
            send.send(answer)
        except (OSError, EOFError):
            return
        except Exception:  # noqa: BLE001 - an answer that does not pickle: its text
            send.send((False, RuntimeError(f"{type(answer[1]).__name__}: {answer[1]}")))
