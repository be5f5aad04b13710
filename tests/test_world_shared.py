"""The world environments' shared mechanics and the study config's place in the layers.

- the config models read a ``worlds`` section without importing any environment
  (schemas sit below datasets), and the environment names the schema accepts are the
  registry's;
- the last-seen bookkeeping of partial observation (``worlds/observation.py``) answers
  what a brute-force scan of everything shown so far answers.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import get_args

from hypothesis import given, settings
from hypothesis import strategies as st

from horizonbench.datasets.worlds.base import StressSpec
from horizonbench.datasets.worlds.observation import LastSeen
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
