"""The memory models against the measured peak (issue #28): each job runs in a fresh process,
which samples its resident set while the method runs; the peak growth over the resident set
before the method is set beside the model's estimate (made before the work, from the table's
shape). The target: estimate within 2x of the measured peak growth.

Jobs (1.5M-person census, threshold 0 < n < 3):

* suppression, fast mode: area(region > area) x age x citizenship (26,796 cells) and
  area x age x activity x sex (80,388 cells);
* suppression, optimal mode (4 rounds: the integer program is built in the first) on the first;
* the demo's 7-variable hypercube (997,920 cells): the estimate only, and whether the default
  budget (half of this machine) refuses it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from common import HYPERCUBE, census

HERE = Path(__file__).resolve().parent

_CHILD = r"""
import gc, json, sys, threading, time, resource
sys.path.insert(0, {here!r})
from common import census
import tabsafe as ts
from tabsafe.io import read_meta
from tabsafe.protect.suppression import CellSuppression

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096
by, mode, rounds = {by!r}, {mode!r}, {rounds!r}
data = census()
md = ts.Microdata.from_file(data.persons, codelists=read_meta(data.meta))
hier = {{"area": ts.Hierarchy.from_file(data.directory / "hierarchies" / "area.hrc")}}
table = ts.tabulate(md, list(by), hierarchies={{k: v for k, v in hier.items() if k in by}})
method = CellSuppression(min_freq=3, mode=mode, work_limit=rounds)
estimate = method.memory_estimate(table)
gc.collect()
base = rss()
top = [base]
stop = threading.Event()
def sample():
    while not stop.is_set():
        top[0] = max(top[0], rss())
        time.sleep(0.005)
t = threading.Thread(target=sample, daemon=True)
t.start()
cpu = time.process_time()
started = time.perf_counter()
p = method.protect(table)
seconds = time.perf_counter() - started
cpu = time.process_time() - cpu
stop.set(); t.join()
print(json.dumps({{"cells": table.n_cells, "estimate_mb": round(estimate / 2**20, 1),
                  "peak_growth_mb": round((top[0] - base) / 2**20, 1), "base_mb": round(base / 2**20, 1),
                  "seconds": round(seconds, 2), "cpu_seconds": round(cpu, 2),
                  "suppressed": p.report.figures["suppressed"]}}))
"""


def _job(by: tuple[str, ...], mode: str, rounds: int = 4) -> dict:
    code = _CHILD.format(here=str(HERE), by=by, mode=mode, rounds=rounds)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    row = json.loads(out.stdout.strip().splitlines()[-1])
    row["ratio_estimate_to_peak"] = round(row["estimate_mb"] / max(row["peak_growth_mb"], 1e-9), 2)
    return row


def _hypercube() -> dict:
    import tabsafe as ts
    from tabsafe import memory
    from tabsafe.io import read_meta
    from tabsafe.protect.suppression import CellSuppression
    from tabsafe.protect.suppression.footprint import shape

    data = census()
    md = ts.Microdata.from_file(data.persons, codelists=read_meta(data.meta, only=HYPERCUBE))
    table = ts.tabulate(md, list(HYPERCUBE))
    s = shape(table)
    need = CellSuppression(min_freq=3).memory_estimate(table)
    return {"cells": s.cells, "support_entries": s.support_entries, "column": s.column,
            "estimate_gb": round(need / 2**30, 2), "default_budget_gb": round(memory.limit() / 2**30, 2),
            "refused_by_default": need > memory.limit()}


def run() -> dict:
    census()
    return {
        "area_age_citizenship_fast": _job(("area", "age", "citizenship"), "fast"),
        "area_age_activity_sex_fast": _job(("area", "age", "activity", "sex"), "fast"),
        "area_age_citizenship_optimal_4_rounds": _job(("area", "age", "citizenship"), "optimal", 4),
        "hypercube_estimate": _hypercube(),
    }
