"""A world-model study: which episodes a config asks for, their seeds, and running a
shard of them with offline agents (pure: the Prefect task does the Dask and the files).

A study crosses environments x grid cells (sc, dd) x archetypes x variants on a regime
backdrop of Table 11, optionally with one-axis overrides (an ablation). Every episode's
seed is :func:`~horizonbench.datasets.worlds.base.episode_seed` of the root seed and the
episode's coordinates (environment, the six axes, archetype, variant), so every agent
meets the same worlds, the seeds can be published, and they never depend on which
worker ran what.

The horizon. The paper's backdrop horizon T = 40 is shorter than the optimal plan of
most sc >= 20 worlds here (StatefulPuzzle's median L* is 36-63 at sc = 20 and 62-117 at
sc = 40), and an episode with T < L* cannot be won by any agent: it is flagged
(``horizon_short``) and left out of success rates. A study can instead give T relative
to each world's optimal plan (``horizon_factor``: T = ceil(factor x L*)), which keeps
every cell measurable; the seed then records "relative", not the factor or the
resulting T, so the worlds are the same whatever the factor (a horizon ablation
compares like with like).
"""

from __future__ import annotations

import dataclasses
import importlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from horizonbench.datasets.worlds.agents import make_agent
from horizonbench.datasets.worlds.base import HORIZON_MAX
from horizonbench.datasets.worlds.episode import EpisodeSpec, run_episode
from horizonbench.schemas.worlds import Study

__all__ = ["AgentSpec", "ENVIRONMENTS", "Study", "environment_class", "resolve_horizon", "run_shard"]

#: environment name -> "module:class" (imported on first use)
ENVIRONMENTS: Mapping[str, str] = {
    "stateful_puzzle": "horizonbench.datasets.worlds.stateful_puzzle:StatefulPuzzle",
    "graph_nav": "horizonbench.datasets.worlds.graph_nav:GraphNav",
    "tool_dag": "horizonbench.datasets.worlds.tool_dag:ToolDAG",
}


def environment_class(name: str) -> type:
    """The class of environment ``name``; ``KeyError`` naming the known ones."""
    target = ENVIRONMENTS.get(name)
    if target is None:
        raise KeyError(f"unknown environment {name!r} (known: {', '.join(ENVIRONMENTS)})")
    module, cls = target.split(":")
    return getattr(importlib.import_module(module), cls)


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """An offline agent of a study: its table name, kind and parameters."""

    name: str
    kind: str
    params: Mapping[str, Any] = field(default_factory=dict)


def resolve_horizon(ep: EpisodeSpec, factor: float | None) -> EpisodeSpec:
    """The episode with its horizon fixed: unchanged without a factor; else
    T = ceil(factor x L*), L* read from the world itself."""
    if factor is None:
        return ep
    probe = environment_class(ep.env)(ep.spec.replace(horizon=HORIZON_MAX))
    _, task = probe.reset(ep.seed, ep.archetype)
    horizon = min(HORIZON_MAX, max(1, math.ceil(factor * task.optimal_length)))
    return dataclasses.replace(ep, spec=ep.spec.replace(horizon=horizon))


def run_shard(
    episodes: Sequence[EpisodeSpec], agents: Iterable[AgentSpec], horizon_factor: float | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Run every agent on every episode of the shard; the episode rows and step rows,
    in episode order then agent order (so shards concatenate deterministically)."""
    agents = list(agents)
    episode_rows: list[dict[str, Any]] = []
    step_rows: list[dict[str, Any]] = []
    for ep in episodes:
        ep = resolve_horizon(ep, horizon_factor)
        env = environment_class(ep.env)(ep.spec)
        for a in agents:
            result = run_episode(env, make_agent(a.kind, a.name, a.params), ep)
            episode_rows.append(result.episode)
            step_rows.extend(result.steps)
    return episode_rows, step_rows
