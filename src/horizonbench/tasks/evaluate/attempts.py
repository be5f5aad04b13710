"""Evaluate stage: every model answers every instance ``samples`` times, side by side.

Answers go to the attempt store as they arrive, so an interrupted run loses at most
the calls in flight, and a rerun pays only for what is missing. Every attempt gets a
row, answered or not: failed ones carry their error class and are retried next run.

In Prefect the stage is one task run ``evaluate`` holding the shared engine (one budget,
one interrupt guard, one attempts table) and, beside it, a task run ``evaluate-<model>``
per model that lasts as long as that model's calls and ends in a state saying how the
model did.
"""

from __future__ import annotations

import contextvars
import logging
import sqlite3
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from prefect import get_run_logger, task
from prefect.cache_policies import NONE
from prefect.futures import PrefectFuture
from prefect.states import Cancelled, Completed, Failed, State
from prefect.task_runners import ThreadPoolTaskRunner

from horizonbench.core.registry import get_family
from horizonbench.core.seeding import derive_seed
from horizonbench.core.types import Message
from horizonbench.models import failures as f
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
from horizonbench.tasks.cluster import progress as prog
from horizonbench.tasks.evaluate.rollouts import RolloutConversation
from horizonbench.tasks.run_folder.layout import ATTEMPTS_REL, PROMPTS_REL, instances_rel
from horizonbench.tasks.run_folder.spend import run_budget
from horizonbench.tasks.run_folder.storage import atomic_path, rows_to_table, write_table
from horizonbench.tasks.run_folder.table_parts import read_parts

RUN_TAG_REL = "attempts/run_tag"
#: how long a finished evaluation waits for its model task runs to record their states
MODEL_STATE_WAIT_S = 30.0
#: the same after an interrupt or an error: the exit stays within a few seconds
INTERRUPTED_STATE_WAIT_S = 2.0
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
        rows = evaluated_rows(cfg, fam_name, instance_rows(run, fam_name))
        for mode in fam_spec.modes:
            for row in rows:
                if mode == "plan":
                    messages = family.render_prompt(row, prompt_settings)
                else:
                    messages = family.step_prompt(row, prompt_settings, family.start(row), 1)  # type: ignore[attr-defined]
                out.append((fam_name, mode, row, tuple(messages)))
    return out


def evaluated_rows(cfg: Config, family: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The instances a study evaluates: all of them, except in a training study, whose
    puzzles are evaluated on ``training.evaluate_splits`` only (the models were trained
    on the train split: rolling them out there measures memory, and costs the most)."""
    from horizonbench.schemas.config import training_puzzles

    if cfg.training is None or family not in training_puzzles(cfg):
        return rows
    from horizonbench.datasets.puzzles.steps import assign_splits

    splits = assign_splits(rows, cfg.run.seed, cfg.export.split, cfg.export.in_distribution_max)
    keep = set(cfg.training.evaluate_splits)
    return [r for r in rows if splits[str(r["instance_id"])] in keep]


@dataclass(frozen=True)
class Kept:
    """Each model's own instances of the labels an adaptive design steers, as (family
    label, instance id); every other label's instances are answered by every model."""

    labels: frozenset[str]
    per_model: dict[str, set[tuple[str, str]]]

    def answers(self, model_name: str, fam_name: str, row: dict[str, Any]) -> bool:
        if fam_name not in self.labels:
            return True
        return (fam_name, str(row["instance_id"])) in self.per_model.get(model_name, set())


def design_instances(cfg: Config, run: Path, prompted: Prompted) -> Kept | None:
    """Each model's instances of the adaptive labels (``adaptive/design.parquet``): a
    model pays only for the waves chosen for it, whatever the others asked."""
    from horizonbench.tasks.run_folder.design import adaptive_labels, quotas, read_design, rows_for_model

    labels = adaptive_labels(cfg)
    if not labels:
        return None
    asked = quotas(read_design(run))
    rows: dict[str, list[dict[str, Any]]] = {label: [] for label in labels}
    seen: set[tuple[str, str]] = set()
    for fam_name, _mode, row, _ in prompted:
        key = (fam_name, str(row["instance_id"]))
        if fam_name in rows and key not in seen:
            seen.add(key)
            rows[fam_name].append(row)
    per_model: dict[str, set[tuple[str, str]]] = {}
    for spec in cfg.evaluation.models:
        keep: set[tuple[str, str]] = set()
        for label in labels:
            bins = cfg.families[label].sampling.bins
            assert bins is not None
            difficulty = get_family(label).difficulty
            mine = rows_for_model(bins, rows[label], asked.get((label, spec.name), {}), difficulty)
            keep.update((label, str(r["instance_id"])) for r in mine)
        per_model[spec.name] = keep
    return Kept(frozenset(labels), per_model)


def _answers(kept: Kept | None, model_name: str, fam_name: str, row: dict[str, Any]) -> bool:
    return kept is None or kept.answers(model_name, fam_name, row)


def build_conversations(
    cfg: Config, prompted: Prompted, model_name: str, kept: Kept | None = None
) -> list[RolloutConversation]:
    """One rollout episode per (instance, sample) of every family evaluated by rollout."""
    spec = next(m for m in cfg.evaluation.models if m.name == model_name)
    settings = spec.settings or cfg.evaluation.settings
    out = []
    for fam_name, mode, row, _ in prompted:
        if mode != "rollout" or not _answers(kept, model_name, fam_name, row):
            continue
        family = get_family(fam_name)
        ps = family.prompt_model.model_validate(cfg.families[fam_name].prompt)
        for sample in range(cfg.evaluation.samples):
            out.append(RolloutConversation(family, row, ps, settings, cfg.run.seed, model_name, sample))
    return out


def build_requests(
    cfg: Config, prompted: Prompted, model_name: str, kept: Kept | None = None
) -> list[AttemptRequest]:
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
        if mode == "plan" and _answers(kept, model_name, fam_name, row)
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
    """The call path for one model entry, with its own limits; its calls count against
    the run folder's shared ``budget`` and the model's own cap."""
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
        budget=budget.for_model(spec.name) if budget is not None else None,
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


def state_message(counts: dict[str, Any]) -> str:
    """One line on a model's task run: what was answered, what failed and why."""
    line = f"{counts['answered']} of {counts['attempts']} attempts answered ({counts['reused']} reused)"
    if counts["failed"]:
        classes = ", ".join(f"{k} {n}" for k, n in counts["failed_by_class"].items())
        line += f"; {counts['failed']} failed ({classes}), retried by the next run"
    if counts["stopped"]:
        line += f"; {counts['stopped']}"
    return line


def model_is_broken(counts: dict[str, Any]) -> bool:
    """A model entry that cannot answer: stopped after 401/403/404s, or nothing answered
    although calls were tried. Attempts refused by the shared budget do not count: a cap
    is the user's choice, not the model's fault."""
    if counts["stopped"]:
        return True
    tried = counts["failed"] - counts["failed_by_class"].get(f.BUDGET, 0)
    return counts["answered"] == 0 and tried > 0


class ModelShare:
    """One model's part of the shared :class:`Evaluation`: its runner, the outcomes taken
    from the store, the futures of its calls and rollout episodes.

    The engine's thread (the one a Ctrl-C lands in) submits the calls and waits for all
    models at once; a share lets another thread (the model's Prefect task run) wait for
    this model's futures alone and collect its outcomes and counts. Completion is counted
    through done-callbacks (O(1) per future; ``concurrent.futures.wait`` over thousands
    of futures costs O(n) per call). Not a dataclass on purpose: Prefect walks dataclass
    and list parameters of a task looking for futures to resolve; it passes this through
    untouched.
    """

    def __init__(
        self,
        spec: ModelSpec,
        runner: ModelRunner,
        plan: tuple[list[Outcome | None], list[Future[Any]], list[int]],
        episodes: list[Future[Any]],
        cancel: threading.Event,
    ) -> None:
        self.spec = spec
        self.runner = runner
        self.outcomes, self.futures, self.todo = plan
        self.episodes = episodes
        self.cancel = cancel
        #: set by the orchestrating task when it stops waiting for anything (every exit)
        self.released = threading.Event()
        self._all_done = threading.Event()
        self._lock = threading.Lock()  # collect() once
        self._count_lock = threading.Lock()
        self._left = len(self.futures) + len(self.episodes)
        self._collected: tuple[dict[str, Any], list[Outcome]] | None = None
        if not self._left:
            self._all_done.set()
        for fut in [*self.futures, *self.episodes]:
            fut.add_done_callback(self._one_done)

    def _one_done(self, _fut: Future[Any]) -> None:
        with self._count_lock:
            self._left -= 1
            if self._left == 0:
                self._all_done.set()

    def wait(self) -> bool:
        """Until every future of this model is done (True), or the orchestrating task
        released the share first (False): never longer than the evaluation itself."""
        while not self._all_done.wait(0.25):
            if self.released.is_set():
                return self._all_done.is_set()
        return True

    def error(self) -> BaseException | None:
        """The first exception a call of this model raised (a broken store), if any."""
        for fut in [*self.futures, *self.episodes]:
            if fut.done() and not fut.cancelled() and fut.exception() is not None:
                return fut.exception()
        return None

    def answered_so_far(self) -> int:
        """Attempts of this model answered now, stored ones included (what a rerun will
        not pay for); an episode counts once, when all its turns are answered."""

        def ok(fut: Future[Any]) -> bool:
            return fut.done() and not fut.cancelled() and fut.exception() is None

        done = sum(1 for o in self.outcomes if o is not None and o.answered)
        for fut in self.futures:
            if ok(fut):
                result = fut.result()  # an outcome; a batch job's future: a list of them
                done += sum(1 for o in (result if isinstance(result, list) else [result]) if o.answered)
        for fut in self.episodes:
            if ok(fut):
                turns = fut.result()
                done += bool(turns) and all(o.answered for o in turns)
        return done

    def collect(self) -> tuple[dict[str, Any], list[Outcome]]:
        """This model's outcomes in request order (then its episodes' turns) and its
        counts; computed once, whichever of the two tasks asks first."""
        with self._lock:
            if self._collected is None:
                outcomes = list(self.outcomes)
                if self.spec.batch:
                    results = self.futures[0].result() if self.futures else []
                    for i, outcome in zip(self.todo, results, strict=True):
                        outcomes[i] = outcome
                else:
                    for i, fut in zip(self.todo, self.futures, strict=True):
                        outcomes[i] = fut.result()
                done = [o for o in outcomes if o is not None]
                for fut in self.episodes:
                    done.extend(fut.result())
                self._collected = (model_counts(self.spec, self.runner, done), done)
            return self._collected


@task(name="evaluate-model", cache_policy=NONE)
def evaluate_model(share: ModelShare) -> State:
    """One model's share of the evaluation as its own task run (``evaluate-<model>``).

    It runs while the model's calls do (it is submitted right after them and waits for
    their futures), so the UI shows each model's wall time, side by side with the other
    models', and its final state says how the model did:

    * Completed, with the counts as message, also when some attempts failed: failed
      attempts are rows the next run retries, and the run's own summary reports them; a
      red task run for a model that answered 199 of 200 would read as a broken model.
    * Failed when the model entry cannot answer (stopped after 401/403/404, or nothing
      answered although calls were tried): that is what someone looking at the UI has
      to fix. A call that raised (a broken attempt store) fails it with that error.
    * Cancelled on Ctrl-C/SIGTERM, with how many of its attempts are done and stored.

    No Prefect retries: the engine retries every call already (backoff, Retry-After,
    adaptive concurrency), and this task makes no call of its own to retry.
    """
    finished = share.wait()
    if not finished or share.cancel.is_set():
        total = len(share.outcomes) + len(share.episodes)
        return Cancelled(
            message=f"interrupted: {share.answered_so_far()} of {total} attempts done and stored"
        )
    error = share.error()
    if error is not None:
        raise error
    counts, _ = share.collect()
    message = state_message(counts)
    if model_is_broken(counts):
        # no data: Prefect logs a failed state's repr, and the counts would fill the line
        _no_stray_traceback()
        return Failed(message=message)
    return Completed(message=message, data=counts)


class _NoExceptionNoTraceback(logging.Filter):
    """Drops the traceback request of a record logged with no exception being handled.

    Prefect logs a task that *returned* a Failed state with ``exc_info=True``, outside
    any ``except`` block: the formatter then prints ``NoneType: None`` under the line (in
    the terminal and in the UI's log). A failed model's task run does exactly that."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.exc_info, tuple) and record.exc_info[0] is None:
            record.exc_info = None
        return True


def _no_stray_traceback() -> None:
    """Install the filter on Prefect's task-run logger, once per process."""
    logger = logging.getLogger("prefect.task_runs")
    if not any(isinstance(f, _NoExceptionNoTraceback) for f in logger.filters):
        logger.addFilter(_NoExceptionNoTraceback())


def _in_prefect_run() -> bool:
    """Whether a flow or task run is active: only then are model task runs made (called
    as a plain function, ``evaluate_models.fn``, a task run would start a temporary
    Prefect server for nothing)."""
    from prefect.context import FlowRunContext, TaskRunContext

    return FlowRunContext.get() is not None or TaskRunContext.get() is not None


@contextmanager
def model_task_runner(n_models: int) -> Iterator[ThreadPoolTaskRunner | None]:
    """A thread per model task run, of its own: the flow's task runner may be a Dask
    one, and a share (threads, futures, an open store) cannot travel to a worker."""
    if not _in_prefect_run():
        yield None
        return
    with ThreadPoolTaskRunner(max_workers=max(1, n_models)) as runner:
        yield runner


def submit_outside_transaction(
    runner: ThreadPoolTaskRunner, task_: Any, parameters: dict[str, Any]
) -> PrefectFuture[Any]:
    """Submit ``task_`` as a child task run of this one, but not into this task's
    transaction: when the evaluation is interrupted this task fails, Prefect rolls its
    transaction back, and every child in it would be marked ``RolledBack`` (a Completed
    state) over the Cancelled or Completed state it ended in. The model task runs have
    nothing to roll back. The runner copies the context it is called in, so the child
    sees no transaction (the run contexts, and its parent link, stay)."""
    from prefect.transactions import BaseTransaction

    def submit() -> PrefectFuture[Any]:
        BaseTransaction.__var__.set(None)  # type: ignore[arg-type]  # only in this copy
        return runner.submit(task_, parameters)

    return contextvars.copy_context().run(submit)


def _await_states(futures: dict[str, PrefectFuture[Any]], timeout_s: float) -> None:
    """Wait for the model task runs to reach their final states, bounded: the answers
    are collected already, a slow API must not hold the run (or a Ctrl-C) up."""
    deadline = time.monotonic() + timeout_s
    for fut in futures.values():
        fut.wait(timeout=max(0.0, deadline - time.monotonic()))


def is_store_contention(task: Any, task_run: Any, state: State) -> bool:
    """Retry only a locked or busy attempt store (another run sharing
    ``evaluation.store``): safe, since the store makes a rerun pay only for what is
    missing, and useful, since the lock is released within seconds. Interrupts are never
    retried (Prefect does not retry a KeyboardInterrupt), nor anything deterministic."""
    try:
        err = state.result(raise_on_failure=False)
    except Exception:  # noqa: BLE001 - no readable result: not a case for a retry
        return False
    text = str(err).lower()
    return isinstance(err, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


@task(
    name="evaluate",
    task_run_name="evaluate",
    cache_policy=NONE,
    retries=1,
    retry_delay_seconds=5,
    retry_condition_fn=is_store_contention,
)
def evaluate_models(cfg: Config, run: str) -> dict[str, Any]:
    """Run every configured model side by side; write ``attempts/attempts.parquet``.

    One :class:`Evaluation` runs all models concurrently in this task's thread, with one
    shared budget, one interrupt guard and one set of progress bars; each model's share
    is a task run ``evaluate-<model>`` (see :func:`evaluate_model`) beside it.

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
    specs = cfg.evaluation.models
    kept = design_instances(cfg, run_dir, prompted)
    requests = {spec.name: build_requests(cfg, prompted, spec.name, kept) for spec in specs}
    conversations = {spec.name: build_conversations(cfg, prompted, spec.name, kept) for spec in specs}
    counts: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    shares: dict[str, ModelShare] = {}
    model_runs: dict[str, PrefectFuture[Any]] = {}
    with AttemptStore(path) as store, model_task_runner(len(specs)) as task_runner:
        budget = run_budget(cfg, store, tag)
        if budget.seeded_usd:
            logger.info("the run folder has paid %.4f USD for calls before this run", budget.seeded_usd)
        try:
            runners = {
                spec.name: build_runner(spec, cfg, store, tag=tag, budget=budget, on_event=logger.error)
                for spec in specs
            }
            evaluation = Evaluation(grace_s=cfg.evaluation.interrupt_grace_s)
            units = {spec.name: len(requests[spec.name]) + len(conversations[spec.name]) for spec in specs}
            items = [(f"evaluate {spec.name}", units[spec.name]) for spec in specs]
            with evaluation.guard(sum(units.values())):
                for spec in specs:
                    runner, reqs = runners[spec.name], requests[spec.name]
                    if spec.batch:
                        from horizonbench.models.batch import submit_batch_job  # the SDKs: API runs only

                        plan = submit_batch_job(evaluation, runner, reqs, poll_s=spec.batch_poll_s)
                    else:
                        plan = submit_attempts(evaluation, runner, reqs)
                    # rollout steps depend on the last answer, so they always run live (a
                    # batch API would take hours per step)
                    convs = conversations[spec.name]
                    episodes = []
                    if convs:
                        pool = evaluation.pool(runner, min(runner.max_concurrency, len(convs)))
                        episodes = [pool.submit(run_conversation, runner, c, 10_000) for c in convs]
                    shares[spec.name] = ModelShare(spec, runner, plan, episodes, evaluation.cancel)
                    if task_runner is not None:
                        model_runs[spec.name] = submit_outside_transaction(
                            task_runner,
                            evaluate_model.with_options(task_run_name=f"evaluate-{spec.name}"),
                            {"share": shares[spec.name]},
                        )
                with prog.progress_group(items) as bars:
                    bar_of = dict(zip(runners, bars, strict=True))
                    shown = dict.fromkeys(runners, 0)

                    def on_progress(name: str, done: int) -> None:
                        # done counts this run's futures; stored answers count from the start
                        now = len(requests[name]) - len(shares[name].todo) + done
                        bar_of[name].advance(now - shown[name])
                        shown[name] = now

                    for name in runners:
                        on_progress(name, 0)
                    evaluation.on_progress = on_progress
                    evaluation.run(
                        [(name, [*s.futures, *s.episodes]) for name, s in shares.items()],
                        sum(units.values()),
                    )
            for spec in specs:
                runner = runners[spec.name]
                counts[spec.name], done = shares[spec.name].collect()
                runner.close()
                rows.extend(attempt_row(o, spec.name) for o in done)
                c = counts[spec.name]
                logger.info(
                    "%s: %d attempts (%d reused, %d failed), $%.4f",
                    spec.name,
                    c["attempts"],
                    c["reused"],
                    c["failed"],
                    c["cost_usd_this_run"],
                )
            _await_states(model_runs, MODEL_STATE_WAIT_S)
        finally:
            # on every exit (an interrupt included) the model task runs end at once, and
            # get a moment to record their final state before the runner joins them
            for share in shares.values():
                share.released.set()
            _await_states(model_runs, INTERRUPTED_STATE_WAIT_S)
    write_attempts(rows_to_table(rows, ATTEMPTS_SCHEMA), run_dir / ATTEMPTS_REL)
    if budget.exhausted:
        logger.warning(
            "budget reached (%s): the run folder has paid %.4f USD; later calls were not sent",
            ", ".join(sorted(budget.refused)),
            budget.spent_usd,
        )
    total = {
        "attempts": sum(c["attempts"] for c in counts.values()),
        "answered": sum(c["answered"] for c in counts.values()),
        "failed": sum(c["failed"] for c in counts.values()),
        "cost_usd_this_run": round(budget.spent_this_run_usd, 6),
        "budget_usd": cfg.evaluation.budget_usd,
        "budget_reached": budget.exhausted,
        # which caps refused a call: "total" and/or model names (tasks/run_folder/spend.budget_hint)
        "budget_refused": sorted(budget.refused),
    }
    return {"models": counts, "total": total}
