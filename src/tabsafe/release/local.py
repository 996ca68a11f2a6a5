"""Local programs of the release audit: a cell's interval from programs over the cells around it.

The release audit (:mod:`tabsafe.release.audit`, seed 000 §5.3) needs, for every cell the
published tables do not give exactly, its least and largest value over all tables together. On a
rounded or perturbed release a feasible table is known before any program (the published values,
or a central point), and its additive moves settle most cells (issue #28). The cells they leave
need other tables, and a program over the whole release costs a quarter of a second or more per
cell on 45,000 cells (seconds for the first), and 4–40 s on 87,000.

Here each such cell gets programs over a *box* of cells around it instead (:func:`release_box`):
the box's cells are free within their bounds, every other cell stays at the feasible table's
value, and every relation that holds a free cell is kept. Any optimum is then a table that
satisfies every relation of the release, so the values the programs reach are inner bounds of the
cell's feasibility interval. The box then grows by *column generation*: the program's duals price
every held cell of its relations (its reduced cost, were it free); a held cell that would improve
the optimum and has room to move that way (it is not at that bound) joins the box with its
relations, and the program is solved again. When no held cell would improve it, the duals (0 on
the relations no free cell is in) are optimal for the program over the whole release: the
optimum is the cell's exact bound, and the relations with non-zero duals its derivation. A bound
stops growing as soon as it shows the cell wide enough, and after a work budget (rounds, free
cells), leaving the cell to the programs over the whole release. The programs are kept in changes
from the feasible table and warm from round to round (:class:`tabsafe.solver.GrowingProgram`),
and each cell's start with the cells the previous cell's optima moved: cells taken in order are
neighbours, and the far cells that free one mostly free the next.

On the five-table 87,290-cell randomly rounded release (base 3) the moves leave 15,236 cells;
these programs decide all of them in 144 s (418 exact and narrow), where one program over the
whole release took 4–40 s. Before column generation, boxes of fixed size and an outer bound
from the cell's own relations left thousands of cells to the programs over the whole release.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import scipy.sparse as sp

from tabsafe import progress
from tabsafe.model.hierarchy import Hierarchy
from tabsafe.model.release_cells import ReleaseCells
from tabsafe.solver import Extreme, GrowingProgram

__all__ = ["GROW_CELLS", "GROW_ROUNDS", "START_BOX", "WIDTH_TOL", "Narrow", "release_box", "settle_locally"]

#: how far from the required width a width may fall and still count as that width: programs over
#: tens of thousands of cells carry HiGHS's tolerances (a width of 1 came out 0.99999933 on the
#: demo's 45,472-cell randomly rounded release); the suppression audits allow the same
WIDTH_TOL = 1e-6

#: the box a cell's programs start from: (partners per code, variables with at most this many
#: codes taken whole; :func:`release_box`)
START_BOX: tuple[int, int] = (2, 8)

#: the work budget of one bound's column generation: rounds, and cells free at most. On the
#: five-table 87,290-cell randomly rounded release, started from these boxes alone, bounds took
#: up to 37 rounds and 21,599 free cells (mostly under 10 rounds and 10,000 cells); none of its
#: 15,236 cells spends the budget
GROW_ROUNDS = 60
GROW_CELLS = 60_000

#: a held cell prices in when its reduced cost and its room that way both exceed this
_PRICE_TOL = 1e-9


class Relations(Protocol):
    """The audit's program over the unknown cells ``U``: ``A_U y = b``."""

    U: np.ndarray
    A_U: sp.csr_matrix
    b: np.ndarray


@dataclass(frozen=True)
class Narrow:
    """A cell shown narrower than required, its interval exact: both bounds are optima of programs
    whose duals are optimal for the program over the whole release (module docstring).

    Attributes:
        cell: the release cell.
        rows: the relations (rows of the audit's program) of the two last programs.
        low, high: the two optima, their duals over ``rows`` (they name the published cells that
            hold each bound).
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


@dataclass(frozen=True)
class _Bound:
    """What one bound's column generation (:func:`_bound`) ended with: the cell's value at the
    last optimum, the relations of its program and their duals, and whether the value is the
    cell's exact bound (else it reached the value asked for)."""

    value: float
    rows: np.ndarray
    duals: np.ndarray
    exact: bool


def _bound(grow: GrowingProgram, box: np.ndarray, at: int, maximize: bool, target: float,
           widen: Callable[[np.ndarray, np.ndarray], None], room: tuple[np.ndarray, np.ndarray]) -> _Bound | None:
    """The largest (``maximize``) or least value of the unknown cell ``at`` (a position in ``U``)
    by column generation (module docstring) in ``grow`` with the box ``box`` freed: stops with
    the value it reached once that is ``target`` or beyond, with the exact bound when no held
    cell prices in, and with None when the work budget (:data:`GROW_ROUNDS`, :data:`GROW_CELLS`)
    is spent or HiGHS does not solve a program. ``widen(cells, x)`` takes every optimum found;
    ``room``: each cell's distance from the feasible table up to its upper and down to its lower
    bound."""
    sign = 1.0 if maximize else -1.0
    up, down = room
    grow.add(box)
    grow.aim(at, maximize)
    for _ in range(GROW_ROUNDS):
        got = grow.solve()
        if got is None:  # left to the programs over the whole release, which decide it
            return None
        value, x, duals = got
        widen(grow.variables, x)
        if sign * (value - target) >= -WIDTH_TOL:
            return _Bound(value, grow.rows, duals, exact=False)
        # each held cell of these relations, priced by the duals: were it free, would it improve
        # the optimum, and can it move that way from its value? (0 for a cell in none of them)
        cost = -sign * (grow.AT[:, grow.rows] @ duals)
        better = ~grow.free & (((cost > _PRICE_TOL) & (up > _PRICE_TOL)) | ((cost < -_PRICE_TOL) & (down > _PRICE_TOL)))
        if not better.any():
            return _Bound(value, grow.rows, duals, exact=True)  # the duals are optimal over the whole release
        if grow.variables.size + int(better.sum()) > GROW_CELLS:
            return None
        grow.add(np.flatnonzero(better))
    return None


def _narrow(cell: int, low: _Bound, high: _Bound) -> Narrow:
    """A narrow cell from its two exact bounds, their duals over the union of their relations."""
    rows = np.union1d(low.rows, high.rows)

    def spread(b: _Bound) -> Extreme:
        duals = np.zeros(rows.size)
        duals[np.searchsorted(rows, b.rows)] = b.duals
        return Extreme(b.value, None, duals)

    return Narrow(cell, rows, spread(low), spread(high))


def settle_locally(cells: ReleaseCells, system: Relations, point: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                   want: np.ndarray, required: np.ndarray, seen_lo: np.ndarray, seen_hi: np.ndarray,
                   start: tuple[int, int] = START_BOX) -> tuple[np.ndarray, list[Narrow]]:
    """Settle wanted cells by local programs (module docstring) from the feasible table ``point``.

    ``seen_lo``/``seen_hi`` (per release cell) hold the range of values already reached by tables
    that satisfy every relation (the moves' reach); every optimum widens them for every wanted
    cell it frees, so one cell's programs often settle its neighbours. The largest value comes
    first, sought up to the least reached plus the width required; when it is exact and short of
    that, the least value, sought down to the largest less that width. Returns the cells still
    wanted (their programs over budget) and the cells shown narrow (their exact bounds written
    into ``seen_lo``/``seen_hi``). ``start``: the box the programs start from (:func:`release_box`).
    """
    U = system.U
    where = np.full(cells.n_cells, -1, dtype=np.int64)
    where[U] = np.arange(U.size)
    AT = sp.csr_matrix(system.A_U.T)
    y, lo, hi = point[U], lower[U], upper[U]
    room = (hi - y, y - lo)
    want = want.copy()

    def widen(free: np.ndarray, x: np.ndarray) -> None:
        took = want[U[free]]
        moved = U[free][took]
        np.minimum.at(seen_lo, moved, x[took])
        np.maximum.at(seen_hi, moved, x[took])

    def wide(cell: int) -> bool:
        return bool(seen_hi[cell] - seen_lo[cell] >= required[cell] - WIDTH_TOL)

    narrow = []
    path = np.zeros(0, dtype=np.int64)
    todo = np.flatnonzero(want).tolist()
    for done, cell in enumerate(todo):
        if done % 256 == 0:
            progress.report("release audit", phase="local programs", done=done, total=len(todo))
        if wide(cell):  # a neighbour's programs settled it
            want[cell] = False
            continue
        # free from the start: the cells the last cell's optima moved (cells handled one after the
        # other are neighbours, and the far cells that free one mostly free the next)
        grow = GrowingProgram(system.A_U, AT, system.b, y, lo, hi, path)
        box = where[release_box(cells, cell, point, *start)]
        box = box[box >= 0]
        high = _bound(grow, box, int(where[cell]), True, seen_lo[cell] + required[cell], widen, room)
        low = None if high is None or wide(cell) else \
            _bound(grow, box, int(where[cell]), False, high.value - required[cell], widen, room)
        path = grow.moved
        if wide(cell):
            want[cell] = False
        elif high is not None and low is not None:  # neither reached what was asked: both exact
            seen_lo[cell], seen_hi[cell] = low.value, high.value
            narrow.append(_narrow(cell, low, high))
            want[cell] = False
    return want, narrow
