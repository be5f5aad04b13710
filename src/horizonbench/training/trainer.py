"""AdamW training with early stopping on validation loss (RecurrReason, Appendix M), resumable.

One job trains one model on one puzzle's step pairs. Every evaluation (each ``eval_every``
steps, or each epoch) writes ``out_dir/last/`` (model, tokenizer, optimizer and RNG states,
``trainer_state.json``) atomically; a better validation loss also writes ``out_dir/best/``.
A rerun on the same folder continues from ``last/`` exactly (same batches, same dropout
draws), and returns at once when the job was finished. Batches come from a permutation per
epoch seeded by (seed, epoch), so a CPU run is repeatable. A run stopped by ``max_steps``
ends with an evaluation; raising ``max_steps`` later continues it (its history then equals
an uninterrupted run's when the stop fell on an evaluation step).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from horizonbench.core.seeding import derive_seed
from horizonbench.schemas.training import ArchitectureSpec, OptimizerSpec
from horizonbench.training.decoding import (
    META_FILE,
    collate,
    encode_pair,
    replace_dir,
    save_checkpoint,
    temp_dir,
    token_loss_sum,
    write_checkpoint,
)

STATE_FILE = "trainer_state.json"
OPTIM_FILE = "optimizer.pt"
#: room for sources and states longer than the training ones (OOD sizes)
POSITION_MARGIN = 2


@dataclass
class TrainJob:
    """One model to train: data, architecture, optimiser, where it goes."""

    train: list[tuple[str, str]]
    validation: list[tuple[str, str]]
    arch: ArchitectureSpec
    condition: str
    optimizer: OptimizerSpec
    seed: int
    out_dir: Path
    init: str | None = None
    tokenizer_texts: list[str] = field(default_factory=list)
    puzzle: str = ""
    architecture: str = ""
    threads: int | None = None
    progress: bool = False


@dataclass
class TrainResult:
    """What a job left: its best checkpoint and how training went."""

    best_dir: Path
    steps: int
    epochs: int
    best_val_loss: float | None
    stopped_early: bool
    history: list[dict[str, Any]]
    train_tokens: int
    seconds: float
    resumed: bool
    #: the training loss of every optimiser step
    losses: list[float] = field(default_factory=list)


def _finished(state: dict[str, Any], opt: OptimizerSpec) -> bool:
    return (
        bool(state["stopped_early"])
        or state["epoch"] >= opt.max_epochs
        or (opt.max_steps is not None and state["step"] >= opt.max_steps)
    )


def _result(job: TrainJob, state: dict[str, Any], resumed: bool) -> TrainResult:
    return TrainResult(
        best_dir=Path(job.out_dir) / "best",
        steps=int(state["step"]),
        epochs=int(state["epoch"]),
        best_val_loss=state["best_val_loss"],
        stopped_early=bool(state["stopped_early"]),
        history=list(state["history"]),
        train_tokens=int(state["train_tokens"]),
        seconds=float(state["seconds"]),
        resumed=resumed,
        losses=list(state["losses"]),
    )


def _validation_loss(model: Any, examples: list[dict[str, list[int]]], pad: int, batch: int) -> float | None:
    import torch

    if not examples:
        return None
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(examples), batch):
            s, n = token_loss_sum(model, collate(examples[i : i + batch], pad))
            total, count = total + float(s), count + n
    model.train()
    return total / max(count, 1)


def train(job: TrainJob) -> TrainResult:
    """Train (or resume, or return a finished) job; see the module docstring."""
    import torch
    from tqdm.auto import tqdm

    from horizonbench.training.architectures import build_model, kind_of, load_pretrained, quiet
    from horizonbench.training.tokenizer import build_tokenizer

    quiet()
    out, opt = Path(job.out_dir), job.optimizer
    last = out / "last"
    if job.threads:
        torch.set_num_threads(job.threads)
    resumed = (last / STATE_FILE).is_file()
    if resumed:
        state = json.loads((last / STATE_FILE).read_text())
        if _finished(state, opt):
            return _result(job, state, True)
        model, tokenizer = load_pretrained(str(last))
    else:
        torch.manual_seed(job.seed)
        state = {
            "step": 0, "epoch": 0, "position": 0, "best_val_loss": None, "bad_evals": 0,
            "stopped_early": False, "history": [], "train_tokens": 0, "seconds": 0.0,
            "loss_sum": 0.0, "loss_steps": 0, "losses": [],
        }  # fmt: skip
        if job.init:
            model, tokenizer = load_pretrained(job.init)
        else:
            texts = list(job.tokenizer_texts) + [t for p in job.train + job.validation for t in p]
            tokenizer = build_tokenizer(texts)
            model = None
    kind = job.arch.kind if model is None else kind_of(model)
    examples = [encode_pair(tokenizer, kind, s, t) for s, t in job.train]
    val_examples = [encode_pair(tokenizer, kind, s, t) for s, t in job.validation]
    if not examples:
        raise ValueError("train: no training pairs")
    longest = max(len(e["input_ids"]) + len(e["labels"]) for e in examples + val_examples)
    if model is None:
        model = build_model(job.arch, tokenizer, max_positions=POSITION_MARGIN * longest + 16)
    pad = tokenizer.pad_token_id
    optim = torch.optim.AdamW(model.parameters(), lr=opt.lr, weight_decay=opt.weight_decay)
    if resumed:
        saved = torch.load(last / OPTIM_FILE, weights_only=False)
        optim.load_state_dict(saved["optimizer"])
        torch.set_rng_state(saved["rng"])
    meta = {
        "architecture": job.architecture or job.arch.kind,
        "kind": kind,
        "puzzle": job.puzzle,
        "condition": job.condition,
        "max_source_tokens": max(len(encode_pair(tokenizer, kind, s, "")["input_ids"]) for s, _ in job.train),
        "max_target_tokens": max(len(e["labels"]) - e["labels"].count(-100) for e in examples),
    }
    per_epoch = -(-len(examples) // opt.batch_size)
    total = (
        opt.max_epochs * per_epoch
        if opt.max_steps is None
        else min(opt.max_steps, opt.max_epochs * per_epoch)
    )
    started = time.perf_counter()
    seconds0 = float(state["seconds"])

    def checkpoint() -> None:
        state["seconds"] = seconds0 + time.perf_counter() - started
        tmp = temp_dir(last)
        write_checkpoint(
            model, tokenizer, tmp, {**meta, "steps": state["step"], "best_val_loss": state["best_val_loss"]}
        )
        torch.save({"optimizer": optim.state_dict(), "rng": torch.get_rng_state()}, tmp / OPTIM_FILE)
        (tmp / STATE_FILE).write_text(json.dumps(state, indent=1) + "\n")
        replace_dir(tmp, last)

    def evaluate() -> None:
        val = _validation_loss(model, val_examples, pad, opt.batch_size)
        train_loss = state["loss_sum"] / state["loss_steps"] if state["loss_steps"] else None
        state["history"].append(
            {"step": state["step"], "epoch": state["epoch"], "train_loss": train_loss, "val_loss": val}
        )
        state["loss_sum"], state["loss_steps"] = 0.0, 0
        best = state["best_val_loss"]
        if val is None or best is None or val < best:
            state["best_val_loss"], state["bad_evals"] = val, 0
            save_checkpoint(
                model, tokenizer, out / "best", {**meta, "steps": state["step"], "best_val_loss": val}
            )
        else:
            state["bad_evals"] += 1
            state["stopped_early"] = state["bad_evals"] >= opt.patience
        checkpoint()
        (out / "history.json").write_text(json.dumps(state["history"], indent=1) + "\n")

    model.train()
    bar = tqdm(
        total=total,
        initial=state["step"],
        disable=not job.progress,
        desc=f"{job.puzzle} {meta['architecture']}",
    )
    try:
        while not _finished(state, opt):
            gen = torch.Generator().manual_seed(derive_seed(job.seed, "epoch", state["epoch"]) % (2**63))
            order = torch.randperm(len(examples), generator=gen).tolist()
            pos = state["position"]
            if pos >= len(order):
                state["epoch"], state["position"] = state["epoch"] + 1, 0
                if opt.eval_every is None:
                    evaluate()
                continue
            batch = collate([examples[i] for i in order[pos : pos + opt.batch_size]], pad)
            loss_sum, count = token_loss_sum(model, batch)
            loss = loss_sum / max(count, 1)
            value = float(loss.detach())
            optim.zero_grad(set_to_none=True)
            loss.backward()
            if opt.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), opt.grad_clip)
            optim.step()
            state["step"] += 1
            state["position"] = pos + opt.batch_size
            state["loss_sum"] += value
            state["loss_steps"] += 1
            state["losses"].append(value)
            state["train_tokens"] += int(batch["attention_mask"].sum()) + (
                count if kind == "encoder_decoder" else 0
            )
            bar.update(1)
            bar.set_postfix(loss=f"{value:.3f}")
            at_cap = opt.max_steps is not None and state["step"] >= opt.max_steps
            if opt.eval_every is not None and state["step"] % opt.eval_every == 0:
                evaluate()
            elif at_cap:
                if state["position"] >= len(order):
                    state["epoch"], state["position"] = state["epoch"] + 1, 0
                evaluate()
    finally:
        bar.close()
    if state["loss_steps"] or not (out / "best" / META_FILE).is_file():
        evaluate()  # the steps since the last evaluation (a job ended by max_epochs)
    return _result(job, state, resumed)
