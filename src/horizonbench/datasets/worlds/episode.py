"""One world-model episode, run and scored step by step (pure: no I/O, no clocks).

The runner resets an environment, then at every step asks the agent for an
:class:`~horizonbench.datasets.worlds.agents.AgentStep`, scores it against the gold
state *the agent could know at that step* (``env.observable_gold()``: everything it
was shown and that still holds as shown; never what it could not have seen), executes
the action, and records what happened. Appendix G's per-step metrics:

- ``jaccard``: world-state fidelity, Jaccard of the agent's state (in the
  environment's canonical spelling) and the observable gold state; a step whose agent
  kept no state scores 0, never "missing" (the reference code turned an unreadable
  state into an empty one silently);
- ``action_valid`` and ``error``: from the environment's gold check (an action text
  that does not parse is invalid and labelled ``unknown_action`` by the environment);
  a step whose agent wrote no usable action at all (``AgentStep.fell_back``: the
  harness's Planner fallback) is executed as no action and is invalid with the label
  ``planner_fallback``, so a model that never answers usably is never scored as one
  that acted validly;
- ``consistent``: the agent's state breaks none of the world's invariants (an item in
  two places...);
- ``dependency_correct``: the declared preconditions equal the action's gold
  preconditions (the *required* set, never the missing one), null when undeclared;
- ``self_check_correct``: the agent's validity verdict equals the gold one, null when
  it gave none.

Per episode: the outcome (``success``, ``failure``, or the agent's own stop:
``budget_exceeded``, a harness limit, or ``format_failure``, the model wrote no usable
action for several steps in a row; neither is a success, and the analysis counts both
as failures), success, steps, ``tau_W`` and ``tau_A`` on the same 0-based step index,
their lag, collapse onset (the first bad step opening a 3-of-next-5 window, a bad step
being invalid, inconsistent or dependency-wrong) and the collapse type, using
:mod:`horizonbench.analysis.trajectory`; for the type, a step's world state is bad when it is
inconsistent or its Jaccard is below 1/2, and its action is bad when it is invalid or
its declared preconditions are wrong (a wrongly justified action is a planning error).
A step where the harness fell back (Planner or memory call: the model's answer was
unusable, so neither its state nor its action says anything about its world model) is
a *format* signal instead: the type is ``format`` when the episode ended as a
``format_failure`` or when fallen-back steps alone fill the onset window's k, and a
Planner fallback never counts as an action error in the other types.

An agent that calls a model (the harness) also has ``step_info()`` and
``episode_info()``: calls, repairs, fallbacks, tokens, memory mode, prompt version,
added to the step and episode rows; offline agents record the defaults below. An agent
may end the episode early by raising :class:`AgentStopped` from ``act``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from horizonbench.analysis import trajectory
from horizonbench.datasets.worlds.agents import Agent, AgentStopped
from horizonbench.datasets.worlds.base import (
    Action,
    BadText,
    Fact,
    Task,
    format_action,
    parse_action,
)
from horizonbench.schemas.worlds import EpisodeSpec

#: the action a text that is no action at all is executed as: a verb no world has, so
#: the environment labels it ``unknown_action`` and time passes
UNREADABLE: Action = ("unreadable_action",)
#: per-step action texts are cut to this length in the steps table
MAX_ACTION_CHARS = 200
#: the error label of a step whose agent wrote no usable action (the harness fell back)
FALLBACK_ERROR = "planner_fallback"
#: the outcome of an episode the agent ended for writing no usable action
FORMAT_FAILURE = "format_failure"
#: the collapse types of world episodes: the analysis's four, and ``format`` (the
#: model's answers were unusable, see the module docstring)
COLLAPSE_TYPES: tuple[str, ...] = (*trajectory.COLLAPSE_TYPES, "format")
#: the harness roles whose fallback makes a step a format signal (not Self-Diag: its
#: verdict never gates the action)
_FORMAT_ROLES = frozenset({"planner", "updater", "summary"})

#: what an agent without ``step_info`` / ``episode_info`` (an offline agent) records
#: in the columns the harness fills: no calls, no memory mode
STEP_INFO_DEFAULTS: Mapping[str, Any] = {
    "calls": 0,
    "repairs": 0,
    "fallbacks": None,
    "output_tokens": 0,
    "confidence": None,
    "replan": None,
}
EPISODE_INFO_DEFAULTS: Mapping[str, Any] = {
    "memory": None,
    "prompt_version": None,
    "calls": 0,
    "repairs": 0,
    "fallbacks": 0,
    "input_tokens": 0,
    "output_tokens": 0,
    "wall_s": 0.0,
    "budget_detail": None,
}


def jaccard(a: frozenset[Fact] | set[Fact], b: frozenset[Fact] | set[Fact]) -> float:
    """|a & b| / |a | b|; two empty states agree (1.0)."""
    union = len(a | b)
    return len(a & b) / union if union else 1.0


@dataclass(frozen=True, slots=True)
class EpisodeResult:
    """One episode's row and its per-step rows (column -> value mappings)."""

    episode: dict[str, Any]
    steps: list[dict[str, Any]]


def episode_id(env: str, agent: str, seed: int, ablation: str = "") -> str:
    """The id of one agent's episode on one world (the world is the seed's); a paired
    ablation plays the backdrop's world, so its id ends with ``:<axis>=<level>``."""
    base = f"{env}:{agent}:{seed:016x}"
    return f"{base}:{ablation}" if ablation else base


def run_episode(env: Any, agent: Agent, ep: EpisodeSpec) -> EpisodeResult:
    """Run ``agent`` on the world of ``ep`` in ``env`` (an environment built for
    ``ep.spec``) until the episode ends, and score it."""
    observation, task = env.reset(ep.seed, ep.archetype)
    agent.begin(observation, task, env if getattr(agent, "privileged", False) else None)
    eid = episode_id(ep.env, agent.name, ep.seed, ep.ablation)
    rows: list[dict[str, Any]] = []
    success = False
    stopped: str | None = None
    step_info = getattr(agent, "step_info", None)
    t = 0
    while True:
        known = frozenset(env.observable_gold())
        branching = len(env.valid_actions())
        try:
            move = agent.act(observation)
        except AgentStopped as stop:
            stopped = stop.outcome
            break
        if move.state is None:
            fidelity, consistent = 0.0, False
        else:
            believed = env.normalize(move.state)
            fidelity = jaccard(believed, known)
            consistent = not env.invariant_violations(believed)
        text = move.action if isinstance(move.action, str) else ""
        fell_back = bool(getattr(move, "fell_back", False))
        try:
            action = UNREADABLE if fell_back else parse_action(text)
        except BadText:
            action = UNREADABLE
        gold_pre = env.preconditions(action)
        dep_ok: bool | None = None
        if move.preconditions is not None:
            dep_ok = gold_pre is not None and trajectory.dependency_correct(
                env.normalize(move.preconditions), gold_pre
            )
        result = env.step(action)
        rows.append(
            {
                "episode_id": eid,
                "env": ep.env,
                "model": agent.name,
                "seed": ep.seed,
                "step": t,
                "action": text[:MAX_ACTION_CHARS],
                "action_read": format_action(action) if action != UNREADABLE else None,
                "action_valid": bool(result.valid),
                "error": FALLBACK_ERROR if fell_back else result.error,
                "jaccard": float(fidelity),
                "state_size": -1 if move.state is None else len(move.state),
                "gold_size": len(known),
                "consistent": bool(consistent),
                "dependency_correct": dep_ok,
                "self_check_correct": None
                if move.expects_valid is None
                else bool(move.expects_valid) == bool(result.valid),
                "valid_actions": branching,
                "mutations": len(result.events),
                **{**STEP_INFO_DEFAULTS, **(step_info() if step_info else {})},
            }
        )
        t += 1
        observation = result.observation
        if result.done:
            success = bool(result.success)
            break
    outcome = stopped or ("success" if success else "failure")
    row = _episode_row(ep, task, agent.name, eid, success, rows, outcome)
    row["outcome"] = outcome
    episode_info = getattr(agent, "episode_info", None)
    row.update({**EPISODE_INFO_DEFAULTS, **(episode_info() if episode_info else {})})
    return EpisodeResult(row, rows)


def _nan(value: int | None) -> float:
    return math.nan if value is None else float(value)


def _format_bad(rows: list[dict[str, Any]]) -> np.ndarray:
    """Per step: the harness fell back on the Planner or the memory call."""
    return np.array(
        [bool(_FORMAT_ROLES.intersection(str(r.get("fallbacks") or "").split(","))) for r in rows],
        dtype=bool,
    )


def _collapse_type(
    world_bad: np.ndarray,
    action_bad: np.ndarray,
    self_bad: np.ndarray | None,
    format_bad: np.ndarray,
    onset: int | None,
    outcome: str,
) -> str | None:
    """The collapse type (module docstring): ``format`` for an episode ended as a
    format failure or whose onset window holds k fallen-back steps; otherwise the
    analysis's rule on the steps' other signals."""
    if outcome == FORMAT_FAILURE:
        return "format"
    if onset is None:
        return None
    if int(format_bad[onset : onset + trajectory.ONSET_WINDOW].sum()) >= trajectory.ONSET_K:
        return "format"
    return trajectory.collapse_type(world_bad, action_bad, self_bad, onset=onset)


def _episode_row(
    ep: EpisodeSpec,
    task: Task,
    model: str,
    eid: str,
    success: bool,
    rows: list[dict[str, Any]],
    outcome: str = "failure",
) -> dict[str, Any]:
    R = np.array([r["jaccard"] for r in rows], dtype=float)
    valid = np.array([r["action_valid"] for r in rows], dtype=bool)
    consistent = np.array([r["consistent"] for r in rows], dtype=bool)
    dep = np.array([r["dependency_correct"] is not False for r in rows], dtype=bool)
    checks = [r["self_check_correct"] for r in rows]
    tw, ta = trajectory.tau_w(R), trajectory.tau_a(valid)
    tw_onset = trajectory.tau_w_onset(R)
    bad = trajectory.bad_steps(valid, consistent, dep)
    onset = trajectory.collapse_onset(bad)
    world_bad = ~consistent | (R < trajectory.TAU_W_THRESHOLD)
    self_bad = (
        np.array([c is False for c in checks], dtype=bool) if any(c is not None for c in checks) else None
    )
    fell_back = np.array([r["error"] == FALLBACK_ERROR for r in rows], dtype=bool)
    ctype = _collapse_type(
        world_bad, (~valid & ~fell_back) | ~dep, self_bad, _format_bad(rows), onset, outcome
    )
    spec = ep.spec
    errors: dict[str, int] = {}
    for r in rows:
        if r["error"]:
            errors[r["error"]] = errors.get(r["error"], 0) + 1
    first_error = next((r["error"] for r in rows if r["error"]), None)
    checked = [c for c in checks if c is not None]
    deps = [r["dependency_correct"] for r in rows if r["dependency_correct"] is not None]
    return {
        "episode_id": eid,
        "env": ep.env,
        "model": model,
        "regime": ep.regime,
        "sc": spec.sc,
        "dd": spec.dd,
        "horizon": spec.horizon,
        "branching": spec.branching,
        "observation": spec.observation,
        "mutation": spec.mutation,
        "archetype": ep.archetype,
        "variant": ep.variant,
        "seed": ep.seed,
        "optimal_length": task.optimal_length,
        "horizon_ratio": float(task.horizon_ratio),
        "horizon_short": bool(task.horizon_short),
        "success": bool(success),
        "steps": len(rows),
        "invalid_actions": int((~valid).sum()),
        "first_error": first_error,
        "error_counts": _format_counts(errors),
        "mean_jaccard": float(R.mean()) if R.size else math.nan,
        "final_jaccard": float(R[-1]) if R.size else math.nan,
        "consistency_rate": float(consistent.mean()) if consistent.size else math.nan,
        "dependency_accuracy": float(np.mean(deps)) if deps else math.nan,
        "self_check_accuracy": float(np.mean(checked)) if checked else math.nan,
        "tau_w": _nan(tw),
        "tau_a": _nan(ta),
        "lag": _nan(None if tw is None or ta is None else tw - ta),
        "tau_w_onset": _nan(tw_onset),
        "lag_onset": _nan(None if tw_onset is None or ta is None else tw_onset - ta),
        "collapse_onset": _nan(onset),
        "collapse_type": ctype,
    }


def _format_counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
