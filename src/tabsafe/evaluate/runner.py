"""Run method settings on the same tables and measure every result (the evaluation report's data).

For each setting (a method with its parameters, or a chain such as targeted swapping then the
cell key method) the microdata steps run once on the records and every table is built from the
perturbed records; table steps protect each table (:class:`tabsafe.pipeline.Chain`, the same
steps and seeds as ``tabsafe protect --method A,B --seed S``). Each release is compared with the
table of the unperturbed records: information loss (:mod:`tabsafe.evaluate.measures`), risk
(:mod:`tabsafe.evaluate.risk`), and — for a method that states ``P(published | n)`` — the exact
information gain and differencing risk (:mod:`tabsafe.evaluate.distribution`). An output-checker
summary describes each release: what was applied, cells suppressed and perturbed, additivity, and
the SHA-256 of the release file.

The result, :class:`Evaluation`, holds measures and published values only.
"""

from __future__ import annotations

import hashlib
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tabsafe.engines import DEFAULT_ENGINE
from tabsafe.evaluate.config import EvaluationConfig, MeasureOptions, Setting, TableConfig

__all__ = ["Evaluation", "Result", "SettingRun", "planned_release_files", "release_csv", "release_file_name",
           "run_evaluation"]

#: Noise histograms keep the values -NOISE_RANGE..NOISE_RANGE; beyond are two overflow bins.
NOISE_RANGE = 10


@dataclass(frozen=True)
class Result:
    """One setting on one table.

    Attributes:
        table: the table's name.
        setting: the setting's label.
        measures: utility and risk measures (plain data).
        checker: the output-checker summary of the release.
        noise: published − original over the inner cells: value → number of cells (values beyond
            ±NOISE_RANGE in the bins ``"<"`` and ``">"``).
        release_file: the release's file name.
        release_bytes: the release as CSV (what ``--releases`` writes; its SHA-256 is in
            ``checker``).
    """

    table: str
    setting: str
    measures: dict[str, Any]
    checker: dict[str, Any]
    noise: dict[str, int]
    release_file: str
    release_bytes: bytes = field(repr=False)


@dataclass(frozen=True)
class SettingRun:
    """What one setting ran: the seed used, each step's report, and method-level measures.

    Attributes:
        setting: the setting.
        seed: the seed used (drawn when the setting had none and is random), or None.
        step_seeds: the seed each step was given (the run's; ``tabsafe.pipeline.step_seeds``),
            from which step ``k`` draws ``tabsafe.seeds.stream_seed(seed, k)``.
        reports: per table, the report of its protection (as JSON, published figures only).
        microdata_reports: the microdata steps' reports (as JSON, published figures only).
        method_measures: information gain and differencing risk (from the cell distribution),
            and the share of risky households left unswapped.
    """

    setting: Setting
    seed: int | None
    step_seeds: tuple[int | None, ...]
    reports: dict[str, dict[str, Any]]
    microdata_reports: tuple[dict[str, Any], ...]
    method_measures: dict[str, Any]


@dataclass(frozen=True)
class Evaluation:
    """Every setting on every table, measured (see the module docstring).

    Attributes:
        title: the report's title.
        data: the microdata file's name.
        tables: per table: variables, rows, filter, hierarchy files, cells, and a risk summary of
            the original (numbers of zero, one and two cells: aggregates).
        runs: one per setting.
        results: one per setting and table.
        options: the measure options.
        config: the configuration as plain data (enough to rerun).
        skipped: settings that could not run (label, the error), when failures were allowed.
    """

    title: str
    data: str
    tables: dict[str, dict[str, Any]]
    runs: tuple[SettingRun, ...]
    results: tuple[Result, ...]
    options: MeasureOptions
    config: dict[str, Any]
    skipped: tuple[tuple[str, str], ...] = ()

    def result(self, table: str, setting: str) -> Result:
        for r in self.results:
            if r.table == table and r.setting == setting:
                return r
        raise KeyError((table, setting))

    def to_json(self) -> dict[str, Any]:
        """The measures as plain data (what ``measures.json`` holds)."""
        from tabsafe import __version__

        return {
            "tabsafe": __version__,
            "title": self.title,
            "data": self.data,
            "tables": self.tables,
            "settings": [{**r.setting.to_json(), "seed": r.seed, "step_seeds": list(r.step_seeds),
                          "method_measures": r.method_measures} for r in self.runs],
            "results": [{"table": r.table, "setting": r.setting, "measures": r.measures, "checker": r.checker,
                         "noise": r.noise} for r in self.results],
            "config": self.config,
            "skipped": [{"setting": label, "error": error} for label, error in self.skipped],
        }

    def to_csv(self) -> str:
        """The measures in long form: ``table,setting,group,measure,value`` (one number a line)."""
        import csv

        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["table", "setting", "group", "measure", "value"])
        for r in self.results:
            for group, name, value in _flatten(r.measures):
                w.writerow([r.table, r.setting, group, name, value])
        for run in self.runs:
            for group, name, value in _flatten(run.method_measures):
                w.writerow(["", run.setting.label, group, name, value])
        return buf.getvalue()


def _flatten(data: Mapping[str, Any], prefix: str = "") -> list[tuple[str, str, Any]]:
    out: list[tuple[str, str, Any]] = []
    for key, value in data.items():
        if isinstance(value, Mapping):
            out += _flatten(value, f"{prefix}.{key}" if prefix else key)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, Mapping):
                    name = item.get("table") or item.get("n") or i
                    out += _flatten({k: v for k, v in item.items() if k != "table"}, f"{prefix}.{key}[{name}]")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            group, _, name = (f"{prefix}.{key}" if prefix else key).rpartition(".")
            out.append((group, name, value))
    return out


# ------------------------------------------------------------------------------------- records


def _read_records(md: Any) -> Any:
    """The records of a microdata source as one Arrow table."""
    return md.read()


def record_cells(records: Any, dimensions: Sequence[Any], where: Any = None) -> np.ndarray:
    """Each record's inner cell of a table: the mixed-radix number of its leaf codes' places
    (dimension order, the last varying fastest), or -1 for a record outside the table's
    population (its filter) or with a code outside the codelist."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = records.num_rows
    cell = np.zeros(n, dtype=np.int64)
    ok = np.ones(n, dtype=bool)
    for d in dimensions:
        leaves = d.hierarchy.leaves
        col = records.column(d.variable)
        if not pa.types.is_string(col.type):
            col = pc.cast(col, pa.string())
        idx = pc.index_in(col, value_set=pa.array(list(leaves), type=pa.string()))
        arr = np.asarray(pc.fill_null(idx, -1).to_numpy(zero_copy_only=False), dtype=np.int64)
        ok &= arr >= 0
        cell = cell * len(leaves) + np.maximum(arr, 0)
    if where is not None:
        from tabsafe.model.filter import coerce, evaluate

        node = coerce(where, where="where")
        if node is not None:
            def column(name: str) -> Any:
                c = records.column(name)
                if pa.types.is_dictionary(c.type):
                    c = c.cast(pa.string())
                return c.to_numpy(zero_copy_only=False)

            kinds = {}
            for name in records.column_names:
                t = records.schema.field(name).type
                kinds[name] = ("integer" if pa.types.is_integer(t) else
                               "number" if pa.types.is_floating(t) else "text")
            ok &= np.asarray(evaluate(node, column, kinds), dtype=bool)
    return np.where(ok, cell, -1)


# ------------------------------------------------------------------------------------- releases


def release_csv(release_table: Any) -> bytes:
    """The release as the CSV file ``tabsafe protect --out FILE.csv`` writes (every grid cell
    up to the auto limit, published columns only)."""
    import pyarrow.csv as pacsv

    from tabsafe.io import release_arrow
    from tabsafe.model.result import Release

    buf = io.BytesIO()
    pacsv.write_csv(release_arrow(Release(release_table)), buf)
    return buf.getvalue()


def _noise_histogram(original: np.ndarray, published: np.ndarray) -> dict[str, int]:
    d = np.rint(np.asarray(published, float) - np.asarray(original, float)).astype(np.int64).ravel()
    out: dict[str, int] = {}
    below, above = int((d < -NOISE_RANGE).sum()), int((d > NOISE_RANGE).sum())
    if below:
        out["<"] = below
    values, counts = np.unique(d[(d >= -NOISE_RANGE) & (d <= NOISE_RANGE)], return_counts=True)
    out.update({str(int(v)): int(c) for v, c in zip(values, counts)})
    if above:
        out[">"] = above
    return out


def _checker(setting: Setting, release: Any, original: Any, report: Mapping[str, Any],
             data: bytes, file_name: str) -> dict[str, Any]:
    """The output-checker summary of one release: what was applied, what it did to the cells,
    and the checksum of the file."""
    counts = np.asarray(release.grid(), dtype=float)
    orig = np.asarray(original.grid("count"), dtype=float)
    suppressed = np.isnan(counts)
    perturbed = ~suppressed & (counts != orig)
    try:
        additive = bool(release.densify().is_additive()) if not suppressed.any() else None
    except Exception:  # noqa: BLE001 - a grid too large for the additivity matrix is "not checked"
        additive = None
    steps = []
    for m in setting.methods:
        params = {k: v for k, v in m.params().items() if v is not None}
        steps.append({"method": m.name, "kind": m.kind, "params": params})
    return {
        "applied": steps,
        "notes": list(report.get("notes", [])),
        "cells": int(counts.size),
        "cells_suppressed": int(suppressed.sum()),
        "cells_perturbed": int(perturbed.sum()),
        "share_perturbed": float(perturbed.sum() / counts.size) if counts.size else 0.0,
        "additive": additive,
        "release_file": file_name,
        "release_bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }


# ------------------------------------------------------------------------------------- the run


def _method_measures(setting: Setting, options: MeasureOptions, micro_reports: Sequence[Any]) -> dict[str, Any]:
    from tabsafe.evaluate.distribution import cell_distribution, differenced_distribution, information_gain
    from tabsafe.evaluate.risk import risky_unswapped

    out: dict[str, Any] = {}
    if len(setting.methods) == 1:
        dist = cell_distribution(setting.methods[0])
        if dist is not None:
            m = setting.methods[0]
            gain = information_gain(m, options.prior)
            out["information_gain"] = {"value": gain["information_gain"], "prior": gain["prior"]}
            diffs = []
            for n in options.differencing_n:
                d = differenced_distribution(m, n)
                diffs.append({"n": n, "p_exact": d.get(n, 0.0),
                              "p_within_1": sum(p for v, p in d.items() if abs(v - n) <= 1)})
            out["differencing"] = diffs
    swap = risky_unswapped(micro_reports)
    if swap is not None:
        # the share only: the number of risky households is one of swapping's private figures
        out["risky_unswapped"] = {"share": swap["share"]}
    return out


def _tables_summary(config: EvaluationConfig, originals: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    from tabsafe.evaluate.summary import risk_summary

    out = {}
    for t in config.tables:
        table = originals[t.name]
        inner = 1
        for d in table.dimensions:
            inner *= len(d.hierarchy.leaves)
        out[t.name] = {
            "by": list(t.by), "rows": t.row_variable, "where": t.where,
            "hierarchies": {k: v for k, v in t.hierarchy_files.items()},
            "shape": {d.variable: len(d.hierarchy) for d in table.dimensions},
            "summary": risk_summary(table),
        }
    return out


def run_evaluation(config: EvaluationConfig, *, engine: Any = None, skip_failing: bool = False) -> Evaluation:
    """Run every setting of ``config`` on every table and measure the releases.

    Tables are tabulated by ``engine`` (a name or an engine object), else by the configuration's
    ``engine``, else by DuckDB.

    A setting that fails (a method that cannot protect a table: an infeasible program, a
    variable it needs missing) stops the evaluation with its error naming the setting and the
    table; with ``skip_failing`` it is left out and listed in :attr:`Evaluation.skipped`.
    """
    from tabsafe import progress
    from tabsafe.errors import TabsafeError
    from tabsafe.model.spec import TableSpec
    from tabsafe.tabulation import tabulate

    md = config.data
    engine = engine if engine is not None else (config.engine or DEFAULT_ENGINE)
    total = len(config.settings) * len(config.tables)
    progress.report("evaluation", phase="original tables", done=0, total=total)
    specs = {t.name: TableSpec(by=t.by, hierarchies=dict(t.hierarchies), where=t.where) for t in config.tables}
    originals = {name: tabulate(md, spec, engine=engine) for name, spec in specs.items()}
    state = _State(md=md, engine=engine, specs=specs, originals=originals)
    runs: list[SettingRun] = []
    results: list[Result] = []
    skipped: list[tuple[str, str]] = []
    for number, setting in enumerate(config.settings, 1):
        try:
            run, found = _run_setting(config, number, setting, state)
        except TabsafeError as exc:
            if skip_failing:
                skipped.append((setting.label, exc.what))
                continue
            exc.what = f"setting {setting.label!r}: {exc.what}"
            raise
        runs.append(run)
        results.extend(found)
    progress.report("evaluation", done=total, total=total, final=True)
    return Evaluation(
        title=config.title, data=_name(config.data_path), tables=_tables_summary(config, originals),
        runs=tuple(runs), results=tuple(results), options=config.measures, config=config_json(config),
        skipped=tuple(skipped),
    )


@dataclass
class _State:
    """What the settings of one evaluation share: the records, the original tables, the
    tabulations with keys (one per table and key), the unperturbed records when read."""

    md: Any
    engine: Any
    specs: dict[str, Any]
    originals: dict[str, Any]
    tabulated: dict[tuple[str, Any, tuple[str, ...]], Any] = field(default_factory=dict)
    records_before: Any = None
    done: int = 0


def _run_setting(config: EvaluationConfig, number: int, setting: Setting,
                 state: _State) -> tuple[SettingRun, list[Result]]:
    """One setting: its microdata steps once on the records (seeds as ``tabsafe protect`` draws
    them from the setting's seed), then every table."""
    from tabsafe import progress
    from tabsafe.errors import TabsafeError
    from tabsafe.method import MicrodataMethod, draw_seed
    from tabsafe.pipeline import Chain, step_seeds

    chain = Chain(setting.methods)
    # a deterministic setting has no seed to record; a random one without a seed draws one
    seed = (setting.seed if setting.seed is not None else draw_seed()) if chain.random else None
    seeds = step_seeds(seed, len(chain.methods))
    data = state.md
    micro_reports = []
    for k, (m, s) in enumerate(zip(chain.methods, seeds)):
        if isinstance(m, MicrodataMethod):
            progress.report("evaluation", phase="microdata", setting=setting.label, method=m.name)
            res = m.perturb(data, seed=s, step=k)
            data = res.microdata
            micro_reports.append(res.report)
    records = None
    if chain.microdata_steps:
        if state.records_before is None:
            state.records_before = _read_records(state.md)
        records = (state.records_before, _read_records(data))
    total = len(config.settings) * len(config.tables)
    results: list[Result] = []
    reports: dict[str, dict[str, Any]] = {}
    for t in config.tables:
        progress.report("evaluation", done=state.done, total=total, table=t.name, setting=setting.label)
        try:
            release, reports[t.name] = _protect_table(t, chain, seed, seeds, data, micro_reports, state)
            results.append(_measure(t, setting, state.originals[t.name], release, reports[t.name], config.measures,
                                    records, release_file_name(t.name, number, setting.label)))
        except TabsafeError as exc:
            exc.what = f"table {t.name!r}: {exc.what}"
            raise
        state.done += 1
    run = SettingRun(setting=setting, seed=seed, step_seeds=tuple(seeds), reports=reports,
                     microdata_reports=tuple(r.to_json() for r in micro_reports),
                     method_measures=_method_measures(setting, config.measures, micro_reports))
    return run, results


def _protect_table(t: TableConfig, chain: Any, seed: int | None, seeds: Sequence[int | None], data: Any,
                   micro_reports: Sequence[Any], state: _State) -> tuple[Any, dict[str, Any]]:
    """The release of one table: tabulated from the perturbed records when the chain has
    microdata steps (on the original table's grid), protected by the table steps."""
    import dataclasses

    from tabsafe.tabulation import tabulate

    needs = chain.needs()
    original = state.originals[t.name]
    if chain.microdata_steps:
        spec = dataclasses.replace(state.specs[t.name], key=needs.key, sums=needs.sums,
                                   hierarchies={d.variable: d.hierarchy for d in original.dimensions})
        table = tabulate(data, spec, engine=state.engine)
    else:
        cache_key = (t.name, needs.key, tuple(needs.sums))
        if cache_key not in state.tabulated:
            spec = dataclasses.replace(state.specs[t.name], key=needs.key, sums=needs.sums)
            state.tabulated[cache_key] = (tabulate(state.md, spec, engine=state.engine)
                                          if (needs.key or needs.sums) else original)
        table = state.tabulated[cache_key]
    if not chain.table_steps:
        # a microdata method alone: the table of the perturbed records is the release
        report = {"method": chain.name, "seed": seed, "notes": [n for r in micro_reports for n in r.notes],
                  "steps": [r.to_json() for r in micro_reports]}
        return table.select(["count"]), report
    prot = chain.protect(table, seeds=seeds[len(chain.microdata_steps):], chain_seed=seed, before=micro_reports)
    return prot.release.table, prot.report.to_json()


def _name(path: str) -> str:
    from pathlib import Path

    return Path(path).name


def config_json(config: EvaluationConfig) -> dict[str, Any]:
    """The configuration as plain data, with every default filled in (what reruns the report)."""
    tables = {}
    for t in config.tables:
        entry: dict[str, Any] = {"by": list(t.by)}
        if t.hierarchy_files:
            entry["hierarchies"] = dict(t.hierarchy_files)
        if t.where:
            entry["where"] = t.where
        entry["rows"] = t.row_variable
        if t.anova_target:
            entry["anova_target"] = t.anova_target
        tables[t.name] = entry
    o = config.measures
    return {
        "title": config.title,
        "data": config.data_path,
        "seed": config.seed,
        **({"engine": config.engine} if config.engine else {}),
        "tables": tables,
        "settings": [s.to_json() for s in config.settings],
        "measures": {"small": o.small, "k": o.k, "sensitive": list(o.sensitive) if o.sensitive else None,
                     "weights": list(o.weights), "prior": o.prior, "differencing_n": list(o.differencing_n),
                     "max_binomial_count": o.max_binomial_count},
    }


#: suppressed cells up to this many get interval midpoints (two small LPs each); beyond, averages only
MAX_MIDPOINT_CELLS = 5_000


def imputed_utility(original: Any, release: Any, rows: str | None) -> dict[str, Any]:
    """The distances of the inner cells as a user who fills the suppressed cells sees them (seed
    000 §5.8): interval midpoints, and averages of what the totals leave (zeros: the main figures)."""
    from tabsafe.evaluate.measures import (
        Comparison,
        average_absolute_distance,
        hellinger_distance,
        relative_absolute_distance,
    )
    from tabsafe.evaluate.table_measures import impute_suppressed

    table = getattr(release, "table", release)
    out: dict[str, Any] = {}
    for how in ("midpoint", "average"):
        if how == "midpoint" and Comparison.of(original, table, rows=rows).suppressed > MAX_MIDPOINT_CELLS:
            continue
        cmp = Comparison.of(original, impute_suppressed(table, how=how), rows=rows)
        o, p = cmp.inner()
        out[how] = {"hellinger": hellinger_distance(o, p).to_json(), "rad": relative_absolute_distance(o, p).to_json(),
                    "aad": average_absolute_distance(o, p).to_json()}
    return out


def _measure(t: TableConfig, setting: Setting, original: Any, release: Any, report: Mapping[str, Any],
             options: MeasureOptions, records: tuple[Any, Any] | None, file_name: str) -> Result:
    from tabsafe.evaluate.distribution import cell_distribution
    from tabsafe.evaluate.measures import Comparison, utility_measures
    from tabsafe.evaluate.risk import directly_disclosive, entropy_risk, small_cells, unperturbed_small_records

    cmp = Comparison.of(original, release, rows=t.row_variable)
    dist = None
    if len(setting.methods) == 1:
        dist = cell_distribution(setting.methods[0])
    utility = utility_measures(cmp, anova_target=t.anova_target, distribution=dist,
                               max_binomial_count=options.max_binomial_count)
    if cmp.suppressed:
        utility["imputed"] = imputed_utility(original, release, t.row_variable)
    o_inner, p_inner = cmp.inner_cells()
    moved = transitions = None
    records_before, records_after = records if records is not None else (None, None)
    if records_before is not None and records_before.num_rows == records_after.num_rows:
        before = record_cells(records_before, cmp.dimensions, t.where)
        after = record_cells(records_after, cmp.dimensions, t.where)
        changed = (before >= 0) & (before != after)
        moved = np.bincount(before[changed], minlength=o_inner.size)[: o_inner.size]
        both = (before >= 0) & (after >= 0)
        # one integer per (cell before, cell after): a 1-d unique is far faster than pairs of columns
        pairs, counts = np.unique(before[both] * o_inner.size + after[both], return_counts=True)
        transitions = (pairs // o_inner.size, pairs % o_inner.size, counts)
    risk = {
        "dr": unperturbed_small_records(o_inner, p_inner, moved, small=options.small),
        "small_cells": small_cells(o_inner, p_inner, small=options.small),
        "directly_disclosive": directly_disclosive(cmp.dimensions, cmp.original, cmp.published, k=options.k,
                                                   sensitive=options.sensitive),
        "entropy": entropy_risk(o_inner, p_inner, transitions=transitions, weights=options.weights),
    }
    data = release_csv(release)
    checker = _checker(setting, release, original, report, data, file_name)
    return Result(table=t.name, setting=setting.label, measures={"utility": utility, "risk": _clean(risk)},
                  checker=checker, noise=_noise_histogram(o_inner, p_inner), release_file=file_name,
                  release_bytes=data)


def _clean(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def release_file_name(table: str, number: int, label: str) -> str:
    """The release file of setting ``number`` (1-based) on ``table``: unique, safe characters."""
    return f"{_slug(table)}.{number:02d}-{_slug(label)}.csv"


def planned_release_files(config: EvaluationConfig) -> list[str]:
    """Every release file an evaluation of ``config`` writes with ``--releases``."""
    return [release_file_name(t.name, i, s.label) for i, s in enumerate(config.settings, 1) for t in config.tables]


def _slug(text: str) -> str:
    import re

    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")
    return slug or "setting"
