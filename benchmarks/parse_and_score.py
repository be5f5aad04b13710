"""How fast one answer is read and judged: ``parse_plan`` and ``score_plan`` per answer.

Rows of the throughput table (``benchmarks/throughput.py``), median of interleaved runs,
on certified 40x40, B=2 mazes: ``score_plan`` on gold plans (noise 0 and 1.0) and on the
noisy baseline's answers (eps 0.05: mostly failures, which need the full search for
their progress ratio), and ``parse_plan`` on formatted gold plans against the reader
without its fast path (``parse_plan_general``, this pair's baseline). Each measure
repeats its inputs for at least a few seconds. The score stage as a whole is
``benchmarks/scoring.py``.

    .venv/bin/python benchmarks/parse_and_score.py [--quick] [--repeat N]

A report, not a test: it always exits 0.
"""

from __future__ import annotations

from common import quiet_environ

quiet_environ()

import argparse  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from common import Measure, print_ratio_table, run_rounds  # noqa: E402
from maze_reference import maze_params  # noqa: E402

#: (instances per noise level, seconds each measure repeats its inputs for at least)
SIZES = {"full": (100, 3.0), "quick": (20, 0.5), "smoke": (5, 0.05)}


def scoring_inputs(noise: float, count: int, seed: int) -> list[tuple[list[str], Any, str]]:
    from horizonbench.datasets.maze.family import gold_plan
    from horizonbench.datasets.maze.simulator import format_plan
    from horizonbench.datasets.shards import generate_shard

    rows = [r for _, _, r, rej in generate_shard("maze", maze_params(noise), seed, 0, count) if rej is None]
    return [(list(r["facts"]), gold_plan(r), format_plan(gold_plan(r))) for r in rows]


def _repeat(inputs: list[Any], min_seconds: float, one: Any) -> tuple[float, int, int, float]:
    """Run ``one(item)`` over ``inputs`` until ``min_seconds`` pass: (rate, done, hits, seconds)."""
    done, hits = 0, 0
    t0 = time.perf_counter()
    while True:
        hits += sum(bool(one(item)) for item in inputs)
        done += len(inputs)
        dt = time.perf_counter() - t0
        if dt >= min_seconds:
            return done / dt, done, hits, dt


def time_scoring(
    inputs: list[tuple[list[str], Any, Any]], min_seconds: float
) -> tuple[float, dict[str, Any]]:
    """Score each (facts, gold, plan) repeatedly for at least ``min_seconds``."""
    from horizonbench.core.types import ParsedAnswer
    from horizonbench.datasets.maze.simulator import score_plan

    def one(item: tuple[list[str], Any, Any]) -> bool:
        facts, gold, plan = item
        return score_plan(facts, gold, ParsedAnswer(plan=tuple(plan))).success

    rate, done, successes, dt = _repeat(inputs, min_seconds, one)
    return rate, {"attempts": done, "successes": successes, "seconds": round(dt, 3)}


def gold_answers(inputs: list[tuple[list[str], Any, str]]) -> list[tuple[list[str], Any, Any]]:
    return [(facts, gold, gold) for facts, gold, _ in inputs]


def noisy_inputs(
    inputs: list[tuple[list[str], Any, str]], eps: float, seed: int
) -> list[tuple[list[str], Any, Any]]:
    """The same instances with answers from the noisy baseline: mostly failures, which
    need the full search for their progress ratio (successes skip it)."""
    import numpy as np

    from horizonbench.datasets.maze.baselines import noisy_plan
    from horizonbench.datasets.maze.facts import world_from_facts

    rng = np.random.default_rng(seed)
    return [(facts, gold, noisy_plan(gold, world_from_facts(facts), rng, eps)) for facts, gold, _ in inputs]


def time_parsing(
    inputs: list[tuple[list[str], Any, str]], min_seconds: float, general: bool = False
) -> tuple[float, dict[str, Any]]:
    """Answers parsed per second; ``general``: without the fast path for the usual form."""
    from horizonbench.datasets.maze.rules import ACTIONS
    from horizonbench.datasets.plan_parser import parse_plan, parse_plan_general

    parse = parse_plan_general if general else parse_plan

    def one(item: tuple[list[str], Any, str]) -> bool:
        _, gold, text = item
        return parse(text, task_actions=ACTIONS).plan == gold

    rate, done, matched, dt = _repeat(inputs, min_seconds, one)
    return rate, {"answers": done, "matched_gold": matched, "seconds": round(dt, 3)}


def measures(size: str, reps: int) -> list[Measure]:
    """The scoring and parsing rows, in the table's order."""
    n_score, min_s = SIZES[size]
    out: list[Measure] = []
    for noise in (0.0, 1.0):
        inputs = scoring_inputs(noise, n_score, 99)
        tag = f"noise {noise:g}"
        answers = gold_answers(inputs)
        time_scoring(answers[:5], 0.0)
        (rounds,) = run_rounds(
            reps, {f"score_plan {tag}": lambda r, i=answers: time_scoring(i, min_s)}
        ).values()
        out.append(
            Measure.of_rounds(f"score_{tag}", f"score_plan on gold plans ({tag})", "attempts/s", rounds)
        )
        if noise != 0.0:
            continue
        noisy = noisy_inputs(inputs, 0.05, 7)
        res = run_rounds(reps, {"score noisy": lambda r, i=noisy: time_scoring(i, min_s)})
        label = "score_plan on noisy answers, eps 0.05 (noise 0)"
        out.append(Measure.of_rounds("score_noisy", label, "attempts/s", res["score noisy"]))
        res = run_rounds(
            reps,
            {
                "parse_general": lambda r, i=inputs: time_parsing(i, min_s, general=True),
                "parse_plan": lambda r, i=inputs: time_parsing(i, min_s),
            },
        )
        label = "parse_plan_general on formatted gold plans (the reader without its fast path)"
        out.append(Measure.of_rounds("parse_general", label, "answers/s", res["parse_general"]))
        label = "parse_plan on formatted gold plans (fast path)"
        out.append(
            Measure.of_rounds("parse", label, "answers/s", res["parse_plan"], baseline="parse_general")
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer instances, shorter measures")
    ap.add_argument(
        "--smoke", action="store_true", help="the smallest sizes: does it run (figures meaningless)"
    )
    ap.add_argument("--repeat", type=int, default=3, help="runs per measure (median reported)")
    args = ap.parse_args(argv)
    size = "smoke" if args.smoke else "quick" if args.quick else "full"
    rows = measures(size, max(1, args.repeat))
    print()
    print_ratio_table(rows, ("x paper", 1.0))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
