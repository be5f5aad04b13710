"""Grid geometry and random spanning trees (Kruskal) for the maze family.

Rooms are named like spreadsheet cells: column letters then row number (A1, B7, and
after Z come AA, AB, ...). Cells are numbered ``row * cols + col`` internally.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.sparse import csr_matrix
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
    """All wall positions of the grid as (u, v) cell arrays, u < v, sorted by (u, v)."""
    idx = np.arange(rows * cols).reshape(rows, cols)
    u = np.concatenate([idx[:, :-1].ravel(), idx[:-1, :].ravel()]).astype(np.int32)
    v = np.concatenate([idx[:, 1:].ravel(), idx[1:, :].ravel()]).astype(np.int32)
    order = np.lexsort((v, u))
    u, v = u[order], v[order]
    u.setflags(write=False)
    v.setflags(write=False)
    return u, v


@lru_cache(maxsize=64)
def _grid_csr(rows: int, cols: int) -> csr_matrix:
    """The grid graph as an upper-triangular CSR whose data follow ``grid_edges`` order."""
    u, v = grid_edges(rows, cols)
    n = rows * cols
    return csr_matrix((np.ones(u.shape[0]), (u, v)), shape=(n, n))


def random_spanning_tree(rows: int, cols: int, rng: np.random.Generator) -> csr_matrix:
    """A random spanning tree of the grid: Kruskal's algorithm over random edge weights.

    scipy's minimum spanning tree is Kruskal's algorithm in C; random distinct weights
    make it the classic randomised-Kruskal maze. The weights are drawn in
    ``grid_edges`` order, so the tree is fixed by the generator's state. Returns the
    tree as an n x n CSR matrix holding each tree edge once, at (u, v) with u < v.
    """
    template = _grid_csr(rows, cols)
    # overwrite=True: the fresh weights and index copies are scipy's to consume, which
    # saves it a copy of the whole graph per tree
    graph = csr_matrix(
        (1.0 + rng.random(template.data.shape[0]), template.indices.copy(), template.indptr.copy()),
        shape=template.shape,
    )
    return minimum_spanning_tree(graph, overwrite=True)


def tree_edges(tree: csr_matrix) -> tuple[np.ndarray, np.ndarray]:
    """The (u, v) edge arrays of a tree from :func:`random_spanning_tree`, sorted by (u, v).

    The tree keeps the grid's upper-triangular, row-sorted layout, so its rows and
    column indices are already the sorted edge list.
    """
    u = np.repeat(np.arange(tree.shape[0], dtype=np.int32), np.diff(tree.indptr))
    return u, tree.indices.astype(np.int32)


def kruskal_tree(rows: int, cols: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The edges (u, v), u < v, of :func:`random_spanning_tree`."""
    return tree_edges(random_spanning_tree(rows, cols, rng))


class CuttableTree:
    """A tree that locked doors cut, searched breadth-first from any cell.

    The rewind construction needs the breadth-first order of scipy's undirected search
    on the tree minus the doors locked so far (it draws a cell by its position in that
    order). That search visits a cell's higher neighbours, then its lower ones, each
    ascending; a directed CSR listing the neighbours in that very order gives the same
    order without scipy transposing the graph on every call. A cut door becomes a
    self-loop on both of its cells, which the search skips, so cutting is two writes
    instead of a new matrix.
    """

    def __init__(self, u: np.ndarray, v: np.ndarray, n: int) -> None:
        src = np.concatenate([u, v]).astype(np.int64)
        dst = np.concatenate([v, u]).astype(np.int64)
        # per row: higher neighbours first (ranked by themselves), then lower ones (n + cell)
        rank = np.where(dst > src, dst, n + dst)
        order = np.argsort(src * (2 * n) + rank)
        indptr = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(np.bincount(src, minlength=n), out=indptr[1:])
        indices = dst[order].astype(np.int32)
        self._indptr = indptr.tolist()
        self._graph = csr_matrix((np.ones(indices.shape[0]), indices, indptr), shape=(n, n))

    def cut(self, a: int, b: int) -> None:
        """Remove the edge a-b (a door locked) from every later search."""
        indices = self._graph.indices
        for row, col in ((a, b), (b, a)):
            lo, hi = self._indptr[row], self._indptr[row + 1]
            indices[lo + np.flatnonzero(indices[lo:hi] == col)] = row

    def bfs(self, source: int) -> tuple[np.ndarray, np.ndarray]:
        """Cells reachable from ``source`` in scipy's undirected order, and their predecessors."""
        return breadth_first_order(self._graph, source, directed=True, return_predecessors=True)


def without_edges(tree: csr_matrix, edges: list[tuple[int, int]]) -> csr_matrix:
    """The tree with some edges (given low cell first) removed: locked doors cut it."""
    if not edges:
        return tree
    cut = tree.copy()
    for a, b in edges:
        for row, col in ((a, b), (b, a)):
            lo, hi = cut.indptr[row], cut.indptr[row + 1]
            hit = np.flatnonzero(cut.indices[lo:hi] == col)
            cut.data[lo + hit] = 0.0
    cut.eliminate_zeros()
    return cut


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
