"""The table builder on Spark (``engine: spark`` in the service settings, issue #18) answers as the
prepared backend does: the same cells, cell keys and sums before protection, the same published
tables and release-rule decisions — areas, groups and filters included. One local Spark session
for the module (found by ``engine: spark`` as the process's active session)."""

from __future__ import annotations

import numpy as np
import pytest

from tabsafe.errors import InputError
from tabsafe.service.builder import Builder
from tabsafe.service.planned import Catalogue, PlannedBuilder
from tabsafe.service.prepared import open_prepared
from tabsafe.service.query import resolve
from tabsafe.service.settings import Settings
from tests.service.test_engine_backend import SAME, SHARED

#: areas with a filter and with groups, a hierarchy-code filter, an empty table, a mean, subtotals
QUERIES = [SAME[i] for i in (1, 9, 11, 13, 15, 16)]


@pytest.fixture(scope="module")
def builders(small_census, tmp_path_factory):
    from tabsafe.engines.spark import local_session

    local_session(conf={"spark.driver.memory": "2g"})
    state = tmp_path_factory.mktemp("spark-service")
    common = dict(data=small_census.directory, **SHARED)
    prepared = Settings.load(prepared=state / "prepared", store=state / "p.sqlite", **common)
    spark = Settings.load(prepared=state / "spark", store=state / "s.sqlite", engine="spark", **common)
    return Builder(prepared, open_prepared(prepared)), PlannedBuilder(spark, Catalogue(spark))


def test_spark_answers_as_prepared(builders) -> None:
    prepared, spark = builders
    assert spark.engine.name == "spark"
    refused = 0
    for query in QUERIES:
        r1, r2 = resolve(query, prepared.data, prepared.limits), resolve(query, spark.data, spark.limits)
        t1, t2 = prepared.tabulate(r1).densify(), spark.tabulate(r2).densify()
        assert t1.value_columns == t2.value_columns
        for column in t1.value_columns:
            np.testing.assert_array_equal(t1.column(column), t2.column(column), err_msg=f"{query}: {column}")
        if query.measure != "count":  # sums and means: from the prepared records only (their dominance rules)
            with pytest.raises(InputError, match="prepared records only"):
                spark.evaluate(query)
            continue
        (o1, _), (o2, _) = prepared.evaluate(query), spark.evaluate(query)
        assert [c.to_json() for c in o1.checks] == [c.to_json() for c in o2.checks], query
        assert o1.payload == o2.payload, query
        refused += not o1.passed
    assert 0 < refused < len(QUERIES)  # default rules: some tables pass, some are refused
