"""Engines that turn microdata into tables: a dialect and a session each, under the shared
planner (:mod:`tabsafe.engines.planner`). DuckDB (embedded) is the default; Spark
(:mod:`tabsafe.engines.spark`) runs the same plan on a cluster or locally. Engines are found by
name through the entry-point group ``tabsafe.engines`` (:func:`get_engine`, also
:func:`tabsafe.registry.get_engine`). Engine names appear only in this package: an engine
declares what it can do (:class:`tabsafe.engines.base.Engine`), and the rest of tabsafe asks."""

from __future__ import annotations

from typing import Any

from tabsafe.errors import InputError
from tabsafe.plugins import ENGINE_GROUP, entries, load

__all__ = ["DEFAULT_ENGINE", "engine_name", "engine_names", "get_engine"]

#: The engine used when none is named: the embedded one (records read into this process).
DEFAULT_ENGINE = "duckdb"


def engine_names() -> list[str]:
    """Every registered engine, sorted."""
    return sorted(entries(ENGINE_GROUP))


def engine_name(value: Any, *, key: str = "'engine'", where: str | None = None,
                extra: tuple[str, ...] = ()) -> str:
    """``value`` (a config file's ``key``, as the message shows it) as a registered engine's name
    (or one of ``extra``), checked by name only: the engine is loaded when it first tabulates."""
    known = [*extra, *engine_names()]
    if not isinstance(value, str) or value not in known:
        raise InputError(f"{key} must name an engine ({', '.join(known)}); got {value!r}", where=where)
    return value


def get_engine(name: str | Any = DEFAULT_ENGINE, **options: Any) -> Any:
    """An engine by name, built with ``options`` (a config file's engine settings, e.g. Spark's
    ``master``); an engine object is returned as it is."""
    if not isinstance(name, str):
        return name
    factory = load(ENGINE_GROUP, name)
    try:
        return factory(**options)
    except TypeError as exc:
        raise InputError(f"engine {name!r} does not take these settings: {exc}") from None
