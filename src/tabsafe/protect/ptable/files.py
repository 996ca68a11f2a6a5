"""P-table files: the tabsafe CSV layout and the tau-ARGUS text layout (METHODS.md §2).

* tabsafe CSV: a header ``i,j,p,v,p_int_lb,p_int_ub`` and one ``,``-separated line per row.
* tau-ARGUS: the text file R ``ptable::pt_export(..., SDCtool = "TauArgus")`` writes: a header
  ``i;j;p;v;p_int_ub`` and one ``;``-separated line per row (R pads numbers with spaces; the
  "SAS" variant adds ``p_int_lb`` before ``p_int_ub``; a ``type`` column must say ``all``).
  ``p_int_lb`` is rebuilt as the previous row's ``p_int_ub`` within each ``i``.
* tau-ARGUS magnitude p-tables (R ``ptable::create_num_ptable(..., step = 2)``, as in
  sdcTools/tauargus ``data/cellkey/Magnitude``): the same layout with ``j`` and ``v`` in
  fractional steps and a ``type`` column ``all``, ``even`` or ``odd``; the value keeps both.
  Each row of such a file is checked where it stands: a wrong ``type``, rows of one ``i`` whose
  ``p`` do not sum to 1 or a ``p_int_ub`` that is not the running sum name file, line and field.

Reading tells the layouts apart by the header line (a ``;`` in it means tau-ARGUS) and uses the
standard ``csv`` module — p-tables have a few hundred rows, and no frame library is needed. Both
layouts are text: a p-table file is named ``.csv`` or ``.txt``, whichever layout it holds.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tabsafe.errors import InputError, param
from tabsafe.protect.ptable.columns import COLUMNS, FILE_TOL, numeric_column, row_labels

if TYPE_CHECKING:  # pragma: no cover
    from tabsafe.io import Outputs
    from tabsafe.protect.ptable.table import PTable

__all__ = ["KINDS", "LAYOUTS", "SUFFIXES", "TAU_ARGUS_COLUMNS", "check_ptable_path", "ptable_text", "read_columns",
           "write_ptable"]

LAYOUTS: tuple[str, ...] = ("csv", "tau-argus")
SUFFIXES: tuple[str, ...] = (".csv", ".txt")
TAU_ARGUS_COLUMNS: tuple[str, ...] = ("i", "j", "p", "v", "p_int_ub")
_SEPARATOR = {"csv": ",", "tau-argus": ";"}


def _layout(layout: str) -> str:
    if layout not in LAYOUTS:
        raise InputError(f"{param('format')} must be one of {', '.join(LAYOUTS)}; got {layout!r}")
    return layout


def check_ptable_path(path: str | os.PathLike[str], *, option: str = "out") -> Path:
    """A p-table is written as text: refuse any name but ``.csv`` or ``.txt`` (a ``.parquet``
    name would get CSV text inside)."""
    target = Path(path)
    suffix = target.suffix.lower()
    if suffix not in SUFFIXES:
        raise InputError(
            f"a p-table is a text file: give {param(option)} a .csv or .txt name (either layout); "
            f"got {suffix or 'no extension'}",
            where=str(target),
        )
    return target


# --------------------------------------------------------------------------------------------
# writing


def _num(x: float) -> str:
    # repr is the shortest text that reads back as the same float
    return repr(float(x))


def _step(x: float) -> str:
    # j and v: integers as before ("3"), fractional steps as the shortest float text ("0.5")
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def ptable_text(ptable: PTable, layout: str = "csv") -> str:
    """The file content of ``ptable`` in ``layout`` (``csv`` or ``tau-argus``)."""
    layout = _layout(layout)
    c = {name: ptable.column(name).tolist() for name in COLUMNS}
    # the type column only when the table came with one (a magnitude p-table): count p-tables
    # are written as they always were
    kind = "" if ptable.kind is None else ptable.kind
    if layout == "csv":
        lines = [",".join(COLUMNS) + (",type" if kind else "")]
        lines += [f"{c['i'][k]},{_step(c['j'][k])},{_num(c['p'][k])},{_step(c['v'][k])},"
                  f"{_num(c['p_int_lb'][k])},{_num(c['p_int_ub'][k])}" + (f",{kind}" if kind else "")
                  for k in range(ptable.n_rows)]
    else:
        lines = [";".join(TAU_ARGUS_COLUMNS) + (";type" if kind else "")]
        lines += [f"{c['i'][k]};{_step(c['j'][k])};{_num(c['p'][k])};{_step(c['v'][k])};"
                  f"{_num(c['p_int_ub'][k])}" + (f";{kind}" if kind else "")
                  for k in range(ptable.n_rows)]
    return "\n".join(lines) + "\n"


def write_ptable(ptable: PTable, path: str | os.PathLike[str], *, layout: str = "csv",
                 outputs: Outputs | None = None) -> Path:
    """Write ``ptable`` in ``layout`` to ``path`` (``.csv`` or ``.txt``).

    With ``outputs`` the file joins that transaction (``path`` must have been planned there);
    without, it is written on its own, atomically.
    """
    target = check_ptable_path(path)
    text = ptable_text(ptable, layout)
    if outputs is not None:
        outputs.write_text(target, text)
        return target
    from tabsafe.io import atomic_path

    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8", newline="\n")
    return target


# --------------------------------------------------------------------------------------------
# reading


def _cannot_parse(source: str, why: str) -> InputError:
    return InputError(f"cannot parse the file: {why}", where=source)


def _read_text(path: str | os.PathLike[str], source: str) -> str:
    if not Path(path).is_file():
        raise InputError("file not found", where=source)
    try:
        with open(path, encoding="utf-8-sig", newline="") as fh:
            return fh.read()
    except UnicodeDecodeError:
        raise _cannot_parse(source, "not UTF-8 text") from None
    except OSError as exc:
        raise InputError(f"cannot read the p-table: {exc.strerror}", where=source) from None


def _split(text: str, sep: str, source: str) -> tuple[dict[str, list[str]], list[int]]:
    """Header and rows of a delimited text, as column name -> texts (blank lines skipped), and
    each row's line number in the file."""
    try:
        records = [[f.strip() for f in rec] for rec in csv.reader(text.splitlines(), delimiter=sep)]
    except csv.Error as exc:
        raise _cannot_parse(source, str(exc)) from None
    numbered = [(n, rec) for n, rec in enumerate(records, start=1) if any(rec)]
    if not numbered:
        raise _cannot_parse(source, "it is empty")
    header = numbered[0][1]
    if len(set(header)) != len(header):
        raise _cannot_parse(source, "the header names a column twice")
    columns: dict[str, list[str]] = {name: [] for name in header}
    lines = [line for line, _ in numbered[1:]]
    for line, rec in numbered[1:]:
        if len(rec) != len(header):
            raise _cannot_parse(source, f"line {line} has {len(rec)} fields, the header {len(header)}")
        for name, value in zip(header, rec):
            columns[name].append(value)
    return columns, lines


def _layout_of(text: str) -> str:
    first = next((line for line in text.splitlines() if line.strip()), "")
    return "tau-argus" if ";" in first else "csv"


def read_columns(path: str | os.PathLike[str], *, layout: str | None = None) -> tuple[dict[str, object], str]:
    """A p-table file's columns in the tabsafe layout, and the file's name for messages (the
    value is built by :func:`tabsafe.protect.ptable.table.read_ptable`); ``layout`` None tells
    the layouts apart by the header."""
    source = str(path)
    text = _read_text(path, source)
    layout = _layout_of(text) if layout is None else _layout(layout)
    columns, lines = _split(text, _SEPARATOR[layout], source)
    if layout == "csv":
        return columns, source  # type: ignore[return-value]
    return _from_tau_argus(columns, lines, source), source


#: the names earlier versions of the ptable package gave the columns (tau-ARGUS reads both)
_OLD_NAMES = {"p_ij": "p", "p_ij_lb": "p_int_lb", "p_ij_ub": "p_int_ub"}


#: the types R ``ptable`` writes: one table for every count, or one for even / odd counts
KINDS: tuple[str, ...] = ("all", "even", "odd")


def _at(source: str, line: int, field: str, what: str) -> InputError:
    return InputError(f"field {field}: {what}", where=f"{source}:{line}")


def _numbers(columns: dict[str, list[str]], name: str, lines: list[int], source: str) -> np.ndarray:
    out = np.empty(len(lines))
    for k, text in enumerate(columns[name]):
        try:
            out[k] = float(text)
        except ValueError:
            raise _at(source, lines[k], name, f"{text!r} is not a number") from None
        if not np.isfinite(out[k]):
            raise _at(source, lines[k], name, f"{text!r} is not a finite number")
    return out


def _check_rows(columns: dict[str, list[str]], lines: list[int], source: str) -> None:
    """The tau-ARGUS rows checked where they stand (file:line, field): the ``type``, and per
    ``i`` (rows by ``j``) ``p`` summing to 1 and ``p_int_ub`` the running sum of ``p``."""
    if "type" in columns:
        kinds = columns["type"]
        for k, kind in enumerate(kinds):
            if kind not in KINDS:
                raise _at(source, lines[k], "type", f"must be one of {', '.join(KINDS)}; got {kind!r}")
            if kind != kinds[0]:
                raise _at(source, lines[k], "type", f"{kind!r} after {kinds[0]!r} on line {lines[0]}: a p-table "
                          "value holds one type (write the even and odd tables to separate files)")
    i = _numbers(columns, "i", lines, source)
    j = _numbers(columns, "j", lines, source)
    p = _numbers(columns, "p", lines, source)
    ub = _numbers(columns, "p_int_ub", lines, source)
    order = np.lexsort((j, i))
    running, last = 0.0, None
    for pos, k in enumerate(order.tolist()):
        if i[k] != last:
            running, last = 0.0, i[k]
        running += p[k]
        if abs(ub[k] - running) > FILE_TOL:
            raise _at(source, lines[k], "p_int_ub", f"{columns['p_int_ub'][k]} is not the running sum of p "
                      f"for i={columns['i'][k]} ({running:.10g}; tolerance {FILE_TOL:g})")
        ends = pos + 1 == order.size or i[order[pos + 1]] != i[k]
        if ends and abs(running - 1.0) > FILE_TOL:
            raise _at(source, lines[k], "p", f"the p of i={columns['i'][k]} sum to {running:.10g}, not 1 "
                      f"(tolerance {FILE_TOL:g})")


def _from_tau_argus(columns: dict[str, list[str]], lines: list[int], source: str) -> dict[str, object]:
    columns = {_OLD_NAMES.get(k, k) if _OLD_NAMES.get(k, k) not in columns else k: v for k, v in columns.items()}
    missing = [c for c in TAU_ARGUS_COLUMNS if c not in columns]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)}; the tau-ARGUS layout needs "
                         f"{';'.join(TAU_ARGUS_COLUMNS)}", where=source)
    _check_rows(columns, lines, source)
    out: dict[str, object] = {c: columns[c] for c in (*COLUMNS, "type") if c in columns}
    if "p_int_lb" not in columns and columns["i"]:
        i_text = row_labels(columns["i"])
        i = numeric_column("i", columns["i"], i_text, source)
        j = numeric_column("j", columns["j"], i_text, source)
        ub = numeric_column("p_int_ub", columns["p_int_ub"], i_text, source)
        # each row's interval starts where the previous target's ends, within one i
        order = np.lexsort((j, i))
        lb_sorted = np.zeros(i.size)
        same = i[order][1:] == i[order][:-1]
        lb_sorted[1:][same] = ub[order][:-1][same]
        lb = np.empty(i.size)
        lb[order] = lb_sorted
        out["p_int_lb"] = lb
    elif "p_int_lb" not in columns:
        out["p_int_lb"] = []
    return out
