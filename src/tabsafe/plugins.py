"""Plugins found by name: the entry points of a group (``tabsafe.methods``, ``tabsafe.engines``),
read from the installed distributions without importing any plugin until it is asked for, so
listing names costs nothing. :mod:`tabsafe.registry` finds methods through it and
:mod:`tabsafe.engines` engines; neither imports the other's plugins.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
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
            with open(path, encoding="utf-8") as fh:
                lines = fh.read().splitlines()
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


@cache
def entries(group: str) -> dict[str, EntryPoint]:
    """The entry points of ``group`` by name; one name registered twice is an error."""
    found: dict[str, EntryPoint] = {}
    for ep in _scan(group):
        if ep.name in found and found[ep.name].value != ep.value:
            raise InputError(f"two packages register {ep.name!r} in {group}: {found[ep.name].value} and {ep.value}")
        found[ep.name] = ep
    return found


def refresh() -> None:
    """Forget what was discovered (after installing a plugin in a running process)."""
    entries.cache_clear()
    load.cache_clear()


@cache
def load(group: str, name: str) -> Any:
    """The object registered under ``name`` in ``group``, imported on first use (one line on error)."""
    found = entries(group)
    if name not in found:
        kind = "method" if group == METHOD_GROUP else "engine"
        known = ", ".join(sorted(found)) or "none"
        raise InputError(f"unknown {kind} {name!r}; available: {known}")
    try:
        obj = found[name].load()
    except Exception as exc:  # noqa: BLE001 - a broken plugin is one line about it, not a traceback
        kind = "method" if group == METHOD_GROUP else "engine"
        first = " ".join(str(exc).split()) or type(exc).__name__
        raise InputError(f"{kind} {name!r} ({found[name].value}) cannot be loaded: {first}") from None
    return obj
