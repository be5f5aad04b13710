"""An offline model behind the real harness, whose answers are unusable at a set rate.

Why it exists: a model that writes unusable answers must be scored by the harness's
own code (the strict readers of :mod:`horizonbench.harness.outputs`, the repair
requests, the fallbacks, the fallback streak, the budgets), not by a copy of it. So
:class:`UnusableAnswersAgent` is a :class:`~horizonbench.harness.agent.HarnessAgent`
whose ``call`` is an in-process model instead of the evaluation engine: every prompt
is built, every answer read, repaired and fallen back on exactly as for an API model;
only the transport (rate limits, retries, the attempt store) is skipped, which has
nothing to do with what an answer means. It runs in the offline agents' shards (no
key, no network, no store), as ``kind: unusable`` of ``worlds.agents``.

The model. Its usable answers are the oracle's (the world state it could know, the
optimal plan's action with its gold preconditions, a verdict that the action is valid),
written as the harness asks. For each step and role (Updater, Planner, Self-Diag) it is
*unusable* with probability ``rate``, drawn from a sha256 of the world's seed, the
agent's name, the step and the role: then every answer of that role at that step,
repairs included, is prose, broken JSON or mistyped JSON, so the harness falls back.
``rate`` 1 never answers usably: the episode ends as ``format_failure`` after
``fallback_streak`` steps. The planted truth, for the calibration suite: each step's
Planner falls back with probability ``rate`` independently
(:func:`planted_fallback_share`), and the episode ends as a format failure exactly when
``fallback_streak`` Planner fallbacks come in a row before the plan is done.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from horizonbench.core.seeding import derive_seed
from horizonbench.core.types import Completion
from horizonbench.datasets.worlds.agents import AgentStep, OracleAgent
from horizonbench.datasets.worlds.base import Observation, Task, format_fact
from horizonbench.datasets.worlds.episode import episode_id
from horizonbench.harness import prompts as P
from horizonbench.harness.agent import HarnessAgent, HarnessSettings
from horizonbench.models.base import AttemptRequest
from horizonbench.models.engine import Outcome

#: what an unusable answer says, cycled through by step and role: prose, broken JSON,
#: JSON with the wrong types (each is refused by the harness's readers, tested)
UNUSABLE_ANSWERS: tuple[str, ...] = (
    "I am not sure what to do next; let me think about the world a little longer.",
    '{"action": "go(room2)", "preconditions": [at(agent, room1)]',
    '{"world_state": "everything is fine", "valid": "yes", "action": 3, "confidence": "high"}',
)
#: the system prompts' openings, by role
_ROLE_OF_SYSTEM: tuple[tuple[str, str], ...] = (
    ("updater", P.UPDATER_SYSTEM[:24]),
    ("planner", P.PLANNER_SYSTEM[:24]),
    ("selfdiag", P.SELFDIAG_SYSTEM[:24]),
    ("summary", P.SUMMARY_SYSTEM[:24]),
)
_SCALE = float(1 << 63)


def planted_fallback_share(rate: float) -> float:
    """The expected share of steps whose Planner falls back (one draw per step)."""
    return float(rate)


def planted_outcomes(rate: float, optimal_length: int, horizon: int, streak: int) -> dict[str, float]:
    """The probability of each outcome of an :class:`UnusableAnswersAgent` episode in a
    static world with plan length L* (``optimal_length``) and horizon T, without budget
    stops: each step's Planner falls back with probability ``rate``; a usable step plays
    the plan's next action (the oracle's), a fallen-back one changes nothing; the
    episode is won at its L*-th usable step, ends as ``format_failure`` when ``streak``
    fallbacks in a row come before the horizon's last step (the harness stops at the
    next step), and is lost at T otherwise. Exact, by dynamic programming over (usable
    steps so far, current run of fallbacks)."""
    if not 0.0 <= rate <= 1.0 or optimal_length < 1 or horizon < 1 or streak < 1:
        raise ValueError("need 0 <= rate <= 1, L* >= 1, T >= 1, streak >= 1")
    out = {"success": 0.0, "format_failure": 0.0, "failure": 0.0}
    states: dict[tuple[int, int], float] = {(0, 0): 1.0}
    for t in range(horizon):
        last = t == horizon - 1
        nxt: dict[tuple[int, int], float] = {}
        for (done, run), p in states.items():
            if rate < 1.0:
                if done + 1 == optimal_length:
                    out["success"] += p * (1.0 - rate)
                else:
                    key = (done + 1, 0)
                    nxt[key] = nxt.get(key, 0.0) + p * (1.0 - rate)
            if rate > 0.0:
                if run + 1 == streak and not last:
                    out["format_failure"] += p * rate
                else:
                    key = (done, run + 1)
                    nxt[key] = nxt.get(key, 0.0) + p * rate
        states = nxt
    out["failure"] += sum(states.values())
    return out


def role_of(request: AttemptRequest) -> str:
    """Which harness call a request is, from its system prompt."""
    system = next((m.content for m in request.messages if m.role == "system"), "")
    for role, opening in _ROLE_OF_SYSTEM:
        if system.startswith(opening):
            return role
    raise ValueError(f"not a harness request: {system[:60]!r}")


class UnusableAnswersAgent:
    """The harness over the in-process model of the module docstring (privileged: the
    model reads the environment to answer as the oracle would)."""

    privileged = True

    def __init__(self, name: str, rate: float, harness: Mapping[str, Any] | None = None) -> None:
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0.0 <= float(rate) <= 1.0:
            raise ValueError(f"rate: must be a probability in [0, 1], got {rate!r}")
        self.name = name
        self.rate = float(rate)
        settings = dict(harness or {})
        if settings.get("memory", "structured") != "structured":
            raise ValueError("memory: the unusable agent plays with structured memory only")
        self.settings = HarnessSettings(**settings)

    # --- the Agent protocol: the harness does everything ------------------------------

    def begin(self, observation: Observation, task: Task, env: Any | None) -> None:
        if env is None:
            raise ValueError("UnusableAnswersAgent is an offline agent: it needs the environment")
        self._env = env
        self._task = task
        self._oracle = OracleAgent(self.name)
        self._oracle.begin(observation, task, env)
        self._planned: dict[int, AgentStep | None] = {}
        self._harness = HarnessAgent(
            self.name,
            self._answer,
            self.settings,
            episode_id=episode_id(task.env, self.name, task.seed),
            horizon=task.horizon,
        )
        self._harness.begin(observation, task, None)

    def act(self, observation: Observation) -> AgentStep:
        return self._harness.act(observation)

    def step_info(self) -> dict[str, Any]:
        return self._harness.step_info()

    def episode_info(self) -> dict[str, Any]:
        return self._harness.episode_info()

    # --- the in-process model ------------------------------------------------------------

    def unusable(self, step: int, role: str) -> bool:
        """Whether every answer of ``role`` at ``step`` is unusable (seeded draw)."""
        u = derive_seed(self._task.seed, "unusable-answer", self._task.archetype, self.name, step, role)
        return u / _SCALE < self.rate

    def _answer(self, request: AttemptRequest) -> Outcome:
        role = role_of(request)
        step = self._harness.step
        if self.unusable(step, role):
            text = UNUSABLE_ANSWERS[(step + len(role) + request.turn) % len(UNUSABLE_ANSWERS)]
        else:
            text = self._usable(role, step)
        tok = self.settings.chars_per_token
        completion = Completion(
            text=text,
            finish_reason="stop",
            input_tokens=math.ceil(sum(len(m.content) for m in request.messages) / tok),
            output_tokens=math.ceil(len(text) / tok),
        )
        return Outcome(request=request, key=f"{request.instance_id}:{request.turn}", completion=completion)

    def _usable(self, role: str, step: int) -> str:
        env = self._env
        if role == "updater":
            return json.dumps({"world_state": [format_fact(f) for f in sorted(env.observable_gold())]})
        if role == "summary":
            return json.dumps({"summary": f"step {step}: following the plan"})
        if role == "planner":
            if step not in self._planned:  # the oracle moves on only when its action is used
                self._planned[step] = self._oracle.act(None)  # type: ignore[arg-type]
            move = self._planned[step]
            assert move is not None
            return json.dumps(
                {
                    "action": move.action,
                    "preconditions": [format_fact(f) for f in move.preconditions or ()],
                    "expected_effects": [],
                    "confidence": 0.9,
                }
            )
        fell_back = self._harness.fallback_run > 0 and step not in self._planned
        return json.dumps({"valid": not fell_back, "missing_preconditions": [], "replan": False})
