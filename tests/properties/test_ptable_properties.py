"""Properties every generated p-table and its look-up must have (METHODS.md §2)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tabsafe.protect.cell_key import generate_record_keys, lookup_noise, perturb_counts
from tabsafe.protect.ptable import PTable, PTableParams, generate_ptable


@st.composite
def feasible_params(draw: st.DrawFn) -> PTableParams:
    """Valid parameters with V above the smallest feasible variance.

    A blocked row i <= js can only mix v = -i with v = js + 1 - i, whose zero-mean variance is
    i (js + 1 - i); every other row can stay put. So V > max_i i (js + 1 - i) is feasible.
    """
    d = draw(st.integers(1, 6))
    js = draw(st.integers(0, min(d - 1, 3)))  # D >= js + 1, else zero mean is impossible
    floor = max((i * (js + 1 - i) for i in range(1, js + 1)), default=0)
    variance = floor + draw(st.floats(0.05, 4.0))
    pstay = draw(st.none() | st.floats(0.05, 0.95))
    monotony = draw(st.booleans())
    return PTableParams(max_noise=d, variance=variance, js=js, pstay=pstay, monotony=monotony)


@settings(max_examples=30)
@given(params=feasible_params())
def test_generated_rows_are_valid_noise_distributions(params: PTableParams) -> None:
    pt = generate_ptable(params)
    rows = pt.rows
    assert list(rows.columns) == ["i", "j", "p", "v", "p_int_lb", "p_int_ub"]
    assert sorted(rows["i"].unique()) == list(range(params.i_max + 1))
    assert (rows["j"] >= 0).all()
    assert not rows["j"].between(1, params.js).any() if params.js else True
    assert (rows["v"].abs() <= params.max_noise).all()
    assert (rows["v"] == rows["j"] - rows["i"]).all()
    for i, grp in rows.groupby("i"):
        p = grp["p"].to_numpy()
        v = grp["v"].to_numpy(float)
        assert abs(p.sum() - 1) <= 1e-6, i
        assert abs(p @ v) <= 1e-6, i
        assert p @ v**2 <= params.variance + 1e-6, i
        assert grp["p_int_ub"].iloc[-1] == 1.0
        np.testing.assert_allclose(grp["p_int_ub"] - grp["p_int_lb"], p, atol=1e-12)
    rep = pt.report
    assert (rep["variance"] <= params.variance + 1e-6).all()
    assert (rep["mean"].abs() <= 1e-6).all()


@settings(max_examples=20)
@given(params=feasible_params(), seed=st.integers(0, 2**32 - 1), pick=st.integers(0, 100))
def test_lookup_reproduces_the_row_distribution(params: PTableParams, seed: int, pick: int) -> None:
    pt = generate_ptable(params)
    i = 1 + pick % params.i_max
    n = 40_000
    count = i if i < params.i_max else i + pick  # counts above i_max use the last row
    counts = np.full(n, count)
    keys = generate_record_keys(n, seed)
    noise = lookup_noise(counts, keys, pt)
    row = pt.rows.query("i == @i")
    p = row["p"].to_numpy()
    v = row["v"].to_numpy(float)
    mean = p @ v
    var = p @ (v - mean) ** 2
    mu4 = p @ (v - mean) ** 4
    se_mean = np.sqrt(var / n)
    # the variance estimate about the known mean, whose standard error is sqrt((mu4 - var^2)/n)
    se_var = np.sqrt(max(mu4 - var**2, 0.0) / n)
    assert abs(noise.mean() - 0.0) <= 3 * se_mean + 1e-6
    assert abs(np.mean((noise - mean) ** 2) - var) <= 3 * se_var + 1e-6
    assert set(np.unique(noise)) <= set(v.astype(int))
    published = perturb_counts(counts, keys, pt)
    assert (published >= 0).all()
    if params.js:
        assert not ((published >= 1) & (published <= params.js)).any()


@settings(max_examples=15)
@given(params=feasible_params(), layout=st.sampled_from(["csv", "tau-argus"]), name=st.sampled_from(["p.csv", "p.txt"]))
def test_files_round_trip_in_either_layout(tmp_path_factory, params: PTableParams, layout: str, name: str) -> None:
    """What tabsafe writes it reads back exactly, whatever the layout and the text suffix, and
    the rows below V are the rows whose variance stays below V (METHODS.md §2)."""
    pt = generate_ptable(params)
    path = tmp_path_factory.mktemp("rt") / name
    (pt.to_csv if layout == "csv" else pt.to_tau_argus)(path)
    back = PTable.from_file(path)
    assert back == pt and back.i_max == pt.i_max
    for c in ("i", "j", "v"):
        np.testing.assert_array_equal(back.column(c), pt.column(c))
    for c in ("p", "p_int_lb", "p_int_ub"):
        np.testing.assert_array_equal(back.column(c), pt.column(c))
    below = {r.i for r in pt.rows_below()}
    assert below == {r.i for r in pt.row_reports if r.i > 0 and r.variance < params.variance - 5e-4}
    assert (pt.shortfall() is None) == (not below)
