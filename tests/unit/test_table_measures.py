"""The table-structure measures of :mod:`tabsafe.evaluate.table_measures`, each against a worked
example or an independent computation (closed forms of log-linear models, scipy's χ² test)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import chi2_contingency

import tabsafe as ts
from tabsafe.evaluate.table_measures import (
    impute_suppressed,
    loglinear_fit,
    median_subgroup_entropy,
    variance_of_cell_size,
)


def test_loglinear_two_way_is_independence_and_scipys_chi_square() -> None:
    n = np.array([[12, 5, 9], [3, 14, 7]])
    fit = loglinear_fit(n)
    expected = n.sum(1, keepdims=True) * n.sum(0, keepdims=True) / n.sum()
    np.testing.assert_allclose(fit["expected"], expected, rtol=1e-9)
    chi2, p, dof, _ = chi2_contingency(n, correction=False)
    assert fit["chi2"] == pytest.approx(chi2, rel=1e-9) and fit["df"] == dof == 2
    assert fit["p_value"] == pytest.approx(p, rel=1e-7)


def test_loglinear_conditional_independence_closed_form() -> None:
    """Seed 000 §5.8's 'conditional dependencies': the model [AB][AC] (B and C independent given
    A) has the closed form m_ijk = n_ij+ · n_i+k / n_i++; df = I(J-1)(K-1)."""
    rng = np.random.default_rng(4)
    n = rng.integers(0, 20, (3, 4, 2)).astype(float) + 1
    fit = loglinear_fit(n, margins=[(0, 1), (0, 2)])
    want = n.sum(2, keepdims=True) * n.sum(1, keepdims=True) / n.sum((1, 2), keepdims=True)
    np.testing.assert_allclose(fit["expected"], want, rtol=1e-8)
    assert fit["chi2"] == pytest.approx(float(((n - want) ** 2 / want).sum()), rel=1e-8)
    assert fit["g2"] == pytest.approx(float(2 * (n * np.log(n / want)).sum()), rel=1e-8)
    assert fit["df"] == 3 * 3 * 1


def test_loglinear_no_three_way_interaction() -> None:
    """The default model of a three-way table keeps every two-way margin (no closed form): its
    fit has the observed two-way margins, no three-way interaction (every 2×2×2 log odds ratio
    ratio is 0), and (I-1)(J-1)(K-1) degrees of freedom."""
    rng = np.random.default_rng(7)
    n = rng.integers(1, 30, (3, 3, 4)).astype(float)
    fit = loglinear_fit(n)
    m = fit["expected"]
    for keep in ((0, 1), (0, 2), (1, 2)):
        drop = ({0, 1, 2} - set(keep)).pop()
        np.testing.assert_allclose(m.sum(drop), n.sum(drop), rtol=1e-8)
    lm = np.log(m)
    inter = lm[1:, 1:, 1:] - lm[:-1, 1:, 1:] - lm[1:, :-1, 1:] - lm[1:, 1:, :-1] + lm[:-1, :-1, 1:] \
        + lm[:-1, 1:, :-1] + lm[1:, :-1, :-1] - lm[:-1, :-1, :-1]
    assert np.abs(inter).max() < 1e-6
    assert fit["df"] == 2 * 2 * 3 and fit["chi2"] > 0


def test_median_subgroup_entropy_worked_example() -> None:
    """Seed 002 §4.1: subgroups (rows) [1,1,0,0] → log 2, [4,0,0,0] → 0 (one category: the
    attribute is disclosed), [1,1,1,1] and [2,2,2,2] → log 4, an empty subgroup is left out:
    median (log 2 + log 4) / 2 (the mean would be 5/4 log 2)."""
    d = np.array([[1, 1, 0, 0], [4, 0, 0, 0], [1, 1, 1, 1], [2, 2, 2, 2], [0, 0, 0, 0]])
    assert median_subgroup_entropy(d, [0]) == pytest.approx(1.5 * math.log(2))
    # subgroups on the second axis of a three-way table: the other two axes are the cells
    # (each subgroup's cells twice over: every entropy grows by log 2)
    d3 = np.stack([d.T, d.T])  # (2, 4, 5): axes 0-1 hold the subgroups' cells, axis 2 the subgroups
    assert median_subgroup_entropy(d3, [2]) == pytest.approx(2.5 * math.log(2))
    assert math.isnan(median_subgroup_entropy(np.zeros((2, 3)), [0]))


def test_variance_of_cell_size_by_column_and_table() -> None:
    o = np.array([[1.0, 10.0], [3.0, 10.0], [5.0, 13.0]])
    p = np.array([[0.0, 10.0], [3.0, 10.0], [6.0, 16.0]])
    out = variance_of_cell_size(o, p)
    # column 1: var(0,3,6)=9 / var(1,3,5)=4; column 2: var(10,10,16)=12 / var(10,10,13)=3
    assert out["by_column"]["mean"] == pytest.approx((9 / 4 + 12 / 3) / 2)
    assert out["by_column"]["columns"] == 2
    assert out["table"] == pytest.approx(np.var(p, ddof=1) / np.var(o, ddof=1))
    assert out["mean_cell_size"] == {"original": pytest.approx(42 / 6), "published": pytest.approx(45 / 6)}


def _suppressed_table():
    """region (R1, R2) × sex (1, 2, 3) with margins; the four cells R1/R2 × 1/2 suppressed."""
    frame = pd.DataFrame({"region": ["R1"] * 6 + ["R2"] * 9, "sex": list("111223") + list("112222333")})
    t = ts.tabulate(ts.Microdata.from_frame(frame), ["region", "sex"])
    grid = np.asarray(t.grid("count"), dtype=float).reshape(t.shape)
    h_r, h_s = (d.hierarchy for d in t.dimensions)
    pub = grid.copy()
    for r in ("R1", "R2"):
        for s in ("1", "2"):
            pub[h_r.position[r], h_s.position[s]] = np.nan
    dense = ts.Table.from_grid(t.dimensions, {"count": pub.ravel()})
    return t, dense, h_r, h_s


def test_impute_suppressed_midpoint_and_average() -> None:
    """R1 = (3, 2, 1 | 6), R2 = (2, 4, 3 | 9), sex totals (5, 6, 4 | 15). Suppressed: the 2×2
    block of sex 1–2: an intruder knows x11 + x12 = 5, x21 + x22 = 6, x11 + x21 = 5, x12 + x22 = 6,
    so x11 ∈ [0, 5] (midpoint 2.5), x12 = 5 - x11 ∈ [0, 5], x21 ∈ [0, 5], x22 ∈ [1, 6] (3.5).
    Averaging: each row's total minus its published cell, shared by its two suppressed cells."""
    t, pub, h_r, h_s = _suppressed_table()

    def at(table, r, s):
        g = np.asarray(table.grid("count"), dtype=float).reshape(table.shape)
        return g[h_r.position[r], h_s.position[s]]

    mid = impute_suppressed(pub, how="midpoint")
    assert [at(mid, "R1", "1"), at(mid, "R1", "2"), at(mid, "R2", "1"), at(mid, "R2", "2")] == pytest.approx(
        [2.5, 2.5, 2.5, 3.5])
    assert at(mid, "R2", "3") == 3 and at(mid, "Total", "Total") == 15
    avg = impute_suppressed(pub, how="average")
    assert [at(avg, "R1", "1"), at(avg, "R1", "2"), at(avg, "R2", "1"), at(avg, "R2", "2")] == pytest.approx(
        [2.5, 2.5, 3.0, 3.0])
