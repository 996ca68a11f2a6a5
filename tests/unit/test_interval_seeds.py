"""The interval audit started from tables found by earlier audits (``seeds``): a table that moves
a cell the new pattern publishes is no table the intruder can still believe, and must not widen
any interval; the others settle cells without programs of their own, with the same verdicts."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tabsafe import InnerCells, tabulate
from tabsafe.protect.suppression import CellSystem, Problem, Settings, secondary_suppression
from tabsafe.risk.intervals import feasibility_intervals


def _problem() -> Problem:
    frame = pd.DataFrame({"r": list("aaabbbccc"), "c": list("xyzxyzxyz"), "n": [1, 5, 7, 4, 6, 8, 9, 3, 5]})
    table = tabulate(InnerCells.from_frame(frame, count="n"), ["r", "c"]).densify()
    counts = np.asarray(table.counts)
    return Problem.build(CellSystem.of_table(table), (counts > 0) & (counts < 3), Settings())


def _widths(problem: Problem, pattern: np.ndarray, **kw) -> np.ndarray:
    iv = feasibility_intervals(problem.A, problem.values, pattern, lower=problem.lower, targets=problem.primary,
                               required=problem.required, certify=True, **kw)
    return (iv.upper - iv.lower)[problem.primary]


def test_a_seed_that_moves_a_published_cell_widens_nothing() -> None:
    problem = _problem()
    protected = secondary_suppression(problem.system.table, problem.primary, Settings()).suppressed
    points: list[tuple[np.ndarray, np.ndarray]] = []
    assert (_widths(problem, protected, points=points) >= 1).all()
    assert points  # the programs found tables that move the hidden rectangle
    # publish one secondary cell again: the 1 is then exposed, whatever the earlier tables said
    secondary = np.flatnonzero(protected & ~problem.primary)
    for cell in secondary.tolist():
        exposed = protected.copy()
        exposed[cell] = False
        assert (_widths(problem, exposed) < 1).any()
        assert (_widths(problem, exposed, seeds=points) < 1).any()


def test_seeds_of_the_same_pattern_give_the_same_verdicts() -> None:
    problem = _problem()
    protected = secondary_suppression(problem.system.table, problem.primary, Settings()).suppressed
    points: list[tuple[np.ndarray, np.ndarray]] = []
    plain = _widths(problem, protected, points=points)
    seeded = _widths(problem, protected, seeds=points)
    assert ((plain >= 1) == (seeded >= 1)).all()
    assert all(np.all(x >= problem.lower[c] - 1e-9) for c, x in points)  # tables of counts, at least their bound
