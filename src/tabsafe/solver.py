"""The one door to the integer-programming library (HiGHS, through ``highspy``).

Methods state their programs as :class:`LinearProgram` values over scipy sparse matrices and get
a :class:`Solution` back; nothing else in tabsafe imports the solver, so changing solvers means
changing this file only. HiGHS was chosen because it is open source (MIT), ships as a wheel,
solves both LPs (interval audits) and MILPs (controlled rounding, secondary suppression) and
reports the dual bound and gap that tabsafe passes on to users. Besides one-shot solves it offers
warm starts (controlled rounding's neighbourhood search, suppression's cut loop) and a solver
that re-optimises one feasible set under changing objectives (the interval audit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Literal

import highspy
import numpy as np
import scipy.sparse as sp

from tabsafe import progress

INF = math.inf

__all__ = ["Extreme", "ExtremeSolver", "GrowingProgram", "LinearProgram", "Relaxation", "Solution", "solve"]


@dataclass(frozen=True, eq=False)
class LinearProgram:
    """minimise ``c·x`` subject to ``row_lower ≤ A x ≤ row_upper``, ``col_lower ≤ x ≤ col_upper``.

    ``integer`` marks integer columns (``None``: a pure LP). Use ``±math.inf`` for open bounds.
    Set ``maximize`` to maximise instead.
    """

    c: np.ndarray
    A: sp.spmatrix
    row_lower: np.ndarray
    row_upper: np.ndarray
    col_lower: np.ndarray
    col_upper: np.ndarray
    integer: np.ndarray | None = None
    maximize: bool = False
    offset: float = 0.0


@dataclass(frozen=True, eq=False)
class Solution:
    """The solver's answer.

    Attributes:
        status: ``optimal``, ``feasible`` (a solution, optimality not proven: time limit or
            first-feasible mode), ``infeasible``, ``unbounded`` or ``failed``.
        x: the solution (``None`` without one).
        objective: its objective value.
        bound: the best proven bound on the optimum (equal to ``objective`` when optimal).
        gap: relative gap ``|objective - bound| / max(1, |objective|)``.
        seconds: solver run time.
        nodes: branch-and-bound nodes explored (0 for an LP, or when presolve settled it).
        limit: the limit that stopped the solver before it finished: ``"time"`` (the time limit:
            the result depends on the machine's speed), ``"nodes"`` (the node limit:
            deterministic) or ``None``.
    """

    status: str
    x: np.ndarray | None
    objective: float | None
    bound: float | None
    gap: float | None
    seconds: float
    detail: str = field(default="")
    nodes: int = 0
    limit: str | None = None

    @property
    def has_solution(self) -> bool:
        return self.x is not None


_banner_shown = False


def _highs() -> highspy.Highs:
    """A HiGHS instance. HiGHS prints a banner to the process's stdout when the first instance
    is made, whatever its options: that first one is made with stdout pointed at /dev/null, so a
    command's stdout carries only what tabsafe says (a release piped on, a JSON answer)."""
    global _banner_shown
    if _banner_shown:
        return highspy.Highs()
    import ctypes
    import os
    import sys

    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        h = highspy.Highs()
        ctypes.CDLL(None).fflush(None)  # the banner sits in C's buffer until flushed
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)
    _banner_shown = True
    return h


def _model(lp: LinearProgram, inf: float, *, integer: bool = True) -> highspy.HighsLp:
    """The HiGHS form of ``lp`` (integrality dropped when ``integer`` is false)."""

    def clip(values: np.ndarray) -> np.ndarray:
        return np.nan_to_num(np.asarray(values, dtype=np.float64), neginf=-inf, posinf=inf)

    A = sp.csc_matrix(lp.A, dtype=np.float64)
    model = highspy.HighsLp()
    model.num_col_ = A.shape[1]
    model.num_row_ = A.shape[0]
    model.col_cost_ = np.asarray(lp.c, dtype=np.float64)
    model.col_lower_ = clip(lp.col_lower)
    model.col_upper_ = clip(lp.col_upper)
    model.row_lower_ = clip(lp.row_lower)
    model.row_upper_ = clip(lp.row_upper)
    model.offset_ = float(lp.offset)
    model.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    model.a_matrix_.start_ = A.indptr.astype(np.int32)
    model.a_matrix_.index_ = A.indices.astype(np.int32)
    model.a_matrix_.value_ = A.data
    model.sense_ = highspy.ObjSense.kMaximize if lp.maximize else highspy.ObjSense.kMinimize
    if integer and lp.integer is not None and np.any(lp.integer):
        model.integrality_ = [
            highspy.HighsVarType.kInteger if f else highspy.HighsVarType.kContinuous for f in np.asarray(lp.integer)
        ]
    return model


def _option(h: highspy.Highs, name: str) -> float:
    value = h.getOptionValue(name)
    return float(value[1] if isinstance(value, tuple) else value)  # (status, value) in some versions


def _answer(h: highspy.Highs, *, is_mip: bool, node_limit: int | None = None,
            lp: LinearProgram | None = None) -> Solution:
    status = h.getModelStatus()
    info = h.getInfo()
    S = highspy.HighsModelStatus
    has_primal = info.primal_solution_status == 2  # kSolutionStatusFeasible
    x = np.array(h.getSolution().col_value) if has_primal else None
    objective = float(info.objective_function_value) if has_primal else None
    if x is not None and lp is not None and is_mip:
        # the objective of the point returned, not the one HiGHS reports: given a start, HiGHS
        # 1.x once returned the start (cost 1,044.09) as the solution of a program it reported
        # optimal at 1,024.08 (the bound held; the point was the start's)
        objective = float(np.dot(lp.c, x)) + float(lp.offset)
    if is_mip:
        bound = float(info.mip_dual_bound) if math.isfinite(info.mip_dual_bound) else None
    else:
        bound = objective if status == S.kOptimal else None
    if status == S.kOptimal:
        name = "optimal"
        bound = objective if bound is None else bound
        if (is_mip and objective is not None and bound is not None
                and objective - bound > max(1e-6, 2 * _option(h, "mip_rel_gap")) * max(1.0, abs(objective))):
            name = "feasible"  # the point returned is not within the gap of the bound
    elif status in (S.kInfeasible, S.kUnboundedOrInfeasible):
        name = "infeasible"
    elif status == S.kUnbounded:
        name = "unbounded"
    elif has_primal:
        name = "feasible"
    else:
        name = "failed"
    gap = None
    if objective is not None and bound is not None:
        gap = abs(objective - bound) / max(1.0, abs(objective))
    nodes = int(info.mip_node_count) if is_mip and info.mip_node_count > 0 else 0
    limit = None
    if status == S.kTimeLimit:
        limit = "time"
    elif status == S.kSolutionLimit and node_limit is not None and nodes >= node_limit:
        limit = "nodes"
    return Solution(name, x, objective, bound, gap, float(h.getRunTime()), h.modelStatusToString(status),
                    nodes=nodes, limit=limit)


def solve(
    lp: LinearProgram,
    *,
    time_limit: float | None = None,
    mip_rel_gap: float | None = None,
    first_feasible: bool = False,
    threads: int | None = None,
    start: np.ndarray | None = None,
    relax: bool = False,
    lp_method: str | None = None,
    node_limit: int | None = None,
    random_seed: int | None = None,
) -> Solution:
    """Solve ``lp`` with HiGHS.

    Args:
        time_limit: seconds; on expiry the best solution found so far is returned as ``feasible``.
        mip_rel_gap: stop when the relative gap falls below this (HiGHS default 1e-4).
        first_feasible: stop at the first integer-feasible solution.
        threads: solver threads (default 1: see the comment in the body).
        start: a feasible point to start from (warm start); HiGHS then never returns worse.
        relax: drop integrality (the LP relaxation, whose optimum bounds the integer program).
        lp_method: ``"ipm"`` (interior point: about 3× faster than dual simplex on the LP
            relaxations of large tables) or ``"simplex"``; HiGHS chooses otherwise.
        node_limit: stop after this many branch-and-bound nodes (0: presolve only, which proves
            many programs infeasible at once). Unlike a time limit it gives the same answer on
            every machine (with ``threads=1`` and a fixed ``random_seed``).
        random_seed: HiGHS' random seed (its default, 0, otherwise).
    """
    h = _highs()
    h.setOptionValue("output_flag", False)
    # HiGHS keeps one thread pool per process, sized by its first run; a later run asking for
    # another size fails (model status "Not Set": an integer program on HiGHS' default pool, then
    # an interval audit on one thread, crashed the audit). Every program runs on one thread
    # unless a caller asks otherwise; the measured programs ran on one thread already.
    h.setOptionValue("threads", int(threads) if threads else 1)
    if time_limit is not None:
        h.setOptionValue("time_limit", max(0.01, float(time_limit)))
    if mip_rel_gap is not None:
        h.setOptionValue("mip_rel_gap", float(mip_rel_gap))
    if first_feasible:
        h.setOptionValue("mip_max_improving_sols", 1)
    if lp_method is not None:
        h.setOptionValue("solver", lp_method)
    if node_limit is not None:
        h.setOptionValue("mip_max_nodes", int(node_limit))
    if random_seed is not None:
        h.setOptionValue("random_seed", int(random_seed))
    h.passModel(_model(lp, h.getInfinity(), integer=not relax))
    if start is not None:
        start = np.asarray(start, dtype=np.float64)
        h.setSolution(int(start.size), np.arange(start.size, dtype=np.int32), start)
    is_mip = not relax and lp.integer is not None and bool(np.any(lp.integer))
    # every program says so: a method solving hundreds of them shows that it is working
    progress.report("solver", program="integer" if is_mip else "linear", variables=int(lp.c.size))
    h.run()
    sol = _answer(h, is_mip=is_mip, node_limit=node_limit, lp=lp)
    if start is not None and sol.status == "feasible" and sol.detail == "Optimal":
        # HiGHS called the program solved but returned a point outside its gap (the start, so
        # far): solved again without the start, in the time left, that program gave its optimum
        left = None if time_limit is None else float(time_limit) - sol.seconds
        if left is None or left > 0.05:
            again = solve(lp, time_limit=left, mip_rel_gap=mip_rel_gap, first_feasible=first_feasible,
                          threads=threads, relax=relax, lp_method=lp_method, node_limit=node_limit,
                          random_seed=random_seed)
            # no worse: its bound is the program's own (the first run's was not, 1,003 against
            # 1,039 proved a round before on the 1,218-cell area × citizenship table)
            if again.objective is not None and (sol.objective is None or again.objective <= sol.objective + 1e-9):
                return again
    return sol


def interior_point(A: sp.spmatrix, b: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                   reach: np.ndarray | float = 1.0) -> np.ndarray | None:
    """A point of ``{y : A y = b, lower <= y <= upper}`` away from its bounds where it can be, or
    None when HiGHS finds none (infeasible, or not solved).

    The program: the largest sum over the variables of their distance to the nearer bound, each
    counted up to ``reach`` (and half its box): ``max sum s`` with ``lower + s <= y <= upper - s``,
    ``0 <= s <= min(reach, (upper - lower) / 2)``. Solved by the interior point method without
    crossover (a point inside the optimal face, not a vertex of it). A zero objective (any
    feasible point: the method stops at its first one) left 5,279 of the 45,472 cells of the
    demo's randomly rounded release unsettled by the audit's moves (:mod:`tabsafe.release.audit`,
    issue #28), this 3,132; the cells it leaves at a bound are those the sum trades away, and the
    local programs (:mod:`tabsafe.release.local`) from it settle most of them. One thread and no
    clock: the same point on every machine.
    """
    h = _highs()
    for key, value in (("output_flag", False), ("threads", 1), ("solver", "ipm"), ("run_crossover", "off")):
        h.setOptionValue(key, value)
    A = sp.csr_matrix(A, dtype=np.float64)
    m, n = A.shape
    lo = np.asarray(lower, dtype=np.float64)
    hi = np.asarray(upper, dtype=np.float64)
    cap = np.minimum(np.broadcast_to(np.asarray(reach, dtype=np.float64), (n,)), (hi - lo) / 2)
    eye = sp.identity(n, format="csr")
    # rows: A y = b; y - s >= lower; y + s <= upper
    M = sp.vstack([sp.hstack([A, sp.csr_matrix((m, n))]), sp.hstack([eye, -eye]), sp.hstack([eye, eye])])
    b = np.asarray(b, dtype=np.float64)
    lp = LinearProgram(np.concatenate([np.zeros(n), np.ones(n)]), M, np.concatenate([b, lo, np.full(n, -np.inf)]),
                       np.concatenate([b, np.full(n, np.inf), hi]), np.concatenate([lo, np.zeros(n)]),
                       np.concatenate([hi, np.maximum(cap, 0.0)]), maximize=True)
    h.passModel(_model(lp, h.getInfinity(), integer=False))
    progress.report("solver", program="linear", variables=int(2 * n))
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None
    return np.array(h.getSolution().col_value, dtype=np.float64)[:n]


class Relaxation:
    """The LP relaxation of a program that grows by rows (cuts), each solve starting from the
    last optimal basis: the dual simplex re-optimises after rows are added (the old basis stays
    dual feasible), where solving the grown program afresh starts from nothing.

    Not a value object: it owns a HiGHS instance (as :class:`ExtremeSolver`). On the 26,796-cell
    benchmark table a round of the optimal mode's root cut loop re-solves in about 0.3 s where a
    fresh solve took 1.5–2 s.
    """

    def __init__(self, lp: LinearProgram) -> None:
        self._h = _highs()
        for key, value in (("output_flag", False), ("threads", 1)):
            self._h.setOptionValue(key, value)
        self._h.passModel(_model(lp, self._h.getInfinity(), integer=False))

    def add_rows(self, A: sp.spmatrix, lower: np.ndarray, upper: np.ndarray) -> None:
        """Append the rows ``lower <= A x <= upper``."""
        A = sp.csr_matrix(A, dtype=np.float64)
        if A.shape[0] == 0:
            return
        inf = self._h.getInfinity()
        lo = np.nan_to_num(np.asarray(lower, dtype=np.float64), neginf=-inf, posinf=inf)
        up = np.nan_to_num(np.asarray(upper, dtype=np.float64), neginf=-inf, posinf=inf)
        self._h.addRows(A.shape[0], lo, up, A.nnz, A.indptr[:-1].astype(np.int32), A.indices.astype(np.int32),
                        A.data)

    def solve(self, time_limit: float | None = None) -> Solution:
        """The optimum of the relaxation as it now stands."""
        # HiGHS measures its time limit (and its run time) over all runs of an instance
        before = self._h.getRunTime()
        if time_limit is not None:
            self._h.setOptionValue("time_limit", before + max(0.01, float(time_limit)))
        self._h.run()
        sol = _answer(self._h, is_mip=False)
        return replace(sol, seconds=sol.seconds - before)


@dataclass(frozen=True)
class Extreme:
    """The optimum of a linear objective over a feasible set.

    Attributes:
        value: the optimal value (``±inf`` when unbounded).
        x: an optimal point (``None`` when unbounded).
        duals: the row duals of the optimal basis (``None`` when unbounded); rows with a non-zero
            dual are the constraints that hold the bound.
    """

    value: float
    x: np.ndarray | None
    duals: np.ndarray | None


#: simplex iterations a warm call of ``ExtremeSolver(first="ipm")`` may take before the program is
#: solved afresh by the interior point method: on the demo's 45,472-cell randomly rounded release a
#: warm primal simplex, degenerate, ran for minutes on one cell where the fresh solve takes seconds
#: (a work budget, not a clock: the same calls on every machine)
WARM_ITERATIONS = 2_000
_NO_LIMIT = 2**31 - 1


class ExtremeSolver:
    """Optima of linear objectives over ``{y : A y = b, lower <= y <= upper}``, warm-started.

    The interval audit (seed 000 §5.3) minimises and maximises each suppressed cell in turn over
    the same feasible set. Not a value object: it owns a HiGHS instance whose basis carries over
    from one call to the next (that is the point); create one per program and drop it when done.
    Only the objective changes between calls, so the last basis stays primal feasible: primal
    simplex without presolve re-optimises it in a few iterations (about ten times faster than
    HiGHS' defaults). The first call has no basis to start from: it is solved with presolve and
    the dual simplex (on an audit of the 26,796-cell benchmark table, 4.3 s → 2.5 s), whose final
    basis the later calls start from; ``first="ipm"``: by the interior point method and crossover
    (the release audit of a rounded release, every cell boxed: on the demo's 45,472-cell randomly
    rounded release 6.6 s against 60–93 s by either simplex, and the later calls from its basis
    took 0.15–0.45 s against 0.7–1 s), the dual simplex when that fails.
    """

    def __init__(self, A: sp.spmatrix, b: np.ndarray, lower: np.ndarray, upper: np.ndarray, *,
                 first: Literal["simplex", "ipm"] = "simplex") -> None:
        self._h = _highs()
        for key, value in (("output_flag", False), ("threads", 1), ("presolve", "on"), ("simplex_strategy", 1)):
            self._h.setOptionValue(key, value)
        if first == "ipm":
            self._h.setOptionValue("solver", "ipm")
        self._first = first
        self._warm = False
        n = A.shape[1]
        self._n = n
        self._cost = np.zeros(n)
        b = np.asarray(b, dtype=np.float64)
        lp = LinearProgram(self._cost, A, b, b, np.asarray(lower, dtype=np.float64), np.asarray(upper, dtype=np.float64))
        self._h.passModel(_model(lp, self._h.getInfinity()))

    def _set_cost(self, cost: np.ndarray) -> None:
        changed = np.flatnonzero(cost != self._cost)
        if changed.size:
            self._h.changeColsCost(changed.size, changed.astype(np.int32), cost[changed].astype(np.float64))
            self._cost = cost.copy()

    def optimum(self, cost: np.ndarray, *, maximize: bool) -> Extreme:
        """The optimum of ``cost · y``."""
        h = self._h
        self._set_cost(np.asarray(cost, dtype=np.float64))
        h.changeObjectiveSense(highspy.ObjSense.kMaximize if maximize else highspy.ObjSense.kMinimize)
        h.run()
        warm = self._warm
        status = h.getModelStatus()
        S = highspy.HighsModelStatus
        if not warm:  # from now on: re-optimise the last basis (class docstring)
            h.setOptionValue("solver", "choose")
            if self._first == "ipm" and status not in (S.kOptimal, S.kUnbounded, S.kUnboundedOrInfeasible):
                h.clearSolver()  # the interior point method failed: the dual simplex, as by default
                h.run()
                status = h.getModelStatus()
            h.setOptionValue("presolve", "off")
            h.setOptionValue("simplex_strategy", 4)
            if self._first == "ipm":  # a work budget for each warm call (below)
                h.setOptionValue("simplex_iteration_limit", WARM_ITERATIONS)
            self._warm = True
        if status not in (S.kOptimal, S.kUnbounded, S.kUnboundedOrInfeasible) and warm:
            # the warm primal simplex can stall on a degenerate basis (HiGHS then reports
            # "Unknown": seen on a randomly rounded release of 6,048 cells): solve this one again
            # from scratch, as the first call is solved, and go on warm from its basis
            h.clearSolver()
            h.setOptionValue("presolve", "on")
            h.setOptionValue("simplex_strategy", 1)
            if self._first == "ipm":  # as the first call was: seconds, not a minute, on a large program
                h.setOptionValue("solver", "ipm")
                h.setOptionValue("simplex_iteration_limit", _NO_LIMIT)
            h.run()
            h.setOptionValue("solver", "choose")
            if self._first == "ipm":
                h.setOptionValue("simplex_iteration_limit", WARM_ITERATIONS)
            h.setOptionValue("presolve", "off")
            h.setOptionValue("simplex_strategy", 4)
            status = h.getModelStatus()
        if status == S.kOptimal:
            sol = h.getSolution()
            return Extreme(float(h.getInfo().objective_function_value), np.array(sol.col_value),
                           np.array(sol.row_dual))
        if status in (S.kUnbounded, S.kUnboundedOrInfeasible):
            return Extreme(math.inf if maximize else -math.inf, None, None)
        # A feasible program (the true values satisfy it) that fails to solve is a solver fault.
        raise RuntimeError(f"interval LP failed: {h.modelStatusToString(status)}")

    def extreme(self, col: int, *, maximize: bool) -> Extreme:
        """The minimum (or maximum) of variable ``col``."""
        cost = np.zeros(self._n)
        cost[col] = 1.0
        return self.optimum(cost, maximize=maximize)


class GrowingProgram:
    """The least or largest value of one variable over ``{y : A y = b, lower <= y <= upper}`` with
    only some variables free, the others held at a feasible point ``y`` (column generation: the
    caller frees more, :meth:`add`, and solves again). Kept in changes from ``y``: each free
    variable ``j`` is ``y_j + up_j - down_j`` (two columns, ``0 <= up_j <= upper_j - y_j``,
    ``0 <= down_j <= y_j - lower_j``), each row of a free variable a row whose right-hand side is
    what ``y`` leaves of it (0 up to rounding); the objective one variable (:meth:`aim`). Used by
    the release audit's local programs (:mod:`tabsafe.release.local`, issue #28). Not a value
    object: it owns a HiGHS instance, kept from program to program.

    Why changes: a variable that joins enters its two columns at 0, a bound, and its new rows
    hold only columns at 0, so the last basis stays a basis (HiGHS makes a new row's slack
    basic) and the dual simplex goes on from it, as it does when the objective turns to another
    bound. Measured on 100 cells of the five-table 87,290-cell randomly rounded release: each
    grown program solved afresh 66 s, warm 27 s (and 1.9 s started with the cells the previous
    cell's optima moved).

    Args:
        A, AT: the rows (CSR) and the same transposed (CSR: a variable's rows).
        b: the right-hand sides; y: a point that satisfies them; lower, upper: the bounds.
        start: the variables free from the start.
    """

    def __init__(self, A: sp.csr_matrix, AT: sp.csr_matrix, b: np.ndarray, y: np.ndarray, lower: np.ndarray,
                 upper: np.ndarray, start: np.ndarray) -> None:
        self.A, self.AT, self.b, self.y, self.lower, self.upper = A, AT, b, y, lower, upper
        self.h = _highs()
        # no presolve: HiGHS 1.16's called a feasible 750-variable program of the release audit
        # infeasible (scipy's linprog and HiGHS without presolve solve it)
        for key, value in (("output_flag", False), ("threads", 1), ("presolve", "off"), ("simplex_strategy", 1)):
            self.h.setOptionValue(key, value)
        self.row_of = np.full(A.shape[0], -1, dtype=np.int64)  # the HiGHS row of each row of A
        self.rows = np.zeros(0, dtype=np.int64)  # the rows holding a free variable, in HiGHS' order
        self.variables = np.zeros(0, dtype=np.int64)  # the free variables, in HiGHS' order (columns 2k, 2k + 1)
        self.col_of = np.full(A.shape[1], -1, dtype=np.int64)
        self.free = np.zeros(A.shape[1], dtype=bool)
        self.at = -1
        self.maximize = True
        #: per sense, the variables its last optimum moved from ``y``
        self.paths: dict[bool, np.ndarray] = {}
        self.add(start)

    @property
    def moved(self) -> np.ndarray:
        """The variables the last optimum of either sense moved from ``y``."""
        return np.unique(np.concatenate([np.zeros(0, dtype=np.int64), *self.paths.values()]))

    def add(self, free: np.ndarray) -> None:
        """Free the variables ``free`` (those free already stay as they are), with their rows."""
        h = self.h
        new = np.unique(free[~self.free[free]])
        if new.size == 0:
            return
        col = self.AT[new]
        new_rows = np.unique(col.indices)
        new_rows = new_rows[self.row_of[new_rows] < 0]
        if new_rows.size:
            # what y leaves of each row: its rounding (1e-9 on a central point)
            rest = self.b[new_rows] - self.A[new_rows] @ self.y
            h.addRows(new_rows.size, rest, rest, 0, np.zeros(new_rows.size, dtype=np.int32),
                      np.zeros(0, dtype=np.int32), np.zeros(0))
            self.row_of[new_rows] = self.rows.size + np.arange(new_rows.size)
            self.rows = np.concatenate([self.rows, new_rows])
        # two columns per variable, its entries twice in a row (up: +a, then down: -a)
        counts = np.diff(col.indptr)
        starts = np.concatenate([[0], np.cumsum(np.repeat(counts, 2))[:-1]]).astype(np.int32)
        twice = np.repeat(np.arange(new.size), counts)  # the variable of each entry
        order = np.lexsort((np.concatenate([np.zeros(col.nnz), np.ones(col.nnz)]), np.concatenate([twice, twice])))
        index = np.concatenate([self.row_of[col.indices], self.row_of[col.indices]])[order]
        value = np.concatenate([col.data, -col.data])[order]
        upper = np.empty(2 * new.size)
        upper[0::2] = np.maximum(self.upper[new] - self.y[new], 0.0)
        upper[1::2] = np.maximum(self.y[new] - self.lower[new], 0.0)
        h.addCols(2 * new.size, np.zeros(2 * new.size), np.zeros(2 * new.size), upper, index.size, starts,
                  index.astype(np.int32), value.astype(np.float64))
        self.col_of[new] = self.variables.size + np.arange(new.size)
        self.variables = np.concatenate([self.variables, new])
        self.free[new] = True

    def aim(self, at: int, maximize: bool) -> None:
        """Make the variable ``at``'s largest (``maximize``) or least value the objective (freeing
        it if it is held)."""
        self.add(np.array([at], dtype=np.int64))
        self.maximize = maximize
        h = self.h
        if self.at >= 0:
            k = int(self.col_of[self.at])
            h.changeColsCost(2, np.array([2 * k, 2 * k + 1], dtype=np.int32), np.zeros(2))
        k = int(self.col_of[at])
        h.changeColsCost(2, np.array([2 * k, 2 * k + 1], dtype=np.int32), np.array([1.0, -1.0]))
        h.changeObjectiveSense(highspy.ObjSense.kMaximize if maximize else highspy.ObjSense.kMinimize)
        self.at = at

    def solve(self) -> tuple[float, np.ndarray, np.ndarray] | None:
        """The optimum: the variable's value, the free variables' values (:attr:`variables`'
        order), the rows' duals (:attr:`rows`' order); None when HiGHS does not solve it."""
        h = self.h
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            h.clearSolver()  # a warm start that stalls: once more from nothing, as ExtremeSolver does
            h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return None
        sol = h.getSolution()
        moved = np.asarray(sol.col_value)
        x = self.y[self.variables] + moved[0::2] - moved[1::2]
        self.paths[self.maximize] = self.variables[np.abs(moved[0::2] - moved[1::2]) > _MOVED_TOL]
        return float(x[self.col_of[self.at]]), x, np.asarray(sol.row_dual)


#: a change smaller than this is no move (:attr:`GrowingProgram.moved`)
_MOVED_TOL = 1e-9
