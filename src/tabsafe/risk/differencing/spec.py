"""The differencing audit's spec: the tables released together, their filters and the derived
variables (reading the SPEC file of :mod:`tabsafe.risk.differencing`; paths relative to it)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tabsafe.errors import InputError
from tabsafe.model import filter as flt
from tabsafe.model.hierarchy import TOTAL, Hierarchy
from tabsafe.model.microdata import FileSource, InnerCells, Microdata

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# --------------------------------------------------------------------------- the spec


@dataclass(frozen=True)
class CodeRange:
    """The base codes whose numeric value lies in ``[low, high]`` (a spec's ``{min:, max:}``)."""

    low: float
    high: float


Item = str | CodeRange


@dataclass(frozen=True, kw_only=True)
class Derived:
    """A variable recoded from one base variable: each new code is a set of base codes.

    Codes may overlap (a banding with nested bands); base codes in no code fall outside the
    variable (its total is the union of its codes).
    """

    name: str
    base: str
    codes: tuple[tuple[str, tuple[Item, ...]], ...]

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise InputError(f"derived variable name {self.name!r} must be a plain identifier")
        if not self.codes:
            raise InputError(f"derived variable {self.name!r} has no codes")
        names = [c for c, _ in self.codes]
        if len(set(names)) != len(names):
            dup = next(c for i, c in enumerate(names) if c in names[:i])
            raise InputError(f"derived variable {self.name!r}: code {dup!r} appears twice")
        if TOTAL in names:
            raise InputError(f"derived variable {self.name!r}: {TOTAL!r} is reserved for the total")


@dataclass(frozen=True, kw_only=True)
class TableDef:
    """One released table: spanning variables, sub-population filter, margins, hierarchies.

    Attributes:
        name: unique name used in the report.
        by: spanning variables (base or derived); empty for a single count.
        where: the sub-population, a filter in tabsafe's filter language (text, a parsed filter,
            a mapping ``{variable: [codes]}`` or a list of these, which are ANDed; see the
            module docstring for the filters the box method audits).
        margins: publish totals and hierarchy subtotals (as :func:`tabsafe.tabulate` does).
        hierarchies: per spanning variable, a hierarchy whose leaves are its codes.
    """

    name: str
    by: tuple[str, ...] = ()
    where: flt.Filter | None = None
    margins: bool = True
    hierarchies: Mapping[str, Hierarchy] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name:
            raise InputError("a table needs a non-empty name")
        if len(set(self.by)) != len(self.by):
            raise InputError(f"table {self.name!r}: a variable appears twice in 'by'")
        extra = sorted(set(self.hierarchies) - set(self.by))
        if extra:
            raise InputError(f"table {self.name!r}: hierarchy for {extra[0]!r}, which is not in 'by'")
        object.__setattr__(self, "where", where_filter(self.where, f"table {self.name!r}: 'where'"))


def _as_data(data: Any) -> Microdata | InnerCells:
    """The spec's data as the engine reads it (a file name or a data frame means microdata)."""
    if isinstance(data, Microdata | InnerCells):
        return data
    if isinstance(data, str | os.PathLike):
        return Microdata.from_file(data)
    return Microdata.from_frame(data)


@dataclass(frozen=True, kw_only=True)
class DifferencingSpec:
    """A release to audit: the data, derived variables, tables, threshold and chain length.

    Attributes:
        data: the microdata or inner cells (with their declared codelists, which fix the order
            and domain of codes), as :func:`tabsafe.tabulate` reads them; a file name or a
            data frame is taken as microdata.
        tables: the tables released together (at least one).
        derived: recoded variables by name.
        threshold: a sliver is small when ``0 < n < threshold`` (integer >= 1).
        max_order: longest chain of differences searched (1 = pairs only).
        source: where the spec came from (for messages).
        files: the files the spec was read from besides the data (the spec, its meta and
            hierarchy files): a command never writes over them.
    """

    data: Microdata | InnerCells
    tables: tuple[TableDef, ...]
    derived: Mapping[str, Derived] = field(default_factory=dict)
    threshold: int = 3
    max_order: int = 2
    source: str = "spec"
    files: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "data", _as_data(self.data))
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, int) or self.threshold < 1:
            raise InputError(f"'threshold' must be an integer >= 1, got {self.threshold!r}", where=self.source)
        if isinstance(self.max_order, bool) or not isinstance(self.max_order, int) or self.max_order < 1:
            raise InputError(f"'max_order' must be an integer >= 1, got {self.max_order!r}", where=self.source)
        if not self.tables:
            raise InputError("the spec lists no tables", where=self.source)
        names = [t.name for t in self.tables]
        if len(set(names)) != len(names):
            dup = next(n for i, n in enumerate(names) if n in names[:i])
            raise InputError(f"table name {dup!r} appears twice", where=self.source)
        for d in self.derived.values():
            if d.base in self.derived:
                raise InputError(f"derived variable {d.name!r} is built from another derived variable "
                                 f"{d.base!r}; recode from a base variable", where=self.source)

    @property
    def inputs(self) -> tuple[str, ...]:
        """Every file the audit reads: the spec's files and the data file."""
        source = self.data.source
        return self.files + ((source.path,) if isinstance(source, FileSource) else ())

    @classmethod
    def from_yaml(cls, path: str | os.PathLike[str]) -> DifferencingSpec:
        """Read a SPEC file (format in the module docstring); paths are relative to it."""
        from tabsafe.io import read_meta
        from tabsafe.model.config import check_keys, read_yaml, resolve_path

        path = Path(path)
        where = str(path)
        raw = read_yaml(path, what="spec")
        if not isinstance(raw, Mapping):
            raise InputError("the spec must be a YAML mapping with 'data' and 'tables'", where=where)
        check_keys(raw, {"data", "table", "count", "meta", "threshold", "max_order", "derived", "tables"}, where)
        base = path.parent
        if "data" in raw and "table" in raw:
            raise InputError("give either 'data' (microdata) or 'table' + 'count' (inner cells), not both",
                             where=where)
        if "table" in raw:
            data, count = raw["table"], raw.get("count")
            if not isinstance(count, str) or not count:
                raise InputError("'table' (inner cells) needs 'count': the count column", where=where)
        elif "data" in raw:
            data, count = raw["data"], None
            if "count" in raw:
                raise InputError("'count' goes with 'table' (inner cells), not with 'data'", where=where)
        else:
            raise InputError("the spec needs 'data' (microdata file) or 'table' + 'count'", where=where)
        data_path = resolve_path(data, base, "'data'/'table'", where)
        if not data_path.is_file():
            raise InputError("no such data file", where=str(data_path))
        files = [where]
        codelists: dict[str, Hierarchy] = {}
        if raw.get("meta") is not None:
            meta = resolve_path(raw["meta"], base, "'meta'", where)
            codelists = read_meta(meta)
            files.append(str(meta))
        source = FileSource.of(data_path)
        frame: Microdata | InnerCells = (InnerCells(source=source, count=count, codelists=codelists) if count
                                         else Microdata(source=source, codelists=codelists))
        derived = _parse_derived(raw.get("derived"), where)
        tables_raw = raw.get("tables")
        if not isinstance(tables_raw, list) or not tables_raw:
            raise InputError("'tables' must be a non-empty list", where=where)
        tables = tuple(_parse_table(t, i, base, where, files) for i, t in enumerate(tables_raw))
        return cls(data=frame, tables=tables, derived=derived, threshold=raw.get("threshold", 3),
                   max_order=raw.get("max_order", 2), source=where, files=tuple(files))


def _code(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def _items(value: Any, where: str) -> tuple[Item, ...]:
    values = value if isinstance(value, list) else [value]
    out: list[Item] = []
    for v in values:
        if isinstance(v, Mapping):
            if set(v) != {"min", "max"}:
                raise InputError(f"{where}: a range is {{min: a, max: b}}, got {dict(v)!r}")
            lo, hi = v["min"], v["max"]
            if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in (lo, hi)) or lo > hi:
                raise InputError(f"{where}: range needs numbers min <= max, got {dict(v)!r}")
            out.append(CodeRange(float(lo), float(hi)))
        elif isinstance(v, str | int | float) and not isinstance(v, bool):
            out.append(_code(v))
        else:
            raise InputError(f"{where}: a code must be text or a number, got {v!r}")
    if not out:
        raise InputError(f"{where}: empty list of codes")
    return tuple(out)


def _number_value(x: float) -> flt.Value:
    return flt.Value(_code(x))


def _mapping_filter(mapping: Mapping[Any, Any], where: str) -> flt.Filter:
    """``{variable: [codes or {min:, max:} ranges]}`` as ``variable in (codes) or a <= variable <= b``,
    ANDed over the variables (the audit spec's mapping form of a filter)."""
    parts: list[flt.Filter] = []
    for var, value in mapping.items():
        name = str(var)
        items = _items(value, f"{where} {name!r}")
        codes = [flt.Value(i) for i in items if isinstance(i, str)]
        alts: list[flt.Filter] = [flt.In(name, tuple(codes))] if codes else []
        for r in (i for i in items if isinstance(i, CodeRange)):
            alts.append(flt.And((flt.Compare(name, ">=", _number_value(r.low)),
                                 flt.Compare(name, "<=", _number_value(r.high)))))
        parts.append(alts[0] if len(alts) == 1 else flt.Or(tuple(alts)))
    return parts[0] if len(parts) == 1 else flt.And(tuple(parts))


def where_filter(value: Any, where: str) -> flt.Filter | None:
    """A table's ``where``: filter text, a parsed filter, a mapping, or a list of these (ANDed)."""
    if value is None or isinstance(value, flt.In | flt.Compare | flt.Not | flt.And | flt.Or):
        return value
    items = list(value) if isinstance(value, list | tuple) else [value]
    parts: list[flt.Filter] = []
    for item in items:
        if isinstance(item, str):
            try:
                parts.append(flt.parse(item))
            except InputError as exc:
                raise InputError(f"{where}: {exc.what}") from None
        elif isinstance(item, Mapping) and item:
            parts.append(_mapping_filter(item, where))
        else:
            raise InputError(f"{where} must be a filter text or map variables to allowed codes, got {item!r}")
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else flt.And(tuple(parts))


def _parse_derived(raw: Any, where: str) -> dict[str, Derived]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InputError("'derived' must map variable names to {from:, codes:}", where=where)
    out: dict[str, Derived] = {}
    for name, entry in raw.items():
        name = str(name)
        if not isinstance(entry, Mapping) or set(entry) != {"from", "codes"}:
            raise InputError(f"derived variable {name!r} needs exactly 'from' and 'codes'", where=where)
        codes = entry["codes"]
        if not isinstance(codes, Mapping) or not codes:
            raise InputError(f"derived variable {name!r}: 'codes' must map new codes to base codes",
                             where=where)
        pairs = tuple((_code(k), _items(v, f"derived {name!r} code {k!r}")) for k, v in codes.items())
        try:
            out[name] = Derived(name=name, base=str(entry["from"]), codes=pairs)
        except InputError as exc:
            raise InputError(exc.what, where=where) from None
    return out


def _parse_table(raw: Any, i: int, base: Path, where: str, files: list[str]) -> TableDef:
    if not isinstance(raw, Mapping):
        raise InputError(f"tables[{i}] must be a mapping with 'name' and 'by'", where=where)
    allowed = {"name", "by", "where", "margins", "hierarchies"}
    unknown = sorted(set(map(str, raw)) - allowed)
    if unknown:
        raise InputError(f"tables[{i}]: unknown key {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})",
                         where=where)
    name = raw.get("name")
    if not isinstance(name, str | int) or isinstance(name, bool) or str(name) == "":
        raise InputError(f"tables[{i}] needs a 'name'", where=where)
    name = str(name)
    by = raw.get("by", [])
    if isinstance(by, str):
        by = [b.strip() for b in by.split(",") if b.strip()]
    if not isinstance(by, list) or not all(isinstance(b, str) for b in by):
        raise InputError(f"table {name!r}: 'by' must be a list of variable names", where=where)
    margins = raw.get("margins", True)
    if not isinstance(margins, bool):
        raise InputError(f"table {name!r}: 'margins' must be true or false, got {margins!r}", where=where)
    hier_raw = raw.get("hierarchies") or {}
    if not isinstance(hier_raw, Mapping):
        raise InputError(f"table {name!r}: 'hierarchies' must map variables to files or trees", where=where)
    hierarchies: dict[str, Hierarchy] = {}
    for var, h in hier_raw.items():
        if isinstance(h, str):
            hierarchies[str(var)] = Hierarchy.from_file(base / h)
            files.append(str(base / h))
        else:
            hierarchies[str(var)] = Hierarchy.from_tree(h, source=f"{where}: table {name!r} hierarchy {var!r}")
    try:
        return TableDef(name=name, by=tuple(by), where=raw.get("where"), margins=margins, hierarchies=hierarchies)
    except InputError as exc:
        raise InputError(exc.what, where=where) from None
