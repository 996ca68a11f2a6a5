"""A release of the demo's census tables, suppressed as one release vs each table alone (issue #13).

Census: the 1.5M-person synthetic census (bench/common.py). Tables: the demo's standard tables
(``tabsafe demo``) with their hierarchies and filter; region, area and small area name the same
populations at three levels (``same_codes``), so the tables share margins across geography
levels as well as within a level. Rule: threshold 0 < n < 3, zeros never suppressed, fast mode.

* ``release``: ``protect_release`` — secondary suppression over the union of the tables' cells
  and relations, then the release audit of what is published (must pass);
* ``separate``: each table protected alone (``CellSuppression.protect``), then the same release
  audit run on the separately protected tables together: how many primary cells an intruder
  holding all the tables pins or narrows below the protection level, and how many cells in all.

``run_rounding`` (also part of ``run``; alone: ``python bench/bench_release.py rounding``):
controlled rounding (base 3, zero-restricted, default work limit) of two of the demo's tables
sharing their area × age margin, area_age_sex and area_age_citizenship:

* ``release``: ``protect_release`` with ``controlled-round`` — one program over the union of the
  tables' cells and relations: seconds, status, objective ``Σ|z − a|`` over the distinct
  release cells and summed over the two files, lower bound, gap, work; checked: every shared
  cell one value, each table additive;
* ``separate``: each table rounded alone (``ControlledRounding.protect``): seconds, objectives,
  and how many shared cells the two files publish with different values.

Suppression: both report seconds, cells suppressed (distinct release cells, and summed over the tables' files)
and, for the release, how many shared cells there are. The 7-variable hypercube is left out by
default (``TABSAFE_BENCH_HYPERCUBE=1`` puts it in): the elimination does not fit it (the memory
model refuses it before any work); ``bench_release_hypercube.py`` runs the whole release with
``--mode hypercube`` (the hypercube by moves, the other tables by the elimination).
"""

from __future__ import annotations

import os
import time

import numpy as np
from common import census

import tabsafe as ts
from tabsafe.io import read_meta
from tabsafe.protect.controlled_rounding import ControlledRounding
from tabsafe.protect.suppression import CellSuppression
from tabsafe.release import ReleaseCells, ReleaseSpec, ReleaseTable, protect_release, tabulate_release
from tabsafe.release.audit import audit_release, published_bounds

#: the demo's standard tables (name, spanning variables, hierarchy files, filter)
DEMO_TABLES = (
    ("hypercube", ("region", "sex", "age", "activity", "occupation", "education", "citizenship"), {}, None),
    ("area_age_sex", ("area", "age", "sex"), {"area": "area.hrc", "age": "age.yaml"}, None),
    ("small_area_sex", ("small_area", "sex"), {"small_area": "small_area.hrc"}, None),
    ("area_age_activity_sex", ("area", "age", "activity", "sex"), {"area": "area.hrc"}, None),
    ("area_age_citizenship", ("area", "age", "citizenship"), {"area": "area.hrc"}, None),
    ("region_occupation_education_employed", ("region", "occupation", "education"), {}, "activity = 'EMP'"),
)
SAME_CODES = (("region", "area", "small_area"),)


def _spec(directory) -> ReleaseSpec:
    with_hypercube = os.environ.get("TABSAFE_BENCH_HYPERCUBE") == "1"
    tables = []
    for name, by, files, where in DEMO_TABLES:
        if name == "hypercube" and not with_hypercube:
            continue
        paths = {v: str(directory / "hierarchies" / f) for v, f in files.items()}
        tables.append(ReleaseTable(name=name, by=by, hierarchies={v: ts.Hierarchy.from_file(p) for v, p in paths.items()},
                                   hierarchy_files=paths, where=where))
    return ReleaseSpec(tables=tuple(tables), same_codes=SAME_CODES, source="bench")


def _suppressed(protections) -> int:
    return int(sum((p.release.table.column("status") == "suppressed").sum() for p in protections))


def run() -> dict:
    data = census()
    spec = _spec(data.directory)
    md = ts.Microdata.from_file(data.persons, codelists=read_meta(data.meta, only=spec.variables))
    started = time.perf_counter()
    tables = tabulate_release(spec, md)
    tab_seconds = time.perf_counter() - started
    method = CellSuppression(min_freq=3)
    wheres = [t.where for t in spec.tables]
    out: dict = {
        "persons": data.n_persons,
        "tables": {t.name: {"by": list(t.by), "where": t.where.to_text() if t.where else None,
                            "cells": tab.n_cells} for t, tab in zip(spec.tables, tables)},
        "left_out": [] if any(t.name == "hypercube" for t in spec.tables) else ["hypercube"],
        "rule": "threshold 0 < n < 3; zeros never suppressed; fast mode",
        "tabulate_seconds": round(tab_seconds, 2),
    }
    started = time.perf_counter()
    joint = protect_release(tables, method, names=spec.names, wheres=wheres, same_codes=spec.same_codes)
    joint_seconds = time.perf_counter() - started
    cells = joint.cells
    out["release"] = {
        "seconds": round(joint_seconds, 2),
        "cells": cells.n_cells,
        "shared_cells": int((cells.shared() > 1).sum()),
        "suppressed_cells": int(joint.report.figures["suppressed"]),
        "suppressed_in_files": _suppressed(joint.protections),
        "republished": int(joint.report.figures["republished"]),
        "audit_passed": joint.audit is not None and joint.audit.passed,
        "primary_cells": int(joint.report.private["primary"]),
    }
    started = time.perf_counter()
    separate = []
    seconds = {}
    for name, t in zip(spec.names, tables):
        t0 = time.perf_counter()
        separate.append(method.protect(t))
        seconds[name] = round(time.perf_counter() - t0, 2)
    sep_seconds = time.perf_counter() - started
    # the intruder holds every separately protected table at once
    together = ReleaseCells.build(tables, names=spec.names, wheres=wheres, same_codes=spec.same_codes)
    published = [np.asarray(p.release.table.column("count"), dtype=np.float64) for p in separate]
    lo, hi = published_bounds(together, published, suppressed_min=1.0)
    primary = np.zeros(together.n_cells, dtype=bool)
    suppressed = np.zeros(together.n_cells, dtype=bool)
    for p, rows in zip(separate, together.cells):
        primary[rows[np.asarray(p.evaluation.column("reason")) == "primary"]] = True
        suppressed[rows[np.asarray(p.release.table.column("status")) == "suppressed"]] = True
    started = time.perf_counter()
    audit = audit_release(together, lo, hi, required=1.0, published=published)
    audit_seconds = time.perf_counter() - started
    exposed = audit.exposed_mask()
    out["separate"] = {
        "seconds": round(sep_seconds, 2),
        "seconds_per_table": seconds,
        "suppressed_cells": int(suppressed.sum()),
        "suppressed_in_files": _suppressed(separate),
        "cells_hidden_in_one_table_published_in_another": int((suppressed & (hi - lo <= 1e-9)).sum()),
        "primary_cells_exposed": int((exposed & primary).sum()),
        "cells_exposed": int(exposed.sum()),
        "audit_seconds": round(audit_seconds, 2),
    }
    out["rounding"] = run_rounding()
    return out


#: the tables of the rounding benchmark (they share area × age)
ROUNDED_TABLES = ("area_age_sex", "area_age_citizenship")


def run_rounding() -> dict:
    """Controlled rounding of a release vs each table alone (module docstring)."""
    import dataclasses

    data = census()
    spec = _spec(data.directory)
    spec = dataclasses.replace(spec, tables=tuple(t for t in spec.tables if t.name in ROUNDED_TABLES))
    md = ts.Microdata.from_file(data.persons, codelists=read_meta(data.meta, only=spec.variables))
    tables = tabulate_release(spec, md)
    method = ControlledRounding(base=3)
    started = time.perf_counter()
    joint = protect_release(tables, method, names=spec.names, same_codes=spec.same_codes)
    joint_seconds = time.perf_counter() - started
    cells = joint.cells
    z = cells.combine("count")
    files = [np.asarray(p.release.table.column("count"), dtype=np.int64) for p in joint.protections]
    value = np.full(cells.n_cells, -1, dtype=np.int64)
    for v, rows in zip(files, cells.cells):
        assert ((value[rows] == -1) | (value[rows] == v)).all(), "a shared cell has two values"
        value[rows] = v
    assert all(p.release.table.is_additive() for p in joint.protections)
    figures, private = joint.report.figures, joint.report.private
    out: dict = {
        "persons": data.n_persons,
        "tables": {t.name: {"by": list(t.by), "cells": tab.n_cells} for t, tab in zip(spec.tables, tables)},
        "base": 3, "steps": 0, "work_limit": method.work_limit,
        "release": {
            "seconds": round(joint_seconds, 2),
            "cells": cells.n_cells,
            "shared_cells": int((cells.shared() > 1).sum()),
            "status": figures["status"],
            "first_solution_seconds": figures["first_solution_seconds"],
            "work": figures["work"],
            "stopped_by": figures["stopped_by"],
            "objective": int(private["objective"]),
            "objective_in_files": int(sum(np.abs(v - np.asarray(t.counts)).sum()
                                          for v, t in zip(files, cells.tables))),
            "lower_bound": private["lower_bound"],
            "gap": private["gap"],
        },
    }
    started = time.perf_counter()
    separate, seconds = [], {}
    for name, t in zip(spec.names, tables):
        t0 = time.perf_counter()
        separate.append(method.protect(t))
        seconds[name] = round(time.perf_counter() - t0, 2)
    sep_seconds = time.perf_counter() - started
    first = np.full(cells.n_cells, -1, dtype=np.int64)
    disagree = np.zeros(cells.n_cells, dtype=bool)
    for p, rows in zip(separate, cells.cells):
        v = np.asarray(p.release.table.grid("count", fill=0), dtype=np.int64)
        disagree[rows] |= (first[rows] != -1) & (first[rows] != v)
        first[rows] = np.where(first[rows] == -1, v, first[rows])
    out["separate"] = {
        "seconds": round(sep_seconds, 2),
        "seconds_per_table": seconds,
        "objective_per_table": {n: int(p.report.private["objective"]) for n, p in zip(spec.names, separate)},
        "objective_in_files": int(sum(p.report.private["objective"] for p in separate)),
        "status_per_table": {n: p.report.figures["status"] for n, p in zip(spec.names, separate)},
        "shared_cells_that_disagree": int(disagree.sum()),
    }
    return out


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(run_rounding() if sys.argv[1:] == ["rounding"] else run(), indent=2))
