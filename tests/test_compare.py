"""``horizonbench analyze``, ``report`` and ``compare`` on real runs of the offline pipeline.

Three small nights of one maze setting: the noisy baseline has eps 0.03 on the first two
nights (true L0 = 1 / -ln(0.97) = 32.8) and eps 0.15 on the third (6.2), so its L0 must
be flagged as moving down on the third night and not on the second.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from conftest import CONFIGS
from horizonbench.analysis import compare as cmp
from horizonbench.cli.main import main

pytestmark = pytest.mark.flow

EPS = {"night-1": 0.03, "night-2": 0.03, "night-3": 0.15}
HOSTILE = '<script>alert("x")</script>&$\\alpha$'


def _config(name: str, eps: float) -> dict:
    cfg = yaml.safe_load((CONFIGS / "small.yaml").read_text())
    cfg["run"]["name"] = name
    cfg["families"]["maze"]["sampling"]["bins"] = {"min": 6, "max": 18, "width": 4, "per_bin": 4}
    cfg["evaluation"]["samples"] = 4
    cfg["evaluation"]["models"][1]["eps"] = eps
    cfg["dask"] = {"n_workers": 1, "processes": False}
    return cfg


@pytest.fixture(scope="module")
def nights(prefect_server, tmp_path_factory):
    """Three finished runs, in the order they ran."""
    from horizonbench.flows.pipeline import pipeline
    from horizonbench.schemas.config import parse_config

    root = tmp_path_factory.mktemp("nightly")
    out = []
    for name, eps in EPS.items():
        run = root / name
        pipeline(parse_config(_config(name, eps)), str(run))
        out.append(run)
    return out


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("horizonbench: error: "), err
    assert err.count("\n") == 1, err
    return err


def _values(s: pd.Series) -> list:
    """A column as Python values, null as None (pandas reads a null string as nan)."""
    return [None if pd.isna(v) else v for v in s]


def _bytes(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.parquet"))}


# ---------------------------------------------------------------------------
# analyze and report
# ---------------------------------------------------------------------------


def test_analyze_rebuilds_the_analysis_byte_identical(nights, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(nights[0], run)
    before = _bytes(run / "analysis")
    assert "fits.parquet" in before
    shutil.rmtree(run / "analysis")
    assert main(["analyze", "--run", str(run)]) == 0
    out = capsys.readouterr().out
    assert _bytes(run / "analysis") == before
    assert "maze/noisy binomial_mle: L0 = " in out
    assert f"analysis: {(run / 'analysis').resolve()}" in out
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["rebuilt"][-1]["what"] == "analysis"
    assert not list(run.rglob("*.tmp"))


def test_report_rebuilds_the_report_byte_identical(nights, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(nights[0], run)
    before = (run / "report" / "index.html").read_bytes()
    (run / "report" / "index.html").unlink()
    assert main(["report", "--run", str(run)]) == 0
    assert capsys.readouterr().out.strip() == f"report: {(run / 'report' / 'index.html').resolve()}"
    assert (run / "report" / "index.html").read_bytes() == before
    manifest = json.loads((run / "manifest.json").read_text())
    from horizonbench.tasks.run_folder.storage import sha256_file

    assert manifest["content_sha256"]["report/index.html"] == sha256_file(run / "report" / "index.html")
    assert manifest["rebuilt"][-1]["what"] == "report"


def test_rebuilds_and_compare_run_as_flows_when_prefect_is_configured(
    nights, prefect_server, tmp_path, monkeypatch, capsys
):
    import asyncio

    from prefect.client.orchestration import get_client

    run = tmp_path / "run"
    shutil.copytree(nights[1], run)
    before = _bytes(run / "analysis")
    monkeypatch.setenv("PREFECT_API_URL", prefect_server)
    assert main(["analyze", "--run", str(run)]) == 0
    assert main(["report", "--run", str(run)]) == 0
    assert _bytes(run / "analysis") == before
    assert main(["compare", str(nights[0]), str(run), "--out", str(tmp_path / "c")]) == 0
    assert (tmp_path / "c" / "compare.parquet").exists()

    async def names():
        async with get_client() as client:
            flows = {f.id: f.name for f in await client.read_flows()}
            return {
                flows[r.flow_id] for r in await client.read_flow_runs() if r.state and r.state.is_completed()
            }

    assert {"horizonbench-analyze", "horizonbench-report", "horizonbench-compare"} <= asyncio.run(names())


def test_analyze_and_report_refuse_what_is_not_a_finished_run(nights, tmp_path, capsys):
    assert main(["analyze", "--run", str(tmp_path / "nope")]) == 2
    assert "no such folder" in _one_line_error(capsys)
    empty = tmp_path / "empty"
    empty.mkdir()
    for command in ("analyze", "report"):
        assert main([command, "--run", str(empty)]) == 2
        assert "no manifest.json" in _one_line_error(capsys)
    run = tmp_path / "run"
    shutil.copytree(nights[0], run)
    shutil.rmtree(run / "analysis")
    assert main(["report", "--run", str(run)]) == 2
    assert "horizonbench analyze --run" in _one_line_error(capsys)
    (run / "scores" / "scores.parquet").unlink()
    assert main(["analyze", "--run", str(run)]) == 2
    assert "scores/scores.parquet is missing" in _one_line_error(capsys)
    assert not (run / "analysis").exists()
    (run / "manifest.json").write_text("{not json")
    assert main(["analyze", "--run", str(run)]) == 2
    assert "manifest.json cannot be read" in _one_line_error(capsys)


# ---------------------------------------------------------------------------
# compare
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compared(nights, tmp_path_factory):
    out = tmp_path_factory.mktemp("compare") / "out"
    # given out of order: the series is ordered by the manifests' start times
    code = main(["compare", str(nights[2]), str(nights[0]), str(nights[1]), "--out", str(out)])
    assert code == 0
    return out


def test_compare_lists_l0_per_model_and_run_with_intervals(nights, compared):
    table = pq.read_table(compared / "compare.parquet").to_pandas()
    assert list(table.columns) == cmp.COMPARE_COLUMNS
    mle = table[table["method"] == "binomial_mle"]
    noisy = mle[mle["model"] == "noisy"].sort_values("run_index")
    assert noisy["run"].tolist() == ["night-1", "night-2", "night-3"]
    assert noisy["setting_id"].nunique() == 1  # one setting over the nights
    assert noisy["model_spec"].tolist() == ["offline noisy eps=0.03"] * 2 + ["offline noisy eps=0.15"]
    assert (noisy["L0_low"] <= noisy["L0"]).all() and (noisy["L0"] <= noisy["L0_high"]).all()
    # the third night's L0 is near its true 6.2, well below the first two nights' 32.8
    first, third = noisy["L0"].iloc[0], noisy["L0"].iloc[2]
    assert 3 < third < 12 < first
    oracle = mle[mle["model"] == "oracle"]
    assert len(oracle) == 3 and (oracle["L0"] == float("inf")).all()
    fits = pq.read_table(nights[0] / "analysis" / "fits.parquet").to_pandas()
    mine = fits[(fits["model"] == "noisy") & (fits["method"] == "binomial_mle")].iloc[0]
    assert noisy["L0"].iloc[0] == mine["L0"] and noisy["L0_low"].iloc[0] == mine["L0_low"]
    html = (compared / "index.html").read_text()
    # the runs in series order (the leaderboard above them names the latest two first)
    runs = html.index('id="runs"')
    assert html.index("night-1", runs) < html.index("night-2", runs) < html.index("night-3", runs)
    assert f"{mine['L0']:.1f}" in html and f"{mine['L0_low']:.1f} – {mine['L0_high']:.1f}" in html


def test_the_leaderboard_holds_each_models_latest_horizon_with_its_move_and_trend(nights, compared):
    """compare/horizons.parquet: one row per (model, family, metric) of the runs' horizon
    cards, the latest night's value and interval, the previous night's, moved, trend, and
    the history in series order (the third night's noisy model decays much faster)."""
    from horizonbench.schemas.horizons import LEADERBOARD_SCHEMA

    table = pq.read_table(compared / "horizons.parquet")
    assert table.schema.names == LEADERBOARD_SCHEMA.names
    board = table.to_pandas()
    noisy = board[(board["model"] == "noisy") & (board["metric"] == "L0")].iloc[0]
    cards = [pq.read_table(n / "analysis" / "horizons.parquet").to_pandas() for n in nights]
    mine = [c[(c["model"] == "noisy") & (c["metric"] == "L0")].iloc[0] for c in cards]
    assert noisy["runs"] == 3 and noisy["latest_run"] == "night-3" and noisy["previous_run"] == "night-2"
    assert noisy["value"] == mine[2]["value"] and noisy["previous_value"] == mine[1]["value"]
    assert (noisy["low"], noisy["high"]) == (mine[2]["low"], mine[2]["high"])
    assert noisy["moved"] == "down" and noisy["trend"] < -0.3
    assert noisy["history"] == " -> ".join(f"{m['value']:.3g}" for m in mine)
    oracle = board[(board["model"] == "oracle") & (board["metric"] == "L0")].iloc[0]
    assert oracle["value"] == float("inf") and oracle["trend"] is None or pd.isna(oracle["trend"])
    html = (compared / "index.html").read_text()
    assert html.index('id="leaderboard"') < html.index('id="runs"')


def test_compare_flags_the_night_whose_l0_moved(compared, capsys):
    table = pq.read_table(compared / "compare.parquet").to_pandas()
    noisy = table[(table["method"] == "binomial_mle") & (table["model"] == "noisy")].sort_values("run_index")
    assert _values(noisy["moved"]) == [None, "within", "down"]
    assert _values(noisy["previous_run"]) == [None, "night-1", "night-2"]
    assert noisy["intervals_disjoint"].iloc[2] in (True, False)
    oracle = table[(table["method"] == "binomial_mle") & (table["model"] == "oracle")]
    assert set(oracle["moved"].dropna()) == {"within"}  # L0 = inf night after night
    wls = table[table["method"] == "wls_prefactor"]
    assert wls["moved"].isna().all()  # no interval, no flag
    html = (compared / "index.html").read_text()
    assert "<svg" in html and "1 model moved" in html
    assert "moved-down" in html


def test_compare_prints_the_move(nights, tmp_path, capsys):
    assert main(["compare", *map(str, nights), "--out", str(tmp_path / "c")]) == 0
    out = capsys.readouterr().out
    moved = [line for line in out.splitlines() if line.startswith("moved")]
    assert len(moved) == 1 and "noisy" in moved[0] and "night-3" in moved[0] and "down" in moved[0]
    assert f"compare: {(tmp_path / 'c' / 'index.html').resolve()}" in out


def _record(run: Path, rel: str) -> None:
    """A table rewritten on purpose: its sha256 and size into the manifest."""
    from horizonbench.tasks.run_folder.storage import sha256_file

    manifest = json.loads((run / "manifest.json").read_text())
    manifest["content_sha256"][rel] = sha256_file(run / rel)
    manifest["content_bytes"][rel] = (run / rel).stat().st_size
    (run / "manifest.json").write_text(json.dumps(manifest))


def test_compare_page_is_self_contained_and_escaped(nights, tmp_path, capsys):
    hostile = tmp_path / "<b onclick='x'>night&3"
    shutil.copytree(nights[2], hostile)
    fits_path = hostile / "analysis" / "fits.parquet"
    fits = pq.read_table(fits_path)
    models = [HOSTILE if m == "noisy" else m for m in fits.column("model").to_pylist()]
    fits = fits.set_column(fits.schema.get_field_index("model"), "model", pa.array(models, pa.string()))
    pq.write_table(fits, fits_path)
    _record(hostile, "analysis/fits.parquet")  # else compare refuses it as damaged
    out = tmp_path / "c"
    assert main(["compare", str(nights[0]), str(hostile), "--out", str(out)]) == 0
    html = (out / "index.html").read_text()
    assert "<script" not in html and "<b " not in html and "night&3" not in html
    assert "&lt;script&gt;" in html and "&lt;b onclick=&#39;x&#39;&gt;night&amp;3" in html
    assert not re.search(r"https?://", html)
    assert not re.search(r"""\b(src|href)\s*=\s*(?!["']?#)""", html)  # only in-page links
    table = pq.read_table(out / "compare.parquet").to_pandas()
    assert HOSTILE in set(table["model"])


def test_compare_of_one_run_has_no_trend(nights, tmp_path):
    assert main(["compare", str(nights[0]), "--out", str(tmp_path / "c")]) == 0
    html = (tmp_path / "c" / "index.html").read_text()
    assert "no trend to draw" in html and "<svg" not in html
    table = pq.read_table(tmp_path / "c" / "compare.parquet").to_pandas()
    assert table["moved"].isna().all()


def test_compare_refuses_bad_inputs(nights, tmp_path, capsys):
    out = tmp_path / "c"
    assert main(["compare", "--out", str(out)]) == 2
    assert "at least one run" in _one_line_error(capsys)
    not_run = tmp_path / "not-a-run"
    not_run.mkdir()
    assert main(["compare", str(nights[0]), str(not_run), "--out", str(out)]) == 2
    assert "not-a-run: no manifest.json" in _one_line_error(capsys)
    assert main(["compare", str(nights[0]), str(nights[0]), "--out", str(out)]) == 2
    assert "given twice" in _one_line_error(capsys)
    a_file = tmp_path / "file.html"
    a_file.write_text("")
    assert main(["compare", str(nights[0]), "--out", str(a_file)]) == 2
    assert "not a folder" in _one_line_error(capsys)
    no_fits = tmp_path / "no-fits"
    shutil.copytree(nights[0], no_fits)
    (no_fits / "analysis" / "fits.parquet").unlink()
    assert main(["compare", str(no_fits), "--out", str(out)]) == 2
    assert "horizonbench analyze --run" in _one_line_error(capsys)
    assert not out.exists()


# ---------------------------------------------------------------------------
# the pure comparison
# ---------------------------------------------------------------------------


def _fit(run: str, model: str, L0: float, low: float | None, high: float | None, **extra) -> dict:
    row = {
        "run": run,
        "family": "maze",
        "setting_id": "s",
        "setting": "maze",
        "model": model,
        "model_spec": "",
        "method": "binomial_mle",
        "success_definition": None,  # a fits table from before the column: simulation
        "L0": L0,
        "L0_low": low,
        "L0_high": high,
        "n_attempts": 10,
        "converged": True,
        "note": None,
    }
    return row | extra


def _runs(*starts: str) -> pd.DataFrame:
    return cmp.order_runs(
        pd.DataFrame(
            [
                {
                    "run": f"r{i}",
                    "run_path": f"/r{i}",
                    "position": i,
                    "started_at": s,
                    "finished_at": s,
                    "run_name": "n",
                    "seed": 0,
                    "git_sha": None,
                    "horizonbench": "x",
                }
                for i, s in enumerate(starts)
            ]
        )
    )


def test_moves_are_judged_against_the_previous_run_of_the_series():
    runs = _runs(
        "2024-01-03T00:00:00Z", "2024-01-01T00:00:00Z", "2024-01-02T00:00:00Z", "2024-01-04T00:00:00Z"
    )
    assert runs["run"].tolist() == ["r1", "r2", "r0", "r3"]
    fits = pd.DataFrame(
        [
            _fit("r1", "m", 10.0, 8.0, 12.0),
            _fit("r2", "m", 12.5, 12.2, 14.0),  # above r1's interval, intervals disjoint
            _fit("r0", "m", 12.8, 10.5, 15.0),  # inside r2's interval
            _fit("r3", "m", float("nan"), None, None, note="no successes"),
            _fit("r1", "w", 10.0, None, None, method="wls_prefactor"),
            _fit("r2", "w", 1.0, None, None, method="wls_prefactor"),
            _fit("r0", "i", float("inf"), 20.0, float("inf")),
            _fit("r3", "i", 15.0, 12.0, 19.0),  # below r0's interval; skips the runs without it
            # another success definition of "m" is a series of its own
            _fit("r1", "m", 30.0, 25.0, 35.0, success_definition="exact_match"),
            _fit("r2", "m", 31.0, 26.0, 36.0, success_definition="exact_match"),
        ]
    )
    full = cmp.compare_fits(runs, fits)
    exact = full[full["success_definition"] == "exact_match"].set_index("run")
    assert _values(exact["moved"]) == [None, "within"] and exact.loc["r2", "previous_L0"] == 30.0
    table = full[full["success_definition"] == "simulation"].set_index(["model", "run"])
    assert table.loc[("m", "r2"), "moved"] == "up" and table.loc[("m", "r2"), "intervals_disjoint"]
    assert table.loc[("m", "r0"), "moved"] == "within"
    assert not table.loc[("m", "r0"), "intervals_disjoint"]
    assert table.loc[("m", "r3"), "moved"] is None  # L0 not identifiable: not judged
    assert table.loc[("m", "r1"), "moved"] is None  # first of its series
    assert table.loc[("w", "r2"), "moved"] is None  # WLS: no interval
    assert table.loc[("i", "r3"), "previous_run"] == "r0"
    assert table.loc[("i", "r3"), "moved"] == "down"
    latest = cmp.latest_moves(full[full["success_definition"] == "simulation"]).set_index("model")
    assert len(cmp.latest_moves(full)) == 3  # m (two definitions) and i
    assert latest.loc["m", "run"] == "r3" and latest.loc["m", "runs"] == 4
    assert latest.loc["i", "moved"] == "down" and "w" not in latest.index


def test_moved_is_a_two_sample_test_on_log_l0_not_the_point_against_the_previous_interval():
    """Issue 22: the point-outside rule ignored the later run's own noise and flagged about
    one pair of nights in six with no change. The rule is a z test of log L0: the difference
    against the root sum of squares of the facing half-widths of the two 95% intervals."""
    runs = _runs("2024-01-01T00:00:00Z", "2024-01-02T00:00:00Z")
    fits = pd.DataFrame(
        [
            _fit("r0", "noisy", 10.0, 8.0, 12.0),
            # 12.5 lies above r0's interval, but log 1.25 = 0.223 < hypot(log 1.25, log 1.2) = 0.288
            _fit("r1", "noisy", 12.5, 10.0, 15.6),
            _fit("r0", "tight", 10.0, 9.0, 11.1),
            # overlapping intervals, yet log 1.2 = 0.182 > hypot(log(12 / 10.9), log 1.11) = 0.142
            _fit("r1", "tight", 12.0, 10.9, 13.2),
            _fit("r0", "fall", 10.0, 8.0, 12.0),
            _fit("r1", "fall", 6.0, 5.0, 7.0),  # log(10/6) = 0.51 > hypot(log(7/6), log(10/8)) = 0.27
            _fit("r0", "half", 10.0, 8.0, 12.0),
            _fit("r1", "half", 12.5, None, None),  # this run has no interval: not judged
        ]
    )
    table = cmp.compare_fits(runs, fits).set_index(["model", "run"])
    assert table.loc[("noisy", "r1"), "moved"] == "within"
    assert table.loc[("tight", "r1"), "moved"] == "up"
    assert not table.loc[("tight", "r1"), "intervals_disjoint"]
    assert table.loc[("fall", "r1"), "moved"] == "down"
    assert table.loc[("half", "r1"), "moved"] is None


def test_setting_is_family_params_and_prompt_not_sampling():
    base = yaml.safe_load((CONFIGS / "small.yaml").read_text())
    other_sample = json.loads(json.dumps(base))
    other_sample["families"]["maze"]["sampling"]["bins"]["per_bin"] = 9
    other_noise = json.loads(json.dumps(base))
    other_noise["families"]["maze"]["params"]["noise_ratio"] = 1.0
    sid, summary = cmp.setting_of(base, "maze")
    assert cmp.setting_of(other_sample, "maze")[0] == sid
    assert cmp.setting_of(other_noise, "maze")[0] != sid
    assert cmp.setting_of(base, "maze/rollout")[0] != sid
    assert (
        summary.startswith("maze: ")
        and "noise_ratio=0.5" in summary
        and "; prompt " in summary
        and "shots=1" in summary
    )


def test_layout_constants_match_the_stages_that_write_them():
    from horizonbench.tasks.analyse import worlds
    from horizonbench.tasks.evaluate import world_episodes
    from horizonbench.tasks.report import compare as runs
    from horizonbench.tasks.score.stage import SCORES_REL

    assert runs.SCORES_REL == SCORES_REL
    assert runs.EPISODES_REL == world_episodes.EPISODES_REL
    assert runs.WORLD_ANALYSIS_PREFIX == worlds.WORLD_ANALYSIS_PREFIX


@pytest.mark.parametrize("command", ["analyze", "report", "compare"])
def test_help(command, capsys):
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    assert "usage: horizonbench" in capsys.readouterr().out
