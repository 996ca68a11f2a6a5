"""Differencing audit: the slivers that tables released together let an intruder subtract out.

Tables built from one data set can be subtracted from each other (seed 000 §5.2, Tables
5.4–5.13; seed 001 §1; METHODS.md §10): an area in two geographies built from the same building
blocks (Tables 5.4–5.6; the ABS "Remainder of ACT" and its six largest collection districts), a
population and a filtered sub-population, tables linked by a shared base population (Tables
5.7–5.10), or one variable recoded two ways with overlapping bands (Tables 5.11–5.13). A
*sliver* is a group of records that no table publishes but whose count the published cells
determine; it discloses when small (``0 < n < threshold``; seed 000 §5.2: "a small cell (0, 1, or
2)"), zero slivers are reported apart (group attribute disclosure).

Method (boxes). Every published cell is a *box*: for each base variable of the data (the
variables the recodes, hierarchies and filters are built from), the set of base codes the cell
admits — its code's codes intersected with the table's filter; a variable the table does not
use admits every code (or the filter's). Box ``A ⊂ B`` iff componentwise subset. When ``A ⊊ B``
differ in exactly one variable ``v``, ``B \\ A`` is itself a box (``v`` restricted to
``B_v \\ A_v``) and its count is ``n(B) − n(A)``: the geographic, sub-population, recoding and
linking slivers of the seeds are all of this kind. The pair search joins cells on their sets of
all other variables and a sparse strict-subset relation of the sets of ``v`` (no double loop).
A sliver is reported only if it is *new*: not a known box, and not covered by known (published or derived)
boxes inside it with the same other sets (a union of siblings in a hierarchy is no news).
*Chains*: new slivers join the pool and are differenced again (order 2 = a sliver of a sliver,
…, up to ``max_order``, default 2) — Table 5.10's females 5 and 4 are order 2 (``(85 − 22) −
58``, ``(49 − 22) − 23``). Slivers of orders below ``max_order`` are all listed (later orders
build on them); of the last order only those below the threshold (small or zero) are kept. The
number of slivers can grow fast with the order on large releases (every large derived sliver
is differenced against every known cell inside it), so raise ``max_order`` with care. Differences needing a sum of non-box regions or a general linear
combination of cells are not searched (an exact row-space audit of all atoms would find them,
at a cost that grows with the square of the atoms).

Counts come through the tabulation engine (:func:`tabsafe.engines.planner.grouped_counts`): the
occurring combinations of the base variables with their counts, validated as every tabulation
is (declared codelists, missing values, inner cells' counts), so the audit scales with the
data's distinct combinations and the published cells, not with the full grid of the base
variables. Codes are ordered as the engine orders them: a declared codelist's order, else the
data's codes by :func:`~tabsafe.engines.planner.natural_key` ("A2" before "A10").

Filters (``where:``). A table's filter is tabsafe's filter language (:mod:`tabsafe.model.filter`:
text such as ``"area_2001 = A and household = single"``), or the mapping form ``{area: [A]}``
(= ``area in (A)``; a list of mappings, or of texts, is their ``and``; a ``{min: a, max: b}``
item is ``a <= code <= b``). The audit works on sets of base codes, so a filter is read as
the combinations of base codes it admits, evaluated as the engine's SQL would evaluate it
(numeric columns compare as numbers, text columns as text; an ordering on a text column
compares codes that are numbers, and a code that is no number is neither inside nor outside).
On a derived variable, ``v = c`` / ``v in (c, d)`` admit the base codes of those codes and
their negations the other base codes. The box method audits the filters whose admitted set is
a box: after ``not`` is pushed inwards, an ``and`` of parts that each test ONE base variable
(a derived variable counts as its base variable), such as ``sex = F and (age < 16 or age >= 65)
and not area_2001 in (A, B)``. It refuses, with one line, a part that ties several base
variables together (``sex = F or area = A``, ``not (sex = F and area = A)``: not a box; write
one table per box), an ordering (``<``, ``>=``…) on a derived variable (its codes are sets,
not numbers: compare its base variable) and codes that are not codes of the variable (a typo).

SPEC format (YAML; paths relative to the spec file)::

    data: persons.csv            # microdata (.csv or .parquet) — or inner cells:
    # table: cells.csv           #   aggregated inner cells of the base variables (each
    # count: n                   #   combination once) and their count column
    meta: meta.yaml              # optional: declared codelists (order and complete domains)
    threshold: 3                 # optional: small = 0 < n < threshold (default 3)
    max_order: 2                 # optional: longest chain of differences (default 2)
    derived:                     # optional: variables recoded from one base variable
      hours_a:
        from: hours
        codes:                   # new code -> list of base codes; {min: a, max: b} is the
          "<20": [{min: 0, max: 19}]   # numeric range of base codes a <= code <= b
          "20-39": [{min: 20, max: 39}]
      area_2001: {from: block, codes: {A: [b1, b2]}}
    tables:
      - name: "Table 5.11"       # unique
        by: [sex, hours_a]       # base or derived variables ([] for a single count)
        where: {area: [A]}       # optional: a filter (see Filters above), e.g. the same as
                                 #   where: "area = A"; or "area = A and hours >= 40"
        margins: true            # optional (default true): publish totals and subtotals
        hierarchies:             # optional: per variable, a file (.hrc/.yaml) or a tree whose
          hours_a: {"<40": ["<20", "20-39"]}   # leaves are the variable's codes

A table whose columns are conditions on different variables (Table 5.8: "working in A",
"living in A", "living and working in A") is written as one-cell tables (``by: []``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from tabsafe.engines import DEFAULT_ENGINE
from tabsafe.errors import InputError, param
from tabsafe.model import filter as flt
from tabsafe.model.hierarchy import TOTAL, Hierarchy
from tabsafe.model.microdata import FileSource, InnerCells, Microdata

#: Refuse releases with more published cells than this (all tables together).
MAX_CELLS = 20_000_000

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


# --------------------------------------------------------------------------- the result


@dataclass(frozen=True)
class AuditResult:
    """What the audit found.

    Attributes:
        slivers: one row per new sliver (columns in :data:`SLIVER_COLUMNS`), small ones first;
            ``box`` maps each restricted base variable to the base codes the sliver admits.
        summary: tables, cells, distinct boxes, pairs examined, slivers, small, zero, redundant.
        threshold: the threshold used (small = ``0 < count < threshold``).
    """

    slivers: pd.DataFrame
    summary: Mapping[str, int]
    threshold: int

    @property
    def small(self) -> pd.DataFrame:
        """The disclosive slivers: ``0 < count < threshold``."""
        return self.slivers[self.slivers["small"]].reset_index(drop=True)

    @property
    def zeros(self) -> pd.DataFrame:
        """Zero slivers (a group of the population has none of a category)."""
        return self.slivers[self.slivers["zero"]].reset_index(drop=True)


#: Columns of :attr:`AuditResult.slivers`.
SLIVER_COLUMNS = ("order", "count", "small", "zero", "variable", "sliver", "tables", "outer", "inner",
                  "outer_count", "inner_count", "box")


# --------------------------------------------------------------------------- sets and boxes


def _numeric(code: str) -> float | None:
    """A code as a number, as the filters read a text that is one (:func:`tabsafe.model.filter.text_number`)."""
    return flt.text_number(code)


class CodeSets:
    """The distinct sets of base codes of one base variable (bit masks), interned to ids.

    ``domain`` is the variable's codelist in the engine's order; ``kind`` is its column's kind
    (``"integer"``/``"number"``: codes are numbers and named codes match by value).
    """

    def __init__(self, variable: str, domain: Sequence[str], kind: str = "text") -> None:
        self.variable = variable
        self.domain = list(domain)
        self.kind = kind
        self.index = {c: i for i, c in enumerate(self.domain)}
        numbers = [_numeric(c) for c in self.domain]
        self.numbers = np.array([np.nan if x is None else x for x in numbers], dtype=np.float64)
        self.texts = np.array(self.domain, dtype=object)
        self.numeric = kind in {"integer", "number"}
        self.masks: list[np.ndarray] = []
        self.ids: dict[bytes, int] = {}
        self.labels: dict[int, str] = {}
        self.full = self.intern(np.ones(len(self.domain), dtype=bool))

    def intern(self, mask: np.ndarray, label: str | None = None) -> int:
        key = np.packbits(mask).tobytes()
        sid = self.ids.get(key)
        if sid is None:
            sid = len(self.masks)
            self.ids[key] = sid
            self.masks.append(mask)
        if label is not None and sid not in self.labels:
            self.labels[sid] = label
        return sid

    def code_mask(self, code: str) -> np.ndarray | None:
        """The codes equal to ``code``: by text, or by value on a numeric column (15 = 15.0)."""
        i = self.index.get(code)
        if i is not None:
            mask = np.zeros(len(self.domain), dtype=bool)
            mask[i] = True
            return mask
        x = _numeric(code) if self.numeric else None
        if x is None:
            return None
        mask = self.numbers == x
        return mask if mask.any() else None

    def mask_of(self, items: Sequence[Item], where: str) -> np.ndarray:
        mask = np.zeros(len(self.domain), dtype=bool)
        for item in items:
            if isinstance(item, CodeRange):
                mask |= (self.numbers >= item.low) & (self.numbers <= item.high)
            else:
                hit = self.code_mask(item)
                if hit is None:
                    raise InputError(f"{where}: {item!r} is not a code of {self.variable!r}")
                mask |= hit
        return mask

    def matrix(self) -> sp.csr_matrix:
        dense = np.vstack(self.masks)
        return sp.csr_matrix(dense.astype(np.int32))

    def describe(self, sid: int) -> str:
        label = self.labels.get(sid)
        if label is not None:
            return label
        members = np.flatnonzero(self.masks[sid])
        if len(members) == 0:
            return f"{self.variable} in {{}}"
        # runs of consecutive domain positions print as a..b
        parts: list[str] = []
        start = prev = members[0]
        for m in list(members[1:]) + [None]:
            if m is not None and m == prev + 1:
                prev = m
                continue
            a, b = self.domain[start], self.domain[prev]
            parts.append(a if start == prev else (f"{a}..{b}" if prev > start + 1 else f"{a}, {b}"))
            if m is not None:
                start = prev = m
        if len(members) == 1:
            return f"{self.variable}={parts[0]}"
        return f"{self.variable} in {{{', '.join(parts)}}}"


@dataclass
class _Dim:
    base: str
    codes: list[str]
    set_ids: list[int]


def _domains(spec: DifferencingSpec, variables: Sequence[str], codes: Sequence[Sequence[str]],
             kinds: Sequence[str]) -> dict[str, CodeSets]:
    """Each base variable's codes as the engine orders them: its declared codelist (``meta:``),
    else the codes in the data by :func:`~tabsafe.engines.planner.natural_key`.

    Codes named in recodes, filters and hierarchies must be among them, so a typo is an error;
    declare a codelist to name codes that have no records.
    """
    out: dict[str, CodeSets] = {}
    for v, domain, kind in zip(variables, codes, kinds, strict=True):
        out[v] = CodeSets(v, domain, kind)
        # recode names describe sets better than lists of base codes, so they label first
        for d in spec.derived.values():
            if d.base == v:
                for code, items in d.codes:
                    out[v].intern(out[v].mask_of(items, f"{spec.source}: derived {d.name!r} code {code!r}"),
                                  label=f"{d.name}={code}")
        for c in out[v].domain:
            out[v].intern(out[v].mask_of([c], spec.source), label=f"{v}={c}")
    return out


def _base_name(derived: Mapping[str, Derived], var: str) -> str:
    return derived[var].base if var in derived else var


def _base_of(derived: Mapping[str, Derived], var: str, sets: Mapping[str, CodeSets], where: str) -> str:
    if var in derived:
        return derived[var].base
    if var in sets:
        return var
    raise InputError(f"{where}: unknown variable {var!r} (not in the data, not derived)")


def _var_codes(derived: Mapping[str, Derived], var: str, sets: Mapping[str, CodeSets], where: str) -> dict[str, np.ndarray]:
    """Code -> base-code mask for a base or derived variable (leaves only)."""
    if var in derived:
        d = derived[var]
        s = sets[d.base]
        return {code: s.mask_of(items, f"{where}: derived {var!r} code {code!r}") for code, items in d.codes}
    s = sets[var]
    eye = np.eye(len(s.domain), dtype=bool)
    return {c: eye[i] for i, c in enumerate(s.domain)}


# --------------------------------------------------------------------------- filters on base codes


def _leaf(derived: Mapping[str, Derived], sets: Mapping[str, CodeSets], where: str) -> Callable[[flt.Test, bool], np.ndarray]:
    """A test's literal (``negated``: the test false) as the base codes of its variable's base
    variable it holds on — compiled by :func:`tabsafe.model.filter.fold`, the filters' one
    meaning. A base variable's codes are tested as the engine's SQL tests the column (its kind:
    numbers or text); a derived variable's code is the set of base codes it stands for, and
    ``!=``/``not in`` the other base codes. Named codes must be codes (a typo is an error)."""

    def run(node: flt.Test, negated: bool) -> np.ndarray:
        var = node.variable
        base = _base_of(derived, var, sets, where)
        s = sets[base]
        if var not in derived:
            try:
                p = flt.predicate(node, s.kind)
            except InputError as exc:
                raise InputError(f"{where}: ({node.to_text()}): {exc.what.removeprefix('filter: ')}") from None
            if p.op == "in":
                for v in (node.values if isinstance(node, flt.In) else (node.value,)):
                    if s.code_mask(v.text) is None:
                        raise InputError(f"{where}: {v.text!r} is not a code of {var!r}")
            return flt.truth_mask(p, s.numbers if p.numeric else s.texts, negated)
        if isinstance(node, flt.Compare) and node.op not in {"=", "!="}:
            raise InputError(f"{where}: ({node.to_text()}) orders the codes of {var!r}, which are sets of "
                             f"{base!r} codes, not numbers: compare {base!r} instead")
        codes = _var_codes(derived, var, sets, where)
        mask = np.zeros(len(s.domain), dtype=bool)
        for v in (node.values if isinstance(node, flt.In) else (node.value,)):
            hit = codes.get(v.text)
            if hit is None:
                raise InputError(f"{where}: {v.text!r} is not a code of {var!r}")
            mask |= hit
        negate = node.negate if isinstance(node, flt.In) else node.op == "!="
        return ~mask if negate != negated else mask

    return run


def filter_masks(derived: Mapping[str, Derived], node: flt.Filter | None, sets: Mapping[str, CodeSets],
                 where: str) -> dict[str, np.ndarray]:
    """The filter as a box: per base variable it restricts, the base codes it admits.

    Refuses, naming the part, a filter that is not an ``and`` of parts on one base variable
    each (after ``not`` is pushed inwards): its admitted set is no box, and the box method
    cannot difference it.
    """
    if node is None:
        return {}
    top = flt.nnf(node)
    parts = top.parts if isinstance(top, flt.And) else (top,)
    out: dict[str, np.ndarray] = {}
    leaf = _leaf(derived, sets, where)
    for part in parts:
        bases = list(dict.fromkeys(_base_of(derived, v, sets, where) for v in part.variables))
        if len(bases) > 1:
            raise InputError(
                f"{where}: the filter part ({part.to_text()}) ties {' and '.join(map(repr, bases))} together; the "
                "audit needs an 'and' of conditions on one base variable each (write one table per box)")
        admitted = flt.fold(part, leaf, lambda ms: np.logical_and.reduce(ms), lambda ms: np.logical_or.reduce(ms))
        out[bases[0]] = out[bases[0]] & admitted if bases[0] in out else admitted
    return out


def _table_dims(spec: DifferencingSpec, t: TableDef, sets: Mapping[str, CodeSets]) -> tuple[list[_Dim], dict[str, np.ndarray]]:
    where = f"{spec.source}: table {t.name!r}"
    filters = filter_masks(spec.derived, t.where, sets, where)
    dims: list[_Dim] = []
    bases_used: dict[str, str] = {}
    for var in t.by:
        base = _base_of(spec.derived, var, sets, where)
        if base in bases_used:
            raise InputError(f"{where}: {var!r} and {bases_used[base]!r} are both built from {base!r}; "
                             "a table may use each base variable once")
        bases_used[base] = var
        leaves = _var_codes(spec.derived, var, sets, where)
        h = t.hierarchies.get(var)
        if h is not None:
            unknown = sorted(set(h.leaves) - set(leaves))
            if unknown:
                raise InputError(f"{where}: hierarchy leaf {unknown[0]!r} is not a code of {var!r}")
            codes_order = list(h.order) if t.margins else list(h.leaves)
            masks: dict[str, np.ndarray] = {}
            for code in reversed(h.order):  # children before parents
                if h.is_leaf(code):
                    masks[code] = leaves[code]
                else:
                    masks[code] = np.logical_or.reduce([masks[c] for c in h.children(code)])
        else:
            codes_order = ([TOTAL] if t.margins else []) + list(leaves)
            masks = dict(leaves)
            masks[TOTAL] = np.logical_or.reduce(list(leaves.values()))
        f = filters.get(base)
        set_ids = []
        for code in codes_order:
            m = masks[code] if f is None else masks[code] & f
            label = f"{var}={code}" if var != base or code != TOTAL else None
            set_ids.append(sets[base].intern(m, label=label if f is None else None))
        dims.append(_Dim(base=base, codes=codes_order, set_ids=set_ids))
    return dims, filters


# --------------------------------------------------------------------------- the audit


def _overlaps(s: CodeSets) -> tuple[pd.DataFrame, np.ndarray]:
    """Every pair of sets of ``s`` that share a code, with the number shared; and the set sizes."""
    m = s.matrix()
    sizes = np.asarray(m.sum(axis=1)).ravel().astype(np.int64)
    inter = (m @ m.T).tocoo()
    return pd.DataFrame({"a": inter.row.astype(np.int64), "b": inter.col.astype(np.int64),
                         "k": inter.data.astype(np.int64)}), sizes


def _strict_subsets(overlaps: pd.DataFrame, sizes: np.ndarray) -> pd.DataFrame:
    """All pairs (sa, sb) of set ids with set sa a strict, non-empty subset of set sb."""
    a, b, k = (overlaps[c].to_numpy() for c in ("a", "b", "k"))
    keep = (k == sizes[a]) & (sizes[a] < sizes[b]) & (sizes[a] > 0)
    return pd.DataFrame({"sa": a[keep], "sb": b[keep]})


def audit(spec: DifferencingSpec, *, threshold: int | None = None, max_order: int | None = None,
          engine: Any = DEFAULT_ENGINE) -> AuditResult:
    """Find every new sliver the release determines by differencing nested cells (and chains).

    Source: seed 000 §5.2 (geographical, linking and sub-population/recoding differencing,
    Tables 5.4–5.13), seed 001 §1 (user-defined geographies from building blocks). See the
    module docstring for the box model, what "new" means, which filters and which differences
    are searched.

    Args:
        spec: the release.
        threshold: overrides ``spec.threshold`` (small = ``0 < n < threshold``).
        max_order: overrides ``spec.max_order`` (longest chain of differences; 1 = pairs only).
        engine: the engine that reads the counts (a name, or an engine object), as for
            :func:`tabsafe.tabulate`.
    """
    from tabsafe.engines.planner import grouped_counts
    from tabsafe.registry import get_engine

    t_small = spec.threshold if threshold is None else threshold
    if isinstance(t_small, bool) or not isinstance(t_small, int) or t_small < 1:
        raise InputError(f"{param('threshold')} must be an integer >= 1, got {t_small!r}")
    orders = spec.max_order if max_order is None else max_order
    if isinstance(orders, bool) or not isinstance(orders, int) or orders < 1:
        raise InputError(f"{param('max_order')} must be an integer >= 1, got {orders!r}")

    # base variables: those the tables' variables and filters are built from
    base_vars: list[str] = []
    for t in spec.tables:
        for v in list(t.by) + list(t.where.variables if t.where is not None else ()):
            b = _base_name(spec.derived, v)
            if b not in base_vars:
                base_vars.append(b)
    groups = grouped_counts(get_engine(engine), spec.data, base_vars)
    sets = _domains(spec, groups.variables, groups.codes, groups.kinds)
    nvar = len(base_vars)
    col = {v: i for i, v in enumerate(base_vars)}
    code_idx = groups.positions
    weights = groups.counts

    # published cells: one box (row of set ids) per cell, with its count
    boxes_parts: list[np.ndarray] = []
    count_parts: list[np.ndarray] = []
    label_parts: list[list[str]] = []
    table_of: list[np.ndarray] = []
    n_cells = 0
    for ti, t in enumerate(spec.tables):
        dims, filters = _table_dims(spec, t, sets)
        shape = [len(d.codes) for d in dims]
        size = int(np.prod(shape)) if shape else 1
        n_cells += size
        if n_cells > MAX_CELLS:
            raise InputError(f"the release has more than {MAX_CELLS:,} cells", where=spec.source)
        row = np.array([sets[v].full for v in base_vars], dtype=np.int64)
        for b, m in filters.items():
            row[col[b]] = sets[b].intern(m)
        box = np.tile(row, (size, 1))
        grid = np.indices(shape).reshape(len(shape), -1) if shape else np.zeros((0, 1), np.int64)
        for k, d in enumerate(dims):
            box[:, col[d.base]] = np.asarray(d.set_ids, np.int64)[grid[k]]
        boxes_parts.append(box)
        count_parts.append(_table_counts(dims, filters, sets, col, code_idx, weights, shape))
        labels = [t.name if not dims else f"{t.name}[" + ", ".join(f"{v}={d.codes[grid[k][r]]}" for k, (v, d) in
                                            enumerate(zip(t.by, dims, strict=True))) + "]" for r in range(size)] \
            if size <= 200_000 else [f"{t.name}[cell {r}]" for r in range(size)]
        label_parts.append(labels)
        table_of.append(np.full(size, ti))
    boxes = np.vstack(boxes_parts) if nvar else np.zeros((n_cells, 0), np.int64)
    cell_counts = np.concatenate(count_parts)
    cell_labels = [x for part in label_parts for x in part]
    cell_tables = np.concatenate(table_of)

    # empty boxes (a code outside the filter) are no cells
    nonempty = np.ones(len(boxes), dtype=bool)
    for v, j in col.items():
        sizes = np.array([m.sum() for m in sets[v].masks])
        nonempty &= sizes[boxes[:, j]] > 0
    uniq, first = np.unique(boxes[nonempty], axis=0, return_index=True)
    src = np.flatnonzero(nonempty)[first]
    pool_counts = cell_counts[src]
    n_published = len(uniq)
    pool = uniq
    prov_tables: list[tuple[int, ...]] = [(int(cell_tables[i]),) for i in src]
    prov_label: list[str] = [cell_labels[i] for i in src]
    order = np.zeros(n_published, np.int64)
    known = {r.tobytes(): i for i, r in enumerate(pool)}

    rows: list[dict[str, Any]] = []
    pairs_examined = 0
    redundant = 0
    for rnd in range(orders):
        new_rows: list[np.ndarray] = []
        new_meta: list[tuple[int, int, int, int, int]] = []  # (outer, inner, var, set of A, set of B)
        for v, j in col.items():
            s = sets[v]
            overlaps, sizes = _overlaps(s)
            subs = _strict_subsets(overlaps, sizes)
            if subs.empty:
                continue
            others = np.delete(pool, j, axis=1)
            if others.shape[1]:
                _, sig = np.unique(others, axis=0, return_inverse=True)
                sig = sig.ravel()
            else:
                sig = np.zeros(len(pool), np.int64)
            cells = pd.DataFrame({"box": np.arange(len(pool)), "sig": sig, "s": pool[:, j], "ord": order})
            a = cells.rename(columns={"box": "a", "s": "sa", "ord": "oa"}).merge(subs, on="sa")
            ab = a.merge(cells.rename(columns={"box": "b", "s": "sb", "ord": "ob"}), on=["sig", "sb"])
            ab = ab[np.maximum(ab["oa"], ab["ob"]) == rnd]
            if ab.empty:
                continue
            pairs_examined += len(ab)
            if rnd == orders - 1:
                # last order: nothing chains on, so only the slivers worth reporting are kept
                n_diff = pool_counts[ab["b"].to_numpy()] - pool_counts[ab["a"].to_numpy()]
                ab = ab[n_diff < t_small]
                if ab.empty:
                    continue
            # the sliver's set of v: B_v \ A_v, once per distinct pair of sets; interned only if new
            sa_rows, sb_rows = ab["sa"].to_numpy(), ab["sb"].to_numpy()
            upi, uniq = pd.factorize(sa_rows * len(s.masks) + sb_rows)
            u_sa, u_sb = uniq // len(s.masks), uniq % len(s.masks)
            a_rows = ab["a"].to_numpy()
            covered = _covered(s, overlaps, sizes, sig[a_rows], upi, u_sa, u_sb, sig, pool[:, j])
            redundant += int(covered.sum())
            d_ids: dict[int, int] = {}
            for k in np.flatnonzero(~covered):
                u = int(upi[k])
                if u not in d_ids:
                    d_ids[u] = s.intern(s.masks[u_sb[u]] & ~s.masks[u_sa[u]])
                box = pool[a_rows[k]].copy()
                box[j] = d_ids[u]
                key = box.tobytes()
                if key in known:
                    continue
                known[key] = -1  # claimed; replaced below with its pool index
                new_rows.append(box)
                new_meta.append((int(ab["b"].iat[k]), int(a_rows[k]), j, int(sa_rows[k]), int(sb_rows[k])))
        if not new_rows:
            break
        start = len(pool)
        pool = np.vstack([pool, np.vstack(new_rows)])
        add_counts = []
        for i, (b, a_, j, sa, sb) in enumerate(new_meta):
            known[pool[start + i].tobytes()] = start + i
            n = int(pool_counts[b] - pool_counts[a_])
            add_counts.append(n)
            var = base_vars[j]
            desc = _describe(pool[start + i], base_vars, sets, j=j, sa=sa, sb=sb)
            prov_tables.append(tuple(sorted(set(prov_tables[b]) | set(prov_tables[a_]))))
            prov_label.append(f"({desc})")
            rows.append({
                "order": rnd + 1, "count": n, "small": 0 < n < t_small, "zero": n == 0, "variable": var,
                "sliver": desc,
                "tables": "; ".join(spec.tables[x].name for x in prov_tables[-1]),
                "outer": prov_label[b], "inner": prov_label[a_],
                "outer_count": int(pool_counts[b]), "inner_count": int(pool_counts[a_]),
                "box": {v: [s_.domain[i] for i in np.flatnonzero(s_.masks[int(pool[start + i][k])])]
                        for k, (v, s_) in enumerate(sets.items()) if pool[start + i][k] != s_.full},
            })
        pool_counts = np.concatenate([pool_counts, np.asarray(add_counts, np.int64)])
        order = np.concatenate([order, np.full(len(new_rows), rnd + 1, np.int64)])

    frame = pd.DataFrame(rows, columns=list(SLIVER_COLUMNS))
    if not frame.empty:
        frame = frame.sort_values(["small", "order", "count"], ascending=[False, True, True], kind="stable")
        frame = frame.reset_index(drop=True)
    frame = frame.astype({"order": np.int64, "count": np.int64, "small": bool, "zero": bool,
                          "outer_count": np.int64, "inner_count": np.int64})
    summary = {
        "tables": len(spec.tables), "cells": n_cells, "distinct_boxes": n_published,
        "pairs_examined": pairs_examined, "slivers": len(frame), "small": int(frame["small"].sum()),
        "zero": int(frame["zero"].sum()), "redundant": redundant,
    }
    return AuditResult(slivers=frame, summary=summary, threshold=t_small)


def _table_counts(dims: Sequence[_Dim], filters: Mapping[str, np.ndarray], sets: Mapping[str, CodeSets],
                  col: Mapping[str, int], code_idx: np.ndarray, weights: np.ndarray,
                  shape: Sequence[int]) -> np.ndarray:
    """Counts of every cell of one table, row-major over ``shape``, from the grouped data."""
    keep = np.ones(len(weights), dtype=bool)
    for b, m in filters.items():
        keep &= m[code_idx[:, col[b]]]
    frame = pd.DataFrame({f"d{k}": code_idx[keep, col[d.base]] for k, d in enumerate(dims)})
    frame["n"] = weights[keep]
    if not dims:
        return np.array([int(frame["n"].sum())], np.int64)
    frame = frame.groupby([f"d{k}" for k in range(len(dims))], sort=False)["n"].sum().reset_index()
    # expand each base code into every code of the dimension that contains it, one dimension at a time
    for k, d in enumerate(dims):
        s = sets[d.base]
        member = np.vstack([s.masks[i] for i in d.set_ids])  # codes x domain
        ci, bi = np.nonzero(member)
        link = pd.DataFrame({f"d{k}": bi, f"c{k}": ci})
        frame = frame.merge(link, on=f"d{k}").drop(columns=f"d{k}")
        keys = [f"c{i}" for i in range(k + 1)] + [f"d{i}" for i in range(k + 1, len(dims))]
        frame = frame.groupby(keys, sort=False)["n"].sum().reset_index()
    out = np.zeros(int(np.prod(shape)), np.int64)
    flat = np.ravel_multi_index(tuple(frame[f"c{k}"].to_numpy() for k in range(len(dims))), tuple(shape))
    out[flat] = frame["n"].to_numpy(np.int64)
    return out


def _covered(s: CodeSets, overlaps: pd.DataFrame, sizes: np.ndarray, sig: np.ndarray, dloc: np.ndarray,
             inner: np.ndarray, outer: np.ndarray, known_sig: np.ndarray, known_set: np.ndarray) -> np.ndarray:
    """Whether each sliver set ``outer[dloc] \\ inner[dloc]`` (other sets ``sig``) is a union of known
    sets inside it.

    Such a sliver is no news: every record in it already sits in a known (published or derived)
    cell inside it (a union of siblings of a hierarchy, say). Cells with the same other sets
    usually share one family of sets of the variable (every row of a table), so the test runs
    once per family and sliver; a set lies inside ``B \\ A`` iff it lies in ``B`` and misses ``A``,
    read off the sparse overlaps, so the (often large) sliver sets are never built.
    """
    out = np.zeros(len(dloc), dtype=bool)
    if len(dloc) == 0:
        return out
    known = pd.DataFrame({"sig": known_sig, "s": known_set}).drop_duplicates()
    # a family id per signature: an order-free hash of its sets, and their number
    rand = np.random.default_rng(0).integers(0, 2**63, size=len(sizes), dtype=np.uint64)
    n_sig = int(known_sig.max()) + 1
    h = np.zeros(n_sig, np.uint64)
    np.add.at(h, known["sig"].to_numpy(), rand[known["s"].to_numpy()])
    n = np.bincount(known["sig"].to_numpy(), minlength=n_sig)
    fam, _ = pd.factorize(pd.Series(h.astype(np.int64)).astype(str) + ":" + pd.Series(n).astype(str))
    members = pd.DataFrame({"f": fam[known["sig"].to_numpy()], "s": known["s"].to_numpy()}).drop_duplicates()
    m = s.matrix()[: len(sizes)]
    members = _minimal(members, overlaps, sizes, m)
    wanted = pd.DataFrame({"f": fam[sig], "d": dloc}).drop_duplicates().reset_index(drop=True)
    per_family = members.groupby("f").size()
    cost = per_family.reindex(wanted["f"]).fillna(0).to_numpy(np.int64)
    covered = np.zeros(len(wanted), dtype=bool)
    # bounded memory: the candidate (sliver, set) rows are built in chunks of about CHUNK rows
    bounds = np.searchsorted(np.cumsum(cost), np.arange(0, int(cost.sum()) + _CHUNK, _CHUNK)[1:], side="right")
    start = 0
    for stop in list(bounds) + [len(wanted)]:
        if stop <= start:
            continue
        part = wanted.iloc[start:stop].copy()
        part["w"] = np.arange(len(part))
        covered[start:stop] = _covered_part(part, members, overlaps, sizes, m, inner, outer)
        start = stop
    lookup = pd.DataFrame({"f": fam[sig], "d": dloc}).merge(wanted.assign(c=covered), on=["f", "d"], how="left")
    return lookup["c"].to_numpy(bool)


_CHUNK = 4_000_000


def _minimal(members: pd.DataFrame, overlaps: pd.DataFrame, sizes: np.ndarray, m: sp.csr_matrix) -> pd.DataFrame:
    """Keep, per family, the sets that are minimal for some code (not a union of their subsets).

    A sliver is a union of a family's sets inside it iff it is a union of these: any set inside
    it contains a minimal set for each of its codes.
    """
    sub = overlaps[(overlaps["k"].to_numpy() == sizes[overlaps["a"].to_numpy()])
                   & (sizes[overlaps["a"].to_numpy()] < sizes[overlaps["b"].to_numpy()])]
    pairs = (members.rename(columns={"s": "b"}).merge(sub[["a", "b"]], on="b")
             .merge(members.rename(columns={"s": "a"}), on=["f", "a"]))
    if pairs.empty:
        return members
    keys = members.reset_index(drop=True)
    keys["row"] = np.arange(len(keys))
    pairs = pairs.merge(keys.rename(columns={"s": "b"}), on=["f", "b"])
    pick = sp.csr_matrix((np.ones(len(pairs), np.int8), (pairs["row"].to_numpy(), np.arange(len(pairs)))),
                         shape=(len(keys), len(pairs)))
    union = (pick @ m[pairs["a"].to_numpy()]).tocsr()
    union.data[:] = 1
    covered = np.asarray(union.sum(axis=1)).ravel() == sizes[keys["s"].to_numpy()]
    return keys.loc[~covered, ["f", "s"]]


def _covered_part(wanted: pd.DataFrame, members: pd.DataFrame, overlaps: pd.DataFrame, sizes: np.ndarray,
                  m: sp.csr_matrix, inner: np.ndarray, outer: np.ndarray) -> np.ndarray:
    cand = wanted.merge(members, on="f")
    cand["A"], cand["B"] = inner[cand["d"].to_numpy()], outer[cand["d"].to_numpy()]
    cand = cand.merge(overlaps.rename(columns={"a": "s", "b": "B", "k": "kB"}), on=["s", "B"])
    cand = cand.merge(overlaps.rename(columns={"a": "s", "b": "A", "k": "kA"}), on=["s", "A"], how="left")
    size_s = sizes[cand["s"].to_numpy()]
    cand = cand[(cand["kB"].to_numpy() == size_s) & cand["kA"].isna().to_numpy() & (size_s > 0)]
    if cand.empty:
        return np.zeros(len(wanted), dtype=bool)
    pick = sp.csr_matrix((np.ones(len(cand), np.int8), (cand["w"].to_numpy(), np.arange(len(cand)))),
                         shape=(len(wanted), len(cand)))
    union = (pick @ m[cand["s"].to_numpy()]).tocsr()
    union.data[:] = 1
    d = wanted["d"].to_numpy()
    return np.asarray(union.sum(axis=1)).ravel() == sizes[outer[d]] - sizes[inner[d]]


def _describe(box: np.ndarray, base_vars: Sequence[str], sets: Mapping[str, CodeSets], *, j: int, sa: int,
              sb: int) -> str:
    """The sliver in words: the other variables' sets, then ``outer but not inner (what is left)``."""
    parts = [sets[v].describe(int(box[k])) for k, v in enumerate(base_vars) if k != j and box[k] != sets[v].full]
    s = sets[base_vars[j]]
    outer = "all" if sb == s.full else s.describe(sb)
    parts.append(f"{outer} but not {s.describe(sa)} ({s.describe(int(box[j]))})")
    return ", ".join(parts)
