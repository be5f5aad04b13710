"""Grid geometry and random spanning trees (Kruskal) for the maze family.

Rooms are named like spreadsheet cells: column letters then row number (A1, B7, and
after Z come AA, AB, ...). Cells are numbered ``row * cols + col`` internally.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.sparse import coo_matrix, csr_matrix
from scipy.sparse.csgraph import breadth_first_order, minimum_spanning_tree


def column_letters(col: int) -> str:
    """0 -> A, 25 -> Z, 26 -> AA (bijective base 26, as in spreadsheets)."""
    if col < 0:
        raise ValueError("column index must be >= 0")
    out = []
    n = col + 1
    while n:
        n, rem = divmod(n - 1, 26)
        out.append(chr(ord("A") + rem))
    return "".join(reversed(out))


@lru_cache(maxsize=64)
def room_names(rows: int, cols: int) -> tuple[str, ...]:
    letters = [column_letters(c) for c in range(cols)]
    return tuple(f"{letters[c]}{r + 1}" for r in range(rows) for c in range(cols))


@lru_cache(maxsize=64)
def room_index(rows: int, cols: int) -> dict[str, int]:
    return {name: i for i, name in enumerate(room_names(rows, cols))}


@lru_cache(maxsize=64)
def grid_edges(rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    """All wall positions of the grid as (u, v) cell arrays with u < v."""
    idx = np.arange(rows * cols).reshape(rows, cols)
    hu, hv = idx[:, :-1].ravel(), idx[:, 1:].ravel()
    vu, vv = idx[:-1, :].ravel(), idx[1:, :].ravel()
    u = np.concatenate([hu, vu]).astype(np.int32)
    v = np.concatenate([hv, vv]).astype(np.int32)
    u.setflags(write=False)
    v.setflags(write=False)
    return u, v


def kruskal_tree(rows: int, cols: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A random spanning tree of the grid: Kruskal's algorithm over random edge weights.

    scipy's minimum spanning tree is Kruskal's algorithm in C; random distinct weights
    make it the classic randomised-Kruskal maze. Returns tree edges (u, v), u < v.
    """
    u, v = grid_edges(rows, cols)
    n = rows * cols
    weights = 1.0 + rng.random(u.shape[0])
    mst = minimum_spanning_tree(coo_matrix((weights, (u, v)), shape=(n, n)).tocsr()).tocoo()
    a, b = mst.row.astype(np.int32), mst.col.astype(np.int32)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    order = np.lexsort((hi, lo))
    return lo[order], hi[order]


def adjacency(n: int, u: np.ndarray, v: np.ndarray) -> csr_matrix:
    """Symmetric unweighted adjacency of an undirected edge list."""
    data = np.ones(2 * u.shape[0], dtype=np.int8)
    return csr_matrix((data, (np.concatenate([u, v]), np.concatenate([v, u]))), shape=(n, n))


def bfs_tree(adj: csr_matrix, source: int) -> tuple[np.ndarray, np.ndarray]:
    """Cells reachable from ``source`` and their BFS predecessors (-9999 = none)."""
    order, pred = breadth_first_order(adj, source, directed=False, return_predecessors=True)
    return order, pred


def path_from_predecessors(pred: np.ndarray, source: int, target: int) -> list[int]:
    """The cell path source -> target read off a BFS predecessor array."""
    path = [target]
    node = target
    while node != source:
        node = int(pred[node])
        if node < 0:
            raise ValueError("target is not reachable from source")
        path.append(node)
    path.reverse()
    return path
