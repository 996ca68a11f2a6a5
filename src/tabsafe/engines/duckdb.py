"""The embedded engine: tabulation in DuckDB, every margin in one ``GROUPING SETS`` pass.

Each spanning variable's codes are mapped, by a join with a small code table, to integer
positions at every level of its hierarchy; one aggregation over ``GROUPING SETS`` (one set per
combination of levels, the total being "not grouped") then yields every cell that has records,
and the cells are scattered into the complete zero-filled grid by their mixed-radix row number.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tabsafe.errors import InputError, TooLargeError
from tabsafe.model.hierarchy import TOTAL, Hierarchy
from tabsafe.model.microdata import ArrowSource, FileSource, InnerCells, Microdata, Source
from tabsafe.model.spec import TableSpec
from tabsafe.model.table import Dimension, Table


def _q(name: str) -> str:
    """Quote an identifier for SQL."""
    return '"' + name.replace('"', '""') + '"'


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def natural_key(code: str) -> tuple[Any, ...]:
    """Sort "2" before "10" and "A2" before "A10" when a codelist is taken from the data."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", code) if p)


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


@dataclass(frozen=True, kw_only=True)
class DuckDBEngine:
    """Tabulation on an in-process DuckDB database (the default engine).

    Attributes:
        threads: worker threads (``None``: DuckDB's default, one per core).
        memory_limit: e.g. ``"4GB"``; ``None`` keeps DuckDB's default.
    """

    threads: int | None = None
    memory_limit: str | None = None
    name = "duckdb"

    def connect(self) -> duckdb.DuckDBPyConnection:
        con = duckdb.connect(":memory:")
        if self.threads:
            con.execute(f"SET threads = {int(self.threads)}")
        if self.memory_limit:
            con.execute(f"SET memory_limit = {_lit(self.memory_limit)}")
        return con

    # ------------------------------------------------------------------ public
    def tabulate(self, data: Microdata | InnerCells, spec: TableSpec) -> Table:
        con = self.connect()
        try:
            return _Tabulation(con, data, spec).run()
        finally:
            con.close()


def register_source(con: duckdb.DuckDBPyConnection, source: Source, view: str = "src") -> None:
    """Make ``view`` a view over the source without copying it."""
    try:
        if isinstance(source, FileSource):
            if source.format == "parquet":
                con.execute(f"CREATE VIEW {view} AS SELECT * FROM read_parquet({_lit(source.path)})")
            else:
                # Codes such as "01" must stay strings: read every CSV column as text and cast
                # numeric columns explicitly where they are used.
                con.execute(
                    f"CREATE VIEW {view} AS SELECT * FROM read_csv({_lit(source.path)}, header=true, all_varchar=true)"
                )
            con.execute(f"SELECT * FROM {view} LIMIT 0").fetchall()
        elif isinstance(source, ArrowSource):
            con.register(f"{view}_arrow", source.table)
            con.execute(f"CREATE VIEW {view} AS SELECT * FROM {view}_arrow")
        else:  # pragma: no cover - the Source union is closed
            raise TypeError(source)
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0]
        raise InputError(f"cannot read data: {first}", where=source.describe()) from None


class _Tabulation:
    """One tabulation run; holds the connection and the resolved dimensions."""

    def __init__(self, con: duckdb.DuckDBPyConnection, data: Microdata | InnerCells, spec: TableSpec) -> None:
        self.con = con
        self.data = data
        self.spec = spec
        self.where_src = data.source.describe()

    def run(self) -> Table:
        register_source(self.con, self.data.source)
        self.columns = {r[0]: r[1] for r in self.con.execute("DESCRIBE src").fetchall()}
        self._check_columns()
        n_rows = self.con.execute("SELECT count(*) FROM src").fetchall()[0][0]
        if n_rows == 0:
            raise InputError("the data have no records", where=self.where_src)
        declared = {v: self._declared(v) for v in self.spec.by}
        if self.spec.where or isinstance(self.data, InnerCells):
            # The main pass only sees selected rows: validate the whole data set in a pass of its own.
            found = self._observed_codes()
            dims = [self._dimension(v, declared[v], found[v]) for v in self.spec.by]
            self._check_size([len(d) for d in dims])
            if isinstance(self.data, InnerCells):
                self._check_inner_cells(dims)
        else:
            # Without a filter the single-variable grouping sets of the main pass are exactly the
            # observed codes, so the codelist check costs no extra pass (see _aggregate).
            dims = None
            sizes = [len(h) if h is not None else 0 for h in declared.values()]
            if all(sizes):
                self._check_size(sizes)
        if self.spec.key is not None:
            self._check_keys()
        return self._aggregate(declared, dims, n_rows)

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
                f"table {shape} would have {n_cells:,} cells, more than the limit of {self.spec.max_cells:,}"
            )

    # ------------------------------------------------------------------ checks
    def _check_columns(self) -> None:
        have = list(self.columns)
        wanted = [(v, "--by") for v in self.spec.by] + [(v, "--sum") for v in self.spec.sums]
        if self.spec.key is not None:
            wanted.append((self.spec.key.column, "--key"))
        if isinstance(self.data, InnerCells):
            wanted.append((self.data.count, "--count"))
        for name, option in wanted:
            if name not in self.columns:
                shown = ", ".join(have[:12]) + (" …" if len(have) > 12 else "")
                raise InputError(f"unknown variable {name!r} in {option}; the data have: {shown}", where=self.where_src)

    def _observed_codes(self) -> dict[str, dict[str | None, int]]:
        """Distinct values and their row counts for every spanning variable, in one pass."""
        exprs = [
            f"CAST({_q(v)} AS VARCHAR)" if self.columns[v] != "VARCHAR" else _q(v) for v in self.spec.by
        ]
        sets = ", ".join(f"({e})" for e in exprs)
        cols = ", ".join(f"{e} AS v{i}, GROUPING({e}) AS g{i}" for i, e in enumerate(exprs))
        rows = self.con.sql(f"SELECT {cols}, count(*) AS n FROM src GROUP BY GROUPING SETS ({sets})").fetchall()
        found: dict[str, dict[str | None, int]] = {v: {} for v in self.spec.by}
        for row in rows:
            for i, var in enumerate(self.spec.by):
                if row[2 * i + 1] == 0:  # grouped on this variable
                    found[var][row[2 * i]] = row[-1]
                    break
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
            hierarchy = Hierarchy.flat(sorted(found, key=natural_key), source=f"codes of {var!r}")
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
            worst = sorted(outside.items(), key=lambda kv: (-kv[1], kv[0]))
            shown = ", ".join(f"{c!r} ({_plural(n, 'row')})" for c, n in worst[:3])
            more = f" and {len(worst) - 3} more" if len(worst) > 3 else ""
            raise InputError(
                f"variable {var!r} has value(s) outside its codelist: {shown}{more}", where=self.where_src
            )
        return Dimension(var, hierarchy)

    def _check_inner_cells(self, dims: Sequence[Dimension]) -> None:
        assert isinstance(self.data, InnerCells)
        c = _q(self.data.count)
        num = f"TRY_CAST({c} AS DOUBLE)"
        bad = self.con.execute(
            f"""SELECT count(*) FILTER ({c} IS NULL),
                       count(*) FILTER ({c} IS NOT NULL AND {num} IS NULL),
                       count(*) FILTER ({num} < 0),
                       count(*) FILTER ({num} <> floor({num})),
                       min({num}) FILTER ({num} < 0),
                       min({num}) FILTER ({num} <> floor({num}))
                FROM src"""
        ).fetchall()[0]
        col = f"count column {self.data.count!r}"
        if bad[0]:
            raise InputError(f"{col} has {_plural(bad[0], 'missing value')}", where=self.where_src)
        if bad[1]:
            raise InputError(f"{col} has {_plural(bad[1], 'value')} that are not numbers", where=self.where_src)
        if bad[2]:
            raise InputError(f"{col} has {_plural(bad[2], 'negative count')} (e.g. {bad[4]:g})", where=self.where_src)
        if bad[3]:
            raise InputError(f"{col} has {_plural(bad[3], 'fractional count')} (e.g. {bad[5]:g})", where=self.where_src)
        keys = ", ".join(f"CAST({_q(d.variable)} AS VARCHAR)" for d in dims)
        dup = self.con.execute(
            f"""SELECT count(*) OVER (), * FROM (SELECT {keys}, count(*) AS n FROM src GROUP BY ALL HAVING n > 1)
                LIMIT 1"""
        ).fetchall()
        dup = dup[0] if dup else None
        if dup:
            cell = ", ".join(f"{d.variable}={v}" for d, v in zip(dims, dup[1:-1]))
            raise InputError(
                f"{_plural(dup[0], 'inner cell')} appear more than once, e.g. ({cell}) {dup[-1]} times; "
                "aggregate the table first",
                where=self.where_src,
            )

    def _check_keys(self) -> None:
        key = self.spec.key
        assert key is not None
        k = _q(key.column)
        num = f"TRY_CAST({k} AS DOUBLE)"
        n_null, n_text, lo, hi, frac = self.con.execute(
            f"""SELECT count(*) FILTER ({k} IS NULL), count(*) FILTER ({k} IS NOT NULL AND {num} IS NULL),
                       min({num}), max({num}), {"max(" + num + " - floor(" + num + "))" if key.modulus else "0"}
                FROM src"""
        ).fetchall()[0]
        col = f"record key column {key.column!r}"
        if n_null or n_text:
            what = _plural(n_null, "missing value") if n_null else _plural(n_text, "value") + " that are not numbers"
            raise InputError(f"{col} has {what}", where=self.where_src)
        if key.modulus is not None:
            if lo < 0 or hi >= key.modulus or frac:
                bad = lo if lo < 0 else hi
                raise InputError(f"{col} has values outside the integers 0..{key.modulus - 1} (e.g. {bad:g})", where=self.where_src)
        elif lo < 0 or hi >= 1:
            bad = lo if lo < 0 else hi
            raise InputError(f"{col} has values outside [0, 1) (e.g. {bad:g})", where=self.where_src)

    # ------------------------------------------------------------------ aggregation
    def _aggregate(
        self, declared: Mapping[str, Hierarchy | None], dims: Sequence[Dimension] | None, n_rows: int
    ) -> Table:
        """The one aggregation pass, then (without a filter) the codelist check from its result."""
        hiers = [d.hierarchy for d in dims] if dims is not None else [declared[v] for v in self.spec.by]
        select: list[str] = []  # grouped expressions, aliased
        groups: list[list[str]] = []  # per variable: its grouping alternatives besides "total"
        joins: list[str] = []
        for i, (var, h) in enumerate(zip(self.spec.by, hiers)):
            col = f"src.{_q(var)}"
            expr = col if self.columns[var] == "VARCHAR" else f"CAST({col} AS VARCHAR)"
            if h is None or h.max_depth == 1:
                # Flat variable: group on the raw codes; codes become positions after the pass.
                select.append(f"{expr} AS d{i}")
                groups.append([expr])
                continue
            depth = h.max_depth
            rows: dict[str, list[Any]] = {"_ts_code": list(h.leaves)}
            for level in range(1, depth + 1):
                pos = []
                for leaf in h.leaves:
                    chain = h.ancestors(leaf)[::-1]  # total, level 1, ..., leaf
                    # A leaf above the deepest level has no code there: -1 marks the padded
                    # group, dropped below, so unbalanced hierarchies give no duplicate cells.
                    pos.append(h.position[chain[level]] if level < len(chain) else -1)
                rows[f"_ts_l{level}"] = pos
            schema = pa.schema([("_ts_code", pa.string())] + [(f"_ts_l{lv}", pa.int32()) for lv in range(1, depth + 1)])
            self.con.register(f"map_{i}", pa.table(rows, schema=schema))
            joins.append(f"JOIN map_{i} ON {expr} = map_{i}._ts_code")
            levels = [f"map_{i}._ts_l{lv}" for lv in range(1, depth + 1)]
            select += [f"{c} AS d{i}_{lv}" for lv, c in enumerate(levels, start=1)]
            groups.append(levels)
        sets = [
            "(" + ", ".join(c for c in choice if c is not None) + ")"
            for choice in itertools.product(*[[None, *alts] for alts in groups])
        ]
        grouped = [e for alts in groups for e in alts]
        select.append(f"GROUPING({', '.join(grouped)}) AS _ts_gid")

        measures = ["count(*)" if isinstance(self.data, Microdata) else f"sum(CAST({_q(self.data.count)} AS BIGINT))"]
        names = ["count"]
        for var in self.spec.sums:
            measures.append(f"sum(TRY_CAST({_q(var)} AS DOUBLE))")
            names.append(f"sum_{var}")
        key = self.spec.key
        if key is not None:
            k = _q(key.column)
            # Exact cell keys: fixed-point integers summed in 128 bits, then reduced mod the scale.
            ints = f"CAST({k} AS BIGINT)" if key.modulus is not None else f"CAST(round(CAST({k} AS DOUBLE) * {key.scale}) AS BIGINT)"
            measures.append(f"CAST(sum({ints}) % {key.scale} AS BIGINT)")
            names.append("ckey_int")
        select += [f"{m} AS {_q(n)}" for m, n in zip(measures, names)]
        where = f"WHERE ({self.spec.where})" if self.spec.where else ""
        sql = f"SELECT {', '.join(select)} FROM src {' '.join(joins)} {where} GROUP BY GROUPING SETS ({', '.join(sets)})"
        try:
            result = self.con.sql(sql).to_arrow_table()
        except duckdb.Error as exc:
            first = str(exc).strip().splitlines()[0]
            if self.spec.where:
                raise InputError(f"--where {self.spec.where!r} failed: {first}", where=self.where_src) from None
            raise
        gid = result.column("_ts_gid").to_numpy()

        if dims is None:
            dims = self._dimensions_from_result(result, gid, groups, hiers, n_rows)
            self._check_size([len(d) for d in dims])

        shape = [len(d) for d in dims]
        strides = np.cumprod([1] + shape[::-1])[:-1][::-1].tolist()
        cell = np.zeros(result.num_rows, dtype=np.int64)
        keep = np.ones(result.num_rows, dtype=bool)
        for i, (d, stride) in enumerate(zip(dims, strides)):
            if len(groups[i]) == 1 and d.hierarchy.max_depth == 1:
                # Codes → display positions; not grouped means the total, at position 0.
                pos = pc.index_in(result.column(f"d{i}"), value_set=pa.array(d.hierarchy.order))
                pos = pos.fill_null(0).to_numpy()
            else:
                levels = [result.column(f"d{i}_{lv}").fill_null(0).to_numpy() for lv in range(1, d.hierarchy.max_depth + 1)]
                stacked = np.stack(levels)
                keep &= ~np.any(stacked == -1, axis=0)
                pos = stacked.max(axis=0)  # at most one level is grouped (> 0) in each row
            cell += pos.astype(np.int64) * stride
        cell = cell[keep]
        n_cells = int(np.prod(shape, dtype=np.int64)) if shape else 1
        values: dict[str, np.ndarray] = {}
        for n in names:
            src = result.column(n).to_numpy(zero_copy_only=False)[keep]
            dtype = np.float64 if n.startswith("sum_") else np.int64
            out = np.zeros(n_cells, dtype=dtype)
            out[cell] = np.nan_to_num(src, nan=0.0) if dtype == np.float64 else src
            values[n] = out
        if key is not None:
            values["ckey"] = values["ckey_int"] / key.scale
        meta = {"source": self.where_src, "where": self.spec.where, "engine": "duckdb"}
        if key is not None:
            meta["key"] = {"column": key.column, "digits": key.digits, "modulus": key.modulus}
        return Table.from_arrays(dims, values, meta)

    def _dimensions_from_result(
        self, result: pa.Table, gid: np.ndarray, groups: Sequence[Sequence[str]],
        hiers: Sequence[Hierarchy | None], n_rows: int,
    ) -> list[Dimension]:
        """Validate codes using the single-variable grouping sets of the main pass."""
        n_bits = sum(len(g) for g in groups)
        total_rows = gid == (1 << n_bits) - 1
        grand = int(result.column("count").to_numpy()[total_rows][0]) if total_rows.any() else 0
        if grand != n_rows:
            # Rows lost in a hierarchy join: unknown codes or missing values. Find them properly.
            found = self._observed_codes()
            for var, h in zip(self.spec.by, hiers):
                self._dimension(var, h, found[var])
            raise AssertionError("rows lost in tabulation without an invalid code")  # pragma: no cover
        dims = []
        bit = n_bits
        for i, (var, h, alts) in enumerate(zip(self.spec.by, hiers, groups)):
            bit -= len(alts)
            if h is not None and h.max_depth > 1:
                dims.append(Dimension(var, h))
                continue
            only_this = gid == ((1 << n_bits) - 1) ^ (1 << bit)
            codes = result.column(f"d{i}").filter(pa.array(only_this)).to_pylist()
            counts = result.column("count").to_numpy()[only_this]
            dims.append(self._dimension(var, h, dict(zip(codes, counts.tolist()))))
        return dims

