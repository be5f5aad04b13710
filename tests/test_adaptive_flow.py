"""Adaptive depth sampling as a user runs it: ``horizonbench run`` on a config whose maze
samples in waves, through the command line's main(), on the session's Prefect server.

The shipped ``configs/adaptive-demo.yaml`` keeps its promise (the README quotes it): the
noisy model's L0 ends with a 95% interval within 5% of its value, and the report opens with
one horizon card per model. A smaller config checks the mechanics: the second and later
waves are chosen per model from the analysis (each model answers only its own instances,
so the two models' designs differ), every wave is traced, and a rerun into the same folder
pays for nothing and writes the same bytes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

from horizonbench.cli.main import main
from horizonbench.schemas.horizons import DESIGN_SCHEMA, HORIZONS_SCHEMA, WAVES_SCHEMA

pytestmark = pytest.mark.flow

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "configs" / "adaptive-demo.yaml"


def _run(argv: list[str], prefect_server: str) -> int:
    mp = pytest.MonkeyPatch()
    mp.setenv("PREFECT_API_URL", prefect_server)
    try:
        return main(argv)
    finally:
        mp.undo()


def small_config(folder: Path) -> Path:
    """The demo's study at a size for a test: wider bins, a looser target (20%), few
    waves, a call cap on the noisy model's side of the range."""
    data = yaml.safe_load(DEMO.read_text(encoding="utf-8"))
    sampling = data["families"]["maze"]["sampling"]
    sampling["bins"] = {"min": 16, "max": 64, "width": 6, "per_bin": 60}
    sampling["adaptive"] = {"target": 0.2, "first_wave": 10, "max_waves": 4, "max_calls": 1500}
    data["evaluation"]["samples"] = 3
    data["analysis"] = {"bootstrap": 100, "bin_width": 6}
    path = folder / "adaptive-small.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def small_run(tmp_path_factory, prefect_server):
    folder = tmp_path_factory.mktemp("adaptive")
    out, config = folder / "run", small_config(folder)
    argv = ["run", "--config", str(config), "--out", str(out), "--workers", "1", "--no-progress"]
    assert _run(argv, prefect_server) == 0
    first = {
        rel: (out / rel).read_bytes() for rel in ("analysis/adaptive.parquet", "analysis/horizons.parquet")
    }
    manifest = json.loads((out / "manifest.json").read_text())
    again = _run(argv, prefect_server)
    return out, first, manifest, again


def _tables(out: Path) -> tuple:
    design = pq.read_table(out / "adaptive" / "design.parquet").to_pandas()
    waves = pq.read_table(out / "analysis" / "adaptive.parquet").to_pandas()
    attempts = pq.read_table(out / "attempts" / "attempts.parquet").to_pandas()
    return design, waves, attempts


def test_each_model_answers_only_the_instances_its_waves_chose(small_run):
    out, _, _, _ = small_run
    design, waves, attempts = _tables(out)
    assert pq.read_schema(out / "adaptive" / "design.parquet").names == DESIGN_SCHEMA.names
    assert pq.read_schema(out / "analysis" / "adaptive.parquet").names == WAVES_SCHEMA.names
    assert design["wave"].max() >= 2, "only the first wave ran: no wave was chosen by the analysis"
    per_model = {m: set(a["instance_id"]) for m, a in attempts.groupby("model")}
    assert set(per_model) == {"noisy-5pct", "rising-1pct"}
    # the two models were given different designs, and neither answered the other's extra instances
    asked = design.groupby(["model", "bin"])["new"].sum().unstack(0).fillna(0)
    assert (asked["noisy-5pct"] != asked["rising-1pct"]).any()
    assert per_model["noisy-5pct"] != per_model["rising-1pct"]
    instances = pq.read_table(out / "instances" / "maze").to_pandas()
    assert len(instances) == len(set().union(*per_model.values()))
    for model, ids in per_model.items():
        last = waves[waves["model"] == model].sort_values("wave").iloc[-1]
        assert len(ids) == last["instances"] and len(attempts[attempts["model"] == model]) == last["calls"]
        assert last["stop"] in {"target", "budget", "max_waves", "exhausted"}
        assert last["calls"] <= 1500 + 3 * 60  # the cap, give or take the wave in flight
        # every wave's calls grow, and the last wave's interval is the card's
        assert waves[waves["model"] == model].sort_values("wave")["calls"].is_monotonic_increasing


def test_the_card_says_the_design_was_adaptive_and_matches_the_last_wave(small_run):
    out, _, _, _ = small_run
    card = pq.read_table(out / "analysis" / "horizons.parquet")
    assert card.schema.names == HORIZONS_SCHEMA.names
    card = card.to_pandas()
    _, waves, _ = _tables(out)
    assert set(card["design"]) == {"adaptive"} and set(card["metric"]) == {"L0"}
    for r in card.itertuples():
        last = waves[waves["model"] == r.model].sort_values("wave").iloc[-1]
        assert (r.value, r.low, r.high, r.n_attempts) == (
            last["value"],
            last["low"],
            last["high"],
            last["calls"],
        )


def test_a_rerun_pays_for_nothing_and_writes_the_same_bytes(small_run):
    out, first, manifest, again = small_run
    assert again == 0
    counts = json.loads((out / "manifest.json").read_text())["counts"]["attempts"]["models"]
    for model, c in counts.items():
        assert c["attempts"] == c["reused"] > 0, model
    for rel, data in first.items():
        assert (out / rel).read_bytes() == data, rel
    assert manifest["counts"]["adaptive"]["waves"] >= 2


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory, prefect_server):
    out = tmp_path_factory.mktemp("adaptive-demo") / "run"
    code = _run(["run", "--config", str(DEMO), "--out", str(out), "--no-progress"], prefect_server)
    return out, code


def test_the_adaptive_demo_pins_the_noisy_models_l0_within_5_percent(demo_run):
    """The README's promise for configs/adaptive-demo.yaml."""
    out, code = demo_run
    assert code == 0
    card = pq.read_table(out / "analysis" / "horizons.parquet").to_pandas()
    noisy = card[(card["model"] == "noisy-5pct") & (card["metric"] == "L0")].iloc[0]
    assert (noisy["high"] - noisy["low"]) / 2 <= 0.05 * noisy["value"]
    # the truth of a constant 5% per-step error: L0 = -1 / ln(0.95) = 19.5
    assert noisy["low"] - 1.0 <= 19.5 <= noisy["high"] + 1.0
    html = (out / "report" / "index.html").read_text(encoding="utf-8")
    opening = html.index('id="horizons"')
    assert opening < html.index('id="summary"')
    assert html.index('id="card-noisy-5pct"') > opening and html.index('id="card-rising-1pct"') > opening


def test_only_the_maze_samples_in_waves():
    """A puzzle bins by its size n, not by depth: one config error naming the family."""
    from horizonbench.core.errors import ConfigError
    from horizonbench.schemas.config import parse_config

    data = yaml.safe_load(DEMO.read_text(encoding="utf-8"))
    data["families"]["blocks_world"] = {
        "params": {"ns": [2, 3], "num_stacks": 3, "per_n": 6, "alpha": 3},
        "sampling": {"bins": {"min": 2, "max": 4, "width": 1, "per_bin": 6}, "adaptive": {}},
    }
    with pytest.raises((ConfigError, ValueError), match="blocks_world.sampling.adaptive: only the maze"):
        parse_config(data)


@pytest.fixture(scope="module")
def scan_run(tmp_path_factory, prefect_server):
    """configs/adaptive-worlds.yaml made small: one environment, dd 1, 4 worlds a cell."""
    folder = tmp_path_factory.mktemp("sc-scan")
    data = yaml.safe_load((ROOT / "configs" / "adaptive-worlds.yaml").read_text(encoding="utf-8"))
    data["worlds"].update(environments=["graph_nav"], dd=[1], archetypes=2, variants=2)
    config = folder / "scan.yaml"
    config.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    out = folder / "run"
    code = _run(
        ["run", "--config", str(config), "--out", str(out), "--workers", "1", "--no-progress"], prefect_server
    )
    return out, code


def test_the_sc_scan_brackets_each_agents_crossing_with_adjacent_cells(scan_run):
    """Each agent plays only the cells its own brackets asked for: the oracle (no crossing
    in the range) the two ends, the bounded agents a bracket of adjacent cells."""
    out, code = scan_run
    assert code == 0
    grid = pq.read_table(out / "analysis" / "worlds_grid.parquet").to_pandas()
    card = pq.read_table(out / "analysis" / "horizons.parquet").to_pandas()
    stars = card[card["metric"] == "sc_star"]
    assert set(stars["design"]) == {"adaptive"}
    assert sorted(set(grid[grid["model"] == "oracle"]["sc"])) == [4, 30]
    for agent in ("bounded-12", "decaying-12"):
        rows = grid[grid["model"] == agent].sort_values("sc")
        cells = list(rows["sc"])
        assert cells[0] == 4 and cells[-1] == 30 and len(cells) < 27 // 2, (agent, cells)
        p = dict(zip(rows["sc"], rows["p"], strict=True))
        first = next(sc for sc in cells if p[sc] <= 0.5)
        before = cells[cells.index(first) - 1]
        assert first - before == 1 and p[before] > 0.5, (agent, p)
        star = stars[stars["model"] == agent].iloc[0]
        assert before <= star["value"] <= first
        assert star["n_attempts"] == rows["n"].sum()
    oracle = stars[stars["model"] == "oracle"].iloc[0]
    assert pd.isna(oracle["value"]) and "never crosses" in oracle["note"]


def test_a_model_agent_in_an_sc_scan_pays_only_for_its_own_cells(tmp_path, prefect_server):
    """A model agent (the harness over a fake server that answers as the oracle would)
    beside a bounded offline agent: the model never crosses 1/2 in the range, so it plays
    the two ends only, whatever cells the bounded agent's brackets need; its episodes are
    the oracle's; a rerun sends nothing."""
    import copy

    import world_models_helpers as H
    from fake_model_server import running_fake_server
    from horizonbench.datasets.worlds.agents import OracleAgent
    from horizonbench.schemas.config import parse_config
    from horizonbench.tasks.evaluate.world_models import study_episodes
    from world_agent_server import WorldAgentPlayer

    def study(base_url: str, **worlds: object) -> dict:
        data = H.config_data(base_url, oracle=False, **worlds)
        data["worlds"]["environments"] = ["graph_nav"]
        data["worlds"]["agents"].insert(0, {"name": "bounded-8", "kind": "bounded", "capacity": 8})
        return data

    # the responder knows the worlds of the two ends, the only cells the model should play
    ends = study("http://127.0.0.1:9/v1", sc=[4, 20])
    player = WorldAgentPlayer(study_episodes(parse_config(copy.deepcopy(ends))), make_agent=OracleAgent)
    with running_fake_server(player, latency_s=0.01) as server:
        data = study(server.base_url, sc=None, sc_scan={"min": 4, "max": 20})
        cfg = H.write_config(tmp_path / "scan.yaml", data)
        out = tmp_path / "run"
        env = H.command_env(prefect_server)
        first = H.run_cmd(cfg, out, env)
        assert first.returncode == 0, first.stderr[-3000:]
        calls = server.answered
        again = H.run_cmd(cfg, out, env)
        assert again.returncode == 0, again.stderr[-3000:]
        assert server.answered == calls  # the rerun's calls all came from the attempt store
    episodes = H.episodes(out)
    model = episodes[episodes["model"] == H.AGENT]
    assert sorted(set(model["sc"])) == [4, 20] and model["success"].all()
    bounded = sorted(set(episodes[episodes["model"] == "bounded-8"]["sc"]))
    assert len(bounded) > 2 and bounded[0] == 4 and bounded[-1] == 20
    assert calls == len(pq.read_table(out / "attempts" / "world_attempts.parquet"))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda w: w.update(sc=[2, 40]), "sc_scan: sc lies outside"),
        (lambda w: w.update(regime="I"), "fixes sc="),
        (lambda w: w.update(g1b_pair={"sc_from": 10, "sc_to": 12, "dd": 1}), "g1b_pair names cells"),
        (lambda w: w.update(sc_scan={"min": 20, "max": 10}), "max (10) must be greater than min (20)"),
    ],
    ids=["sc-outside", "regime-fixes-sc", "g1b-pair", "min-above-max"],
)
def test_a_bad_sc_scan_is_one_config_error(change, message, tmp_path, capsys):
    """A scan the study cannot run: one line naming it, exit 2, no run folder written."""
    data = yaml.safe_load((ROOT / "configs" / "adaptive-worlds.yaml").read_text(encoding="utf-8"))
    change(data["worlds"])
    config = tmp_path / "bad.yaml"
    config.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    out = tmp_path / "run"
    assert main(["run", "--config", str(config), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not out.exists()
