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
    assert cfg.families


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
