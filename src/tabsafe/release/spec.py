"""A release: the tables an office publishes together, as one first-class object.

A release config (YAML) names the data, the hierarchies and the tables; each table has its
spanning variables, hierarchies (a table may give a variable another, non-nested hierarchy of
the same codes: an alternative hierarchy) and a sub-population in tabsafe's filter language::

    data: census/persons.parquet          # microdata; or  table: cells.csv  count: n
    engine: duckdb                        # tabulation engine (any registered; --engine wins)
    hierarchies:                          # per variable, for every table spanning it
      area: census/hierarchies/area.hrc
    same_codes:                           # variables whose codes name the same populations
      - [region, area, small_area]        #   (region R1 = the subtotal R1 of area)
    tables:
      - name: area_age_sex
        by: [area, age, sex]
        hierarchies: {age: census/hierarchies/age.yaml}
      - name: employed
        by: [region, occupation, education]
        where: activity = EMP

Paths are relative to the config file. The same layout describes a release *as published*
(for :mod:`tabsafe.release.audit`): each table then names its ``file`` (as written by
``tabsafe protect``: codes, ``count`` empty where suppressed) and, for rounded tables, the
rounding ``base``; ``data`` is not needed. ``tabsafe protect --release`` writes such a manifest
beside the tables it writes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tabsafe.errors import InputError
from tabsafe.model.config import check_keys, resolve_path
from tabsafe.model.filter import Filter, coerce
from tabsafe.model.hierarchy import Hierarchy

__all__ = ["ReleaseSpec", "ReleaseTable", "table_name"]

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")
_TOP_KEYS = {"data", "table", "count", "meta", "hierarchies", "same_codes", "tables", "description", "suppressed_min",
             "engine"}
_TABLE_KEYS = {"name", "by", "hierarchies", "where", "file", "base"}


def table_name(by: Sequence[str]) -> str:
    """The default name of a table: its variables joined by ``_``."""
    return "_".join(by)


@dataclass(frozen=True, kw_only=True)
class ReleaseTable:
    """One table of a release.

    Attributes:
        name: the table's name (its file name in a release folder).
        by: the spanning variables.
        hierarchies: hierarchy per spanning variable (the others are flat codelists).
        hierarchy_files: where each hierarchy was read from (written back into manifests).
        where: the sub-population (tabsafe's filter language), or None.
        file: the published file (a release as published), or None.
        base: the rounding base of a rounded published table (a published ``r`` stands for a
            value in ``[r - base + 1, r + base - 1]``), or None for exact values.
    """

    name: str
    by: tuple[str, ...]
    hierarchies: Mapping[str, Hierarchy] = field(default_factory=dict)
    hierarchy_files: Mapping[str, str] = field(default_factory=dict)
    where: Filter | None = None
    file: Path | None = None
    base: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise InputError(f"a table name must be letters, digits, '_', '.' or '-'; got {self.name!r}")
        by = tuple(self.by)
        if not by or any(not isinstance(v, str) or not v.strip() for v in by):
            raise InputError(f"table {self.name!r}: 'by' must list the spanning variables")
        if len(set(by)) != len(by):
            raise InputError(f"table {self.name!r}: a variable is named twice in 'by'")
        object.__setattr__(self, "by", by)
        extra = sorted(set(self.hierarchies) - set(by))
        if extra:
            raise InputError(f"table {self.name!r}: hierarchy given for {extra[0]!r}, which it does not span")
        object.__setattr__(self, "where", coerce(self.where, where=f"table {self.name!r}"))
        if self.base is not None and (isinstance(self.base, bool) or not isinstance(self.base, int) or self.base < 1):
            raise InputError(f"table {self.name!r}: 'base' must be an integer >= 1; got {self.base!r}")


@dataclass(frozen=True, kw_only=True)
class ReleaseSpec:
    """The tables of a release and where their data are (module docstring).

    Attributes:
        tables: the tables, in order.
        same_codes: groups of variables whose codes name the same populations.
        data: microdata file, or None.
        table: a file of aggregated inner cells (with ``count``), or None.
        count: the count column of ``table``.
        meta: a ``meta.yaml`` with the variables' codelists, or None.
        suppressed_min: in a release as published, what an intruder knows as the least value of
            a suppressed cell (1 when the publisher never suppresses zeros), or None.
        source: where the spec came from (for messages).
        engine: the engine that tabulates the tables (a registered name), or None (the caller's
            choice, else DuckDB).
    """

    tables: tuple[ReleaseTable, ...]
    same_codes: tuple[tuple[str, ...], ...] = ()
    data: Path | None = None
    table: Path | None = None
    count: str | None = None
    meta: Path | None = None
    suppressed_min: float | None = None
    source: str = "release"
    engine: str | None = None

    def __post_init__(self) -> None:
        tables = tuple(self.tables)
        if not tables:
            raise InputError(f"{self.source}: a release needs at least one table")
        names = [t.name for t in tables]
        dup = next((n for i, n in enumerate(names) if n in names[:i]), None)
        if dup:
            raise InputError(f"{self.source}: two tables are named {dup!r}")
        object.__setattr__(self, "tables", tables)
        groups = tuple(tuple(g) for g in self.same_codes)
        seen: set[str] = set()
        for g in groups:
            if len(g) < 2 or any(not isinstance(v, str) for v in g):
                raise InputError(f"{self.source}: each 'same_codes' entry lists two or more variables")
            if seen & set(g):
                raise InputError(f"{self.source}: variable {min(seen & set(g))!r} is in two 'same_codes' groups")
            seen |= set(g)
        object.__setattr__(self, "same_codes", groups)
        m = self.suppressed_min
        if m is not None and (isinstance(m, bool) or not isinstance(m, (int, float)) or not 0 <= m):
            raise InputError(f"{self.source}: 'suppressed_min' must be a number >= 0; got {m!r}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tables)

    @property
    def variables(self) -> tuple[str, ...]:
        """Every spanning variable of the release, in order of first use."""
        out: list[str] = []
        for t in self.tables:
            out += [v for v in t.by if v not in out]
        return tuple(out)

    def input_files(self) -> list[str]:
        """Every file the release reads (outputs may never be one of them)."""
        files = [self.data, self.table, self.meta]
        files += [t.file for t in self.tables]
        files += [Path(p) for t in self.tables for p in t.hierarchy_files.values()]
        return [str(p) for p in files if p]

    # ---------------------------------------------------------------- reading
    @classmethod
    def from_yaml(cls, path: str | os.PathLike[str]) -> ReleaseSpec:
        """Read a release config (module docstring); paths are relative to its folder."""
        from tabsafe.model.config import read_yaml

        path = Path(path)
        return cls.from_mapping(read_yaml(path, what="release config"), base=path.parent, source=path.name)

    @classmethod
    def from_mapping(cls, data: Any, *, base: str | os.PathLike[str] = ".", source: str = "release") -> ReleaseSpec:
        """Build from the parsed YAML (paths relative to ``base``)."""
        if not isinstance(data, Mapping):
            raise InputError(f"{source}: a release config is a mapping with 'tables'")
        check_keys(data, _TOP_KEYS, source)
        base = Path(base)

        def path_of(value: Any, what: str) -> Path | None:
            if value is None:
                return None
            return resolve_path(value, base, what, source)

        shared: dict[str, tuple[Hierarchy, str]] = {}
        for var, file in _mapping(data.get("hierarchies"), f"{source}: 'hierarchies'").items():
            p = path_of(file, f"the hierarchy of {var!r}")
            shared[str(var)] = (Hierarchy.from_file(p), str(p))  # type: ignore[arg-type]
        raw_tables = data.get("tables")
        if not isinstance(raw_tables, list) or not raw_tables:
            raise InputError(f"{source}: 'tables' must list the tables of the release")
        tables = []
        for i, entry in enumerate(raw_tables):
            where = f"{source}: table {i + 1}"
            if not isinstance(entry, Mapping):
                raise InputError(f"{where}: a table is a mapping with 'by'")
            check_keys(entry, _TABLE_KEYS, source, inside=f"table {i + 1}")
            by = entry.get("by")
            if isinstance(by, str):
                by = [p.strip() for p in by.split(",")]
            if not isinstance(by, list):
                raise InputError(f"{where}: 'by' must list the spanning variables")
            by = [str(v) for v in by]
            own = {}
            for var, file in _mapping(entry.get("hierarchies"), f"{where}: 'hierarchies'").items():
                p = path_of(file, f"the hierarchy of {var!r}")
                own[str(var)] = (Hierarchy.from_file(p), str(p))  # type: ignore[arg-type]
            chosen = {v: own.get(v) or shared[v] for v in by if v in own or v in shared}
            tables.append(ReleaseTable(
                name=str(entry.get("name") or table_name(by)), by=tuple(by),
                hierarchies={v: h for v, (h, _) in chosen.items()},
                hierarchy_files={v: f for v, (_, f) in chosen.items()},
                where=entry.get("where"), file=path_of(entry.get("file"), "'file'"), base=entry.get("base"),
            ))
        same = data.get("same_codes") or []
        if not isinstance(same, list):
            raise InputError(f"{source}: 'same_codes' must be a list of variable lists")
        groups = []
        for g in same:
            if isinstance(g, str):
                g = [p.strip() for p in g.split(",")]
            if not isinstance(g, list):
                raise InputError(f"{source}: each 'same_codes' entry lists variables")
            groups.append(tuple(str(v) for v in g))
        engine = None
        if data.get("engine") is not None:
            from tabsafe.registry import engine_name

            engine = engine_name(data["engine"], where=source)
        count = data.get("count")
        if data.get("table") is not None and not count:
            raise InputError(f"{source}: 'table' (inner cells) needs 'count' (the column holding the counts)")
        return cls(tables=tuple(tables), same_codes=tuple(groups), data=path_of(data.get("data"), "'data'"),
                   table=path_of(data.get("table"), "'table'"), count=str(count) if count else None,
                   meta=path_of(data.get("meta"), "'meta'"), suppressed_min=data.get("suppressed_min"), source=source,
                   engine=engine)

    def to_mapping(self, *, base: str | os.PathLike[str], files: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The release as YAML data with paths relative to ``base`` (``files``: table -> its
        published file), e.g. the manifest of a protected release."""
        base = Path(base).resolve()

        def rel(p: str | os.PathLike[str]) -> str:
            return os.path.relpath(Path(p).resolve(), base)

        tables = []
        for t in self.tables:
            entry: dict[str, Any] = {"name": t.name, "by": list(t.by)}
            if t.hierarchy_files:
                entry["hierarchies"] = {v: rel(f) for v, f in t.hierarchy_files.items()}
            if t.where is not None:
                entry["where"] = t.where.to_text()
            if files and t.name in files:
                entry["file"] = rel(files[t.name])
            if t.base is not None:
                entry["base"] = t.base
            tables.append(entry)
        out: dict[str, Any] = {}
        if self.suppressed_min is not None:
            out["suppressed_min"] = self.suppressed_min
        if self.same_codes:
            out["same_codes"] = [list(g) for g in self.same_codes]
        out["tables"] = tables
        return out


def _mapping(value: Any, what: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InputError(f"{what} must map variables to hierarchy files")
    return value
