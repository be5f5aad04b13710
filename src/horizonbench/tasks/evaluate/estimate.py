"""``horizonbench run --dry-run``: what the evaluation would send and cost, sending nothing.

Input tokens are estimated at 4 characters per token (the usual figure for English
text with OpenAI and Anthropic tokenizers); output tokens are given as the ceiling the
config allows (``max_tokens`` per call), so the cost column is an upper bound: a
budget set from it cannot be overrun by long answers. A rollout episode counts its
ceiling too: T_max = 2 x the optimal length steps, each the size of its first step
(steps already stored are not known before replaying, so they count as calls).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from horizonbench.core.text import aligned_lines
from horizonbench.models.attempt_store import AttemptStore
from horizonbench.models.engine import ModelRunner, prompt_chars, split_stored
from horizonbench.models.factory import build_model
from horizonbench.schemas.config import Config
from horizonbench.tasks.evaluate.attempts import (
    build_conversations,
    build_requests,
    render_prompts,
    run_tag,
    store_path,
)


def estimate_rows(cfg: Config, run: Path) -> list[dict[str, Any]]:
    prompted = render_prompts(cfg, run)
    path = store_path(cfg, run)
    path.parent.mkdir(parents=True, exist_ok=True)
    tag = run_tag(run)
    rows = []
    with AttemptStore(path) as store:
        for spec in cfg.evaluation.models:
            requests = build_requests(cfg, prompted, spec.name)
            runner = ModelRunner(
                build_model(spec, sends=False), store, reuse=cfg.evaluation.reuse, run_tag=tag
            )
            _, _, missing = split_stored(runner, requests)
            todo = [requests[i] for i in missing]
            input_tokens = sum(prompt_chars(r) // 4 for r in todo)
            output_tokens = sum(r.max_tokens for r in todo)
            steps = 0
            for conv in build_conversations(cfg, prompted, spec.name):
                first, ceiling = conv.first(), 2 * int(conv.row["solution_length"])
                steps += ceiling
                input_tokens += ceiling * (prompt_chars(first) // 4)
                output_tokens += ceiling * first.max_tokens
            price = spec.price()
            rows.append(
                {
                    "model": spec.name,
                    "attempts": len(requests) + steps,
                    "stored": len(requests) - len(todo),
                    "calls": len(todo) + steps,
                    "input_tokens": input_tokens,
                    "output_tokens_max": output_tokens,
                    "cost_usd_max": price.cost(input_tokens, output_tokens, batch=spec.batch),
                    "price": price.source + (", batch" if spec.batch else ""),
                }
            )
    return rows


def format_estimate(rows: list[dict[str, Any]]) -> str:
    head = (
        "model",
        "attempts",
        "stored",
        "calls",
        "input tok",
        "output tok (max)",
        "cost USD (max)",
        "price",
    )
    body = [
        (
            r["model"],
            str(r["attempts"]),
            str(r["stored"]),
            str(r["calls"]),
            f"{r['input_tokens']:,}",
            f"{r['output_tokens_max']:,}",
            f"{r['cost_usd_max']:.2f}",
            r["price"],
        )
        for r in rows
    ]
    total = sum(r["cost_usd_max"] for r in rows)
    calls = sum(r["calls"] for r in rows)
    lines = aligned_lines(head, body)
    lines.append(f"dry run: {calls} calls, at most {total:.2f} USD; nothing was sent")
    return "\n".join(lines)
