"""The whole pipeline as a real Prefect flow against a real Prefect API server."""

from __future__ import annotations

import json
import re

import pyarrow.parquet as pq
import pytest
import yaml

from conftest import CONFIGS
from horizonbench.schemas.config import parse_config
from horizonbench.schemas.tables import ATTEMPTS_SCHEMA, SCHEMA_VERSION, SCORES_SCHEMA

pytestmark = pytest.mark.flow


@pytest.fixture(scope="module")
def small_config():
    return parse_config(yaml.safe_load((CONFIGS / "small.yaml").read_text()))


@pytest.fixture(scope="module")
def finished_run(prefect_server, small_config, tmp_path_factory):
    from horizonbench.flows.pipeline import pipeline

    out = tmp_path_factory.mktemp("run")
    report = pipeline(small_config, str(out))
    return out, report


def test_flow_writes_every_table_with_versioned_schema(finished_run):
    out, report = finished_run
    assert report == str(out / "report" / "index.html")
    inst = pq.read_table(out / "instances" / "maze" / "part-00000.parquet")
    assert inst.schema.metadata[b"schema_version"] == SCHEMA_VERSION.encode()
    assert inst.num_rows == 4 * 3  # four bins of width 4 in [8, 24), three per bin
    lengths = inst.column("solution_length").to_pylist()
    assert all(8 <= n < 24 for n in lengths)
    for lo in (8, 12, 16, 20):
        assert sum(lo <= n < lo + 4 for n in lengths) == 3
    att = pq.read_table(out / "attempts" / "attempts.parquet")
    assert att.schema.remove_metadata() == ATTEMPTS_SCHEMA
    assert att.num_rows == 12 * 2 * 2  # instances x samples x models
    prompts = pq.read_table(out / "prompts" / "prompts.parquet")
    assert prompts.num_rows == 12
    assert set(prompts.column("prompt_sha256").to_pylist()) == set(att.column("prompt_sha256").to_pylist())
    first = prompts.column("messages").to_pylist()[0]
    assert [m["role"] for m in first] == ["system", "user"]
    assert first[1]["content"].endswith("YOUR SOLUTION:")
    scores = pq.read_table(out / "scores" / "scores.parquet")
    assert scores.schema.remove_metadata() == SCORES_SCHEMA
    df = scores.to_pandas()
    assert df[df.model == "oracle"].success.all()
    assert not df[df.model == "noisy"].success.all()  # eps = 0.1 over L >= 8 fails somewhere
    for name in ("overall", "by_length", "fits", "violations", "first_violations"):
        assert (out / "analysis" / f"{name}.parquet").exists()
    assert not (out / ".staging").exists()


def test_manifest_records_config_versions_counts_and_hashes(finished_run, small_config):
    from horizonbench.tasks.run_folder.storage import sha256_file

    out, _ = finished_run
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"] == small_config.model_dump(mode="json")
    assert manifest["versions"]["prefect"].startswith("3.")
    assert manifest["counts"]["generation"][0]["kept"] == 12
    oracle = manifest["counts"]["attempts"]["models"]["oracle"]
    assert oracle["attempts"] == oracle["answered"] == 24 and oracle["failed"] == 0
    assert oracle["cost_usd"] == 0.0 and oracle["price"]["source"] == "offline"
    assert manifest["counts"]["attempts"]["total"]["failed"] == 0
    hashes = manifest["content_sha256"]
    rel = "instances/maze/part-00000.parquet"
    assert hashes[rel] == sha256_file(out / rel)
    assert "report/index.html" in hashes
    assert not any(k.endswith(".sqlite") for k in hashes)


def test_report_is_self_contained(finished_run):
    out, _ = finished_run
    html = (out / "report" / "index.html").read_text()
    assert "<svg" in html
    assert not re.search(r"""(src|href)\s*=\s*["']?https?:""", html)
    assert "oracle" in html and "noisy" in html
    assert "noisy: 9.5" in html  # true L0 of the eps = 0.1 baseline, 1 / -ln(0.9)


def test_flow_run_is_recorded_by_the_server(finished_run):
    """The run shows in the Prefect UI: the server holds a completed flow run."""
    import asyncio

    from prefect.client.orchestration import get_client

    async def runs():
        async with get_client() as client:
            return await client.read_flow_runs()

    states = {r.state.type.value for r in asyncio.run(runs()) if r.state}
    assert "COMPLETED" in states


def test_rerun_resumes_without_new_calls(prefect_server, finished_run, small_config):
    """A second run into the same folder reuses every stored answer."""
    from horizonbench.flows.pipeline import pipeline

    out, _ = finished_run
    before = pq.read_table(out / "scores" / "scores.parquet")
    pipeline(small_config, str(out))
    att = pq.read_table(out / "attempts" / "attempts.parquet").to_pandas()
    assert att.reused.all()
    after = pq.read_table(out / "scores" / "scores.parquet")
    assert after.equals(before)
