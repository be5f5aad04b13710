"""Every shipped config runs to the end, at smoke scale (``horizonbench run --scale``).

A config that validates can still fail to finish: RecurrReason's asked Blocks World for
100 puzzles at n = 1, where there are 6, and its run ended with exit code 4 unnoticed.
So each file in configs/ and src/horizonbench/configs/ (globbed: a new config is picked
up by itself) runs through the command line (its main()), every stage, at a fraction of
its scale: the same families, sweep settings, modes, models, environments and agents.

Each run also holds the rows of its config in the README's "Reproducing the papers"
table to what they list (tests/reproducing_papers.py: every output a Parquet table with
rows, every report section there), so those rows cost no run of their own.

Every config runs end to end; none needed the fallback of a dry run plus a sampled
generation. The demo config has no smoke run of its own: it runs once per test session
at scale 0.1 (tests/demo_run.py, shared with the browser and digest tests), and its test
here checks that run the same way, at no further cost.

Measured (``pytest tests/test_shipped_configs.py --durations=15``, 2026-12-03, 2 cores
at load average 5-6 from other work): 236 s in all, 128 CPU-s; seqbench-paper (14 sweep
labels) and the demo 44 s each, the world studies 7-24 s, the Prefect test server 20 s
once a session (wall time; CPU-s from /usr/bin/time). Dropping the demo's smoke run
(issue 24) saves its 33 s of ``make test`` (--durations of the CI run of 2026-12-03).

API models are pointed at the fake model server on 127.0.0.1 (their base_url
rewritten in a copy of the config, keys dummies from the environment): no real
network, and the test checks that each of them was called there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml

from demo_run import SCALE as DEMO_SCALE
from fake_model_server import running_fake_server
from horizonbench.cli.main import main
from horizonbench.schemas.config import load_config
from horizonbench.schemas.scale import scale_config
from horizonbench.tasks.evaluate.world_episodes import EPISODES_REL
from reproducing_papers import check_run, read_rows

pytestmark = pytest.mark.flow

ROOT = Path(__file__).resolve().parents[1]
#: where configs ship: the repository's examples and the package's own (the demo)
CONFIG_DIRS = (ROOT / "configs", ROOT / "src" / "horizonbench" / "configs")
CONFIG_SUFFIXES = (".yaml", ".yml", ".json")
CONFIGS = sorted(p for d in CONFIG_DIRS for p in d.iterdir() if p.suffix in CONFIG_SUFFIXES)
#: the demo runs at a smaller scale in every test session (tests/demo_run.py), so it
#: needs no smoke run of its own
DEMO = ROOT / "src" / "horizonbench" / "configs" / "demo.yaml"
SMOKE_CONFIGS = [p for p in CONFIGS if p != DEMO]

#: the smoke scale: the fewest instances that still run every path (recurrreason: 97
#: puzzles of all four families; a maze label: one bin; a world study: the corners of
#: its grid); seconds per config (pytest --durations, in the module docstring)
SCALE = 0.005
DUMMY_KEY = "sk-smoke-NOT-SECRET-31c7"


def _answer(body: dict[str, Any]) -> str:
    """A model that never gives a usable answer: invalid plans and harness fallbacks,
    the paths a weak real model takes through scoring, analysis and the report."""
    return "I am not sure how to go about this one."


@pytest.fixture(scope="module")
def fake_server():
    with running_fake_server(_answer) as server:
        yield server


def _load(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)


def _local_copy(path: Path, server: Any, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, set[str]]:
    """The config with every API model sent to the fake server and its key variable set
    to a dummy, and every hub checkpoint of a training section replaced by the run's own
    scratch model; the config itself when it has neither. Returns the file and the API
    models."""
    data = _load(path)
    api = set()
    rewritten = False
    training = data.get("training")
    if training:
        # hub checkpoints (t5-small, gpt2) cannot be downloaded here: the pre-trained
        # conditions start from this run's own scratch model, as the tiny config's do
        first = (training.get("puzzles") or list(data["families"]))[0]
        for arch in training["architectures"].values():
            if arch.get("pretrained") and not arch["pretrained"].startswith("run:"):
                arch["pretrained"] = f"run:{first}"
                rewritten = True
    for model in (data.get("evaluation") or {}).get("models") or []:
        if model["provider"] == "offline":
            continue
        api.add(model["name"])
        model["base_url"] = server.root_url if model["provider"] == "anthropic" else server.base_url
        if model.get("api_key_env"):
            monkeypatch.setenv(model["api_key_env"], DUMMY_KEY)
    if not api and not rewritten:
        return path, api
    copy = tmp / f"local-{path.name}"
    copy.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return copy, api


def test_every_file_in_the_config_folders_is_a_config():
    """A shipped config in another format would escape the smoke runs below."""
    for folder in CONFIG_DIRS:
        for p in folder.iterdir():
            assert p.suffix in CONFIG_SUFFIXES or p.name in ("__init__.py", "__pycache__"), p
    assert len(CONFIGS) >= 10


def test_a_config_whose_full_run_cannot_finish_fails_its_smoke_run(tmp_path, capsys):
    """Merged bins fill where narrow ones might not: the smoke run checks the full
    config's requests first. configs/recurrreason.yaml as it was before issue 23 (100
    Blocks World puzzles asked at n = 1, which has 6, with distinct pairs drawn before the
    cut) fails here, before anything runs."""
    data = _load(ROOT / "configs" / "recurrreason.yaml")
    old_params = {"ns": list(range(1, 11)), "num_stacks": 3, "per_n": 100, "alpha": 3}
    data["families"]["blocks_world"]["params"] = old_params
    data["families"]["blocks_world"]["sampling"]["bins"].pop("quotas", None)
    old = tmp_path / "recurrreason-before.yaml"
    old.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    out = tmp_path / "run"
    assert main(["run", "--config", str(old), "--out", str(out), "--scale", str(SCALE)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{old}: families.blocks_world.sampling.bins:" in err, err
    assert "(n = 1: 6 of 100)" in err and not out.exists()


@pytest.mark.parametrize("path", SMOKE_CONFIGS, ids=lambda p: p.name)
def test_shipped_config_runs_at_smoke_scale(path, tmp_path, prefect_server, fake_server, monkeypatch, capsys):
    monkeypatch.setenv("PREFECT_API_URL", prefect_server)
    config, api_models = _local_copy(path, fake_server, tmp_path, monkeypatch)
    out = tmp_path / "run"
    before = len(fake_server.requests)
    # one Dask worker: the tests run on a shared machine; the worker count never changes
    # the outputs (tests/test_determinism.py)
    argv = ["run", "--config", str(config), "--out", str(out), "--scale", str(SCALE), "--workers", "1"]
    code = main([*argv, "--no-progress"])
    err = capsys.readouterr().err
    assert code == 0, err[-3000:]

    manifest = json.loads((out / "manifest.json").read_text())
    ran = manifest["config"]
    # the manifest records the scaled config (what the smoke run ran)
    expected = scale_config(load_config(config), SCALE).model_dump(mode="json")
    assert ran["families"] == expected["families"] and ran.get("worlds") == expected.get("worlds")
    assert ran["evaluation"]["samples"] == expected["evaluation"]["samples"] == 1
    _check_every_part_ran(path, out, ran)
    # the README's "Reproducing the papers" rows of this config: each output a table with
    # rows, each report section there (tests/reproducing_papers.py; checked on this run
    # rather than on a run of their own)
    problems = check_run(read_rows(), path.relative_to(ROOT).as_posix(), out)
    assert not problems, "\n".join(problems)
    # every API model was called, and only on the fake server
    called = {r.body.get("model") for r in fake_server.requests[before:]}
    wanted = {m["model"] for m in ran["evaluation"]["models"] if m["name"] in api_models}
    assert called == wanted
    for p in out.rglob("*"):
        if p.is_file():
            assert DUMMY_KEY.encode() not in p.read_bytes(), p


def test_the_demo_config_runs_in_the_shared_demo(shared_demo_run):
    """The demo config runs once per test session (``horizonbench demo --scale``, shared
    with the browser and digest tests: tests/demo_run.py); checked as the smoke runs are."""
    assert shared_demo_run.exit_code == 0, shared_demo_run.stderr_tail
    out = shared_demo_run.path
    ran = json.loads((out / "manifest.json").read_text())["config"]
    expected = scale_config(load_config(DEMO), float(DEMO_SCALE)).model_dump(mode="json")
    assert ran["families"] == expected["families"] and ran["worlds"] == expected["worlds"]
    assert ran["evaluation"]["samples"] == expected["evaluation"]["samples"]
    _check_every_part_ran(DEMO, out, ran)


def _check_every_part_ran(path: Path, out: Path, ran: dict[str, Any]) -> None:
    """A report, instances of every family, scores of every model in every mode, and
    episodes of every agent in every environment."""
    assert (out / "report" / "index.html").stat().st_size > 0
    shipped = _load(path)
    if shipped.get("families"):
        scores = pq.read_table(out / "scores" / "scores.parquet").to_pandas()
        models = {m["name"] for m in ran["evaluation"]["models"]}
        for label, spec in ran["families"].items():
            assert any((out / "instances" / label).iterdir()), label
            for mode in spec["modes"]:
                rows = scores[(scores.family == label) & (scores["mode"] == mode)]
                assert set(rows.model) == models, (label, mode)
    if shipped.get("worlds"):
        episodes = pq.read_table(out / EPISODES_REL).to_pandas()
        assert set(episodes.model) == {a["name"] for a in ran["worlds"]["agents"]}
        assert set(episodes.env) == set(ran["worlds"]["environments"])
