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


@lru_cache(maxsize=64)
def _csr_template(n: int) -> csr_matrix:
    """An empty n x n CSR matrix with int32 indices, built (and checked) by scipy once."""
    empty = np.zeros(0, dtype=np.int32)
    return csr_matrix((np.zeros(0), empty, np.zeros(n + 1, dtype=np.int32)), shape=(n, n))


def _square_csr(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, n: int) -> csr_matrix:
    """``csr_matrix((data, indices, indptr), shape=(n, n))`` for arrays built here.

    scipy's constructor checks the index dtypes and the layout on every call (about
    12 us, twice per candidate); the arrays made in this module are float64 data and
    int32 indices in a valid layout by construction, so they go into a copy of a
    checked template instead. ``tests/test_maze_generator_identity.py`` pins the trees.
    """
    graph: csr_matrix = csr_matrix.__new__(csr_matrix)
    graph.__dict__.update(_csr_template(n).__dict__)
    graph.data, graph.indices, graph.indptr = data, indices, indptr
    return graph


@lru_cache(maxsize=64)
def _subdivided_layout(rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    """The fixed parts of :func:`_subdivided_graph`: per wall, its two cells as node
    numbers of the subdivided graph (an (m, 2) array), and the row pointers (two entries
    for each wall's row, none for the cells' rows)."""
    u, v = grid_edges(rows, cols)
    n, m = rows * cols, u.shape[0]
    ends = np.stack([u, v], axis=1).astype(np.int32) + np.int32(m)
    indptr = np.concatenate([np.arange(0, 2 * m + 1, 2), np.full(n, 2 * m)]).astype(np.int32)
    for a in (ends, indptr):
        a.setflags(write=False)
    return ends, indptr


def _subdivided_graph(rows: int, cols: int, weights: np.ndarray, order: np.ndarray) -> csr_matrix:
    """The grid with every wall split by a node of its own, laid out in ``order``.

    Wall e = (u, v) becomes node ``rank(e)`` (its position in ``order``) whose row holds
    its two cells, both with e's weight. The two are stored, and so sorted (stably),
    next to each other: Kruskal first joins the new node to u (the node is alone, so
    that is always taken), then joins it to v exactly when it would accept e in the
    grid, so the tree is the same whatever ``order`` is, and e is in it when its row
    keeps both entries. What the order changes is the work: scipy stable-sorts the
    weights as they are stored, and weights stored nearly ascending (see
    :func:`_nearly_sorted_order`) are one fast pass of its merge sort instead of a
    full sort. The graph is built with two gathers and a copy of cached row pointers.
    """
    ends, indptr = _subdivided_layout(rows, cols)
    m = ends.shape[0]
    stored = weights.take(order)
    data = np.empty(2 * m)
    data[0::2] = stored
    data[1::2] = stored
    # ``take``, not ``ends[order]``: numpy's fancy indexing of rows costs ten times more.
    # scipy consumes the arrays (overwrite=True below): the cached pointers go in as a copy
    return _square_csr(data, ends.take(order, axis=0).ravel(), indptr.copy(), m + rows * cols)


def _nearly_sorted_order(weights: np.ndarray) -> np.ndarray:
    """A stable order of the walls by the top 16 bits of their weight (a radix sort).

    About ten times cheaper than a full sort of 3,120 doubles, and all scipy needs to
    finish the sort quickly (the walls out of place are the few sharing a 16-bit
    prefix, each next to its place). Stable on a function of the weight: walls of equal
    weight keep their ``grid_edges`` order, which is how Kruskal on the plain grid
    breaks the tie (scipy's sort is stable too, by position), so ties need no fallback.
    """
    bits = np.ascontiguousarray(weights, dtype=np.float64).view(np.uint64)
    # a weight 1 + x with x in [0, 1) keeps x in its 52-bit mantissa: bits 36..51 are
    # x's leading 16 bits (2.0, the only other weight, gets key 0: order, not ties)
    return np.argsort((bits >> np.uint64(36)).astype(np.uint16), kind="stable")


def kruskal_tree(rows: int, cols: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A random spanning tree of the grid as its edges (u, v), u < v, sorted by (u, v).

    Kruskal's algorithm over random edge weights (scipy's, in C) is the classic
    randomised maze; see :func:`kruskal_mask`.
    """
    u, v = grid_edges(rows, cols)
    in_tree = kruskal_mask(rows, cols, rng)
    return u[in_tree], v[in_tree]


def kruskal_mask(rows: int, cols: int, rng: np.random.Generator) -> np.ndarray:
    """Which walls of ``grid_edges`` a random spanning tree keeps (boolean mask).

    The weights are drawn in ``grid_edges`` order, so the tree is fixed by the
    generator's state: it is Kruskal's tree on the plain grid (:func:`_plain_kruskal`,
    ties broken in ``grid_edges`` order), found on the faster layout of
    :func:`_subdivided_graph` stored in :func:`_nearly_sorted_order`.
    """
    return _kruskal_padded(rows, cols, rng)[:-1]


def _kruskal_padded(rows: int, cols: int, rng: np.random.Generator) -> np.ndarray:
    """:func:`kruskal_mask` with one more wall, never in the tree: the sentinel that
    :func:`_slot_layout` gives a side of the grid without a wall."""
    m = grid_edges(rows, cols)[0].shape[0]
    weights = rng.random(m)
    weights += 1.0
    order = _nearly_sorted_order(weights)
    indptr = minimum_spanning_tree(_subdivided_graph(rows, cols, weights, order), overwrite=True).indptr
    in_tree = np.zeros(m + 1, dtype=bool)
    # wall rank i kept both its entries (node to u, node to v) when it is in the tree
    in_tree[order] = indptr[1 : m + 1] - indptr[:m] == 2
    return in_tree


def _plain_kruskal(rows: int, cols: int, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Kruskal on the grid itself: the reference the subdivided layout reproduces."""
    template = _grid_csr(rows, cols)
    graph = csr_matrix((weights, template.indices.copy(), template.indptr.copy()), shape=template.shape)
    tree = minimum_spanning_tree(graph, overwrite=True)
    # the tree keeps the grid's upper-triangular, row-sorted layout: rows and column
    # indices are already the sorted edge list
    u = np.repeat(np.arange(tree.shape[0], dtype=np.int32), np.diff(tree.indptr))
    return u, tree.indices.astype(np.int32)


@lru_cache(maxsize=64)
def _ones(size: int) -> np.ndarray:
    """A read-only array of ones (the weights of an unweighted search graph)."""
    ones = np.ones(size)
    ones.setflags(write=False)
    return ones


@lru_cache(maxsize=64)
def _slot_layout(rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    """Per cell, its four possible walls in :class:`CuttableTree`'s visiting order (right,
    down, up, left) as indices into ``grid_edges`` (m where the grid has none) and the
    neighbour behind each."""
    u, v = grid_edges(rows, cols)
    n, m = rows * cols, u.shape[0]
    slot_edge = np.full((n, 4), m, dtype=np.intp)
    slot_nbr = np.full((n, 4), -1, dtype=np.int32)
    across = (v - u == 1) if cols > 1 else np.zeros(m, dtype=bool)
    eid = np.arange(m)
    slot_edge[u, np.where(across, 0, 1)] = eid
    slot_nbr[u, np.where(across, 0, 1)] = v
    slot_edge[v, np.where(across, 3, 2)] = eid
    slot_nbr[v, np.where(across, 3, 2)] = u
    for a in (slot_edge, slot_nbr):
        a.setflags(write=False)
    return slot_edge, slot_nbr


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

    def __init__(self, u: np.ndarray, v: np.ndarray, rows: int, cols: int) -> None:
        gu, gv = grid_edges(rows, cols)
        n = rows * cols
        padded = np.zeros(gu.shape[0] + 1, dtype=bool)
        padded[np.searchsorted(gu.astype(np.int64) * n + gv, u.astype(np.int64) * n + v)] = True
        self._build(padded, rows, cols)

    @classmethod
    def from_mask(cls, in_tree: np.ndarray, rows: int, cols: int) -> CuttableTree:
        """The tree of the walls ``in_tree`` marks (a mask over ``grid_edges``)."""
        return cls._from_padded(np.append(in_tree, False), rows, cols)

    @classmethod
    def _from_padded(cls, padded: np.ndarray, rows: int, cols: int) -> CuttableTree:
        """:meth:`from_mask` of a mask with the sentinel wall already appended (False),
        as :func:`_kruskal_padded` returns it."""
        tree = cls.__new__(cls)
        tree._build(padded, rows, cols)
        return tree

    def _build(self, padded: np.ndarray, rows: int, cols: int) -> None:
        # four slots per cell in visiting order: right, down (higher), up, left (lower);
        # a slot's wall is looked up in the mask (the sentinel wall m is never in it)
        slot_edge, slot_nbr = _slot_layout(rows, cols)
        n = rows * cols
        present = padded.take(slot_edge)  # (n, 4) bools, C order
        # ``take`` rather than fancy indexing, ``add.accumulate`` on int32 rather than
        # ``cumsum`` with a dtype: the same arrays, each a few microseconds cheaper
        indices = slot_nbr.ravel().take(np.flatnonzero(present))
        # a cell's four bools (bytes 0 or 1) read as one 32-bit word: times 0x01010101,
        # the top byte is their sum, the cell's degree (``count_nonzero(axis=1)`` costs
        # several times more on 1,600 cells)
        words = present.view(np.uint32).ravel()
        degree = (words * np.uint32(0x01010101)) >> np.uint32(24)
        indptr = np.empty(n + 1, dtype=np.int32)
        indptr[0] = 0
        np.add.accumulate(degree.view(np.int32), out=indptr[1:])
        self._indptr = indptr
        # the search only reads the weights: every tree of a grid shares one array of ones
        self._graph = _square_csr(_ones(4 * n)[: indices.shape[0]], indices, indptr, n)

    def cut(self, a: int, b: int) -> None:
        """Remove the edge a-b (a door locked) from every later search."""
        indices = self._graph.indices
        item, at = indices.item, self._indptr.item
        for row, col in ((a, b), (b, a)):
            # a row holds at most four cells: a loop over them beats a vectorised search
            for i in range(at(row), at(row + 1)):
                if item(i) == col:
                    indices[i] = row

    def bfs(self, source: int) -> tuple[np.ndarray, np.ndarray]:
        """Cells reachable from ``source`` in scipy's undirected order, and their predecessors."""
        return breadth_first_order(self._graph, source, directed=True, return_predecessors=True)


def path_from_predecessors(pred: np.ndarray, source: int, target: int) -> list[int]:
    """The cell path source -> target read off a BFS predecessor array."""
    path = [target]
    node = target
    item = pred.item  # a Python int straight away (``int(pred[node])`` makes a numpy scalar first)
    while node != source:
        node = item(node)
        if node < 0:
            raise ValueError("target is not reachable from source")
        path.append(node)
    path.reverse()
    return path
