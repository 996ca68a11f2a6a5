"""The cell perturbation family and additivity restoration at census scale (issue #15).

1. Whole processes, as a user runs them, on the full 7-variable hypercube of the 1.5M-person
   census (997,920 cells written, zeros included): ``tabsafe tabulate`` of the table against
   ``tabsafe protect --method M`` of the same table for each method — Barnardisation, the ABS
   perturbation (independent and consistent forms), the invariant stochastic perturbation,
   perturbation weights (tables of the weighted records; the chain also tabulates the true
   records for evaluation) and the cell key method followed by additivity restoration —
   interleaved, ``REPEAT`` runs each, median and best; the ratio of each to ``tabsafe tabulate``
   in the same run (target ≤ 1.5 for the cell-level methods: Barnardisation, ABS, stochastic).
2. Additivity after the cell key method (p-table D=5, V=3, js=2, as bench_ckm) on the 80K-cell
   area (with region subtotals) × age × activity × sex table, in one process: time, distance
   moved, the LP lower bound and gap, how far the published table was from additive (the sum of
   |margin − sum of its inner cells|) and the distance of the naive repair a user does (margins
   replaced by the sums of the published inner cells).

``python bench/run.py perturbation``; ``TABSAFE_BENCH_REPEAT`` sets the runs (default 3).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import HYPERCUBE, OUT, census

REPEAT = int(os.environ.get("TABSAFE_BENCH_REPEAT", "3"))
BIN = Path(sys.executable).parent

METHODS: dict[str, list[str]] = {
    "barnardisation": ["--method", "barnardisation", "--p", "0.2"],
    "abs_perturbation": ["--method", "abs-perturbation", "--x", "2"],
    "abs_perturbation_consistent": ["--method", "abs-perturbation", "--consistent"],
    "stochastic": ["--method", "stochastic"],
    "weights": ["--method", "weights"],
    "ckm_then_additivity": ["--method", "ckm,additivity", "--max-noise", "5", "--variance", "3", "--js", "2",
                            "--time-limit", "60"],
}
CELL_LEVEL = ("barnardisation", "abs_perturbation", "abs_perturbation_consistent", "stochastic")


def _run(cmd: list[str], cwd: Path) -> dict[str, float]:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr.read().decode() if proc.stderr else ''}")
    return {"seconds": elapsed, "peak_rss_mb": usage.ru_maxrss / 1024}


def _summary(runs: list[dict[str, float]]) -> dict[str, float]:
    secs = [r["seconds"] for r in runs]
    return {"median_seconds": round(statistics.median(secs), 3), "best_seconds": round(min(secs), 3),
            "peak_rss_mb": round(max(r["peak_rss_mb"] for r in runs), 1), "runs": len(runs)}


def whole_processes() -> dict:
    data = census()
    tabsafe = str(BIN / "tabsafe")
    by = ",".join(HYPERCUBE)
    out: dict = {"table": "×".join(HYPERCUBE), "cells_written": 997_920, "target_ratio_cell_level": 1.5}
    with tempfile.TemporaryDirectory(dir=OUT) as tmp_name:
        tmp = Path(tmp_name)
        # every command runs again over its own output: --force (tabsafe replaces no file unasked)
        tabulate = [tabsafe, "tabulate", str(data.persons), "--by", by, "--out", str(tmp / "t.parquet"), "--quiet",
                    "--force"]
        commands = {name: [tabsafe, "protect", str(data.persons), "--by", by, *args, "--seed", "1",
                           "--out", str(tmp / f"{name}.parquet"), "--quiet", "--force"]
                    for name, args in METHODS.items()}
        _run(tabulate, tmp)  # warm the file cache for every side
        runs: dict[str, list[dict[str, float]]] = {"tabulate": [], **{name: [] for name in commands}}
        for _ in range(REPEAT):  # interleaved: a slower moment of the machine hits every side alike
            runs["tabulate"].append(_run(tabulate, tmp))
            for name, cmd in commands.items():
                runs[name].append(_run(cmd, tmp))
        base = _summary(runs["tabulate"])
        out["tabsafe_tabulate"] = base
        for name in commands:
            s = _summary(runs[name])
            s["ratio_vs_tabulate"] = round(s["median_seconds"] / base["median_seconds"], 3)
            if name in CELL_LEVEL:
                s["within_target"] = s["ratio_vs_tabulate"] <= 1.5
            out[f"tabsafe_protect_{name}"] = s
    return out


def additivity_80k() -> dict:
    import tabsafe as ts
    from tabsafe.io import read_meta
    from tabsafe.model.margins import rollup
    from tabsafe.protect.additivity import restore_additivity
    from tabsafe.protect.cell_key_method import CellKeyMethod
    from tabsafe.protect.ptable import PTableParams, generate_ptable

    data = census()
    md = ts.Microdata.from_file(data.persons, codelists=read_meta(data.meta))
    area = ts.Hierarchy.from_file(data.directory / "hierarchies" / "area.hrc")
    ck = CellKeyMethod(ptable=generate_ptable(PTableParams(max_noise=5, variance=3, js=2)))
    table = ts.tabulate(md, ["area", "age", "activity", "sex"], hierarchies={"area": area}, key=ck.needs().key)
    published = ck.protect(table, seed=1).release.table
    dense = published.densify()
    z = dense.counts.astype(np.int64)
    inner = dense.leaf_mask
    ids, sums = rollup(dense.dimensions, dense.ids[inner], z[inner])
    naive = np.zeros(dense.n_cells, dtype=np.int64)
    naive[ids] = sums
    started = time.perf_counter()
    res = restore_additivity(published, time_limit=60)
    seconds = time.perf_counter() - started
    restored = res.cells.with_values(count=res.values)
    return {
        "table": "area(203, region subtotals) × age(22) × activity(6) × sex(3)",
        "cells": table.n_cells,
        "inner_cells_published_nonzero": int(np.count_nonzero(z[inner])),
        # margins replaced by the sums of the published inner cells (what users do by hand): also
        # how far the published table is from additive
        "naive_repair_distance": int(np.abs(naive - z).sum()),
        "seconds": round(seconds, 2),
        "distance": res.distance,
        "lp_lower_bound": res.lower_bound,
        "gap_percent": None if res.gap is None else round(100 * res.gap, 3),
        "status": res.status,
        "integer_programs": res.programs,
        "sweeps": res.sweeps,
        "cells_changed": int(np.count_nonzero(res.values != res.cells.counts)),
        "max_abs_change": int(np.abs(res.values - res.cells.counts).max()),
        "additive": bool(restored.densify().is_additive()),
        "notes": list(res.notes),
    }


def run() -> dict:
    return {"additivity_80k": additivity_80k(), "hypercube_whole_process": whole_processes()}
