"""tau-ARGUS microdata (``.asc``): fixed columns or separated fields, as an ``.rda`` file says.

Source: the tau-ARGUS manual ("Microdata file"). In fixed format each variable is read from its
columns (``START`` and ``LENGTH`` of the ``.rda`` file); in free format the fields are separated
by the ``<SEPARATOR>`` and come in the order of the variables. Categorical codes are text,
trimmed (tau-ARGUS pads them); numeric variables are numbers (a decimal comma is accepted).

:func:`read_asc` gives an Arrow table (one string column per categorical variable, one float
column per numeric one, the record key as a float); :func:`write_asc` writes such a table back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from tabsafe.interop.argus._text import fail, number, split_fields
from tabsafe.interop.argus.rda import Metadata, Variable

__all__ = ["is_numeric", "read_asc", "write_asc"]


def is_numeric(v: Variable) -> bool:
    """Read as a number: numeric (not also categorical), weights and record keys."""
    return (v.numeric and not v.recodeable) or v.role in {"weight", "recordkey", "shadow", "cost"}


def read_asc(text: str, meta: Metadata, *, source: str = "data.asc") -> pa.Table:
    """The records of an ``.asc`` file's text, one column per variable of ``meta``."""
    if meta.kind != "micro":
        raise ValueError("an .asc file is read with the metadata of microdata")
    cols: dict[str, list[Any]] = {v.name: [] for v in meta.variables}
    numeric = {v.name: is_numeric(v) for v in meta.variables}
    fixed = meta.fixed
    nvars = len(meta.variables)
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        if fixed:
            fields = [_fixed_field(line, v, source, lineno) for v in meta.variables]
        else:
            fields = split_fields(line, meta.separator or ";", source, lineno)
            if len(fields) != nvars:
                raise fail(source, lineno, "record", f"{len(fields)} fields where the metadata declare {nvars}")
        for k, (v, value) in enumerate(zip(meta.variables, fields), 1):
            if numeric[v.name]:
                text_value = value.strip()
                missing = not text_value or text_value in v.missing
                cols[v.name].append(None if missing else number(text_value, source, lineno, f"field {k} ({v.name})"))
            else:
                cols[v.name].append(value.strip())
    if not cols or not next(iter(cols.values())):
        raise fail(source, None, "records", "the file holds no record")
    arrays = {name: pa.array(values, type=pa.float64() if numeric[name] else pa.string())
              for name, values in cols.items()}
    return pa.table(arrays)


def _fixed_field(line: str, v: Variable, source: str, lineno: int) -> str:
    start = (v.start or 1) - 1
    end = start + (v.length or 0)
    if len(line) < end:
        raise fail(source, lineno, f"{v.name} (columns {start + 1}-{end})", "the record is shorter")
    return line[start:end]


def _cell(value: Any, v: Variable) -> str:
    if value is None:
        return v.missing[0] if v.missing else ""
    if isinstance(value, float):
        decimals = v.decimals or 0
        text = f"{value:.{decimals}f}"
        if float(text) != value:
            text = repr(value)
        return text
    return str(value)


def write_asc(records: pa.Table | Mapping[str, Sequence[Any]], meta: Metadata) -> str:
    """The ``.asc`` text of ``records`` (columns named as ``meta``'s variables). Fixed format
    right-aligns each value in its columns; a value wider than its variable is refused."""
    table = records if isinstance(records, pa.Table) else pa.table(dict(records))
    columns = {v.name: table.column(v.name).to_pylist() for v in meta.variables}
    n = table.num_rows
    out = []
    sep = meta.separator or ";"
    for i in range(n):
        cells = [_cell(columns[v.name][i], v) for v in meta.variables]
        if meta.fixed:
            width = max((v.start or 1) - 1 + (v.length or 0) for v in meta.variables)
            buf = [" "] * width
            for v, c in zip(meta.variables, cells):
                if len(c) > (v.length or 0):
                    raise ValueError(f"record {i + 1}: a value of {v.name} is wider than its {v.length} columns")
                start = (v.start or 1) - 1
                buf[start:start + (v.length or 0)] = list(c.rjust(v.length or 0))
            out.append("".join(buf))
        else:
            if any(sep in c for c in cells):
                cells = [f'"{c}"' if sep in c else c for c in cells]
            out.append(sep.join(cells))
    return "\n".join(out) + "\n"
