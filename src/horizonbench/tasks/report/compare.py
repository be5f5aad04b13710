"""Finished run folders: rebuild their analysis and report from the tables alone, and
compare several runs.

A finished run folder is one with ``manifest.json`` (the pipeline writes it last). The
manifest holds the config the run used, so a rebuild needs nothing else: no model is
called and nothing is generated. Every file is written atomically (temporary name,
then rename), and the manifest's ``content_sha256`` is updated for the files rewritten
(only those: the hashes of the tables the rebuild read stay what the run recorded), with
a ``rebuilt`` entry saying what was rebuilt, when and by which version.

The stages run as Prefect tasks inside a flow (``flows/rebuild.py``) when an API is
configured, and as plain functions otherwise (:func:`_call`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from horizonbench import __version__
from horizonbench.analysis import compare as cmp
from horizonbench.analysis.horizons import leaderboard
from horizonbench.core.errors import ConfigError
from horizonbench.schemas.config import Config, parse_config
from horizonbench.schemas.horizons import LEADERBOARD_SCHEMA
from horizonbench.schemas.tables import ANALYSIS_SCHEMAS, WORLD_ANALYSIS_SCHEMAS
from horizonbench.tasks.report.run_info import report_counts, report_run_info
from horizonbench.tasks.run_folder.layout import (
    ATTEMPTS_REL,
    EPISODES_REL,
    HORIZONS_REL,
    SCORES_REL,
    WORLD_ANALYSIS_PREFIX,
)
from horizonbench.tasks.run_folder.manifest import MANIFEST, git_sha
from horizonbench.tasks.run_folder.storage import sha256_file, write_json, write_table, write_text
from horizonbench.tasks.run_folder.verify import check_tables

FITS_REL = "analysis/fits.parquet"
#: what ``horizonbench compare`` writes into its --out folder
COMPARE_HTML = "index.html"
COMPARE_TABLE = "compare.parquet"
#: the leaderboard of horizon cards across the compared runs
LEADERBOARD_TABLE = "horizons.parquet"

_S, _I, _F, _B = pa.string(), pa.int64(), pa.float64(), pa.bool_()
#: ``compare.parquet``: one row per run and fit (``analysis/compare.py`` defines the columns)
COMPARE_SCHEMA = pa.schema(
    [
        ("run", _S),
        ("run_index", _I),
        ("started_at", _S),
        ("run_name", _S),
        ("family", _S),
        ("setting_id", _S),
        ("setting", _S),
        ("model", _S),
        ("model_spec", _S),
        ("method", _S),
        ("success_definition", _S),
        ("L0", _F),
        ("L0_low", _F),
        ("L0_high", _F),
        ("n_attempts", _I),
        ("converged", _B),
        ("note", _S),
        ("previous_run", _S),
        ("previous_model_spec", _S),
        ("previous_L0", _F),
        ("previous_L0_low", _F),
        ("previous_L0_high", _F),
        ("moved", _S),
        ("intervals_disjoint", _B),
    ]
)
assert COMPARE_SCHEMA.names == cmp.COMPARE_COLUMNS


@dataclass(frozen=True)
class RunFolder:
    """A finished run: its folder, manifest and the config it ran."""

    path: Path
    manifest: dict[str, Any]
    cfg: Config

    def has(self, rel: str) -> bool:
        return (self.path / rel).is_file()


def read_run(path: Path, flag: str = "--run") -> RunFolder:
    """The finished run in ``path``; ConfigError (one line, naming it) otherwise."""
    where = f"{flag} {path}" if flag else str(path)
    if not path.is_dir():
        raise ConfigError(f"{where}: no such folder")
    manifest_path = path / MANIFEST
    if not manifest_path.is_file():
        raise ConfigError(
            f"{where}: no {MANIFEST} (not a horizonbench run folder, or its run did not finish)"
        )
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ConfigError(f"{where}: {MANIFEST} cannot be read: {err}") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("config"), dict):
        raise ConfigError(f"{where}: {MANIFEST} holds no config")
    cfg = parse_config(manifest["config"], source=f"{where}: {MANIFEST} config")
    return RunFolder(path, manifest, cfg)


#: what ``analyze`` and ``report`` read, checked against the manifest first (``tasks.run_folder.verify``)
ANALYZE_READS = (SCORES_REL, ATTEMPTS_REL, "episodes", "steps")
REPORT_READS = (*ANALYZE_READS, "instances", "analysis")


def _check_readable(run: RunFolder, rel: str, flag: str = "--run") -> None:
    try:
        pq.read_schema(run.path / rel)
    except (OSError, pa.ArrowException) as err:
        raise ConfigError(f"{flag} {run.path}: {rel} cannot be read: {err}") from None


def _counts(run: RunFolder) -> dict[str, Any]:
    counts = run.manifest.get("counts")
    return counts if isinstance(counts, dict) else {}


def _answered(run: RunFolder) -> int:
    return int(((_counts(run).get("attempts") or {}).get("total") or {}).get("answered") or 0)


def _episodes(run: RunFolder) -> int:
    return int((_counts(run).get("worlds") or {}).get("episodes") or 0)


def analysis_parts(run: RunFolder) -> list[str]:
    """What the analysis of ``run`` is built from: ``"scores"`` (families) and/or
    ``"episodes"`` (a world study). ConfigError when a table the run's counts promise
    is missing, unreadable or not what the manifest recorded (``tasks.run_folder.verify``), or when
    there is nothing to analyse."""
    check_tables(run.path, run.manifest, ANALYZE_READS)
    parts = []
    for part, rel, promised, wanted in (
        ("scores", SCORES_REL, f"{_answered(run)} answered attempts", bool(run.cfg.families)),
        ("episodes", EPISODES_REL, f"{_episodes(run)} world episodes", run.cfg.worlds is not None),
    ):
        if run.has(rel) and wanted:
            _check_readable(run, rel)
            parts.append(part)
        elif not promised.startswith("0 "):
            raise ConfigError(f"--run {run.path}: {rel} is missing (the manifest counts {promised})")
    if not parts:
        raise ConfigError(f"--run {run.path}: nothing to analyse (no scores or episodes table)")
    return parts


def _call(stage: Any, *args: Any) -> Any:
    """A Prefect task as a task inside a flow run (it shows in the UI); outside one, its
    function with the run logger silenced (no Prefect server is needed for that)."""
    from prefect.context import FlowRunContext
    from prefect.logging.loggers import disable_run_logger

    if FlowRunContext.get() is not None:
        return stage(*args)
    with disable_run_logger():
        return stage.fn(*args)


def _record_rebuild(run: RunFolder, what: str, rels: Sequence[str]) -> None:
    """Update the manifest's hashes of the rewritten files and say what was rebuilt."""
    manifest = json.loads((run.path / MANIFEST).read_text(encoding="utf-8"))
    hashes = dict(manifest.get("content_sha256") or {})
    sizes = dict(manifest.get("content_bytes") or {})
    for rel in rels:
        hashes[rel] = sha256_file(run.path / rel)
        sizes[rel] = (run.path / rel).stat().st_size
    manifest["content_sha256"] = hashes
    if "content_bytes" in manifest:  # a manifest from before sizes stays without them
        manifest["content_bytes"] = sizes
    manifest["rebuilt"] = [
        *(manifest.get("rebuilt") or []),
        {
            "what": what,
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "horizonbench": __version__,
            "git_sha": git_sha(),
        },
    ]
    write_json(manifest, run.path / MANIFEST)


def _rel(run: RunFolder, path: str | Path) -> str:
    return Path(path).resolve().relative_to(run.path.resolve()).as_posix()


def rebuild_analysis(path: Path) -> dict[str, str]:
    """Rewrite ``<run>/analysis/*`` from the scores and episodes tables with the
    config in the manifest; returns the paths written, by table name."""
    from horizonbench.tasks.analyse.stage import analyse, analyse_worlds, horizon_card
    from horizonbench.tasks.run_folder.state import run_lock

    run = read_run(path)
    parts = analysis_parts(run)
    paths: dict[str, str] = {}
    # a rebuild writes into the folder: never beside a run that is writing it
    with run_lock(run.path, "horizonbench analyze"):
        if "scores" in parts:
            paths.update(_call(analyse, run.cfg, str(run.path)))
        if "episodes" in parts:
            written = _call(analyse_worlds, run.cfg, str(run.path))
            paths.update({f"worlds_{name}": p for name, p in written.items()})
        if paths:
            paths["horizons"] = _call(horizon_card, run.cfg, str(run.path))
        _record_rebuild(run, "analysis", [_rel(run, p) for p in paths.values()])
    return paths


# ---------------------------------------------------------------------------
# the report
# ---------------------------------------------------------------------------


def _in_order(models: dict[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """``models`` in the config's order (the manifest's JSON has its keys sorted)."""
    first = {n: models[n] for n in names if n in models}
    return first | {n: c for n, c in models.items() if n not in first}


def report_inputs(run: RunFolder) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """The report's title, run information and counts, as the pipeline gave them,
    from the manifest: the config, provenance and counts of the run."""
    cfg, manifest = run.cfg, run.manifest
    info = report_run_info(cfg, manifest)
    counts = json.loads(json.dumps(_counts(run)))
    attempts = counts.get("attempts")
    if isinstance(attempts, dict) and isinstance(attempts.get("models"), dict):
        attempts["models"] = _in_order(attempts["models"], [m.name for m in cfg.evaluation.models])
    worlds = counts.get("worlds")
    if cfg.worlds is not None and isinstance(worlds, dict) and isinstance(worlds.get("models"), dict):
        worlds["models"] = _in_order(worlds["models"], [a.name for a in cfg.worlds.agents])
    return f"horizonbench: {cfg.run.name}", info, report_counts(counts)


def report_parts(run: RunFolder) -> list[str]:
    """What the report of ``run`` shows (as :func:`analysis_parts`), each checked to
    have its analysis; ConfigError naming ``horizonbench analyze`` otherwise, or naming
    the first table the report reads that is not what the manifest recorded."""
    check_tables(run.path, run.manifest, REPORT_READS)
    parts = []
    for part, rel, analysed in (
        ("scores", SCORES_REL, "analysis/overall.parquet"),
        ("episodes", EPISODES_REL, f"{WORLD_ANALYSIS_PREFIX}grid.parquet"),
    ):
        if not run.has(rel):
            continue
        if not run.has(analysed):
            raise ConfigError(
                f"--run {run.path}: {analysed} is missing; rebuild the analysis first "
                f"(horizonbench analyze --run {run.path})"
            )
        parts.append(part)
    if not parts:
        raise ConfigError(f"--run {run.path}: nothing to report (no scores or episodes table)")
    present = [f"analysis/{n}.parquet" for n in ANALYSIS_SCHEMAS] if "scores" in parts else []
    present += [f"{WORLD_ANALYSIS_PREFIX}{n}.parquet" for n in WORLD_ANALYSIS_SCHEMAS]
    for rel in (SCORES_REL, *present):
        if run.has(rel):
            _check_readable(run, rel)
    return parts


def rebuild_report(path: Path) -> str:
    """Rewrite ``<run>/report/index.html`` from the run's tables and analysis."""
    from horizonbench.tasks.report.stage import build_report
    from horizonbench.tasks.run_folder.state import run_lock

    run = read_run(path)
    report_parts(run)
    title, info, counts = report_inputs(run)
    with run_lock(run.path, "horizonbench report"):
        dest = _call(build_report, str(run.path), title, info, counts)
        _record_rebuild(run, "report", [_rel(run, dest)])
    return str(dest)


# ---------------------------------------------------------------------------
# comparing runs
# ---------------------------------------------------------------------------


def _labels(paths: Sequence[Path]) -> list[str]:
    """Each run's folder name; the path as given where two names collide."""
    names = [p.resolve().name or str(p) for p in paths]
    return [str(p) if names.count(n) > 1 else n for p, n in zip(paths, names, strict=True)]


def _fits_frame(run: RunFolder, label: str) -> pd.DataFrame:
    df = pq.read_table(run.path / FITS_REL).to_pandas()
    if "family" not in df.columns:  # tables from before the puzzle families: maze only
        df = df.assign(family="maze")
    config = run.manifest["config"]
    family = df["family"].astype(str).tolist()
    model = df["model"].astype(str).tolist()
    ids = [cmp.setting_of(config, f) for f in family]
    return pd.DataFrame(
        {
            "run": label,
            "family": family,
            "setting_id": [i for i, _ in ids],
            "setting": [s for _, s in ids],
            "model": model,
            "model_spec": [cmp.model_spec(config, m) for m in model],
            "method": df["method"].astype(str).tolist(),
            # fits from before the column existed counted the scores' success
            "success_definition": (
                df["success_definition"].astype(object).where(df["success_definition"].notna(), None)
                if "success_definition" in df.columns
                else None
            ),
            "L0": pd.to_numeric(df["L0"], errors="coerce").astype("float64"),
            "L0_low": pd.to_numeric(df["L0_low"], errors="coerce").astype("float64"),
            "L0_high": pd.to_numeric(df["L0_high"], errors="coerce").astype("float64"),
            "n_attempts": pd.to_numeric(df["n_attempts"], errors="coerce").astype("int64"),
            "converged": df["converged"].astype(bool),
            "note": df["note"].astype(object).where(df["note"].notna(), None),
        },
        columns=cmp.FIT_INPUT_COLUMNS,
    )


def check_compare(paths: Sequence[Path], out: Path) -> list[RunFolder]:
    """The runs to compare, each a finished run with its L0 fits; ConfigError (one
    line) for no runs, a run given twice, a folder that is not a finished run, or an
    ``--out`` that is a file."""
    if not paths:
        raise ConfigError("compare: name at least one run folder")
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} exists and is not a folder")
    seen: dict[Path, Path] = {}
    runs = []
    for p in paths:
        key = p.resolve()
        if key in seen:
            raise ConfigError(f"{p}: given twice")
        seen[key] = p
        run = read_run(p, flag="")
        if not run.has(FITS_REL):
            raise ConfigError(
                f"{p}: no {FITS_REL} (a run without scored attempts has no L0; if it has "
                f"scores, rebuild the analysis: horizonbench analyze --run {p})"
            )
        check_tables(run.path, run.manifest, [FITS_REL], flag="")
        _check_readable(run, FITS_REL, flag="")
        runs.append(run)
    return runs


def compare_frames(runs: Sequence[RunFolder]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(runs, table)``: the runs in series order and the comparison table."""
    labels = _labels([r.path for r in runs])
    rows = []
    for i, (run, label) in enumerate(zip(runs, labels, strict=True)):
        m = run.manifest
        rows.append(
            {
                "run": label,
                "run_path": str(run.path.resolve()),
                "position": i,
                "started_at": m.get("started_at"),
                "finished_at": m.get("finished_at"),
                "run_name": run.cfg.run.name,
                "seed": run.cfg.run.seed,
                "git_sha": m.get("git_sha"),
                "horizonbench": (m.get("versions") or {}).get("horizonbench"),
            }
        )
    ordered = cmp.order_runs(pd.DataFrame(rows, columns=cmp.RUN_COLUMNS))
    fits = [_fits_frame(run, label) for run, label in zip(runs, labels, strict=True)]
    frames = [f for f in fits if not f.empty]
    if not frames:
        raise ConfigError("compare: no run holds an L0 fit (analysis/fits.parquet is empty in every run)")
    return ordered, cmp.compare_fits(ordered, pd.concat(frames, ignore_index=True))


def compare_table(table: pd.DataFrame) -> pa.Table:
    """The comparison as an Arrow table of COMPARE_SCHEMA, through Python objects (no
    pandas dtype leaks into the file; a missing value, NaN included, is null)."""
    records = table[COMPARE_SCHEMA.names].astype(object).to_dict("records")
    for rec in records:
        for key, value in rec.items():
            if value is not None and value is not pd.NA and value != value:  # NaN
                rec[key] = None
    return pa.Table.from_pylist(records, schema=COMPARE_SCHEMA)


def _cards_frame(run: RunFolder, label: str) -> pd.DataFrame:
    """A run's horizon card, labelled with the run and each row's setting: the card it
    wrote, or (a run from before the card) the one its analysis tables give."""
    from horizonbench.tasks.analyse.horizons import horizon_card

    path = run.path / HORIZONS_REL
    card = pq.read_table(path).to_pandas() if path.exists() else horizon_card(run.cfg, run.path)
    config = run.manifest["config"]
    ids = [cmp.setting_of(config, str(f).split(" dd=")[0])[0] for f in card["family"]]
    return card.assign(run=label, setting_id=ids)


def leaderboard_frame(runs: Sequence[RunFolder], ordered: pd.DataFrame) -> pd.DataFrame:
    """The leaderboard of the runs' horizon cards (``analysis.horizons.leaderboard``)."""
    labels = _labels([r.path for r in runs])
    frames = [_cards_frame(run, label) for run, label in zip(runs, labels, strict=True)]
    frames = [f for f in frames if not f.empty]
    cards = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["run"])
    return leaderboard(cards, [str(r) for r in ordered["run"]])


def write_compare(paths: Sequence[Path], out: Path) -> dict[str, Any]:
    """Write ``<out>/index.html``, ``<out>/compare.parquet`` and the leaderboard of
    horizon cards ``<out>/horizons.parquet``; returns their paths, the runs (series
    order) and the latest move of every series."""
    from horizonbench.reports.compare import render_compare
    from horizonbench.tasks.analyse.scores import to_table

    runs = check_compare(paths, out)
    ordered, table = compare_frames(runs)
    board = leaderboard_frame(runs, ordered)
    html = render_compare(runs=ordered, table=table, board=board)
    table_path = write_table(compare_table(table), out / COMPARE_TABLE, "compare")
    board_path = write_table(to_table(board, LEADERBOARD_SCHEMA), out / LEADERBOARD_TABLE, "compare/horizons")
    html_path = write_text(html, out / COMPARE_HTML)
    return {
        "html": str(html_path),
        "table": str(table_path),
        "leaderboard": str(board_path),
        "runs": ordered,
        "latest": cmp.latest_moves(table),
        "board": board,
    }
