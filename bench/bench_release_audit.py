"""The release audit of rounded releases (issue #28: a 6,048-cell rounded release in under 30 s,
fast enough for 100,000 cells).

Census: the 1.5M-person synthetic census, seed 1, with 69 areas (``area × sex × age`` with the
area and age-band hierarchies is then 72 × 3 × 28 = 6,048 cells) and with the default 200 areas
(bench/common.py). Releases, written by ``tabsafe protect --release`` with base 3:

* ``area_sex_age`` alone, and with ``area × citizenship`` (sharing the area totals);
* ``controlled-round`` (the published values are an additive table: moves from it) and
  ``round --mode random`` (each table rounded on its own: the values add up to no table, the
  moves start from a central feasible table, :func:`tabsafe.release.audit.central_point`).

Each is audited by a whole process, ``tabsafe audit --release DIR/release.yaml`` (wall, CPU
user+sys and max RSS from ``/usr/bin/time``); the exit status says whether cells were exposed.
Baseline in the same run: the programs alone (``audit_release(..., shortcuts=False)``, the path
before issue #28: spread programs and two programs per cell not yet wide enough) beside the fast
path in one process, on the 69-area randomly rounded releases, with the exposed cells compared.
``TABSAFE_BENCH_DEMO=1`` adds the demo's area × age × sex table rounded with area × age ×
citizenship (200 areas, age bands on both: 45,472 cells), and, randomly rounded, those two with
area × age × activity, area × occupation × sex and area × education × sex (87,290 cells).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml
from common import OUT, PERSONS

import numpy as np

from tabsafe.synth import synth_census

TABSAFE = str(Path(sys.executable).with_name("tabsafe"))


def _census(areas: int) -> Path:
    directory = OUT / f"census-{PERSONS}-a{areas}"
    if not (directory / "persons.parquet").is_file():
        OUT.mkdir(exist_ok=True)
        synth_census(PERSONS, 1, directory, n_areas=areas)
    return directory


#: a whole process stopped past this many seconds (reported as such)
TIMEOUT = float(os.environ.get("TABSAFE_BENCH_AUDIT_TIMEOUT", "900"))


def _timed(argv: list[str]) -> dict:
    """A whole process: wall seconds, CPU (user + sys) and max RSS, exit status; a process still
    running after :data:`TIMEOUT` seconds is stopped and reported as timed out."""
    started = time.perf_counter()
    # its own process group: on a timeout the audit itself is stopped, not only /usr/bin/time
    proc = subprocess.Popen(["/usr/bin/time", "-f", "TIME %U %S %M", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"wall_seconds": round(time.perf_counter() - started, 2), "status": "timed out", "timeout_s": TIMEOUT}
    out = subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)
    wall = time.perf_counter() - started
    line = [x for x in out.stderr.splitlines() if x.startswith("TIME ")][-1].split()
    return {"wall_seconds": round(wall, 2), "cpu_seconds": round(float(line[1]) + float(line[2]), 2),
            "max_rss_mb": round(int(line[3]) / 1024, 1), "status": out.returncode,
            "said": [x for x in out.stdout.splitlines() if x.startswith(("release audit", "cells narrower"))]}


def _release(census: Path, tables: list[dict], method: list[str], name: str) -> Path:
    folder = OUT / "release-audit" / name
    if (folder / "release.yaml").is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    config = folder.parent / f"{name}.config.yaml"
    config.write_text(yaml.safe_dump({
        "data": str(census / "persons.parquet"),
        "hierarchies": {"area": str(census / "hierarchies" / "area.hrc"), "age": str(census / "hierarchies" / "age.yaml")},
        "tables": tables}))
    subprocess.run([TABSAFE, "protect", "--release", str(config), "--method", *method, "--base", "3", "--seed", "5",
                    "--out", str(folder), "--quiet"], check=True)
    return folder


def _in_process(folder: Path) -> dict:
    """The fast path and the programs alone, one after the other in this process (CPU seconds)."""
    from tabsafe.cli.release import _published_release
    from tabsafe.release.audit import audit_release, published_bounds

    ns = argparse.Namespace(release=[str(folder / "release.yaml")], hierarchy=[], same_codes=[], base=None,
                            suppressed_min=None)
    cells, published, bases, smin, _ = _published_release(ns)
    lo, hi = published_bounds(cells, published, bases=bases, suppressed_min=smin)
    out: dict = {"cells": cells.n_cells}
    found = {}
    for label, shortcuts in (("fast", True), ("baseline_programs_only", False)):
        cpu = time.process_time()
        wall = time.perf_counter()
        res = audit_release(cells, lo, hi, required=1.0, published=published, shortcuts=shortcuts)
        out[label] = {"cpu_seconds": round(time.process_time() - cpu, 2),
                      "wall_seconds": round(time.perf_counter() - wall, 2), "exposed": len(res.exposed)}
        found[label] = [(e.cell, e.lower, e.upper) for e in res.exposed]
    a, b = found["fast"], found["baseline_programs_only"]
    out["same_exposed_cells"] = [c for c, _, _ in a] == [c for c, _, _ in b] and all(
        np.isclose(x[1], y[1], atol=1e-6) and np.isclose(x[2], y[2], atol=1e-6) for x, y in zip(a, b))
    out["speedup_cpu"] = round(out["baseline_programs_only"]["cpu_seconds"] / max(out["fast"]["cpu_seconds"], 1e-9), 1)
    return out


def run() -> dict:
    small = _census(69)
    ass = {"name": "area_sex_age", "by": ["area", "sex", "age"]}
    ac = {"name": "area_citizenship", "by": ["area", "citizenship"]}
    out: dict = {"persons": PERSONS, "base": 3, "releases": {}}
    jobs = [("a69_area_sex_age", small, [ass]), ("a69_area_sex_age+area_citizenship", small, [ass, ac]),
            ("a200_area_sex_age+area_citizenship", _census(200), [ass, ac])]
    demo = [{"name": "area_age_sex", "by": ["area", "age", "sex"]},
            {"name": "area_age_citizenship", "by": ["area", "age", "citizenship"]}]
    if os.environ.get("TABSAFE_BENCH_DEMO") == "1":
        jobs.append(("a200_demo_area_age_sex+area_age_citizenship", _census(200), demo))
        # five tables, 87,290 release cells: the "fast enough for a 100,000-cell release"
        jobs.append(("a200_100k_five_tables", _census(200), [
            *demo, {"name": "area_age_activity", "by": ["area", "age", "activity"]},
            {"name": "area_occupation_sex", "by": ["area", "occupation", "sex"]},
            {"name": "area_education_sex", "by": ["area", "education", "sex"]}]))
    for name, census, tables in jobs:
        # the five tables by random rounding only: each table rounded on its own, the hard case
        for method in (["controlled-round"], ["round", "--mode", "random"])[1 if "100k" in name else 0:]:
            label = f"{name}/{method[0] if len(method) == 1 else 'random-round'}"
            folder = _release(census, tables, method, label.replace("/", "_").replace("+", "_"))
            row = {"cli": _timed([TABSAFE, "audit", "--release", str(folder / "release.yaml")])}
            if name.startswith("a69") and method[0] == "round":
                row["in_process"] = _in_process(folder)
            out["releases"][label] = row
    return out


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=1))
