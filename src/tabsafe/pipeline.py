"""Chains of methods: microdata methods, then tabulation, then table methods, one after another.

A chain is how the UK 2021 census protected its tables (targeted record swapping, then the cell
key method), or how additivity is restored after noise (the cell key method, then additivity).
The first table method protects the tabulated table; each later one protects the previous
release (its published ``count``, with the tabulation's other columns such as cell keys). The
result keeps the very first counts as ``original``: evaluation compares with the truth.

Seeds (:mod:`tabsafe.seeds`, the one policy): a chain run with seed ``S`` gives every step ``S``
and the step's index ``k``; the step draws its noise from ``stream_seed(S, k)``, so a method alone
with ``--seed S`` adds the same noise as the same method first in a chain with ``--seed S``.
``S`` is recorded (privately) at the top and in every step's report.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tabsafe import progress
from tabsafe.capabilities import Capabilities, chain_capabilities
from tabsafe.engines import DEFAULT_ENGINE
from tabsafe.errors import InputError
from tabsafe.method import Method, MicrodataMethod, Needs, TableMethod, check_seed, draw_seed
from tabsafe.model.microdata import ArrowSource, FileSource, InnerCells, Microdata
from tabsafe.model.result import Protection, Release, Report
from tabsafe.model.spec import TableSpec
from tabsafe.model.table import Table


@dataclass(frozen=True)
class Chain:
    """Methods applied in order: every microdata method before every table method.

    Attributes:
        methods: the steps.
    """

    methods: tuple[Method, ...]

    def __post_init__(self) -> None:
        methods = tuple(self.methods)
        if not methods:
            raise InputError("a chain needs at least one method")
        kinds = [m.kind for m in methods]
        if "table" in kinds and "microdata" in kinds[kinds.index("table"):]:
            raise InputError("microdata methods come before table methods in a chain "
                             f"({' then '.join(m.name for m in methods)})")
        # a later step takes over the promises it must keep from the step before it (Method.follow)
        methods = tuple(m if i == 0 else m.follow(methods[i - 1]) for i, m in enumerate(methods))
        object.__setattr__(self, "methods", methods)

    @property
    def name(self) -> str:
        return "+".join(m.name for m in self.methods)

    @property
    def microdata_steps(self) -> tuple[MicrodataMethod, ...]:
        return tuple(m for m in self.methods if isinstance(m, MicrodataMethod))

    @property
    def table_steps(self) -> tuple[TableMethod, ...]:
        return tuple(m for m in self.methods if isinstance(m, TableMethod))

    @property
    def random(self) -> bool:
        return self.capabilities().random

    def capabilities(self) -> Capabilities:
        """What the chain promises as a whole (:func:`tabsafe.capabilities.chain_capabilities`)."""
        return chain_capabilities(self.methods)

    def needs(self) -> Needs:
        """What tabulation must give the table steps (the first step's key wins)."""
        key = None
        contributors = None
        sums: list[str] = []
        microdata = bool(self.microdata_steps)
        for m in self.table_steps:
            n = m.needs()
            key = key or n.key
            contributors = contributors or n.contributors
            sums += [s for s in n.sums if s not in sums]
            microdata = microdata or n.microdata
        return Needs(key=key, sums=tuple(sums), microdata=microdata, contributors=contributors)

    def run(self, data: Microdata | InnerCells, spec: TableSpec, *, seed: int | None = None,
            engine: Any = DEFAULT_ENGINE) -> tuple[Protection, list[Report]]:
        """Apply the chain; returns the final protection and the microdata steps' reports.

        ``engine`` runs the tabulations, and the microdata steps that have a form for it
        (:meth:`MicrodataMethod.apply_on`; targeted and random swapping on an engine holding PySpark frames:
        the records then stay there); a step without one runs in this process, as before."""
        from tabsafe.tabulation import tabulate

        seed = check_seed(seed)
        if isinstance(engine, str) and engine != DEFAULT_ENGINE and self.microdata_steps:
            from tabsafe.registry import get_engine

            engine = get_engine(engine)  # one engine (one Spark session) for every step
        if self.random and seed is None:
            seed = draw_seed()
        seeds = step_seeds(seed, len(self.methods))
        reports: list[Report] = []
        records = data
        for k, (m, s) in enumerate(zip(self.methods, seeds)):
            if isinstance(m, MicrodataMethod):
                progress.report("protection", method=m.name)
                if not isinstance(data, Microdata):
                    raise InputError(f"method {m.name!r} needs microdata, not inner cells")
                # the chain's engine runs the microdata steps it has a form for (Spark: where the
                # records are); the others run in this process, on records read into it
                held = not isinstance(data.source, (FileSource, ArrowSource))
                own = type(m).apply_on is not MicrodataMethod.apply_on
                result = m.perturb(data, seed=s, step=k, engine=engine if (own or held) else None)
                data = result.microdata
                reports.append(result.report)
        truth = None
        if self.microdata_steps:
            # the truth, for evaluation: the same table from the records before any perturbation;
            # the perturbed records are tabulated on its grid (their codes are among its codes)
            truth = tabulate(records, dataclasses.replace(spec, key=None, sums=()), engine=engine)
            spec = dataclasses.replace(spec, hierarchies={d.variable: d.hierarchy for d in truth.dimensions})
        try:
            table = tabulate(data, spec, engine=engine)
        finally:
            close = getattr(data.source, "close", None) if isinstance(data, Microdata) else None
            if close is not None:  # records an engine holds (cached frames of a swap on Spark)
                close()
        if self.table_steps:
            protection = self.protect(table, seeds=seeds[len(self.microdata_steps):], chain_seed=seed,
                                      before=reports)
        else:
            protection = self._tabulated(table, reports, seed)
        if truth is not None:
            protection = _with_truth(protection, truth)
        return protection, reports

    def _tabulated(self, table: Table, reports: Sequence[Report], chain_seed: int | None) -> Protection:
        """Microdata methods only (swapping, PRAM, perturbation weights): the protection is in the
        records, and the release is the table they give (000 §5.3, "pre-tabular")."""
        published = ["count", *(c for c in table.value_columns if c.startswith("sum_"))]
        release = Release(table.select(published))
        evaluation = table.with_values(original=table.counts)
        if len(self.methods) == 1:
            report = reports[0]
        else:
            report = Report(method=self.name,
                            params={"steps": [{"method": m.name, "params": m.params()} for m in self.methods]},
                            seed=chain_seed, notes=tuple(n for r in reports for n in r.notes), steps=tuple(reports))
        return Protection(release=release, evaluation=evaluation, report=report)

    def protect(self, table: Table, *, seeds: Sequence[int | None], chain_seed: int | None = None,
                before: Sequence[Report] = ()) -> Protection:
        """The table steps on a tabulated table; ``seeds`` as :func:`step_seeds` gives them (the
        table steps' share), each step drawing from its own index in the whole chain."""
        steps = self.table_steps
        first: Protection | None = None
        current: Protection | None = None
        reports = list(before)
        offset = len(self.microdata_steps)
        for j, (m, s) in enumerate(zip(steps, seeds)):
            progress.report("protection", method=m.name, cells=table.n_cells)
            if current is None:
                current = first = m.protect(table, seed=s, step=offset + j)
            else:
                current = _compose(first, m.protect(_next_input(current, table), seed=s,  # type: ignore[arg-type]
                                                    step=offset + j))
            reports.append(current.report)
        assert current is not None
        if len(self.methods) == 1:
            return current
        report = Report(
            method=self.name,
            params={"steps": [{"method": m.name, "params": m.params()} for m in self.methods]},
            seed=chain_seed,
            figures=current.report.figures,
            private=current.report.private,
            notes=tuple(n for r in reports for n in r.notes),
            steps=tuple(reports),
        )
        return Protection(release=current.release, evaluation=current.evaluation, report=report)


def step_seeds(seed: int | None, n: int) -> list[int | None]:
    """The seed each of ``n`` steps is given: the run's seed (None stays None). Each step derives
    its own stream from it and its index (:func:`tabsafe.seeds.stream_seed`), the same way a
    method run alone does; the stream seeds themselves are :func:`tabsafe.seeds.stream_seed`."""
    return [seed] * n


def _next_input(previous: Protection, table: Table) -> Table:
    """The previous release as the next step's table: published counts (a suppressed cell has
    none), with the tabulation's other columns (cell keys, sums) where the release has none."""
    import numpy as np

    rel = previous.release.table
    counts = rel.counts
    if counts.dtype.kind == "f":
        if np.isnan(counts).any():
            raise InputError("a suppressed table cannot be protected further: its hidden cells have no value")
        counts = counts.astype(np.int64)
    extra = {}
    rows = table.rows_of(rel.ids)
    for c in table.value_columns:
        if c == "count" or c in rel.value_columns:
            continue
        src = table.column(c)
        out = np.zeros(rel.n_stored, dtype=src.dtype)
        ok = rows >= 0
        out[ok] = src[rows[ok]]
        extra[c] = out
    cols = {c: rel.column(c) for c in rel.value_columns}
    cols.update(count=counts, **extra)
    return Table(rel.dimensions, rel.ids, cols, dict(table.meta))


def _compose(first: Protection, later: Protection) -> Protection:
    """The later step's release and report; the evaluation keeps the first step's originals
    (and what the later step was given, as ``input``)."""
    import numpy as np

    ev_first = first.evaluation
    ev = later.evaluation
    rows = ev_first.rows_of(ev.ids)
    ok = rows >= 0
    original = np.zeros(ev.n_stored, dtype=np.int64)
    original[ok] = ev_first.column("original")[rows[ok]]
    cols = {c: ev.column(c) for c in ev.value_columns}
    cols["input"] = ev.column("original")  # what this step was given (the previous release)
    cols["original"] = original
    cols["count"] = original
    evaluation = Table(ev.dimensions, ev.ids, cols, dict(ev.meta))
    return Protection(release=Release(later.release.table), evaluation=evaluation, report=later.report)


def _with_truth(protection: Protection, truth: Table) -> Protection:
    """A chain with microdata steps: the evaluation's ``original`` holds the counts of the
    records before perturbation (the truth), ``tabulated`` what the perturbed records gave the
    table steps; cells of either are kept."""
    import numpy as np

    ev = protection.evaluation
    ids = np.union1d(ev.ids, truth.ids)

    def gather(table: Table, values: np.ndarray) -> np.ndarray:
        rows = table.rows_of(ids)
        out = np.zeros(ids.size, dtype=values.dtype) if values.dtype.kind in "iufb" else np.empty(ids.size, object)
        ok = rows >= 0
        out[ok] = values[rows[ok]]
        return out

    cols = {c: gather(ev, ev.column(c)) for c in ev.value_columns}
    cols["tabulated"] = cols["original"]
    cols["original"] = gather(truth, truth.counts)
    cols["count"] = cols["original"]
    evaluation = Table(ev.dimensions, ids, cols, dict(ev.meta))
    return Protection(release=protection.release, evaluation=evaluation, report=protection.report)
