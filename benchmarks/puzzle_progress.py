"""What the puzzles' distance-based progress costs in scoring, and what it gives a random walk.

Per family and size: the mean time of ``family.score`` on whole-plan answers of the
``noisy`` (eps 0.1) and ``random`` baselines, against the replay alone
(``rollout.score_plan``, what scoring cost before the progress measures), on fresh answers
(no cache warm for their states), and the mean ``progress_ratio``, ``best_progress`` and
``legal_move_coverage`` of the random walks. One core, in this process.

A report, not a test: it always exits 0.

    .venv/bin/python benchmarks/puzzle_progress.py
"""

from __future__ import annotations

import time

import numpy as np
from common import print_table

from horizonbench.core.registry import get_family
from horizonbench.datasets.puzzles.rollout import score_plan

#: (family, generation params) measured
CASES = (
    ("hanoi", {"ns": [6, 8]}),
    ("checkers", {"ns": [4, 6, 10], "max_configurations_per_n": 10}),
    ("river_crossing", {"ns": [4, 5], "capacities": [3]}),
    ("blocks_world", {"ns": [4, 5, 6], "per_n": 10, "alpha": 1}),
    ("blocks_world", {"ns": [8], "per_n": 10, "alpha": 1}),
    ("blocks_world", {"ns": [10], "per_n": 10, "alpha": 1}),
)
SAMPLES = 3


def main() -> None:
    lines = []
    for name, params in CASES:
        fam = get_family(name)
        p = fam.params_model.model_validate(params)
        rows = [
            c.row
            for i in range(min(40, fam.candidate_count(p)))
            if (c := fam.generate_candidate(p, 1, i)).row
        ]
        for kind in ("noisy", "random"):
            rng = np.random.default_rng(1)
            answers = [
                (r, fam.parse_answer(fam.offline_answer(r, kind, rng, 0.1)))
                for r in rows
                for _ in range(SAMPLES)
            ]
            t = time.perf_counter()
            for r, a in answers:
                moves = fam.move_list(s.arg for s in a.plan) if a.plan else []
                score_plan(fam.puzzle, fam.start(r), fam.goal(r), fam.rules_of(r), list(r["moves"]), moves)
            replay = (time.perf_counter() - t) / len(answers)
            t = time.perf_counter()
            scores = [fam.score(r, a) for r, a in answers]
            took = (time.perf_counter() - t) / len(answers)
            prog = np.mean([s.progress_ratio for s in scores])
            best = np.mean([s.extra["best_progress"] for s in scores])
            cover = np.mean([s.extra["legal_move_coverage"] for s in scores])
            lines.append(
                (name, str(params["ns"]), kind, str(len(answers)), f"{took * 1e3:.2f}", f"{replay * 1e3:.2f}")
                + (f"{prog:.3f}", f"{best:.3f}", f"{cover:.3f}")
            )
    head = ("family", "ns", "kind", "n", "score ms", "replay ms", "progress", "best", "coverage")
    print_table(head, lines, left=(0, 1, 2))


if __name__ == "__main__":
    main()
