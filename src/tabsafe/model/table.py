"""The table: the cells of a cross-classification that exist, margins and subtotals included.

A :class:`Table` is spanned by :class:`Dimension` s (a variable and its hierarchy). Its *grid* is
every combination of one code per dimension, where a code is a leaf, a subtotal or the total
(METHODS.md §1), in canonical order: row-major over each hierarchy's display order, the last
dimension varying fastest. A cell's *id* is its place in that order, the mixed-radix number of its
code positions.

A table **stores the cells that exist** — sorted ids and one read-only array per value column —
and implies the rest: a cell that is not stored is zero in every value column. Tabulation stores
the cells with records, so a national table of 55 million grid cells that is 90% zeros costs
what its data cost. Methods that need the whole grid (controlled rounding, secondary suppression)
ask for :meth:`Table.densify`, behind a size guard; its stored rows are then the grid itself, so
row numbers and cell ids agree.

Value columns: ``count`` and others a tabulation or a method adds (``sum_<var>``, ``ckey``,
``ckey_int``…). Whether a column may be published is not a matter of its name: a method's
:class:`~tabsafe.model.result.Protection` keeps published and evaluation values in different
types. Tables are values: every array is read-only and methods return new tables.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from tabsafe.errors import InputError, TooLargeError
from tabsafe.model.hierarchy import Hierarchy

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    import pyarrow as pa
    import scipy.sparse as sp

#: The largest grid a dense view is built for unless a caller allows more (8 bytes a cell and
#: column: 400 MB per column at this size).
MAX_DENSE_CELLS = 50_000_000
#: the ``meta`` key naming a table's main value column when it is not ``count``
VALUE_COLUMN = "value_column"


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

    ``total_rows[r]`` is the cell id of the aggregate cell of relation ``r``; its children are
    ``child_rows[child_ptr[r]:child_ptr[r+1]]`` (CSR layout). Ids are grid ids.
    """

    dimension: int
    total_rows: np.ndarray
    child_ptr: np.ndarray
    child_rows: np.ndarray


def _frozen(arr: np.ndarray) -> np.ndarray:
    arr = np.asarray(arr)
    base = arr
    frozen = not arr.flags.writeable
    while frozen and isinstance(base.base, np.ndarray):
        base = base.base
        frozen = not base.flags.writeable
    if not frozen:
        # a copy: the caller keeps its own (writable) array, the table one that nobody can change
        arr = arr.copy()
        arr.setflags(write=False)
    return arr


def _view(arr: np.ndarray) -> np.ndarray:
    v = arr.view()
    v.setflags(write=False)
    return v


def freeze(value: Any) -> Any:
    """A deeply immutable copy of plain data: mappings become read-only, lists tuples."""
    if isinstance(value, Mapping):
        return MappingProxyType({str(k): freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    if isinstance(value, set):
        return frozenset(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """Plain (JSON-ready) data from :func:`freeze`'s result."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, (tuple, frozenset)):
        return [thaw(v) for v in value]
    return value


class Table:
    """The stored cells of a table, margins included, as an immutable value.

    Attributes:
        dimensions: the spanning variables, in column order.
        ids: the stored cells' grid ids, sorted, read-only.
        meta: provenance (filter, source, engine, key…), read-only. ``meta["value_column"]``
            names the table's main value column when it is not ``count`` (a magnitude release
            publishes ``sum_<variable>`` and no count: issue #29).

    >>> from tabsafe.model.hierarchy import Hierarchy
    >>> d = Dimension("sex", Hierarchy.flat(["1", "2"]))
    >>> t = Table.from_cells([d], np.array([0, 2]), {"count": np.array([5, 5])})
    >>> int(t.value(sex="2")), int(t.value(sex="1")), t.n_cells, t.n_stored
    (5, 0, 3, 2)
    """

    dimensions: tuple[Dimension, ...]
    ids: np.ndarray
    meta: Mapping[str, Any]

    def __init__(
        self,
        dimensions: Sequence[Dimension],
        ids: np.ndarray,
        values: Mapping[str, np.ndarray],
        meta: Mapping[str, Any] | None = None,
        *,
        _checked: bool = False,
    ) -> None:
        dims = tuple(dimensions)
        names = [d.variable for d in dims]
        if len(set(names)) != len(names):
            raise InputError(f"a variable appears twice in the table: {', '.join(names)}")
        ids = np.asarray(ids, dtype=np.int64)
        if not _checked:
            if ids.ndim != 1:
                raise ValueError("cell ids must be one-dimensional")
            n = _grid_size(dims)
            if ids.size and (ids[0] < 0 or ids[-1] >= n or np.any(np.diff(ids) <= 0)):
                raise ValueError("cell ids must be sorted, unique and within the grid")
        vals: dict[str, np.ndarray] = {}
        for name, arr in values.items():
            if name in names:
                raise ValueError(f"{name!r} is a dimension, not a value column")
            arr = np.asarray(arr)
            if arr.shape != ids.shape:
                raise ValueError(f"column {name!r} has shape {arr.shape}, expected {ids.shape}")
            vals[name] = _frozen(arr)
        main = (meta or {}).get(VALUE_COLUMN, "count")
        if main not in vals:
            raise ValueError(f"a table needs its value column {main!r}")
        object.__setattr__(self, "dimensions", dims)
        object.__setattr__(self, "ids", _frozen(ids))
        object.__setattr__(self, "_values", MappingProxyType(vals))
        object.__setattr__(self, "meta", freeze(dict(meta or {})))

    def __setattr__(self, name: str, value: Any) -> None:
        if name in {"dimensions", "ids", "_values", "meta"}:
            raise AttributeError(f"a Table is immutable: cannot set {name!r}")
        object.__setattr__(self, name, value)  # cached properties

    def __delattr__(self, name: str) -> None:
        raise AttributeError("a Table is immutable")

    # ----------------------------------------------------------------- construction
    @classmethod
    def from_cells(
        cls,
        dimensions: Sequence[Dimension],
        ids: np.ndarray,
        values: Mapping[str, np.ndarray],
        meta: Mapping[str, Any] | None = None,
        *,
        sort: bool = False,
    ) -> Table:
        """A table of the given cells (ids sorted and unique unless ``sort``)."""
        ids = np.asarray(ids, dtype=np.int64)
        if sort:
            # the ids of a table are unique (a duplicate is refused below), so every sort gives
            # the same order: the default sort, at half the stable one's cost
            order = np.argsort(ids)
            ids = ids[order]
            values = {k: np.asarray(v)[order] for k, v in values.items()}
            if ids.size > 1 and np.any(ids[1:] == ids[:-1]):
                raise ValueError("a cell appears twice")
        return cls(dimensions, ids, values, meta)

    @classmethod
    def from_grid(
        cls,
        dimensions: Sequence[Dimension],
        values: Mapping[str, np.ndarray],
        meta: Mapping[str, Any] | None = None,
    ) -> Table:
        """A dense table: one entry per grid cell, in canonical order."""
        dims = tuple(dimensions)
        n = _grid_size(dims)
        return cls(dims, np.arange(n, dtype=np.int64), values, meta, _checked=True)

    #: the grid constructor under its former name
    from_arrays = from_grid

    @classmethod
    def from_positions(
        cls,
        dimensions: Sequence[Dimension],
        positions: Sequence[np.ndarray],
        values: Mapping[str, np.ndarray],
        meta: Mapping[str, Any] | None = None,
    ) -> Table:
        """A table of the cells at the given code positions (one array per dimension)."""
        dims = tuple(dimensions)
        strides = _strides(tuple(len(d) for d in dims))
        ids = np.zeros(len(positions[0]) if positions else 1, dtype=np.int64)
        for pos, stride in zip(positions, strides):
            ids += np.asarray(pos, dtype=np.int64) * stride
        return cls.from_cells(dims, ids, values, meta, sort=True)

    def with_values(self, **columns: np.ndarray | None) -> Table:
        """A new table with the same cells and some value columns replaced, added, or (``None``)
        dropped."""
        vals = dict(self._values)
        for name, arr in columns.items():
            if arr is None:
                vals.pop(name, None)
            else:
                vals[name] = arr
        return Table(self.dimensions, self.ids, vals, self.meta, _checked=True)

    def select(self, columns: Iterable[str]) -> Table:
        """A new table with only the given value columns (``count`` first if kept)."""
        cols = list(columns)
        missing = [c for c in cols if c not in self._values]
        if missing:
            raise InputError(f"the table has no column {missing[0]!r}")
        return Table(self.dimensions, self.ids, {c: self._values[c] for c in cols}, self.meta, _checked=True)

    def with_meta(self, **meta: Any) -> Table:
        return Table(self.dimensions, self.ids, self._values, {**thaw(self.meta), **meta}, _checked=True)

    def take(self, mask: np.ndarray) -> Table:
        """The stored cells where ``mask`` is true (others become implied zeros)."""
        mask = np.asarray(mask, dtype=bool)
        return Table(self.dimensions, self.ids[mask], {k: v[mask] for k, v in self._values.items()}, self.meta,
                     _checked=True)

    # ----------------------------------------------------------------- shape and codes
    @property
    def variables(self) -> tuple[str, ...]:
        return tuple(d.variable for d in self.dimensions)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(d) for d in self.dimensions)

    @property
    def n_cells(self) -> int:
        """Cells of the grid (stored or implied)."""
        return _grid_size(self.dimensions)

    @property
    def n_stored(self) -> int:
        """Cells stored."""
        return int(self.ids.size)

    @property
    def is_dense(self) -> bool:
        return self.n_stored == self.n_cells

    @property
    def value_columns(self) -> tuple[str, ...]:
        return tuple(self._values)

    def has(self, column: str) -> bool:
        return column in self._values

    @property
    def value_column(self) -> str:
        """The main value column: ``count``, or the one ``meta["value_column"]`` names."""
        return str(self.meta.get(VALUE_COLUMN, "count"))

    @property
    def counts(self) -> np.ndarray:
        """The main value column of the stored cells (``count`` unless :attr:`value_column`
        names another), read-only."""
        return _view(self._values[self.value_column])

    def column(self, name: str) -> np.ndarray:
        """A value column of the stored cells (read-only)."""
        try:
            return _view(self._values[name])
        except KeyError:
            raise InputError(f"the table has no column {name!r}; it has {', '.join(self._values)}") from None

    def dimension(self, variable: str) -> Dimension:
        for d in self.dimensions:
            if d.variable == variable:
                return d
        raise InputError(f"unknown variable {variable!r}; the table has {', '.join(self.variables)}")

    def axis(self, variable: str) -> int:
        return self.variables.index(self.dimension(variable).variable)

    @cached_property
    def strides(self) -> tuple[int, ...]:
        return _strides(self.shape)

    def positions(self, axis: int) -> np.ndarray:
        """For every stored cell, the position of its code in dimension ``axis``'s display order."""
        return _view(self._positions[axis])

    @cached_property
    def _positions(self) -> tuple[np.ndarray, ...]:
        out = []
        if self.is_dense:
            # the grid in canonical order: each dimension's positions repeat in blocks
            outer = 1
            for stride, size in zip(self.strides, self.shape):
                dtype = np.int16 if size < 2**15 else np.int32
                out.append(_frozen(np.tile(np.repeat(np.arange(size, dtype=dtype), stride), outer)))
                outer *= size
            return tuple(out)
        for stride, size in zip(self.strides, self.shape):
            pos = self.ids // stride if stride > 1 else self.ids
            if size < self.n_cells // max(stride, 1):
                pos = pos % size
            out.append(_frozen(pos.astype(np.int32)))
        return tuple(out)

    def cell_id(self, codes: Mapping[str, str] | Sequence[str]) -> int:
        """The grid id of the cell with the given codes (by variable or in dimension order)."""
        if isinstance(codes, Mapping):
            unknown = [v for v in codes if v not in self.variables]
            if unknown:
                raise InputError(f"unknown variable {unknown[0]!r}; the table has {', '.join(self.variables)}")
            codes = [codes[v] if v in codes else self.dimension(v).hierarchy.total for v in self.variables]
        cell = 0
        for d, stride, code in zip(self.dimensions, self.strides, codes):
            try:
                cell += d.hierarchy.position[str(code)] * stride
            except KeyError:
                raise InputError(f"code {code!r} is not a code of {d.variable!r}") from None
        return cell

    #: former name: in a dense table a cell's row is its id
    row_of = cell_id

    def rows_of(self, ids: np.ndarray) -> np.ndarray:
        """The stored row of each grid id, or -1 where the cell is not stored."""
        ids = np.asarray(ids, dtype=np.int64)
        if self.is_dense:
            return ids.copy()
        pos = np.searchsorted(self.ids, ids)
        pos = np.minimum(pos, max(self.ids.size - 1, 0))
        found = (self.ids.size > 0) & (self.ids[pos] == ids) if self.ids.size else np.zeros(ids.shape, bool)
        return np.where(found, pos, -1)

    def value(self, column: str | None = None, **codes: str) -> Any:
        """The value of one cell, e.g. ``t.value(sex='1', age='Total')``; an omitted variable is
        at its total; a cell that is not stored is 0."""
        row = int(self.rows_of(np.array([self.cell_id(codes)]))[0])
        arr = self.column(self.value_column if column is None else column)
        if row < 0:
            return arr.dtype.type(0) if arr.dtype.kind in "iufb" else None
        return arr[row]

    @cached_property
    def leaf_mask(self) -> np.ndarray:
        """True for stored inner cells (every code a leaf)."""
        mask = np.ones(self.n_stored, dtype=bool)
        for axis, d in enumerate(self.dimensions):
            is_leaf = np.array([d.hierarchy.is_leaf(c) for c in d.hierarchy.order])
            mask &= is_leaf[self._positions[axis]]
        return _frozen(mask)

    # ----------------------------------------------------------------- dense views
    def grid(self, column: str | None = None, *, fill: Any = 0, max_cells: int = MAX_DENSE_CELLS) -> np.ndarray:
        """A value column over the whole grid (implied cells ``fill``), behind a size guard."""
        self._guard(max_cells)
        column = self.value_column if column is None else column
        arr = self._values.get(column)
        if arr is None:
            self.column(column)  # raises
        if self.is_dense:
            return _view(arr)  # type: ignore[arg-type]
        out = np.full(self.n_cells, fill, dtype=np.result_type(arr.dtype, np.asarray(fill).dtype))  # type: ignore[union-attr]
        out[self.ids] = arr
        out.setflags(write=False)
        return out

    def densify(self, *, max_cells: int = MAX_DENSE_CELLS) -> Table:
        """The same table storing every grid cell (implied cells as zeros), behind a size guard."""
        if self.is_dense:
            return self
        self._guard(max_cells)
        vals = {}
        for name, arr in self._values.items():
            fill = np.nan if arr.dtype.kind == "f" and name.startswith(("mean_",)) else 0
            out = np.zeros(self.n_cells, dtype=arr.dtype) if arr.dtype.kind in "iub" else np.full(
                self.n_cells, fill, dtype=arr.dtype if arr.dtype.kind == "f" else object)
            out[self.ids] = arr
            out.setflags(write=False)  # ours alone: the table need not copy it
            vals[name] = out
        ids = np.arange(self.n_cells, dtype=np.int64)
        ids.setflags(write=False)
        return Table(self.dimensions, ids, vals, self.meta, _checked=True)

    def sparse(self, column: str | None = None) -> Table:
        """The stored cells where ``column`` is not zero."""
        return self.take(self.column(self.value_column if column is None else column) != 0)

    def _guard(self, max_cells: int) -> None:
        if self.n_cells > max_cells:
            shape = " × ".join(f"{d.variable}({len(d)})" for d in self.dimensions)
            raise TooLargeError(
                f"table {shape} has {self.n_cells:,} grid cells; a method that needs every cell of the grid "
                f"is limited to {max_cells:,}"
            )

    # ----------------------------------------------------------------- additive structure
    def relations(self) -> list[Relation]:
        """Every additive relation of the grid, one :class:`Relation` block per dimension.

        Along a dimension, for every non-leaf code ``c`` and every combination of codes of the
        other dimensions (margins included), cell(c, …) = Σ cell(child, …). These are the
        constraints of controlled rounding (000 §5.5.1) and of secondary suppression (000 §5.3).
        Ids are grid ids (the rows of a dense table).
        """
        out = []
        shape = self.shape
        for axis, d in enumerate(self.dimensions):
            h = d.hierarchy
            parents = [p for p in range(len(h)) if not h.is_leaf(h.order[p])]
            kids = [[h.position[c] for c in h.children(h.order[p])] for p in parents]
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
        """The sparse matrix ``A`` with ``A @ x = 0`` exactly when the grid vector ``x`` is additive.

        One row per relation: +1 at the aggregate cell, −1 at each of its children.
        """
        import scipy.sparse as sp

        self._guard(MAX_DENSE_CELLS)
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

    def is_additive(self, column: str | None = None) -> bool:
        x = self.grid(column)  # None: the main value column
        return not np.any(self.additivity() @ x)

    # ----------------------------------------------------------------- views
    def code_arrays(self, *, zeros: bool = False) -> list[pa.Array]:
        """The codes of the stored cells per dimension, as Arrow dictionary arrays (no Python
        strings are made: the dictionary is the codelist, the indices the positions)."""
        import pyarrow as pa

        from tabsafe._arrow import from_numpy, strings

        out = []
        for axis, d in enumerate(self.dimensions):
            pos = self._positions[axis]
            # positions are valid indices by construction: no per-element check
            out.append(pa.DictionaryArray.from_arrays(from_numpy(pos.astype(np.int32)), strings(d.hierarchy.order),
                                                      safe=False))
        return out

    def to_arrow(self, columns: Iterable[str] | None = None) -> pa.Table:
        """Dimension columns (dictionary-encoded codes) and the chosen value columns."""
        from tabsafe._arrow import table

        from tabsafe._arrow import decimals

        cols = list(self.value_columns if columns is None else columns)
        arrays: dict[str, Any] = dict(zip(self.variables, self.code_arrays()))
        digits = self.meta.get("sum_digits")
        for c in cols:
            arr = self.column(c)
            if c.startswith("sum_") and isinstance(digits, int) and arr.dtype.kind == "f":
                # sums tabulated as exact decimals are written as decimals (407597724.48, not
                # 4.0759772448e+08); perturbed sums are not exact decimals and stay floats
                units = np.round(arr * 10**digits)
                if np.all(np.isfinite(arr)) and np.all(np.abs(units) < 2**53) and np.array_equal(units / 10**digits, arr):
                    arrays[c] = decimals(units.astype(np.int64), digits)
                    continue
            arrays[c] = _arrow_column(arr)
        return table(arrays)

    def to_frame(self, columns: Iterable[str] | None = None) -> pd.DataFrame:
        """A copy of the stored cells with the dimension columns (codes) and the chosen value columns."""
        import pandas as pd

        frame = self.to_arrow(columns).to_pandas()
        for v in self.variables:
            frame[v] = frame[v].astype(pd.CategoricalDtype(list(self.dimension(v).hierarchy.order)))
        return frame

    def __repr__(self) -> str:
        dims = " × ".join(f"{d.variable}({len(d)})" for d in self.dimensions)
        return (f"<Table {dims}: {self.n_stored:,} of {self.n_cells:,} cells stored; "
                f"columns {', '.join(self.value_columns)}>")


def _arrow_column(arr: np.ndarray) -> Any:
    """An Arrow array of a value column: NaN in a whole-number float column is a missing value
    (a suppressed count), written as an empty field."""
    import pyarrow as pa

    from tabsafe._arrow import from_numpy, strings

    if arr.dtype.kind == "f":
        nan = np.isnan(arr)
        finite = arr[~nan]
        if nan.any() and (finite.size == 0 or np.all(finite == np.round(finite))):
            return from_numpy(np.where(nan, 0, arr).astype(np.int64), mask=nan)
        return from_numpy(arr, mask=nan if nan.any() else None)
    if arr.dtype.kind in "OUS":
        items = arr.tolist()
        if all(isinstance(x, str) for x in items):
            return strings(items)
        return pa.array(items)
    return from_numpy(arr)


def _strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides = []
    acc = 1
    for size in reversed(shape):
        strides.append(acc)
        acc *= size
    return tuple(reversed(strides))


def fill_aggregates(grid: np.ndarray, hierarchies: Sequence[Hierarchy]) -> np.ndarray:
    """``grid`` (one axis per hierarchy, each in display order) with every aggregate cell set to
    the sum of its children, in place, and returned: from the inner cells alone, whatever the
    aggregate cells held (METHODS.md §1: margins and subtotals are sums of inner cells).

    Axis by axis, each family bottom-up: after axis ``k`` every cell that aggregates only along
    axes up to ``k`` is complete, so the last axis completes the grid. Sums are exact in the
    grid's dtype (int64 for counts)."""
    if grid.ndim != len(hierarchies) or grid.shape != tuple(len(h) for h in hierarchies):
        raise ValueError(f"grid of shape {grid.shape} does not match the hierarchies")
    for axis, h in enumerate(hierarchies):
        for parent, kids in reversed(h.families):
            # a slice (a flat codelist's leaves, most families) is a view; a list of positions copies
            lo, hi = kids[0], kids[-1] + 1
            sel: slice | list[int] = slice(lo, hi) if hi - lo == len(kids) else list(kids)
            src: list[Any] = [slice(None)] * grid.ndim
            src[axis] = sel
            dst: list[Any] = [slice(None)] * grid.ndim
            dst[axis] = parent
            grid[tuple(dst)] = grid[tuple(src)].sum(axis=axis)
    return grid


def _grid_size(dims: Sequence[Dimension]) -> int:
    n = 1
    for d in dims:
        n *= len(d)
    return n


def cell_name(table: Table, cell: int) -> str:
    """``(area=A1, sex=2)`` for grid id ``cell`` of ``table``."""
    parts = []
    rest = int(cell)
    for d, stride in zip(table.dimensions, table.strides):
        pos, rest = divmod(rest, stride)
        parts.append(f"{d.variable}={d.hierarchy.order[pos]}")
    return "(" + ", ".join(parts) + ")"
