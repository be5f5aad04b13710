"""The run folder as shared state: who holds it, which of its outputs are current, and
whether a new run may write into it.

Three promises rest on this module:

- **One writer.** A run holds an exclusive ``flock`` on ``<run>/.horizonbench.lock`` for
  its whole life. A second run into the folder is refused at once, naming the holder. The
  kernel drops the lock when the holder dies (even by ``kill -9``), so a stale lock file
  is simply taken over: no guess about whether a pid still lives.
- **Nothing old passes as current.** ``state.json`` lists every stage's outputs with a
  status. A run starting in a folder marks every output of an earlier run ``stale`` and
  puts a banner on the old report, and each stage sets its own outputs ``current`` when it
  has rewritten them. A crash in the middle leaves the rest marked stale.
- **Same config or nothing.** The state records the part of the config that changes
  outputs (:func:`output_config`) when the run *starts*, so the out-folder check still
  applies after a crash, and ``--workers`` or rate limits never make a config "different".
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import json
import os
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from horizonbench.core.errors import ConfigError
from horizonbench.tasks.run_folder.storage import write_json, write_text

LOCK = ".horizonbench.lock"
STATE = "state.json"
STALE_BANNER = "<!--horizonbench-stale-->"

#: stage -> the outputs it rewrites (files or folders relative to the run folder)
STAGE_OUTPUTS: dict[str, tuple[str, ...]] = {
    "generate": ("instances",),
    "worlds": ("episodes", "steps", "attempts/world_attempts.parquet"),
    #: RecurrReason's trained sequence models (checkpoints, training history)
    "train": ("models",),
    "evaluate": ("attempts/attempts.parquet", "prompts"),
    "score": ("scores",),
    #: ``adaptive``: an adaptive study's design, chosen from the analysis wave by wave
    "analyse": ("analysis", "adaptive"),
    "report": ("report",),
    "validate": ("validation",),
    "manifest": ("manifest.json",),
}

#: what a run folder may hold at its top level; a folder with anything else is not one
RUN_NAMES = frozenset(
    {rel.split("/")[0] for rels in STAGE_OUTPUTS.values() for rel in rels}
    | {LOCK, STATE, ".staging", "cache", "exports"}
)

#: config fields that never change an output: where the work runs, how fast calls are
#: sent, how long to wait; a rerun that changes only these is the same run
_RUNTIME_ONLY = {
    "dask": None,
    "generation": None,
    "evaluation.interrupt_grace_s": None,
    # a cap decides how many calls are sent, not what an answer is: raising it resumes
    "evaluation.budget_usd": None,
    "evaluation.models.*.budget_usd": None,
    "families.*.sampling.shard_size": None,
    "families.*.sampling.allow_unfilled": None,
    "evaluation.models.*.requests_per_minute": None,
    "evaluation.models.*.tokens_per_minute": None,
    "evaluation.models.*.rate_window_s": None,
    "evaluation.models.*.tpm_counts": None,
    "evaluation.models.*.max_concurrency": None,
    "evaluation.models.*.timeout_s": None,
    "evaluation.models.*.max_retries": None,
    "evaluation.models.*.backoff_base_s": None,
    "evaluation.models.*.backoff_max_s": None,
    "evaluation.models.*.retry_after_cap_s": None,
    "evaluation.models.*.batch_poll_s": None,
    "evaluation.models.*.api_key_env": None,
    "evaluation.models.*.api_key_block": None,
    # torch threads and the rollout decode batch change where the work runs, not what
    # greedy decoding answers
    "training.threads": None,
    "training.decode_batch": None,
}


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _drop(data: Any, path: list[str]) -> Any:
    if not path or not isinstance(data, (dict, list)):
        return data
    head, rest = path[0], path[1:]
    if isinstance(data, list):
        return [_drop(item, rest) for item in data] if head == "*" else data
    if head == "*":
        return {k: _drop(v, rest) for k, v in data.items()}
    if head not in data:
        return data
    if not rest:
        return {k: v for k, v in data.items() if k != head}
    return {**data, head: _drop(data[head], rest)}


def output_config(config: dict[str, Any]) -> dict[str, Any]:
    """The config as far as outputs depend on it (the JSON dump of a ``Config``)."""
    out = config
    for dotted in _RUNTIME_ONLY:
        out = _drop(out, dotted.split("."))
    return out


# ---------------------------------------------------------------------------- the lock


class RunFolderBusy(ConfigError):
    """Another live process holds the run folder."""


@dataclass
class _Held:
    fd: int
    depth: int


_HELD: dict[str, _Held] = {}
_HELD_GUARD = threading.Lock()


def holder(run: Path) -> dict[str, Any] | None:
    """What the lock file says about its (last) holder, if it can be read."""
    try:
        return json.loads((run / LOCK).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _describe(info: dict[str, Any] | None) -> str:
    if not info:
        return "another process"
    return (
        f"pid {info.get('pid')} on {info.get('host')} ({info.get('command', 'horizonbench')}, "
        f"since {info.get('started_at')})"
    )


@contextlib.contextmanager
def run_lock(run: Path, command: str) -> Iterator[dict[str, Any] | None]:
    """Hold the run folder for the block; yields what the previous holder's file said
    when a stale lock was taken over (``None`` otherwise).

    Re-entrant within a process (the CLI takes the lock before Prefect starts, the flow
    takes it again), since two ``flock`` descriptors in one process would exclude each
    other. Raises :class:`RunFolderBusy` when a live process holds it.
    """
    key = str(run.resolve())
    with _HELD_GUARD:
        held = _HELD.get(key)
        if held is not None:
            held.depth += 1
    if held is not None:
        try:
            yield None
        finally:
            with _HELD_GUARD:
                held.depth -= 1
        return
    run.mkdir(parents=True, exist_ok=True)
    path = run / LOCK
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        os.close(fd)
        if err.errno not in (errno.EAGAIN, errno.EACCES):
            raise
        raise RunFolderBusy(
            f"--out {run} is in use by {_describe(holder(run))}; wait for that run or stop it"
        ) from None
    previous = holder(run)
    info = {"pid": os.getpid(), "host": socket.gethostname(), "command": command, "started_at": _now()}
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
    with _HELD_GUARD:
        _HELD[key] = _Held(fd, 1)
    try:
        yield previous if previous and previous.get("pid") != os.getpid() else None
    finally:
        with _HELD_GUARD:
            _HELD.pop(key, None)
        # the file stays (a unlink would race a waiting run's open); the flock goes
        os.close(fd)


def lock_is_held(run: Path) -> bool:
    """Whether a live process holds the folder (the flock, not the pid in the file)."""
    try:
        fd = os.open(run / LOCK, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as err:
        return err.errno in (errno.EAGAIN, errno.EACCES)
    finally:
        os.close(fd)
    return False


# --------------------------------------------------------------------------- the state


def read_state(run: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((run / STATE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        raise ConfigError(f"{run / STATE}: unreadable run state ({err})") from None
    return data if isinstance(data, dict) else None


def _write_state(run: Path, state: dict[str, Any]) -> None:
    write_json(state, run / STATE)


def begin(run: Path, config: dict[str, Any], command: str) -> dict[str, Any]:
    """Start a run in ``run``: every output an earlier run left is marked stale (and its
    report bannered) before anything is rewritten. Returns the new state."""
    old = read_state(run) or {}
    outputs: dict[str, Any] = {}
    for stage, rels in STAGE_OUTPUTS.items():
        for rel in rels:
            if (run / rel).exists():
                before = (old.get("outputs") or {}).get(rel, {})
                outputs[rel] = {
                    "stage": stage,
                    "status": "stale",
                    "written_at": before.get("written_at"),
                    "reason": f"a rerun started at {_now()} has not rewritten it yet",
                }
    state = {
        "status": "running",
        "command": command,
        "pid": os.getpid(),
        "started_at": _now(),
        "finished_at": None,
        "config": output_config(config),
        "outputs": outputs,
        "problems": [],
    }
    _write_state(run, state)
    mark_report_stale(run)
    return state


def begin_repair(run: Path, command: str, damaged: dict[str, str]) -> None:
    """Start a rerun that repairs (``flows.repair``): the state says ``running``, each
    output with a damaged file (``damaged``: output -> what is wrong) says ``damaged``
    until its stage restores it, and every other output stays ``current``: it is not
    rewritten. A crash leaves them ``damaged`` and the run ``failed``; the next rerun
    is then an ordinary one."""
    state = read_state(run) or {}
    outputs = state.setdefault("outputs", {})
    for rel, why in damaged.items():
        outputs[rel] = {**outputs.get(rel, {}), "status": "damaged", "reason": why}
    state.update(status="running", command=command, pid=os.getpid(), started_at=_now(), finished_at=None)
    state["problems"] = []
    _write_state(run, state)


def mark_report_stale(run: Path) -> None:
    """Put a banner on an earlier run's report, so nobody reads it as this run's."""
    page = run / "report" / "index.html"
    try:
        html = page.read_text(encoding="utf-8")
    except (FileNotFoundError, UnicodeDecodeError):
        return
    if STALE_BANNER in html:
        return
    banner = (
        f'{STALE_BANNER}<div style="background:#b00020;color:#fff;padding:10px 16px;'
        f'font:600 15px sans-serif">STALE: a rerun of this folder started at {_now()}; '
        "this report is from the run before it. See state.json or "
        "<code>horizonbench status</code>.</div>"
    )
    at = html.find(">", html.find("<body")) + 1 if "<body" in html else 0
    write_text(html[:at] + banner + html[at:], page)


def current(run: Path, stage: str, extra: dict[str, Any] | None = None) -> None:
    """A stage has rewritten its outputs: they are current."""
    state = read_state(run)
    if state is None:
        return
    outputs = state.setdefault("outputs", {})
    for rel in STAGE_OUTPUTS[stage]:
        if (run / rel).exists():
            outputs[rel] = {"stage": stage, "status": "current", "written_at": _now(), **(extra or {})}
        else:
            outputs.pop(rel, None)
    _write_state(run, state)


def finish(run: Path, status: str, problems: list[str] | None = None) -> None:
    """The run ended: ``completed``, ``failed``, ``cancelled`` or ``crashed``."""
    state = read_state(run)
    if state is None:
        return
    state["status"] = status
    state["finished_at"] = _now()
    state["problems"] = list(problems or [])
    _write_state(run, state)


# ------------------------------------------------------------------ the out-folder check


def _writable(folder: Path) -> bool:
    """Try it: permission bits do not bind root, and read-only mounts ignore them."""
    import tempfile

    try:
        with tempfile.TemporaryFile(dir=folder):
            return True
    except OSError:
        return False


def check_out(out: str | Path, config: dict[str, Any], overwrite: bool) -> str | None:
    """Why ``out`` may not take a run of ``config`` (one line), or ``None``. Creates
    nothing: an unwritable or misnamed folder is refused before anything exists."""
    text = str(out)
    if not text.strip():
        return "--out is empty; name a run folder"
    path = Path(text)
    if path.exists() and not path.is_dir():
        return f"--out {path} exists and is not a folder"
    probe = path
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        return f"--out {path}: {probe} is not a folder"
    if not _writable(probe):
        return f"--out {path}: {probe} is not writable"
    if overwrite or not path.is_dir():
        return None
    recorded = None
    state = read_state(path) if (path / STATE).exists() else None
    if state is not None:
        recorded = state.get("config")
    else:  # a run folder from before state.json: its manifest
        try:
            manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
            recorded = output_config(manifest.get("config") or {}) if manifest.get("config") else None
        except (OSError, ValueError):
            recorded = None
    if recorded is not None and recorded != output_config(config):
        return f"--out {path} holds a run of a different config; choose another folder or pass --overwrite"
    if recorded is None:
        # not a run folder at all (e.g. --out . in a project): never write into it
        others = sorted(p.name for p in path.iterdir() if p.name not in RUN_NAMES)
        if others:
            return (
                f"--out {path} holds files that are not a run's ({', '.join(others[:3])}"
                f"{', ...' if len(others) > 3 else ''}); choose an empty or new folder"
            )
    return None


# ------------------------------------------------------------------------- the series

LATEST = "latest"


def series_folder(template: str, out: Path) -> tuple[Path, str] | None:
    """Where a dated series keeps its ``latest`` pointer: beside the path component
    that holds ``{date}`` (``runs/nightly/{date}`` -> ``runs/nightly/latest``), and the
    name that component took for this run. ``None`` when ``out`` is not a series."""
    parts = Path(template).parts
    for i, part in enumerate(parts):
        if "{date}" in part:
            concrete = out.parts[: len(out.parts) - (len(parts) - i) + 1]
            if not concrete:
                return None
            return Path(*concrete[:-1]) if len(concrete) > 1 else Path("."), concrete[-1]
    return None


def point_latest(template: str, out: Path) -> Path | None:
    """Move the series' ``latest`` symlink to this run (relative, so the series folder
    can move); replaced atomically, so a reader never finds it missing. Only to a run
    whose outputs are all there at their recorded sizes (``tasks.run_folder.verify.unverified``):
    ``None``, the link left where it was, otherwise."""
    from horizonbench.tasks.run_folder.verify import unverified  # it imports this module

    found = series_folder(template, out)
    if found is None or unverified(out) is not None:
        return None
    folder, name = found
    link = folder / LATEST
    tmp = folder / f".{LATEST}.{os.getpid()}.tmp"
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    os.symlink(name, tmp, target_is_directory=True)
    os.replace(tmp, link)
    return link
