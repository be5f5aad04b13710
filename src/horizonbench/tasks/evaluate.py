"""Evaluate stage: every model answers every instance ``samples`` times, side by side.

Answers go to the attempt store as they arrive, so an interrupted run loses at most
the calls in flight, and a rerun pays only for what is missing. Every attempt gets a
row, answered or not: failed ones carry their error class and are retried next run.
"""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from prefect import get_run_logger, task
from prefect.cache_policies import NONE

from horizonbench.core.registry import get_family
from horizonbench.core.seeding import derive_seed
from horizonbench.core.types import Message
from horizonbench.models.attempt_store import AttemptStore, prompt_sha256
from horizonbench.models.base import AttemptRequest
from horizonbench.models.budget import Budget
from horizonbench.models.engine import (
    Evaluation,
    ModelRunner,
    Outcome,
    attempt_row,
    run_conversation,
    submit_attempts,
)
from horizonbench.models.factory import build_model
from horizonbench.models.rate_limit import RateLimiter
from horizonbench.models.retry import RetryPolicy
from horizonbench.schemas.config import Config, ModelSpec
from horizonbench.schemas.tables import ATTEMPTS_SCHEMA, PROMPTS_SCHEMA, with_version
from horizonbench.tasks import progress as prog
from horizonbench.tasks.layout import ATTEMPTS_REL, PROMPTS_REL, instances_rel
from horizonbench.tasks.rollouts import RolloutConversation
from horizonbench.tasks.storage import atomic_path, rows_to_table, write_table
from horizonbench.tasks.table_parts import read_parts

RUN_TAG_REL = "attempts/run_tag"
#: rows per row group of the attempts table
ATTEMPT_ROW_GROUP = 5_000


def write_attempts(table: pa.Table, dest: Path) -> Path:
    """The attempts table, in row groups of ``ATTEMPT_ROW_GROUP`` rows: the score stage
    streams it a slice at a time (answers run to kilobytes each)."""
    table = table.replace_schema_metadata(with_version(table.schema, "attempts").metadata)
    with atomic_path(dest) as tmp:
        pq.write_table(
            table, tmp, compression="zstd", write_statistics=True, row_group_size=ATTEMPT_ROW_GROUP
        )
    return dest


def instance_rows(run: Path, family: str) -> list[dict[str, Any]]:
    return read_parts(run / instances_rel(family)).to_pylist()


Prompted = list[tuple[str, str, dict[str, Any], tuple[Message, ...]]]


def render_prompts(cfg: Config, run: Path) -> Prompted:
    """(family, mode, instance row, messages) in a fixed order: family, mode, then
    candidate order. Rendered once per instance: every model and sample sees the same
    prompt. A rollout's entry is its first step (later steps depend on the answers)."""
    out: Prompted = []
    for fam_name, fam_spec in cfg.families.items():
        family = get_family(fam_name)
        prompt_settings = family.prompt_model.model_validate(fam_spec.prompt)
        rows = instance_rows(run, fam_name)
        for mode in fam_spec.modes:
            for row in rows:
                if mode == "plan":
                    messages = family.render_prompt(row, prompt_settings)
                else:
                    messages = family.step_prompt(row, prompt_settings, family.start(row), 1)  # type: ignore[attr-defined]
                out.append((fam_name, mode, row, tuple(messages)))
    return out


def build_conversations(cfg: Config, prompted: Prompted, model_name: str) -> list[RolloutConversation]:
    """One rollout episode per (instance, sample) of every family evaluated by rollout."""
    spec = next(m for m in cfg.evaluation.models if m.name == model_name)
    settings = spec.settings or cfg.evaluation.settings
    out = []
    for fam_name, mode, row, _ in prompted:
        if mode != "rollout":
            continue
        family = get_family(fam_name)
        ps = family.prompt_model.model_validate(cfg.families[fam_name].prompt)
        for sample in range(cfg.evaluation.samples):
            out.append(RolloutConversation(family, row, ps, settings, cfg.run.seed, model_name, sample))
    return out


def build_requests(cfg: Config, prompted: Prompted, model_name: str) -> list[AttemptRequest]:
    """Whole-plan requests in a fixed order: family, instance (candidate order), sample."""
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
        for fam_name, mode, row, messages in prompted
        if mode == "plan"
        for sample in range(cfg.evaluation.samples)
    ]


def prompt_rows(prompted: Prompted) -> list[dict[str, Any]]:
    """The prompts table: exactly what each instance's attempts were sent."""
    return [
        {
            "instance_id": row["instance_id"],
            "family": fam_name,
            "mode": mode,
            "prompt_sha256": prompt_sha256(messages),
            "messages": [{"role": m.role, "content": m.content} for m in messages],
        }
        for fam_name, mode, row, messages in prompted
    ]


def store_path(cfg: Config, run: Path) -> Path:
    return Path(cfg.evaluation.store) if cfg.evaluation.store else run / "attempts" / "store.sqlite"


def run_tag(run: Path) -> str:
    """This run folder's identity in the attempt store: made once, kept across reruns, so
    ``reuse: run`` resumes its own answers and never serves another night's."""
    path = run / RUN_TAG_REL
    if path.exists():
        return path.read_text(encoding="utf-8").strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    tag = uuid.uuid4().hex
    tmp = path.with_suffix(".tmp")
    tmp.write_text(tag, encoding="utf-8")
    tmp.replace(path)
    return tag


def build_runner(
    spec: ModelSpec,
    cfg: Config,
    store: AttemptStore,
    *,
    tag: str,
    budget: Budget | None,
    on_event: Any = None,
) -> ModelRunner:
    """The call path for one model entry, with its own limits."""
    limiter = None
    if spec.requests_per_minute is not None or spec.tokens_per_minute is not None:
        limiter = RateLimiter(spec.requests_per_minute, spec.tokens_per_minute, window_s=spec.rate_window_s)
    return ModelRunner(
        build_model(spec),
        store,
        limiter=limiter,
        max_concurrency=spec.max_concurrency,
        retry=RetryPolicy(
            max_retries=spec.max_retries,
            base_s=spec.backoff_base_s,
            max_backoff_s=spec.backoff_max_s,
            retry_after_cap_s=spec.retry_after_cap_s,
        ),
        stop_after_errors=spec.stop_after_errors,
        tpm_counts_requested=spec.counts_requested_tokens(),
        price=spec.price(),
        budget=budget,
        reuse=cfg.evaluation.reuse,
        run_tag=tag,
        on_event=on_event,
        rng_seed=derive_seed(cfg.run.seed, "retry", spec.name),
    )


def model_counts(spec: ModelSpec, runner: ModelRunner, outcomes: list[Outcome]) -> dict[str, Any]:
    """What the manifest and the report say about one model's attempts."""
    answered = [o for o in outcomes if o.completion is not None]
    fresh = [o for o in answered if not o.reused]
    failed = Counter(o.error_class or "other" for o in outcomes if o.completion is None)
    price = spec.price()
    return {
        "attempts": len(outcomes),
        "answered": len(answered),
        "reused": sum(1 for o in answered if o.reused),
        "failed": sum(failed.values()),
        "failed_by_class": dict(sorted(failed.items())),
        "calls": runner.calls,
        "rate_limited": runner.throttled,
        "concurrency_cuts": runner.gate.cuts,
        "input_tokens": sum(o.completion.input_tokens for o in answered if o.completion),
        "output_tokens": sum(o.completion.output_tokens for o in answered if o.completion),
        # what the answers cost when they were made, and what this run paid
        "cost_usd": round(sum(o.completion.cost_usd for o in answered if o.completion), 6),
        "cost_usd_this_run": round(sum(o.completion.cost_usd for o in fresh if o.completion), 6),
        "price": {
            "input_per_mtok": price.input_per_mtok,
            "output_per_mtok": price.output_per_mtok,
            "source": price.source,
        },
        "served_models": sorted(
            {o.completion.served_model for o in answered if o.completion and o.completion.served_model}
        ),
        "stopped": runner.stopped,
    }


@task(name="evaluate", cache_policy=NONE)
def evaluate_models(cfg: Config, run: str) -> dict[str, Any]:
    """Run every configured model side by side; write ``attempts/attempts.parquet``.

    Returns ``{"models": per-model counts (see :func:`model_counts`), "total": ...}``. Raises
    ``EvaluationInterrupted`` on Ctrl-C/SIGTERM after keeping what arrived.
    """
    logger = get_run_logger()
    run_dir = Path(run)
    path = store_path(cfg, run_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    prompted = render_prompts(cfg, run_dir)
    write_table(rows_to_table(prompt_rows(prompted), PROMPTS_SCHEMA), run_dir / PROMPTS_REL, "prompts")
    tag = run_tag(run_dir)
    budget = Budget(cfg.evaluation.budget_usd)
    specs = cfg.evaluation.models
    requests = {spec.name: build_requests(cfg, prompted, spec.name) for spec in specs}
    conversations = {spec.name: build_conversations(cfg, prompted, spec.name) for spec in specs}
    counts: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    with AttemptStore(path) as store:
        runners = {
            spec.name: build_runner(spec, cfg, store, tag=tag, budget=budget, on_event=logger.error)
            for spec in specs
        }
        evaluation = Evaluation(grace_s=cfg.evaluation.interrupt_grace_s)
        units = {spec.name: len(requests[spec.name]) + len(conversations[spec.name]) for spec in specs}
        items = [(f"evaluate {spec.name}", units[spec.name]) for spec in specs]
        plans: dict[str, tuple[list[Outcome | None], list[Any], list[int]]] = {}
        episodes: dict[str, list[Any]] = {}
        with evaluation.guard(sum(units.values())):
            for spec in specs:
                runner, reqs = runners[spec.name], requests[spec.name]
                if spec.batch:
                    from horizonbench.models.batch import submit_batch_job  # the SDKs: API runs only

                    plans[spec.name] = submit_batch_job(evaluation, runner, reqs, poll_s=spec.batch_poll_s)
                else:
                    plans[spec.name] = submit_attempts(evaluation, runner, reqs)
                # rollout steps depend on the last answer, so they always run live (a batch
                # API would take hours per step)
                convs = conversations[spec.name]
                episodes[spec.name] = []
                if convs:
                    pool = evaluation.pool(runner, min(runner.max_concurrency, len(convs)))
                    episodes[spec.name] = [pool.submit(run_conversation, runner, c, 10_000) for c in convs]
            with prog.progress_group(items) as bars:
                bar_of = dict(zip(runners, bars, strict=True))
                shown = dict.fromkeys(runners, 0)

                def on_progress(name: str, done: int) -> None:
                    # done counts this run's futures; stored answers count from the start
                    now = len(requests[name]) - len(plans[name][2]) + done
                    bar_of[name].advance(now - shown[name])
                    shown[name] = now

                for name in runners:
                    on_progress(name, 0)
                evaluation.on_progress = on_progress
                evaluation.run(
                    [(name, [*plan[1], *episodes[name]]) for name, plan in plans.items()], sum(units.values())
                )
        for spec in specs:
            outcomes, futures, todo = plans[spec.name]
            if spec.batch:
                results = futures[0].result() if futures else []
                for i, outcome in zip(todo, results, strict=True):
                    outcomes[i] = outcome
            else:
                for i, fut in zip(todo, futures, strict=True):
                    outcomes[i] = fut.result()
            done = [o for o in outcomes if o is not None]
            for fut in episodes[spec.name]:
                done.extend(fut.result())
            runner = runners[spec.name]
            counts[spec.name] = model_counts(spec, runner, done)
            runner.close()
            for o in done:
                rows.append(attempt_row(o, spec.name))
            c = counts[spec.name]
            logger.info(
                "%s: %d attempts (%d reused, %d failed), $%.4f",
                spec.name,
                c["attempts"],
                c["reused"],
                c["failed"],
                c["cost_usd_this_run"],
            )
    write_attempts(rows_to_table(rows, ATTEMPTS_SCHEMA), run_dir / ATTEMPTS_REL)
    if budget.exhausted:
        logger.warning(
            "evaluation.budget_usd (%.2f) reached: later calls were not sent", budget.limit_usd or 0
        )
    total = {
        "attempts": sum(c["attempts"] for c in counts.values()),
        "answered": sum(c["answered"] for c in counts.values()),
        "failed": sum(c["failed"] for c in counts.values()),
        "cost_usd_this_run": round(budget.spent_usd, 6),
        "budget_usd": cfg.evaluation.budget_usd,
        "budget_reached": budget.exhausted,
    }
    return {"models": counts, "total": total}
