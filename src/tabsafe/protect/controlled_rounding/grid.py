"""The grid controlled rounding works on: every cell of a dense table and its additive families.

Controlled rounding (seed 000 §5.5.1) constrains every cell — inner cells, subtotals and totals —
so it needs the whole grid: :meth:`Grid.of` densifies the table (behind the Table's size guard)
and keeps it. Shape, strides and the additivity matrix are the Table's own (canonical order,
:meth:`Table.additivity`); this module adds what the rounding strategies need on top: each
dimension's families ``(parent, children)`` bottom-up for aggregation, its tree as arrays for the
neighbourhood search, masks of slices, and which relations a partial program can keep.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp

from tabsafe.model.table import Table, fill_aggregates

__all__ = ["Family", "Grid", "Tree"]

#: One additive relation family of a dimension: (parent position, child positions).
Family = tuple[int, tuple[int, ...]]


@dataclass(frozen=True, eq=False)
class Tree:
    """One dimension's hierarchy as arrays: the parent of each code position (−1 for the root)
    and the leaf positions under each code."""

    parent: np.ndarray
    leaves_under: tuple[np.ndarray, ...]


@dataclass(frozen=True, eq=False)
class Grid:
    """A dense table and its additive structure, for controlled rounding.

    Attributes:
        table: the table with every grid cell stored (row ``i`` is grid cell ``i``).
        families: per dimension, its families ``(parent, children)`` in display order (the
            root's family first).
    """

    table: Table
    families: tuple[tuple[Family, ...], ...]

    @classmethod
    def of(cls, table: Table) -> Grid:
        """The grid of ``table`` (densified: implied cells become stored zeros)."""
        dense = table.densify()
        return cls(dense, tuple(d.hierarchy.families for d in dense.dimensions))

    @property
    def shape(self) -> tuple[int, ...]:
        return self.table.shape

    @property
    def strides(self) -> tuple[int, ...]:
        return self.table.strides

    @property
    def size(self) -> int:
        return self.table.n_cells

    @property
    def counts(self) -> np.ndarray:
        """The original counts of every cell, as int64."""
        return np.asarray(self.table.counts, dtype=np.int64)

    @cached_property
    def additivity(self) -> sp.csc_matrix:
        """``A`` with ``A @ x = 0`` iff ``x`` is additive (the Table's, by columns: programs take
        the columns of their free cells)."""
        return self.table.additivity().tocsc()

    @cached_property
    def _members(self) -> sp.csr_matrix:
        return abs(self.additivity).tocsr()

    def closed_relations(self, known: np.ndarray) -> np.ndarray:
        """Mask of the relations whose every cell is in the boolean mask ``known`` (the relations
        a program over part of the grid can keep)."""
        members = self._members
        return (members @ known.astype(np.float64)) == np.diff(members.indptr)

    def cells(self, fixed: Mapping[int, int | Sequence[int]]) -> np.ndarray:
        """Mask of the cells whose code position on each axis of ``fixed`` is the given one (or
        one of the given ones)."""
        idx: list[object] = [slice(None)] * len(self.shape)
        for ax, p in fixed.items():
            idx[ax] = p if isinstance(p, (int, np.integer)) else list(p)
        m = np.zeros(self.shape, dtype=bool)
        if all(isinstance(i, (slice, int, np.integer)) for i in idx):
            m[tuple(idx)] = True
        else:
            # several lists of positions: mark their outer product one axis at a time
            sel = np.ones(self.shape, dtype=bool)
            for ax, i in enumerate(idx):
                if isinstance(i, slice):
                    continue
                keep = np.zeros(self.shape[ax], dtype=bool)
                keep[i] = True
                sel &= keep.reshape([-1 if a == ax else 1 for a in range(len(self.shape))])
            m = sel
        return m.ravel()

    def aggregate(self, inner: np.ndarray) -> np.ndarray:
        """Every aggregate cell filled with the sum of its inner cells (the aggregates of
        ``inner`` are ignored): RAPID and small-cell adjustment make margins this way."""
        x = np.array(inner, dtype=np.int64).reshape(self.shape)
        return fill_aggregates(x, [d.hierarchy for d in self.table.dimensions]).ravel()

    @cached_property
    def trees(self) -> tuple[Tree, ...]:
        """Each dimension's :class:`Tree`."""
        out = []
        for axis, fams in enumerate(self.families):
            n = self.shape[axis]
            parent = np.full(n, -1, dtype=np.int64)
            kids_of = dict(fams)
            for p, kids in fams:
                parent[list(kids)] = p
            leaves: list[np.ndarray] = [np.zeros(0, dtype=np.int64)] * n
            # display order lists a parent before its children: fill bottom-up
            for code in reversed(range(n)):
                kids = kids_of.get(code)
                leaves[code] = (np.concatenate([leaves[k] for k in kids]) if kids
                                else np.array([code], dtype=np.int64))
            out.append(Tree(parent, tuple(leaves)))
        return tuple(out)
