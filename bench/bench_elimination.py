"""The fast mode's elimination compiled (``protect/suppression/_gauss.c``) against its Python
reference (``gauss_reference``), measured in the same run (issue #28, second pass).

Table: area(200, region > area) × age(21) × citizenship(5), all margins (26,796 cells), from the
benchmark census; primary cells 0 < n < 3, zeros never suppressed. For each path: the fast
mode's whole run (elimination + interval audit and repairs) and the first elimination alone,
CPU seconds (``time.process_time``) beside wall seconds, and the pattern (cells, value). The two
paths must give the same pattern.

``python bench/bench_elimination.py compiled|reference [hypercube]`` runs one path in its own
process (for ``/usr/bin/time -v``: CPU and peak RSS of the whole process); the census is
``TABSAFE_BENCH_CENSUS`` when set (a directory written by ``synth_census``), else bench/out's.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from common import HYPERCUBE, census

import tabsafe as ts
from tabsafe.io import read_meta
from tabsafe.progress import JsonLines, reporting
from tabsafe.protect.suppression import CellSystem, Problem, Settings, elimination, secondary_suppression


def _table(hypercube: bool = False) -> ts.Table:
    directory = Path(os.environ["TABSAFE_BENCH_CENSUS"]) if "TABSAFE_BENCH_CENSUS" in os.environ else census().directory
    md = ts.Microdata.from_file(directory / "persons.parquet", codelists=read_meta(directory / "meta.yaml"))
    if hypercube:
        return ts.tabulate(md, list(HYPERCUBE)).densify()
    area = ts.Hierarchy.from_file(directory / "hierarchies" / "area.hrc")
    return ts.tabulate(md, ["area", "age", "citizenship"], hierarchies={"area": area}).densify()


def _timed(fn):  # noqa: ANN001, ANN202
    cpu, wall = time.process_time(), time.perf_counter()
    out = fn()
    return out, round(time.process_time() - cpu, 2), round(time.perf_counter() - wall, 2)


def one_path(table: ts.Table, path: str, whole: bool = True) -> dict:
    """The elimination alone, then (``whole``) the fast mode, on the ``compiled`` or the
    ``reference`` path."""
    counts = np.asarray(table.counts)
    primary = (counts > 0) & (counts < 3)
    saved = elimination._compiled
    if path == "reference":
        elimination._compiled = None
    try:
        problem = Problem.build(CellSystem.of_table(table), primary, Settings(mode="fast"))
        first, cpu, wall = _timed(lambda: elimination.gauss(problem, np.zeros(table.n_cells, dtype=bool)))
        out = {"cells": table.n_cells, "primary_cells": int(primary.sum()),
               "elimination": {"cpu_seconds": cpu, "seconds": wall, "secondary_cells": int(first.sum())}}
        if whole:
            res, cpu, wall = _timed(lambda: secondary_suppression(table, primary, Settings(mode="fast")))
            secondary = res.suppressed & ~primary
            out["fast"] = {"cpu_seconds": cpu, "seconds": wall, "secondary_cells": int(secondary.sum()),
                           "secondary_value": int(counts[secondary].sum()),
                           "audit_rounds": res.figures["audit_rounds"], "pattern": res.suppressed}
    finally:
        elimination._compiled = saved
    return out


def run() -> dict:
    table = _table()
    compiled = one_path(table, "compiled")
    reference = one_path(table, "reference")
    same = bool(np.array_equal(compiled["fast"].pop("pattern"), reference["fast"].pop("pattern")))
    return {"table": "area(200, region>area) x age(21) x citizenship(5), all margins",
            "compiled": compiled, "reference": reference, "same_pattern": same,
            "elimination_cpu_speedup": round(reference["elimination"]["cpu_seconds"]
                                             / max(compiled["elimination"]["cpu_seconds"], 1e-3), 1)}


if __name__ == "__main__":
    hyper = "hypercube" in sys.argv[2:]
    with reporting(JsonLines(sys.stderr)):  # the elimination's progress (basis entries) on stderr
        result = one_path(_table(hyper), sys.argv[1], whole=not hyper)
    result.get("fast", {}).pop("pattern", None)
    print(json.dumps(result, indent=2))
