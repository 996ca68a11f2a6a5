"""The table: every cell of a cross-classification, margins and subtotals included.

A :class:`Table` is spanned by :class:`Dimension` s (a variable and its hierarchy). It always holds
the *complete grid*: one row for every combination of one code per dimension, where a code is a
leaf, a subtotal or the total (METHODS.md §1), zero cells included, in canonical order (row-major
over each hierarchy's display order, the last dimension varying fastest). Because the grid is
complete and ordered, a cell's row number is a mixed-radix number of its code positions, and the
table's additive structure (:meth:`Table.additivity`) is derived from the hierarchies alone.

Value columns: ``count`` (the value a release would publish), and optionally ``sum_<var>``
(magnitudes), ``ckey`` (cell key in [0,1)), ``ckey_int`` (its exact fixed-point integer) and
others added by methods. Tables are values: methods return new tables, never change one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from tabsafe.errors import InputError
from tabsafe.model.hierarchy import Hierarchy


@dataclass(frozen=True)
class Dimension:
    """A spanning variable of a table and the hierarchy of its codes."""

    variable: str
    hierarchy: Hierarchy

    def __len__(self) -> int:
        return len(self.hierarchy)


@dataclass(frozen=True)
class Relation:
    """One family of additive relations: along ``dimension``, cell(parent) = Σ cell(children).

    ``total_rows[r]`` is the row of the aggregate cell of relation ``r``; its children are
    ``child_rows[child_ptr[r]:child_ptr[r+1]]`` (CSR layout).
    """

    dimension: int
    total_rows: np.ndarray
    child_ptr: np.ndarray
    child_rows: np.ndarray


@dataclass(frozen=True, eq=False)
class Table:
    """All cells of a table, margins included, as an immutable value.

    Attributes:
        dimensions: the spanning variables, in column order.
        cells: a DataFrame with one categorical column per dimension (categories = display
            order) and the value columns; exactly ``prod(len(d))`` rows in canonical order.
        meta: free-form provenance (filter, source file, engine, ...).
    """

    dimensions: tuple[Dimension, ...]
    cells: pd.DataFrame
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        names = [d.variable for d in self.dimensions]
        if len(set(names)) != len(names):
            raise InputError(f"a variable appears twice in the table: {', '.join(names)}")
        if len(self.cells) != self.n_cells:
            raise ValueError(f"table has {len(self.cells)} rows, expected the full grid of {self.n_cells}")
        if "count" not in self.cells.columns:
            raise ValueError("table has no 'count' column")

    # ----------------------------------------------------------------- construction
    @classmethod
    def from_arrays(
        cls,
        dimensions: Sequence[Dimension],
        values: Mapping[str, np.ndarray],
        meta: Mapping[str, Any] | None = None,
    ) -> Table:
        """Build a table from value arrays in canonical order (one entry per grid cell)."""
        dims = tuple(dimensions)
        shape = tuple(len(d) for d in dims)
        n = int(np.prod(shape, dtype=np.int64)) if dims else 1
        columns: dict[str, Any] = {}
        inner = n
        outer = 1
        for d in dims:
            # Row-major grid: this dimension's codes repeat in blocks of the faster dimensions.
            inner //= len(d)
            dtype = np.int8 if len(d) < 128 else (np.int16 if len(d) < 32768 else np.int32)
            pos = np.tile(np.repeat(np.arange(len(d), dtype=dtype), inner), outer)
            outer *= len(d)
            dtype_cat = pd.CategoricalDtype(categories=list(d.hierarchy.order), ordered=False)
            columns[d.variable] = pd.Categorical.from_codes(pos, dtype=dtype_cat, validate=False)
        for name, arr in values.items():
            arr = np.asarray(arr)
            if arr.shape != (n,):
                raise ValueError(f"column {name!r} has shape {arr.shape}, expected ({n},)")
            columns[name] = arr
        return cls(dims, pd.DataFrame(columns), dict(meta or {}))

    def with_values(self, **columns: np.ndarray | None) -> Table:
        """A new table with some value columns replaced, added, or (with ``None``) dropped."""
        cells = self.cells.copy(deep=False)
        for name, arr in columns.items():
            if name in self.variables:
                raise ValueError(f"{name!r} is a dimension, not a value column")
            if arr is None:
                cells = cells.drop(columns=[name], errors="ignore")
            else:
                arr = np.asarray(arr)
                if arr.shape != (self.n_cells,):
                    raise ValueError(f"column {name!r} has shape {arr.shape}, expected ({self.n_cells},)")
                cells[name] = arr
        return Table(self.dimensions, cells, dict(self.meta))

    def with_meta(self, **meta: Any) -> Table:
        return Table(self.dimensions, self.cells, {**self.meta, **meta})

    # ----------------------------------------------------------------- shape and codes
    @property
    def variables(self) -> tuple[str, ...]:
        return tuple(d.variable for d in self.dimensions)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(d) for d in self.dimensions)

    @property
    def n_cells(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.dimensions else 1

    @property
    def value_columns(self) -> tuple[str, ...]:
        return tuple(c for c in self.cells.columns if c not in self.variables)

    @property
    def counts(self) -> np.ndarray:
        """The ``count`` column as a numpy array (read-only view)."""
        arr = self.cells["count"].to_numpy()
        arr = arr.view()
        arr.flags.writeable = False
        return arr

    def column(self, name: str) -> np.ndarray:
        return self.cells[name].to_numpy()

    def dimension(self, variable: str) -> Dimension:
        for d in self.dimensions:
            if d.variable == variable:
                return d
        raise InputError(f"unknown variable {variable!r}; the table has {', '.join(self.variables)}")

    def axis(self, variable: str) -> int:
        return self.variables.index(self.dimension(variable).variable)

    def positions(self, axis: int) -> np.ndarray:
        """For every cell, the position of its code in dimension ``axis``'s display order."""
        return self.cells.iloc[:, axis].cat.codes.to_numpy().astype(np.int64)

    @cached_property
    def strides(self) -> tuple[int, ...]:
        strides = []
        acc = 1
        for size in reversed(self.shape):
            strides.append(acc)
            acc *= size
        return tuple(reversed(strides))

    def row_of(self, codes: Mapping[str, str] | Sequence[str]) -> int:
        """The row number of the cell with the given codes (by variable or in dimension order)."""
        if isinstance(codes, Mapping):
            codes = [codes[v] for v in self.variables]
        row = 0
        for d, stride, code in zip(self.dimensions, self.strides, codes):
            try:
                row += d.hierarchy.position[str(code)] * stride
            except KeyError:
                raise InputError(f"code {code!r} is not a code of {d.variable!r}") from None
        return row

    def value(self, column: str = "count", **codes: str) -> Any:
        """The value of one cell, e.g. ``t.value(sex='1', age='Total')``."""
        return self.cells[column].iat[self.row_of(codes)]

    @cached_property
    def leaf_mask(self) -> np.ndarray:
        """True for inner cells (every code a leaf)."""
        mask = np.ones(self.n_cells, dtype=bool)
        for axis, d in enumerate(self.dimensions):
            is_leaf = np.array([d.hierarchy.is_leaf(c) for c in d.hierarchy.order])
            mask &= is_leaf[self.positions(axis)]
        return mask

    # ----------------------------------------------------------------- additive structure
    def relations(self) -> list[Relation]:
        """Every additive relation of the table, one :class:`Relation` block per dimension.

        Along a dimension, for every non-leaf code ``c`` and every combination of codes of the
        other dimensions (margins included), cell(c, …) = Σ cell(child, …). These are the
        constraints of controlled rounding (000 §5.5.1) and of secondary suppression (000 §5.3).
        """
        out = []
        shape = self.shape
        for axis, d in enumerate(self.dimensions):
            h = d.hierarchy
            parents = [p for p in range(len(h)) if not h.is_leaf(h.order[p])]
            kids = [[h.position[c] for c in h.children(h.order[p])] for p in parents]
            # Rows of all cells whose code on `axis` is position 0: the "base" of each fibre.
            other = list(shape)
            other[axis] = 1
            base = (np.indices(other, dtype=np.int64).reshape(len(shape), -1).T * np.array(self.strides)).sum(1)
            stride = self.strides[axis]
            n_base = base.size
            total_rows = (np.array(parents, dtype=np.int64)[:, None] * stride + base[None, :]).ravel()
            sizes = np.repeat(np.array([len(k) for k in kids], dtype=np.int64), n_base)
            ptr = np.concatenate([[0], np.cumsum(sizes)])
            child_pos = [np.array(k, dtype=np.int64) for k in kids]
            child_rows = np.concatenate(
                [(cp[None, :] * stride + base[:, None]).ravel() for cp in child_pos]
            ) if child_pos else np.zeros(0, dtype=np.int64)
            out.append(Relation(axis, total_rows, ptr, child_rows))
        return out

    def additivity(self) -> sp.csr_matrix:
        """The sparse matrix ``A`` with ``A @ x = 0`` exactly when ``x`` is additive.

        One row per relation: +1 at the aggregate cell, −1 at each of its children.
        """
        rows, cols, vals = [], [], []
        offset = 0
        for rel in self.relations():
            n_rel = rel.total_rows.size
            idx = np.arange(n_rel, dtype=np.int64) + offset
            rows += [idx, np.repeat(idx, np.diff(rel.child_ptr))]
            cols += [rel.total_rows, rel.child_rows]
            vals += [np.ones(n_rel), -np.ones(rel.child_rows.size)]
            offset += n_rel
        if offset == 0:
            return sp.csr_matrix((0, self.n_cells))
        return sp.csr_matrix(
            (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
            shape=(offset, self.n_cells),
        )

    def is_additive(self, column: str = "count") -> bool:
        x = self.cells[column].to_numpy()
        return not np.any(self.additivity() @ x)

    # ----------------------------------------------------------------- views
    def to_frame(self, columns: Iterable[str] | None = None) -> pd.DataFrame:
        """A copy of the cells with the dimension columns and the chosen value columns."""
        cols = list(self.variables) + list(self.value_columns if columns is None else columns)
        return self.cells[cols].copy()

    def __repr__(self) -> str:
        dims = " × ".join(f"{d.variable}({len(d)})" for d in self.dimensions)
        return f"<Table {dims} = {self.n_cells} cells; columns {', '.join(self.value_columns)}>"
