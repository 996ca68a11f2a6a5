"""The tabulation planner, shared by every engine: one query for every margin, then the cells.

Given a :class:`~tabsafe.model.spec.TableSpec`, the planner

1. checks the source's columns (spanning, summed, key and count variables; the filter's),
2. maps each variable's codes to integer positions at every level of its hierarchy, by a join
   with a small code table it registers,
3. writes **one** aggregation over ``GROUPING SETS`` — one set per combination of hierarchy
   levels, the total being "not grouped" — counting records (or summing inner cells), summing
   magnitudes as exact decimals and record keys as exact fixed-point integers (the cell key,
   METHODS.md §2), with the filter compiled into the engine's dialect (engines that copy every
   row once per grouping set, Spark, first aggregate the records to inner cells in the same
   query: ``Dialect.pre_aggregate``). When every codelist is known, the grid is small
   (:data:`IN_MEMORY_GRID_CELLS`) and every measure an integer, the one query groups the
   records by their codes instead, and the margins are summed from those inner cells on the
   dense grid in memory: the same cells and values, without the engine's hash table per
   grouping set (a third of ``tabsafe tabulate``'s time on the census hypercube),
4. validates every observed code against its codelist (without a filter, from the
   single-variable grouping sets of the same pass: no extra scan), and
5. turns the answer into a sparse :class:`~tabsafe.model.table.Table`: the cells with records,
   by their mixed-radix cell ids.

Engines (:mod:`tabsafe.engines.base`) only register the source and run what they are given, so a
second engine is a dialect, not a copy of this logic.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from tabsafe._arrow import from_numpy, strings, to_numpy
from tabsafe._arrow import table as arrow_table
from tabsafe.engines.base import SOURCE, Dialect, Engine, Session
from tabsafe.errors import InputError, TooLargeError, param, shown_list
from tabsafe.errors import shown as shown_code
from tabsafe.model import filter as _filter
from tabsafe.model.filter import compile_sql
from tabsafe.model.hierarchy import TOTAL, Hierarchy
from tabsafe.model.microdata import InnerCells, Microdata
from tabsafe.model.spec import DEFAULT_MAX_CELLS, TableSpec
from tabsafe.model.table import Dimension, Table, fill_aggregates

__all__ = ["GroupedCounts", "grouped_counts", "natural_key", "tabulate_with"]

#: Grids up to this many cells get their margins summed in memory from the inner cells (int64
#: grids of 32 MB per measure); larger ones by the engine over grouping sets.
IN_MEMORY_GRID_CELLS = 1 << 22


def natural_key(code: str) -> tuple[Any, ...]:
    """Sort "2" before "10" and "A2" before "A10" when a codelist is taken from the data; every
    engine and the differencing audit order codes this way."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", code) if p)


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def tabulate_with(engine: Engine, data: Microdata | InnerCells, spec: TableSpec) -> Table:
    """Every cell of ``spec``'s table that has records, computed by ``engine`` in one pass."""
    session = engine.open(data.source)
    try:
        return _Plan(session, engine.dialect, data, spec, engine.name).run()
    finally:
        session.close()


@dataclass(frozen=True, eq=False)
class GroupedCounts:
    """The occurring combinations of some variables and their counts: inner cells, no margins.

    Attributes:
        variables: the grouped variables, in the order asked for.
        codes: per variable, its codelist in the engine's order (the declared codelist's leaves,
            else the codes found in the whole data sorted by :func:`natural_key`).
        kinds: per variable, the source column's kind (``"text"``, ``"integer"``, ``"number"``).
        positions: ``(groups, variables)`` int64: each group's code positions in ``codes``;
            groups are sorted by these positions (row-major) and all have a count above zero.
        counts: records per group (microdata) or the summed count column (inner cells).
    """

    variables: tuple[str, ...]
    codes: tuple[tuple[str, ...], ...]
    kinds: tuple[str, ...]
    positions: np.ndarray
    counts: np.ndarray


@dataclass(frozen=True, kw_only=True)
class _GroupSpec:
    """What :class:`_Plan` reads of a :class:`TableSpec`, for a grouping without margins
    (which may group by no variable at all, unlike a table)."""

    by: tuple[str, ...]
    where: Any = None
    hierarchies: Mapping[str, Hierarchy] = field(default_factory=dict)
    sums: tuple[str, ...] = ()
    key: None = None
    max_cells: int = DEFAULT_MAX_CELLS
    weight: str | None = None  # none of its own; a Microdata carrying weights still sums them


def grouped_counts(engine: Engine, data: Microdata | InnerCells, variables: Sequence[str], *,
                   where: Any = None) -> GroupedCounts:
    """The combinations of ``variables`` that occur in ``data`` (after the filter ``where``) and
    their counts, in one engine pass: the inner cells of the table they span, without margins.

    Validated as :func:`tabulate_with` validates a table — columns exist, no missing or blank
    values, no code named like the total, every code in its declared codelist, and for inner
    cells whole non-negative counts and no row repeating another in every column but the
    count — so every method that reads counts (the differencing audit, seed 000 §5.2) sees the
    same codes in the same order as the tables it is given. Inner cells classified by more
    variables than ``variables`` are summed over the others.
    """
    variables = tuple(variables)
    if len(set(variables)) != len(variables):
        dup = next(v for i, v in enumerate(variables) if v in variables[:i])
        raise InputError(f"variable {dup!r} is grouped twice")
    spec = _GroupSpec(by=variables, where=_filter.coerce(where, where="where"))
    session = engine.open(data.source)
    try:
        return _Plan(session, engine.dialect, data, spec, engine.name).grouped()  # type: ignore[arg-type]
    finally:
        session.close()


class _Plan:
    """One tabulation: the session, the dialect and the resolved dimensions."""

    def __init__(self, session: Session, dialect: Dialect, data: Microdata | InnerCells, spec: TableSpec,
                 engine_name: str) -> None:
        self.s = session
        self.d = dialect
        self.data = data
        self.spec = spec
        self.engine_name = engine_name
        self.where_src = data.source.describe()
        self.q = dialect.ident
        # records may carry weights (e.g. perturbation weights, 001 §7): a cell's count is then
        # the sum of its records' weights
        self.weight = spec.weight or (data.weight if isinstance(data, Microdata) else None)
        if self.weight is not None and isinstance(data, InnerCells):
            raise InputError(f"weights ({param('weight')}) apply to microdata, not to a table of inner cells",
                             where=self.where_src)

    def run(self) -> Table:
        self.columns = dict(self.s.columns())
        self._check_columns()
        self.filter_sql = (
            compile_sql(self.spec.where, self.d.filter_dialect(), self.columns, where=self.where_src)
            if self.spec.where is not None else None
        )
        n_rows = int(to_numpy(self.s.run(f"SELECT count(*) AS n FROM {SOURCE}").column(0))[0])
        if n_rows == 0:
            raise InputError("the data have no records", where=self.where_src)
        self._check_sums()
        declared = {v: self._declared(v) for v in self.spec.by}
        dims: list[Dimension] | None
        if self.filter_sql is not None or isinstance(self.data, InnerCells):
            # The main pass only sees selected rows: validate the whole data set in a pass of its own.
            found = self._observed_codes()
            dims = [self._dimension(v, declared[v], found[v]) for v in self.spec.by]
            self._check_size([len(d) for d in dims])
            if isinstance(self.data, InnerCells):
                self._check_inner_cells([d.variable for d in dims])
        else:
            # Without a filter the single-variable grouping sets of the main pass are exactly the
            # observed codes, so the codelist check costs no extra pass (see _aggregate).
            dims = None
            sizes = [len(h) if h is not None else 0 for h in declared.values()]
            if all(sizes):
                self._check_size(sizes)
        if self.spec.key is not None:
            self._check_keys()
        if self.weight is not None:
            self._check_weights()
        return self._aggregate(declared, dims, n_rows)

    def grouped(self) -> GroupedCounts:
        """The inner cells only (see :func:`grouped_counts`): one GROUP BY, validated."""
        self.columns = dict(self.s.columns())
        by = self.spec.by
        missing = [v for v in by if v not in self.columns]
        if missing:
            have = list(self.columns)
            shown = shown_list(have)
            raise InputError(f"unknown variable {missing[0]!r}: not a column of the data (the data have: {shown})",
                             where=self.where_src)
        if isinstance(self.data, InnerCells) and self.data.count not in self.columns:
            raise InputError(f"no count column {self.data.count!r} in the data", where=self.where_src)
        self.filter_sql = (
            compile_sql(self.spec.where, self.d.filter_dialect(), self.columns, where=self.where_src)
            if self.spec.where is not None else None
        )
        n_rows = int(to_numpy(self.s.run(f"SELECT count(*) AS n FROM {SOURCE}").column(0))[0])
        if n_rows == 0:
            raise InputError("the data have no records", where=self.where_src)
        declared = {v: self._declared(v) for v in by}
        dims: list[Dimension] | None = None
        if by and (self.filter_sql is not None or isinstance(self.data, InnerCells)):
            # The grouping only sees selected rows (and inner cells' counts are checked before
            # they are summed): validate the whole data set in a pass of its own.
            found = self._observed_codes()
            dims = [self._dimension(v, declared[v], found[v]) for v in by]
        if isinstance(self.data, InnerCells):
            # a combination repeats when it repeats in every column but the count: rows that
            # differ in a column not grouped here are summed, as margins of the inner cells are
            self._check_inner_cells([c for c in self.columns if c != self.data.count])
            measure = f"sum({self.d.as_bigint(self.d.as_number(self.q(self.data.count)))})"
        else:
            measure = "count(*)"
        exprs = [self._text(v) for v in by]
        select = [f"{e} AS d{i}" for i, e in enumerate(exprs)] + [f"{measure} AS n", "count(*) AS _ts_rows"]
        where = f"WHERE {self.filter_sql}" if self.filter_sql else ""
        group = f"GROUP BY {', '.join(exprs)}" if exprs else ""
        result = self.s.run(f"SELECT {', '.join(select)} FROM {SOURCE} {where} {group}")
        counts = to_numpy(result.column("n"), fill=0).astype(np.int64, copy=False)
        if dims is None:
            # Without a filter the groups hold every row: their codes are the observed codes.
            dims = []
            for i, v in enumerate(by):
                per_code = result.group_by(f"d{i}").aggregate([("_ts_rows", "sum")])
                found = dict(zip(per_code.column(f"d{i}").to_pylist(), per_code.column("_ts_rows_sum").to_pylist()))
                dims.append(self._dimension(v, declared[v], found))
        import pyarrow.compute as pc

        codes = tuple(tuple(d.hierarchy.leaves) for d in dims)
        positions = np.zeros((result.num_rows, len(by)), dtype=np.int64)
        for i, leaves in enumerate(codes):
            positions[:, i] = to_numpy(pc.index_in(result.column(f"d{i}"), value_set=strings(list(leaves))),
                                       fill=-1)
        # the filter may select nothing; a group of explicit zero inner cells is no combination
        keep = counts > 0
        positions, counts = positions[keep], counts[keep]
        sizes = [len(c) for c in codes]
        if not by:
            order = np.arange(len(counts))
        elif float(np.prod(sizes, dtype=np.float64)) < 2.0**62:
            # one mixed-radix key per group (as cell ids are): a single sort, far cheaper than lexsort
            order = np.argsort(np.ravel_multi_index(tuple(positions.T), sizes), kind="stable")
        else:
            order = np.lexsort(positions.T[::-1])
        return GroupedCounts(variables=by, codes=codes, kinds=tuple(self.columns[v] for v in by),
                             positions=positions[order], counts=counts[order])

    # ------------------------------------------------------------------ resolving
    def _declared(self, var: str) -> Hierarchy | None:
        """The hierarchy given for the variable, else its declared codelist, else None."""
        declared = self.data.codelists.get(var)
        hierarchy = self.spec.hierarchies.get(var, declared)
        if hierarchy is not None and declared is not None and hierarchy is not declared:
            hierarchy.check_codelist(declared.leaves, variable=var)
        return hierarchy

    def _check_size(self, sizes: Sequence[int]) -> None:
        n_cells = int(np.prod(sizes, dtype=np.float64))
        if n_cells > self.spec.max_cells:
            shape = " × ".join(f"{v}({n})" for v, n in zip(self.spec.by, sizes))
            raise TooLargeError(
                f"table {shape} would have {n_cells:,} cells, more than the limit of {self.spec.max_cells:,} "
                f"({param('max_cells')})"
            )

    def _text(self, var: str) -> str:
        col = f"{SOURCE}.{self.q(var)}"
        return col if self.columns[var] == "text" else self.d.as_text(col)

    # ------------------------------------------------------------------ checks
    def _check_columns(self) -> None:
        have = list(self.columns)
        wanted = [(v, "by") for v in self.spec.by] + [(v, "sum") for v in self.spec.sums]
        if self.spec.key is not None:
            wanted.append((self.spec.key.column, "key"))
        if isinstance(self.data, InnerCells):
            wanted.append((self.data.count, "count"))
        if self.weight is not None:
            wanted.append((self.weight, "weight"))
        for name, option in wanted:
            if name not in self.columns:
                shown = shown_list(have)
                raise InputError(f"unknown variable {name!r} in {param(option)}; the data have: {shown}",
                                 where=self.where_src)

    def _check_sums(self) -> None:
        """Summed variables must hold numbers (a CSV's text columns: every value a number)."""
        for var in self.spec.sums:
            kind = self.columns[var]
            if kind in {"integer", "number"}:
                continue
            if kind == "text" and getattr(self.data.source, "format", None) == "csv":
                c = self.q(var)
                bad = self.s.run(
                    f"SELECT count(*) AS n FROM {SOURCE} WHERE {c} IS NOT NULL AND {self.d.as_number(c)} IS NULL"
                ).column(0)[0].as_py()
                if not bad:
                    continue
                raise InputError(f"variable {var!r} in {param('sum')} has {_plural(bad, 'value')} that are not "
                                 "numbers", where=self.where_src)
            raise InputError(f"variable {var!r} in {param('sum')} holds codes, not numbers: only numeric "
                             "variables can be summed", where=self.where_src)

    def _observed_codes(self) -> dict[str, dict[str | None, int]]:
        """Distinct values and their row counts for every spanning variable, in one pass."""
        exprs = [self._text(v) for v in self.spec.by]
        sets = ", ".join(f"({e})" for e in exprs)
        cols = ", ".join(f"{e} AS v{i}, {self.d.grouping_id([e])} AS g{i}" for i, e in enumerate(exprs))
        result = self.s.run(f"SELECT {cols}, count(*) AS n FROM {SOURCE} GROUP BY GROUPING SETS ({sets})")
        found: dict[str, dict[str | None, int]] = {v: {} for v in self.spec.by}
        n = result.column("n").to_pylist()
        for i, var in enumerate(self.spec.by):
            g = to_numpy(result.column(f"g{i}"))
            vals = result.column(f"v{i}").to_pylist()
            for row in np.flatnonzero(g == 0):
                found[var][vals[row]] = n[row]
        return found

    def _dimension(self, var: str, hierarchy: Hierarchy | None, found: Mapping[str | None, int]) -> Dimension:
        """Check every observed value against the codelist (the observed codes if none is declared)."""
        if None in found:
            raise InputError(f"variable {var!r} has {_plural(found[None], 'missing value')}", where=self.where_src)
        if hierarchy is None:
            if TOTAL in found:
                if isinstance(self.data, InnerCells):
                    raise InputError(
                        f"variable {var!r} has the aggregate code {TOTAL!r} in {_plural(found[TOTAL], 'row')}; "
                        "the table must hold inner cells only (margins are derived)",
                        where=self.where_src,
                    )
                raise InputError(
                    f"variable {var!r} uses the code {TOTAL!r} ({_plural(found[TOTAL], 'row')}), which names the total",
                    where=self.where_src,
                )
            blank = [c for c in found if not str(c).strip()]
            if blank:
                raise InputError(f"variable {var!r} has {_plural(found[blank[0]], 'empty value')}", where=self.where_src)
            hierarchy = Hierarchy.flat(sorted(found, key=natural_key), source=f"codes of {var!r}")  # type: ignore[arg-type]
        leaves = set(hierarchy.leaves)
        outside = {c: n for c, n in found.items() if c not in leaves}
        if outside:
            aggregates = [c for c in outside if c in hierarchy.position]
            if isinstance(self.data, InnerCells) and aggregates:
                n = sum(outside[c] for c in aggregates)
                raise InputError(
                    f"variable {var!r} has the aggregate code {aggregates[0]!r} in {_plural(n, 'row')}; "
                    "the table must hold inner cells only (margins are derived)",
                    where=self.where_src,
                )
            worst = sorted(outside.items(), key=lambda kv: (-kv[1], str(kv[0])))
            shown = ", ".join(f"{shown_code(c)} ({_plural(n, 'row')})" for c, n in worst[:3])
            more = f" and {len(worst) - 3} more" if len(worst) > 3 else ""
            raise InputError(
                f"variable {var!r} has value(s) outside its codelist: {shown}{more}", where=self.where_src
            )
        return Dimension(var, hierarchy)

    def _check_inner_cells(self, variables: Sequence[str]) -> None:
        assert isinstance(self.data, InnerCells)
        c = self.q(self.data.count)
        num = self.d.as_number(c)
        frac = self.d.fraction(num)
        bad = self.s.run(
            f"""SELECT count(*) FILTER (WHERE {c} IS NULL) AS a,
                       count(*) FILTER (WHERE {c} IS NOT NULL AND {num} IS NULL) AS b,
                       count(*) FILTER (WHERE {num} < 0) AS c,
                       count(*) FILTER (WHERE {frac} <> 0) AS d,
                       min({num}) FILTER (WHERE {num} < 0) AS e,
                       min({num}) FILTER (WHERE {frac} <> 0) AS f,
                       count(*) FILTER (WHERE {self.d.not_finite(num)}) AS g
                FROM {SOURCE}"""
        ).to_pylist()[0]
        col = f"count column {self.data.count!r}"
        if bad["a"]:
            raise InputError(f"{col} has {_plural(bad['a'], 'missing value')}", where=self.where_src)
        if bad["b"] or bad["g"]:
            n = bad["b"] + bad["g"]
            raise InputError(f"{col} has {_plural(n, 'value')} that are not finite numbers", where=self.where_src)
        if bad["c"]:
            raise InputError(f"{col} has {_plural(bad['c'], 'negative count')} (e.g. {bad['e']:g})", where=self.where_src)
        if bad["d"]:
            raise InputError(f"{col} has {_plural(bad['d'], 'fractional count')} (e.g. {bad['f']:g})", where=self.where_src)
        if not variables:  # a single total: no combination can repeat
            return
        keys = ", ".join(self._text(v) for v in variables)
        dup = self.s.run(
            f"SELECT {keys}, count(*) AS n FROM {SOURCE} GROUP BY {keys} HAVING count(*) > 1 ORDER BY n DESC LIMIT 1"
        ).to_pylist()
        if dup:
            n_dup = self.s.run(
                f"SELECT count(*) AS k FROM (SELECT {keys} FROM {SOURCE} GROUP BY {keys} HAVING count(*) > 1) t"
            ).column(0)[0].as_py()
            row = list(dup[0].values())
            cell = ", ".join(f"{var}={v}" for var, v in zip(variables, row[:-1]))
            raise InputError(
                f"{_plural(n_dup, 'inner cell')} appear more than once, e.g. ({cell}) {row[-1]} times; "
                "aggregate the table first",
                where=self.where_src,
            )

    def _check_keys(self) -> None:
        key = self.spec.key
        assert key is not None
        k = self.q(key.column)
        num = self.d.as_number(k)
        frac = f"max({self.d.fraction(num)})" if key.modulus else "0"
        row = self.s.run(
            f"""SELECT count(*) FILTER (WHERE {k} IS NULL) AS a, count(*) FILTER (WHERE {k} IS NOT NULL AND {num} IS NULL) AS b,
                       min({num}) AS lo, max({num}) AS hi, {frac} AS fr
                FROM {SOURCE}"""
        ).to_pylist()[0]
        col = f"record key column {key.column!r}"
        if row["a"] or row["b"]:
            what = _plural(row["a"], "missing value") if row["a"] else _plural(row["b"], "value") + " that are not numbers"
            raise InputError(f"{col} has {what}", where=self.where_src)
        lo, hi = row["lo"], row["hi"]
        if key.modulus is not None:
            if lo < 0 or hi >= key.modulus or row["fr"]:
                bad = lo if lo < 0 else hi
                raise InputError(f"{col} has values outside the integers 0..{key.modulus - 1} (e.g. {bad:g})",
                                 where=self.where_src)
        elif lo < 0 or hi >= 1:
            bad = lo if lo < 0 else hi
            raise InputError(f"{col} has values outside [0, 1) (e.g. {bad:g})", where=self.where_src)

    def _check_weights(self) -> None:
        """Weights are whole numbers >= 0 in every record (a count is their sum)."""
        assert self.weight is not None
        w = self.q(self.weight)
        num = self.d.as_number(w)
        row = self.s.run(
            f"""SELECT count(*) FILTER (WHERE {w} IS NULL OR {num} IS NULL) AS a,
                       count(*) FILTER (WHERE {num} < 0 OR {num} <> floor({num})) AS b,
                       min({num}) FILTER (WHERE {num} < 0 OR {num} <> floor({num})) AS e
                FROM {SOURCE}"""
        ).to_pylist()[0]
        col = f"weight column {self.weight!r}"
        if row["a"]:
            raise InputError(f"{col} has {_plural(row['a'], 'missing or non-numeric value')}", where=self.where_src)
        if row["b"]:
            raise InputError(f"{col} has {_plural(row['b'], 'value')} that are not whole numbers >= 0 "
                             f"(e.g. {row['e']:g})", where=self.where_src)

    # ------------------------------------------------------------------ the one pass
    def _aggregate(self, declared: Mapping[str, Hierarchy | None], dims: Sequence[Dimension] | None,
                   n_rows: int) -> Table:
        """The table in one pass: every grouping set of the hierarchies' levels (module docstring,
        steps 2–5), validated against the codelists, as a sparse table of the cells with records."""
        hiers = [d.hierarchy for d in dims] if dims is not None else [declared[v] for v in self.spec.by]
        parts, names, weight = self._measures(n_rows)
        known = all(h is not None for h in hiers)
        if known and self._margins_in_memory(hiers, n_rows):  # type: ignore[arg-type]
            return self._aggregate_inner(hiers, dims, parts, names)  # type: ignore[arg-type]
        groups, aliases, joins = self._level_columns(hiers)
        sql, n_sets, groups = self._grouping_sql(groups, aliases, joins, parts, names, hiers if known else None)
        from tabsafe import progress

        progress.report("tabulation", variables=" × ".join(self.spec.by), grouping_sets=n_sets)
        result = self.s.run(sql)
        progress.report("tabulation", variables=" × ".join(self.spec.by), result_rows=result.num_rows)
        records = names[1] if weight is not None else "count"
        if known:
            dims, cell, keep = self._known_cells(result, hiers, dims, records, n_rows)
        else:
            dims, cell, keep = self._found_cells(result, hiers, dims, groups, aliases, records, n_rows)
        cell, values = self._cell_values(result, names, cell, keep)
        return Table.from_cells(dims, cell, values, self._table_meta(), sort=True)

    def _margins_in_memory(self, hiers: Sequence[Hierarchy], n_rows: int) -> bool:
        """Whether the margins are summed here from the inner cells (:meth:`_aggregate_inner`)
        rather than by the engine over grouping sets: when every codelist is known, the grid
        fits :data:`IN_MEMORY_GRID_CELLS`, and every measure is an integer whose sums fit int64
        (counts, whole weights, record keys on the BIGINT path of :meth:`_measures`; exact decimal
        sums of magnitudes stay with the engine)."""
        if not self.spec.by or self.spec.sums:
            return False
        key = self.spec.key
        if key is not None and n_rows * (key.scale - 1) > 2**63 - 1:
            return False
        n_cells = 1
        for h in hiers:
            n_cells *= len(h)
        return n_cells <= IN_MEMORY_GRID_CELLS

    def _aggregate_inner(self, hiers: Sequence[Hierarchy], dims: Sequence[Dimension] | None,
                         parts: Sequence[tuple[str, Callable[[str], str]]], names: Sequence[str]) -> Table:
        """The table from one pass that groups the records by their codes (the inner cells, far
        fewer rows than records), the margins and subtotals then summed on the dense grid
        (:func:`~tabsafe.model.table.fill_aggregates`). Same cells and values as the grouping
        sets: every measure here is an exact integer sum, so summing partial sums changes
        nothing; the record key's reduction mod its scale follows the summing, as in
        :meth:`_measures`. Grouping sets cost the engine one hash table per combination of levels
        (128 for seven flat variables), the inner cells one.

        Codes are placed by a join of the (few) groups with each codelist's leaves; a group whose
        code is missing or outside its codelist finds no leaf, and :meth:`_find_lost_rows` names it
        (a filter's table was checked over the whole data before: ``dims`` given)."""
        from tabsafe import progress

        exprs = [self._text(v) for v in self.spec.by]
        where = f"WHERE {self.filter_sql}" if self.filter_sql else ""
        inner = ", ".join(f"{e} AS _ts_c{i}" for i, e in enumerate(exprs))
        measures = ", ".join(f"{self.d.as_bigint(agg)} AS {self.q(n)}" for (agg, _), n in zip(parts, names))
        joins = []
        for i, h in enumerate(hiers):
            leaves = list(h.leaves)
            self.s.register(f"leaf_{i}", arrow_table({
                "_ts_code": strings(leaves),
                "_ts_pos": from_numpy(np.array([h.position[c] for c in leaves], dtype=np.int32)),
            }))
            joins.append(f"LEFT JOIN leaf_{i} ON g._ts_c{i} = leaf_{i}._ts_code")
        sql = (f"SELECT {', '.join(f'leaf_{i}._ts_pos AS _ts_p{i}' for i in range(len(hiers)))}, "
               f"{', '.join(self.q(n) for n in names)} "
               f"FROM (SELECT {inner}, {measures} FROM {SOURCE} {where} GROUP BY {', '.join(exprs)}) g "
               + " ".join(joins))
        progress.report("tabulation", variables=" × ".join(self.spec.by), grouping_sets=1)
        result = self.s.run(sql)
        progress.report("tabulation", variables=" × ".join(self.spec.by), result_rows=result.num_rows)
        shape = tuple(len(h) for h in hiers)
        strides = np.cumprod((1,) + shape[::-1])[:-1][::-1]
        cell = np.zeros(result.num_rows, dtype=np.int64)
        for i, stride in enumerate(strides):
            pos = to_numpy(result.column(f"_ts_p{i}"), fill=-1).astype(np.int64, copy=False)
            if pos.size and pos.min() < 0:
                self._find_lost_rows(hiers)
            cell += pos * int(stride)
        if dims is None:
            dims = [Dimension(v, h) for v, h in zip(self.spec.by, hiers)]
        totals: dict[str, np.ndarray] = {}
        for n in names:
            grid = np.zeros(shape, dtype=np.int64)
            grid.reshape(-1)[cell] = to_numpy(result.column(n), fill=0).astype(np.int64, copy=False)
            totals[n] = fill_aggregates(grid, hiers).reshape(-1)
        if self.spec.key is not None:
            totals["ckey_int"] = totals["ckey_int"] % self.spec.key.scale  # the reduction _measures' final makes
        ids = np.flatnonzero(totals["count"])
        values = {n: arr[ids] for n, arr in totals.items() if n != "_ts_records"}
        if self.spec.key is not None:
            values["ckey"] = values["ckey_int"] / self.spec.key.scale
        return Table.from_cells(dims, ids, values, self._table_meta())

    def _level_columns(self, hiers: Sequence[Hierarchy | None]) -> tuple[list[list[str]], list[list[str]], list[str]]:
        """Per variable, its grouping alternatives besides "total" (SQL expressions), the same as
        output columns, and the joins they need. A variable with a known codelist is joined to a
        small code table (registered in the session) that maps each code to its position at every
        level, so the pass groups on small integers (far less memory than text keys at census
        scale); one without groups on its codes, checked and placed after the pass."""
        groups: list[list[str]] = []
        aliases: list[list[str]] = []
        joins: list[str] = []
        for i, (var, h) in enumerate(zip(self.spec.by, hiers)):
            expr = self._text(var)
            if h is None:
                groups.append([expr])
                aliases.append([f"d{i}"])
                continue
            depth = h.max_depth
            rows: dict[str, pa.Array] = {"_ts_code": strings(list(h.leaves))}
            chains = [h.ancestors(leaf)[::-1] for leaf in h.leaves]  # total, level 1, ..., leaf
            for level in range(1, depth + 1):
                # A leaf above the deepest level has no code there: -1 marks the padded
                # group, dropped below, so unbalanced hierarchies give no duplicate cells.
                pos = np.array([h.position[c[level]] if level < len(c) else -1 for c in chains], dtype=np.int32)
                rows[f"_ts_l{level}"] = from_numpy(pos)
            self.s.register(f"map_{i}", arrow_table(rows))
            joins.append(f"JOIN map_{i} ON {expr} = map_{i}._ts_code")
            groups.append([f"map_{i}._ts_l{lv}" for lv in range(1, depth + 1)])
            aliases.append([f"d{i}_{lv}" for lv in range(1, depth + 1)])
        return groups, aliases, joins

    def _measures(self, n_rows: int) -> tuple[list[tuple[str, Callable[[str], str]]], list[str], str | None]:
        """Every measure as (its aggregate over records, what the cell's value is of that total),
        their output names, and the weight expression (None without weights). Counts, whole units
        and key integers are exact sums, so partial totals add up (METHODS.md §2 for the keys)."""
        def same(total: str) -> str:
            return total

        weight = None
        parts: list[tuple[str, Callable[[str], str]]]
        if isinstance(self.data, Microdata) and self.weight is not None:
            weight = self.d.as_bigint(self.d.as_number(f"{SOURCE}.{self.q(self.weight)}"))
            parts = [(f"sum({weight})", same), ("count(*)", same)]
            names = ["count", "_ts_records"]
        elif isinstance(self.data, Microdata):
            parts = [("count(*)", same)]
            names = ["count"]
        else:
            parts = [(f"sum({self.d.as_bigint(self.d.as_number(self.q(self.data.count)))})", same)]
            names = ["count"]
        for var in self.spec.sums:
            parts.append((f"sum({self.d.as_units(f'{SOURCE}.{self.q(var)}', self.spec.sum_digits)})", same))
            names.append(f"sum_{var}")
        key = self.spec.key
        if key is not None:
            k = f"{SOURCE}.{self.q(key.column)}"
            # Exact cell keys: fixed-point integers summed exactly, then reduced mod the scale.
            ints = (self.d.as_bigint(self.d.as_number(k)) if key.modulus is not None
                    else self.d.as_bigint(f"round({self.d.as_number(k)} * {key.scale})"))
            if weight is not None:
                # a record of weight 0 is in no cell: its key is in no cell key either
                ints = f"CASE WHEN {weight} > 0 THEN {ints} ELSE 0 END"
            if n_rows * (key.scale - 1) > 2**63 - 1:
                # The sum could pass a BIGINT (Spark's sum of BIGINT is a BIGINT; DuckDB's a
                # HUGEINT): sum exact 38-digit decimals instead, which hold any such sum.
                ints = f"CAST({ints} AS DECIMAL(38, 0))"
            scale = str(key.scale)
            parts.append((f"sum({ints})", lambda total: self.d.as_bigint(self.d.mod(total, scale))))
            names.append("ckey_int")
        return parts, names, weight

    def _grouping_sql(self, groups: list[list[str]], aliases: Sequence[Sequence[str]], joins: Sequence[str],
                      parts: Sequence[tuple[str, Callable[[str], str]]], names: Sequence[str],
                      hiers: Sequence[Hierarchy] | None) -> tuple[str, int, list[list[str]]]:
        """The one query over ``GROUPING SETS`` (one set per combination of levels), its number of
        sets and the grouped columns as the query names them. With every codelist known
        (``hiers``) the cell id (the mixed-radix number of the positions) is computed in the
        engine and only ids and values come back; else a grouping id tells the sets apart."""
        where = f"WHERE {self.filter_sql}" if self.filter_sql else ""
        source = f"{SOURCE} {' '.join(joins)} {where}"
        if self.d.pre_aggregate:
            # Two phases: records → one row per combination of leaf codes (every level column
            # is a function of the leaf), then the grouping sets over those rows. An engine
            # that expands each row once per grouping set (Spark) expands inner cells, not records.
            raw = [e for alts in groups for e in alts]
            inner_name = {e: f"_ts_g{j}" for j, e in enumerate(raw)}
            inner = ", ".join(f"{e} AS {inner_name[e]}" for e in raw)
            partial = ", ".join(f"{agg} AS _ts_m{j}" for j, (agg, _) in enumerate(parts))
            source = f"(SELECT {inner}, {partial} FROM {source} GROUP BY {', '.join(raw)}) t0"
            groups = [[inner_name[e] for e in alts] for alts in groups]
            measures = [final(f"sum(_ts_m{j})") for j, (_, final) in enumerate(parts)]
        else:
            measures = [final(agg) for agg, final in parts]
        select = [f"{c} AS {a}" for alts, als in zip(groups, aliases) for c, a in zip(alts, als)]
        sets = [
            "(" + ", ".join(c for c in choice if c is not None) + ")"
            for choice in itertools.product(*[[None, *alts] for alts in groups])
        ]
        if hiers is None:
            select.append(f"{self.d.grouping_id([e for alts in groups for e in alts])} AS _ts_gid")
        select += [f"{m} AS {self.q(n)}" for m, n in zip(measures, names)]
        sql = f"SELECT {', '.join(select)} FROM {source} GROUP BY GROUPING SETS ({', '.join(sets)})"
        if hiers is not None:
            shape = [len(h) for h in hiers]
            strides = np.cumprod([1] + shape[::-1])[:-1][::-1].tolist()
            terms = []
            keeps = []
            for cols, stride in zip(aliases, strides):
                pos = f"COALESCE({', '.join(cols)}, 0)"
                terms.append(f"{self.d.as_bigint(pos)} * {int(stride)}")
                keeps += [f"COALESCE({c}, 0) >= 0" for c in cols]
            outer = ", ".join(self.q(n) for n in names)
            sql = (f"SELECT {' + '.join(terms)} AS _ts_id, {outer} FROM ({sql}) t"
                   + (f" WHERE {' AND '.join(keeps)}" if keeps else ""))
        return sql, len(sets), groups

    def _known_cells(self, result: pa.Table, hiers: Sequence[Hierarchy | None], dims: Sequence[Dimension] | None,
                     records: str, n_rows: int) -> tuple[Sequence[Dimension], np.ndarray, np.ndarray]:
        """The dimensions, cell ids and rows kept when every codelist is known (the engine computed
        the ids); without a filter, a grand total short of the records means rows lost in a code
        join: :meth:`_find_lost_rows` names them."""
        cell = to_numpy(result.column("_ts_id")).astype(np.int64, copy=False)
        if dims is None:
            dims = [Dimension(v, h) for v, h in zip(self.spec.by, hiers)]  # type: ignore[arg-type]
            grand = to_numpy(result.column(records))[cell == 0]
            if (int(grand[0]) if grand.size else 0) != n_rows:
                self._find_lost_rows(hiers)
        return dims, cell, np.ones(result.num_rows, dtype=bool)

    def _found_cells(self, result: pa.Table, hiers: Sequence[Hierarchy | None], dims: Sequence[Dimension] | None,
                     groups: Sequence[Sequence[str]], aliases: Sequence[Sequence[str]], records: str,
                     n_rows: int) -> tuple[Sequence[Dimension], np.ndarray, np.ndarray]:
        """The dimensions, cell ids and rows kept when some codelist comes from the data: codes
        are validated from the single-variable grouping sets of the pass, then placed; a row of
        a padded level (-1, unbalanced hierarchies) is dropped."""
        gid = to_numpy(result.column("_ts_gid")).astype(np.int64)
        if dims is None:
            dims = self._dimensions_from_result(result, gid, groups, hiers, n_rows, records=records)
            self._check_size([len(d) for d in dims])
        shape = [len(d) for d in dims]
        strides = np.cumprod([1] + shape[::-1])[:-1][::-1].tolist()
        cell = np.zeros(result.num_rows, dtype=np.int64)
        keep = np.ones(result.num_rows, dtype=bool)
        for i, (d, stride) in enumerate(zip(dims, strides)):
            if hiers[i] is None:
                # Codes → display positions; not grouped means the total, at position 0.
                import pyarrow.compute as pc  # only for codelists taken from the data

                pos = to_numpy(pc.index_in(result.column(f"d{i}"), value_set=strings(d.hierarchy.order)), fill=0)
            else:
                levels = [to_numpy(result.column(c), fill=0) for c in aliases[i]]
                stacked = np.stack(levels)
                keep &= ~np.any(stacked == -1, axis=0)
                pos = stacked.max(axis=0)  # at most one level is grouped (> 0) in each row
            cell += pos.astype(np.int64) * stride
        return dims, cell, keep

    def _cell_values(self, result: pa.Table, names: Sequence[str], cell: np.ndarray,
                     keep: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The kept rows' cell ids and values: counts as int64, sums as the float nearest their
        exact sum, the cell key as ``frac`` of its integer over the scale; cells whose values are
        all zero (inner cells given as explicit zeros) are implied, not stored."""
        values: dict[str, np.ndarray] = {}
        for n in names:
            col = result.column(n)
            if n.startswith("sum_"):
                # exact sums of whole units of 10^-digits, converted once: the float nearest the
                # exact sum (one correctly rounded division), the same in every run and engine
                arr = to_numpy(col, fill=0.0).astype(np.float64, copy=False) / 10.0 ** self.spec.sum_digits
            else:
                arr = to_numpy(col, fill=0).astype(np.int64, copy=False)
            values[n] = arr[keep] if not keep.all() else arr
        cell = cell[keep] if not keep.all() else cell
        values.pop("_ts_records", None)
        nonzero = values["count"] != 0
        for n, arr in values.items():
            if n.startswith("sum_"):
                nonzero |= arr != 0
        if not nonzero.all():  # inner cells given as explicit zeros: implied, not stored
            cell = cell[nonzero]
            values = {n: arr[nonzero] for n, arr in values.items()}
        if self.spec.key is not None:
            values["ckey"] = values["ckey_int"] / self.spec.key.scale
        return cell, values

    def _table_meta(self) -> dict[str, Any]:
        """The table's metadata: source, filter, engine, and the key, sums and weight it used."""
        key = self.spec.key
        meta: dict[str, Any] = {
            "source": self.where_src,
            "where": self.spec.where.to_text() if self.spec.where is not None else None,
            "engine": self.engine_name,
        }
        if key is not None:
            meta["key"] = {"column": key.column, "digits": key.digits, "modulus": key.modulus}
        if self.spec.sums:
            meta["sum_digits"] = self.spec.sum_digits
        if self.weight is not None:
            meta["weight"] = self.weight
        return meta

    def _find_lost_rows(self, hiers: Sequence[Hierarchy | None]) -> None:
        """Rows lost in a code join: unknown codes or missing values. Find and name them."""
        found = self._observed_codes()
        for var, h in zip(self.spec.by, hiers):
            self._dimension(var, h, found[var])
        raise AssertionError("rows lost in tabulation without an invalid code")  # pragma: no cover

    def _dimensions_from_result(
        self, result: pa.Table, gid: np.ndarray, groups: Sequence[Sequence[str]],
        hiers: Sequence[Hierarchy | None], n_rows: int, records: str = "count",
    ) -> list[Dimension]:
        """Validate codes using the single-variable grouping sets of the main pass."""
        n_bits = sum(len(g) for g in groups)
        total_rows = gid == (1 << n_bits) - 1
        counts = to_numpy(result.column(records))
        grand = int(counts[total_rows][0]) if total_rows.any() else 0
        if grand != n_rows:
            self._find_lost_rows(hiers)
        dims = []
        bit = n_bits
        for i, (var, h, alts) in enumerate(zip(self.spec.by, hiers, groups)):
            bit -= len(alts)
            if h is not None:
                dims.append(Dimension(var, h))
                continue
            only_this = gid == ((1 << n_bits) - 1) ^ (1 << bit)
            codes = result.column(f"d{i}").filter(from_numpy(only_this)).to_pylist()
            dims.append(self._dimension(var, h, dict(zip(codes, counts[only_this].tolist()))))
        return dims
