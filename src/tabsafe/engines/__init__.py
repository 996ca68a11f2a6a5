"""Engines that turn microdata into tables: DuckDB (embedded, the default)."""

from __future__ import annotations

from typing import Protocol

from tabsafe.errors import InputError
from tabsafe.model.microdata import InnerCells, Microdata
from tabsafe.model.spec import TableSpec
from tabsafe.model.table import Table


class Engine(Protocol):
    """Anything that can build a :class:`Table` with every margin from a source."""

    name: str

    def tabulate(self, data: Microdata | InnerCells, spec: TableSpec) -> Table: ...


def get_engine(name: str | Engine = "duckdb") -> Engine:
    """The engine registered under ``name`` (engines are also accepted as they are)."""
    if not isinstance(name, str):
        return name
    if name == "duckdb":
        from tabsafe.engines.duckdb import DuckDBEngine

        return DuckDBEngine()
    raise InputError(f"unknown engine {name!r}; available: duckdb")
