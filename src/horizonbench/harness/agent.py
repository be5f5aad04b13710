"""The three-call agent of the world-model paper (Appendices D-F) driving a real model.

At every step the :class:`HarnessAgent` makes up to three calls, each one request
through the evaluation engine (attempt store, rate limit, retries):

1. **memory**: in the ``structured`` mode the Updater rewrites the explicit world state
   from the state it kept, the last action and the observation that followed; in the
   ``summary`` mode the same call rewrites a rolling summary in words; the
   ``transcript`` mode makes no memory call (the Planner reads every observation so far);
2. **Planner**: one action, the preconditions it believes the action needs, the effects
   it expects, a confidence (and, in the two modes without an explicit state, its own
   world state, so world-state fidelity is measured in every mode);
3. **Self-Diag**: a verdict on the proposed action from the same memory, made *before*
   the action runs (after it, the observation would give the answer away). It never
   gates the action.

The episode runner (:func:`~horizonbench.datasets.worlds.episode.run_episode`) then
executes the action and scores the step exactly as it scores an offline agent.

Untrusted answers. Each answer is read by :mod:`horizonbench.harness.outputs`. An
unusable one is sent back with what is wrong, at most ``repairs`` times; after that a
deterministic fallback applies and is recorded as an event: the Updater keeps the last
valid state, the Planner's action becomes ``noop`` with no declared preconditions, the
Self-Diag gives no verdict. An agent never silently ends up with an empty state. A step
whose Planner fell back is marked (``AgentStep.fell_back``): the runner scores it as an
invalid action labelled ``planner_fallback`` (the model chose no action; a ``noop`` that
counted as valid made a model that never answers usably look like a world-state
collapse). After ``fallback_streak`` consecutive such steps the episode ends with the
outcome ``format_failure`` (:class:`NoUsableAnswers`) instead of running the whole
horizon at up to 3 x (1 + repairs) calls a step.

Budgets. Per call, the prompt must fit the model's context with ``max_tokens`` to
spare, and the output a memory call must write (the observed state, at
``chars_per_token``) must fit ``max_tokens``: otherwise, and when an answer stops at
``max_tokens``, the episode ends as ``budget_exceeded`` with the numbers, and no
prompt or state is ever shortened. Per episode, output tokens and wall time (the sum of
the calls' latencies, as recorded with their answers, so a resumed episode reaches the
same decisions) stop the episode the same way once spent. A provider failure that
outlasts the engine's retries raises :class:`CallFailed`: the episode is left
unfinished and the next run resumes it from the attempt store.

Every decision depends only on the answers, so replaying stored answers replays the
episode: the resume after a crash pays only for calls never answered.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from horizonbench.core.seeding import derive_seed
from horizonbench.core.types import Completion, Message
from horizonbench.datasets.worlds.agents import AgentStep, AgentStopped
from horizonbench.datasets.worlds.base import Fact, Observation, Task, format_fact
from horizonbench.harness import prompts as P
from horizonbench.harness.outputs import (
    PlannerOutput,
    PlannerStateOutput,
    SelfDiagOutput,
    SummaryOutput,
    UpdaterOutput,
    read_output,
)
from horizonbench.models.base import AttemptRequest
from horizonbench.models.engine import Outcome

#: the request family of harness calls in the attempts table
FAMILY = "worlds"
#: the action a Planner fallback executes
FALLBACK_ACTION = "noop"
ROLES: tuple[str, ...] = ("updater", "summary", "planner", "selfdiag")


class BudgetExceeded(AgentStopped):
    """A limit of the call or of the episode was reached (``detail`` has the numbers)."""

    outcome = "budget_exceeded"


class NoUsableAnswers(AgentStopped):
    """The Planner fell back on ``fallback_streak`` consecutive steps: the model is not
    writing usable answers, and the episode ends as a format failure."""

    outcome = "format_failure"


class CallFailed(Exception):
    """A call got no answer after the engine's retries; the episode stays unfinished."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(f"{outcome.error_class}: {outcome.error}")
        self.outcome = outcome


@dataclass(frozen=True, slots=True)
class HarnessSettings:
    """How one model plays: its memory mode, sampling, and the budgets (module docstring)."""

    memory: str = "structured"
    temperature: float = 0.0
    top_p: float = 1.0
    #: the most output tokens of one call
    max_tokens: int = 4096
    #: the model's context window in tokens (None: not checked)
    context_tokens: int | None = None
    episode_output_tokens: int = 80_000
    episode_wall_s: float = 1800.0
    repairs: int = 3
    summary_words: int = 150
    #: characters per token for the size checks (fixed, so decisions are reproducible)
    chars_per_token: float = 4.0
    #: consecutive steps with a Planner fallback that end the episode (format_failure)
    fallback_streak: int = 3

    def __post_init__(self) -> None:
        if self.memory not in P.MEMORY_MODES:
            raise ValueError(f"memory: {self.memory!r} is not one of {', '.join(P.MEMORY_MODES)}")
        if isinstance(self.fallback_streak, bool) or self.fallback_streak < 1:
            raise ValueError(f"fallback_streak: must be a positive integer, got {self.fallback_streak!r}")

    @property
    def calls_per_step(self) -> int:
        return 2 if self.memory == "transcript" else 3


@dataclass
class _StepLog:
    calls: int = 0
    repairs: int = 0
    output_tokens: int = 0
    fallbacks: list[str] = field(default_factory=list)
    confidence: float | None = None
    replan: bool | None = None


@dataclass(frozen=True, slots=True)
class Event:
    """A fallback: which call, at which step, and the last reason its answer was unusable."""

    step: int
    role: str
    error: str


class HarnessAgent:
    """A real model as an :class:`~horizonbench.datasets.worlds.agents.Agent`.

    ``call`` answers one request (the model runner's ``attempt``: store first, then
    the provider). ``episode_id`` and ``root_seed`` make each call's key and seed.
    """

    privileged = False

    def __init__(
        self,
        name: str,
        call: Callable[[AttemptRequest], Outcome],
        settings: HarnessSettings,
        *,
        episode_id: str,
        root_seed: int = 0,
        horizon: int | None = None,
    ) -> None:
        self.name = name
        self.settings = settings
        self._call = call
        self.episode_id = episode_id
        self.root_seed = root_seed
        self._horizon = horizon
        self.calls = 0
        self.repairs = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.wall_s = 0.0
        self.events: list[Event] = []
        self.budget_detail: str | None = None
        #: the steps in a row, up to now, whose Planner fell back
        self.fallback_run = 0
        self._log = _StepLog()

    # --- the Agent protocol ---------------------------------------------------------

    def begin(self, observation: Observation, task: Task, env: Any | None) -> None:
        self.task = task
        self.horizon = self._horizon or task.horizon
        self.briefing = observation
        self.history: list[P.Exchange] = []
        self.state: tuple[Fact, ...] | None = None  # structured: the Updater's last valid state
        self.belief: tuple[Fact, ...] | None = None  # other modes: the Planner's last valid state
        self.summary: str | None = None
        self._pending: str | None = None  # the action text of the step not yet observed
        self.step = 0

    def act(self, observation: Observation) -> AgentStep:
        if self.fallback_run >= self.settings.fallback_streak:
            raise NoUsableAnswers(
                f"the Planner fell back on {self.fallback_run} consecutive steps "
                f"({self.step - self.fallback_run} to {self.step - 1}): no usable answer"
            )
        if self._pending is not None:
            self.history.append(P.Exchange(self._pending, observation))
        last = self.history[-1] if self.history else None
        self._log = _StepLog()
        mode = self.settings.memory
        if mode == "structured":
            self._update_state(observation, last)
            title, memory = "Your world state", P.facts_block(self.state)
        elif mode == "summary":
            self._update_summary(observation, last)
            title, memory = "Your summary", self.summary or "(none yet)"
        else:
            title, memory = "Transcript so far", P.transcript_block(self.briefing, self.history)
        plan = self._ask(
            "planner",
            P.planner_messages(
                self.task, self.step, self.horizon, title, memory, last, wants_state=mode != "structured"
            ),
            PlannerOutput if mode == "structured" else PlannerStateOutput,
        )
        self.fallback_run = self.fallback_run + 1 if plan is None else 0
        if plan is None:
            action, pre, self._log.confidence = FALLBACK_ACTION, None, None
        else:
            action, pre, self._log.confidence = plan.action, plan.preconditions, plan.confidence
            if mode != "structured":
                self.belief = plan.world_state
        verdict = self._ask(
            "selfdiag",
            P.selfdiag_messages(self.task, self.step, self.horizon, title, memory, action, pre or ()),
            SelfDiagOutput,
        )
        if verdict is not None:
            self._log.replan = verdict.replan
        self._pending = action
        self.step += 1
        return AgentStep(
            action=action,
            state=self.state if mode == "structured" else self.belief,
            preconditions=pre,
            expects_valid=None if verdict is None else verdict.valid,
            fell_back=plan is None,
        )

    # --- what the episode runner records --------------------------------------------

    def step_info(self) -> dict[str, Any]:
        log = self._log
        return {
            "calls": log.calls,
            "repairs": log.repairs,
            "fallbacks": ",".join(log.fallbacks) or None,
            "output_tokens": log.output_tokens,
            "confidence": log.confidence,
            "replan": log.replan,
        }

    def episode_info(self) -> dict[str, Any]:
        return {
            "memory": self.settings.memory,
            "prompt_version": P.PROMPT_VERSION,
            "calls": self.calls,
            "repairs": self.repairs,
            "fallbacks": len(self.events),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "wall_s": round(self.wall_s, 6),
            "budget_detail": self.budget_detail,
        }

    # --- memory calls ------------------------------------------------------------------

    def _update_state(self, observation: Observation, last: P.Exchange | None) -> None:
        need = self._tokens(json.dumps([format_fact(f) for f in observation.facts]))
        if need > self.settings.max_tokens:
            self._stop(
                f"updater at step {self.step}: the observed state needs about {need:,} output tokens, "
                f"above max_tokens {self.settings.max_tokens:,}"
            )
        out = self._ask(
            "updater",
            P.updater_messages(self.task, self.step, self.horizon, self.state, last, observation),
            UpdaterOutput,
        )
        if out is not None:
            self.state = out.world_state

    def _update_summary(self, observation: Observation, last: P.Exchange | None) -> None:
        out = self._ask(
            "summary",
            P.summary_messages(
                self.task,
                self.step,
                self.horizon,
                self.summary,
                last,
                observation,
                self.settings.summary_words,
            ),
            SummaryOutput,
        )
        if out is not None:
            self.summary = out.summary

    # --- one call with its repairs -------------------------------------------------------

    def _ask(self, role: str, messages: tuple[Message, ...], schema: type[Any]) -> Any:
        error = ""
        for attempt in range(self.settings.repairs + 1):
            completion = self._send(role, messages)
            parsed, error = read_output(completion.text, schema)
            if parsed is not None:
                return parsed
            if attempt < self.settings.repairs:
                self.repairs += 1
                self._log.repairs += 1
                messages = P.repair_messages(messages, completion.text, error or "unreadable")
        self.events.append(Event(self.step, role, error or "unreadable"))
        self._log.fallbacks.append(role)
        return None

    def _send(self, role: str, messages: tuple[Message, ...]) -> Completion:
        s = self.settings
        where = f"{role} at step {self.step}"
        prompt = self._tokens("".join(m.content for m in messages))
        if s.context_tokens is not None and prompt + s.max_tokens > s.context_tokens:
            self._stop(
                f"{where}: the prompt needs about {prompt:,} tokens, which with max_tokens "
                f"{s.max_tokens:,} exceeds the model's context of {s.context_tokens:,}"
            )
        if self.output_tokens >= s.episode_output_tokens:
            self._stop(
                f"{where}: the episode has used {self.output_tokens:,} output tokens, "
                f"its budget is {s.episode_output_tokens:,}"
            )
        if self.wall_s >= s.episode_wall_s:
            self._stop(
                f"{where}: the episode's calls took {self.wall_s:.3f} s, its budget is {s.episode_wall_s:g} s"
            )
        request = AttemptRequest(
            instance_id=self.episode_id,
            family=FAMILY,
            sample=0,
            messages=messages,
            temperature=s.temperature,
            top_p=s.top_p,
            max_tokens=s.max_tokens,
            seed=derive_seed(self.root_seed, "world-call", self.name, self.episode_id, self.calls),
            turn=self.calls,
            mode="world",
        )
        outcome = self._call(request)
        self.calls += 1
        self._log.calls += 1
        completion = outcome.completion
        if completion is None:
            raise CallFailed(outcome)
        self.input_tokens += completion.input_tokens
        self.output_tokens += completion.output_tokens
        self._log.output_tokens += completion.output_tokens
        self.wall_s += completion.latency_s
        if completion.finish_reason == "length":
            self._stop(
                f"{where}: the answer stopped at max_tokens {s.max_tokens:,} "
                f"({completion.output_tokens:,} output tokens)"
            )
        return completion

    def _tokens(self, text: str) -> int:
        return math.ceil(len(text) / self.settings.chars_per_token)

    def _stop(self, detail: str) -> None:
        self.budget_detail = detail
        raise BudgetExceeded(detail)
