"""Protecting a release: every table of it at once, with one method.

A method that can protect a release jointly (it has ``protect_release(cells, *, seed)``, a
small protocol — cell suppression and controlled rounding do) gets the union of the tables'
cells and relations (:class:`~tabsafe.release.cells.ReleaseCells`): a shared cell has one status
(suppression) or one rounded value (controlled rounding: one program over the release's cells
with every table's relations, so every table is additive) in every table.
Any other method protects each table alone; the release is refused if a cell the tables share
comes out different in two of them (a random rounding would tell an intruder two draws of one
cell), so only methods consistent by construction pass (the cell key method: the same records
give the same key, hence the same noise, in every table).

Cell suppression is then audited as published (:mod:`tabsafe.risk.release_audit`, the
intruder's interval programs over all tables at once, on the published values only): a release
in which a primary cell is narrower than its protection is refused, not written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from tabsafe.errors import InputError, MethodError, Reason
from tabsafe.model.result import Protection, Report
from tabsafe.model.table import Table
from tabsafe.release.cells import ReleaseCells
from tabsafe.release.spec import ReleaseSpec

if TYPE_CHECKING:  # pragma: no cover
    from tabsafe.method import TableMethod
    from tabsafe.model.microdata import InnerCells, Microdata
    from tabsafe.risk.release_audit import ReleaseAudit

__all__ = ["JointMethod", "ReleaseProtection", "protect_release", "tabulate_release"]


@runtime_checkable
class JointMethod(Protocol):
    """A method that protects the tables of a release together."""

    def protect_release(self, cells: ReleaseCells, *, seed: int | None = None) -> tuple[tuple[Protection, ...], Report]:
        ...  # pragma: no cover


@dataclass(frozen=True, eq=False)
class ReleaseProtection:
    """A protected release.

    Attributes:
        names: the tables' names.
        protections: each table's protection (release, evaluation values, report).
        report: the release's report (method, parameters, seed, figures, private figures, notes).
        cells: the release's cells (shared cells once).
        audit: the release audit of what was published, when the method was audited.
    """

    names: tuple[str, ...]
    protections: tuple[Protection, ...]
    report: Report
    cells: ReleaseCells
    audit: ReleaseAudit | None = None

    def __getitem__(self, name: str) -> Protection:
        try:
            return self.protections[self.names.index(name)]
        except ValueError:
            raise InputError(f"the release has no table {name!r}; it has {', '.join(self.names)}") from None


def tabulate_release(spec: ReleaseSpec, data: Microdata | InnerCells, *, engine: Any = None,
                     key: Any = None, sums: Sequence[str] = ()) -> list[Table]:
    """Every table of the release, with every margin (one tabulation per table), by ``engine``
    (a name or an engine object), else the release config's ``engine``, else DuckDB."""
    from tabsafe.model.spec import TableSpec
    from tabsafe.registry import get_engine
    from tabsafe.tabulation import tabulate

    # one engine object for every table (a local Spark session is started once)
    engine = get_engine(engine if engine is not None else (spec.engine or "duckdb"))

    out = []
    for t in spec.tables:
        ts = TableSpec(by=t.by, hierarchies=dict(t.hierarchies), where=t.where, key=key, sums=tuple(sums))
        out.append(tabulate(data, ts, engine=engine))
    return out


def protect_release(
    tables: Sequence[Table],
    method: TableMethod,
    *,
    names: Sequence[str] | None = None,
    wheres: Sequence[Any] | None = None,
    same_codes: Sequence[Sequence[str]] = (),
    seed: int | None = None,
) -> ReleaseProtection:
    """Protect the tables of a release together (module docstring).

    Args:
        tables: the tables (true counts, every margin).
        method: the protection method.
        names: the tables' names (default ``table 1``…).
        wheres: each table's filter (tabsafe's filter language), or None.
        same_codes: groups of variables whose codes name the same populations.
        seed: the seed of a random method (drawn and recorded when not given).
    """
    from tabsafe.model.filter import coerce

    names = tuple(names) if names is not None else tuple(f"table {i + 1}" for i in range(len(tables)))
    wheres = tuple(coerce(w) for w in wheres) if wheres is not None else (None,) * len(tables)
    cells = ReleaseCells.build(tables, names=names, wheres=wheres, same_codes=same_codes)
    cells.combine("count")  # tables of one data set agree on every shared cell
    if isinstance(method, JointMethod):
        from tabsafe import memory

        # the union of the tables is at most their sum: each table's model, added up, before any work
        estimate = getattr(method, "memory_estimate", None)
        if estimate is not None:
            memory.check(f"method {method.name!r} on a release of {cells.n_cells:,} cells",
                         sum(estimate(t) for t in cells.tables))
        protections, report = method.protect_release(cells, seed=seed)
        audit = _audit(cells, protections, method)
        return ReleaseProtection(names, protections, report, cells, audit)
    from tabsafe.method import check_seed, draw_seed

    used = check_seed(seed) if method.random else None
    if method.random and used is None:
        used = draw_seed()
    # one seed for every table: a method consistent by construction gives a shared cell one value
    protections = tuple(method.protect(t, seed=used) for t in cells.tables)
    _check_consistent(cells, protections, method)
    figures = {name: dict(p.report.figures) for name, p in zip(names, protections)}
    private = {name: dict(p.report.private) for name, p in zip(names, protections)}
    notes = tuple(dict.fromkeys(n for p in protections for n in p.report.notes))
    report = Report(method=method.name, params=method.params(), seed=used,
                    figures={"tables": len(tables), "cells": cells.n_cells, "per_table": figures},
                    private={"per_table": private}, notes=notes)
    return ReleaseProtection(names, protections, report, cells)


def _check_consistent(cells: ReleaseCells, protections: Sequence[Protection], method: TableMethod) -> None:
    values = [np.asarray(p.release.table.grid("count", fill=0), dtype=np.float64) for p in protections]
    first = np.full(cells.n_cells, np.nan)
    owner = np.full(cells.n_cells, -1)
    for i, (v, rows) in enumerate(zip(values, cells.cells)):
        seen = ~np.isnan(first[rows])
        differ = seen & ~((first[rows] == v) | (np.isnan(first[rows]) & np.isnan(v)))
        if differ.any():
            g = int(np.flatnonzero(differ)[0])
            raise MethodError(
                f"method {method.name!r} gives the cell {cells.grid_name(i, g)} of table {cells.names[i]!r} the value "
                f"{v[g]:g} and table {cells.names[int(owner[rows[g]])]!r} another: a release of tables sharing cells "
                "needs a method consistent across tables (ckm, suppress)", reason=Reason.NOT_APPLICABLE,
            )
        fresh = ~seen
        first[rows[fresh]] = v[fresh]
        owner[rows[fresh]] = i


def _audit(cells: ReleaseCells, protections: Sequence[Protection], method: Any) -> ReleaseAudit | None:
    """The release audit of a suppressed release, on the published values only: every primary
    cell must keep its protection."""
    from tabsafe.risk.release_audit import audit_release, published_bounds

    if not all(p.release.table.has("status") and p.evaluation.has("reason") for p in protections):
        return None
    published = [np.asarray(p.release.table.column("count"), dtype=np.float64) for p in protections]
    suppressed_min = getattr(method, "suppressed_min", 1.0)
    lo, hi = published_bounds(cells, published, suppressed_min=suppressed_min)
    primary = np.zeros(cells.n_cells, dtype=bool)
    for p, rows in zip(protections, cells.cells):
        primary[rows[np.asarray(p.evaluation.column("reason")) == "primary"]] = True
    required = method.required(cells.combine("count")) if hasattr(method, "required") else 1.0
    audit = audit_release(cells, lo, hi, required=required, targets=primary, published=published)
    if not audit.passed:
        e = audit.exposed[0]
        raise MethodError(
            f"the release audit finds {len(audit.exposed)} primary cell(s) narrower than their protection, e.g. "
            f"{e.name} in [{e.lower:g}, {e.upper:g}]; nothing was written", reason=Reason.INFEASIBLE,
        )
    return audit
