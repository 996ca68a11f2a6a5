"""Secondary suppression: after it, no primary cell can be recomputed (its feasibility interval
by linear programming is never a single value), on random 2- and 3-dimensional tables with
hierarchies, for every zero policy and both modes."""

from __future__ import annotations

import itertools

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.properties.strategies import dimensions
from tabsafe import InnerCells, tabulate
from tabsafe.model.table import Table
from tabsafe.protect.suppression import CellSuppression, CellSystem, Problem, Settings, joint_table, secondary_suppression
from tabsafe.protect.suppression.hitas import hitas, subtables
from tabsafe.protect.suppression.hypercube import Moves, box, hypercube, verify
from tabsafe.protect.suppression.elimination import null_basis, support_basis
from tabsafe.protect.suppression.footprint import shape
from tabsafe.protect.suppression.optimal import Budget
from tabsafe.risk.intervals import feasibility_intervals, interval_audit


@st.composite
def tables(draw: st.DrawFn, dims: tuple[int, ...] = (2, 3)) -> Table:
    n_dims = draw(st.sampled_from(dims))
    names = ["a", "b", "c"][:n_dims]
    hierarchies, codes = dimensions(draw, names, 5 if n_dims == 2 else 3)
    grid = pd.MultiIndex.from_product(codes, names=names).to_frame(index=False)
    # Small counts dominate, as in a detailed census table: many 0s, 1s and 2s.
    values = draw(st.lists(st.sampled_from([0, 0, 1, 1, 2, 3, 4, 6, 9, 15, 40]), min_size=len(grid), max_size=len(grid)))
    grid["n"] = values
    return tabulate(InnerCells.from_frame(grid, count="n"), names, hierarchies=hierarchies).densify()


def _check(table: Table, primary: np.ndarray, result, zeros: str) -> None:
    suppressed = result.suppressed
    counts = table.counts
    assert (suppressed[primary]).all()
    if zeros == "never":
        assert not (suppressed & (counts == 0)).any()
    if zeros == "primary":
        assert suppressed[counts == 0].all()
    lower = 1.0 if zeros == "never" else 0.0
    audit = interval_audit(table, suppressed, required=1.0, lower=lower, cells=primary | ((counts == 0) & (zeros == "primary")))
    prim = primary | ((counts == 0) & (zeros == "primary"))
    width = audit.upper[prim] - audit.lower[prim]
    assert (width > 1e-7).all(), "a primary cell is recomputable"
    assert not audit.narrow.any()
    # The interval always holds the true value.
    inside = (audit.lower[prim] <= counts[prim] + 1e-7) & (counts[prim] <= audit.upper[prim] + 1e-7)
    assert inside.all()


@pytest.mark.parametrize("mode", ["fast", "hypercube"])
@settings(max_examples=40)
@given(table=tables(), zeros=st.sampled_from(["never", "safe", "primary"]), min_freq=st.sampled_from([2, 3, 4]))
def test_a_mode_leaves_no_primary_cell_recomputable(mode: str, table: Table, zeros: str, min_freq: int) -> None:
    primary = (table.counts > 0) & (table.counts < min_freq)
    result = secondary_suppression(table, primary, Settings(mode=mode, zeros=zeros))
    _check(table, primary, result, zeros)
    if mode == "hypercube":  # each primary cell's move, checked from the problem alone
        assert result.private["moves_verified"] == int(result.private["primary"])
        assert result.figures["audit"] == "moves"


@settings(max_examples=12)
@given(table=tables(), zeros=st.sampled_from(["never", "safe"]), cost=st.sampled_from(["count", "cells"]))
def test_optimal_mode_is_protected_and_no_worse_than_fast(table: Table, zeros: str, cost: str) -> None:
    primary = (table.counts > 0) & (table.counts < 3)
    fast = secondary_suppression(table, primary, Settings(mode="fast", zeros=zeros, cost=cost))
    best = secondary_suppression(table, primary, Settings(mode="optimal", zeros=zeros, cost=cost, work_limit=8))
    _check(table, primary, best, zeros)
    value = table.counts.astype(float)

    def objective(mask: np.ndarray) -> float:
        sec = mask & ~primary
        return float(value[sec].sum()) if cost == "count" else float(sec.sum())

    assert objective(best.suppressed) <= objective(fast.suppressed) + 1e-9
    assert 0.0 <= best.private["gap"] <= 1.0


@settings(max_examples=12)
@given(table=tables(), zeros=st.sampled_from(["never", "safe"]))
def test_decomposition_along_the_hierarchy_gives_a_protected_pattern(table: Table, zeros: str) -> None:
    primary = (table.counts > 0) & (table.counts < 3)
    # every cell is in the subtables, each subtable holds its aggregates and their children
    parts = subtables(table)
    covered = np.zeros(table.n_cells, dtype=bool)
    for ids in parts:
        covered[ids] = True
    assert covered.all()
    problem = Problem.build(CellSystem.of_table(table), primary, Settings(mode="optimal", zeros=zeros))
    pattern = hitas(problem, table, budget=Budget(20))
    if pattern is None:  # the subtables above left a lower one no way: the optimal mode uses the fast pattern
        return
    result = SimpleNamespace(suppressed=pattern)
    _check(table, primary, result, zeros)


@settings(max_examples=15)
@given(table=tables(dims=(3,)))
def test_linked_tables_share_their_suppression(table: Table) -> None:
    # Two releases from one 3-way table: a x b and a x c share the cells (a, Total).
    frame = table.take(table.leaf_mask).to_frame()
    frame = pd.DataFrame({**{v: frame[v].astype(str) for v in table.variables}, "n": frame["count"]})
    hs = {d.variable: d.hierarchy for d in table.dimensions}

    def margin(keep: list[str]) -> Table:
        agg = frame.groupby(keep, as_index=False)["n"].sum()
        return tabulate(InnerCells.from_frame(agg, count="n"), keep, hierarchies={k: hs[k] for k in keep}).densify()

    ab, ac = margin(["a", "b"]), margin(["a", "c"])
    out = CellSuppression(min_freq=3).protect_linked([ab, ac])
    status = {}
    for prot in out:
        t = prot.table.to_frame()
        missing = t["count"].isna().to_numpy()
        assert (missing == (t["status"] == "suppressed").to_numpy()).all()
        for (_, row), hidden in zip(t.iterrows(), missing):
            cell = {v: str(row[v]) for v in prot.table.variables}
            if all(cell.get(v, "Total") == "Total" for v in ("b", "c")):
                status.setdefault(cell["a"], set()).add(bool(hidden))
    assert all(len(s) == 1 for s in status.values())
    # Jointly, an intruder with both releases still cannot recompute a primary cell.
    joint = joint_table([ab, ac])
    suppressed = np.ones(joint.table.n_cells, dtype=bool)
    primary = np.zeros(joint.table.n_cells, dtype=bool)
    released = np.zeros(joint.table.n_cells, dtype=bool)
    for prot, rows in zip(out, joint.cells):
        released[rows] = True
        suppressed[rows] = prot.release.table.column("status") == "suppressed"
        primary[rows] |= prot.evaluation.column("reason") == "primary"
    values = np.nan_to_num(np.asarray(joint.table.counts, dtype=float))
    # zeros are never suppressed: a suppressed released cell is at least 1; unreleased cells may be 0
    lower = np.where(released, 1.0, 0.0)
    res = feasibility_intervals(joint.table.additivity(), values, suppressed, lower=lower, targets=primary)
    assert ((res.upper - res.lower)[primary] > 1e-7).all()


@settings(max_examples=30)
@given(table=tables(), zeros=st.sampled_from(["never", "safe"]), min_freq=st.sampled_from([3, 4]))
def test_mending_a_pattern_protects_it(table: Table, zeros: str, min_freq: int) -> None:
    """``mend`` (the optimal mode's completion of an integer program's answer) started from the
    primary cells alone: the audit's repairs by themselves end in a protected pattern."""
    from tabsafe.protect.suppression.audit import mend

    primary = (table.counts > 0) & (table.counts < min_freq)
    problem = Problem.build(CellSystem.of_table(table), primary, Settings(zeros=zeros))
    if not primary.any():
        return
    pattern, _ = mend(problem, primary.copy())
    assert not (pattern & ~primary & ~problem.candidates).any(), "a cell that may not be hidden is hidden"
    result = SimpleNamespace(suppressed=pattern)
    _check(table, primary, result, zeros)


@settings(max_examples=40)
@given(table=tables())
def test_the_memory_model_reads_the_shape_the_suppression_builds(table: Table) -> None:
    """The memory model's shape (issue #28), read off the hierarchies and the stored cells, is
    what the suppression then builds: the grid, the relations' entries, the entries of either
    basis of the elimination, and no basis column longer than it says; the same from the table's
    stored non-zero cells alone."""
    problem = Problem.build(CellSystem.of_table(table), np.zeros(table.n_cells, dtype=bool), Settings())
    support = support_basis(table)
    for s in (shape(table), shape(table.sparse())):
        assert s.cells == table.n_cells
        assert s.relation_entries == problem.A.nnz
        assert s.support_entries == sum(len(c) for c in support)
        assert s.null_entries == sum(len(c) for c in null_basis(table))
        assert all(len(c) <= s.column for c in support)
        assert s.inner == int((table.leaf_mask & (table.counts != 0)).sum())


@settings(max_examples=40)
@given(table=tables(), zeros=st.sampled_from(["never", "safe", "primary"]))
def test_each_move_proves_no_more_than_the_intruders_interval(table: Table, zeros: str) -> None:
    """A move's width is a lower bound of its primary cell's feasibility interval by linear
    programming (what the intruder computes), and at least the protection required; the move
    changes only suppressed cells, never more than twice the cells an inner cell adds to."""
    primary = (table.counts > 0) & (table.counts < 3)
    problem = Problem.build(CellSystem.of_table(table), primary, Settings(mode="hypercube", zeros=zeros))
    suppressed, moves = hypercube(problem)
    width = verify(problem, suppressed, moves)
    assert set(moves.primary.tolist()) == set(np.flatnonzero(problem.primary).tolist())
    assert (width >= problem.required[moves.primary] - 1e-9).all()
    res = feasibility_intervals(problem.A, problem.values, suppressed, lower=problem.lower, targets=problem.primary)
    lp = res.upper - res.lower
    assert (width <= lp[moves.primary] + 1e-7).all(), "a move claims more than the intruder's interval allows"
    assert not (suppressed & problem.forced & ~problem.primary).any()
    assert (np.diff(moves.ptr) <= 2 * shape(table).column).all()


@settings(max_examples=30)
@given(table=tables(), data=st.data())
def test_the_box_around_a_cell(table: Table, data: st.DataObject) -> None:
    """The cells a tied cell's program may change in a table by moves (``box``, issue #28): in
    every variable the cell's code, every code above it, and the ``partners`` largest non-zero
    codes of the cell's slab; so the cell and all its margins, and nothing else when there are no
    partners."""
    problem = Problem.build(CellSystem.of_table(table), np.zeros(table.n_cells, dtype=bool), Settings())
    cell = data.draw(st.integers(0, table.n_cells - 1))
    partners = data.draw(st.integers(0, 3))
    strides = [int(s) for s in table.strides]
    sizes = [len(d.hierarchy.order) for d in table.dimensions]
    at = [(cell // s) % n for s, n in zip(strides, sizes)]
    allowed = []
    for d, (s, n, here) in enumerate(zip(strides, sizes, at)):
        h = table.dimensions[d].hierarchy
        above = {h.position[a] for a in h.ancestors(h.order[here])}
        slab = cell + (np.arange(n) - here) * s
        values = np.asarray(table.counts, dtype=np.float64)[slab]
        others = [c for c in np.argsort(-values, kind="stable").tolist() if c not in above and values[c] > 0]
        allowed.append(above | set(others[:partners]))
    found = box(problem, cell, partners)
    expected = {cell + sum((c - here) * s for c, here, s in zip(codes, at, strides))
                for codes in itertools.product(*allowed)}
    assert sorted(found.tolist()) == sorted(expected)


@settings(max_examples=25)
@given(table=tables(), data=st.data())
def test_a_broken_move_proves_nothing(table: Table, data: st.DataObject) -> None:
    """The check does not trust the moves: a sign turned, a cell dropped from a move or a moved
    cell published gives that primary cell no width."""
    primary = (table.counts > 0) & (table.counts < 3)
    problem = Problem.build(CellSystem.of_table(table), primary, Settings(mode="hypercube"))
    suppressed, moves = hypercube(problem)
    if moves.primary.size == 0:
        return
    i = data.draw(st.integers(0, moves.primary.size - 1))
    lo, hi = int(moves.ptr[i]), int(moves.ptr[i + 1])
    j = data.draw(st.integers(lo, hi - 1))
    turned = moves.signs.copy()
    turned[j] = -turned[j]
    assert verify(problem, suppressed, Moves(moves.primary, moves.ptr, moves.cells, turned))[i] == 0
    dropped = Moves(moves.primary, np.concatenate([moves.ptr[: i + 1], moves.ptr[i + 1:] - 1]),
                    np.delete(moves.cells, j), np.delete(moves.signs, j))
    assert verify(problem, suppressed, dropped)[i] == 0
    other = int(moves.cells[j])
    if other != moves.primary[i]:
        published = suppressed.copy()
        published[other] = False
        assert verify(problem, published, moves)[i] == 0


@settings(max_examples=30)
@given(table=tables(), zeros=st.sampled_from(["never", "safe"]))
def test_publishing_back_lowers_the_cost_and_leaves_no_idle_cell(table: Table, zeros: str) -> None:
    """The hypercube mode's publish-back pass never makes the pattern costlier than the moves as
    first found, and every hidden secondary cell is a cell of some primary cell's move."""
    from tabsafe.protect.suppression import hypercube as module

    primary = (table.counts > 0) & (table.counts < 3)
    problem = Problem.build(CellSystem.of_table(table), primary, Settings(mode="hypercube", zeros=zeros))
    saved = module.PUBLISH_BACK_CELLS
    module.PUBLISH_BACK_CELLS = 0
    try:
        first, _ = hypercube(problem)
    finally:
        module.PUBLISH_BACK_CELLS = saved
    thinned, moves = hypercube(problem)
    assert problem.pattern_cost(thinned) <= problem.pattern_cost(first) + 1e-9
    used = np.zeros(table.n_cells, dtype=bool)
    used[moves.cells] = True
    assert np.array_equal(thinned, used | problem.primary)
