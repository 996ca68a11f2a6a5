"""Interval audit: what an intruder can compute about each suppressed cell from the published ones.

After cell suppression (seed 000 §5.3) an intruder knows every published cell, the additive
structure of the table (each aggregate is the sum of its children, along every dimension and
hierarchy level: :meth:`~tabsafe.model.table.Table.additivity`) and that counts are not negative
(or, when the publisher never suppresses zeros, that a suppressed count is at least 1). The
*feasibility interval* of a suppressed cell is the range of values it can take in a table that
satisfies all of this: its minimum and maximum by linear programming over the suppressed cells,
with the published cells fixed (METHODS.md §10). A primary cell is protected when its interval is
at least as wide as the required protection; an interval that holds only the true value means
the cell can be recomputed exactly.

The programs decompose: suppressed cells that share no relation (directly or through other
suppressed cells) are independent, so each connected component is solved on its own, and the
two extremes of every cell of a component are found by re-solving one warm-started program.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from tabsafe.errors import InputError
from tabsafe.model.table import Table
from tabsafe.progress import report
from tabsafe.solver import Extreme, ExtremeSolver

__all__ = ["IntervalAudit", "feasibility_intervals", "interval_audit"]

_TOL = 1e-7
#: values of the optimal points kept for later audits (``points`` of :func:`feasibility_intervals`), at
#: most: 64 MB (the fast mode on the 80,388-cell area × age × activity × sex table keeps 699 points, 67 MB)
KEEP_VALUES = 8_000_000


@dataclass(frozen=True, eq=False)
class Intervals:
    """Feasibility intervals of some cells of a linear system (see :func:`feasibility_intervals`).

    Attributes:
        lower, upper: per cell of the system, the interval (NaN for cells not bounded).
        holders: for cells whose interval is narrower than required, the published cells whose
            capacity (below) is positive: keeping all of them published keeps the interval at
            least this narrow, whatever else is suppressed.
        exact: which bounds are exact (the others are inner bounds, see ``certify``).
        capacities: for the same cells, ``(cells, c)``: the width of the cell's interval under
            any pattern ``x`` (1 = suppressed) is at most ``sum(c * x[cells])`` (``c`` may be
            infinite), with equality under the audited pattern (:func:`capacity`).
    """

    lower: np.ndarray
    upper: np.ndarray
    holders: Mapping[int, np.ndarray] = field(default_factory=dict)
    exact: np.ndarray | None = None
    capacities: Mapping[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)


def widen(pool_lo: np.ndarray, pool_hi: np.ndarray, want: np.ndarray, point: np.ndarray | None) -> None:
    """Stretch the known range of the targets ``want`` to a feasible ``point``."""
    if point is not None:
        np.minimum(pool_lo, point[want], out=pool_lo)
        np.maximum(pool_hi, point[want], out=pool_hi)


def spread(A: sp.csr_matrix, b: np.ndarray, lower: np.ndarray, upper: np.ndarray, point: np.ndarray,
           aim: np.ndarray, need: np.ndarray, seen_lo: np.ndarray, seen_hi: np.ndarray,
           keep: Callable[[np.ndarray | None], None] | None = None) -> None:
    """Widen the known range ``[seen_lo, seen_hi]`` of the cells ``aim`` of ``{A y = b, lower ≤ y
    ≤ upper}`` with optima of a few programs, until few are narrower than ``need``.

    Every optimal point is a table the intruder cannot rule out, so the values it gives a cell lie
    in the cell's feasibility interval: inner bounds, found for many cells at once. The programs
    push every cell not yet wide enough up and then down, then with random signs (cells tied by
    a relation move in opposite directions), while that settles many; they are confined to a
    box of ``need + 1`` around the feasible ``point`` so that no push runs off to infinity.
    Each optimal point also goes to ``keep`` when given.
    """
    cap = float(need.max()) + 1.0 if need.size else 1.0
    free = np.isnan(point)  # a cell of unknown value is not boxed
    box = ExtremeSolver(A, b, np.where(free, lower, np.maximum(lower, point - cap)),
                        np.where(free, upper, np.minimum(upper, point + cap)))

    def take(x: np.ndarray | None) -> None:
        widen(seen_lo, seen_hi, aim, x)
        if keep is not None:
            keep(x)

    rng = np.random.default_rng(0)  # deterministic: the same audit every run
    open_ = seen_hi - seen_lo < need - _TOL
    signed = False
    while open_.sum() > 8:
        before = int(open_.sum())
        push = np.zeros(A.shape[1])
        push[aim[open_]] = rng.choice([-1.0, 1.0], before) if signed else 1.0
        take(box.optimum(push, maximize=True).x)
        take(box.optimum(push, maximize=False).x)
        open_ = seen_hi - seen_lo < need - _TOL
        if open_.sum() > 0.9 * before:
            if signed:
                break
            signed = True


def capacity(A: sp.csr_matrix, rows: np.ndarray, cell: int, room: np.ndarray, suppressed: np.ndarray,
             extremes: tuple[Extreme | None, Extreme | None]) -> tuple[np.ndarray, np.ndarray]:
    """What hiding each cell can add to the width of ``cell``'s feasibility interval, from the
    duals of its two extreme programs: ``(cells, c)`` with ``width(x) <= sum(c * x[cells])`` for
    every pattern ``x``, an equality under the pattern the programs were solved for.

    Source: the audit of seed 000 §5.3 (METHODS.md §10) read through LP duality, as in the
    capacity constraints of Fischetti and Salazar-González's model of cell suppression
    (Management Science 47, 2001). Write a table the intruder cannot rule out as
    the true one plus a move ``z`` with ``A z = 0``, ``z_i = 0`` for a published cell and
    ``z_i >= -room_i`` for a suppressed one (``room``: value less its least value). For any row
    multipliers ``g``, the reduced costs ``r = e_cell - A' g`` bound the largest move of the cell:
    ``max z_cell <= sum_i x_i (inf * [r_i > 0] + room_i * max(0, -r_i))`` (weak duality); the
    least move likewise, with ``-e_cell``. The optimal duals make both tight at the audited pattern.
    The bound holds for any ``g``, so the sign convention of the solver's duals only decides
    which of the two readings is the tight one: the smaller.

    Args:
        A: the relations. rows: the rows the extreme programs were solved over (the duals' rows).
        room: per cell, value less the least value an intruder knows (NaN where unknown: hiding
            such a cell may move it without bound). suppressed: the audited pattern.
        extremes: the minimum and the maximum (``None``: a bound held by the cell's own least
            value, which adds the cell's own room, 0 at its least value).
    """
    total: dict[int, float] = {}
    for ext, sense in zip(extremes, (-1.0, 1.0)):
        if ext is None or ext.duals is None:
            continue
        live = np.abs(ext.duals) > _TOL
        sub = A[rows[live]]
        lens = np.diff(sub.indptr)
        cols, inv = np.unique(sub.indices, return_inverse=True)
        g = np.bincount(inv, weights=sub.data * np.repeat(ext.duals[live], lens), minlength=cols.size)
        if not (cols == cell).any():
            cols, g = np.append(cols, cell), np.append(g, 0.0)
        best: tuple[float, np.ndarray] | None = None
        for sign in (1.0, -1.0):
            r = -sign * g
            r[cols == cell] += sense
            r[np.abs(r) < _TOL] = 0.0
            c = np.where(r > 0, math.inf, 0.0) + np.where(r < 0, -r * np.nan_to_num(room[cols], nan=math.inf), 0.0)
            on = c[suppressed[cols]]
            at = math.inf if np.isinf(on).any() else float(np.nan_to_num(on).sum())
            if best is None or at < best[0]:
                best = (at, c)
        assert best is not None
        for i, v in zip(cols.tolist(), best[1].tolist()):
            if v > 0:
                total[i] = total.get(i, 0.0) + v
    idx = np.array(sorted(total), dtype=np.int64)
    return idx, np.array([total[i] for i in idx.tolist()], dtype=np.float64)


def independent_parts(A: sp.csr_matrix) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The independent parts of a system of relations over unknown cells: the components of
    the bipartite graph (relation rows, unknown columns) of ``A`` (every row with an entry),
    each as (its columns, its rows). An unknown in no relation is a part with no rows."""
    n_rows = A.shape[0]
    n_cols = A.shape[1]
    graph = sp.bmat([[None, A], [A.T, None]], format="csr") if n_rows else sp.csr_matrix((n_cols, n_cols))
    n_comp, label = connected_components(graph, directed=False)
    col_label = label[n_rows:] if n_rows else label
    row_label = label[:n_rows]
    order_c = np.argsort(col_label, kind="stable")
    order_r = np.argsort(row_label, kind="stable")
    cstarts = np.searchsorted(col_label[order_c], np.arange(n_comp + 1))
    rstarts = np.searchsorted(row_label[order_r], np.arange(n_comp + 1))
    for comp in range(n_comp):
        yield order_c[cstarts[comp]:cstarts[comp + 1]], order_r[rstarts[comp]:rstarts[comp + 1]]


def feasibility_intervals(
    A: sp.spmatrix,
    values: np.ndarray,
    suppressed: np.ndarray,
    *,
    lower: np.ndarray | float = 0.0,
    targets: np.ndarray | None = None,
    required: np.ndarray | None = None,
    certify: bool = False,
    points: list[tuple[np.ndarray, np.ndarray]] | None = None,
    seeds: Sequence[tuple[np.ndarray, np.ndarray]] = (),
) -> Intervals:
    """Minimum and maximum of each target cell given the published cells of ``A x = 0``.

    Source: the audit of secondary suppression (seed 000 §5.3, "to ensure these cannot be derived
    by subtractions from published marginal totals"); METHODS.md §10.

    Args:
        A: the relations (one row per relation, ``A @ x = 0`` for the true table).
        values: the true values; only those of published cells and of targets are used (hidden
            cells of a joint table may be NaN).
        suppressed: mask of cells whose value the intruder does not see.
        lower: the lower bound an intruder knows for a suppressed cell (0: counts are not
            negative; 1 where the publisher never suppresses zeros).
        targets: cells whose interval is wanted (default: every suppressed cell).
        required: per cell, the interval width it needs; cells below it get ``holders``.
        certify: only decide whether each target reaches ``required``. Every optimal point of
            the program is a table the intruder cannot rule out, so with the true table it spans
            an interval inside the feasibility interval of *every* target: two programs that push
            all targets of a component up and down, then per-cell programs only for targets not
            yet wide enough. Bounds of targets settled that way are inner bounds (``exact``
            false); the others are exact.
        points: a list that gets the optimal points of the programs, as ``(cells, x)`` (the
            suppressed cells of a component in increasing order, and their values; every other
            cell at its true value): tables the intruder cannot rule out; the first ones only,
            up to :data:`KEEP_VALUES` values in the list.
        seeds: such tables, known before (``points`` of earlier calls): with ``certify``, those
            that give every cell published here its true value are tables the intruder cannot
            rule out here either, and the ranges they span settle targets before any program.

    Returns:
        :class:`Intervals`; published and non-target cells have NaN bounds.
    """
    A = sp.csr_matrix(A)
    n = A.shape[1]
    suppressed = np.asarray(suppressed, dtype=bool)
    values = np.asarray(values, dtype=np.float64)
    lb = np.broadcast_to(np.asarray(lower, dtype=np.float64), (n,))
    out = Intervals(np.full(n, np.nan), np.full(n, np.nan), {}, np.zeros(n, dtype=bool), {})
    target_mask = suppressed.copy() if targets is None else (np.asarray(targets, dtype=bool) & suppressed)
    req = np.zeros(n) if required is None else np.broadcast_to(np.asarray(required, dtype=np.float64), (n,))
    if certify and required is None:
        raise ValueError("certify needs the required widths")
    if not target_mask.any():
        return Intervals(out.lower, out.upper, out.holders, out.exact)
    system = _Suppressed.of(A, values, suppressed, lb, req)
    seeds = [(c, x) for c, x in seeds if np.all(np.abs(x[~suppressed[c]] - values[c][~suppressed[c]]) <= _TOL)]
    total, done = int(target_mask.sum()), 0
    for cols, crow in independent_parts(system.A_S):
        cells = system.S[cols]
        want = np.flatnonzero(target_mask[cells])
        if want.size == 0:
            continue
        if want.size > 64:  # a component worth a line: the audit of a large pattern takes minutes
            report("interval audit", done=done, total=total, component=int(cols.size))
        done += int(want.size)
        if not _settle_small(system, out, cells, want, crow):
            _component_intervals(system, out, cols, crow, want, certify=certify, done=done, total=total,
                                 points=points, seeds=seeds)
    return out


def _on_cells(cells: np.ndarray, values: np.ndarray, seed: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """A table given as ``(cells, x)`` (sorted cells) read on ``cells``; other cells at ``values``."""
    sc, sx = seed
    out = values.copy()
    if sc.size:
        at = np.minimum(np.searchsorted(sc, cells), sc.size - 1)
        hit = sc[at] == cells
        out[hit] = sx[at[hit]]
    return out


@dataclass(frozen=True, eq=False)
class _Suppressed:
    """The audit's program (:func:`feasibility_intervals`): the relations ``A``, the suppressed
    cells ``S`` and published ones ``P``, the rows holding a suppressed cell, those rows over the
    suppressed cells (``A_S``) and over the published ones (``A_P``, None when none is) with the
    right-hand sides ``b`` the published values give; per cell its true value, lower bound,
    required width and room (how far it can move down: the capacities of narrow cells)."""

    A: sp.csr_matrix
    suppressed: np.ndarray
    values: np.ndarray
    lb: np.ndarray
    req: np.ndarray
    S: np.ndarray
    P: np.ndarray
    rows: np.ndarray
    A_S: sp.csr_matrix
    A_P: sp.csr_matrix | None
    b: np.ndarray
    room: np.ndarray

    @classmethod
    def of(cls, A: sp.csr_matrix, values: np.ndarray, suppressed: np.ndarray, lb: np.ndarray,
           req: np.ndarray) -> _Suppressed:
        S = np.flatnonzero(suppressed)
        P = np.flatnonzero(~suppressed)
        A_S = sp.csc_matrix(A[:, S])
        rows = np.flatnonzero(np.diff(sp.csr_matrix(A_S).indptr))
        A_S = sp.csr_matrix(A_S[rows])
        b = -(A[rows][:, P] @ values[P]) if P.size else np.zeros(rows.size)
        A_P = sp.csr_matrix(A[rows][:, P]) if P.size else None
        return cls(A, suppressed, values, lb, req, S, P, rows, A_S, A_P, b, values - lb)


def _settle_small(system: _Suppressed, out: Intervals, cells: np.ndarray, want: np.ndarray,
                  crow: np.ndarray) -> bool:
    """Settle a component that needs no program, writing into ``out``: a cell in no relation
    (only its bounds are known) or one unknown in at least one equation (determined, held by the
    published cells of its relations). False when the component needs programs."""
    if crow.size == 0:  # a cell in no relation: only its bounds are known
        out.lower[cells[want]] = system.lb[cells[want]]
        out.upper[cells[want]] = math.inf
        out.exact[cells[want]] = True  # type: ignore[index]
        return True
    if cells.size == 1:  # one unknown in at least one equation: determined
        out.lower[cells[want]] = out.upper[cells[want]] = system.values[cells[want]]
        out.exact[cells[want]] = True  # type: ignore[index]
        if system.req[cells[want]][0] > 0:
            A_P = system.A_P
            held = np.unique(A_P[crow].indices) if A_P is not None else np.zeros(0, dtype=np.int64)
            out.holders[int(cells[want][0])] = system.P[held]  # type: ignore[index]
        return True
    return False


def _component_intervals(system: _Suppressed, out: Intervals, cols: np.ndarray, crow: np.ndarray, want: np.ndarray,
                         *, certify: bool, done: int, total: int,
                         points: list[tuple[np.ndarray, np.ndarray]] | None = None,
                         seeds: Sequence[tuple[np.ndarray, np.ndarray]] = ()) -> None:
    """The intervals of the wanted cells of one component (columns ``cols`` of ``A_S``, rows
    ``crow``), written into ``out``: each cell's maximum and minimum by one warm-started program
    (METHODS.md §10); with ``certify``, programs only for cells not yet shown wide enough by the
    optimal points seen so far (their bounds are then inner bounds, ``exact`` false). A cell
    narrower than required gets its capacities and holders (:func:`capacity`)."""
    cells = system.S[cols]
    values, lb, req = system.values, system.lb, system.req
    lo, hi, exact = out.lower, out.upper, out.exact
    assert exact is not None
    sub = system.A_S[crow][:, cols]
    solver = ExtremeSolver(sub, system.b[crow], lb[cells], np.full(cols.size, math.inf))
    pool_lo = values[cells[want]].copy()
    pool_hi = pool_lo.copy()

    def keep(x: np.ndarray | None) -> None:  # a table for later audits, up to KEEP_VALUES values in all
        if points is not None and x is not None and sum(p.size for _, p in points) + x.size <= KEEP_VALUES:
            points.append((cells, x.copy()))

    def take(x: np.ndarray | None) -> None:
        widen(pool_lo, pool_hi, want, x)
        keep(x)

    if certify:
        for seed in seeds:
            widen(pool_lo, pool_hi, want, _on_cells(cells, values[cells], seed))
        spread(sub, system.b[crow], lb[cells], np.full(cols.size, math.inf), values[cells], want,
               req[cells[want]], pool_lo, pool_hi, keep)
    for i, w in enumerate(want.tolist()):
        cell = int(cells[w])
        if certify and pool_hi[i] - pool_lo[i] >= req[cell] - _TOL:
            continue
        if i % 512 == 511:
            report("interval audit", done=done - want.size + i, total=total, component=int(cols.size))
        high = solver.extreme(w, maximize=True)
        take(high.x)
        if certify and (not math.isfinite(high.value) or pool_hi[i] - pool_lo[i] >= req[cell] - _TOL):
            if not math.isfinite(high.value):
                pool_hi[i] = math.inf
            continue  # its maximum alone leaves it wide enough: one program, not two
        # a cell at its least value (a suppressed 1 when zeros are never suppressed) has that
        # value as its minimum, held by its own bound and no published cell: no program
        at_bound = values[cell] <= lb[cell]
        low = None if at_bound else solver.extreme(w, maximize=False)
        if low is not None:
            take(low.x)
        lo[cell], hi[cell] = (lb[cell] if low is None else low.value), high.value
        exact[cell] = True
        if req[cell] > 0 and hi[cell] - lo[cell] < req[cell] - _TOL:
            idx, c = capacity(system.A, system.rows[crow], cell, system.room, system.suppressed, (low, high))
            out.capacities[cell] = (idx, c)  # type: ignore[index]
            out.holders[cell] = idx[~system.suppressed[idx]]  # type: ignore[index]
    settled = ~exact[cells[want]]
    lo[cells[want][settled]] = pool_lo[settled]
    hi[cells[want][settled]] = pool_hi[settled]


@dataclass(frozen=True, eq=False)
class IntervalAudit:
    """The interval audit of a suppressed table.

    Attributes:
        table: the audited table, dense (its ``count`` column holds the true values).
        suppressed: mask of suppressed cells.
        lower, upper: the feasibility interval of each suppressed cell (NaN for published ones).
        required: the width each cell needs (0 where nothing is required).
        narrow: cells whose interval is narrower than required (e.g. holds only the true value).
    """

    table: Table
    suppressed: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    required: np.ndarray
    narrow: np.ndarray

    @property
    def exact(self) -> np.ndarray:
        """Suppressed cells whose interval holds only the true value."""
        return self.suppressed & (self.upper - self.lower <= _TOL)

    def to_frame(self) -> pd.DataFrame:
        """One row per suppressed cell: codes, true value, interval, width, required, narrow."""
        rows = self.suppressed
        t = self.table.take(rows).with_values(
            lower=self.lower[rows], upper=self.upper[rows], width=self.upper[rows] - self.lower[rows],
            required=self.required[rows], narrow=self.narrow[rows],
        )
        frame = t.select(["count", "lower", "upper", "width", "required", "narrow"]).to_frame()
        for v in t.variables:
            frame[v] = frame[v].astype(str)
        return frame


def interval_audit(
    table: Table,
    suppressed: np.ndarray,
    *,
    required: np.ndarray | float = 0.0,
    lower: np.ndarray | float = 0.0,
    cells: np.ndarray | None = None,
) -> IntervalAudit:
    """Audit a suppression pattern of ``table``: the interval of every suppressed cell.

    Source: seed 000 §5.3 (secondary suppression must stop recomputation from margins);
    METHODS.md §10.

    Args:
        table: the table with its true ``count`` (densified: the audit is over the whole grid).
        suppressed: boolean mask of suppressed cells, one per grid cell.
        required: interval width each cell needs (a number for all, or one per cell); cells with
            a positive requirement and a narrower interval are ``narrow``.
        lower: what an intruder knows as the least value of a suppressed cell (0, or 1 for a
            publisher who never suppresses zeros).
        cells: restrict the audit to these cells (mask); default every suppressed cell.

    >>> import pandas as pd
    >>> from tabsafe import InnerCells, tabulate
    >>> inner = pd.DataFrame({"r": ["a", "a", "b", "b"], "c": ["x", "y", "x", "y"], "n": [1, 5, 4, 6]})
    >>> t = tabulate(InnerCells.from_frame(inner, count="n"), ["r", "c"])
    >>> hidden = np.zeros(t.n_cells, dtype=bool); hidden[t.cell_id({"r": "a", "c": "x"})] = True
    >>> audit = interval_audit(t, hidden, required=1)
    >>> bool(audit.narrow.any())  # a lone suppressed cell is recomputed from its row total
    True
    """
    table = table.densify()
    suppressed = np.asarray(suppressed, dtype=bool)
    if suppressed.shape != (table.n_cells,):
        raise InputError(f"suppression mask has {suppressed.size} entries, the table {table.n_cells} cells")
    values = np.asarray(table.counts, dtype=np.float64)
    if np.isnan(values).any():
        raise InputError("the interval audit needs the true counts; the table's count has missing values")
    req = np.broadcast_to(np.asarray(required, dtype=np.float64), (table.n_cells,)).copy()
    targets = suppressed if cells is None else (np.asarray(cells, dtype=bool) & suppressed)
    res = feasibility_intervals(table.additivity(), values, suppressed, lower=lower, targets=targets)
    width = res.upper - res.lower
    narrow = targets & (req > 0) & (width < req - _TOL)
    req[~suppressed] = 0.0
    return IntervalAudit(table, suppressed, res.lower, res.upper, req, narrow)
