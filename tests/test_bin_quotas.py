"""Bins with quotas of their own (``sampling.bins.quotas``), and the puzzle families'
refusal of a quota a size cannot fill, before anything is written.

Why: RecurrReason keeps "up to 100 puzzles per n", and Blocks World has only 6 at n = 1;
asking 100 there made configs/recurrreason.yaml end with exit code 4 after a whole
generation.
"""

from __future__ import annotations

import json

import pytest
import yaml

from horizonbench.cli.main import main
from horizonbench.core.errors import ConfigError
from horizonbench.schemas.config import check_requests, parse_config


def _blocks(bins: dict, ns: list[int] | None = None) -> dict:
    params = {"ns": ns or [1, 2, 3], "num_stacks": 3, "per_n": 4, "alpha": 3}
    return {
        "families": {"blocks_world": {"params": params, "sampling": {"bins": bins}}},
        "evaluation": {"models": [{"name": "oracle", "provider": "offline", "kind": "oracle"}]},
    }


def test_a_bin_quota_replaces_per_bin_for_that_bin():
    cfg = parse_config(_blocks({"min": 1, "max": 4, "per_bin": 4, "quotas": {1: 2}}))
    bins = cfg.families["blocks_world"].sampling.bins
    assert bins is not None
    assert [bins.quota(lo) for lo in bins.edges()] == [2, 4, 4]
    assert bins.total() == 10


def test_quota_keys_spelled_as_json_strings_read_as_edges():
    """JSON has only string keys, and the manifest records the config as JSON: it must
    read back the same."""
    cfg = parse_config(_blocks({"min": 1, "max": 4, "per_bin": 4, "quotas": {1: 2}}))
    again = parse_config(json.loads(json.dumps(cfg.model_dump(mode="json"))))
    assert again == cfg


@pytest.mark.parametrize(
    ("quotas", "needle"),
    [
        ({5: 2}, "quotas: 5 is not the lower edge of a bin (edges 1, 2, 3)"),
        ({2: 0}, "quotas: the quota of bin 2 must be at least 1"),
        ({"x": 1}, "families.blocks_world.sampling.bins.quotas"),
    ],
)
def test_a_bad_quota_names_the_field(quotas, needle):
    with pytest.raises(ConfigError) as err:
        parse_config(_blocks({"min": 1, "max": 4, "per_bin": 4, "quotas": quotas}))
    assert needle in str(err.value)
    assert "families.blocks_world.sampling.bins" in str(err.value)


def test_a_quota_a_puzzle_size_cannot_fill_is_refused_with_the_fix():
    # n = 1 on 3 stacks: 3 states, so 6 puzzles (ordered pairs of distinct states)
    cfg = parse_config(_blocks({"min": 1, "max": 4, "per_bin": 7}))
    with pytest.raises(ConfigError) as err:
        check_requests(cfg)
    msg = str(err.value)
    assert "families.blocks_world.sampling.bins: 1 of 3 bins" in msg
    assert "(n = 1: 6 of 7)" in msg and "quotas: {1: 6}" in msg
    check_requests(parse_config(_blocks({"min": 1, "max": 4, "per_bin": 7, "quotas": {1: 6}})))
    # an explicit quota beyond what the size has is refused the same way
    with pytest.raises(ConfigError, match=r"n = 1: 6 of 8"):
        check_requests(parse_config(_blocks({"min": 1, "max": 4, "per_bin": 2, "quotas": {1: 8}})))


def test_bins_for_sizes_outside_ns_are_refused():
    cfg = parse_config(_blocks({"min": 1, "max": 5, "per_bin": 2}, ns=[1, 2, 3]))
    with pytest.raises(ConfigError, match=r"n = 4: 0 of 2\); narrow the bins to the sizes in params.ns"):
        check_requests(cfg)


def test_the_command_line_refuses_it_in_one_line_and_writes_nothing(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(_blocks({"min": 1, "max": 4, "per_bin": 7})))
    out = tmp_path / "out"
    assert main(["generate", "--config", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "n = 1: 6 of 7" in err, err
    assert not out.exists()


def test_a_short_bin_with_its_own_quota_says_so():
    from horizonbench.flows.pipeline import short_bins

    cfg = parse_config(_blocks({"min": 1, "max": 4, "per_bin": 4, "quotas": {1: 2}}))
    stats = [{"family": "blocks_world", "unfilled_bins": {2: 3}, "candidates_considered": 9}]
    assert short_bins(cfg, stats) == [
        "blocks_world: 1 of 3 L bins short of their quotas (2-2: 3) after 9 candidates"
    ]


def test_the_papers_reading_asks_up_to_its_quota_and_is_not_refused():
    """``dedup: after`` (Algorithm 6 literally): trivial and repeated candidates take
    quota slots before they are dropped, so every candidate counts toward what a size
    can fill, and asking all 12 at n = 1 (at most 6 distinct puzzles) is no config error."""
    raw = _blocks({"min": 1, "max": 4, "per_bin": 12})
    paper = {"dedup": "after", "start_sampler": "blockwise", "goal": "walk"}
    raw["families"]["blocks_world"]["params"] |= paper
    check_requests(parse_config(raw))
    # but not beyond the candidates there are (per_n x alpha = 12 per size)
    raw["families"]["blocks_world"]["sampling"]["bins"]["per_bin"] = 13
    with pytest.raises(ConfigError, match=r"n = 1: 12 of 13"):
        check_requests(parse_config(raw))
