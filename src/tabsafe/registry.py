"""Methods and engines found by name — the same way from the CLI, config files, the service and
the evaluation report.

Every method, built-in or not, is an entry point of the group ``tabsafe.methods``
(``name = "module:Class"``); tabsafe's own are declared in its ``pyproject.toml`` exactly as an
outside package declares its own. Engines are the group ``tabsafe.engines``. Nothing here
imports a method's module until that method is asked for, so listing names costs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tabsafe.engines import engine_name, engine_names, get_engine
from tabsafe.errors import InputError
from tabsafe.plugins import ENGINE_GROUP, METHOD_GROUP, entries, refresh
from tabsafe.plugins import load as _load

__all__ = ["ENGINE_GROUP", "METHOD_GROUP", "build_method", "engine_name", "engine_names", "get_engine", "get_method",
           "method_names", "refresh"]


def method_names() -> list[str]:
    """Every registered method, sorted."""
    return sorted(entries(METHOD_GROUP))


def get_method(name: str) -> type:
    """The method class registered under ``name``."""
    from tabsafe.method import Method

    cls = _load(METHOD_GROUP, name)
    if not (isinstance(cls, type) and issubclass(cls, Method)):
        raise InputError(f"method {name!r} ({entries(METHOD_GROUP)[name].value}) is not a tabsafe Method")
    if cls.name != name:
        raise InputError(f"method {name!r} ({entries(METHOD_GROUP)[name].value}) calls itself {cls.name!r}")
    return cls


def build_method(name: str, params: Mapping[str, Any] | None = None) -> Any:
    """The method ``name`` built from JSON parameters (config files, the service)."""
    return get_method(name).from_params(dict(params or {}))
