"""Every shipped config validates, so an example never rots."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from horizonbench.cli.main import _demo_text
from horizonbench.schemas.config import load_config, parse_config

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("path", sorted((ROOT / "configs").glob("*.yaml")), ids=lambda p: p.name)
def test_example_configs_validate(path):
    cfg = load_config(path)
    assert cfg.families or cfg.worlds


def test_world_configs_are_the_papers_grid_and_fine_scan():
    grid = load_config(ROOT / "configs" / "wmc-grid.yaml").worlds
    assert grid is not None and grid.regime == "III"
    assert (grid.sc, grid.dd, grid.archetypes, grid.variants) == ([5, 10, 20, 40], [1, 2, 4, 6], 10, 10)
    assert set(grid.environments) == {"stateful_puzzle", "graph_nav", "tool_dag"}
    fine = load_config(ROOT / "configs" / "wmc-fine.yaml").worlds
    assert fine is not None and fine.sc == list(range(10, 21)) and fine.dd == [1]
    assert fine.archetypes * fine.variants == 50


def test_figure1_config_is_the_papers_setting():
    cfg = load_config(ROOT / "configs" / "figure1.yaml")
    maze = cfg.families["maze"]
    assert (maze.params["grid_rows"], maze.params["grid_cols"], maze.params["num_keys"]) == (40, 40, 2)
    assert maze.params["noise_ratio"] == 0.0
    bins = maze.sampling.bins
    assert (bins.min, bins.max, bins.width, bins.per_bin) == (10, 120, 1, 40)


def test_demo_config_is_offline_only():
    cfg = parse_config(yaml.safe_load(_demo_text()))
    assert {m.provider for m in cfg.evaluation.models} == {"offline"}


def test_the_seqbench_paper_config_sweeps_every_axis_of_the_paper():
    from horizonbench.analysis.sweep import setting_axes

    cfg = load_config(ROOT / "configs" / "seqbench-paper.yaml")
    axes = setting_axes(cfg.families)
    assert len(axes) == len(cfg.families) >= 10
    base = axes["maze"]

    def values(axis: str, **held) -> set:
        return {
            a[axis]
            for a in axes.values()
            if all(a[k] == v for k, v in held.items())
            and all(a[k] == base[k] for k in a if k != axis and k not in held)
        }

    assert values("num_keys") >= {0, 1, 2, 3, 4}
    assert values("noise_ratio") >= {0.0, 0.5, 1.0}
    assert values("shuffle_ratio", noise_ratio=0.5) >= {0.0, 0.5, 1.0}
    assert values("shots") >= {0, 1, 3}
    assert values("guidance") == {True, False}
    assert len(values("grid")) >= 2
    assert {m.provider for m in cfg.evaluation.models} == {"offline"}


@pytest.mark.parametrize("path", sorted((ROOT / "configs").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_configs_name_no_model_the_sdk_retires(path):
    """A shipped config naming a retired model fails at its first call (claude-sonnet-4-5
    reached end of life on 2026-11-30 while api-models.yaml still named it); the installed
    anthropic SDK's own list of deprecated models is the source."""
    from anthropic._data import DEPRECATED_MODELS

    cfg = load_config(path)
    models = cfg.evaluation.models if cfg.evaluation else []
    retired = {
        m.model: DEPRECATED_MODELS[m.model]
        for m in models
        if m.provider == "anthropic" and m.model in DEPRECATED_MODELS
    }
    assert not retired, f"{path.name} names models the anthropic SDK deprecates: {retired}"
