"""tau-ARGUS tabular data (``.tab``): one cell per line, fields in the order of the ``.rda`` file.

Source: the tau-ARGUS manual ("Tabular input"). Each line holds one code per explanatory
variable (totals under their ``<TOTCODE>``), then the numeric fields the metadata declare — the
response, the frequency (``<FREQUENCY>``), shadow and cost variables, top contributions
(``<MAXSCORE>``), a status letter (``<STATUS>``: safe, unsafe, protected as the metadata's
``<SAFE>``/``<UNSAFE>``/``<PROTECT>`` say — S, U, P by default — plus M for a secondary cell and E
for an empty one, as tau-ARGUS writes them) and protection levels. Numbers may have a decimal
comma.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tabsafe.interop.argus._text import fail, lines, number, split_fields
from tabsafe.interop.argus.rda import Metadata

__all__ = ["TabData", "read_tab", "write_tab"]


@dataclass(frozen=True)
class TabData:
    """The cells of a ``.tab`` file: one column per variable (codes as text, numbers as floats,
    statuses as their letters), in file order."""

    columns: Mapping[str, tuple[Any, ...]]
    lines: tuple[int, ...] = field(default=(), compare=False)

    @property
    def n_cells(self) -> int:
        return len(next(iter(self.columns.values()), ()))


def _letters(meta: Metadata) -> set[str]:
    safe, unsafe, protect = meta.status_letters
    return {safe.upper(), unsafe.upper(), protect.upper(), "M", "E"}


def read_tab(text: str, meta: Metadata, *, source: str = "table.tab") -> TabData:
    """The cells of a ``.tab`` file's text, described by the table metadata ``meta``."""
    if meta.kind != "table":
        raise ValueError("a .tab file is read with the metadata of a table")
    sep = meta.separator or ";"
    cols: dict[str, list[Any]] = {v.name: [] for v in meta.variables}
    letters = _letters(meta)
    numbers = []
    n = len(meta.variables)
    for ln in lines(text):
        fields = split_fields(ln.text, sep, source, ln.number)
        if len(fields) != n:
            raise fail(source, ln.number, "cell", f"{len(fields)} fields where the metadata declare {n}")
        for k, (v, value) in enumerate(zip(meta.variables, fields), 1):
            where = f"field {k} ({v.name})"
            if v.recodeable:
                cols[v.name].append(value.strip())
            elif v.role == "status":
                letter = value.strip().upper()
                if letter not in letters:
                    raise fail(source, ln.number, where, "not a status letter of this table")
                cols[v.name].append(letter)
            else:
                cols[v.name].append(number(value, source, ln.number, where) if value.strip() else 0.0)
        numbers.append(ln.number)
    if not numbers:
        raise fail(source, None, "cells", "the file holds no cell")
    return TabData({k: tuple(v) for k, v in cols.items()}, tuple(numbers))


def write_tab(data: TabData | Mapping[str, Sequence[Any]], meta: Metadata) -> str:
    """The ``.tab`` text of ``data`` (:func:`read_tab` reads it back to the same cells); codes
    in quotes, numbers with their variable's decimals (more where a value needs them)."""
    columns = data.columns if isinstance(data, TabData) else data
    sep = meta.separator or ";"
    n = len(next(iter(columns.values())))
    out = []
    for i in range(n):
        fields = []
        for v in meta.variables:
            value = columns[v.name][i]
            if v.recodeable:
                if '"' in str(value):
                    raise ValueError("a .tab code cannot hold a double quote")
                fields.append(f'"{value}"')
            elif v.role == "status":
                fields.append(str(value))
            else:
                text = f"{float(value):.{v.decimals or 0}f}"
                fields.append(text if float(text) == float(value) else repr(float(value)))
        out.append(sep.join(fields))
    return "\n".join(out) + "\n"
