"""One integer program: round some cells of the grid, the others being fixed.

Every strategy of controlled rounding (whole table, slices, parts, neighbourhoods) solves
programs of one form (seed 000 §5.5.1; METHODS.md §4). Each free cell gets ``a = b·(u + w)``,
``w = y + p − q``, with a binary ``y`` ("round up", only when ``r ≠ 0``) and, with ``K`` steps,
integers ``p ∈ [0, K]`` (further steps up) and ``q ∈ [0, min(K, u)]`` (steps down). The cost
``|z − a|`` is then linear: ``r + (b − 2r)·y + b·p + b·q`` (exact at the optimum because the
solver never wastes steps). Additivity ``A·a = 0`` becomes ``A·(y + p − q) = −A·u`` with integer
coefficients; cells that are multiples of ``b`` (zero cells in particular) carry no variable at
all, which makes census tables — most of whose inner cells are zero — much smaller than their
grid.

A program is described by value objects: the :class:`Problem` (grid, counts, base, steps), the
:class:`Part` (which cells are free, the values of the others, narrowed ranges, which relations
to keep, a pull towards a target, a continuous look-ahead, a warm start) and the
:class:`~tabsafe.protect.controlled_rounding.work.Effort` it may spend.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp

from tabsafe.errors import InputError
from tabsafe.protect.controlled_rounding.grid import Grid
from tabsafe.protect.controlled_rounding.steps import step_range
from tabsafe.protect.controlled_rounding.work import Effort, Work
from tabsafe.solver import LinearProgram, Solution, solve

__all__ = ["PENALTY", "Part", "PartResult", "Problem", "Pull", "Rounds", "run_part", "solve_part", "touched_rows"]

#: Cost of one step beyond the allowed range while a start is being repaired (lexicographic:
#: any violation costs more than every cell of a part at its farthest allowed value).
PENALTY = 10_000

#: HiGHS' random seed in every program: fixed, so equal programs give equal answers.
SOLVER_SEED = 0


@dataclass(frozen=True, eq=False)
class Problem:
    """One controlled rounding: the cells' counts ``z``, their additive relations ``A`` (``A·a = 0``
    iff ``a`` is additive), the base ``b`` and the steps ``K``.

    The cells are a table's grid (``grid``: its counts and additivity matrix, and the geometry
    the grid strategies — slices, parts, neighbourhoods — use) or any cell vector with a sparse
    relation matrix (``counts`` and ``relations``, ``grid`` None): the cells of a release, where
    a cell shared by several tables is one cell and every table's relations hold at once
    (:meth:`of_cells`).

    Attributes:
        grid: the dense table and its additive structure, or None for a cell vector.
        base: the rounding base.
        steps: allowed steps beyond the adjacent multiples (0: zero-restricted).
        counts: the counts of a cell vector (None: the grid's).
        relations: the relation matrix of a cell vector (None: the grid's).
    """

    grid: Grid | None
    base: int
    steps: int
    counts: np.ndarray | None = None
    relations: sp.spmatrix | None = None

    @classmethod
    def of_cells(cls, counts: np.ndarray, relations: sp.spmatrix, base: int, steps: int) -> Problem:
        """The program over a cell vector and a sparse relation matrix (one column per cell)."""
        z = np.asarray(counts, dtype=np.int64)
        if relations.shape[1] != z.size:
            raise InputError(f"{relations.shape[1]} relation columns for {z.size} cells")
        return cls(None, base, steps, z, sp.csc_matrix(relations, dtype=np.float64))

    @cached_property
    def z(self) -> np.ndarray:
        return self.grid.counts if self.counts is None else self.counts  # type: ignore[union-attr]

    @cached_property
    def additivity(self) -> sp.csc_matrix:
        """``A``, by columns (programs take the columns of their free cells)."""
        return self.grid.additivity if self.relations is None else self.relations  # type: ignore[union-attr]

    @property
    def size(self) -> int:
        """How many cells."""
        return int(self.z.size)

    @cached_property
    def u(self) -> np.ndarray:
        """``z // b``: the lower adjacent multiple, in multiples of the base."""
        return self.z // self.base

    @cached_property
    def r(self) -> np.ndarray:
        return self.z % self.base

    @cached_property
    def ranges(self) -> tuple[np.ndarray, np.ndarray]:
        """The allowed range ``[lo, hi]`` of every cell's ``w`` (:func:`step_range`)."""
        return step_range(self.z, self.base, self.steps)

    @cached_property
    def nearest_bound(self) -> float:
        """``Σ min(r, b − r)``: every cell at its nearest multiple, a lower bound of any rounding."""
        return float(np.minimum(self.r, self.base - self.r).sum())

    @property
    def kind(self) -> str:
        """"zero-restricted" or "K-step", for messages."""
        return "zero-restricted" if self.steps == 0 else f"{self.steps}-step"

    def n_vars(self) -> int:
        """Variables of the whole program: one per non-multiple, plus the step variables."""
        n = int(np.count_nonzero(self.r))
        if self.steps:
            n += int(self.z.size + np.count_nonzero(np.minimum(self.steps, self.u)))
        return n


@dataclass(frozen=True)
class Pull:
    """``λ·|w − target|`` added to the cost of each free cell with a finite target.

    Attributes:
        target: a full-length float array of step values (NaN: no pull on that cell).
        weight: λ.
    """

    target: np.ndarray
    weight: float


@dataclass(frozen=True, eq=False)
class Part:
    """The cells one program rounds, and how.

    Attributes:
        free: mask of the cells the program rounds.
        values: the current values of every cell: those outside ``free`` are fixed (with
            ``warm`` the free ones are the start).
        ranges: a full-length ``(lo, hi)`` narrowing each cell's allowed ``w`` (the parts of a
            partitioned table), or None for the step ranges.
        rows: mask of the additivity relations to keep (relations among cells that are free or
            already rounded), or None for all.
        pull: a pull towards target steps (the sequential rounding keeps close to the LP).
        relaxed: mask of free cells whose steps stay continuous (a look-ahead: their values are
            returned unchanged from ``values``).
        warm: start from ``values``, which must be additive; free cells outside their allowed
            range may stay there at a cost of :data:`PENALTY` per step (never further out), so
            an additive start that is not yet within the steps is repaired.
    """

    free: np.ndarray
    values: np.ndarray
    ranges: tuple[np.ndarray, np.ndarray] | None = None
    rows: np.ndarray | None = None
    pull: Pull | None = None
    relaxed: np.ndarray | None = None
    warm: bool = False

    @classmethod
    def whole(cls, problem: Problem) -> Part:
        """Every cell free."""
        return cls(free=np.ones(problem.z.size, dtype=bool), values=np.zeros(problem.z.size, dtype=np.int64))


@dataclass(frozen=True, eq=False)
class PartResult:
    """A program's answer.

    Attributes:
        values: the full new value array (None without a solution).
        status: the solver status (``optimal``, ``feasible``, ``infeasible``, ``failed``), or
            ``spent`` when the budget allowed no program.
        bound: the solver's bound on the part's objective (penalties included), if any.
        solution: the solver's answer (None when the program was settled without the solver).
    """

    values: np.ndarray | None
    status: str
    bound: float | None = None
    solution: Solution | None = None


class Rounds:
    """A rounding built one part after another (partitioned, sequential): not a value object.
    The subclass holds the values so far ``a``, the cells rounded ``done`` and the number of
    programs run ``programs``."""

    a: np.ndarray
    done: np.ndarray
    programs: int

    def take(self, res: PartResult, cells: np.ndarray) -> bool:
        """Keep a part's answer: its values, and ``cells`` rounded. False when the budget allowed
        no program (not counted) or the program had no rounding."""
        if res.status == "spent":
            return False
        self.programs += 1
        if res.values is None:
            return False
        self.a = res.values
        self.done = self.done | cells
        return True


def run_part(problem: Problem, part: Part, work: Work, *, cap: int | None = None, gap: float | None = None,
             first_feasible: bool = False) -> PartResult:
    """Solve ``part`` with at most ``cap`` nodes of what ``work`` has left, and charge them."""
    effort = work.effort(cap, gap=gap, first_feasible=first_feasible)
    if effort is None:
        return PartResult(None, "spent")
    res = solve_part(problem, part, effort)
    if res.solution is not None:
        work.charge(res.solution, effort)
    return res


def _free_ranges(problem: Problem, F: np.ndarray, part: Part) -> tuple[np.ndarray, np.ndarray] | None:
    """Allowed range of ``w`` for the free cells ``F``: their step range, or the part's narrowed
    ranges; None when some cell's range is empty."""
    if part.ranges is None:
        return problem.ranges[0][F], problem.ranges[1][F]
    lo, hi = part.ranges[0][F], part.ranges[1][F]
    return None if np.any(lo > hi) else (lo, hi)


def touched_rows(M: sp.csc_matrix, rhs: np.ndarray) -> tuple[sp.csc_matrix, np.ndarray] | None:
    """The rows of ``M x = rhs`` that hold a variable, with their right-hand sides; None when a
    row without variables asks for a non-zero sum (the program has no solution)."""
    touched = np.zeros(M.shape[0], dtype=bool)
    touched[M.indices] = True
    if np.any(rhs[~touched] != 0):
        return None
    rowmap = np.cumsum(touched) - 1
    kept = sp.csc_matrix((M.data, rowmap[M.indices], M.indptr), shape=(int(touched.sum()), M.shape[1]))
    return kept, rhs[touched].astype(np.float64)


def _solve(lp: LinearProgram, effort: Effort, start: np.ndarray | None = None) -> Solution:
    return solve(lp, start=start, time_limit=effort.seconds, mip_rel_gap=effort.gap,
                 first_feasible=effort.first_feasible, threads=1, node_limit=effort.nodes, random_seed=SOLVER_SEED)


def solve_part(problem: Problem, part: Part, effort: Effort) -> PartResult:
    """Round the free cells of ``part`` given the values of all other cells (see the module
    docstring); a part with a pull goes to the unit-step form (:func:`_solve_pulled`)."""
    A = problem.additivity
    if part.rows is not None:
        A = A[np.flatnonzero(part.rows)]
    if part.pull is not None:
        return _solve_pulled(problem, part, A, effort)
    b, z, a = problem.base, problem.z, part.values
    F = np.flatnonzero(part.free)
    zf = z[F]
    u, r = problem.u[F], problem.r[F]
    allowed = _free_ranges(problem, F, part)
    if allowed is None:
        return PartResult(None, "infeasible")
    w0 = a[F] // b - u if part.warm else None
    steps = _Steps.of(r, *allowed, w0, b)
    blocks, w_base = steps.blocks, steps.w_base
    v = np.where(part.free, problem.u, a // b)
    v[F] += w_base
    rhs_all = -(A @ v)
    cols = [A[:, F[pos]] * sign if sign < 0 else A[:, F[pos]] for pos, sign, _, _ in blocks if pos.size]
    n = sum(pos.size for pos, _, _, _ in blocks)
    offset = float(np.abs(zf - b * (u + w_base)).sum())
    rel = part.relaxed[F] if part.relaxed is not None else np.zeros(F.size, dtype=bool)
    out = a.copy()
    if n == 0:
        if np.any(rhs_all != 0):
            return PartResult(None, "infeasible")
        out[F] = b * (u + w_base)
        out[F[rel]] = a[F[rel]]
        return PartResult(out, "optimal", offset)
    M = sp.hstack(cols, format="csc") if len(cols) > 1 else cols[0].tocsc()
    kept = touched_rows(M, rhs_all)
    if kept is None:
        return PartResult(None, "infeasible")
    M, rhs = kept
    # exact costs: w_base is 0 whenever y is free, and a non-zero w_base (a range that excludes
    # w = 0) leaves only moves away from z, each step costing b
    c = np.concatenate([cost for _, _, _, cost in blocks])
    hi = np.concatenate([ub for _, _, ub, _ in blocks])
    integer = np.concatenate([~rel[pos] for pos, _, _, _ in blocks])
    lp = LinearProgram(c, M, rhs, rhs, np.zeros(n), hi, integer=integer, offset=offset)
    sol = _solve(lp, effort, steps.start(w0) if w0 is not None else None)
    if not sol.has_solution:
        return PartResult(None, sol.status, sol.bound, sol)
    x = np.rint(sol.x[:n]).astype(np.int64)
    w = w_base.copy()
    at = 0
    for pos, sign, _, _ in blocks:
        w[pos] += int(sign) * x[at:at + pos.size]
        at += pos.size
    out[F] = b * (u + w)
    out[F[rel]] = a[F[rel]]
    return PartResult(out, sol.status, sol.bound, sol)


@dataclass(frozen=True, eq=False)
class _Steps:
    """The step variables of :func:`solve_part` for the free cells (remainders ``r``): ``y`` ("up
    to the next multiple", ``r != 0`` only), ``p`` (further steps up), ``q`` (steps down) with
    the bounds that keep ``w = y + p − q`` inside ``[lo_w, hi_w]``, and, from a warm start
    outside the range, ``o`` (over) and ``d`` (under) at cost ``b + PENALTY``. ``w_base`` holds
    the fixed parts of ``w`` (bounds equal; the lower bounds of free ones); ``blocks`` each
    variable's (positions, sign in ``w``, upper bound above its lower, cost per step)."""

    y_lo: np.ndarray
    y_hi: np.ndarray
    p_lo: np.ndarray
    p_hi: np.ndarray
    q_lo: np.ndarray
    q_hi: np.ndarray
    over: np.ndarray
    under: np.ndarray
    w_base: np.ndarray
    blocks: list[tuple[np.ndarray, float, np.ndarray, np.ndarray]]

    @classmethod
    def of(cls, r: np.ndarray, lo_w: np.ndarray, hi_w: np.ndarray, w0: np.ndarray | None, b: int) -> _Steps:
        over = np.maximum(w0 - hi_w, 0) if w0 is not None else np.zeros(r.size, dtype=np.int64)
        under = np.maximum(lo_w - w0, 0) if w0 is not None else np.zeros(r.size, dtype=np.int64)
        nz = r != 0
        y_lo = (nz & (lo_w >= 1)).astype(np.int64)
        y_hi = (nz & (hi_w >= 1)).astype(np.int64)
        p_lo = np.maximum(lo_w - y_lo, 0)
        p_hi = np.maximum(hi_w - y_hi, 0)
        q_lo = np.maximum(-hi_w, 0)
        q_hi = np.maximum(-lo_w, 0)
        ypos = np.flatnonzero(nz & (y_hi > y_lo))
        ppos = np.flatnonzero(p_hi > p_lo)
        qpos = np.flatnonzero(q_hi > q_lo)
        opos = np.flatnonzero(over > 0)
        dpos = np.flatnonzero(under > 0)
        # fixed parts of w (bounds equal) go to the right-hand side
        w_fix = y_lo * (y_hi == y_lo) + p_lo * (p_hi == p_lo) - q_lo * (q_hi == q_lo)
        w_base = w_fix + np.where(y_hi > y_lo, y_lo, 0) + np.where(p_hi > p_lo, p_lo, 0) \
            - np.where(q_hi > q_lo, q_lo, 0)
        blocks = [
            (ypos, 1.0, np.ones(ypos.size), b - 2.0 * r[ypos]),
            (ppos, 1.0, (p_hi - p_lo)[ppos].astype(float), np.full(ppos.size, float(b))),
            (qpos, -1.0, (q_hi - q_lo)[qpos].astype(float), np.full(qpos.size, float(b))),
            (opos, 1.0, over[opos].astype(float), np.full(opos.size, float(b + PENALTY))),
            (dpos, -1.0, under[dpos].astype(float), np.full(dpos.size, float(b + PENALTY))),
        ]
        return cls(y_lo, y_hi, p_lo, p_hi, q_lo, q_hi, over, under, w_base, blocks)

    def start(self, w0: np.ndarray) -> np.ndarray:
        """The step variables (in block order) of the warm start ``w0``: up to the next multiple
        first, then further steps up (or down) within their bounds, the rest over (under)."""
        dw = w0 - self.w_base
        y = np.clip(dw, 0, 1) * (self.y_hi > self.y_lo)
        rest_up = np.maximum(dw - y, 0)
        p = np.minimum(rest_up, self.p_hi - self.p_lo)
        o = rest_up - p
        rest_down = np.maximum(-dw, 0)
        q = np.minimum(rest_down, self.q_hi - self.q_lo)
        d = rest_down - q
        (ypos, *_), (ppos, *_), (qpos, *_), (opos, *_), (dpos, *_) = self.blocks
        return np.concatenate([y[ypos], p[ppos], q[qpos], o[opos], d[dpos]]).astype(np.float64)


def _solve_pulled(problem: Problem, part: Part, A: sp.csc_matrix, effort: Effort) -> PartResult:
    """A part with a pull: cost ``f(w) = |z − b·(u + w)| + λ·|w − target|`` per cell.

    ``f`` is convex in ``w``, so ``w`` is written as its lowest allowed value plus one 0/1
    variable per unit step, each costing the increase of ``f`` over its step: the solver takes
    the cheap steps first, and any solution costs exactly ``Σ f(w)``. Why not ``λ·t`` with
    ``t ≥ ±(w − target)``: those rows and continuous columns stopped HiGHS' heuristics from
    finding any rounding of a 3,240-cell five-dimensional slice in 30 s; this form, with the same
    cells and relations, finds one in 1.7 s."""
    assert part.pull is not None
    b, a = problem.base, part.values
    F = np.flatnonzero(part.free)
    u, r = problem.u[F], problem.r[F]
    allowed = _free_ranges(problem, F, part)
    if allowed is None:
        return PartResult(None, "infeasible")
    lo, hi = allowed
    lam = part.pull.weight
    tau = np.asarray(part.pull.target, dtype=np.float64)[F]
    pulled = np.isfinite(tau)

    def f(w: np.ndarray, cell: np.ndarray) -> np.ndarray:
        cost = np.abs(r[cell] - b * w).astype(np.float64)
        m = pulled[cell]
        cost[m] += lam * np.abs(w[m] - tau[cell][m])
        return cost

    units = (hi - lo).astype(np.int64)
    cell = np.repeat(np.arange(F.size), units)
    step = lo[cell] + np.arange(cell.size) - np.repeat(np.cumsum(units) - units, units)
    cost = f(step + 1, cell) - f(step, cell)
    offset = float(f(lo, np.arange(F.size)).sum())
    v = np.where(part.free, problem.u, a // b)
    v[F] += lo
    rhs_all = -(A @ v)
    M = A[:, F][:, cell].tocsc()
    kept = touched_rows(M, rhs_all)
    if kept is None:
        return PartResult(None, "infeasible")
    M, rhs = kept
    out = a.copy()
    rel = part.relaxed[F] if part.relaxed is not None else np.zeros(F.size, dtype=bool)
    if cell.size == 0:
        out[F] = b * (u + lo)
        out[F[rel]] = a[F[rel]]
        return PartResult(out, "optimal", offset)
    lp = LinearProgram(cost, M, rhs, rhs, np.zeros(cell.size), np.ones(cell.size), integer=~rel[cell],
                       offset=offset)
    sol = _solve(lp, effort)
    if not sol.has_solution:
        return PartResult(None, sol.status, sol.bound, sol)
    w = lo.copy()
    np.add.at(w, cell, np.rint(sol.x).astype(np.int64))
    out[F] = b * (u + w)
    out[F[rel]] = a[F[rel]]
    return PartResult(out, sol.status, sol.bound, sol)
