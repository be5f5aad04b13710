"""A config at a fraction of its scale, for a smoke run (``--scale F`` on the command line).

Why: a shipped config that cannot finish (a quota its family cannot fill, a stage that
crashes on one family or model) must be caught in CI, where the full config takes hours
and API money. A scaled config keeps everything that decides which code runs (every
family label, sweep setting, mode, model, environment, agent, regime, harness limit,
budget and Dask setting) and shrinks only how much of it there is:

* ``sampling.count``: ``ceil(F x count)``;
* ``sampling.bins``: at most ``ceil(F x bins)`` bins over the same [min, max) range,
  each the union of neighbouring bins, keeping ``ceil(F x the quotas it merges)``: no
  more than the bins it replaces, so a config that can fill its bins fills these;
* ``sampling.all``: the first ``ceil(F x candidates)`` certified instances (a count), so
  the smallest sizes of an enumerated puzzle;
* ``sampling.shard_size``: left to its default, which sizes shards to the work;
* ``sampling.adaptive``: ``ceil(F x first_wave)`` (at least 2) and ``ceil(F x max_calls)``
  calls, and ``ceil(F x max_waves)`` waves but at least 2, so the second wave (the one the
  analysis chooses) still runs;
* ``evaluation.samples``: ``ceil(F x samples)``; ``analysis.bootstrap``: ``ceil(F x B)``
  but at least 10 (or B when B is smaller);
* ``training``: each architecture at most 2 layers of width 32 (the same code builds
  and trains it), ``ceil(F x 2,000)`` optimiser steps at most (at least 4); the puzzles
  it trains on keep at least 12 instances (or all they have), so every split has some;
* ``worlds``: ``ceil(F x archetypes)`` and ``ceil(F x variants)`` worlds per cell, and
  of the ``sc`` and ``dd`` values ``ceil(F x count)`` (at least two when there were
  two or more, so a cliff can still be tested), evenly spread from the first to the last.

Every count is at least 1. F = 1 returns the config unchanged. The scaled config is
what the run records in its manifest, so a smoke run's folder says what it ran.

Merged bins fill where narrow ones might not, so a smoke run alone would pass a config
whose full run ends short (a puzzle size asked for more puzzles than it has). The full
config's requests are therefore checked first (``check_requests``: what a family can
prove impossible is refused, one line, exit 2), and the smoke run fails with it.
"""

from __future__ import annotations

import math
from typing import Any

from horizonbench.core.errors import ConfigError
from horizonbench.schemas.config import Config, check_requests, parse_config

#: the fewest bootstrap replicates a scaled analysis keeps (unless the config asked fewer)
MIN_BOOTSTRAP = 10
#: the fewest instances a puzzle that a training section trains on keeps (each split needs some)
MIN_TRAINED_INSTANCES = 12
#: a scaled training section's largest architecture, and its optimiser steps
SMOKE_ARCHITECTURE = {"layers": 2, "width": 32}
MAX_STEPS_AT_FULL_SCALE = 2000
MIN_SMOKE_STEPS = 4


def _part(factor: float, value: int) -> int:
    """``ceil(factor x value)``, at least 1 (rounding guarded: 0.1 x 30 is 3, not 4)."""
    return max(1, math.ceil(round(factor * value, 9)))


def scaled_bins(bins: dict[str, Any], factor: float, floor: int = 1) -> dict[str, Any]:
    """Fewer, wider bins over the same range, each with ``ceil(F x the quotas it merges)``
    (at least ``floor``, but never more than the quotas it merges).

    ``bins`` is a ``BinSpec`` as plain data (JSON keys of ``quotas`` may be strings)."""
    lo, hi, width, per_bin = bins["min"], bins["max"], bins.get("width", 1), bins["per_bin"]
    quotas = {int(k): v for k, v in (bins.get("quotas") or {}).items()}
    edges = list(range(lo, hi, width))
    # whole groups of neighbouring bins, so every new bin is a union of old ones
    group = math.ceil(len(edges) / _part(factor, len(edges)))
    totals = {
        edges[i]: sum(quotas.get(old, per_bin) for old in edges[i : i + group])
        for i in range(0, len(edges), group)
    }
    merged = {e: max(_part(factor, total), min(floor, total)) for e, total in totals.items()}
    new_width = width * group
    common = max(merged.values())
    out = {**bins, "width": new_width, "per_bin": common}
    out["quotas"] = {e: q for e, q in merged.items() if q != common}
    if not out["quotas"]:
        out.pop("quotas")
    return out


def _spread(values: list[Any], factor: float) -> list[Any]:
    """``ceil(F x len)`` of the values (at least two of two or more), evenly spread from
    the first to the last."""
    n = len(values)
    keep = min(n, max(min(2, n), _part(factor, n)))
    if keep == n:
        return list(values)
    if keep == 1:
        return [values[0]]
    return [values[round(i * (n - 1) / (keep - 1))] for i in range(keep)]


def _scaled_sampling(label: str, family: dict[str, Any], factor: float, floor: int = 1) -> dict[str, Any]:
    from horizonbench.core.registry import get_family

    sampling = dict(family["sampling"])
    if sampling.get("count") is not None:
        sampling["count"] = max(_part(factor, sampling["count"]), min(floor, sampling["count"]))
    elif sampling.get("bins") is not None:
        sampling["bins"] = scaled_bins(sampling["bins"], factor, floor)
    elif sampling.get("all"):
        fam = get_family(label)
        counter = getattr(fam, "candidate_count", None)
        if counter is not None:
            total = counter(fam.params_model.model_validate(family.get("params") or {}))
            sampling["all"] = False
            sampling["count"] = max(_part(factor, total), min(floor, total))
    # a few instances need no big shard: the default sizes shards to the work
    sampling.pop("shard_size", None)
    if sampling.get("adaptive"):
        adaptive = dict(sampling["adaptive"])
        adaptive["first_wave"] = max(2, _part(factor, adaptive.get("first_wave", 24)))
        if adaptive.get("max_calls") is not None:
            adaptive["max_calls"] = _part(factor, adaptive["max_calls"])
        adaptive["max_waves"] = max(2, _part(factor, adaptive.get("max_waves", 12)))
        sampling["adaptive"] = adaptive
    return sampling


def _scaled_training(training: dict[str, Any], factor: float) -> dict[str, Any]:
    """Small models for a few steps: the same architectures' code, conditions and
    checkpoints (a hub name stays a hub name), at most ``SMOKE_ARCHITECTURE``'s sizes and
    ``ceil(F x MAX_STEPS_AT_FULL_SCALE)`` optimiser steps."""
    for arch in training["architectures"].values():
        for key, most in SMOKE_ARCHITECTURE.items():
            arch[key] = min(arch[key], most)
        while arch["width"] % arch["heads"]:
            arch["heads"] -= 1
        arch["ff_width"] = None
    optimizer = training["optimizer"]
    steps = max(MIN_SMOKE_STEPS, _part(factor, MAX_STEPS_AT_FULL_SCALE))
    optimizer["max_steps"] = min(optimizer.get("max_steps") or steps, steps)
    optimizer["eval_every"] = min(
        optimizer.get("eval_every") or optimizer["max_steps"], optimizer["max_steps"]
    )
    return training


def scale_config(
    cfg: Config, factor: float, source: str = "--scale", config_source: str = "config"
) -> Config:
    """``cfg`` at ``factor`` (0 < factor <= 1) of its scale: see the module docstring.

    Raises ConfigError (one line) for a factor outside (0, 1] (naming ``source``), and
    for a config whose full-scale requests a family can prove impossible (naming
    ``config_source``, the config file)."""
    if not 0 < factor <= 1:
        raise ConfigError(f"{source}: {factor} is not a fraction of the config's scale (0 < F <= 1)")
    if factor == 1:
        return cfg
    check_requests(cfg, config_source)
    raw = cfg.model_dump(mode="json")
    from horizonbench.schemas.config import training_puzzles

    trained = set(training_puzzles(cfg)) if cfg.training is not None else set()
    for label, family in raw["families"].items():
        floor = MIN_TRAINED_INSTANCES if label in trained else 1
        family["sampling"] = _scaled_sampling(label, family, factor, floor)
    if raw.get("training") is not None:
        raw["training"] = _scaled_training(raw["training"], factor)
    evaluation = raw["evaluation"]
    evaluation["samples"] = _part(factor, evaluation["samples"])
    analysis = raw["analysis"]
    bootstrap = analysis["bootstrap"]
    analysis["bootstrap"] = min(bootstrap, max(MIN_BOOTSTRAP, _part(factor, bootstrap)))
    worlds = raw.get("worlds")
    if worlds is not None:
        worlds["archetypes"] = _part(factor, worlds["archetypes"])
        worlds["variants"] = _part(factor, worlds["variants"])
        for axis in ("sc", "dd"):
            if worlds.get(axis):
                worlds[axis] = _spread(worlds[axis], factor)
    return parse_config(raw, source=source)


__all__ = ["MIN_BOOTSTRAP", "scale_config", "scaled_bins"]
