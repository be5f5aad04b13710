"""Verified run folders: the manifest's sizes and hashes checked by ``status``, by the
commands that read tables, by the series' ``latest`` pointer, and repaired by a rerun.

One small run (a maze and a Hanoi table, two offline models) is generated once; each
test damages its own copy of it (``shutil.copytree`` keeps the files' times).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import CONFIGS
from horizonbench.cli.main import main
from horizonbench.tasks.run_folder import state as rf
from horizonbench.tasks.run_folder import verify

pytestmark = pytest.mark.flow

SCORES = "scores/scores.parquet"
MAZE_PART = "instances/maze/part-00000.parquet"
HANOI_PART = "instances/hanoi/part-00000.parquet"
FITS = "analysis/fits.parquet"


def _config() -> dict:
    cfg = yaml.safe_load((CONFIGS / "small.yaml").read_text())
    cfg["families"]["hanoi"] = {"params": {"ns": [1, 2, 3]}, "sampling": {"all": True}, "modes": ["plan"]}
    cfg["dask"] = {"n_workers": 1, "processes": False}
    return cfg


@pytest.fixture(scope="module")
def base(prefect_server, tmp_path_factory) -> Path:
    """One finished run; tests copy it, never change it."""
    from horizonbench.flows.pipeline import pipeline
    from horizonbench.schemas.config import parse_config

    run = tmp_path_factory.mktemp("verify") / "base"
    pipeline(parse_config(_config()), str(run))
    return run


@pytest.fixture
def run(base, tmp_path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(base, copy, symlinks=True)
    return copy


def _truncate(path: Path, keep: int = 200) -> None:
    with path.open("r+b") as fh:
        fh.truncate(keep)


def _flip(path: Path) -> None:
    """Change one byte in the middle, keeping the size."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _status(run: Path, capsys, *extra: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["status", "--run", str(run), *extra])
    return code, capsys.readouterr().out


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("horizonbench: error: "), err
    assert err.count("\n") == 1, err
    return err


# --------------------------------------------------------------------------- the manifest


def test_the_manifest_records_every_files_sha256_and_size(base):
    manifest = json.loads((base / "manifest.json").read_text())
    assert set(manifest["content_bytes"]) == set(manifest["content_sha256"])
    for rel, size in manifest["content_bytes"].items():
        assert (base / rel).stat().st_size == size, rel
    assert {SCORES, MAZE_PART, HANOI_PART, FITS} <= set(manifest["content_bytes"])


# ------------------------------------------------------------------------------- status


def test_status_of_an_intact_run_is_0_and_says_it_was_checked(base, capsys):
    code, out = _status(base, capsys)
    assert code == 0 and "verified: every output as the manifest recorded (sizes;" in out
    code, out = _status(base, capsys, "--verify")
    assert code == 0 and "(sizes and sha256)" in out


def test_status_names_a_deleted_table_and_exits_non_zero(run, capsys):
    (run / SCORES).unlink()
    code, out = _status(run, capsys)
    assert code == 3
    lines = [line for line in out.splitlines() if line.startswith("damaged: ")]
    assert lines == [f"damaged: {SCORES} is missing (the manifest records {_size(run, SCORES)} bytes)"]
    assert "current: " in out and "scores" not in out.split("current: ")[1].split("\n")[0]
    code, out = _status(run, capsys, "--json")
    info = json.loads(out)
    assert code == 3 and info["checked"] == "size"
    assert info["damaged"] == [
        {"path": SCORES, "output": "scores", "stage": "score", "problem": info["damaged"][0]["problem"]}
    ]
    assert "scores" not in info["current"]


def _size(run: Path, rel: str) -> str:
    return f"{json.loads((run / 'manifest.json').read_text())['content_bytes'][rel]:,}"


def test_status_finds_a_truncated_part_by_its_size_and_names_every_damaged_file(run, capsys):
    _truncate(run / MAZE_PART)
    (run / FITS).unlink()
    code, out = _status(run, capsys)
    assert code == 3
    damaged = [line for line in out.splitlines() if line.startswith("damaged: ")]
    assert damaged == [
        f"damaged: {FITS} is missing (the manifest records {_size(run, FITS)} bytes)",
        f"damaged: {MAZE_PART} has 200 bytes where the manifest records {_size(run, MAZE_PART)} bytes "
        "(truncated or replaced)",
    ]
    assert "L0 " not in out  # the fits are not read from a damaged analysis


def test_a_flipped_byte_passes_the_size_check_and_fails_verify(run, capsys):
    _flip(run / HANOI_PART)
    assert _status(run, capsys)[0] == 0
    code, out = _status(run, capsys, "--verify")
    assert code == 3
    assert f"damaged: {HANOI_PART} has another sha256 than the manifest records" in out


def test_a_part_file_the_run_did_not_write_is_damage(run, capsys):
    shutil.copy(run / MAZE_PART, run / "instances" / "maze" / "part-00001.parquet")
    code, out = _status(run, capsys)
    assert code == 3 and "instances/maze/part-00001.parquet is not in the manifest" in out


def test_a_manifest_from_before_sizes_is_still_checked(run, capsys):
    manifest = json.loads((run / "manifest.json").read_text())
    del manifest["content_bytes"]
    (run / "manifest.json").write_text(json.dumps(manifest))
    _truncate(run / MAZE_PART)
    (run / SCORES).unlink()
    code, out = _status(run, capsys)  # no sizes: a missing file is found, a truncated one not
    assert code == 3 and f"damaged: {SCORES} is missing\n" in out and MAZE_PART not in out
    code, out = _status(run, capsys, "--verify")
    assert code == 3 and f"{MAZE_PART} has another sha256" in out


def test_a_rebuilt_analysis_updates_the_sizes(run, capsys):
    assert main(["analyze", "--run", str(run)]) == 0
    assert _status(run, capsys, "--verify")[0] == 0


# -------------------------------------------------------------- commands that read tables


@pytest.mark.parametrize(
    ("command", "rel", "damage"),
    [
        ("report", MAZE_PART, _truncate),  # the case: a 33-line traceback, exit 1
        ("report", SCORES, Path.unlink),
        ("report", FITS, _flip),
        ("analyze", SCORES, _flip),
        ("analyze", SCORES, _truncate),
        ("export", HANOI_PART, _truncate),
        ("export", HANOI_PART, _flip),
        ("export", HANOI_PART, Path.unlink),
        ("compare", FITS, _truncate),
        ("compare", FITS, _flip),
    ],
)
def test_a_command_reading_a_damaged_table_prints_one_line_naming_it_and_exits_2(
    run, tmp_path, capsys, command, rel, damage
):
    damage(run / rel)
    argv = {
        "compare": ["compare", str(run), "--out", str(tmp_path / "cmp")],
        "export": ["export", "--run", str(run), "--dest", str(tmp_path / "exp")],
    }.get(command, [command, "--run", str(run)])
    capsys.readouterr()
    assert main(argv) == 2
    err = _one_line_error(capsys)
    assert rel in err and "damaged table" in err
    assert not (tmp_path / "cmp").exists() and not (tmp_path / "exp").exists()


def test_a_damaged_table_a_command_does_not_read_does_not_stop_it(run, tmp_path, capsys):
    _truncate(run / MAZE_PART)  # compare reads the fits only, export the puzzles' instances
    assert main(["compare", str(run), "--out", str(tmp_path / "cmp")]) == 0
    assert main(["export", "--run", str(run), "--dest", str(tmp_path / "exp")]) == 0
    assert (tmp_path / "exp" / "hanoi" / "train.parquet").exists()


# ----------------------------------------------------------------------------- latest


def test_latest_moves_only_to_a_verified_run(base, tmp_path):
    template = str(tmp_path / "nightly" / "{date}")
    good, bad = tmp_path / "nightly" / "2026-12-01", tmp_path / "nightly" / "2026-12-02"
    shutil.copytree(base, good, symlinks=True)
    shutil.copytree(base, bad, symlinks=True)
    link = tmp_path / "nightly" / "latest"
    assert rf.point_latest(template, good) == link and os.readlink(link) == good.name
    _truncate(bad / MAZE_PART)
    assert rf.point_latest(template, bad) is None
    assert os.readlink(link) == good.name
    assert MAZE_PART in str(verify.unverified(bad))  # why, for the flow's warning
    (bad / SCORES).unlink()
    shutil.copy(good / MAZE_PART, bad / MAZE_PART)
    assert rf.point_latest(template, bad) is None  # a deleted table too
    shutil.copy(good / SCORES, bad / SCORES)
    assert rf.point_latest(template, bad) == link and os.readlink(link) == bad.name


# ------------------------------------------------------------------------------ repair


def _files(run: Path) -> dict[str, tuple[bytes, int]]:
    """Every output file's bytes and modification time (ns)."""
    tops = {rel.split("/")[0] for rels in rf.STAGE_OUTPUTS.values() for rel in rels} - {"manifest.json"}
    out = {}
    for path in sorted(run.rglob("*")):
        rel = path.relative_to(run).as_posix()
        if path.is_file() and rel.split("/")[0] in tops:
            out[rel] = (path.read_bytes(), path.stat().st_mtime_ns)
    return out


def test_a_rerun_repairs_the_damaged_files_and_rewrites_nothing_else(base, run, capsys):
    from horizonbench.flows.pipeline import pipeline
    from horizonbench.schemas.config import parse_config

    (run / SCORES).unlink()
    _truncate(run / MAZE_PART)
    before = _files(run)
    pipeline(parse_config(_config()), str(run))
    after = _files(run)
    for rel in (SCORES, MAZE_PART):  # back, byte-identical to what the run first wrote
        assert after.pop(rel)[0] == (base / rel).read_bytes(), rel
        before.pop(rel, None)
    assert after == before  # every other output: same bytes, same modification time
    assert _status(run, capsys, "--verify")[0] == 0
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["repaired"][-1]["files"] == [MAZE_PART, SCORES]
    state = json.loads((run / "state.json").read_text())
    assert state["status"] == "completed" and state["command"] == "run (repair)"
    assert {o["status"] for o in state["outputs"].values()} == {"current"}


def test_damage_a_stage_cannot_repair_alone_makes_an_ordinary_rerun(run):
    from horizonbench.schemas.config import parse_config

    config = parse_config(_config()).model_dump(mode="json")
    _truncate(run / MAZE_PART)
    assert [d.path for d in verify.repair_plan(run, config) or []] == [MAZE_PART]
    # the same damage, but `generate` into the folder of a `run`: not the run it repairs
    assert verify.repair_plan(run, config, ("generate",), "generate") is None
    (run / SCORES).unlink()
    assert [d.path for d in verify.repair_plan(run, config) or []] == [MAZE_PART, SCORES]
    (run / FITS).unlink()  # the analysis is rebuilt by every stage after the scores
    assert verify.repair_plan(run, config) is None
    shutil.rmtree(run / "analysis")
    rf.finish(run, "failed", ["something"])  # a run that did not complete: rerun it all
    assert verify.repair_plan(run, config) is None


# ------------------------------------------------------------------ the comparison alone

_REL = st.sampled_from([SCORES, MAZE_PART, HANOI_PART, FITS, "report/index.html", "episodes/part-0.parquet"])


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    recorded=st.dictionaries(_REL, st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 9)), max_size=6),
    changes=st.dictionaries(_REL, st.sampled_from(["missing", "size", "hash"]), max_size=6),
)
def test_diagnose_flags_exactly_the_files_that_changed(recorded, changes):
    sizes: dict[str, int | None] = {rel: size for rel, (_, size) in recorded.items()}
    hashes = {rel: sha for rel, (sha, _) in recorded.items()}
    for rel, change in changes.items():
        if rel not in recorded:
            continue
        if change == "missing":
            sizes[rel] = None
        elif change == "size":
            sizes[rel] = recorded[rel][1] + 1
        else:
            hashes[rel] = "c"
    expected = {rel for rel in changes if rel in recorded}
    found = verify.diagnose(recorded, sizes, hashes)
    assert {d.path for d in found} == expected
    by_size = verify.diagnose(recorded, sizes, None)  # sizes only: a same-size change passes
    assert {d.path for d in by_size} == {rel for rel in expected if changes[rel] != "hash"}
    assert all(d.line().startswith(d.path + " ") for d in found)
