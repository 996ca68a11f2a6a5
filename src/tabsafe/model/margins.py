"""What the cell perturbation family shares: inner cells, margins as sums of inner cells on a
sparse table, and the names of margins a user asks to keep.

Barnardisation, the ABS cell perturbation and the stochastic perturbation change inner cells
only and publish every margin and subtotal as the sum of the perturbed inner cells under it
(000 §5.3; 001 §4; 002 §3.2.2). :func:`rollup` computes those sums on the stored cells of a
sparse table, hierarchy level by hierarchy level, without building the grid: a cell's ancestors
along one variable are found from its code position, so the cost is that of the cells that
exist. The additivity method and the stochastic method's fitting step name the margins to keep
with :class:`MarginList` (``area*sex,age``: the area × sex margin and the age margin).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tabsafe.errors import InputError, param
from tabsafe.params import Constraint

if TYPE_CHECKING:  # pragma: no cover
    from tabsafe.model.hierarchy import Hierarchy
    from tabsafe.model.table import Dimension, Table

__all__ = ["MarginList", "ancestors", "margin_mask", "parent_positions", "rollup", "sum_by_id", "totals_from_inner"]


def parent_positions(h: Hierarchy) -> np.ndarray:
    """For every code position of ``h`` (display order), the position of its parent; -1 for the
    total."""
    out = np.full(len(h), -1, dtype=np.int64)
    for code, parent in h.parents.items():
        out[h.position[code]] = h.position[parent]
    return out


def sum_by_id(ids: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique ids and the sum of ``values`` over each (exact for integers)."""
    if ids.size == 0:
        return ids.astype(np.int64), values
    uniq, inverse = np.unique(ids, return_inverse=True)
    # bincount sums in float64: exact for integers below 2**53, far above any count
    sums = np.bincount(inverse, weights=values.astype(np.float64, copy=False), minlength=uniq.size)
    if values.dtype.kind in "iub":
        return uniq, np.rint(sums).astype(np.int64)
    return uniq, sums


def rollup(dimensions: Sequence[Dimension], ids: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every cell above the given cells with the sum of their values, the given cells included.

    ``ids`` are grid ids of cells (normally inner cells); the result holds each of them and every
    margin or subtotal cell that has one of them below it (along any combination of variables),
    with the sum of the values below it: the additive completion of the inner cells (000 §5.3:
    "table totals are added up from the perturbed internal cells"). Sorted by id.

    >>> from tabsafe.model.hierarchy import Hierarchy
    >>> from tabsafe.model.table import Dimension
    >>> dims = [Dimension("a", Hierarchy.flat(["x", "y"])), Dimension("b", Hierarchy.flat(["u", "v"]))]
    >>> ids, sums = rollup(dims, np.array([4, 8]), np.array([2, 5]))  # (x, u) and (y, v)
    >>> ids.tolist(), sums.tolist()
    ([0, 1, 2, 3, 4, 6, 8], [7, 2, 5, 2, 2, 5, 5])
    """
    return _climb(dimensions, np.asarray(ids, dtype=np.int64), np.asarray(values), sum_by_id)


def ancestors(dimensions: Sequence[Dimension], ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every (cell strictly above, index into ``ids``) pair: the margins and subtotals each cell
    adds to, one pair per cell above it (not merged, unlike :func:`rollup`)."""
    ids = np.asarray(ids, dtype=np.int64)
    above, src = _climb(dimensions, ids, np.arange(ids.size, dtype=np.int64), lambda i, s: (i, s))
    strict = above != ids[src]
    return above[strict], src[strict]


def _climb(dimensions: Sequence[Dimension], ids: np.ndarray, carried: np.ndarray,
           merge: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Walk every cell up each variable's hierarchy in turn, carrying a value per cell: the
    cells reached (itself included) with their carried values, ``merge`` applied after each step
    (summing duplicates keeps a rollup small; keeping them lists every ancestor pair)."""
    shape = [len(d) for d in dimensions]
    strides = np.cumprod([1] + shape[::-1])[:-1][::-1]
    cur_ids, cur_vals = merge(ids, carried)
    for d, stride, size in zip(dimensions, strides, shape):
        parent = parent_positions(d.hierarchy)
        pieces_ids, pieces_vals = [cur_ids], [cur_vals]
        level_ids, level_vals = cur_ids, cur_vals
        while level_ids.size:
            pos = (level_ids // int(stride)) % size
            par = parent[pos]
            up = par >= 0
            if not up.any():
                break
            level_ids, level_vals = merge(level_ids[up] + (par[up] - pos[up]) * int(stride), level_vals[up])
            pieces_ids.append(level_ids)
            pieces_vals.append(level_vals)
        cur_ids, cur_vals = merge(np.concatenate(pieces_ids), np.concatenate(pieces_vals))
    return cur_ids, cur_vals


def totals_from_inner(table: Table, inner_ids: np.ndarray, inner_values: np.ndarray) -> tuple[Table, np.ndarray]:
    """Every cell's value as the sum of the given inner values below it.

    Returns the cells — the input table, extended by any cell the inner values reach that it does
    not store (with count 0) — and the sums aligned with them (0 where no given inner cell lies
    below).
    """
    from tabsafe.model.table import Table

    ids, sums = rollup(table.dimensions, inner_ids, inner_values)
    cells = table
    if ids.size and np.any(table.rows_of(ids) < 0):
        all_ids = np.union1d(table.ids, ids)
        src = table.rows_of(all_ids)
        counts = np.zeros(all_ids.size, dtype=table.counts.dtype)
        counts[src >= 0] = table.counts[src[src >= 0]]
        cells = Table(table.dimensions, all_ids, {"count": counts}, dict(table.meta), _checked=True)
    out = np.zeros(cells.n_stored, dtype=sums.dtype)
    out[cells.rows_of(ids)] = sums
    return cells, out


# -------------------------------------------------------------------------------------------
# margins by name


class MarginList(Constraint):
    """Margins of a table by the variables that span them: ``area*sex,age`` is the area × sex
    margin (every cell whose other variables are at their total, area and sex at any code,
    subtotals and totals included) and the age margin. As JSON a list of such names."""

    allowed = "margins such as area or area*sex (several separated by commas)"
    metavar = "A*B,C"

    def check(self, name: str, value: Any) -> tuple[tuple[str, ...], ...]:
        import re

        if isinstance(value, str):
            value = [p.strip() for p in value.split(",")]
        if not isinstance(value, (list, tuple)) or not value:
            raise InputError(f"parameter {param(name)} must be {self.allowed}; got {value!r}")
        out = []
        for item in value:
            if isinstance(item, str):
                parts = tuple(p.strip() for p in item.split("*"))
            elif isinstance(item, (list, tuple)):
                parts = tuple(item)
            else:
                raise InputError(f"parameter {param(name)} must be {self.allowed}; got {value!r}")
            if not parts or any(not isinstance(p, str) or not re.match(r"^[A-Za-z_][A-Za-z0-9_.\-]*$", p)
                                for p in parts):
                raise InputError(f"parameter {param(name)} must be {self.allowed}; got {item!r}")
            if len(set(parts)) != len(parts):
                raise InputError(f"parameter {param(name)} names a variable twice in {'*'.join(parts)!r}")
            out.append(parts)
        return tuple(out)

    def to_json(self, value: Any) -> Any:
        return ["*".join(m) for m in value]


def margin_mask(table: Table, margins: Sequence[Sequence[str]], *, name: str) -> np.ndarray:
    """True for the stored cells that belong to one of ``margins`` (their variables at any code,
    every other variable at its total)."""
    mask = np.zeros(table.n_stored, dtype=bool)
    for margin in margins:
        unknown = [v for v in margin if v not in table.variables]
        if unknown:
            raise InputError(f"{param(name)} names {unknown[0]!r}, which is not a variable of the table "
                             f"({', '.join(table.variables)})")
        inside = np.ones(table.n_stored, dtype=bool)
        for axis, v in enumerate(table.variables):
            if v not in margin:
                inside &= table.positions(axis) == 0  # the total comes first in display order
        mask |= inside
    return mask
