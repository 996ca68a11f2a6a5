"""Controlled rounding of a table: the strategies put together (seed 000 §5.5, §5.5.1).

Every cell ``z`` of the table, margins and hierarchical subtotals included, is replaced by a
multiple ``a`` of the base ``b`` so that the rounded table is additive and ``Σ|z − a|`` is as
small as possible, within ``K`` steps of the adjacent multiples (:mod:`.steps`). The optimum is
NP-hard to find for tables of three or more dimensions; tau-ARGUS offers the optimal solution,
the first feasible one and RAPID (inner cells to the nearest multiple, margins by addition:
additive, but margins may be several bases away). Which strategy runs:

* a program with at most ``direct_vars`` variables goes to the solver whole (:mod:`.program`);
* a table above ``part_cells`` cells is rounded part by part (:mod:`.partition`), after a
  presolve of the whole program, which proves at once when no rounding exists;
* otherwise: the same presolve, the LP relaxation (:mod:`.relaxation`: a lower bound, a proof
  when no rounding exists, and a guide), the sequential rounding it guides
  (:mod:`.sequential`), or the solver on the whole program when the table has no long dimension
  or the sequential rounding fails; then the neighbourhood search improves the rounding
  (:mod:`.improve`).

All of it draws on one work budget (:mod:`.work`): the same table and parameters give the same
rounding on any machine unless an optional time limit cuts the search short, which the result
says. The lower bound is the solver's bound, the LP relaxation (rounded up: the objective is an
integer) or at least ``Σ min(r, b − r)`` (every cell at its nearest multiple); the gap is
``(objective − bound) / objective``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum

import numpy as np
import scipy.sparse as sp

from tabsafe.errors import InputError, MethodError, Reason, Suggestion, param
from tabsafe.model.table import Table
from tabsafe.protect.controlled_rounding.grid import Grid
from tabsafe.protect.controlled_rounding.improve import improve
from tabsafe.protect.controlled_rounding.partition import partitioned, split_axis
from tabsafe.protect.controlled_rounding.program import Part, Problem, run_part, solve_part
from tabsafe.protect.controlled_rounding.relaxation import relax
from tabsafe.protect.controlled_rounding.sequential import Sequential, sequential_axis
from tabsafe.protect.controlled_rounding.steps import check_base_steps, nearest, objective
from tabsafe.protect.controlled_rounding.work import DEFAULT_WORK_LIMIT, Limits, Tuning, Work

__all__ = ["DEFAULT_PART_CELLS", "ControlledResult", "SolutionKind", "controlled_round", "rapid_round", "round_cells"]

#: the measured defaults of the strategies
DEFAULT_TUNING = Tuning()

RAPID_NOTE = ("RAPID: inner cells at their nearest multiple, aggregates by addition; aggregates may be several "
              "bases from their true values")

#: tau-ARGUS rounds tables of up to about 150K cells in one model (000 §5.5.1 "Very large tables").
DEFAULT_PART_CELLS = 150_000


class SolutionKind(str, Enum):
    """Which controlled-rounding solution to return (000 §5.5.1.1)."""

    OPTIMAL = "optimal"
    FIRST_FEASIBLE = "first-feasible"
    RAPID = "rapid"


@dataclass(frozen=True, kw_only=True)
class ControlledResult:
    """A controlled rounding and what is known about its quality.

    Attributes:
        table: the dense table the values are aligned with (row ``i`` is grid cell ``i``), or
            None for a cell vector (:func:`round_cells`: the values are aligned with its cells).
        values: the rounded value of every cell.
        objective: ``Σ|z − a|`` over all cells.
        lower_bound: a proven lower bound on the smallest possible objective.
        bound_kind: ``"lp"`` (LP relaxation), ``"mip"`` (the solver's dual bound) or
            ``"nearest"`` (every cell at its nearest multiple).
        gap: ``(objective − lower_bound) / objective`` (0 when the objective is 0).
        status: ``optimal`` (proven), ``feasible`` (additive, optimality not proven) or
            ``rapid`` (additive but not within the steps: margins by addition).
        seconds: wall time.
        first_seconds: wall time until the first additive rounding was in hand (the rest of the
            time went into improving it).
        programs: integer programs solved (1: the table in one program).
        work: branch-and-bound nodes spent (what ``work_limit`` limits).
        stopped_by: ``"work"`` or ``"time"`` when that limit stopped the search before it had
            finished, else None.
        notes: decisions worth telling the user.
    """

    table: Table | None
    values: np.ndarray
    objective: int
    lower_bound: float
    bound_kind: str
    gap: float
    status: str
    seconds: float
    first_seconds: float
    programs: int = 1
    work: int = 0
    stopped_by: str | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def reproducible(self) -> bool:
        """Whether the same table and parameters give this rounding on any machine (no time
        limit cut the search short)."""
        return self.stopped_by != "time"


def rapid_round(table: Table, *, base: int) -> np.ndarray:
    """RAPID (000 §5.5.1.1): inner cells to the nearest multiple, every aggregate by addition.

    Additive by construction, but an aggregate can end up several bases from its true value.
    The values are those of the dense grid (``table.densify()``).
    """
    check_base_steps(base, 0)
    grid = Grid.of(table)
    inner = np.where(grid.table.leaf_mask, nearest(grid.counts, base), 0)
    return grid.aggregate(inner)


def controlled_round(
    table: Table,
    *,
    base: int,
    steps: int = 0,
    solution: SolutionKind | str = SolutionKind.OPTIMAL,
    work_limit: int = DEFAULT_WORK_LIMIT,
    time_limit: float | None = None,
    part_cells: int = DEFAULT_PART_CELLS,
    tuning: Tuning = DEFAULT_TUNING,
) -> ControlledResult:
    """Controlled rounding of every cell of ``table`` (000 §5.5, §5.5.1; METHODS.md §4).

    Args:
        base: the rounding base ``b``.
        steps: ``K``; 0 is zero-restricted rounding.
        solution: ``optimal``, ``first-feasible`` or ``rapid`` (000 §5.5.1.1).
        work_limit: branch-and-bound nodes over all integer programs (deterministic).
        time_limit: seconds, an optional extra cap (the result is then machine-dependent if it
            stops the search).
        part_cells: larger tables are partitioned (000 §5.5.1 "Very large tables").
        tuning: how the strategies spend the work (:class:`~.work.Tuning`).

    Raises:
        MethodError: no rounding of the requested kind exists (reason ``infeasible``, with the
            suggestion to allow one step more) or none was found within the limits (reason
            ``work-limit`` or ``time-limit``) or by the partitioned search (``not-found``).

    >>> import pandas as pd, tabsafe as ts
    >>> cells = pd.DataFrame({"area": ["A", "A", "B", "B"], "sex": ["1", "2", "1", "2"], "n": [1, 0, 3, 3]})
    >>> t = ts.tabulate(ts.InnerCells.from_frame(cells, count="n"), ["area", "sex"])
    >>> res = controlled_round(t, base=5)
    >>> bool(res.table.with_values(count=res.values).is_additive()), bool((res.values % 5 == 0).all())
    (True, True)
    """
    check_base_steps(base, steps)
    kind = _kind(solution)
    _check_limits(work_limit, time_limit, part_cells)
    counts = table.counts
    if counts.size and counts.min() < 0:
        raise InputError(f"controlled rounding needs counts >= 0; got {counts.min()}")
    work = Work(Limits(work=int(work_limit), time=None if time_limit is None else float(time_limit)))
    problem = Problem(Grid.of(table), int(base), int(steps))
    if kind is SolutionKind.RAPID:
        return _rapid(problem, work)
    if problem.grid.size <= part_cells and problem.n_vars() <= tuning.direct_vars:
        return _direct(problem, work, kind)
    if problem.grid.size > part_cells and split_axis(problem.grid, {}) is not None:
        return _partitioned(problem, work, tuning, part_cells)
    return _large(problem, work, kind, tuning)


def round_cells(
    counts: np.ndarray,
    relations: sp.spmatrix,
    *,
    base: int,
    steps: int = 0,
    solution: SolutionKind | str = SolutionKind.OPTIMAL,
    work_limit: int = DEFAULT_WORK_LIMIT,
    time_limit: float | None = None,
    tuning: Tuning | None = None,
) -> ControlledResult:
    """Controlled rounding of a cell vector under a sparse relation matrix: ``A·a = 0`` for the
    rounded values ``a`` (every relation kept), each cell rounded as in :func:`controlled_round`
    (000 §5.5.1). The cells of a release (:class:`~tabsafe.release.ReleaseCells`: the union of
    its tables' cells, a shared cell once, and every table's relations) rounded in one program:
    a shared cell gets one value, and every table is additive.

    Small programs (``joint_direct_vars``) go to the solver whole; larger ones get the solver's
    first rounding of the whole program (its root relaxation is the lower bound) and then, for
    ``optimal``, the neighbourhood search over related cells (:func:`~.improve.related_cells`). There is no
    RAPID rounding of a cell vector (which cells are inner is a property of one table), and no
    partitioning. Limits, errors and determinism as in :func:`controlled_round`; the result's
    ``table`` is None.
    """
    check_base_steps(base, steps)
    kind = _kind(solution)
    _check_limits(work_limit, time_limit, DEFAULT_PART_CELLS)
    z = np.asarray(counts)
    if z.size and (np.isnan(z.astype(np.float64)).any() or z.min() < 0):
        raise InputError("controlled rounding needs counts >= 0 for every cell")
    if kind is SolutionKind.RAPID:
        raise MethodError("RAPID rounding is defined on one table (its inner cells), not on the cells of several",
                          reason=Reason.NOT_APPLICABLE,
                          suggestions=(Suggestion("the first additive rounding found", {"solution": "first-feasible"}),))
    work = Work(Limits(work=int(work_limit), time=None if time_limit is None else float(time_limit)))
    problem = Problem.of_cells(z.astype(np.int64), relations, int(base), int(steps))
    tuning = DEFAULT_TUNING if tuning is None else tuning
    if problem.n_vars() <= tuning.joint_direct_vars:
        return _direct(problem, work, kind)
    return _joint(problem, work, kind, tuning)


def _check_limits(work_limit: object, time_limit: object, part_cells: object) -> None:
    if isinstance(work_limit, bool) or not isinstance(work_limit, (int, np.integer)) or work_limit < 1:
        raise InputError(f"parameter {param('work_limit')} must be an integer >= 1; got {work_limit!r}")
    if time_limit is not None and (isinstance(time_limit, bool) or not isinstance(time_limit, (int, float))
                                   or not math.isfinite(time_limit) or time_limit <= 0):
        raise InputError(f"parameter {param('time_limit')} must be a positive number of seconds; got {time_limit!r}")
    if isinstance(part_cells, bool) or not isinstance(part_cells, (int, np.integer)) or part_cells < 1:
        raise InputError(f"parameter {param('part_cells')} must be an integer >= 1; got {part_cells!r}")


def _kind(solution: SolutionKind | str) -> SolutionKind:
    try:
        return SolutionKind(solution)
    except ValueError:
        allowed = ", ".join(k.value for k in SolutionKind)
        raise InputError(f"parameter {param('solution')} must be one of {allowed}; got {solution!r}") from None


def _result(problem: Problem, work: Work, values: np.ndarray, *, lower: float, bound_kind: str, status: str,
            first_seconds: float | None = None, notes: tuple[str, ...] = ()) -> ControlledResult:
    obj = objective(problem.z, values)
    return ControlledResult(
        table=problem.grid.table if problem.grid is not None else None, values=values, objective=obj,
        lower_bound=lower, bound_kind=bound_kind, gap=_gap(obj, lower), status=status, seconds=work.seconds,
        first_seconds=work.seconds if first_seconds is None else first_seconds, programs=work.programs,
        work=work.nodes, stopped_by=work.stopped_by, notes=(*notes, _limit_note(work)),
    )


def _rapid(problem: Problem, work: Work) -> ControlledResult:
    values = problem.grid.aggregate(np.where(problem.grid.table.leaf_mask, nearest(problem.z, problem.base), 0))
    return _result(problem, work, values, lower=problem.nearest_bound, bound_kind="nearest", status="rapid",
                   notes=(RAPID_NOTE,))


def _direct(problem: Problem, work: Work, kind: SolutionKind) -> ControlledResult:
    """The whole program to the solver, with the whole budget."""
    res = run_part(problem, Part.whole(problem), work, first_feasible=kind is SolutionKind.FIRST_FEASIBLE)
    if res.values is None:
        _fail(problem, res.status, work)
    lower, bound_kind = _better_bound(problem.nearest_bound, "nearest", res.bound, "mip")
    return _result(problem, work, res.values, lower=lower, bound_kind=bound_kind,
                   status="optimal" if res.status == "optimal" else "feasible")


def _large(problem: Problem, work: Work, kind: SolutionKind, tuning: Tuning) -> ControlledResult:
    """LP relaxation, sequential rounding (or the solver on the whole program), improvement."""
    notes: list[str] = []
    # presolve of the whole program: it proves at once when no rounding exists in many cases
    # where the LP relaxation is still feasible (sparse tables)
    probe = solve_part(problem, Part.whole(problem), work.probe(tuning.probe_seconds))
    if probe.status == "infeasible":
        _fail(problem, "infeasible", work)
    relaxation = relax(problem, work)
    if relaxation.status == "infeasible":
        _fail(problem, "infeasible", work)
    lower, bound_kind = _better_bound(problem.nearest_bound, "nearest", relaxation.value, "lp")
    values: np.ndarray | None = None
    status = "feasible"
    axis = sequential_axis(problem.grid, tuning)
    name = problem.grid.table.dimensions[axis].variable if axis is not None else ""
    if relaxation.steps is not None and axis is not None:
        seq = Sequential(problem, axis, relaxation.steps, work, tuning)
        values = seq.run()
        if values is not None:
            notes.append(f"rounded slice by slice along {name!r} guided by the LP relaxation ({seq.programs:,} "
                         "integer programs" + (f"; the last group was enlarged {seq.regrouped} time(s)"
                                               if seq.regrouped else "") + ")")
        else:
            notes.append(f"the sequential rounding along {name!r} found no rounding; the whole program went to "
                         "the solver")
    if values is None:
        first = kind is SolutionKind.FIRST_FEASIBLE
        # optimal: half of what is left, so the neighbourhood search has the other half
        res = run_part(problem, Part.whole(problem), work, cap=None if first else max(1, work.nodes_left // 2),
                       first_feasible=first)
        if res.values is None and res.status != "infeasible" and not first:
            res = run_part(problem, Part.whole(problem), work, first_feasible=True)
        if res.values is None:
            _fail(problem, res.status, work)
        values = res.values
        status = "optimal" if res.status == "optimal" else "feasible"
        lower, bound_kind = _better_bound(lower, bound_kind, res.bound, "mip")
    return _polish(problem, work, kind, tuning, values, lower=lower, bound_kind=bound_kind, status=status,
                   notes=notes)


def _joint(problem: Problem, work: Work, kind: SolutionKind, tuning: Tuning) -> ControlledResult:
    """A cell vector (no grid: no slices, no parts) too large for one direct program: the
    solver's first rounding of the whole program — measured on two census tables sharing their
    area × age margins (39,382 cells, 24,324 variables): 12 s and 0.2% above the bound, where
    solving the program to optimality took 170 s — then the neighbourhood search."""
    res = run_part(problem, Part.whole(problem), work, first_feasible=True)
    if res.values is None:
        _fail(problem, res.status, work)
    lower, bound_kind = _better_bound(problem.nearest_bound, "nearest", res.bound, "mip")
    status = "optimal" if res.status == "optimal" else "feasible"
    return _polish(problem, work, kind, tuning, res.values, lower=lower, bound_kind=bound_kind, status=status,
                   notes=[])


def _polish(problem: Problem, work: Work, kind: SolutionKind, tuning: Tuning, values: np.ndarray, *,
            lower: float, bound_kind: str, status: str, notes: list[str]) -> ControlledResult:
    """The neighbourhood search from an additive rounding (``optimal`` only), and the result."""
    first_seconds = work.seconds
    if status != "optimal" and kind is SolutionKind.OPTIMAL and objective(problem.z, values) > lower:
        imp = improve(problem, values, work, tuning, target=lower)
        values = imp.values
        if imp.proven:
            status = "optimal"
        # the objective before and after is a distance from the original counts: it goes to the
        # private figures (objective), never into a public note
        notes.append(f"improved the first rounding by searching {imp.boxes:,} neighbourhoods of about "
                     f"{tuning.neighbourhood_cells:,} cells (each solved exactly with the rest of the table fixed)"
                     + (f"; stopped after {tuning.stall} in a row without improvement" if imp.stalled else ""))
    if objective(problem.z, values) <= lower:
        status = "optimal"
    return _result(problem, work, values, lower=lower, bound_kind=bound_kind, status=status,
                   first_seconds=first_seconds, notes=tuple(notes))


def _partitioned(problem: Problem, work: Work, tuning: Tuning, part_cells: int) -> ControlledResult:
    """A table above ``part_cells``: a presolve of the whole program (it proves at once that no
    rounding exists when that is so), then the table part by part."""
    probe = solve_part(problem, Part.whole(problem), work.probe(tuning.probe_seconds))
    if probe.status == "infeasible":
        _fail(problem, "infeasible", work)
    out = partitioned(problem, work, tuning, part_cells)
    if out.values is None:
        if work.stopped_by is not None:
            _fail(problem, "limit", work)
        raise MethodError(
            f"no {problem.kind} controlled rounding to base {problem.base} was found: the table was partitioned "
            f"({out.parts:,} parts of at most {part_cells:,} cells) and a part had no rounding that fits the parts "
            "rounded before it",
            reason=Reason.NOT_FOUND,
            suggestions=_suggestions(problem, work, more_cells=part_cells),
        )
    notes = (f"partitioned: {out.parts:,} parts of at most {part_cells:,} cells, each rounded with the cells already "
             "rounded fixed" + (f"; {out.reopened} time(s) the remaining slices were re-opened and solved together"
                                if out.reopened else ""),)
    return _result(problem, work, out.values, lower=problem.nearest_bound, bound_kind="nearest",
                   status="optimal" if objective(problem.z, out.values) <= problem.nearest_bound else "feasible",
                   notes=notes)


def _better_bound(lower: float, kind: str, bound: float | None, bound_kind: str) -> tuple[float, str]:
    """The larger of two lower bounds (a solver's bound rounded up: the objective is an integer)."""
    if bound is not None and math.isfinite(bound) and math.ceil(bound - 1e-6) > lower:
        return float(math.ceil(bound - 1e-6)), bound_kind
    return lower, kind


def _gap(obj: float, bound: float) -> float:
    return 0.0 if obj <= 0 else max(0.0, (obj - bound) / obj)


def _limit_note(work: Work) -> str:
    """Which limit stopped the search, and whether the result is reproducible."""
    if work.stopped_by == "time":
        return (f"the time limit ({work.limits.time:g} s) stopped the search: the result depends on the machine's "
                "speed and another run may differ")
    spent = f"{work.nodes:,} of {work.limits.work:,} branch-and-bound nodes"
    if work.stopped_by == "work":
        return f"the work limit stopped the search ({spent}): the same parameters give the same result"
    return f"the search finished within its limits ({spent}): the same parameters give the same result"


def _suggestions(problem: Problem, work: Work, *, more_cells: int | None = None) -> tuple[Suggestion, ...]:
    out = [Suggestion("allow rounding to a non-adjacent multiple", {"steps": problem.steps + 1})]
    if work.stopped_by == "time":
        out.append(Suggestion("allow more time", {"time_limit": 2 * float(work.limits.time or 0)}))
    elif work.stopped_by == "work" or more_cells is None:
        out.append(Suggestion("allow more work", {"work_limit": 4 * work.limits.work}))
    if more_cells is not None:
        out.append(Suggestion("round larger parts", {"part_cells": 4 * more_cells}))
    out.append(Suggestion("an additive table whose aggregates may lie further away", {"solution": "rapid"}))
    return tuple(out)


def _fail(problem: Problem, status: str, work: Work) -> None:
    """The MethodError for a rounding that does not exist or was not found."""
    base, kind = problem.base, problem.kind
    if status == "infeasible":
        raise MethodError(
            f"no {kind} controlled rounding to base {base} exists for this "
            + ("table" if problem.grid is not None else "release (its tables' cells and relations together)"),
            reason=Reason.INFEASIBLE,
            suggestions=(Suggestion("allow rounding to a non-adjacent multiple", {"steps": problem.steps + 1}),),
        )
    if work.stopped_by == "time":
        raise MethodError(
            f"no {kind} controlled rounding to base {base} was found within the time limit of {work.limits.time:g} s",
            reason=Reason.TIME_LIMIT, suggestions=_suggestions(problem, work),
        )
    work.stopped_by = "work"
    raise MethodError(
        f"no {kind} controlled rounding to base {base} was found within the work limit of {work.limits.work:,} "
        "branch-and-bound nodes",
        reason=Reason.WORK_LIMIT, suggestions=_suggestions(problem, work),
    )
