"""Magnitude tables with their contributors: who contributed how much to every cell, margins included.

A business table (turnover by activity × region × size class) is protected from its
*contributors*: a competitor who knows its own turnover and the published totals must not
estimate another enterprise's turnover too closely (the handbook of Hundepool et al., ch. 4,
§4.2 "Sensitive cells in magnitude tables"). The rules and audits need more than the cell
totals: the contributions of each cell, sorted, and who made them. :class:`Contributions` keeps
them — private, for rules and audits only, never part of a release — for the whole grid of the
table (every hierarchy level of every spanning variable).

* **Contributor**: the unit a record belongs to (an enterprise); records of one contributor in
  one cell (establishments) are one contribution. Without a contributor column every record is
  its own contributor.
* **Holding**: an optional enterprise group. Rules may be applied to holdings — the
  contributions of a holding's enterprises in a cell summed — as tau-ARGUS's holding option does
  (handbook §4.2 "Holdings"). Holdings and sampling weights do not combine (§4.2, "Sampling
  weights", note): that is refused.
* **Sampling weight** (decimal): the cell value is ``Σ w x``; a contribution keeps its unweighted
  amount and its weight, so that the rules can read the weighted contributions either way the
  literature does (:mod:`tabsafe.risk.dominance`).
* **Shadow** variable: the variable the rules read (default: the response itself); **cost**
  variable: what hiding a cell costs (default: its value).
* **Request** flag: contributors that asked for protection (the request rule of foreign trade
  statistics, handbook §4.2 "Foreign trade rules").

Per cell, contributions are stored largest first by absolute shadow amount (negative values:
dominance is judged on absolute values, as GaussSuppression and the literature do, §4.2
"Negative contributions").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from tabsafe.errors import InputError
from tabsafe.model.hierarchy import Hierarchy
from tabsafe.model.table import Dimension, Table

__all__ = ["ContributionTable", "Contributions", "contributions", "gather_cells", "merge_cells"]


@dataclass(frozen=True, eq=False)
class Contributions:
    """Every cell of a magnitude table's grid with its contributions (module docstring).

    Attributes:
        dimensions: the spanning variables and their hierarchies.
        value: per grid cell, the published magnitude ``Σ w x`` (weights 1 when none).
        shadow: per grid cell, the weighted total of the shadow variable (rules read it).
        cost: per grid cell, the weighted total of the cost variable (``value`` when none).
        ptr: CSR pointers: the contributions of cell ``c`` are entries ``ptr[c]:ptr[c+1]``.
        unit: per entry, the contributor (index into ``units``), largest first within a cell.
        amount: per entry, the contributor's unweighted shadow amount in the cell.
        weight: per entry, the contributor's sampling weight (``Σ w x / Σ x`` over its records,
            of the shadow variable).
        published: per entry, what the contributor adds to the published value (``Σ w x``).
        requested: per entry, whether the contributor asked for protection.
        units: the contributor labels.
        holding_of: per contributor, its holding (index into ``holdings``), or -1.
        holdings: the holding labels (empty without holdings).
        weighted: whether sampling weights were given.
        variable: the response variable's name.
    """

    dimensions: tuple[Dimension, ...]
    value: np.ndarray
    shadow: np.ndarray
    cost: np.ndarray
    ptr: np.ndarray
    unit: np.ndarray
    amount: np.ndarray
    weight: np.ndarray
    published: np.ndarray
    requested: np.ndarray
    units: np.ndarray
    holding_of: np.ndarray
    holdings: np.ndarray
    weighted: bool
    variable: str

    @property
    def n_cells(self) -> int:
        return int(self.value.size)

    @cached_property
    def contributors(self) -> np.ndarray:
        """Per cell, the number of contributors."""
        return np.diff(self.ptr)

    @cached_property
    def empty(self) -> np.ndarray:
        """Cells without any contributor (structural zeros: nothing to protect, nothing to hide)."""
        return self.contributors == 0

    @cached_property
    def negative(self) -> bool:
        """Whether any contribution is negative (then no cell has a known lower bound of 0)."""
        return bool((self.amount < 0).any() or (self.published < 0).any())

    def cell(self, c: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The contributions of cell ``c``: (contributors, amounts, weights), largest first."""
        s = slice(int(self.ptr[c]), int(self.ptr[c + 1]))
        return self.unit[s], self.amount[s], self.weight[s]

    def table(self) -> Table:
        """The magnitude table: ``count`` (contributors) and ``sum_<variable>`` (the value) on the
        dense grid — original values, an evaluation output."""
        return Table.from_grid(self.dimensions, {
            "count": self.contributors.astype(np.int64), f"sum_{self.variable}": self.value,
        })

    def at_holdings(self) -> Contributions:
        """The same cells with each holding's enterprises as one contributor (tau-ARGUS's holding
        level); contributors without a holding stay themselves."""
        if self.holdings.size == 0:
            return self
        group = np.where(self.holding_of >= 0, self.holding_of, self.holdings.size + np.arange(self.units.size))
        labels = np.concatenate([self.holdings.astype(object), self.units.astype(object)])
        keep = np.unique(group)
        remap = np.full(labels.size, -1, dtype=np.int64)
        remap[keep] = np.arange(keep.size)
        cells = np.repeat(np.arange(self.n_cells), np.diff(self.ptr))
        return _grouped(self, cells, remap[group[self.unit]], labels[keep],
                        holding_of=np.full(keep.size, -1, dtype=np.int64), holdings=np.zeros(0, dtype=object))


class ContributionTable(Table):
    """A magnitude table that carries its contributions: what tabulation gives a method that reads
    them (:class:`tabsafe.method.Needs` ``contributors``).

    Value columns on the whole grid: ``count`` and ``sum_<variable>`` the cells' values
    (``Σ w x``: the magnitude is the table's value, so a method's evaluation ``original`` is the
    true magnitude), ``contributors`` their numbers. :attr:`contributions` is the private handle
    the rules and audits read; a table derived from this one (``densify``, ``with_values``, a
    method's release) is a plain :class:`Table` and carries no contribution on.
    """

    def __init__(self, c: Contributions, meta: Mapping[str, Any] | None = None) -> None:
        super().__init__(c.dimensions, np.arange(c.n_cells, dtype=np.int64), {
            "count": c.value, f"sum_{c.variable}": c.value, "contributors": c.contributors.astype(np.int64),
        }, meta, _checked=True)
        object.__setattr__(self, "_contributions", c)

    @property
    def contributions(self) -> Contributions:
        """Who contributed what to every cell (private: original contributions)."""
        return self._contributions  # type: ignore[no-any-return, attr-defined]


def merge_cells(c: Contributions, groups: Sequence[Sequence[int]]) -> Contributions:
    """One pseudo-cell per group of grid cells: the union of the cells' contributions, a
    contributor present in several cells of a group one contributor with its contributions summed
    (for rules on the sums a suppression pattern reveals, :mod:`tabsafe.risk.group_dominance`).

    The result's cells are the groups (its ``dimensions`` are ``c``'s, kept for reference only:
    its :meth:`~Contributions.table` does not describe it)."""
    parts = [np.arange(c.ptr[cell], c.ptr[cell + 1]) for g in groups for cell in g]
    gid = [np.full(int(c.ptr[cell + 1] - c.ptr[cell]), k, dtype=np.int64) for k, g in enumerate(groups) for cell in g]
    entries = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    cells = np.concatenate(gid) if gid else np.zeros(0, dtype=np.int64)
    amount, weight, published, requested, ptr, unit = _aggregate(
        len(groups), cells, c.unit[entries], c.amount[entries], (c.weight * c.amount)[entries], c.published[entries],
        c.requested[entries])

    def summed(x: np.ndarray) -> np.ndarray:
        return np.array([float(x[list(g)].sum()) for g in groups], dtype=np.float64)

    return Contributions(c.dimensions, summed(c.value), summed(c.shadow), summed(c.cost), ptr, unit, amount, weight,
                         published, requested, c.units, c.holding_of, c.holdings, c.weighted, c.variable)


def gather_cells(parts: Sequence[tuple[Contributions, np.ndarray]], n_cells: int) -> Contributions:
    """The contributions of a release's cells (``n_cells`` of them), each cell's taken from the
    first table holding it: ``parts`` gives each table's contributions and the release cell of each
    of its grid cells (:class:`~tabsafe.model.release_cells.ReleaseCells`). The tables must be of
    the same contributors (tabulated from the same records). The result's ``dimensions`` are the
    first table's, for reference only."""
    first = parts[0][0]
    for c, _ in parts[1:]:
        if not (np.array_equal(c.units, first.units) and np.array_equal(c.holding_of, first.holding_of)):
            raise InputError("the tables of a magnitude release must be tabulated from the same records (one data "
                             "set, no table filter that leaves contributors out)")
    owner = np.full(n_cells, -1, dtype=np.int64)
    local = np.full(n_cells, -1, dtype=np.int64)
    for i, (_, rows) in enumerate(parts):
        fresh = owner[rows] < 0
        owner[rows[fresh]] = i
        local[rows[fresh]] = np.flatnonzero(fresh)
    value, shadow, cost = np.zeros(n_cells), np.zeros(n_cells), np.zeros(n_cells)
    cell_parts, entry_parts = [], []
    for i, (c, _) in enumerate(parts):
        cells = np.flatnonzero(owner == i)
        mine = local[cells]
        value[cells], shadow[cells], cost[cells] = c.value[mine], c.shadow[mine], c.cost[mine]
        sizes = c.ptr[mine + 1] - c.ptr[mine]
        offsets = np.repeat(c.ptr[mine] - (np.cumsum(sizes) - sizes), sizes)
        entry_parts.append((i, offsets + np.arange(int(sizes.sum()))))
        cell_parts.append(np.repeat(cells, sizes))
    cell_of = np.concatenate(cell_parts) if cell_parts else np.zeros(0, dtype=np.int64)
    order = np.argsort(cell_of, kind="stable")  # a cell's entries stay largest first

    def gathered(name: str) -> np.ndarray:
        return np.concatenate([getattr(parts[i][0], name)[e] for i, e in entry_parts])[order]

    ptr = np.concatenate([[0], np.cumsum(np.bincount(cell_of, minlength=n_cells))]).astype(np.int64)
    return Contributions(first.dimensions, value, shadow, cost, ptr, gathered("unit"), gathered("amount"),
                         gathered("weight"), gathered("published"), gathered("requested"), first.units,
                         first.holding_of, first.holdings, first.weighted, first.variable)


def _grouped(base: Contributions, cells: np.ndarray, unit: np.ndarray, units: np.ndarray, *,
             holding_of: np.ndarray, holdings: np.ndarray) -> Contributions:
    """``base`` with its entries regrouped as (cell, new unit) and summed."""
    amount, weight, published, requested, ptr, unit_out = _aggregate(
        base.n_cells, cells, unit, base.amount, base.weight * base.amount, base.published, base.requested)
    return Contributions(base.dimensions, base.value, base.shadow, base.cost, ptr, unit_out, amount, weight,
                         published, requested, units, holding_of, holdings, base.weighted, base.variable)


def _aggregate(n_cells: int, cells: np.ndarray, unit: np.ndarray, amount: np.ndarray, weighted: np.ndarray,
               published: np.ndarray, requested: np.ndarray) -> tuple[np.ndarray, ...]:
    """Sum entries per (cell, unit) and sort each cell's entries by decreasing |amount|.

    ``amount`` is the unweighted shadow amount, ``weighted`` the weighted one, ``published`` what
    the entry adds to the published value."""
    key = cells.astype(np.int64) * (int(unit.max()) + 1 if unit.size else 1) + unit
    uniq, inv = np.unique(key, return_inverse=True)
    amt = np.bincount(inv, weights=amount, minlength=uniq.size)
    wtd = np.bincount(inv, weights=weighted, minlength=uniq.size)
    pub = np.bincount(inv, weights=published, minlength=uniq.size)
    req = np.bincount(inv, weights=requested.astype(np.float64), minlength=uniq.size) > 0
    first = np.zeros(uniq.size, dtype=np.int64)
    first[inv[::-1]] = np.arange(inv.size)[::-1]
    cell_of = cells[first].astype(np.int64)
    unit_of = unit[first].astype(np.int64)
    # the weight that makes weight × amount the weighted contribution (1 for a zero amount)
    wgt = np.where(amt != 0, wtd / np.where(amt != 0, amt, 1.0), 1.0)
    order = np.lexsort((unit_of, -np.abs(amt), cell_of))
    ptr = np.zeros(n_cells + 1, dtype=np.int64)
    np.add.at(ptr, cell_of + 1, 1)
    ptr = np.cumsum(ptr)
    return amt[order], wgt[order], pub[order], req[order], ptr, unit_of[order]


def _leaf_positions(frame: pd.DataFrame, var: str, h: Hierarchy) -> np.ndarray:
    codes = frame[var]
    if codes.isna().any():
        row = int(np.flatnonzero(codes.isna().to_numpy())[0])
        raise InputError(f"variable {var!r} is missing in record {row + 1}")
    text = codes.astype(str).to_numpy()
    pos = h.position
    out = np.empty(text.size, dtype=np.int64)
    for code in np.unique(text).tolist():
        if code not in pos or not h.is_leaf(code):
            what = "not a code" if code not in pos else "an aggregate, not a leaf"
            raise InputError(f"variable {var!r}: code {code!r} is {what} of its hierarchy ({h.source})")
        out[text == code] = pos[code]
    return out


def _expand(leaf_pos: Sequence[np.ndarray], dims: Sequence[Dimension]) -> tuple[np.ndarray, np.ndarray]:
    """Every (record, grid cell) pair: a record adds to its inner cell and every margin above it."""
    shape = [len(d) for d in dims]
    strides = [int(np.prod(shape[i + 1:], dtype=np.int64)) for i in range(len(shape))]
    n = leaf_pos[0].size if leaf_pos else 0
    rec = np.arange(n, dtype=np.int64)
    ids = np.zeros(n, dtype=np.int64)
    for d, pos, stride in zip(dims, leaf_pos, strides):
        h = d.hierarchy
        chains = [np.array([h.position[a] for a in h.ancestors(c)], dtype=np.int64) for c in h.order]
        lens = np.array([c.size for c in chains], dtype=np.int64)
        flat = np.concatenate(chains)
        start = np.concatenate([[0], np.cumsum(lens)[:-1]])
        p = pos[rec]
        k = lens[p]
        rec = np.repeat(rec, k)
        base = np.repeat(ids, k)
        offset = np.arange(rec.size) - np.repeat(np.cumsum(k) - k, k)
        ids = base + flat[np.repeat(start[p], k) + offset] * stride
    return rec, ids


def _numeric(frame: pd.DataFrame, col: str, what: str) -> np.ndarray:
    if col not in frame.columns:
        raise InputError(f"{what} {col!r} is not a column of the data")
    vals = pd.to_numeric(frame[col], errors="coerce")
    bad = vals.isna() & ~frame[col].isna()
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError(f"{what} {col!r} is not a number in record {row + 1}: {frame[col].iloc[row]!r}")
    if vals.isna().any():
        row = int(np.flatnonzero(vals.isna().to_numpy())[0])
        raise InputError(f"{what} {col!r} is missing in record {row + 1}")
    return vals.to_numpy(dtype=np.float64)


def _labels(frame: pd.DataFrame, col: str, what: str) -> tuple[np.ndarray, np.ndarray]:
    if col not in frame.columns:
        raise InputError(f"{what} {col!r} is not a column of the data")
    if frame[col].isna().any():
        row = int(np.flatnonzero(frame[col].isna().to_numpy())[0])
        raise InputError(f"{what} {col!r} is missing in record {row + 1}")
    labels, idx = np.unique(frame[col].astype(str).to_numpy(), return_inverse=True)
    return labels.astype(object), idx.astype(np.int64)


def _holding_labels(frame: pd.DataFrame, col: str) -> tuple[np.ndarray, np.ndarray]:
    """The holdings and each record's (-1: none). An empty or missing holding means the
    contributor belongs to no holding — it is not one holding of every independent enterprise,
    which would make an insider of all of them together."""
    if col not in frame.columns:
        raise InputError(f"holding {col!r} is not a column of the data")
    raw = frame[col]
    text = raw.astype(str).str.strip().to_numpy(dtype=object)
    none = raw.isna().to_numpy() | (text == "")
    labels, idx = np.unique(text[~none].astype(str), return_inverse=True)
    out = np.full(len(frame), -1, dtype=np.int64)
    out[~none] = idx
    return labels.astype(object), out


def _holdings_of(frame: pd.DataFrame, holding: str | None, units: np.ndarray,
                 unit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each contributor's holding (-1: none) and the holdings' labels; a contributor in two
    holdings is an input error naming its first record."""
    holding_of = np.full(units.size, -1, dtype=np.int64)
    if holding is None:
        return holding_of, np.zeros(0, dtype=object)
    holdings, hold = _holding_labels(frame, holding)
    holding_of[unit] = hold
    clash = np.flatnonzero(holding_of[unit] != hold)
    if clash.size:
        row = int(clash[0])
        raise InputError(f"contributor {units[unit[row]]!r} belongs to two holdings (record {row + 1})")
    return holding_of, holdings


def contributions(
    data: pd.DataFrame,
    by: Sequence[str],
    *,
    value: str,
    contributor: str | None = None,
    holding: str | None = None,
    weight: str | None = None,
    shadow: str | None = None,
    cost: str | None = None,
    request: str | None = None,
    hierarchies: Mapping[str, Hierarchy] | None = None,
    digits: int | None = None,
) -> Contributions:
    """Tabulate microdata with contributors onto the grid of ``by`` (every margin).

    Args:
        data: one record per contribution (an enterprise, or an establishment of one).
        by: the spanning variables.
        value: the response variable (turnover); the published value is ``Σ weight × value``.
        contributor: the contributor id (default: each record is a contributor).
        holding: the holding (enterprise group) of each contributor; empty or missing: none.
        weight: decimal sampling weights (default 1).
        shadow: the variable the rules read (default ``value``).
        cost: the variable whose weighted totals are the cost of hiding a cell (default ``value``).
        request: a 0/1 (or boolean) column: the contributor asked for protection.
        hierarchies: per variable, its hierarchy (default: a flat codelist of the codes found).
        digits: round each record's published amount ``weight × value`` to this many decimal
            places and sum exactly (tabulation's ``sum_digits``); None: float sums.

    Every argument error is one :class:`InputError` naming the column and record.
    """
    if isinstance(by, str) or not by:
        raise InputError("give the spanning variables as a non-empty list")
    hierarchies = dict(hierarchies or {})
    missing = [v for v in by if v not in data.columns]
    if missing:
        raise InputError(f"spanning variable {missing[0]!r} is not a column of the data")
    if holding is not None and weight is not None:
        raise InputError("holdings and sampling weights do not combine: the weighted contributions of a "
                         "holding's enterprises are unknown (handbook §4.2, 'Sampling weights')")
    frame = data.reset_index(drop=True)
    x = _numeric(frame, value, "response variable")
    sh = x if shadow is None else _numeric(frame, shadow, "shadow variable")
    co = x if cost is None else _numeric(frame, cost, "cost variable")
    w = np.ones(len(frame)) if weight is None else _numeric(frame, weight, "sampling weight")
    if (w <= 0).any():
        row = int(np.flatnonzero(w <= 0)[0])
        raise InputError(f"sampling weight {weight!r} must be positive; record {row + 1} has {w[row]:g}")
    req = np.zeros(len(frame), dtype=bool) if request is None else _numeric(frame, request, "request flag") != 0
    dims = []
    for v in by:
        h = hierarchies.get(v) or Hierarchy.flat(sorted(frame[v].dropna().astype(str).unique()), source=v)
        dims.append(Dimension(v, h))
    leaf = [_leaf_positions(frame, v, d.hierarchy) for v, d in zip(by, dims)]
    if contributor is None:
        units, unit = np.array([str(i + 1) for i in range(len(frame))], dtype=object), np.arange(len(frame))
    else:
        units, unit = _labels(frame, contributor, "contributor")
    holding_of, holdings = _holdings_of(frame, holding, units, unit)
    rec, ids = _expand(leaf, dims)
    n_cells = int(np.prod([len(d) for d in dims], dtype=np.int64))
    wx = w * x
    if digits is not None:
        # each record's published amount to ``digits`` places, summed in whole units: a cell is
        # the exact decimal sum of its records (additive to the last digit, the same in every run)
        units_wx = np.round(wx * 10.0 ** digits)
        value_cells = np.bincount(ids, weights=units_wx[rec], minlength=n_cells) / 10.0 ** digits
        wx = units_wx / 10.0 ** digits
    else:
        value_cells = np.bincount(ids, weights=wx[rec], minlength=n_cells)
    shadow_cells = np.bincount(ids, weights=(w * sh)[rec], minlength=n_cells)
    cost_cells = np.bincount(ids, weights=(w * co)[rec], minlength=n_cells)
    amount, wgt, published, requested, ptr, unit_out = _aggregate(
        n_cells, ids, unit[rec], sh[rec], (w * sh)[rec], wx[rec], req[rec])
    return Contributions(tuple(dims), value_cells, shadow_cells, cost_cells, ptr, unit_out, amount, wgt,
                         published, requested, units, holding_of, holdings, weight is not None, value)


def frame_of(c: Contributions, cells: np.ndarray | None = None) -> Any:
    """The contributions as a long frame (cell codes, contributor, amount, weight): for
    inspection and tests (private: original values)."""
    rows = np.repeat(np.arange(c.n_cells), np.diff(c.ptr))
    keep = np.ones(rows.size, dtype=bool) if cells is None else np.isin(rows, np.flatnonzero(cells))
    table = c.table()
    out = {}
    for axis, d in enumerate(c.dimensions):
        out[d.variable] = np.asarray(d.hierarchy.order, dtype=object)[np.asarray(table.positions(axis))[rows[keep]]]
    out.update(contributor=c.units[c.unit[keep]], amount=c.amount[keep], weight=c.weight[keep])
    return pd.DataFrame(out)
