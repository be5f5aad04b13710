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

from bisect import insort
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, cast

from horizonbench.datasets.worlds.base import Action, Canonical, Fact, Rng, State, Subgoal, Task, format_fact
from horizonbench.datasets.worlds.environment import EnvironmentBase, entity_kinds
from horizonbench.datasets.worlds.observation import CONFLICT_RATE, PHANTOM_VIEWS, phantom_names
from horizonbench.datasets.worlds.tool_dag_world import (
    ARCHETYPES,
    NAME,
    PARAM_NAMES,
    TAINT,
    TYPE_NAMES,
    Decoys,
    World,
    _avoiding,
    build_decoys,
    build_world,
    components,
    solve,
    token,
)
from horizonbench.datasets.worlds.tool_dag_world import TOKEN_DIGITS as TOKEN_DIGITS
from horizonbench.datasets.worlds.tool_dag_world import Archetype as Archetype
from horizonbench.datasets.worlds.tool_dag_world import Components as Components
from horizonbench.datasets.worlds.tool_dag_world import optimal_length as optimal_length

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
#: why an argument of a fact is wrong, by the kind :data:`PREDICATES` names
_WHY = {
    "name": "no variable or input of this world",
    "computed": "no computed variable (given inputs are never empty)",
    "tool": "no tool of this world",
    "param": "no parameter name",
    "type": "no type",
    "target": "not the target",
}
_CLASH = {
    "var": "holds two values",
    "arg": "is wired twice",
    "status": "is both pending and submitted",
    "type": "has two types",
}

# --- the environment ---------------------------------------------------------------


class ToolDAG(EnvironmentBase[World]):
    """ToolDAG: the rules of the module docstring on the shared episode machinery
    (its ``_pre`` checks actions itself: arguments are names, parameters and tokens)."""

    name, verbs, error_labels = NAME, VERBS, ERROR_LABELS
    #: the entity kinds ``sc`` counts (given inputs are constants; decoys come from branching)
    sc_kinds = ("variable",)
    predicates, task_predicates, clashes, win_message = PREDICATES, TASK_PREDICATES, _CLASH, "result accepted"
    generate, solver = staticmethod(build_world), staticmethod(solve)

    # -- reset ---------------------------------------------------------------------

    def _build(self, seed: int, archetype: int) -> int:
        spec, w = self.spec, self._w
        self._decoys = dec = build_decoys(spec.sc, spec.dd, seed, archetype, spec.branching)
        self._target = w.target
        self._inputs = frozenset(w.inputs)
        self._computed = (*w.variables, *dec.scratch)
        self._type_of: dict[str, str] = {**w.type_of, **dec.type_of}
        self._genuine: dict[str, str] = {**w.genuine, **dec.genuine}
        self._real_genuine = frozenset(w.genuine.values())
        self._clean = frozenset(self._genuine.values())
        self._writes: dict[str, str] = {**w.writes, **dec.writes}
        self._all_tools = (*w.tools, *dec.tools)
        names = (w.variables, w.inputs, w.tools, dec.tools, dec.scratch)
        self._entities = dict(zip(("variable", "input", "tool", "decoy", "scratch"), names, strict=True))
        self._kind = entity_kinds(self._entities, agent=False)
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
        self._task = self._make_task()
        self._static_valid: list[Action] | None = None  # built on first use: large worlds have many
        self._lie_slots: tuple[Slot, ...] = (
            *(("var", u) for u in (*w.inputs, *w.variables)),
            *(("arg", t, a) for t in w.tools for a in w.params),
        )
        self._val: dict[str, str | None] = {x: w.genuine[x] for x in w.inputs}
        self._val.update((u, None) for u in self._computed)
        self._bound: dict[tuple[str, str], str | None] = dict.fromkeys(self._params)
        self._won = False
        return len(self._new_store(self._initial_facts()))

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
        w, dec = self._w, self._decoys
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
        comp = components(w.sc, w.dd)
        goal = (("submitted", w.target),)
        extra = {
            "variables": comp.variables,
            "tools": comp.tools,
            "inputs": comp.inputs,
            "decoys": len(dec.tools),
            "shape": ARCHETYPES[w.archetype].shape,
            "types": w.types,
            "edges": sum(len(u) for u in w.upstream.values()),
            "upstream": dict(w.upstream),
            "order": w.order,
        }
        return self._task_of(self._task_text(), facts, goal, subgoals, self._entities, extra)

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

    def _label(self, action: Action, unmet: tuple[Fact, ...]) -> str:
        verb = action[0]
        if verb == "call":
            return "missing_argument" if any(f[0] == "bound" for f in unmet) else "skipped_dependency"
        if verb == "bind" and action[3] in self._val:
            return "missing_argument"
        return "fabricated_result"  # submit, or a bind of a name that is no value of this world

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
        out: list[Fact] = []
        slots: list[Slot] = [*self._touched(action), ("status", self._target)]
        self._see(((slot, self._fact_of(slot)) for slot in slots), out)
        return tuple(sorted(set(out)))

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

    def _phantom_facts(self, rng: Rng) -> list[Fact]:
        """A persistent namespace of variables, inputs and tools that do not exist."""
        w = self._w
        n, m = len(w.variables), len(w.inputs)
        variables = phantom_names("v", n, max(2, n // 2))
        inputs = phantom_names("x", m, max(1, m // 3))
        tools = phantom_names("t", n, max(1, n // 3))
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
        return facts

    # -- queries -------------------------------------------------------------------

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

    def _arg_problems(self, fact: Fact, sig: tuple[str, ...]) -> list[str]:
        """A name that is no variable, input or tool of the right kind, a parameter the
        tool lacks, an empty given input, a status of a non-target; and facts no run can
        produce (a type other than the declared one, a wire between different types)."""
        f = fact
        bad = [
            f"{arg} is {_WHY[kind]}"
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
        return [f"{format_fact(f)}: {b}" for b in bad]

    # -- snapshots -----------------------------------------------------------------

    def _state_snapshot(self) -> Any:
        return (self._store.frozen(), dict(self._val), dict(self._bound), self._won)

    def _restore_state(self, state: Any) -> None:
        facts, val, bound, won = state
        self._new_store(facts)
        self._val = dict(val)
        self._bound = dict(bound)
        self._won = won


#: this module's names (its world's, from tool_dag_world.py, are importable here too)
__all__: Sequence[str] = [
    "CONFLICT_RATE",
    "ERROR_LABELS",
    "PHANTOM_VIEWS",
    "PREDICATES",
    "TASK_PREDICATES",
    "ToolDAG",
    "VERBS",
]
