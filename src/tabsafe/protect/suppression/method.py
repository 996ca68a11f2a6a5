"""Cell suppression as a registered method: ``suppress``.

Primary cells by the risk rules (:mod:`.primary`), secondary cells by the fast heuristic or the
optimal program (:mod:`.secondary`). The release holds ``count`` — missing where suppressed —
and ``status`` (``published`` or ``suppressed``); which suppressed cells are primary is kept out
of it (``reason``: ``published``/``primary``/``secondary`` is an evaluation column): a primary
cell is known to be small, which would narrow its interval. For the same reason the report's
publishable figures say how many cells are suppressed, not how many are primary, and nothing
about their values (those are private figures).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from tabsafe.capabilities import Capabilities, Reading
from tabsafe.errors import InputError, TooLargeError, param
from tabsafe.method import Examples, Outcome, TableMethod
from tabsafe.model.result import Protection, Proven, Release, Report
from tabsafe.model.table import Table
from tabsafe.params import Choice, Int, Optional, Real, TextList, parameter
from tabsafe.protect.suppression.cube_release import suppress_with_cubes
from tabsafe.protect.suppression.linked import joint_table, release_problem
from tabsafe.protect.suppression.primary import primary_suppression
from tabsafe.protect.suppression.problem import DEFAULT_WORK_LIMIT, Cost, Mode, Settings, ZeroPolicy
from tabsafe.protect.suppression.secondary import SuppressionResult, secondary_suppression, suppress_problem
from tabsafe.model.release_cells import ReleaseCells
from tabsafe.risk.rules import RiskRules, RuleThresholds

if TYPE_CHECKING:  # pragma: no cover
    from tabsafe.protect.suppression.footprint import Shape

__all__ = ["CellSuppression", "suppression_columns"]

_COUNT = Optional(Real(min=0))
_PERCENT = Optional(Real(min=0, max=100, min_open=True))


def suppression_columns(counts: np.ndarray, reason: np.ndarray) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The release columns (``count`` missing where suppressed, ``status``) and the evaluation
    column (``reason``) of a pattern."""
    suppressed = reason != "published"
    released = np.where(suppressed, np.nan, np.asarray(counts, dtype=np.float64))
    status = np.where(suppressed, "suppressed", "published").astype(object)
    return {"count": released, "status": status}, {"reason": np.asarray(reason, dtype=object)}


@dataclass(frozen=True, kw_only=True)
class CellSuppression(TableMethod):
    """Cell suppression: primary cells by the risk rules, secondary cells so that none can be recomputed.

    Primary suppression (seed 000 §5.3) hides the cells the rules flag (METHODS.md §10; any rule
    flags a cell). Secondary suppression hides further cells so that no primary cell can be
    recomputed from the published cells and the table's additive relations, every hierarchy
    level included: its feasibility interval by linear programming is at least
    ``max(protection_level, protection_ratio * value)`` wide.

    Attributes:
        min_freq: threshold rule 0 < n < min_freq (0 or none: off).
        t_abs: extended rules 1a and 1b of seed 003 (one threshold for both sides).
        t_rel: extended rules 2a and 2b, a percentage.
        t_min: extended rule 3.
        t_k_abs: rule 1a alone (f_k - f < T).
        t_y_abs: rule 1b alone (f_y - f < T).
        t_k_rel: rule 2a alone (100 f / f_k >= T).
        t_y_rel: rule 2b alone (100 f / f_y >= T).
        target: target variables of the extended and coalition rules (repeat; default every
            variable in turn).
        coalition: directly disclosive cells for a k-coalition.
        zeros: how zero cells are treated: never suppressed, safe (may be hidden as secondary cells) or
            primary (informative zeros).
        mode: secondary suppression by the fast heuristic, the optimal integer program, or
            hypercube moves (one table too large for the other two; hides more; in a release,
            the tables too large for the elimination by moves and the others by the elimination,
            joined at the cells they share: :mod:`.cube_release`).
        cost: minimise the value suppressed (count) or the number of cells (cells).
        protection_level: least interval width of a primary cell.
        protection_ratio: least interval width as a share of the primary cell's value.
        work_limit: the optimal mode's budget: rounds of its audit-and-cut loop (each solves one
            program, an integer one under a fixed node cap, and audits the answer); the same
            table and budget give the same pattern on any machine.
        time_limit: seconds, an outer guard on the optimal mode (a pattern it stops depends on
            the machine's speed; the report says so).
        mip_gap: relative gap at which the optimal mode stops.
    """

    name: ClassVar[str] = "suppress"
    #: deterministic; hides cells; a release in one problem; publishes the other cells unchanged
    declared: ClassVar[Capabilities] = Capabilities(joint=True, hides=True, publishes_unchanged=True,
                                                    needs_grid=True)

    min_freq: float | None = parameter(3, check=_COUNT)
    t_abs: float | None = parameter(None, check=_COUNT)
    t_rel: float | None = parameter(None, check=_PERCENT)
    t_min: float | None = parameter(None, check=_COUNT)
    t_k_abs: float | None = parameter(None, check=_COUNT)
    t_y_abs: float | None = parameter(None, check=_COUNT)
    t_k_rel: float | None = parameter(None, check=_PERCENT)
    t_y_rel: float | None = parameter(None, check=_PERCENT)
    target: tuple[str, ...] | None = parameter(None, check=Optional(TextList(repeat=True, metavar="VAR")))
    coalition: int | None = parameter(None, check=Optional(Int(min=0)))
    zeros: ZeroPolicy = parameter(ZeroPolicy.NEVER, check=Choice(ZeroPolicy))
    mode: Mode = parameter(Mode.FAST, check=Choice(Mode))
    cost: Cost = parameter(Cost.COUNT, check=Choice(Cost))
    protection_level: float = parameter(1.0, check=Real(min=0))
    protection_ratio: float = parameter(0.0, check=Real(min=0, max=10))
    work_limit: int = parameter(DEFAULT_WORK_LIMIT, check=Int(min=1))
    time_limit: float | None = parameter(None, check=Optional(Real(min=0, min_open=True)))
    mip_gap: float = parameter(1e-4, check=Real(min=0, max=1))

    def validate(self) -> None:
        thresholds = RuleThresholds.both_sides(
            t_abs=self.t_abs, t_rel=self.t_rel, t_min=self.t_min,
            t_k_abs=self.t_k_abs, t_y_abs=self.t_y_abs, t_k_rel=self.t_k_rel, t_y_rel=self.t_y_rel,
        )
        # a threshold of 1 or less flags nothing: counts are whole numbers
        threshold = self.min_freq if self.min_freq is not None and self.min_freq > 1 else None
        rules = RiskRules(min_freq=threshold, thresholds=thresholds, coalition=self.coalition, targets=self.target)
        if not rules.checked and self.zeros is not ZeroPolicy.PRIMARY:
            given = (f"{param('min_freq')} {self.min_freq:g} flags no cell" if self.min_freq is not None
                     else f"no {param('min_freq')}")
            raise InputError(
                f"no primary rule: {given} and no other rule is given, so nothing would be protected; give "
                f"{param('min_freq')} 2 or more (e.g. 3), an extended rule ({param('t_abs')}, {param('t_rel')}, "
                f"{param('t_min')}…), {param('coalition')} or {param('zeros')} primary"
            )
        object.__setattr__(self, "_rules", rules)
        object.__setattr__(self, "_settings", Settings(
            mode=self.mode, cost=self.cost, zeros=self.zeros, protection_level=self.protection_level,
            protection_ratio=self.protection_ratio, work_limit=self.work_limit, time_limit=self.time_limit,
            mip_gap=self.mip_gap,
        ))

    @property
    def rules(self) -> RiskRules:
        """The primary rules these parameters switch on."""
        return self._rules  # type: ignore[attr-defined]

    @property
    def settings(self) -> Settings:
        """The secondary suppression settings."""
        return self._settings  # type: ignore[attr-defined]

    @classmethod
    def examples(cls) -> Examples:
        import pandas as pd

        # few persons, so that the example table has small cells to protect
        rng = np.random.default_rng(11)
        n = 90
        data = pd.DataFrame({
            "area": rng.choice(["a1", "a2", "a3", "a4"], n, p=[0.4, 0.3, 0.2, 0.1]),
            "sex": rng.choice(["1", "2"], n),
            "age": rng.choice(["y", "m", "o"], n, p=[0.2, 0.5, 0.3]),
        })
        return Examples(
            data=data,
            typical=(
                cls(min_freq=3),
                cls(min_freq=3, t_abs=2, mode=Mode.OPTIMAL, cost=Cost.CELLS, work_limit=10),
                cls(min_freq=4, zeros=ZeroPolicy.SAFE, protection_level=2, target=("sex",)),
                cls(min_freq=3, mode=Mode.HYPERCUBE),
            ),
            why_no_identity="suppression always hides what its rules flag, and rules that flag nothing are "
                            "refused (they would protect nothing)",
        )

    def notes(self) -> tuple[str, ...]:
        notes = ["the release shows which cells are suppressed, not why: primary cells are known to be small"]
        if self.zeros is ZeroPolicy.NEVER:
            notes.append("zeros are never suppressed, so the audit assumes an intruder knows every suppressed "
                         "cell is at least 1 (this covers a singleton respondent's knowledge of its own cell)")
        return tuple(notes)

    def memory_estimate(self, table: Table) -> int:
        """The memory model of :mod:`.footprint`, from the table's shape (checked before any work)."""
        from tabsafe import memory
        from tabsafe.protect.suppression.footprint import hypercube_bytes, shape

        s = shape(table)
        cube = hypercube_bytes(s)
        if self.mode is Mode.HYPERCUBE:
            return cube
        need = self._elimination_bytes(s, optimal=self.mode is Mode.OPTIMAL)
        budget = memory.limit()
        if need > budget >= cube:  # say which mode fits, not only that this one does not
            raise TooLargeError(
                f"method 'suppress' in {param('mode')} {self.mode.value} on {table.n_cells:,} cells would need about "
                f"{memory.human(need)} of memory, more than the limit of {memory.human(budget)}",
                hint=f"{param('mode')} hypercube needs about {memory.human(cube)}: it hides more cells, and its work "
                     "grows with the primary cells rather than with the table",
            )
        return need

    def primary(self, table: Table) -> np.ndarray:
        """The primary cells of ``table``'s grid."""
        return primary_suppression(table, self.rules, zeros=self.zeros)

    def apply(self, table: Table, seed: int | None) -> Outcome:
        """Primary and secondary suppression of the whole grid (``seed`` unused: deterministic)."""
        dense = table.densify()
        result = secondary_suppression(dense, self.primary(dense), self.settings)
        release, evaluation = suppression_columns(dense.counts, result.reason)
        return Outcome(cells=dense, release=release, evaluation=evaluation, figures=result.figures,
                       private=result.private, notes=self.notes())

    def reading(self) -> Reading:
        """A hidden cell is at least :attr:`suppressed_min`."""
        return Reading(hidden_min=self.suppressed_min)

    @property
    def suppressed_min(self) -> float:
        """What an intruder knows as the least value of a suppressed cell (1 when zeros are never
        suppressed)."""
        return 1.0 if self.zeros is ZeroPolicy.NEVER else 0.0

    def required(self, values: np.ndarray) -> np.ndarray:
        """The interval width a primary cell of value ``values`` needs."""
        return np.maximum(self.protection_level, self.protection_ratio * np.nan_to_num(values))

    def protect_release(self, cells: ReleaseCells, *, seed: int | None = None
                        ) -> tuple[tuple[Protection, ...], Report] | tuple[tuple[Protection, ...], Report, Proven]:
        """Suppress the tables of a release together (:mod:`tabsafe.release`): primary cells by the
        rules in each table (primary in every table holding them), secondary suppression over the
        union of the tables' cells and relations, so a shared cell has one status.

        In mode hypercube, the tables of :meth:`cube_tables` by moves and the others together by
        the elimination, joined at the cells they share (:mod:`.cube_release`); its proofs, the
        release audit's intervals, are returned third."""
        primary = np.zeros(cells.n_cells, dtype=bool)
        for t, rows in zip(cells.tables, cells.cells):
            primary[rows] |= self.primary(t)
        audit = None
        if self.mode is Mode.HYPERCUBE:
            result, audit = suppress_with_cubes(cells, primary, self.settings, self.cube_tables(cells.tables))
        else:
            result = suppress_problem(release_problem(cells, primary, self.settings))
        figures = {**result.figures, "tables": len(cells.tables), "shared_cells": int((cells.shared() > 1).sum())}
        report = Report(method=self.name, params=self.params(), figures=figures, private=result.private,
                        notes=self.notes())
        protections = tuple(self._protection(t, result, rows, report) for t, rows in zip(cells.tables, cells.cells))
        return (protections, report) if audit is None else (protections, report, audit)

    def cube_tables(self, tables: Sequence[Table]) -> tuple[int, ...]:
        """The tables of a release suppressed by moves in mode hypercube: those the elimination
        would need more memory for than the limit allows, else the largest."""
        from tabsafe import memory

        budget = memory.limit()
        big = tuple(i for i, t in enumerate(tables) if self._fast_bytes(t) > budget)
        return big or (max(range(len(tables)), key=lambda i: tables[i].n_cells),)

    def release_memory_estimate(self, tables: Sequence[Table]) -> int:
        """The memory model of a release: in mode hypercube, moves for :meth:`cube_tables` and the
        elimination for the others; else each table's, added up."""
        if self.mode is not Mode.HYPERCUBE:
            return sum(self.memory_estimate(t) for t in tables)
        cubes = self.cube_tables(tables)
        return sum(self.memory_estimate(t) if i in cubes else self._fast_bytes(t) for i, t in enumerate(tables))

    def _fast_bytes(self, table: Table) -> int:
        from tabsafe.protect.suppression.footprint import shape

        return self._elimination_bytes(shape(table), optimal=False)

    def _elimination_bytes(self, s: Shape, *, optimal: bool) -> int:
        """The memory model of the elimination (and the optimal mode's programs) on shape ``s``."""
        from tabsafe.protect.suppression.footprint import suppression_bytes

        return suppression_bytes(s, zeros_published=self.zeros is ZeroPolicy.NEVER, optimal=optimal)

    def protect_linked(self, tables: Sequence[Table]) -> tuple[Protection, ...]:
        """Suppress linked tables consistently, in the table of all their variables
        (:mod:`.linked`): a cell shared by several tables is one cell. Primary cells are flagged
        in each table by the rules and are primary everywhere."""
        joint = joint_table(tables)
        primary = np.zeros(joint.table.n_cells, dtype=bool)
        for t, rows in zip(tables, joint.cells):
            primary[rows] |= self.primary(t)
        result = secondary_suppression(joint.table, primary, self.settings, hidden=joint.hidden)
        report = Report(method=self.name, params=self.params(), figures={**result.figures, "linked_tables": len(tables)},
                        private=result.private, notes=self.notes())
        return tuple(self._protection(t.densify(), result, rows, report) for t, rows in zip(tables, joint.cells))

    def _protection(self, dense: Table, result: SuppressionResult, rows: np.ndarray, report: Report) -> Protection:
        release, evaluation = suppression_columns(dense.counts, result.reason[rows])
        meta = dict(dense.meta)
        return Protection(
            release=Release(Table(dense.dimensions, dense.ids, release, meta)),
            evaluation=Table(dense.dimensions, dense.ids,
                             {"count": dense.counts, "original": dense.counts, **evaluation}, meta),
            report=report,
        )
