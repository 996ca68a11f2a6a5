"""Properties of the method ``round`` (every mode) on random tables (hypothesis).

Controlled rounding, the method ``controlled-round``, has its own file
(test_controlled_rounding_properties.py).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tabsafe as ts
from tabsafe.errors import InputError
from tabsafe.protect.rounding import Rounding

SETTINGS = settings(max_examples=25)


def make_table(shape: tuple[int, ...], values: list[int], hierarchical: bool) -> ts.Table:
    """The table of the inner cells ``values`` (row-major over ``shape``) with every margin, stored
    as tabulation stores it (cells with records only); ``v0`` has two groups when hierarchical.
    Built with numpy rather than tabulated: a tabulation costs 0.5 s, hypothesis makes hundreds."""
    dims = []
    x = np.asarray(values, dtype=np.int64).reshape(shape)
    for d, n in enumerate(shape):
        leaves = [f"v{d}_{i}" for i in range(n)]
        h = (ts.Hierarchy.from_tree({"G1": leaves[:2], "G2": leaves[2:]}) if d == 0 and hierarchical and n >= 3
             else ts.Hierarchy.flat(leaves))
        dims.append(ts.Dimension(f"v{d}", h))
        # a code's value is the sum of the leaves under it
        under = np.array([[code in h.ancestors(leaf) for leaf in leaves] for code in h.order], dtype=np.int64)
        x = np.moveaxis(np.tensordot(under, x, axes=([1], [d])), 0, d)
    t = ts.Table.from_grid(dims, {"count": x.ravel()})
    return t.take(t.counts != 0)


@st.composite
def tables(draw: st.DrawFn, dims: tuple[int, ...] = (2, 3), max_side: int = 4, max_count: int = 40) -> ts.Table:
    d = draw(st.sampled_from(dims))
    shape = tuple(draw(st.integers(2, max_side)) for _ in range(d))
    n = int(np.prod(shape))
    values = draw(st.lists(st.integers(0, max_count), min_size=n, max_size=n))
    return make_table(shape, values, draw(st.booleans()))


def rounded(t: ts.Table, seed: int = 0, **params: object) -> tuple[np.ndarray, np.ndarray]:
    """The rounded and the original counts over the whole grid."""
    p = Rounding(**params).protect(t, seed=seed)
    return np.asarray(p.release.table.grid("count")), np.asarray(t.grid("count"))


@SETTINGS
@given(t=tables(), base=st.sampled_from([2, 3, 5, 10]), mode=st.sampled_from(["conventional", "random",
                                                                                "semi-controlled"]),
       seed=st.integers(0, 99))
def test_multiples_of_the_base_and_multiples_unchanged(t: ts.Table, base: int, mode: str, seed: int) -> None:
    got, z = rounded(t, seed, mode=mode, base=base)
    assert np.all(got % base == 0)
    assert np.array_equal(got[z % base == 0], z[z % base == 0])  # zero cells stay zero
    assert np.all(np.abs(got - z) < base)  # adjacent multiples only


@SETTINGS
@given(t=tables(), base=st.sampled_from([3, 5]), seed=st.integers(0, 99))
def test_small_cell_adjustment_is_additive_and_touches_only_small_cells(t: ts.Table, base: int, seed: int) -> None:
    p = Rounding(mode="small-cell", base=base).protect(t, seed=seed)
    rel = p.release.table
    assert rel.is_dense and rel.is_additive()
    got, z, inner = rel.counts, t.grid("count"), rel.leaf_mask
    big = inner & ((z == 0) | (z >= base))
    assert np.array_equal(got[big], z[big])
    small = inner & (z > 0) & (z < base)
    assert set(np.unique(got[small])) <= {0, base}


def test_random_rounding_is_unbiased() -> None:
    """Mean of the rounded values over many seeds within 3 standard errors of the true value."""
    t = make_table((3, 4), [1, 2, 4, 7, 0, 3, 11, 13, 22, 5, 8, 9], hierarchical=False)
    z, base, n = t.grid("count").astype(float), 5, 400
    runs = np.array([rounded(t, s, mode="random", base=base)[0] for s in range(n)])
    r = z % base
    se = np.sqrt(r * (base - r) / n)  # Var = r(b - r) per cell (METHODS.md §4)
    moving = r > 0
    # 4 standard errors: a family-wise false alarm rate of about 0.1% over the 16 moving cells
    assert np.all(np.abs(runs.mean(0) - z)[moving] <= 4 * se[moving])
    assert np.all(runs[:, ~moving] == z[~moving])


def test_semi_controlled_rounding_is_unbiased() -> None:
    t = make_table((3, 4), [1, 2, 4, 7, 0, 3, 11, 13, 22, 5, 8, 9], hierarchical=False)
    z, base, n = t.grid("count").astype(float), 3, 400
    runs = np.array([rounded(t, s, mode="semi-controlled", base=base)[0] for s in range(n)])
    r = z % base
    se = np.sqrt(r * (base - r) / n)
    moving = r > 0
    assert np.all(np.abs(runs.mean(0) - z)[moving] <= 4 * se[moving] + 1e-9)


@SETTINGS
@given(t=tables(dims=(2, 3)), base=st.sampled_from([3, 5]), seed=st.integers(0, 99), by_area=st.booleans())
def test_semi_controlled_hits_the_controlled_totals(t: ts.Table, base: int, seed: int, by_area: bool) -> None:
    control = "v0" if by_area else None
    got, z = rounded(t, seed, mode="semi-controlled", base=base, control=control)
    dense = t.densify()
    inner = dense.leaf_mask
    if control is None:
        total = dense.cell_id({})
        assert got[total] == got[inner].sum()
        assert abs(int(got[total]) - int(z[total])) < base
    else:
        pos = dense.positions(0)
        h = dense.dimensions[0].hierarchy
        for code in h.leaves:
            row = dense.cell_id({"v0": code})
            assert got[row] == got[inner & (pos == h.position[code])].sum()
            assert abs(int(got[row]) - int(z[row])) < base


def test_consistent_rounding_gives_a_cell_the_same_value_in_two_tables() -> None:
    rng = np.random.default_rng(5)
    n = 3000
    persons = pd.DataFrame({
        "area": rng.choice(["A1", "A2", "A3", "A4"], n), "sex": rng.choice(["1", "2"], n),
        "age": rng.choice(["young", "middle", "old"], n), "rkey": rng.integers(0, 10**8, n) / 10**8,
    })
    md = ts.Microdata.from_frame(persons)
    method = Rounding(mode="consistent", base=5)
    key = method.needs().key
    t1 = method.protect(ts.tabulate(md, ["area", "sex"], key=key)).release
    t2 = method.protect(ts.tabulate(md, ["area", "age"], key=key)).release
    sub = ts.tabulate(md, ["area", "sex"], key=key, where="age <> 'old'")
    t3 = method.protect(sub).release
    for area in ["A1", "A2", "A3", "A4", "Total"]:
        assert t1.value(area=area, sex="Total") == t2.value(area=area, age="Total")
    assert np.all(t1.counts % 5 == 0)
    # a different population: the cell keys differ, so the rounding need not agree, but still rounds
    assert np.all(np.abs(t3.table.grid("count") - sub.grid("count")) < 5)


def test_consistent_rounding_follows_the_cell_keys() -> None:
    """The draw of each cell is its cell key: up exactly when ``ck < r/b`` (001 §8)."""
    rng = np.random.default_rng(9)
    n = 2000
    persons = pd.DataFrame({"area": rng.choice(["A1", "A2", "A3"], n), "sex": rng.choice(["1", "2"], n),
                            "rkey": rng.integers(0, 10**8, n) / 10**8})
    method = Rounding(mode="consistent", base=3)
    t = ts.tabulate(ts.Microdata.from_frame(persons), ["area", "sex"], key=method.needs().key)
    got = method.protect(t, seed=1).release.counts
    z, ck = t.counts, t.column("ckey")
    up = got > z
    assert np.array_equal(up, (z % 3 > 0) & (ck * 3 < z % 3))


@pytest.mark.parametrize("mode", ["random", "semi-controlled", "small-cell"])
def test_same_seed_same_output_and_input_untouched(mode: str) -> None:
    t = make_table((3, 3), [1, 2, 4, 7, 0, 3, 11, 13, 22], hierarchical=True)
    before = t.counts.copy()
    a, _ = rounded(t, 11, mode=mode, base=3)
    b, _ = rounded(t, 11, mode=mode, base=3)
    c = [rounded(t, s, mode=mode, base=3)[0] for s in range(12, 20)]
    assert np.array_equal(a, b)
    assert any(not np.array_equal(a, x) for x in c)  # and the seed matters
    assert np.array_equal(t.counts, before)


@pytest.mark.parametrize("mode", ["conventional", "random", "semi-controlled", "small-cell"])
def test_base_one_leaves_every_table_unchanged(mode: str) -> None:
    t = make_table((3, 3), [1, 2, 4, 7, 0, 3, 11, 13, 22], hierarchical=True)
    got, z = rounded(t, 1, mode=mode, base=1)
    assert np.array_equal(got, z)


@pytest.mark.parametrize("mode", ["conventional", "random", "consistent"])
def test_stored_cells_only_for_modes_that_keep_zeros(mode: str) -> None:
    """Conventional, random and consistent rounding keep zeros at zero, so a sparse table stays
    sparse (the release stores the cells the table stores); semi-controlled and small-cell work on
    the whole grid."""
    rng = np.random.default_rng(2)
    persons = pd.DataFrame({"a": rng.choice(["1", "2", "3"], 50), "b": rng.choice(["x", "y"], 50),
                            "rkey": rng.random(50)})
    codelists = {"a": ts.Hierarchy.flat(["1", "2", "3", "4"]), "b": ts.Hierarchy.flat(["x", "y"])}
    method = Rounding(mode=mode)
    t = ts.tabulate(ts.Microdata.from_frame(persons, codelists=codelists), ["a", "b"], key=method.needs().key)
    assert not t.is_dense
    rel = method.protect(t, seed=3).release.table
    assert np.array_equal(rel.ids, t.ids)
    dense = Rounding(mode="semi-controlled").protect(t, seed=3).release.table
    assert dense.is_dense and dense.value(a="4", b="x") == 0


def test_intervals_hold_the_true_values() -> None:
    """Existence intervals (000 §5.5.1.2, K = 0) contain every true count, zero cells included
    (their interval is [0, b-1], so the release stores the whole grid)."""
    t = make_table((4, 3), [0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 14], hierarchical=True)
    for mode in ["conventional", "random", "semi-controlled"]:
        rel = Rounding(mode=mode, base=5, intervals=True).protect(t, seed=4).release.table
        z = t.grid("count")
        assert rel.is_dense
        assert np.all((rel.column("lower") <= z) & (z <= rel.column("upper")))
        assert np.all(rel.column("upper")[rel.counts == 0] == 4)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"mode": "controlled"}, "controlled rounding is the method 'controlled-round'"),
        ({"mode": "sideways"}, "parameter 'mode' must be one of conventional, random"),
        ({"base": 0}, "parameter 'base' must be an integer >= 1; got 0"),
        ({"mode": "random", "control": "v0"}, "'control' applies to 'mode' semi-controlled only"),
        ({"mode": "small-cell", "intervals": True}, "'intervals' are defined for modes"),
    ],
)
def test_bad_parameters_name_the_parameter(params: dict, message: str) -> None:
    with pytest.raises(InputError, match=message):
        Rounding(**params)


def test_control_must_span_the_table() -> None:
    t = make_table((3, 3), [1, 2, 4, 7, 0, 3, 11, 13, 22], hierarchical=False)
    with pytest.raises(InputError, match="'control' variable 'nope' is not a spanning variable"):
        Rounding(mode="semi-controlled", control="nope").protect(t, seed=1)
