"""Is a run folder still what its manifest recorded? Missing, truncated or changed files.

The manifest (``tasks.run_folder.manifest``) records every result file's sha256
(``content_sha256``) and size (``content_bytes``; manifests from before it have hashes
only). ``state.json`` says which outputs a run *wrote*; only this module says whether
they are still *there*: a deleted table, a truncated part or a flipped byte never
changes ``state.json``.

Two depths, because they cost very different amounts:

- **sizes** (``hashes=False``): one ``stat`` per file and a listing of the table
  folders, never a read of a table, so ``horizonbench status`` stays instant on a run of
  any size. It catches what goes wrong in practice: a deleted file, a truncated write
  (disk full, a copy cut short), a part file too many.
- **hashes** (``hashes=True``): every file read once (sha256), for ``status --verify``
  and before a command reads a table: a command that reads a table reads all of it
  anyway, so checking its hash first costs about as much again, at most.

Checked are the outputs of the stages that write results (``run_folder.STAGE_OUTPUTS``
but ``validation/``: Great Expectations' records are rewritten by ``horizonbench
export``'s own checks, and ``manifest.json`` itself). Of ``attempts/`` only the
tables are checked (not the answer store or the run tag, which the manifest does not
list or a rerun rewrites). The comparison is pure (:func:`diagnose`); the rest is I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from horizonbench.core.errors import ConfigError, RunFolderDamaged
from horizonbench.tasks.run_folder.state import STAGE_OUTPUTS
from horizonbench.tasks.run_folder.storage import sha256_file

MANIFEST = "manifest.json"
#: stages whose outputs are not checked: GX's records (rewritten by ``export``'s
#: validation of its step tables), the manifest itself, and the trained checkpoints
#: (each carries the digest of its weights, which keys its answers in the store)
_UNCHECKED_STAGES = ("validate", "manifest", "train")
#: the output (a ``STAGE_OUTPUTS`` entry) -> its stage, for the checked outputs
CHECKED_OUTPUTS: dict[str, str] = {
    rel: stage for stage, rels in STAGE_OUTPUTS.items() if stage not in _UNCHECKED_STAGES for rel in rels
}


@dataclass(frozen=True)
class Damage:
    """One file of a run folder that is not what the manifest recorded."""

    path: str  #: the file, relative to the run folder
    output: str  #: the output it belongs to (``scores``, ``instances``, ...: as in ``state.json``)
    stage: str  #: the stage that writes it, which a rerun runs again to repair it
    problem: str  #: what is wrong, as a predicate ("is missing ...")

    def line(self) -> str:
        return f"{self.path} {self.problem}"

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "output": self.output, "stage": self.stage, "problem": self.problem}


def owner(rel: str) -> tuple[str, str] | None:
    """``(output, stage)`` of a file path relative to the run folder, or ``None`` when
    it belongs to no checked output (the longest matching output wins)."""
    best: str | None = None
    for out in CHECKED_OUTPUTS:
        if (rel == out or rel.startswith(out + "/")) and (best is None or len(out) > len(best)):
            best = out
    return None if best is None else (best, CHECKED_OUTPUTS[best])


def recorded(manifest: Mapping[str, Any]) -> dict[str, tuple[str | None, int | None]]:
    """What the manifest recorded of each checked file: ``(sha256, size)``, either
    ``None`` when the manifest predates it."""
    hashes = manifest.get("content_sha256") or {}
    sizes = manifest.get("content_bytes") or {}
    if not isinstance(hashes, dict) or not isinstance(sizes, dict):
        return {}
    out: dict[str, tuple[str | None, int | None]] = {}
    for rel in sorted(set(hashes) | set(sizes)):
        if owner(rel) is not None:
            size = sizes.get(rel)
            out[rel] = (hashes.get(rel), int(size) if isinstance(size, int) else None)
    return out


def _bytes(n: int) -> str:
    return f"{n:,} byte" + ("" if n == 1 else "s")


def diagnose(
    expected: Mapping[str, tuple[str | None, int | None]],
    sizes: Mapping[str, int | None],
    hashes: Mapping[str, str] | None = None,
    extra: Iterable[str] = (),
) -> list[Damage]:
    """Compare what was recorded with what is there (pure).

    ``sizes``: each expected file's size now (``None``: missing). ``hashes``: the
    sha256 now of the files that were hashed (``None``: sizes only). ``extra``: table
    files found in a checked output that the manifest does not list."""
    out = []
    for rel, (sha, size) in sorted(expected.items()):
        where = owner(rel)
        if where is None:
            continue
        now = sizes.get(rel)
        problem = None
        if now is None:
            problem = "is missing" + (f" (the manifest records {_bytes(size)})" if size is not None else "")
        elif size is not None and now != size:
            problem = f"has {_bytes(now)} where the manifest records {_bytes(size)} (truncated or replaced)"
        elif hashes is not None and rel in hashes and sha is not None and hashes[rel] != sha:
            problem = "has another sha256 than the manifest records (same size: changed in place)"
        if problem:
            out.append(Damage(rel, *where, problem))
    for rel in sorted(extra):
        where = owner(rel)
        if where is not None and rel not in expected:
            out.append(Damage(rel, *where, "is not in the manifest (a table file the run did not write)"))
    return out


def read_manifest(run: Path) -> dict[str, Any] | None:
    """The run's manifest, or ``None`` when it has none or it cannot be read."""
    try:
        data = json.loads((run / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _within(rel: str, prefixes: Sequence[str] | None) -> bool:
    return prefixes is None or any(rel == p or rel.startswith(p.rstrip("/") + "/") for p in prefixes)


def check(
    run: Path, manifest: Mapping[str, Any], *, hashes: bool, within: Sequence[str] | None = None
) -> list[Damage]:
    """Every damaged file of the run's checked outputs (or of those under ``within``:
    paths or folders relative to the run). ``hashes=False`` stats files and lists the
    table folders only; ``hashes=True`` also reads every file whose size matches."""
    expected = {rel: v for rel, v in recorded(manifest).items() if _within(rel, within)}
    sizes: dict[str, int | None] = {}
    for rel in expected:
        try:
            st = (run / rel).stat()
        except OSError:
            sizes[rel] = None
            continue
        sizes[rel] = st.st_size if (run / rel).is_file() else None
    sums = None
    if hashes:
        sums = {}
        for rel, (sha, size) in expected.items():
            now = sizes.get(rel)
            if now is not None and sha is not None and (size is None or size == now):
                sums[rel] = sha256_file(run / rel)
    extra = []
    folders = {o for o in CHECKED_OUTPUTS if (run / o).is_dir() and _within(o, within)}
    for folder in sorted(folders):
        for path in (run / folder).rglob("*.parquet"):
            rel = path.relative_to(run).as_posix()
            if not path.name.startswith(".") and _within(rel, within) and path.is_file():
                extra.append(rel)
    return diagnose(expected, sizes, sums, extra)


def summary(damage: Sequence[Damage]) -> str:
    """One line for a list of damaged files: the first named, how many more."""
    first = damage[0].line()
    more = (
        f" (and {len(damage) - 1} more damaged file{'s' if len(damage) > 2 else ''})"
        if len(damage) > 1
        else ""
    )
    return first + more


def check_tables(
    run: Path, manifest: Mapping[str, Any] | None, tables: Sequence[str], flag: str = "--run"
) -> None:
    """Before a command reads ``tables`` (paths or folders relative to the run): raise
    :class:`RunFolderDamaged` (one line naming the first damaged table file; the CLI
    exits 2) when any of their files is missing, of another size, or of another sha256
    than the manifest recorded. A run without a manifest is not checked (its readers
    refuse it, or it is from before manifests)."""
    if not manifest:
        return
    damage = check(run, manifest, hashes=True, within=tables)
    if damage:
        where = f"{flag} {run}" if flag else str(run)
        raise RunFolderDamaged(f"{where}: damaged table: {summary(damage)}; {repair_hint(run, damage)}")


def repair_hint(run: Path, damage: Sequence[Damage]) -> str:
    """How to repair: the analysis and the report are rebuilt from the tables by their
    own commands; anything else by a rerun of the run's command (``flows.pipeline``
    reruns only the stages that own what is damaged, see ``repair_plan``)."""
    outputs = {d.output for d in damage}
    if outputs <= {"analysis"}:
        return f"rebuild it with horizonbench analyze --run {run}"
    if outputs <= {"report"}:
        return f"rebuild it with horizonbench report --run {run}"
    return (
        "rerun the command that wrote the run to repair it "
        f"(horizonbench status --run {run} --verify lists every damaged file)"
    )


def unverified(run: Path) -> str | None:
    """Why ``run`` may not become its series' ``latest`` (one line), or ``None``.

    Sizes only: the manifest's hashes were taken moments before, by the same process,
    reading every file, so hashing again would read the whole folder a second time to
    catch only a same-size change in those moments; a deleted or truncated file (a disk
    that filled, a cleanup that ran) is what a stat finds."""
    manifest = read_manifest(run)
    if manifest is None:
        return f"{run}: no readable {MANIFEST}"
    damage = check(run, manifest, hashes=False)
    return f"{run}: {summary(damage)}" if damage else None


# ------------------------------------------------------------------------ the repair

#: stages a rerun can run alone to repair their outputs: they write to staging, so a
#: repaired file can be checked against the manifest before it replaces anything
REPAIRABLE = ("generate", "score")


def repair_plan(
    run: Path, config: Mapping[str, Any], stages: Sequence[str] = REPAIRABLE, command: str = "run"
) -> list[Damage] | None:
    """The damaged files a rerun of ``config`` (its JSON dump) repairs by rerunning only
    their stages, or ``None`` when the rerun is an ordinary one (every stage).

    Only a run of the same ``command`` (a ``run`` after a ``generate`` has stages to
    add, not to repair) that completed, with no problems and every output current,
    under the same output config, whose damage lies in outputs of ``stages`` alone: then the rest of
    the folder is known good (every file at its recorded sha256: this reads every
    output once, which a rerun that recomputes can afford), and the stages are deterministic, so the
    repaired files must come back byte-identical (:func:`restore` checks it)."""
    from horizonbench.tasks.run_folder.state import output_config, read_state

    try:
        state = read_state(run)
    except ConfigError:  # an unreadable state: the ordinary rerun says why
        return None
    if not state or state.get("status") != "completed" or state.get("problems"):
        return None
    if state.get("command") not in (command, f"{command} (repair)"):
        return None
    if state.get("config") != output_config(dict(config)):
        return None
    if any((info or {}).get("status") != "current" for info in (state.get("outputs") or {}).values()):
        return None
    manifest = read_manifest(run)
    if manifest is None or not manifest.get("content_sha256"):
        return None
    damage = check(run, manifest, hashes=True)
    if not damage or any(d.stage not in stages for d in damage):
        return None
    return damage


def restore(run: Path, damage: Sequence[Damage], stage: str) -> list[str] | None:
    """Put the staged copies of ``stage``'s damaged files in place, each only if it has
    the sha256 the manifest recorded (so its validation then still holds); files the
    manifest does not list are removed. Returns the paths repaired, or ``None`` (and
    nothing moved) when a staged copy is missing or differs."""
    import os

    from horizonbench.tasks.run_folder.storage import staged

    manifest = read_manifest(run) or {}
    hashes = manifest.get("content_sha256") or {}
    mine = [d for d in damage if d.stage == stage]
    for d in mine:
        src = staged(run, d.path)
        if d.path not in hashes:
            if src.exists():  # the stage does write it: not a stray file
                return None
        elif not src.is_file() or sha256_file(src) != hashes[d.path]:
            return None
    for d in mine:
        if d.path in hashes:
            (run / d.path).parent.mkdir(parents=True, exist_ok=True)
            os.replace(staged(run, d.path), run / d.path)
        else:
            (run / d.path).unlink(missing_ok=True)
    return [d.path for d in mine]
