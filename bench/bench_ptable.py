"""Generating the cell key method's p-table by maximum entropy (seed 000 §5.4; METHODS.md §2).

For D = 5, 20, 100 (V = 2, js = 1, as in the brief of issue #24): the dual Newton solver of
``tabsafe.protect.ptable`` in-process (CPU and wall seconds), the same parameters through the
whole process (``tabsafe ptable … --out``: CPU of the child and wall), and, as the baseline in
the same run, the previous implementation (scipy SLSQP per row with a trust-constr fallback and
a HiGHS LP per row through ``scipy.optimize.linprog``), kept here and only here. The baseline
runs where it finishes in reasonable time: D = 5 and 20; D = 100 (107 s CPU, then "did not
converge" at row 2 when measured for the issue) only with ``TABSAFE_BENCH_PTABLE_OLD100=1``.
Also the largest difference between the two tables' probabilities where both exist, and one
pstay-heavy case (D = 100, V = 1200, pstay = 0.92: R ptable's relaxation solves every row 20
times).
"""

from __future__ import annotations

import math
import os
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import LinearConstraint, linprog, minimize

from tabsafe.errors import MethodError
from tabsafe.protect.ptable import PTable, PTableParams, generate_ptable
from tabsafe.protect.ptable.maxent import COLUMNS, _deviations, _report, _row_block

CASES = (5, 20, 100)
VARIANCE, JS = 2.0, 1

# --------------------------------------------------------------------------------------------
# the previous implementation (tabsafe before the dual solver), for the baseline only

_EPS = 1e-8


def _old_monotony(v: np.ndarray, monotony: bool) -> np.ndarray | None:
    zero = np.flatnonzero(v == 0)
    if not monotony or zero.size == 0 or zero[0] == 0:
        return None
    k = int(zero[0])
    m = np.zeros((k, v.size))
    m[np.arange(k), np.arange(k)] = 1.0
    m[np.arange(k), np.arange(k) + 1] = -1.0
    return m


def _old_min_variance(v: np.ndarray, monotony: bool) -> np.ndarray | None:
    mono = _old_monotony(v, monotony)
    vf = v.astype(float)
    res = linprog(c=vf * vf, A_ub=mono, b_ub=None if mono is None else np.zeros(mono.shape[0]),
                  A_eq=np.vstack([np.ones(v.size), vf]), b_eq=np.array([1.0, 0.0]),
                  bounds=[(_EPS, 1.0)] * v.size, method="highs")
    return None if res.status != 0 else np.asarray(res.x, dtype=float)


def _old_violation(p: np.ndarray, v: np.ndarray, variance: float, lb: np.ndarray, mono: np.ndarray | None) -> float:
    vf = v.astype(float)
    parts = [abs(p.sum() - 1.0), abs(vf @ p), max(0.0, vf * vf @ p - variance),
             max(0.0, float(np.max(lb - p))), max(0.0, float(np.max(p - 1.0)))]
    if mono is not None:
        parts.append(max(0.0, float(np.max(mono @ p))))
    return max(parts)


def _old_repair(p: np.ndarray, v: np.ndarray, variance: float, lb: np.ndarray, anchor: np.ndarray | None) -> np.ndarray:
    vf = v.astype(float)
    excess = float(vf * vf @ p) - variance
    if anchor is None or not 0 < excess <= 1e-6 or np.any(anchor < lb):
        return p
    gap = float(vf * vf @ p) - float(vf * vf @ anchor)
    if gap <= 0:
        return p
    t = min(1.0, excess / gap * (1.0 + 1e-6))
    return (1.0 - t) * p + t * anchor


def _old_max_entropy(v: np.ndarray, variance: float, lb: np.ndarray, monotony: bool,
                     anchor: np.ndarray | None) -> np.ndarray | None:
    vf, n = v.astype(float), v.size
    mono = _old_monotony(v, monotony)
    bounds = list(zip(lb.tolist(), [1.0] * n))
    x0 = np.clip(np.full(n, 1.0 / n), lb, 1.0)
    cons: list[dict[str, Any]] = [
        {"type": "eq", "fun": lambda p: np.array([p.sum() - 1.0, vf @ p]), "jac": lambda p: np.vstack([np.ones(n), vf])},
        {"type": "ineq", "fun": lambda p: np.array([variance - (vf * vf) @ p]), "jac": lambda p: -(vf * vf)[None, :]},
    ]
    if mono is not None:
        cons.append({"type": "ineq", "fun": lambda p: -mono @ p, "jac": lambda p: -mono})
    for ftol in (1e-15, 1e-11):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = minimize(lambda p: float(np.sum(p * np.log(p))), x0, jac=lambda p: np.log(p) + 1.0, bounds=bounds,
                           constraints=cons, method="SLSQP", options={"ftol": ftol, "maxiter": 2000})
        p = _old_repair(np.clip(res.x, lb, 1.0), v, variance, lb, anchor)
        if _old_violation(p, v, variance, lb, mono) <= 1e-9:
            return p
    lin = [LinearConstraint(np.vstack([np.ones(n), vf]), [1.0, 0.0], [1.0, 0.0]),
           LinearConstraint((vf * vf)[None, :], -np.inf, variance)]
    if mono is not None:
        lin.append(LinearConstraint(mono, -np.inf, 0.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = minimize(lambda p: float(np.sum(p * np.log(p))), x0, jac=lambda p: np.log(p) + 1.0,
                       hess=lambda p: np.diag(1.0 / p), bounds=bounds, constraints=lin, method="trust-constr",
                       options={"gtol": 1e-12, "xtol": 1e-14, "barrier_tol": 1e-12, "maxiter": 5000})
    p = _old_repair(np.clip(res.x, lb, 1.0), v, variance, lb, anchor)
    return p if _old_violation(p, v, variance, lb, mono) <= 1e-7 else None


def old_generate_ptable(params: PTableParams) -> PTable:
    """The previous ``generate_ptable`` for parameters without ``pstay`` (the benchmark's)."""
    assert params.pstay is None
    first = _row_block(0, np.array([0], dtype=np.int64), np.array([1.0]))
    blocks, reports = [first], [_report(0, first, math.nan, 0)]
    for i in range(1, params.i_max + 1):
        v = _deviations(i, params)
        anchor = _old_min_variance(v, params.monotony)
        p = _old_max_entropy(v, params.variance, np.full(v.size, _EPS), params.monotony, anchor)
        if p is None:
            raise MethodError(f"row i={i}: the maximum entropy solver did not converge")
        block = _row_block(i, v, p)
        blocks.append(block)
        reports.append(_report(i, block, math.nan, 1))
    cols = {c: np.concatenate([b[c] for b in blocks]) for c in COLUMNS}
    return PTable._create(cols, params=params, reports=reports)


# --------------------------------------------------------------------------------------------


def _timed(fn: Any, *args: Any) -> tuple[Any, dict[str, Any]]:
    cpu, wall = time.process_time(), time.perf_counter()
    try:
        out, error = fn(*args), None
    except MethodError as exc:
        out, error = None, exc.message
    figures: dict[str, Any] = {"cpu_s": round(time.process_time() - cpu, 3), "wall_s": round(time.perf_counter() - wall, 3)}
    if error:
        figures["error"] = error
    return out, figures


def _whole_process(d: int) -> dict[str, Any]:
    exe = Path(sys.executable).with_name("tabsafe")
    with tempfile.TemporaryDirectory() as tmp:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall = time.perf_counter()
        proc = subprocess.run([str(exe), "ptable", "--max-noise", str(d), "--variance", str(VARIANCE), "--js", str(JS),
                               "--out", str(Path(tmp) / "pt.csv")], capture_output=True, text=True, check=False)
        wall = time.perf_counter() - wall
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"exit": proc.returncode, "cpu_s": round(cpu, 3), "wall_s": round(wall, 3),
            "max_rss_mb": round(after.ru_maxrss / 1024, 1)}


def run() -> dict:
    generate_ptable(PTableParams(max_noise=2, variance=1))  # imports and first-call costs out of the figures
    results: dict[str, Any] = {}
    for d in CASES:
        params = PTableParams(max_noise=d, variance=VARIANCE, js=JS)
        new, new_fig = _timed(generate_ptable, params)
        entry: dict[str, Any] = {"rows": params.i_max + 1, "dual_newton": new_fig, "whole_process": _whole_process(d)}
        if d < 100 or os.environ.get("TABSAFE_BENCH_PTABLE_OLD100") == "1":
            old, old_fig = _timed(old_generate_ptable, params)
            entry["previous_slsqp"] = old_fig
            if old is not None and new is not None:
                entry["max_abs_p_difference"] = float(np.abs(old.column("p") - new.column("p")).max())
                entry["speedup_cpu"] = round(old_fig["cpu_s"] / max(new_fig["cpu_s"], 1e-3), 1)
        else:
            entry["previous_slsqp"] = "not run (107 s CPU, then no answer; TABSAFE_BENCH_PTABLE_OLD100=1 runs it)"
        results[f"D={d}"] = entry
    heavy = PTableParams(max_noise=100, variance=1200, pstay=0.92)
    pt, fig = _timed(generate_ptable, heavy)
    fig["solves"] = int(pt.report["iterations"].sum()) if pt is not None else None
    results["D=100,V=1200,pstay=0.92"] = {"dual_newton": fig}
    return results


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
