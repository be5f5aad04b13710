"""Real models on the world-model study: every model agent plays every episode of the
study through the three-call harness, episodes of one model side by side under its
limits, every call through the evaluation engine and its attempt store.

The episodes are the study's own (the same seeds, horizons and worlds the offline
agents meet). A call that still fails after the engine's retries leaves its episode
unfinished: it gets no row, the flow ends Failed saying how many, and the next run
replays the stored calls and continues it. Ctrl-C keeps every answer that arrived
(:class:`~horizonbench.models.engine.EvaluationInterrupted`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NONE

from horizonbench.datasets.worlds.episode import EpisodeResult, EpisodeSpec, episode_id, run_episode
from horizonbench.datasets.worlds.study import environment_class, resolve_horizon
from horizonbench.harness.agent import CallFailed, HarnessAgent, HarnessSettings
from horizonbench.models.attempt_store import AttemptStore
from horizonbench.models.base import AttemptRequest
from horizonbench.models.engine import Evaluation, ModelRunner, Outcome, attempt_row
from horizonbench.schemas.config import Config, ModelSpec, WorldAgentSpec
from horizonbench.tasks.cluster import progress as prog
from horizonbench.tasks.evaluate.attempts import build_runner, run_tag, store_path
from horizonbench.tasks.run_folder.spend import run_budget

WORLD_ATTEMPTS_REL = "attempts/world_attempts.parquet"


def model_agents(cfg: Config) -> list[WorldAgentSpec]:
    """The study's agents that are models (config order)."""
    if cfg.worlds is None:
        return []
    return [a for a in cfg.worlds.agents if a.kind == "model"]


def model_spec(cfg: Config, agent: WorldAgentSpec) -> ModelSpec:
    return next(m for m in cfg.evaluation.models if m.name == agent.model)


def harness_settings(cfg: Config, agent: WorldAgentSpec) -> HarnessSettings:
    """The harness settings of a model agent: its model's sampling and limits, the
    study's budgets."""
    assert cfg.worlds is not None
    spec = model_spec(cfg, agent)
    gen = spec.settings or cfg.evaluation.settings
    h = cfg.worlds.harness
    return HarnessSettings(
        memory=agent.memory_mode,
        temperature=gen.temperature,
        top_p=gen.top_p,
        max_tokens=gen.max_tokens,
        context_tokens=spec.context_tokens,
        episode_output_tokens=h.episode_output_tokens,
        episode_wall_s=h.episode_wall_s,
        repairs=h.repairs,
        summary_words=h.summary_words,
        chars_per_token=h.chars_per_token,
        fallback_streak=h.fallback_streak,
    )


def study_episodes(cfg: Config) -> list[EpisodeSpec]:
    """The study's episodes with their horizons resolved (the offline agents' worlds)."""
    assert cfg.worlds is not None
    factor = cfg.worlds.horizon_factor
    return [resolve_horizon(ep, factor) for ep in cfg.worlds.study().episodes(cfg.run.seed)]


@dataclass
class Played:
    """One model episode: its result (None when a call failed for good) and every
    call's outcome, in order."""

    result: EpisodeResult | None
    outcomes: list[Outcome] = field(default_factory=list)
    failure: str | None = None


def play_episode(
    call: Callable[[AttemptRequest], Outcome],
    agent: WorldAgentSpec,
    settings: HarnessSettings,
    ep: EpisodeSpec,
    root_seed: int,
) -> Played:
    """One harness episode (thread-safe: its own environment and agent)."""
    outcomes: list[Outcome] = []

    def recorded(request: AttemptRequest) -> Outcome:
        outcome = call(request)
        outcomes.append(outcome)
        return outcome

    env = environment_class(ep.env)(ep.spec)
    harness = HarnessAgent(
        agent.name,
        recorded,
        settings,
        episode_id=episode_id(ep.env, agent.name, ep.seed, ep.ablation),
        root_seed=root_seed,
    )
    try:
        result = run_episode(env, harness, ep)
    except CallFailed as failed:
        return Played(None, outcomes, failed.outcome.error_class or "other")
    return Played(result, outcomes)


def _counts(runner: ModelRunner, played: list[Played]) -> dict[str, Any]:
    results = [p.result for p in played if p.result is not None]
    outcomes = [o for p in played for o in p.outcomes]
    answered = [o.completion for o in outcomes if o.completion is not None]
    fresh = [o.completion for o in outcomes if o.completion is not None and not o.reused]
    unfinished = Counter(p.failure for p in played if p.result is None)
    fallbacks = Counter(
        role
        for r in results
        for step in r.steps
        if step["fallbacks"]
        for role in str(step["fallbacks"]).split(",")
    )
    return {
        "episodes": len(played),
        "finished": len(results),
        "unfinished": sum(unfinished.values()),
        "unfinished_by_class": dict(sorted(unfinished.items())),
        "successes": sum(1 for r in results if r.episode["success"]),
        "budget_exceeded": sum(1 for r in results if r.episode["outcome"] == "budget_exceeded"),
        "format_failures": sum(1 for r in results if r.episode["outcome"] == "format_failure"),
        "calls": len(outcomes),
        "reused": sum(1 for o in outcomes if o.reused),
        "repairs": sum(int(r.episode["repairs"]) for r in results),
        "fallbacks": sum(fallbacks.values()),
        "fallbacks_by_role": dict(sorted(fallbacks.items())),
        "input_tokens": sum(c.input_tokens for c in answered),
        "output_tokens": sum(c.output_tokens for c in answered),
        "cost_usd": round(sum(c.cost_usd for c in answered), 6),
        "cost_usd_this_run": round(sum(c.cost_usd for c in fresh), 6),
        "stopped": runner.stopped,
    }


@task(name="world-models", cache_policy=NONE)
def run_world_models(cfg: Config, run: str) -> dict[str, Any]:
    """Every model agent on every episode of the study. Returns the episode, step and
    attempt rows and per-agent counts; raises EvaluationInterrupted on Ctrl-C."""
    logger = get_run_logger()
    agents = model_agents(cfg)
    out: dict[str, Any] = {"episodes": [], "steps": [], "attempts": [], "agents": {}}
    if not agents:
        return out
    run_dir = Path(run)
    episodes = study_episodes(cfg)
    path = store_path(cfg, run_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tag = run_tag(run_dir)
    with AttemptStore(path) as store:
        # the same caps as the evaluation stage, over what the folder has paid so far
        budget = run_budget(cfg, store, tag)
        runners: dict[str, ModelRunner] = {}
        for agent in agents:
            spec = model_spec(cfg, agent)
            if spec.name not in runners:
                runners[spec.name] = build_runner(
                    spec, cfg, store, tag=tag, budget=budget, on_event=logger.error
                )
        evaluation = Evaluation(grace_s=cfg.evaluation.interrupt_grace_s)
        work = []
        with evaluation.guard(len(agents) * len(episodes)):
            for agent in agents:
                runner = runners[model_spec(cfg, agent).name]
                settings = harness_settings(cfg, agent)
                pool = evaluation.pool(runner, min(runner.max_concurrency, len(episodes)))
                futures = [
                    pool.submit(play_episode, runner.attempt, agent, settings, ep, cfg.run.seed)
                    for ep in episodes
                ]
                work.append((agent.name, futures))
            with prog.progress_group([(f"world episodes {a.name}", len(episodes)) for a in agents]) as bars:
                bar_of = dict(zip([a.name for a in agents], bars, strict=True))
                shown = dict.fromkeys(bar_of, 0)

                def on_progress(name: str, done: int) -> None:
                    bar_of[name].advance(done - shown[name])
                    shown[name] = done

                evaluation.on_progress = on_progress
                evaluation.run(work, len(agents) * len(episodes))
        for agent, (_, futures) in zip(agents, work, strict=True):
            spec = model_spec(cfg, agent)
            played = [f.result() for f in futures]
            for p in played:
                if p.result is not None:
                    out["episodes"].append(p.result.episode)
                    out["steps"].extend(p.result.steps)
                out["attempts"].extend(attempt_row(o, spec.name) for o in p.outcomes)
            counts = _counts(runners[spec.name], played)
            out["agents"][agent.name] = counts
            logger.info(
                "%s (%s, %s memory): %d of %d episodes finished, %d won, %d budget_exceeded, "
                "%d format_failure, %d calls (%d reused), %d repairs, %d fallbacks%s, $%.4f",
                agent.name,
                spec.name,
                agent.memory_mode,
                counts["finished"],
                counts["episodes"],
                counts["successes"],
                counts["budget_exceeded"],
                counts["format_failures"],
                counts["calls"],
                counts["reused"],
                counts["repairs"],
                counts["fallbacks"],
                f" ({', '.join(f'{k} {v}' for k, v in counts['fallbacks_by_role'].items())})"
                if counts["fallbacks"]
                else "",
                counts["cost_usd_this_run"],
            )
        for runner in runners.values():
            runner.close()
    # which caps refused a call: "total" and/or model names (tasks/run_folder/spend.budget_hint)
    out["budget_refused"] = sorted(budget.refused)
    return out


def world_estimate_rows(cfg: Config) -> list[dict[str, Any]]:
    """The dry-run estimate of every model agent (harness/estimate.py), no call made."""
    from horizonbench.harness.estimate import estimate_agent

    agents = model_agents(cfg)
    if not agents:
        return []
    episodes = study_episodes(cfg)
    rows = []
    for agent in agents:
        spec = model_spec(cfg, agent)
        row = estimate_agent(episodes, harness_settings(cfg, agent), spec.price(), spec.context_tokens)
        rows.append({"agent": agent.name, "model": spec.name, "memory": agent.memory_mode, **row})
    return rows


def unfinished_summary(agents: dict[str, Any], capped: bool = False) -> str | None:
    """The one line saying how many model episodes are unfinished, or None. ``capped``:
    a budget cap refused calls, and its own line says so: a rerun without a larger cap
    sends none of those, so only the episodes that failed otherwise are promised."""
    parts = [
        f"{name}: {c['unfinished']} ({', '.join(f'{k} {v}' for k, v in c['unfinished_by_class'].items())})"
        for name, c in agents.items()
        if c["unfinished"]
    ]
    if not parts:
        return None
    total = sum(c["unfinished"] for c in agents.values())
    line = f"{total} world episodes are unfinished because a call got no answer ({'; '.join(parts)})"
    hint = rerun_hint(total, agents.values(), "unfinished_by_class", "resume", capped)
    return f"{line}; {hint}" if hint else line


def rerun_hint(total: int, counts: Any, by_class: str, verb: str, capped: bool) -> str | None:
    """What a rerun of the same command does for ``total`` attempts or episodes without
    an answer: all of them, or (``capped``) only those a budget cap did not stop (None
    when it stopped them all: the budget's own line says how to raise it)."""
    stopped = sum(c.get(by_class, {}).get("budget", 0) for c in counts) if capped else 0
    if not stopped:
        return f"rerun the same command to {verb} them"
    if stopped >= total:
        return None
    return f"rerun the same command to {verb} the {total - stopped} the budget did not stop"
