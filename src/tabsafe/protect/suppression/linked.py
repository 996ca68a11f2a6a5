"""Linked tables: tables sharing cells, suppressed consistently (seed 000 §5.2 "linking").

:func:`release_problem` suppresses the tables of a release on the union of their own cells and
relations (:class:`tabsafe.model.release_cells.ReleaseCells`): shared cells are one cell, and the
elimination's basis is made from each table's (:func:`~.elimination.joint_basis`).
:func:`joint_table` embeds tables in the table spanned by all their variables instead (the "cover table" of
tau-ARGUS' linked-tables mode): each table's cells are cells of it (the table's codes and the
total of every variable the table lacks), its other cells are unknown to the intruder (hidden).
A shared cell is one cell, so it is suppressed in every table or in none, and an intruder who
reasons about a non-negative table of all the variables is covered too. The cover table grows
with the product of every variable's codes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tabsafe.errors import InputError
from tabsafe.model.table import Dimension, Table
from tabsafe.protect.suppression.elimination import joint_basis, table_basis
from tabsafe.protect.suppression.problem import CellSystem, Problem, Settings, cell_name
from tabsafe.model.release_cells import ReleaseCells

__all__ = ["MAX_JOINT_CELLS", "JointTable", "joint_table", "release_problem"]

MAX_JOINT_CELLS = 5_000_000


@dataclass(frozen=True, eq=False)
class JointTable:
    """Tables embedded in the table of all their variables.

    Attributes:
        table: the dense joint table; ``count`` is NaN where no table has the cell.
        cells: per table, the joint cell of each of its grid cells.
    """

    table: Table
    cells: tuple[np.ndarray, ...]

    @property
    def hidden(self) -> np.ndarray:
        """Joint cells that no table contains."""
        out = np.ones(self.table.n_cells, dtype=bool)
        for rows in self.cells:
            out[rows] = False
        return out


def joint_table(tables: Sequence[Table]) -> JointTable:
    """The table spanned by every variable of ``tables``, and where each table's cells are in it.

    A cell of a table is the cell of the joint table with the table's codes and the total of every
    variable it lacks. Shared variables must have the same hierarchy and shared cells the same
    count.
    """
    if not tables:
        raise InputError("no tables to link")
    dims: dict[str, Dimension] = {}
    for i, t in enumerate(tables):
        for d in t.dimensions:
            if d.variable in dims and dims[d.variable].hierarchy != d.hierarchy:
                raise InputError(f"table {i + 1}: variable {d.variable!r} has other codes or hierarchy than before")
            dims.setdefault(d.variable, d)
    joint_dims = tuple(dims.values())
    n = int(np.prod([len(d) for d in joint_dims], dtype=np.int64))
    if n > MAX_JOINT_CELLS:
        raise InputError(f"the linked tables span {n:,} cells together (limit {MAX_JOINT_CELLS:,}); "
                         "link fewer variables")
    counts = np.full(n, np.nan)
    shape = Table.from_grid(joint_dims, {"count": np.zeros(n)})
    strides = dict(zip(shape.variables, shape.strides))
    maps = []
    for i, t in enumerate(tables):
        dense = t.densify()
        rows = np.zeros(dense.n_cells, dtype=np.int64)
        for axis, v in enumerate(dense.variables):
            rows += dense.positions(axis).astype(np.int64) * strides[v]
        vals = np.asarray(dense.counts, dtype=np.float64)
        known = ~np.isnan(counts[rows])
        clash = known & (counts[rows] != vals)
        if clash.any():
            r = int(np.flatnonzero(clash)[0])
            raise InputError(f"table {i + 1}: cell {cell_name(dense, r)} has count {vals[r]:g}, "
                             f"another table {counts[rows[r]]:g}")
        counts[rows] = vals
        maps.append(rows)
    return JointTable(Table.from_grid(joint_dims, {"count": counts}), tuple(maps))


def release_system(cells: ReleaseCells) -> CellSystem:
    """The cells of a release as the cells secondary suppression works on (true counts)."""

    def basis(zeros_published: bool) -> list[dict[int, float]]:
        return joint_basis([table_basis(t, zeros_published) for t in cells.tables], cells.cells, cells.n_cells)

    return CellSystem(cells.combine("count"), cells.relations, cells.leaf, basis, cells.name)


def release_problem(cells: ReleaseCells, primary: np.ndarray, settings: Settings) -> Problem:
    """Secondary suppression of a release: ``primary`` over its cells (shared cells once)."""
    return Problem.build(release_system(cells), primary, settings)
