"""Tabulation invariants on random microdata: every margin is the sum of its inner cells,
inner cells match a plain group-by, inner-cell input gives the same table, cell keys are exact."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import contextmanager
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tabsafe as ts
from tabsafe.engines import planner

# fewer examples than the profile in tests/conftest.py: each one tabulates three ways
SETTINGS = settings(max_examples=40)

LEAVES = {"a": ["a1", "a2", "a3", "a4", "a5"], "b": ["1", "2", "3"], "c": ["x", "y"]}
HIERARCHIES = {
    "a": ts.Hierarchy.from_tree({"A": ["a1", "a2"], "B": {"B1": ["a3", "a4"]}, "a5": None}),
    "b": ts.Hierarchy.flat(["1", "2", "3"]),
    "c": ts.Hierarchy.from_tree({"xy": ["x", "y"]}),
}


@st.composite
def microdata(draw: st.DrawFn) -> pd.DataFrame:
    n = draw(st.integers(1, 60))
    cols = {v: draw(st.lists(st.sampled_from(codes), min_size=n, max_size=n)) for v, codes in LEAVES.items()}
    keys = draw(st.lists(st.integers(0, 10**10 - 1), min_size=n, max_size=n))
    cols["rkey"] = [k / 1e10 for k in keys]
    return pd.DataFrame(cols)


@SETTINGS
@given(microdata(), st.sampled_from([["a"], ["a", "b"], ["b", "a", "c"], ["c", "a"]]), st.booleans())
def test_margins_are_sums_of_inner_cells(df: pd.DataFrame, by: list[str], with_hierarchy: bool) -> None:
    hier = {v: HIERARCHIES[v] for v in by} if with_hierarchy else {v: ts.Hierarchy.flat(LEAVES[v]) for v in by}
    t = ts.tabulate(ts.Microdata.from_frame(df), by, hierarchies=hier, key="rkey")
    counts = t.grid("count")
    keys = t.grid("ckey_int")
    # 1. additivity along every dimension and hierarchy level
    assert t.is_additive()
    # 2. every cell = number of records whose codes roll up to the cell's codes
    rng = np.random.default_rng(0)
    rows = rng.choice(t.n_cells, size=min(t.n_cells, 25), replace=False)
    dense = t.densify()
    for row in rows:
        cell = {v: d.hierarchy.order[dense.positions(i)[row]] for i, (v, d) in enumerate(zip(by, t.dimensions))}
        mask = np.ones(len(df), dtype=bool)
        for v in by:
            h = hier[v]
            code = cell[v]
            mask &= df[v].map(lambda leaf, h=h, code=code: code in h.ancestors(leaf)).to_numpy()
        assert counts[row] == mask.sum()
        expected_key = sum((Fraction(round(k * 1e10), 10**10) for k in df.loc[mask, "rkey"]), Fraction(0)) % 1
        assert Fraction(int(keys[row]), 10**10) == expected_key
    # 3. the grand total is the number of records, the grid is complete, and exactly the cells with
    # records are stored
    assert counts[0] == len(df)
    assert t.n_cells == np.prod([len(hier[v]) for v in by])
    np.testing.assert_array_equal(t.ids, np.flatnonzero(counts))


@SETTINGS
@given(microdata(), st.booleans())
def test_inner_cells_input_gives_same_table(df: pd.DataFrame, drop_zeros: bool) -> None:
    by = ["a", "c"]
    hier = {v: HIERARCHIES[v] for v in by}
    from_micro = ts.tabulate(ts.Microdata.from_frame(df), by, hierarchies=hier)
    inner = df.groupby(by).size().reset_index(name="n")
    if not drop_zeros:  # with explicit zero rows as well as without any
        full = pd.MultiIndex.from_product([LEAVES[v] for v in by], names=by).to_frame(index=False)
        inner = full.merge(inner, how="left").fillna({"n": 0})
    from_cells = ts.tabulate(ts.InnerCells.from_frame(inner, count="n"), by, hierarchies=hier)
    np.testing.assert_array_equal(from_micro.grid("count"), from_cells.grid("count"))
    np.testing.assert_array_equal(from_micro.ids, from_cells.ids)


@SETTINGS
@given(microdata())
def test_where_filter_equals_tabulating_the_subset(df: pd.DataFrame) -> None:
    by = ["a", "b"]
    hier = {v: ts.Hierarchy.flat(LEAVES[v]) for v in by}
    filtered = ts.tabulate(ts.Microdata.from_frame(df), by, hierarchies=hier, where="c = 'x'")
    subset = df[df.c == "x"]
    if len(subset):
        direct = ts.tabulate(ts.Microdata.from_frame(subset), by, hierarchies=hier)
        np.testing.assert_array_equal(filtered.grid("count"), direct.grid("count"))
    else:
        assert filtered.n_stored == 0 and not filtered.grid("count").any()


def test_sum_of_numeric_variable() -> None:
    df = pd.DataFrame({"a": ["a1", "a1", "a2"], "income": [10.5, 1.0, 4.0]})
    t = ts.tabulate(ts.Microdata.from_frame(df), ["a"], sums=["income"])
    assert t.value("sum_income", a="Total") == 15.5 and t.value("sum_income", a="a1") == 11.5


def test_abs_integer_keys_sum_mod_m() -> None:
    df = pd.DataFrame({"a": ["a1", "a1", "a2"], "k": [200, 100, 7]})
    t = ts.tabulate(ts.Microdata.from_frame(df), ["a"], key=ts.KeySpec(column="k", modulus=256))
    assert t.value("ckey_int", a="a1") == (300 % 256) and t.value("ckey_int", a="Total") == 307 % 256


def test_handbook_cell_key_example() -> None:
    """000 §5.4, Table 5.16: record keys 0.9, 0.3 and 0.6 give the cell key 0.8 (exactly)."""
    df = pd.DataFrame({"a": ["x", "x", "x"], "rkey": [0.9, 0.3, 0.6]})
    t = ts.tabulate(ts.Microdata.from_frame(df), ["a"], key="rkey")
    assert t.value("ckey_int", a="x") == 8 * 10**9 and t.value("ckey", a="x") == 0.8


# ------------------------------------------------------------------ two ways to the margins
@contextmanager
def _grouping_sets() -> Iterator[None]:
    """Margins summed by the engine over grouping sets (the path of grids too large to sum in
    memory) instead of from the inner cells."""
    saved = planner.IN_MEMORY_GRID_CELLS
    planner.IN_MEMORY_GRID_CELLS = 0
    try:
        yield
    finally:
        planner.IN_MEMORY_GRID_CELLS = saved


def _same(a: ts.Table, b: ts.Table) -> None:
    assert [(d.variable, d.hierarchy.order) for d in a.dimensions] == [
        (d.variable, d.hierarchy.order) for d in b.dimensions]
    np.testing.assert_array_equal(a.ids, b.ids)
    assert a.value_columns == b.value_columns
    for name in a.value_columns:
        assert a.column(name).dtype == b.column(name).dtype, name
        np.testing.assert_array_equal(a.column(name), b.column(name), err_msg=name)
    assert a.meta == b.meta


@SETTINGS
@given(microdata(), st.sampled_from([["a"], ["a", "b"], ["b", "a", "c"], ["c", "a"]]), st.booleans(),
       st.sampled_from(["none", "fraction", "abs"]), st.booleans(), st.sampled_from([None, "c = 'x'", "b in (1, 3)"]),
       st.lists(st.integers(0, 3), min_size=60, max_size=60))
def test_margins_from_inner_cells_equal_the_engines_grouping_sets(
        df: pd.DataFrame, by: list[str], with_hierarchy: bool, key: str, weighted: bool, where: str | None,
        weights: list[int]) -> None:
    """The planner sums small grids' margins from the inner cells in memory, larger ones by the
    engine over grouping sets: the same table either way, cell for cell and column for column
    (nested and unbalanced hierarchies, both kinds of record key, whole weights including 0,
    filters that may select nothing)."""
    df = df.assign(w=weights[:len(df)], k256=[int(k * 256) for k in df["rkey"]])
    hier = {v: HIERARCHIES[v] for v in by} if with_hierarchy else {v: ts.Hierarchy.flat(LEAVES[v]) for v in by}
    spec = {"hierarchies": hier, "where": where, "weight": "w" if weighted else None,
            "key": {"none": None, "fraction": ts.KeySpec(column="rkey"),
                    "abs": ts.KeySpec(column="k256", modulus=256)}[key]}
    data = ts.Microdata.from_frame(df)
    in_memory = ts.tabulate(data, by, **spec)
    with _grouping_sets():
        by_engine = ts.tabulate(data, by, **spec)
    _same(in_memory, by_engine)


@SETTINGS
@given(microdata(), st.booleans())
def test_inner_cells_input_same_either_way(df: pd.DataFrame, with_zeros: bool) -> None:
    by = ["a", "b"]
    inner = df.groupby(by).size().reset_index(name="n")
    if with_zeros:
        full = pd.MultiIndex.from_product([LEAVES[v] for v in by], names=by).to_frame(index=False)
        inner = full.merge(inner, how="left").fillna({"n": 0})
    data = ts.InnerCells.from_frame(inner, count="n")
    hier = {v: HIERARCHIES[v] for v in by}
    in_memory = ts.tabulate(data, by, hierarchies=hier)
    with _grouping_sets():
        by_engine = ts.tabulate(data, by, hierarchies=hier)
    _same(in_memory, by_engine)


@pytest.mark.parametrize("case", ["outside", "missing", "integer column"])
def test_bad_codes_same_error_either_way(case: str) -> None:
    """A code outside its codelist or a missing value is named alike on both paths; integer codes
    are placed as their text."""
    codes = {"outside": ["a1", "a9", "a9", "a2"], "missing": ["a1", None, "a2", "a2"], "integer column": [1, 2, 2, 3]}
    df = pd.DataFrame({"a": codes[case], "b": ["1", "2", "3", "1"]})
    lists = {"a": ts.Hierarchy.flat(["1", "2", "3"] if case == "integer column" else ["a1", "a2"]),
             "b": ts.Hierarchy.flat(LEAVES["b"])}
    data = ts.Microdata.from_frame(df, codelists=lists)
    if case == "integer column":
        in_memory = ts.tabulate(data, ["a", "b"])
        with _grouping_sets():
            _same(in_memory, ts.tabulate(data, ["a", "b"]))
        assert in_memory.value("count", a="2", b="Total") == 2
        return
    messages = []
    for path in (contextlib.nullcontext, _grouping_sets):
        with path(), pytest.raises(ts.InputError) as err:
            ts.tabulate(data, ["a", "b"])
        messages.append(str(err.value))
    assert messages[0] == messages[1]
    assert ("'a9' (2 rows)" if case == "outside" else "1 missing value") in messages[0]
