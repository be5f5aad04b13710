"""Adaptive scan for a world study's critical point sc*: bisect instead of scanning every cell.

Why: sc* (``phase.critical_point``) only reads the two cells that bracket the first
crossing of p = 1/2; every other cell of a fine scan is paid for (50 episodes each) and
only confirms that p is well above or well below 1/2 there. If p(sc) falls with sc, the
bracket can be found by bisection: test both ends of the range, then always the midpoint
of the current bracket, until its two cells are adjacent. Over a range of R cells that
is about ``2 + log2(R)`` cells instead of R, a third or less of the fine scan's episodes
for R of about 25 (``benchmarks/adaptive.py`` part B measures it).

The bracket is the one ``critical_point`` itself would read off the tested cells (the
first tested cell with p <= 1/2 and the tested cell before it), so the scan's readout and
its interval are the analysis' own, run on the cells the scan chose. A range whose ends do
not bracket a crossing (the lower end already at or below 1/2, or no tested cell at or
below it) stops at once and says which: bisection cannot find what the ends do not
enclose, and guessing a wider range is the caller's decision.

Pure: :func:`next_cells` maps what was tested to what to test next (the flow runs the
episodes); :func:`simulate_scan` drives it against a known curve for the benchmark and
the calibration suite (``calibration/adaptive_cases.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from horizonbench.analysis.phase import critical_point, critical_point_bootstrap

#: the scan found adjacent bracketing cells (within ``target_width``)
BRACKETED = "bracketed"
#: the lower end already has p <= 1/2: the crossing is at or below the range
STARTS_BELOW = "starts below"
#: no tested cell has p <= 1/2, the upper end included: the crossing is above the range
NEVER_CROSSES = "never crosses"


@dataclass(frozen=True)
class Stop:
    """Why the scan needs no more cells: one of the module's three reasons, with the
    bracket when there is one (a caller can tell a finished scan from a failed one)."""

    reason: str
    bracket: tuple[int, int] | None = None


Tested = Mapping[int, tuple[int, int]]


def _rates(tested: Tested, lo: int, hi: int) -> tuple[list[int], list[float]]:
    """Sorted cells inside [lo, hi] and their success rates; cells outside the range or
    with no episodes are ignored, since they carry nothing the bracket may use."""
    cells = sorted(int(c) for c, (_, n) in tested.items() if lo <= c <= hi and n > 0)
    rates = []
    for c in cells:
        x, n = tested[c]
        if not 0 <= x <= n:
            raise ValueError(f"cell {c}: need 0 <= successes <= episodes, got {x} of {n}")
        rates.append(x / n)
    return cells, rates


def bracket(tested: Tested, lo: int, hi: int) -> tuple[int, int] | Stop:
    """The cells ``critical_point`` would bracket the crossing with, among the tested
    ones: the first with p <= 1/2 and the tested cell before it; a :class:`Stop` when the
    tested cells do not bracket one (so bisection has nothing to narrow)."""
    cells, rates = _rates(tested, lo, hi)
    below = [i for i, p in enumerate(rates) if p <= 0.5]
    if not below:
        return Stop(NEVER_CROSSES)
    j = below[0]
    if j == 0:
        return Stop(STARTS_BELOW)
    return cells[j - 1], cells[j]


def next_cells(tested: Tested, lo: int, hi: int, target_width: float = 1.0) -> list[int] | Stop:
    """The cells to test next, or why the scan is done.

    ``tested`` maps a cell to (successes, episodes). The two ends come first (both at
    once: neither can be skipped), then one midpoint at a time, because each midpoint
    decides which half the next one lies in.
    """
    lo, hi = int(lo), int(hi)
    if hi <= lo:
        raise ValueError(f"need lo < hi, got [{lo}, {hi}]")
    if target_width < 1:
        raise ValueError(f"target_width must be >= 1 (cells are integers), got {target_width}")
    ends = [c for c in (lo, hi) if c not in tested or tested[c][1] <= 0]
    if ends:
        return ends
    found = bracket(tested, lo, hi)
    if isinstance(found, Stop):
        return found
    a, b = found
    if b - a <= target_width:
        return Stop(BRACKETED, found)
    return [(a + b) // 2]


@dataclass(frozen=True)
class ScanResult:
    """One simulated scan: what it cost, where it looked, and the analysis' readout."""

    episodes: int
    #: the tested cells in the order the scan chose them
    cells: tuple[int, ...]
    stop: Stop
    #: ``critical_point`` of the tested cells (NaN when the range brackets no crossing)
    value: float
    #: ``critical_point_bootstrap``'s percentile interval over the tested cells
    low: float
    high: float


def episodes_table(tested: Tested) -> pd.DataFrame:
    """The tested cells as the episodes table ``critical_point_bootstrap`` reads (one row
    per episode, successes first: the bootstrap only counts them per cell)."""
    sc: list[int] = []
    success: list[bool] = []
    for c in sorted(tested):
        x, n = tested[c]
        sc += [int(c)] * n
        success += [True] * x + [False] * (n - x)
    return pd.DataFrame({"sc": np.asarray(sc, dtype="int64"), "success": np.asarray(success, dtype=bool)})


def simulate_scan(
    p_of_sc: Callable[[int], float],
    lo: int,
    hi: int,
    n: int,
    rng: np.random.Generator,
    target_width: float = 1.0,
    n_boot: int = 2000,
) -> ScanResult:
    """Run the scan against a known curve, ``n`` episodes per tested cell, and read sc*
    and its bootstrap interval off the tested cells as the analysis would."""
    if n < 1:
        raise ValueError(f"n must be positive, got {n}")
    tested: dict[int, tuple[int, int]] = {}
    order: list[int] = []
    while True:
        step = next_cells(tested, lo, hi, target_width)
        if isinstance(step, Stop):
            break
        for c in step:
            tested[c] = (int(rng.binomial(n, float(p_of_sc(c)))), n)
            order.append(c)
    cells = sorted(tested)
    value = critical_point(cells, [tested[c][0] / tested[c][1] for c in cells]).value
    low = high = math.nan
    if step.reason == BRACKETED:
        boot = critical_point_bootstrap(episodes_table(tested), n_boot=n_boot, seed=int(rng.integers(2**31)))
        low, high = boot.low, boot.high
    return ScanResult(sum(m for _, m in tested.values()), tuple(order), step, float(value), low, high)


def fine_scan(
    p_of_sc: Callable[[int], float], lo: int, hi: int, n: int, rng: np.random.Generator, n_boot: int = 2000
) -> ScanResult:
    """Every integer cell of [lo, hi] at ``n`` episodes: the design the scan replaces,
    read the same way (the benchmark's and the calibration's baseline)."""
    tested = {c: (int(rng.binomial(n, float(p_of_sc(c)))), n) for c in range(int(lo), int(hi) + 1)}
    found = bracket(tested, lo, hi)
    stop = found if isinstance(found, Stop) else Stop(BRACKETED, found)
    cells = sorted(tested)
    value = critical_point(cells, [tested[c][0] / n for c in cells]).value
    low = high = math.nan
    if stop.reason == BRACKETED:
        boot = critical_point_bootstrap(episodes_table(tested), n_boot=n_boot, seed=int(rng.integers(2**31)))
        low, high = boot.low, boot.high
    return ScanResult(n * len(tested), tuple(cells), stop, float(value), low, high)
