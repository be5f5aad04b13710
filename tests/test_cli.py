"""The command line: help, clear errors with exit code 2 and nothing written, and one
real end-to-end run in a fresh process with no Prefect server configured."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import CONFIGS
from horizonbench.cli.main import main


def _write(tmp_path: Path, data: object, name: str = "cfg.yaml") -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return p


def _small() -> dict:
    return yaml.safe_load((CONFIGS / "small.yaml").read_text())


@pytest.mark.parametrize("command", [[], ["generate"], ["run"], ["demo"], ["families"]])
def test_help_on_every_command(command, capsys):
    with pytest.raises(SystemExit) as exc:
        main([*command, "--help"])
    assert exc.value.code == 0
    assert "usage: horizonbench" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda c: c["families"]["maze"]["params"].update(grid_rows=-1), "families.maze.params.grid_rows"),
        (lambda c: c["families"]["maze"]["params"].update(colour="red"), "families.maze.params.colour"),
        (lambda c: c["families"]["maze"]["sampling"].update(count=5), "families.maze.sampling"),
        (lambda c: c["evaluation"]["models"][1].pop("eps"), "evaluation.models.1"),
        (lambda c: c["families"].update(sudoku=c["families"]["maze"]), "families.sudoku"),
        (lambda c: c["run"].update(seed="abc"), "run.seed"),
        (lambda c: c.update(dask={"n_workers": 0}), "dask.n_workers"),
    ],
)
def test_bad_config_names_the_field_exits_2_and_writes_nothing(tmp_path, capsys, mutate, field):
    cfg = _small()
    mutate(cfg)
    out = tmp_path / "out"
    code = main(["run", "--config", str(_write(tmp_path, cfg)), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert field in err, err
    assert err.count("\n") == 1  # one clear line, no traceback
    assert not out.exists()


@pytest.mark.parametrize(
    ("text", "needle"),
    [("families: [1, 2", "not valid YAML"), ("- a list", "top level must be a mapping"), ("", "top level")],
)
def test_unreadable_config(tmp_path, capsys, text, needle):
    code = main(["generate", "--config", str(_write(tmp_path, text)), "--out", str(tmp_path / "o")])
    assert code == 2
    assert needle in capsys.readouterr().err


def test_missing_config_file(tmp_path, capsys):
    assert main(["run", "--config", str(tmp_path / "nope.yaml"), "--out", str(tmp_path / "o")]) == 2
    assert "no such config file" in capsys.readouterr().err


def test_bad_command_line_exits_2(capsys):
    for argv in (
        ["run"],
        ["frobnicate"],
        ["generate", "--config"],
        ["run", "--config", "x", "--out", "y", "--workers", "two"],
    ):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
    assert main(["run", "--config", "x", "--out", "y", "--workers", "0"]) == 2


def test_missing_api_key_exits_2_before_writing(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("HB_TEST_ABSENT_KEY", raising=False)
    cfg = _small()
    cfg["evaluation"]["models"].append(
        {"name": "gpt", "provider": "openai", "model": "gpt-x", "api_key_env": "HB_TEST_ABSENT_KEY"}
    )
    out = tmp_path / "out"
    assert main(["run", "--config", str(_write(tmp_path, cfg)), "--out", str(out)]) == 2
    assert "HB_TEST_ABSENT_KEY" in capsys.readouterr().err
    assert not out.exists()


def test_refuses_a_folder_holding_another_configs_run(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "manifest.json").write_text(json.dumps({"config": {"run": {"seed": 1}}}))
    code = main(["run", "--config", str(CONFIGS / "small.yaml"), "--out", str(out)])
    assert code == 2
    assert "different config" in capsys.readouterr().err


def test_demo_prints_its_config(capsys):
    assert main(["demo", "--print-config"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["families"]["maze"]["params"]["grid_rows"] == 12


def test_families(capsys):
    assert main(["families"]) == 0
    assert "maze" in capsys.readouterr().out.split()


@pytest.mark.flow
def test_run_end_to_end_in_a_fresh_process_without_prefect_server(tmp_path):
    """What a new user does: the installed command, no PREFECT_API_URL, a new PREFECT_HOME,
    and a relative --out."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env["PREFECT_HOME"] = str(tmp_path / "prefect-home")
    out = tmp_path / "run"
    exe = Path(sys.executable).with_name("horizonbench")
    proc = subprocess.run(
        [str(exe), "run", "--config", str(CONFIGS / "small.yaml"), "--out", "run", "--no-progress"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = out / "report" / "index.html"
    assert f"report: {report.resolve()}" in proc.stdout
    assert report.exists() and (out / "manifest.json").exists()
