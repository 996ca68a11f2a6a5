"""The one door to the integer-programming library (HiGHS, through ``highspy``).

Methods state their programs as :class:`LinearProgram` values over scipy sparse matrices and get
a :class:`Solution` back; nothing else in tabsafe imports the solver, so changing solvers means
changing this file only. HiGHS was chosen because it is open source (MIT), ships as a wheel,
solves both LPs (interval audits) and MILPs (controlled rounding, secondary suppression) and
reports the dual bound and gap that tabsafe passes on to users.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import highspy
import numpy as np
import scipy.sparse as sp

INF = math.inf


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
    """

    status: str
    x: np.ndarray | None
    objective: float | None
    bound: float | None
    gap: float | None
    seconds: float
    detail: str = field(default="")

    @property
    def has_solution(self) -> bool:
        return self.x is not None


def _clip(values: np.ndarray, inf: float) -> np.ndarray:
    out = np.asarray(values, dtype=np.float64).copy()
    out[out == INF] = inf
    out[out == -INF] = -inf
    return out


def solve(
    lp: LinearProgram,
    *,
    time_limit: float | None = None,
    mip_rel_gap: float | None = None,
    first_feasible: bool = False,
    threads: int | None = None,
) -> Solution:
    """Solve ``lp`` with HiGHS.

    Args:
        time_limit: seconds; on expiry the best solution found so far is returned as ``feasible``.
        mip_rel_gap: stop when the relative gap falls below this (HiGHS default 1e-4).
        first_feasible: stop at the first integer-feasible solution.
    """
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    if threads:
        h.setOptionValue("threads", int(threads))
    if time_limit is not None:
        h.setOptionValue("time_limit", float(time_limit))
    if mip_rel_gap is not None:
        h.setOptionValue("mip_rel_gap", float(mip_rel_gap))
    if first_feasible:
        h.setOptionValue("mip_max_improving_sols", 1)
    inf = h.getInfinity()
    A = sp.csc_matrix(lp.A, dtype=np.float64)
    n = A.shape[1]
    model = highspy.HighsLp()
    model.num_col_ = n
    model.num_row_ = A.shape[0]
    model.col_cost_ = np.asarray(lp.c, dtype=np.float64)
    model.col_lower_ = _clip(lp.col_lower, inf)
    model.col_upper_ = _clip(lp.col_upper, inf)
    model.row_lower_ = _clip(lp.row_lower, inf)
    model.row_upper_ = _clip(lp.row_upper, inf)
    model.offset_ = float(lp.offset)
    model.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    model.a_matrix_.start_ = A.indptr.astype(np.int32)
    model.a_matrix_.index_ = A.indices.astype(np.int32)
    model.a_matrix_.value_ = A.data
    model.sense_ = highspy.ObjSense.kMaximize if lp.maximize else highspy.ObjSense.kMinimize
    if lp.integer is not None and np.any(lp.integer):
        model.integrality_ = [
            highspy.HighsVarType.kInteger if f else highspy.HighsVarType.kContinuous for f in np.asarray(lp.integer)
        ]
    h.passModel(model)
    h.run()
    status = h.getModelStatus()
    info = h.getInfo()
    seconds = float(h.getRunTime())
    S = highspy.HighsModelStatus
    has_primal = info.primal_solution_status == 2  # kSolutionStatusFeasible
    x = np.array(h.getSolution().col_value) if has_primal else None
    is_mip = lp.integer is not None and bool(np.any(lp.integer))
    objective = float(info.objective_function_value) if has_primal else None
    if is_mip:
        bound = float(info.mip_dual_bound) if math.isfinite(info.mip_dual_bound) else None
    else:
        bound = objective if status == S.kOptimal else None
    if status == S.kOptimal:
        name = "optimal"
        bound = objective if bound is None else bound
    elif status == S.kInfeasible:
        name = "infeasible"
    elif status in (S.kUnbounded, S.kUnboundedOrInfeasible):
        name = "unbounded" if status == S.kUnbounded else "infeasible"
    elif has_primal:
        name = "feasible"
    else:
        name = "failed"
    gap = None
    if objective is not None and bound is not None:
        gap = abs(objective - bound) / max(1.0, abs(objective))
    return Solution(name, x, objective, bound, gap, seconds, h.modelStatusToString(status))
