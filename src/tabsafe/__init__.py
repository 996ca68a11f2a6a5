"""tabsafe: frequency tables from microdata, protected for release.

The public API, by part of the job:

Data model
    :class:`Hierarchy`, :class:`Dimension`, :class:`Table`, :class:`TableSpec`, :class:`KeySpec`,
    :class:`Microdata`, :class:`InnerCells`
Tables from microdata
    :func:`tabulate` (DuckDB by default), :func:`synth_census` (synthetic census)
Protection
    :class:`CellKeyMethod`, :class:`PTable`, :class:`PTableParams`, :func:`generate_ptable`,
    :class:`MagnitudeParams`; every method also by name through :func:`get_method`
Errors
    :class:`TabsafeError`, :class:`InputError`, :class:`MethodError`
"""

from tabsafe.errors import InputError, MethodError, TabsafeError, TooLargeError
from tabsafe.model.hierarchy import TOTAL, Hierarchy
from tabsafe.model.microdata import InnerCells, Microdata
from tabsafe.model.spec import KeySpec, TableSpec
from tabsafe.model.table import Dimension, Table
from tabsafe.protect.cell_key import MagnitudeParams, generate_record_keys
from tabsafe.protect.cell_key_method import CellKeyMethod
from tabsafe.protect.ptable import PTable, PTableParams, generate_ptable
from tabsafe.registry import get_method, method_names
from tabsafe.synth import synth_census
from tabsafe.tabulate import tabulate

__version__ = "0.1.0"

__all__ = [
    "TOTAL",
    "CellKeyMethod",
    "MagnitudeParams",
    "PTable",
    "PTableParams",
    "generate_ptable",
    "generate_record_keys",
    "get_method",
    "method_names",
    "synth_census",
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
