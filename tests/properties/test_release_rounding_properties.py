"""Releases of 2–3 tables sharing margins, controlled-rounded together (issue #13): a cell shared
by several tables has one rounded value in all of them, every table is additive, every cell is
an adjacent multiple of the base (a multiple unchanged), seed 000 §5.5.1.

Checked independently of tabsafe's release and rounding code: each published cell is the set of
records of the microdata it counts (pandas masks over the codes' leaves), two cells of different
tables are the same cell when they count the same records by definition, and a table is additive
when every cell equals the sum of the inner cells below it (the inner cells' sets of leaves).
The random releases are those of the suppression property test (hierarchies, a non-nested
alternative hierarchy of one variable).
"""

from __future__ import annotations

from unittest.mock import patch

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import Bounds, LinearConstraint, milp

from tabsafe import Microdata, tabulate
from tabsafe.errors import MethodError, Reason
from tabsafe.protect.controlled_rounding import ControlledRounding, Tuning
from tabsafe.protect.controlled_rounding import solve as rounding_solve
from tabsafe.release import protect_release
from tests.properties.test_release_properties import CODES, _hierarchy, _tree, releases


def _cells(data: pd.DataFrame, tables, frames) -> tuple[list[list[tuple]], list[list[int]], list[list[list[int]]]]:
    """Per table, per row of its frame: the population (leaf sets of a, b, c), its true count,
    and the rows of its inner cells below it (additive iff each cell is their sum)."""
    pops_all, trues_all, below_all = [], [], []
    for (by, trees), frame in zip(tables, frames):
        leafsets = {v: _tree(trees.get(v), CODES[v]) for v in by}
        pops, trues = [], []
        for row in frame.itertuples(index=False):
            codes = {v: str(getattr(row, v)) for v in by}
            pop = tuple(frozenset(leafsets[v][codes[v]]) if v in by else frozenset(CODES[v]) for v in "abc")
            mask = np.ones(len(data), dtype=bool)
            for v, s in zip("abc", pop):
                mask &= data[v].isin(s).to_numpy()
            pops.append(pop)
            trues.append(int(mask.sum()))
        inner = [k for k, pop in enumerate(pops) if all(len(s) == 1 for v, s in zip("abc", pop) if v in by)]
        below = [[j for j in inner if all(pops[j][a] <= pop[a] for a in range(3))] for pop in pops]
        pops_all.append(pops)
        trues_all.append(trues)
        below_all.append(below)
    return pops_all, trues_all, below_all


def _check_release(data: pd.DataFrame, tables, protections, base: int) -> None:
    """The invariants of the module docstring, from the data and the published files alone."""
    frames = [p.release.table.to_frame() for p in protections]
    pops_all, trues_all, below_all = _cells(data, tables, frames)
    seen: dict[tuple[frozenset[str], ...], tuple[float, int]] = {}
    for i, (frame, pops, trues, below) in enumerate(zip(frames, pops_all, trues_all, below_all)):
        values = frame["count"].astype(float).tolist()
        for k, (pop, true, value) in enumerate(zip(pops, trues, values)):
            # an adjacent multiple of the base; a multiple stays as it is
            assert value % base == 0, f"table {i} cell {k}: {value} is not a multiple of {base}"
            if true % base == 0:
                assert value == true, f"table {i} cell {k}: the multiple {true} was changed to {value}"
            else:
                assert true // base * base <= value <= (true // base + 1) * base, \
                    f"table {i} cell {k}: {true} rounded to {value}"
            # a shared cell has one value in every table
            if pop in seen:
                assert seen[pop][0] == value, \
                    f"a cell shared by table {seen[pop][1]} and table {i} is {seen[pop][0]} and {value}"
            else:
                seen[pop] = (value, i)
            # additive: every cell is the sum of the inner cells below it
            total = sum(values[j] for j in below[k])
            assert total == value, f"table {i}: cell {k} is {value} but its inner cells sum to {total}"


def _no_rounding_exists(data: pd.DataFrame, tables, built, base: int) -> bool:
    """Whether no joint zero-restricted rounding exists, by an integer program written from the
    populations (scipy's milp): one variable per distinct population (its value in steps of the
    base, between the adjacent multiples), each table's cells equal to their inner cells' sum."""
    pops_all, trues_all, below_all = _cells(data, tables, [t.densify().to_frame() for t in built])
    index: dict[tuple, int] = {}
    true: list[int] = []
    for pops, trues in zip(pops_all, trues_all):
        for pop, t in zip(pops, trues):
            if pop not in index:
                index[pop] = len(true)
                true.append(t)
    rows = []
    for pops, below in zip(pops_all, below_all):
        for k, pop in enumerate(pops):
            row = np.zeros(len(true))
            row[index[pop]] += 1
            for j in below[k]:
                row[index[pops[j]]] -= 1
            if row.any():
                rows.append(row)
    z = np.array(true)
    lo, hi = z // base, -(-z // base)
    res = milp(np.zeros(len(true)), constraints=LinearConstraint(np.array(rows), 0, 0) if rows else (),
               integrality=np.ones(len(true)), bounds=Bounds(lo, hi))
    assert res.status in (0, 2), res.message
    return res.status == 2  # 2: infeasible


@settings(max_examples=10, suppress_health_check=[HealthCheck.data_too_large])
@given(release=releases(), base=st.sampled_from([2, 3, 5]), joint_path=st.booleans())
def test_release_rounding_is_consistent_additive_and_adjacent(release, base: int, joint_path: bool) -> None:
    data, tables = release
    tables = tables[:3]
    md = Microdata.from_frame(data)
    built = [tabulate(md, list(by), hierarchies={v: _hierarchy(v, trees.get(v)) for v in by}) for by, trees in tables]
    # joint_path: force the large-program strategy (first rounding, then the neighbourhood search
    # over related cells) on these small releases
    tuning = Tuning(joint_direct_vars=0, neighbourhood_cells=40, stall=5) if joint_path else rounding_solve.DEFAULT_TUNING
    try:
        with patch.object(rounding_solve, "DEFAULT_TUNING", tuning):
            result = protect_release(built, ControlledRounding(base=base), names=[f"t{i}" for i in range(len(built))])
    except MethodError as exc:
        # tables that share cells may have no joint rounding though each alone has one: the
        # method says so only when an independent program agrees
        assert exc.reason is Reason.INFEASIBLE, exc
        assert _no_rounding_exists(data, tables, built, base), f"tabsafe found no rounding, but one exists: {exc}"
        return
    assert len(result.protections) == len(built)
    assert not _no_rounding_exists(data, tables, built, base)
    _check_release(data, tables, result.protections, base)


@settings(max_examples=10, suppress_health_check=[HealthCheck.data_too_large])
@given(release=releases(), base=st.sampled_from([2, 3, 5]))
def test_moves_of_a_rounded_release_reach_only_values_its_intervals_hold(release, base: int) -> None:
    """The release audit's additive moves (issue #28) from the published table of a rounded
    release: each cell's reach lies inside its feasibility interval by linprog over every
    table's relations and bounds (checked on every cell the moves reach, up to 200), the moves
    settle cells, and the audit with them finds exactly the cells the programs alone find."""
    from scipy.optimize import linprog

    from tabsafe.release.audit import (audit_release, feasible_point, move_intervals, moves_of,
                                            published_bounds, steps)

    data, tables = release
    md = Microdata.from_frame(data)
    built = [tabulate(md, list(by), hierarchies={v: _hierarchy(v, trees.get(v)) for v in by}) for by, trees in tables[:3]]
    try:
        result = protect_release(built, ControlledRounding(base=base), names=[f"t{i}" for i in range(len(built))])
    except MethodError:
        return
    cells = result.cells
    published = [np.asarray(p.release.table.column("count"), dtype=float) for p in result.protections]
    lo, hi = published_bounds(cells, published, bases=[base] * len(built))
    point = feasible_point(cells, published, lo, hi)
    assert point is not None  # additive, and every value inside its own interval
    reach_lo, reach_hi = move_intervals(cells, point, lo, hi, hi - lo > 1e-7)
    width = reach_hi - reach_lo
    assert (width > 0).any()
    A = cells.relations.toarray()
    for c in np.flatnonzero(width > 0)[:200].tolist():
        for sense, reach in ((1.0, reach_lo[c]), (-1.0, reach_hi[c])):
            cost = np.zeros(cells.n_cells)
            cost[c] = sense
            lp = linprog(cost, A_eq=A, b_eq=np.zeros(A.shape[0]), bounds=list(zip(lo, hi)), method="highs")
            assert lp.status == 0
            extreme = sense * lp.fun
            assert sense * reach >= sense * extreme - 1e-6, (cells.name(c), reach, extreme)
    # every move followed as far as it goes is a table the intruder cannot rule out, and one step
    # further is not (a cell would leave its interval)
    unknown = hi - lo > 1e-7
    for backward in (False, True):
        M, t_up, t_down = steps(cells, moves_of(cells, backward), point, lo, hi, unknown)
        assert M.shape[0] > 0
        for k in range(M.shape[0]):
            move = M[k].toarray().ravel()
            for t in (t_up[k], -t_down[k]):
                x = point + t * move
                assert np.abs(A @ x).max() <= 1e-6 and (x >= lo - 1e-9).all() and (x <= hi + 1e-9).all()
            for t in (t_up[k] + 1e-3, -t_down[k] - 1e-3):
                x = point + t * move
                assert ((x < lo - 1e-9) | (x > hi + 1e-9)).any()
    with_moves = audit_release(cells, lo, hi, required=1.0, published=published)
    programs_only = audit_release(cells, lo, hi, required=1.0)
    assert [e.cell for e in with_moves.exposed] == [e.cell for e in programs_only.exposed]
