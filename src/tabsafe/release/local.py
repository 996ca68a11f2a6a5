"""Local programs of the release audit: a cell's interval from a program over the cells around it.

The release audit (:mod:`tabsafe.release.audit`, seed 000 §5.3) needs, for every cell the
published tables do not give exactly, its least and largest value over all tables together. On a
rounded or perturbed release a feasible table is known before any program (the published values,
or a central point), and its additive moves settle most cells (issue #28). The cells they leave
need other tables, and a program over the whole release costs a quarter of a second or more per
cell on 45,000 cells (seconds for the first), and sometimes minutes.

Here each such cell gets two small programs instead: the cells of a *box* around it
(:func:`release_box`) are free within their bounds, every other cell stays at the feasible
table's value, and every relation that holds a free cell is kept. Any optimum is then a table
that satisfies every relation of the release, so the values the programs reach are inner bounds
of the cell's feasibility interval — enough to show a cell wide enough, never to show it narrow.
A cell narrower than required is shown so by an outer bound: the programs over the relations that
hold the cell alone (:func:`outer_interval`), a relaxation of the intruder's. When that interval is
no wider than what the tables found reach, the two are the cell's interval; otherwise the audit's
programs over the whole release decide.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import scipy.sparse as sp

from tabsafe import progress
from tabsafe.model.hierarchy import Hierarchy
from tabsafe.model.release_cells import ReleaseCells
from tabsafe.solver import Extreme, ExtremeSolver

__all__ = ["BOXES", "WIDTH_TOL", "Narrow", "outer_interval", "release_box", "settle_locally"]

#: how far from the required width a width may fall and still count as that width: programs over
#: tens of thousands of cells carry HiGHS's tolerances (a width of 1 came out 0.99999933 on the
#: demo's 45,472-cell randomly rounded release); the suppression audits allow the same
WIDTH_TOL = 1e-6

#: the boxes tried, smallest first: (partners per code, variables with at most this many codes
#: taken whole). Measured on the demo's randomly rounded area × age × sex and area × age ×
#: citizenship release (45,472 cells, base 3): of 3,132 cells the moves leave, the two settle all
#: but 167 in about 50 s (the small box about 4 ms a cell, the large one about 55 ms). Partners of
#: the codes above the cell's too settled more in the small box (all but 433) but took longer in
#: all, and left cells whose programs over the whole release ran for minutes.
BOXES: tuple[tuple[int, int], ...] = ((2, 8), (4, 32))


class Relations(Protocol):
    """The audit's program over the unknown cells ``U``: ``A_U y = b``."""

    U: np.ndarray
    A_U: sp.csr_matrix
    b: np.ndarray


@dataclass(frozen=True)
class Narrow:
    """A cell shown narrower than required by its own relations (:func:`outer_interval`), its
    interval exact: the relaxation's bounds are reached by tables that satisfy every relation.

    Attributes:
        cell: the release cell.
        rows: the relations (rows of the audit's program) the bounds came from.
        low, high: the relaxation's optima (their duals name the published cells that hold it).
    """

    cell: int
    rows: np.ndarray
    low: Extreme
    high: Extreme


def _descend(h: Hierarchy, code: str, value: dict[str, float], partners: int) -> list[str]:
    """Below ``code``, level by level, the ``partners`` children of each code with the largest
    values (the first child when none has a value)."""
    out: list[str] = []
    frontier = [code]
    while frontier:
        nxt: list[str] = []
        for c in frontier:
            kids = sorted(h.children(c), key=lambda k: -value.get(k, 0.0))
            nxt += kids[:partners]
        out += nxt
        frontier = nxt
    return out


def _codes(cells: ReleaseCells, cell: int, values: np.ndarray, partners: int,
           small: int) -> list[list[set[str]]]:
    """Per table and variable, the codes of the box around ``cell`` (:func:`release_box`)."""
    first_table, first_grid = cells.first
    home = cells.tables[int(first_table[cell])]
    g = int(first_grid[cell])
    own = {d.variable: d.hierarchy.order[(g // s) % len(d.hierarchy.order)] for d, s in zip(home.dimensions, home.strides)}
    known: dict[tuple[str, int], set[str]] = {}  # one set per variable and hierarchy
    out = []
    for i, table in enumerate(cells.tables):
        # the cell's codes in this table (the total where it has no such code)
        at = [own[d.variable] if own.get(d.variable) in d.hierarchy.position else d.hierarchy.total
              for d in table.dimensions]
        sets = []
        for axis, d in enumerate(table.dimensions):
            h = d.hierarchy
            key = (d.variable, id(h))
            if key not in known:
                known[key] = set(h.order) if len(h.order) <= small else \
                    _around(h, at[axis], _slab(cells, i, at, axis, values), partners)
            sets.append(known[key])
        out.append(sets)
    return out


def _slab(cells: ReleaseCells, table: int, at: list[str], axis: int, values: np.ndarray) -> dict[str, float]:
    """The values along ``axis`` of table ``table`` through the cell with codes ``at``."""
    t = cells.tables[table]
    h = t.dimensions[axis].hierarchy
    slab = t.cell_id(at) + (np.arange(len(h.order)) - h.position[at[axis]]) * t.strides[axis]
    return dict(zip(h.order, values[cells.cells[table][slab]].tolist()))


def _around(h: Hierarchy, code: str, value: dict[str, float], partners: int) -> set[str]:
    """``code``, the codes above it, its ``partners`` largest siblings, and below each of these
    its largest children level by level."""
    keep = set(h.ancestors(code)) | set(_descend(h, code, value, partners))
    parent = h.parents.get(code)
    siblings = [c for c in (h.children(parent) if parent is not None else ()) if c != code]
    for p in sorted(siblings, key=lambda c: -value[c])[:partners]:
        keep |= {p, *_descend(h, p, value, partners)}
    return keep


def release_box(cells: ReleaseCells, cell: int, values: np.ndarray, partners: int, small: int) -> np.ndarray:
    """The release cells around ``cell`` in which its local programs move (module docstring).

    Per variable of each table: every code when it has at most ``small``; else the cell's code
    (the total where the table's hierarchy of it lacks the code, or the cell's table the variable),
    every code above it, the ``partners`` siblings whose cells (the cell's other codes kept) have
    the largest ``values``, and below each of these the ``partners`` children with the largest
    values, level by level. In every table, the cells whose codes are all in these sets; a cycle
    of changes through the cell (two codes of each variable and the totals above them) lies in the
    box when its codes are among the partners.
    """
    found = []
    for table, rows, sets in zip(cells.tables, cells.cells, _codes(cells, cell, values, partners, small)):
        ids = np.zeros(1, dtype=np.int64)
        for d, stride, codes in zip(table.dimensions, table.strides, sets):
            pos = [d.hierarchy.position[c] for c in codes]
            ids = (ids[:, None] + np.asarray(pos, dtype=np.int64)[None, :] * stride).ravel()
        found.append(rows[ids])
    return np.unique(np.concatenate(found))


def _restricted(system: Relations, AT: sp.csr_matrix, free: np.ndarray, point: np.ndarray, lower: np.ndarray,
                upper: np.ndarray) -> ExtremeSolver:
    """Programs over the unknown cells ``free`` (positions in ``system.U``), every other cell at
    ``point``: the relations that hold a free cell, their other cells moved to the right-hand side."""
    rows = np.unique(AT[free].indices)
    A = system.A_U[rows]
    sub = A[:, free]
    y = point[system.U]
    rhs = system.b[rows] - (A @ y - sub @ y[free])
    return ExtremeSolver(sub, rhs, lower[system.U[free]], upper[system.U[free]])


def outer_interval(system: Relations, AT: sp.csr_matrix, at: int, lower: np.ndarray,
                   upper: np.ndarray) -> tuple[np.ndarray, Extreme, Extreme]:
    """The least and largest value of the unknown cell ``at`` (position in ``system.U``) over the
    relations that hold it alone, each of their cells within its bounds: a relaxation of the
    intruder's programs, so its interval holds the cell's feasibility interval. Returns the rows
    and the two optima."""
    rows = AT[at].indices
    A = system.A_U[rows]
    cols = np.unique(A.indices)
    solver = ExtremeSolver(A[:, cols], system.b[rows], lower[system.U[cols]], upper[system.U[cols]])
    k = int(np.searchsorted(cols, at))
    return rows, solver.extreme(k, maximize=False), solver.extreme(k, maximize=True)


def settle_locally(cells: ReleaseCells, system: Relations, point: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                   want: np.ndarray, required: np.ndarray, seen_lo: np.ndarray, seen_hi: np.ndarray,
                   boxes: Sequence[tuple[int, int]] = BOXES) -> tuple[np.ndarray, list[Narrow]]:
    """Settle wanted cells by local programs (module docstring) from the feasible table ``point``.

    ``seen_lo``/``seen_hi`` (per release cell) hold the range of values already reached by tables
    that satisfy every relation (the moves' reach); every optimum widens them for every wanted
    cell it frees, so one cell's programs often settle its neighbours. Returns the cells still
    wanted — neither shown wide enough nor shown narrow with an exact interval — and the cells
    shown narrow (their bounds written into ``seen_lo``/``seen_hi``).
    """
    U = system.U
    where = np.full(cells.n_cells, -1, dtype=np.int64)
    where[U] = np.arange(U.size)
    AT = sp.csr_matrix(system.A_U.T)
    want = want.copy()
    for tier, (partners, small) in enumerate(boxes):
        cells_now = np.flatnonzero(want).tolist()
        for done, cell in enumerate(cells_now):
            if done % 256 == 0:
                progress.report("release audit", phase=f"local programs, box {tier + 1} of {len(boxes)}", done=done,
                                total=len(cells_now))
            if seen_hi[cell] - seen_lo[cell] >= required[cell] - WIDTH_TOL:
                want[cell] = False  # a neighbour's programs settled it
                continue
            box = release_box(cells, cell, point, partners, small)
            free = where[box]
            free = free[free >= 0]
            solver = _restricted(system, AT, free, point, lower, upper)
            k = int(np.searchsorted(free, where[cell]))
            for maximize in (True, False):
                try:
                    x = solver.extreme(k, maximize=maximize).x
                except RuntimeError:  # a program HiGHS does not solve: the cell is left to the
                    x = None  # programs over the whole release, which decide it
                if x is not None:
                    took = want[U[free]]
                    moved = U[free][took]
                    np.minimum.at(seen_lo, moved, x[took])
                    np.maximum.at(seen_hi, moved, x[took])
            if seen_hi[cell] - seen_lo[cell] >= required[cell] - WIDTH_TOL:
                want[cell] = False
    narrow = []
    for cell in np.flatnonzero(want).tolist():
        try:
            rows, low, high = outer_interval(system, AT, int(where[cell]), lower, upper)
        except RuntimeError:  # as above: the programs over the whole release decide (and name a
            continue  # release whose published values no table satisfies)
        if high.value - low.value < required[cell] - WIDTH_TOL and \
                low.value >= seen_lo[cell] - WIDTH_TOL and high.value <= seen_hi[cell] + WIDTH_TOL:
            seen_lo[cell], seen_hi[cell] = low.value, high.value
            narrow.append(Narrow(cell, rows, low, high))
            want[cell] = False
    return want, narrow
