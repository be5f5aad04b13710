"""The horizonbench pipeline: generate -> validate -> evaluate -> score -> validate ->
analyse -> report, each stage a Prefect task, the run folder the only shared state."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger
from prefect.exceptions import TerminationSignal
from prefect.states import Failed

from horizonbench.core.registry import get_family
from horizonbench.flows.repair import repair
from horizonbench.schemas.config import Config, check_requests, load_config, parse_config, today_utc
from horizonbench.schemas.expectations import episodes_suite, scores_suite, steps_suite, suite_for_family
from horizonbench.schemas.tables import ATTEMPTS_SCHEMA
from horizonbench.tasks.analyse.stage import (
    analyse,
    analyse_worlds,
    horizon_card,
    plan_next_wave,
    plan_sc_cells,
)
from horizonbench.tasks.evaluate.attempts import evaluate_models
from horizonbench.tasks.evaluate.world_episodes import run_world_episodes, write_world_tables
from horizonbench.tasks.evaluate.world_models import (
    WORLD_ATTEMPTS_REL,
    model_agents,
    rerun_hint,
    run_world_models,
    unfinished_summary,
)
from horizonbench.tasks.generate.stage import generate_instances
from horizonbench.tasks.report.page import REPORT_REL
from horizonbench.tasks.report.run_info import report_counts, report_run_info
from horizonbench.tasks.report.stage import build_report
from horizonbench.tasks.run_folder import state as run_folder
from horizonbench.tasks.run_folder.design import adaptive_labels, quotas, read_design, wave_config
from horizonbench.tasks.run_folder.layout import EPISODES_REL, SCORES_REL, STEPS_REL, instances_rel
from horizonbench.tasks.run_folder.manifest import MANIFEST, git_sha, versions, write_manifest
from horizonbench.tasks.run_folder.spend import budget_counts, budget_problem
from horizonbench.tasks.run_folder.storage import STAGING, promote, rows_to_table, staged, write_table
from horizonbench.tasks.score.stage import score_attempts
from horizonbench.tasks.validate.stage import validate_table


def _resolve(config: dict[str, Any] | Config | str, out: str) -> tuple[Config, Path]:
    """Accept a Config, raw config data, or a config file path (what deployments pass).

    ``{date}`` in ``out`` becomes today's UTC date, so a nightly deployment writes one
    folder per night.
    """
    if isinstance(config, Config):
        cfg = config
    elif isinstance(config, str):
        cfg = load_config(config)
    else:
        cfg = parse_config(config)
    check_requests(cfg)
    return cfg, Path(out.replace("{date}", today_utc().isoformat()))


def flow_run_name() -> str:
    """``<run name>-<UTC date>-<HHMM>``: what ran and when, instead of Prefect's random
    adjective-animal, so the UI's list of runs reads like the run folders."""
    from prefect.runtime import flow_run

    config = flow_run.parameters.get("config")
    name = "run"
    try:
        if isinstance(config, Config):
            name = config.run.name
        elif isinstance(config, dict):
            name = str((config.get("run") or {}).get("name") or "run")
        elif isinstance(config, str):
            name = load_config(config).run.name
    except Exception:  # noqa: BLE001 - the flow itself reports a bad config
        pass
    return f"{name}-{time.strftime('%Y-%m-%d-%H%M', time.gmtime())}"


def run_tags(cfg: Config) -> list[str]:
    """Tags a flow run gets: its run name, families and models (filterable in the UI)."""
    families = sorted({label.split("@")[0] for label in cfg.families})
    tags = ["horizonbench", f"run:{cfg.run.name}"] + [f"family:{f}" for f in families]
    tags += [f"model:{m.name}" for m in cfg.evaluation.models]
    if cfg.worlds is not None:
        tags += [f"world:{env}" for env in cfg.worlds.environments]
    return tags


def _tag_flow_run(cfg: Config) -> None:
    """Add the run's tags to the current flow run (deployments and the CLI alike)."""
    from prefect.client.orchestration import get_client
    from prefect.context import get_run_context

    try:
        flow_run = get_run_context().flow_run  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001 - not in a flow run (called directly): nothing to tag
        return
    if flow_run is None:
        return
    tags = sorted(set(flow_run.tags or []) | set(run_tags(cfg)))
    with get_client(sync_client=True) as client:
        client.update_flow_run(flow_run.id, tags=tags)


def _prepare(run: Path, cfg: Config, command: str) -> None:
    """A rerun first marks the folder unfinished: the old manifest and staging go, and
    every output of the run before is marked stale until this run rewrites it."""
    run.mkdir(parents=True, exist_ok=True)
    (run / MANIFEST).unlink(missing_ok=True)
    shutil.rmtree(run / STAGING, ignore_errors=True)
    run_folder.begin(run, cfg.model_dump(mode="json"), command)


def short_bins(cfg: Config, stats: list[dict[str, Any]]) -> list[str]:
    """One entry per family label whose bins are not all filled (unless the config
    accepts that with ``sampling.allow_unfilled``): which bins, and what they got."""
    out = []
    for st in stats:
        spec = cfg.families.get(st["family"])
        short = st.get("unfilled_bins") or {}
        if spec is None or not short or spec.sampling.allow_unfilled or spec.sampling.bins is None:
            continue
        if spec.sampling.adaptive is not None:  # a wave's bins ask what the design wants; a short one is
            # closed to later waves (tasks/analyse/adaptive.py), not a failure of the run
            continue
        bins = spec.sampling.bins
        shown = ", ".join(f"{lo}-{int(lo) + bins.width - 1}: {got}" for lo, got in list(short.items())[:8])
        more = " ..." if len(short) > 8 else ""
        out.append(
            f"{st['family']}: {len(short)} of {len(bins.edges())} L bins short of "
            f"{'their quotas' if bins.quotas else bins.per_bin} "
            f"({shown}{more}) after {st['candidates_considered']} candidates"
        )
    return out


def unfilled_summary(problems: list[str]) -> str:
    return (
        "bins short of quota: "
        + "; ".join(problems)
        + " (raise sampling.max_candidates, narrow the bins, or set sampling.allow_unfilled: true)"
    )


def _generate_and_validate(cfg: Config, run: Path) -> list[dict[str, Any]]:
    if not cfg.families:
        return []
    stats = generate_instances(cfg, str(run))
    for name in cfg.families:
        rel = instances_rel(name)
        validate_table.with_options(task_run_name=f"validate-{rel}")(
            str(staged(run, rel)), rel, suite_for_family(name), str(run)
        )
        promote(run, rel)
    run_folder.current(run, "generate")
    return stats


def _finish(
    run: Path, out_template: str, title: str, counts: dict[str, Any], problems: list[str], report: Path | None
) -> None:
    """The end of a run that got through: state, ``latest`` pointer, Prefect artifacts."""
    from horizonbench.tasks.report.artifacts import publish

    run_folder.current(run, "validate")
    run_folder.current(run, "manifest")
    run_folder.finish(run, "failed" if problems else "completed", problems)
    if not problems and run_folder.point_latest(out_template, run) is None:
        from horizonbench.tasks.run_folder.verify import unverified

        why = unverified(run)
        if why:  # a file went missing or was cut short since the manifest
            get_run_logger().warning("the series' latest stays where it was: %s", why)
    publish(title, run, counts, problems, report)


def _guarded(run: Path, body: Any) -> Any:
    """Run ``body`` holding the folder's lock; the state says how it ended when it
    did not get through (Ctrl-C or SIGTERM: cancelled; an exception: failed). Inside a
    flow run Prefect swaps the command's SIGTERM handler for its own, which raises
    ``TerminationSignal`` (not a KeyboardInterrupt), so both mean a user stopped the run."""
    with run_folder.run_lock(run, "horizonbench flow") as previous:
        if previous:
            get_run_logger().warning(
                "took over the run folder from pid %s, which is no longer running", previous.get("pid")
            )
        try:
            return body()
        except (KeyboardInterrupt, TerminationSignal):
            run_folder.finish(run, "cancelled", ["interrupted by Ctrl-C or SIGTERM"])
            raise
        except BaseException as err:
            run_folder.finish(run, "failed", [f"{type(err).__name__}: {err}"[:500]])
            raise


def _base_manifest(cfg: Config, started: float, provenance: dict[str, Any] | None = None) -> dict[str, Any]:
    provenance = provenance or {"versions": versions(), "git_sha": git_sha()}
    return {
        "config": cfg.model_dump(mode="json"),
        **provenance,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


@flow(name="horizonbench-generate", flow_run_name=flow_run_name, validate_parameters=False)
def generate_flow(config: dict[str, Any] | Config | str, out: str, series: str | None = None) -> Any:
    """Generate and validate the instance tables only. Bins left short of their quota
    end the flow run Failed with the list (the CLI exits 4), everything written."""
    started = time.time()
    cfg, run = _resolve(config, out)

    def body() -> Any:
        _tag_flow_run(cfg)
        repaired = repair(cfg, run, "generate", ("generate",))
        if repaired is not None:  # only damaged instance parts were rewritten
            _finish(run, series or out, f"horizonbench: {cfg.run.name} (instances)", repaired, [], None)
            return str(run)
        _prepare(run, cfg, "generate")
        stats = _generate_and_validate(cfg, run)
        counts = {"generation": stats}
        write_manifest(run, _base_manifest(cfg, started) | {"counts": counts})
        shutil.rmtree(run / STAGING, ignore_errors=True)
        short = short_bins(cfg, stats)
        problems = [unfilled_summary(short)] if short else []
        _finish(run, series or out, f"horizonbench: {cfg.run.name} (instances)", counts, problems, None)
        if problems:
            get_run_logger().error("%s", problems[0])
            return Failed(message=problems[0])
        return str(run)

    return _guarded(run, body)


@flow(name="horizonbench", flow_run_name=flow_run_name, validate_parameters=False)
def pipeline(config: dict[str, Any] | Config | str, out: str, series: str | None = None) -> Any:
    """The whole pipeline; returns the path of the HTML report.

    When attempts are left without an answer, world episodes of model agents
    unfinished, or L bins short of their quota, everything is still written (tables,
    report, manifest; a world study in which not one episode finished has no world
    tables to write), and the flow run ends *Failed* with the one-line summary, so a
    nightly deployment shows it in the Prefect UI; called directly, it raises
    ``prefect.exceptions.FailedRun`` (the CLI turns that into exit code 3, or 4 for
    short bins alone).

    ``out`` may hold ``{date}`` (the run's UTC date): the run is one of a dated series,
    whose ``latest`` pointer moves to it when it completes. ``series`` is that template
    when ``out`` was resolved already (the CLI resolves it once, for its checks and lock).
    """
    started = time.time()
    cfg, run = _resolve(config, out)
    return _guarded(run, lambda: _pipeline(cfg, run, series or out, started))


def _pipeline(cfg: Config, run: Path, out_template: str, started: float) -> Any:
    logger = get_run_logger()
    _tag_flow_run(cfg)
    # an adaptive study's instances are what its waves chose: a damaged one is rebuilt by
    # rerunning the waves (every answer comes from the attempt store), not by the repair
    repaired = None if adaptive_labels(cfg) else repair(cfg, run, "run")
    if repaired is not None:  # only the damaged files were rewritten (flows/repair.py)
        page = run / REPORT_REL
        report_page = page if page.exists() else None
        _finish(run, out_template, f"horizonbench: {cfg.run.name}", repaired, [], report_page)
        return str(page) if report_page else str(run)
    _prepare(run, cfg, "run")
    adaptive = bool(adaptive_labels(cfg)) and bool(cfg.evaluation.models)
    stats = [] if adaptive else _generate_and_validate(cfg, run)
    counts: dict[str, Any] = {"generation": stats}
    if cfg.training is not None and cfg.families:
        cfg = _trained(cfg, run)
    analysed = False
    if cfg.worlds is not None:
        counts["worlds"] = _world_study(cfg, run)
        run_folder.current(run, "worlds")
    if adaptive:
        stats, evaluation, analysed, counts["adaptive"] = _adaptive_study(cfg, run)
        counts["generation"] = stats
        counts["attempts"] = evaluation
    elif cfg.evaluation.models and cfg.families:
        counts["attempts"], analysed = _evaluate(cfg, run)
    elif cfg.families:
        logger.warning("no models configured: instances only, no evaluation")
    if analysed or counts.get("worlds", {}).get("episodes"):
        horizon_card(cfg, str(run))
    if analysed or counts.get("worlds"):
        run_folder.current(run, "analyse")
    budget = budget_counts(cfg, run, _refused(counts))
    if budget is not None:
        counts["budget"] = budget
    provenance = {"versions": versions(), "git_sha": git_sha()}
    run_info = report_run_info(cfg, provenance)
    report = None
    title = f"horizonbench: {cfg.run.name}"
    if analysed or counts.get("worlds", {}).get("episodes"):
        report = build_report(str(run), title, run_info, report_counts(counts))
        run_folder.current(run, "report")
    write_manifest(run, _base_manifest(cfg, started, provenance) | {"counts": counts})
    shutil.rmtree(run / STAGING, ignore_errors=True)
    if report:
        logger.info("report: %s", report)
    problems = []
    capped = budget_problem(budget)
    if counts.get("attempts", {}).get("total", {}).get("failed"):
        problems.append(missing_summary(counts["attempts"], capped=bool(capped)))
    unfinished = unfinished_summary(counts.get("worlds", {}).get("models", {}), capped=bool(capped))
    if unfinished:
        logger.warning("%s", unfinished)
        problems.append(unfinished)
    if capped and problems:
        problems.append(capped)
    short = short_bins(cfg, stats)
    if short:
        logger.error("%s", unfilled_summary(short))
        problems.append(unfilled_summary(short))
    _finish(run, out_template, title, counts, problems, Path(report) if report else None)
    if problems:
        return Failed(message="; ".join(problems))
    return str(run / REPORT_REL) if report else str(run)


def _evaluate(cfg: Config, run: Path) -> tuple[dict[str, Any], bool]:
    """evaluate -> score -> validate -> analyse; whether there was anything to analyse."""
    logger = get_run_logger()
    evaluation = evaluate_models(cfg, str(run))
    run_folder.current(run, "evaluate")
    for message in silent_models(evaluation):
        logger.error(message)
    analysed = False
    if evaluation["total"]["answered"]:
        scores_path = score_attempts(cfg, str(run))
        violations = tuple(sorted({v for name in cfg.families for v in get_family(name).violations}))
        validate_table.with_options(task_run_name="validate-scores")(
            scores_path, "scores", scores_suite(violations), str(run)
        )
        promote(run, SCORES_REL)
        run_folder.current(run, "score")
        analyse(cfg, str(run))
        analysed = True
    else:
        logger.error("no model answered anything: no scores, analysis or report")
    if evaluation["total"]["failed"]:
        logger.warning("%s", missing_summary(evaluation))
    return evaluation, analysed


def _adaptive_study(
    cfg: Config, run: Path
) -> tuple[list[dict[str, Any]], dict[str, Any], bool, dict[str, Any]]:
    """Waves of generate -> validate -> evaluate -> score -> analyse, each wave's
    instances chosen from the analysis of the waves before it (``plan-wave``, through
    ``adaptive/design.parquet``), until every adaptive (family label, model) has stopped:
    its interval within the target, its call budget spent, its bins exhausted or its
    waves used up. Earlier waves' answers come from the attempt store, never paid twice."""
    most = max(cfg.families[label].sampling.adaptive.max_waves for label in adaptive_labels(cfg))  # type: ignore[union-attr]
    stats: list[dict[str, Any]] = []
    evaluation: dict[str, Any] = {}
    analysed = False
    plan: dict[str, Any] = {}
    waves = 0
    for wave in range(1, most + 2):
        plan = plan_next_wave.with_options(task_run_name=f"plan-wave-{wave}")(cfg, str(run), wave)
        if not plan["going"] or (wave > 1 and not analysed):
            break
        wave_cfg = wave_config(cfg, quotas(read_design(run)))
        stats = _generate_and_validate(wave_cfg, run)
        evaluation, analysed = _evaluate(wave_cfg, run)
        waves = wave
        total = evaluation["total"]
        if (total["failed"] and not total["answered"]) or total["budget_reached"]:
            break  # no answer at all, or a budget cap refuses calls: another wave buys nothing
    return stats, evaluation, analysed, {"waves": waves, "stopped": plan.get("stopped", {})}


def _trained(cfg: Config, run: Path) -> Config:
    """Train the config's sequence models (tasks/train: a task run per puzzle x
    architecture x condition), then evaluate them beside the config's own models."""
    from horizonbench.tasks.train.stage import train_models

    local = train_models(cfg, str(run))
    run_folder.current(run, "train")
    evaluation = cfg.evaluation.model_copy(update={"models": [*cfg.evaluation.models, *local]})
    return cfg.model_copy(update={"evaluation": evaluation})


@flow(name="horizonbench-train", flow_run_name=flow_run_name, validate_parameters=False)
def train_flow(config: dict[str, Any] | Config | str, out: str, series: str | None = None) -> Any:
    """RecurrReason's experiment: generate -> validate -> export -> train -> evaluate by
    rollout -> score -> analyse -> report. The pipeline itself (a config with a
    ``training`` section trains in ``horizonbench run`` too), under its own flow name so
    the UI tells training runs apart."""
    started = time.time()
    cfg, run = _resolve(config, out)
    if cfg.training is None:
        from horizonbench.core.errors import ConfigError

        raise ConfigError("the config has no 'training' section: nothing to train")
    return _guarded(run, lambda: _pipeline(cfg, run, series or out, started))


def _world_study(cfg: Config, run: Path) -> dict[str, Any]:
    """The world study: its grid at once, or in waves of an adaptive sc scan."""
    assert cfg.worlds is not None
    if cfg.worlds.sc_scan is None:
        return _world_wave(cfg, run)
    cells: dict[str, list[int]] = {a.name: [] for a in cfg.worlds.agents}
    stats: dict[str, Any] = {}
    plan: dict[str, Any] = {}
    offline: dict[str, Any] = {"episodes": [], "steps": []}
    models = {a.name for a in model_agents(cfg)}
    waves = 0
    while True:
        plan = plan_sc_cells.with_options(task_run_name=f"plan-sc-scan-{waves + 1}")(cfg, str(run), cells)
        new = {name: c for name, c in plan["cells"].items() if c}
        if not new:
            break
        # each agent plays only the cells its own brackets asked for; an offline agent
        # only the new ones (its earlier episodes are carried), a model agent all of its
        # cells through the attempt store (it pays only for the new calls)
        for agent in cfg.worlds.agents:
            if agent.name in new and agent.name not in models:
                fresh = run_world_episodes(_agent_cells(cfg, agent, new[agent.name]), str(run))
                offline = {
                    "episodes": offline["episodes"] + fresh["episodes"],
                    "steps": offline["steps"] + fresh["steps"],
                }
            cells[agent.name] = sorted({*cells[agent.name], *new.get(agent.name, [])})
        stats = _world_wave(cfg, run, offline, cells)
        waves += 1
        if not stats["episodes"]:
            break
    stats["sc_scan"] = {"waves": waves, "cells": cells, "stopped": plan.get("stopped", {})}
    return stats


def _agent_cells(cfg: Config, agent: Any, sc: list[int]) -> Config:
    """The study with one agent, on the sc cells given."""
    assert cfg.worlds is not None
    worlds = cfg.worlds.model_copy(update={"sc": sorted(sc), "agents": [agent]})
    return cfg.model_copy(update={"worlds": worlds})


def _models_on_cells(cfg: Config, run: Path, cells: dict[str, list[int]]) -> dict[str, Any]:
    """``run_world_models`` agent by agent, each on its own cells (an sc scan), merged."""
    assert cfg.worlds is not None
    out: dict[str, Any] = {"episodes": [], "steps": [], "attempts": [], "agents": {}, "budget_refused": []}
    for agent in model_agents(cfg):
        if not cells.get(agent.name):
            continue
        part = run_world_models(_agent_cells(cfg, agent, cells[agent.name]), str(run))
        for key in ("episodes", "steps", "attempts"):
            out[key] += part[key]
        out["agents"].update(part["agents"])
        out["budget_refused"] = sorted({*out["budget_refused"], *part.get("budget_refused", [])})
    return out


def _world_wave(
    cfg: Config, run: Path, played: dict[str, Any] | None = None, cells: dict[str, list[int]] | None = None
) -> dict[str, Any]:
    """Offline agents on Dask, model agents through the harness; both tables
    validated and promoted, then the analysis. Model episodes whose calls failed for
    good are left out (and counted): the next run resumes them. When no episode at all
    finished (a study of model agents only, whose calls all failed), there is nothing to
    validate or analyse: no tables, no analysis, and the flow ends Failed with the count.
    ``played``: the offline agents' episode and step rows when the caller ran them, and
    ``cells`` each agent's sc cells (an sc scan's waves add cells to them)."""
    assert cfg.worlds is not None
    offline = (
        run_world_episodes(cfg, str(run)) if played is None else played | {"stats": _offline_stats(played)}
    )
    models = run_world_models(cfg, str(run)) if cells is None else _models_on_cells(cfg, run, cells)
    if models["attempts"]:
        write_table(
            rows_to_table(models["attempts"], ATTEMPTS_SCHEMA),
            run / WORLD_ATTEMPTS_REL,
            "attempts/world_attempts",
        )
    names = [a.name for a in cfg.worlds.agents]
    stats = dict(offline["stats"])
    stats["episodes"] += len(models["episodes"])
    stats["steps"] += len(models["steps"])
    stats["successes"] += sum(r["success"] for r in models["episodes"])
    stats["horizon_short"] += sum(r["horizon_short"] for r in models["episodes"])
    stats["agents"] = names
    stats["models"] = models["agents"]
    stats["budget_refused"] = models.get("budget_refused", [])
    if not stats["episodes"]:
        get_run_logger().error("no world episode finished: no episodes or steps tables, analysis or report")
        return stats
    write_world_tables(run, offline["episodes"] + models["episodes"], offline["steps"] + models["steps"])
    for rel, name, suite in (
        (EPISODES_REL, "episodes", episodes_suite(names)),
        # every finished episode may have been stopped over budget before its first step
        (STEPS_REL, "steps", steps_suite(min_rows=1 if stats["steps"] else 0)),
    ):
        validate_table(str(staged(run, rel)), name, suite, str(run))
        promote(run, rel)
    analyse_worlds(cfg, str(run))
    return stats


def _offline_stats(played: dict[str, Any]) -> dict[str, Any]:
    """``run_world_episodes``' counts of rows played over several waves."""
    eps = played["episodes"]
    return {
        "episodes": len(eps),
        # distinct worlds: an environment's world is its seed under the axes it was played at
        "worlds": len(
            {
                (r["env"], r["seed"], r["horizon"], r["branching"], r["observation"], r["mutation"])
                for r in eps
            }
        ),
        "steps": len(played["steps"]),
        "successes": sum(r["success"] for r in eps),
        "horizon_short": sum(r["horizon_short"] for r in eps),
    }


def _refused(counts: dict[str, Any]) -> list[str]:
    """The caps that refused a call in this run, in the evaluation or the world study."""
    evaluation = (counts.get("attempts") or {}).get("total") or {}
    return [*evaluation.get("budget_refused", []), *(counts.get("worlds") or {}).get("budget_refused", [])]


def silent_models(evaluation: dict[str, Any]) -> list[str]:
    """One message per model that got no answer at all, naming why (not a model only a
    budget cap held back: the budget's line says so)."""
    out = []
    for model, c in evaluation["models"].items():
        if c["attempts"] and not c["answered"] and set(c["failed_by_class"]) != {"budget"}:
            why = c["stopped"] or ", ".join(f"{k} x{v}" for k, v in c["failed_by_class"].items())
            out.append(f"model {model!r} has no answers ({c['failed']} attempts failed: {why})")
    return out


def missing_summary(evaluation: dict[str, Any], capped: bool = False) -> str:
    """The one line that says how many attempts have no answer, per model and class
    (``capped``: a budget cap refused calls; its own line follows, see rerun_hint)."""
    total = evaluation["total"]
    parts = []
    for model, c in evaluation["models"].items():
        if c["failed"]:
            classes = ", ".join(f"{k} {v}" for k, v in c["failed_by_class"].items())
            parts.append(f"{model}: {c['failed']} ({classes})")
    line = f"{total['failed']} of {total['attempts']} attempts have no answer ({'; '.join(parts)})"
    hint = rerun_hint(total["failed"], evaluation["models"].values(), "failed_by_class", "retry", capped)
    return f"{line}; {hint}" if hint else line
