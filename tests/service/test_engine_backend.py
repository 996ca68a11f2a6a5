"""The table builder on an engine (``engine: duckdb`` in the service settings, issue #18) answers
every query exactly as the prepared backend does: the same cells, counts, cell keys and sums
before protection, the same published table, the same release-rule decisions — user-defined
areas, groups, subtotals and filters (hierarchy codes, orders of numeric codes) included. What the
planner cannot express (a filter on a numeric variable) is refused with 422, not answered
differently. Through a real server too (uvicorn, ``tabsafe serve``)."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from tabsafe.errors import InputError
from tabsafe.service.builder import Builder
from tabsafe.service.planned import Catalogue, PlannedBuilder
from tabsafe.service.prepared import open_prepared
from tabsafe.service.query import Dim, Query, resolve
from tabsafe.service.settings import Settings
from tests.service.conftest import LENIENT, TABSAFE, Server, add_key, write_config
from tests.service.test_builder import QUERIES

NUMERIC = {"income": {"flex_point": 5000.0}}
SHARED = {"levels": {"small_area": ["region", "area", "small_area"], "age": ["broad band", "band"],
                     "age_year": ["broad band", "band", "year"], "area": ["region", "area"]},
          "recode_level": {"age_year": 2}, "numeric": NUMERIC}

#: QUERIES without the filter on a numeric variable (refused by the engine backend), and more
#: areas, filters on hierarchy codes, empty selections and groups of areas
SAME = [q for q in QUERIES if "income" not in (q.where or "")] + [
    Query((Dim("small_area", level=2), Dim("sex")), area=("R1A003", "R2A120S02", "R2A121"), where="age = '30-34'"),
    Query((Dim("age", level=1), Dim("activity")), area=("R2",), measure="sum", variable="income"),
    Query((Dim("sex"), Dim("activity")), where="small_area = R1 and not age_year in (B00-14, 70)"),
    Query((Dim("education"),), where="small_area in (R1A004, R2A130S03) or age_year > 80"),
    Query((Dim("sex"),), where="sex = 1 and sex = 2"),  # selects no record
    Query((Dim("small_area", groups=(("north", ("R1A001", "R1A002")), ("south", ("R2",)))), Dim("age", level=1)),
          measure="mean", variable="income"),
]


def _builders(small_census, tmp_path_factory, rules):
    state = tmp_path_factory.mktemp("backends")
    common = dict(data=small_census.directory, rules=rules, **SHARED)
    prepared = Settings.load(prepared=state / "prepared", store=state / "p.sqlite", **common)
    engine = Settings.load(prepared=state / "engine", store=state / "e.sqlite", engine="duckdb", **common)
    return Builder(prepared, open_prepared(prepared)), PlannedBuilder(engine, Catalogue(engine))


@pytest.fixture(scope="module")
def lenient(small_census, tmp_path_factory):
    return _builders(small_census, tmp_path_factory, LENIENT)


@pytest.fixture(scope="module")
def strict(small_census, tmp_path_factory):
    """The default release rules: some queries are refused (and get suggestions)."""
    return _builders(small_census, tmp_path_factory, None)


def _dense(table):
    dense = table.densify()
    return dense, {c: dense.column(c) for c in dense.value_columns}


@pytest.mark.parametrize("query", SAME, ids=range(len(SAME)))
def test_same_cells_keys_and_answers(lenient, query) -> None:
    prepared, engine = lenient
    r1, r2 = resolve(query, prepared.data, prepared.limits), resolve(query, engine.data, engine.limits)
    assert r1.query == r2.query
    (t1, c1), (t2, c2) = _dense(prepared.tabulate(r1)), _dense(engine.tabulate(r2))
    assert [(d.variable, d.hierarchy.order) for d in t1.dimensions] == [
        (d.variable, d.hierarchy.order) for d in t2.dimensions]
    assert list(c1) == list(c2) and "ckey_int" in c1
    for column in c1:
        np.testing.assert_array_equal(c1[column], c2[column], err_msg=column)
    a1, a2 = prepared.area_table(r1), engine.area_table(r2)
    assert (a1 is None) == (a2 is None)
    if a1 is not None:
        assert a1.n_stored == a2.n_stored
        for column in a1.value_columns:
            np.testing.assert_array_equal(a1.column(column), a2.column(column), err_msg=column)
    if query.measure != "count":
        # sums and means need each contribution (dominance, p%): the engine backend refuses them
        with pytest.raises(InputError, match="prepared records only"):
            engine.evaluate(query)
        return
    (o1, _), (o2, _) = prepared.evaluate(query), engine.evaluate(query)
    assert o1.passed == o2.passed == (c1["count"][0] > 0)  # lenient rules: only an empty table fails
    assert o1.payload == o2.payload  # every published cell, the notes, the methods
    assert [c.to_json() for c in o1.checks] == [c.to_json() for c in o2.checks]


def test_same_refusals_and_suggestions(strict) -> None:
    """Under the default rules: the same decisions, values and suggested tables."""
    prepared, engine = strict
    refused = 0
    for query in (q for q in SAME if q.measure == "count"):
        o1, o2 = prepared.answer(query), engine.answer(query)
        assert type(o1) is type(o2)
        if o1.__class__.__name__ == "Refusal":
            refused += 1
            assert [c.to_json() for c in o1.outcome.checks] == [c.to_json() for c in o2.outcome.checks]
            assert (o1.suggestion is None) == (o2.suggestion is None)
            if o1.suggestion is not None:
                assert o1.suggestion.query == o2.suggestion.query
                assert o1.suggestion.outcome.payload == o2.suggestion.outcome.payload
        else:
            assert o1.payload == o2.payload
    assert refused >= 2


def test_numeric_filter_refused(lenient) -> None:
    prepared, engine = lenient
    query = next(q for q in QUERIES if "income" in (q.where or ""))
    assert prepared.answer(query).passed
    with pytest.raises(InputError, match="'income' is numeric") as err:
        engine.answer(query)
    assert err.value.http_status == 422


# --------------------------------------------------------------------------------- over HTTP
@pytest.fixture(scope="module")
def servers(small_census, tmp_path_factory):
    """A prepared and a DuckDB server over the same records (stopped at the end)."""
    out = []
    try:
        for engine in ("prepared", "duckdb"):
            state = tmp_path_factory.mktemp(f"http-{engine}")
            config = write_config(state / "service.yaml", state, LENIENT, engine=engine, numeric=NUMERIC)
            key = add_key(small_census.directory, config, "tester")
            out.append((Server(small_census.directory, config).start(), key))
        yield out
    finally:
        for server, _ in out:
            server.stop()


def test_http_answers_identical(servers) -> None:
    (prepared, k1), (engine, k2) = servers
    assert prepared.get("/api/v1/catalogue", k1)[1] == engine.get("/api/v1/catalogue", k2)[1]
    for query in [q for q in SAME[-6:] + SAME[:3] if q.measure == "count"]:
        body = query.to_json()
        s1, a1, _ = prepared.table(body, k1)
        s2, a2, _ = engine.table(body, k2)
        assert s1 == s2 and s1 in (200, 409), (a1, a2)  # 409: the empty table is refused by both
        assert a1 == a2
    numeric = next(q for q in QUERIES if "income" in (q.where or "")).to_json()
    assert prepared.table(numeric, k1)[0] == 200
    status, answer, _ = engine.table(numeric, k2)
    assert status == 422 and "'income' is numeric" in str(answer)


def test_bad_engine_setting(small_census, tmp_path) -> None:
    config = write_config(tmp_path / "service.yaml", tmp_path, engine="sparkle")
    proc = subprocess.run([*TABSAFE, "serve", "--data", str(small_census.directory), "--config", str(config),
                           "--port", "0"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "service.yaml" in lines[0] and "'engine'" in lines[0] and "'sparkle'" in lines[0]
