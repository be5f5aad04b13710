"""The run manifest: written last, so a run folder without one is an unfinished run."""

from __future__ import annotations

import importlib.metadata
import platform
import subprocess
from pathlib import Path
from typing import Any

from horizonbench import __version__
from horizonbench.tasks.run_folder.storage import STAGING, sha256_file, write_json

MANIFEST = "manifest.json"
_PACKAGES = (
    "prefect",
    "dask",
    "distributed",
    "great-expectations",
    "pyarrow",
    "pandas",
    "numpy",
    "scipy",
    "networkx",
    "openai",
    "anthropic",
    "matplotlib",
)
#: files that are not results: the resumable answer cache, GX's scratch output, and
#: cached generation shards (``tasks.generate.shard_cache``: scratch a rerun reuses, pruned at will)
_SKIP_SUFFIXES = (".sqlite", ".sqlite-wal", ".sqlite-shm", ".tmp", ".hbshard")
#: folders of the run that hold no results (the run's own shard cache), and the trained
#: checkpoints (models/): each is keyed by its own weights' digest wherever it matters
#: (the attempt store), and a resumable training state changes as training goes on
_SKIP_DIRS = ("cache/", "models/")
#: the run folder's lock and live state (``tasks.run_folder.state``): they change after the
#: manifest is written (the state's last word is the run's end)
_SKIP_FILES = (".horizonbench.lock", "state.json")


def versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "horizonbench": __version__}
    for name in _PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def git_sha() -> str | None:
    """The commit of the horizonbench checkout, if it runs from one."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    sha = out.stdout.strip()
    if out.returncode != 0 or not sha:
        return None
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=here,
        capture_output=True,
        text=True,
        timeout=10,
    ).stdout.strip()
    return sha + ("-dirty" if dirty else "")


def _result_files(run: Path) -> list[tuple[str, Path]]:
    out = []
    for path in sorted(p for p in run.rglob("*") if p.is_file()):
        rel = path.relative_to(run).as_posix()
        skip = rel in (MANIFEST, *_SKIP_FILES) or rel.startswith((STAGING, *_SKIP_DIRS))
        if skip or path.name.endswith(_SKIP_SUFFIXES):
            continue
        out.append((rel, path))
    return out


def content_hashes(run: Path) -> dict[str, str]:
    return {rel: sha256_file(path) for rel, path in _result_files(run)}


def content_records(run: Path) -> tuple[dict[str, str], dict[str, int]]:
    """Each result file's sha256 and size in bytes (``content_sha256``,
    ``content_bytes``): the size lets ``horizonbench status`` find a deleted or
    truncated file without reading any (``tasks.run_folder.verify``)."""
    hashes, sizes = {}, {}
    for rel, path in _result_files(run):
        sizes[rel] = path.stat().st_size
        hashes[rel] = sha256_file(path)
    return hashes, sizes


def write_manifest(run: Path, manifest: dict[str, Any]) -> Path:
    manifest = dict(manifest)
    manifest["content_sha256"], manifest["content_bytes"] = content_records(run)
    return write_json(manifest, run / MANIFEST)
