"""The demo's whole release, its 7-variable hypercube included, suppressed and audited (issue #28).

``python bench/run.py release_hypercube`` (or ``python bench/bench_release_hypercube.py``): see
:func:`run`. The census and the tables are those of ``bench_release.py``, the hypercube put in.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from bench_release import _spec
from common import census

import tabsafe as ts
from tabsafe.errors import MethodError
from tabsafe.io import read_meta
from tabsafe.protect.suppression import CellSuppression
from tabsafe.release import ReleaseSpec, protect_release, tabulate_release


def run() -> dict:
    """The demo's whole release, the 7-variable hypercube included, suppressed with ``--mode
    hypercube`` (issue #28): the hypercube by moves, the five other tables together by the
    elimination, joined at the cells they share (``protect/suppression/cube_release.py``).

    * ``whole_process``: ``tabsafe protect --release`` on a release config of the six tables, as a
      user runs it (``/usr/bin/time -v``: wall, CPU, peak memory), its printed audit line;
    * ``in_process``: ``protect_release`` with the figures of the run: cells, interface cells,
      suppressed, the moves the area tables follow, the cells tied to the interface, the audit
      (every primary cell's proven interval at least its protection);
    * ``baseline``: the five other tables alone by the elimination (``--mode fast``), same run.
    """
    import resource
    import subprocess
    import sys
    import tempfile

    data = census()
    os.environ["TABSAFE_BENCH_HYPERCUBE"] = "1"
    spec = _spec(data.directory)
    out: dict = {"persons": data.n_persons, "rule": "threshold 0 < n < 3; zeros never suppressed"}
    with tempfile.TemporaryDirectory() as tmp:
        config = _write_config(spec, data, tmp)
        cmd = [sys.executable, "-m", "tabsafe.cli", "protect", "--release", str(config), "--method", "suppress",
               "--mode", "hypercube", "--min-freq", "3", "--out", f"{tmp}/release"]
        started = time.perf_counter()
        done = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True)
        wall = time.perf_counter() - started
        stats = dict(line.strip().rsplit(": ", 1) for line in done.stderr.splitlines() if ": " in line.strip())
        out["whole_process"] = {
            "exit": done.returncode, "wall_seconds": round(wall, 1),
            "cpu_seconds": round(float(stats.get("User time (seconds)", "nan"))
                                 + float(stats.get("System time (seconds)", "nan")), 1),
            "peak_mb": round(int(stats.get("Maximum resident set size (kbytes)", "0")) / 1024),
            "audit_line": next((line for line in done.stdout.splitlines() if "release audit" in line), None),
            "error": done.stderr.strip().splitlines()[0] if done.returncode else None,
            "files": sorted(p.name for p in (Path(tmp) / "release").iterdir()) if done.returncode == 0 else [],
        }
    md = ts.Microdata.from_file(data.persons, codelists=read_meta(data.meta, only=spec.variables))
    tables = tabulate_release(spec, md)
    wheres = [t.where for t in spec.tables]
    before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    try:
        joint = protect_release(tables, CellSuppression(min_freq=3, mode="hypercube"), names=spec.names,
                                wheres=wheres, same_codes=spec.same_codes)
    except MethodError as e:  # the outcome is the figure: a refusal is recorded, not hidden
        after = resource.getrusage(resource.RUSAGE_SELF)
        out["in_process"] = {"refused": str(e), "seconds": round(time.perf_counter() - started, 1),
                             "cpu_seconds": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1)}
        joint = None
    after = resource.getrusage(resource.RUSAGE_SELF)
    if joint is not None:
        out["in_process"] = _figures(joint, started, before, after)
    rest = [i for i, t in enumerate(spec.tables) if t.name != "hypercube"]
    started = time.perf_counter()
    alone = protect_release([tables[i] for i in rest], CellSuppression(min_freq=3), names=[spec.names[i] for i in rest],
                            wheres=[wheres[i] for i in rest], same_codes=spec.same_codes)
    out["baseline"] = {"tables": [spec.names[i] for i in rest], "mode": "fast",
                       "seconds": round(time.perf_counter() - started, 1),
                       "suppressed": int(alone.report.figures["suppressed"]),
                       "audit_passed": alone.audit is not None and alone.audit.passed}
    return out


def _figures(joint, started: float, before, after) -> dict:
    """The in-process figures of a suppressed release (see :func:`run`)."""
    audit = joint.audit
    proven = audit.interval_upper[audit.audited] - audit.interval_lower[audit.audited]
    figures, private = joint.report.figures, joint.report.private
    return {
        "seconds": round(time.perf_counter() - started, 1),
        "cpu_seconds": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1),
        "cells": figures["cells"], "interface_cells": figures["interface_cells"],
        "tables_by_moves": list(figures["tables_by_moves"]), "suppressed": figures["suppressed"],
        "primary": private["primary"], "secondary": private["secondary"],
        "secondary_value": private["secondary_value"], "moves_followed": private["moves_followed"],
        "tied_to_interface": private["tied_to_interface"], "hidden_to_follow": figures["hidden_to_follow"],
        "audit_passed": audit.passed, "primary_proven": int(audit.audited.sum()),
        "least_proven_width": float(proven.min()) if proven.size else None,
    }


def _write_config(spec: ReleaseSpec, data: object, folder: str) -> Path:
    """A release config of ``spec`` (what a user writes for ``tabsafe protect --release``)."""
    import yaml

    config = Path(folder) / "release.yaml"
    config.write_text(yaml.safe_dump({
        "data": str(data.persons), "meta": str(data.meta),
        "same_codes": [list(g) for g in spec.same_codes],
        "tables": [{"name": t.name, "by": list(t.by), "hierarchies": dict(t.hierarchy_files),
                    **({"where": t.where.to_text()} if t.where is not None else {})} for t in spec.tables],
    }))
    return config


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
