"""The Spark engine: the planner's one grouping-sets query as Spark SQL, on a cluster or locally.

The planner (:mod:`tabsafe.engines.planner`) writes every query; this module only opens a
:class:`_Session` on a source: a Parquet file, folder or glob read in place, a CSV read with every
column as text (codes such as ``"01"`` stay codes, as in DuckDB), or an in-memory Arrow table. The
planner's code maps (a few thousand rows at most) become temporary views, which Spark broadcasts
to every task; the answer comes back to the driver as Arrow, and it holds the cells **with
records** only (inner cells, margins and subtotals): the dense grid is never built by Spark nor
collected.

How the work is split (what crosses the network on a cluster): each task reads its share of the
records, expands every record once per grouping set and pre-aggregates its own rows (Spark's
partial aggregation), so what is shuffled is at most one row per (task, non-empty cell) — cell
id, count, sums, the cell key's integer sum — never records. The final aggregation reduces those
rows and the driver receives one row per non-empty cell.

Every SparkSession the engine uses is a ``newSession()`` of the one given (or of the local one):
temporary views and settings of a tabulation never touch the caller's session. Each one has ANSI
arithmetic on (an integer overflow is an error, never a wrapped number) and running SQL directly
on files off, so a query can reach no file but the source.

Give your own session (a cluster, your settings)::

    from pyspark.sql import SparkSession
    spark = SparkSession.builder.master("spark://host:7077").getOrCreate()
    table = tabsafe.tabulate(md, ["region", "sex"], engine=SparkEngine(session=spark))

``engine="spark"`` (``--engine spark`` on the command line) uses the active SparkSession if the
process has one, otherwise a local one: master ``$TABSAFE_SPARK_MASTER`` or ``local[2]``, the
driver's heap from the job's memory budget (:mod:`tabsafe.memory`), shuffle and spill files in a
private temporary folder, and the JVM's output in a file instead of the terminal (kept when
``$TABSAFE_SPARK_LOG`` names it, removed at exit otherwise). Spark's own ``spark-defaults.conf``
applies as usual.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import re
import shutil
import sys
import tempfile
import threading
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from tabsafe.engines.base import SOURCE, Dialect
from tabsafe.errors import InputError, TooLargeError
from tabsafe.model.microdata import ArrowSource, FileSource, Source

DIALECT = Dialect(
    name="spark", text_type="STRING", string_escape_backslash=True, pre_aggregate=True,
    full_match="({expr} RLIKE concat('^(', {pattern}, ')$'))", quote="`",
    # Spark's floor returns a BIGINT and overflows beyond 2^63; it has no isinf
    fraction_sql="pmod({x}, 1)", not_finite_sql="(isnan({x}) OR abs({x}) = CAST('Infinity' AS DOUBLE))",
    mod_sql="pmod({a}, {b})",
    # grouping_id() must list every grouping column in the order Spark collected them from the sets
    grouping_bits=True)

#: The master of the local session when neither the engine nor ``$TABSAFE_SPARK_MASTER`` names one.
DEFAULT_MASTER = "local[2]"

_INTEGER = {"byte", "short", "integer", "long"}
_NUMBER = {"float", "double", "decimal"}
_TEXT = {"string", "varchar", "char"}

#: Settings of every session a tabulation runs in (a newSession() of the caller's or the local one).
SESSION_SETTINGS = {
    # an integer overflow is an error, never a wrapped number (Spark 3 has this off by default)
    "spark.sql.ansi.enabled": "true",
    # no SELECT ... FROM parquet.`/any/file`: the source is the only data a query can read
    "spark.sql.runSQLOnFiles": "false",
    # Arrow string columns as the planner builds them (not large_string)
    "spark.sql.execution.arrow.useLargeVarTypes": "false",
}


@dataclass(frozen=True, eq=False)
class FrameSource:
    """Records held by Spark as a DataFrame — what a microdata method run on Spark gives (e.g.
    swapped records): tabulated where they are, never collected to the driver.

    Attributes:
        frame: the records (a ``pyspark.sql.DataFrame``).
        name: how errors name them.
        cached: persisted DataFrames the records are computed from (a few rows per changed
            household); :meth:`close` releases them.
        flagged: the same records with the method's flag per record (``swapped``), as
            ``tabsafe swap`` writes them; None when the method has none.
    """

    frame: Any
    name: str = "data"
    cached: tuple[Any, ...] = ()
    flagged: Any = None

    def describe(self) -> str:
        return self.name

    def close(self) -> None:
        """Release the cached frames (the records are recomputed, identically, if used again)."""
        for frame in self.cached:
            with contextlib.suppress(Exception):
                frame.unpersist()


def _kind(type_name: str) -> str:
    t = type_name.lower()
    base = t.split("(")[0]
    if base in _INTEGER:
        return "integer"
    if base in _NUMBER:
        return "number"
    if base in _TEXT:
        return "text"
    return "other"


@dataclass(frozen=True, kw_only=True)
class SparkEngine:
    """Tabulation on Apache Spark (``engine="spark"``, ``--engine spark``).

    Attributes:
        session: a ``pyspark.sql.SparkSession`` to run on (a cluster's); ``None``: the process's
            active session, else a local one.
        master: master of the local session (``None``: ``$TABSAFE_SPARK_MASTER`` or ``local[2]``);
            ignored when a session exists.
        conf: further Spark settings of the local session (e.g. ``{"spark.sql.shuffle.partitions": "8"}``).
    """

    session: Any = None
    master: str | None = None
    conf: Mapping[str, str] = field(default_factory=dict)
    name: str = field(default="spark", init=False)
    dialect: Dialect = field(default=DIALECT, init=False)
    embedded: bool = field(default=False, init=False)
    #: the DataFrame API the engine holds records in: a method with a form for it runs that form
    dataframes: str = field(default="pyspark", init=False)

    def held(self, frame: Any, *, name: str, cached: Any = (), flagged: Any = None) -> FrameSource:
        """Records a method computed as a DataFrame of this engine, as a source to tabulate."""
        return FrameSource(frame, name=name, cached=cached, flagged=flagged)

    def errors(self, what: str, *, where: str | None = None) -> Any:
        """A context in which the engine's failures are one-line tabsafe errors (:func:`spark_errors`)."""
        return spark_errors(what, where=where)

    def spark(self) -> Any:
        """The SparkSession tabulations start from (each runs in a ``newSession()`` of it)."""
        if self.session is not None:
            return self.session
        from pyspark.sql import SparkSession

        active = SparkSession.getActiveSession()
        if active is not None:
            return active
        return local_session(self.master, self.conf)

    def open(self, source: Source) -> _Session:
        return _Session(self.spark(), source)

    def tabulate(self, data: Any, spec: Any) -> Any:
        """Tabulate with this engine (:func:`tabsafe.tabulate` does the same by name)."""
        from tabsafe.engines.planner import tabulate_with

        return tabulate_with(self, data, spec)


# ---------------------------------------------------------------------------------- local session
_LOCK = threading.Lock()
_LOCAL: dict[str, Any] = {}


def local_session(master: str | None = None, conf: Mapping[str, str] | None = None) -> Any:
    """The process's local SparkSession, started on first use and kept for the process.

    Starting a JVM takes seconds, so one session serves every tabulation of the process; its
    driver heap is the job's memory budget less a quarter for the JVM's own needs, its scratch
    files go to a private folder removed at exit, and it listens on the loopback address only.
    """
    with _LOCK:
        session = _LOCAL.get("session")
        if session is not None and _alive(session):
            return session
        from pyspark.sql import SparkSession

        from tabsafe import memory

        scratch = tempfile.mkdtemp(prefix="tabsafe-spark-")
        atexit.register(shutil.rmtree, scratch, True)
        heap_mb = max(1024, int(memory.limit() * 0.75) // 2**20)
        settings = {
            "spark.app.name": "tabsafe",
            "spark.master": master or os.environ.get("TABSAFE_SPARK_MASTER") or DEFAULT_MASTER,
            "spark.driver.memory": f"{heap_mb}m",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.driver.host": "127.0.0.1",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.local.dir": scratch,
            "spark.sql.warehouse.dir": os.path.join(scratch, "warehouse"),
            # a few partitions per core on one machine, not Spark's 200 (the adaptive executor
            # coalesces them further)
            "spark.sql.shuffle.partitions": "8",
            **dict(conf or {}),
        }
        builder = SparkSession.builder
        for key, value in settings.items():
            builder = builder.config(key, value)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # Python tasks (the Spark census generator) run in this interpreter, which has tabsafe
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        with _jvm_output_to_log(), warnings.catch_warnings():
            # pyspark warns about pandas versions it has not been tested with; tabsafe passes
            # Arrow, not pandas, between Python and the JVM
            warnings.simplefilter("ignore")
            session = builder.getOrCreate()
        session.sparkContext.setLogLevel("ERROR")
        _LOCAL["session"] = session
        return session


def _alive(session: Any) -> bool:
    try:
        return not session.sparkContext._jsc.sc().isStopped()
    except Exception:  # noqa: BLE001 - a stopped context has no Java side left to ask
        return False


def _log_path() -> str:
    """Where the JVM writes: ``$TABSAFE_SPARK_LOG`` (kept), else a private temporary file removed
    at exit (task failures can quote record values; the user gets tabsafe's one line instead)."""
    path = os.environ.get("TABSAFE_SPARK_LOG")
    if path:
        return path
    fd, path = tempfile.mkstemp(prefix="tabsafe-spark-", suffix=".log")
    os.close(fd)
    atexit.register(_remove, path)
    return path


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.remove(path)


@contextlib.contextmanager
def _jvm_output_to_log() -> Iterator[None]:
    """Point file descriptors 1 and 2 at a log file while the JVM starts: the JVM inherits them,
    so its banners, warnings and task logs never reach the user's terminal (stdout carries
    published values only). The JVM's log stays in the file for diagnosis."""
    path = _log_path()
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.dup2(log, 1)
        os.dup2(log, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, log):
            os.close(fd)


@contextlib.contextmanager
def _quiet_python_loggers() -> Iterator[None]:
    """pyspark logs every failed query as a JSON record with the JVM's stack trace; tabsafe turns
    the failure into one line of its own, so the record is left out."""
    loggers = [logging.getLogger(n) for n in ("SQLQueryContextLogger", "DataFrameQueryContextLogger", "py4j")]
    before = [lg.disabled for lg in loggers]
    for lg in loggers:
        lg.disabled = True
    try:
        yield
    finally:
        for lg, was in zip(loggers, before):
            lg.disabled = was


def _first_line(exc: BaseException) -> str:
    """The line of Spark's message that says what went wrong (not the JVM's stack)."""
    java = getattr(exc, "java_exception", None)
    text = str(exc).strip()
    if text.startswith("An error occurred while calling") and java is not None:
        text = str(java.toString()).strip()  # a bare Py4J error: the Java exception says more
    lines = text.splitlines()
    if "Traceback (most recent call last)" in text:
        # a Python task failed: its exception is the last unindented "...Error: ..." line
        raised = [ln for ln in lines if re.match(r"^[A-Za-z_][\w.]*(Error|Exception)\b", ln)]
        if raised:
            return raised[-1].strip()
    line = lines[0] if lines else type(exc).__name__
    return line.split(" SQLSTATE:")[0].strip()


def _out_of_memory(exc: BaseException) -> bool:
    text = str(exc)
    return "OutOfMemoryError" in text or "SparkOutOfMemoryError" in text or "UNABLE_TO_ACQUIRE_MEMORY" in text


@contextlib.contextmanager
def spark_errors(what: str, *, where: str | None = None) -> Iterator[None]:
    """Spark's failures (Py4J and PySpark errors of many kinds) as tabsafe's one-line errors:
    running out of memory is :class:`TooLargeError`, anything else :class:`InputError` with
    ``what`` and the first line of Spark's message."""
    try:
        with _quiet_python_loggers(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    except (InputError, TooLargeError):
        raise
    except Exception as exc:  # noqa: BLE001 - Py4J and PySpark raise errors of many kinds
        if _out_of_memory(exc):
            raise TooLargeError(f"the engine ran out of memory: {_first_line(exc)}", where=where,
                                hint="raise the memory limit (the driver's heap) or tabulate fewer variables"
                                ) from None
        raise InputError(f"{what}: {_first_line(exc)}", where=where) from None


def _plain_arrow(table: pa.Table) -> pa.Table:
    """Dictionary columns (categoricals, as the synthetic census writes them) as plain values:
    Spark takes Arrow data of its own types only."""
    columns = []
    for col in table.columns:
        if pa.types.is_dictionary(col.type):
            col = col.cast(col.type.value_type)
        if pa.types.is_large_string(col.type):
            col = col.cast(pa.string())
        columns.append(col)
    return pa.Table.from_arrays(columns, names=table.column_names)


class _Session:
    """One source opened in a private ``newSession()`` of a SparkSession."""

    def __init__(self, base: Any, source: Source) -> None:
        self.where = source.describe()
        self.spark = base.newSession()
        for key, value in SESSION_SETTINGS.items():
            self.spark.conf.set(key, value)
        self._views: list[str] = []
        self._global_view: str | None = None
        try:
            with spark_errors("cannot read data", where=self.where):
                self.frame = self._read(source)
                self.frame.createOrReplaceTempView(SOURCE)
                self._views.append(SOURCE)
                self._columns = {f.name: _kind(f.dataType.simpleString()) for f in self.frame.schema.fields}
        except BaseException:
            self.close()
            raise

    def _read(self, source: Source) -> Any:
        if isinstance(source, FileSource):
            path = os.path.abspath(source.path)
            if source.format == "parquet":
                return self.spark.read.parquet(path)
            # Every column as text (codes such as "01" stay codes; numbers are cast where used);
            # quotes doubled inside quoted fields, as RFC 4180 and DuckDB read them.
            return (self.spark.read.option("header", "true").option("inferSchema", "false")
                    .option("escape", '"').option("mode", "FAILFAST").csv(path))
        if isinstance(source, ArrowSource):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return self.spark.createDataFrame(_plain_arrow(source.table))
        if isinstance(source, FrameSource):
            # a DataFrame belongs to its own session; a global view hands it to this one
            view = f"tabsafe_frame_{id(self)}"
            source.frame.createOrReplaceGlobalTempView(view)
            self._global_view = view
            database = self.spark.conf.get("spark.sql.globalTempDatabase", "global_temp")
            return self.spark.table(f"{database}.{view}")
        raise TypeError(source)  # pragma: no cover - the Source union is closed

    @property
    def session(self) -> Any:
        """The private SparkSession of this source (for code that works on DataFrames)."""
        return self.spark

    def columns(self) -> Mapping[str, str]:
        return self._columns

    def register(self, name: str, table: pa.Table) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.spark.createDataFrame(_plain_arrow(table)).createOrReplaceTempView(name)
        self._views.append(name)

    def run(self, sql: str) -> pa.Table:
        with spark_errors("cannot read data", where=self.where):
            return self.spark.sql(sql).toArrow()

    def close(self) -> None:
        for name in self._views:
            with contextlib.suppress(Exception):
                self.spark.catalog.dropTempView(name)
        self._views = []
        if self._global_view is not None:
            with contextlib.suppress(Exception):
                self.spark.catalog.dropGlobalTempView(self._global_view)
            self._global_view = None
