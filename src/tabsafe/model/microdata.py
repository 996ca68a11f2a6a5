"""Where records (or inner cells) come from: files or in-memory frames, with their codelists.

A :class:`Microdata` names a source of unit records and the declared codelist (a
:class:`~tabsafe.model.hierarchy.Hierarchy`) of each categorical variable. An
:class:`InnerCells` names an already aggregated table of inner cells with its count column.
Neither copies data: engines read the source where it lies.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from tabsafe.errors import InputError, reader_message
from tabsafe.model.hierarchy import Hierarchy


@dataclass(frozen=True)
class FileSource:
    """A Parquet or CSV file (or a glob of them) read in place by the engine; or a folder of
    Parquet files (a data set as Spark writes it: ``persons.parquet/part-*.parquet``)."""

    path: str
    format: str  # "parquet" | "csv"

    @classmethod
    def of(cls, path: str | os.PathLike[str]) -> FileSource:
        text = str(path)
        suffix = Path(text).suffix.lower()
        fmt = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv"}.get(suffix)
        if fmt is None:
            raise InputError(f"unknown data format {suffix or '(none)'!r}; use .parquet or .csv", where=text)
        if not any(ch in text for ch in "*?["):
            if Path(text).is_dir():
                if fmt != "parquet" or not any(Path(text).rglob("*.parquet")):
                    raise InputError("a folder must hold .parquet files (a Parquet data set)", where=text)
            elif not Path(text).is_file():
                raise InputError("no such file", where=text)
        return cls(text, fmt)

    @property
    def is_folder(self) -> bool:
        """A folder of Parquet files (read as one data set)."""
        return Path(self.path).is_dir()

    def describe(self) -> str:
        return self.path


@dataclass(frozen=True, eq=False)
class ArrowSource:
    """An in-memory Arrow table (pandas and polars frames are converted to Arrow)."""

    table: pa.Table
    name: str = "data"

    def describe(self) -> str:
        return self.name


Source = FileSource | ArrowSource


def _to_arrow(data: Any) -> pa.Table:
    if isinstance(data, pa.Table):
        return data
    module = type(data).__module__.split(".")[0]
    if module == "pandas":
        return pa.Table.from_pandas(data, preserve_index=False)
    if module == "polars":
        return data.to_arrow()
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    raise InputError(f"cannot read microdata from a {type(data).__name__}; use a file, pandas, polars or Arrow")


@dataclass(frozen=True, kw_only=True)
class Microdata:
    """Unit records and the declared codelists of their categorical variables.

    Attributes:
        source: where the records are.
        codelists: per variable, its codelist (a hierarchy: leaves are the valid codes). A value
            of a tabulated variable outside its declared codelist is an error; variables without a
            declared codelist take the values found in the data.
        key: the record-key column, if the data carry one.
        weight: the column of whole-number record weights tables count by (a cell's count is the
            sum of its records' weights), if the records are weighted (e.g. by perturbation
            weights, 001 §7).
    """

    source: Source
    codelists: Mapping[str, Hierarchy] = field(default_factory=dict)
    key: str | None = None
    weight: str | None = None

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], **kwargs: Any) -> Microdata:
        """Parquet or CSV, by extension."""
        return cls(source=FileSource.of(path), **kwargs)

    @classmethod
    def from_parquet(cls, path: str | os.PathLike[str], **kwargs: Any) -> Microdata:
        return cls(source=FileSource(str(path), "parquet"), **kwargs)

    @classmethod
    def from_csv(cls, path: str | os.PathLike[str], **kwargs: Any) -> Microdata:
        return cls(source=FileSource(str(path), "csv"), **kwargs)

    @classmethod
    def from_frame(cls, data: Any, *, name: str = "data", **kwargs: Any) -> Microdata:
        """From a pandas or polars DataFrame or an Arrow table."""
        return cls(source=ArrowSource(_to_arrow(data), name), **kwargs)

    from_pandas = from_polars = from_arrow = from_frame

    def with_codelists(self, codelists: Mapping[str, Hierarchy]) -> Microdata:
        return Microdata(source=self.source, codelists={**self.codelists, **codelists}, key=self.key,
                         weight=self.weight)

    def read(self) -> pa.Table:
        """The records as one Arrow table (what a microdata method perturbs). A CSV is read with
        every column as text, as the engines read it, so codes such as ``01`` stay codes."""
        return read_source(self.source)


def read_source(source: Source) -> pa.Table:
    """Every record of ``source`` in memory; an unreadable file is an :class:`InputError`."""
    if isinstance(source, ArrowSource):
        return source.table
    path = source.path
    try:
        if source.format == "parquet":
            import pyarrow.parquet as pq

            if any(ch in path for ch in "*?["):
                import glob

                files = sorted(glob.glob(path))
                if not files:
                    raise InputError("no file matches", where=path)
                return pa.concat_tables([pq.read_table(f) for f in files], promote_options="permissive")
            return pq.read_table(path)
        import csv

        import pyarrow.csv as pacsv

        with open(path, newline="", encoding="utf-8-sig") as f:
            header = next(csv.reader(f), [])
        types = {name: pa.string() for name in header}
        return pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(column_types=types, strings_can_be_null=True,
                                                                          null_values=[""]))
    except InputError:
        raise
    except (OSError, UnicodeDecodeError, pa.ArrowException) as exc:
        first = reader_message(exc)
        raise InputError(f"cannot read data: {first}", where=path) from None


@dataclass(frozen=True, kw_only=True)
class InnerCells:
    """An aggregated table of inner cells: one row per combination, a count column.

    Missing combinations count as zero; duplicate combinations, negative or fractional counts
    and rows that look like margins (a code equal to a total or subtotal) are refused.
    """

    source: Source
    count: str
    codelists: Mapping[str, Hierarchy] = field(default_factory=dict)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], *, count: str, **kwargs: Any) -> InnerCells:
        return cls(source=FileSource.of(path), count=count, **kwargs)

    @classmethod
    def from_frame(cls, data: Any, *, count: str, name: str = "table", **kwargs: Any) -> InnerCells:
        return cls(source=ArrowSource(_to_arrow(data), name), count=count, **kwargs)
