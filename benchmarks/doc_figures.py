"""The deterministic figures the README quotes that no pipeline command prints whole.

Every number the docs quote must come from a command named beside it. The pipeline's own
commands print most of them (``horizonbench status`` the L0 fits, the run's log the
candidates kept); what they leave scattered over a run folder, or never compute, this
script prints in one place. A report, not a test: it always exits 0 on a readable input.

    .venv/bin/python benchmarks/doc_figures.py run runs/figure1         # a finished run folder
    .venv/bin/python benchmarks/doc_figures.py run runs/demo
    .venv/bin/python benchmarks/doc_figures.py horizons                 # median L* per cell
    .venv/bin/python benchmarks/doc_figures.py baseline                 # the throughput baseline's mazes

``run DIR``: per instance table the candidates generated, certified and kept and the
rejections (the manifest's counts); per puzzle family and n, instances and optimal moves
(the README's Table 4 comparison) and the mean optimal length; per family, mode and model
the attempts, successes, mean progress and best progress (the scores); every L0 fit with
its interval (``analysis/fits.parquet``).

``horizons [--config FILE] [--env NAME]``: the median optimal length L* of the worlds of
each (sc, dd) cell of a world-study config (default ``configs/wmc-grid.yaml``,
StatefulPuzzle), against the regime's horizon T: the README's "The horizon" paragraph.
It builds the worlds (no agent runs): a few seconds.

``baseline [--count N] [--seed S]``: the median optimal length and fact count of the
certified 40x40, B = 2 mazes of ``benchmarks/maze_reference.py`` (the straightforward generator) and of
horizonbench's, on the same candidate seeds (candidates 0..N-1 of root seed S, the seed
of the throughput table's first run): benchmarks/README.md's "The baseline". About 20 s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def run_figures(run: Path) -> list[str]:
    """The lines of ``run DIR``: generation counts, Table 4 rows, outcomes and fits."""
    import pandas as pd
    import pyarrow.parquet as pq

    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    lines = [f"run {run} (started {manifest.get('started_at')}, git {str(manifest.get('git_sha'))[:10]})"]
    for g in manifest["counts"].get("generation", []):
        rejected = ", ".join(f"{k} {v:,}" for k, v in (g.get("rejections") or {}).items()) or "none"
        lines.append(
            f"{g['family']}: kept {g['kept']:,} of {g['candidates_considered']:,} candidates "
            f"({g['candidates_certified']:,} certified; rejected: {rejected})"
        )
    for part in sorted((run / "instances").glob("*")):
        table = pq.read_table(part, columns=None).to_pandas()
        if "n" not in table.columns:
            continue
        lines.append(f"{part.name} per n: instances / optimal moves, mean optimal length")
        for n, rows in table.groupby("n"):
            moves = int(rows["solution_length"].sum())
            lines.append(f"  n = {n}: {len(rows):,} / {moves:,}, {moves / len(rows):.1f}")
        lines.append(f"  total: {len(table):,} / {int(table['solution_length'].sum()):,}")
    scores_path = run / "scores" / "scores.parquet"
    if scores_path.exists():
        scores = pd.read_parquet(scores_path)
        scores = scores[scores["answered"]]
        has_best = "best_progress" in scores.columns
        for (family, mode, model), rows in scores.groupby(["family", "mode", "model"], sort=True):
            best = (
                f", best progress {rows['best_progress'].mean():.2f}"
                if has_best and rows["best_progress"].notna().any()
                else ""
            )
            lines.append(
                f"{family} {mode} {model}: {int(rows['success'].sum()):,} of {len(rows):,} solved, "
                f"progress {rows['progress_ratio'].mean():.2f}{best}"
            )
    fits_path = run / "analysis" / "fits.parquet"
    if fits_path.exists():
        for r in pd.read_parquet(fits_path).itertuples():
            ci = "" if pd.isna(r.L0_low) else f" (interval {r.L0_low:.1f} to {r.L0_high:.1f})"
            lines.append(
                f"L0 {r.family}/{r.model} {r.method} ({r.success_definition}): {r.L0:.1f}{ci}, "
                f"{r.n_attempts:,} attempts"
            )
    return lines


def optimal_lengths(config: Path, env: str, sc: int | None = None) -> dict[tuple[int, int], list[int]]:
    """L* of every world of ``env`` in a world-study config, per (sc, dd) cell (only the
    cells of ``sc`` when given): the worlds are built, no agent runs."""
    from horizonbench.datasets.worlds.study import HORIZON_MAX, environment_class
    from horizonbench.schemas.config import load_config

    cfg = load_config(config)
    if cfg.worlds is None:
        raise SystemExit(f"doc_figures: {config} has no world study")
    lengths: dict[tuple[int, int], list[int]] = defaultdict(list)
    for ep in cfg.worlds.study().episodes(cfg.run.seed):
        if ep.env != env or (sc is not None and ep.spec.sc != sc):
            continue
        world = environment_class(ep.env)(ep.spec.replace(horizon=HORIZON_MAX))
        _, task = world.reset(ep.seed, ep.archetype)
        lengths[(ep.spec.sc, ep.spec.dd)].append(task.optimal_length)
    return dict(lengths)


def median_range(lengths: dict[tuple[int, int], list[int]], sc: int) -> str:
    """The range of the cells' median L* at ``sc`` as the README writes it: ``36.5-64``."""
    medians = [statistics.median(v) for (s, _), v in lengths.items() if s == sc]
    return f"{min(medians):g}-{max(medians):g}"


def horizon_figures(config: Path, env: str) -> list[str]:
    """The lines of ``horizons``: median L* per (sc, dd) cell against the regime's T."""
    from horizonbench.datasets.worlds.base import REGIMES
    from horizonbench.schemas.config import load_config

    lengths = optimal_lengths(config, env)
    regime = load_config(config).worlds.regime  # type: ignore[union-attr]
    horizon = REGIMES[regime].horizon
    lines = [f"{env} in {config.name} (regime {regime}, T = {horizon}): median L* per cell"]
    for sc in sorted({sc for sc, _ in lengths}):
        cells = [(dd, lengths[(sc, dd)]) for dd in sorted(dd for s, dd in lengths if s == sc)]
        shown = ", ".join(
            f"dd {dd}: {statistics.median(v):g} ({sum(x > horizon for x in v)} of {len(v)} above T)"
            for dd, v in cells
        )
        lines.append(f"  sc = {sc}: {shown} (medians {median_range(lengths, sc)})")
    return lines


def baseline_figures(count: int, seed: int) -> list[str]:
    """The lines of ``baseline``: both generators' medians over the same candidate seeds."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import maze_reference as bench  # the baseline generator of the throughput table

    from horizonbench.datasets.shards import candidate_seed, generate_shard

    ours = [row for _, _, row, _ in generate_shard("maze", bench.maze_params(0.0), seed, 0, count) if row]
    theirs = [
        row
        for index in range(count)
        if (
            row := bench.baseline_candidate(
                bench.ROWS, bench.COLS, bench.NUM_KEYS, 0.0, 1.0, candidate_seed(seed, "maze", index)
            )
        )
    ]
    lines = [
        f"{count} candidates of root seed {seed}, 40x40, B = 2, noise 0: certified, median L, median facts"
    ]
    for name, rows in (("baseline (benchmarks/maze_reference.py)", theirs), ("horizonbench", ours)):
        lines.append(
            f"  {name}: {len(rows)}, {statistics.median(r['solution_length'] for r in rows):g}, "
            f"{statistics.median(len(r['facts']) for r in rows):g}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    r = sub.add_parser("run", help="figures of a finished run folder")
    r.add_argument("run", type=Path, metavar="DIR")
    h = sub.add_parser("horizons", help="median L* per cell of a world-study config")
    h.add_argument("--config", type=Path, default=ROOT / "configs" / "wmc-grid.yaml", metavar="FILE")
    h.add_argument("--env", default="stateful_puzzle", metavar="NAME")
    b = sub.add_parser("baseline", help="median L and fact count of the throughput baseline's mazes and ours")
    b.add_argument("--count", type=int, default=200, metavar="N")
    b.add_argument("--seed", type=int, default=20240601, metavar="S")
    args = ap.parse_args(argv)
    lines: list[Any]
    if args.what == "run":
        if not (args.run / "manifest.json").is_file():
            print(f"doc_figures: {args.run} is not a finished run folder (no manifest.json)", file=sys.stderr)
            return 2
        lines = run_figures(args.run)
    elif args.what == "baseline":
        lines = baseline_figures(args.count, args.seed)
    else:
        lines = horizon_figures(args.config, args.env)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
