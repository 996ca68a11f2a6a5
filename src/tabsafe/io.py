"""Reading side files and writing tables: atomically, and releases apart from evaluations.

Every file tabsafe writes goes to a temporary file in the target folder first and is renamed
into place only when complete, so an error never leaves a partial output behind.

A *release* file holds the dimension columns and the protected values only; original counts,
cell keys and other secrets appear only in files written with ``evaluation=True``.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import yaml

from tabsafe.errors import InputError
from tabsafe.model.hierarchy import Hierarchy
from tabsafe.model.table import Table

#: Value columns that carry originals or secrets and never go into a release file.
SECRET_COLUMNS = frozenset({"original", "ckey", "ckey_int"})


def is_secret(column: str) -> bool:
    """Original values (``original``, ``original_<x>``) and cell keys never go into a release."""
    return column in SECRET_COLUMNS or column.startswith("original")


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only if the block succeeds."""
    target = Path(path)
    if target.is_dir():
        raise InputError("output path is a folder", where=str(target))
    if not target.parent.exists():
        raise InputError("output folder does not exist", where=str(target.parent))
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def output_format(path: str | os.PathLike[str]) -> str:
    suffix = Path(path).suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in {".parquet", ".pq"}:
        return "parquet"
    raise InputError(f"unknown output format {suffix or '(none)'!r}; use .csv or .parquet", where=str(path))


def write_frame(data: pa.Table, path: str | os.PathLike[str]) -> Path:
    """Write an Arrow table as CSV or Parquet (by extension), atomically."""
    fmt = output_format(path)
    with atomic_path(path) as tmp:
        if fmt == "csv":
            pacsv.write_csv(data, tmp)
        else:
            pq.write_table(data, tmp)
    return Path(path)


def write_table(
    table: Table,
    path: str | os.PathLike[str],
    *,
    columns: Sequence[str] | None = None,
    evaluation: bool = False,
) -> Path:
    """Write a table, one row per cell, codes as text.

    Args:
        columns: value columns to write (default: ``count`` only).
        evaluation: allow original values and keys (``original``, ``ckey``…) in the file. Without
            it, asking for such a column is an error: release files never carry originals.
    """
    cols = list(columns) if columns is not None else ["count"]
    secret = [c for c in cols if is_secret(c)]
    if secret and not evaluation:
        raise InputError(f"column {secret[0]!r} may only be written to an evaluation file")
    missing = [c for c in cols if c not in table.cells.columns]
    if missing:
        raise InputError(f"the table has no column {missing[0]!r}")
    frame = {v: pa.array(table.cells[v].astype(str).to_numpy(), pa.string()) for v in table.variables}
    for c in cols:
        frame[c] = pa.Array.from_pandas(table.cells[c])  # nullable columns: NA is written as null
    return write_frame(pa.table(frame), path)


def read_meta(path: str | os.PathLike[str]) -> dict[str, Hierarchy]:
    """Read a data set's ``meta.yaml``: the codelist (flat) of every declared variable.

    The file's ``hierarchies`` section only names hierarchy files that may be passed with
    ``--hierarchy``; declared codelists are flat, so tables get subtotals only when asked.
    """
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise InputError(f"cannot read metadata: {exc.strerror}", where=str(path)) from None
    except yaml.YAMLError:
        raise InputError("metadata is not valid YAML", where=str(path)) from None
    variables = data.get("variables") if isinstance(data, Mapping) else None
    if not isinstance(variables, Mapping):
        raise InputError("metadata needs a 'variables' mapping", where=str(path))
    out: dict[str, Hierarchy] = {}
    for name, spec in variables.items():
        codes: Any = spec.get("codes") if isinstance(spec, Mapping) else spec
        if not isinstance(codes, list):
            raise InputError(f"variable {name!r} needs a list of codes", where=str(path))
        out[str(name)] = Hierarchy.flat(codes, source=f"{path.name}:{name}")
    return out
