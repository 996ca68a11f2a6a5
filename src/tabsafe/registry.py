"""Protection methods found by name, the same way from the CLI, config files, service and report.

A method is a frozen dataclass of its parameters with a ``protect(table, *, seed)`` method that
returns a :class:`~tabsafe.model.result.Protection`. Built-in methods live in modules that are
imported only when their name is asked for; outside packages add methods through the entry-point
group ``tabsafe.methods`` (name = "module:Class").
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, ClassVar, Protocol

from tabsafe.errors import InputError
from tabsafe.model.result import Protection
from tabsafe.model.spec import KeySpec
from tabsafe.model.table import Table


@dataclass(frozen=True, kw_only=True)
class Needs:
    """What a method needs from tabulation.

    Attributes:
        key: the cell key computed from this record-key specification (``ckey`` column).
        sums: magnitude variables to sum per cell.
        microdata: the method cannot work from aggregated inner cells.
    """

    key: KeySpec | None = None
    sums: tuple[str, ...] = ()
    microdata: bool = False


class Method(Protocol):
    """A protection method: parameters as fields, the work in :meth:`protect`."""

    name: ClassVar[str]

    def needs(self) -> Needs: ...

    def protect(self, table: Table, *, seed: int | None = None) -> Protection: ...


@dataclass(frozen=True)
class MethodEntry:
    """A registered method: its class and how the CLI builds it."""

    name: str
    cls: type
    add_arguments: Callable[[argparse.ArgumentParser], None]
    from_args: Callable[[argparse.Namespace], Any]
    summary: str = ""


_BUILTIN: dict[str, str] = {
    "ckm": "tabsafe.protect.cell_key_method",
    "round": "tabsafe.protect.rounding",
    "suppress": "tabsafe.protect.suppression",
}
_METHODS: dict[str, MethodEntry] = {}


def register_method(
    name: str,
    *,
    add_arguments: Callable[[argparse.ArgumentParser], None],
    from_args: Callable[[argparse.Namespace], Any],
    summary: str = "",
) -> Callable[[type], type]:
    """Class decorator: make a method available under ``name``."""

    def decorate(cls: type) -> type:
        _METHODS[name] = MethodEntry(name, cls, add_arguments, from_args, summary)
        return cls

    return decorate


def method_names() -> list[str]:
    extra = [ep.name for ep in entry_points(group="tabsafe.methods")]
    return sorted({*_BUILTIN, *_METHODS, *extra})


def get_method(name: str) -> MethodEntry:
    """The method registered under ``name``; importing its module registers it."""
    if name not in _METHODS:
        if name in _BUILTIN:
            try:
                importlib.import_module(_BUILTIN[name])
            except ModuleNotFoundError as exc:
                if exc.name == _BUILTIN[name]:
                    raise InputError(f"method {name!r} is not available in this version") from None
                raise
        else:
            for ep in entry_points(group="tabsafe.methods"):
                if ep.name == name:
                    ep.load()
    if name not in _METHODS:
        raise InputError(f"unknown method {name!r}; available: {', '.join(method_names())}")
    return _METHODS[name]
