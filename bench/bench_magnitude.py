"""Suppression of a business table protected from its contributors (issue #29), with baselines
measured in the same run.

Table: turnover by activity (4 sections > 12 divisions > 24 groups) × region (3 regions > 9
districts) × size class (4), every margin (41 × 13 × 5 = 2,665 cells), from the synthetic
register of 10,000 enterprises (``tabsafe.synth_business``, seed 7: 90 % micro enterprises, most
large ones in holdings).
Primary cells: the p% rule at p = 15 and at least 3 contributors (holdings as intruders).

* ``tabsafe``: rules, fast secondary suppression, then the contributor audit and its repairs
  (the largest contributor of every suppressed cell and the two largest of every primary cell
  as intruders);
* ``baseline_public_only``: the same without the insiders (the public interval audit with both
  protection levels) — what a suppression that ignores the singleton problem publishes — and
  the findings the contributor audit then makes on that pattern (insider disclosures).

GaussSuppression's ``SuppressDominantCells`` needs R, which is not installed here (CRAN is
unreachable), so it is not run. Times are CPU seconds of this process (``time.process_time``)
beside wall seconds: the machine is shared and loaded.
"""

from __future__ import annotations

import os
import resource
import time

import numpy as np

from tabsafe.model.contributions import contributions
from tabsafe.protect.magnitude import MagnitudeSettings, protect_magnitudes
from tabsafe.risk.contributor_audit import contributor_audit
from tabsafe.risk.dominance import DominanceRules, PRule
from tabsafe.synth_business import business_hierarchies, generate_business

ENTERPRISES = int(os.environ.get("TABSAFE_BENCH_ENTERPRISES", "10000"))


def _timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, {"cpu_seconds": round(time.process_time() - cpu, 2), "wall_seconds": round(time.perf_counter() - wall, 2)}


def run() -> dict:
    data = generate_business(ENTERPRISES, 7)
    c = contributions(data, ["activity", "region", "size"], value="turnover", contributor="enterprise",
                      holding="holding", hierarchies=business_hierarchies())
    rules = DominanceRules(p=(PRule(15),), min_freq=3)
    full, t_full = _timed(lambda: protect_magnitudes(c, rules))
    public, t_public = _timed(lambda: protect_magnitudes(c, rules, MagnitudeSettings(intruders="none")))
    table = c.table()
    attack = c.at_holdings()
    primary = full.reason == "primary"
    insiders, t_audit = _timed(lambda: contributor_audit(
        table.additivity(), c.value, public.suppressed, attack, primary=primary, upper=public.upper,
        lower=public.lower))
    value = np.abs(c.value)

    def figures(res, timing):
        return {**timing, "suppressed_cells": int(res.suppressed.sum()),
                "suppressed_value": round(float(value[res.suppressed].sum()), 2),
                "secondary_cells": int((res.reason == "secondary").sum()),
                "secondary_value": round(float(value[res.reason == "secondary"].sum()), 2),
                "contributor_audit": {k: res.figures.get(k) for k in ("intruders", "programs", "witnessed",
                                                                       "contributor_audit_rounds")}}

    return {
        "enterprises": ENTERPRISES, "cells": c.n_cells, "primary": int(primary.sum()),
        "tabsafe": figures(full, t_full),
        "baseline_public_only": {**figures(public, t_public),
                                 "insider_findings": len(insiders.findings),
                                 "primary_cells_disclosed_to_insiders": len({f.cell for f in insiders.findings}),
                                 "insider_audit": t_audit},
        "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "gauss_suppression": "not run: R is not installed (CRAN unreachable)",
    }
