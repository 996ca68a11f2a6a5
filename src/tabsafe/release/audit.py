"""Release audit: what an intruder computes from every table of a release at once.

Given the tables as published — published values, blanks where cells are suppressed, the
rounding base of rounded tables, the hierarchies — the intruder knows every table's additive
relations (:mod:`tabsafe.model.release_cells`: shared cells are one unknown), that counts are not
negative (and, when the publisher never suppresses zeros, that a suppressed count is at least
1), and that a value rounded to base ``b`` (zero-restricted controlled rounding, METHODS.md §4)
lies in ``[r - b + 1, r + b - 1]`` (``[0, b - 1]`` for a published 0). Each unknown cell's
*feasibility interval* is its least and largest value over every table that satisfies all of
that: two linear programs per cell over all tables together (seed 000 §5.3; issue #13). The
audit reports every cell whose interval is narrower than the protection level — pinned to one
value, or narrowed below it — with the derivation: the published cells of the relations that
hold its bounds (the rows with non-zero duals of the programs).

The programs use the published values only; the publisher's true values serve, when given, to
decide which cells need which protection (:func:`audit_release` ``required``). As in
:func:`tabsafe.risk.intervals.feasibility_intervals`, unknown cells that share no relation are
independent (each connected component is solved alone), and two programs that push every open
cell of a component up and down settle most cells before any per-cell program.

When a table that satisfies every relation and bound is at hand — the published values of a
controlled rounding, else a central point of the intruder's program (:func:`central_point`) — three
cheaper steps come first (issue #28): its additive moves (:func:`move_intervals`), then for each
cell left programs over a box of cells around it with the rest of the release held, the box grown
by column generation until the cell is shown wide enough or its bounds are exact
(:mod:`tabsafe.release.local`); the programs over the whole part then take only the cells over
that work budget, without the push programs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import scipy.sparse as sp

from tabsafe import progress
from tabsafe.errors import InputError
from tabsafe.model.hierarchy import Hierarchy
from tabsafe.model.table import Table
from tabsafe.model.release_cells import ReleaseCells
from tabsafe.release.local import WIDTH_TOL, settle_locally
from tabsafe.risk.intervals import independent_parts, spread, widen
from tabsafe.solver import ExtremeSolver, interior_point

__all__ = ["ExposedCell", "ReleaseAudit", "audit_bytes", "audit_release", "central_point", "published_bounds"]

_TOL = 1e-7
#: published cells named in one derivation
MAX_DERIVATION = 12


def published_bounds(cells: ReleaseCells, published: Sequence[np.ndarray], *, bases: Sequence[int | None] | None = None,
                     suppressed_min: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """What the published tables say about each release cell: ``[lower, upper]``.

    A published value is exact (or, in a table rounded to base ``b``, within ``b - 1`` of it,
    never below 0); a blank is at least ``suppressed_min``; a cell several tables hold is in
    every table's interval. Tables that contradict each other are an error naming the cell.
    """
    lo = np.zeros(cells.n_cells)
    hi = np.full(cells.n_cells, math.inf)
    bases = list(bases) if bases is not None else [None] * len(cells.tables)
    for i, (values, rows, base) in enumerate(zip(published, cells.cells, bases)):
        v = np.asarray(values, dtype=np.float64)
        if v.shape != rows.shape:
            raise InputError(f"table {cells.names[i]!r}: {v.size} published values for {rows.size} cells")
        blank = np.isnan(v)
        if (v[~blank] < 0).any():
            raise InputError(f"table {cells.names[i]!r}: a published count is negative")
        if base is None:
            t_lo = np.where(blank, suppressed_min, v)
            t_hi = np.where(blank, math.inf, v)
        else:
            t_lo = np.where(blank, suppressed_min, np.maximum(v - base + 1, 0))
            t_hi = np.where(blank, math.inf, np.where(v == 0, base - 1, v + base - 1))
        np.maximum.at(lo, rows, t_lo)
        np.minimum.at(hi, rows, t_hi)
    bad = lo > hi + _TOL
    if bad.any():
        c = int(np.flatnonzero(bad)[0])
        raise InputError(f"the tables disagree about {cells.name(c)}: it cannot be {lo[c]:g} or more and at most "
                         f"{hi[c]:g} (tables of different data, or a wrong hierarchy or 'same_codes'?)")
    return lo, np.maximum(hi, lo)


@dataclass(frozen=True)
class ExposedCell:
    """A cell the intruder pins or narrows below the protection level.

    Attributes:
        cell: the release cell.
        name: the cell in words (a table that hides it, and its codes there).
        table, codes: that table and the codes.
        lower, upper: its feasibility interval.
        required: the width it needed.
        derivation: the published cells (with their values) of the relations that hold its bounds.
    """

    cell: int
    name: str
    table: str
    codes: str
    lower: float
    upper: float
    required: float
    derivation: tuple[str, ...] = ()

    @property
    def width(self) -> float:
        return self.upper - self.lower

    @property
    def exact(self) -> bool:
        return self.width <= WIDTH_TOL


@dataclass(frozen=True, eq=False)
class ReleaseAudit:
    """The result of a release audit.

    Attributes:
        cells: the release's cells.
        lower, upper: per release cell, what the published tables say (before the programs).
        interval_lower, interval_upper: the feasibility intervals of the audited cells (NaN
            elsewhere; inner bounds for cells certified wide enough).
        audited: the cells whose interval was computed.
        exposed: the cells narrower than required, with their derivations.
    """

    cells: ReleaseCells
    lower: np.ndarray
    upper: np.ndarray
    interval_lower: np.ndarray
    interval_upper: np.ndarray
    audited: np.ndarray
    exposed: tuple[ExposedCell, ...] = field(default_factory=tuple)

    @property
    def passed(self) -> bool:
        return not self.exposed

    def exposed_mask(self) -> np.ndarray:
        out = np.zeros(self.cells.n_cells, dtype=bool)
        out[[e.cell for e in self.exposed]] = True
        return out

    def summary(self) -> dict[str, object]:
        exact = sum(1 for e in self.exposed if e.exact)
        return {
            "tables": len(self.cells.names),
            "cells": self.cells.n_cells,
            "shared_cells": int((self.cells.shared() > 1).sum()),
            "unknown_cells": int((self.upper - self.lower > _TOL).sum()),
            "audited": int(self.audited.sum()),
            "exposed": len(self.exposed),
            "exact": exact,
        }

    def rows(self) -> list[dict[str, object]]:
        """One record per exposed cell (table, codes, interval, width, required, derivation)."""
        return [{"table": e.table, "cell": e.codes, "lower": e.lower, "upper": e.upper, "width": e.width,
                 "required": e.required, "exact": e.exact, "derivation": "; ".join(e.derivation)}
                for e in self.exposed]


#: bytes per release cell (bounds, intervals, names), per entry of the relations (the matrix, its
#: slices to the unknown cells), per unknown cell in HiGHS (columns, basis, factorisation; the
#: central point's program has two columns and three rows per unknown cell): measured on rounded
#: releases (bench/bench_memory.py; bench/bench_release_audit.py: the 45,472-cell randomly rounded
#: release peaks 339 MB, 174 MB above the 6,048-cell audit's 166 MB; estimate 132 MB, 67 MB with
#: 1,000 bytes an unknown cell)
AUDIT_CELL_BYTES = 200
AUDIT_RELATION_BYTES = 100
AUDIT_UNKNOWN_BYTES = 2_500


def audit_bytes(cells: ReleaseCells, lower: np.ndarray, upper: np.ndarray) -> int:
    """The memory :func:`audit_release` needs, from the release's shape before any program (issue
    #28: a memory model for audits): the cells, the relations, and the programs over the cells
    not published exactly."""
    unknown = int((np.asarray(upper) - np.asarray(lower) > _TOL).sum())
    return int(cells.n_cells * AUDIT_CELL_BYTES + cells.relations.nnz * AUDIT_RELATION_BYTES
               + unknown * AUDIT_UNKNOWN_BYTES)


def audit_release(
    cells: ReleaseCells,
    lower: np.ndarray,
    upper: np.ndarray,
    *,
    required: np.ndarray | float = 1.0,
    targets: np.ndarray | None = None,
    published: Sequence[np.ndarray] | None = None,
    shortcuts: bool = True,
) -> ReleaseAudit:
    """The intruder's interval programs over all tables of a release (module docstring).

    Args:
        cells: the release's cells and relations.
        lower, upper: what the published tables say about each cell (:func:`published_bounds`).
        required: the interval width each cell needs (one number, or one per cell); a cell
            whose interval is narrower is exposed.
        targets: the cells to audit (default: every cell the tables do not publish exactly).
        published: the tables' published values (NaN where blank), to name each cell in the
            derivations by a table that publishes it and each exposed cell by one that hides it.
        shortcuts: settle cells by additive moves from the published table (or, when its values
            add up to no table, from :func:`central_point`) before any program; False: the
            programs alone (the reference the moves are tested and benchmarked against). The
            exposed cells and their intervals are the same either way.

    >>> import pandas as pd
    >>> from tabsafe import InnerCells, tabulate
    >>> t = tabulate(InnerCells.from_frame(pd.DataFrame({"r": list("aabb"), "c": list("xyxy"), "n": [1, 5, 4, 6]}),
    ...                                    count="n"), ["r", "c"])
    >>> cells = ReleaseCells.build([t])
    >>> published = np.asarray(cells.tables[0].counts, dtype=float).copy()
    >>> published[cells.tables[0].cell_id({"r": "a", "c": "x"})] = np.nan  # only the 1 is blank
    >>> lo, hi = published_bounds(cells, [published])
    >>> audit_release(cells, lo, hi).exposed[0].lower  # its row total gives it away
    1.0
    """
    n = cells.n_cells
    lo = np.asarray(lower, dtype=np.float64)
    hi = np.asarray(upper, dtype=np.float64)
    unknown = hi - lo > _TOL
    want = unknown.copy() if targets is None else (np.asarray(targets, dtype=bool) & unknown)
    req = np.broadcast_to(np.asarray(required, dtype=np.float64), (n,))
    out_lo = np.full(n, np.nan)
    out_hi = np.full(n, np.nan)
    exposed: list[ExposedCell] = []
    namer = _Namer(cells, published)
    _check_published(cells, unknown, lo)
    audited = want.copy()
    system = _System.of(cells.relations, lo, unknown)
    point = feasible_point(cells, published, lo, hi) if shortcuts else None
    if point is None and shortcuts:  # a perturbed or randomly rounded release: its values add up to no table
        point = central_point(system, lo, hi, reach=req)
    if point is not None:  # settle what additive moves of a feasible table reach, before any program
        want = _settle_from_point(cells, system, point, lo, hi, unknown, want, req, out_lo, out_hi, namer, exposed)
    U = system.U
    total = int(np.count_nonzero(want[U]))
    done = 0
    progress.report("release audit", phase="cells", done=0, total=total)
    for cols, crow in independent_parts(system.A_U):
        members = U[cols]
        aim = np.flatnonzero(want[members])
        done += int(aim.size)
        if aim.size == 0:
            continue
        if crow.size == 0:  # in no relation: only its own bounds are known
            out_lo[members[aim]] = lo[members[aim]]
            out_hi[members[aim]] = hi[members[aim]]
            continue
        _audit_part(cells, system, cols, crow, aim, lo, hi, req, point, namer, out_lo, out_hi, exposed,
                    done=done, total=total)
    progress.report("release audit", phase="cells", done=total, total=total, exposed=len(exposed), final=True)
    return ReleaseAudit(cells, lo, hi, out_lo, out_hi, audited, tuple(sorted(exposed, key=lambda e: e.cell)))


def _settle_from_point(cells: ReleaseCells, system: _System, point: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                     unknown: np.ndarray, want: np.ndarray, req: np.ndarray, out_lo: np.ndarray, out_hi: np.ndarray,
                     namer: _Namer, exposed: list[ExposedCell]) -> np.ndarray:
    """Settle, without a program over the whole release, every wanted cell that the additive moves
    of the feasible table ``point`` (:func:`move_intervals`, issue #28) and then the local programs
    around it (:func:`tabsafe.release.local.settle_locally`) show wide enough: its inner bounds go
    into ``out_lo``/``out_hi``; a cell the local programs show narrow, with its exact interval, is
    exposed here. Returns the cells still wanted (the local programs' work budget spent)."""
    seen_lo, seen_hi = move_intervals(cells, point, lo, hi, unknown, np.where(want, req, 0.0))
    left = want & (seen_hi - seen_lo < req - WIDTH_TOL)
    if left.any():
        left, narrow = settle_locally(cells, system, point, lo, hi, left, req, seen_lo, seen_hi)
        for n in narrow:
            exposed.append(ExposedCell(n.cell, namer(n.cell, hidden=True), *namer.where(n.cell, hidden=True),
                                       float(n.low.value), float(n.high.value), float(req[n.cell]),
                                       _derivation(namer, n.rows, (n.low, n.high), system, n.cell)))
    settled = want & ~left
    out_lo[settled], out_hi[settled] = seen_lo[settled], seen_hi[settled]
    return left


@dataclass(frozen=True, eq=False)
class _System:
    """The relations of the release as the intruder's programs read them: over the unknown cells
    ``U`` (``A_U``, only the relations that hold one), with the cells ``K`` published exactly moved
    to the right-hand side ``b`` (``A_K``: those relations over ``K``; ``fixed``: their values)."""

    U: np.ndarray
    K: np.ndarray
    fixed: np.ndarray
    A_U: sp.csr_matrix
    A_K: sp.csr_matrix
    b: np.ndarray

    @classmethod
    def of(cls, A: sp.csr_matrix, lo: np.ndarray, unknown: np.ndarray) -> _System:
        """The system of the relations ``A`` given which cells are ``unknown`` (``lo``: the value of
        the others)."""
        U = np.flatnonzero(unknown)
        K = np.flatnonzero(~unknown)
        fixed = lo[K]
        A_U = sp.csr_matrix(A[:, U])
        rows = np.flatnonzero(np.diff(A_U.indptr))
        A_U = sp.csr_matrix(A_U[rows])
        A_K = sp.csr_matrix(A[rows][:, K])
        b = -(A_K @ fixed) if K.size else np.zeros(rows.size)
        return cls(U, K, fixed, A_U, A_K, b)


def _audit_part(cells: ReleaseCells, system: _System, cols: np.ndarray, crow: np.ndarray, aim: np.ndarray,
                lo: np.ndarray, hi: np.ndarray, req: np.ndarray, point: np.ndarray | None, namer: _Namer,
                out_lo: np.ndarray, out_hi: np.ndarray, exposed: list[ExposedCell], *, done: int, total: int) -> None:
    """The feasibility intervals of the cells ``aim`` of one independent part of the release
    (columns ``cols`` of ``system.A_U``, relations ``crow``; seed 000 §5.3): a feasible start and
    the spread programs first, then up to two programs per cell not yet seen wide enough. Writes
    the intervals into ``out_lo``/``out_hi`` and appends the exposed cells with their derivations;
    ``done``/``total`` count the audited cells for the progress report."""
    members = system.U[cols]
    b = system.b
    sub = system.A_U[crow][:, cols]
    # every cell boxed (a rounded or perturbed release): the first program by the interior point
    # method (:class:`ExtremeSolver`), a minute less on 45,000 cells
    solver = ExtremeSolver(sub, b[crow], lo[members], hi[members],
                           first="ipm" if np.isfinite(hi[members]).all() else "simplex")
    try:
        # a table that fits the published values: the published table itself when it does
        start = point[members] if point is not None else solver.optimum(np.zeros(cols.size), maximize=False).x
    except RuntimeError:
        raise InputError(f"no table satisfies the published values around {cells.name(int(members[0]))}: the "
                         "tables are not additive as published (a wrong hierarchy, or edited files?)") from None
    seen_lo = np.full(aim.size, math.inf)
    seen_hi = np.full(aim.size, -math.inf)

    take = partial(widen, seen_lo, seen_hi, aim)

    need = req[members[aim]]
    take(start)
    if point is None:  # with a feasible table, the moves and the local programs came first: the
        # cells left are few and mostly narrow, and a push of them all over a large part costs
        # minutes (160 s a program on the demo's 45,472-cell randomly rounded release)
        spread(sub, b[crow], lo[members], hi[members], start, aim, need, seen_lo, seen_hi)
    for i, w in enumerate(aim.tolist()):
        cell = int(members[w])
        # a rounded release audits every cell with two programs each: minutes on a large one
        if i % 64 == 0:
            progress.report("release audit", phase="cells", done=done - aim.size + i, total=total,
                            exposed=len(exposed))
        if seen_hi[i] - seen_lo[i] >= need[i] - WIDTH_TOL and math.isfinite(seen_hi[i]):
            out_lo[cell], out_hi[cell] = seen_lo[i], seen_hi[i]
            continue
        high = solver.extreme(w, maximize=True)
        take(high.x)
        if not math.isfinite(high.value) or seen_hi[i] - seen_lo[i] >= need[i] - WIDTH_TOL:
            out_lo[cell], out_hi[cell] = seen_lo[i], high.value  # wide enough: one program, not two
            continue
        low = solver.extreme(w, maximize=False)
        take(low.x)
        out_lo[cell], out_hi[cell] = low.value, high.value
        if high.value - low.value < need[i] - WIDTH_TOL:
            exposed.append(ExposedCell(cell, namer(cell, hidden=True), *namer.where(cell, hidden=True),
                                       float(low.value), float(high.value), float(need[i]),
                                       _derivation(namer, crow, (low, high), system, cell)))


def _axis_moves(h: Hierarchy, backward: bool = False, shift: int = 1,
                chain: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Per code of one hierarchy (by position), an additive vector along it that moves the code:
    a leaf with siblings against its next sibling (the last against the one before), any other
    code with the chain from its first leaf up to the total; ``backward``: the previous sibling
    and the last leaf. ``shift`` k > 1: the sibling k places on (round the siblings) and the
    k-th child at each level. ``chain``: every code with a chain, a leaf with its own. Padded to
    one length: (positions, coefficients), 0 in the padding."""
    pos = h.position
    step = -shift if backward else shift
    vectors: list[list[tuple[int, float]]] = []
    for code in h.order:
        parent = h.parents.get(code)
        kids = h.children(parent) if parent is not None else ()
        if h.is_leaf(code) and len(kids) > 1 and not chain:
            i = kids.index(code)
            if shift == 1:
                j = i + step if 0 <= i + step < len(kids) else i - step
            else:
                j = (i + step) % len(kids)
                j = j if j != i else (i + 1) % len(kids)
            vectors.append([(pos[code], 1.0), (pos[kids[j]], -1.0)])
        else:
            leaf = code
            while not h.is_leaf(leaf):
                kids = h.children(leaf)
                leaf = kids[(-shift if backward else shift - 1) % len(kids)]
            vectors.append([(pos[c], 1.0) for c in h.ancestors(leaf)])
    width = max(len(v) for v in vectors)
    positions = np.zeros((len(vectors), width), dtype=np.int64)
    coefs = np.zeros((len(vectors), width))
    for i, v in enumerate(vectors):
        positions[i, :len(v)] = [p for p, _ in v]
        coefs[i, :len(v)] = [c for _, c in v]
    return positions, coefs


def _table_moves(table: Table, rows: np.ndarray, n_cells: int, backward: bool, shift: int = 1,
                 alone: int | None = None) -> sp.csr_matrix:
    """One additive move of ``table`` per grid cell, touching that cell (tensor products of
    :func:`_axis_moves`), as rows over the release's cells (``rows``: the release cell of each
    grid cell). ``alone``: only that axis moves between siblings; the others carry the cell's
    chain up to their totals."""
    ids = np.zeros((table.n_cells, 1), dtype=np.int64)
    coef = np.ones((table.n_cells, 1))
    for axis, (d, stride) in enumerate(zip(table.dimensions, table.strides)):
        positions, coefs = _axis_moves(d.hierarchy, backward, shift, chain=alone is not None and axis != alone)
        at = np.asarray(table.positions(axis))
        ids = (ids[:, :, None] + positions[at][:, None, :] * stride).reshape(table.n_cells, -1)
        coef = (coef[:, :, None] * coefs[at][:, None, :]).reshape(table.n_cells, -1)
    keep = coef != 0
    counts = keep.sum(axis=1)
    indptr = np.concatenate([[0], np.cumsum(counts)])
    return sp.csr_matrix((coef[keep], rows[ids[keep]], indptr), shape=(table.n_cells, n_cells))


def move_intervals(cells: ReleaseCells, point: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                   unknown: np.ndarray, need: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Inner bounds on every unknown cell's feasibility interval from additive moves of a feasible
    ``point``, without a program: what the intruder can tell apart is no narrower.

    Each table gives one move per cell: the tensor product, over its variables, of a difference of
    two sibling leaves or a chain from a leaf up to the total (additive along every hierarchy, so
    additive in the table); then, for each variable, one that moves between siblings in that
    variable only, with the chains of the others. A cell several tables hold gets the union of
    their moves (they agree on the cells they share). A move that breaks a relation of the release or touches a cell
    published exactly is dropped; the others are followed from ``point`` both ways as far as
    every bound of their cells allows, and each cell's range takes in what every move through
    it reaches. On a rounded release (the published table is such a point: additive and within
    every interval) this settles almost every cell; the programs are left the rest (issue #28).

    With ``need`` (per cell, the width wanted), no more moves are followed once every unknown
    cell's range is that wide, and no further siblings of a kind once the last settled none.

    Returns:
        per cell, the least and largest value the moves reach (the point's value where none does).
    """
    lo = point.copy()
    hi = point.copy()
    # several moves per cell: a cell one blocks (a zero at its bound) another may free; on an
    # 18,067-cell rounded release the moves to the next sibling leave 1,107 cells unsettled, to
    # the next six 50, for 0.7 s
    # a sparse category (a zero beside zeros in every direction) blocks every move of the first
    # kind; a move between siblings in one variable only (``alone``), carried up to the totals in
    # the others, meets its neighbours in that variable alone and the larger margins elsewhere:
    # on the demo's 45,472-cell rounded release the first kind left 2,368 cells, this kind none
    wide = max((len(t.dimensions) for t in cells.tables), default=0)
    for kind in ([None], list(range(wide))):
        narrow = -1
        for shift in range(1, MOVE_SHIFTS + 1):
            for alone in kind:
                for backward in (False, True):
                    _follow(cells, moves_of(cells, backward, shift, alone), point, lower, upper, unknown, lo, hi)
            if need is None:
                continue
            before, narrow = narrow, int(np.count_nonzero(unknown & (hi - lo < need - WIDTH_TOL)))
            if narrow == 0:
                return lo, hi  # every cell wide enough: the programs have nothing left
            if narrow == before:
                break  # moves further along settle nothing more: the next kind, or the programs
    return lo, hi


#: the siblings (and children) each cell's moves go to, each way (:func:`_axis_moves`)
MOVE_SHIFTS = 6


def moves_of(cells: ReleaseCells, backward: bool, shift: int = 1, alone: int | None = None) -> sp.csr_matrix:
    """One move per release cell (a row over the cells): the union of its tables' moves
    (``alone``: :func:`_table_moves`)."""
    n = cells.n_cells
    # a table of fewer variables than ``alone`` names moves its first variable alone
    by_table = [_table_moves(t, rows, n, backward, shift, alone if alone is None or alone < len(t.dimensions) else 0)
                for t, rows in zip(cells.tables, cells.cells)]
    # the release cell each move is for, and the union over the tables holding it
    owner = np.concatenate(cells.cells)
    V = sp.vstack(by_table, format="csr")
    hits = sp.csr_matrix((np.ones(owner.size), (owner, np.arange(owner.size))), shape=(n, owner.size))
    summed = sp.csr_matrix(hits @ V)
    seen = sp.csr_matrix(hits @ abs(V).sign())
    summed.sort_indices()
    seen.sort_indices()
    moves = sp.csr_matrix((summed.data / np.maximum(seen.data, 1.0), summed.indices, summed.indptr), shape=(n, n))
    moves.eliminate_zeros()
    return moves


def steps(cells: ReleaseCells, moves: sp.csr_matrix, point: np.ndarray, lower: np.ndarray, upper: np.ndarray,
          unknown: np.ndarray) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    """The valid ``moves`` (rows: additive in every table of the release, no cell published
    exactly) and how far each can be followed from ``point`` up and down before a cell meets a
    bound: ``point + t_up * move`` and ``point - t_down * move`` are tables the intruder cannot
    rule out."""
    nonempty = np.diff(moves.indptr) > 0
    residual = np.abs(cells.relations @ moves.T).max(axis=0).toarray().ravel() if cells.n_cells else np.zeros(0)
    on_known = (abs(moves) @ (~unknown).astype(np.float64)) > 0  # a known cell cannot move
    valid = nonempty & (residual <= _TOL) & ~on_known
    M = sp.csr_matrix(moves[np.flatnonzero(valid)])
    if M.nnz == 0:
        return M, np.zeros(M.shape[0]), np.zeros(M.shape[0])
    col, v = M.indices, M.data
    up_room = np.where(v > 0, (upper[col] - point[col]) / np.abs(v), (point[col] - lower[col]) / np.abs(v))
    down_room = np.where(v > 0, (point[col] - lower[col]) / np.abs(v), (upper[col] - point[col]) / np.abs(v))
    starts = M.indptr[:-1]
    return M, np.minimum.reduceat(up_room, starts), np.minimum.reduceat(down_room, starts)


def _follow(cells: ReleaseCells, moves: sp.csr_matrix, point: np.ndarray, lower: np.ndarray, upper: np.ndarray,
            unknown: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> None:
    """Widen ``[lo, hi]`` to what the valid ``moves`` reach from ``point`` (:func:`steps`)."""
    M, t_up, t_down = steps(cells, moves, point, lower, upper, unknown)
    if M.nnz == 0:
        return
    col, v = M.indices, M.data
    row = np.repeat(np.arange(M.shape[0]), np.diff(M.indptr))
    reach_hi = point[col] + np.where(v > 0, t_up[row], t_down[row]) * np.abs(v)
    reach_lo = point[col] - np.where(v > 0, t_down[row], t_up[row]) * np.abs(v)
    np.maximum.at(hi, col, reach_hi)
    np.minimum.at(lo, col, reach_lo)


def feasible_point(cells: ReleaseCells, published: Sequence[np.ndarray] | None, lower: np.ndarray,
                   upper: np.ndarray) -> np.ndarray | None:
    """The published values as one table over the release's cells, when that table satisfies
    every relation and every bound (a rounded release does: controlled rounding publishes an
    additive table within each cell's interval), else None (a blank has no value)."""
    if published is None:
        return None
    point = np.full(cells.n_cells, np.nan)
    for values, rows in zip(published, cells.cells):
        point[rows] = np.asarray(values, dtype=np.float64)
    if np.isnan(point).any() or (point < lower - _TOL).any() or (point > upper + _TOL).any():
        return None
    if cells.relations.shape[0] and np.abs(cells.relations @ point).max() > _TOL:
        return None
    return point


def central_point(system: _System, lower: np.ndarray, upper: np.ndarray,
                  reach: np.ndarray | float = 1.0) -> np.ndarray | None:
    """A table over the release's cells that satisfies every relation and bound, away from the
    bounds where it can be (:func:`tabsafe.solver.interior_point`), when every unknown cell is
    bounded above (rounded and perturbed releases: a box around each published value); else None
    (a blank is unbounded: the programs start from a vertex as before).

    The published values of a randomly rounded or perturbed release add up to no table, so the
    additive moves (:func:`move_intervals`) need another start. A vertex of the program (one
    simplex solve) holds most cells at a bound, and a move through a cell at its bound goes one
    way only; from the centre each move goes both ways. On an 18,067-cell randomly rounded
    release the moves from it settle 16,162 cells (issue #28). ``reach``: per cell, the distance
    from its bounds worth having (the width it needs; :func:`tabsafe.solver.interior_point`).
    """
    U = system.U
    if U.size == 0 or not np.isfinite(upper[U]).all():
        return None
    r = np.broadcast_to(np.asarray(reach, dtype=np.float64), lower.shape)[U]
    y = interior_point(system.A_U, system.b, lower[U], upper[U], r) if system.A_U.shape[0] else None
    if y is None:
        return None
    point = np.asarray(lower, dtype=np.float64).copy()
    point[U] = np.clip(y, lower[U], upper[U])
    if system.A_U.shape[0] and np.abs(system.A_U @ point[U] - system.b).max() > _TOL:
        return None
    return point


def _check_published(cells: ReleaseCells, unknown: np.ndarray, values: np.ndarray) -> None:
    """Relations whose cells are all published exactly must add up, or the hierarchies are not
    the ones the tables were made with."""
    A = cells.relations
    known = np.asarray(A[:, np.flatnonzero(unknown)].getnnz(axis=1) == 0).ravel()
    if not known.any():
        return
    residual = A[known] @ np.where(unknown, 0.0, values)
    bad = np.flatnonzero(np.abs(residual) > _TOL)
    if bad.size:
        row = A[np.flatnonzero(known)[bad[0]]]
        agg = int(row.indices[row.data > 0][0]) if (row.data > 0).any() else int(row.indices[0])
        raise InputError(f"the published cells under {cells.name(agg)} do not add up to it: give the hierarchy the "
                         "table was made with (or the tables are not of one data set)")


class _Namer:
    """Names a cell by a table that publishes it (or, for an exposed cell, one that hides it)."""

    def __init__(self, cells: ReleaseCells, published: Sequence[np.ndarray] | None) -> None:
        self.cells = cells
        self.shown: dict[bool, tuple[np.ndarray, np.ndarray]] = {}
        #: per release cell, the value published by the table that names it (NaN where every table
        #: hides it)
        self.value = np.full(cells.n_cells, np.nan)
        if published is not None:
            for hidden in (False, True):
                table = np.full(cells.n_cells, -1, dtype=np.int64)
                grid = np.zeros(cells.n_cells, dtype=np.int64)
                for i in reversed(range(len(cells.tables))):
                    rows = cells.cells[i]
                    blank = np.isnan(np.asarray(published[i], dtype=np.float64))
                    pick = blank if hidden else ~blank
                    table[rows[pick]] = i
                    grid[rows[pick]] = np.flatnonzero(pick)
                self.shown[hidden] = (table, grid)
            table, grid = self.shown[False]
            for i, values in enumerate(published):
                pick = table == i
                self.value[pick] = np.asarray(values, dtype=np.float64)[grid[pick]]

    def __call__(self, cell: int, *, hidden: bool = False) -> str:
        if hidden in self.shown and self.shown[hidden][0][cell] >= 0:
            t, g = self.shown[hidden]
            i = int(t[cell])
            return f"{self.cells.names[i]} {self.cells.grid_name(i, int(g[cell]))}"
        return self.cells.name(cell)

    def where(self, cell: int, *, hidden: bool = False) -> tuple[str, str]:
        """(table, codes) of the cell as :meth:`__call__` names it."""
        if hidden in self.shown and self.shown[hidden][0][cell] >= 0:
            t, g = self.shown[hidden]
        else:
            t, g = self.cells.first
        i = int(t[cell])
        return self.cells.names[i], self.cells.grid_name(i, int(g[cell]))


def _derivation(namer: _Namer, crow: np.ndarray, extremes: Sequence, system: _System, cell: int) -> tuple[str, ...]:
    """The published cells of the relations whose duals hold a bound (what gives the cell away):
    those published exactly with their values, then those published rounded or perturbed with
    the values published (their bounds are what the intruder reads from them)."""
    exact: list[int] = []
    boxed: list[int] = []
    for ext in extremes:
        if ext.duals is None:
            continue
        active = crow[np.abs(ext.duals) > _TOL]
        exact += system.A_K[active].indices.tolist()  # row by row, in the order of the relations
        boxed += system.U[system.A_U[active].indices].tolist()
    out = [f"{namer(int(system.K[k]))} = {system.fixed[k]:g}" for k in dict.fromkeys(exact)]
    # a blank (suppressed) cell has no published value: it is not named
    out += [f"{namer(c)} published {namer.value[c]:g}" for c in dict.fromkeys(boxed)
            if c != cell and not np.isnan(namer.value[c])]
    return tuple(out[:MAX_DERIVATION]) + (("…",) if len(out) > MAX_DERIVATION else ())
