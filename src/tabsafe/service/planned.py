"""The table builder on an engine: each table counted from the records file by DuckDB or Spark.

With ``engine: duckdb`` or ``engine: spark`` in the service settings the records are never
prepared (:mod:`tabsafe.service.prepared` holds them in memory on one machine): the catalogue
comes from ``meta.yaml``, the settings and the records' schema alone (:class:`Catalogue`), and each
query's table is one tabulation by the shared planner (:mod:`tabsafe.engines.planner`) of the
query's variables at their leaf codes, with the query's area and filter as a filter in tabsafe's
filter language. The builder then forms the query's categories, groups, subtotals and margins
from those leaf cells exactly as it does from the prepared records
(:meth:`~tabsafe.service.builder.Builder.table_from_cubes`), so the published cells, cell keys
(sums of the leaf cells' keys modulo the scale: ``frac`` is additive, METHODS.md §2), protected
values and release-rule decisions are the same as the prepared backend's.

What the planner cannot say the same way is refused (HTTP 422), never answered differently:

* a filter on a numeric variable (the prepared records count a missing value as 0; SQL leaves it
  out of every comparison);
* a sum or a mean (the dominance and p% rules on its contributions need the records);
* numeric variables not declared in the settings' ``numeric`` (the prepared records choose a flex
  point from the records' median, which would need a pass over them before any query).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from tabsafe.errors import InputError
from tabsafe.model import filter as _filter
from tabsafe.model.hierarchy import Hierarchy
from tabsafe.model.table import Dimension, Table
from tabsafe.service.builder import Builder
from tabsafe.service.prepared import Numeric, Prepared, Variable, _catalogue, chain_key, open_prepared
from tabsafe.service.query import Resolved, compile_filter

__all__ = ["Catalogue", "PlannedBuilder", "make_builder", "open_data"]

#: the fixed-point digits of magnitudes (as the prepared records keep them)
DIGITS = 2


class Catalogue:
    """What the builder and :func:`~tabsafe.service.query.resolve` read of prepared data, without
    preparing: variables, geography, numeric variables, the record key (module docstring)."""

    def __init__(self, settings: Any) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        src = settings.records_path
        try:
            schema = pq.read_schema(src)
        except (pa.ArrowInvalid, OSError) as exc:
            raise InputError(f"cannot read the records: {str(exc).splitlines()[0]}", where=str(src)) from None
        columns = list(schema.names)
        self.source: Path = src
        self.path: Path = settings.prepared_path
        self.variables: dict[str, Variable]
        self.variables, self.geography = _catalogue(settings, columns)
        self.key_spec = chain_key(settings)
        if self.key_spec.column not in columns:
            raise InputError(f"the records have no record-key column {self.key_spec.column!r}", where=str(src))
        self.key_scale = self.key_spec.scale
        self.key_meta = {"column": self.key_spec.column, "digits": self.key_spec.digits,
                         "modulus": self.key_spec.modulus}
        self.numeric: dict[str, Numeric] = {}
        for name, cfg in settings.numeric.items():
            if name not in columns:
                raise InputError(f"setting 'numeric': {name!r} is not a column of the records", where=str(src))
            t = schema.field(name).type
            if not (pa.types.is_floating(t) or pa.types.is_integer(t) or pa.types.is_decimal(t)):
                raise InputError(f"setting 'numeric': {name!r} is not a numeric column", where=str(src))
            self.numeric[name] = Numeric(name, cfg.flex_point, cfg.label or name, DIGITS)
        #: text columns are compared as quoted codes, others as numbers (what the planner's SQL does)
        self.text = {n for n in self.variables if pa.types.is_string(schema.field(n).type)
                     or pa.types.is_large_string(schema.field(n).type)}
        # what resolve() looks up to validate filters; nothing is read from them here
        self.codes: dict[str, Any] = {n: None for n in self.variables}
        self.values: dict[str, Any] = {n: None for n in self.numeric}
        self.blocks = None
        self.n: int | None = None
        stat = src.stat()
        self._fingerprint = hashlib.sha256(
            f"{src.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{settings.engine}".encode()).hexdigest()

    @property
    def fingerprint(self) -> str:
        """Changes with the records file (its size and time): cached answers of other records are
        never served."""
        return self._fingerprint


def open_data(settings: Any) -> Prepared | Catalogue:
    """The data the settings' backend answers from: the prepared records, or the catalogue of an
    engine's records."""
    if settings.engine == "prepared":
        return open_prepared(settings)
    data = Catalogue(settings)
    data.path.mkdir(parents=True, exist_ok=True)  # the answers' cache lives there
    return data


def make_builder(settings: Any, data: Prepared | Catalogue) -> Builder:
    return Builder(settings, data) if isinstance(data, Prepared) else PlannedBuilder(settings, data)


class PlannedBuilder(Builder):
    """A :class:`Builder` whose tables are counted by an engine through the planner."""

    inline = False

    def warm(self) -> int:
        """Nothing to group in advance: the engine counts the records where they are."""
        return 0

    def __init__(self, settings: Any, data: Catalogue) -> None:
        from tabsafe.model.microdata import Microdata
        from tabsafe.registry import get_engine

        super().__init__(settings, data)  # type: ignore[arg-type]
        self.engine = get_engine(settings.engine)
        codelists = {n: Hierarchy.flat(v.hierarchy.leaves, source=f"variable {n!r}")
                     for n, v in data.variables.items()}
        self.records = Microdata.from_file(data.source, codelists=codelists)

    # ------------------------------------------------------------------ the filter
    def _codes(self, var: Variable, leaves: np.ndarray) -> _filter.Filter:
        """``var in (these leaf codes)``; a contradiction when there are none."""
        quoted = var.name in self.data.text  # type: ignore[attr-defined]
        codes = [var.hierarchy.leaves[i] for i in leaves.tolist()] or [var.hierarchy.leaves[0]]
        values = tuple(_filter.Value(c, quoted=quoted) for c in codes)
        node: _filter.Filter = _filter.In(var.name, values)
        if not leaves.size:
            node = _filter.And((node, _filter.In(var.name, values, negate=True)))
        return node

    def _translate(self, node: _filter.Filter) -> _filter.Filter:
        """The query's filter with every test of a categorical variable as the set of leaf codes it
        selects in the prepared records (hierarchy codes, ``7`` for ``"7"``, orders of numeric
        codes: :func:`~tabsafe.service.query.compile_filter` decides which)."""
        if isinstance(node, (_filter.In, _filter.Compare)):
            name = node.variable
            if name not in self.data.variables:
                raise InputError(f"filter: {name!r} is numeric; a filter on a numeric variable is not answered with "
                                 f"engine {self.settings.engine!r} (missing values would count differently)")
            var = self.data.variables[name]
            one = SimpleNamespace(variables=self.data.variables, values={},
                                  codes={name: np.arange(len(var.hierarchy.leaves))})
            selected = compile_filter(one, node)(slice(None))  # type: ignore[arg-type]
            return self._codes(var, np.flatnonzero(selected))
        if isinstance(node, _filter.Not):
            return _filter.Not(self._translate(node.part))
        parts = tuple(self._translate(p) for p in node.parts)
        return _filter.And(parts) if isinstance(node, _filter.And) else _filter.Or(parts)

    def _area(self, r: Resolved) -> _filter.Filter | None:
        if r.query.area is None:
            return None
        var = self.data.variables[self.data.geography]  # type: ignore[index]
        return self._codes(var, np.unique(np.concatenate([var.leaves_below[c] for c in r.query.area])))

    def _where(self, r: Resolved, *, area_only: bool = False) -> _filter.Filter | None:
        parts = [p for p in (self._area(r), None if area_only or r.where is None else self._translate(r.where))
                 if p is not None]
        return None if not parts else parts[0] if len(parts) == 1 else _filter.And(tuple(parts))

    # ------------------------------------------------------------------ counting
    def _tabulate(self, by: tuple[str, ...], where: _filter.Filter | None, numeric: str | None) -> Table:
        from tabsafe.model.spec import TableSpec
        from tabsafe.tabulation import tabulate

        spec = TableSpec(by=by, where=where, key=self.data.key_spec, sums=(numeric,) if numeric else (),  # type: ignore[attr-defined]
                         sum_digits=DIGITS, max_cells=2**62)
        return tabulate(self.records, spec, engine=self.engine)

    def tabulate(self, r: Resolved) -> Table:
        """The query's table from the engine's leaf cells (module docstring)."""
        t = self._tabulate(tuple(d.variable.name for d in r.dims), self._where(r), r.numeric)
        inner = np.asarray(t.leaf_mask)
        keep = np.ones(int(inner.sum()), dtype=bool)
        units = []
        for axis, (d, dim) in enumerate(zip(r.dims, t.dimensions)):
            to_leaf = np.array([d.variable.leaf_index.get(c, -1) for c in dim.hierarchy.order], dtype=np.int64)
            unit = d.lut[to_leaf[np.asarray(t.positions(axis))[inner]]]
            keep &= unit >= 0
            units.append(unit)
        sizes = [len(d.base) for d in r.dims]
        n = int(np.prod(sizes))
        cell = np.ravel_multi_index(tuple(u[keep] for u in units), sizes) if keep.any() else np.zeros(0, np.int64)

        def total(values: np.ndarray, dtype: Any = np.int64) -> np.ndarray:
            out = np.zeros(n, dtype=dtype)
            np.add.at(out, cell, values[inner][keep].astype(dtype))
            return out

        # exact: the keys (each below the scale) summed as Python integers, then reduced
        scale = self.data.key_scale
        key = total(np.asarray(t.column("ckey_int")), object) % scale
        cubes = {"count": total(np.asarray(t.counts)).reshape(sizes), "key": key.astype(np.int64).reshape(sizes)}
        if r.numeric is not None:
            fixed = np.rint(np.asarray(t.column(f"sum_{r.numeric}"), dtype=float) * 10**DIGITS)
            cubes["fixed"] = total(fixed).reshape(sizes)
        return self.table_from_cubes(r, cubes, [list(d.targets) for d in r.dims])

    def contributions(self, r: Resolved) -> dict[str, Any]:
        """Sums and means need each cell's largest contributions (the dominance and p% rules of
        :mod:`tabsafe.service.magnitudes`), which the planner does not count: refused."""
        raise InputError(f"measure {r.query.measure!r}: sums and means are answered from the prepared records only "
                         f"(their dominance rules read each contribution); this service counts with "
                         f"{self.settings.engine}")

    def area_table(self, r: Resolved) -> Table | None:
        """The area's whole population (no filter) as the one-cell table the prepared backend
        checks ``min_area_population`` on."""
        if r.area_label is None:
            return None
        geo = self.data.geography
        t = self._tabulate((geo,), self._where(r, area_only=True), None)  # type: ignore[arg-type]
        total = self.data.variables[geo].hierarchy.total  # type: ignore[index]
        n = int(t.value("count", **{geo: total}))  # type: ignore[arg-type]
        key = int(t.value("ckey_int", **{geo: total}))  # type: ignore[arg-type]
        dim = Dimension("area", Hierarchy.flat(["area"], source="area"))
        ckey_int = np.array([key % self.data.key_scale] * 2, dtype=np.int64)
        values = {"count": np.array([n, n], dtype=np.int64), "ckey_int": ckey_int,
                  "ckey": ckey_int / self.data.key_scale}
        table = Table.from_grid([dim], values, {"key": self.data.key_meta, "source": "service"})
        return table.take(table.counts != 0)
