"""The calibration suite at full size: coverage, false-positive and power figures (``make bench``).

Every case of ``horizonbench.calibration`` (one per analysis output: L0 and eps interval
coverage, sc* coverage, the transition test and W_trans, the tau_W - tau_A lag, the
collapse-type shares, compare's ``moved`` flag, and any case another module registers)
runs ``--studies`` simulated studies per arm (default 200), each seeded from a
``numpy.random.SeedSequence`` keyed by (seed, case, arm), so the figures are the same bytes
on every machine. The table gives per arm the measured rate, its Wilson 95% interval over
the studies, the target and the verdict (``pass``: the rate lies in the target; ``fail``:
even its interval misses it; ``unclear``: in between; ``report``: a figure without a bar),
then the side figures each case averages (biases, widths, the other rules compared).

A report, not a test: it always exits 0 (the small versions are in
``tests/test_calibration.py``).

    .venv/bin/python benchmarks/calibration.py                    # all cases, 200 studies
    .venv/bin/python benchmarks/calibration.py --cases "sc*"      # the cases whose name holds it
    .venv/bin/python benchmarks/calibration.py --studies 50 --jobs 2
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from common import log, print_table

from horizonbench.calibration import load_cases, results_table, run_case


def _run(name: str, studies: int, seed: int) -> tuple[list[dict[str, object]], float]:
    start = time.process_time()
    result = run_case(load_cases()[name], n_studies=studies, seed=seed)
    return results_table([result]), time.process_time() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=200, help="simulated studies per arm (200)")
    parser.add_argument("--seed", type=int, default=0, help="root seed (0)")
    parser.add_argument("--cases", default="", help="only the cases whose name contains this text")
    parser.add_argument("--jobs", type=int, default=1, help="cases run in parallel processes (1)")
    args = parser.parse_args(argv)

    names = [n for n in load_cases() if args.cases in n]
    log(f"calibration: {len(names)} case(s), {args.studies} studies per arm")
    wall = time.perf_counter()
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            outs = list(pool.map(_run, names, [args.studies] * len(names), [args.seed] * len(names)))
    else:
        outs = [_run(n, args.studies, args.seed) for n in names]

    print()
    print(f"Calibration suite ({args.studies} studies per arm, seed {args.seed})")
    lines = []
    sides = []
    for (rows, cpu), name in zip(outs, names, strict=True):
        for row in rows:
            lines.append(
                (
                    name,
                    str(row["arm"]),
                    str(row["measure"]),
                    str(row["target"]),
                    f"{row['measured']:.3f}",
                    f"{row['low']:.3f}-{row['high']:.3f}",
                    str(row["undefined"]),
                    str(row["verdict"]),
                )
            )
            extra = {k[5:]: v for k, v in row.items() if k.startswith("mean ")}
            if extra:
                text = ", ".join(
                    f"{k} {v:+.3f}" if "bias" in k or "error" in k else f"{k} {v:.3f}"
                    for k, v in extra.items()
                )
                sides.append(f"  {name} [{row['arm']}]: mean {text}")
        sides.append(f"  {name}: {cpu:.1f} CPU-s")
    head = ("case", "arm", "measure", "target", "measured", "Wilson 95%", "undef", "verdict")
    print_table(head, lines, left=(0, 1, 2, 7))
    print()
    print("Side figures (means over the studies of an arm):")
    print("\n".join(sides))
    print(f"\nwall {time.perf_counter() - wall:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
