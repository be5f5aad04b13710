"""Sweeps: one config, several settings of a family, each its own family label; and the
analysis that lays them side by side (analysis/sweep.py)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from horizonbench.analysis import sweep
from horizonbench.core.errors import ConfigError
from horizonbench.core.registry import family_of, get_family
from horizonbench.datasets.shards import candidate_seed
from horizonbench.schemas.config import parse_config
from horizonbench.schemas.tables import ANALYSIS_SCHEMAS, SCORES_SCHEMA
from horizonbench.tasks.analyse.scores import analyse_scores, to_table

BASE = {
    "params": {"grid_rows": 8, "grid_cols": 8, "num_keys": 1, "noise_ratio": 0.0},
    "sampling": {"count": 5},
    "prompt": {"shots": 2},
}


def _config(sweep_entries: list[dict], **extra) -> dict:
    return {"families": {"maze": {**BASE, "sweep": sweep_entries, **extra}}}


# --- the config -------------------------------------------------------------------------


def test_each_setting_becomes_a_family_label_with_the_base_updated_by_its_changes():
    cfg = parse_config(
        _config(
            [
                {"name": "noise-1", "params": {"noise_ratio": 1.0}},
                {"name": "shots-0", "prompt": {"shots": 0}},
                {"name": "short", "sampling": {"count": 2}},
            ]
        )
    )
    assert list(cfg.families) == ["maze", "maze@noise-1", "maze@shots-0", "maze@short"]
    assert cfg.families["maze@noise-1"].params == {**BASE["params"], "noise_ratio": 1.0}
    assert cfg.families["maze@noise-1"].prompt == BASE["prompt"]
    assert cfg.families["maze@shots-0"].prompt == {"shots": 0}
    assert cfg.families["maze@short"].sampling.count == 2
    assert cfg.families["maze@noise-1"].sampling == cfg.families["maze"].sampling
    assert all(not spec.sweep for spec in cfg.families.values())


def test_the_expanded_config_is_its_own_expansion():
    """The manifest records the expanded config; reading it back changes nothing."""
    cfg = parse_config(_config([{"name": "keys-0", "params": {"num_keys": 0}}]))
    again = parse_config(cfg.model_dump(mode="json"))
    assert again == cfg


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ([{"name": "a"}, {"name": "a"}], "families.maze.sweep: setting names must be unique; repeated: a"),
        ([{"name": "bad name"}], "families.maze.sweep.0.name"),
        ([{"name": "x", "colour": 1}], "families.maze.sweep.0.colour"),
        ([{"name": "x", "params": {"noise_ratio": -1}}], "families.maze@x.params.noise_ratio"),
        ([{"name": "x", "prompt": {"shots": 9}}], "families.maze@x.prompt.shots"),
    ],
)
def test_a_bad_setting_is_one_error_naming_where(entries, message):
    with pytest.raises(ConfigError) as err:
        parse_config(_config(entries))
    assert message in str(err.value)


def test_a_setting_label_that_is_also_a_family_entry_is_refused():
    data = _config([{"name": "x"}])
    data["families"]["maze@x"] = BASE
    with pytest.raises(ConfigError, match="'maze@x' is also a family entry"):
        parse_config(data)


def test_a_label_names_its_family():
    assert family_of("maze@noise-0.5") == "maze" == family_of("maze")
    assert type(get_family("maze@noise-0.5")) is type(get_family("maze"))


def test_settings_draw_their_candidates_from_the_family_not_the_label():
    """Noise, shuffle and prompt settings are drawn from the base's mazes (paired)."""
    from horizonbench.datasets.shards import generate_shard

    params = {**BASE["params"]}
    base = generate_shard("maze", params, 3, 0, 4)
    noisy = generate_shard("maze@noise-1", {**params, "noise_ratio": 1.0}, 3, 0, 4)
    assert candidate_seed(3, "maze@noise-1", 0) != candidate_seed(3, "maze", 0)  # the label alone differs
    assert [r[1] for r in base] == [r[1] for r in noisy]  # same lengths: same mazes
    ids = [r[2]["instance_id"] for r in base if r[2]]
    assert ids == [r[2]["instance_id"] for r in noisy if r[2]]
    facts = [len(r[2]["facts"]) for r in base if r[2]]
    assert facts != [len(r[2]["facts"]) for r in noisy if r[2]]  # but more facts


# --- the analysis ----------------------------------------------------------------------


def _scores(eps_by_label: dict[str, float], n: int = 1500, seed: int = 0, models=("m",)) -> pd.DataFrame:
    """Whole-plan scores in which each label's model fails each step with eps."""
    rng = np.random.default_rng(seed)
    rows = []
    for label, eps in eps_by_label.items():
        for model in models:
            L = rng.integers(5, 60, size=n)
            ok = rng.random(n) < (1 - eps) ** L
            progress = np.where(ok, 1.0, rng.random(n))
            for i in range(n):
                rows.append(
                    {
                        "model": model,
                        "instance_id": f"i{i}",
                        "family": label,
                        "mode": "plan",
                        "sample": 0,
                        "answered": True,
                        "solution_length": int(L[i]),
                        "success": bool(ok[i]),
                        "valid": bool(ok[i]),
                        "exact_match": bool(ok[i]),
                        "progress_ratio": float(progress[i]),
                        "precision": 1.0,
                        "recall": 1.0,
                        "plan_length": int(L[i]),
                        "violation": None if ok[i] else "locked_door",
                        "first_violation_step": None if ok[i] else int(rng.integers(0, L[i])),
                    }
                )
    return pa.Table.from_pylist(rows, schema=SCORES_SCHEMA).to_pandas()


NOISES = (0.0, 0.5, 1.0, 2.0)


def _noise_axes() -> dict[str, dict]:
    cfg = parse_config(
        _config([{"name": f"noise-{x}", "params": {"noise_ratio": x}} for x in NOISES if x]),
    )
    return sweep.setting_axes(cfg.families)


def _label(noise: float) -> str:
    return "maze" if noise == 0 else f"maze@noise-{noise}"


def test_l0_against_noise_recovers_a_synthetic_dependence_of_eps_on_noise():
    """eps(noise) = 0.02 (1 + noise): the table's L0 must follow -1/log(1 - eps) along the
    noise axis, within 20% and inside its bootstrap interval."""
    eps = {_label(x): 0.02 * (1 + x) for x in NOISES}
    tables = analyse_scores(_scores(eps), bootstrap=100, seed=1, min_attempts=1, axes=_noise_axes())
    line = tables["sweep_axes"]
    line = line[line["axis"] == "noise_ratio"].sort_values("x")
    assert list(line["x"]) == list(NOISES)
    assert set(line["held"]) == {""}
    truth = np.array([-1 / math.log1p(-0.02 * (1 + x)) for x in NOISES])
    got = line["L0"].to_numpy()
    assert np.all(np.diff(got) < 0), f"L0 must fall with noise: {got}"
    assert np.all(np.abs(got - truth) / truth < 0.2), (got, truth)
    covered = (line["L0_low"].to_numpy() <= truth) & (truth <= line["L0_high"].to_numpy())
    # 95% intervals: all four cover the truth 81% of the time, at least three 99%
    assert covered.sum() >= 3, (line[["L0_low", "L0_high"]].to_numpy(), truth)


def test_the_settings_table_against_an_independent_computation():
    eps = {_label(x): 0.03 for x in NOISES[:2]}
    scores = _scores(eps, n=200, seed=4, models=("a", "b"))
    tokens = scores[["model", "family", "instance_id", "sample", "mode"]].assign(
        turn=0, output_tokens=np.arange(len(scores)) % 7
    )
    tables = analyse_scores(scores, bootstrap=0, seed=0, min_attempts=1, axes=_noise_axes(), tokens=tokens)
    table = tables["sweep"]
    assert list(table.columns) == ANALYSIS_SCHEMAS["sweep"].names
    to_table(table, ANALYSIS_SCHEMAS["sweep"])  # converts to its schema
    for r in table.itertuples():
        part = scores[(scores["family"] == r.family) & (scores["model"] == r.model)]
        n, k = len(part), int(part["success"].sum())
        assert (r.attempts, r.instances) == (n, part["instance_id"].nunique())
        assert (r.L_min, r.L_max) == (part["solution_length"].min(), part["solution_length"].max())
        assert r.success_rate == pytest.approx(k / n)
        # Wilson 95%, written out
        z, p = 1.959963984540054, k / n
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        assert (r.success_low, r.success_high) == pytest.approx((centre - half, centre + half))
        assert r.progress_ratio_mean == pytest.approx(part["progress_ratio"].mean())
        mine = tokens[(tokens["family"] == r.family) & (tokens["model"] == r.model)]
        assert r.output_tokens_mean == pytest.approx(mine["output_tokens"].mean())
        fit = tables["fits"]
        mle = fit[(fit["family"] == r.family) & (fit["model"] == r.model) & (fit["method"] == "binomial_mle")]
        assert r.L0 == pytest.approx(float(mle["L0"].iloc[0]))
        assert r.setting == ("base" if r.family == "maze" else r.family.split("@")[1])
        assert r.varied == ("base" if r.family == "maze" else "noise_ratio")
        assert json.loads(r.axes)["noise_ratio"] in NOISES


def test_lines_join_only_settings_that_differ_in_the_drawn_axis():
    """Shuffle at noise 0.5 is its own line, never joined to the noise line."""
    cfg = parse_config(
        _config(
            [
                {"name": "n1", "params": {"noise_ratio": 1.0}},
                {"name": "n05", "params": {"noise_ratio": 0.5}},
                {"name": "n05-s0", "params": {"noise_ratio": 0.5, "shuffle_ratio": 0.0}},
                {"name": "k0", "params": {"num_keys": 0}},
            ]
        )
    )
    axes = sweep.setting_axes(cfg.families)
    labels = list(cfg.families)
    scores = _scores(dict.fromkeys(labels, 0.03), n=60)
    table = analyse_scores(scores, bootstrap=0, seed=0, min_attempts=1, axes=axes)["sweep_axes"]
    lines = {(a, h): sorted(set(g["setting"])) for (a, h), g in table.groupby(["axis", "held"])}
    assert lines == {
        ("noise_ratio", ""): ["base", "n05", "n1"],
        ("shuffle_ratio", "noise_ratio=0.5"): ["n05", "n05-s0"],
        ("num_keys", ""): ["base", "k0"],
    }


@settings(max_examples=12, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["noise_ratio", "shuffle_ratio", "num_keys"]), st.integers(0, 3)),
        min_size=1,
        max_size=5,
        unique=True,
    )
)
def test_every_line_varies_exactly_its_axis(changes):
    """Property: within a line, the settings agree on every axis but the drawn one and
    hold at least two values of it."""
    entries = [
        {"name": f"s{i}", "params": {axis: (value if axis == "num_keys" else value / 4)}}
        for i, (axis, value) in enumerate(changes)
    ]
    cfg = parse_config(_config(entries))
    axes = sweep.setting_axes(cfg.families)
    scores = _scores(dict.fromkeys(cfg.families, 0.05), n=20)
    table = analyse_scores(scores, bootstrap=0, seed=0, min_attempts=1, axes=axes)["sweep_axes"]
    for (axis, _held, _model), line in table.groupby(["axis", "held", "model"]):
        members = [axes[label] for label in line["family"]]
        assert len({json.dumps(m[axis]) for m in members}) >= 2
        others = {json.dumps({k: v for k, v in m.items() if k != axis}, sort_keys=True) for m in members}
        assert len(others) == 1


def test_without_a_sweep_the_sweep_tables_are_empty_with_their_columns():
    scores = _scores({"maze": 0.03}, n=50)
    tables = analyse_scores(scores, bootstrap=0, seed=0, min_attempts=1)
    for name in ("sweep", "sweep_axes"):
        assert tables[name].empty and list(tables[name].columns) == ANALYSIS_SCHEMAS[name].names
        to_table(tables[name], ANALYSIS_SCHEMAS[name])


# --- end to end --------------------------------------------------------------------------


@pytest.mark.flow
def test_a_sweep_runs_end_to_end_each_setting_scored_against_its_own_instances(prefect_server, tmp_path):
    """Settings share instance ids (same candidate seeds), so scoring must look
    instances up by (family label, id): the oracle answers each setting's own maze and
    succeeds everywhere only if it is scored against that maze."""
    import pyarrow.parquet as pq
    import yaml

    from conftest import CONFIGS
    from horizonbench.flows.pipeline import pipeline

    data = yaml.safe_load((CONFIGS / "small.yaml").read_text())
    data["families"]["maze"]["sweep"] = [
        {"name": "keys-0", "params": {"num_keys": 0}},
        {"name": "noise-0", "params": {"noise_ratio": 0.0}},
    ]
    report = pipeline(parse_config(data), str(tmp_path))
    ids = {
        label: pq.read_table(tmp_path / "instances" / label).column("instance_id").to_pylist()
        for label in ("maze", "maze@keys-0", "maze@noise-0")
    }
    assert set(ids["maze"]) & set(ids["maze@keys-0"])  # shared ids, different mazes
    scores = pq.read_table(tmp_path / "scores" / "scores.parquet").to_pandas()
    oracle = scores[scores["model"] == "oracle"]
    assert set(oracle["family"]) == {"maze", "maze@keys-0", "maze@noise-0"}
    assert oracle["success"].all()
    assert set(oracle.loc[oracle["family"] == "maze@keys-0", "num_keys"]) == {0}
    table = pq.read_table(tmp_path / "analysis" / "sweep.parquet").to_pandas()
    assert set(zip(table["setting"], table["model"], strict=True)) == {
        (s, m) for s in ("base", "keys-0", "noise-0") for m in ("oracle", "noisy")
    }
    axes = pq.read_table(tmp_path / "analysis" / "sweep_axes.parquet").to_pandas()
    assert set(axes["axis"]) == {"num_keys", "noise_ratio"}
    html = open(report, encoding="utf-8").read()
    assert 'id="sweep-maze"' in html and "backtracks B" in html
