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
    ``expects_valid`` its self-check verdict on the action (``None``: none given)."""

    action: str
    state: tuple[Fact, ...] | None = None
    preconditions: tuple[Fact, ...] | None = None
    expects_valid: bool | None = None


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


#: offline agent kinds a config can name
AGENT_KINDS: tuple[str, ...] = ("oracle", "bounded")


def make_agent(kind: str, name: str, params: Mapping[str, Any] | None = None) -> PlanFollower:
    """An offline agent from its config entry."""
    params = dict(params or {})
    if kind == "oracle":
        return OracleAgent(name)
    if kind == "bounded":
        return BoundedMemoryAgent(int(params["capacity"]), name)
    raise ValueError(f"kind: unknown offline agent {kind!r} (known: {', '.join(AGENT_KINDS)})")


def as_facts(facts: Iterable[Fact] | None) -> tuple[Fact, ...] | None:
    """A sorted tuple of facts, or ``None``."""
    return None if facts is None else tuple(sorted(set(facts)))
