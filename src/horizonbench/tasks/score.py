"""Score stage: parse every answer and replay it in its family's simulator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from prefect import task
from prefect.cache_policies import NONE

from horizonbench.core.registry import get_family
from horizonbench.core.types import Score
from horizonbench.schemas.config import Config
from horizonbench.schemas.tables import SCORES_SCHEMA
from horizonbench.tasks import progress as prog
from horizonbench.tasks.evaluate import instance_rows
from horizonbench.tasks.layout import ATTEMPTS_REL, SCORES_REL
from horizonbench.tasks.rollouts import score_rollout
from horizonbench.tasks.storage import rows_to_table, staged, write_table


def score_rows(
    attempts: list[dict[str, Any]], instances: dict[tuple[str, str], dict[str, Any]]
) -> list[dict[str, Any]]:
    """One score row per whole-plan attempt and one per rollout episode. An attempt (or
    an episode with a step) without an answer gets ``answered=False`` and its error
    class: it is counted, never scored as a model failure (a provider outage is not a
    reasoning failure), and a rerun retries it."""
    out: list[tuple[int, dict[str, Any]]] = []
    families: dict[str, Any] = {}
    episodes: dict[tuple[str, str, str, int], list[int]] = {}
    # visit each instance's attempts together (families cache per-instance work), then
    # restore the attempts' order
    order = sorted(range(len(attempts)), key=lambda i: (attempts[i]["family"], attempts[i]["instance_id"]))
    with prog.progress("score", len(attempts)) as bar:
        for i in order:
            att = attempts[i]
            bar.advance()
            if att.get("mode", "plan") == "rollout":
                episodes.setdefault(
                    (att["model"], att["family"], att["instance_id"], int(att["sample"])), []
                ).append(i)
                continue
            row = instances[(att["family"], att["instance_id"])]
            if att["response"] is None:
                out.append((i, _unanswered(att, row, att.get("error_class"))))
                continue
            fam = families.setdefault(att["family"], get_family(att["family"]))
            s = fam.score(row, fam.parse_answer(att["response"]))
            out.append((i, _scored(att, row, s, "plan")))
    for idxs in episodes.values():
        turns = [attempts[i] for i in idxs]
        att = min(turns, key=lambda t: t["turn"])
        row = instances[(att["family"], att["instance_id"])]
        fam = families.setdefault(att["family"], get_family(att["family"]))
        s = score_rollout(fam, row, turns)
        if s is None:
            failed = [t for t in sorted(turns, key=lambda t: t["turn"]) if t["response"] is None]
            why = failed[0].get("error_class") if failed else "incomplete"
            out.append((min(idxs), _unanswered(att, row, why)))
        else:
            out.append((min(idxs), _scored(att, row, s, "rollout")))
    return [row for _, row in sorted(out, key=lambda pair: pair[0])]


def _base(att: dict[str, Any], row: dict[str, Any], mode: str) -> dict[str, Any]:
    return {
        "model": att["model"],
        "instance_id": att["instance_id"],
        "family": att["family"],
        "mode": mode,
        "sample": att["sample"],
    }


def _scored(att: dict[str, Any], row: dict[str, Any], s: Score, mode: str) -> dict[str, Any]:
    extra = s.extra or {}
    return {
        **_base(att, row, mode),
        "answered": True,
        "error_class": None,
        "solution_length": row["solution_length"],
        "num_keys": row.get("num_keys"),
        "noise_ratio": row.get("noise_ratio"),
        "shuffle_ratio": row.get("shuffle_ratio"),
        "success": s.success,
        "valid": s.valid,
        "exact_match": s.exact_match,
        "progress_ratio": s.progress_ratio,
        "precision": s.precision,
        "precision_positional": extra.get("precision_positional"),
        "recall": s.recall,
        "plan_length": s.plan_length,
        "violation": s.violation,
        "first_violation_step": s.first_violation_step,
        "parse_error": extra.get("parse_error"),
        "n": row.get("n"),
        "optimality_gap": extra.get("optimality_gap"),
        "move_legality_rate": extra.get("move_legality_rate"),
        "steps_taken": extra.get("steps_taken"),
    }


def _unanswered(att: dict[str, Any], row: dict[str, Any], error_class: str | None) -> dict[str, Any]:
    return {
        **_base(att, row, att.get("mode", "plan")),
        "answered": False,
        "error_class": error_class or "other",
        "solution_length": row["solution_length"],
        "num_keys": row.get("num_keys"),
        "noise_ratio": row.get("noise_ratio"),
        "shuffle_ratio": row.get("shuffle_ratio"),
        "success": False,
        "valid": False,
        "exact_match": False,
        "progress_ratio": 0.0,
        "precision": 0.0,
        "precision_positional": None,
        "recall": 0.0,
        "plan_length": 0,
        "violation": None,
        "first_violation_step": None,
        "parse_error": None,
        "n": row.get("n"),
        "optimality_gap": None,
        "move_legality_rate": None,
        "steps_taken": None,
    }


@task(name="score", cache_policy=NONE)
def score_attempts(cfg: Config, run: str) -> str:
    """Write the scores table to staging (it is promoted after validation)."""
    run_dir = Path(run)
    attempts = pq.read_table(run_dir / ATTEMPTS_REL).to_pylist()
    # instance ids are unique within a family label only: sweep settings that change
    # the text alone share their mazes, and so their ids
    instances = {(fam, r["instance_id"]): r for fam in cfg.families for r in instance_rows(run_dir, fam)}
    rows = score_rows(attempts, instances)
    path = staged(run_dir, SCORES_REL)
    write_table(rows_to_table(rows, SCORES_SCHEMA), path, "scores")
    return str(path)
