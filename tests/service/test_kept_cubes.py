"""The kept cubes and the records agree on random queries: counts, cell keys, sums and the
contributions the magnitude rules read (two largest, total), whether a table is a sum over a
kept whole-population cube (filters on categorical variables included) or a pass over the
query's records (:mod:`tabsafe.service.counting`)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tabsafe.service.counting as counting
from tabsafe.service.builder import Builder
from tabsafe.service.prepared import open_prepared
from tabsafe.service.query import Dim, Query, resolve
from tabsafe.service.settings import Settings

DIMS = [Dim("sex"), Dim("age", level=1), Dim("age", level=2), Dim("activity"), Dim("occupation"),
        Dim("education"), Dim("citizenship"), Dim("household_size"), Dim("small_area", level=1),
        Dim("age_year", level=2, subtotals=True)]
#: filters on categorical variables, with their bounds drawn (the kept cube answers them)
FILTERS = ["age_year >= {k}", "age_year < {k}", "age_year >= {k} and sex = 2", "not (age_year <= {k}) or activity = EMP",
           "citizenship != NAT and age_year > {k}"]


@pytest.fixture(scope="module")
def builder(small_census, tmp_path_factory):
    state = tmp_path_factory.mktemp("kept")
    settings = Settings.load(data=small_census.directory, prepared=state / "prepared", store=state / "s.sqlite")
    return Builder(settings, open_prepared(settings))


@st.composite
def queries(draw: st.DrawFn) -> Query:
    picked = draw(st.lists(st.sampled_from(DIMS), min_size=1, max_size=3, unique_by=lambda d: d.variable))
    where = None
    if draw(st.booleans()):
        where = draw(st.sampled_from(FILTERS)).format(k=draw(st.integers(0, 100)))
    measure = draw(st.sampled_from(["count", "sum", "mean"]))
    return Query(tuple(picked), where=where, measure=measure, variable=None if measure == "count" else "income")


def _both(builder: Builder, query: Query):
    """(through kept cubes, through the records) of a query: its cells and its contributions."""
    r = resolve(query, builder.data, builder.limits)
    out = []
    for cells in (None, 0):
        saved = counting.LEAF_CUBE_CELLS
        if cells is not None:
            counting.LEAF_CUBE_CELLS = cells  # every table from a pass over the records
        try:
            dense = builder.tabulate(r).densify()
            columns = {c: dense.column(c) for c in dense.value_columns}
            contrib = builder.contributions(r) if r.numeric else {}
        finally:
            counting.LEAF_CUBE_CELLS = saved
        out.append((columns, contrib))
    return out


@given(query=queries())
def test_kept_cubes_answer_as_the_records_do(builder, query):
    (cube_cells, cube_contrib), (pass_cells, pass_contrib) = _both(builder, query)
    assert cube_cells.keys() == pass_cells.keys()
    for column in cube_cells:
        np.testing.assert_array_equal(cube_cells[column], pass_cells[column], err_msg=column)
    assert cube_contrib.keys() == pass_contrib.keys()
    for name in cube_contrib:
        np.testing.assert_array_equal(cube_contrib[name], pass_contrib[name], err_msg=name)


def test_contributions_of_a_filtered_table(builder):
    """A worked case: the two largest and the total of the whole table's margin equal those of
    the records the filter keeps, counted directly."""
    query = Query((Dim("sex"), Dim("activity")), where="age_year >= 40", measure="mean", variable="income")
    r = resolve(query, builder.data, builder.limits)
    got = builder.contributions(r)
    data = builder.data
    keep = r.mask(slice(0, data.n))
    lo, hi = data.fixed["income"]
    fixed = np.abs(np.rint(hi).astype(np.int64) * (1 << 26) + np.rint(lo).astype(np.int64))[keep]
    ordered = np.sort(fixed)
    # the grand total cell: every dimension at its total (the first cell of the grid)
    assert got["total"][0] == fixed.sum() / 100
    assert got["top1"][0] == ordered[-1] / 100
    assert got["top2"][0] == ordered[-2] / 100


AREAS = ["R1A002", "R1A005S01", "R2", "R1A001"]


@given(query=queries(), area=st.lists(st.sampled_from(AREAS), max_size=3, unique=True),
       bound=st.integers(0, 99), drop=st.booleans())
def test_a_population_key_tells_populations_apart(builder, query, area, bound, drop):
    """The defence computes a population's digest once per :func:`population_key`: two queries
    with the same key must count the same records, so a key that missed a filter bound, an
    area's block or a restricted category would let a new population pass as an answered one."""
    from dataclasses import replace

    from tabsafe.service.defence import area_mask, population_key, population_mask

    first = replace(query, area=tuple(area) or None)
    # a near neighbour: the bound moved by one, a block of the area dropped, or a category kept out
    other = replace(first, where=f"age_year >= {bound}" if first.where is None else first.where.replace(
        str(bound), str(bound + 1)))
    if drop and first.area and len(first.area) > 1:
        other = replace(first, area=first.area[1:])
    elif drop:
        rest = tuple(d for d in first.dimensions if d.variable != "sex")[:2]
        other = replace(first, dimensions=(Dim("sex", categories=("1",)), *rest))
    ra, rb = (resolve(q, builder.data, builder.limits) for q in (first, other))
    same_records = bool(np.array_equal(population_mask(builder.data, ra), population_mask(builder.data, rb)))
    same_area = ra.area_label is None and rb.area_label is None or (
        ra.area_label is not None and rb.area_label is not None
        and bool(np.array_equal(area_mask(builder.data, ra), area_mask(builder.data, rb))))
    if population_key(ra) == population_key(rb):
        assert same_records and same_area
