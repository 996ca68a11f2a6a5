"""tabsafe: frequency tables from microdata, protected for release.

The public API, by part of the job (names load on first use, so ``import tabsafe`` is cheap):

Data model
    :class:`Hierarchy`, :class:`Dimension`, :class:`Table` (sparse, immutable),
    :class:`TableSpec`, :class:`KeySpec`, :class:`Microdata`, :class:`InnerCells`,
    :func:`parse_filter` (the filter language)
Tables from microdata
    :func:`tabulate` (DuckDB by default, any registered engine by name),
    :func:`synth_census` (synthetic census)
Protection
    every method by name through :func:`get_method` / :func:`build_method` and
    :func:`method_names`; :class:`CellKeyMethod`, :class:`PTable`, :class:`PTableParams`,
    :func:`generate_ptable`, :class:`MagnitudeParams`; results are :class:`Protection`
    (release apart from evaluation values) and :class:`Report`
Errors
    :class:`TabsafeError`, :class:`InputError`, :class:`MethodError`, :class:`TooLargeError`
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.2.0"

_EXPORTS: dict[str, str] = {
    "TOTAL": "tabsafe.model.hierarchy",
    "Hierarchy": "tabsafe.model.hierarchy",
    "Dimension": "tabsafe.model.table",
    "Table": "tabsafe.model.table",
    "TableSpec": "tabsafe.model.spec",
    "KeySpec": "tabsafe.model.spec",
    "Microdata": "tabsafe.model.microdata",
    "InnerCells": "tabsafe.model.microdata",
    "Protection": "tabsafe.model.result",
    "Release": "tabsafe.model.result",
    "Report": "tabsafe.model.result",
    "tabulate": "tabsafe.tabulation",
    "synth_census": "tabsafe.synth",
    "get_method": "tabsafe.registry",
    "build_method": "tabsafe.registry",
    "method_names": "tabsafe.registry",
    "CellKeyMethod": "tabsafe.protect.cell_key_method",
    "MagnitudeParams": "tabsafe.protect.cell_key",
    "generate_record_keys": "tabsafe.protect.cell_key",
    "PTable": "tabsafe.protect.ptable",
    "PTableParams": "tabsafe.protect.ptable",
    "generate_ptable": "tabsafe.protect.ptable",
    "TabsafeError": "tabsafe.errors",
    "InputError": "tabsafe.errors",
    "MethodError": "tabsafe.errors",
    "TooLargeError": "tabsafe.errors",
}
_RENAMED = {"parse_filter": ("tabsafe.model.filter", "parse")}

__all__ = sorted([*_EXPORTS, *_RENAMED])


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    elif name in _RENAMED:
        module, attr = _RENAMED[name]
        value = getattr(importlib.import_module(module), attr)
    else:
        raise AttributeError(f"module 'tabsafe' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
