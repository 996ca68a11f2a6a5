"""The maximum entropy rows of a p-table over the whole admitted range (METHODS.md §2; seed 000
§5.4): every row the program admits is solved, and its answer is the program's optimum.

Optimality is checked independently of the solver: each answer must be feasible and satisfy the
KKT conditions (the log-probabilities are a combination of the active constraints' gradients
with multipliers of the right sign, found by bounded least squares); on small rows its entropy
must also be at least that of scipy's SLSQP (the previous implementation's method). Whether a
row is feasible at all (its least variance, in closed form) is checked against HiGHS.
"""

from __future__ import annotations

import math
import re
import warnings
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import lsq_linear, minimize

import tabsafe.errors
from tabsafe.protect.ptable import PTableParams, generate_ptable
from tabsafe.protect.ptable.dual import EPSILON, solve_row
from tabsafe.protect.ptable.maxent import _deviations, _program, least_variance
from tabsafe.solver import LinearProgram, solve

SRC = Path(__file__).resolve().parents[2] / "src" / "tabsafe"


# --- an independent judge of a row's answer ----------------------------------------------


class Spec(NamedTuple):
    """Row ``i``'s program as METHODS.md §2 states it, built here from the parameters (not by
    the code under test): deviations, V, the monotone chain ``v <= 0``, ``v = 0``, pstay."""

    v: np.ndarray
    variance: float
    chain: int
    zero: int
    stay: float


def spec(i: int, params: PTableParams) -> Spec:
    j = np.arange(max(0, i - params.max_noise), i + params.max_noise + 1)
    v = (j[(j < 1) | (j > params.js)] - i).astype(float)
    zero = int(np.flatnonzero(v == 0)[0]) if np.any(v == 0) else -1
    chain = zero + 1 if params.monotony and zero > 0 else 0
    stay = float(params.pstay) if params.pstay is not None and zero >= 0 else 0.0
    return Spec(v, params.variance, chain, zero, stay)


def feasibility(prog: Spec, p: np.ndarray) -> dict[str, float]:
    """How far ``p`` is from each constraint of the row's program (0: holds)."""
    v = prog.v
    out = {
        "sum": abs(float(p.sum()) - 1.0),
        "mean": abs(float(v @ p)),
        "variance": max(0.0, float(v * v @ p) - prog.variance),
        "eps": max(0.0, float(np.max(EPSILON - p))),
        "monotony": 0.0 if prog.chain < 2 else max(0.0, float(np.max(p[: prog.chain - 1] - p[1: prog.chain]))),
        "stay": max(0.0, prog.stay - float(p[prog.zero])) if prog.zero >= 0 else 0.0,
    }
    return out


def kkt_residual(prog: Spec, p: np.ndarray) -> float:
    """Smallest stationarity residual ``|-log p - 1 - (sum of multipliers x gradients)|`` over
    multipliers of the right sign on the constraints active at ``p`` (0 at the optimum)."""
    n, v = p.size, prog.v
    cols: list[np.ndarray] = [np.ones(n), v]
    lower: list[float] = [-np.inf, -np.inf]
    if float(v * v @ p) >= prog.variance - 1e-9 * max(1.0, prog.variance):
        cols.append(v * v)  # variance bound: its gradient, multiplier >= 0
        lower.append(0.0)
    if prog.zero >= 0 and prog.stay > EPSILON and p[prog.zero] <= prog.stay + 1e-9:
        e = np.zeros(n)
        e[prog.zero] = -1.0
        cols.append(e)
        lower.append(0.0)
    for k in np.flatnonzero(p <= EPSILON * (1 + 1e-9)):
        e = np.zeros(n)
        e[k] = -1.0
        cols.append(e)
        lower.append(0.0)
    for k in range(prog.chain - 1):
        if p[k + 1] - p[k] <= 1e-9 * p[k + 1]:
            e = np.zeros(n)
            e[k], e[k + 1] = 1.0, -1.0
            cols.append(e)
            lower.append(0.0)
    a = np.column_stack(cols)
    target = -np.log(p) - 1.0
    fit = lsq_linear(a, target, bounds=(np.array(lower), np.full(len(lower), np.inf)), method="bvls", tol=1e-14)
    return float(np.max(np.abs(a @ fit.x - target)))


def slsqp_entropy(prog: Spec) -> float:
    """The entropy scipy's SLSQP reaches on the row's program (a feasible point's, else -inf)."""
    v, n = prog.v, prog.v.size
    cons = [{"type": "eq", "fun": lambda p: np.array([p.sum() - 1.0, v @ p])},
            {"type": "ineq", "fun": lambda p: np.array([prog.variance - (v * v) @ p])}]
    if prog.chain >= 2:
        cons.append({"type": "ineq", "fun": lambda p: p[1: prog.chain] - p[: prog.chain - 1]})
    lb = np.full(n, EPSILON)
    if prog.zero >= 0 and prog.stay > EPSILON:
        lb[prog.zero] = prog.stay
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = minimize(lambda p: float(np.sum(p * np.log(p))), np.clip(np.full(n, 1.0 / n), lb, 1.0),
                       jac=lambda p: np.log(p) + 1.0, bounds=list(zip(lb, [1.0] * n)), constraints=cons,
                       method="SLSQP", options={"ftol": 1e-14, "maxiter": 1000})
    p = np.clip(res.x, lb, 1.0)
    if max(feasibility(prog, p).values()) > 1e-9:
        return -math.inf
    return -float(p @ np.log(p))


# --- random rows over the admitted range ---------------------------------------------------


@st.composite
def rows(draw: st.DrawFn, max_noise: int = 100) -> tuple[int, PTableParams]:
    """A row ``i`` of valid parameters whose program has a solution (V above the row's least
    variance, ``pstay`` below what the row allows)."""
    d = draw(st.integers(1, max_noise))
    js = draw(st.integers(0, min(d - 1, 100)))
    i_max = d if js == 0 else d + js + 1
    i = draw(st.integers(1, i_max))
    probe = PTableParams(max_noise=d, variance=1.0, js=js)
    least = least_variance(_deviations(i, probe))
    assert least is not None
    variance = least + draw(st.sampled_from([1e-6, 1e-3, 0.1, 1.0]) | st.floats(1e-4, 4.0 * d * d))
    pstay = draw(st.none() | st.floats(0.01, 0.99))
    return i, PTableParams(max_noise=d, variance=variance, js=js, pstay=pstay, monotony=draw(st.booleans()))


def solved(i: int, params: PTableParams) -> tuple[Spec, np.ndarray]:
    """The judge's program and the solver's answer for row ``i`` (one solve: no relaxation)."""
    v = _deviations(i, params)
    stay = max(EPSILON, params.pstay) if params.pstay is not None else 0.0
    answer = solve_row(_program(v, params, stay))
    assert answer.converged, (i, params)
    return spec(i, params), answer.p


@settings(max_examples=80)
@given(row=rows())
def test_each_row_is_the_programs_optimum(row: tuple[int, PTableParams]) -> None:
    i, params = row
    prog, p = solved(i, params)
    gaps = feasibility(prog, p)
    assert gaps["sum"] <= 1e-12 and gaps["eps"] == 0.0
    assert gaps["mean"] <= 1e-10 * prog.v.max()
    assert gaps["variance"] <= 1e-10 * max(1.0, params.variance)
    assert gaps["monotony"] <= 1e-15 and gaps["stay"] <= 1e-10
    assert kkt_residual(prog, p) <= 1e-6


@pytest.mark.parametrize("monotony", [False, True])
@pytest.mark.parametrize(("d", "gap"), [(39, 1e-6), (42, 1e-6), (100, 1e-6), (100, 1e-4)])
def test_rows_just_above_their_least_variance(d: int, gap: float, monotony: bool) -> None:
    """Near the least variance nearly every target sits at eps and the dual is linear along
    some direction: row 1 of D = 39 and 42 once ended 200 Newton steps short of the optimum."""
    probe = PTableParams(max_noise=d, variance=1.0)
    least = least_variance(_deviations(1, probe))
    assert least is not None
    params = PTableParams(max_noise=d, variance=least + gap, pstay=0.5, monotony=monotony)
    prog, p = solved(1, params)
    assert max(feasibility(prog, p).values()) <= 1e-10
    assert kkt_residual(prog, p) <= 1e-6


@settings(max_examples=40)
@given(row=rows(max_noise=5))
def test_small_rows_have_at_least_slsqps_entropy(row: tuple[int, PTableParams]) -> None:
    i, params = row
    prog, p = solved(i, params)
    assert -float(p @ np.log(p)) >= slsqp_entropy(prog) - 1e-9


@settings(max_examples=40)
@given(row=rows(max_noise=100))
def test_least_variance_is_highs_lp_optimum(row: tuple[int, PTableParams]) -> None:
    """The closed form that decides feasibility agrees with the LP it replaces (via solver.py),
    monotony included."""
    i, params = row
    prog = spec(i, params)
    v, n = prog.v, prog.v.size
    rows_ = [np.ones(n), v]
    for k in range(prog.chain - 1):
        e = np.zeros(n)
        e[k], e[k + 1] = 1.0, -1.0
        rows_.append(e)
    bounds = np.array([1.0, 0.0] + [0.0] * (len(rows_) - 2))
    lower = np.array([1.0, 0.0] + [-np.inf] * (len(rows_) - 2))
    lp = LinearProgram(v * v, sp.csr_matrix(np.vstack(rows_)), lower, bounds, np.full(n, EPSILON), np.ones(n))
    sol = solve(lp)
    assert sol.status == "optimal" and sol.objective is not None
    assert least_variance(v) == pytest.approx(sol.objective, rel=1e-9, abs=1e-12)


# --- whole tables -------------------------------------------------------------------------


@settings(max_examples=12)
@given(d=st.integers(1, 100), js=st.integers(0, 3), extra=st.floats(0.05, 50.0),
       pstay=st.none() | st.floats(0.05, 0.95), monotony=st.booleans())
def test_tables_over_the_admitted_range(d: int, js: int, extra: float, pstay: float | None,
                                        monotony: bool) -> None:
    """Valid p-tables for D up to 100: rows sum to 1, mean 0 and variance <= V up to the
    rounding of the cumulative bounds to 8 decimals (each p moves by at most 1e-8)."""
    js = min(js, d - 1)
    floor = max((k * (js + 1 - k) for k in range(1, js + 1)), default=0)
    params = PTableParams(max_noise=d, variance=floor + extra, js=js, pstay=pstay, monotony=monotony)
    pt = generate_ptable(params)
    i_col, v_col, p_col = pt.column("i"), pt.column("v").astype(float), pt.column("p")
    assert sorted(set(i_col.tolist())) == list(range(params.i_max + 1))
    for i in range(params.i_max + 1):
        p, v = p_col[i_col == i], v_col[i_col == i]
        slack = 1e-8 * float(np.abs(v).sum()) + 1e-12
        assert abs(p.sum() - 1.0) <= 1e-9 * v.size
        assert abs(float(p @ v)) <= slack
        assert float(p @ v**2) <= params.variance + 1e-8 * float((v**2).sum()) + 1e-12


def test_d100_v2_js1_builds_through_the_method() -> None:
    """The case of the defect: ``ckm`` with D=100, V=2, js=1 (107 s CPU, then no answer)."""
    from tabsafe.registry import get_method

    method = get_method("ckm")(max_noise=100, variance=2, js=1)
    pt = method.ptable_table
    assert pt.i_max == 102
    rep = pt.report
    assert (rep["iterations"].iloc[1:] == 1).all()
    # every row reaches V (rounded to 3 decimals, R ptable's criterion) with mean 0
    np.testing.assert_allclose(rep["variance"].iloc[1:], 2.0, atol=5e-4)
    assert (rep["mean"].abs() <= 1e-6).all()
    assert not pt.rows_below()
    # the blocked value 1 never occurs; the last row is symmetric
    assert not np.any(pt.column("j") == 1)
    last = pt.column("p")[pt.column("i") == 102]
    np.testing.assert_allclose(last, last[::-1], atol=2e-8)


def test_pstay_that_cannot_hold_is_one_line_with_the_largest_it_allows() -> None:
    # row 1 of D=7: the other 8 targets carry 1e-8 each and the mean must be 0, so p(v=0) can
    # reach about 1 - 1e-7 at most: pstay = 0.9999999 asks too much
    with pytest.raises(tabsafe.errors.MethodError) as info:
        generate_ptable(PTableParams(max_noise=7, variance=0.5, pstay=0.9999999))
    text = str(info.value)
    assert "\n" not in text and "row i=1" in text and "pstay=0.9999999 cannot hold" in text
    top = float(re.search(r"at most (0\.\d+)", text).group(1))  # type: ignore[union-attr]
    assert 0.999999 < top < 0.9999999
    assert info.value.reason is tabsafe.errors.Reason.INFEASIBLE
    # just below the largest p(v=0) the row allows, the table exists (and R's relaxation then
    # lowers the bound, as row 1 stays below V with p(v=0) that high)
    pt = generate_ptable(PTableParams(max_noise=7, variance=0.5, pstay=top - 1e-7))
    assert pt.report.set_index("i").loc[1, "pstay_bound"] < top - 1e-7


def test_solver_is_the_only_door_to_highs() -> None:
    """ARCHITECTURE: solver.py is the only module that reaches HiGHS (directly or via scipy)."""
    pattern = re.compile(r"^\s*(import highspy|from highspy|from scipy\.optimize import .*\b(linprog|milp)\b)",
                         re.MULTILINE)
    offenders = [str(path.relative_to(SRC)) for path in SRC.rglob("*.py")
                 if path.name != "solver.py" and pattern.search(path.read_text())]
    assert offenders == []
