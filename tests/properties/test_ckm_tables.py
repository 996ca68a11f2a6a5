"""The cell key method on tables: consistency across tables and runs, no forbidden values,
noise statistics that match the p-table (seed 000 §5.4; METHODS.md §2)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

import tabsafe as ts
from tabsafe.protect.cell_key_method import CellKeyMethod
from tabsafe.protect.ptable import PTableParams, generate_ptable

PTABLE = generate_ptable(PTableParams(max_noise=5, variance=3, js=2))
CODES = {"a": ["a1", "a2", "a3"], "b": ["b1", "b2"], "c": ["c1", "c2", "c3", "c4"]}


@st.composite
def records(draw: st.DrawFn) -> pd.DataFrame:
    n = draw(st.integers(1, 80))
    cols = {v: draw(st.lists(st.sampled_from(c), min_size=n, max_size=n)) for v, c in CODES.items()}
    cols["rkey"] = [k / 1e10 for k in draw(st.lists(st.integers(0, 10**10 - 1), min_size=n, max_size=n))]
    return pd.DataFrame(cols)


def _protect(df: pd.DataFrame, by: list[str], **kw) -> ts.Table:
    method = CellKeyMethod(ptable=PTABLE)
    table = ts.tabulate(ts.Microdata.from_frame(df), by, key="rkey",
                        hierarchies={v: ts.Hierarchy.flat(CODES[v]) for v in by}, **kw)
    return method.protect(table).table


@given(records())
@settings(max_examples=30)
def test_same_records_same_value_in_any_table(df: pd.DataFrame) -> None:
    """The margin a × Total of table (a, b) and the cells a of table (a, c) and of table (a)
    hold the same records, so they must be published with the same value."""
    t_ab = _protect(df, ["a", "b"])
    t_ac = _protect(df, ["c", "a"])
    t_a = _protect(df, ["a"])
    for code in ["Total", *CODES["a"]]:
        v1 = t_ab.value(a=code, b="Total")
        v2 = t_ac.value(a=code, c="Total")
        v3 = t_a.value(a=code)
        assert v1 == v2 == v3
    # a sub-population equal to the whole population gives the same cells as no filter
    t_filtered = _protect(df, ["a", "b"], where="rkey >= 0")
    np.testing.assert_array_equal(t_filtered.column("count"), t_ab.column("count"))


@given(records())
@settings(max_examples=30)
def test_never_negative_never_in_1_to_js(df: pd.DataFrame) -> None:
    t = _protect(df, ["a", "b", "c"])
    out = t.column("count")
    assert (out >= 0).all()
    assert not np.isin(out, [1, 2]).any()
    assert (np.abs(out - t.column("original")) <= 5).all()
    assert (out[t.column("original") == 0] == 0).all()


def test_same_result_in_two_runs_and_input_untouched() -> None:
    rng = np.random.default_rng(3)
    df = pd.DataFrame({v: rng.choice(c, 500) for v, c in CODES.items()})
    df["rkey"] = rng.integers(0, 10**10, 500) / 1e10
    copy = df.copy()
    a = _protect(df, ["a", "b", "c"]).column("count")
    b = _protect(df, ["a", "b", "c"]).column("count")
    np.testing.assert_array_equal(a, b)
    pd.testing.assert_frame_equal(df, copy)


def test_empirical_noise_matches_ptable_rows() -> None:
    """Over many cells with random keys, the noise of cells with original value i has mean 0 and
    the p-table row's variance (within 3 standard errors)."""
    rng = np.random.default_rng(11)
    n_cells = 60_000
    rows = PTABLE.rows
    for i in (3, 4, 8, 20):
        counts = np.full(n_cells, i, dtype=np.int64)
        table = ts.Table.from_grid(
            [ts.Dimension("cell", ts.Hierarchy.flat([str(k) for k in range(n_cells - 1)]))],
            {"count": counts, "ckey": rng.integers(0, 10**10, n_cells) / 1e10,
             "ckey_int": np.zeros(n_cells, dtype=np.int64)},
        )
        noise = CellKeyMethod(ptable=PTABLE).protect(table).table.column("count") - counts
        row = rows[rows.i == min(i, PTABLE.i_max)]
        var = float((row.p * row.v**2).sum() - (row.p * row.v).sum() ** 2)
        se_mean = np.sqrt(var / n_cells)
        assert abs(noise.mean()) < 3 * se_mean
        m4 = float((row.p * row.v**4).sum())
        se_var = np.sqrt((m4 - var**2) / n_cells)
        assert abs(noise.var() - var) < 3 * se_var


def test_noise_off_gives_the_original_table() -> None:
    """A p-table that never moves a count (p=1 at v=0) must return the original table."""
    rows = pd.DataFrame({"i": [0, 1, 2], "j": [0, 1, 2], "p": [1.0, 1.0, 1.0], "v": [0, 0, 0],
                         "p_int_lb": [0.0, 0.0, 0.0], "p_int_ub": [1.0, 1.0, 1.0]})
    from tabsafe.protect.ptable import PTable

    identity = PTable.from_frame(rows)
    rng = np.random.default_rng(5)
    df = pd.DataFrame({v: rng.choice(c, 300) for v, c in CODES.items()})
    df["rkey"] = rng.random(300).round(10)
    table = ts.tabulate(ts.Microdata.from_frame(df), ["a", "b"], key="rkey")
    out = CellKeyMethod(ptable=identity).protect(table).table
    np.testing.assert_array_equal(out.column("count"), table.counts)


def test_report_says_when_the_generated_ptable_stays_below_v() -> None:
    """Issue #12: D=2, V=10 reaches variance 2 at most; the ckm report says so (with the
    variances reached), and says nothing when every row reaches V."""
    rng = np.random.default_rng(2)
    df = pd.DataFrame({v: rng.choice(c, 200) for v, c in CODES.items()})
    df["rkey"] = rng.integers(0, 10**10, 200) / 1e10
    table = ts.tabulate(ts.Microdata.from_frame(df), ["a", "b"], key="rkey")
    notes = CellKeyMethod(max_noise=2, variance=10).protect(table).report.notes
    below = [n for n in notes if "stay below" in n]
    assert len(below) == 1 and "variance 10" in below[0] and "i=1: 0.9319, i>=2: 2" in below[0]
    notes = CellKeyMethod(ptable=PTABLE).protect(table).report.notes
    assert not [n for n in notes if "stay below" in n]
