"""Perturbation tables (p-tables) for the cell key method (seed 000 §5.4; METHODS.md §2).

One room per concern:

* :mod:`~tabsafe.protect.ptable.params` — :class:`PTableParams`, the declared parameters of a
  generated p-table;
* :mod:`~tabsafe.protect.ptable.maxent` — :func:`generate_ptable`, maximum entropy as R
  *ptable* does it (loaded on first use of ``generate_ptable``);
* :mod:`~tabsafe.protect.ptable.dual` — one row's maximum entropy program, solved exactly
  through its dual (numpy only);
* :mod:`~tabsafe.protect.ptable.table` — :class:`PTable`, the immutable value on numpy arrays
  (checking, look-up intervals, per-row reports);
* :mod:`~tabsafe.protect.ptable.files` — the tabsafe CSV layout and the tau-ARGUS layout.

Importing this package, reading a p-table or looking noise up in it imports neither pandas
nor scipy. The plot of a p-table is an evaluation helper: :mod:`tabsafe.evaluate.ptable_plot`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tabsafe.protect.ptable.params import PTableParams
from tabsafe.protect.ptable.table import COLUMNS, PTable, RowReport

if TYPE_CHECKING:  # pragma: no cover
    from tabsafe.protect.ptable.maxent import generate_ptable

__all__ = ["COLUMNS", "PTable", "PTableParams", "RowReport", "generate_ptable"]


def __getattr__(name: str) -> Any:
    # generation is loaded when asked for, not when a p-table is only read or used
    if name == "generate_ptable":
        from tabsafe.protect.ptable.maxent import generate_ptable

        return generate_ptable
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
