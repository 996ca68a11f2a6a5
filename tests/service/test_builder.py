"""The builder's counting: kept whole-population cubes, passes over the records and the
engine-free planner (`tabsafe tabulate`) give the same cells, counts, cell keys and sums."""

from __future__ import annotations

import numpy as np
import pytest

import tabsafe.service.counting as builder_module
from tabsafe.io import read_meta
from tabsafe.model.microdata import Microdata
from tabsafe.model.spec import KeySpec
from tabsafe.service.builder import Builder
from tabsafe.service.prepared import open_prepared
from tabsafe.service.query import Dim, Query, resolve
from tabsafe.service.settings import Settings
from tabsafe.tabulation import tabulate

QUERIES = [
    Query((Dim("sex"), Dim("age", level=1))),
    Query((Dim("age", level=2, subtotals=True), Dim("activity"), Dim("sex"))),
    Query((Dim("age_year", level=2, categories=("20-24", "65-69", "00-04")), Dim("education"))),
    Query((Dim("age_year", groups=(("young", ("B00-14", "B15-29")), ("old", ("B65-84", "B85+")))), Dim("sex"))),
    Query((Dim("activity"), Dim("sex")), where="age_year >= 65 and citizenship != NAT"),
    Query((Dim("occupation"), Dim("age", level=1)), where="age in ('20-24', '25-29') or sex = 2"),
    Query((Dim("small_area", level=1), Dim("sex")), where="not (activity in (EMP, UNE))"),
    Query((Dim("activity"),), where="income > 20000"),
    # filter variables named out of alphabetical order, neither of them shown
    Query((Dim("education"),), where="sex = 2 and age_year < 40 and activity != STU"),
    Query((Dim("small_area", level=3), Dim("age", level=1)), area=("R1A002", "R1A005S01", "R2")),
    Query((Dim("sex"), Dim("education")), measure="mean", variable="income"),
    Query((Dim("sex"), Dim("activity")), where="age_year < 30", measure="sum", variable="income"),
]


@pytest.fixture(scope="module")
def builder(small_census, tmp_path_factory):
    state = tmp_path_factory.mktemp("builder")
    settings = Settings.load(data=small_census.directory, prepared=state / "prepared", store=state / "s.sqlite")
    return Builder(settings, open_prepared(settings))


def _cells(table):
    dense = table.densify()
    return {c: dense.column(c) for c in dense.value_columns}


@pytest.mark.parametrize("query", QUERIES, ids=range(len(QUERIES)))
def test_kept_cubes_and_passes_agree(builder, query, monkeypatch):
    r = resolve(query, builder.data, builder.limits)
    through_cubes = _cells(builder.tabulate(r))
    monkeypatch.setattr(builder_module, "LEAF_CUBE_CELLS", 0)  # every table from a pass over the records
    through_pass = _cells(builder.tabulate(r))
    assert through_cubes.keys() == through_pass.keys()
    for column in through_cubes:
        np.testing.assert_array_equal(through_cubes[column], through_pass[column], err_msg=column)
    assert through_cubes["count"][0] > 0


@pytest.mark.parametrize("query", QUERIES[4:7] + QUERIES[8:9] + QUERIES[10:11], ids=range(5))
def test_same_cells_as_the_planner(builder, small_census, query):
    """Counts, cell keys and sums equal those of `tabsafe tabulate` (DuckDB, exact decimals)."""
    d = small_census.directory
    names = [dim.variable for dim in query.dimensions]
    hierarchies = {}
    for dim in query.dimensions:
        var = builder.data.variables[dim.variable]
        if var.hierarchy.max_depth > 1:
            hierarchies[dim.variable] = var.hierarchy
    r = resolve(query, builder.data, builder.limits)
    ours = builder.tabulate(r)
    md = Microdata.from_file(d / "persons.parquet", codelists=read_meta(d / "meta.yaml", only=names))
    theirs = tabulate(md, names, hierarchies=hierarchies, where=query.where, key=KeySpec(column="rkey"),
                      sums=(query.variable,) if query.variable else ())
    for row, cell in enumerate(theirs.ids.tolist()):
        codes = {v: dim.hierarchy.order[p] for v, dim, p in
                 zip(theirs.variables, theirs.dimensions, np.unravel_index(cell, theirs.shape))}
        if not all(c in ours.dimension(v).hierarchy.position for v, c in codes.items()):
            continue
        for column in ("count", "ckey_int"):
            assert ours.value(column, **codes) == theirs.column(column)[row], (codes, column)
        if query.variable:
            # the same exact decimal sum; Arrow's decimal-to-double cast may land one ulp away
            # from the correctly rounded double the service computes (cents / 100)
            column = f"sum_{query.variable}"
            assert ours.value(column, **codes) == pytest.approx(theirs.column(column)[row], rel=1e-15, abs=0)


def test_only_a_release_can_be_serialised(builder):
    """The response is made from the release side of a protection; its evaluation side (with
    the original counts) is refused by type."""
    from tabsafe.service.builder import release_payload

    r = resolve(QUERIES[0], builder.data, builder.limits)
    protection = builder.chain(None).protect(builder.tabulate(r), seeds=[None])
    payload = release_payload(protection.release, r)
    assert payload["columns"] == ["sex", "age", "count"]
    with pytest.raises(TypeError, match="only a Release"):
        release_payload(protection.evaluation, r)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="only a Release"):
        release_payload(protection.table, r)  # type: ignore[arg-type]
    # and the published counts are not the originals (the cell key method changed some)
    original = protection.evaluation.densify().column("original").tolist()
    assert [row[-1] for row in payload["rows"]] != original


def test_prepared_whole_units_round_ties_as_the_engines_sql_does() -> None:
    """Record keys and magnitudes become whole units as the planner's SQL ``round`` makes them
    (halves away from zero), so the prepared backend and an engine backend agree on ties."""
    import duckdb
    import numpy as np

    from tabsafe.service.prepared import round_half_away

    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 12.5, 0.125 * 100, 7.0, 0.49999])
    sql = duckdb.sql(f"SELECT [CAST(round(v) AS BIGINT) FOR v IN {x.tolist()}::DOUBLE[]]").fetchall()[0][0]
    assert round_half_away(x).tolist() == sql == [1, 2, 3, -1, -3, 13, 13, 7, 0]


def test_kept_cubes_stay_within_their_configured_size(small_census, tmp_path):
    """Whole-population cubes of original counts are kept up to ``limits.cube_cache_cells``
    (least recently used go), whatever the number of queries."""
    settings = Settings.load(data=small_census.directory, prepared=tmp_path / "prepared", store=tmp_path / "s.sqlite",
                             limits={"cube_cache_cells": 20_000})
    b = Builder(settings, open_prepared(settings))
    names = ["sex", "age_year", "activity", "occupation", "education", "citizenship", "household_size"]
    asked = 0
    for i, a in enumerate(names):
        for c in names[i + 1:]:
            b.evaluate(Query((Dim(a), Dim(c))))
            asked += 1
            assert b._leaf_cubes.total <= 20_000
    assert asked >= 20 and len(b._leaf_cubes.items) >= 2
