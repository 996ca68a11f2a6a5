"""Additivity over a release in one program vs each table alone (issue #31).

The release of the issue: area × age × sex, area × age × citizenship and area × sex ×
citizenship of a synthetic census (default 40,000 persons, 20 areas, seed 1 — ``tabsafe synth
--persons 40000 --areas 20 --seed 1``; ``TABSAFE_BENCH_R31_PERSONS`` and ``..._AREAS`` change
it), protected with the cell key method (max noise 5, variance 3, js 2), then additivity:

* ``release``: ``Additivity.protect_release`` (one search over the release's finest cells, values
  1..js kept out): distance ``Σ|a − z|`` over the release's distinct cells and summed over the
  three files, the LP bound of the release's relations, status, CPU and wall seconds; checked:
  shared cells published differently, tables not additive, values in 1..js;
* ``separate``: each table restored alone (``restore_additivity`` with the same js): the same
  figures per table and in total — each table is additive and free of 1..js, but the shared
  cells differ between files;
* ``separate_js0``: each table alone without the floor (before this issue's change): how many
  values in 1..js it publishes;
* ``process``: the whole command ``tabsafe protect --release … --method ckm,additivity`` (CPU
  user+sys of the child, wall, peak RSS).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

from tabsafe.io import read_meta
from tabsafe.model.microdata import Microdata
from tabsafe.protect.additivity import Additivity, restore_additivity
from tabsafe.protect.cell_key_method import CellKeyMethod
from tabsafe.release import ReleaseSpec, protect_release, tabulate_release
from tabsafe.synth import synth_census

PERSONS = int(os.environ.get("TABSAFE_BENCH_R31_PERSONS", "40000"))
AREAS = int(os.environ.get("TABSAFE_BENCH_R31_AREAS", "20"))
CKM = {"max_noise": 5, "variance": 3, "js": 2}
TABLES = [{"name": "area_age_sex", "by": ["area", "age", "sex"]},
          {"name": "area_age_citizenship", "by": ["area", "age", "citizenship"]},
          {"name": "area_sex_citizenship", "by": ["area", "sex", "citizenship"]}]


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _timed(fn):  # type: ignore[no-untyped-def]
    c0, w0 = _cpu(), time.perf_counter()
    out = fn()
    return out, {"cpu_seconds": round(_cpu() - c0, 2), "wall_seconds": round(time.perf_counter() - w0, 2)}


def _in_1_js(values: list[np.ndarray]) -> int:
    return int(sum(((v >= 1) & (v <= CKM["js"])).sum() for v in values))


def _differ(cells, values: list[np.ndarray]) -> int:  # type: ignore[no-untyped-def]
    first = np.full(cells.n_cells, np.nan)
    bad = np.zeros(cells.n_cells, dtype=bool)
    for v, rows in zip(values, cells.cells):
        seen = ~np.isnan(first[rows])
        bad[rows[seen & (first[rows] != v)]] = True
        first[rows[~seen]] = v[~seen]
    return int(bad.sum())


def run() -> dict:
    work = Path(tempfile.mkdtemp(prefix="bench-r31-"))
    census = synth_census(PERSONS, 1, work / "census", n_areas=AREAS)
    config = work / "release.yaml"
    config.write_text(yaml.safe_dump({
        "data": "census/persons.parquet",
        "hierarchies": {"area": "census/hierarchies/area.hrc", "age": "census/hierarchies/age.yaml"},
        "tables": TABLES}))
    spec = ReleaseSpec.from_yaml(config)
    md = Microdata.from_file(census.persons, codelists=read_meta(census.meta, only=spec.variables))
    ckm = CellKeyMethod(**CKM)
    tables = tabulate_release(spec, md, key=ckm.needs().key)
    noisy = protect_release(tables, ckm, names=spec.names)
    cells = noisy.cells
    z_tables = [p.release.table for p in noisy.protections]
    out: dict = {"persons": PERSONS, "areas": AREAS, "ckm": CKM, "cells": cells.n_cells,
                 "shared_cells": int((cells.shared() > 1).sum()), "tables": {n: t.n_cells for n, t in zip(spec.names, tables)}}
    # the release in one program
    method = Additivity(js=CKM["js"])
    joint, cost = _timed(lambda: protect_release(z_tables, method, names=spec.names))
    values = [np.asarray(p.release.table.counts) for p in joint.protections]
    f = joint.report.figures
    out["release"] = {"distance": f["distance"], "distance_in_files": int(sum(
        np.abs(v - np.asarray(t.counts)).sum() for v, t in zip(values, z_tables))),
        "lower_bound": f["lower_bound"], "gap": f["gap"], "status": f["status"], **cost,
        "shared_cells_differing": _differ(cells, [v.astype(float) for v in values]),
        "tables_not_additive": sum(not p.release.table.is_additive() for p in joint.protections),
        "values_in_1_js": _in_1_js(values)}
    # each table alone, the same js
    for key, js in (("separate", CKM["js"]), ("separate_js0", 0)):
        per, vals, total = {}, [], {"cpu_seconds": 0.0, "wall_seconds": 0.0}
        for name, t in zip(spec.names, z_tables):
            res, c = _timed(lambda t=t: restore_additivity(t, js=js))
            grid = np.zeros(t.n_cells, dtype=np.int64)
            grid[res.cells.ids] = res.values
            vals.append(grid)
            per[name] = {"distance": res.distance, "lower_bound": res.lower_bound, "status": res.status, **c}
            for k in total:
                total[k] = round(total[k] + c[k], 2)
        out[key] = {"tables": per, "distance_in_files": int(sum(p["distance"] for p in per.values())),
                    "lower_bound_in_files": sum(p["lower_bound"] or 0 for p in per.values()), **total,
                    "shared_cells_differing": _differ(cells, [v.astype(float) for v in vals]),
                    "values_in_1_js": _in_1_js(vals)}
    # the whole command
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    w0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "tabsafe.cli", "protect", "--release", str(config), "--method",
                    "ckm,additivity", "--max-noise", "5", "--variance", "3", "--js", "2", "--out",
                    str(work / "out"), "--quiet"], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out["process"] = {"wall_seconds": round(time.perf_counter() - w0, 2),
                      "cpu_seconds": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 2),
                      "max_rss_mb": round(after.ru_maxrss / 1024, 1)}
    return out


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
