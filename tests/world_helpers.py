"""Helpers shared by the tests of the three world environments (``stateful_puzzle``,
``graph_nav``, ``tool_dag``).

They use only the common environment contract (reset, step, valid_actions, snapshot,
restore, gold_state, optimal_plan), so each is written once here and every world is
checked by the same code. What needs one world's entities or rules stays in its own
test file.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from random import Random
from typing import Protocol, TypeVar

from horizonbench.datasets.worlds.base import Action, Environment, StepResult, StressSpec


class Episode(Environment, Protocol):
    """The environment contract plus the ``done`` flag every world has (the helpers
    stop when an episode ends)."""

    @property
    def done(self) -> bool: ...


E = TypeVar("E", bound=Episode)


def make_env(
    cls: Callable[[StressSpec], E], sc: int, dd: int, seed: int = 1, archetype: int = 0, **axes: object
) -> E:
    """A ``cls`` environment, reset, on a horizon long enough never to end a test early
    (unless ``axes`` sets one): the usual starting point of a test."""
    axes.setdefault("horizon", 10_000)
    env = cls(StressSpec(sc=sc, dd=dd, **axes))  # type: ignore[arg-type]
    env.reset(seed, archetype)
    return env


def replay(env: Episode, plan: Iterable[Action]) -> list[StepResult]:
    """Step through ``plan``, asserting every action is valid (a plan that a test
    expects to work must not silently do nothing), and return the step results."""
    results = []
    for action in plan:
        results.append(env.step(action))
        assert results[-1].valid, (action, results[-1].error, results[-1].unmet)
    return results


def search(env: Episode, forbid: Iterable[Action] = ()) -> int | None:
    """Breadth-first search over the real dynamics from the current state: the length
    of a shortest winning action sequence, or None if no winning state is reachable.

    It checks the solvers and the dependency structure against the environment itself
    rather than against a second model of it; the state is restored afterwards."""
    forbid = set(forbid)
    start = env.snapshot()
    seen = {env.gold_state()}
    queue = deque([(start, 0)])
    try:
        while queue:
            snap, depth = queue.popleft()
            env.restore(snap)
            for action in env.valid_actions():
                if action in forbid:
                    continue
                env.restore(snap)
                result = env.step(action)
                if result.success:
                    return depth + 1
                if result.gold not in seen:
                    seen.add(result.gold)
                    queue.append((env.snapshot(), depth + 1))
        return None
    finally:
        env.restore(start)


def run_policy(env: Episode, seed: int, steps: int = 80) -> Iterator[StepResult]:
    """A policy's step results, as they happen: the plan's next action 60% of the
    time, else a random valid action (the plan is not restarted after mutations).
    It mixes progress with detours, so observation and mutation tests see both."""
    rng = Random(seed)
    plan = list(env.optimal_plan())
    for _ in range(steps):
        if env.done:
            return
        if plan and rng.random() < 0.6:
            action = plan.pop(0)
        else:
            action = rng.choice(env.valid_actions())
        yield env.step(action)


def trace(
    cls: Callable[[StressSpec], Episode], spec: StressSpec, seed: int, archetype: int, policy_seed: int
) -> list:
    """Everything an episode of a fresh ``cls`` shows and records under
    :func:`run_policy`, for comparing two episodes in determinism tests."""
    env = cls(spec)
    obs, task = env.reset(seed, archetype)
    out: list = [obs.facts, obs.injected, task.facts, task.text]
    for r in run_policy(env, policy_seed, steps=60):
        obs = r.observation
        out.append((obs.facts, obs.injected, obs.message, r.gold, r.error, r.events))
    return out


def hash_seed_digests(script: str) -> set[str]:
    """The digests ``script`` prints when run under two hash seeds and in this process:
    an episode that depends on hash randomisation gives more than one.

    ``script`` must end its work with ``print(h.hexdigest())``."""
    out: set[str] = set()
    for hash_seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        cmd = [sys.executable, "-c", script]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        out.add(proc.stdout.strip())
    local: dict[str, object] = {}
    code = script.replace("print(h.hexdigest())", "digest = h.hexdigest()")
    exec(compile(code, "<digest>", "exec"), local)  # noqa: S102 - the tests' own constant code
    out.add(local["digest"])  # type: ignore[arg-type]
    return out
