"""The agent interface of world-model episodes, and the two offline agents.

An agent sees the task once (:meth:`Agent.begin`) and then, at every step, the current
observation; it answers with one :class:`AgentStep`: the action text, and optionally
its explicit world state, the preconditions it believes the action needs, and whether
it expects the action to be valid. That is the shape of the Planner / Updater /
Self-Diag loop of the paper (Appendices D-F) reduced to one call, so the episode runner
(:mod:`horizonbench.datasets.worlds.episode`) scores an offline agent and a real model
the same way. The action is *text*: the runner reads it with the environment's strict
parser, so an agent can fail to write an action at all, and that is scored.

Offline agents are *privileged*: they receive the environment itself (``begin``'s
``env``) to read the solver's plan and the gold preconditions. A real-model agent gets
``None`` there and only ever sees observations and the task.

The two offline agents are one policy with two memories (:class:`PlanFollower`):

- :class:`OracleAgent` remembers everything: its world state is exactly the gold state
  it could know (``env.observable_gold()``), it declares the gold preconditions, and
  it follows the optimal plan. Its Jaccard and success are 1.0 in every observation
  mode of a static world, which is what the tests and the demo rely on.
- :class:`BoundedMemoryAgent` keeps at most ``capacity`` (C) entities in its working
  memory: the first C of the entities that ``sc`` counts, in the task's order. Facts
  about those are read fresh from what it can know; facts about any other entity stay
  as they were at the briefing (stale). It checks each planned action against that
  state, and when a precondition is missing there it acts from the stale picture: it
  redoes the plan step that made the fact true, which no longer applies, and it never
  notices. So while ``sc <= C`` it behaves exactly like the oracle, and as soon as
  the plan handles an entity beyond its memory twice, it loses the episode: its phase
  diagram has a cliff at ``sc = C``, with the world state wrong before the actions
  go wrong (``tau_W`` before ``tau_A``) when the stale part is large enough.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from horizonbench.core.seeding import derive_seed
from horizonbench.datasets.worlds.base import (
    Action,
    Fact,
    Observation,
    State,
    Task,
    format_action,
)


@dataclass(frozen=True, slots=True)
class AgentStep:
    """One step of an agent: ``action`` is text (read strictly by the runner);
    ``state`` its explicit world state (``None``: the agent keeps none);
    ``preconditions`` the facts it believes the action needs (``None``: not declared);
    ``expects_valid`` its self-check verdict on the action (``None``: none given);
    ``fell_back``: the agent wrote no usable action (the harness's Planner fallback),
    so the step is an invalid action whatever ``action`` says (``planner_fallback``)."""

    action: str
    state: tuple[Fact, ...] | None = None
    preconditions: tuple[Fact, ...] | None = None
    expects_valid: bool | None = None
    fell_back: bool = False


class AgentStopped(Exception):
    """Raised by an agent's ``act`` when the episode must end before the agent could
    act (a harness budget, say): the runner ends the episode with ``outcome`` and the
    message as its detail, keeping the steps already scored."""

    outcome = "stopped"


@runtime_checkable
class Agent(Protocol):
    """What the episode runner drives. ``name`` labels the agent in every table."""

    name: str
    #: True when the agent must receive the environment in :meth:`begin`
    privileged: bool

    def begin(self, observation: Observation, task: Task, env: Any | None) -> None:
        """Start an episode: the first observation, the task, and (privileged agents
        only) the environment."""
        ...

    def act(self, observation: Observation) -> AgentStep:
        """The step for the current observation (the first one, then each after a step)."""
        ...


def fact_entities(fact: Fact, entities: frozenset[str]) -> frozenset[str]:
    """The world entities a fact mentions (its arguments that name one)."""
    return frozenset(a for a in fact[1:] if a in entities)


def sc_entities(task: Task, env: Any) -> tuple[str, ...]:
    """The entities that ``sc`` counts, in the task's order: the kinds the environment
    lists in ``sc_kinds`` (every kind when it lists none)."""
    kinds = getattr(env, "sc_kinds", None) or tuple(task.entities)
    return tuple(e for kind in kinds for e in task.entities.get(kind, ()))


class PlanFollower:
    """Follows the environment's optimal plan, checking each action against its own
    world state (see the module docstring). Subclasses decide what that state is."""

    privileged = True

    def __init__(self, name: str) -> None:
        self.name = name
        self._env: Any = None

    # -- what the agent believes -----------------------------------------------------

    def _belief(self) -> State:
        raise NotImplementedError

    # -- the policy ------------------------------------------------------------------

    def begin(self, observation: Observation, task: Task, env: Any | None) -> None:
        if env is None:
            raise ValueError(f"{type(self).__name__} is an offline agent: it needs the environment")
        self._env = env
        self._plan: Sequence[Action] = env.optimal_plan()
        self._next = 0
        self._made_by, self._pre_at = _replay(env, self._plan)
        self._start(observation, task)

    def _start(self, observation: Observation, task: Task) -> None:
        """Hook for subclasses: set up memory from the briefing."""

    def _needs(self, index: int) -> frozenset[Fact]:
        """What plan step ``index`` needs, as the agent knows it: the preconditions it
        had when the plan ran (the oracle reads the current gold ones instead)."""
        return self._pre_at[index]

    def act(self, observation: Observation) -> AgentStep:
        env = self._env
        belief = self._belief()
        index: int | None = None
        if self._next >= len(self._plan):
            action: Action = ("noop",)
        else:
            index = self._next
            needed = self._needs(index)
            missing = sorted(f for f in needed if f not in belief)
            redo = self._made_by.get(missing[0]) if missing else None
            if redo is not None and redo < index:
                index = redo  # acting on a stale picture: redo what it remembers undone
            else:
                self._next += 1
            action = self._plan[index]
        pre = tuple(sorted(self._needs(index) if index is not None else env.preconditions(action) or ()))
        return AgentStep(
            action=format_action(action),
            state=tuple(sorted(belief)),
            preconditions=pre,
            expects_valid=all(f in belief for f in pre),
        )


def _replay(env: Any, plan: Sequence[Action]) -> tuple[dict[Fact, int], list[frozenset[Fact]]]:
    """Replay the plan on a snapshot of the environment (restored afterwards): fact ->
    the last plan step that made it true, and each step's gold preconditions as they
    were when the plan ran."""
    made: dict[Fact, int] = {}
    needs: list[frozenset[Fact]] = []
    snap = env.snapshot()
    try:
        before = set(env.gold_state())
        for i, action in enumerate(plan):
            needs.append(frozenset(env.preconditions(action) or ()))
            result = env.step(action)
            after = set(result.gold)
            for fact in after - before:
                made[fact] = i
            before = after
            if result.done:
                break
    finally:
        env.restore(snap)
    return made, needs


class OracleAgent(PlanFollower):
    """Knows everything it could know, declares the gold preconditions, follows the
    optimal plan."""

    def __init__(self, name: str = "oracle") -> None:
        super().__init__(name)

    def _belief(self) -> State:
        return frozenset(self._env.observable_gold())

    def _needs(self, index: int) -> frozenset[Fact]:
        return frozenset(self._env.preconditions(self._plan[index]) or ())


class BoundedMemoryAgent(PlanFollower):
    """Working memory of ``capacity`` entities; facts about any other entity stay as
    the briefing showed them."""

    def __init__(self, capacity: int, name: str | None = None) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"capacity: must be a positive integer, got {capacity!r}")
        super().__init__(name or f"bounded-{capacity}")
        self.capacity = capacity

    def _start(self, observation: Observation, task: Task) -> None:
        counted = sc_entities(task, self._env)
        self._all = frozenset(e for names in task.entities.values() for e in names)
        self._forgotten = frozenset(counted[self.capacity :])
        self._stale = frozenset(
            f for f in self._env.observable_gold() if fact_entities(f, self._all) & self._forgotten
        )

    def _belief(self) -> State:
        forgotten, known = self._forgotten, self._all
        fresh = (f for f in self._env.observable_gold() if not fact_entities(f, known) & forgotten)
        return frozenset(fresh) | self._stale


# --- an agent with a planted world-state-first mechanism ------------------------------


def decay_hazard(sc: int, capacity: int, rate: float) -> float:
    """The per-step probability that a :class:`DecayingMemoryAgent` loses track of its
    world: each of the ``sc - capacity`` entities beyond its capacity can scramble its
    memory with probability ``rate`` per step, so the hazard grows with ``sc`` and is
    0 within capacity."""
    excess = max(0, int(sc) - int(capacity))
    return 1.0 - (1.0 - float(rate)) ** excess


def tau_w_delay(onset: int) -> int:
    """How many steps after the memory scrambles (at step ``onset``) the trailing
    fidelity mean of :func:`horizonbench.analysis.trajectory.tau_w` first drops below 1/2,
    for a fidelity of 1 before ``onset`` and 0 from it on: computed with the analysis's
    own function on that series, so the planted truth follows its definition (h = 5:
    0, 1, then 2 for every onset from 2 on)."""
    from horizonbench.analysis import trajectory

    series = [1.0] * onset + [0.0] * (trajectory.TAU_W_WINDOW + 1)
    tw = trajectory.tau_w(series)
    assert tw is not None
    return tw - onset


def planted_lag(onset: int, lead: int) -> int:
    """tau_W - tau_A of a :class:`DecayingMemoryAgent` episode whose memory scrambled at
    step ``onset`` and that lost (its wrong action came before the plan's end): tau_W is
    ``onset + tau_w_delay(onset)``, tau_A is ``onset + lead``."""
    return tau_w_delay(onset) - lead


def planted_success(sc: int, optimal_length: int, capacity: int, rate: float, lead: int) -> float:
    """The probability that a :class:`DecayingMemoryAgent` wins a static world of
    ``optimal_length`` L* (with T >= L*): it wins exactly when its first wrong action
    (``onset + lead``) would come after the plan's last step, i.e. when it stays sound
    for the first ``L* - lead`` steps."""
    healthy = max(0, int(optimal_length) - int(lead))
    return (1.0 - decay_hazard(sc, capacity, rate)) ** healthy


def planted_lag_distribution(
    sc: int, optimal_length: int, capacity: int, rate: float, lead: int
) -> dict[int, float]:
    """The distribution of tau_W - tau_A over the *lost* episodes of one world size
    (lag -> probability), as :func:`horizonbench.analysis.trajectory.lag_distribution`
    counts them: the onset is geometric with the hazard of :func:`decay_hazard`,
    conditioned on the episode being lost (``onset + lead < L*``). Empty when the agent
    cannot lose (hazard 0, or a plan no longer than ``lead``)."""
    h = decay_hazard(sc, capacity, rate)
    last = int(optimal_length) - int(lead)  # lost exactly when onset < last
    if h <= 0.0 or last <= 0:
        return {}
    weights: dict[int, float] = {}
    for onset in range(last):
        p = (1.0 - h) ** onset * h
        lag = planted_lag(onset, lead)
        weights[lag] = weights.get(lag, 0.0) + p
    total = sum(weights.values())
    return {k: v / total for k, v in sorted(weights.items())}


class DecayingMemoryAgent(PlanFollower):
    """An agent whose world state fails a known number of steps before its actions do.

    Why: the paper's mechanism claim (tau_W before tau_A, Section 5.1) and the lag
    table need an agent that *has* the mechanism, with the lag known, so the analysis
    can be shown to find it; the bounded agent's state never drops below a Jaccard of
    1/2, so it leaves tau_W undefined.

    The policy: it is the oracle until its memory scrambles, which happens at each
    step with probability :func:`decay_hazard` (``sc`` beyond ``capacity`` entities,
    ``rate`` per extra entity and step; never within capacity). The onset is drawn
    once per episode from a seed derived from the world's seed and the agent's name
    (sha256, reproducible). From the onset on, its world state is its memory with every
    entity mistaken for the next one of its kind (``item3`` for ``item2``...), keeping
    only the facts that are then wrong, so its world-state Jaccard is 0; it keeps
    following the plan, whose actions it still knows, for ``lead`` more steps; then it
    acts on the wrong picture: every action from step ``onset + lead`` on is one whose
    gold preconditions fail (checked on the environment, so the planted tau_A is exact),
    and it never recovers.

    In a static world (no mutation) with T >= L*, therefore: tau_W = onset +
    :func:`tau_w_delay` (onset), tau_A = onset + lead, the episode is lost exactly when
    ``onset + lead < L*`` (:func:`planted_success`), and the lag of a lost episode is
    :func:`planted_lag`. With mutations its plan can also fail on its own, like the
    oracle's.
    """

    def __init__(self, capacity: int, rate: float, lead: int, name: str | None = None) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"capacity: must be a positive integer, got {capacity!r}")
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0.0 <= float(rate) <= 1.0:
            raise ValueError(f"rate: must be a probability in [0, 1], got {rate!r}")
        if isinstance(lead, bool) or not isinstance(lead, int) or lead < 0:
            raise ValueError(f"lead: must be a non-negative integer, got {lead!r}")
        super().__init__(name or f"decaying-{capacity}")
        self.capacity, self.rate, self.lead = capacity, float(rate), lead

    def _start(self, observation: Observation, task: Task) -> None:
        self._t = 0
        hazard = decay_hazard(task.spec.sc, self.capacity, self.rate)
        if hazard <= 0.0:
            self.onset: int | None = None
        else:
            rng = np.random.default_rng(derive_seed(task.seed, "decaying-onset", task.archetype, self.name))
            self.onset = int(rng.geometric(hazard)) - 1
        # each entity mistaken for the next of its kind (a kind of one is left alone)
        self._mistake: dict[str, str] = {}
        for names in task.entities.values():
            if len(names) > 1:
                self._mistake.update(zip(names, (*names[1:], names[0]), strict=True))

    def _scrambled(self) -> bool:
        return self.onset is not None and self._t >= self.onset

    def _belief(self) -> State:
        # what it decides on until it acts wrongly: the plan's needs as the oracle knows them
        return frozenset(self._env.observable_gold())

    def _reported(self) -> State:
        """The world state it writes: exact before the onset, every fact mistaken after."""
        known = frozenset(self._env.observable_gold())
        if not self._scrambled():
            return known
        swap = self._mistake
        mixed = self._env.normalize((f[0], *(swap.get(a, a) for a in f[1:])) for f in known)
        return frozenset(mixed) - known  # in the canonical spelling, so none is right by chance

    def _needs(self, index: int) -> frozenset[Fact]:
        return frozenset(self._env.preconditions(self._plan[index]) or ())

    def act(self, observation: Observation) -> AgentStep:
        try:
            if self.onset is None or self._t < self.onset + self.lead:
                step = super().act(observation)
                return step if not self._scrambled() else _with(step, self._reported())
            belief = self._reported()
            action = self._wrong_action()
            return AgentStep(
                action=format_action(action),
                state=tuple(sorted(belief)),
                preconditions=tuple(sorted(f for f in (self._env.preconditions(action) or ()))),
                expects_valid=True,
            )
        finally:
            self._t += 1

    def _wrong_action(self) -> Action:
        """An action whose gold preconditions fail now: the plan's next action with its
        entities mistaken, else a step of the plan already done, else a verb-less text
        (the environment labels it ``unknown_action``)."""
        env, swap = self._env, self._mistake
        gold = set(env.gold_state())
        upcoming = self._plan[self._next] if self._next < len(self._plan) else None
        candidates: list[Action] = []
        if upcoming is not None:
            candidates.append((upcoming[0], *(swap.get(a, a) for a in upcoming[1:])))
        candidates.extend(reversed(self._plan[: self._next]))
        candidates.extend(self._plan[self._next :])
        for action in candidates:
            pre = env.preconditions(action)
            if pre is not None and not pre <= gold:
                return action
        return ("forgotten",)


def _with(step: AgentStep, belief: State) -> AgentStep:
    """``step`` with ``belief`` as its world state."""
    return AgentStep(step.action, tuple(sorted(belief)), step.preconditions, step.expects_valid)


#: offline agent kinds a config can name (``unusable`` plays through the harness:
#: horizonbench.harness.offline)
AGENT_KINDS: tuple[str, ...] = ("oracle", "bounded", "decaying", "unusable")


def make_agent(kind: str, name: str, params: Mapping[str, Any] | None = None) -> Any:
    """An offline agent from its config entry."""
    params = dict(params or {})
    if kind == "oracle":
        return OracleAgent(name)
    if kind == "bounded":
        return BoundedMemoryAgent(int(params["capacity"]), name)
    if kind == "decaying":
        return DecayingMemoryAgent(int(params["capacity"]), float(params["rate"]), int(params["lead"]), name)
    if kind == "unusable":
        from horizonbench.harness.offline import UnusableAnswersAgent  # the harness imports this module

        return UnusableAnswersAgent(name, float(params["rate"]), params.get("harness"))
    raise ValueError(f"kind: unknown offline agent {kind!r} (known: {', '.join(AGENT_KINDS)})")


def as_facts(facts: Iterable[Fact] | None) -> tuple[Fact, ...] | None:
    """A sorted tuple of facts, or ``None``."""
    return None if facts is None else tuple(sorted(set(facts)))
