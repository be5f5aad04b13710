"""The episode machinery every world environment shares (:class:`EnvironmentBase`).

An environment subclasses :class:`EnvironmentBase` and writes only its own rules; the
base runs the episode around them, the same way in every environment:

- ``reset``: checks the seed and archetype, seeds the mutation and observation streams
  (``derive_seed(seed, name, "mutation" | "observation")``), takes the world and its
  optimal plan from :attr:`~EnvironmentBase.generate` and
  :attr:`~EnvironmentBase.solver`, calls the environment's
  :meth:`~EnvironmentBase._build`, draws the distractor mode's phantom views, and
  returns the first observation (a full briefing) with the task;
- ``step``: the gold check (every precondition of :meth:`~EnvironmentBase._pre` must
  hold, else the action changes nothing and :meth:`~EnvironmentBase._label` names the
  error; ``unknown_action`` for no action of this world), time, at most one mutation
  (with the spec's per-step rate, never after a win or at the horizon), the message
  and the observation;
- the four observation modes (``clean``; ``partial`` through
  :class:`~.observation.LastSeen` and the environment's :meth:`~EnvironmentBase._look`;
  ``distractor`` with the phantom views of :meth:`~EnvironmentBase._phantom_facts`;
  ``conflict`` with :meth:`~EnvironmentBase._conflict_fact`) and ``observable_gold``;
- mutation: one change drawn uniformly from :meth:`~EnvironmentBase._mutations` (a
  switch turning off is done here, the rest by :meth:`~EnvironmentBase._mutation`);
- ``invariant_violations`` (malformed facts, wrong entity kinds, two facts of one slot),
  ``preconditions``, ``gold_state``, ``slot``, ``snapshot`` and ``restore``; for worlds
  whose agent walks and whose items lie in places, their indexing (``_locate``,
  ``_move``) and the places the last-seen check looks at (:attr:`item_places`).

The hooks an environment writes: ``_build`` (its indexes, ``_kind``, ``_task`` through
``_task_of``, the reset state through ``_new_store``, ``_won``; returns the reset
state's size), ``_pre``, ``_label``, ``_apply``, ``_mutations``/``_mutation`` (or a
whole ``_mutate``), ``_look``, ``_lie_entities``/``_lie_places`` (or a whole
``_conflict_fact``), ``_phantom_facts``, ``_restore_state``, ``valid_actions`` and
``normalize``; optionally ``_always_observable``, ``_arg_problems``,
``_relation_problems``, ``_state_snapshot``, ``_place``/``_unplace``. Class attributes
name the vocabulary: ``name``, ``verbs``, ``error_labels``, ``sc_kinds``,
``predicates``, ``task_predicates``, ``signatures``, ``slot_of_predicate``,
``clashes``, ``item_kinds``, ``item_places``, ``conflict_states`` and
``win_message``. ``tests/test_world_shared.py`` has a whole environment (``Lamps``)
written this way.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Generic, TypeVar

from horizonbench.core.seeding import derive_seed
from horizonbench.datasets.worlds.base import (
    N_ARCHETYPES,
    Action,
    Canonical,
    Fact,
    FactStore,
    Observation,
    Rng,
    State,
    StepResult,
    StressSpec,
    Subgoal,
    Task,
    format_action,
    format_fact,
)
from horizonbench.datasets.worlds.observation import CONFLICT_RATE, LastSeen, phantom_views

W = TypeVar("W")


def entity_kinds(entities: Mapping[str, Iterable[str]], agent: bool = True) -> dict[str, str]:
    """Entity name -> kind from kind -> names (``Task.entities``), with ``agent`` first
    when the world has one."""
    kinds = {"agent": "agent"} if agent else {}
    for kind, names in entities.items():
        for n in names:
            kinds[n] = kind
    return kinds


class EnvironmentBase(Generic[W]):
    """What every environment shares (see the module docstring): one instance runs one
    episode at a time; :meth:`reset` starts a new one."""

    name: ClassVar[str]
    verbs: ClassVar[Mapping[str, int]]
    error_labels: ClassVar[tuple[str, ...]]
    sc_kinds: ClassVar[tuple[str, ...]]
    #: predicate -> what each argument may be (entity kinds, unless ``_arg_problems`` says)
    predicates: ClassVar[Mapping[str, tuple[Any, ...]]]
    #: predicates of the task specification (``Task.facts``): not world state, never flagged
    task_predicates: ClassVar[frozenset[str]]
    #: verb -> the entity kinds of each argument (for :meth:`_well_formed`)
    signatures: ClassVar[Mapping[str, tuple[frozenset[str], ...]]] = {}
    #: predicate -> the kind of slot its facts fill (``(kind, first argument)``)
    slot_of_predicate: ClassVar[Mapping[str, str]] = {}
    #: slot kind -> how two facts of one slot clash, in words
    clashes: ClassVar[Mapping[str, str]] = {}
    #: the kinds of entity that lie in places (the last-seen check looks at the place)
    item_kinds: ClassVar[frozenset[str]] = frozenset()
    #: location predicate -> the kind of place it names (any other location: the hands)
    item_places: ClassVar[Mapping[str, str]] = {}
    #: entity kind -> its two-valued state, for the conflict mode's false facts
    conflict_states: ClassVar[Mapping[str, tuple[str, str]]] = {}
    #: the end of the message of the winning step
    win_message: ClassVar[str] = "goal reached"
    #: ``(sc, dd, seed, archetype)`` -> the world (cached: shared read-only by episodes)
    generate: Callable[[int, int, int, int], W]
    #: ``(sc, dd, seed, archetype)`` -> an optimal plan of the mutation-free world
    solver: Callable[[int, int, int, int], tuple[Action, ...]]

    spec: StressSpec
    _store: FactStore
    _task: Task
    _won: bool
    _kind: dict[str, str]
    _loc: dict[str, Fact]
    _on: dict[str, bool]

    def __init__(self, spec: StressSpec) -> None:
        if not isinstance(spec, StressSpec):
            raise TypeError("spec: must be a StressSpec")
        self.spec = spec
        self._world: W | None = None
        self._plan: tuple[Action, ...] = ()
        self._loc: dict[str, Fact] = {}  # where each item is (worlds without items keep it empty)
        self._t = 0
        self._over = False

    # -- the episode ---------------------------------------------------------------

    @staticmethod
    def _check_reset(seed: object, archetype: object) -> None:
        """``ValueError`` naming a bad seed or archetype (the same words everywhere)."""
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed: must be a non-negative integer, got {seed!r}")
        if isinstance(archetype, bool) or not isinstance(archetype, int) or not 0 <= archetype < N_ARCHETYPES:
            raise ValueError(f"archetype: must be an integer in 0..{N_ARCHETYPES - 1}, got {archetype!r}")

    def reset(self, seed: int, archetype: int = 0) -> tuple[Observation, Task]:
        self._check_reset(seed, archetype)
        spec = self.spec
        self._seed, self._archetype = seed, archetype
        self._partial = spec.observation == "partial"
        self._rate = spec.mutation_rate
        self._mut_rng = Rng(derive_seed(seed, self.name, "mutation"))
        self._obs_rng = Rng(derive_seed(seed, self.name, "observation"))
        self._world = self.generate(spec.sc, spec.dd, seed, archetype)
        self._plan = self.solver(spec.sc, spec.dd, seed, archetype)
        self._initial_size = self._build(seed, archetype)
        self._phantoms: tuple[Canonical, ...] = ()
        if spec.observation == "distractor":
            rng = Rng(derive_seed(seed, self.name, "phantoms"))
            self._phantoms = phantom_views(self._phantom_facts(rng), self._initial_size, rng)
        self._t = 0
        self._over = self._won
        self._seen = LastSeen()
        self._clear_step()
        return self._observe("start", None), self._task

    def _clear_step(self) -> None:
        """Forget what the last step changed and looked at."""
        self._changed: set[Hashable] = set()
        self._examined: str | None = None

    def step(self, action: Action) -> StepResult:
        if self._world is None:
            raise RuntimeError("call reset() first")
        if self._over:
            raise RuntimeError("the episode is over; call reset()")
        self._clear_step()
        pre = self._pre(action)
        if pre is None:
            valid, error, unmet = False, "unknown_action", ()
        else:
            store = self._store
            unmet = tuple(f for f in pre if f not in store)
            if unmet:
                valid, error = False, self._label(action, unmet)
            else:
                valid, error = True, None
                self._apply(action)
        self._t += 1
        events: tuple[str, ...] = ()
        if self._rate and not self._won and self._t < self.spec.horizon:
            if self._mut_rng.random() < self._rate:
                events = self._mutate()
        self._over = self._won or self._t >= self.spec.horizon
        text = format_action(action) if pre is not None else "(not an action of this world)"
        message = f"{text}: ok" if valid else f"{text}: failed ({error})"
        if self._won:
            message += f"; {self.win_message}"
        elif self._over:
            message += "; out of steps"
        return StepResult(
            observation=self._observe(message, action if pre is not None else None),
            gold=self._store.canonical(),
            valid=valid,
            error=error,
            done=self._over,
            success=self._won,
            unmet=tuple(sorted(unmet)),
            events=events,
        )

    def _task_of(
        self,
        text: str,
        facts: Iterable[Fact],
        goal: Canonical,
        subgoals: Iterable[Subgoal],
        entities: Mapping[str, tuple[str, ...]],
        extra: Mapping[str, Any],
    ) -> Task:
        """The episode's task from its environment-specific parts (the optimal length
        is the plan's, the horizon the spec's)."""
        return Task(
            env=self.name,
            spec=self.spec,
            seed=self._seed,
            archetype=self._archetype,
            text=text,
            facts=tuple(sorted(facts)),
            goal=goal,
            subgoals=tuple(subgoals),
            entities=entities,
            optimal_length=len(self._plan),
            horizon=self.spec.horizon,
            extra=extra,
        )

    # -- hooks each environment writes ---------------------------------------------

    def _build(self, seed: int, archetype: int) -> int:  # pragma: no cover - abstract
        """Index the episode's world (``_world`` and ``_plan`` are set); set ``_kind``,
        ``_task``, the reset state (:meth:`_new_store`) and ``_won``; return the reset
        state's size (the phantom views' size is a tenth of it)."""
        raise NotImplementedError

    def _pre(self, action: Action) -> tuple[Fact, ...] | None:  # pragma: no cover - abstract
        """The gold preconditions of ``action`` now, or None if it is no action here."""
        raise NotImplementedError

    def _label(self, action: Action, unmet: tuple[Fact, ...]) -> str:  # pragma: no cover - abstract
        """The error label of an action whose preconditions ``unmet`` failed."""
        raise NotImplementedError

    def _apply(self, action: Action) -> None:  # pragma: no cover - abstract
        """Carry out a valid action (record what changed in ``_changed``)."""
        raise NotImplementedError

    def _mutate(self) -> tuple[str, ...]:
        """One exogenous change drawn from ``_mut_rng``, uniform over
        :meth:`_mutations` (listed in world order, so the choice never depends on hash
        order), carried out by :meth:`_mutation`; its description, or () when nothing
        can change. A switch that is on turning off (kind ``off``) is done here."""
        options = self._mutations()
        if not options:
            return ()
        kind, ent = self._mut_rng.pick(options)
        if kind == "off":
            self._flip(("on", ent), ("off", ent))
            self._on[ent] = False
            return (f"{ent} was switched off",)
        return self._mutation(kind, ent)

    def _mutations(self) -> list[tuple[str, str]]:  # pragma: no cover - abstract
        """Every exogenous change possible now, as ``(kind, entity)``."""
        raise NotImplementedError

    def _mutation(self, kind: str, ent: str) -> tuple[str, ...]:  # pragma: no cover - abstract
        """Carry out one change of :meth:`_mutations`; its description."""
        raise NotImplementedError

    def _moved(self, ent: str, new: Fact) -> tuple[str, ...]:
        """Move item ``ent`` to ``new`` without the agent's doing; the description."""
        old = self._loc[ent]
        self._move(ent, new)
        return (f"{ent} was moved: {format_fact(old)} -> {format_fact(new)}",)

    def _look(self, action: Action | None) -> Canonical:  # pragma: no cover - abstract
        """Partial mode after a step: what the agent sees now, recorded in ``_seen``."""
        raise NotImplementedError

    def _conflict_fact(self) -> Fact | None:
        """A false fact for an entity of :meth:`_lie_entities` whose slot did not change
        this step (so the previous observation showed its true value), or None if there
        is none: an item (in ``_loc``) in another of :meth:`_lie_places`, any other
        entity in the other value of its two-valued state (:attr:`conflict_states`)."""
        changed = self._changed
        candidates = [e for e in self._lie_entities() if e not in changed]
        if not candidates:
            return None
        ent = self._obs_rng.pick(candidates)
        if ent in self._loc:
            old = self._loc[ent]
            return self._obs_rng.pick([p for p in self._lie_places(ent) if p != old])
        state, other = self.conflict_states[self._kind[ent]]
        return (other, ent) if (state, ent) in self._store else (state, ent)

    def _lie_entities(self) -> tuple[str, ...]:  # pragma: no cover - abstract
        """The entities a conflict may lie about, in world order."""
        raise NotImplementedError

    def _lie_places(self, item: str) -> list[Fact]:  # pragma: no cover - abstract
        """The location facts a conflict may put ``item`` in (its true one is left out)."""
        raise NotImplementedError

    def _phantom_facts(self, rng: Rng) -> list[Fact]:  # pragma: no cover - abstract
        """The distractor mode's phantom world: facts about entities numbered past the
        real ones (:func:`~.observation.phantom_names`), drawn from ``rng``."""
        raise NotImplementedError

    # -- observation ---------------------------------------------------------------

    def _observe(self, message: str, action: Action | None = None) -> Observation:
        mode = self.spec.observation
        gold = self._store.canonical()
        task = self._task.facts
        t = self._t
        if mode == "clean":
            return Observation(t, gold, task, message)
        if mode == "partial":
            if t == 0:
                self._seen.brief(gold, self.slot, 0)
                return Observation(0, gold, task, message)
            return Observation(t, self._look(action), task, message)
        if mode == "distractor":
            extra = self._obs_rng.pick(self._phantoms)
            shown = list(gold)
            for f in extra:  # a few insertions into a sorted list beat a sort of the whole
                insort(shown, f)
            return Observation(t, tuple(shown), task, message, extra)
        if t > 0 and self._obs_rng.random() < CONFLICT_RATE:
            lie = self._conflict_fact()
            if lie is not None:
                return Observation(t, tuple(sorted((*gold, lie))), task, message, (lie,))
        return Observation(t, gold, task, message)

    def _see(self, shown: Iterable[tuple[Hashable, Fact]], out: list[Fact]) -> None:
        """Partial mode: record each ``(slot, fact)`` shown now and add it to ``out``."""
        t = self._t
        see = self._seen.see
        for slot, f in shown:
            see(slot, f, t)
            out.append(f)

    def _place_of(self, fact: Fact, slot: Hashable) -> Hashable | None:
        """The place a location fact of an item (:attr:`item_kinds`) puts it in:
        ``(kind, where)`` by :attr:`item_places` (a floor, a container...), or
        ``"hands"``; None for any other fact."""
        if slot[0] != "loc" or self._kind.get(fact[1]) not in self.item_kinds:  # type: ignore[index]
            return None
        kind = self.item_places.get(fact[0])
        return "hands" if kind is None else (kind, fact[2])

    def _knows(self, fact: Fact) -> bool:
        """Partial mode: the agent's picture holds ``fact`` (:meth:`LastSeen.knows`)."""
        slot = self.slot(fact)
        return slot is not None and self._seen.knows(slot, fact, self._place_of(fact, slot))

    def _always_observable(self, fact: Fact) -> bool:
        """A fact the briefing showed that can never change (a static fact)."""
        return False

    def observable_gold(self) -> frozenset[Fact]:
        if not self._partial:
            return self._store.frozen()
        return frozenset(f for f in self._store.canonical() if self._always_observable(f) or self._knows(f))

    # -- the state -----------------------------------------------------------------

    def gold_state(self) -> Canonical:
        return self._store.canonical()

    def _new_store(self, facts: Iterable[Fact]) -> FactStore:
        """Make ``facts`` the whole world state (at reset and on restore)."""
        self._store = FactStore(facts)
        return self._store

    def preconditions(self, action: Action) -> frozenset[Fact] | None:
        pre = self._pre(action)
        return None if pre is None else frozenset(pre)

    def slot(self, fact: Fact) -> Hashable | None:
        kind = self.slot_of_predicate.get(fact[0]) if fact else None
        if kind is None or len(fact) < 2:
            return None
        return (kind, fact[1])

    def _well_formed(self, action: object) -> bool:
        """``action`` is a known verb with arguments of the kinds :attr:`signatures` says."""
        if not isinstance(action, tuple) or not action:
            return False
        sig = self.signatures.get(action[0]) if isinstance(action[0], str) else None
        if sig is None or len(action) != len(sig) + 1:
            return False
        kind = self._kind
        args = zip(action[1:], sig, strict=True)
        return all(isinstance(a, str) and kind.get(a) in allowed for a, allowed in args)

    def _flip(self, old: Fact, new: Fact) -> None:
        """Replace an entity's state fact ``old`` by ``new`` (the entity changed)."""
        self._store.replace(old, new)
        self._changed.add(old[1])

    def _move(self, x: str, new: Fact) -> None:
        """Move item ``x`` to the location fact ``new`` (worlds whose items lie in
        places keep ``_loc`` and write ``_place``/``_unplace``)."""
        old = self._loc[x]
        self._unplace(x, old)
        self._place(x, new)
        self._loc[x] = new
        self._store.replace(old, new)
        self._changed.add(x)

    def _locate(self, f: Fact) -> bool:
        """Index ``f`` when it says where the agent or an item is (True), else do
        nothing (False): for worlds whose agent walks between rooms and whose items
        lie in places (``_agent``, ``_loc`` and the ``_place`` hook)."""
        if f[0] == "at" and f[1] == "agent":
            self._agent = f[2]
        elif (f[0] in self.item_places or f[0] == "held") and self._kind.get(f[1]) in self.item_kinds:
            self._loc[f[1]] = f
            self._place(f[1], f)
        else:
            return False
        return True

    def _place(self, x: str, f: Fact) -> None:  # pragma: no cover - only worlds with items
        raise NotImplementedError

    def _unplace(self, x: str, f: Fact) -> None:  # pragma: no cover - only worlds with items
        raise NotImplementedError

    # -- agent-written states ------------------------------------------------------

    def normalize(self, facts: Iterable[Fact]) -> State:  # pragma: no cover - abstract
        raise NotImplementedError

    def _arg_problems(self, fact: Fact, sig: tuple[Any, ...]) -> list[str]:
        """Why the arguments of a well-sized fact are wrong: each must be an entity of
        one of the kinds ``sig`` allows (a fact with such problems fills no slot)."""
        problems = []
        for arg, allowed in zip(fact[1:], sig, strict=True):
            kind = self._kind.get(arg)
            if kind is None:
                problems.append(f"{format_fact(fact)}: {arg} is no entity of this world")
            elif kind not in allowed:
                problems.append(f"{format_fact(fact)}: {arg} is a {kind}, not a {'/'.join(sorted(allowed))}")
        return problems

    def _relation_problems(self, fact: Fact) -> list[str]:
        """Other problems of a fact with good arguments (e.g. a room joined to itself);
        the fact still fills its slot."""
        return []

    def invariant_violations(self, facts: Iterable[Fact]) -> list[str]:
        """Malformed facts (unknown predicate, wrong arity, arguments of the wrong kind:
        :meth:`_arg_problems`, :meth:`_relation_problems`) and clashes (two facts of one
        slot). Copies of the task specification's facts are not world state and are
        ignored."""
        problems: list[str] = []
        by_slot: dict[Hashable, list[Fact]] = {}
        for f in sorted(self.normalize(facts), key=repr):
            if not isinstance(f, tuple) or not f or not all(isinstance(a, str) for a in f):
                problems.append(f"{f!r} is not a tuple of strings")
                continue
            if f[0] in self.task_predicates:
                continue
            sig = self.predicates.get(f[0])
            if sig is None:
                problems.append(f"{format_fact(f)}: unknown predicate {f[0]!r}")
                continue
            if len(f) != len(sig) + 1:
                problems.append(f"{format_fact(f)}: {f[0]} takes {len(sig)} argument(s)")
                continue
            bad = self._arg_problems(f, sig)
            if bad:
                problems += bad
                continue
            problems += self._relation_problems(f)
            slot = self.slot(f)
            if slot is not None:
                by_slot.setdefault(slot, []).append(f)
        for slot, fs in by_slot.items():
            if len(fs) > 1:
                listed = " and ".join(format_fact(f) for f in sorted(fs))
                what = self.clashes.get(slot[0], "has two values")  # type: ignore[index]
                problems.append(f"{'.'.join(slot[1:])} {what}: {listed}")  # type: ignore[index]
        return sorted(problems)

    # -- snapshots -----------------------------------------------------------------

    def _state_snapshot(self) -> Any:
        """The world state in a snapshot (the store's facts; more if indexes need it)."""
        return self._store.frozen()

    def _restore_state(self, state: Any) -> None:  # pragma: no cover - abstract
        """Rebuild the world state and its indexes from :meth:`_state_snapshot`."""
        raise NotImplementedError

    def snapshot(self) -> Any:
        return (
            self._state_snapshot(),
            self._t,
            self._mut_rng.getstate(),
            self._obs_rng.getstate(),
            self._seen.copy(),
            (self._world, self._seed, self._archetype, self.spec.branching),
        )

    def restore(self, snapshot: Any) -> None:
        state, t, mut, obs, seen, episode = snapshot
        same = self._world is not None and episode[0] is self._world
        if not same or episode[1:] != (self._seed, self._archetype, self.spec.branching):
            raise ValueError("snapshot: taken in another episode")
        self._restore_state(state)
        self._t = t
        self._over = self._won or t >= self.spec.horizon
        self._mut_rng.setstate(mut)
        self._obs_rng.setstate(obs)
        self._seen = seen.copy()
        self._clear_step()

    # -- accessors -----------------------------------------------------------------

    @property
    def _w(self) -> W:
        if self._world is None:
            raise RuntimeError("call reset() first")
        return self._world

    def optimal_plan(self) -> tuple[Action, ...]:
        self._w  # noqa: B018 - raises before the first reset
        return self._plan

    @property
    def t(self) -> int:
        """Steps taken in this episode."""
        return self._t

    @property
    def done(self) -> bool:
        return self._over

    @property
    def world(self) -> W:
        """The generated world (read-only), for baselines and tests."""
        return self._w


__all__: Sequence[str] = ["EnvironmentBase", "entity_kinds"]
