"""The report's run information and count lines, from the config, the provenance and
the counts of a run: the same for the pipeline (``flows/pipeline.py``) and for a
rebuild from the manifest (``tasks/report/compare.py``), so a rebuilt report says what
the run's own report said. Pure: no Prefect, no files."""

from __future__ import annotations

import math
from typing import Any

from horizonbench.schemas.config import Config
from horizonbench.tasks.run_folder.spend import spend_lines


def report_run_info(cfg: Config, provenance: dict[str, Any]) -> dict[str, Any]:
    """The report's run information block (also rebuilt by ``horizonbench report``)."""
    info: dict[str, Any] = {
        "run": cfg.run.name,
        "seed": cfg.run.seed,
        "git_sha": provenance.get("git_sha"),
        "families": ", ".join(cfg.families) or "none",
        "models": ", ".join(m.name for m in cfg.evaluation.models) or "none",
        "samples per instance": cfg.evaluation.samples,
        "true L0 of noisy baselines": ", ".join(
            f"{m.name}: {1 / -math.log1p(-m.eps):.1f}"
            for m in cfg.evaluation.models
            if m.kind == "noisy" and m.eps
        )
        or "none",
        "versions": provenance.get("versions") or {},
    }
    if cfg.worlds is not None:
        info["world agents"] = ", ".join(a.name for a in cfg.worlds.agents)
        info["world environments"] = ", ".join(cfg.worlds.environments)
    # the whole config as run (sweeps expanded); names of key variables, never keys
    info["config"] = cfg.model_dump(mode="json", exclude_defaults=True)
    return info


def report_counts(counts: dict[str, Any]) -> dict[str, Any]:
    """The report's count lines (spend, world episodes, generation, attempts per model)
    from the counts the pipeline gathered, or that a rebuild reads from the manifest."""
    out: dict[str, Any] = {}
    if counts.get("budget"):
        out.update(spend_lines(counts["budget"]))
    w = counts.get("worlds")
    if w:
        out["world episodes"] = (
            f"{w['episodes']} ({len(w['agents'])} agents x {w['worlds']} worlds), {w['steps']} steps"
        )
        out["world episodes won"] = w["successes"]
        out["world episodes with T < L* (left out of rates)"] = w["horizon_short"] or "none"
        for name, c in w.get("models", {}).items():
            out[f"{name}: world episodes"] = (
                f"{c['finished']} of {c['episodes']} finished, {c['successes']} won, "
                f"{c['budget_exceeded']} budget_exceeded"
            )
            out[f"{name}: harness calls"] = (
                f"{c['calls']} ({c['reused']} reused), {c['repairs']} repairs, {c['fallbacks']} fallbacks"
                + (
                    f" ({', '.join(f'{k} {v}' for k, v in c['fallbacks_by_role'].items())})"
                    if c["fallbacks"]
                    else ""
                )
            )
            out[f"{name}: tokens in / out"] = f"{c['input_tokens']} / {c['output_tokens']}"
            out[f"{name}: cost (USD)"] = f"{c['cost_usd']:.4f} (this run {c['cost_usd_this_run']:.4f})"
            if c["unfinished"]:
                out[f"{name}: unfinished episodes (resumed by the next run)"] = c["unfinished"]
            if c["stopped"]:
                out[f"{name}: stopped"] = c["stopped"]
    for g in counts.get("generation", []):
        fam = g["family"]
        out[f"{fam}: instances"] = g["kept"]
        out[f"{fam}: candidates generated"] = g["candidates_considered"]
        out[f"{fam}: candidates certified"] = g["candidates_certified"]
        out[f"{fam}: rejected"] = g["rejections"] or "none"
        out[f"{fam}: bins short of quota"] = g["unfilled_bins"] or "none"
        if g.get("quota_slots_dropped"):  # Algorithm 6's "up to M" (Blocks World dedup: after)
            out[f"{fam}: quota slots to dropped trivial or repeated candidates"] = g["quota_slots_dropped"]
        overlap = g.get("step_overlap")
        if overlap:  # puzzles: what the export's validation steps share with training
            v = overlap["validation"]
            out[f"{fam}: validation steps repeating a training step ({overlap['split_rule']} split)"] = (
                f"{v['in_train']} of {v['steps']} ({100 * v['share']:.1f}%)"
            )
    for model, c in counts.get("attempts", {}).get("models", {}).items():
        out[f"{model}: attempts"] = f"{c['attempts']} ({c['answered']} answered, {c['reused']} reused)"
        failed = ", ".join(f"{k} {v}" for k, v in c["failed_by_class"].items())
        out[f"{model}: attempts without an answer"] = f"{c['failed']} ({failed})" if c["failed"] else "none"
        out[f"{model}: tokens in / out"] = f"{c['input_tokens']} / {c['output_tokens']}"
        price = c["price"]
        out[f"{model}: cost (USD)"] = (
            f"{c['cost_usd']:.4f} (this run {c['cost_usd_this_run']:.4f}; price {price['source']})"
        )
        if c["served_models"]:
            out[f"{model}: served by"] = ", ".join(c["served_models"])
        if c["stopped"]:
            out[f"{model}: stopped"] = c["stopped"]
    return out
