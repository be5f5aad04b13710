"""Plan the next wave of an adaptive study: read what the analysis says of every
(family label, model) so far, choose each one's next instances (``analysis/adaptive``),
and write them to the design (``adaptive/design.parquet``) and the waves' trace
(``analysis/adaptive.parquet``), from which the next generate and evaluate stages work.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from horizonbench.analysis.adaptive import AdaptiveSettings, Estimate, Wave, first_wave, next_wave
from horizonbench.core.registry import get_family
from horizonbench.schemas.config import AdaptiveSpec, BinSpec, Config
from horizonbench.schemas.horizons import WAVES_SCHEMA
from horizonbench.tasks.analyse.scores import to_table
from horizonbench.tasks.run_folder.design import (
    adaptive_labels,
    bin_of,
    quotas,
    read_design,
    write_design,
)
from horizonbench.tasks.run_folder.layout import SCORES_REL, WAVES_REL, WORLD_ANALYSIS_PREFIX, instances_rel
from horizonbench.tasks.run_folder.storage import write_table
from horizonbench.tasks.run_folder.table_parts import read_parts

FITS_REL = "analysis/fits.parquet"
#: waves in a row without a finite estimate after which a (label, model) stops: a model
#: that never fails (or never succeeds) over the whole range has no L0 to pin
UNIDENTIFIED_AFTER = 3


def settings_of(spec: AdaptiveSpec) -> AdaptiveSettings:
    return AdaptiveSettings(
        target=spec.target,
        max_calls=spec.max_calls,
        first_wave=spec.first_wave,
        max_waves=spec.max_waves,
        explore=spec.explore,
    )


def read_waves(run: Path) -> pd.DataFrame:
    path = run / WAVES_REL
    if not path.exists():
        return pd.DataFrame(columns=WAVES_SCHEMA.names)
    return pq.read_table(path, schema=WAVES_SCHEMA).to_pandas()


def _available(cfg: Config, run: Path, label: str, bins: BinSpec) -> dict[int, int]:
    """Instances the label's table holds per bin (what the last generation found)."""
    folder = run / instances_rel(label)
    out = {lo: 0 for lo in bins.edges()}
    if not folder.exists():
        return out
    family = get_family(label)
    for row in read_parts(folder).to_pylist():
        lo = bin_of(bins, int(family.difficulty(row)))
        if lo is not None:
            out[lo] += 1
    return out


def _estimates(run: Path, label: str) -> dict[str, Estimate]:
    """The binomial MLE's L0 and cluster-bootstrap interval per model, and the success
    rate (which aims a wave when no L0 could be fitted)."""
    out: dict[str, Estimate] = {}
    fits_path, scores_path = run / FITS_REL, run / SCORES_REL
    if not fits_path.exists() or not scores_path.exists():
        return out
    fits = pq.read_table(fits_path).to_pandas()
    fits = fits[(fits["family"] == label) & (fits["method"] == "binomial_mle")]
    rates = _answered(run, label, ["success"]).groupby("model")["success"].mean()
    for r in fits.itertuples():

        def num(v: Any) -> float | None:
            return None if v is None or pd.isna(v) else float(v)

        out[str(r.model)] = Estimate(
            "L0",
            float(r.L0) if pd.notna(r.L0) else math.nan,
            num(r.L0_low),
            num(r.L0_high),
            float(r.A) if pd.notna(r.A) else 1.0,
            float(rates.get(r.model, math.nan)),
        )
    return out


def _calls(run: Path, label: str) -> dict[str, int]:
    if not (run / SCORES_REL).exists():
        return {}
    return {str(k): int(v) for k, v in _answered(run, label, []).groupby("model").size().items()}


def _answered(run: Path, label: str, extra: list[str]) -> pd.DataFrame:
    """The label's answered whole-plan attempts (the ones its fits count)."""
    scores = pq.read_table(
        run / SCORES_REL, columns=["family", "mode", "model", "answered", *extra]
    ).to_pandas()
    keep = (scores["family"] == label) & (scores["mode"] == "plan") & scores["answered"].astype(bool)
    return scores[keep]


def plan_wave(cfg: Config, run: Path, wave: int) -> dict[str, Any]:
    """Choose wave ``wave`` (1 = the first, spread over the range) for every adaptive
    label and model still going; write the design and the trace. Returns how many
    (label, model) pairs go on and each stopped pair's reason."""
    design = read_design(run)
    if wave == 1:
        design = design.iloc[0:0]
    asked = quotas(design)
    trace = read_waves(run) if wave > 1 else pd.DataFrame(columns=WAVES_SCHEMA.names)
    new_rows: list[dict[str, Any]] = []
    trace_rows: list[dict[str, Any]] = []
    going = 0
    stopped: dict[str, str] = {}
    samples = cfg.evaluation.samples
    for label in adaptive_labels(cfg):
        spec = cfg.families[label]
        bins, adaptive = spec.sampling.bins, spec.sampling.adaptive
        assert bins is not None and adaptive is not None
        settings = settings_of(adaptive)
        edges = bins.edges()
        centres = np.array([lo + (min(lo + bins.width, bins.max) - 1 - lo) / 2.0 for lo in edges])
        available = _available(cfg, run, label, bins) if wave > 1 else {}
        estimates = _estimates(run, label) if wave > 1 else {}
        calls = _calls(run, label) if wave > 1 else {}
        for model in (m.name for m in cfg.evaluation.models):
            mine = trace[(trace["family"] == label) & (trace["model"] == model)]
            if len(mine) and mine["stop"].notna().any():
                stopped[f"{label}/{model}"] = str(mine["stop"].dropna().iloc[-1])
                continue
            q = asked.get((label, model), {})
            qa = np.array([q.get(lo, 0) for lo in edges])
            if wave == 1:
                plan = first_wave(np.full(len(edges), bins.per_bin), settings)
            else:
                have = np.array([available.get(lo, 0) for lo in edges])
                held = np.minimum(qa, have)
                # a bin that came up short of what was asked has no more to give
                room = np.where(have < qa, 0, bins.per_bin - qa)
                est = estimates.get(model, Estimate("L0", math.nan, None, None))
                plan = next_wave(centres, held, room, est, samples, calls.get(model, 0), wave - 1, settings)
                finite = [
                    *(pd.notna(v) and math.isfinite(v) for v in mine["value"]),
                    math.isfinite(est.value),
                ]
                lost = len(finite) >= UNIDENTIFIED_AFTER and not any(finite[-UNIDENTIFIED_AFTER:])
                if plan.stop is None and lost:
                    plan = Wave(np.zeros_like(held), "unidentified")
                hw = est.half_width
                trace_rows.append(
                    {
                        "family": label,
                        "model": model,
                        "metric": est.metric,
                        "wave": wave - 1,
                        "calls": calls.get(model, 0),
                        "instances": int(held.sum()),
                        "value": None if math.isnan(est.value) else est.value,
                        "low": est.low,
                        "high": est.high,
                        "half_width": hw if math.isfinite(hw) else None,
                        "target": settings.target,
                        "stop": plan.stop,
                    }
                )
            if plan.stop is not None:
                stopped[f"{label}/{model}"] = plan.stop
                continue
            going += 1
            for lo, n in zip(edges, plan.new, strict=True):
                if n:
                    new_rows.append({"family": label, "model": model, "wave": wave, "bin": lo, "new": int(n)})
    write_design(run, [*design.to_dict("records"), *new_rows])
    frame = pd.concat([trace, pd.DataFrame(trace_rows, columns=WAVES_SCHEMA.names)], ignore_index=True)
    write_table(to_table(frame, WAVES_SCHEMA), run / WAVES_REL, "analysis/adaptive")
    return {"going": going, "stopped": stopped}


def plan_sc_scan(cfg: Config, run: Path, cells: dict[str, list[int]]) -> dict[str, Any]:
    """The sc cells each agent adds in the next wave of a world study's scan
    (``worlds.sc_scan``), read from the world grid the analysis wrote for the cells run so
    far: for every environment and dd, the ends of the range first, then the midpoint of
    the agent's bracket (``analysis/sc_scan.next_cells``); an agent's new cells are the
    union over its environments and dd. Returns them per agent and, per (environment, dd,
    agent) that needs none, why (bracketed, starts below, never crosses)."""
    from horizonbench.analysis.sc_scan import Stop, next_cells
    from horizonbench.schemas.worlds import REGIMES

    worlds = cfg.worlds
    assert worlds is not None and worlds.sc_scan is not None
    scan = worlds.sc_scan
    path = run / f"{WORLD_ANALYSIS_PREFIX}grid.parquet"
    played = any(cells.values())
    grid = pq.read_table(path).to_pandas() if played and path.exists() else pd.DataFrame()
    need: dict[str, list[int]] = {}
    stopped: dict[str, str] = {}
    for agent in (a.name for a in worlds.agents):
        wanted: set[int] = set()
        for env in worlds.environments:
            for dd in worlds.dd or [REGIMES[worlds.regime].dd]:
                tested: dict[int, tuple[int, int]] = {}
                if len(grid):
                    mine = grid[(grid["env"] == env) & (grid["dd"] == dd) & (grid["model"] == agent)]
                    tested = {int(r.sc): (int(r.successes), int(r.n)) for r in mine.itertuples()}
                step = next_cells(tested, scan.min, scan.max, scan.target_width)
                if isinstance(step, Stop):
                    bracket = f" {step.bracket[0]}-{step.bracket[1]}" if step.bracket else ""
                    stopped[f"{env} dd={dd}/{agent}"] = f"{step.reason}{bracket}"
                else:
                    wanted.update(step)
        need[agent] = sorted(wanted - set(cells.get(agent, [])))
    return {"cells": need, "stopped": stopped}
