"""What a harness study would cost, from the world sizes and horizons, before any call.

For every episode the estimate builds the world (cheap, no model) and renders the real
prompts of a step with a perfect memory: the observed state as the Updater's state,
the optimal plan's first action and its gold preconditions as the Planner's answer.
Their sizes at ``chars_per_token`` give the tokens of one step; a transcript prompt
grows by one observation per step, so its steps are summed. Two figures per episode:

- *expected*: an agent that solves the world in L* steps, without repairs;
- *ceiling*: T steps, every call's output at ``max_tokens``, every answer repaired the
  allowed number of times (the k-th repair resends the prompt with the k unusable
  answers so far quoted and what was wrong with each), capped by the episode's
  output-token budget (an episode stops at its first call once the budget is spent, so
  it can overrun by at most one call's answers).

A third figure, *at the horizon*: the output of an agent that writes the expected
answers for all T steps (an agent that does not win early runs until T). When it exceeds
the episode's output-token budget, the episodes that fail would stop as
``budget_exceeded`` (counted as failures): :func:`estimate_agent` lists those cells and
:func:`format_world_estimate` warns about each, so the budget can be raised before any
call is paid for.

The cost of the ceiling is an upper bound for a budget (``evaluation.budget_usd``) as
long as the model's memory stays about the size of the world's state: the prompts are
sized with the observed state as the memory, so a model that writes a much larger state
sends longer prompts than either figure. Stored answers are not counted off: a resumed
run costs less than this.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from horizonbench.core.text import aligned_lines
from horizonbench.datasets.worlds.base import Observation, format_action, format_fact
from horizonbench.datasets.worlds.episode import EpisodeSpec
from horizonbench.datasets.worlds.study import environment_class
from horizonbench.harness import prompts as P
from horizonbench.harness.agent import FALLBACK_ACTION, HarnessSettings

#: the longest reason a repair request gives (harness/outputs.read_output cuts at 600)
REPAIR_ERROR_CHARS = 600
#: the note the harness adds to a quoted answer it cut (harness/prompts.repair_messages)
CUT_NOTE_CHARS = 64


@dataclass(frozen=True, slots=True)
class EpisodeEstimate:
    """One episode's calls and tokens: at L* steps (expected) and at the ceiling."""

    calls: int
    input_tokens: int
    output_tokens: int
    calls_max: int
    input_tokens_max: int
    output_tokens_max: int
    #: the first step's largest prompt in tokens (with max_tokens, must fit the context)
    largest_prompt: int
    #: the expected output of all T steps (an episode that is not won runs until T)
    output_tokens_at_horizon: int = 0
    #: the episode's cell, for the per-cell budget warning
    cell: tuple[str, int, int] = ("", 0, 0)
    horizon: int = 0


def _chars(messages: Any) -> int:
    return sum(len(m.content) for m in messages)


def estimate_episode(ep: EpisodeSpec, s: HarnessSettings) -> EpisodeEstimate:
    """The estimate for one episode (its horizon already resolved)."""
    env = environment_class(ep.env)(ep.spec)
    obs, task = env.reset(ep.seed, ep.archetype)
    plan = env.optimal_plan()
    first = format_action(plan[0]) if plan else FALLBACK_ACTION
    pre = tuple(sorted(env.preconditions(plan[0]) or ())) if plan else ()
    state = obs.facts
    facts_json = json.dumps([format_fact(f) for f in state])
    planner_answer = json.dumps(
        {
            "action": first,
            "preconditions": [format_fact(f) for f in pre],
            "expected_effects": [format_fact(f) for f in pre[:1]],
            "confidence": 0.9,
        }
    )
    selfdiag_answer = json.dumps({"valid": True, "missing_preconditions": [], "replan": False})
    last = P.Exchange(first, Observation(1, obs.facts, obs.task, f"{first}: ok"))
    T, L = task.horizon, max(1, task.optimal_length)
    if s.memory == "structured":
        memory_title, memory = "Your world state", P.facts_block(state)
        memory_prompt = _chars(P.updater_messages(task, 1, T, state, last, last.observation))
        memory_out = len(facts_json)
        planner_out = len(planner_answer)
    elif s.memory == "summary":
        summary = " ".join(["word"] * s.summary_words)
        memory_title, memory = "Your summary", summary
        memory_prompt = _chars(
            P.summary_messages(task, 1, T, summary, last, last.observation, s.summary_words)
        )
        memory_out = len(json.dumps({"summary": summary}))
        planner_out = len(planner_answer) + len(facts_json)
    else:
        memory_title, memory = "Transcript so far", P.transcript_block(obs, [])
        memory_prompt = memory_out = 0
        planner_out = len(planner_answer) + len(facts_json)
    planner_prompt = _chars(P.planner_messages(task, 1, T, memory_title, memory, last, wants_state=True))
    selfdiag_prompt = _chars(P.selfdiag_messages(task, 1, T, memory_title, memory, first, pre))
    per_step_in = memory_prompt + planner_prompt + selfdiag_prompt
    per_step_out = memory_out + planner_out + len(selfdiag_answer)
    # a transcript grows by one action and one observation per step, in both calls
    growth = 2 * (len(obs.text) + len(first) + 10) if s.memory == "transcript" else 0

    def input_chars(steps: int) -> int:
        return steps * per_step_in + growth * steps * (steps - 1) // 2

    tok = s.chars_per_token
    calls_step = s.calls_per_step
    tries = 1 + s.repairs
    out_max = min(T * calls_step * tries * s.max_tokens, s.episode_output_tokens + tries * s.max_tokens)
    # what the repairs of one call add to its prompts: the k-th carries k quoted answers
    # (each at max_tokens, cut at REPAIR_QUOTE_CHARS) and k reasons
    quote = min(math.ceil(s.max_tokens * tok), P.REPAIR_QUOTE_CHARS + CUT_NOTE_CHARS)
    repair = quote + len(P.REPAIR.format(error="")) + REPAIR_ERROR_CHARS
    repairs_chars = repair * s.repairs * (s.repairs + 1) // 2
    return EpisodeEstimate(
        calls=L * calls_step,
        input_tokens=math.ceil(input_chars(L) / tok),
        output_tokens=math.ceil(L * per_step_out / tok),
        calls_max=T * calls_step * tries,
        input_tokens_max=math.ceil((tries * input_chars(T) + T * calls_step * repairs_chars) / tok),
        output_tokens_max=out_max,
        largest_prompt=math.ceil(max(memory_prompt, planner_prompt, selfdiag_prompt) / tok),
        output_tokens_at_horizon=math.ceil(T * per_step_out / tok),
        cell=(ep.env, ep.spec.sc, ep.spec.dd),
        horizon=T,
    )


def over_budget_cells(ests: list[EpisodeEstimate], budget: int) -> list[dict[str, Any]]:
    """Per cell (env, sc, dd), in order, the episodes whose expected output at T steps
    exceeds the episode budget: how many of the cell's, the most one needs, and the
    longest horizon. Empty when every episode fits."""
    cells: dict[tuple[str, int, int], list[EpisodeEstimate]] = {}
    for e in ests:
        cells.setdefault(e.cell, []).append(e)
    out = []
    for (env, sc, dd), part in sorted(cells.items()):
        over = [e for e in part if e.output_tokens_at_horizon > budget]
        if over:
            out.append(
                {
                    "env": env,
                    "sc": sc,
                    "dd": dd,
                    "episodes": len(part),
                    "over": len(over),
                    "most_tokens": max(e.output_tokens_at_horizon for e in over),
                    "horizon": max(e.horizon for e in over),
                    "budget": budget,
                }
            )
    return out


def estimate_agent(
    episodes: list[EpisodeSpec], s: HarnessSettings, price: Any, context: int | None
) -> dict[str, Any]:
    """Totals over a study's episodes for one model agent."""
    ests = [estimate_episode(ep, s) for ep in episodes]
    n = max(1, len(ests))
    summed = ("calls", "input_tokens", "output_tokens", "calls_max", "input_tokens_max", "output_tokens_max")
    total = {k: sum(getattr(e, k) for e in ests) for k in summed}
    over = sum(1 for e in ests if context is not None and e.largest_prompt + s.max_tokens > context)
    return {
        "episodes": len(ests),
        "calls_per_episode": total["calls"] / n,
        "calls_per_episode_max": max((e.calls_max for e in ests), default=0),
        "input_tokens_per_episode": total["input_tokens"] / n,
        "output_tokens_per_episode": total["output_tokens"] / n,
        "calls": total["calls"],
        "calls_max": total["calls_max"],
        "input_tokens": total["input_tokens"],
        "output_tokens": total["output_tokens"],
        "input_tokens_max": total["input_tokens_max"],
        "output_tokens_max": total["output_tokens_max"],
        "cost_usd": price.cost(total["input_tokens"], total["output_tokens"]),
        "cost_usd_max": price.cost(total["input_tokens_max"], total["output_tokens_max"]),
        "over_context": over,
        "over_budget_cells": over_budget_cells(ests, s.episode_output_tokens),
    }


def format_world_estimate(rows: list[dict[str, Any]]) -> str:
    head = (
        "world agent",
        "memory",
        "episodes",
        "calls/episode",
        "tokens in/out per episode",
        "calls (max)",
        "cost USD (max)",
        "first prompt over context",
    )
    body = [
        (
            r["agent"],
            r["memory"],
            str(r["episodes"]),
            f"{r['calls_per_episode']:.0f} (max {r['calls_per_episode_max']})",
            f"{r['input_tokens_per_episode']:,.0f} / {r['output_tokens_per_episode']:,.0f}",
            f"{r['calls']:,} ({r['calls_max']:,})",
            f"{r['cost_usd']:.2f} ({r['cost_usd_max']:.2f})",
            str(r["over_context"]),
        )
        for r in rows
    ]
    lines = aligned_lines(head, body)
    calls = sum(r["calls"] for r in rows)
    cost = sum(r["cost_usd"] for r in rows)
    cost_max = sum(r["cost_usd_max"] for r in rows)
    lines.append(
        f"world study: about {calls:,} calls and {cost:.2f} USD if every episode takes L* steps; "
        f"at most {cost_max:.2f} USD; nothing was sent"
    )
    lines.extend(budget_warnings(rows))
    return "\n".join(lines)


def budget_warnings(rows: list[dict[str, Any]]) -> list[str]:
    """One warning per agent and cell whose episodes would outrun the output budget at T."""
    out = []
    for r in rows:
        for c in r.get("over_budget_cells", ()):
            out.append(
                f"warning: {r['agent']} at {c['env']} sc={c['sc']} dd={c['dd']}: {c['over']} of "
                f"{c['episodes']} episodes would write about {c['most_tokens']:,} output tokens in "
                f"T = {c['horizon']} steps, above the episode budget of {c['budget']:,} "
                "(worlds.harness.episode_output_tokens): an episode not won by then stops as "
                "budget_exceeded, counted as a failure"
            )
    return out
