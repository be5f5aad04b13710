"""RecurrReason's tiny sequence models on this machine: how fast they train and roll out,
and what they learn of Blocks World n <= 4 within a CPU budget.

Three tables, all on real Blocks World steps generated here with the tiny config's
sampling (``configs/recurrreason-train-tiny.yaml``, n = 1..4, every fifth puzzle held out
for validation, so validation states come from unseen puzzles):

1. **Learning curve** per architecture (T5-style encoder-decoder and GPT-2-style
   decoder-only, 2 layers of width 64, AdamW at lr 1e-3, batch 16, one torch thread):
   training is resumed from its own last checkpoint at growing step counts until the
   CPU budget is spent (10 CPU minutes each by default); at each point the validation
   next-state accuracy (greedy, exact match) of the best checkpoint so far, beside the
   copy-the-current-state baseline (what a model that learnt nothing but the format
   gets: it is right only at the goal, where the answer is STOP).
2. **Training throughput**: training tokens per second per core, one torch thread
   (baseline) against two.
3. **Rollout throughput**: next states decoded per second by the trained T5 model,
   one source per ``generate`` call (baseline) against the local provider's batches of 32.

A report, not a test: it exits 0 when it ran to its end, whatever the figures.

    .venv/bin/python benchmarks/training.py                 # 10 CPU minutes per architecture
    .venv/bin/python benchmarks/training.py --quick         # 90 CPU seconds each
    .venv/bin/python benchmarks/training.py --budget 30     # CPU seconds per architecture
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from common import Measure, exit_with, log, print_ratio_table, print_table, quiet_environ

quiet_environ()

import torch  # noqa: E402

from horizonbench.core.registry import get_family  # noqa: E402
from horizonbench.datasets.puzzles.steps import step_rows  # noqa: E402
from horizonbench.schemas.config import load_config  # noqa: E402
from horizonbench.schemas.training import ArchitectureSpec, OptimizerSpec  # noqa: E402
from horizonbench.training.decoding import (  # noqa: E402
    LoadedModel,
    copy_baseline_accuracy,
    next_state_accuracy,
)
from horizonbench.training.texts import pairs  # noqa: E402
from horizonbench.training.trainer import TrainJob, train  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "configs" / "recurrreason-train-tiny.yaml"
#: step counts at which the curve is read (then doubling, while the budget lasts)
POINTS = (25, 50, 100, 200, 400, 600, 800, 1200, 1600)
KINDS = {"t5": "encoder_decoder", "gpt2": "decoder_only"}


def blocks_world_pairs(max_n: int, candidates: int) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(train, validation) step pairs of Blocks World n <= max_n, split by puzzle."""
    fam = get_family("blocks_world")
    params = dict(load_config(TINY).families["blocks_world"].params)
    params["ns"] = [n for n in params["ns"] if n <= max_n]
    p = fam.params_model.model_validate(params)
    rows = [c.row for i in range(candidates) if (c := fam.generate_candidate(p, 2025, i)).row]
    rows = [r for r in rows if not r["start_is_goal"]]
    seen, train_rows, val_rows = set(), [], []
    for row in rows:
        key = (row["initial_state"], row["goal_state"])
        if key in seen:
            continue
        seen.add(key)
        (val_rows if len(seen) % 5 == 0 else train_rows).append(row)
    rule = [f.name for f in fam.rule_fields]
    tr = pairs([s for r in train_rows for s in step_rows(r, "train", rule)], fam.rule_fields)
    va = pairs([s for r in val_rows for s in step_rows(r, "validation", rule)], fam.rule_fields)
    log(
        f"Blocks World n <= {max_n}: {len(train_rows)} train puzzles ({len(tr)} steps), "
        f"{len(val_rows)} validation puzzles ({len(va)} steps)"
    )
    return tr, va


def job(data: Any, kind: str, out: Path, max_steps: int, threads: int) -> TrainJob:
    return TrainJob(
        train=data[0],
        validation=data[1],
        arch=ArchitectureSpec(kind=kind, layers=2, width=64, heads=4),
        condition="scratch",
        optimizer=OptimizerSpec(lr=1e-3, batch_size=16, max_steps=max_steps, eval_every=25, patience=1000),
        seed=11,
        out_dir=out,
        puzzle="blocks_world",
        architecture=kind,
        threads=threads,
    )


def learning_curve(data: Any, arch: str, out: Path, budget_s: float) -> list[dict[str, Any]]:
    """Resume one run at growing step counts until ``budget_s`` CPU seconds are spent
    (training and the accuracy readings both count)."""
    rows: list[dict[str, Any]] = []
    cpu0 = time.process_time()
    points = list(POINTS)
    while points[-1] < 10**5:
        points.append(points[-1] * 2)
    for steps in points:
        result = train(job(data, KINDS[arch], out, steps, threads=1))
        acc = next_state_accuracy(out / "best", data[1], batch=32)
        cpu = time.process_time() - cpu0
        last = result.history[-1]
        rows.append({"arch": arch, "steps": steps, "cpu_s": cpu, "train_loss": last["train_loss"],
                     "val_loss": result.best_val_loss, "accuracy": acc, "tokens": result.train_tokens,
                     "train_s": result.seconds})  # fmt: skip
        log(f"{arch} {steps} steps: {cpu:.0f} CPU s, validation accuracy {acc:.3f}")
        if cpu >= budget_s:
            break
    return rows


def training_rate(data: Any, threads: int, steps: int) -> float:
    """Training tokens per second of a fresh T5 run of ``steps`` steps."""
    with tempfile.TemporaryDirectory() as tmp:
        result = train(job(data, "encoder_decoder", Path(tmp), steps, threads))
    return result.train_tokens / result.seconds


def rollout_rates(model: LoadedModel, sources: list[str], limit: int) -> tuple[float, float]:
    """Next states per second: one source per call, then batches of 32."""
    t0 = time.perf_counter()
    for s in sources:
        model.generate([s], limit)
    one = len(sources) / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    for i in range(0, len(sources), 32):
        model.generate(sources[i : i + 32], limit)
    return one, len(sources) / (time.perf_counter() - t0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=600.0, help="CPU seconds per architecture's curve")
    ap.add_argument("--quick", action="store_true", help="90 CPU seconds per curve, shorter rates")
    ap.add_argument("--max-n", type=int, default=4)
    ap.add_argument(
        "--candidates",
        type=int,
        default=1200,
        help="candidates drawn (about a third are kept: certified, not trivial, not repeated)",
    )
    args = ap.parse_args()
    budget = 90.0 if args.quick else args.budget
    data = blocks_world_pairs(args.max_n, args.candidates)
    copy = copy_baseline_accuracy(data[1])
    curves: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for arch in KINDS:
            curves[arch] = learning_curve(data, arch, Path(tmp) / arch, budget)
        model = LoadedModel.load(str(Path(tmp) / "t5" / "best"))
        sources = [s for s, _ in data[1]][:256]
        limit = max(model.count_tokens(t) for _, t in data[1]) + 4
        one, batched = rollout_rates(model, sources, limit)
    steps = 40 if args.quick else 120
    t1 = training_rate(data, 1, steps)
    t2 = training_rate(data, 2, steps)

    print(
        f"\nLearning curve, Blocks World n <= {args.max_n} (validation next-state accuracy, greedy "
        f"exact match; copy-the-current-state baseline {copy:.3f}; budget {budget:.0f} CPU s each)"
    )
    print_table(
        ("arch", "steps", "CPU s", "train loss", "val loss", "accuracy", "x copy baseline"),
        [
            (
                r["arch"],
                str(r["steps"]),
                f"{r['cpu_s']:.0f}",
                f"{r['train_loss']:.3f}",
                f"{r['val_loss']:.3f}",
                f"{r['accuracy']:.3f}",
                f"{r['accuracy'] / copy:.2f}" if copy else "-",
            )
            for rows in curves.values()
            for r in rows
        ],  # fmt: skip
    )
    for arch, rows in curves.items():
        best = max(rows, key=lambda r: r["accuracy"])
        print(f"{arch}: best validation next-state accuracy {best['accuracy']:.3f} at {best['steps']} steps "
              f"({best['cpu_s']:.0f} CPU s) against the copy baseline's {copy:.3f}")  # fmt: skip

    print("\nThroughput (T5-style, 2 layers of width 64; batch 16 for training)")
    print_ratio_table(
        [
            Measure("baseline", "training, 1 thread", "tokens/s", [t1]),
            Measure("t2", "training, 2 threads", "tokens/s", [t2], baseline="baseline"),
            Measure(
                "t2core", "training, 2 threads, per core", "tokens/s/core", [t2 / 2], baseline="baseline"
            ),
            Measure("one", "rollout steps, one per call", "steps/s", [one]),
            Measure("batched", "rollout steps, batches of 32", "steps/s", [batched], baseline="one"),
        ],
        reference=("-", 1.0),
    )
    print(f"(torch {torch.__version__}, {torch.get_num_threads()} threads available)")
    return 0


if __name__ == "__main__":
    exit_with(main)
