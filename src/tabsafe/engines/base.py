"""What an engine is: a SQL dialect and a way to run queries over one registered source.

Engines know nothing of tables, hierarchies or cell keys: the planner
(:mod:`tabsafe.engines.planner`) writes every query from the :class:`Dialect` and reads the
answers as Arrow. An engine only opens a :class:`Session` on a source (the records, or inner
cells), registers small Arrow tables the planner gives it (code maps), runs SQL and reports the
source's columns. Engines are found by name through the entry-point group ``tabsafe.engines``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

    from tabsafe.model.microdata import Source

#: The name of the registered source in every query.
SOURCE = "src"


@dataclass(frozen=True)
class Dialect:
    """How an engine writes identifiers, literals and the few functions the planner uses."""

    name: str
    text_type: str  # the SQL type of text ("VARCHAR", "STRING")
    string_escape_backslash: bool = False  # Spark: backslash escapes in string literals
    # Aggregate records to inner cells before the grouping sets: for engines that copy every
    # input row once per grouping set (Spark's Expand), so they copy inner cells, not records.
    pre_aggregate: bool = False
    # A whole-text regular-expression match: ``{expr}`` and ``{pattern}`` (a quoted literal)
    full_match: str = "regexp_full_match({expr}, {pattern})"
    # True for a NaN double
    nan_test: str = "isnan({expr})"
    # How the engine quotes an identifier
    quote: str = '"'
    # x - floor(x) for a finite double x, in [0, 1)
    fraction_sql: str = "(({x}) - floor({x}))"
    # True for NaN and ±infinity
    not_finite_sql: str = "(isnan({x}) OR isinf({x}))"
    # a modulo b, non-negative for b > 0 and a >= 0
    mod_sql: str = "(({a}) % ({b}))"
    # The engine's grouping_id() takes its grouping columns in its own order: build the mask
    # from one grouping() bit per expression instead
    grouping_bits: bool = False

    def ident(self, name: str) -> str:
        """A quoted identifier."""
        return self.quote + name.replace(self.quote, self.quote * 2) + self.quote

    def literal(self, text: str) -> str:
        """A quoted string literal."""
        if self.string_escape_backslash:
            text = text.replace("\\", "\\\\")
            return "'" + text.replace("'", "\\'") + "'"
        return "'" + text.replace("'", "''") + "'"

    def as_text(self, expr: str) -> str:
        return f"CAST({expr} AS {self.text_type})"

    def as_number(self, expr: str) -> str:
        """The value as a double, or NULL when it is not a number."""
        return f"TRY_CAST({expr} AS DOUBLE)"

    def as_bigint(self, expr: str) -> str:
        return f"CAST({expr} AS BIGINT)"

    def as_units(self, expr: str, digits: int) -> str:
        """The value in whole units of ``10^-digits``, as an exact decimal integer: sums of it are
        exact, and the same in every engine.

        The rounding is spelled out (half away from zero of the double ``x · 10^digits``) rather
        than left to each engine's cast to ``DECIMAL(38, digits)``: DuckDB's and Spark's casts
        round ties differently (1.005 → 1.00 in DuckDB, 1.01 in Spark), while ``round`` of a double
        is half away from zero in both. Exact below 2^53 units."""
        return f"CAST(round({self.as_number(expr)} * 1e{int(digits)}) AS DECIMAL(38, 0))"

    def fraction(self, expr: str) -> str:
        """``x - floor(x)`` (in [0, 1) for finite x). Spark's ``floor`` returns a BIGINT and
        overflows beyond 2^63, so Spark takes the remainder instead."""
        return self.fraction_sql.format(x=expr)

    def not_finite(self, expr: str) -> str:
        """True for NaN and ±infinity (Spark has no ``isinf``)."""
        return self.not_finite_sql.format(x=expr)

    def mod(self, a: str, b: str) -> str:
        return self.mod_sql.format(a=a, b=b)

    def grouping_id(self, exprs: list[str]) -> str:
        """The bitmask of the grouped-out expressions (first expression most significant)."""
        if self.grouping_bits:
            n = len(exprs)
            return " + ".join(f"CAST(grouping({e}) AS BIGINT) * {1 << (n - 1 - i)}" for i, e in enumerate(exprs))
        return f"GROUPING({', '.join(exprs)})"

    def filter_dialect(self):  # type: ignore[no-untyped-def]
        from tabsafe.model.filter import Dialect as FilterDialect

        return FilterDialect(ident=self.ident, literal=self.literal, as_text=self.as_text,
                             as_number=self.as_number, full_match=self.matches,
                             is_nan=lambda expr: self.nan_test.format(expr=expr))

    def matches(self, expr: str, pattern: str) -> str:
        """True when the text ``expr`` matches the regular expression ``pattern`` whole."""
        return self.full_match.format(expr=expr, pattern=self.literal(pattern))


class Session(Protocol):
    """One source opened by an engine."""

    def columns(self) -> Mapping[str, str]:
        """Column name → kind: ``"text"``, ``"integer"``, ``"number"`` or ``"other"``."""
        ...

    def register(self, name: str, table: pa.Table) -> None:
        """Make a small Arrow table queryable under ``name``."""
        ...

    def run(self, sql: str) -> pa.Table:
        """Run a query; engine errors become :class:`~tabsafe.errors.InputError` naming the source."""
        ...

    def close(self) -> None: ...


class Engine(Protocol):
    """Anything that can open a source for the planner.

    Attributes:
        name: the engine's registered name.
        dialect: how its SQL is written.
        embedded: the records are read into this process (methods run their in-process form,
            :meth:`tabsafe.method.MicrodataMethod.apply`); else the engine holds them and a method
            runs its form for the engine (``apply_on``).
    """

    name: str
    dialect: Dialect
    embedded: bool

    def open(self, source: Source) -> Session: ...
