"""Methods and engines found by name — the same way from the CLI, config files, the service and
the evaluation report.

Every method, built-in or not, is an entry point of the group ``tabsafe.methods``
(``name = "module:Class"``); tabsafe's own are declared in its ``pyproject.toml`` exactly as an
outside package declares its own. Engines are the group ``tabsafe.engines``. Nothing here
imports a method's module until that method is asked for, so listing names costs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from tabsafe.errors import InputError

METHOD_GROUP = "tabsafe.methods"
ENGINE_GROUP = "tabsafe.engines"


@lru_cache(maxsize=None)
def _entries(group: str) -> dict[str, EntryPoint]:
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=group):
        if ep.name in found and found[ep.name].value != ep.value:
            raise InputError(f"two packages register {ep.name!r} in {group}: {found[ep.name].value} and {ep.value}")
        found[ep.name] = ep
    return found


def refresh() -> None:
    """Forget what was discovered (after installing a plugin in a running process)."""
    _entries.cache_clear()
    _load.cache_clear()


def method_names() -> list[str]:
    """Every registered method, sorted."""
    return sorted(_entries(METHOD_GROUP))


def engine_names() -> list[str]:
    return sorted(_entries(ENGINE_GROUP))


@lru_cache(maxsize=None)
def _load(group: str, name: str) -> Any:
    entries = _entries(group)
    if name not in entries:
        kind = "method" if group == METHOD_GROUP else "engine"
        known = ", ".join(sorted(entries)) or "none"
        raise InputError(f"unknown {kind} {name!r}; available: {known}")
    obj = entries[name].load()
    return obj


def get_method(name: str) -> type:
    """The method class registered under ``name``."""
    from tabsafe.method import Method

    cls = _load(METHOD_GROUP, name)
    if not (isinstance(cls, type) and issubclass(cls, Method)):
        raise InputError(f"method {name!r} ({_entries(METHOD_GROUP)[name].value}) is not a tabsafe Method")
    if cls.name != name:
        raise InputError(f"method {name!r} ({_entries(METHOD_GROUP)[name].value}) calls itself {cls.name!r}")
    return cls


def build_method(name: str, params: Mapping[str, Any] | None = None) -> Any:
    """The method ``name`` built from JSON parameters (config files, the service)."""
    return get_method(name).from_params(dict(params or {}))


def get_engine(name: str | Any = "duckdb", **options: Any) -> Any:
    """An engine by name, built with ``options`` (a config file's engine settings, e.g. Spark's
    ``master``); an engine object is returned as it is."""
    if not isinstance(name, str):
        return name
    factory = _load(ENGINE_GROUP, name)
    try:
        return factory(**options)
    except TypeError as exc:
        raise InputError(f"engine {name!r} does not take these settings: {exc}") from None
