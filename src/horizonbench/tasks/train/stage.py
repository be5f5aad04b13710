"""Train stage as Prefect runs it: the step tables exported, then one task run
``train-<puzzle>-<model>`` per puzzle x architecture x condition, each writing its
checkpoints under ``<run>/models/<puzzle>/<model>/``.

It returns the trained models as ``local`` evaluation models (one name per architecture
and condition, one checkpoint per puzzle), which the pipeline then rolls out through the
same engine as an API model: attempts, resume, scoring, failure modes and the report
need nothing of their own.

Why the exports are the training data (and not the instance rows directly): they are
the files a user trains on elsewhere (Hugging Face ``datasets`` loads them), checked
by their Great Expectations suite (splits disjoint, L + 1 rows, a STOP row); training
on the same files keeps "what we trained on" and "what we published" one thing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from prefect import get_run_logger, task
from prefect.cache_policies import NONE

from horizonbench.core.registry import get_family
from horizonbench.core.seeding import derive_seed
from horizonbench.schemas.config import Config, ModelSpec, training_puzzles
from horizonbench.schemas.training import RUN_PREFIX, ArchitectureSpec, seqmodel_name
from horizonbench.tasks.cluster import progress
from horizonbench.tasks.report.export import EXPORTS_REL, export_run
from horizonbench.tasks.run_folder.storage import write_json

MODELS_REL = "models"
#: what each model's training did (steps, epochs, losses, time, resumed), and the torch
#: and transformers versions it ran on
SUMMARY_REL = f"{MODELS_REL}/training.json"


def checkpoint_dir(run: Path, puzzle: str, model: str) -> Path:
    """Where a trained model's folders live (``best/``, ``last/``, ``history.json``)."""
    return run / MODELS_REL / puzzle / model


def pretrained_source(arch_name: str, arch: ArchitectureSpec, run: Path) -> str:
    """What the pre-trained conditions start from: ``run:<puzzle>`` is this run's scratch
    model of the same architecture on that puzzle; a path that exists is made absolute
    (the attempt store keys answers by the weights, not by the path); anything else is a
    hub name."""
    assert arch.pretrained is not None
    if arch.pretrained.startswith(RUN_PREFIX):
        puzzle = arch.pretrained.removeprefix(RUN_PREFIX)
        return str(checkpoint_dir(run, puzzle, seqmodel_name(arch_name, "scratch")) / "best")
    local = Path(arch.pretrained).expanduser()
    return str(local.resolve()) if local.exists() else arch.pretrained


def training_jobs(cfg: Config) -> list[tuple[str, str, str]]:
    """(puzzle, architecture, condition) in the order they run: every scratch model
    first, so a ``run:<puzzle>`` start exists before the fine-tuning that reads it.
    zero_shot has no job (the pre-trained checkpoint is evaluated as it is)."""
    assert cfg.training is not None
    puzzles = training_puzzles(cfg)
    jobs = []
    for condition in ("scratch", "fine_tuned"):
        if condition not in cfg.training.conditions:
            continue
        for puzzle in puzzles:
            for arch in cfg.training.architectures:
                jobs.append((puzzle, arch, condition))
    return jobs


def step_pairs(run: Path, puzzle: str, split: str) -> list[tuple[str, str]]:
    """(source, target) texts of one exported split (``training.texts``'s format)."""
    from horizonbench.training.texts import pairs

    family = get_family(puzzle)
    rows = pq.read_table(run / EXPORTS_REL / puzzle / f"{split}.parquet").to_pylist()
    return pairs(rows, [f.name for f in family.rule_fields])


def vocabulary_texts(run: Path, puzzles: Sequence[str]) -> list[str]:
    """Every source and target text of the exports, all splits: the scratch tokenizer's
    vocabulary (shared by the run's puzzles, so ``run:<puzzle>`` starts fine-tune on
    another puzzle; OOD sizes' tokens are in it, not <unk>). Sorted: the same exports
    give the same vocabulary."""
    texts: set[str] = set()
    for puzzle in puzzles:
        for split in ("train", "validation", "ood"):
            for src, tgt in step_pairs(run, puzzle, split):
                texts.update((src, tgt))
    return sorted(texts)


@task(name="train-model", cache_policy=NONE)
def _train_one(job: Any) -> dict[str, Any]:
    """One model on one puzzle; a rerun resumes from its last checkpoint."""
    from horizonbench.training.trainer import train

    logger = get_run_logger()
    result = train(job)
    logger.info(
        "%s/%s-%s: %d steps (%d epochs%s), best validation loss %.4f%s",
        job.puzzle,
        job.architecture,
        job.condition,
        result.steps,
        result.epochs,
        ", stopped early" if result.stopped_early else "",
        result.best_val_loss,
        " (resumed)" if result.resumed else "",
    )
    return {
        "puzzle": job.puzzle,
        "architecture": job.architecture,
        "condition": job.condition,
        "checkpoint": str(result.best_dir),
        "steps": result.steps,
        "epochs": result.epochs,
        "best_val_loss": result.best_val_loss,
        "stopped_early": result.stopped_early,
        "train_tokens": result.train_tokens,
        "seconds": result.seconds,
        "resumed": result.resumed,
        "train_pairs": len(job.train),
        "validation_pairs": len(job.validation),
    }


@task(name="train", cache_policy=NONE)
def train_models(cfg: Config, run: str) -> list[ModelSpec]:
    """Export, train, and return the ``local`` models to evaluate (config order)."""
    from horizonbench.training.trainer import TrainJob

    assert cfg.training is not None
    spec = cfg.training
    folder = Path(run)
    logger = get_run_logger()
    puzzles = training_puzzles(cfg)
    export_run(
        folder,
        ["parquet"],
        cfg.run.seed,
        folder / EXPORTS_REL,
        cfg.export.split,
        cfg.export.in_distribution_max,
    )
    data = {p: (step_pairs(folder, p, "train"), step_pairs(folder, p, "validation")) for p in puzzles}
    for p, (tr, va) in data.items():
        if not tr or not va:
            from horizonbench.core.errors import ConfigError

            raise ConfigError(
                f"training: {p} has {len(tr)} training and {len(va)} validation steps; both must be "
                "non-empty (more instances, or a larger export.in_distribution_max)"
            )
    vocabulary = vocabulary_texts(folder, puzzles)
    checkpoints: dict[str, dict[str, str]] = {}
    summary = []
    for puzzle, arch_name, condition in training_jobs(cfg):
        arch = spec.architectures[arch_name]
        name = seqmodel_name(arch_name, condition)
        job = TrainJob(
            train=data[puzzle][0],
            validation=data[puzzle][1],
            arch=arch,
            condition=condition,
            optimizer=spec.optimizer,
            seed=derive_seed(cfg.run.seed, "train", puzzle, name),
            out_dir=checkpoint_dir(folder, puzzle, name),
            init=None if condition == "scratch" else pretrained_source(arch_name, arch, folder),
            tokenizer_texts=vocabulary,
            puzzle=puzzle,
            architecture=arch_name,
            threads=spec.threads,
            progress=progress.enabled(),
        )
        done = _train_one.with_options(task_run_name=f"train-{puzzle}-{name}")(job)
        summary.append(done)
        checkpoints.setdefault(name, {})[puzzle] = done["checkpoint"]
    if "zero_shot" in spec.conditions:
        for arch_name, arch in spec.architectures.items():
            source = pretrained_source(arch_name, arch, folder)
            checkpoints[seqmodel_name(arch_name, "zero_shot")] = dict.fromkeys(puzzles, source)
    import torch
    import transformers

    versions = {"torch": torch.__version__, "transformers": transformers.__version__}
    write_json({"jobs": summary, "versions": versions}, folder / SUMMARY_REL)
    models = [
        ModelSpec(
            name=name,
            provider="local",
            checkpoints=checkpoints[name],
            decode_batch=spec.decode_batch,
            max_concurrency=spec.decode_batch,
        )
        for name in spec.model_names()
        if name in checkpoints
    ]
    logger.info("trained models to roll out: %s", ", ".join(m.name for m in models))
    return models
