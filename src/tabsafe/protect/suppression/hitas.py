"""Decomposition along the hierarchy (tau-ARGUS' HiTaS): an incumbent for the optimal mode, with
the rounds its integer rounds leave.

A hierarchical table is cut into its non-hierarchical subtables: one per combination of an
aggregate code of each variable, holding that code and its children along every variable (so
region R1 with its areas, by every age and citizenship). Subtables are protected from the top of
the hierarchy down, each optimally on its own (a small integer program with audit cuts, started
from the fast pattern); a cell a higher subtable suppressed is protected like a primary cell in
every lower subtable that holds it, and a cell it published stays published (de Wolf, "HiTaS: a
heuristic approach to cell suppression in hierarchical tables", 2002). The combined pattern is
audited on the whole table and completed by the fast mode where the subtables' joins leave a
primary cell too narrow, so it is protected; it is a good incumbent, not a bound.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import numpy as np

from tabsafe.model.hierarchy import Hierarchy
from tabsafe.model.table import Dimension, Table
from tabsafe.protect.suppression.problem import CellSystem, Problem, Settings

if TYPE_CHECKING:  # pragma: no cover
    from tabsafe.protect.suppression.optimal import Budget

__all__ = ["hitas", "subtables"]


def subtables(table: Table) -> list[np.ndarray]:
    """The grid ids of each non-hierarchical subtable of ``table`` (dense), top-down: subtables
    of shallower aggregate codes first."""
    parts = []
    for d in table.dimensions:
        h = d.hierarchy
        parts.append([(h.depth(c), [h.position[c]] + [h.position[k] for k in h.children(c)])
                      for c in h.order if not h.is_leaf(c)])
    out = []
    for combo in sorted(itertools.product(*parts), key=lambda cs: sum(c[0] for c in cs)):
        ids = np.zeros(1, dtype=np.int64)
        for (_, positions), stride in zip(combo, table.strides):
            ids = (ids[:, None] + np.asarray(positions, dtype=np.int64)[None, :] * stride).ravel()
        out.append(ids)
    return out


def _subtable(table: Table, ids: np.ndarray) -> Table:
    """The subtable of grid ids ``ids`` (from :func:`subtables`) as a table of its own: each
    variable flat, its aggregate code as the total, in the same cell order."""
    dims = []
    for d, stride in zip(table.dimensions, table.strides):
        pos = (ids // stride) % len(d)
        codes = [d.hierarchy.order[p] for p in dict.fromkeys(pos.tolist())]
        dims.append(Dimension(d.variable, Hierarchy.flat(codes[1:], total=codes[0], source=d.hierarchy.source)))
    values = np.asarray(table.counts, dtype=np.float64)[ids]
    return Table.from_grid(dims, {"count": values})


def hitas(problem: Problem, table: Table, *, budget: Budget) -> np.ndarray | None:
    """A protected pattern of ``problem`` (the grid of ``table``) by decomposition (module
    docstring), or None when the rounds of ``budget`` do not reach every subtable (each gets its
    share of the rounds left, by its size; at least one) or its time guard stops it."""
    from tabsafe.errors import MethodError
    from tabsafe.protect.suppression.audit import TimeUp, audit, fast
    from tabsafe.protect.suppression.optimal import optimal

    deadline = budget.deadline
    n = problem.n_cells
    decided = np.zeros(n, dtype=bool)
    suppressed = problem.primary | problem.hidden
    parts = subtables(table)
    weights = np.array([p.size for p in parts], dtype=np.float64)
    for i, ids in enumerate(parts):
        if budget.left <= 0 or budget.timed_out():
            return None
        sub = _subtable(table, ids)
        settings = Settings(**{k: getattr(problem.settings, k) for k in
                               ("mode", "cost", "zeros", "protection_level", "protection_ratio", "mip_gap")})
        primary = problem.primary[ids] | (decided[ids] & suppressed[ids])
        published = decided[ids] & ~suppressed[ids]
        sp = Problem.build(CellSystem.of_table(sub), primary, settings, published=published)
        if sp.primary.any():
            try:
                pattern, _ = fast(sp, deadline=deadline)
            except MethodError:  # what the subtables above published leaves no way: give up here
                return None
            except TimeUp:
                budget.stopped_by = "time"
                return None
            if sp.candidates.any():
                # this subtable's share of the rounds, drawn from the whole budget
                share = budget.part(max(1, int(budget.left * weights[i] / weights[i:].sum())))
                pattern = optimal(sp, pattern, budget=share).suppressed
                budget.absorb(share)
                if share.stopped_by == "time":
                    return None
        else:
            pattern = sp.primary.copy()
        suppressed[ids] |= pattern
        decided[ids] = True
    if budget.timed_out():
        return None
    if not audit(problem, suppressed).passed:
        # where the subtables' joins leave a primary too narrow; within the same time limit
        try:
            suppressed, _ = fast(problem, hidden_first=suppressed, deadline=deadline)
        except TimeUp:
            budget.stopped_by = "time"
            return None
    return suppressed
