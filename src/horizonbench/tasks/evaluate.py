"""Evaluate stage: every model answers every instance ``samples`` times, resumably.

Answers go to the attempt store as they arrive, so an interrupted run loses at most
the calls in flight, and a rerun pays only for what is missing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from prefect import get_run_logger, task
from prefect.cache_policies import NONE

from horizonbench.core.registry import get_family
from horizonbench.core.seeding import derive_seed
from horizonbench.core.types import Message
from horizonbench.models.attempt_store import AttemptStore, prompt_sha256
from horizonbench.models.base import AttemptRequest
from horizonbench.models.engine import evaluate
from horizonbench.models.factory import build_model
from horizonbench.models.rate_limit import RateLimiter
from horizonbench.schemas.config import Config
from horizonbench.schemas.tables import ATTEMPTS_SCHEMA, PROMPTS_SCHEMA
from horizonbench.tasks import progress as prog
from horizonbench.tasks.storage import rows_to_table, write_table

ATTEMPTS_REL = "attempts/attempts.parquet"
PROMPTS_REL = "prompts/prompts.parquet"


def instance_rows(run: Path, family: str) -> list[dict[str, Any]]:
    return pq.read_table(run / "instances" / family / "part-0.parquet").to_pylist()


Prompted = list[tuple[str, dict[str, Any], tuple[Message, ...]]]


def render_prompts(cfg: Config, run: Path) -> Prompted:
    """(family, instance row, messages) in a fixed order: family, then candidate order.

    Rendered once per instance: every model and sample sees the same prompt.
    """
    out: Prompted = []
    for fam_name, fam_spec in cfg.families.items():
        family = get_family(fam_name)
        prompt_settings = family.prompt_model.model_validate(fam_spec.prompt)
        for row in instance_rows(run, fam_name):
            out.append((fam_name, row, tuple(family.render_prompt(row, prompt_settings))))
    return out


def build_requests(cfg: Config, prompted: Prompted, model_name: str) -> list[AttemptRequest]:
    """Requests in a fixed order: family, instance (candidate order), sample."""
    spec = next(m for m in cfg.evaluation.models if m.name == model_name)
    settings = spec.settings or cfg.evaluation.settings
    return [
        AttemptRequest(
            instance_id=row["instance_id"],
            family=fam_name,
            sample=sample,
            messages=messages,
            temperature=settings.temperature,
            top_p=settings.top_p,
            max_tokens=settings.max_tokens,
            seed=derive_seed(cfg.run.seed, "attempt", model_name, row["instance_id"], sample),
            row=row,
        )
        for fam_name, row, messages in prompted
        for sample in range(cfg.evaluation.samples)
    ]


def prompt_rows(prompted: Prompted) -> list[dict[str, Any]]:
    """The prompts table: exactly what each instance's attempts were sent."""
    return [
        {
            "instance_id": row["instance_id"],
            "family": fam_name,
            "prompt_sha256": prompt_sha256(messages),
            "messages": [{"role": m.role, "content": m.content} for m in messages],
        }
        for fam_name, row, messages in prompted
    ]


def store_path(cfg: Config, run: Path) -> Path:
    return Path(cfg.evaluation.store) if cfg.evaluation.store else run / "attempts" / "store.sqlite"


@task(name="evaluate", cache_policy=NONE)
def evaluate_models(cfg: Config, run: str) -> dict[str, Any]:
    """Run every configured model; write ``attempts/attempts.parquet``; return counts."""
    logger = get_run_logger()
    run_dir = Path(run)
    rows: list[dict[str, Any]] = []
    counts: dict[str, Any] = {}
    path = store_path(cfg, run_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    prompted = render_prompts(cfg, run_dir)
    write_table(rows_to_table(prompt_rows(prompted), PROMPTS_SCHEMA), run_dir / PROMPTS_REL, "prompts")
    with AttemptStore(path) as store:
        for spec in cfg.evaluation.models:
            model = build_model(spec)
            requests = build_requests(cfg, prompted, spec.name)
            with prog.progress(f"evaluate {spec.name}", len(requests)) as bar:
                last = {"done": 0}

                def on_progress(done: int, bar: Any = bar, last: dict[str, int] = last) -> None:
                    bar.advance(done - last["done"])
                    last["done"] = done

                model_rows = evaluate(
                    requests,
                    model,
                    store,
                    limiter=RateLimiter.for_spec(spec),
                    max_concurrency=spec.max_concurrency,
                    on_progress=on_progress,
                )
            errors = sum(1 for r in model_rows if r["error"] is not None)
            reused = sum(1 for r in model_rows if r["reused"])
            counts[spec.name] = {"attempts": len(model_rows), "errors": errors, "reused": reused}
            logger.info(
                "%s: %d attempts (%d reused, %d failed calls)", spec.name, len(model_rows), reused, errors
            )
            rows.extend(model_rows)
    write_table(rows_to_table(rows, ATTEMPTS_SCHEMA), run_dir / ATTEMPTS_REL, "attempts")
    return counts
