"""The LP relaxation of the whole controlled-rounding program (seed 000 §5.5.1).

Dropping integrality from the program of :mod:`.program` gives a linear program whose optimum
bounds ``Σ|z − a|`` from below, whose infeasibility proves that no rounding exists, and whose
optimal steps are nearly integral on census tables (0.5–1% below the best roundings found): the
bound reported with a rounding and the guide of the sequential rounding.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from tabsafe.protect.controlled_rounding.program import Problem, touched_rows
from tabsafe.protect.controlled_rounding.work import Work
from tabsafe.solver import LinearProgram, solve

__all__ = ["Relaxation", "relax"]


@dataclass(frozen=True, eq=False)
class Relaxation:
    """The LP relaxation's answer.

    Attributes:
        status: ``optimal``, ``infeasible`` (no rounding exists) or ``failed``.
        value: its optimum, a lower bound on ``Σ|z − a|``.
        steps: the optimal steps ``w`` of every cell (fractional).
    """

    status: str
    value: float | None = None
    steps: np.ndarray | None = None


def relax(problem: Problem, work: Work) -> Relaxation:
    """Solve the LP relaxation by interior point (about 3 s for 80K cells; deterministic: the
    iterations do not depend on the machine, only a time limit in ``work`` can cut them short)."""
    A, b = problem.additivity, problem.base
    u, r = problem.u, problem.r
    lo_w, hi_w = problem.ranges
    ypos = np.flatnonzero(r != 0)
    p_hi = hi_w - (r != 0)
    ppos = np.flatnonzero(p_hi > 0)
    qpos = np.flatnonzero(lo_w < 0)
    n = ypos.size + ppos.size + qpos.size
    if n == 0:
        feasible = not np.any(A @ u)
        return Relaxation("optimal", 0.0, np.zeros(u.size)) if feasible else Relaxation("infeasible")
    M = sp.hstack([A[:, ypos], A[:, ppos], -A[:, qpos]], format="csc")
    kept = touched_rows(M, -(A @ u))
    if kept is None:
        return Relaxation("infeasible")
    M, rhs = kept
    c = np.concatenate([b - 2.0 * r[ypos], np.full(ppos.size + qpos.size, float(b))])
    hi = np.concatenate([np.ones(ypos.size), p_hi[ppos].astype(float), (-lo_w[qpos]).astype(float)])
    sol = solve(LinearProgram(c, M, rhs, rhs, np.zeros(n), hi, offset=float(r.sum())),
                time_limit=work.seconds_left, relax=True, lp_method="ipm", threads=1)
    work.note(sol)
    if sol.status == "infeasible":
        return Relaxation("infeasible")
    if sol.status != "optimal" or sol.objective is None or sol.x is None:
        return Relaxation("failed")
    x = sol.x
    w = np.zeros(u.size)
    np.add.at(w, ypos, x[:ypos.size])
    np.add.at(w, ppos, x[ypos.size:ypos.size + ppos.size])
    np.add.at(w, qpos, -x[ypos.size + ppos.size:])
    return Relaxation("optimal", float(sol.objective), w)
