"""Paired one-axis ablations: an ablated episode meets the backdrop's world.

The paper's ablations (Table 4) change one axis around a backdrop; comparing a level
with the backdrop is only fair when both play the same worlds. These tests build the
worlds of a study through ``Study.episodes`` and the real environments and check that
an ablated episode's start state, entities, goal and optimal plan are the backdrop's,
whatever the axis (branching only adds decoys, which the check leaves out).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from horizonbench.datasets.worlds.study import environment_class
from horizonbench.schemas.config import WorldsSpec
from horizonbench.schemas.worlds import EpisodeSpec, Study

LEVELS = {
    "horizon": [10, 20, 80],
    "branching": [1, 2, 8, 16],
    "observation": ["partial", "distractor", "conflict"],
    "mutation": ["low", "medium", "high"],
}
#: entity kinds that branching adds (decoys and ToolDAG's decoy outputs)
BRANCHING_KINDS = ("decoy", "scratch")


def _world(ep: EpisodeSpec) -> dict[str, object]:
    """What makes a world: the entities sc counts, the start state over the entities
    every level shares, the goal and the optimal plan (decoys of branching left out)."""
    env = environment_class(ep.env)(ep.spec)
    _, task = env.reset(ep.seed, ep.archetype)
    decoys = {e for kind in BRANCHING_KINDS for e in task.entities.get(kind, ())}
    start = tuple(f for f in env.gold_state() if not decoys & set(f[1:]))
    counted = {k: v for k, v in task.entities.items() if k in env.sc_kinds}
    return {
        "entities": counted,
        "start": start,
        "goal": task.goal,
        "plan": env.optimal_plan(),
        "seed": ep.seed,
        "archetype": ep.archetype,
    }


def _study(env: str, sc: int, dd: int, **extra: object) -> Study:
    return Study(environments=(env,), regime="III", sc=(sc,), dd=(dd,), archetypes=2, variants=2, **extra)


_AXIS_LEVEL = st.sampled_from([(axis, level) for axis, levels in LEVELS.items() for level in levels])


@settings(max_examples=25, deadline=None)
@given(
    env=st.sampled_from(["stateful_puzzle", "graph_nav", "tool_dag"]),
    sc=st.sampled_from([5, 10, 12]),
    dd=st.integers(1, 4),
    root=st.integers(0, 2**32),
    axis_level=_AXIS_LEVEL,
)
def test_an_axes_override_meets_the_backdrops_worlds(
    env: str, sc: int, dd: int, root: int, axis_level: tuple[str, object]
) -> None:
    """``worlds.axes`` (one changed axis for the whole run) plays the regime's worlds:
    a run at branching 8 or T 80 compares with the backdrop run world for world."""
    axis, level = axis_level
    backdrop = _study(env, sc, dd).episodes(root)
    ablated = _study(env, sc, dd, axes={axis: level}).episodes(root)
    assert len(backdrop) == len(ablated)
    for base, abl in zip(backdrop, ablated, strict=True):
        assert getattr(abl.spec, axis) == level
        assert base.spec.replace(**{axis: level}) == abl.spec  # only the ablated axis changed
        assert _world(abl) == _world(base)


@settings(max_examples=15, deadline=None)
@given(
    env=st.sampled_from(["stateful_puzzle", "graph_nav", "tool_dag"]),
    sc=st.sampled_from([5, 10]),
    dd=st.integers(1, 6),
    root=st.integers(0, 2**32),
    axis_level=_AXIS_LEVEL,
)
def test_ablated_episodes_pair_with_the_backdrop(
    env: str, sc: int, dd: int, root: int, axis_level: tuple[str, object]
) -> None:
    """``worlds.ablations``: every ablated episode has a backdrop partner in the same
    study on the same world, labelled with its axis and level; the backdrop's own
    seeds are those of the study without ablations."""
    axis, level = axis_level
    plain = _study(env, sc, dd).episodes(root)
    episodes = _study(env, sc, dd, ablations={axis: [level]}).episodes(root)
    backdrop = [ep for ep in episodes if not ep.ablation]
    assert backdrop == plain
    partner = {(ep.env, ep.spec.sc, ep.spec.dd, ep.archetype, ep.variant): ep for ep in backdrop}
    ablated = [ep for ep in episodes if ep.ablation]
    assert len(ablated) == len(backdrop)
    for ep in ablated:
        base = partner[(ep.env, ep.spec.sc, ep.spec.dd, ep.archetype, ep.variant)]
        assert ep.ablation == f"{axis}={level}"
        assert ep.spec == base.spec.replace(**{axis: level})
        assert _world(ep) == _world(base)


def test_a_level_equal_to_the_backdrop_adds_no_episode() -> None:
    """Table 4's T = 40 row is the backdrop itself: it is not run twice."""
    study = _study("stateful_puzzle", 10, 6, ablations={"horizon": [10, 40, 80], "branching": [4]})
    episodes = study.episodes(7)
    labels = sorted({ep.ablation for ep in episodes})
    assert labels == ["", "horizon=10", "horizon=80"]
    assert len(episodes) == 3 * 4


def test_ablation_episode_ids_stay_unique() -> None:
    """Episodes that share a world get distinct ids (the episodes table's key)."""
    from horizonbench.datasets.worlds.episode import episode_id

    study = _study("graph_nav", 5, 1, ablations={"branching": [2, 8], "mutation": ["high"]})
    ids = [episode_id(ep.env, "oracle", ep.seed, ep.ablation) for ep in study.episodes(3)]
    assert len(ids) == len(set(ids)) == 4 * 4
    assert episode_id("graph_nav", "oracle", 5) == "graph_nav:oracle:0000000000000005"  # unchanged


def _worlds(**extra: object) -> WorldsSpec:
    return WorldsSpec.model_validate(
        {
            "environments": ["stateful_puzzle"],
            "sc": [10],
            "dd": [6],
            "agents": [{"name": "o", "kind": "oracle"}],
        }
        | extra
    )


def test_config_ablations_reach_the_study() -> None:
    spec = _worlds(ablations={"T": [10, 80], "observation": ["clean", "partial"]})
    assert dict(spec.study().ablations) == {"horizon": (10, 80), "observation": ("clean", "partial")}


@pytest.mark.parametrize(
    ("ablations", "extra", "message"),
    [
        ({"colour": [1]}, {}, "ablations: 'colour' is not an axis"),
        ({"branching": []}, {}, "ablations.branching: list at least one level"),
        ({"branching": [2, 2]}, {}, "ablations.branching: levels must be distinct"),
        ({"branching": [0]}, {}, "ablations.branching: branching: must be in"),
        ({"observation": ["foggy"]}, {}, "ablations.observation: observation: must be one of"),
        ({"horizon": [10]}, {"horizon_factor": 1.5}, "ablations.horizon: T is ablated around a fixed T"),
        ({"horizon": [10]}, {"horizon": "relative"}, "ablations.horizon: T is ablated around a fixed T"),
        ({"horizon": [10], "T": [20]}, {}, "ablations: horizon given twice"),
    ],
)
def test_bad_ablations_name_the_problem(ablations: dict, extra: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
        _worlds(ablations=ablations, **extra)


def test_a_relative_horizon_keeps_the_ablation_label_and_the_pairing() -> None:
    """T = ceil(factor x L*) is read from the world, so an ablated episode gets the
    backdrop's T and keeps its label (its id stays distinct)."""
    from horizonbench.datasets.worlds.study import resolve_horizon

    study = _study("stateful_puzzle", 5, 1, horizon_factor=1.5, ablations={"observation": ["partial"]})
    episodes = [resolve_horizon(ep, 1.5) for ep in study.episodes(0)]
    base = {ep.seed: ep for ep in episodes if not ep.ablation}
    ablated = [ep for ep in episodes if ep.ablation]
    assert len(ablated) == len(base) == 4
    for ep in ablated:
        assert ep.ablation == "observation=partial"
        assert ep.spec.horizon == base[ep.seed].spec.horizon
