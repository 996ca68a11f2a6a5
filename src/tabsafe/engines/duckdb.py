"""The embedded engine: tabulation in DuckDB, every margin in one ``GROUPING SETS`` pass.

Each spanning variable's codes are mapped, by a join with a small code table, to integer
positions at every level of its hierarchy; one aggregation over ``GROUPING SETS`` (one set per
combination of levels, the total being "not grouped") then yields every cell that has records,
and the cells are scattered into the complete zero-filled grid by their mixed-radix row number.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from tabsafe.errors import InputError, TooLargeError
from tabsafe.model.hierarchy import Hierarchy
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
        dims = [self._dimension(v) for v in self.spec.by]
        n_cells = int(np.prod([len(d) for d in dims], dtype=np.float64))
        if n_cells > self.spec.max_cells:
            shape = " × ".join(f"{d.variable}({len(d)})" for d in dims)
            raise TooLargeError(
                f"table {shape} would have {n_cells:,} cells, more than the limit of {self.spec.max_cells:,}"
            )
        if isinstance(self.data, InnerCells):
            self._check_inner_cells(dims)
        if self.spec.key is not None:
            self._check_keys()
        return self._aggregate(dims)

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

    def _dimension(self, var: str) -> Dimension:
        """Resolve the variable's hierarchy and check every data value against its codelist."""
        declared = self.data.codelists.get(var)
        hierarchy = self.spec.hierarchies.get(var, declared)
        if hierarchy is not None and declared is not None and hierarchy is not declared:
            hierarchy.check_codelist(declared.leaves, variable=var)
        rows = self.con.execute(
            f"SELECT CAST({_q(var)} AS VARCHAR) AS code, count(*) FROM src GROUP BY 1"
        ).fetchall()
        found = {code: n for code, n in rows}
        if None in found:
            raise InputError(f"variable {var!r} has {_plural(found[None], 'missing value')}", where=self.where_src)
        found = {code.strip(): n for code, n in found.items()}
        if hierarchy is None:
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
        if key.modulus is not None:
            cond = f"TRY_CAST({k} AS DOUBLE) IS NULL OR {k}::DOUBLE < 0 OR {k}::DOUBLE >= {key.modulus} OR {k}::DOUBLE <> floor({k}::DOUBLE)"
            allowed = f"integers 0..{key.modulus - 1}"
        else:
            cond = f"TRY_CAST({k} AS DOUBLE) IS NULL OR {k}::DOUBLE < 0 OR {k}::DOUBLE >= 1"
            allowed = "[0, 1)"
        n, first = self.con.execute(
            f"SELECT count(*), min(CAST({k} AS VARCHAR)) FROM src WHERE {cond}"
        ).fetchall()[0]
        if n:
            raise InputError(
                f"record key column {key.column!r} has {_plural(n, 'value')} outside {allowed} (e.g. {first})",
                where=self.where_src,
            )

    # ------------------------------------------------------------------ aggregation
    def _aggregate(self, dims: Sequence[Dimension]) -> Table:
        shape = [len(d) for d in dims]
        strides = np.cumprod([1] + shape[::-1])[:-1][::-1].tolist()
        level_cols: list[list[str]] = []
        joins: list[str] = []
        for i, d in enumerate(dims):
            h = d.hierarchy
            depth = h.max_depth
            rows: dict[str, list[Any]] = {"_ts_code": list(h.leaves)}
            for level in range(1, depth + 1):
                col = []
                for leaf in h.leaves:
                    chain = h.ancestors(leaf)[::-1]  # total, level 1, ..., leaf
                    # A leaf above the deepest level has no code there: -1 marks the padded
                    # group, dropped below, so unbalanced hierarchies give no duplicate cells.
                    col.append(h.position[chain[level]] if level < len(chain) else -1)
                rows[f"_ts_l{level}"] = col
            self.con.register(f"map_{i}", pa.table(rows, schema=pa.schema(
                [("_ts_code", pa.string())] + [(f"_ts_l{lv}", pa.int32()) for lv in range(1, depth + 1)]
            )))
            joins.append(f"JOIN map_{i} ON trim(CAST(src.{_q(d.variable)} AS VARCHAR)) = map_{i}._ts_code")
            level_cols.append([f"map_{i}._ts_l{lv}" for lv in range(1, depth + 1)])

        sets = []
        for choice in itertools.product(*[[None, *cols] for cols in level_cols]):
            sets.append("(" + ", ".join(c for c in choice if c is not None) + ")")
        all_cols = [c for cols in level_cols for c in cols]
        aliases = [[f"d{i}_{lv}" for lv in range(1, len(cols) + 1)] for i, cols in enumerate(level_cols)]
        all_aliases = [a for al in aliases for a in al]
        position = [f"coalesce({', '.join(al)}, 0)" if al else "0" for al in aliases]
        cell_id = " + ".join(f"CAST({p} AS BIGINT) * {s}" for p, s in zip(position, strides)) or "0"
        padded = " OR ".join(f"coalesce({a}, 0) = -1" for a in all_aliases) or "false"

        measures = ["count(*)" if isinstance(self.data, Microdata) else f"sum(CAST({_q(self.data.count)} AS BIGINT))"]
        names = ["count"]
        for var in self.spec.sums:
            measures.append(f"sum(TRY_CAST({_q(var)} AS DOUBLE))")
            names.append(f"sum_{var}")
        key = self.spec.key
        if key is not None:
            k = _q(key.column)
            if key.modulus is not None:
                measures.append(f"CAST(sum(CAST({k} AS BIGINT)) % {key.scale} AS BIGINT)")
            else:
                measures.append(f"CAST(sum(CAST(round(CAST({k} AS DOUBLE) * {key.scale}) AS BIGINT)) % {key.scale} AS BIGINT)")
            names.append("ckey_int")
        select_measures = ", ".join(f"{m} AS {_q(n)}" for m, n in zip(measures, names))
        where = ""
        if self.spec.where:
            where = f"WHERE ({self.spec.where})"
        sql = f"""
            SELECT {cell_id} AS cell, {', '.join(_q(n) for n in names)} FROM (
                SELECT {''.join(f"{c} AS {a}, " for c, a in zip(all_cols, all_aliases))}{select_measures}
                FROM src {' '.join(joins)} {where}
                GROUP BY GROUPING SETS ({', '.join(sets)})
            ) WHERE NOT ({padded})
        """
        try:
            result = self.con.sql(sql).to_arrow_table()
        except duckdb.Error as exc:
            first = str(exc).strip().splitlines()[0]
            if self.spec.where:
                raise InputError(f"--where {self.spec.where!r} failed: {first}", where=self.where_src) from None
            raise
        n_cells = int(np.prod(shape, dtype=np.int64)) if shape else 1
        cell = result.column("cell").to_numpy()
        values: dict[str, np.ndarray] = {}
        for n in names:
            src = result.column(n).to_numpy(zero_copy_only=False)
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
