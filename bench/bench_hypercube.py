"""Suppression of the demo's 7-variable census hypercube (issue #28), with the fast mode as the
baseline in the same run.

Table: region × sex × age × activity × occupation × education × citizenship with every margin
(997,920 cells) from the 1.5M-person benchmark census; primary cells by the threshold rule
0 < n < 3 (40,991); zeros never suppressed (the defaults of ``tabsafe protect --method suppress``).

* ``cli_hypercube``: ``tabsafe protect persons.parquet --by … --method suppress --mode hypercube
  --memory-limit 8GB`` as a user runs it (tabulation, suppression, the moves' check, the release
  and report written): wall and CPU seconds and peak memory of the whole process (``os.wait4``),
  the memory model's estimate, and the report's publishable figures.
* ``cli_fast_refused``: the same command in mode fast, the baseline: refused before any work by
  the memory model, with the estimate it gives and the time to the refusal.
* ``in_process``: the search and the moves' check alone (CPU seconds), the cells and value
  hidden, how many cells of each level (number of totals) are hidden; with
  ``TABSAFE_BENCH_AUDIT_SAMPLE=N``, an interval audit by linear programming
  (:func:`tabsafe.risk.intervals.feasibility_intervals`, independent of the moves) of N primary
  cells drawn at random: each interval must be at least as wide as its move says. Off by
  default: the suppressed cells form one component of about 158,000 cells, and 5 cells' programs
  had not finished after 17 minutes.
* ``area_age_citizenship``: on the 26,796-cell table of ``bench_suppression``, the hypercube mode
  beside the fast mode, both audited in full by linear programming: cells, value, CPU seconds.

Targets (issue #28): under 10 minutes and 8 GB for the hypercube, passing the audit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import HYPERCUBE, OUT, census

import tabsafe as ts
from tabsafe.io import read_meta
from tabsafe.protect.suppression import CellSuppression, CellSystem, Problem, Settings, secondary_suppression
from tabsafe.protect.suppression.footprint import hypercube_bytes, shape, suppression_bytes
from tabsafe.protect.suppression.hypercube import hypercube, verify
from tabsafe.risk.intervals import feasibility_intervals

BIN = Path(sys.executable).parent
AUDIT_SAMPLE = int(os.environ.get("TABSAFE_BENCH_AUDIT_SAMPLE", "0"))


def _measured(cmd: list[str], cwd: Path) -> dict[str, object]:
    """Wall, CPU and peak RSS of one whole process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    err = proc.stderr.read().decode() if proc.stderr else ""
    return {"seconds": round(time.perf_counter() - start, 2),
            "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
            "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
            "exit": os.waitstatus_to_exitcode(status),
            "stderr_last_line": err.strip().splitlines()[-1] if err.strip() else ""}


def _cube(directory: Path) -> ts.Table:
    md = ts.Microdata.from_file(directory / "persons.parquet", codelists=read_meta(directory / "meta.yaml"))
    return ts.tabulate(md, list(HYPERCUBE)).densify()


def _small(directory: Path) -> ts.Table:
    md = ts.Microdata.from_file(directory / "persons.parquet", codelists=read_meta(directory / "meta.yaml"))
    area = ts.Hierarchy.from_file(directory / "hierarchies" / "area.hrc")
    return ts.tabulate(md, ["area", "age", "citizenship"], hierarchies={"area": area}).densify()


def _pattern(table: ts.Table, suppressed: np.ndarray, primary: np.ndarray) -> dict[str, int]:
    counts = np.asarray(table.counts)
    secondary = suppressed & ~primary
    return {"secondary_cells": int(secondary.sum()), "secondary_value": int(counts[secondary].sum()),
            "zero_cells_hidden": int((suppressed & (counts == 0)).sum())}


def _in_process(table: ts.Table) -> dict[str, object]:
    counts = np.asarray(table.counts)
    primary = (counts > 0) & (counts < 3)
    problem = Problem.build(CellSystem.of_table(table), primary, Settings(mode="hypercube"))
    cpu = time.process_time()
    suppressed, moves = hypercube(problem)
    search = time.process_time() - cpu
    cpu = time.process_time()
    width = verify(problem, suppressed, moves)
    check = time.process_time() - cpu
    required = problem.required[moves.primary]
    out: dict[str, object] = {
        "cells": table.n_cells, "primary_cells": int(primary.sum()),
        "search_cpu_seconds": round(search, 2), "check_cpu_seconds": round(check, 2),
        "moves_verified": int((width >= required - 1e-9).sum()),
        "cells_per_move_median": float(np.median(np.diff(moves.ptr))),
        **_pattern(table, suppressed, primary),
    }
    totals = np.zeros(table.n_cells, dtype=np.int64)
    for axis, d in enumerate(table.dimensions):
        inner = np.array([d.hierarchy.is_leaf(c) for c in d.hierarchy.order])
        totals += ~inner[np.asarray(table.positions(axis))]
    out["hidden_by_level"] = {
        str(k): {"non_zero": int(((counts > 0) & (totals == k)).sum()), "primary": int((primary & (totals == k)).sum()),
                 "hidden": int((suppressed & (totals == k)).sum())}
        for k in range(int(totals.max()) + 1)
    }
    if AUDIT_SAMPLE == 0:
        return out
    rng = np.random.default_rng(28)
    sample = rng.choice(moves.primary.size, size=min(AUDIT_SAMPLE, moves.primary.size), replace=False)
    targets = np.zeros(table.n_cells, dtype=bool)
    targets[moves.primary[sample]] = True
    cpu = time.process_time()
    res = feasibility_intervals(problem.A, problem.values, suppressed, lower=problem.lower, targets=targets)
    lp = (res.upper - res.lower)[moves.primary[sample]]
    out["lp_audit_sample"] = {
        "primary_cells": int(sample.size), "cpu_seconds": round(time.process_time() - cpu, 2),
        "narrower_than_required": int((lp < required[sample] - 1e-7).sum()),
        "narrower_than_the_move": int((lp < width[sample] - 1e-7).sum()),
        "median_width": float(np.median(lp)),
    }
    return out


def _small_table(table: ts.Table) -> dict[str, object]:
    counts = np.asarray(table.counts)
    primary = (counts > 0) & (counts < 3)
    out: dict[str, object] = {"cells": table.n_cells, "primary_cells": int(primary.sum())}
    for mode in ("fast", "hypercube"):
        cpu = time.process_time()
        res = secondary_suppression(table, primary, Settings(mode=mode))
        seconds = time.process_time() - cpu
        audit = feasibility_intervals(CellSystem.of_table(table).relations, counts.astype(float), res.suppressed,
                                      lower=np.ones(table.n_cells), targets=primary)
        width = (audit.upper - audit.lower)[primary]
        out[mode] = {"cpu_seconds": round(seconds, 2), **_pattern(table, res.suppressed, primary),
                     "lp_audit_narrow": int((width < 1 - 1e-7).sum())}
    return out


def run() -> dict:
    data = census()
    directory = data.directory
    tabsafe = str(BIN / "tabsafe")
    table = _cube(directory)
    s = shape(table)
    results: dict[str, object] = {
        "persons": data.n_persons if data.n_persons > 0 else None,
        "memory_model_mb": {
            "hypercube": round(hypercube_bytes(s) / 2**20, 1),
            "fast": round(suppression_bytes(s, zeros_published=True, optimal=False) / 2**20, 1),
        },
        "target_seconds": 600, "target_peak_rss_mb": 8192,
    }
    with tempfile.TemporaryDirectory(dir=OUT) as tmp_name:
        tmp = Path(tmp_name)
        base = [tabsafe, "protect", str(data.persons), "--by", ",".join(HYPERCUBE), "--method", "suppress",
                "--min-freq", "3", "--memory-limit", "8GB", "--quiet"]
        refused = _measured([*base, "--out", str(tmp / "fast.csv")], tmp)
        results["cli_fast_refused"] = refused
        cube = _measured([*base, "--mode", "hypercube", "--out", str(tmp / "cube.parquet"),
                          "--report", str(tmp / "report.json")], tmp)
        if cube["exit"] == 0:
            cube["report_figures"] = json.loads((tmp / "report.json").read_text()).get("figures")
        results["cli_hypercube"] = cube
    results["in_process"] = _in_process(table)
    results["area_age_citizenship"] = _small_table(_small(directory))
    assert CellSuppression(mode="hypercube").memory_estimate(table) == hypercube_bytes(s)
    return results


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
