"""Rounding of frequency tables to a base, in all its variants (method ``round``).

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
``controlled``
    controlled rounding (000 §5.5.1), see :mod:`tabsafe.protect.controlled_rounding`.

Output: ``count`` (rounded), ``original``; with ``intervals`` also ``lower``/``upper``, the
existence interval a user can derive for each cell (000 §5.5.1.2; METHODS.md §4).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar

import numpy as np

from tabsafe.errors import InputError
from tabsafe.model.result import Protection, Report
from tabsafe.model.spec import KeySpec
from tabsafe.model.table import Table
from tabsafe.protect.controlled_rounding import (
    DEFAULT_MAX_CELLS,
    SolutionKind,
    _Grid,
    controlled_round,
    existence_intervals,
)
from tabsafe.registry import Needs, register_method

__all__ = [
    "Mode",
    "Rounding",
    "conventional_round",
    "consistent_round",
    "random_round",
    "semi_controlled_round",
    "small_cell_adjust",
]


class Mode(str, Enum):
    """Rounding variants (000 §5.5)."""

    CONVENTIONAL = "conventional"
    RANDOM = "random"
    SEMI_CONTROLLED = "semi-controlled"
    CONSISTENT = "consistent"
    SMALL_CELL = "small-cell"
    CONTROLLED = "controlled"


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


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mode", required=True, choices=[m.value for m in Mode], help="rounding variant")
    parser.add_argument("--base", required=True, type=int, help="rounding base b (e.g. 3 or 5)")
    parser.add_argument("--steps", type=int, default=0,
                        help="controlled: allow K steps beyond the adjacent multiples (default 0: zero-restricted)")
    parser.add_argument("--control", metavar="VAR",
                        help="semi-controlled: control the total of each code of VAR instead of the grand total")
    parser.add_argument("--key", default="rkey", metavar="COLUMN", help="consistent: record-key column (default rkey)")
    parser.add_argument("--solution", default="optimal", choices=[k.value for k in SolutionKind],
                        help="controlled: optimal (default), first-feasible or rapid")
    parser.add_argument("--time-limit", type=float, default=60.0, metavar="SECONDS",
                        help="controlled: time limit (default 60)")
    parser.add_argument("--intervals", action="store_true",
                        help="add the existence interval columns lower, upper (release columns)")


def _from_args(args: argparse.Namespace) -> Rounding:
    return Rounding(
        mode=args.mode, base=args.base, steps=args.steps, control=args.control, key=args.key,
        solution=args.solution, time_limit=args.time_limit, intervals=args.intervals,
    )


@register_method(
    "round", add_arguments=_add_arguments, from_args=_from_args,
    summary="round every cell to a base: conventional, random, semi-controlled, consistent, small-cell, controlled",
)
@dataclass(frozen=True, kw_only=True)
class Rounding:
    """Rounding to a base (000 §5.5; METHODS.md §4).

    Attributes:
        mode: the variant (:class:`Mode` or its name).
        base: the rounding base ``b`` (≥ 2; 1 leaves every table as it is).
        steps: controlled only: ``K`` steps beyond the adjacent multiples.
        control: semi-controlled only: the variable whose codes' totals are controlled (default:
            the grand total).
        key: consistent only: the record-key column of the microdata.
        solution: controlled only: ``optimal``, ``first-feasible`` or ``rapid``.
        time_limit: controlled only: seconds.
        max_cells: controlled only: tables above this many cells are rounded part by part.
        intervals: add the existence-interval columns ``lower`` and ``upper``.
    """

    name: ClassVar[str] = "round"

    mode: Mode | str
    base: int
    steps: int = 0
    control: str | None = None
    key: str = "rkey"
    solution: SolutionKind | str = SolutionKind.OPTIMAL
    time_limit: float = 60.0
    max_cells: int = DEFAULT_MAX_CELLS
    intervals: bool = False

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "mode", Mode(self.mode))
        except ValueError:
            allowed = ", ".join(m.value for m in Mode)
            raise InputError(f"mode must be one of {allowed}; got {self.mode!r}") from None
        object.__setattr__(self, "solution", SolutionKind.parse(self.solution))
        if not _is_int(self.base) or self.base < 1:
            raise InputError(f"base must be an integer >= 1; got {self.base!r}")
        if not _is_int(self.steps) or self.steps < 0:
            raise InputError(f"steps must be an integer >= 0; got {self.steps!r}")
        if self.steps and self.mode is not Mode.CONTROLLED:
            raise InputError(f"steps applies to mode controlled only; got steps={self.steps} with mode {self.mode.value}")
        if self.control is not None and self.mode is not Mode.SEMI_CONTROLLED:
            raise InputError(f"control applies to mode semi-controlled only; got control={self.control!r} "
                             f"with mode {self.mode.value}")
        if not isinstance(self.time_limit, (int, float)) or isinstance(self.time_limit, bool) or self.time_limit <= 0:
            raise InputError(f"time_limit must be a positive number of seconds; got {self.time_limit!r}")
        if not _is_int(self.max_cells) or self.max_cells < 1:
            raise InputError(f"max_cells must be an integer >= 1; got {self.max_cells!r}")
        if self.intervals and self.mode is Mode.SMALL_CELL:
            raise InputError("intervals are defined for modes that round every cell to a multiple of the base; "
                             "got intervals with mode small-cell")
        if not isinstance(self.key, str) or not self.key:
            raise InputError(f"key must be a column name; got {self.key!r}")

    def needs(self) -> Needs:
        if self.mode is Mode.CONSISTENT:
            return Needs(key=KeySpec(column=self.key), microdata=True)
        return Needs()

    def protect(self, table: Table, *, seed: int | None = None) -> Protection:
        """Round ``table``; the result holds ``count`` (rounded) and ``original``."""
        z = np.asarray(table.counts, dtype=np.int64)
        if z.size and z.min() < 0:
            raise InputError(f"rounding needs counts >= 0; got {int(z.min())}")
        b = int(self.base)
        rng = np.random.default_rng(seed)
        figures: dict[str, Any] = {}
        notes: list[str] = []
        mode = self.mode
        if mode is Mode.CONVENTIONAL:
            values = conventional_round(z, b)
            notes.append("margins rounded separately from the inner cells: the table is not additive")
        elif mode is Mode.RANDOM:
            values = random_round(z, b, rng.random(z.size))
            notes.append("margins rounded separately from the inner cells: the table is not additive")
        elif mode is Mode.CONSISTENT:
            if "ckey" not in table.cells.columns:
                raise InputError("mode consistent needs cell keys: tabulate microdata with a record key",
                                 where=f"key column {self.key!r}")
            values = consistent_round(z, b, table.column("ckey"))
            notes.append("the draw of each cell is its cell key frac(sum of record keys): the same records "
                         "round the same way in every table")
        elif mode is Mode.SEMI_CONTROLLED:
            values, n_groups = self._semi_controlled(table, z, b, rng)
            figures["controlled_totals"] = n_groups
        elif mode is Mode.SMALL_CELL:
            inner = table.leaf_mask
            adjusted = np.where(inner, small_cell_adjust(z, b, rng.random(z.size)), 0)
            values = _Grid.of(table).aggregate(adjusted)
            figures["small_cells_adjusted"] = int(np.count_nonzero(inner & (z > 0) & (z < b)))
        else:
            res = controlled_round(
                table, base=b, steps=int(self.steps), solution=self.solution, time_limit=float(self.time_limit),
                max_cells=int(self.max_cells), seed=seed,
            )
            values = res.values
            figures.update(
                objective=res.objective, lower_bound=res.lower_bound, gap=round(res.gap, 6),
                status=res.status, bound=res.bound_kind, seconds=round(res.seconds, 3),
                first_solution_seconds=round(res.first_seconds or res.seconds, 3), programs=res.parts,
            )
            notes += list(res.notes)
        values = np.asarray(values, dtype=np.int64)
        figures = {"cells": int(z.size), "cells_changed": int(np.count_nonzero(values != z)), **figures}
        columns: dict[str, np.ndarray] = {"count": values, "original": z.copy()}
        release = ["count"]
        if self.intervals:
            lower, upper = existence_intervals(values, base=b, steps=int(self.steps))
            columns.update(lower=lower, upper=upper)
            release += ["lower", "upper"]
        params = {
            "mode": mode.value, "base": b, "steps": int(self.steps), "control": self.control, "key": self.key,
            "solution": self.solution.value, "time_limit": float(self.time_limit), "max_cells": int(self.max_cells),
            "intervals": bool(self.intervals),
        }
        report = Report(method=self.name, params=params, seed=seed, figures=figures, notes=tuple(notes))
        return Protection(table=table.with_values(**columns), report=report, release_columns=tuple(release))

    def _semi_controlled(
        self, table: Table, z: np.ndarray, b: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, int]:
        """Inner cells by controlled selection per group; the controlled totals are the sums of their
        rounded inner cells; every other cell randomly rounded on its own."""
        inner = table.leaf_mask
        if self.control is None:
            groups = np.where(inner, 0, -1)
            totals = {0: 0}  # the grand total is row 0 (every code at its root)
            n_groups = 1
        else:
            if self.control not in table.variables:
                raise InputError(f"control variable {self.control!r} is not a spanning variable of the table "
                                 f"({', '.join(table.variables)})")
            ax = table.variables.index(self.control)
            pos = table.positions(ax)
            groups = np.where(inner, pos, -1)
            h = table.dimensions[ax].hierarchy
            totals = {}
            for code in h.leaves:
                codes = [d.hierarchy.order[0] for d in table.dimensions]
                codes[ax] = code
                totals[h.position[code]] = table.row_of(codes)
            n_groups = len(totals)
        values = random_round(z, b, rng.random(z.size))
        chosen = semi_controlled_round(z, b, groups, rng)
        values = np.where(inner, chosen, values)
        for g, row in totals.items():
            values[row] = chosen[groups == g].sum()
        return values, n_groups


def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)
