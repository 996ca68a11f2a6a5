"""What secondary suppression is asked to do: the settings and the problem, as values.

:class:`Settings` groups the choices of secondary suppression (algorithm, cost, zeros, required
protection, solver limits); :class:`Problem` is one (possibly joint) set of cells to suppress:
their true values, which are primary, which no release contains, which are published by force,
what an intruder knows as their least value, how wide each primary's interval must be, what
hiding each costs, and the additive relations that tie them. The algorithms of the package
(:mod:`.elimination`, :mod:`.audit`, :mod:`.optimal`) are functions of a :class:`Problem`.

The cells need not be one table's grid: tables published together can be suppressed on the
union of their cells and relations, shared cells counted once. A :class:`CellSystem` says what
the cells are — values, relations, and a sparse basis of the additive vectors — and how to name
one in a message.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from tabsafe.errors import InputError, param
from tabsafe.model.table import cell_name
from tabsafe.params import Choice, Int, Optional, Real, check_all, parameter
from tabsafe.protect.suppression.elimination import table_basis

if TYPE_CHECKING:  # pragma: no cover
    from tabsafe.model.table import Table

__all__ = ["DEFAULT_WORK_LIMIT", "CellSystem", "Cost", "Mode", "Problem", "Settings", "ZeroPolicy"]

#: The optimal mode's default budget of audit-and-cut rounds (measured: :mod:`.optimal`).
DEFAULT_WORK_LIMIT = 25


class ZeroPolicy(str, Enum):
    """How zero cells are treated.

    ``never``: zero cells are always published (an intruder then knows every suppressed cell is
    at least 1, and the audit uses that bound; this also covers what the single respondent of a
    suppressed 1 knows about its own cell: the frequency-table form of the singleton problem);
    ``safe``: zeros are not primary but may be hidden as secondary cells (bound 0); ``primary``:
    every zero cell is primary (informative zeros, seed 000 §5.2).
    """

    NEVER = "never"
    SAFE = "safe"
    PRIMARY = "primary"


class Mode(str, Enum):
    """Secondary suppression algorithm: Gaussian-elimination heuristic, integer program, or
    hypercube moves (one table too large for the other two)."""

    FAST = "fast"
    OPTIMAL = "optimal"
    HYPERCUBE = "hypercube"


class Cost(str, Enum):
    """What secondary suppression minimises: total value suppressed or number of cells."""

    COUNT = "count"
    CELLS = "cells"


@dataclass(frozen=True, kw_only=True)
class Settings:
    """How secondary suppression works (seed 000 §5.3).

    Attributes:
        mode: ``fast`` (Gaussian elimination + interval-audit repair), ``optimal`` (integer
            program with audit cuts, started from the fast pattern) or ``hypercube`` (a move per
            primary cell, each the certificate of its protection: :mod:`.hypercube`).
        cost: ``count`` (least total value suppressed) or ``cells`` (fewest cells).
        zeros: ``never``, ``safe`` or ``primary`` (see :class:`ZeroPolicy`).
        protection_level: least width of a primary cell's feasibility interval.
        protection_ratio: least width as a share of the primary cell's value.
        work_limit: rounds of the optimal mode's audit-and-cut loop (each solves one program,
            an integer one under a fixed node cap, and audits its answer): the budget that
            decides the optimal mode's pattern, the same on any machine.
        time_limit: seconds, an outer guard on the optimal mode (None: none); a pattern it
            stops depends on the machine's speed, and the report says so.
        mip_gap: relative gap at which the optimal mode stops.
    """

    mode: Mode = parameter(Mode.FAST, check=Choice(Mode))
    cost: Cost = parameter(Cost.COUNT, check=Choice(Cost))
    zeros: ZeroPolicy = parameter(ZeroPolicy.NEVER, check=Choice(ZeroPolicy))
    protection_level: float = parameter(1.0, check=Real(min=0))
    protection_ratio: float = parameter(0.0, check=Real(min=0, max=10))
    work_limit: int = parameter(DEFAULT_WORK_LIMIT, check=Int(min=1))
    time_limit: float | None = parameter(None, check=Optional(Real(min=0, min_open=True)))
    mip_gap: float = parameter(1e-4, check=Real(min=0, max=1))

    def __post_init__(self) -> None:
        check_all(self)
        if self.protection_level == 0 and self.protection_ratio == 0:
            raise InputError(f"{param('protection_level')} and {param('protection_ratio')} are both 0: "
                             "a primary cell would need no protection")


@dataclass(frozen=True, eq=False)
class CellSystem:
    """Cells tied by additive relations: one table's grid, or the union of a release's tables.

    Attributes:
        values: the true value of every cell (NaN for cells no release contains).
        relations: sparse ``A`` with ``A @ x = 0`` for every additive ``x`` (+1 aggregate, −1
            children).
        leaf: which cells are inner cells (every code a leaf).
        basis: builds a sparse basis of the additive vectors (columns as ``{cell: value}``) for
            the Gaussian elimination; called with ``True`` when every zero cell is published (then
            a basis of the additive vectors that are zero on the zero cells will do, which for a
            sparse table is far smaller).
        name: how to name cell ``i`` in a message.
        table: the dense table whose grid the cells are, when they are one table's.
    """

    values: np.ndarray
    relations: sp.csr_matrix
    leaf: np.ndarray
    basis: Callable[[bool], Sequence[dict[int, float]] | sp.spmatrix]
    name: Callable[[int], str]
    table: Table | None = None

    @property
    def n_cells(self) -> int:
        return int(self.values.size)

    @classmethod
    def of_table(cls, table: Table) -> CellSystem:
        """The grid of one table (densified), its relations along every hierarchy level."""
        dense = table.densify()
        values = np.asarray(dense.counts, dtype=np.float64)
        return cls(values, sp.csr_matrix(dense.additivity()), np.asarray(dense.leaf_mask),
                   lambda zeros_published: table_basis(dense, zeros_published), lambda i: cell_name(dense, i), dense)


@dataclass(frozen=True, eq=False)
class Problem:
    """Everything secondary suppression needs about one set of cells (module docstring).

    Attributes:
        system: the cells, their true values and relations.
        settings: the secondary suppression settings.
        primary: primary cells (zeros included under ``zeros='primary'``).
        hidden: cells no release contains (a joint table's other cells): unknown to an intruder,
            never published, never counted.
        forced: cells published whatever happens (zeros under ``zeros='never'``).
        lower: what an intruder knows as the least value of a suppressed cell.
        required: the interval width each primary cell needs.
        cost: what hiding each cell costs.
    """

    system: CellSystem
    settings: Settings
    primary: np.ndarray
    hidden: np.ndarray
    forced: np.ndarray
    lower: np.ndarray
    required: np.ndarray
    cost: np.ndarray

    @classmethod
    def build(cls, system: CellSystem, primary: np.ndarray, settings: Settings, *,
              hidden: np.ndarray | None = None, published: np.ndarray | None = None) -> Problem:
        """The problem of hiding ``primary`` in ``system`` (checks the masks and the zeros);
        ``published`` are cells decided published already (a subtable's cells settled by the
        subtables above it)."""
        n = system.n_cells
        vals = system.values
        hidden = np.zeros(n, dtype=bool) if hidden is None else np.asarray(hidden, dtype=bool)
        primary = np.asarray(primary, dtype=bool)
        if primary.shape != (n,) or hidden.shape != (n,):
            raise InputError(f"the primary and hidden masks need one entry per cell ({n})")
        primary = primary & ~hidden
        if np.isnan(vals[~hidden]).any():
            raise InputError("secondary suppression needs the counts of every released cell")
        zero = (vals == 0) & ~hidden
        zeros = settings.zeros
        if zeros is ZeroPolicy.NEVER:
            if (primary & zero).any():
                c = int(np.flatnonzero(primary & zero)[0])
                raise InputError(f"cell {system.name(c)} is a primary zero, but {param('zeros')}='never' never "
                                 "suppresses zeros")
            forced = zero
            lower = np.where(hidden, 0.0, 1.0)
        else:
            forced = np.zeros(n, dtype=bool)
            lower = np.zeros(n)
        if zeros is ZeroPolicy.PRIMARY:
            primary = primary | zero
        if published is not None:
            forced = forced | (np.asarray(published, dtype=bool) & ~primary & ~hidden)
        safe_vals = np.nan_to_num(vals)
        required = np.where(primary, np.maximum(settings.protection_level, settings.protection_ratio * safe_vals), 0.0)
        if settings.cost is Cost.COUNT:
            c = safe_vals + 1.0 / (n + 1)  # the tie-break prefers fewer cells among equal totals
        else:
            c = 1.0 + safe_vals / (safe_vals.sum() + 1.0)
        c = np.where(hidden, 0.0, c)
        return cls(system, settings, primary, hidden, forced, lower, required, c)

    # ------------------------------------------------------------------ derived, computed once
    @property
    def n_cells(self) -> int:
        return self.system.n_cells

    @property
    def values(self) -> np.ndarray:
        return self.system.values

    @property
    def A(self) -> sp.csr_matrix:
        return self.system.relations

    @cached_property
    def AT(self) -> sp.csr_matrix:
        """Cell -> relations incidence (CSR over cells)."""
        return sp.csr_matrix(self.system.relations.T)

    @cached_property
    def basis(self) -> Sequence[dict[int, float]] | sp.spmatrix:
        # every zero cell is published by force exactly when zeros are never suppressed (cells
        # no release holds may be anything: a joint table with such cells gets the full basis)
        zeros_published = self.settings.zeros is ZeroPolicy.NEVER and not self.hidden.any()
        return self.system.basis(zeros_published)

    @property
    def candidates(self) -> np.ndarray:
        """Cells secondary suppression may hide."""
        return ~(self.primary | self.hidden | self.forced)

    def name(self, cell: int) -> str:
        return self.system.name(cell)

    def order(self, exclude: np.ndarray) -> np.ndarray:
        """Candidates, the most costly to hide first (then larger values, margins, cell order)."""
        idx = np.flatnonzero(self.candidates & ~exclude)
        leaf = self.system.leaf[idx]
        vals = np.nan_to_num(self.values[idx])
        return idx[np.lexsort((idx, leaf, -vals, -self.cost[idx]))]

    def at_bound(self) -> np.ndarray | None:
        """Primary cells at their least possible value, when pinning them matters.

        With zeros never suppressed these are the primary 1s; with primary zeros, the zeros.
        With zeros ``safe`` the cells at their bound are non-primary zeros: pinning them is
        harmless by itself and the audit handles the rest.
        """
        at = self.primary & (np.nan_to_num(self.values, nan=-1.0) == self.lower)
        return at if at.any() else None

    def pattern_cost(self, suppressed: np.ndarray) -> float:
        return float(self.cost[suppressed & self.candidates].sum())
