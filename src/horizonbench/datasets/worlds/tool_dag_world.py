"""ToolDAG's worlds: sizes, DAG archetypes, tokens, generation, decoys and the exact
solver (the rules they follow are in :mod:`horizonbench.datasets.worlds.tool_dag`).

Pure: all randomness comes from the episode seed, through :func:`derive_seed` streams
of their own (the layout, each given input, each decoy).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from horizonbench.core.seeding import derive_seed
from horizonbench.datasets.worlds.base import Action, Rng, WorldKey
from horizonbench.schemas.worlds import DD_MAX, N_ARCHETYPES, SC_MAX, SC_MIN

NAME = "tool_dag"
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
class World(WorldKey):
    """A generated world (without decoys, which depend on branching): names, types,
    the specified wiring and every name's genuine token. Shared read-only between
    episodes."""

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
        sc=sc, dd=dd, seed=seed, archetype=archetype,
        variables=variables, tools=tools, inputs=inputs, order=tuple(tool_at),
        writes=writes, producer={v: t for t, v in writes.items()}, requires=requires,
        type_of=type_of, types=types, genuine=genuine, target=var_at[n - 1], upstream=upstream,
    )  # fmt: skip


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


__all__: Sequence[str] = [
    "ARCHETYPES",
    "Archetype",
    "Components",
    "Decoys",
    "NAME",
    "PARAM_NAMES",
    "TAINT",
    "TOKEN_DIGITS",
    "TYPE_NAMES",
    "World",
    "build_decoys",
    "build_world",
    "components",
    "optimal_length",
    "solve",
    "token",
]
