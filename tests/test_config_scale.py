"""``--scale F``: a shipped config at a fraction of its scale, for a smoke run
(horizonbench.schemas.scale). The smoke runs themselves are tests/test_shipped_configs.py."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from horizonbench.cli.main import main
from horizonbench.core.errors import ConfigError
from horizonbench.schemas.config import BinSpec, check_requests, load_config
from horizonbench.schemas.scale import MIN_BOOTSTRAP, scale_config, scaled_bins

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "src" / "horizonbench" / "configs" / "demo.yaml"


@st.composite
def bin_specs(draw: st.DrawFn) -> BinSpec:
    lo = draw(st.integers(1, 50))
    hi = draw(st.integers(lo + 1, lo + 120))
    bins = BinSpec(min=lo, max=hi, width=draw(st.integers(1, 12)), per_bin=draw(st.integers(1, 50)))
    own = draw(st.lists(st.sampled_from(bins.edges()), unique=True, max_size=4))
    return BinSpec(**bins.model_dump() | {"quotas": {e: draw(st.integers(1, 50)) for e in own}})


@given(bin_specs(), st.floats(0.001, 1.0))
@settings(max_examples=300, deadline=None)
def test_scaled_bins_cover_the_range_with_fewer_quotas_each_fillable(bins: BinSpec, factor: float):
    """Same [min, max), at most ceil(F x bins) bins, and each new quota at least 1 and at
    most the quotas it merges (so a config that fills its bins fills these)."""
    out = BinSpec.model_validate(scaled_bins(bins.model_dump(mode="json"), factor))
    assert (out.min, out.max) == (bins.min, bins.max)
    assert len(out.edges()) <= max(1, math.ceil(round(factor * len(bins.edges()), 9)))
    assert out.width % bins.width == 0 and set(out.edges()) <= set(bins.edges())  # unions of bins
    for e in out.edges():
        merged = [bins.quota(old) for old in bins.edges() if e <= old < e + out.width]
        assert 1 <= out.quota(e) <= sum(merged)
        assert out.quota(e) == max(1, math.ceil(round(factor * sum(merged), 9)))


def test_a_fraction_of_a_hundred_bins_is_a_handful():
    out = scaled_bins({"min": 10, "max": 120, "width": 1, "per_bin": 40}, 0.01)
    assert out == {"min": 10, "max": 120, "width": 55, "per_bin": 22}
    blocks = scaled_bins({"min": 1, "max": 11, "width": 1, "per_bin": 100, "quotas": {1: 6}}, 0.1)
    # ceil(0.1 x 10 bins) = 1 bin for n = 1..10, keeping ceil(0.1 x (6 + 9 x 100)) = 91
    assert blocks == {"min": 1, "max": 11, "width": 10, "per_bin": 91}


def test_the_demo_scaled_keeps_every_label_mode_model_agent_and_environment():
    full = load_config(DEMO)
    small = scale_config(full, 0.01)
    assert list(small.families) == list(full.families)
    assert [s.modes for s in small.families.values()] == [s.modes for s in full.families.values()]
    assert small.evaluation.models == full.evaluation.models
    assert small.worlds is not None and full.worlds is not None
    assert small.worlds.agents == full.worlds.agents
    assert small.worlds.environments == full.worlds.environments
    assert small.worlds.harness == full.worlds.harness and small.dask == full.dask
    # and less of everything
    assert small.evaluation.samples == 1 and small.analysis.bootstrap == MIN_BOOTSTRAP
    assert (small.worlds.archetypes, small.worlds.variants) == (1, 1)
    assert (small.worlds.sc, small.worlds.dd) == ([6, 18], [1, 2])  # the grid's corners
    hanoi = small.families["hanoi"].sampling
    assert (hanoi.all, hanoi.count, hanoi.shard_size) == (False, 1, None)  # of 60
    check_requests(small)


def test_the_spread_of_grid_values_is_even_and_keeps_both_ends():
    cfg = load_config(ROOT / "configs" / "wmc-grid.yaml")
    assert scale_config(cfg, 0.75).worlds.sc == [5, 20, 40]  # type: ignore[union-attr]
    assert scale_config(cfg, 0.01).worlds.dd == [1, 6]  # type: ignore[union-attr]
    fine = load_config(ROOT / "configs" / "wmc-fine.yaml")
    assert scale_config(fine, 0.5).worlds.sc == [10, 12, 14, 16, 18, 20]  # type: ignore[union-attr]
    assert scale_config(fine, 0.01).worlds.dd == [1]  # type: ignore[union-attr]


def test_scale_one_is_the_config_itself():
    cfg = load_config(ROOT / "configs" / "recurrreason.yaml")
    assert scale_config(cfg, 1.0) is cfg


@pytest.mark.parametrize("factor", [0.0, -0.5, 1.5, float("nan"), float("inf")])
def test_a_factor_outside_zero_to_one_is_refused(factor):
    with pytest.raises(ConfigError, match="is not a fraction of the config's scale"):
        scale_config(load_config(DEMO), factor)


@pytest.mark.parametrize("value", ["0", "2", "nan", "abc"])
def test_the_command_line_refuses_a_bad_scale_in_one_line_and_writes_nothing(value, tmp_path, capsys):
    out = tmp_path / "out"
    code = None
    try:
        code = main(["run", "--config", str(DEMO), "--out", str(out), "--scale", value])
    except SystemExit as exc:  # argparse: not a number
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    # ours: one line; argparse's (not a number): its usage, then one line naming the flag
    assert "--scale" in err.strip().splitlines()[-1], err
    assert value == "abc" or err.count("\n") == 1, err
    assert not out.exists()


def test_the_scaled_config_is_what_a_dry_run_reads(tmp_path):
    """The manifest records the scaled config, so a smoke run's folder says what it ran:
    checked here on the config the command line builds (no run needed)."""
    from horizonbench.cli.main import _load, _parser

    args = _parser().parse_args(["run", "--config", str(DEMO), "--out", str(tmp_path), "--scale", "0.1"])
    cfg = _load(args)
    assert cfg == scale_config(load_config(DEMO), 0.1)
    assert yaml.safe_load(DEMO.read_text())["evaluation"]["samples"] == 3 and cfg.evaluation.samples == 1


@pytest.mark.parametrize("name", ["recurrreason-train.yaml", "recurrreason-train-tiny.yaml"])
def test_a_scaled_training_config_keeps_its_models_small_and_every_split_some_instances(name):
    """The paper's T5-small and GPT-2 become 2-layer models of width 32 for a few steps
    (the same code trains them), and each trained puzzle keeps instances enough for a
    train and a validation part."""
    cfg = load_config(ROOT / "configs" / name)
    small = scale_config(cfg, 0.005)
    assert small.training is not None and cfg.training is not None
    assert small.training.conditions == cfg.training.conditions
    for arch_name, arch in small.training.architectures.items():
        full = cfg.training.architectures[arch_name]
        assert (arch.kind, arch.pretrained) == (full.kind, full.pretrained)
        assert arch.layers <= 2 and arch.width <= 32 and arch.width % arch.heads == 0
    steps = small.training.optimizer.max_steps
    assert steps is not None and 4 <= steps <= 10
    for label, fam in small.families.items():
        counts = [fam.sampling.count] if fam.sampling.count is not None else []
        if fam.sampling.bins is not None:
            bins = fam.sampling.bins
            counts = [bins.quotas.get(e, bins.per_bin) for e in bins.edges()]
        assert sum(counts) >= 12, (label, counts)
