"""Methods and engines found by name — the same way from the CLI, config files, the service and
the evaluation report.

Every method, built-in or not, is an entry point of the group ``tabsafe.methods``
(``name = "module:Class"``); tabsafe's own are declared in its ``pyproject.toml`` exactly as an
outside package declares its own. Engines are the group ``tabsafe.engines``. Nothing here
imports a method's module until that method is asked for, so listing names costs nothing.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from tabsafe.errors import InputError

METHOD_GROUP = "tabsafe.methods"
ENGINE_GROUP = "tabsafe.engines"


@dataclass(frozen=True)
class EntryPoint:
    """One ``name = module:attribute`` line of an entry-point group."""

    name: str
    value: str

    def load(self) -> Any:
        module, _, attr = self.value.partition(":")
        obj: Any = importlib.import_module(module.strip())
        for part in attr.strip().split(".") if attr.strip() else []:
            obj = getattr(obj, part)
        return obj


def _metadata_files() -> Iterator[str]:
    """Every installed distribution's ``entry_points.txt`` on ``sys.path``."""
    seen: set[str] = set()
    for entry in sys.path:
        directory = entry or "."
        if directory in seen or not os.path.isdir(directory):
            continue
        seen.add(directory)
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            if name.endswith((".dist-info", ".egg-info")):
                path = os.path.join(directory, name, "entry_points.txt")
                if os.path.isfile(path):
                    yield path


def _scan(group: str) -> list[EntryPoint]:
    """The entry points of ``group``, read from the distributions' ``entry_points.txt`` directly.

    This is what ``importlib.metadata.entry_points`` reads, without importing it (40 ms at every
    command's start); zipped distributions are the one case left to it.
    """
    if any(os.path.isfile(p) for p in sys.path if p.endswith((".zip", ".egg", ".whl"))):
        from importlib.metadata import entry_points

        return [EntryPoint(ep.name, ep.value) for ep in entry_points(group=group)]
    out: list[EntryPoint] = []
    for path in _metadata_files():
        section = None
        try:
            lines = open(path, encoding="utf-8").read().splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        for raw in lines:
            line = raw.strip()
            if not line or line.startswith(("#", ";")):
                continue
            if line.startswith("[") and line.endswith("]"):
                section = line[1:-1].strip()
                continue
            if section == group and "=" in line:
                name, _, value = line.partition("=")
                out.append(EntryPoint(name.strip(), value.strip()))
    return out


@lru_cache(maxsize=None)
def _entries(group: str) -> dict[str, EntryPoint]:
    found: dict[str, EntryPoint] = {}
    for ep in _scan(group):
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
    try:
        obj = entries[name].load()
    except Exception as exc:  # noqa: BLE001 - a broken plugin is one line about it, not a traceback
        kind = "method" if group == METHOD_GROUP else "engine"
        first = " ".join(str(exc).split()) or type(exc).__name__
        raise InputError(f"{kind} {name!r} ({entries[name].value}) cannot be loaded: {first}") from None
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


def engine_name(value: Any, *, key: str = "'engine'", where: str | None = None,
                extra: tuple[str, ...] = ()) -> str:
    """``value`` (a config file's ``key``, as the message shows it) as a registered engine's name
    (or one of ``extra``), checked by name only: the engine is loaded when it first tabulates."""
    known = [*extra, *engine_names()]
    if not isinstance(value, str) or value not in known:
        raise InputError(f"{key} must name an engine ({', '.join(known)}); got {value!r}", where=where)
    return value


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
