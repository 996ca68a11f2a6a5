"""The memory model of cell suppression: what a job will need, from the table's shape alone.

Estimated before any work starts (:meth:`CellSuppression.memory_estimate`, checked against the
job's budget by :mod:`tabsafe.memory`), from quantities read off the grid and its hierarchies
without building anything:

* the dense grid and the problem's arrays (values, masks, costs, the reason of every cell);
* the additive relations (one row per aggregate code and combination of the other variables'
  codes), kept with their transpose and sliced by the audits;
* the fast mode's two eliminations (:mod:`.elimination`: the main one and the one that knows
  the primary cells at their least value), each starting from the basis of the additive tables
  and filling in as cells are published: Python dicts, an entry in a row and in a column;
* the optimal mode's integer program (a covering row per primary cell and relation, partner
  rows per candidate and relation) in HiGHS;
* the hypercube mode's moves (:mod:`.hypercube`): per primary cell at most the cells an inner
  cell adds to, twice over (its own path and its partner's), kept with their signs and checked
  as one sparse product with the relations.

The constants are measured (peak RSS growth of the suppression against the model, on the
benchmark tables of ``bench/bench_memory.py``). The fill-in of the elimination is what grows
fastest: each published margin adds the pivot column's cells to every other basis table its row
touches, so it grows with the number of cells an inner cell adds to (2^7 = 128 in a 7-variable
table with only totals, 12 in area(region > area) × age × citizenship). The model's fill factor
is that column length over 12: 1 on the benchmark tables (whose peaks the model meets within
2×), 10.7 on the demo's 7-variable hypercube, which it puts at 13 GB. That figure is a bound
chosen, not measured: the hypercube's elimination was measured at 3.3 GB after its first
thousand candidates (of about 150,000) and past 8.3 GB, still growing, when stopped (issue #28).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from tabsafe.model.table import Table

__all__ = ["Shape", "hypercube_bytes", "shape", "suppression_bytes"]

#: bytes per grid cell: the dense table, the problem's arrays, the reason and release columns
CELL_BYTES = 400
#: bytes per entry of the relations (CSR and its transpose, and the audits' slices)
RELATION_BYTES = 60
#: bytes per entry of an elimination's basis (a Python dict slot in a row and in a column, the
#: float, the dicts' spare room)
ENTRY_BYTES = 250
#: the column length at which the elimination fills in no more than its basis (measured)
FILL_FREE_COLUMN = 12
#: bytes per entry of the optimal mode's integer program in HiGHS (model, presolve, LP copies, the
#: cuts of its rounds): measured 386 MB growth after 4 rounds and about 840 MB after 25 on the
#: 26,796-cell table (80,652 relation entries)
PROGRAM_BYTES = 2_500
#: bytes per cell of a move (cell and sign, the search's lists, the checking product)
MOVE_BYTES = 60


@dataclass(frozen=True)
class Shape:
    """What the memory model reads off a table.

    Attributes:
        cells: cells of the dense grid.
        inner: non-zero inner cells (at least as many as the threshold rule's primary cells).
        relation_entries: non-zeros of the additive relations.
        support_entries: entries of the basis when every zero cell is published (one column per
            non-zero inner cell, one entry per cell it adds to).
        null_entries: entries of the basis of every additive table (tensor product of chains).
        column: the most cells an inner cell adds to (the basis' longest column).
    """

    cells: int
    inner: int
    relation_entries: int
    support_entries: int
    null_entries: int
    column: int


def shape(table: Table) -> Shape:
    """The :class:`Shape` of ``table``'s grid (no densifying: its stored cells and hierarchies)."""
    from tabsafe.protect.suppression.elimination import chain_basis

    lengths = [len(d.hierarchy.order) for d in table.dimensions]
    n = int(np.prod(lengths, dtype=np.int64)) if lengths else 1
    relations = 0
    null = 1
    column = 1
    depth_of: list[np.ndarray] = []
    for d, size in zip(table.dimensions, lengths):
        h = d.hierarchy
        per_agg = sum(1 + len(h.children(c)) for c in h.order if not h.is_leaf(c))
        relations += (n // size) * per_agg
        null *= sum(len(v) for v in chain_basis(h))
        depth_of.append(np.array([h.depth(c) + 1 for c in h.order], dtype=np.int64))
        column *= int(depth_of[-1].max())
    counts = np.asarray(table.counts)
    inner = np.asarray(table.leaf_mask) & (counts != 0)
    support = np.ones(int(inner.sum()), dtype=np.int64)
    for axis, depths in enumerate(depth_of):
        support *= depths[np.asarray(table.positions(axis))[inner]]
    return Shape(n, int(inner.sum()), int(relations), int(support.sum()), int(null), column)


def suppression_bytes(s: Shape, *, zeros_published: bool, optimal: bool, primary: int | None = None) -> int:
    """Bytes a secondary suppression of a table of shape ``s`` needs (module docstring).

    ``primary`` is the number of primary cells when known (else every non-zero inner cell is
    counted as one, an upper bound for the threshold rule)."""
    basis = s.support_entries if zeros_published else s.null_entries
    fill = max(1.0, s.column / FILL_FREE_COLUMN)
    need = s.cells * CELL_BYTES + s.relation_entries * RELATION_BYTES + 2 * basis * ENTRY_BYTES * fill
    if optimal:
        # covering rows of the primary cells and partner rows of the candidates, each over the
        # cells of a relation: about the relations' entries, twice
        need += 2 * s.relation_entries * PROGRAM_BYTES
    return int(need)


def hypercube_bytes(s: Shape, *, primary: int | None = None) -> int:
    """Bytes the hypercube mode needs on a table of shape ``s`` (module docstring); ``primary``
    as in :func:`suppression_bytes`."""
    moves = (s.inner if primary is None else primary) * 2 * s.column
    return int(s.cells * CELL_BYTES + s.relation_entries * RELATION_BYTES + moves * MOVE_BYTES)
