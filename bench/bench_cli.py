"""Whole processes, as a user runs them: `tabsafe …` against a bare DuckDB process in the same run.

* `tabsafe tabulate` and `tabsafe protect --method ckm --ptable FILE` of the 7-variable hypercube
  from the 1.5M-person census (997,920 cells written, zeros included), each against a whole-process
  bare DuckDB `COPY (SELECT …, count(*) … GROUP BY CUBE (…)) TO … (FORMAT parquet)` (which writes only
  the 188K non-empty cells); target ratio ≤ 1.5. Also `tabsafe tabulate --zero-cells omit`, which
  writes the same 188K cells as the bare process.
* `tabsafe --help` (target < 0.3 s).
* With ``TABSAFE_BENCH_NATIONAL=1``: a national table, small area (180,000) × single year of age ×
  sex from 10M synthetic persons (57M grid cells), tabulated and protected with the cell key method
  in one command, against the bare CUBE of the same three variables; peak memory of each process
  (target < 4 GB).

Each command runs ``REPEAT`` times (median and best reported); peak memory is the process's own
maximum resident set (``os.wait4``).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import HYPERCUBE, OUT, census

REPEAT = int(os.environ.get("TABSAFE_BENCH_REPEAT", "5"))
BIN = Path(sys.executable).parent


def _run(cmd: list[str], cwd: Path) -> dict[str, float]:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr.read().decode() if proc.stderr else ''}")
    # CPU time (user + system, all threads) beside wall time: other processes load the machine
    return {"seconds": elapsed, "cpu_seconds": usage.ru_utime + usage.ru_stime, "peak_rss_mb": usage.ru_maxrss / 1024}


def _repeat(cmd: list[str], cwd: Path, n: int = REPEAT) -> dict[str, float]:
    runs = [_run(cmd, cwd) for _ in range(n)]
    secs = [r["seconds"] for r in runs]
    return {"median_seconds": round(statistics.median(secs), 3), "best_seconds": round(min(secs), 3),
            "median_cpu_seconds": round(statistics.median(r["cpu_seconds"] for r in runs), 3),
            "peak_rss_mb": round(max(r["peak_rss_mb"] for r in runs), 1), "runs": n}


def _bare(persons: Path, variables: tuple[str, ...], out: Path) -> list[str]:
    cols = ", ".join(variables)
    sql = (f"COPY (SELECT {cols}, count(*) AS n FROM read_parquet('{persons}') GROUP BY CUBE ({cols})) "
           f"TO '{out}' (FORMAT parquet)")
    return [sys.executable, "-c", f"import duckdb; duckdb.sql({sql!r})"]


def _ratio(a: dict[str, float], b: dict[str, float], key: str = "median_seconds") -> float:
    return round(a[key] / b[key], 3)


def run() -> dict:
    data = census()
    tabsafe = str(BIN / "tabsafe")
    results: dict[str, object] = {}
    with tempfile.TemporaryDirectory(dir=OUT) as tmp_name:
        tmp = Path(tmp_name)
        by = ",".join(HYPERCUBE)
        ptable = tmp / "ptable.csv"
        subprocess.run([tabsafe, "ptable", "--max-noise", "5", "--variance", "3", "--js", "2", "--out", str(ptable)],
                       check=True, capture_output=True)
        bare = _bare(data.persons, HYPERCUBE, tmp / "bare.parquet")
        tabulate = [tabsafe, "tabulate", str(data.persons), "--by", by, "--out", str(tmp / "t.parquet"), "--quiet",
                    "--force"]
        # the bare COPY writes only the non-empty cells: tabsafe doing the same isolates its fixed costs
        nonempty = [tabsafe, "tabulate", str(data.persons), "--by", by, "--zero-cells", "omit", "--out",
                    str(tmp / "t0.parquet"), "--quiet", "--force"]
        protect = [tabsafe, "protect", str(data.persons), "--by", by, "--method", "ckm", "--ptable", str(ptable),
                   "--out", str(tmp / "p.parquet"), "--quiet", "--force"]
        _run(tabulate, tmp)  # warm the file cache for every side
        # interleaved, so a slower moment of the machine hits every side alike
        base_runs, tab_runs, nonempty_runs, ckm_runs = [], [], [], []
        for _ in range(REPEAT):
            base_runs.append(_repeat(bare, tmp, 1))
            tab_runs.append(_repeat(tabulate, tmp, 1))
            nonempty_runs.append(_repeat(nonempty, tmp, 1))
            ckm_runs.append(_repeat(protect, tmp, 1))

        def merge(runs: list[dict[str, float]]) -> dict[str, float]:
            secs = [r["median_seconds"] for r in runs]
            return {"median_seconds": round(statistics.median(secs), 3), "best_seconds": round(min(secs), 3),
                    "median_cpu_seconds": round(statistics.median(r["median_cpu_seconds"] for r in runs), 3),
                    "peak_rss_mb": max(r["peak_rss_mb"] for r in runs), "runs": len(runs)}

        base, tab, ckm = merge(base_runs), merge(tab_runs), merge(ckm_runs)
        tab0 = merge(nonempty_runs)
        helptime = _repeat([tabsafe, "--help"], tmp)
        results["hypercube"] = {
            "persons": data.n_persons if data.n_persons > 0 else None,
            "cells_written_by_tabsafe": 997_920,
            "bare_duckdb_copy_cube": base,
            "tabsafe_tabulate": tab,
            "tabsafe_tabulate_nonempty_cells_only": tab0,
            "tabsafe_protect_ckm_ptable_file": ckm,
            "ratio_tabulate_vs_bare": _ratio(tab, base),
            "ratio_tabulate_nonempty_vs_bare": _ratio(tab0, base),
            "ratio_protect_ckm_vs_bare": _ratio(ckm, base),
            "cpu_ratio_tabulate_vs_bare": _ratio(tab, base, "median_cpu_seconds"),
            "cpu_ratio_tabulate_nonempty_vs_bare": _ratio(tab0, base, "median_cpu_seconds"),
            "cpu_ratio_protect_ckm_vs_bare": _ratio(ckm, base, "median_cpu_seconds"),
            "target_ratio": 1.5,
        }
        results["tabsafe_help"] = {**helptime, "target_seconds": 0.3}
        if os.environ.get("TABSAFE_BENCH_NATIONAL"):
            results["national"] = _national(tabsafe, tmp)
    return results


def _national(tabsafe: str, tmp: Path) -> dict[str, object]:
    directory = OUT / "census-national-10000000"
    if not (directory / "persons.parquet").is_file():
        subprocess.run([tabsafe, "synth", "--persons", "10000000", "--areas", "9000", "--small-areas", "180000",
                        "--seed", "3", "--out", str(directory)], check=True, capture_output=True)
    persons = directory / "persons.parquet"
    variables = ("small_area", "age_year", "sex")
    bare = _bare(persons, variables, tmp / "nbare.parquet")
    protect = [tabsafe, "protect", str(persons), "--by", ",".join(variables), "--method", "ckm", "--max-noise", "5",
               "--variance", "3", "--js", "2", "--out", str(tmp / "national.parquet"), "--quiet", "--force"]
    base = _repeat(bare, tmp, 2)
    ours = _repeat(protect, tmp, 2)
    return {
        "persons": 10_000_000,
        "grid_cells": 180_001 * 106 * 3,
        "bare_duckdb_copy_cube": base,
        "tabsafe_protect_ckm": ours,
        "ratio_vs_bare": _ratio(ours, base),
        "target_peak_rss_mb": 4096,
    }
