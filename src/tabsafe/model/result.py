"""What a method returns: what may be published, kept apart by type from what may not.

A :class:`Protection` has three parts:

* ``release`` — a :class:`Release`: the protected values of every cell (``count`` and whatever
  else the method publishes: a suppression status, existence intervals, perturbed sums and
  means). It is the only part the CLI writes as a release and the only part the service can
  serialise.
* ``evaluation`` — a :class:`~tabsafe.model.table.Table` of what is for evaluation only: the
  original counts (``original``), cell keys, why a cell is suppressed, anything that reveals the
  true values. Written only to files the user asks for as evaluation outputs.
* ``report`` — a :class:`Report`: the method, its parameters (as declared, enough to rerun), the
  seed, figures safe to publish, figures for evaluation only (``private``), notes.

Microdata methods return a :class:`MicrodataProtection`: the perturbed records (internal data,
never released as such), an evaluation frame (e.g. which records were swapped) and the report.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tabsafe.model.table import Table, freeze, thaw

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import pyarrow as pa

    from tabsafe.model.microdata import Microdata


@dataclass(frozen=True, kw_only=True)
class Report:
    """What a method did, for the user and for the evaluation report.

    Attributes:
        method: the registered name of the method (``"ckm"``, ``"round"``…).
        params: every declared parameter's value (JSON), enough to rebuild the method.
        seed: the seed used, if the method is random (drawn and recorded when none was given).
        figures: numbers safe to publish (cells changed, objective, gap, time…).
        private: numbers that reveal original values (e.g. the total value suppressed); they go
            only into evaluation outputs.
        notes: sentences worth reporting (decisions, warnings, which limit stopped a solver).
        steps: the reports of the steps of a chain, in order.
        tables: publishable tables the method gives with its figures, by name (PRAM's transition
            matrix, seed 001 §6: ``{"transitions": pyarrow.Table}``); written as release files
            beside the output (:func:`side_tables`), and in :meth:`to_json` when small.
    """

    method: str
    params: Mapping[str, Any] = field(default_factory=dict)
    seed: int | None = None
    figures: Mapping[str, Any] = field(default_factory=dict)
    private: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    steps: tuple[Report, ...] = ()
    tables: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from types import MappingProxyType

        object.__setattr__(self, "tables", MappingProxyType(dict(self.tables)))
        object.__setattr__(self, "params", freeze(dict(self.params)))
        object.__setattr__(self, "figures", freeze(dict(self.figures)))
        object.__setattr__(self, "private", freeze(dict(self.private)))
        object.__setattr__(self, "notes", tuple(self.notes))
        object.__setattr__(self, "steps", tuple(self.steps))

    def to_json(self, *, evaluation: bool = False) -> dict[str, Any]:
        """The report as plain data; the seed and ``private`` figures only when ``evaluation``
        (a private record), the seed's fingerprint always."""
        from tabsafe.seeds import fingerprint

        out: dict[str, Any] = {"method": self.method, "params": thaw(self.params)}
        # the seed undoes the noise: it goes to private records only; a public report carries its
        # fingerprint, enough to check that a rerun used the same seed (tabsafe.seeds)
        if evaluation:
            out["seed"] = self.seed
        out["seed_fingerprint"] = fingerprint(self.seed)
        out["figures"] = thaw(self.figures)
        out["notes"] = list(self.notes)
        if evaluation:
            out["private"] = thaw(self.private)
        if self.tables:
            # small tables in full (a matrix of a few categories); large ones are in their files
            out["tables"] = {name: (t.to_pydict() if t.num_rows <= REPORT_TABLE_ROWS else
                                    {"rows": t.num_rows, "columns": t.column_names})
                             for name, t in self.tables.items()}
        if self.steps:
            out["steps"] = [s.to_json(evaluation=evaluation) for s in self.steps]
        return out


#: side tables of at most this many rows are written into the JSON report in full
REPORT_TABLE_ROWS = 2000


def side_tables(report: Report) -> list[tuple[int, str, Any]]:
    """The publishable side tables of a report and of its steps: ``(step, name, table)``, step
    0 for a method alone (the order of a chain's steps otherwise)."""
    if not report.steps:
        return [(0, name, t) for name, t in report.tables.items()]
    return [(k, name, t) for k, step in enumerate(report.steps) for name, t in step.tables.items()]


class Release:
    """The published values of a table's cells: the only thing a release file or a service
    response is made from.

    Attributes:
        table: the cells and their published value columns (``count`` first; a magnitude
            release its ``sum_<variable>``, :attr:`~tabsafe.model.table.Table.value_column`).
    """

    __slots__ = ("_table",)

    def __init__(self, table: Table) -> None:
        if not isinstance(table, Table):
            raise TypeError("a Release wraps a Table")
        object.__setattr__(self, "_table", table)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a Release is immutable")

    @property
    def table(self) -> Table:
        return self._table

    @property
    def columns(self) -> tuple[str, ...]:
        return self._table.value_columns

    @property
    def counts(self) -> Any:
        return self._table.counts

    def value(self, column: str | None = None, **codes: str) -> Any:
        return self._table.value(column, **codes)

    def to_arrow(self) -> pa.Table:
        return self._table.to_arrow()

    def __repr__(self) -> str:
        return f"<Release {self._table!r}>"


@dataclass(frozen=True, kw_only=True)
class Protection:
    """A protected table: the release, the evaluation values and the report (module docstring)."""

    release: Release
    evaluation: Table
    report: Report

    @property
    def table(self) -> Table:
        """Release and evaluation columns together, for evaluation in Python (never write this as
        a release: use :attr:`release`)."""
        ev = self.evaluation
        rel = self.release.table
        if ev.n_stored != rel.n_stored:
            ev = ev.densify() if rel.is_dense else ev
        extra = {c: ev.column(c) for c in ev.value_columns if c not in rel.value_columns}
        if ev.n_stored != rel.n_stored:
            rows = ev.rows_of(rel.ids)
            extra = {c: _gather(v, rows) for c, v in extra.items()}
        return rel.with_values(**extra)

    @property
    def release_columns(self) -> tuple[str, ...]:
        return self.release.columns


def _gather(values: Any, rows: Any) -> Any:
    import numpy as np

    out = np.zeros(rows.shape, dtype=values.dtype) if values.dtype.kind in "iufb" else np.empty(rows.shape, object)
    ok = rows >= 0
    out[ok] = values[rows[ok]]
    return out


@dataclass(frozen=True, kw_only=True)
class MicrodataProtection:
    """A microdata method's result.

    Attributes:
        microdata: the perturbed records with the original codelists (internal data: tables are
            built from it; never released as records).
        evaluation: per record, what the method did (e.g. ``swapped``), for evaluation only.
        report: the method, parameters, seed, figures and notes.
    """

    microdata: Microdata
    evaluation: pa.Table | None
    report: Report


@dataclass(frozen=True, eq=False)
class Proven:
    """Intervals a method proves for the cells of a release (the release audit a method gives
    with its protection, when no program over the whole release is run: suppression's moves,
    :mod:`tabsafe.protect.suppression.cube_release`).

    Attributes:
        lower, upper: per release cell, a proven inner bound of its feasibility interval (NaN
            where not audited).
        audited: the cells proven (the primary cells).
        narrow: audited cells whose proven interval is narrower than required (none when the
            method succeeded).
    """

    lower: np.ndarray
    upper: np.ndarray
    audited: np.ndarray
    narrow: np.ndarray

