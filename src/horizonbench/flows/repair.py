"""A rerun that repairs: only the stages that own a damaged file run again.

When a rerun starts in a folder that holds a completed run of the same config and some
of its files are missing or changed (``tasks.run_folder.verify.repair_plan``), rerunning every
stage would rewrite the intact outputs too (the analysis, the report, the validation
records, the attempts table: their bytes or times change). Instead the stages that
own the damage run alone, into staging, and only the damaged files are moved into
place, each only once it has the sha256 the manifest recorded (the stages are
deterministic: same config, same bytes). Such a file passed validation when the run
first wrote it, and everything downstream was built from those same bytes, so nothing
downstream is redone and the manifest's records stay true.

Repaired this way: instance parts (``generate``) and the scores table (``score``). Any
other damage, or a repaired file that does not come back byte-identical, makes the
rerun an ordinary one (every stage, as before). ``horizonbench analyze`` and
``horizonbench report`` rebuild a damaged analysis or report from the tables.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prefect import get_run_logger

from horizonbench.schemas.config import Config
from horizonbench.tasks.run_folder import state as run_folder
from horizonbench.tasks.run_folder.manifest import MANIFEST
from horizonbench.tasks.run_folder.storage import STAGING, write_json
from horizonbench.tasks.run_folder.verify import REPAIRABLE, repair_plan, restore


def repair(cfg: Config, run: Path, command: str, stages: Sequence[str] = REPAIRABLE) -> dict[str, Any] | None:
    """Repair ``run`` in place if :func:`~horizonbench.tasks.run_folder.verify.repair_plan` says it
    can; returns the manifest's counts of the run (for the end of the flow), or
    ``None`` when the caller must run every stage (nothing was repaired then, and the
    damaged outputs are marked ``damaged`` in the state until the ordinary rerun's
    ``begin`` marks everything stale)."""
    damage = repair_plan(run, cfg.model_dump(mode="json"), stages, command)
    if damage is None:
        return None
    logger = get_run_logger()
    logger.warning(
        "repairing %d damaged file(s) (%s); the intact outputs are kept as they are",
        len(damage),
        "; ".join(d.line() for d in damage[:5]) + (" ..." if len(damage) > 5 else ""),
    )
    run_folder.begin_repair(run, f"{command} (repair)", {d.output: d.line() for d in damage})
    shutil.rmtree(run / STAGING, ignore_errors=True)
    repaired: list[str] = []
    for stage in REPAIRABLE:  # in pipeline order: the scores are computed from the instances
        if not any(d.stage == stage for d in damage):
            continue
        _run_stage(cfg, run, stage)
        done = restore(run, damage, stage)
        if done is None:
            logger.warning("the %s stage did not give back the recorded bytes: rerunning every stage", stage)
            return None
        repaired += done
        run_folder.current(run, stage)
    shutil.rmtree(run / STAGING, ignore_errors=True)
    manifest = json.loads((run / MANIFEST).read_text(encoding="utf-8"))
    manifest["repaired"] = [
        *(manifest.get("repaired") or []),
        {"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "files": repaired},
    ]
    write_json(manifest, run / MANIFEST)
    logger.info("repaired %s", ", ".join(repaired))
    return manifest.get("counts") or {}


def _run_stage(cfg: Config, run: Path, stage: str) -> None:
    """One stage into staging (nothing promoted: :func:`restore` moves what it must)."""
    if stage == "generate":
        from horizonbench.tasks.generate.stage import generate_instances

        generate_instances(cfg, str(run))
    elif stage == "score":
        from horizonbench.tasks.score.stage import score_attempts

        score_attempts(cfg, str(run))
    else:  # pragma: no cover - REPAIRABLE names only these
        raise ValueError(f"stage {stage} cannot run alone")
