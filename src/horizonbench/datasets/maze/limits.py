"""What a maze request can reach, checked before a run spends its candidates on it.

Two impossibilities are common and costly: L bins beyond the longest plan a small
grid allows (a 3x3 grid never needs 50 steps; the sampler would draw its whole
``max_candidates`` before reporting the bins short), and more keys than the rewind
construction ever places on a grid (it stops when the current cell is walled in;
10x11 grids hold about a dozen, never 50).
"""

from __future__ import annotations

from horizonbench.datasets.maze.generator import generate_maze

#: mazes drawn (no certificate) before a key count is called unreachable; fewer on
#: big grids (``probes``), where a maze costs more and walls are rarer
KEY_PROBES = 256
_PROBE_CELLS = 200_000


def probes(cells: int) -> int:
    return max(16, min(KEY_PROBES, _PROBE_CELLS // max(cells, 1)))


def plan_length_bounds(rows: int, cols: int, num_keys: int, decoys: int, exact: bool) -> tuple[int, int]:
    """The shortest and longest gold plan (its length L, ``start`` and ``rescue``
    included) any maze of these parameters can have.

    Longest: an optimal plan never visits the same (room, keys held, doors open) state
    twice, so between two events that change keys or doors it moves through at most
    ``cells - 1`` rooms. With ``k`` keys and ``k`` doors in the maze (path and decoys)
    there are at most ``2k`` such events (a pick-up each, a use_key/unlock pair each).
    Shortest: each of the ``B`` doors on the path costs a pick-up, use_key, unlock and
    the move through it (``B`` is exact unless ``num_keys_mode`` is ``at_most``).
    """
    cells = rows * cols
    k = num_keys + decoys
    longest = 2 + k + 2 * k + (2 * k + 1) * (cells - 1)
    on_path = num_keys if exact else 0
    shortest = 2 + 4 * on_path if on_path else 3
    return shortest, longest


def unreachable_bins(edges: list[int], width: int, bounds: tuple[int, int]) -> list[tuple[int, int]]:
    """The bins ``[lo, lo + width)`` that hold no length within ``bounds``."""
    shortest, longest = bounds
    return [(lo, lo + width - 1) for lo in edges if lo > longest or lo + width - 1 < shortest]


def most_keys_placed(rows: int, cols: int, num_keys: int, decoys: int, seed: int) -> int | None:
    """``None`` when some probe maze places ``num_keys`` keys; else the most any placed.

    The probe stops at the first maze that reaches the count, so a feasible request
    costs a few milliseconds; only an unreachable one draws all ``KEY_PROBES``.
    """
    most = 0
    for i in range(probes(rows * cols)):
        maze = generate_maze(rows, cols, num_keys, 0.0, 0.0, decoys, seed + i)
        if maze.num_keys >= num_keys:
            return None
        most = max(most, maze.num_keys)
    return most


def request_problems(params: object, sampling: object) -> list[str]:
    """Why a run of these maze params and sampling cannot get what it asks, as
    ``field: reason`` lines (empty when nothing is known to be impossible).

    ``params`` is a validated ``MazeParams``, ``sampling`` a ``SamplingSpec``.
    """
    p = params
    rows, cols, keys = p.grid_rows, p.grid_cols, p.num_keys  # type: ignore[attr-defined]
    decoys = keys if p.decoy_doors is None else p.decoy_doors  # type: ignore[attr-defined]
    exact = p.num_keys_mode == "exact"  # type: ignore[attr-defined]
    grid = f"a {rows}x{cols} grid"
    problems = []
    if exact and keys:
        most = most_keys_placed(rows, cols, keys, decoys, seed=0)
        if most is not None:
            problems.append(
                f"params.num_keys: {keys} keys are more than {grid} holds: none of "
                f"{probes(rows * cols)} mazes placed them (the most: {most}); ask for fewer, "
                "or set num_keys_mode: at_most"
            )
    bins = getattr(sampling, "bins", None)
    if bins is not None:
        bounds = plan_length_bounds(rows, cols, keys, decoys, exact)
        out = unreachable_bins(bins.edges(), bins.width, bounds)
        plural = "" if keys == 1 else "s"
        if out:
            shown = ", ".join(f"{lo}-{hi}" for lo, hi in out[:6]) + (" ..." if len(out) > 6 else "")
            problems.append(
                f"sampling.bins: {len(out)} of {len(bins.edges())} L bins ({shown}) lie outside the "
                f"plan lengths {grid} with {keys} key{plural} allows ({bounds[0]} to {bounds[1]}); "
                "narrow bins.min/bins.max"
            )
    return problems
