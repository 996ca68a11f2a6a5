"""``tabsafe demo``: the main job end to end on a synthetic census.

Synthesise a census, tabulate the standard tables with every margin, summarise their risk
(cells, zeros, ones, twos, share of small cells), and protect them with every registered method
that this version has, writing releases and evaluation files side by side.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tabsafe.errors import TabsafeError
from tabsafe.io import atomic_path, read_meta, write_table
from tabsafe.model.hierarchy import Hierarchy
from tabsafe.model.microdata import Microdata
from tabsafe.model.spec import KeySpec
from tabsafe.model.table import Table
from tabsafe.protect.ptable import PTableParams
from tabsafe.risk.rules import RiskRules, RuleThresholds, assess
from tabsafe.synth import synth_census
from tabsafe.tabulation import tabulate


@dataclass(frozen=True)
class StandardTable:
    name: str
    by: tuple[str, ...]
    hierarchies: dict[str, str] = field(default_factory=dict)
    where: str | None = None


STANDARD_TABLES = (
    StandardTable("hypercube", ("region", "sex", "age", "activity", "occupation", "education", "citizenship")),
    StandardTable("area_age_sex", ("area", "age", "sex"), {"area": "area.hrc", "age": "age.yaml"}),
    StandardTable("small_area_sex", ("small_area", "sex"), {"small_area": "small_area.hrc"}),
    StandardTable("area_age_activity_sex", ("area", "age", "activity", "sex"), {"area": "area.hrc"}),
    StandardTable("area_age_citizenship", ("area", "age", "citizenship"), {"area": "area.hrc"}),
    StandardTable("region_occupation_education_employed", ("region", "occupation", "education"), {},
                  "activity = 'EMP'"),
)


def add_arguments(parser: argparse.ArgumentParser, argv: object = ()) -> None:
    parser.add_argument("--persons", type=int, default=1_500_000, help="persons in the synthetic census")
    parser.add_argument("--seed", type=int, default=2026, help="seed of the census and of random methods")
    parser.add_argument("--out", default="demo-output", metavar="DIR", help="output folder (default demo-output)")


def risk_summary(table: Table) -> dict[str, Any]:
    """Cells, zeros, ones, twos and the share of small (1-2) cells, over all cells incl. margins."""
    c = table.counts
    n = int(c.size)
    ones, twos = int((c == 1).sum()), int((c == 2).sum())
    return {
        "cells": n,
        "inner_cells": int(table.leaf_mask.sum()),
        "zeros": int((c == 0).sum()),
        "ones": ones,
        "twos": twos,
        "small_cell_share": round((ones + twos) / n, 4),
        "small_among_nonzero": round((ones + twos) / max(1, int((c > 0).sum())), 4),
    }


#: (table, method name, parameters, what to call the result) — the protections the demo applies.
PROTECTIONS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("hypercube", "ckm", {"ptable": PTableParams(max_noise=5, variance=3, js=2)}),
    ("area_age_sex", "ckm", {"ptable": PTableParams(max_noise=5, variance=3, js=2)}),
    ("area_age_sex", "round", {"mode": "random", "base": 3}),
    ("area_age_sex", "controlled-round", {"base": 3}),
    ("area_age_citizenship", "suppress", {"min_freq": 3}),
)


def _protections() -> list[tuple[str, str, Any]]:
    """(table, label, method) for each protection this version provides."""
    from tabsafe.registry import get_method

    out: list[tuple[str, str, Any]] = []
    for table, name, params in PROTECTIONS:
        try:
            method = get_method(name).cls(**params)
        except TabsafeError:
            continue
        label = f"{name}-{params['mode']}" if "mode" in params else name
        out.append((table, label, method))
    return out


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    census = synth_census(args.persons, args.seed, out / "census")
    print(f"1. synthetic census: {census.n_persons:,} persons, {census.n_households:,} households "
          f"({time.perf_counter() - start:.1f} s) -> {census.directory}/")
    codelists = read_meta(census.meta)
    md = Microdata.from_file(census.persons, codelists=codelists)
    tables_dir = out / "tables"
    tables_dir.mkdir(exist_ok=True)
    summary: dict[str, Any] = {"persons": census.n_persons, "tables": {}}
    print("2. standard tables, every margin and subtotal (original counts: evaluation files)")
    print(f"   {'table':40s} {'cells':>9s} {'zeros':>9s} {'ones':>7s} {'twos':>7s} {'small %':>8s} {'secs':>6s}")
    tables: dict[str, Table] = {}
    for spec in STANDARD_TABLES:
        hier = {v: Hierarchy.from_file(census.directory / "hierarchies" / f) for v, f in spec.hierarchies.items()}
        t0 = time.perf_counter()
        table = tabulate(md, spec.by, hierarchies=hier, where=spec.where, key=KeySpec(column="rkey"))
        secs = time.perf_counter() - t0
        tables[spec.name] = table
        write_table(table, tables_dir / f"{spec.name}.original.parquet", evaluation=True)
        risk = risk_summary(table)
        summary["tables"][spec.name] = {"by": list(spec.by), "where": spec.where, "seconds": round(secs, 3), **risk}
        print(f"   {spec.name:40s} {risk['cells']:9,d} {risk['zeros']:9,d} {risk['ones']:7,d} {risk['twos']:7,d} "
              f"{100 * risk['small_cell_share']:7.2f}% {secs:6.2f}")

    rules = RiskRules(min_freq=3, thresholds=RuleThresholds(t_k_abs=3, t_y_abs=3, t_k_rel=99, t_y_rel=99, t_min=2),
                      coalition=1, zeros=1)
    print("   rules on area × age × citizenship (threshold 3, seed 003 rules t_abs=3 t_rel=99 t_min=2, "
          "1-coalitions, informative zeros):")
    risk = assess(tables["area_age_citizenship"], rules).summary()
    summary["risk_rules_area_age_citizenship"] = risk
    per_rule = {**risk["rules"], "unsafe": risk["unsafe"]}
    line = ", ".join(f"{name} {v['cells']:,}" for name, v in per_rule.items())
    print(f"   {line}")

    protections = _protections()
    if protections:
        print("3. protection (releases in releases/: protected values only)")
        rel = out / "releases"
        rel.mkdir(exist_ok=True)
        for table_name, label, method in protections:
            t0 = time.perf_counter()
            result = method.protect(tables[table_name], seed=args.seed)
            secs = time.perf_counter() - t0
            path = rel / f"{table_name}.{label}.csv"
            write_table(result.table, path, columns=list(result.release_columns))
            figures = dict(result.report.figures)
            summary.setdefault("protections", {})[f"{table_name}.{label}"] = {"seconds": round(secs, 3), **figures}
            shown = ", ".join(f"{k} {v}" for k, v in list(figures.items())[:4])
            print(f"   {table_name:22s} {label:19s} {secs:6.2f} s  {shown}")
    with atomic_path(out / "summary.json") as tmp:
        tmp.write_text(json.dumps(summary, indent=2, default=str) + "\n", encoding="utf-8")
    print(f"done in {time.perf_counter() - start:.1f} s. Outputs in {out}/: census/ (microdata, hierarchies), "
          f"tables/ (original counts: evaluation files), {'releases/, ' if protections else ''}summary.json")
    return 0
