"""The fast mode's rule for primary cells at their least value (GaussSuppression's sign test,
with one more condition).

With zeros never suppressed an intruder knows every hidden count is at least 1. A candidate that
the published cells and the hidden 1s fix, and the published cells alone do not, reveals a
combination of those 1s. When its coefficients share a sign the combination is at its least
value only with every 1 in it at 1: publishing the candidate pins them, so it is hidden. When the
signs are mixed it pins none by itself and is published, unless it shares a 1 with a mixed
combination published before (two of them can add up to one of a single sign). The fast mode
used to hide every such candidate: 2,752 secondary cells on the 26,796-cell benchmark table
where it now hides 2,688 (issue #28)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tabsafe import InnerCells, tabulate
from tabsafe.model.table import Table
from tabsafe.protect.suppression import CellSystem, Problem, Settings, secondary_suppression
from tabsafe.protect.suppression.elimination import gauss, gauss_reference
from tabsafe.risk.intervals import feasibility_intervals


def _table(rows: list[list[int]], names: tuple[str, str] = ("r", "c")) -> Table:
    r, c = names
    frame = pd.DataFrame([(f"{r}{i}", f"{c}{j}", n) for i, row in enumerate(rows) for j, n in enumerate(row)],
                         columns=[r, c, "n"])
    return tabulate(InnerCells.from_frame(frame, count="n"), [r, c]).densify()


def _cell(table: Table, r: str, c: str) -> int:
    frame = table.to_frame()
    first, second = (d.variable for d in table.dimensions)
    hit = np.flatnonzero((frame[first].astype(str) == r).to_numpy() & (frame[second].astype(str) == c).to_numpy())
    assert hit.size == 1
    return int(hit[0])


def _problem(table: Table) -> Problem:
    counts = np.asarray(table.counts)
    return Problem.build(CellSystem.of_table(table), (counts > 0) & (counts < 3), Settings())


@pytest.mark.parametrize("eliminate", [gauss, gauss_reference], ids=["compiled", "reference"])
def test_a_cell_revealing_a_difference_of_ones_is_published(eliminate) -> None:
    #        c0  c1 | Total
    #   r0    4   1 |   5      r0's total = 6 + (r0,c1) - (r2,c0) - (r3,c0) once column c0 is
    #   r1    3   6 |   9      published: a difference of hidden 1s, which pins none of them
    #   r2    1   4 |   5
    #   r3    1   1 |   2
    table = _table([[4, 1], [3, 6], [1, 4], [1, 1]])
    problem = _problem(table)
    hidden = eliminate(problem, np.zeros(table.n_cells, dtype=bool))
    assert not hidden[_cell(table, "r0", "Total")]
    assert hidden[_cell(table, "r0", "c0")]  # the rank rule still hides (r0,c0): its row is the 1's


@pytest.mark.parametrize("eliminate", [gauss, gauss_reference], ids=["compiled", "reference"])
def test_a_cell_revealing_a_sum_of_ones_is_hidden(eliminate) -> None:
    #        c0  c1  c2 | Total
    #   r0    5   1   1 |   7      c0's total = 10 - (Total,c1) - (r0,c2) - (r1,c2): published, it
    #   r1    2   0   1 |   3      would give the sum of three hidden 1s, each then exactly 1
    table = _table([[5, 1, 1], [2, 0, 1]])
    problem = _problem(table)
    hidden = eliminate(problem, np.zeros(table.n_cells, dtype=bool))
    assert hidden[_cell(table, "Total", "c0")]


@pytest.mark.parametrize("eliminate", [gauss, gauss_reference], ids=["compiled", "reference"])
def test_mixed_combinations_sharing_a_one_are_not_all_published(eliminate) -> None:
    #        b0  b1  b2  b3 | Total     Published, (a1,b2) would give (a1,b0) + (a0,b2) = 2 with the
    #   a0    0   4   1   1 |   6       relations and the cells published before it: two hidden 1s,
    #   a1    1   1   3   5 |  10       each then exactly 1. Each combination it completes mixes
    #   Total 1   5   4   6 |  16       signs; together they do not
    table = _table([[0, 4, 1, 1], [1, 1, 3, 5]], ("a", "b"))
    problem = _problem(table)
    hidden = eliminate(problem, np.zeros(table.n_cells, dtype=bool))
    assert hidden[_cell(table, "a1", "b2")]
    iv = feasibility_intervals(problem.A, problem.values, hidden | problem.primary, lower=problem.lower,
                               targets=problem.primary)
    assert ((iv.upper - iv.lower)[problem.primary] >= 1 - 1e-7).all()  # the elimination alone protects


@pytest.mark.parametrize("rows", [[[4, 1], [3, 6], [1, 4], [1, 1]], [[5, 1, 1], [2, 0, 1]],
                                  [[0, 4, 1, 1], [1, 1, 3, 5]], [[1, 2, 5, 1], [1, 1, 4, 6], [3, 1, 1, 2]]])
def test_the_fast_pattern_leaves_every_primary_cell_an_interval(rows) -> None:
    table = _table(rows)
    problem = _problem(table)
    res = secondary_suppression(table, problem.primary, Settings(mode="fast"))
    iv = feasibility_intervals(problem.A, problem.values, res.suppressed, lower=problem.lower,
                               targets=problem.primary)
    width = (iv.upper - iv.lower)[problem.primary]
    assert (width >= 1 - 1e-7).all()
