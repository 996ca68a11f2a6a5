"""Generating count p-tables by maximum entropy — the only module of tabsafe importing scipy.

:func:`generate_ptable` builds the table as the R package *ptable* (``create_cnt_ptable``,
default ``optim = 1``) does (seed 000 §5.4; Giessing 2016; METHODS.md §2): for each row
``i = 1 .. i_max``, over the allowed targets ``j in [max(0, i - D), i + D] minus {1..js}``,

    maximise  -sum p log p
    s.t.      sum p = 1,  sum v p = 0,  sum v^2 p <= V,  1e-8 <= p <= 1,
              p(v=0) >= pstay (when given),
              p(v_k) <= p(v_{k+1}) for consecutive allowed v_k < v_{k+1} <= 0 (monotony, only
              when v = 0 is an allowed target),

with ``i_max = D`` when ``js = 0`` and ``D + js + 1`` otherwise; row ``i = 0`` is ``j = 0`` with
``p = 1``. Two details follow R *ptable* so that equal parameters give equal tables:

* when ``pstay`` is given and the row's variance, rounded to 3 decimals, differs from ``V``,
  the lower bound of ``p(v=0)`` is lowered by 0.05 and the row solved again, at most 20 solves
  in all (rows whose original value is blocked are solved once);
* the cumulative bounds are rounded to 8 decimals and ``p`` is stored as ``p_int_ub - p_int_lb``.

The variance bound is an upper bound: a row whose targets cannot spread that far at maximum
entropy (the uniform distribution over few targets, or monotony) stays below ``V``; the p-table's
:meth:`~tabsafe.protect.ptable.PTable.rows_below` names those rows and the CLI says so.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
from scipy.optimize import LinearConstraint, linprog, minimize

from tabsafe.errors import InputError, MethodError, Reason, Suggestion, param
from tabsafe.protect.ptable.params import PTableParams
from tabsafe.protect.ptable.table import COLUMNS, PTable, RowReport

__all__ = ["generate_ptable"]

EPSILON = 1e-8
"""Lower bound of every probability (R ptable: ``epsilon = 1 / 10^8``)."""
PSTAY_STEP = 0.05
"""How much R ptable lowers the ``pstay`` bound per extra solve."""
MAX_SOLVES = 20
"""How many times R ptable solves one row at most."""
BOUND_DIGITS = 8
"""Decimals the cumulative bounds are rounded to (R ptable: ``ndigits = 8``)."""
_CHECK_TOL = 1e-9


# --------------------------------------------------------------------------------------------
# the optimisation, one row at a time


def _deviations(i: int, params: PTableParams) -> np.ndarray:
    """Allowed deviations ``v = j - i`` for row ``i``, ascending."""
    j = np.arange(max(0, i - params.max_noise), i + params.max_noise + 1)
    j = j[~((j >= 1) & (j <= params.js))]
    return (j - i).astype(np.int64)


def _monotony_matrix(v: np.ndarray, monotony: bool) -> np.ndarray | None:
    """Rows ``p_k - p_{k+1}`` (to be ``<= 0``) for the negative side, or None."""
    zero = np.flatnonzero(v == 0)
    if not monotony or zero.size == 0 or zero[0] == 0:
        return None
    k = int(zero[0])
    m = np.zeros((k, v.size))
    m[np.arange(k), np.arange(k)] = 1.0
    m[np.arange(k), np.arange(k) + 1] = -1.0
    return m


def _min_variance(v: np.ndarray, monotony: bool) -> tuple[float, np.ndarray] | None:
    """Smallest ``sum v^2 p`` under every constraint but the variance bound (an LP) and the
    distribution reaching it; None if even those constraints (sum 1, mean 0, bounds,
    monotony) cannot hold."""
    mono = _monotony_matrix(v, monotony)
    vf = v.astype(float)
    res = linprog(
        c=vf * vf,
        A_ub=mono,
        b_ub=None if mono is None else np.zeros(mono.shape[0]),
        A_eq=np.vstack([np.ones(v.size), vf]),
        b_eq=np.array([1.0, 0.0]),
        bounds=[(EPSILON, 1.0)] * v.size,
        method="highs",
    )
    if res.status != 0:
        return None
    return float(res.fun), np.asarray(res.x, dtype=float)


def _violation(p: np.ndarray, v: np.ndarray, variance: float, lb: np.ndarray,
               mono: np.ndarray | None) -> float:
    vf = v.astype(float)
    parts = [
        abs(p.sum() - 1.0),
        abs(vf @ p),
        max(0.0, vf * vf @ p - variance),
        max(0.0, float(np.max(lb - p))),
        max(0.0, float(np.max(p - 1.0))),
    ]
    if mono is not None:
        parts.append(max(0.0, float(np.max(mono @ p))))
    return max(parts)


def _repair(p: np.ndarray, v: np.ndarray, variance: float, lb: np.ndarray,
            anchor: np.ndarray | None) -> np.ndarray:
    """Move ``p`` a hair towards the least-variance distribution ``anchor`` when the solver
    overshot the variance bound by at most 1e-6: a convex mix keeps every linear constraint."""
    vf = v.astype(float)
    excess = float(vf * vf @ p) - variance
    if anchor is None or not 0 < excess <= 1e-6 or np.any(anchor < lb):
        return p
    gap = float(vf * vf @ p) - float(vf * vf @ anchor)
    if gap <= 0:
        return p
    t = min(1.0, excess / gap * (1.0 + 1e-6))
    return (1.0 - t) * p + t * anchor


def _max_entropy(
    v: np.ndarray,
    variance: float,
    lb: np.ndarray,
    monotony: bool,
    *,
    anchor: np.ndarray | None = None,
    start: np.ndarray | None = None,
) -> np.ndarray | None:
    """Maximum entropy distribution over ``v`` (METHODS.md §2); None if no solver converged.

    ``anchor`` is a feasible distribution of smaller variance used to repair a tiny overshoot
    of the variance bound; ``start`` a starting point (the uniform distribution by default).
    """
    vf = v.astype(float)
    n = v.size
    mono = _monotony_matrix(v, monotony)

    def objective(p: np.ndarray) -> float:
        return float(np.sum(p * np.log(p)))

    def gradient(p: np.ndarray) -> np.ndarray:
        return np.log(p) + 1.0

    bounds = list(zip(lb.tolist(), [1.0] * n))
    x0 = np.full(n, 1.0 / n) if start is None else start
    x0 = np.clip(x0, lb, 1.0)
    constraints: list[dict[str, Any]] = [
        {
            "type": "eq",
            "fun": lambda p: np.array([p.sum() - 1.0, vf @ p]),
            "jac": lambda p: np.vstack([np.ones(n), vf]),
        },
        {
            "type": "ineq",
            "fun": lambda p: np.array([variance - (vf * vf) @ p]),
            "jac": lambda p: -(vf * vf)[None, :],
        },
    ]
    if mono is not None:
        constraints.append({"type": "ineq", "fun": lambda p: -mono @ p, "jac": lambda p: -mono})
    for ftol in (1e-15, 1e-11):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # SLSQP may stop with "positive directional derivative" once it cannot improve at
            # this ftol; the result is judged by its constraint violation, not by that flag.
            res = minimize(
                objective, x0, jac=gradient, bounds=bounds, constraints=constraints,
                method="SLSQP", options={"ftol": ftol, "maxiter": 2000},
            )
        p = _repair(np.clip(res.x, lb, 1.0), v, variance, lb, anchor)
        if _violation(p, v, variance, lb, mono) <= _CHECK_TOL:
            return p
    # a slower interior-point fallback for rows SLSQP cannot settle
    lin = [
        LinearConstraint(np.vstack([np.ones(n), vf]), [1.0, 0.0], [1.0, 0.0]),
        LinearConstraint((vf * vf)[None, :], -np.inf, variance),
    ]
    if mono is not None:
        lin.append(LinearConstraint(mono, -np.inf, 0.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = minimize(
            objective, x0, jac=gradient, hess=lambda p: np.diag(1.0 / p), bounds=bounds,
            constraints=lin, method="trust-constr",
            options={"gtol": 1e-12, "xtol": 1e-14, "barrier_tol": 1e-12, "maxiter": 5000},
        )
    p = _repair(np.clip(res.x, lb, 1.0), v, variance, lb, anchor)
    if _violation(p, v, variance, lb, mono) <= 1e-7:
        return p
    return None


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def _least_variance(i: int, v: np.ndarray, params: PTableParams) -> np.ndarray:
    """The least-variance distribution of row ``i``; raises a one-line MethodError naming the
    row, the failing constraint and the nearest feasible ``V`` if the row is infeasible."""
    blocked = f"values 1..{params.js} blocked" if params.js else "no value blocked"
    # every target carries at least 1e-8, so a row needs targets on both sides of i (or only
    # i itself); the LP's feasibility tolerance is too coarse to see this
    one_sided = bool(np.any(v > 0)) != bool(np.any(v < 0))
    least = None if one_sided else _min_variance(v, params.monotony)
    if least is None:
        raise MethodError(
            f"row i={i}: zero mean is impossible with targets j in {sorted((v + i).tolist())} "
            f"({blocked}, D={params.max_noise})",
            reason=Reason.INFEASIBLE,
            suggestions=(Suggestion(f"{param('max_noise')} must be at least {param('js')} + 1 = {params.js + 1}"),),
            where="generate_ptable",
        )
    vmin = least[0]
    if params.variance <= vmin + _CHECK_TOL:
        raise MethodError(
            f"row i={i}: variance bound sum v^2 p <= V={_fmt(params.variance)} cannot hold "
            f"with zero mean and {blocked} (smallest variance for this row is {_fmt(vmin)})",
            reason=Reason.INFEASIBLE,
            suggestions=(Suggestion(f"nearest feasible V: any {param('variance')} > {_fmt(vmin)}"),),
            where="generate_ptable",
        )
    return least[1]


def _solve_row(i: int, params: PTableParams) -> tuple[np.ndarray, np.ndarray, float, int]:
    """Deviations, probabilities, final ``pstay`` bound (NaN if none) and solve count of row i."""
    v = _deviations(i, params)
    anchor = _least_variance(i, v, params)
    lb = np.full(v.size, EPSILON)
    zero = np.flatnonzero(v == 0)
    has_stay = params.pstay is not None and zero.size == 1
    if has_stay:
        lb[zero[0]] = max(EPSILON, float(params.pstay))  # type: ignore[arg-type]
    blocked_row = 1 <= i <= params.js
    p: np.ndarray | None = None
    solves = 0
    while True:
        solves += 1
        p = _max_entropy(v, params.variance, lb, params.monotony, anchor=anchor, start=p)
        if p is None:
            raise MethodError(
                f"row i={i}: the maximum entropy solver did not converge",
                reason=Reason.NOT_FOUND,
                suggestions=(Suggestion(f"try a slightly larger {param('variance')} than {_fmt(params.variance)}"),),
                where="generate_ptable",
            )
        reached = round(float((v.astype(float) ** 2) @ p), 3)
        if blocked_row or reached == params.variance or solves >= MAX_SOLVES:
            break
        if not has_stay or lb[zero[0]] <= EPSILON or p[zero[0]] > lb[zero[0]] + 1e-7:
            # the bound no longer binds, so R ptable's remaining solves (up to its 20th) would
            # return this very solution: count them, and lower the bound as R does, unsolved
            if has_stay:
                lb[zero[0]] = max(EPSILON, lb[zero[0]] - PSTAY_STEP * (MAX_SOLVES - solves))
            solves = MAX_SOLVES
            break
        lb[zero[0]] = max(EPSILON, lb[zero[0]] - PSTAY_STEP)
    bound = float(lb[zero[0]]) if has_stay else math.nan
    return v, p, bound, solves


def _row_block(i: int, v: np.ndarray, p: np.ndarray) -> dict[str, np.ndarray]:
    """Rows of one original value with rounded cumulative bounds; ``p = ub - lb``."""
    p = p / p.sum()
    ub = np.round(np.cumsum(p), BOUND_DIGITS)
    ub[-1] = 1.0
    ub = np.maximum.accumulate(ub)
    lb = np.concatenate([[0.0], ub[:-1]])
    return {
        "i": np.full(v.size, i, dtype=np.int64),
        "j": (v + i).astype(np.int64),
        "p": np.round(ub - lb, BOUND_DIGITS + 2),
        "v": v.astype(np.int64),
        "p_int_lb": lb,
        "p_int_ub": ub,
    }


def _report(i: int, block: dict[str, np.ndarray], bound: float, solves: int) -> RowReport:
    p, v = block["p"], block["v"].astype(float)
    mean = float(p @ v)
    stay = p[v == 0]
    return RowReport(i=i, targets=int(v.size), mean=mean, variance=float(p @ (v - mean) ** 2),
                     p_stay=float(stay[0]) if stay.size else 0.0, pstay_bound=bound, iterations=solves)


def generate_ptable(params: PTableParams) -> PTable:
    """Generate a count p-table by maximum entropy, as R ``ptable::create_cnt_ptable`` does.

    The optimisation problem is the one of METHODS.md §2 (seed 000 §5.4; Giessing 2016); see
    the module docstring for the two R conventions kept (``pstay`` relaxation, rounded bounds).

    Args:
        params: the p-table parameters.

    Returns:
        The p-table with one row block per ``i = 0 .. params.i_max`` and a report of the mean
        and variance each row reached (:attr:`~tabsafe.protect.ptable.PTable.row_reports`;
        rows below ``V``: :meth:`~tabsafe.protect.ptable.PTable.rows_below`).

    Raises:
        tabsafe.errors.MethodError: a row has no feasible distribution (naming the row, the
            failing constraint and the nearest feasible ``V``).

    >>> pt = generate_ptable(PTableParams(max_noise=2, variance=1))
    >>> [round(x, 4) for x in pt.column("p")[pt.column("i") == 1].tolist()]
    [0.3665, 0.3665, 0.1676, 0.0995]
    """
    if not isinstance(params, PTableParams):
        raise InputError(f"params must be a PTableParams; got {type(params).__name__}", where="generate_ptable")
    first = _row_block(0, np.array([0], dtype=np.int64), np.array([1.0]))
    blocks = [first]
    reports = [_report(0, first, math.nan, 0)]
    for i in range(1, params.i_max + 1):
        v, p, bound, count = _solve_row(i, params)
        block = _row_block(i, v, p)
        blocks.append(block)
        reports.append(_report(i, block, bound, count))
    cols = {c: np.concatenate([b[c] for b in blocks]) for c in COLUMNS}
    return PTable._create(cols, params=params, reports=reports)
