"""Controlled rounding as a method of the registry: ``controlled-round``."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from tabsafe.capabilities import Capabilities, Reading
from tabsafe.errors import InputError, param
from tabsafe.method import Examples, Outcome, TableMethod
from tabsafe.params import Bool, Choice, Int, Optional, Real, parameter
from tabsafe.protect.controlled_rounding.solve import (
    DEFAULT_PART_CELLS,
    ControlledResult,
    SolutionKind,
    controlled_round,
    round_cells,
)
from tabsafe.protect.controlled_rounding.steps import existence_intervals
from tabsafe.protect.controlled_rounding.work import DEFAULT_WORK_LIMIT

#: bytes per grid cell of the rounding's integer programs in HiGHS (variables, rows, copies)
ROUNDING_PROGRAM_BYTES = 500

if TYPE_CHECKING:  # pragma: no cover
    from tabsafe.model.result import Protection, Report
    from tabsafe.model.table import Table
    from tabsafe.model.release_cells import ReleaseCells

__all__ = ["ControlledRounding"]


@dataclass(frozen=True, kw_only=True)
class ControlledRounding(TableMethod):
    """Controlled rounding: an additive table of multiples of the base, as close as possible (000 §5.5.1).

    Every cell, margins and subtotals of every hierarchy included, becomes a multiple of the base
    such that the rounded table is additive and ``Σ|z − a|`` is smallest, each cell within
    ``steps`` of its adjacent multiples (zero-restricted by default: multiples of the base stay
    as they are). The report gives the solution's status (optimal, feasible or rapid), the bound
    it was proven against and the work spent; the objective, bound and gap, which are computed
    from the original counts, are private figures (evaluation outputs only). When no rounding
    exists the error says so, with the suggestion to allow one step more; it is never silently
    replaced by another table.

    Deterministic limits (hardening issue #12): the search is limited by *work* — HiGHS
    branch-and-bound nodes summed over all integer programs, each solved on one thread with a
    fixed random seed under a node cap, and a fixed stall limit for the neighbourhood search —
    so the same table and parameters give the same rounding on every run and machine. A time
    limit is an optional extra cap; the report says which limit stopped the search
    (``stopped_by``) and whether the result is reproducible. The default budget of 5,000 nodes
    was measured on the benchmark table (area(200) × age × activity × sex with every margin,
    80,388 cells, base 3, zero-restricted): the sequential rounding takes 187 programs and about
    400 nodes, the neighbourhood search about 1,000 boxes (most settled by presolve) until 200 in
    a row bring nothing — 1,377 nodes in all, objective 0.75% above the LP bound
    (``bench/bench_rounding.py`` checks that a second run gives the identical table). The stall limit, not the budget, usually ends the search; the budget leaves room
    for tables several times larger and bounds the work on hard ones. Nodes are not seconds: a
    node of a program of a hundred thousand cells with steps can take minutes, so on tables of
    that size give ``time_limit`` too.

    A release (``tabsafe protect --release``: tables published together) is rounded in one
    program over the union of its tables' cells under every table's relations
    (:meth:`protect_release`): a cell the tables share has one value in all of them.

    Attributes:
        base: the rounding base b.
        steps: K, steps allowed beyond the adjacent multiples (0: zero-restricted).
        solution: what to return: first-feasible stops the search at its first additive
            rounding; rapid rounds the inner cells to their nearest multiple and adds up the
            margins (additive, but margins may lie several bases away) (000 §5.5.1.1).
        work_limit: the work the search may do, in branch-and-bound nodes summed over all
            integer programs (a program settled at its root counts one); deterministic.
        time_limit: seconds, an extra cap on the search (a result it stops depends on the
            machine's speed).
        part_cells: tables with more cells are rounded part by part along a flat variable.
        intervals: add the existence intervals lower and upper a user can derive from each
            rounded value, base and steps (000 §5.5.1.2).
    """

    name: ClassVar[str] = "controlled-round"
    #: deterministic (a work budget, not a clock); additive; a release in one program
    declared: ClassVar[Capabilities] = Capabilities(additive=True, joint=True, needs_grid=True)

    base: int = parameter(3, check=Int(min=1))
    steps: int = parameter(0, check=Int(min=0))
    solution: SolutionKind = parameter(SolutionKind.OPTIMAL, check=Choice(SolutionKind))
    work_limit: int = parameter(DEFAULT_WORK_LIMIT, check=Int(min=1))
    time_limit: float | None = parameter(None, check=Optional(Real(min=0, min_open=True)))
    part_cells: int = parameter(DEFAULT_PART_CELLS, check=Int(min=1))
    intervals: bool = parameter(False, check=Bool())

    def validate(self) -> None:
        if self.intervals and self.solution is SolutionKind.RAPID:
            raise InputError(f"{param('intervals')} assume every cell within {param('steps')} of its adjacent "
                             f"multiples; a {param('solution')} 'rapid' table's margins may lie further away")

    @classmethod
    def examples(cls) -> Examples:
        return Examples(
            typical=(cls(base=3), cls(base=5, steps=1, intervals=True), cls(base=3, solution="first-feasible"),
                     cls(base=5, solution="rapid")),
            identity=cls(base=1),
            by=("area", "sex"),
        )

    def memory_estimate(self, table: Table) -> int:
        """The grid, its relations and the integer program (a few variables and HiGHS' copies per
        cell), from the table's shape before any work (issue #28): about 1 KB a cell, measured
        on area × age × sex at 1.5M persons (17,052 cells: 17 MB at peak; ``bench/bench_memory.py``)."""
        from tabsafe.protect.suppression.footprint import CELL_BYTES, RELATION_BYTES, shape

        s = shape(table)
        return int(s.cells * (CELL_BYTES + ROUNDING_PROGRAM_BYTES) + s.relation_entries * RELATION_BYTES)

    def apply(self, table: Table, seed: int | None) -> Outcome:
        """The rounded grid: every cell, zero cells included (a zero may be rounded up)."""
        res = controlled_round(table, base=self.base, steps=self.steps, solution=self.solution,
                               work_limit=self.work_limit, time_limit=self.time_limit, part_cells=self.part_cells)
        dense = res.table
        assert dense is not None  # a table's rounding is aligned with its grid
        values = np.asarray(res.values, dtype=np.int64)
        figures, private = self._figures(res, dense.counts)
        return Outcome(cells=dense, release=self._release(values), figures=figures, private=private, notes=res.notes)

    def protect_release(self, cells: ReleaseCells, *, seed: int | None = None) -> tuple[tuple[Protection, ...], Report]:
        """Round the tables of a release together (:mod:`tabsafe.release`; issue #13): the union
        of their cells (a cell shared by several tables is one cell) under every table's
        relations, in one program (:func:`~.solve.round_cells`). A shared cell gets one rounded
        value in every table, and every table is additive; each cell is rounded as in one
        table (within ``steps`` of its adjacent multiples; a multiple of the base unchanged when
        zero-restricted). Tables rounded one by one would give a shared cell two values in two
        tables (an intruder learns from both), or none consistent at all."""
        from tabsafe.method import _meta
        from tabsafe.model.result import Protection, Release, Report
        from tabsafe.model.table import Table

        self.validate()
        z = cells.combine("count")
        res = round_cells(z, cells.relations, base=self.base, steps=self.steps, solution=self.solution,
                          work_limit=self.work_limit, time_limit=self.time_limit)
        values = np.asarray(res.values, dtype=np.int64)
        figures, private = self._figures(res, z)
        figures = {**figures, "tables": len(cells.tables), "shared_cells": int((cells.shared() > 1).sum())}
        report = Report(method=self.name, params=self.params(), seed=None, figures=figures, private=private,
                        notes=res.notes)
        out = []
        for dense, rows in zip(cells.tables, cells.cells):
            meta = _meta(dense)
            release = Table(dense.dimensions, dense.ids, self._release(values[rows]), meta)
            evaluation = Table(dense.dimensions, dense.ids, {"count": dense.counts, "original": dense.counts}, meta)
            out.append(Protection(release=Release(release), evaluation=evaluation, report=report))
        return tuple(out), report

    def capabilities(self) -> Capabilities:
        """RAPID rounding is defined on one table's inner cells: not for a release."""
        return replace(super().capabilities(), joint=self.solution is not SolutionKind.RAPID)

    def reading(self) -> Reading:
        """A published value ``r`` lies in ``[r − B + 1, r + B − 1]``, ``B = (steps + 1)·base``
        (:attr:`published_base`)."""
        return Reading(base=self.published_base)

    @property
    def published_base(self) -> int:
        """What a published value ``r`` says, as the base of the release audit: the true value is
        in ``[r − B + 1, r + B − 1]`` (never below 0) with ``B = (steps + 1)·base`` — the
        existence interval of 000 §5.5.1.2, which the manifest of a rounded release records."""
        return (self.steps + 1) * self.base

    def _release(self, values: np.ndarray) -> dict[str, Any]:
        release: dict[str, Any] = {"count": values}
        if self.intervals:
            lower, upper = existence_intervals(values, base=self.base, steps=self.steps)
            release.update(lower=lower, upper=upper)
        return release

    @staticmethod
    def _figures(res: ControlledResult, original: np.ndarray) -> tuple[dict[str, Any], dict[str, Any]]:
        """The report's figures (publishable) and private figures (computed from the originals)."""
        figures = {
            "cells": int(res.values.size),
            "status": res.status,
            "bound": res.bound_kind,
            "programs": res.programs,
            "work": res.work,
            "stopped_by": res.stopped_by or "none",
            "reproducible": res.reproducible,
            "seconds": round(res.seconds, 3),
            "first_solution_seconds": round(res.first_seconds, 3),
        }
        private = {
            "objective": res.objective,
            "lower_bound": res.lower_bound,
            "gap": round(res.gap, 6),
            "cells_changed": int(np.count_nonzero(np.asarray(res.values) != np.asarray(original))),
        }
        return figures, private
