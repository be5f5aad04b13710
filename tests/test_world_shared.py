"""The world environments' shared mechanics and the study config's place in the layers.

- the config models read a ``worlds`` section without importing any environment
  (schemas sit below datasets), and the environment names the schema accepts are the
  registry's;
- the last-seen bookkeeping of partial observation (``worlds/observation.py``) answers
  what a brute-force scan of everything shown so far answers;
- a new environment that writes only its rules (``Lamps``, the README's "Adding an
  environment") gets the episode machinery of ``worlds/environment.py``.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterable
from typing import Any, get_args

from hypothesis import given, settings
from hypothesis import strategies as st

from horizonbench.datasets.worlds.base import Rng, StressSpec, WorldKey
from horizonbench.datasets.worlds.environment import EnvironmentBase, entity_kinds
from horizonbench.datasets.worlds.observation import LastSeen, phantom_names
from horizonbench.datasets.worlds.study import ENVIRONMENTS, environment_class
from horizonbench.schemas.config import WorldsSpec


def test_the_worlds_schema_imports_no_environment() -> None:
    """Validating a worlds section and building its study loads no datasets module."""
    code = textwrap.dedent(
        """
        import sys
        from horizonbench.schemas.config import WorldsSpec
        spec = WorldsSpec.model_validate({
            "environments": ["graph_nav"], "regime": "III", "sc": [5], "dd": [1],
            "agents": [{"name": "o", "kind": "oracle"}],
        })
        assert len(spec.study().episodes(0)) == 100
        loaded = sorted(m for m in sys.modules if m.startswith("horizonbench.datasets"))
        print(loaded)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_the_schema_names_the_registered_environments() -> None:
    """The config's list of environment names is the registry's, in its order."""
    (literal,) = get_args(WorldsSpec.model_fields["environments"].annotation)
    assert get_args(literal) == tuple(ENVIRONMENTS)


# --- last-seen bookkeeping ------------------------------------------------------------

_SLOTS = st.sampled_from(["s1", "s2", "s3"])
_FACTS = st.sampled_from([("a", "x"), ("b", "x"), ("c", "y")])
_PLACES = st.sampled_from(["p1", "p2", None])
#: one observation: what it showed per slot, and the places it looked at
_STEP = st.tuples(st.lists(st.tuples(_SLOTS, _FACTS), max_size=4), st.lists(_PLACES.filter(bool), max_size=2))


@settings(max_examples=200, deadline=None)
@given(
    briefing=st.lists(st.tuples(_SLOTS, _FACTS), max_size=3),
    steps=st.lists(_STEP, max_size=8),
    queries=st.lists(st.tuples(_SLOTS, _FACTS, _PLACES), min_size=1, max_size=10),
)
def test_last_seen_matches_a_scan_of_everything_shown(
    briefing: list[tuple[str, tuple[str, ...]]],
    steps: list[tuple[list[tuple[str, tuple[str, ...]]], list[str]]],
    queries: list[tuple[str, tuple[str, ...], str | None]],
) -> None:
    """``LastSeen.knows`` answers what a brute-force scan of the log answers: the last
    view of the slot showed the fact, and (for a fact that puts something in a place)
    no look at that place came at a later step."""
    slot_of = {f: s for s, f in briefing}  # the briefing's facts, each with its slot
    seen = LastSeen()
    seen.brief(list(slot_of), slot_of.get, 0)
    log: list[tuple[int, str, object]] = [(0, "see", (s, f)) for f, s in slot_of.items()]
    for t, (shown, looked) in enumerate(steps, start=1):
        for place in looked:
            seen.look_at(place, t)
            log.append((t, "look", place))
        for slot, f in shown:
            seen.see(slot, f, t)
            log.append((t, "see", (slot, f)))
    for slot, fact, place in queries:
        views = [(t, what[1]) for t, kind, what in log if kind == "see" and what[0] == slot]  # type: ignore[index]
        expected = bool(views) and views[-1][1] == fact
        if expected and place is not None:
            last_look = max((t for t, kind, what in log if kind == "look" and what == place), default=-1)
            expected = last_look <= views[-1][0]
        assert seen.knows(slot, fact, place) == expected, (slot, fact, place, log)


@settings(max_examples=12, deadline=None)
@given(
    env_name=st.sampled_from(sorted(ENVIRONMENTS)),
    seed=st.integers(0, 10**6),
    archetype=st.integers(0, 9),
    mutation=st.sampled_from(["static", "high"]),
    picks=st.lists(st.integers(0, 10**6), min_size=1, max_size=25),
)
def test_partial_observable_gold_is_what_the_agent_was_last_shown(
    env_name: str, seed: int, archetype: int, mutation: str, picks: list[int]
) -> None:
    """Under partial observation, every fact ``observable_gold`` reports holds, was
    shown, and, when it fills a slot that later observations showed again, is what
    the latest of them showed for that slot (recomputed from the observations)."""
    spec = StressSpec(sc=6, dd=2, horizon=60, branching=3, observation="partial", mutation=mutation)
    env = environment_class(env_name)(spec)
    observation, _ = env.reset(seed, archetype)
    latest: dict[object, tuple[str, ...]] = {}
    shown: set[tuple[str, ...]] = set()

    def record(facts: tuple[tuple[str, ...], ...]) -> None:
        shown.update(facts)
        for f in facts:
            slot = env.slot(f)
            if slot is not None:
                latest[slot] = f

    record(observation.facts)
    for pick in picks:
        if env.done:
            break
        actions = env.valid_actions()
        result = env.step(actions[pick % len(actions)])
        record(result.observation.facts)
        gold = set(result.gold)
        for f in env.observable_gold():
            assert f in gold and f in shown, f
            slot = env.slot(f)
            assert slot is None or latest.get(slot, f) == f, (f, latest.get(slot))


# --- a new environment gets the episode machinery for free ---------------------------


class Lamps(EnvironmentBase[WorldKey]):
    """The smallest environment: ``sc`` lamps, all off; the goal is every lamp on.
    It writes only its rules (the hooks the README's "Adding an environment" names)."""

    name, verbs, error_labels, sc_kinds = (
        "lamps",
        {"toggle": 1, "noop": 0},
        ("already_on", "unknown_action"),
        ("lamp",),
    )
    predicates, task_predicates = {"on": (frozenset({"lamp"}),), "off": (frozenset({"lamp"}),)}, frozenset()
    signatures, slot_of_predicate = (
        {"toggle": (frozenset({"lamp"}),), "noop": ()},
        {"on": "lamp", "off": "lamp"},
    )
    clashes, conflict_states = {"lamp": "is both on and off"}, {"lamp": ("on", "off")}
    generate = staticmethod(WorldKey)

    @staticmethod
    def solver(sc: int, dd: int, seed: int, archetype: int) -> tuple[tuple[str, ...], ...]:
        return tuple(("toggle", f"lamp{i}") for i in range(1, sc + 1))

    def _build(self, seed: int, archetype: int) -> int:
        self._lamps = tuple(f"lamp{i}" for i in range(1, self.spec.sc + 1))
        self._kind = entity_kinds({"lamp": self._lamps}, agent=False)
        self._on = dict.fromkeys(self._lamps, False)
        goal = tuple(("on", x) for x in self._lamps)
        self._task = self._task_of(
            "Turn every lamp on with toggle(lamp).", (), goal, (), {"lamp": self._lamps}, {}
        )
        self._won = False
        return len(self._new_store(("off", x) for x in self._lamps))

    def _pre(self, action: tuple[str, ...]) -> tuple[tuple[str, ...], ...] | None:
        return None if not self._well_formed(action) else (("off", action[1]),) if len(action) > 1 else ()

    def _label(self, action: tuple[str, ...], unmet: tuple[tuple[str, ...], ...]) -> str:
        return "already_on"

    def _apply(self, action: tuple[str, ...]) -> None:
        if action[0] == "toggle":
            self._flip(("off", action[1]), ("on", action[1]))
            self._on[action[1]] = True
            self._won = all(self._on.values())

    def _mutations(self) -> list[tuple[str, str]]:
        return [("off", x) for x in self._lamps if self._on[x]]

    def _look(self, action: tuple[str, ...] | None) -> tuple[tuple[str, ...], ...]:
        out: list[tuple[str, ...]] = []
        if action is not None and len(action) > 1:
            x = action[1]
            self._see([(("lamp", x), ("on" if self._on[x] else "off", x))], out)
        return tuple(out)

    def _lie_entities(self) -> tuple[str, ...]:
        return self._lamps

    def _phantom_facts(self, rng: Rng) -> list[tuple[str, ...]]:
        return [("on" if rng.chance(0.5) else "off", x) for x in phantom_names("lamp", len(self._lamps), 3)]

    def valid_actions(self) -> tuple[tuple[str, ...], ...]:
        return (("noop",), *(("toggle", x) for x in self._lamps if not self._on[x]))

    def normalize(self, facts: Iterable[tuple[str, ...]]) -> frozenset[tuple[str, ...]]:
        return frozenset(tuple(f) for f in facts)

    def _restore_state(self, state: Any) -> None:
        store = self._new_store(state)
        self._on = {x: ("on", x) in store for x in self._lamps}
        self._won = all(self._on.values())


def _lamps(observation: str, mutation: str = "static") -> Lamps:
    env = Lamps(StressSpec(sc=4, dd=1, horizon=30, observation=observation, mutation=mutation))
    env.reset(7, 0)
    return env


def test_a_new_environment_gets_the_episode_machinery_from_the_base() -> None:
    """Writing only the hooks gives reset, step with its messages and error labels,
    the task, the optimal plan, the invariant check, snapshots and the win."""
    env = _lamps("clean")
    assert env.optimal_plan() == tuple(("toggle", f"lamp{i}") for i in range(1, 5))
    assert env.step(("fly", "lamp1")).error == "unknown_action"
    snap = env.snapshot()
    assert env.step(("toggle", "lamp1")).observation.message == "toggle(lamp1): ok"
    bad = env.step(("toggle", "lamp1"))
    assert (bad.valid, bad.error, bad.unmet) == (False, "already_on", (("off", "lamp1"),))
    assert env.invariant_violations([("on", "lamp1"), ("off", "lamp1"), ("on", "lamp9")]) == [
        "lamp1 is both on and off: off(lamp1) and on(lamp1)",
        "on(lamp9): lamp9 is no entity of this world",
    ]
    env.restore(snap)
    assert env.t == 1 and ("off", "lamp1") in env.gold_state()
    for i in range(1, 5):
        last = env.step(("toggle", f"lamp{i}"))
    assert last.done and last.success and last.observation.message == "toggle(lamp4): ok; goal reached"


def test_a_new_environment_gets_every_observation_mode_and_mutation() -> None:
    """Partial observation (briefing, then what ``_look`` shows, tracked by the
    last-seen bookkeeping), phantom distractors, conflicting lies and exogenous
    switch-offs all come from the base."""
    env = _lamps("partial")
    seen = env.step(("toggle", "lamp2"))
    assert seen.observation.facts == (("on", "lamp2"),)
    assert env.observable_gold() == frozenset(env.gold_state())  # nothing changed out of sight
    distractor = _lamps("distractor").step(("noop",)).observation
    assert distractor.injected and all(
        f[1] not in {"lamp1", "lamp2", "lamp3", "lamp4"} for f in distractor.injected
    )
    conflict = _lamps("conflict")
    lies = [
        r.observation.injected
        for r in (conflict.step(("noop",)) for _ in range(10))
        if r.observation.injected
    ]
    assert lies and all(lie[0] == ("on", lie[0][1]) for lie in lies)  # every lamp is off: a lie says on
    mutating = _lamps("clean", "high")
    events = [e for x in ("lamp1", "lamp2", "lamp3") for e in mutating.step(("toggle", x)).events]
    events += [e for _ in range(20) if not mutating.done for e in mutating.step(("noop",)).events]
    assert events and all(e.endswith("was switched off") for e in events)
