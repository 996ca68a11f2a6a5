"""The door to HiGHS: programs of every kind run one after another in one process; a relaxation
re-solved as rows come."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from tabsafe.solver import LinearProgram, Relaxation, solve

SCRIPT = """
import numpy as np, scipy.sparse as sp
from tabsafe.solver import ExtremeSolver, LinearProgram, solve
A = sp.csr_matrix(np.array([[1.0, 1.0, -1.0]]))
lp = LinearProgram(c=np.array([1.0, 2.0, 0.0]), A=A, row_lower=np.zeros(1), row_upper=np.zeros(1),
                   col_lower=np.zeros(3), col_upper=np.full(3, 5.0), integer=np.ones(3, dtype=bool))
assert solve(lp, time_limit=600).status == "optimal"
box = ExtremeSolver(A, np.zeros(1), np.zeros(3), np.full(3, 5.0))
print(box.optimum(np.array([1.0, 0.0, 0.0]), maximize=True).value)
"""


def test_an_interval_audit_after_an_integer_program_in_one_process():
    """HiGHS sizes its thread pool at a process's first run: an integer program with its
    defaults, then an interval audit (one thread) made the audit fail ("Not Set")."""
    run = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().splitlines()[-1] == "5.0"


@settings(max_examples=30)
@given(seed=st.integers(0, 2**31 - 1), steps=st.integers(1, 4))
def test_a_relaxation_grown_by_rows_solves_as_the_grown_program(seed: int, steps: int) -> None:
    """:class:`Relaxation` re-solves from its last basis after rows are added; each optimum is
    the optimum of the whole grown program solved afresh (a covering LP: min c·x, rows ≥ 1)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 40))
    cost = rng.random(n) + 0.1

    def rows(k: int) -> sp.csr_matrix:
        M = (rng.random((k, n)) < 0.2).astype(float) * rng.choice([0.5, 1.0], (k, n))
        M[np.arange(k), rng.integers(0, n, k)] = 1.0  # no empty row: every program is feasible
        return sp.csr_matrix(M)

    def program(M: sp.csr_matrix) -> LinearProgram:
        k = M.shape[0]
        return LinearProgram(c=cost, A=M, row_lower=np.ones(k), row_upper=np.full(k, np.inf),
                             col_lower=np.zeros(n), col_upper=np.ones(n), integer=np.ones(n, dtype=bool))

    M = rows(int(rng.integers(1, 10)))
    lp = Relaxation(program(M))
    for _ in range(steps):
        warm = lp.solve(time_limit=600)  # an outer guard: a status, not a speed, is tested
        fresh = solve(program(M), relax=True)
        assert warm.status == fresh.status == "optimal"
        assert warm.objective == pytest.approx(fresh.objective, abs=1e-7)
        assert (M @ warm.x >= 1 - 1e-7).all()
        more = rows(int(rng.integers(1, 6)))
        lp.add_rows(more, np.ones(more.shape[0]), np.full(more.shape[0], np.inf))
        M = sp.vstack([M, more], format="csr")


def _shared_total(rng: np.random.Generator, k: int, least: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two tables sharing a total: cells 0..k-1 add up to cell k, and so do cells k+1..2k; values
    from ``least`` up, each cell boxed within 2 of its value (not below 0)."""
    A = np.zeros((2, 2 * k + 1))
    A[0, :k], A[0, k] = 1.0, -1.0
    A[1, k + 1:], A[1, k] = 1.0, -1.0
    truth = rng.integers(least, least + 6, 2 * k + 1).astype(float)
    truth[k] = truth[:k].sum()
    truth[k + 1:] = rng.multinomial(int(truth[k]), np.full(k, 1.0 / k))
    return A, np.maximum(truth - 2, 0), truth + 2


@settings(max_examples=25)
@given(seed=st.integers(0, 2**31 - 1))
def test_extremes_from_an_interior_point_start_are_the_simplex_extremes(seed: int) -> None:
    """``ExtremeSolver(first="ipm")`` solves its first program by the interior point method and
    crossover, the later ones warm from that basis: every extreme is the one the default (dual
    simplex first) finds, on random boxed additive systems (a total and its parts, twice)."""
    from tabsafe.solver import ExtremeSolver

    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 8))
    A, lower, upper = _shared_total(rng, k, 0)
    ipm = ExtremeSolver(sp.csr_matrix(A), np.zeros(2), lower, upper, first="ipm")
    simplex = ExtremeSolver(sp.csr_matrix(A), np.zeros(2), lower, upper)
    for col in rng.permutation(2 * k + 1).tolist():
        for maximize in (True, False):
            a, b = ipm.extreme(col, maximize=maximize), simplex.extreme(col, maximize=maximize)
            assert a.value == pytest.approx(b.value, abs=1e-7)
            assert np.abs(A @ a.x).max() <= 1e-7 and (a.x >= lower - 1e-9).all() and (a.x <= upper + 1e-9).all()


def test_a_warm_call_over_its_budget_is_solved_afresh(monkeypatch) -> None:
    """A warm call of ``ExtremeSolver(first="ipm")`` that runs out of simplex iterations (its work
    budget) is solved again by the interior point method: with a budget of one iteration every
    call goes that way, and every extreme is still the dual simplex's."""
    from tabsafe import solver

    monkeypatch.setattr(solver, "WARM_ITERATIONS", 1)
    k = 12
    A, lower, upper = _shared_total(np.random.default_rng(5), k, 3)
    ipm = solver.ExtremeSolver(sp.csr_matrix(A), np.zeros(2), lower, upper, first="ipm")
    simplex = solver.ExtremeSolver(sp.csr_matrix(A), np.zeros(2), lower, upper)
    for col in range(2 * k + 1):
        for maximize in (True, False):
            assert ipm.extreme(col, maximize=maximize).value == pytest.approx(
                simplex.extreme(col, maximize=maximize).value, abs=1e-7)


def _grid(rng: np.random.Generator, r: int, c: int) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray, np.ndarray,
                                                               np.ndarray]:
    """An r × c table with its row and column totals as one vector ((r + 1) × (c + 1) less the
    grand total, totals last), the relations that it adds up with the grand total known
    (``A @ y = b``), its values ``y``, and a box within 2 of each value (not below 0)."""
    inner = rng.integers(0, 6, (r, c)).astype(float)
    full = np.zeros((r + 1, c + 1))
    full[:r, :c] = inner
    full[:r, c] = inner.sum(axis=1)
    full[r, :c] = inner.sum(axis=0)
    full[r, c] = inner.sum()
    at = np.arange((r + 1) * (c + 1)).reshape(r + 1, c + 1)
    rows = []
    for i in range(r + 1):  # each row of the grid adds up to its total
        rows.append({**{int(at[i, j]): 1.0 for j in range(c)}, int(at[i, c]): -1.0})
    for j in range(c + 1):
        rows.append({**{int(at[i, j]): 1.0 for i in range(r)}, int(at[r, j]): -1.0})
    A = sp.lil_matrix((len(rows), full.size))
    for k, row in enumerate(rows):
        for col, v in row.items():
            A[k, col] = v
    y = full.ravel()
    A = sp.csr_matrix(A)
    b = -(A[:, -1] @ y[-1:])  # the grand total published: on the right-hand side
    y = y[:-1]
    return sp.csr_matrix(A[:, :-1]), np.asarray(b).ravel(), y, np.maximum(y - 2, 0), y + 2


@settings(max_examples=30)
@given(seed=st.integers(0, 2**31 - 1))
def test_a_growing_program_solves_as_its_free_variables_held_program(seed: int) -> None:
    """``GrowingProgram`` (issue #28, the release audit's local programs): after each growth and
    each change of objective, its optimum is linprog's over the free variables with every other
    variable held at ``y`` (warm from the last basis, in changes from ``y``), the point it returns
    satisfies every relation, and ``moved`` names the variables it changed."""
    from scipy.optimize import linprog

    from tabsafe.solver import GrowingProgram

    rng = np.random.default_rng(seed)
    A, b, y, lower, upper = _grid(rng, int(rng.integers(2, 5)), int(rng.integers(2, 5)))
    n = y.size
    order = rng.permutation(n)
    grow = GrowingProgram(A, sp.csr_matrix(A.T), b, y, lower, upper, order[:2])
    for size in sorted({3, int(rng.integers(3, n + 1)), n}):
        grow.add(order[:size])
        free = np.sort(order[:size])
        assert set(grow.variables.tolist()) == set(free.tolist())
        held = np.setdiff1d(np.arange(n), free)
        rhs = b - A[:, held] @ y[held]
        for at in rng.choice(free, 3).tolist():
            maximize = bool(rng.integers(2))
            grow.aim(int(at), maximize)
            value, x, _ = grow.solve()
            cost = np.zeros(free.size)
            cost[np.searchsorted(free, at)] = -1.0 if maximize else 1.0
            ref = linprog(cost, A_eq=A[:, free], b_eq=rhs, bounds=list(zip(lower[free], upper[free])), method="highs")
            assert ref.status == 0
            assert abs(value - (-ref.fun if maximize else ref.fun)) <= 1e-7
            table = y.copy()
            table[grow.variables] = x
            assert np.abs(A @ table - b).max() <= 1e-7
            assert (table >= lower - 1e-9).all() and (table <= upper + 1e-9).all()
            changed = set(grow.variables[np.abs(x - y[grow.variables]) > 1e-9].tolist())
            assert set(grow.paths[maximize].tolist()) == changed
