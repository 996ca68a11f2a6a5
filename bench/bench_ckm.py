"""Cell key method on the full 7-variable hypercube with all 2^7 margin combinations.

Reports, in one run on the 1.5M-person census:
- tabulation alone (counts, every margin);
- tabulation with exact cell keys plus the perturbation of every cell (U[0,1) keys, and the ABS
  integer form with m = 256), and the overhead relative to tabulation alone (target ≤ 30%);
- the ONS ``cell-key-perturbation`` package producing the same cells: it makes one crosstab per
  call, so it is called once per non-empty combination of spanning variables (127 calls; the
  grand total is one cell and its function cannot tabulate zero variables), with the same
  p-table converted to its (pcv, ckey, pvalue) layout and threshold 0. Its inner cells are
  compared with tabsafe's ABS-form results cell by cell.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import time

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

import tabsafe as ts
from common import HYPERCUBE, census, measure
from tabsafe.io import read_meta
from tabsafe.protect.cell_key import abs_lookup_table
from tabsafe.protect.cell_key_method import CellKeyMethod
from tabsafe.protect.ptable import PTableParams, generate_ptable


def run() -> dict:
    data = census()
    md = ts.Microdata.from_file(data.persons, codelists=read_meta(data.meta))
    t0 = time.perf_counter()
    ptable = generate_ptable(PTableParams(max_noise=5, variance=3, js=2))
    ptable_seconds = time.perf_counter() - t0
    method = CellKeyMethod(ptable=ptable)

    def tabulate_only() -> ts.Table:
        return ts.tabulate(md, HYPERCUBE)

    def ckm() -> ts.Table:
        return method.protect(ts.tabulate(md, HYPERCUBE, key=method.needs().key)).table

    # The ABS integer form on 8-bit keys derived from the same record keys.
    persons = pq.read_table(data.persons, columns=[*HYPERCUBE, "rkey"]).to_pandas()
    for v in HYPERCUBE:
        persons[v] = persons[v].astype(str)
    persons["rkey256"] = np.floor(persons["rkey"].to_numpy() * 256).astype(np.int64)
    md256 = ts.Microdata.from_frame(persons, codelists=read_meta(data.meta))
    abs_method = CellKeyMethod(ptable=ptable, key="rkey256", abs_modulus=256)

    def ckm_abs() -> ts.Table:
        return abs_method.protect(ts.tabulate(md256, HYPERCUBE, key=abs_method.needs().key)).table

    tabulate_only()
    _, base = measure(tabulate_only)
    table, ours = measure(ckm)
    abs_table, ours_abs = measure(ckm_abs)

    out: dict = {
        "cells": table.n_cells,
        "ptable_generation_seconds": round(ptable_seconds, 3),
        "tabulate_only": base,
        "tabulate_and_ckm": ours,
        "ckm_overhead_vs_tabulation": round(ours["seconds"] / base["seconds"] - 1, 3),
        "tabulate_and_ckm_abs_form": ours_abs,
        "share_of_cells_changed": round(float(np.mean(table.column("count") != table.column("original"))), 4),
    }
    try:
        from cell_key_perturbation.create_perturbed_table import create_perturbed_table
    except ImportError:
        out["cell_key_perturbation"] = "not installed (pip install cell-key-perturbation)"
        return out

    lut = abs_lookup_table(ptable, modulus=256)
    pcv = np.arange(1, 751)
    their_ptable = pd.DataFrame({
        "pcv": np.repeat(pcv, 256),
        "ckey": np.tile(np.arange(256), len(pcv)),
        "pvalue": lut[np.minimum(pcv, lut.shape[0] - 1)].ravel(),
    })
    combos = [c for r in range(1, len(HYPERCUBE) + 1) for c in itertools.combinations(HYPERCUBE, r)]
    start = time.perf_counter()
    cells = 0
    mismatches = 0
    for combo in combos:
        with contextlib.redirect_stdout(io.StringIO()):  # it prints a line per call
            res = create_perturbed_table(persons, their_ptable, geog=[], tab_vars=list(combo),
                                         record_key="rkey256", use_existing_ons_id=False, threshold=0)
        cells += len(res)
        if len(combo) == len(HYPERCUBE):
            merged = res.merge(abs_table.to_frame(["count"]).astype({v: str for v in HYPERCUBE}),
                               on=list(HYPERCUBE), suffixes=("_ons", "_tabsafe"))
            mismatches = int((merged["count_ons"].astype("Int64") != merged["count_tabsafe"]).sum())
            compared = len(merged)
    theirs = time.perf_counter() - start
    out["cell_key_perturbation"] = {
        "calls": len(combos),
        "cells_produced": cells,
        "seconds": round(theirs, 3),
        "tabsafe_speedup": round(theirs / ours_abs["seconds"], 1),
        "inner_cells_compared_with_tabsafe_abs_form": compared,
        "inner_cells_differing": mismatches,
    }
    return out
