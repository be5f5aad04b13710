"""Adaptive designs against fixed grids: calls to a 5% L0 interval, episodes to a 1-unit sc* bracket.

Part A (L0, ``analysis/adaptive.py``): a simulated model with success ``0.95 exp(-L/L0)``
over seqBench's Figure 1 bins (L = 10..119, 5 samples per instance) is studied in waves
until the binomial MLE's cluster-bootstrap interval (200 resamples) has a relative
half-width of at most 5% (at most 400,000 calls and 40 waves), once with the adaptive
design and once with uniform bins under the same stopping rule. Per L0 of 5, 20 and 80
and design: the median calls at the stop (and the 25-75% range), the share of studies
that reached the target before a cap, the coverage of the true L0 by the final 95%
interval (with its Wilson interval over the studies), and for the adaptive rows the
uniform/adaptive ratio of median calls beside the Fisher-information bound on that ratio
(uniform bins against the best two-point design, found by a grid search over pairs of
depths and weights with ``relative_variance``): no design can beat the bound by more than
noise, so a goal above it is out of reach on this grid whatever the sampler does.

Part B (sc*, ``analysis/sc_scan.py``): logistic success curves ``1 / (1 + exp((sc - c) / s))``
over sc = 6..30 at 50 episodes per cell, bisection to a 1-unit bracket against the fine
scan of every cell: episodes, the share of scans that bracketed a crossing, the coverage
of the bootstrap interval (``phase.critical_point_bootstrap``) of the true crossing c and
of the grid's own estimand (the operational crossing of the true cell rates), and the
fine/adaptive ratio of episodes.

Each study is seeded from ``numpy.random.SeedSequence(seed, spawn_key=...)`` keyed by its
part, curve, design and index, so the figures are the same on every machine and for
every ``--jobs``. A report: it always exits 0.

    .venv/bin/python benchmarks/adaptive.py --jobs 2          # 60 studies per row (10 CPU-min, 5-15 min)
    .venv/bin/python benchmarks/adaptive.py --quick           # 6 studies per row (under a minute)
    .venv/bin/python benchmarks/adaptive.py --seeds 200 --scan-studies 1000 --jobs 2
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np
from common import log, print_table

from horizonbench.analysis.adaptive import AdaptiveSettings, information, relative_variance
from horizonbench.analysis.phase import wilson_interval
from horizonbench.analysis.sc_scan import BRACKETED, ScanResult, fine_scan, simulate_scan
from horizonbench.calibration.adaptive_cases import LENGTHS, covers, grid_crossing, logistic, run_design

L0S = (5.0, 20.0, 80.0)
A_TRUE = 0.95
SAMPLES = 5
TARGET = 0.05
MAX_CALLS = 400_000
MAX_WAVES = 40
#: the issue's goals: adaptive at most this share of the fixed design's calls / episodes
GOAL_L0 = 5.0
GOAL_SC = 3.0
#: (c, s) of the logistic curves of part B: near the low end, a near-step, moderate, smooth
SC_CURVES = ((9.5, 0.7), (14.3, 0.3), (17.6, 1.0), (23.2, 2.5))
SC_LO, SC_HI, SC_N = 6, 30, 50


def _rng(seed: int, key: Sequence[int]) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=tuple(key)))


def l0_study(L0: float, uniform: bool, seed: int, index: int) -> dict[str, Any]:
    """One study of part A, run in a worker (top level, so the pool can pickle it)."""
    rng = _rng(seed, (1, int(L0), int(uniform), index))
    settings = AdaptiveSettings(target=TARGET, max_calls=MAX_CALLS, max_waves=MAX_WAVES)
    trace = run_design(rng, A_TRUE * np.exp(-LENGTHS / L0), settings, uniform=uniform, samples=SAMPLES)
    est = trace.estimates[-1]
    return {
        "calls": trace.calls[-1],
        "reached": trace.stop == "target",
        "covered": bool(covers(est, L0)),
        "waves": len(trace.calls),
    }


def _scan_row(scan: ScanResult, centre: float, truth: float) -> dict[str, Any]:
    ok = scan.stop.reason == BRACKETED and math.isfinite(scan.low) and math.isfinite(scan.high)
    return {
        "episodes": scan.episodes,
        "cells": len(scan.cells),
        "bracketed": scan.stop.reason == BRACKETED,
        "covered": ok and scan.low <= centre <= scan.high,
        "covered_grid": ok and scan.low <= truth <= scan.high,
    }


def sc_study(centre: float, width: float, seed: int, index: int) -> dict[str, dict[str, Any]]:
    """One study of part B: the bisection and the fine scan on their own draws."""
    truth = grid_crossing(centre, width, SC_LO, SC_HI)

    def p(sc: int) -> float:
        return logistic(float(sc), centre, width)

    key = (2, int(round(centre * 100)), int(round(width * 100)), index)
    adaptive = simulate_scan(p, SC_LO, SC_HI, SC_N, _rng(seed, (*key, 0)))
    fine = fine_scan(p, SC_LO, SC_HI, SC_N, _rng(seed, (*key, 1)))
    return {"adaptive": _scan_row(adaptive, centre, truth), "fine": _scan_row(fine, centre, truth)}


def fisher_bound(L0: float) -> tuple[float, tuple[float, float, float]]:
    """Uniform bins' relative variance of L0 over the best two-point design's, at equal
    calls; and that design (its two depths and the share at the first). Two points
    suffice: for one parameter of a two-parameter model the c-optimal design has at most
    two support points (Elfving), so the grid search over pairs is the whole search."""
    k = 1.0 / L0
    info = information(LENGTHS, A_TRUE, k, True)
    a, b, c = info[:, 0, 0], info[:, 0, 1], info[:, 1, 1]
    w = np.linspace(0.01, 0.99, 99)
    i, j = np.triu_indices(LENGTHS.size, 1)
    aa = w * a[i, None] + (1 - w) * a[j, None]
    bb = w * b[i, None] + (1 - w) * b[j, None]
    cc = w * c[i, None] + (1 - w) * c[j, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        var = np.where(aa * cc - bb * bb > 0, aa / (aa * cc - bb * bb), np.inf)
    pair, wi = np.unravel_index(int(np.argmin(var)), var.shape)
    best = np.zeros(LENGTHS.size)
    best[i[pair]] += w[wi]
    best[j[pair]] += 1 - w[wi]
    uniform = np.full(LENGTHS.size, 1.0 / LENGTHS.size)
    ratio = relative_variance(LENGTHS, uniform, A_TRUE, k) / relative_variance(LENGTHS, best, A_TRUE, k)
    return ratio, (float(LENGTHS[i[pair]]), float(LENGTHS[j[pair]]), float(w[wi]))


def _run_all(fn: Callable[..., Any], tasks: list[tuple[Any, ...]], jobs: int, what: str) -> list[Any]:
    """Every task's result in the tasks' order, over a pool of ``jobs`` processes."""
    t0 = time.perf_counter()
    if jobs <= 1:
        out = []
        for n, t in enumerate(tasks, 1):
            out.append(fn(*t))
            if n % max(1, len(tasks) // 10) == 0:
                log(f"{what}: {n}/{len(tasks)} studies, {time.perf_counter() - t0:.0f} s")
        return out
    with ProcessPoolExecutor(jobs) as pool:
        futures = [pool.submit(fn, *t) for t in tasks]
        out = []
        for n, f in enumerate(futures, 1):
            out.append(f.result())
            if n % max(1, len(tasks) // 10) == 0:
                log(f"{what}: {n}/{len(tasks)} studies, {time.perf_counter() - t0:.0f} s")
    return out


def _coverage(hits: Sequence[bool]) -> tuple[float, float, float]:
    low, high = wilson_interval(sum(hits), len(hits))
    return sum(hits) / len(hits), low, high


def _quartiles(values: Sequence[float]) -> tuple[float, float, float]:
    q1, med, q3 = np.percentile(values, [25, 50, 75])
    return float(med), float(q1), float(q3)


def part_a(seeds: int, seed: int, jobs: int) -> None:
    """The L0 table and the goal's verdict per L0."""
    # the slowest rows first, so the pool is not left waiting on them at the end
    keys = [(L0, uniform) for uniform in (True, False) for L0 in L0S]
    tasks = [(L0, uniform, seed, i) for L0, uniform in keys for i in range(seeds)]
    results = _run_all(l0_study, tasks, jobs, "part A")
    by = {key: results[n * seeds : (n + 1) * seeds] for n, key in enumerate(keys)}
    lines, verdicts, bounds = [], [], []
    for L0 in L0S:
        bound, (d1, d2, share) = fisher_bound(L0)
        bounds.append(
            f"  L0 = {L0:g}: best two-point design {share:.0%} of calls at L = {d1:g}, the rest at "
            f"L = {d2:g}; uniform bins need {bound:.2f}x its calls for the same variance"
        )
        med, spread, cov = {}, {}, {}
        for uniform in (False, True):
            rows = by[(L0, uniform)]
            med[uniform], *spread[uniform] = _quartiles([r["calls"] for r in rows])
            cov[uniform] = _coverage([r["covered"] for r in rows])
        ratio = med[True] / med[False]
        for uniform in (False, True):
            rows = by[(L0, uniform)]
            rate, low, high = cov[uniform]
            lines.append(
                (
                    f"{L0:g}",
                    "uniform" if uniform else "adaptive",
                    f"{med[uniform]:,.0f}",
                    "{:,.0f}-{:,.0f}".format(*spread[uniform]),
                    f"{np.mean([r['reached'] for r in rows]):.2f}",
                    f"{rate:.3f}",
                    f"{low:.3f}-{high:.3f}",
                    f"{statistics.median(r['waves'] for r in rows):g}",
                    "-" if uniform else f"{ratio:.2f}",
                    "-" if uniform else f"{bound:.2f}",
                )
            )
        same = cov[False][2] >= cov[True][0]
        holds = ratio >= GOAL_L0 and same
        why = (
            f"uniform/adaptive {ratio:.2f}x (goal {GOAL_L0:g}x, Fisher bound {bound:.2f}x), "
            f"coverage {cov[False][0]:.3f} vs uniform {cov[True][0]:.3f}"
        )
        if ratio < GOAL_L0:
            why += (
                "; out of reach on this grid: even the optimal design saves less"
                if bound < GOAL_L0
                else "; short of the goal, though the bound allows it"
            )
        if not same:
            why += "; adaptive coverage is below uniform's"
        verdicts.append(f"  L0 = {L0:g}: {'HOLDS' if holds else 'NOT MET'} ({why})")
    print()
    print(
        f"Part A: calls to a {TARGET:.0%} relative half-width of L0 (success {A_TRUE} exp(-L/L0), "
        f"L {LENGTHS[0]}..{LENGTHS[-1]}, {SAMPLES} samples, cap {MAX_CALLS:,} calls / {MAX_WAVES} waves, "
        f"{seeds} studies per row)"
    )
    head = (
        "L0",
        "design",
        "median calls",
        "25-75%",
        "reached",
        "coverage",
        "Wilson 95%",
        "waves",
        "uniform/adaptive",
        "Fisher bound",
    )
    print_table(head, lines, left=(0, 1))
    print("\nFisher bound (asymptotic, no noise): uniform bins against the best two-point design")
    print("\n".join(bounds))
    print(
        f"\nGoal 'adaptive needs <= 1/{GOAL_L0:g} of uniform's calls at the same coverage' "
        "(same: adaptive's Wilson upper end reaches uniform's coverage):"
    )
    print("\n".join(verdicts))


def part_b(studies: int, seed: int, jobs: int) -> None:
    """The sc* table and the goal's verdict per curve."""
    tasks = [(c, s, seed, i) for c, s in SC_CURVES for i in range(studies)]
    results = _run_all(sc_study, tasks, jobs, "part B")
    lines, verdicts = [], []
    for n, (c, s) in enumerate(SC_CURVES):
        rows = results[n * studies : (n + 1) * studies]
        med = {d: statistics.median(r[d]["episodes"] for r in rows) for d in ("adaptive", "fine")}
        ratio = med["fine"] / med["adaptive"]
        truth = grid_crossing(c, s, SC_LO, SC_HI)
        cov = {}
        for design in ("adaptive", "fine"):
            mine = [r[design] for r in rows]
            cov[design] = _coverage([r["covered"] for r in mine])
            grid = _coverage([r["covered_grid"] for r in mine])
            lines.append(
                (
                    f"{c:g}",
                    f"{s:g}",
                    f"{truth:.3f}",
                    design,
                    f"{med[design]:,.0f}",
                    f"{statistics.median(r['cells'] for r in mine):g}",
                    f"{np.mean([r['bracketed'] for r in mine]):.2f}",
                    f"{cov[design][0]:.3f} ({cov[design][1]:.3f}-{cov[design][2]:.3f})",
                    f"{grid[0]:.3f} ({grid[1]:.3f}-{grid[2]:.3f})",
                    f"{ratio:.2f}" if design == "adaptive" else "-",
                )
            )
        same = cov["adaptive"][2] >= cov["fine"][0]
        holds = ratio >= GOAL_SC and same
        why = (
            f"fine/adaptive {ratio:.2f}x, goal {GOAL_SC:g}x; "
            f"coverage of c {cov['adaptive'][0]:.3f} vs fine {cov['fine'][0]:.3f}"
        )
        if ratio < GOAL_SC:
            why += "; too many episodes"
        if not same:
            why += "; adaptive coverage is below the fine scan's"
        verdicts.append(f"  c = {c:g}, s = {s:g}: {'HOLDS' if holds else 'NOT MET'} ({why})")
    print()
    print(
        f"Part B: episodes to a 1-unit sc* bracket (logistic 1/(1+exp((sc-c)/s)), sc {SC_LO}..{SC_HI}, "
        f"{SC_N} episodes per cell, {studies} studies per curve; coverage of the bootstrap 95% interval)"
    )
    head = (
        "c",
        "s",
        "grid crossing",
        "design",
        "median episodes",
        "cells",
        "bracketed",
        "covers c (Wilson 95%)",
        "covers grid crossing",
        "fine/adaptive",
    )
    print_table(head, lines, left=(3,))
    print(
        f"\nGoal 'adaptive needs <= 1/{GOAL_SC:g} of the fine scan's episodes at the same coverage' "
        "(same: adaptive's Wilson upper end reaches the fine scan's coverage):"
    )
    print("\n".join(verdicts))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="6 L0 studies per row, 40 scans per curve")
    parser.add_argument("--seeds", type=int, default=None, help="L0 studies per row (60; --quick 6)")
    parser.add_argument(
        "--scan-studies", type=int, default=None, help="sc* scans per curve and design (400; --quick 40)"
    )
    parser.add_argument("--seed", type=int, default=0, help="root seed (0)")
    parser.add_argument("--jobs", type=int, default=1, help="studies run in parallel processes (1)")
    parser.add_argument("--part", choices=("A", "B", "both"), default="both", help="which part to run")
    args = parser.parse_args(argv)
    seeds = args.seeds if args.seeds is not None else (6 if args.quick else 60)
    scans = args.scan_studies if args.scan_studies is not None else (40 if args.quick else 400)
    wall = time.perf_counter()
    if args.part in ("A", "both"):
        log(f"part A: {seeds} studies x {len(L0S)} L0 x 2 designs, {args.jobs} job(s)")
        part_a(seeds, args.seed, args.jobs)
    if args.part in ("B", "both"):
        log(f"part B: {scans} scans x {len(SC_CURVES)} curves x 2 designs, {args.jobs} job(s)")
        part_b(scans, args.seed, args.jobs)
    print(f"\nwall {time.perf_counter() - wall:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
