"""tabsafe: frequency tables from microdata, protected for release.

The public API, by part of the job:

Data model
    :class:`Hierarchy`, :class:`Dimension`, :class:`Table`, :class:`TableSpec`, :class:`KeySpec`,
    :class:`Microdata`, :class:`InnerCells`
Tables from microdata
    :func:`tabulate` (DuckDB by default), :func:`synth_census` (synthetic census)
Errors
    :class:`TabsafeError`, :class:`InputError`, :class:`MethodError`
"""

from tabsafe.errors import InputError, MethodError, TabsafeError, TooLargeError
from tabsafe.model.hierarchy import TOTAL, Hierarchy
from tabsafe.model.microdata import InnerCells, Microdata
from tabsafe.model.spec import KeySpec, TableSpec
from tabsafe.model.table import Dimension, Table
from tabsafe.tabulate import tabulate

__version__ = "0.1.0"

__all__ = [
    "TOTAL",
    "Dimension",
    "Hierarchy",
    "InnerCells",
    "InputError",
    "KeySpec",
    "MethodError",
    "Microdata",
    "Table",
    "TableSpec",
    "TabsafeError",
    "TooLargeError",
    "tabulate",
]
