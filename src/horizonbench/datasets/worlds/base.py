"""The contract every world-model environment keeps (StatefulPuzzle, GraphNav, ToolDAG).

A world environment is a deterministic simulator with an exact gold state at every step
(Appendix B of the world-model-collapse paper). It is pure logic: no I/O, no clocks, and
every random choice comes from the episode seed.

Vocabulary:

- a *fact* is a tuple of strings, predicate first: ``("at", "agent", "room2")``,
  ``("in", "item3", "box1")``, ``("open", "box1")``. Its text form is
  ``at(agent, room2)`` (:func:`format_fact`, read back by :func:`parse_facts`);
- a *world state* is a ``frozenset`` of facts; its *canonical form* is the sorted tuple
  (:func:`canonical`), hashable and printable. The gold state of a step is given in
  canonical form;
- an *action* is a tuple of strings, verb first: ``("go", "room2")``,
  ``("put", "item3", "box1")``, ``("noop",)``. Its text form is ``go(room2)`` or ``noop``
  (:func:`format_action`); :func:`parse_action` reads a model's answer strictly, with
  regular expressions of bounded length (never ``eval``);
- a *slot* is what a fact fills: facts of one slot exclude each other (an item's
  location, a container's open/closed state). Environments name the slot of each fact,
  which is how world consistency and observation conflicts are defined;
- the *stress spec* (:class:`StressSpec`) fixes the six stress axes of the paper
  (Appendix C): state cardinality ``sc``, dependency density ``dd``, horizon ``T``,
  branching, observation mode and mutation level. :data:`REGIMES` holds the five
  backdrops of its Table 11.

Observation modes (shared meaning; each environment documents what its views hold):

- ``clean``: every observation shows the whole gold state, exactly;
- ``partial``: the first observation is a full briefing, later ones show only the state
  slots near the agent; the task specification is never hidden;
- ``distractor``: the whole gold state plus irrelevant, true-looking facts that mention
  only entities that do not exist in the world;
- ``conflict``: the whole gold state plus, now and then, one false fact that contradicts
  what an earlier observation showed (and still holds).

Mutation levels: between steps, with the per-step probability :data:`MUTATION_RATES`
(``static`` 0, ``low`` 0.05, ``medium`` 0.15, ``high`` 0.35), the world changes once in a
way the agent did not cause (someone closes a container, moves an item...), drawn from
the seed; the gold state tracks it. Mutations never achieve anything for the agent, and
never make the task unsolvable.

Seeds: :func:`episode_seed` derives an episode's seed from the root seed, the grid cell,
the archetype (layout family, 0..9) and the variant (instance, 0..9), through
:func:`horizonbench.core.seeding.derive_seed` (sha256), so seeds never depend on worker
identity or on Python's hash randomisation, and a grid's seeds can be published.
"""

from __future__ import annotations

import math
import random
import re
from bisect import bisect_left, insort
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

from horizonbench.schemas.worlds import (
    BRANCHING_MAX,
    DD_MAX,
    DD_MIN,
    HORIZON_MAX,
    MUTATION_LEVELS,
    MUTATION_RATES,
    N_ARCHETYPES,
    N_VARIANTS,
    OBSERVATION_MODES,
    REGIMES,
    SC_MAX,
    SC_MIN,
    Regime,
    StressSpec,
    episode_seed,
)

Fact = tuple[str, ...]
Action = tuple[str, ...]
State = frozenset[Fact]
Canonical = tuple[Fact, ...]


class BadText(ValueError):
    """Text that does not read as an action or a list of facts (the message says why)."""


# --- canonical form and text forms ------------------------------------------------


def canonical(facts: Iterable[Fact]) -> Canonical:
    """The canonical form of a world state: its distinct facts, sorted."""
    return tuple(sorted(set(facts)))


def format_fact(fact: Fact) -> str:
    """``("at", "agent", "room2")`` -> ``at(agent, room2)``."""
    return f"{fact[0]}({', '.join(fact[1:])})"


def format_action(action: Action) -> str:
    """``("go", "room2")`` -> ``go(room2)``; an action without arguments is its verb."""
    if len(action) == 1:
        return action[0]
    return f"{action[0]}({', '.join(action[1:])})"


def format_facts(facts: Iterable[Fact]) -> str:
    """One fact per line, in the order given."""
    return "\n".join(format_fact(f) for f in facts)


#: longest action text and fact listing :func:`parse_action` / :func:`parse_facts` read
MAX_ACTION_TEXT = 300
MAX_FACTS_TEXT = 200_000
MAX_FACTS = 5_000

_NAME = r"[a-z_][a-z0-9_]{0,39}"
_ARG = r"[a-z0-9_][a-z0-9_\-]{0,39}"
_ACTION_RE = re.compile(rf"({_NAME})\s*(?:\(\s*((?:{_ARG}\s*(?:,\s*{_ARG}\s*){{0,7}})?)\))?")
_FACT_RE = re.compile(rf"\s*({_NAME})\s*\(\s*({_ARG}\s*(?:,\s*{_ARG}\s*){{0,7}})\)\s*[,;.]?")
_BULLET_RE = re.compile(r"\s*(?:[-*\u2022]|\d{1,4}[.)])\s+")
_WRAP = " \t\r\n`'\"."


def _split_args(inner: str | None) -> tuple[str, ...]:
    if not inner:
        return ()
    return tuple(a.strip() for a in inner.split(","))


def parse_action(text: str, verbs: Mapping[str, int] | None = None) -> Action:
    """The action in ``text``, which must be exactly one action in function form,
    ``verb(arg, ...)`` or a bare verb for an action without arguments; surrounding
    whitespace, backticks, quotes and one final period are ignored, and names are read
    in lower case. With ``verbs`` (verb -> number of arguments) the verb and its
    arity are checked too. Raises :class:`BadText`; never evaluates the text."""
    if not isinstance(text, str):
        raise BadText("action text is not a string")
    if len(text) > MAX_ACTION_TEXT:
        raise BadText(f"action text longer than {MAX_ACTION_TEXT} characters")
    body = text.strip(_WRAP).lower().replace("\u201c", "").replace("\u201d", "")
    m = _ACTION_RE.fullmatch(body)
    if m is None:
        raise BadText(f"not an action of the form verb(arg, ...): {body[:80]!r}")
    action = (m.group(1), *_split_args(m.group(2)))
    if verbs is not None:
        if action[0] not in verbs:
            raise BadText(f"unknown verb {action[0]!r}; known: {', '.join(sorted(verbs))}")
        if len(action) - 1 != verbs[action[0]]:
            raise BadText(f"{action[0]} takes {verbs[action[0]]} argument(s), got {len(action) - 1}")
    return action


def parse_facts(text: str) -> list[Fact]:
    """The facts listed in ``text``: ``pred(arg, ...)`` items separated by newlines,
    commas or semicolons, optionally as a bulleted or numbered list. Blank lines are
    skipped; anything else that is not a fact raises :class:`BadText` naming it (a
    malformed answer is never read as an empty state). Linear time; never evaluates."""
    if not isinstance(text, str):
        raise BadText("facts text is not a string")
    if len(text) > MAX_FACTS_TEXT:
        raise BadText(f"facts text longer than {MAX_FACTS_TEXT} characters")
    facts: list[Fact] = []
    for raw in text.lower().splitlines():
        line = raw.strip().strip("`").rstrip()
        if not line or line in ("[", "]", "{", "}"):
            continue
        bullet = _BULLET_RE.match(line)
        pos = bullet.end() if bullet else 0
        if line.startswith("[") and line.endswith("]"):
            line, pos = line[1:-1], 0
        while pos < len(line):
            m = _FACT_RE.match(line, pos)
            if m is None:
                rest = line[pos:].strip()
                if not rest:
                    break
                raise BadText(f"not a fact of the form pred(arg, ...): {rest[:80]!r}")
            facts.append((m.group(1), *_split_args(m.group(2))))
            if len(facts) > MAX_FACTS:
                raise BadText(f"more than {MAX_FACTS} facts")
            pos = m.end()
    return facts


# --- what an episode shows and returns -------------------------------------------


@dataclass(frozen=True, slots=True)
class Observation:
    """What the agent is shown after a reset or a step.

    ``facts`` is the state as shown, after the observation mode's noise, sorted;
    ``task`` is the task specification, identical in every observation and mode;
    ``message`` says how the last action went. ``injected`` lists the noise facts
    inside ``facts`` (distractors, conflicts) for evaluators: a prompt shows
    :attr:`text` (or ``facts``), never ``injected``."""

    step: int
    facts: Canonical
    task: Canonical
    message: str
    injected: Canonical = ()

    @property
    def text(self) -> str:
        head = f"step {self.step}: {self.message}"
        return head + ("\n" + format_facts(self.facts) if self.facts else "")


@dataclass(frozen=True, slots=True)
class StepResult:
    """The outcome of one step. ``gold`` is the canonical gold state after the step
    (and after any mutation); ``error`` is one of the environment's error labels when
    ``valid`` is false; ``unmet`` are the gold preconditions of the action that did not
    hold; ``events`` describe changes the agent did not cause (for logs, not prompts)."""

    observation: Observation
    gold: Canonical
    valid: bool
    error: str | None
    done: bool
    success: bool
    unmet: Canonical = ()
    events: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Subgoal:
    """One subgoal of an episode: the ``target`` fact to reach, the ``preconditions``
    that must hold when it is finished (``dd`` of them), the action that alone can make
    each precondition true (``enablers``, aligned), the subgoal that must be done first
    (``after``) and the objects that cannot be used before that (``sealed``)."""

    name: str
    target: Fact
    preconditions: Canonical
    enablers: tuple[Action, ...]
    after: str | None = None
    sealed: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Task:
    """An episode's task: given once at reset, never hidden by any observation mode.

    ``facts`` is the specification as facts, ``text`` the same in words with the action
    syntax; ``goal`` the facts that all hold exactly when the episode is won;
    ``entities`` the world's entity names by kind. ``optimal_length`` is L*, the length
    of the solver's optimal plan from the reset state in the mutation-free world, so a
    pipeline records ``T / L*`` and flags ``T < L*`` (:attr:`horizon_short`)."""

    env: str
    spec: StressSpec
    seed: int
    archetype: int
    text: str
    facts: Canonical
    goal: Canonical
    subgoals: tuple[Subgoal, ...]
    entities: Mapping[str, tuple[str, ...]]
    optimal_length: int
    horizon: int
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def horizon_ratio(self) -> float:
        return self.horizon / self.optimal_length if self.optimal_length else float("inf")

    @property
    def horizon_short(self) -> bool:
        """True when the horizon is shorter than the optimal plan: no agent can win."""
        return self.horizon < self.optimal_length


@runtime_checkable
class Environment(Protocol):
    """A world-model environment. Implementations are deterministic: the same spec,
    seed, archetype and action sequence give the same observations and gold states."""

    #: environment name (``stateful_puzzle``, ``graph_nav``, ``tool_dag``)
    name: ClassVar[str]
    #: verb -> number of arguments: the action vocabulary
    verbs: ClassVar[Mapping[str, int]]
    #: the labels ``StepResult.error`` can take, each documented by the environment
    error_labels: ClassVar[tuple[str, ...]]
    #: the entity kinds (keys of ``Task.entities``) that ``sc`` counts
    sc_kinds: ClassVar[tuple[str, ...]]

    spec: StressSpec

    def reset(self, seed: int, archetype: int = 0) -> tuple[Observation, Task]:
        """Build the episode's world from ``seed`` (all randomness) and ``archetype``
        (layout family, 0..9) and return the first observation and the task."""
        ...

    def step(self, action: Action) -> StepResult:
        """Apply ``action`` if valid (an invalid one changes nothing), advance time by
        one step, let the world mutate, observe. Raises ``RuntimeError`` once done."""
        ...

    def valid_actions(self) -> tuple[Action, ...]:
        """Every action valid now, sorted: its count is the branching the agent faces."""
        ...

    def preconditions(self, action: Action) -> frozenset[Fact] | None:
        """The gold precondition facts of ``action`` in the current state (bound to the
        current positions of the objects it names); the action is valid exactly when
        they all hold. ``None`` for a text that is no action of this world."""
        ...

    def gold_state(self) -> Canonical:
        """The canonical gold state now."""
        ...

    def observable_gold(self) -> frozenset[Fact]:
        """The gold facts the agent could know now from what it was shown (everything
        seen so far and still true as last seen); the task is never hidden."""
        ...

    def invariant_violations(self, facts: Iterable[Fact]) -> list[str]:
        """Why an agent-written world state is inconsistent (an item in two places, a
        container both open and closed, an unknown entity...); empty if consistent."""
        ...

    def normalize(self, facts: Iterable[Fact]) -> State:
        """Agent-written facts in the environment's canonical spelling (e.g. the order
        of a symmetric relation's arguments), so comparisons with gold are fair."""
        ...

    def slot(self, fact: Fact) -> Hashable | None:
        """The state slot ``fact`` fills (facts of one slot exclude each other), or
        ``None`` for facts that exclude nothing (e.g. doors)."""
        ...

    def optimal_plan(self) -> tuple[Action, ...]:
        """An optimal plan from the reset state of the mutation-free world: L* actions."""
        ...

    def snapshot(self) -> Any:
        """An opaque copy of the episode's whole dynamic state (for search and tests)."""
        ...

    def restore(self, snapshot: Any) -> None:
        """Return to a :meth:`snapshot` of the same episode."""
        ...


# --- building blocks for implementations ------------------------------------------


@dataclass(frozen=True, slots=True)
class WorldKey:
    """What a generated world is a function of: its generator's arguments. Every
    environment's ``World`` starts with these fields, so a world names its origin."""

    sc: int
    dd: int
    seed: int
    archetype: int


class FactStore:
    """A world state kept incrementally: a set for membership plus a sorted list, so
    the canonical form after a step costs one small insertion per changed fact, not a
    sort of the whole state. :meth:`canonical` is cached until the next change."""

    __slots__ = ("_set", "_sorted", "_tuple")

    def __init__(self, facts: Iterable[Fact] = ()) -> None:
        self._set: set[Fact] = set(facts)
        self._sorted: list[Fact] = sorted(self._set)
        self._tuple: Canonical | None = None

    def __contains__(self, fact: object) -> bool:
        return fact in self._set

    def __len__(self) -> int:
        return len(self._set)

    def add(self, fact: Fact) -> None:
        if fact not in self._set:
            self._set.add(fact)
            insort(self._sorted, fact)
            self._tuple = None

    def discard(self, fact: Fact) -> None:
        if fact in self._set:
            self._set.remove(fact)
            del self._sorted[bisect_left(self._sorted, fact)]
            self._tuple = None

    def replace(self, old: Fact, new: Fact) -> None:
        self.discard(old)
        self.add(new)

    def canonical(self) -> Canonical:
        if self._tuple is None:
            self._tuple = tuple(self._sorted)
        return self._tuple

    def frozen(self) -> State:
        return frozenset(self._set)


class Rng:
    """Seeded randomness that stays reproducible across Python versions: only
    ``random.Random.random()`` is drawn (its sequence for an integer seed is guaranteed
    stable), and every other choice is computed from it here."""

    __slots__ = ("_r",)

    def __init__(self, seed: int) -> None:
        self._r = random.Random(int(seed))

    def random(self) -> float:
        return self._r.random()

    def chance(self, p: float) -> bool:
        return p > 0.0 and self._r.random() < p

    def below(self, n: int) -> int:
        """A uniform integer in ``0..n-1`` (``n`` >= 1)."""
        return min(int(self._r.random() * n), n - 1)

    def pick(self, seq: Sequence[Any]) -> Any:
        return seq[self.below(len(seq))]

    def shuffled(self, seq: Iterable[Any]) -> list[Any]:
        out = list(seq)
        for i in range(len(out) - 1, 0, -1):
            j = self.below(i + 1)
            out[i], out[j] = out[j], out[i]
        return out

    def sample(self, seq: Sequence[Any], k: int) -> list[Any]:
        """``k`` distinct elements (partial Fisher-Yates), in draw order."""
        pool = list(seq)
        k = min(k, len(pool))
        for i in range(k):
            j = i + self.below(len(pool) - i)
            pool[i], pool[j] = pool[j], pool[i]
        return pool[:k]

    def getstate(self) -> Any:
        return self._r.getstate()

    def setstate(self, state: Any) -> None:
        self._r.setstate(state)


def room_graph(shape: str, n: int, rng: Rng) -> set[tuple[int, int]]:
    """A connected graph of ``shape`` on rooms ``0..n-1``, as index pairs ``(a, b)``
    with ``a < b``: the layout families the archetypes of StatefulPuzzle and GraphNav
    draw from (``line``, ``ring``, ``ladder``, ``star``, ``grid``, ``tree``,
    ``dense``, ``hubs``, ``comb``, ``binary``); the random shapes draw from ``rng``."""
    edges: set[tuple[int, int]] = set()

    def link(a: int, b: int) -> None:
        if a != b:
            edges.add((min(a, b), max(a, b)))

    if shape in ("line", "ring", "ladder"):
        for i in range(n - 1):
            link(i, i + 1)
        if shape == "ring" and n >= 3:
            link(n - 1, 0)
        if shape == "ladder":
            for _ in range(n // 3):
                link(rng.below(n), rng.below(n))
    elif shape == "star":
        for i in range(1, n):
            link(0, i)
    elif shape == "grid":
        width = math.ceil(math.sqrt(n))
        for i in range(n):
            if (i + 1) % width and i + 1 < n:
                link(i, i + 1)
            if i + width < n:
                link(i, i + width)
    elif shape in ("tree", "dense"):
        for i in range(1, n):
            link(rng.below(i), i)
        if shape == "dense":
            for _ in range(n // 2):
                link(rng.below(n), rng.below(n))
    elif shape == "hubs":
        for i in range(1, n):
            link(0 if i == 1 else i % 2, i)
    elif shape == "comb":
        spine = (n + 1) // 2
        for i in range(spine - 1):
            link(i, i + 1)
        for i in range(spine, n):
            link(i - spine, i)
    elif shape == "binary":
        for i in range(1, n):
            link((i - 1) // 2, i)
    else:  # pragma: no cover - the archetype table only names the shapes above
        raise ValueError(f"unknown shape {shape!r}")
    return edges


__all__: Sequence[str] = [
    "Action",
    "BadText",
    "Canonical",
    "Environment",
    "Fact",
    "FactStore",
    "Observation",
    "Rng",
    "State",
    "StepResult",
    "Subgoal",
    "Task",
    "WorldKey",
    "canonical",
    "format_action",
    "format_fact",
    "format_facts",
    "parse_action",
    "parse_facts",
    "room_graph",
    # the stress axes of a world study (schemas/worlds.py, below datasets), re-exported
    "SC_MIN",
    "SC_MAX",
    "DD_MIN",
    "DD_MAX",
    "HORIZON_MAX",
    "BRANCHING_MAX",
    "N_ARCHETYPES",
    "N_VARIANTS",
    "OBSERVATION_MODES",
    "MUTATION_LEVELS",
    "MUTATION_RATES",
    "StressSpec",
    "Regime",
    "REGIMES",
    "episode_seed",
]
