"""Strict configs: no silent coercion, impossible requests refused before anything runs."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from horizonbench.cli.main import _demo_text
from horizonbench.core.errors import ConfigError
from horizonbench.datasets.maze.family import MazeFamily, MazeParams
from horizonbench.datasets.maze.limits import plan_length_bounds, request_problems, unreachable_bins
from horizonbench.schemas.config import SamplingSpec, check_requests, load_config, nightly_seed, parse_config


def _demo() -> dict:
    return yaml.safe_load(_demo_text())


@pytest.mark.parametrize(
    ("path", "value", "needle"),
    [
        (("run", "seed"), True, "run.seed: Input should be a valid integer (got True, a bool)"),
        (("run", "seed"), "5", "run.seed: Input should be a valid integer (got '5', a str)"),
        (("run", "seed"), 1.0, "run.seed"),
        (
            ("families", "maze", "prompt", "guidance"),
            "no",
            "families.maze.prompt.guidance: Input should be a valid boolean (got 'no', a str)",
        ),
        (("families", "maze", "params", "num_keys"), True, "families.maze.params.num_keys"),
        (("families", "maze", "params", "num_keys"), 2.0, "families.maze.params.num_keys"),
        (("families", "maze", "params", "grid_rows"), "12", "families.maze.params.grid_rows"),
        (("evaluation", "samples"), "2", "evaluation.samples"),
        (("dask", "processes"), "yes", "dask.processes"),
        (("families", "maze", "sampling", "allow_unfilled"), 1, "families.maze.sampling.allow_unfilled"),
    ],
)
def test_no_coercion(path, value, needle):
    data = _demo()
    node = data
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
    with pytest.raises(ConfigError) as err:
        parse_config(data)
    assert needle in str(err.value)


def test_an_int_is_still_a_float():
    data = _demo()
    data["families"]["maze"]["params"]["noise_ratio"] = 1
    assert parse_config(data).families["maze"].params["noise_ratio"] == 1


def test_nightly_seed_comes_from_the_date_and_is_recorded():
    data = _demo()
    data["run"]["seed"] = "nightly"
    cfg = parse_config(data)
    day = dt.datetime.now(dt.UTC).date()
    assert cfg.run.seed == nightly_seed(day) and cfg.run.seed_from == f"nightly:{day.isoformat()}"
    # the recorded config (the manifest's) parses to itself
    assert parse_config(cfg.model_dump(mode="json")) == cfg
    # different nights, different instances; the same night, the same
    seeds = {nightly_seed(day + dt.timedelta(days=i)) for i in range(365)}
    assert len(seeds) == 365 and all(0 <= s < 2**63 for s in seeds)
    assert nightly_seed(day) == nightly_seed(dt.date.fromisoformat(day.isoformat()))


def test_a_forged_nightly_seed_is_refused():
    data = _demo()
    data["run"]["seed"] = 12
    data["run"]["seed_from"] = "nightly:2026-01-01"
    with pytest.raises(ConfigError, match="run.seed: 12 is not the nightly seed of 2026-01-01"):
        parse_config(data)


def _maze_config(params: dict, sampling: dict) -> dict:
    return {"families": {"maze": {"params": params, "sampling": sampling}}}


def test_more_keys_than_the_grid_holds_is_refused_up_front():
    cfg = parse_config(_maze_config({"grid_rows": 10, "grid_cols": 11, "num_keys": 50}, {"count": 5}))
    with pytest.raises(ConfigError) as err:
        check_requests(cfg)
    text = str(err.value)
    assert text.startswith("config: families.maze.params.num_keys: 50 keys are more than a 10x11 grid holds")
    assert "num_keys_mode: at_most" in text
    # at_most keeps mazes with fewer keys: nothing impossible about it
    ok = parse_config(
        _maze_config(
            {"grid_rows": 10, "grid_cols": 11, "num_keys": 50, "num_keys_mode": "at_most"}, {"count": 5}
        )
    )
    check_requests(ok)


def test_bins_a_grid_cannot_reach_are_refused_up_front():
    bins = {"bins": {"min": 10, "max": 100, "width": 10, "per_bin": 1}}
    cfg = parse_config(_maze_config({"grid_rows": 3, "grid_cols": 3, "num_keys": 1}, bins))
    with pytest.raises(ConfigError, match=r"families\.maze\.sampling\.bins: 5 of 9 L bins \(50-59, "):
        check_requests(cfg)
    check_requests(parse_config(_maze_config({"grid_rows": 40, "grid_cols": 40, "num_keys": 2}, bins)))


def test_the_demo_and_shipped_requests_pass():
    check_requests(parse_config(_demo()))


@settings(max_examples=40, deadline=None)
@given(
    rows=st.integers(2, 6),
    cols=st.integers(2, 6),
    keys=st.integers(0, 3),
    mode=st.sampled_from(["exact", "at_most"]),
    seed=st.integers(0, 2**40),
)
def test_every_certified_plan_lies_within_the_bounds(rows, cols, keys, mode, seed):
    """The bounds are proofs, not estimates: no generated instance ever leaves them."""
    if rows * cols < 2 * (keys + 1):
        return
    params = MazeParams(grid_rows=rows, grid_cols=cols, num_keys=keys, num_keys_mode=mode)
    cand = MazeFamily().generate_candidate(params, seed, 0)
    if cand.row is None:
        return
    shortest, longest = plan_length_bounds(rows, cols, keys, keys, mode == "exact")
    assert shortest <= cand.row["solution_length"] <= longest


@given(
    edges=st.lists(st.integers(1, 200), min_size=1, max_size=20, unique=True),
    width=st.integers(1, 20),
    lo=st.integers(1, 100),
    span=st.integers(0, 100),
)
def test_unreachable_bins_are_exactly_those_without_a_reachable_length(edges, width, lo, span):
    bounds = (lo, lo + span)
    out = {b for b, _ in unreachable_bins(sorted(edges), width, bounds)}
    for e in edges:
        reachable = any(bounds[0] <= x <= bounds[1] for x in range(e, e + width))
        assert (e in out) == (not reachable)


def test_request_problems_is_quiet_for_feasible_requests():
    params = MazeParams(grid_rows=20, grid_cols=20, num_keys=4)
    assert request_problems(params, SamplingSpec(count=5)) == []


_ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "path",
    sorted((_ROOT / "configs").glob("*.yaml")) + sorted((_ROOT / "tests" / "configs").glob("*.yaml")),
    ids=lambda p: p.name,
)
def test_shipped_configs_ask_for_nothing_impossible(path):
    check_requests(load_config(path))


def test_an_unknown_family_is_named_before_its_missing_sections():
    data = {"run": {"name": "x", "seed": 1}, "families": {"mazee": {"params": {"grid_rows": 5}}}}
    with pytest.raises(ConfigError) as err:
        parse_config(data, source="c.yaml")
    assert str(err.value).startswith("c.yaml: families.mazee: unknown family 'mazee' (known: "), err.value
    assert "sampling" not in str(err.value)


def test_a_fields_own_check_names_the_field_once():
    data = {
        "run": {"name": "x", "seed": 1},
        "families": {"hanoi": {"params": {"ns": [0, 3]}, "sampling": {"count": 4}}},
    }
    with pytest.raises(ConfigError) as err:
        parse_config(data, source="c.yaml")
    assert str(err.value) == "c.yaml: families.hanoi.params.ns: size 0 is outside 1..10"


def test_a_yaml_error_is_one_line_with_its_line_and_column(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(
        "run: {name: x, seed: 1}\nfamilies:\n  maze:\n    params: {grid_rows: 5\n    sampling: [count: 4\n"
    )
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == (
        f"{path}: not valid YAML at line 5, column 13: expected ',' or '}}', but got ':' "
        "(while parsing a flow mapping at line 4, column 13)"
    )
    path = tmp_path / "c.json"
    path.write_text('{"run": 1,\n "families": }')
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == f"{path}: not valid JSON at line 2, column 14: Expecting value"


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab:- \n\t{}[],'\"&*!%@`|>#?")), max_size=60))
def test_any_unparsable_config_is_one_line_naming_the_file(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("yaml") / "c.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        load_config(path)
    except ConfigError as err:
        message = str(err)
        assert "\n" not in message and message.startswith(f"{path}: "), message
        if "not valid YAML" in message:
            assert "<unicode string>" not in message and "^" not in message, message
