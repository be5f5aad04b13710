"""The Dask cluster generation runs on: a LocalCluster by default, or an existing one.

Workers run only pure functions (no Prefect inside them), so they never start a
Prefect server of their own, whatever the Prefect configuration.

A command may start its LocalCluster early (``shared_cluster``: the CLI does it while
the temporary Prefect server starts); ``dask_client`` then connects to that cluster
instead of starting one, and leaves it running for the next stage that needs it.

A small run (``small_run``: a few instances, no world study) runs its shards on the
command's own thread instead (``InlineClient``): a worker process costs about 1.5 s of
CPU to start (its own imports of distributed, numpy and the family), more than
generating a hundred instances, and an in-process cluster still costs the command
0.3 s to import distributed and about 0.06 of a core for its event loop for as long as
the command runs, all of it on the one core the command's interpreter lock gives it.
The instances are the same bytes (they never depend on the workers), and a run above
the threshold, a world study or ``--dask-address`` always gets a real cluster.

What it buys (issue 24), side by side: a 10-instance offline run took 28.5 s of CPU
(the whole process tree) inline against 33.3 s on a LocalCluster of one worker (1.18x)
and 548 MiB of PSS against 607 MiB (1.12x); its wall time, 94 s against 98 s, was
within the noise of a machine where other processes kept 1.7 of the 2 cores busy
(medians of 5 interleaved rounds, ``benchmarks/tricks.py --only startup --repeat 5``
at dc065bc, 2026-12-03). On the idle machine an hour later (the same command at
7e39670): 11.4 s of wall time, 16.3 s of CPU and 560 MiB inline against 12.2 s, 18.6 s
and 697 MiB on the cluster (per-round ratios 1.19, 1.21, 1.25). In the loaded run the
side process the command then forked for Great Expectations and half the figures
saved 2.0 s of CPU (30.5 s without it) and cost 81 MiB of PSS (467 MiB without), for
runs of at most 100 instances only. Against today's default (no fork, the collector
paused during the imports: ``cli.main.collector_paused_for_imports``), the same
command from checkouts of dc065bc and 386ed90 in turn on the idle machine took 9.9 s
with the fork and 12.4 s without (5 rounds, per-round ratio 1.20), the same 15.2 s of
CPU, and 642 MiB of PSS against 558 MiB. It was removed (issue 24): up to 2.5 s for
runs of at most 100 instances, for 84 MiB, 280 lines of process plumbing, and a fork
while OpenBLAS's and jemalloc's threads ran (its check saw Python threads only).
What guards the inline client: ``tests/test_startup.py`` (which runs qualify, a small
run starts no cluster and imports no distributed) and the instance bytes pinned
whatever runs them (``tests/test_shard_cache.py``, the demo's digests).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

from horizonbench import __version__
from horizonbench.core.errors import ConfigError
from horizonbench.schemas.config import Config, DaskSpec, SamplingSpec

#: a run that keeps at most this many instances over all families and sweep settings
#: (and simulates no world study) generates on one thread of this process
SMALL_RUN_MAX = 100

#: the LocalCluster started by ``shared_cluster``, by the spec it was started for
_SHARED: dict[str, Any] = {}


def _quiet() -> None:
    # silence the cluster's own chatter; our progress bar says what happens
    for name in ("distributed", "distributed.nanny", "distributed.scheduler"):
        logging.getLogger(name).setLevel(logging.ERROR)


#: the configuration of our LocalCluster (its scheduler, in this process, and its
#: workers): less of Dask's own periodic work, which on a two-core machine takes CPU
#: from the workers. An idle two-worker cluster measured 0.085 cores (0.047 of them in
#: this process) and 0.030-0.037 (0.014-0.021) with these settings.
#:
#: - the workers' statistical profiler off: it samples the working thread's stack
#:   every 10 ms (in the earlier idle scoring runs two workers scored 1.74x one without
#:   it, 1.68x with it); the dashboard's profile page stays empty;
#: - the event loop's responsiveness tick every second, not every 20 ms, in each
#:   scheduler, nanny and worker: it only feeds the "event loop was unresponsive"
#:   warning (still given, for a loop blocked longer than ``tick.limit``) and a metric;
#: - the system monitor (CPU, memory and network for the dashboard's graphs) every 2 s,
#:   not 0.5 s; the workers' memory limits have their own monitor.
#:
#: A scheduler of your own (``--dask-address``) keeps its settings.
CLUSTER_CONFIG = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "2s",
}


def _local_cluster(spec: DaskSpec, dashboard: bool = True) -> Any:
    """A LocalCluster (configured by ``CLUSTER_CONFIG``) whose worker
    processes ignore SIGINT: Ctrl-C in a terminal goes to the whole process group, and a
    worker that took it would die printing a traceback while the command is already
    stopping them in order (it closes the cluster on the way out). The disposition is
    set while the workers are spawned (they inherit it, and Python keeps an inherited
    SIG_IGN) and restored at once. The dashboard listens on a free port of 127.0.0.1
    (never the fixed 8787 another cluster may hold) and its link is logged."""
    import dask
    from distributed import LocalCluster

    _quiet()
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main and spec.processes else None
    try:
        # the scheduler and the workers read the configuration as they start (a nanny
        # hands it on to its worker process): set around the start, it is theirs for good
        with dask.config.set(CLUSTER_CONFIG):
            cluster = LocalCluster(
                n_workers=spec.n_workers,
                threads_per_worker=spec.threads_per_worker,
                processes=spec.processes,
                dashboard_address="127.0.0.1:0" if dashboard else None,
                worker_dashboard_address=None,
                silence_logs=logging.ERROR,
            )
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    if dashboard:
        _log_dashboard(cluster.dashboard_link)
    return cluster


def _log_dashboard(link: str) -> None:
    """In the flow run's log when there is one; else (the CLI starts the cluster before
    the flow) one line on stderr."""
    try:
        from prefect import get_run_logger

        get_run_logger().info("Dask dashboard: %s", link)
    except Exception:  # noqa: BLE001 - no run context
        print(f"horizonbench: Dask dashboard: {link}", file=sys.stderr, flush=True)


def _kept_at_most(sampling: SamplingSpec) -> int | None:
    """How many instances a family's sampling keeps at most (None: not known beforehand)."""
    if sampling.count is not None:
        return sampling.count
    if sampling.bins is not None:
        return sampling.bins.total()
    return None  # ``all``: the family's whole candidate space


def small_run(cfg: Config) -> bool:
    """Whether ``cfg`` is small enough to generate on a thread of this process: at most
    SMALL_RUN_MAX instances in all (sweep settings count as families), no world study,
    no existing scheduler, and worker processes asked for (else nothing changes)."""
    if cfg.dask.address or not cfg.dask.processes or cfg.worlds is not None or not cfg.families:
        return False
    total = 0
    for spec in cfg.families.values():
        for sampling in [spec.sampling, *(s.sampling or spec.sampling for s in spec.sweep)]:
            kept = _kept_at_most(sampling)
            if kept is None:
                return False
            total += kept
    return total <= SMALL_RUN_MAX


def _key(spec: DaskSpec) -> str:
    return spec.model_dump_json()


class InlineClient:
    """A small run's stand-in for a Dask client: a shard runs when it is submitted, on
    the submitting thread, and comes back as a finished future (an error in it is
    raised by ``result()``, as Dask does; Ctrl-C stops it between candidates).

    Only what generation asks of a client; the score stage scores in this process when
    it gets one (``is_inline``)."""

    def submit(self, fn: Callable[..., Any], *args: Any, pure: bool = True, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as err:  # noqa: BLE001 - the caller reads it from the future
            future.set_exception(err)
        return future

    def scheduler_info(self) -> dict[str, Any]:
        return {"workers": {"this thread": {}}}

    def close(self) -> None:
        """Nothing to close (a Dask client's method)."""


def is_inline(client: object) -> bool:
    return isinstance(client, InlineClient)


def warm_worker(families: tuple[str, ...]) -> int:
    """Import what the first shard needs (run on each worker while the command waits).

    Converting the families' empty row lists to Arrow too: the first time pyarrow
    builds an array from Python objects it imports pandas (0.17 s of CPU), and a
    worker's first shard took ten times the others for it (measured on 64 candidates:
    0.41 s against 0.04), which stalled the in-order window behind it and misled the
    shard sizer."""
    import pyarrow as pa

    from horizonbench.core.registry import get_family
    from horizonbench.datasets import shards  # noqa: F401

    for name in families:
        pa.Table.from_pylist([], schema=get_family(name).instance_schema)
    return len(families)


@contextlib.contextmanager
def shared_cluster(
    spec: DaskSpec, families: tuple[str, ...] = (), *, in_process: bool = False
) -> Iterator[object | None]:
    """Start the LocalCluster for ``spec`` now, for every ``dask_client(spec)`` inside
    the block; closed when the block ends. Each worker starts importing the modules of
    ``families`` at once (without waiting for it). Nothing is started for an existing
    scheduler (``spec.address``) or when a cluster for ``spec`` is already shared.

    ``in_process`` (for a ``small_run``): no cluster; every ``dask_client(spec)`` in the
    block gets an ``InlineClient``, whatever ``spec`` asks for."""
    key = _key(spec)
    if spec.address or key in _SHARED:
        yield _SHARED.get(key)
        return
    if in_process:
        _SHARED[key] = InlineClient()
        try:
            yield _SHARED[key]
        finally:
            _SHARED.pop(key, None)
        return
    from distributed import Client

    cluster = _local_cluster(spec)
    client = Client(cluster)
    warming = [
        client.submit(warm_worker, families, workers=[address], pure=False, allow_other_workers=False)
        for address in client.scheduler_info().get("workers", {})
    ]
    _SHARED[key] = cluster
    try:
        yield cluster
    except BaseException:
        _SHARED.pop(key, None)
        for fut in warming:
            fut.cancel()
        _close(client, cluster)
        raise
    _SHARED.pop(key, None)
    _close(client, cluster)


def _stop_heartbeat(dask_worker: Any) -> None:
    """Run on a worker before its cluster closes (see ``_close``)."""
    dask_worker.periodic_callbacks["heartbeat"].stop()


#: how long closing a cluster waits for its workers to stop their heartbeats
STOP_HEARTBEATS_TIMEOUT_S = 2.0


def _close(client: Any, cluster: Any) -> None:
    """Close our LocalCluster, the workers' heartbeats stopped first. The scheduler
    closes its connections before the workers it tells to close, and a heartbeat in
    between is logged by the worker as an error with a traceback ("Failed to
    communicate with scheduler during heartbeat"): seen on a loaded machine at the end
    of a world study, and after a Ctrl-C during generation. The workers ignore SIGINT
    and answer from their event loop while a shard runs, but a worker that is gone or
    stuck must not hold the command up: the wait is bounded, then the cluster closes
    regardless."""

    def stop() -> None:
        try:
            client.run(_stop_heartbeat, on_error="ignore")
        except Exception:  # noqa: BLE001 - the client may be closed meanwhile: closing regardless
            pass

    stopper = threading.Thread(target=stop, name="horizonbench-stop-heartbeats", daemon=True)
    stopper.start()
    stopper.join(STOP_HEARTBEATS_TIMEOUT_S)
    client.close()
    cluster.close()


@contextlib.contextmanager
def dask_client(spec: DaskSpec) -> Iterator[object]:
    shared = _SHARED.get(_key(spec))
    if isinstance(shared, InlineClient):
        yield shared
        return
    from distributed import Client

    if spec.address:
        client = connect(spec.address)
        try:
            yield client
        finally:
            client.close()
        return
    if shared is not None:
        client = Client(shared)
        try:
            yield client
        finally:
            client.close()
        return
    cluster = _local_cluster(spec)
    client = Client(cluster)
    try:
        yield client
    except BaseException:
        _close(client, cluster)
        raise
    _close(client, cluster)


#: how long a scheduler may take to answer before ``--dask-address`` is called unreachable
CONNECT_TIMEOUT_S = 10.0


def worker_version() -> str:
    """Run on each worker: the horizonbench it imports."""
    return __version__


def _refused(address: str, timeout: float) -> str | None:
    """For a tcp:// address, why a plain connection fails (refused, no such host), found
    at once instead of after Dask's retries for the whole timeout; else None."""
    import socket
    from urllib.parse import urlsplit

    if not address.startswith("tcp://"):
        return None
    try:
        parts = urlsplit(address)
        host, port = parts.hostname, parts.port
    except ValueError as err:
        return str(err)
    if not host or not port:
        return "no host:port"
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except OSError as err:
        return err.strerror or str(err)


def connect(address: str, timeout: float = CONNECT_TIMEOUT_S) -> Any:
    """A client of an existing scheduler whose workers run this horizonbench version.

    A worker of another version would generate other instances (or fail to unpickle a
    shard), so any mismatch is one ConfigError naming the workers and both versions; so
    is an address nothing answers at within ``timeout`` (instead of Dask's 30 s wait and
    a 200-line traceback)."""
    from distributed import Client

    if "://" not in address or not address.split("://", 1)[1]:
        raise ConfigError(f"--dask-address {address!r}: give a scheduler address like tcp://host:8786")
    _quiet()
    refused = _refused(address, timeout)
    if refused:
        raise ConfigError(f"--dask-address {address}: no Dask scheduler answered ({refused})")
    try:
        client = Client(address, timeout=timeout)
    except (OSError, TimeoutError, ValueError) as err:
        reason = str(err).splitlines()[0][:200] if str(err) else type(err).__name__
        raise ConfigError(f"--dask-address {address}: no Dask scheduler answered ({reason})") from None
    try:
        versions = client.run(worker_version)
    except Exception as err:  # noqa: BLE001 - e.g. a worker without horizonbench
        client.close()
        raise ConfigError(
            f"--dask-address {address}: the workers cannot run horizonbench "
            f"({type(err).__name__}: {str(err)[:200]}); install horizonbench {__version__} on every worker"
        ) from None
    wrong = {w: v for w, v in versions.items() if v != __version__}
    if wrong:
        client.close()
        shown = ", ".join(f"{w} has {v}" for w, v in sorted(wrong.items())[:4])
        raise ConfigError(
            f"--dask-address {address}: workers run another horizonbench than this client's "
            f"{__version__} ({shown}); install the same version on every worker"
        )
    return client


def lost_cluster(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect's retry condition for the stages that run on Dask: retry only when the
    cluster went away under the task (a dropped connection to an existing scheduler, a
    scheduler restart, a network timeout), never for what would fail again (a bad shard,
    a worker killed by its own task, an interrupt). Safe because both stages resume:
    generation from its cached shards, scoring from scratch in the same bytes."""
    from distributed.comm.core import CommClosedError

    try:
        err = state.result(raise_on_failure=False)
    except Exception:  # noqa: BLE001 - no readable result: not a case for a retry
        return False
    return isinstance(err, (CommClosedError, ConnectionError, TimeoutError))
