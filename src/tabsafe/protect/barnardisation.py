"""Barnardisation: method ``barnardisation`` of the registry (seed 000 §5.3; METHODS.md §5).

"Barnardisation modifies each internal cell of every table by +1, 0 or −1, according to
probabilities p/2, 1−p and p/2 respectively for a fixed p ∈ (0,1). Zeros are not adjusted. […]
table totals are added up from the perturbed internal cells, resulting in inconsistent totals
between tables. […] The exact proportion of cells modified is not revealed to the user."

So only the non-zero inner cells of the table are drawn (a sparse table's implied zeros stay
zero), every margin and subtotal is the sum of the perturbed inner cells under it (the table is
additive), and the number of cells changed goes to the private figures, never to the published
report.

A release (:meth:`Barnardisation.protect_release`) barnardises the finest cells of its tables
once and adds them up for every table (:mod:`tabsafe.model.finest`): the totals of different
tables then agree, which the handbook's table-by-table form does not give.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from tabsafe.capabilities import Capabilities
from tabsafe.method import Examples, Outcome, TableMethod
from tabsafe.params import Real, parameter
from tabsafe.model.margins import totals_from_inner

if TYPE_CHECKING:  # pragma: no cover
    from tabsafe.model.result import Protection, Report
    from tabsafe.model.table import Table
    from tabsafe.model.release_cells import ReleaseCells

__all__ = ["Barnardisation", "barnardise"]


def barnardise(counts: np.ndarray, p: float, rng: np.random.Generator) -> np.ndarray:
    """The Barnardised values of inner cells: each non-zero count +1 with probability ``p/2``,
    −1 with ``p/2``, unchanged with ``1 − p``; zeros unchanged (000 §5.3).

    >>> barnardise(np.array([0, 4, 1]), 0.0, np.random.default_rng(1)).tolist()
    [0, 4, 1]
    """
    counts = np.asarray(counts, dtype=np.int64)
    u = rng.random(counts.size)
    step = np.where(u < p / 2, -1, np.where(u < p, 1, 0))
    return np.where(counts != 0, counts + step, counts)


@dataclass(frozen=True, kw_only=True)
class Barnardisation(TableMethod):
    """Barnardisation: non-zero inner cells +1, 0 or −1 at random, totals from them (000 §5.3).

    Each non-zero inner cell independently gets +1 with probability ``p/2``, −1 with ``p/2`` and
    keeps its value with ``1 − p``; zero cells are not adjusted. Margins and subtotals are the sums
    of the perturbed inner cells: the table is additive, but its totals differ from the true ones
    and from other tables' (the method offers some protection against differencing, not
    consistency). How many cells changed is kept private: the handbook says the proportion of
    cells modified is not revealed to users.

    Attributes:
        p: probability that a non-zero inner cell changes (half of the changes up, half down); 0
            leaves the table as it is. Typically small.
    """

    name: ClassVar[str] = "barnardisation"
    #: margins are sums of the perturbed inner cells
    declared: ClassVar[Capabilities] = Capabilities(random=True, additive=True, joint=True)

    p: float = parameter(check=Real(min=0, max=1))

    @classmethod
    def examples(cls) -> Examples:
        return Examples(typical=(cls(p=0.2), cls(p=1.0)), identity=cls(p=0.0))

    def published_distribution(self, n: int) -> dict[int, float]:
        """``P(published | n)`` of an inner cell (the :class:`~tabsafe.method.CellDistribution`
        capability): ``n ± 1`` with ``p/2`` each, ``n`` with ``1 − p``; a zero stays zero
        (000 §5.3). Margins are sums of perturbed inner cells, not drawn on their own."""
        n, p = int(n), float(self.p)
        if n == 0 or p == 0.0:
            return {n: 1.0}
        dist = {n - 1: p / 2, n + 1: p / 2}
        if p < 1.0:
            dist[n] = 1.0 - p
        return dist

    def protect_release(self, cells: ReleaseCells, *, seed: int | None = None) -> tuple[tuple[Protection, ...], Report]:
        """Protect the tables of a release together (issue #31): the finest cells of the release
        perturbed once, every table's cells their sums (:mod:`tabsafe.model.finest`): a shared
        cell has one value in every table, and every table is additive."""
        from tabsafe.model.finest import protect_finest

        return protect_finest(self, cells, seed=seed)

    def apply(self, table: Table, seed: int | None) -> Outcome:
        """Perturb the non-zero inner cells, then every aggregate as their sum."""
        counts = np.asarray(table.counts, dtype=np.int64)
        inner = np.flatnonzero(table.leaf_mask & (counts != 0))
        new_inner = barnardise(counts[inner], self.p, np.random.default_rng(seed))
        cells, released = totals_from_inner(table, table.ids[inner], new_inner)
        original = cells.counts
        changed = int(np.count_nonzero(new_inner != counts[inner]))
        private: dict[str, Any] = {
            "inner_cells_drawn": int(inner.size),
            "inner_cells_changed": changed,
            "share_of_inner_cells_changed": round(changed / inner.size, 4) if inner.size else 0.0,
            "max_abs_deviation": int(np.abs(released - original).max(initial=0)),
            "grand_total_deviation": int(released[0] - original[0]) if cells.n_stored and cells.ids[0] == 0 else 0,
        }
        return Outcome(
            cells=cells, release={"count": released}, figures={"cells": cells.n_cells},
            private=private,
            notes=("margins are sums of the perturbed inner cells: the table is additive, its totals are perturbed",),
        )
