"""Reference cases for p-tables and the cell key method.

Sources: seed 000 §5.4 (Tables 5.16/5.17), §5.7 (Table 5.23); seed 004 §3.3 (ABS form);
R ptable's vignette output for ``create_cnt_ptable(D = 2, V = 1)`` (the values printed by
``str(ptab)``, 3-4 digits); R cellKey's test ``test_countvars.R`` (66 rows, ``max(i) == 8`` for
``D = 5, V = 3, js = 2, pstay = 0.5``); closed-form maximum entropy solutions.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import brentq

from tabsafe.protect.cell_key import (
    MagnitudeParams,
    abs_cell_keys,
    abs_lookup,
    abs_lookup_table,
    cell_keys,
    flex_multiplier,
    lookup_noise,
    perturb_counts,
    perturb_magnitudes,
    perturbed_mean,
)
from tabsafe.protect.ptable import PTable, PTableParams, generate_ptable


def handbook_ptable() -> PTable:
    """Seed 000 Table 5.16: maximum deviation 1, no ones after perturbation."""
    rows = pd.DataFrame(
        [
            (0, 0, 1.0, 0, 0.0, 1.0),
            (1, 0, 0.5, -1, 0.0, 0.5),
            (1, 2, 0.5, 1, 0.5, 1.0),
            (2, 2, 0.8, 0, 0.0, 0.8),
            (2, 3, 0.2, 1, 0.8, 1.0),
            (3, 2, 0.3, -1, 0.0, 0.3),
            (3, 3, 0.4, 0, 0.3, 0.7),
            (3, 4, 0.3, 1, 0.7, 1.0),
        ],
        columns=["i", "j", "p", "v", "p_int_lb", "p_int_ub"],
    )
    return PTable.from_frame(rows, source="seed 000 Table 5.16")


# --- seed 000 §5.4 ------------------------------------------------------------------------


def test_handbook_worked_example_table_5_17() -> None:
    # record keys 0.9, 0.3, 0.6 -> cell key 0.8 -> row i=3, 0.7 < 0.8 <= 1 -> v = +1 -> 4
    ck = cell_keys(np.array([0.9, 0.3, 0.6]), np.zeros(3, dtype=np.int64), 1, digits=1)
    assert ck.tolist() == [0.8]
    pt = handbook_ptable()
    assert lookup_noise(np.array([3]), ck, pt).tolist() == [1]
    assert perturb_counts(np.array([3]), ck, pt).tolist() == [4]


def test_cell_key_sum_is_exact_not_a_float_running_sum() -> None:
    # 0.1 + 0.2 + 0.4 summed as floats is 0.7000000000000001, past the bound 0.7 of row 3
    keys = np.array([0.1, 0.2, 0.4])
    assert (0.1 + 0.2 + 0.4) % 1 > 0.7
    ck = cell_keys(keys, np.zeros(3, dtype=np.int64), 1, digits=1)
    assert ck.tolist() == [0.7]
    assert lookup_noise(np.array([3]), ck, handbook_ptable()).tolist() == [0]


@pytest.mark.parametrize(
    ("count", "key", "noise"),
    [
        (0, 0.42, 0),
        (1, 0.5, -1),  # upper bound is inclusive
        (1, 0.5000001, 1),
        (2, 0.8, 0),
        (2, 0.81, 1),
        (3, 0.3, -1),
        (3, 0.7, 0),
        (3, 0.0, -1),  # key 0 takes the first interval
        (25, 0.95, 1),  # counts above i_max use the rows of i_max
    ],
)
def test_handbook_table_5_16_intervals(count: int, key: float, noise: int) -> None:
    pt = handbook_ptable()
    assert lookup_noise(np.array([count]), np.array([key]), pt).tolist() == [noise]


def test_handbook_ptable_never_publishes_ones() -> None:
    pt = handbook_ptable()
    counts = np.repeat(np.arange(6), 1000)
    keys = np.tile(np.arange(1000) / 1000, 6)
    assert not np.any(perturb_counts(counts, keys, pt) == 1)


def test_noise_off_gives_exact_counts() -> None:
    identity = pd.DataFrame(
        {"i": [0, 1], "j": [0, 1], "p": [1.0, 1.0], "v": [0, 0],
         "p_int_lb": [0.0, 0.0], "p_int_ub": [1.0, 1.0]}
    )
    pt = PTable.from_frame(identity)
    counts = np.array([0, 1, 2, 17, 1000])
    keys = np.array([0.0, 0.1, 0.5, 0.99, 1.0])
    assert perturb_counts(counts, keys, pt).tolist() == counts.tolist()


# --- R ptable -----------------------------------------------------------------------------


def test_r_ptable_vignette_d2_v1() -> None:
    # ptable vignette: create_cnt_ptable(D = 2, V = 1); str(ptab) shows
    #   pTable: 10 obs; p = 1 0.3665 0.3665 0.1676 0.0995 ...; v = 0 -1 0 1 2 -2 -1 0 1 2
    #   p_int_lb = 0 0 0.366 0.733 0.901 ...; p_int_ub = 1 0.366 0.733 0.901 1 ...
    #   tMatrix[, 1] = 1 0.3665 0.0638; empResults: p_var 0 0.932 1, p_stay 1 0.366 0.383,
    #   iter 0 20 1
    pt = generate_ptable(PTableParams(max_noise=2, variance=1))
    rows = pt.rows
    assert len(rows) == 10
    assert rows["i"].tolist() == [0, 1, 1, 1, 1, 2, 2, 2, 2, 2]
    assert rows["j"].tolist() == [0, 0, 1, 2, 3, 0, 1, 2, 3, 4]
    assert rows["v"].tolist() == [0, -1, 0, 1, 2, -2, -1, 0, 1, 2]
    np.testing.assert_allclose(rows["p"].iloc[:5], [1, 0.3665, 0.3665, 0.1676, 0.0995], atol=5e-5)
    np.testing.assert_allclose(rows["p_int_lb"].iloc[:5], [0, 0, 0.366, 0.733, 0.901], atol=1e-3)
    np.testing.assert_allclose(rows["p_int_ub"].iloc[:5], [1, 0.366, 0.733, 0.901, 1], atol=1e-3)
    assert rows["p"].iloc[5] == pytest.approx(0.0638, abs=5e-5)
    rep = pt.report
    np.testing.assert_allclose(rep["variance"], [0, 0.932, 1], atol=5e-4)
    np.testing.assert_allclose(rep["p_stay"], [1, 0.366, 0.383], atol=5e-4)
    assert rep["iterations"].tolist() == [0, 20, 1]
    # row 1 stays below V = 1 (R's p_var 0.932): named, with the variance it reached
    assert [(r.i, round(r.variance, 3)) for r in pt.rows_below()] == [(1, 0.932)]


def test_cellkey_fixture_d5_v3_js2_pstay() -> None:
    # R cellKey tests/testthat/test_countvars.R: dim(ptab) == c(66, 7), max(ptab$i) == 8
    pt = generate_ptable(PTableParams(max_noise=5, variance=3, js=2, pstay=0.5))
    rows = pt.rows
    assert len(rows) == 66
    assert rows["i"].max() == 8 == pt.i_max
    # pstay = 0.5 is compatible with V = 3 in every unblocked row: kept, variance reached
    rep = pt.report.set_index("i")
    for i in range(3, 9):
        assert rep.loc[i, "p_stay"] == pytest.approx(0.5, abs=1e-7)
        assert rep.loc[i, "variance"] == pytest.approx(3.0, abs=1e-6)
        assert rep.loc[i, "iterations"] == 1


def test_exact_solution_row_with_active_monotony() -> None:
    # D=2, V=1, i=1: monotony binds (p(-1) = p(0) = a), variance does not; with
    # p(1) = 2 - 5a and p(2) = 3a - 1 the stationarity condition is b^5 = a^2 c^3.
    a = brentq(lambda x: -2 * math.log(x) + 5 * math.log(2 - 5 * x) - 3 * math.log(3 * x - 1),
               1 / 3 + 1e-12, 0.4 - 1e-12, xtol=1e-15)
    pt = generate_ptable(PTableParams(max_noise=2, variance=1))
    p = pt.rows.query("i == 1")["p"].to_numpy()
    np.testing.assert_allclose(p, [a, a, 2 - 5 * a, 3 * a - 1], atol=2e-8)


def _gauss_row(v: np.ndarray, mass: float, variance: float) -> np.ndarray:
    """Maximum entropy on symmetric ``v`` with total ``mass`` and second moment ``variance``:
    ``p ~ exp(-lam v^2)``."""

    def second_moment(lam: float) -> float:
        w = np.exp(-lam * v * v)
        return mass * float(w @ (v * v) / w.sum()) - variance

    lam = brentq(second_moment, -5.0, 50.0, xtol=1e-15)
    w = np.exp(-lam * v * v)
    return mass * w / w.sum()


def test_exact_solution_symmetric_row_with_active_variance() -> None:
    pt = generate_ptable(PTableParams(max_noise=2, variance=1))
    p = pt.rows.query("i == 2")["p"].to_numpy()
    np.testing.assert_allclose(p, _gauss_row(np.arange(-2.0, 3.0), 1.0, 1.0), atol=2e-8)


def test_exact_solution_with_active_pstay() -> None:
    # D=5, V=3, pstay=0.5, symmetric row i=5: p(0)=0.5, the rest Gaussian-like with
    # second moment 3 over v = +-1..+-5
    pt = generate_ptable(PTableParams(max_noise=5, variance=3, pstay=0.5))
    row = pt.rows.query("i == 5")
    v = row["v"].to_numpy(float)
    expected = np.zeros(v.size)
    nz = v != 0
    expected[nz] = _gauss_row(v[nz], 0.5, 3.0)
    expected[~nz] = 0.5
    np.testing.assert_allclose(row["p"].to_numpy(), expected, atol=2e-8)


def test_r_pstay_relaxation_when_variance_unreachable() -> None:
    # D=2, V=1, pstay=0.9: with p(0) >= 0.9 the variance stays <= 0.4, so R lowers the bound
    # by 0.05 per solve until the variance rounds to V (or 20 solves)
    pt = generate_ptable(PTableParams(max_noise=2, variance=1, pstay=0.9))
    rep = pt.report.set_index("i")
    assert rep.loc[2, "variance"] == pytest.approx(1.0, abs=5e-4)
    assert rep.loc[2, "pstay_bound"] < 0.9
    assert rep.loc[2, "pstay_bound"] == pytest.approx(0.9 - 0.05 * (rep.loc[2, "iterations"] - 1))
    # row 1 can never reach V = 1 (see the vignette case): 20 solves, bound down to 1e-8
    assert rep.loc[1, "iterations"] == 20
    assert rep.loc[1, "pstay_bound"] == pytest.approx(1e-8)


# --- seed 004 §3.3: ABS integer form ------------------------------------------------------


def test_abs_lookup_table_from_handbook_ptable() -> None:
    table = abs_lookup_table(handbook_ptable(), modulus=10)
    assert table.shape == (4, 10)
    # key c stands for (c + 1) / 10; row 3: <= 0.3 -> -1, <= 0.7 -> 0, else +1
    assert table[3].tolist() == [-1, -1, -1, 0, 0, 0, 0, 1, 1, 1]
    assert table[1].tolist() == [-1] * 5 + [1] * 5
    assert table[0].tolist() == [0] * 10
    ckeys = abs_cell_keys(np.array([7, 5, 9, 3]), np.array([0, 0, 0, 1]), 2, modulus=10)
    assert ckeys.tolist() == [1, 3]
    assert abs_lookup(np.array([3, 40]), ckeys, table).tolist() == [-1, 0]


def test_abs_lookup_table_keeps_probabilities_on_256_keys() -> None:
    pt = generate_ptable(PTableParams(max_noise=5, variance=3, js=2))
    table = abs_lookup_table(pt, modulus=256, cap=20)
    assert table.shape == (21, 256)
    np.testing.assert_array_equal(table[20], table[8])
    for i in range(pt.i_max + 1):
        row = pt.rows.query("i == @i")
        freq = np.array([(table[i] == v).sum() for v in row["v"]]) / 256
        np.testing.assert_allclose(freq, row["p"], atol=1 / 256 + 1e-12)


# --- magnitudes and means (seed 000 §5.7; R cellKey flex design) --------------------------


def test_flex_function_shape() -> None:
    params = MagnitudeParams(ptable=handbook_ptable(), fp=1000, p_small=0.2, p_large=0.03, q=2)
    m = flex_multiplier(np.array([10.0, 999.0, 1000.0, 1e5, 1e9]), params)
    assert m[0] == m[1] == 0.2
    assert m[2] == pytest.approx(0.2)  # continuous at the flex point
    assert 0.03 < m[3] < 0.2
    assert m[4] == pytest.approx(0.03, rel=1e-3)


def test_magnitude_noise_worked_cases() -> None:
    pt = handbook_ptable()
    params = MagnitudeParams(ptable=pt, fp=100, p_small=0.4, p_large=0.05, q=2)
    # 50 < fp: x_delta = 20, a = 2.5 -> halfway between rows 2 and 3 (first ub > key)
    # key 0.8: row 2 -> +1, row 3 -> +1: 50 + 20 = 70; key 0.75: 0 and +1 -> 50 + 10 = 60
    out = perturb_magnitudes(np.array([50.0, 50.0]), np.array([0.8, 0.75]), params)
    np.testing.assert_allclose(out, [70.0, 60.0])
    # key 0 (no contributors) and value 0 stay unchanged
    np.testing.assert_allclose(
        perturb_magnitudes(np.array([50.0, 0.0]), np.array([0.0, 0.5]), params), [50.0, 0.0]
    )


def test_magnitude_negative_noise_never_flips_sign() -> None:
    pt = handbook_ptable()
    params = MagnitudeParams(ptable=pt, fp=100, p_small=1.0, p_large=0.5, q=2, mu_c=1.0)
    # x_delta = value, a = 1, row 1 with key 0.3 -> v = -1: 10 - 10 = 0, and with the extra
    # amount mu_c = 1 for a sensitive cell the noise -20 stops at -10
    out = perturb_magnitudes(
        np.array([10.0, 10.0, -10.0]), np.array([0.3, 0.3, 0.3]), params,
        sensitive=np.array([False, True, True]),
    )
    np.testing.assert_allclose(out, [0.0, 0.0, 0.0])


def test_perturbed_mean_table_5_23() -> None:
    # seed 000 Table 5.23: perturbed counts 9, 14, 19; sums of ages 90, 95, 185
    means = perturbed_mean(np.array([90.0, 95.0, 185.0, 3.0]), np.array([9, 14, 19, 0]))
    np.testing.assert_allclose(means[:3], [10.0, 95 / 14, 185 / 19])
    assert math.isnan(means[3])


# ---------------------------------------------------------------------------- seed 004 §3.3
def test_seed_004_truncated_normal_lookup_table() -> None:
    """Seed 004 §3.3's look-up table: 0 stays 0; 1..4 get N(0, 2) truncated at -i and +5; 5+ get
    N(0, 2) truncated at -5 and +5 — made integer as the normal's mass on [v-1/2, v+1/2]
    (computed here independently with scipy's truncated normal)."""
    from scipy.stats import truncnorm

    from tabsafe.protect.ptable.normal import truncated_normal_ptable

    pt = truncated_normal_ptable(5, 2.0)
    i, v, p = pt.column("i"), pt.column("v"), pt.column("p")
    assert pt.i_max == 5
    assert v[i == 0].tolist() == [0] and p[i == 0].tolist() == [1.0]
    sd = math.sqrt(2.0)
    for row in range(1, 6):
        low = -min(row, 5)
        assert v[i == row].tolist() == list(range(low, 6)), f"row {row}: truncated at {low} and +5"
        dist = truncnorm((low - 0.5) / sd, 5.5 / sd, scale=sd)
        grid = np.arange(low, 6)
        want = dist.cdf(grid + 0.5) - dist.cdf(grid - 0.5)
        assert np.allclose(p[i == row], want, atol=2e-8), f"row {row}"
        assert (pt.column("j")[i == row] >= 0).all()
    # the last row (every count from 5) is centred; the rows below lean upwards
    means = {r.i: r.mean for r in pt.row_reports}
    assert abs(means[5]) < 1e-9 and all(means[r] > 1e-3 for r in (1, 2, 3, 4))


def test_ptable_cli_shape_truncated_normal(tmp_path) -> None:
    from tabsafe.cli import main
    from tabsafe.protect.ptable.normal import truncated_normal_ptable

    out = tmp_path / "tn.csv"
    assert main(["ptable", "--shape", "truncated-normal", "--max-noise", "5", "--variance", "2", "--out",
                 str(out), "--quiet"]) == 0
    assert PTable.from_file(out) == truncated_normal_ptable(5, 2.0)
    bad = tmp_path / "bad.csv"
    assert main(["ptable", "--shape", "truncated-normal", "--max-noise", "5", "--variance", "2", "--pstay", "0.5",
                 "--out", str(bad)]) == 2
    assert not bad.exists()
