"""What a run shows in Prefect, read back through the Prefect client from a real API
server: a named, tagged flow run, task runs named by table, and the run's artifacts
(summary, horizons with intervals, a link to the report); plus the run folder's state,
the unfilled-bins failure, and the series' ``latest`` pointer."""

from __future__ import annotations

import json
import os
import re
import time

import pytest
import yaml
from prefect.exceptions import FailedRun

from conftest import CONFIGS
from horizonbench.schemas.config import parse_config

pytestmark = pytest.mark.flow


def _small(**sampling):
    data = yaml.safe_load((CONFIGS / "small.yaml").read_text())
    data["families"]["maze"]["sampling"].update(sampling)
    return parse_config(data)


@pytest.fixture(scope="module")
def nightly(prefect_server, tmp_path_factory):
    """One run into a dated series folder, as the nightly deployment writes them."""
    from horizonbench.flows.pipeline import pipeline

    series = tmp_path_factory.mktemp("series")
    template = str(series / "{date}")
    report = pipeline(_small(), template)
    out = next(p for p in series.iterdir() if p.name != "latest")
    return series, out, report


def _flow_run_of(out):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterTags

    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(tags=FlowRunFilterTags(all_=["run:small"]))
        )
        # the run of this folder: its artifacts name the folder
        for run in sorted(runs, key=lambda r: r.created, reverse=True):
            arts = client.read_artifacts()
            if any(a.flow_run_id == run.id and str(out) in (a.data or "") for a in arts):
                return run, [a for a in arts if a.flow_run_id == run.id], client.read_task_runs()
    raise AssertionError("no flow run of this folder")


def test_the_flow_run_is_named_tagged_and_has_its_artifacts(nightly):
    series, out, report = nightly
    run, artifacts, task_runs = _flow_run_of(out)
    assert re.fullmatch(r"small-\d{4}-\d{2}-\d{2}-\d{4}", run.name), run.name
    assert {"horizonbench", "run:small", "family:maze", "model:oracle", "model:noisy"} <= set(run.tags)
    by_key = {a.key: a for a in artifacts}
    assert set(by_key) == {
        "horizonbench-small-summary",
        "horizonbench-small-horizons",
        "horizonbench-small-report",
    }
    summary = by_key["horizonbench-small-summary"].data
    assert (
        "| maze | 12 |" in summary
        and "| instances/maze | passed |" in summary
        and "| scores | passed |" in summary
    )
    # the summary opens with the horizon card: a table per model, its L0 with the interval
    card = summary.index("## Horizon card")
    assert card < summary.index("## Instances") and "**noisy**" in summary[card:]
    assert re.search(r"\| maze \| L0 \| [0-9.]+ \| [0-9.]+ to [0-9.]+ \| \d+ \| fixed \|", summary)
    table = by_key["horizonbench-small-horizons"]
    assert table.type == "table"
    l0 = [r for r in json.loads(table.data) if r["quantity"] == "L0" and r["of"].startswith("maze / noisy")]
    assert l0 and all(r["value"] for r in l0) and any(r["low"] and r["high"] for r in l0)
    link = by_key["horizonbench-small-report"].data  # a link artifact is markdown: [text](url)
    assert re.fullmatch(r"\[HTML report of horizonbench: small\]\(file://.*/report/index\.html\)", link), link
    names = {t.name for t in task_runs if t.flow_run_id == run.id}
    assert {"generate-instances/maze", "validate-instances/maze", "validate-scores"} <= names, names


def test_the_series_points_latest_at_the_finished_run_and_its_state_is_current(nightly):
    series, out, report = nightly
    assert os.readlink(series / "latest") == out.name
    state = json.loads((out / "state.json").read_text())
    assert state["status"] == "completed" and state["problems"] == []
    stale = [rel for rel, o in state["outputs"].items() if o["status"] != "current"]
    assert stale == [] and {"instances", "scores", "analysis", "report", "manifest.json"} <= set(
        state["outputs"]
    )


def test_a_changed_rerun_rewrites_only_what_is_downstream_of_the_change(nightly):
    """Only the analysis settings change: instances and scores keep their bytes and
    their modification times; the analysis is rewritten; everything ends current."""
    from horizonbench.flows.pipeline import pipeline

    series, out, _ = nightly
    kept = [out / "instances" / "maze" / "part-00000.parquet", out / "scores" / "scores.parquet"]
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in kept}
    fits = out / "analysis" / "fits.parquet"
    fits_before = fits.read_bytes()
    data = yaml.safe_load((CONFIGS / "small.yaml").read_text())
    data["analysis"]["bootstrap"] = 7
    time.sleep(0.05)  # a rewrite would show in the nanosecond mtimes
    pipeline(parse_config(data), str(out))
    assert {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in kept} == before
    assert fits.read_bytes() != fits_before
    state = json.loads((out / "state.json").read_text())
    assert state["status"] == "completed" and {o["status"] for o in state["outputs"].values()} == {"current"}


def test_a_crash_in_a_rerun_leaves_nothing_stale_that_passes_as_current(nightly, monkeypatch):
    """A rerun that dies in evaluation: the old scores, analysis and report are marked
    stale (the report bannered), the state says failed, no manifest claims the run."""
    from horizonbench.flows import pipeline as flows
    from horizonbench.tasks.run_folder.status import run_status

    series, out, _ = nightly
    before = (out / "report" / "index.html").read_text()

    def broken(cfg, run):
        raise RuntimeError("the model server went away")

    monkeypatch.setattr(flows, "evaluate_models", broken)
    with pytest.raises(RuntimeError):
        flows.pipeline(_small(), str(out))
    info = run_status(out)
    assert info["status"] == "failed" and "the model server went away" in info["problems"][0]
    assert {"scores", "analysis", "report"} <= set(info["stale"]) and "instances" in info["current"]
    assert info["report"] is None and not (out / "manifest.json").exists()
    after = (out / "report" / "index.html").read_text()
    assert "STALE" in after and after != before
    assert os.readlink(series / "latest") == out.name  # it moves only when a run finishes


def test_short_bins_fail_the_run_with_the_list_unless_allowed(prefect_server, tmp_path):
    from horizonbench.flows.pipeline import generate_flow

    cfg = _small(max_candidates=60)  # too few candidates to fill four bins of three
    with pytest.raises(FailedRun, match=r"bins short of quota: maze: \d of 4 L bins short of 3 \("):
        generate_flow(cfg, str(tmp_path / "a"))
    state = json.loads((tmp_path / "a" / "state.json").read_text())
    assert state["status"] == "failed" and "allow_unfilled" in state["problems"][0]
    assert (tmp_path / "a" / "manifest.json").exists()  # everything was still written
    assert generate_flow(_small(max_candidates=60, allow_unfilled=True), str(tmp_path / "b"))
    assert json.loads((tmp_path / "b" / "state.json").read_text())["status"] == "completed"


def test_a_run_into_a_held_folder_is_refused_at_once(prefect_server, tmp_path):
    import subprocess
    import sys
    import textwrap

    from horizonbench.flows.pipeline import generate_flow
    from horizonbench.tasks.run_folder.state import RunFolderBusy

    out = tmp_path / "held"
    hold = textwrap.dedent(
        """
        import sys, time
        from pathlib import Path
        from horizonbench.tasks.run_folder.state import run_lock
        with run_lock(Path(sys.argv[1]), "horizonbench run"):
            print("held", flush=True)
            time.sleep(60)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", hold, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        started = time.monotonic()
        with pytest.raises(RunFolderBusy, match=f"is in use by pid {proc.pid}"):
            generate_flow(_small(), str(out))
        assert time.monotonic() - started < 30  # refused, not queued behind the holder
        assert not (out / "state.json").exists()  # the holder's folder is untouched
    finally:
        proc.kill()
        proc.wait()
