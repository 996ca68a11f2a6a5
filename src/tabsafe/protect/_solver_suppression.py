"""HiGHS helpers for cell suppression that the shared solver wrapper does not offer.

:mod:`tabsafe.protect._solver` solves one program once. Suppression needs two more things:

* the interval audit (seed 000 §5.3; METHODS.md §10) solves the *same* linear program many times
  with a different objective (minimise, then maximise, each suppressed cell in turn); HiGHS
  re-solves such a sequence from the previous basis in a few simplex iterations, and returns
  the row duals that say which published cells hold a bound (:class:`ExtremeSolver`);
* the optimal mode of secondary suppression re-solves its integer program after adding cuts,
  starting from the best known pattern (:func:`solve_mip`).

This is the only module besides ``_solver`` that imports ``highspy``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import highspy
import numpy as np
import scipy.sparse as sp

from tabsafe.protect._solver import LinearProgram, Solution


def _model(c: np.ndarray, A: sp.spmatrix, row_lower: np.ndarray, row_upper: np.ndarray,
           col_lower: np.ndarray, col_upper: np.ndarray, inf: float) -> highspy.HighsLp:
    A = sp.csc_matrix(A, dtype=np.float64)
    model = highspy.HighsLp()
    model.num_col_ = A.shape[1]
    model.num_row_ = A.shape[0]
    model.col_cost_ = np.asarray(c, dtype=np.float64)
    model.col_lower_ = np.nan_to_num(np.asarray(col_lower, dtype=np.float64), neginf=-inf, posinf=inf)
    model.col_upper_ = np.nan_to_num(np.asarray(col_upper, dtype=np.float64), neginf=-inf, posinf=inf)
    model.row_lower_ = np.nan_to_num(np.asarray(row_lower, dtype=np.float64), neginf=-inf, posinf=inf)
    model.row_upper_ = np.nan_to_num(np.asarray(row_upper, dtype=np.float64), neginf=-inf, posinf=inf)
    model.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    model.a_matrix_.start_ = A.indptr.astype(np.int32)
    model.a_matrix_.index_ = A.indices.astype(np.int32)
    model.a_matrix_.value_ = A.data
    return model


@dataclass(frozen=True)
class Extreme:
    """The optimum of a linear objective over the feasible set.

    Attributes:
        value: the optimal value (``±inf`` when unbounded).
        x: an optimal point (``None`` when unbounded).
        duals: the row duals of the optimal basis (``None`` when unbounded); rows with a non-zero
            dual are the constraints that hold the bound.
    """

    value: float
    x: np.ndarray | None
    duals: np.ndarray | None


class ExtremeSolver:
    """Optima of linear objectives over ``{y : A y = b, lower <= y <= upper}``, warm-started.

    Not a value object: it owns a HiGHS instance whose basis carries over from one call to the
    next (that is the point); create one per program and drop it when done. Only the objective
    changes between calls, so the last basis stays primal feasible: primal simplex without
    presolve re-optimises it in a few iterations (about ten times faster than HiGHS' defaults).
    """

    def __init__(self, A: sp.spmatrix, b: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
        self._h = highspy.Highs()
        for key, value in (("output_flag", False), ("threads", 1), ("presolve", "off"), ("simplex_strategy", 4)):
            self._h.setOptionValue(key, value)
        inf = self._h.getInfinity()
        n = A.shape[1]
        self._n = n
        self._cost = np.zeros(n)
        b = np.asarray(b, dtype=np.float64)
        self._h.passModel(_model(self._cost, A, b, b, lower, upper, inf))

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
        status = h.getModelStatus()
        S = highspy.HighsModelStatus
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


def solve_mip(
    lp: LinearProgram,
    *,
    start: np.ndarray | None = None,
    time_limit: float | None = None,
    mip_rel_gap: float | None = None,
) -> Solution:
    """Solve a mixed-integer program, optionally from a known feasible ``start``.

    Same contract as :func:`tabsafe.protect._solver.solve`; the start solution lets HiGHS prune
    with the incumbent's objective from the first node.
    """
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    if time_limit is not None:
        h.setOptionValue("time_limit", max(0.01, float(time_limit)))
    if mip_rel_gap is not None:
        h.setOptionValue("mip_rel_gap", float(mip_rel_gap))
    inf = h.getInfinity()
    model = _model(lp.c, lp.A, lp.row_lower, lp.row_upper, lp.col_lower, lp.col_upper, inf)
    model.offset_ = float(lp.offset)
    if lp.integer is not None and np.any(lp.integer):
        model.integrality_ = [
            highspy.HighsVarType.kInteger if f else highspy.HighsVarType.kContinuous for f in np.asarray(lp.integer)
        ]
    h.passModel(model)
    if start is not None:
        sol = highspy.HighsSolution()
        sol.col_value = np.asarray(start, dtype=np.float64).tolist()
        sol.value_valid = True
        h.setSolution(sol)
    h.run()
    status = h.getModelStatus()
    info = h.getInfo()
    S = highspy.HighsModelStatus
    has_primal = info.primal_solution_status == 2
    x = np.array(h.getSolution().col_value) if has_primal else None
    objective = float(info.objective_function_value) if has_primal else None
    bound = float(info.mip_dual_bound) if math.isfinite(info.mip_dual_bound) else None
    if status == S.kOptimal:
        name = "optimal"
        bound = objective if bound is None else bound
    elif status == S.kInfeasible:
        name = "infeasible"
    elif has_primal:
        name = "feasible"
    else:
        name = "failed"
    gap = None
    if objective is not None and bound is not None:
        gap = abs(objective - bound) / max(1.0, abs(objective))
    return Solution(name, x, objective, bound, gap, float(h.getRunTime()), h.modelStatusToString(status))
