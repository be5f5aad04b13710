"""ToolDAG: the paper's tool-use world-model environment (Appendix B).

The agent runs a directed acyclic graph of typed tool calls, keeping a namespace of
variables. Names: variables ``v1..``, tools ``t1..`` (tool ``tK`` writes variable
``vK``), given inputs ``x1..``, decoy tools ``decoy1..`` writing ``scratch1..``, tool
parameters ``a1..a<dd>``.

World
-----
Every value is an opaque 8-hex-digit token, a digest the agent cannot guess. Given
inputs hold their tokens from the start and never change. A variable is either empty
or holds a token. Each tool has ``dd`` typed parameters and writes one variable; the
task names, for every parameter of every tool, the variable or input it must read
(``requires(t, a, u)``), and the target variable the agent must deliver.

The gold state (:data:`PREDICATES`) is the namespace: ``type(name, type)`` for every
variable, input and scratch variable (static); ``value(name, token)`` or
``empty(name)``; ``bound(tool, param, name)`` or ``unbound(tool, param)`` for every
parameter of every tool, decoys included; ``pending(target)`` until the result is
accepted, then ``submitted(target)``.

Actions (:data:`VERBS`), in the function form of :func:`~.base.parse_action`:

- ``bind(tool, param, name)`` wires a variable or given input into a parameter (its
  type must be the parameter's); wiring is a reference, so the name may still be
  empty; a new ``bind`` of the same parameter replaces the old wire, and wires stay
  after calls;
- ``call(tool)`` runs a tool whose parameters are all wired to names holding values:
  it writes a digest of the tool and its input tokens into its output variable (see
  below), replacing what was there;
- ``inspect(name)`` looks at a variable, input or tool (changes nothing);
- ``submit(variable)`` declares the result; the episode is won when it is valid;
- ``noop``.

Each name has a *genuine* token, the one the task's wiring gives all the way from the
given inputs. A tool accepts any well-typed wiring; run on anything but its genuine
arguments it writes a *tainted* token: the digest of the tool and of its arguments with
every tainted one replaced by :data:`TAINT` (so taints never nest and a world has
finitely many states), re-hashed until it is no genuine token. Genuine tokens are
pairwise distinct, so by induction a variable holds its genuine token exactly when its
tool last ran on the specified wiring over genuine values. ``submit`` is valid only for
the target holding its genuine token. Hence the only way to win is to run the whole
chain: no action writes a value, and declaring a result that was not computed that way
fails (``fabricated_result``).

State cardinality
-----------------
``sc`` is the number of active variables: the world has ``sc`` variables and ``sc``
tools, one per variable (:func:`components`). Given inputs are constants (read-only,
never empty, never expire), so they are not active; there are ``dd + ceil(sc / 4)`` of
them, enough for any tool to fill its parameters with distinct names. Every variable
is an ancestor of the target (or the target), so every variable is needed and no two
values of ``sc`` build the same world.

Dependency density
------------------
``dd`` is the number of typed parameters of every tool. A tool reads up to ``dd``
earlier variables (as its archetype's DAG shape says) and fills its other parameters
with distinct given inputs. Every parameter must be wired as specified and every tool
must run, so with ``n = sc`` the optimal plan has exactly ``L* = n * (dd + 1) + 1``
actions: ``dd`` binds and a call per tool, then ``submit``. (So at the paper's T = 40
many grid cells cannot be won at all; ``Task.horizon_short`` says which.) Each wire is
made true by exactly one action (its ``bind``, ``Subgoal.enablers``) and each
variable's genuine token by exactly one (its tool's ``call``); the tests show by
exhaustive search over the real dynamics that forbidding any one of them makes the
goal unreachable. Wires persist so that, after a mutation, redoing a value costs one
``call`` when its wires still hold.

Branching
---------
``branching = b`` adds ``b - 1`` decoy tools, each with ``dd`` typed parameters and its
own scratch variable. They can be wired, called and inspected, and their outputs can
even be wired into real tools (which then compute wrong tokens), but the target never
needs them, so each one adds valid actions without changing L* or the real world: a
decoy is drawn from its own seed, the same at every branching level.

Task
----
``Task.entities`` lists ``variable``, ``input``, ``tool``, ``decoy`` and ``scratch``
names (``sc`` counts the variables: :attr:`ToolDAG.sc_kinds`). ``Task.facts`` hold
``target(v)``, ``writes(tool, v, type)``, ``param(tool, a, type)`` for every tool and
``requires(tool, a, name)`` for every real one; ``Task.text`` says the same in words,
with the action syntax. The goal is ``submitted(target)``. ``Task.subgoals`` are the
needed calls in topological order: subgoal ``t`` has the target fact ``value(v,
genuine token)``, its ``dd`` wires ``bound(t, a, name)`` as preconditions with their
``bind`` actions as enablers, and as ``after`` the last tool (in that order) whose
output it reads; all of them are in ``Task.extra["upstream"]``.

Observation modes
-----------------
``clean``: the whole gold state every step. ``partial``: a full briefing at reset,
then only the slots the last action touched (a ``bind``: the parameter and the name;
a ``call`` or an ``inspect`` of a tool: its parameters, the names wired to them and its
output; an ``inspect`` or ``submit`` of a name: that name) plus the target's status;
changes out of sight (mutations) are not shown, and the task (every signature and
wiring, the target) is never hidden. ``distractor``: the whole gold state plus
``max(1, len(gold) // 10)`` facts of a persistent phantom namespace whose variables,
inputs and tools do not exist (numbered past the real ones): one of
:data:`PHANTOM_VIEWS` subsets drawn at reset, picked at random each step.
``conflict``: the whole gold state plus, with probability :data:`CONFLICT_RATE` per
step, one false fact for a variable, input or real parameter whose slot did not change
this step, so it contradicts what the previous observation showed.

Mutation
--------
After the agent's action, with the spec's per-step rate, one exogenous change happens:
with equal chance (when both are possible) a computed variable holding a value expires
(becomes empty) or a wired parameter loses its wire; the victim is drawn uniformly.
Both only undo work, and everything they undo can be redone (given inputs never
expire), so a mutation never achieves anything and never makes the task unsolvable.

Error labels
------------
An invalid action changes nothing (time still passes). Its label:

- ``missing_argument``: a tool lacks an argument it needs: ``call`` of a tool with an
  unwired parameter, or ``bind`` of a name whose type is not the parameter's (failed
  ``bound`` or ``type`` facts);
- ``skipped_dependency``: every parameter of the called tool is wired, but a name it
  reads is empty because the tool producing it has not run (since reset, or since the
  value expired): the call skipped an upstream step (failed ``value`` facts only);
- ``fabricated_result``: the agent uses or declares a value no tool produced: a
  ``submit`` of anything but the target holding its genuine token (the target empty,
  computed through other wiring, a non-target, a name that does not exist), or a
  ``bind`` of a name that is no variable or input of this world (an invented or
  distractor variable, a token);
- ``unknown_action``: not an action of this world (unknown verb, wrong number of
  arguments, a tool or parameter that does not exist, ``inspect`` of an unknown name).

``missing_argument`` wins over ``skipped_dependency`` when a call has both faults.

Solver
------
:func:`solve` wires and calls the tools in topological order, then submits. It is
exact: a plan must wire each of the ``n * dd`` parameters (only ``bind`` makes a wire,
one per action), run each of the ``n`` tools (only ``call`` writes a variable) and
submit, so no plan is shorter than ``n * (dd + 1) + 1``, and this one is valid. The
tests compare it with a breadth-first search over the real dynamics on small worlds.
"""

from __future__ import annotations

import hashlib
import math
from bisect import insort
from collections.abc import Container, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar, cast

from horizonbench.core.seeding import derive_seed
from horizonbench.datasets.worlds.base import (
    DD_MAX,
    N_ARCHETYPES,
    SC_MAX,
    SC_MIN,
    Action,
    Canonical,
    EnvironmentBase,
    Fact,
    FactStore,
    Observation,
    Rng,
    State,
    StepResult,
    Subgoal,
    Task,
    format_action,
    format_fact,
)

NAME = "tool_dag"

#: a state slot: facts of one slot exclude each other (``("var", name)``,
#: ``("arg", tool, param)``, ``("type", name)``, ``("status", target)``)
Slot = tuple[str, ...]

#: verb -> number of arguments
VERBS: Mapping[str, int] = {"bind": 3, "call": 1, "inspect": 1, "submit": 1, "noop": 0}

ERROR_LABELS: tuple[str, ...] = (
    "missing_argument",
    "skipped_dependency",
    "fabricated_result",
    "unknown_action",
)

#: the value types a world draws from (its archetype says how many it uses)
TYPE_NAMES: tuple[str, ...] = (
    "table",
    "vector",
    "text",
    "number",
    "image",
    "audio",
    "json",
    "date",
    "graph",
    "matrix",
    "url",
    "code",
)
#: parameter names: a tool of density dd has the first dd
PARAM_NAMES: tuple[str, ...] = tuple(f"a{i}" for i in range(1, DD_MAX + 1))
#: hex digits of a token
TOKEN_DIGITS = 8
#: what a tainted argument contributes to a tainted token's digest (taints never nest)
TAINT = "?"

#: world-state predicate -> argument kinds (``param`` is a parameter name, ``type`` a
#: type name, ``token`` any string; the other kinds are entity kinds)
PREDICATES: Mapping[str, tuple[str, ...]] = {
    "type": ("name", "type"),
    "value": ("name", "token"),
    "empty": ("computed",),
    "bound": ("tool", "param", "name"),
    "unbound": ("tool", "param"),
    "pending": ("target",),
    "submitted": ("target",),
}
#: predicates of the task specification (``Task.facts``): not world state, never flagged
TASK_PREDICATES = frozenset({"target", "writes", "param", "requires"})
_SLOT_OF_PREDICATE: Mapping[str, str] = {
    "type": "type",
    "value": "var",
    "empty": "var",
    "bound": "arg",
    "unbound": "arg",
    "pending": "status",
    "submitted": "status",
}
_CLASH = {
    "var": "holds two values",
    "arg": "is wired twice",
    "status": "is both pending and submitted",
    "type": "has two types",
}

#: how many subsets of the phantom namespace distractor observations choose from
PHANTOM_VIEWS = 32
#: probability that a conflict-mode observation carries one contradicting fact
CONFLICT_RATE = 0.5


# --- tokens ------------------------------------------------------------------------


def token(tool: str, args: Sequence[str]) -> str:
    """The raw token ``tool`` computes from the argument tokens ``args`` (in parameter
    order): the first :data:`TOKEN_DIGITS` hex digits of a sha256 digest."""
    return hashlib.sha256("\x1f".join((tool, *args)).encode()).hexdigest()[:TOKEN_DIGITS]


def _avoiding(tok: str, taken: Container[str]) -> str:
    """``tok``, re-hashed until it is none of ``taken`` (so no two values coincide)."""
    while tok in taken:
        tok = hashlib.sha256(f"again\x1f{tok}".encode()).hexdigest()[:TOKEN_DIGITS]
    return tok


# --- state cardinality -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Components:
    """What ``(sc, dd)`` builds: ``variables == tools == sc`` and the given inputs."""

    variables: int
    tools: int
    inputs: int


def components(sc: int, dd: int) -> Components:
    """The world size of ``(sc, dd)`` (see the module docstring for the rule)."""
    if not SC_MIN <= sc <= SC_MAX:
        raise ValueError(f"sc: must be in {SC_MIN}..{SC_MAX}, got {sc}")
    if not 1 <= dd <= DD_MAX:
        raise ValueError(f"dd: must be in 1..{DD_MAX}, got {dd}")
    return Components(variables=sc, tools=sc, inputs=dd + math.ceil(sc / 4))


def optimal_length(sc: int, dd: int) -> int:
    """L*: ``sc * (dd + 1) + 1`` (every parameter wired, every tool run, one submit)."""
    return sc * (dd + 1) + 1


# --- archetypes --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Archetype:
    """A DAG family: its ``shape`` (how tools read earlier variables) and how many of
    :data:`TYPE_NAMES` its values use (fewer types: more well-typed wrong wirings)."""

    index: int
    shape: str
    types: int


#: the ten DAG families. Over topological positions (the last is the target): ``chain``
#: reads the previous one; ``tree`` is a random in-tree; ``diamond`` forks each third
#: position into two that join at the next; ``layered`` reads random positions of the
#: previous layer (width ``isqrt(n)``); ``wide`` is the shallowest in-tree (each reads as
#: many as it may); ``skip`` is a chain with random skip links; ``broadcast`` a chain in
#: which every position also reads the first (and often the second); ``twin`` two
#: interleaved chains joined at the target; ``binary`` a binary in-tree; ``random`` a
#: random in-tree plus random links. Capacity (``dd``) limits all of them.
ARCHETYPES: tuple[Archetype, ...] = (
    Archetype(0, "chain", 6),
    Archetype(1, "tree", 8),
    Archetype(2, "diamond", 5),
    Archetype(3, "layered", 10),
    Archetype(4, "wide", 4),
    Archetype(5, "skip", 7),
    Archetype(6, "broadcast", 9),
    Archetype(7, "twin", 6),
    Archetype(8, "binary", 12),
    Archetype(9, "random", 3),
)
assert len(ARCHETYPES) == N_ARCHETYPES


def _dag(shape: str, n: int, dd: int, rng: Rng) -> list[list[int]]:
    """The variable inputs of each position ``0..n-1`` (a topological order; the sink
    ``n-1`` is the target): lists of earlier positions, at most ``dd`` each, such that
    every position but the sink feeds a later one.

    Positions are visited from ``n-2`` down, each choosing a *primary* consumer among
    the later positions with room (the shape's preference, else the nearest later one
    with room: one always exists, since positions ``j+1..n-1`` offer ``(n-1-j) * dd``
    places and only ``n-2-j`` primaries took some). Then the shape adds extra edges
    where room is left. With ``dd = 1`` every shape is a chain."""
    inputs: list[list[int]] = [[] for _ in range(n)]

    def room(c: int) -> bool:
        return len(inputs[c]) < dd

    def any_later(j: int) -> int | None:
        later = [c for c in range(j + 1, n) if room(c)]
        return rng.pick(later) if later else None

    width = max(2, math.isqrt(n))
    for j in range(n - 2, -1, -1):
        want: int | None
        if shape in ("chain", "skip", "broadcast"):
            want = j + 1
        elif shape in ("tree", "random"):
            want = any_later(j)
        elif shape == "wide":
            want = max((c for c in range(j + 1, n) if room(c)), default=None)
        elif shape == "diamond":
            want = j + 1 if j % 3 == 0 else min(n - 1, (j // 3 + 1) * 3)
        elif shape == "layered":
            layer = j // width
            nxt = [c for c in range((layer + 1) * width, min((layer + 2) * width, n)) if room(c)]
            want = rng.pick(nxt) if nxt else n - 1
        elif shape == "binary":
            want = n - 1 - (n - 2 - j) // 2
        elif shape == "twin":
            want = min(j + 2, n - 1)
        else:  # pragma: no cover - the archetype table only names the shapes above
            raise ValueError(f"unknown shape {shape!r}")
        if want is None or not j < want < n or not room(want):
            want = next(c for c in range(j + 1, n) if room(c))
        inputs[want].append(j)

    def extra(i: int, src: int) -> None:
        if 0 <= src < i and room(i) and src not in inputs[i]:
            inputs[i].append(src)

    for i in range(n):
        if shape == "diamond" and i % 3 == 2:
            extra(i, i - 2)  # the top of a diamond feeds both sides
        elif shape == "skip" and i >= 2:
            while room(i) and rng.chance(0.5):
                extra(i, rng.below(i - 1))
        elif shape == "layered" and i >= width:
            layer = i // width
            for src in range((layer - 1) * width, layer * width):
                if rng.chance(0.5):
                    extra(i, src)
        elif shape == "broadcast" and i >= 2:
            extra(i, 0)
            if rng.chance(0.5):
                extra(i, 1)
        elif shape == "random" and i >= 1:
            for _ in range(dd):
                if rng.chance(0.35):
                    extra(i, rng.below(i))
    for lst in inputs:
        lst.sort()
    return inputs


# --- the world ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class World:
    """A generated world (without decoys, which depend on branching): names, types,
    the specified wiring and every name's genuine token. Shared read-only between
    episodes."""

    sc: int
    dd: int
    seed: int
    archetype: int
    variables: tuple[str, ...]
    tools: tuple[str, ...]
    inputs: tuple[str, ...]
    order: tuple[str, ...]
    writes: Mapping[str, str]
    producer: Mapping[str, str]
    requires: Mapping[str, tuple[str, ...]]
    type_of: Mapping[str, str]
    types: tuple[str, ...]
    genuine: Mapping[str, str]
    target: str
    upstream: Mapping[str, tuple[str, ...]]

    @property
    def params(self) -> tuple[str, ...]:
        return PARAM_NAMES[: self.dd]

    def param_types(self, tool: str) -> tuple[str, ...]:
        return tuple(self.type_of[u] for u in self.requires[tool])


@lru_cache(maxsize=512)
def build_world(sc: int, dd: int, seed: int, archetype: int) -> World:
    """The world of ``(sc, dd, seed, archetype)``; all randomness from ``seed``."""
    comp = components(sc, dd)
    arch = ARCHETYPES[archetype]
    rng = Rng(derive_seed(seed, NAME, "layout"))
    n, m = comp.variables, comp.inputs
    variables = tuple(f"v{i}" for i in range(1, n + 1))
    tools = tuple(f"t{i}" for i in range(1, n + 1))
    inputs = tuple(f"x{i}" for i in range(1, m + 1))
    types = tuple(rng.sample(TYPE_NAMES, arch.types))

    # positions -> names, shuffled so names never reveal the order
    perm = rng.shuffled(range(n))
    var_at = [variables[p] for p in perm]
    tool_at = [tools[p] for p in perm]
    dag = _dag(arch.shape, n, dd, rng)

    type_of: dict[str, str] = {}
    for u in (*inputs, *variables):
        type_of[u] = rng.pick(types)
    requires: dict[str, tuple[str, ...]] = {}
    upstream: dict[str, tuple[str, ...]] = {}
    for pos in range(n):
        names = [var_at[p] for p in dag[pos]]
        names += [inputs[i] for i in rng.sample(range(m), dd - len(names))]
        requires[tool_at[pos]] = tuple(rng.shuffled(names))
        upstream[tool_at[pos]] = tuple(tool_at[p] for p in dag[pos])

    genuine: dict[str, str] = {}
    for x in inputs:
        genuine[x] = _avoiding(f"{derive_seed(seed, NAME, 'given', x) & 0xFFFFFFFF:08x}", genuine.values())
    for pos in range(n):
        t = tool_at[pos]
        raw = token(t, [genuine[u] for u in requires[t]])
        genuine[var_at[pos]] = _avoiding(raw, set(genuine.values()))

    writes = dict(zip(tools, variables, strict=True))
    return World(
        sc=sc,
        dd=dd,
        seed=seed,
        archetype=archetype,
        variables=variables,
        tools=tools,
        inputs=inputs,
        order=tuple(tool_at),
        writes=writes,
        producer={v: t for t, v in writes.items()},
        requires=requires,
        type_of=type_of,
        types=types,
        genuine=genuine,
        target=var_at[n - 1],
        upstream=upstream,
    )


@dataclass(frozen=True, slots=True)
class Decoys:
    """The decoy tools of one branching level: ``decoy<i>`` writes ``scratch<i>``. Their
    ``wiring`` is unpublished (no task needs it) and only defines the scratch tokens a
    readiness precondition names."""

    tools: tuple[str, ...]
    scratch: tuple[str, ...]
    writes: Mapping[str, str]
    param_types: Mapping[str, tuple[str, ...]]
    type_of: Mapping[str, str]
    wiring: Mapping[str, tuple[str, ...]]
    genuine: Mapping[str, str]


@lru_cache(maxsize=512)
def build_decoys(sc: int, dd: int, seed: int, archetype: int, branching: int) -> Decoys:
    """The ``branching - 1`` decoy tools of ``build_world(sc, dd, seed, archetype)``;
    decoy ``i`` is drawn from its own seed, so each is the same at every branching level
    and the real world never changes with it."""
    world = build_world(sc, dd, seed, archetype)
    pool = (*world.inputs, *world.variables)
    real = frozenset(world.genuine.values())
    tools, scratch = [], []
    writes: dict[str, str] = {}
    param_types: dict[str, tuple[str, ...]] = {}
    type_of: dict[str, str] = {}
    wiring: dict[str, tuple[str, ...]] = {}
    genuine: dict[str, str] = {}
    for i in range(1, branching):
        rng = Rng(derive_seed(world.seed, NAME, "decoy", i))
        d, w = f"decoy{i}", f"scratch{i}"
        names = tuple(rng.sample(pool, world.dd))
        tools.append(d)
        scratch.append(w)
        writes[d] = w
        wiring[d] = names
        param_types[d] = tuple(world.type_of[u] for u in names)
        type_of[w] = rng.pick(world.types)
        genuine[w] = _avoiding(token(d, [world.genuine[u] for u in names]), real)
    return Decoys(tuple(tools), tuple(scratch), writes, param_types, type_of, wiring, genuine)


# --- the solver --------------------------------------------------------------------


@lru_cache(maxsize=512)
def solve(sc: int, dd: int, seed: int, archetype: int) -> tuple[Action, ...]:
    """An optimal plan for ``build_world(sc, dd, seed, archetype)`` from its reset state
    without mutations (decoys change nothing): each tool in topological order, its
    parameters wired as specified, then called; then ``submit(target)``."""
    w = build_world(sc, dd, seed, archetype)
    plan: list[Action] = []
    for t in w.order:
        plan += [("bind", t, a, u) for a, u in zip(w.params, w.requires[t], strict=True)]
        plan.append(("call", t))
    plan.append(("submit", w.target))
    assert len(plan) == optimal_length(sc, dd)
    return tuple(plan)


# --- the environment ---------------------------------------------------------------


class ToolDAG(EnvironmentBase[World]):
    """The ToolDAG environment (see the module docstring). One instance runs one
    episode at a time; :meth:`reset` starts a new one."""

    name: ClassVar[str] = NAME
    verbs: ClassVar[Mapping[str, int]] = VERBS
    error_labels: ClassVar[tuple[str, ...]] = ERROR_LABELS
    #: the entity kinds ``sc`` counts (given inputs are constants; decoys come from branching)
    sc_kinds: ClassVar[tuple[str, ...]] = ("variable",)

    # -- reset ---------------------------------------------------------------------

    def reset(self, seed: int, archetype: int = 0) -> tuple[Observation, Task]:
        self._check_reset(seed, archetype)
        spec = self.spec
        w = build_world(spec.sc, spec.dd, seed, archetype)
        dec = build_decoys(spec.sc, spec.dd, seed, archetype, spec.branching)
        self._world, self._decoys = w, dec
        self._seed, self._archetype = seed, archetype
        self._target = w.target
        self._inputs = frozenset(w.inputs)
        self._computed = (*w.variables, *dec.scratch)
        self._type_of: dict[str, str] = {**w.type_of, **dec.type_of}
        self._genuine: dict[str, str] = {**w.genuine, **dec.genuine}
        self._real_genuine = frozenset(w.genuine.values())
        self._clean = frozenset(self._genuine.values())
        self._writes: dict[str, str] = {**w.writes, **dec.writes}
        self._all_tools = (*w.tools, *dec.tools)
        self._kind: dict[str, str] = {}
        for names, kind in (
            (w.variables, "variable"),
            (w.inputs, "input"),
            (w.tools, "tool"),
            (dec.tools, "decoy"),
            (dec.scratch, "scratch"),
        ):
            for u in names:
                self._kind[u] = kind
        # per tool: its parameters with their types, and the tokens of its genuine wiring
        self._signature: dict[str, tuple[tuple[str, str], ...]] = {}
        self._ptype: dict[tuple[str, str], str] = {}
        for t in self._all_tools:
            ptypes = w.param_types(t) if t in w.requires else dec.param_types[t]
            self._signature[t] = tuple(zip(w.params, ptypes, strict=True))
            for a, ty in self._signature[t]:
                self._ptype[(t, a)] = ty
        wiring = {**w.requires, **dec.wiring}
        self._genuine_args = {t: tuple(w.genuine[u] for u in wiring[t]) for t in self._all_tools}
        self._params = tuple(self._ptype)
        self._by_type: dict[str, tuple[str, ...]] = {ty: () for ty in w.types}
        for u in (*w.inputs, *w.variables, *dec.scratch):
            self._by_type[self._type_of[u]] += (u,)
        self._token_cache: dict[tuple[str, tuple[str, ...]], str] = {}
        self._plan = solve(spec.sc, spec.dd, seed, archetype)
        self._task = self._make_task()
        self._partial = spec.observation == "partial"
        self._rate = spec.mutation_rate
        self._mut_rng = Rng(derive_seed(seed, NAME, "mutation"))
        self._obs_rng = Rng(derive_seed(seed, NAME, "observation"))
        self._static_valid: list[Action] | None = None  # built on first use: large worlds have many
        self._lie_slots: tuple[Slot, ...] = (
            *(("var", u) for u in (*w.inputs, *w.variables)),
            *(("arg", t, a) for t in w.tools for a in w.params),
        )
        self._val: dict[str, str | None] = {x: w.genuine[x] for x in w.inputs}
        self._val.update((u, None) for u in self._computed)
        self._bound: dict[tuple[str, str], str | None] = dict.fromkeys(self._params)
        self._won = False
        self._store = FactStore(self._initial_facts())
        self._initial_size = len(self._store)
        self._phantoms = self._make_phantoms() if spec.observation == "distractor" else ()
        self._t = 0
        self._over = False
        self._known: dict[Slot, Fact] = {}
        self._changed: set[Slot] = set()
        return self._observe("start", None), self._task

    def _initial_facts(self) -> list[Fact]:
        facts: list[Fact] = [("type", u, ty) for u, ty in self._type_of.items()]
        facts += [self._var_fact(u) for u in self._val]
        facts += [("unbound", t, a) for t, a in self._params]
        facts.append(("pending", self._target))
        return facts

    def _make_static_valid(self) -> list[Action]:
        """The actions valid in every state: ``noop``, ``inspect`` of every name and every
        well-typed ``bind`` (wiring needs no value, only the type)."""
        acts: list[Action] = [("noop",)]
        acts += [("inspect", u) for u in self._kind]
        for (t, a), ty in self._ptype.items():
            acts += [("bind", t, a, u) for u in self._by_type[ty]]
        acts.sort()
        return acts

    def _var_fact(self, u: str) -> Fact:
        tok = self._val[u]
        return ("empty", u) if tok is None else ("value", u, tok)

    def _arg_fact(self, t: str, a: str) -> Fact:
        u = self._bound[(t, a)]
        return ("unbound", t, a) if u is None else ("bound", t, a, u)

    def _status_fact(self) -> Fact:
        return ("submitted" if self._won else "pending", self._target)

    # -- the task ------------------------------------------------------------------

    def _make_task(self) -> Task:
        w, dec, spec = self._w, self._decoys, self.spec
        facts: list[Fact] = [("target", w.target)]
        subgoals: list[Subgoal] = []
        position = {t: i for i, t in enumerate(w.order)}
        for t in w.order:
            v = w.writes[t]
            facts.append(("writes", t, v, w.type_of[v]))
            pre: list[Fact] = []
            for a, u in zip(w.params, w.requires[t], strict=True):
                facts.append(("param", t, a, w.type_of[u]))
                facts.append(("requires", t, a, u))
                pre.append(("bound", t, a, u))
            ups = w.upstream[t]
            after = max(ups, key=position.__getitem__) if ups else None
            enablers = tuple(("bind", *p[1:]) for p in pre)
            subgoals.append(Subgoal(t, ("value", v, w.genuine[v]), tuple(pre), enablers, after))
        for d in dec.tools:
            facts.append(("writes", d, dec.writes[d], dec.type_of[dec.writes[d]]))
            facts += [("param", d, a, ty) for a, ty in zip(w.params, dec.param_types[d], strict=True)]
        entities = {
            "variable": w.variables,
            "input": w.inputs,
            "tool": w.tools,
            "decoy": dec.tools,
            "scratch": dec.scratch,
        }
        comp = components(w.sc, w.dd)
        return Task(
            env=NAME,
            spec=spec,
            seed=self._seed,
            archetype=self._archetype,
            text=self._task_text(),
            facts=tuple(sorted(facts)),
            goal=(("submitted", w.target),),
            subgoals=tuple(subgoals),
            entities=entities,
            optimal_length=len(self._plan),
            horizon=spec.horizon,
            extra={
                "variables": comp.variables,
                "tools": comp.tools,
                "inputs": comp.inputs,
                "decoys": len(dec.tools),
                "shape": ARCHETYPES[w.archetype].shape,
                "types": w.types,
                "edges": sum(len(u) for u in w.upstream.values()),
                "upstream": dict(w.upstream),
                "order": w.order,
            },
        )

    def _signature_text(self, t: str, names: Sequence[str] | None) -> str:
        parts = []
        for i, (a, ty) in enumerate(self._signature[t]):
            parts.append(f"{a}: {ty}" + (f" <- {names[i]}" if names else ""))
        out = self._writes[t]
        return f"{t}({', '.join(parts)}) -> {out}: {self._type_of[out]}"

    def _task_text(self) -> str:
        w, dec = self._w, self._decoys
        lines = [
            "You run typed tools over a namespace of variables. Every value is an opaque token.",
            "Given inputs (they never change): "
            + ", ".join(f"{x}: {w.type_of[x]}" for x in w.inputs)
            + " (their tokens are in the state).",
            "Variables (empty at the start): " + ", ".join(f"{v}: {w.type_of[v]}" for v in w.variables) + ".",
            "Tools, with the name each parameter must read (param: type <- name) and what each writes:",
        ]
        lines += [f"  {self._signature_text(t, w.requires[t])}" for t in w.tools]
        if dec.tools:
            lines.append("Decoy tools (callable, never needed):")
            lines += [f"  {self._signature_text(d, None)}" for d in dec.tools]
        lines += [
            f"Target: compute {w.target} through the wiring above, all the way from the given inputs,",
            f"then declare it with submit({w.target}). A value computed through other wiring does not count.",
            "Actions:",
            "  bind(tool, param, name) wires a variable or input of the parameter's type into the",
            "    parameter (the name may still be empty; binding again replaces the wire; wires stay);",
            "  call(tool) runs a tool whose parameters are all wired to names holding values and",
            "    writes its output variable; inspect(name) shows a variable, input or tool;",
            "  submit(variable) declares the result; noop.",
        ]
        if self.spec.mutation != "static":
            lines.append("Computed values may expire and wires may come loose on their own: redo them.")
        lines.append(f"You have {self.spec.horizon} steps.")
        return "\n".join(lines)

    # -- preconditions -------------------------------------------------------------

    def _pre(self, action: object) -> tuple[Fact, ...] | None:
        """The gold preconditions of ``action`` now, or None if it is no action here."""
        if not isinstance(action, tuple) or not action or not all(isinstance(a, str) for a in action):
            return None
        verb = action[0]
        n = len(action)
        if verb == "bind":
            if n != 4:
                return None
            ty = self._ptype.get((action[1], action[2]))
            return None if ty is None else (("type", action[3], ty),)
        if verb == "call":
            if n != 2 or action[1] not in self._signature:
                return None
            return self._call_pre(action[1])
        if verb == "submit":
            if n != 2:
                return None
            u = action[1]
            if u in self._val:
                return (("pending", u), ("value", u, self._genuine[u]))
            return (("pending", u),)
        if verb == "inspect":
            return () if n == 2 and action[1] in self._kind else None
        if verb == "noop" and n == 1:
            return ()
        return None

    def _call_pre(self, t: str) -> tuple[Fact, ...]:
        """Each parameter wired (to what it is wired to now, else to the specified name)
        and each wired name holding a value (its value now, else its genuine token)."""
        bound, val, genuine = self._bound, self._val, self._genuine
        pre: list[Fact] = []
        for i, (a, _) in enumerate(self._signature[t]):
            u = bound[(t, a)]
            if u is None:
                spec = self._w.requires.get(t) or self._decoys.wiring[t]
                pre.append(("bound", t, a, spec[i]))
            else:
                pre.append(("bound", t, a, u))
                tok = val[u]
                pre.append(("value", u, genuine[u] if tok is None else tok))
        return tuple(pre)

    def preconditions(self, action: Action) -> frozenset[Fact] | None:
        pre = self._pre(action)
        return None if pre is None else frozenset(pre)

    def _label(self, action: Action, unmet: Sequence[Fact]) -> str:
        verb = action[0]
        if verb == "call":
            return "missing_argument" if any(f[0] == "bound" for f in unmet) else "skipped_dependency"
        if verb == "bind" and action[3] in self._val:
            return "missing_argument"
        return "fabricated_result"  # submit, or a bind of a name that is no value of this world

    # -- step ----------------------------------------------------------------------

    def step(self, action: Action) -> StepResult:
        if self._world is None:
            raise RuntimeError("call reset() first")
        if self._over:
            raise RuntimeError("the episode is over; call reset()")
        self._changed = set()
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
            message += "; result accepted"
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

    def _set_value(self, u: str, tok: str | None) -> None:
        old = self._var_fact(u)
        self._val[u] = tok
        self._store.replace(old, self._var_fact(u))
        self._changed.add(("var", u))

    def _set_wire(self, t: str, a: str, u: str | None) -> None:
        old = self._arg_fact(t, a)
        self._bound[(t, a)] = u
        self._store.replace(old, self._arg_fact(t, a))
        self._changed.add(("arg", t, a))

    def _compute(self, t: str, args: tuple[str, ...]) -> str:
        """The token ``t`` writes from argument tokens ``args``: its output's genuine
        token for the genuine arguments; else a tainted token, the digest of the tool and
        the arguments with every tainted one replaced by :data:`TAINT`, re-hashed until it
        is no real genuine token."""
        if args == self._genuine_args[t]:
            return self._genuine[self._writes[t]]
        clean = self._clean
        marks = tuple(a if a in clean else TAINT for a in args)
        key = (t, marks)
        tok = self._token_cache.get(key)
        if tok is None:
            tok = self._token_cache[key] = _avoiding(token(t, marks), self._real_genuine)
        return tok

    def _apply(self, action: Action) -> None:
        verb = action[0]
        if verb == "bind":
            self._set_wire(action[1], action[2], action[3])
        elif verb == "call":
            t = action[1]
            bound, val = self._bound, self._val
            # the preconditions held: every parameter is wired to a name holding a value
            args = cast(tuple[str, ...], tuple(val[cast(str, bound[(t, a)])] for a, _ in self._signature[t]))
            self._set_value(self._writes[t], self._compute(t, args))
        elif verb == "submit":
            self._store.replace(("pending", self._target), ("submitted", self._target))
            self._changed.add(("status", self._target))
            self._won = True

    # -- mutation ------------------------------------------------------------------

    def _mutate(self) -> tuple[str, ...]:
        """One exogenous change: a computed value expires or a wire comes loose (kind
        first, then the victim, each uniform, in world order)."""
        values = [u for u in self._computed if self._val[u] is not None]
        wires = [p for p in self._params if self._bound[p] is not None]
        kinds = [k for k, options in (("expire", values), ("unwire", wires)) if options]
        if not kinds:
            return ()
        if self._mut_rng.pick(kinds) == "expire":
            u = self._mut_rng.pick(values)
            self._set_value(u, None)
            return (f"{u} expired",)
        t, a = self._mut_rng.pick(wires)
        self._set_wire(t, a, None)
        return (f"{t}.{a} came unwired",)

    # -- observation ---------------------------------------------------------------

    def _observe(self, message: str, action: Action | None) -> Observation:
        mode = self.spec.observation
        gold = self._store.canonical()
        task = self._task.facts
        if mode == "clean":
            return Observation(self._t, gold, task, message)
        if mode == "partial":
            if self._t == 0:
                for f in gold:
                    self._known[cast(Slot, self._slot_of(f))] = f
                return Observation(0, gold, task, message)
            return Observation(self._t, self._look(action), task, message)
        if mode == "distractor":
            extra = self._obs_rng.pick(self._phantoms)
            shown = list(gold)
            for f in extra:  # a few insertions into a sorted list beat a sort of the whole
                insort(shown, f)
            return Observation(self._t, tuple(shown), task, message, extra)
        if self._t > 0 and self._obs_rng.random() < CONFLICT_RATE:
            lie = self._conflict_fact()
            if lie is not None:
                return Observation(self._t, tuple(sorted((*gold, lie))), task, message, (lie,))
        return Observation(self._t, gold, task, message)

    def _tool_slots(self, t: str) -> list[Slot]:
        out: list[Slot] = []
        for a, _ in self._signature[t]:
            out.append(("arg", t, a))
            u = self._bound[(t, a)]
            if u is not None:
                out.append(("var", u))
        out.append(("var", self._writes[t]))
        return out

    def _touched(self, action: Action | None) -> list[Slot]:
        """Partial mode: the slots an (interpretable) action touched or looked at."""
        if action is None or action[0] == "noop":
            return []
        verb, arg = action[0], action[1]
        if verb == "bind":
            return [("arg", arg, action[2])] + ([("var", action[3])] if action[3] in self._val else [])
        if verb == "call" or (verb == "inspect" and arg in self._signature):
            return self._tool_slots(arg)
        if verb == "inspect":
            return [("var", arg), ("type", arg)]
        return [("var", arg)] if arg in self._val else []  # submit

    def _fact_of(self, slot: Slot) -> Fact:
        kind = slot[0]
        if kind == "var":
            return self._var_fact(slot[1])
        if kind == "arg":
            return self._arg_fact(slot[1], slot[2])
        if kind == "type":
            return ("type", slot[1], self._type_of[slot[1]])
        return self._status_fact()

    def _look(self, action: Action | None) -> Canonical:
        """Partial mode: the touched slots and the target's status, recorded as the
        agent's latest view of each."""
        known = self._known
        out = set()
        slots: list[Slot] = [*self._touched(action), ("status", self._target)]
        for slot in slots:
            f = self._fact_of(slot)
            known[slot] = f
            out.add(f)
        return tuple(sorted(out))

    def _fake_token(self, avoid: str | None) -> str:
        tok = f"{int(self._obs_rng.random() * 2**32):08x}"
        return tok if tok != avoid else f"{(int(tok, 16) + 1) % 2**32:08x}"

    def _conflict_fact(self) -> Fact | None:
        """A false fact for a slot that did not change this step (so the previous
        observation showed its true value), or None if none was found."""
        rng = self._obs_rng
        for _ in range(8):
            slot = rng.pick(self._lie_slots)
            if slot not in self._changed:
                break
        else:
            return None
        if slot[0] == "var":
            u = slot[1]
            tok = self._val[u]
            if tok is not None and u not in self._inputs and rng.chance(0.5):
                return ("empty", u)
            return ("value", u, self._fake_token(tok))
        t, a = slot[1], slot[2]
        cur = self._bound[(t, a)]
        others = [u for u in self._by_type[self._ptype[(t, a)]] if u != cur]
        if cur is not None and (not others or rng.chance(0.5)):
            return ("unbound", t, a)
        return ("bound", t, a, rng.pick(others))

    def _make_phantoms(self) -> tuple[Canonical, ...]:
        """A persistent namespace of names that do not exist (numbered past the real
        ones), and :data:`PHANTOM_VIEWS` subsets of it of ``max(1, len(gold) // 10)``
        facts: a distractor observation shows one of them."""
        w = self._w
        rng = Rng(derive_seed(self._seed, NAME, "phantoms"))
        n, m = len(w.variables), len(w.inputs)
        variables = [f"v{n + i}" for i in range(1, max(2, n // 2) + 1)]
        inputs = [f"x{m + i}" for i in range(1, max(1, m // 3) + 1)]
        tools = [f"t{n + i}" for i in range(1, max(1, n // 3) + 1)]
        type_of = {u: rng.pick(w.types) for u in (*inputs, *variables)}
        facts: list[Fact] = [("type", u, ty) for u, ty in type_of.items()]
        for u in inputs:
            facts.append(("value", u, f"{int(rng.random() * 2**32):08x}"))
        for u in variables:
            facts.append(
                ("value", u, f"{int(rng.random() * 2**32):08x}") if rng.chance(0.5) else ("empty", u)
            )
        names = list(type_of)
        for t in tools:
            for a in w.params:
                facts.append(("bound", t, a, rng.pick(names)) if rng.chance(0.5) else ("unbound", t, a))
        k = min(len(facts), max(1, self._initial_size // 10))
        return tuple(tuple(sorted(rng.sample(facts, k))) for _ in range(PHANTOM_VIEWS))

    # -- queries -------------------------------------------------------------------

    def gold_state(self) -> Canonical:
        return self._store.canonical()

    def observable_gold(self) -> frozenset[Fact]:
        if not self._partial:
            return self._store.frozen()
        known = self._known
        return frozenset(f for f in self._store.canonical() if known.get(cast(Slot, self._slot_of(f))) == f)

    def slot(self, fact: Fact) -> Hashable | None:
        return self._slot_of(fact)

    def _slot_of(self, fact: Fact) -> Slot | None:
        kind = _SLOT_OF_PREDICATE.get(fact[0]) if fact else None
        if kind is None:
            return None
        if kind == "arg":
            return ("arg", fact[1], fact[2]) if len(fact) >= 3 else None
        return (kind, fact[1]) if len(fact) >= 2 else None

    def valid_actions(self) -> tuple[Action, ...]:
        if self._static_valid is None:
            self._static_valid = self._make_static_valid()
        out = list(self._static_valid)
        bound, val = self._bound, self._val
        for t in self._all_tools:
            for a, _ in self._signature[t]:
                u = bound[(t, a)]
                if u is None or val[u] is None:
                    break
            else:
                insort(out, ("call", t))
        if not self._won and val[self._target] == self._genuine[self._target]:
            insort(out, ("submit", self._target))
        return tuple(out)

    @property
    def decoys(self) -> Decoys:
        """This episode's decoy tools (read-only)."""
        if self._world is None:
            raise RuntimeError("call reset() first")
        return self._decoys

    # -- agent-written states ------------------------------------------------------

    def normalize(self, facts: Iterable[Fact]) -> State:
        """Facts as tuples. ToolDAG has no symmetric relation and names are already in
        lower case (:func:`~.base.parse_facts`), so nothing else needs respelling."""
        return frozenset(tuple(f) if isinstance(f, list) else f for f in facts)

    def _arg_kind_ok(self, kind: str, arg: str) -> bool:
        if kind == "name":
            return arg in self._type_of
        if kind == "computed":
            return arg in self._type_of and arg not in self._inputs
        if kind == "tool":
            return arg in self._signature
        if kind == "param":
            return arg in PARAM_NAMES
        if kind == "type":
            return arg in TYPE_NAMES
        if kind == "target":
            return arg == self._target
        return True  # token

    def invariant_violations(self, facts: Iterable[Fact]) -> list[str]:
        """Malformed facts (unknown predicate, wrong arity, a name that is no variable,
        input or tool of the right kind, a parameter the tool lacks, an empty given
        input, a status of a non-target) and facts no run can produce (a type other than
        the declared one, a wire between different types), plus clashes (two facts of
        one slot: a variable with two values, a parameter wired twice...). Copies of the
        task specification's facts are not world state and are ignored."""
        problems: list[str] = []
        by_slot: dict[Slot, list[Fact]] = {}
        why = {
            "name": "no variable or input of this world",
            "computed": "no computed variable (given inputs are never empty)",
            "tool": "no tool of this world",
            "param": "no parameter name",
            "type": "no type",
            "target": "not the target",
        }
        for f in sorted(self.normalize(facts), key=repr):
            if not isinstance(f, tuple) or not f or not all(isinstance(a, str) for a in f):
                problems.append(f"{f!r} is not a tuple of strings")
                continue
            if f[0] in TASK_PREDICATES:
                continue
            sig = PREDICATES.get(f[0])
            if sig is None:
                problems.append(f"{format_fact(f)}: unknown predicate {f[0]!r}")
                continue
            if len(f) != len(sig) + 1:
                problems.append(f"{format_fact(f)}: {f[0]} takes {len(sig)} argument(s)")
                continue
            bad = [
                f"{arg} is {why[kind]}"
                for kind, arg in zip(sig, f[1:], strict=True)
                if not self._arg_kind_ok(kind, arg)
            ]
            if not bad and f[0] in ("bound", "unbound") and (f[1], f[2]) not in self._ptype:
                bad.append(f"{f[1]} has no parameter {f[2]}")
            if not bad and f[0] == "type" and self._type_of[f[1]] != f[2]:
                bad.append(f"{f[1]} is declared a {self._type_of[f[1]]}")
            if not bad and f[0] == "bound" and self._type_of[f[3]] != self._ptype[(f[1], f[2])]:
                bad.append(
                    f"{f[3]} is a {self._type_of[f[3]]}, {f[1]}.{f[2]} takes a {self._ptype[(f[1], f[2])]}"
                )
            if bad:
                problems += [f"{format_fact(f)}: {b}" for b in bad]
                continue
            slot = self._slot_of(f)
            if slot is not None:
                by_slot.setdefault(slot, []).append(f)
        for slot, fs in by_slot.items():
            if len(fs) > 1:
                listed = " and ".join(format_fact(f) for f in sorted(fs))
                problems.append(f"{'.'.join(slot[1:])} {_CLASH[slot[0]]}: {listed}")
        return sorted(problems)

    # -- snapshots -----------------------------------------------------------------

    def snapshot(self) -> Any:
        return (
            self._store.frozen(),
            dict(self._val),
            dict(self._bound),
            self._won,
            self._t,
            self._mut_rng.getstate(),
            self._obs_rng.getstate(),
            dict(self._known),
            (self._world, self._decoys, self._seed, self._archetype),
        )

    def restore(self, snapshot: Any) -> None:
        facts, val, bound, won, t, mut, obs, known, episode = snapshot
        same = self._world is not None and episode[0] is self._world and episode[1] is self._decoys
        if not same or episode[2:] != (self._seed, self._archetype):
            raise ValueError("snapshot: taken in another episode")
        self._store = FactStore(facts)
        self._val = dict(val)
        self._bound = dict(bound)
        self._won = won
        self._t = t
        self._over = won or t >= self.spec.horizon
        self._mut_rng.setstate(mut)
        self._obs_rng.setstate(obs)
        self._known = dict(known)
        self._changed = set()


__all__: Sequence[str] = [
    "ARCHETYPES",
    "Archetype",
    "CONFLICT_RATE",
    "Components",
    "Decoys",
    "ERROR_LABELS",
    "PARAM_NAMES",
    "PHANTOM_VIEWS",
    "PREDICATES",
    "TAINT",
    "TASK_PREDICATES",
    "TOKEN_DIGITS",
    "TYPE_NAMES",
    "ToolDAG",
    "VERBS",
    "World",
    "build_decoys",
    "build_world",
    "components",
    "optimal_length",
    "solve",
    "token",
]
