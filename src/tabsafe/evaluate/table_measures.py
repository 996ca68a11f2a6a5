"""Measures of a whole table's structure, before and after protection (METHODS.md §12).

* :func:`loglinear_fit` — the fit of a log-linear model to a multi-way table, by its Pearson χ²
  (seed 000 §5.8: "for multi-way tables, one can examine conditional dependencies and calculate
  expected cell frequencies based on the theory of log-linear models. The test statistic for the
  fit of the model is also based on a Pearson Chi-squared statistic"). The model is hierarchical,
  given by its generating class (the margins it keeps); by default every two-way margin (no
  three-way interaction) and, for a two-way table, independence. Expected counts by iterative
  proportional fitting, the maximum likelihood estimate of a hierarchical model.
* :func:`median_subgroup_entropy` — seed 002 §4.1: for each subgroup ``z`` (a combination of
  the group variables) the entropy ``-Σ_c p_z(c) log p_z(c)`` of its cells' shares, and the
  median over subgroups (002 reports 2.36 for the original hypercube and 2.34 after swapping:
  lower entropy, more zeros, more attribute disclosure).
* :func:`variance_of_cell_size` — seed 000 §5.8 "the variance of the average cell size for the
  rows, columns or the entire table" with seed 004 §5.2's per-row variance ratio
  ``V(D_pert^k) / V(D_orig^k)``: here by column (each category across the rows) and for the
  whole table's inner cells (the row form is :func:`~tabsafe.evaluate.measures.variance_ratio`).
* :func:`impute_suppressed` — seed 000 §5.8: "a naive user might use zeros in place of the
  suppressed cells whereas a more sophisticated user might replace suppressed cells by some form
  of averaging of the total information that was suppressed, or by calculating feasibility
  intervals": the published table with each suppressed cell replaced by the midpoint of its
  feasibility interval (``midpoint``) or by an equal share of what its row's published total
  leaves (``average``), so the utility measures can be taken as such a user sees the table.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tabsafe.errors import InputError

__all__ = ["impute_suppressed", "loglinear_fit", "median_subgroup_entropy", "variance_of_cell_size"]

#: IPF stops when no fitted margin is further than this from the observed one (or after MAX_IPF rounds)
IPF_TOL = 1e-9
MAX_IPF = 1000


def _margin(arr: np.ndarray, keep: Sequence[int]) -> np.ndarray:
    drop = tuple(a for a in range(arr.ndim) if a not in keep)
    return arr.sum(axis=drop, keepdims=True)


def _free_parameters(shape: Sequence[int], margins: Sequence[Sequence[int]]) -> int:
    """Parameters of the hierarchical model: one per term of every subset of a generating
    margin, ``Π (I_a - 1)`` each (the empty term: the constant)."""
    terms = {frozenset(s) for m in margins for r in range(len(m) + 1) for s in itertools.combinations(m, r)}
    return sum(math.prod(shape[a] - 1 for a in t) for t in terms)


def loglinear_fit(counts: Any, margins: Sequence[Sequence[int]] | None = None) -> dict[str, Any]:
    """Pearson χ², likelihood-ratio G², degrees of freedom and p-value of the hierarchical
    log-linear model with generating class ``margins`` (axes; default every pair of axes, or
    independence for a two-way table) fitted
    to ``counts`` (a multi-way array of non-negative counts; negative published counts count as
    0). Seed 000 §5.8. Cells whose fitted value is 0 add nothing to χ² (structural zeros of the
    fit); the degrees of freedom are those of the model without structural zeros."""
    from scipy.stats import chi2 as chi2_dist

    n = np.maximum(np.asarray(counts, dtype=np.float64), 0.0)
    if n.ndim < 2:
        raise InputError("a log-linear model needs a table of two variables or more")
    if margins is None:  # independence for two variables, no three-way interaction beyond
        margins = [(0,), (1,)] if n.ndim == 2 else list(itertools.combinations(range(n.ndim), 2))
    margins = [tuple(sorted(m)) for m in margins]
    total = n.sum()
    m = np.full(n.shape, total / n.size if n.size else 0.0)
    targets = [(keep, _margin(n, keep)) for keep in margins]
    rounds = 0
    for rounds in range(1, MAX_IPF + 1):
        for keep, target in targets:
            fitted = _margin(m, keep)
            m = m * np.divide(target, fitted, out=np.zeros_like(target), where=fitted > 0)
        worst = max(float(np.abs(_margin(m, keep) - target).max()) for keep, target in targets)
        if worst <= IPF_TOL * max(total, 1.0):
            break
    pos = m > 0
    chi2 = float(((n[pos] - m[pos]) ** 2 / m[pos]).sum())
    both = pos & (n > 0)
    g2 = float(2 * (n[both] * np.log(n[both] / m[both])).sum())
    df = int(n.size - _free_parameters(n.shape, margins))
    return {"model": " ".join("[" + ",".join(str(a) for a in mg) + "]" for mg in margins), "chi2": chi2,
            "g2": g2, "df": df, "p_value": float(chi2_dist.sf(chi2, df)) if df > 0 else math.nan,
            "ipf_rounds": rounds, "expected": m}


def median_subgroup_entropy(counts: Any, group_axes: Sequence[int]) -> float:
    """Seed 002 §4.1: per subgroup ``z`` (each combination of the ``group_axes`` codes), the
    entropy ``-Σ_c p_z(c) log p_z(c)`` (natural log) of ``p_z(c) = D_z(c) / Σ_c D_z(c)`` over the
    other axes' cells; the median over the subgroups with a non-zero total (NaN if none).
    Negative published counts count as 0."""
    d = np.maximum(np.asarray(counts, dtype=np.float64), 0.0)
    group_axes = list(group_axes)
    rest = [a for a in range(d.ndim) if a not in group_axes]
    d = np.transpose(d, group_axes + rest)
    n_groups = math.prod(d.shape[:len(group_axes)])
    d = d.reshape(n_groups, -1)
    totals = d.sum(axis=1)
    keep = totals > 0
    if not keep.any():
        return math.nan
    p = d[keep] / totals[keep, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, -p * np.log(p), 0.0)
    return float(np.median(terms.sum(axis=1)))


def variance_of_cell_size(original: Any, published: Any) -> dict[str, Any]:
    """Seed 000 §5.8 / 004 §5.2 by column and for the whole table: for inner cells as (rows,
    columns), the ratio ``V(pert) / V(orig)`` of the variance of each column's counts across the
    rows (columns with an original variance of 0 left out), averaged over the columns, and the
    ratio of the variances of every inner cell of the table."""
    o = np.asarray(original, dtype=np.float64)
    p = np.asarray(published, dtype=np.float64)
    if o.shape != p.shape or o.ndim != 2:
        raise InputError("variance_of_cell_size needs two (rows, columns) arrays of the same shape")
    out: dict[str, Any] = {}
    if o.shape[0] > 1:
        vo = o.var(axis=0, ddof=1)
        vp = p.var(axis=0, ddof=1)
        ok = vo > 0
        ratios = vp[ok] / vo[ok]
        out["by_column"] = {"mean": float(ratios.mean()) if ratios.size else math.nan,
                            "se": float(ratios.std(ddof=1) / math.sqrt(ratios.size)) if ratios.size > 1 else math.nan,
                            "columns": int(ratios.size)}
    else:
        out["by_column"] = {"mean": math.nan, "se": math.nan, "columns": 0}
    vo_all = o.var(ddof=1) if o.size > 1 else 0.0
    out["table"] = float(p.var(ddof=1) / vo_all) if vo_all > 0 else math.nan
    out["mean_cell_size"] = {"original": float(o.mean()) if o.size else math.nan,
                             "published": float(p.mean()) if p.size else math.nan}
    return out


def impute_suppressed(published: Any, *, how: str = "midpoint") -> Any:
    """The published :class:`~tabsafe.model.table.Table` with its suppressed (missing) cells
    filled as a user would fill them (seed 000 §5.8; module docstring): ``midpoint`` — the middle
    of each cell's feasibility interval given every published cell and the table's additive
    structure (counts at least 0, :func:`~tabsafe.risk.intervals.feasibility_intervals`);
    ``average`` — along the last variable, the amount its published total leaves (total minus
    the published cells under it, at least 0) shared equally among the suppressed cells under it,
    the grand total's share when that total is suppressed too, then 0. Returns a new Table."""
    from tabsafe.model.table import Table

    if how not in ("midpoint", "average"):
        raise InputError(f"imputation must be midpoint or average; got {how!r}")
    grid = np.asarray(published.grid("count"), dtype=np.float64)
    missing = np.isnan(grid)
    if not missing.any():
        return published
    if how == "midpoint":
        filled = grid.copy()
        filled[missing] = _midpoints(published.additivity(), grid, missing)
    else:
        filled = _average_fill(published, grid.reshape(published.shape), missing.reshape(published.shape)).ravel()
    ids = np.flatnonzero(filled != 0)
    return Table.from_cells(published.dimensions, ids, {"count": filled[ids]})


def _midpoints(A: Any, grid: np.ndarray, missing: np.ndarray) -> np.ndarray:
    """Per suppressed cell, the middle of its feasibility interval: its minimum and maximum over
    the tables that agree with every published cell and add up (cells at least 0), one warm
    re-solve each (:class:`~tabsafe.solver.ExtremeSolver`, the interval audit's solver). A cell
    whose interval is open above (its totals suppressed too) gets its minimum."""
    import scipy.sparse as sp

    from tabsafe.solver import ExtremeSolver

    A = sp.csr_matrix(A)
    b = -(A[:, ~missing] @ grid[~missing])
    hidden = A[:, missing]
    n = int(missing.sum())
    solver = ExtremeSolver(hidden, b, np.zeros(n), np.full(n, np.inf))
    out = np.empty(n)
    for j in range(n):
        lo = solver.extreme(j, maximize=False).value
        hi = solver.extreme(j, maximize=True).value
        out[j] = lo if math.isinf(hi) else (lo + hi) / 2
    return out


def _average_fill(table: Any, grid: np.ndarray, missing: np.ndarray) -> np.ndarray:
    """Along the last axis, each parent's unexplained amount shared by its suppressed children."""
    h = table.dimensions[-1].hierarchy
    out = np.where(missing, np.nan, grid)
    # parents from the top down, so a suppressed subtotal is filled before its children share it
    for code in sorted((c for c in h.order if not h.is_leaf(c)), key=h.depth):
        parent = h.position[code]
        kids = [h.position[c] for c in h.children(code)]
        total = out[..., parent]
        child = out[..., kids]
        gap = np.maximum(total - np.nansum(child, axis=-1), 0.0)
        n_missing = np.isnan(child).sum(axis=-1)
        share = np.where(n_missing > 0, gap / np.maximum(n_missing, 1), 0.0)
        share = np.where(np.isnan(share), 0.0, share)
        out[..., kids] = np.where(np.isnan(child), share[..., None], child)
    return np.where(np.isnan(out), 0.0, out)
