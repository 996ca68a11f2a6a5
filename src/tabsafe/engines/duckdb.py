"""The embedded engine: DuckDB, in process, reading the source where it lies.

The planner (:mod:`tabsafe.engines.planner`) writes every query; this module opens a locked-down
connection on one source. The connection may read the source file and nothing else: external
access is off except for that path (and a private spill folder), extensions are never installed
or loaded on their own, and the configuration is locked, so a query could not reach another file
or the network even if one tried (filters are tabsafe's own language and never SQL text anyway).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from tabsafe.engines.base import SOURCE, Dialect
from tabsafe.errors import InputError, TooLargeError, reader_message
from tabsafe.model.microdata import ArrowSource, FileSource, Source

# isnan() of a Parquet column is folded to false when the file's statistics (which leave NaN
# out) hold no NaN, though the column has NaNs; isfinite() is not folded
DIALECT = Dialect(name="duckdb", text_type="VARCHAR", nan_test="(NOT isfinite({expr}) AND NOT isinf({expr}))")

_INTEGER = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
            "UBIGINT", "UHUGEINT"}
_NUMBER = {"FLOAT", "DOUBLE", "REAL"}


def _lit(text: str) -> str:
    return DIALECT.literal(text)


def _kind(sql_type: str) -> str:
    t = sql_type.upper()
    if t in _INTEGER:
        return "integer"
    if t in _NUMBER or t.startswith("DECIMAL"):
        return "number"
    if t == "VARCHAR" or t.startswith("ENUM"):
        return "text"
    return "other"


@dataclass(frozen=True, kw_only=True)
class DuckDBEngine:
    """Tabulation on an in-process DuckDB database (the default engine).

    Attributes:
        threads: worker threads (``None``: DuckDB's default, one per core).
        memory_limit: e.g. ``"4GB"``; ``None``: the job's memory budget (:mod:`tabsafe.memory`).
    """

    threads: int | None = None
    memory_limit: str | None = None
    name: str = field(default="duckdb", init=False)
    dialect: Dialect = field(default=DIALECT, init=False)
    embedded: bool = field(default=True, init=False)

    def open(self, source: Source) -> _Session:
        return _Session(self, source)

    def tabulate(self, data: Any, spec: Any) -> Any:
        """Tabulate with this engine (:func:`tabsafe.tabulate` does the same by name)."""
        from tabsafe.engines.planner import tabulate_with

        return tabulate_with(self, data, spec)


def connect(*, allowed: list[str] | None = None, directories: list[str] | None = None,
            threads: int | None = None, memory_limit: str | None = None,
            temp_directory: str | None = None) -> duckdb.DuckDBPyConnection:
    """A locked-down connection that may read only ``allowed`` files and ``directories``, without
    DuckDB's own progress bar."""
    config: dict[str, Any] = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}
    if threads:
        config["threads"] = int(threads)
    if memory_limit:
        config["memory_limit"] = str(memory_limit)
    try:
        con = duckdb.connect(":memory:", config=config)
    except duckdb.Error as exc:
        raise InputError(f"engine settings refused: {str(exc).splitlines()[0]}") from None
    if temp_directory:
        con.execute(f"SET temp_directory = {_lit(temp_directory)}")
    if allowed:
        con.execute("SET allowed_paths = [" + ", ".join(_lit(p) for p in allowed) + "]")
    dirs = list(directories or []) + ([temp_directory] if temp_directory else [])
    if dirs:
        con.execute("SET allowed_directories = [" + ", ".join(_lit(d) for d in dirs) + "]")
    # tabsafe reports its own progress (tabsafe.progress, silenced by --quiet): DuckDB's bar on a
    # terminal would print beside it, even with --quiet (a session option, so set here, not in config)
    con.execute("SET enable_progress_bar = false")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


class _Session:
    """One source opened on a locked-down DuckDB connection."""

    def __init__(self, engine: DuckDBEngine, source: Source) -> None:
        self.where = source.describe()
        self._tmp = tempfile.mkdtemp(prefix="tabsafe-duckdb-")
        allowed: list[str] = []
        directories: list[str] = []
        if isinstance(source, FileSource):
            path = os.path.abspath(source.path)
            if source.is_folder:
                directories.append(path)
            elif any(ch in source.path for ch in "*?["):
                directories.append(str(Path(path).parent))
            else:
                allowed.append(path)
        from tabsafe import memory

        # the engine works within the job's budget, spilling to a private folder beyond it
        limit = engine.memory_limit or f"{max(256, memory.limit() // 2**20)}MB"
        self.con = connect(allowed=allowed, directories=directories, threads=engine.threads,
                           memory_limit=limit, temp_directory=self._tmp)
        try:
            if isinstance(source, FileSource):
                path = os.path.abspath(source.path)
                if source.format == "parquet":
                    files = os.path.join(path, "**", "*.parquet") if source.is_folder else path
                    self.con.execute(f"CREATE VIEW {SOURCE} AS SELECT * FROM read_parquet({_lit(files)})")
                else:
                    # Codes such as "01" must stay strings: read every CSV column as text and cast
                    # numeric columns explicitly where they are used.
                    self.con.execute(
                        f"CREATE VIEW {SOURCE} AS SELECT * FROM read_csv({_lit(path)}, header=true, all_varchar=true)"
                    )
            elif isinstance(source, ArrowSource):
                self.con.register(f"{SOURCE}_arrow", source.table)
                self.con.execute(f"CREATE VIEW {SOURCE} AS SELECT * FROM {SOURCE}_arrow")
            else:  # pragma: no cover - the Source union is closed
                raise TypeError(source)
            self._columns = {r[0]: _kind(r[1]) for r in self.con.execute(f"DESCRIBE {SOURCE}").fetchall()}
        except duckdb.Error as exc:
            self.close()
            first = reader_message(exc)
            raise InputError(f"cannot read data: {first}", where=self.where) from None
        except BaseException:
            self.close()
            raise

    def columns(self) -> Mapping[str, str]:
        return self._columns

    def register(self, name: str, table: pa.Table) -> None:
        self.con.register(name, table)

    def run(self, sql: str) -> pa.Table:
        try:
            return self.con.sql(sql).to_arrow_table()
        except duckdb.OutOfMemoryException as exc:
            raise TooLargeError(f"the engine ran out of memory: {str(exc).splitlines()[0]}", where=self.where,
                                hint="raise the memory limit or tabulate fewer variables") from None
        except duckdb.Error as exc:
            first = reader_message(exc)
            raise InputError(f"cannot read data: {first}", where=self.where) from None

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.con.close()
        shutil.rmtree(self._tmp, ignore_errors=True)
