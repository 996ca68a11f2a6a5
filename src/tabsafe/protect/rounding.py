"""Rounding of frequency tables to a base (method ``round``); controlled rounding is the method
``controlled-round`` (:mod:`tabsafe.protect.controlled_rounding`).

Modes (seed 000 §5.5; 001 §5, §8; 002 §3.2.1; 004 §3.2; METHODS.md §4), with ``z = u·b + r``:

``conventional``
    every cell, margins included, to the nearest multiple of ``b`` (``r = b/2`` goes up); margins
    rounded separately, so the table is not additive (000 Table 5.19).
``random``
    unbiased random rounding: up to ``(u+1)·b`` with probability ``r/b``, else down to ``u·b``;
    every cell independently, margins too (000 Table 5.20; 004 §3.2). ``Var = r(b − r)``.
``semi-controlled``
    the inner cells of the whole table (or of each code of ``control``, e.g. each area) are
    rounded by selecting, without replacement, which cells go up: systematic πps selection
    with inclusion probability ``r/b`` over the cells ordered by residue (in random order within
    a residue), so each residue class gets its expected number of ups to within one and the
    number of ups is ``⌊Σr/b⌋`` or ``⌈Σr/b⌉``. The controlled total is the sum of its rounded
    inner cells — an unbiased rounding of the true total — and is hit exactly; other margins are
    randomly rounded on their own (002 §3.2.1, 004 §3.2).
``consistent``
    random rounding whose uniform draw is the cell key ``ck = frac(Σ rk)`` of the cell's records
    (round up iff ``ck < r/b``): the key-sum form of 001 §8 (the ABS "permanent random numbers",
    combined by addition mod 1 as the cell key method of 000 §5.4 does, instead of XOR), so the
    same records give the same rounding in every table. Needs microdata with a record key.
``small-cell``
    small cell adjustment (000 §5.5): inner cells ``0 < z < b`` go to ``b`` with probability
    ``z/b`` and to 0 otherwise; other inner cells stay; margins are sums of the adjusted cells
    (additive).

Releases (:meth:`Rounding.protect_release`, issue #31): random rounding rounds each cell of the
release once (a shared cell one draw, one value in every table); small cell adjustment adjusts the
finest cells of the release once and adds them up for every table (:mod:`tabsafe.model.finest`).
Conventional and consistent rounding give a cell the same value in every table by construction;
semi-controlled rounding's controlled totals are sums of one table's inner cells, which another
table's inner cells cannot also add up to: it protects one table, not a release.

Sparse tables: conventional, random and consistent rounding leave a zero at zero, so they round
the stored cells only. Semi-controlled rounding, small cell adjustment and existence intervals
(a zero's interval is ``[0, b−1]``, not the implied ``[0, 0]``) work on the whole grid.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from tabsafe.capabilities import Capabilities, Reading
from tabsafe.errors import InputError, param
from tabsafe.method import Examples, Needs, Outcome, TableMethod
from tabsafe.model.spec import KeySpec
from tabsafe.params import Bool, Choice, Int, Optional, Text, parameter

if TYPE_CHECKING:  # pragma: no cover
    from tabsafe.model.result import Protection, Report
    from tabsafe.model.table import Table
    from tabsafe.model.release_cells import ReleaseCells

__all__ = [
    "Mode",
    "Rounding",
    "consistent_round",
    "conventional_round",
    "random_round",
    "semi_controlled_round",
    "small_cell_adjust",
]


class Mode(str, Enum):
    """Rounding variants of the method ``round`` (000 §5.5)."""

    CONVENTIONAL = "conventional"
    RANDOM = "random"
    SEMI_CONTROLLED = "semi-controlled"
    CONSISTENT = "consistent"
    SMALL_CELL = "small-cell"


# --------------------------------------------------------------------------------------------
# the variants on plain arrays


def conventional_round(z: np.ndarray, base: int) -> np.ndarray:
    """Nearest multiple of ``base``; halves up (000 §5.5 "Conventional rounding").

    >>> conventional_round(np.array([1, 3, 6, 32]), 5).tolist()
    [0, 5, 5, 30]
    """
    z = np.asarray(z, dtype=np.int64)
    u, r = np.divmod(z, base)
    return (u + (2 * r >= base)) * base


def random_round(z: np.ndarray, base: int, draws: np.ndarray) -> np.ndarray:
    """Unbiased random rounding with the given uniform draws: up iff ``draw < r/b``
    (002 §3.2.1; 004 §3.2). Multiples of ``base`` never change.

    >>> random_round(np.array([4, 5, 6]), 3, np.array([0.2, 0.9, 0.0])).tolist()
    [6, 3, 6]
    """
    z = np.asarray(z, dtype=np.int64)
    u, r = np.divmod(z, base)
    up = (r > 0) & (np.asarray(draws) * base < r)
    return (u + up) * base


def consistent_round(z: np.ndarray, base: int, cell_keys: np.ndarray) -> np.ndarray:
    """Random rounding driven by the cell keys (001 §8, 000 §5.4): the same records always round
    the same way, in any table."""
    return random_round(z, base, cell_keys)


def semi_controlled_round(
    z: np.ndarray, base: int, groups: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Round the cells of each group so that they add up to an unbiased rounding of the group's
    total (002 §3.2.1: selection without replacement).

    Within a group, cells are ordered by residue ``r`` (randomly within a residue) and selected by
    systematic sampling with inclusion probabilities ``r/b`` and one uniform start: exactly
    ``⌊Σr/b⌋`` or ``⌈Σr/b⌉`` cells go up, each with probability ``r/b``.

    Args:
        groups: a group label per cell (``-1``: not rounded here, returned as 0).
    """
    z = np.asarray(z, dtype=np.int64)
    u, r = np.divmod(z, base)
    up = np.zeros(z.size, dtype=bool)
    for g in np.unique(groups[groups >= 0]):
        idx = np.flatnonzero((groups == g) & (r > 0))
        if idx.size == 0:
            continue
        idx = idx[np.lexsort((rng.random(idx.size), r[idx]))]
        cum = np.cumsum(r[idx]) / base
        start = rng.random()
        # cell j is selected when a point start + k falls in (cum[j-1], cum[j]]
        before = np.concatenate([[0.0], cum[:-1]])
        up[idx] = np.floor(cum - start) > np.floor(before - start)
    return np.where(groups >= 0, (u + up) * base, 0)


def small_cell_adjust(z: np.ndarray, base: int, draws: np.ndarray) -> np.ndarray:
    """Small cell adjustment of inner cells (000 §5.5): ``0 < z < b`` goes to ``b`` with
    probability ``z/b``, else to 0; other cells unchanged."""
    z = np.asarray(z, dtype=np.int64)
    small = (z > 0) & (z < base)
    return np.where(small, np.where(np.asarray(draws) * base < z, base, 0), z)


# --------------------------------------------------------------------------------------------
# the method


class ModeChoice(Choice):
    """The rounding mode; ``controlled`` is not one: controlled rounding is its own method."""

    def check(self, name: str, value: Any) -> Any:
        raw = value.value if isinstance(value, Enum) else value
        if raw == "controlled":
            raise InputError(f"controlled rounding is the method 'controlled-round', not a {param(name)} of "
                             "the method 'round'")
        return super().check(name, value)


@dataclass(frozen=True, kw_only=True)
class Rounding(TableMethod):
    """Rounding to a base: conventional, random, semi-controlled, consistent or small-cell (000 §5.5).

    Every cell becomes a multiple of the base (small-cell: only counts below the base move);
    see the module docstring for each mode. The defaults are unbiased random rounding to base 3.
    Controlled rounding (additive, optimised) is the method ``controlled-round``.

    Attributes:
        mode: the rounding variant (000 §5.5; the module docstring of tabsafe.protect.rounding).
        base: the rounding base b (1 leaves every table as it is).
        control: semi-controlled only: the variable whose codes' totals are controlled (default:
            the grand total).
        key: consistent only: the record-key column of the microdata.
        intervals: add the existence intervals lower and upper a user can derive from each
            rounded value and the base (000 §5.5.1.2; not for small-cell).
    """

    name: ClassVar[str] = "round"
    declared: ClassVar[Capabilities] = Capabilities(joint=True, random=True)

    mode: Mode = parameter(Mode.RANDOM, check=ModeChoice(Mode))
    base: int = parameter(3, check=Int(min=1))
    control: str | None = parameter(None, check=Optional(Text(identifier=True)))
    key: str = parameter("rkey", check=Text(identifier=True))
    intervals: bool = parameter(False, check=Bool())

    def validate(self) -> None:
        if self.control is not None and self.mode is not Mode.SEMI_CONTROLLED:
            raise InputError(f"{param('control')} applies to {param('mode')} semi-controlled only; got "
                             f"{param('control')} {self.control!r} with {param('mode')} {self.mode.value}")
        if self.intervals and self.mode is Mode.SMALL_CELL:
            raise InputError(f"{param('intervals')} are defined for modes that round every cell to a multiple of "
                             f"the base; got {param('intervals')} with {param('mode')} small-cell")

    def capabilities(self) -> Capabilities:
        """Conventional and consistent rounding are functions of the cell (its count; its cell
        key): consistent and not random. Random, semi-controlled and small-cell rounding draw from
        the seed. Small-cell rounding's margins are sums of its inner cells (additive) and it
        leaves counts of at least the base as they are; semi-controlled and small-cell rounding
        and existence intervals work on the whole grid."""
        mode = self.mode
        return replace(
            super().capabilities(),
            random=mode in (Mode.RANDOM, Mode.SEMI_CONTROLLED, Mode.SMALL_CELL),
            consistent=mode in (Mode.CONVENTIONAL, Mode.CONSISTENT),
            additive=mode is Mode.SMALL_CELL,
            publishes_unchanged=mode is Mode.SMALL_CELL,
            needs_grid=mode in (Mode.SEMI_CONTROLLED, Mode.SMALL_CELL) or self.intervals,
            joint=mode in (Mode.RANDOM, Mode.SMALL_CELL),
        )

    def protect_release(self, cells: ReleaseCells, *, seed: int | None = None) -> tuple[tuple[Protection, ...], Report]:
        """Round the tables of a release together (module docstring): random rounding draws once
        per release cell; small cell adjustment works on the finest cells of the release."""
        from tabsafe.method import check_seed, draw_seed
        from tabsafe.model.result import Report
        from tabsafe.model.finest import protect_finest, protections_of

        if self.mode is Mode.SMALL_CELL:
            return protect_finest(self, cells, seed=seed)
        if self.mode is not Mode.RANDOM:
            raise InputError(f"{param('mode')} {self.mode.value} does not protect a release as one problem")
        used = check_seed(seed)
        used = draw_seed() if used is None else used
        z = np.asarray(cells.combine("count"), dtype=np.int64)
        values = random_round(z, int(self.base), np.random.default_rng(used).random(z.size))
        figures = {"cells": cells.n_cells, "tables": len(cells.tables), "shared_cells": int((cells.shared() > 1).sum())}
        report = Report(method=self.name, params=self.params(), seed=used, figures=figures,
                        private={"cells_changed": int(np.count_nonzero(values != z))},
                        notes=("each cell of the release rounded once: a cell the tables share has one value; margins "
                               "rounded separately from the inner cells: the tables are not additive",))
        extra = {}
        if self.intervals:
            from tabsafe.protect.controlled_rounding.steps import existence_intervals

            extra["lower"], extra["upper"] = existence_intervals(values, base=int(self.base), steps=0)
        return protections_of(cells, values, report, extra), report

    def reading(self) -> Reading:
        """Every mode but small-cell publishes multiples of the base."""
        return Reading(base=None if self.mode is Mode.SMALL_CELL else int(self.base))

    def needs(self) -> Needs:
        if self.mode is Mode.CONSISTENT:
            return Needs(key=KeySpec(column=self.key), microdata=True)
        return Needs()

    @classmethod
    def examples(cls) -> Examples:
        return Examples(
            typical=(
                cls(), cls(mode="conventional", base=5, intervals=True), cls(mode="semi-controlled", base=5),
                cls(mode="semi-controlled", control="area"), cls(mode="consistent", base=5),
                cls(mode="small-cell", base=5),
            ),
            identity=cls(base=1),
        )

    def published_distribution(self, n: int) -> dict[int, float] | None:
        """``P(published | n)`` of a cell (the :class:`~tabsafe.method.CellDistribution`
        capability; METHODS.md §4), ``n = u·b + r``: random — ``(u+1)·b`` with probability
        ``r/b``, else ``u·b``; consistent — the same, the cell key being uniform; conventional —
        the nearest multiple (``2r >= b`` up); small-cell (inner cells) — below the base, ``b``
        with probability ``n/b``, else 0; others unchanged. Semi-controlled rounding selects the
        cells that go up jointly: ``None``."""
        b, n = int(self.base), int(n)
        if self.mode is Mode.SEMI_CONTROLLED:
            return None
        u, r = divmod(n, b)
        if r == 0:
            return {n: 1.0}
        if self.mode is Mode.CONVENTIONAL:
            return {(u + (2 * r >= b)) * b: 1.0}
        if self.mode is Mode.SMALL_CELL:
            return {n: 1.0} if n >= b else {b: n / b, 0: 1 - n / b}
        return {(u + 1) * b: r / b, u * b: 1 - r / b}

    def apply(self, table: Table, seed: int | None) -> Outcome:
        """Round ``table`` (module docstring); the release holds ``count`` and, with
        ``intervals``, ``lower`` and ``upper``."""
        b = int(self.base)
        mode = self.mode
        whole_grid = mode in (Mode.SEMI_CONTROLLED, Mode.SMALL_CELL) or self.intervals
        cells = table.densify() if whole_grid else table
        z = np.asarray(cells.counts, dtype=np.int64)
        if z.size and z.min() < 0:
            raise InputError(f"rounding needs counts >= 0; got {int(z.min())}")
        rng = np.random.default_rng(seed)
        figures: dict[str, Any] = {"cells": cells.n_cells}
        notes: list[str] = []
        if mode is Mode.CONVENTIONAL:
            values = conventional_round(z, b)
            notes.append("margins rounded separately from the inner cells: the table is not additive")
        elif mode is Mode.RANDOM:
            values = random_round(z, b, rng.random(z.size))
            notes.append("margins rounded separately from the inner cells: the table is not additive")
        elif mode is Mode.CONSISTENT:
            if not cells.has("ckey"):
                raise InputError(f"{param('mode')} consistent needs microdata with a record key "
                                 f"({param('key')} {self.key!r}): its cell keys drive the rounding")
            values = consistent_round(z, b, cells.column("ckey"))
            notes.append("the draw of each cell is its cell key frac(sum of record keys): the same records "
                         "round the same way in every table")
        elif mode is Mode.SEMI_CONTROLLED:
            values, n_groups = self._semi_controlled(cells, z, b, rng)
            figures["controlled_totals"] = n_groups
        else:
            from tabsafe.protect.controlled_rounding.grid import Grid

            inner = cells.leaf_mask
            adjusted = np.where(inner, small_cell_adjust(z, b, rng.random(z.size)), 0)
            values = Grid.of(cells).aggregate(adjusted)
            notes.append("margins are sums of the adjusted inner cells: the table is additive")
        values = np.asarray(values, dtype=np.int64)
        release: dict[str, np.ndarray] = {"count": values}
        if self.intervals:
            from tabsafe.protect.controlled_rounding.steps import existence_intervals

            lower, upper = existence_intervals(values, base=b, steps=0)
            release.update(lower=lower, upper=upper)
        # how many cells moved tells which counts were multiples of the base: evaluation only
        private = {"cells_changed": int(np.count_nonzero(values != z))}
        return Outcome(cells=cells, release=release, figures=figures, private=private, notes=tuple(notes))

    def _semi_controlled(self, table: Table, z: np.ndarray, b: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
        """Inner cells by controlled selection per group; the controlled totals are the sums of
        their rounded inner cells; every other cell randomly rounded on its own. ``table`` is
        dense (row = grid id)."""
        inner = table.leaf_mask
        if self.control is None:
            groups = np.where(inner, 0, -1)
            totals = {0: table.cell_id({})}  # the grand total: every variable at its total
        else:
            if self.control not in table.variables:
                raise InputError(f"{param('control')} variable {self.control!r} is not a spanning variable of the "
                                 f"table ({', '.join(table.variables)})")
            ax = table.axis(self.control)
            groups = np.where(inner, table.positions(ax), -1)
            h = table.dimensions[ax].hierarchy
            totals = {h.position[code]: table.cell_id({self.control: code}) for code in h.leaves}
        values = random_round(z, b, rng.random(z.size))
        chosen = semi_controlled_round(z, b, groups, rng)
        values = np.where(inner, chosen, values)
        for g, row in totals.items():
            values[row] = chosen[groups == g].sum()
        return values, len(totals)
