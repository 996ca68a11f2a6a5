"""Properties of controlled rounding (method ``controlled-round``; seed 000 §5.5.1) on random
tables (hypothesis), each strategy forced by its tuning, checked against an independent
reference: the same integer program written directly for scipy's ``milp``."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest
import scipy.optimize as so
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import tabsafe as ts
from tabsafe.errors import MethodError, Reason
from tabsafe.protect.controlled_rounding import ControlledRounding, Tuning, controlled_round, rapid_round
from tabsafe.protect.controlled_rounding.grid import Grid
from tabsafe.protect.controlled_rounding.improve import improve
from tabsafe.protect.controlled_rounding.partition import partitioned
from tabsafe.protect.controlled_rounding.program import Part, Problem, Pull, solve_part
from tabsafe.protect.controlled_rounding.steps import objective, step_range, violation
from tabsafe.protect.controlled_rounding.work import Effort, Limits, Work
from tabsafe.solver import Solution

SETTINGS = settings(max_examples=25)
#: forces the large-table path (LP relaxation, sequential rounding, neighbourhood search)
LARGE = Tuning(direct_vars=0)


def make_table(shape: tuple[int, ...], values: list[int], hierarchical: bool) -> ts.Table:
    """The table of the inner cells ``values`` (row-major over ``shape``) with every margin, stored
    as tabulation stores it (cells with records only); ``v0`` has two groups when hierarchical."""
    dims = []
    x = np.asarray(values, dtype=np.int64).reshape(shape)
    for d, n in enumerate(shape):
        leaves = [f"v{d}_{i}" for i in range(n)]
        h = (ts.Hierarchy.from_tree({"G1": leaves[:2], "G2": leaves[2:]}) if d == 0 and hierarchical and n >= 3
             else ts.Hierarchy.flat(leaves))
        dims.append(ts.Dimension(f"v{d}", h))
        under = np.array([[code in h.ancestors(leaf) for leaf in leaves] for code in h.order], dtype=np.int64)
        x = np.moveaxis(np.tensordot(under, x, axes=([1], [d])), 0, d)
    t = ts.Table.from_grid(dims, {"count": x.ravel()})
    return t.take(t.counts != 0)


@st.composite
def tables(draw: st.DrawFn, dims: tuple[int, ...] = (2, 3), max_side: int = 4, max_count: int = 40,
           hierarchical: bool | None = None) -> ts.Table:
    d = draw(st.sampled_from(dims))
    shape = tuple(draw(st.integers(2, max_side)) for _ in range(d))
    n = int(np.prod(shape))
    values = draw(st.lists(st.integers(0, max_count), min_size=n, max_size=n))
    return make_table(shape, values, draw(st.booleans()) if hierarchical is None else hierarchical)


def reference_optimum(t: ts.Table, base: int, steps: int) -> float | None:
    """The least ``Σ|z − a|`` over additive roundings within the steps, or None when there is none:
    ``w`` integer in its step range, ``A·w = −A·u``, ``t ≥ ±(r − b·w)``, minimise ``Σ t``
    (scipy's milp; written apart from tabsafe's program)."""
    dense = t.densify()
    z = np.asarray(dense.counts, dtype=np.int64)
    u, r = np.divmod(z, base)
    lo = -np.minimum(steps, u)
    hi = steps + (r != 0)
    A = sp.csr_matrix(dense.additivity())
    n = z.size
    eye = sp.identity(n, format="csr")
    cons = [
        so.LinearConstraint(sp.hstack([A, sp.csr_matrix((A.shape[0], n))]), -(A @ u), -(A @ u)),
        so.LinearConstraint(sp.hstack([base * eye, eye]), r, np.inf),  # t + b w >= r
        so.LinearConstraint(sp.hstack([-base * eye, eye]), -r, np.inf),  # t - b w >= -r
    ]
    res = so.milp(np.concatenate([np.zeros(n), np.ones(n)]), constraints=cons,
                  integrality=np.concatenate([np.ones(n), np.zeros(n)]),
                  bounds=so.Bounds(np.concatenate([lo, np.zeros(n)]), np.concatenate([hi, np.full(n, np.inf)])))
    if res.status == 2:  # infeasible
        return None
    assert res.status == 0, res.message
    return float(round(res.fun))


def check_rounding(t: ts.Table, values: np.ndarray, base: int, steps: int) -> None:
    """What every controlled rounding must be: additive, multiples of the base, within the steps."""
    dense = t.densify()
    z = dense.counts
    assert dense.with_values(count=values).is_additive()
    assert np.all(values % base == 0)
    lo, hi = step_range(z, base, steps)
    w = values // base - z // base
    assert np.all((w >= lo) & (w <= hi))


@SETTINGS
@given(t=tables(dims=(2,), max_side=5, hierarchical=False), base=st.sampled_from([2, 3, 5, 10]))
def test_two_way_tables_always_get_a_zero_restricted_rounding(t: ts.Table, base: int) -> None:
    """Every two-way table has a zero-restricted controlled rounding (Cox & Ernst 1982, the
    seed's "in most cases a solution can be found"): multiples of the base stay, every other cell
    goes to an adjacent multiple, the table adds up, and the rounding is optimal."""
    p = ControlledRounding(base=base).protect(t)
    got, z = p.release.counts, t.grid("count")
    assert np.all(got % base == 0)
    assert np.array_equal(got[z % base == 0], z[z % base == 0])
    assert np.all(np.abs(got - z) < base)
    assert p.release.table.is_additive()
    assert p.report.figures["status"] == "optimal"
    assert p.report.private["objective"] == int(np.abs(got - z).sum()) == reference_optimum(t, base, 0)


@SETTINGS
@given(t=tables(dims=(2, 3, 4), max_side=3, max_count=30), base=st.sampled_from([3, 5]), steps=st.sampled_from([0, 1]))
def test_controlled_rounding_is_optimal_or_provably_impossible(t: ts.Table, base: int, steps: int) -> None:
    """Either an additive rounding within the steps whose objective is the reference optimum, or
    the error ``infeasible`` exactly when the reference finds no rounding either."""
    best = reference_optimum(t, base, steps)
    try:
        res = controlled_round(t, base=base, steps=steps)
    except MethodError as exc:
        assert exc.reason is Reason.INFEASIBLE and best is None, f"{exc} (the reference has {best})"
        assert {"steps": steps + 1} in [s.params for s in exc.suggestions]
        return
    assert best is not None
    check_rounding(t, res.values, base, steps)
    assert res.objective == objective(t.grid("count"), res.values)
    assert res.lower_bound <= best <= res.objective
    if res.status == "optimal":
        assert res.objective == best


@settings(max_examples=6)
@given(seed=st.integers(0, 10_000), hierarchical=st.booleans())
def test_sequential_rounding_is_additive_and_within_the_steps(seed: int, hierarchical: bool) -> None:
    """The sequential path (LP relaxation, then slice by slice along the longest variable, the
    last group of slices exact), forced on a 40 × 4 × 3 table: a one-step rounding is always
    found; it adds up, lies within the steps, and its objective lies above the LP bound."""
    rng = np.random.default_rng(seed)
    shape = (40, 4, 3)
    counts = rng.integers(0, 30, size=int(np.prod(shape))) * (rng.random(int(np.prod(shape))) < 0.7)
    t = make_table(shape, counts.tolist(), hierarchical=hierarchical)
    res = controlled_round(t, base=3, steps=1, solution="first-feasible", tuning=LARGE)
    check_rounding(t, res.values, 3, 1)
    assert res.bound_kind == "lp" and res.lower_bound <= res.objective == objective(t.grid("count"), res.values)
    assert any("slice by slice along 'v0'" in note for note in res.notes)


def test_sequential_rounding_is_close_to_the_lp_bound() -> None:
    """On a census-like 60 × 6 × 3 table the sequential rounding alone (first-feasible: no
    neighbourhood search after it) lands within 3% of the LP relaxation's bound."""
    rng = np.random.default_rng(11)
    shape = (60, 6, 3)
    t = make_table(shape, rng.poisson(6, size=int(np.prod(shape))).tolist(), hierarchical=True)
    res = controlled_round(t, base=3, steps=1, solution="first-feasible", tuning=LARGE)
    assert any("slice by slice" in note for note in res.notes)
    check_rounding(t, res.values, 3, 1)
    assert res.gap < 0.03, res


@settings(max_examples=8)
@given(seed=st.integers(0, 10_000), steps=st.sampled_from([1, 2]), cells=st.sampled_from([12, 40, 2_000]))
def test_neighbourhood_search_repairs_and_improves(seed: int, steps: int, cells: int) -> None:
    """From RAPID (additive, but its margins often beyond the steps) the neighbourhood search
    keeps the rounding additive and never makes it worse: first fewer steps beyond the allowed
    range, then a lower objective. A box as large as the table is the whole program: the first
    box repairs every cell and proves the optimum."""
    rng = np.random.default_rng(seed)
    t = make_table((5, 4, 3), rng.integers(0, 25, size=60).tolist(), hierarchical=True)
    problem = Problem(Grid.of(t), 3, steps)
    z = problem.z
    start = rapid_round(t, base=3)
    out = improve(problem, start, Work(Limits(work=100)), Tuning(neighbourhood_cells=cells, stall=15), target=0.0)
    dense = problem.grid.table
    assert dense.with_values(count=out.values).is_additive() and np.all(out.values % 3 == 0)
    before, after = violation(z, start, 3, steps).sum(), violation(z, out.values, 3, steps).sum()
    assert after <= before
    if before == 0:
        assert objective(z, out.values) <= objective(z, start)
    best = reference_optimum(t, 3, steps)
    assert best is not None
    if after == 0:
        assert objective(z, out.values) >= best
    if cells >= dense.n_cells:
        assert out.proven and after == 0 and objective(z, out.values) == best


def test_neighbourhood_search_reaches_the_optimum_of_a_small_table() -> None:
    """A box covering the whole table is the whole program: the search proves optimality."""
    t = make_table((4, 3, 2), [5, 1, 7, 2, 8, 4, 1, 1, 3, 7, 2, 9, 4, 4, 1, 0, 6, 2, 5, 8, 1, 7, 3, 3], True)
    problem = Problem(Grid.of(t), 3, 1)
    out = improve(problem, rapid_round(t, base=3), Work(Limits(work=100)), Tuning(), target=0.0)
    assert out.proven and out.boxes == 1
    assert objective(problem.z, out.values) == reference_optimum(t, 3, 1)


@settings(max_examples=12)
@given(seed=st.integers(0, 10_000), steps=st.sampled_from([1, 2]), hierarchical=st.booleans(),
       part_cells=st.sampled_from([12, 30, 80]))
def test_partitioned_rounding_is_additive_and_within_the_steps(
    seed: int, steps: int, hierarchical: bool, part_cells: int
) -> None:
    """A 4-D table split into parts far smaller than itself (margin slices first, then the slices
    of one variable with the remainder rule): additive across parts, every cell within K steps.
    Partitioning is a heuristic and may find nothing (then it says so with ``None``); how often it
    succeeds is checked on fixed seeds below."""
    rng = np.random.default_rng(seed)
    t = make_table((4, 3, 3, 2), rng.integers(0, 25, size=72).tolist(), hierarchical=hierarchical)
    out = partitioned(Problem(Grid.of(t), 3, steps), Work(Limits()), Tuning(), part_cells)
    assert out.parts > 1
    if out.values is not None:
        check_rounding(t, out.values, 3, steps)


def test_partitioned_rounding_succeeds_on_most_tables() -> None:
    """With two steps and parts of at most 30 cells, every one of 16 random 4-D tables is rounded
    part by part (one step: the per-cell remainder rule may leave a slice without a rounding)."""
    for seed in range(16):
        rng = np.random.default_rng(seed)
        t = make_table((4, 3, 3, 2), rng.integers(0, 25, size=72).tolist(), hierarchical=bool(seed % 2))
        res = controlled_round(t, base=3, steps=2, part_cells=30)
        assert any(note.startswith("partitioned") for note in res.notes)
        check_rounding(t, res.values, 3, 2)


# A 2x2x2x2 table with no zero-restricted controlled rounding to base 3 (found by search; the
# solver's presolve proves it), which does have one with one step.
INFEASIBLE = [[[[5, 0], [0, 0]], [[5, 0], [1, 0]]], [[[0, 4], [0, 0]], [[1, 1], [0, 5]]]]


@pytest.mark.parametrize("part_cells", [10, 1_000])
def test_table_without_zero_restricted_rounding_says_so(part_cells: int) -> None:
    """The 2x2x2x2 table without a zero-restricted rounding, whole or partitioned: the error is
    ``infeasible`` with the suggestion ``steps=1`` (the reference agrees); with one step it is
    rounded."""
    t = make_table((2, 2, 2, 2), np.array(INFEASIBLE).ravel().tolist(), hierarchical=False)
    assert reference_optimum(t, 3, 0) is None
    with pytest.raises(MethodError, match=r"no zero-restricted controlled rounding to base 3 exists") as info:
        controlled_round(t, base=3, part_cells=part_cells)
    assert info.value.reason is Reason.INFEASIBLE
    assert info.value.suggestions[0].params == {"steps": 1}
    assert "steps=1" in str(info.value)
    res = controlled_round(t, base=3, steps=1, part_cells=part_cells)
    check_rounding(t, res.values, 3, 1)


# --------------------------------------------------------------------------------------------
# deterministic limits (hardening issue #12)


def work_bound_table() -> ts.Table:
    """A sparse 40 × 5 × 3 table whose sequential rounding is 4 above the LP bound, and whose
    neighbourhood search, in boxes of 150 cells, is still improving when 120 nodes are spent."""
    rng = np.random.default_rng(2)
    n = 40 * 5 * 3
    return make_table((40, 5, 3), (rng.poisson(1, size=n) * (rng.random(n) < 0.5)).tolist(), hierarchical=True)


def test_two_runs_with_the_same_work_limit_give_the_same_table() -> None:
    t = work_bound_table()
    tuning = Tuning(direct_vars=0, neighbourhood_cells=150)
    a = controlled_round(t, base=3, work_limit=120, tuning=tuning)
    b = controlled_round(t, base=3, work_limit=120, tuning=tuning)
    assert a.stopped_by == "work" and a.work >= 120 and a.reproducible  # the limit was hit
    assert a.objective > a.lower_bound  # with work left to do
    assert np.array_equal(a.values, b.values)
    assert (a.objective, a.work, a.programs) == (b.objective, b.work, b.programs)
    assert any("work limit stopped the search" in note for note in a.notes)
    check_rounding(t, a.values, 3, 0)
    # the search does depend on its draws: equal tables come from equal draws, not from a search
    # that never moves
    other = controlled_round(t, base=3, work_limit=120, tuning=Tuning(direct_vars=0, neighbourhood_cells=150,
                                                                        search_seed=1))
    assert not np.array_equal(a.values, other.values)


def test_the_method_reports_the_limit_and_reproducibility() -> None:
    t = work_bound_table()
    p = ControlledRounding(base=3, steps=1).protect(t)
    assert p.report.figures["stopped_by"] == "none" and p.report.figures["reproducible"] is True
    assert any("finished within its limits" in note for note in p.report.notes)
    # an extra time limit that does not bind changes nothing
    q = ControlledRounding(base=3, steps=1, time_limit=3600).protect(t)
    assert np.array_equal(p.release.counts, q.release.counts)
    assert q.report.figures["reproducible"] is True


def test_a_program_never_gets_more_nodes_than_the_budget_has_left() -> None:
    work = Work(Limits(work=10))
    assert work.effort(50).nodes == 10 and work.effort().nodes == 10
    sol = Solution("feasible", np.zeros(1), 0.0, 0.0, 0.0, 0.1, nodes=7, limit="nodes")
    work.charge(sol, Effort(nodes=10))
    assert work.nodes == 7 and work.effort(50).nodes == 3 and work.stopped_by is None
    work.charge(Solution("optimal", np.zeros(1), 0.0, 0.0, 0.0, 0.1, nodes=0), Effort(nodes=3))
    assert work.nodes == 8  # a program settled at its root counts one
    work.charge(Solution("feasible", np.zeros(1), 0.0, 0.0, 0.0, 0.1, nodes=2, limit="nodes"), Effort(nodes=2))
    assert work.effort(5) is None and work.stopped_by == "work" and work.reproducible


def test_the_presolve_probe_has_a_time_cap_of_its_own() -> None:
    """The probe (presolve only: no nodes) is capped in time even without a time limit, and
    within the time limit when there is one."""
    assert Work(Limits()).probe(10.0) == Effort(nodes=0, seconds=10.0)
    effort = Work(Limits(time=2.0)).probe(10.0)
    assert effort.nodes == 0 and effort.seconds is not None and effort.seconds <= 2.0


def test_a_time_limit_that_stops_the_search_is_reported_as_not_reproducible() -> None:
    work = Work(Limits(work=10, time=0.01))
    time.sleep(0.07)
    assert work.effort(5) is None  # nothing may start any more
    assert work.stopped_by == "time" and not work.reproducible


def test_a_spent_budget_is_a_work_limit_error() -> None:
    """One node of work: the sequential rounding stops after its first program and the solver
    gets nothing: the error says the work limit, and suggests more of it."""
    t = work_bound_table()
    with pytest.raises(MethodError, match="was found within the work limit of 1 branch-and-bound nodes") as info:
        controlled_round(t, base=3, steps=1, work_limit=1, tuning=LARGE)
    assert info.value.reason is Reason.WORK_LIMIT
    assert {"work_limit": 4} in [s.params for s in info.value.suggestions]
    assert {"steps": 2} in [s.params for s in info.value.suggestions]


# --------------------------------------------------------------------------------------------
# one program


def test_part_ranges_narrow_the_allowed_values() -> None:
    """A part solved with a narrowed range (the remainder rule) stays inside it."""
    t = make_table((3, 3), [1, 2, 4, 7, 0, 3, 11, 13, 22], hierarchical=False)
    problem = Problem(Grid.of(t), 3, 1)
    lo, hi = (x.copy() for x in problem.ranges)
    total = problem.grid.table.cell_id({})
    lo[total] = hi[total] = 1  # force the grand total one step above its floor
    res = solve_part(problem, Part(free=np.ones(problem.z.size, dtype=bool), values=np.zeros(problem.z.size,
                                   dtype=np.int64), ranges=(lo, hi)), Effort(nodes=100))
    assert res.values is not None and res.status == "optimal"
    assert res.values[total] == 3 * (problem.z[total] // 3 + 1)
    assert problem.grid.table.with_values(count=res.values).is_additive()
    w = res.values // 3 - problem.u
    assert np.all((w >= lo) & (w <= hi))


def test_pull_and_relaxed_look_ahead() -> None:
    """A pull towards a target moves a free cell there when rounding is otherwise indifferent;
    cells solved as a continuous look-ahead keep their previous values."""
    t = make_table((2, 2), [1, 2, 2, 1], hierarchical=False)
    problem = Problem(Grid.of(t), 3, 0)
    n = problem.z.size
    free = np.ones(n, dtype=bool)
    target = np.full(n, np.nan)
    cell = problem.grid.table.cell_id({"v0": "v0_0", "v1": "v1_0"})  # z = 1: nearest is down (w = 0)
    target[cell] = 1.0
    res = solve_part(problem, Part(free=free, values=np.zeros(n, dtype=np.int64), pull=Pull(target, 10.0)),
                     Effort(nodes=100))
    assert res.values is not None and res.values[cell] == 3
    assert problem.grid.table.with_values(count=res.values).is_additive()
    relaxed = np.zeros(n, dtype=bool)
    relaxed[cell] = True
    marker = np.full(n, -7, dtype=np.int64)
    res = solve_part(problem, Part(free=free, values=marker, relaxed=relaxed), Effort(nodes=100))
    assert res.values is not None and res.values[cell] == -7 and np.all(res.values[~relaxed] % 3 == 0)


@SETTINGS
@given(
    values=st.lists(st.integers(0, 9), min_size=4, max_size=4),
    targets=st.lists(st.floats(-1.5, 2.5), min_size=9, max_size=9),
    lam=st.sampled_from([0.5, 1.0, 4.0]),
    steps=st.sampled_from([0, 1]),
)
def test_pulled_program_is_exact(values: list[int], targets: list[float], lam: float, steps: int) -> None:
    """The pulled program (one 0/1 variable per unit step) finds the additive rounding of least
    ``Σ |z − a| + λ·|w − target|``: checked against every rounding of a 2 × 2 table with margins."""
    t = make_table((2, 2), values, hierarchical=False)
    problem = Problem(Grid.of(t), 3, steps)
    z, u = problem.z, problem.u
    target = np.array(targets)
    res = solve_part(problem, Part(free=np.ones(z.size, dtype=bool), values=np.zeros(z.size, dtype=np.int64),
                                   pull=Pull(target, lam)), Effort(nodes=10_000, gap=0.0))
    lo, hi = problem.ranges

    def cost(a: np.ndarray) -> np.ndarray:
        return np.abs(z - a).sum(-1) + lam * np.abs(a // 3 - u - target).sum(-1)

    every = 3 * (u + np.array(list(itertools.product(*[range(lo[i], hi[i] + 1) for i in range(z.size)]))))
    additive = every[np.all(problem.grid.additivity @ every.T == 0, axis=0)]
    if additive.shape[0] == 0:
        assert res.values is None and res.status == "infeasible"
        return
    assert res.values is not None and problem.grid.table.with_values(count=res.values).is_additive()
    w = res.values // 3 - u
    assert np.all((lo <= w) & (w <= hi))
    assert float(cost(res.values)) == pytest.approx(float(cost(additive).min()), abs=1e-6)
