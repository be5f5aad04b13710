"""``horizonbench train`` as a user runs it: the tiny config (both architectures, scratch
and fine-tuned) through the command line's main() at a reduced scale, on the session's
Prefect test server. It trains (the loss falls), rolls the models out through the
evaluation engine, writes ``analysis/seqmodels.parquet`` and the report's section, and a
rerun into the same folder resumes: no model is trained again, no rollout step is
decoded again, the table's bytes stay. Also the command's refusals: one line, exit 2.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from horizonbench.cli.main import main
from horizonbench.schemas.seqmodels import SEQMODELS_SCHEMA

pytest.importorskip("torch")

pytestmark = pytest.mark.flow

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "configs" / "recurrreason-train-tiny.yaml"


def small_tiny(folder: Path) -> Path:
    """The tiny config made smaller, keeping what the test checks: both puzzles with
    train, validation and OOD sizes (n <= 2 trained, n = 3 out of distribution), both
    architectures and conditions, evaluations during training. (``--scale`` keeps the
    smallest sizes only, so its runs have no OOD split.)"""
    data = yaml.safe_load(TINY.read_text(encoding="utf-8"))
    bw = data["families"]["blocks_world"]
    bw["params"].update(ns=[1, 2, 3], per_n=12)
    bw["sampling"]["bins"] = {"min": 1, "max": 4, "width": 1, "per_bin": 10}
    data["families"]["hanoi"]["params"]["ns"] = [1, 2, 3]
    data["export"]["in_distribution_max"] = 2
    for arch in data["training"]["architectures"].values():
        arch.update(layers=1, width=32)
    data["training"]["optimizer"].update(max_steps=60, eval_every=20)
    data["dask"] = {"n_workers": 1}
    data["analysis"] = {"bootstrap": 0}
    path = folder / "train-small.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory, prefect_server):
    """The small tiny config trained and rolled out once, then rerun into the same
    folder. Returns (folder, first training summary, first table bytes, rerun's code)."""
    folder = tmp_path_factory.mktemp("train")
    out, config = folder / "run", small_tiny(folder)
    argv = ["train", "--config", str(config), "--out", str(out), "--workers", "1", "--no-progress"]
    mp = pytest.MonkeyPatch()
    mp.setenv("PREFECT_API_URL", prefect_server)
    try:
        assert main(argv) == 0
        first = json.loads((out / "models" / "training.json").read_text())
        table = (out / "analysis" / "seqmodels.parquet").read_bytes()
        again = main(argv)
    finally:
        mp.undo()
    return out, first, table, again


def test_every_model_trains_and_its_loss_falls(trained_run):
    out, first, _, _ = trained_run
    jobs = first["jobs"]
    assert {(j["puzzle"], j["architecture"], j["condition"]) for j in jobs} == {
        (p, a, c)
        for p in ("blocks_world", "hanoi")
        for a in ("t5", "gpt2")
        for c in ("scratch", "fine_tuned")
    }
    assert set(first["versions"]) == {"torch", "transformers"}
    for job in jobs:
        assert job["steps"] > 0 and job["train_pairs"] > 0 and job["validation_pairs"] > 0
        folder = out / "models" / job["puzzle"] / f"{job['architecture']}-{job['condition']}"
        losses = json.loads((folder / "last" / "trainer_state.json").read_text())["losses"]
        assert len(losses) == job["steps"] >= 10
        assert sum(losses[-5:]) < sum(losses[:5]), (job, losses)  # the training loss fell
        assert (folder / "best" / "model.safetensors").is_file()
        assert (folder / "best" / "tokenizer.json").is_file()
    # fine-tuning starts from the trained model (run:hanoi), not from random weights:
    # its first losses are well below a scratch model's
    start = {(j["puzzle"], j["architecture"], j["condition"]): _first_losses(out, j) for j in jobs}
    for (puzzle, arch, condition), first_losses in start.items():
        if condition == "fine_tuned":
            assert first_losses < start[(puzzle, arch, "scratch")], (puzzle, arch)


def _first_losses(out: Path, job: dict) -> float:
    folder = out / "models" / job["puzzle"] / f"{job['architecture']}-{job['condition']}"
    return sum(json.loads((folder / "last" / "trainer_state.json").read_text())["losses"][:3])


def test_the_trained_models_are_rolled_out_and_tabled(trained_run):
    out, _, _, _ = trained_run
    table = pq.read_table(out / "analysis" / "seqmodels.parquet")
    assert table.schema.names == SEQMODELS_SCHEMA.names
    rows = table.to_pylist()
    models = {r["model"] for r in rows}
    assert models == {"t5-scratch", "t5-fine_tuned", "gpt2-scratch", "gpt2-fine_tuned"}
    assert {r["split"] for r in rows} == {"validation", "ood"}
    for r in rows:
        assert 0.0 <= r["accuracy_low"] <= r["accuracy"] <= r["accuracy_high"] <= 1.0
        assert r["episodes"] >= r["solved"] >= 0
    # every rollout got an answer from its local checkpoint (none unanswered)
    assert all(r["unanswered"] == 0 for r in rows)
    # the train split is not rolled out: the attempts hold only validation and OOD instances
    attempts = pq.read_table(
        out / "attempts" / "attempts.parquet", columns=["model", "instance_id"]
    ).to_pylist()
    exported = {}
    for puzzle in ("blocks_world", "hanoi"):
        for split in ("train", "validation", "ood"):
            ids = pq.read_table(out / "exports" / puzzle / f"{split}.parquet", columns=["instance_id"])
            exported.update(dict.fromkeys(ids.column(0).to_pylist(), split))
    rolled = {a["instance_id"] for a in attempts if a["model"] in models}
    assert rolled and {exported[i] for i in rolled} == {"validation", "ood"}
    html = (out / "report" / "index.html").read_text(encoding="utf-8")
    for sid in (
        "seqmodels",
        "seqmodels-table2",
        "seqmodels-per-puzzle",
        "seqmodels-figure1",
        "seqmodels-figure2",
    ):
        assert f'id="{sid}"' in html


def test_a_rerun_resumes_without_training_or_decoding_again(trained_run):
    out, first, table, again = trained_run
    assert again == 0
    second = json.loads((out / "models" / "training.json").read_text())
    assert all(j["resumed"] for j in second["jobs"])
    assert [j["steps"] for j in second["jobs"]] == [j["steps"] for j in first["jobs"]]
    assert [j["checkpoint"] for j in second["jobs"]] == [j["checkpoint"] for j in first["jobs"]]
    # answers come from the attempt store (keyed by the checkpoints' weights): same table
    assert (out / "analysis" / "seqmodels.parquet").read_bytes() == table


def test_train_without_a_training_section_is_one_line_and_exit_2(tmp_path, capsys):
    config = tmp_path / "plain.yaml"
    data = yaml.safe_load(TINY.read_text())
    del data["training"]
    config.write_text(yaml.safe_dump(data))
    code = main(["train", "--config", str(config), "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "no 'training' section" in err[0]
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("command", ["train", "run"])
def test_a_training_config_without_torch_names_the_extra(command, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import machinery: "not installed"
    code = main([command, "--config", str(TINY), "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "needs torch" in err[0] and "pip install -e '.[train]'" in err[0]
    assert not (tmp_path / "run").exists()


def _prerequisites(target: str) -> list[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    m = re.search(rf"^{re.escape(target)}:([^\n]*)$", text, re.M)
    assert m, target
    return m.group(1).split()


def test_make_test_installs_the_train_extra_and_make_demo_does_not():
    assert "install-train" in _prerequisites("test") and "install-train" in _prerequisites("bench")
    assert _prerequisites("demo") == ["install"]
    assert "install-train" not in _prerequisites("install")
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    install = re.search(r"^\$\(STAMP\):.*?(?=^\S)", text, re.M | re.S)
    assert install and "train" not in install.group(0)
