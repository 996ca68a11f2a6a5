"""Protecting a release: every table of it at once, with one method.

A method that declares itself ``joint`` (:mod:`tabsafe.capabilities`; it then has
``protect_release(cells, *, seed)``, a small protocol) gets the union of the tables' cells and
relations (:class:`~tabsafe.model.release_cells.ReleaseCells`): a shared cell has one status
(suppression) or one value in every table — controlled rounding: one program over the
release's cells with every table's relations; the cell perturbation family (barnardisation, the
ABS perturbation in both forms, stochastic perturbation, small cell adjustment): the release's
finest cells perturbed once and added up for every table (:mod:`tabsafe.model.finest`);
random rounding: each release cell rounded once; additivity: one search over the release
(issue #31). A joint result is checked like a consistent one: a shared cell published
differently is an error, and nothing is written.
A method that declares itself ``consistent`` protects each table alone (the cell key method: the
same records give the same key, hence the same noise, in every table); the release is still
refused if a cell the tables share comes out different in two of them. Any other method is
refused before any work (a random rounding would tell an intruder two draws of one cell).
:func:`protect_release_chain` protects a release with a chain (``ckm,additivity``; a microdata
method perturbs the records once and every table is tabulated from them).

A method that ``hides`` cells (cell suppression) is then audited as published (:mod:`tabsafe.release.audit`, the
intruder's interval programs over all tables at once, on the published values only): a release
in which a primary cell is narrower than its protection is refused, not written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from tabsafe.engines import DEFAULT_ENGINE
from tabsafe.errors import InputError, MethodError, Reason
from tabsafe.model.result import Protection, Proven, Report
from tabsafe.model.table import Table
from tabsafe.model.release_cells import ReleaseCells
from tabsafe.release.spec import ReleaseSpec

if TYPE_CHECKING:  # pragma: no cover
    from tabsafe.method import TableMethod
    from tabsafe.model.microdata import InnerCells, Microdata
    from tabsafe.release.audit import ReleaseAudit

__all__ = ["HidingMethod", "JointMethod", "ReleaseProtection", "protect_release", "protect_release_chain",
           "tabulate_release"]


@runtime_checkable
class JointMethod(Protocol):
    """A method that protects the tables of a release together."""

    def protect_release(self, cells: ReleaseCells, *, seed: int | None = None
                        ) -> tuple[tuple[Protection, ...], Report] | tuple[tuple[Protection, ...], Report, Proven]:
        """The tables' protections and the release's report; a method whose proofs are the
        release audit returns their intervals third (then no interval programs are run over the
        release)."""
        ...  # pragma: no cover


@runtime_checkable
class HidingMethod(Protocol):
    """A method that hides cells (``Capabilities.hides``) states the protection each hidden
    primary cell needs, which the release audit checks."""

    def required(self, values: np.ndarray) -> np.ndarray | float:
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
                     key: Any = None, sums: Sequence[str] = (), contributors: Any = None) -> list[Table]:
    """Every table of the release, with every margin (one tabulation per table), by ``engine``
    (a name or an engine object), else the release config's ``engine``, else DuckDB;
    ``contributors`` (a :class:`~tabsafe.model.spec.ContributorSpec`): magnitude tables that carry
    their contributions."""
    from tabsafe.model.spec import TableSpec
    from tabsafe.registry import get_engine
    from tabsafe.tabulation import tabulate

    # one engine object for every table (a local Spark session is started once)
    engine = get_engine(engine if engine is not None else (spec.engine or DEFAULT_ENGINE))

    out = []
    for t in spec.tables:
        ts = TableSpec(by=t.by, hierarchies=dict(t.hierarchies), where=t.where, key=key, sums=tuple(sums),
                       contributors=contributors)
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
    finest: Table | Callable[[], Table] | None = None,
) -> ReleaseProtection:
    """Protect the tables of a release together (module docstring).

    Args:
        tables: the tables (true counts, every margin).
        method: the protection method.
        names: the tables' names (default ``table 1``…).
        wheres: each table's filter (tabsafe's filter language), or None.
        same_codes: groups of variables whose codes name the same populations.
        seed: the seed of a random method (drawn and recorded when not given).
        finest: the cross-classification of every variable of the release (inner cells; cell
            keys when the method needs them), or a function tabulating it: what a method of the
            cell perturbation family perturbs when no table holds the finest cells
            (:mod:`tabsafe.model.finest`). Asked for only when needed.
    """
    from tabsafe.model.filter import coerce

    names = tuple(names) if names is not None else tuple(f"table {i + 1}" for i in range(len(tables)))
    wheres = tuple(coerce(w) for w in wheres) if wheres is not None else (None,) * len(tables)
    cells = ReleaseCells.build(tables, names=names, wheres=wheres, same_codes=same_codes)
    if finest is not None:
        cells = dataclasses.replace(cells, finest=finest)
    caps = method.capabilities()
    if not (caps.joint or caps.consistent):
        other = (f"; {method.name!r} is joint with other parameters" if type(method).declared.joint
                 else "; use a joint or consistent method (e.g. suppress, controlled-round, ckm)")
        raise InputError(
            f"method {method.name!r} with these parameters is neither joint (one problem over the release) nor "
            "consistent (the same cell, the same value in every table): its tables would publish shared cells "
            f"differently{other}")
    cells.combine("count")  # tables of one data set agree on every shared cell
    if caps.joint:
        if not isinstance(method, JointMethod):
            raise TypeError(f"method {method.name!r} declares 'joint' but has no protect_release()")
        from tabsafe import memory

        # the union of the tables is at most their sum: each table's model, added up, before any work
        estimate = getattr(method, "release_memory_estimate", None)
        memory.check(f"method {method.name!r} on a release of {cells.n_cells:,} cells",
                     estimate(cells.tables) if estimate is not None
                     else sum(method.memory_estimate(t) for t in cells.tables))
        protections, report, *proven = method.protect_release(cells, seed=seed)
        _check_consistent(cells, protections, method)
        audit = None
        if caps.hides:
            # a method whose proofs are the audit (moves: one program over the release would not fit)
            audit = _proven(cells, protections, method, proven[0]) if proven else _audit(cells, protections, method)
        return ReleaseProtection(names, protections, report, cells, audit)
    from tabsafe.method import check_seed, draw_seed

    used = check_seed(seed) if method.random else None
    if method.random and used is None:
        used = draw_seed()
    # one seed for every table: a method consistent by construction gives a shared cell one value;
    # checked all the same, so that a method that declares consistency and breaks it writes nothing
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
    values = [np.asarray(p.release.table.grid(fill=0), dtype=np.float64) for p in protections]
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
    from tabsafe.release.audit import audit_release

    if not isinstance(method, HidingMethod):
        raise TypeError(f"method {method.name!r} declares 'hides' but states no required protection (required())")
    published, lo, hi = _published(cells, protections, method)
    primary = np.zeros(cells.n_cells, dtype=bool)
    for p, rows in zip(protections, cells.cells):
        primary[rows[np.asarray(p.evaluation.column("reason")) == "primary"]] = True
    required = method.required(cells.combine("count"))
    return _checked(audit_release(cells, lo, hi, required=required, targets=primary, published=published))


def _proven(cells: ReleaseCells, protections: Sequence[Protection], method: Any, proven: Proven) -> ReleaseAudit:
    """The release audit a method's proofs give: what the published tables say, and each audited
    cell's proven interval; a cell proven narrower than required stops the release."""
    from tabsafe.release.audit import ReleaseAudit

    if proven.narrow.any():
        c = int(np.flatnonzero(proven.narrow)[0])
        raise MethodError(f"the release audit finds {int(proven.narrow.sum())} primary cell(s) narrower than their "
                          f"protection, e.g. {cells.name(c)}; nothing was written", reason=Reason.INFEASIBLE)
    _, lo, hi = _published(cells, protections, method)
    return ReleaseAudit(cells, lo, hi, proven.lower, proven.upper, proven.audited)


def _published(cells: ReleaseCells, protections: Sequence[Protection], method: Any
               ) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """The tables' published values and what they say about each release cell (a hidden cell at
    least what the method says an intruder knows)."""
    from tabsafe.release.audit import published_bounds

    published = [np.asarray(p.release.table.counts, dtype=np.float64) for p in protections]
    hidden_min = method.reading().hidden_min
    lo, hi = published_bounds(cells, published, suppressed_min=1.0 if hidden_min is None else hidden_min)
    return published, lo, hi


def _checked(audit: ReleaseAudit) -> ReleaseAudit:
    """``audit``, when it passed; else the error that stops the release."""
    if not audit.passed:
        e = audit.exposed[0]
        raise MethodError(
            f"the release audit finds {len(audit.exposed)} primary cell(s) narrower than their protection, e.g. "
            f"{e.name} in [{e.lower:g}, {e.upper:g}]; nothing was written", reason=Reason.INFEASIBLE,
        )
    return audit


def protect_release_chain(
    spec: ReleaseSpec,
    data: Microdata | InnerCells,
    methods: Sequence[Any],
    *,
    engine: Any = None,
    seed: int | None = None,
) -> ReleaseProtection:
    """Protect the tables of a release with a chain of methods (issue #31): microdata methods
    first, then table methods, as :class:`tabsafe.pipeline.Chain` does for one table.

    * Microdata methods (swapping, PRAM, perturbation weights) perturb the records once; every
      table is tabulated from the same perturbed records, so a shared cell has one value and
      every table is additive (weights: weighted counts). The evaluation keeps the counts of the
      records before perturbation as ``original``.
    * The first table method protects the release (:func:`protect_release`, with the finest
      cells of the perturbed records at hand when it asks for them); each later one protects the
      previous step's release as a release (``ckm,additivity``: additivity restored over all the
      tables in one program, keeping the cell key method's promises).
    """
    from tabsafe.method import MicrodataMethod, check_seed, draw_seed
    from tabsafe.pipeline import Chain, _compose, _next_input, step_seeds

    chain = Chain(tuple(methods))
    seed = check_seed(seed)
    if chain.random and seed is None:
        seed = draw_seed()
    seeds = step_seeds(seed, len(chain.methods))
    needs = chain.needs()
    engine = _engine(engine if engine is not None else spec.engine)
    names, wheres = spec.names, [t.where for t in spec.tables]
    reports: list[Report] = []
    records = data
    for m, s in zip(chain.methods, seeds):
        if isinstance(m, MicrodataMethod):
            if not isinstance(records, _microdata_type()):
                raise InputError(f"method {m.name!r} needs microdata, not inner cells")
            out = m.perturb(records, seed=s)
            records = out.microdata
            reports.append(out.report)
    tables = tabulate_release(spec, records, engine=engine, key=needs.key, sums=needs.sums,
                              contributors=needs.contributors)
    finest = (lambda: _tabulate_finest(spec, tables, names, wheres, records, engine, needs))
    steps = chain.table_steps
    if not steps:
        result = _records_release(spec, data, tables, chain, reports, seed, engine)
    else:
        current = protect_release(tables, steps[0], names=names, wheres=wheres, same_codes=spec.same_codes,
                                  seed=seeds[len(reports)], finest=finest)
        first = current
        for m, s in zip(steps[1:], seeds[len(reports) + 1:]):
            nxt = [_next_input(p, t) for p, t in zip(current.protections, current.cells.tables)]
            later = protect_release(nxt, m, names=names, wheres=wheres, same_codes=spec.same_codes, seed=s)
            current = ReleaseProtection(names, tuple(_compose(a, b) for a, b in zip(first.protections,
                                                                                   later.protections)),
                                        later.report, first.cells, later.audit)
        step_reports = [*reports, *([current.report] if len(steps) == 1 else [])]
        if len(chain.methods) > 1:
            report = Report(method=chain.name, params={"steps": [{"method": m.name, "params": m.params()}
                                                                 for m in chain.methods]},
                            seed=seed, figures=current.report.figures, private=current.report.private,
                            notes=tuple(dict.fromkeys(n for r in step_reports for n in r.notes)),
                            steps=tuple(step_reports))
            current = dataclasses.replace(current, report=report)
        result = current
        if chain.microdata_steps:
            truth = tabulate_release(spec, data, engine=engine)
            result = dataclasses.replace(result, protections=tuple(
                _with_original(p, t) for p, t in zip(result.protections, truth)))
    return _with_intruders(result, chain)


def _with_intruders(result: ReleaseProtection, chain: Any) -> ReleaseProtection:
    """A perturbed release's report with what an intruder gets from combining its tables
    (:mod:`tabsafe.release.perturbed_audit`; the LP intruder is left to the audit, it costs two
    programs per cell): shared cells published differently (a public figure: 0), and, privately,
    how often the averaging and least-squares intruders recover the true 1s and 2s the tables
    share, beside one table alone and the method's stated differencing risk."""
    from tabsafe.release.perturbed_audit import audit_perturbed

    published = [np.asarray(p.release.table.counts, dtype=np.float64) for p in result.protections]
    if any(np.isnan(v).any() for v in published) or len(published) < 2:
        return result  # hidden cells: the interval audit of release/audit.py applies
    cells = result.cells
    original = np.zeros(cells.n_cells)
    for p, rows in zip(result.protections, cells.cells):
        original[rows] = p.evaluation.column("original")
    stated = next((m for m in chain.methods if getattr(m, "published_distribution", None) is not None), None)
    audit = audit_perturbed(cells, published, method=stated, lp=False)
    report = result.report
    figures = {**dict(report.figures), "published_differently": audit.summary()["published_differently"]}
    private = {**dict(report.private), "intruders": {k: v for k, v in audit.recovered(original).items() if k != "lp"}}
    return dataclasses.replace(result, report=dataclasses.replace(report, figures=figures, private=private))


def _engine(engine: Any) -> Any:
    from tabsafe.engines import DEFAULT_ENGINE, get_engine

    return get_engine(engine or DEFAULT_ENGINE)


def _microdata_type() -> type:
    from tabsafe.model.microdata import Microdata

    return Microdata


def _tabulate_finest(spec: ReleaseSpec, tables: Sequence[Table], names: Sequence[str], wheres: Sequence[Any],
                     records: Any, engine: Any, needs: Any) -> Table:
    """The finest cells of the release (:mod:`tabsafe.model.finest`), tabulated from the
    records the tables were tabulated from."""
    from tabsafe.model.spec import TableSpec
    from tabsafe.model.finest import cover_spec
    from tabsafe.tabulation import tabulate

    cells = ReleaseCells.build(tables, names=names, wheres=wheres, same_codes=spec.same_codes)
    by, hierarchies = cover_spec(cells)
    return tabulate(records, TableSpec(by=by, hierarchies=hierarchies, key=needs.key), engine=engine)


def _records_release(spec: ReleaseSpec, data: Any, tables: Sequence[Table], chain: Any, reports: Sequence[Report],
                     seed: int | None, engine: Any) -> ReleaseProtection:
    """A release protected by microdata methods alone: the tables of the perturbed records,
    checked to agree on every shared cell, with the counts before perturbation as originals."""
    from tabsafe.model.result import Release

    truth = tabulate_release(spec, data, engine=engine)
    cells = ReleaseCells.build(tables, names=spec.names, wheres=[t.where for t in spec.tables],
                               same_codes=spec.same_codes)
    report = reports[0] if len(reports) == 1 else Report(
        method=chain.name, params={"steps": [{"method": m.name, "params": m.params()} for m in chain.methods]},
        seed=seed, notes=tuple(n for r in reports for n in r.notes), steps=tuple(reports))
    out = []
    for t, dense in zip(truth, cells.tables):
        published = ["count", *(c for c in dense.value_columns if c.startswith("sum_"))]
        p = Protection(release=Release(dense.select(published)), evaluation=dense.with_values(original=dense.counts),
                       report=report)
        out.append(_with_original(p, t))
    protections = tuple(out)
    _check_consistent(cells, protections, chain)
    return ReleaseProtection(spec.names, protections, report, cells)


def _with_original(p: Protection, truth: Table) -> Protection:
    """The evaluation's ``original``: the counts of the records before perturbation."""
    ev = p.evaluation
    if tuple(ev.dimensions) != tuple(truth.dimensions):
        raise InputError("the perturbed records have other codes than the original records: give hierarchies or "
                         "codelists for every variable of the release")
    rows = truth.rows_of(ev.ids)
    original = np.zeros(ev.n_stored, dtype=np.int64)
    original[rows >= 0] = np.asarray(truth.counts)[rows[rows >= 0]]
    return dataclasses.replace(p, evaluation=ev.with_values(original=original, tabulated=ev.column("original")))
