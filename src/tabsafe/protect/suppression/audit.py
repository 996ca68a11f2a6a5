"""The fast mode: elimination, then the interval audit and its repair, until the audit passes.

The pattern the elimination (:mod:`.elimination`) proposes is audited by linear programming
(:func:`tabsafe.risk.intervals.feasibility_intervals`, seed 000 §5.3: what an intruder can
compute about each primary cell from the published ones, the relations and the known least
values). A primary cell whose interval is narrower than its protection gets one more suppressed
cell among the published cells that hold its bound (cells with room to move first), and the
pattern is audited again, until the audit passes (:func:`mend`). A primary cell still too narrow
in the next round gets two cells, then four: in linked tables a bound can be held by several
published cells at once (an interval of half a unit, where two tables' relations meet), and one
cell a round would cost a whole round per holder. The pattern only grows, so a round audits
only the cells that were too narrow (hiding more only widens every interval).

The elimination used to run again in every round, with the added cells hidden from the start;
it changed a handful of cells (8,413 secondary cells, then 8,407 after six rounds on the 80,388-
cell area × age × activity × sex table) for 20–30 s a round, and the rounds now take 6 s.

After a pattern passes, :func:`republish_derivable` publishes again every suppressed cell that
is not primary and that the intruder can compute exactly anyway: hiding it costs information and
protects nothing, and publishing a value the feasible set already fixes leaves that set — and so
every interval — as it was (the pattern is audited again all the same).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tabsafe.errors import MethodError, Reason
from tabsafe.protect.suppression.elimination import TimeUp, gauss
from tabsafe.protect.suppression.problem import Problem
from tabsafe.progress import report
from tabsafe.risk.intervals import Intervals, feasibility_intervals

__all__ = ["Audit", "TimeUp", "audit", "fast", "mend", "republish_derivable"]

_LP_TOL = 1e-7

#: audit-and-repair rounds before the fast mode gives up
MAX_ROUNDS = 500


@dataclass(frozen=True, eq=False)
class Audit:
    """The interval audit of a pattern.

    Attributes:
        intervals: the feasibility intervals (of the primary cells; inner bounds where they were
            certified wide enough) and, for narrow ones, the published cells holding the bound.
        narrow: primary cells whose interval is narrower than required.
    """

    intervals: Intervals
    narrow: np.ndarray

    @property
    def passed(self) -> bool:
        return not self.narrow.any()


def audit(problem: Problem, suppressed: np.ndarray, cells: np.ndarray | None = None,
          seeds: Sequence[tuple[np.ndarray, np.ndarray]] = (),
          points: list[tuple[np.ndarray, np.ndarray]] | None = None) -> Audit:
    """The interval LPs of the primary cells under the pattern ``suppressed`` (only of ``cells``
    when given: the others are known to be wide enough, see :func:`mend`), starting from the
    tables ``seeds``; the tables its programs find go to ``points`` (both: see
    :func:`~tabsafe.risk.intervals.feasibility_intervals`)."""
    targets = problem.primary if cells is None else problem.primary & cells
    res = feasibility_intervals(
        problem.A, problem.values, suppressed, lower=problem.lower, targets=targets,
        required=problem.required, certify=True, seeds=seeds, points=points,
    )
    width = res.upper - res.lower
    narrow = targets & (width < problem.required - _LP_TOL)
    return Audit(res, narrow)


#: repair rounds a primary cell may stay narrow before a caller that takes such cells gets it
STUCK_STRIKES = 4


def _repair_cells(problem: Problem, suppressed: np.ndarray, narrow: np.ndarray, result: Audit, strikes: np.ndarray,
                  stuck: set[int] | None = None) -> np.ndarray:
    """For each too-narrow primary cell, the cheapest published cell that may loosen it; the
    ``2 ** (k - 1)`` cheapest for a cell narrow in ``k = strikes[p]`` rounds in a row. A cell no
    published cell may loosen goes to ``stuck`` when given (else: an error)."""
    A, AT = problem.A, problem.AT
    allowed = problem.candidates & ~suppressed
    slack = np.nan_to_num(problem.values, nan=0.0) - problem.lower > 0
    add = np.zeros(problem.n_cells, dtype=bool)
    holders = result.intervals.holders
    for p in np.flatnonzero(narrow).tolist():
        pool = np.asarray(holders.get(p, np.zeros(0, dtype=np.int64)), dtype=np.int64)
        pool = pool[allowed[pool]] if pool.size else pool
        # no dual information, or only cells that may not be hidden: the published neighbours of
        # p, else of the suppressed cells it is tied to (a suppressed aggregate whose children
        # are published zeros is protected through its one suppressed child's other relations)
        reached = np.zeros(problem.n_cells, dtype=bool)
        reached[p] = True
        frontier = np.array([p])
        for _ in range(4):
            if pool.size or frontier.size == 0:
                break
            rels = np.unique(AT[frontier].indices)
            near = np.unique(A[rels].indices) if rels.size else np.zeros(0, dtype=np.int64)
            pool = near[allowed[near]]
            frontier = near[suppressed[near] & ~reached[near]]
            reached[frontier] = True
        if pool.size == 0 and stuck is not None:
            stuck.add(p)
            continue
        if pool.size == 0:
            raise MethodError(
                f"primary cell {problem.name(p)} cannot be protected: every cell that could hide it is "
                "published by force (zeros never suppressed?)", reason=Reason.INFEASIBLE,
            )
        key = np.lexsort((pool, problem.cost[pool], ~slack[pool]))
        add[pool[key[:2 ** min(int(strikes[p]) - 1, 16)]]] = True
    return add


def fast(problem: Problem, *, hidden_first: np.ndarray | None = None,
         deadline: float | None = None,
         points: list[tuple[np.ndarray, np.ndarray]] | None = None,
         stuck: set[int] | None = None) -> tuple[np.ndarray, int]:
    """The Gaussian-elimination heuristic, then audit-and-repair rounds (module docstring).

    ``hidden_first`` are candidates hidden from the start (the optimal mode completes the
    patterns of its integer programs this way). With a ``deadline`` (a ``time.perf_counter()``
    value) the elimination and the repair stop once past it: :class:`TimeUp` is raised instead
    (the optimal mode's helpers; the fast mode itself always finishes). The tables the audits'
    programs find go to ``points`` when given (:func:`republish_derivable` starts from them).
    ``stuck``: primary cells no published cell can loosen are added to it and left narrow
    (:mod:`.cube_release` protects them with cells of another table); None: they are an error.

    Returns:
        the suppressed cells (primary, hidden and secondary) and the number of audits.
    """
    extra = np.zeros(problem.n_cells, dtype=bool) if hidden_first is None else hidden_first & problem.candidates
    if deadline is not None and time.perf_counter() > deadline:
        raise TimeUp
    secondary = gauss(problem, extra, deadline)
    suppressed = problem.primary | problem.hidden | extra | secondary
    result = audit(problem, suppressed, points=points)
    report("suppression", phase="audit and repair", round=1, narrow=int(result.narrow.sum()),
           suppressed=int(suppressed.sum()))
    if result.passed:
        return suppressed, 1
    mended, rounds = mend(problem, suppressed, audited=result, deadline=deadline, points=points, stuck=stuck)
    return mended, 1 + rounds


def mend(problem: Problem, pattern: np.ndarray, *, audited: Audit | None = None,
         deadline: float | None = None,
         points: list[tuple[np.ndarray, np.ndarray]] | None = None,
         stuck: set[int] | None = None) -> tuple[np.ndarray, int]:
    """``pattern`` made protected by the audit's repairs alone (module docstring): every round
    hides, for each primary cell still too narrow, the cheapest published cells holding its
    bound, more for a cell narrow again. The pattern only grows, so after the first audit only
    the cells narrow in the last round are audited again.

    The fast mode mends the elimination's pattern, which few primary cells fail. ``audited`` is
    the audit of ``pattern`` when the caller has it. A round that would end after ``deadline``
    (it takes about as long as the last) is not started: :class:`TimeUp` is raised instead.

    Returns:
        the protected pattern and the number of repair rounds.
    """
    suppressed = pattern | problem.primary | problem.hidden
    strikes = np.zeros(problem.n_cells, dtype=np.int64)  # rounds in a row each primary cell was too narrow
    took = 0.0
    for rounds in range(MAX_ROUNDS):
        began = time.perf_counter()
        if deadline is not None and began + took > deadline:
            raise TimeUp
        if audited is not None:
            result, audited = audited, None
        else:
            result = audit(problem, suppressed, strikes > 0 if strikes.any() else None, points=points)
            took = time.perf_counter() - began
            report("suppression", phase="audit and repair", round=rounds + 1, narrow=int(result.narrow.sum()),
                   suppressed=int(suppressed.sum()))
        narrow = result.narrow.copy()
        if stuck:
            narrow[list(stuck)] = False
        if not narrow.any():
            return suppressed, rounds
        strikes = np.where(narrow, strikes + 1, 0)
        if stuck is not None and (strikes > STUCK_STRIKES).any():
            # narrow after 1 + 2 + 4 + 8 cells hidden for it: left to the caller, not hidden around
            late = strikes > STUCK_STRIKES
            stuck.update(np.flatnonzero(late).tolist())
            narrow &= ~late
        suppressed = suppressed | _repair_cells(problem, suppressed, narrow, result, strikes, stuck)
    raise MethodError(f"secondary suppression did not pass its interval audit within {MAX_ROUNDS} rounds",
                      reason=Reason.WORK_LIMIT)


def republish_derivable(problem: Problem, suppressed: np.ndarray,
                        points: list[tuple[np.ndarray, np.ndarray]] | None = None) -> tuple[np.ndarray, int]:
    """Publish again the suppressed non-primary cells an intruder can compute exactly.

    Source: issue #13 ("secondary suppression publishes again every suppressed cell that is
    exactly derivable and not primary"). A cell whose feasibility interval is one value is
    fixed in every table the intruder cannot rule out, so publishing it changes nothing an
    intruder can learn; all of them are published at once.

    ``points``: tables the intruder cannot rule out found by earlier audits (the fast mode's);
    they settle cells before any program, once checked against this pattern (those that move a
    cell published here are left out), and the tables found here are added.

    Returns:
        the new pattern and how many cells were published again.
    """
    secondary = suppressed & problem.candidates
    if not secondary.any():
        return suppressed, 0
    # a width of half a unit certified by any two tables the intruder cannot tell apart settles a
    # cell as not derivable: only the others get their own programs
    points = [] if points is None else points
    res = feasibility_intervals(problem.A, problem.values, suppressed, lower=problem.lower, targets=secondary,
                                required=np.full(problem.n_cells, 0.5), certify=True, points=points,
                                seeds=list(points))
    width = res.upper - res.lower
    derivable = secondary & (width <= _LP_TOL)
    if not derivable.any():
        return suppressed, 0
    out = suppressed & ~derivable
    # the audit again, from the tables these programs found: they give every derivable cell its
    # true value, so they remain tables the intruder cannot rule out (feasibility_intervals
    # checks), and most primary cells are settled by them without a program of their own
    again = audit(problem, out, seeds=points)
    if not again.passed:  # cannot happen (the feasible set is unchanged); never publish then
        return suppressed, 0
    return out, int(derivable.sum())
