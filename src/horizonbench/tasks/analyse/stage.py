"""Analyse stage as Prefect runs it: ``analyse`` (fits, cells and tests of the scores) and
``world-analysis`` (the world study's phase diagrams). Each writes its tables through the
plain functions beside it and logs the headline numbers."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from prefect import get_run_logger, task
from prefect.cache_policies import NONE

from horizonbench.schemas.config import Config
from horizonbench.tasks.analyse.adaptive import plan_sc_scan, plan_wave
from horizonbench.tasks.analyse.horizons import write_horizons
from horizonbench.tasks.analyse.scores import write_analysis
from horizonbench.tasks.analyse.worlds import write_world_analysis


@task(name="analyse", cache_policy=NONE)
def analyse(cfg: Config, run: str) -> dict[str, str]:
    logger = get_run_logger()
    paths, fits = write_analysis(cfg, Path(run))
    for r in fits.itertuples():
        ci = "" if pd.isna(r.L0_low) else f" (interval {r.L0_low:.1f} to {r.L0_high:.1f})"
        logger.info("%s/%s %s: L0 = %.1f%s", r.family, r.model, r.method, r.L0, ci)
    return paths


@task(name="world-analysis", cache_policy=NONE)
def analyse_worlds(cfg: Config, run: str) -> dict[str, str]:
    """The world analysis tables (``analyse/worlds.py``), then their critical points and
    harness rates in the log."""
    logger = get_run_logger()
    paths, tables = write_world_analysis(cfg, Path(run))
    for r in tables["critical_points"].itertuples():
        ci = "" if pd.isna(r.sc_star_low) else f" (bootstrap {r.sc_star_low:g} to {r.sc_star_high:g})"
        value = f"{r.sc_star:.2f}" if pd.notna(r.sc_star) else f"not bracketed: {r.reason}"
        logger.info("%s/%s dd=%d: sc* = %s%s", r.env, r.model, r.dd, value, ci)
    for r in tables["harness"].itertuples():
        rate = f"{r.p:.1%}" if pd.notna(r.p) else "no episode measured"
        logger.info(
            "%s/%s (%s memory): success %s over %d measured episodes; %d budget_exceeded and "
            "%d format_failure (counted as failures); %d repairs, %d fallbacks in %d calls",
            r.env,
            r.model,
            r.memory,
            rate,
            r.measured,
            r.budget_exceeded,
            r.format_failures,
            r.repairs,
            r.fallbacks,
            r.calls,
        )
    return paths


@task(name="plan-wave", cache_policy=NONE)
def plan_next_wave(cfg: Config, run: str, wave: int) -> dict[str, object]:
    """Wave ``wave`` of an adaptive study (``analyse/adaptive.py``), chosen from the
    analysis of the waves before it; logs each (label, model) as its waves stop."""
    logger = get_run_logger()
    out = plan_wave(cfg, Path(run), wave)
    stopped = out["stopped"] or "none"
    logger.info("wave %d: %d (family label, model) pairs go on; stopped: %s", wave, out["going"], stopped)
    return out


@task(name="horizon-card", cache_policy=NONE)
def horizon_card(cfg: Config, run: str) -> str:
    """The run's horizon card (``analysis/horizons.parquet``), logged a line per row."""
    logger = get_run_logger()
    dest, card = write_horizons(cfg, Path(run))
    for r in card.itertuples():
        ci = "" if pd.isna(r.low) or pd.isna(r.high) else f" ({r.low:.3g} to {r.high:.3g})"
        value = "none" if pd.isna(r.value) else f"{r.value:.3g}"
        logger.info(
            "horizon card: %s %s %s = %s%s, %d attempts", r.model, r.family, r.metric, value, ci, r.n_attempts
        )
    return str(dest)


@task(name="plan-sc-scan", cache_policy=NONE)
def plan_sc_cells(cfg: Config, run: str, cells: dict[str, list[int]]) -> dict[str, object]:
    """The sc cells each agent of a world study adds next (``analyse/adaptive.plan_sc_scan``)."""
    out = plan_sc_scan(cfg, Path(run), cells)
    played = {agent: len(c) for agent, c in cells.items()}
    get_run_logger().info(
        "sc scan: cells played %s, next %s; done: %s", played, out["cells"], out["stopped"] or "none"
    )
    return out
