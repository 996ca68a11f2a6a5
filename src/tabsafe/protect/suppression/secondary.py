"""Secondary suppression: hide more cells so that no primary cell can be recomputed.

:func:`secondary_suppression` runs the chosen mode on a :class:`~.problem.Problem` — the fast
heuristic (:mod:`.audit`, on :mod:`.elimination`), the integer program started from it
(:mod:`.optimal`) or the hypercube moves (:mod:`.hypercube`, checked by :func:`~.hypercube.verify`)
— then, in the first two modes, publishes again the suppressed cells an intruder could compute
exactly anyway (:func:`~.audit.republish_derivable`), and says what it did: publishable figures apart
from private ones (anything derived from the original values of hidden cells: how many hidden
cells are primary, the values suppressed, the objective and bound of the integer program).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tabsafe.errors import MethodError, Reason
from tabsafe.model.table import Table
from tabsafe.protect.suppression.audit import fast, republish_derivable
from tabsafe.protect.suppression.hitas import hitas
from tabsafe.protect.suppression.hypercube import hypercube, verify
from tabsafe.protect.suppression.optimal import Budget, gap, optimal
from tabsafe.protect.suppression.problem import CellSystem, Mode, Problem, Settings

__all__ = ["REASONS", "SuppressionResult", "secondary_suppression", "suppress_problem"]

#: the values of the evaluation column ``reason``
REASONS = ("published", "primary", "secondary", "hidden")


@dataclass(frozen=True, eq=False)
class SuppressionResult:
    """A suppression pattern and what it took.

    Attributes:
        reason: per cell, ``"published"``, ``"primary"``, ``"secondary"`` or ``"hidden"`` (a cell
            of a joint table that no released table contains).
        figures: publishable figures (mode, cells, cells suppressed, rounds, suppressed cells
            published again because an intruder could compute them anyway, seconds…).
        private: figures that reveal original values (primary and secondary cells, values
            suppressed, the integer program's objective, bound and gap).
    """

    reason: np.ndarray
    figures: Mapping[str, Any] = field(default_factory=dict)
    private: Mapping[str, Any] = field(default_factory=dict)

    @property
    def suppressed(self) -> np.ndarray:
        return self.reason != "published"


def suppress_problem(problem: Problem, stuck: set[int] | None = None) -> SuppressionResult:
    """Secondary suppression of a built :class:`Problem` (module docstring). ``stuck`` (fast mode):
    primary cells no published cell can loosen are added to it and left to the caller, as cells
    published by force here (:mod:`.cube_release`); None: they are an error."""
    settings = problem.settings
    start = time.perf_counter()
    figures: dict[str, Any] = {"mode": settings.mode.value}
    private: dict[str, Any] = {}
    points: list[tuple[np.ndarray, np.ndarray]] = []  # tables the audits find: republish_derivable starts from them
    if not problem.primary.any():
        suppressed = problem.hidden.copy()
        figures["audit_rounds"] = 0
        if settings.mode is Mode.OPTIMAL:
            figures.update({"rounds": 0, "status": "optimal", "stopped_by": "none", "reproducible": True})
            private.update({"objective": 0.0, "lower_bound": 0.0, "gap": 0.0, "fast_secondary": 0})
        if settings.mode is Mode.HYPERCUBE:
            figures["audit"] = "moves"
            private["moves_verified"] = 0
    elif settings.mode is Mode.HYPERCUBE:
        suppressed = _hypercube(problem, figures, private)
    else:
        # the fast pattern always: it is the answer when the budget leaves no other
        suppressed, rounds = fast(problem, points=points, stuck=stuck)
        figures["audit_rounds"] = rounds
        if stuck:  # the caller's: published here, so that the audits below need not protect them
            left = np.zeros(problem.n_cells, dtype=bool)
            left[list(stuck)] = True
            problem = replace(problem, primary=problem.primary & ~left, forced=problem.forced | left,
                              required=np.where(left, 0.0, problem.required))
            suppressed = suppressed & ~left
        if settings.mode is Mode.OPTIMAL:
            suppressed = _optimal(problem, suppressed, Budget(settings.work_limit, settings.time_limit, started=start),
                                  figures, private)
    if settings.mode is not Mode.HYPERCUBE:
        # (not after the hypercube mode: its tables are those whose one large component no
        # program of republish_derivable's can take, and every cell it hides is some move's)
        suppressed, republished = republish_derivable(problem, suppressed, points)
        figures["republished"] = republished
        if republished and settings.mode is Mode.OPTIMAL:  # the pattern got cheaper: its cost and gap
            cost = problem.pattern_cost(suppressed)
            private["objective"] = round(cost, 6)
            private["gap"] = round(gap(cost, private["lower_bound"]), 6)
    reason = np.full(problem.n_cells, "published", dtype=object)
    reason[suppressed & problem.candidates] = "secondary"
    reason[problem.primary] = "primary"
    reason[problem.hidden] = "hidden"
    released = ~problem.hidden
    vals = np.nan_to_num(problem.values)
    secondary = reason == "secondary"
    figures.update({
        "cells": int(released.sum()),
        "suppressed": int((suppressed & released).sum()),
        "seconds": round(time.perf_counter() - start, 3),
    })
    private.update({
        "primary": int(problem.primary.sum()),
        "secondary": int(secondary.sum()),
        "value_suppressed": int(vals[suppressed & released].sum()),
        "secondary_value": int(vals[secondary].sum()),
    })
    return SuppressionResult(reason.astype(str), figures, private)


def _hypercube(problem: Problem, figures: dict[str, Any], private: dict[str, Any]) -> np.ndarray:
    """The hypercube pattern, its moves checked one by one (:func:`~.hypercube.verify`) as the
    audit: each valid move at least as wide as its primary cell's protection proves that cell's
    feasibility interval wide enough."""
    suppressed, moves = hypercube(problem)
    width = verify(problem, suppressed, moves)
    short = width < problem.required[moves.primary] - 1e-9
    if short.any():  # a defect of the search, never a property of the table: stop, publish nothing
        p = int(moves.primary[np.flatnonzero(short)[0]])
        raise MethodError(f"the hypercube mode's move for primary cell {problem.name(p)} does not prove its "
                          "protection", reason=Reason.INFEASIBLE)
    figures["audit"] = "moves"
    private["moves_verified"] = int(moves.primary.size)  # one per primary cell: their number is private
    return suppressed


def _optimal(problem: Problem, fast_pattern: np.ndarray, budget: Budget, figures: dict[str, Any],
             private: dict[str, Any]) -> np.ndarray:
    """The optimal mode from the fast pattern, then the decomposition along the hierarchy
    (HiTaS) with the rounds left; its figures go to ``figures`` and ``private``."""
    private["fast_secondary"] = int((fast_pattern & problem.candidates).sum())
    private["fast_objective"] = round(problem.pattern_cost(fast_pattern), 6)
    opt = optimal(problem, fast_pattern, budget=budget)
    suppressed = opt.suppressed
    private.update({"objective": opt.objective, "lower_bound": opt.lower_bound, "gap": opt.gap})
    # decomposition along the hierarchy (HiTaS) gets the rounds the integer rounds leave, not a
    # share before them: on the 26,796-cell benchmark table it never beat the fast pattern in
    # its third of 120 s, and the root cut loop makes better use of that work (gap at 120 s:
    # 24% with HiTaS first, 17% without)
    table = problem.system.table
    status = opt.status
    if (status != "optimal" and budget.left > 0 and not budget.timed_out() and table is not None
            and any(d.hierarchy.max_depth > 1 for d in table.dimensions)):
        decomposed = hitas(problem, table, budget=budget)
        if decomposed is not None:
            cost = problem.pattern_cost(decomposed)
            private["hitas_objective"] = round(cost, 6)
            if cost < opt.objective:
                suppressed = decomposed
                private["objective"] = round(cost, 6)
                private["gap"] = round(gap(cost, opt.lower_bound), 6)
    if status != "optimal":
        status = "time limit" if budget.stopped_by == "time" else "work limit" if budget.stopped_by else status
    figures.update({"rounds": budget.used, "status": status, "stopped_by": budget.stopped_by or "none",
                    "reproducible": budget.reproducible})
    return suppressed


def secondary_suppression(
    table: Table | CellSystem,
    primary: np.ndarray,
    settings: Settings | None = None,
    *,
    hidden: np.ndarray | None = None,
) -> SuppressionResult:
    """Hide more cells so that no primary cell can be recomputed (seed 000 §5.3).

    Args:
        table: the table (true counts; its grid is the set of cells) or a :class:`CellSystem`.
        primary: mask of primary cells, one per grid cell.
        settings: mode, cost, zeros, required protection, limits (default :class:`Settings`).
        hidden: cells no release contains (joint tables of linked releases).

    >>> import pandas as pd
    >>> from tabsafe import InnerCells, tabulate
    >>> inner = pd.DataFrame({"r": list("aabb"), "c": list("xyxy"), "n": [1, 5, 4, 6]})
    >>> t = tabulate(InnerCells.from_frame(inner, count="n"), ["r", "c"]).densify()
    >>> res = secondary_suppression(t, t.counts == 1)
    >>> int(res.suppressed.sum())  # the 1 and the three cells of its rectangle
    4
    """
    settings = Settings() if settings is None else settings
    system = table if isinstance(table, CellSystem) else CellSystem.of_table(table)
    return suppress_problem(Problem.build(system, primary, settings, hidden=hidden))
