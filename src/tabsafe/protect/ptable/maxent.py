"""Generating count p-tables by maximum entropy (seed 000 §5.4; Giessing 2016; METHODS.md §2).

:func:`generate_ptable` builds the table as the R package *ptable* (``create_cnt_ptable``,
default ``optim = 1``) does: for each row ``i = 1 .. i_max``, over the allowed targets
``j in [max(0, i - D), i + D] minus {1..js}``,

    maximise  -sum p log p
    s.t.      sum p = 1,  sum v p = 0,  sum v^2 p <= V,  1e-8 <= p <= 1,
              p(v=0) >= pstay (when given),
              p(v_k) <= p(v_{k+1}) for consecutive allowed v_k < v_{k+1} <= 0 (monotony, only
              when v = 0 is an allowed target),

with ``i_max = D`` when ``js = 0`` and ``D + js + 1`` otherwise; row ``i = 0`` is ``j = 0`` with
``p = 1``. Each row's program is solved exactly through its dual
(:mod:`~tabsafe.protect.ptable.dual`: three multipliers, Newton steps, monotony by pooling
adjacent violators), each row starting from the multipliers of the row before. Whether a row
has a distribution at all is decided first, in closed form (:func:`least_variance`). Two details
follow R *ptable* so that equal parameters give equal tables:

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

import numpy as np

from tabsafe.errors import InputError, MethodError, Reason, Suggestion, param
from tabsafe.protect.ptable.dual import EPSILON, RowProgram, solve_row
from tabsafe.protect.ptable.params import PTableParams
from tabsafe.protect.ptable.table import COLUMNS, PTable, RowReport

__all__ = ["generate_ptable", "least_variance"]

PSTAY_STEP = 0.05
"""How much R ptable lowers the ``pstay`` bound per extra solve."""
MAX_SOLVES = 20
"""How many times R ptable solves one row at most."""
BOUND_DIGITS = 8
"""Decimals the cumulative bounds are rounded to (R ptable: ``ndigits = 8``)."""
_CHECK_TOL = 1e-9


# --------------------------------------------------------------------------------------------
# the rows' programs


def _deviations(i: int, params: PTableParams) -> np.ndarray:
    """Allowed deviations ``v = j - i`` for row ``i``, ascending."""
    j = np.arange(max(0, i - params.max_noise), i + params.max_noise + 1)
    j = j[~((j >= 1) & (j <= params.js))]
    return (j - i).astype(np.int64)


def _program(v: np.ndarray, params: PTableParams, stay: float) -> RowProgram:
    """Row ``v``'s program; monotony covers the targets ``v <= 0`` when ``v = 0`` is allowed."""
    zero = np.flatnonzero(v == 0)
    z = int(zero[0]) if zero.size else -1
    chain = z + 1 if params.monotony and z > 0 else 0
    return RowProgram(v.astype(float), params.variance, chain=chain, zero=z, stay=stay if z >= 0 else 0.0)


def least_variance(v: np.ndarray) -> float | None:
    """Smallest ``sum v^2 p`` under ``sum p = 1``, ``sum v p = 0``, ``p >= 1e-8`` and monotony;
    None if those constraints cannot hold (METHODS.md §2's feasibility question, closed form).

    Write ``p = eps + r`` with ``r >= 0``: ``r`` carries mass ``R = 1 - n eps`` with mean
    ``t = -eps sum v / R``. As ``v^2`` is convex, the least second moment of a distribution with
    mean ``t`` puts its mass on the two allowed values next to ``t`` (one, if ``t`` is allowed).
    Monotony never binds there: ``|t| < 1/2`` (n <= 201, |v| <= 100), so the mass left of 0 sits
    on the one target next to 0 and is smaller than the mass on 0.
    """
    vf = np.asarray(v, dtype=float)
    if vf.size == 1:
        return 0.0 if vf[0] == 0 else None
    rest = 1.0 - vf.size * EPSILON
    t = -EPSILON * float(vf.sum()) / rest
    if not vf[0] < t < vf[-1] and t not in vf:
        return None
    k = int(np.searchsorted(vf, t, side="left"))
    if vf[k] == t:
        second = t * t
    else:
        a, b = float(vf[k - 1]), float(vf[k])
        second = t * (a + b) - a * b
    return EPSILON * float(vf @ vf) + rest * second


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def _check_feasible(i: int, v: np.ndarray, params: PTableParams) -> None:
    """Raise a one-line MethodError naming the row, the failing constraint and the nearest
    feasible ``V`` if row ``i`` has no distribution (METHODS.md §2)."""
    blocked = f"values 1..{params.js} blocked" if params.js else "no value blocked"
    # every target carries at least 1e-8, so a row needs targets on both sides of i (or only
    # i itself)
    one_sided = bool(np.any(v > 0)) != bool(np.any(v < 0))
    vmin = None if one_sided else least_variance(v)
    if vmin is None:
        raise MethodError(
            f"row i={i}: zero mean is impossible with targets j in {sorted((v + i).tolist())} "
            f"({blocked}, D={params.max_noise})",
            reason=Reason.INFEASIBLE,
            suggestions=(Suggestion(f"{param('max_noise')} must be at least {param('js')} + 1 = {params.js + 1}"),),
            where="generate_ptable",
        )
    if params.variance <= vmin + _CHECK_TOL:
        raise MethodError(
            f"row i={i}: variance bound sum v^2 p <= V={_fmt(params.variance)} cannot hold "
            f"with zero mean and {blocked} (smallest variance for this row is {_fmt(vmin)})",
            reason=Reason.INFEASIBLE,
            suggestions=(Suggestion(f"nearest feasible V: any {param('variance')} > {_fmt(vmin)}"),),
            where="generate_ptable",
        )


def _largest_stay(prog: RowProgram) -> float:
    """The largest ``p(v=0)`` the row's constraints allow (an LP through :mod:`tabsafe.solver`):
    what a ``pstay`` bound that cannot hold is measured against."""
    # only a failed solve asks this: HiGHS (and scipy.sparse) load then, not for every table
    import scipy.sparse as sp

    from tabsafe.solver import LinearProgram, solve

    n = prog.v.size
    rows = [np.ones(n), prog.v, prog.q]
    lower, upper = [1.0, 0.0, -math.inf], [1.0, 0.0, prog.variance]
    for k in range(prog.chain - 1):
        step = np.zeros(n)
        step[k], step[k + 1] = 1.0, -1.0
        rows.append(step)
        lower.append(-math.inf)
        upper.append(0.0)
    c = np.zeros(n)
    c[prog.zero] = 1.0
    lp = LinearProgram(c, sp.csr_matrix(np.vstack(rows)), np.array(lower), np.array(upper),
                       np.full(n, EPSILON), np.ones(n), maximize=True)
    sol = solve(lp)
    return float(sol.objective) if sol.status == "optimal" and sol.objective is not None else 0.0


def _not_solved(i: int, prog: RowProgram) -> MethodError:
    """The error of a row whose solve did not converge: a ``pstay`` bound above what the row
    allows (said with the largest it allows), or else the solver's failure."""
    if prog.bounded_stay:
        top = _largest_stay(prog)
        if prog.stay > top - _CHECK_TOL:
            return MethodError(
                f"row i={i}: p(v=0) >= pstay={prog.stay:.10g} cannot hold with zero mean, "
                f"variance <= V={_fmt(prog.variance)} and every other target at least {EPSILON:g} "
                f"(p(v=0) is at most {top:.8f})",
                reason=Reason.INFEASIBLE,
                suggestions=(Suggestion(f"give {param('pstay')} below {top:.8f}"),),
                where="generate_ptable",
            )
    return MethodError(
        f"row i={i}: the maximum entropy solver did not converge",
        reason=Reason.NOT_FOUND,
        suggestions=(Suggestion(f"try a slightly larger {param('variance')} than {_fmt(prog.variance)}"),),
        where="generate_ptable",
    )


def _solve_row(i: int, params: PTableParams,
               start: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, float, int, np.ndarray]:
    """Deviations, probabilities, final ``pstay`` bound (NaN if none), solve count and the
    multipliers of row ``i`` (R ptable's ``pstay`` relaxation: module docstring)."""
    v = _deviations(i, params)
    _check_feasible(i, v, params)
    has_stay = params.pstay is not None and bool(np.any(v == 0))
    stay = max(EPSILON, float(params.pstay)) if has_stay else 0.0  # type: ignore[arg-type]
    blocked_row = 1 <= i <= params.js
    y = start
    solves = 0
    while True:
        solves += 1
        prog = _program(v, params, stay)
        answer = solve_row(prog, y)
        if not answer.converged:
            raise _not_solved(i, prog)
        p, y = answer.p, answer.y
        reached = round(float(prog.q @ p), 3)
        if blocked_row or reached == params.variance or solves >= MAX_SOLVES:
            break
        if not has_stay or stay <= EPSILON or p[prog.zero] > stay + 1e-7:
            # the bound no longer binds, so R ptable's remaining solves (up to its 20th) would
            # return this very solution: count them, and lower the bound as R does, unsolved
            if has_stay:
                stay = max(EPSILON, stay - PSTAY_STEP * (MAX_SOLVES - solves))
            solves = MAX_SOLVES
            break
        stay = max(EPSILON, stay - PSTAY_STEP)
    bound = stay if has_stay else math.nan
    return v, p, bound, solves, y


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
    y = None
    for i in range(1, params.i_max + 1):
        # each row starts from the multipliers of the row before: neighbouring rows differ little
        v, p, bound, count, y = _solve_row(i, params, y)
        block = _row_block(i, v, p)
        blocks.append(block)
        reports.append(_report(i, block, bound, count))
    cols = {c: np.concatenate([b[c] for b in blocks]) for c in COLUMNS}
    return PTable._create(cols, params=params, reports=reports)
