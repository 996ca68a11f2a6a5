"""``tabsafe demo``: the main job end to end on a synthetic census.

Synthesise a census, tabulate the standard tables with every margin, summarise their risk
(cells, zeros, ones, twos, share of small cells; the risk rules on one table), and protect them
with the registered methods, writing releases and evaluation files side by side. The whole
output folder is built in a temporary folder and moved into place at the end, so an error or
Ctrl-C leaves nothing partial behind.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tabsafe.cli.common import positive_int, seed_int

def demo_entries() -> tuple[str, ...]:
    """Every path the demo writes in its folder (a folder holding only these may be written again)."""
    from tabsafe.synth import SYNTH_ENTRIES

    return (*(f"census/{e}" for e in SYNTH_ENTRIES), *(f"tables/{t.name}.original.parquet" for t in STANDARD_TABLES),
            *(f"releases/{t}.{_label(m, p)}.csv" for t, m, p in PROTECTIONS), "summary.json", "report.html")


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
                  "activity = EMP"),
)

#: (table, method, parameters as in a config file) — the protections the demo applies.
PROTECTIONS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("hypercube", "ckm", {"max_noise": 5, "variance": 3, "js": 2}),
    ("area_age_sex", "ckm", {"max_noise": 5, "variance": 3, "js": 2}),
    ("area_age_sex", "round", {"mode": "random", "base": 3}),
    ("area_age_sex", "controlled-round", {"base": 3}),
    ("area_age_citizenship", "suppress", {"min_freq": 3}),
)


def add_arguments(parser: argparse.ArgumentParser, argv: object = ()) -> None:
    parser.add_argument("--persons", type=positive_int, default=1_500_000, help="persons in the synthetic census")
    parser.add_argument("--seed", type=seed_int, default=2026,
                        help="seed of the synthetic census (random methods draw their own 63-bit seed, kept in the "
                             "private summary.json)")
    parser.add_argument("--out", default="demo-output", metavar="DIR",
                        help="output folder (default demo-output): new, empty, or an earlier demo's (replaced)")


def _label(name: str, params: dict[str, Any]) -> str:
    return f"{name}-{params['mode']}" if "mode" in params else name


def _standard_tables(md: Any, census_dir: Path, tables_dir: Path, summary: dict[str, Any]) -> dict[str, Any]:
    """Step 2: each standard table with every margin and subtotal, its original counts written as
    an evaluation file and its risk figures (cells, zeros, ones, twos) printed and added to
    ``summary["tables"]``; returns the tables by name."""
    from tabsafe.evaluate.summary import risk_summary
    from tabsafe.io import write_frame
    from tabsafe.model.hierarchy import Hierarchy
    from tabsafe.model.spec import KeySpec
    from tabsafe.tabulation import tabulate

    print("2. standard tables, every margin and subtotal (original counts: evaluation files)")
    print(f"   {'table':40s} {'cells':>9s} {'zeros':>9s} {'ones':>7s} {'twos':>7s} {'small %':>8s} {'secs':>6s}")
    tables = {}
    for spec in STANDARD_TABLES:
        hier = {v: Hierarchy.from_file(census_dir / "hierarchies" / f) for v, f in spec.hierarchies.items()}
        t0 = time.perf_counter()
        table = tabulate(md, spec.by, hierarchies=hier, where=spec.where, key=KeySpec(column="rkey"))
        secs = time.perf_counter() - t0
        tables[spec.name] = table
        write_frame(table.to_arrow(["count"]), tables_dir / f"{spec.name}.original.parquet", kind="evaluation")
        risk = risk_summary(table)
        summary["tables"][spec.name] = {"by": list(spec.by), "where": spec.where, "seconds": round(secs, 3), **risk}
        print(f"   {spec.name:40s} {risk['cells']:9,d} {risk['zeros']:9,d} {risk['ones']:7,d} {risk['twos']:7,d} "
              f"{100 * risk['small_cell_share']:7.2f}% {secs:6.2f}")
    return tables


def _protect(tables: dict[str, Any], rel: Path, protect_seed: int, summary: dict[str, Any]) -> None:
    """Step 3: the demo's protections (:data:`PROTECTIONS`), each release written to ``rel`` (published
    values only) and its figures, parameters and seed fingerprint added to ``summary``."""
    from tabsafe.io import release_arrow, write_frame
    from tabsafe.registry import build_method
    from tabsafe.seeds import fingerprint

    print("3. protection (releases/: published values only)")
    rel.mkdir()
    for table_name, method_name, params in PROTECTIONS:
        method = build_method(method_name, params)
        label = _label(method_name, params)
        t0 = time.perf_counter()
        result = method.protect(tables[table_name], seed=protect_seed)
        secs = time.perf_counter() - t0
        write_frame(release_arrow(result.release), rel / f"{table_name}.{label}.csv")
        figures = dict(result.report.figures)
        summary.setdefault("protections", {})[f"{table_name}.{label}"] = {
            "seconds": round(secs, 3), "params": method.params(),
            "seed_fingerprint": fingerprint(result.report.seed), **figures, **dict(result.report.private)}
        shown = ", ".join(f"{k} {v}" for k, v in list(figures.items())[:4])
        print(f"   {table_name:22s} {label:19s} {secs:6.2f} s  {shown}")


def run(args: argparse.Namespace) -> int:
    from tabsafe.io import OutputFolder, read_meta, write_json
    from tabsafe.model.microdata import Microdata
    from tabsafe.risk.rules import RiskRules, RuleThresholds, assess
    from tabsafe.synth import synth_census

    from tabsafe.seeds import draw_seed

    folder = OutputFolder(args.out, demo_entries())
    # the protections' seed is drawn, never the census seed everyone can read in the command line:
    # with it and a release an intruder replays the noise (issue #25); it goes to the private summary
    protect_seed = draw_seed()
    out = Path(args.out)
    start = time.perf_counter()
    with folder as tmp:
        census = synth_census(args.persons, args.seed, tmp / "census")
        print(f"1. synthetic census: {census.n_persons:,} persons, {census.n_households:,} households "
              f"({time.perf_counter() - start:.1f} s) -> {out / 'census'}/")
        codelists = read_meta(census.meta)
        md = Microdata.from_file(census.persons, codelists=codelists)
        tables_dir = tmp / "tables"
        tables_dir.mkdir()
        summary: dict[str, Any] = {"persons": census.n_persons, "census_seed": args.seed,
                                   "protection_seed": protect_seed, "tables": {}}
        tables = _standard_tables(md, census.directory, tables_dir, summary)

        rules = RiskRules(min_freq=3, thresholds=RuleThresholds(t_k_abs=3, t_y_abs=3, t_k_rel=99, t_y_rel=99, t_min=2),
                          coalition=1, zeros=1)
        print("   rules on area × age × citizenship (threshold 3, seed 003 rules t_abs=3 t_rel=99 t_min=2, "
              "1-coalitions, informative zeros):")
        risk = assess(tables["area_age_citizenship"], rules).summary()
        summary["risk_rules_area_age_citizenship"] = risk
        per_rule = {**risk["rules"], "unsafe": risk["unsafe"]}
        print("   " + ", ".join(f"{name} {v['cells']:,}" for name, v in per_rule.items()))

        _protect(tables, tmp / "releases", protect_seed, summary)
        # figures of the original tables (zeros, ones, twos) and the seeds: a private file
        write_json(tmp / "summary.json", summary, kind="evaluation")
        from tabsafe.evaluate.demo import write_demo_report

        t0 = time.perf_counter()
        write_demo_report(md, census.directory, tmp, seed=protect_seed,
                          params={method: params for _, method, params in reversed(PROTECTIONS)})
        print(f"4. evaluation report, every registered method side by side ({time.perf_counter() - t0:.1f} s) "
              f"-> {out / 'report.html'}")
    print(f"done in {time.perf_counter() - start:.1f} s. Outputs in {out}/: census/ (microdata, hierarchies), "
          "tables/ (original counts: evaluation files), releases/ (protected tables), summary.json and report.html "
          "(private: figures of the originals and the seeds)")
    print(f"report: {out / 'report.html'}")
    return 0
