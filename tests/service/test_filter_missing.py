"""The service reads a filter on a numeric variable with missing values as the engines' SQL does:
a test on a missing value is unknown, and so is its negation (:mod:`tabsafe.model.filter`).

``tabsafe serve --prepare`` keeps a missing magnitude missing for filters (it counts as 0 only in
sums), so ``not income > 20000`` leaves out the persons without an income, as DuckDB does.
"""

from __future__ import annotations

import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tabsafe.io import read_meta
from tabsafe.model.microdata import Microdata
from tabsafe.service.builder import Builder
from tabsafe.service.prepared import open_prepared
from tabsafe.service.query import Dim, Query, resolve
from tabsafe.service.settings import Settings
from tabsafe.tabulation import tabulate


@pytest.fixture(scope="module")
def census_with_gaps(small_census, tmp_path_factory):
    """The small census with every 7th person's income missing."""
    d = tmp_path_factory.mktemp("gaps") / "census"
    shutil.copytree(small_census.directory, d)
    persons = pq.read_table(d / "persons.parquet")
    income = persons.column("income").to_numpy()
    gaps = np.arange(len(income)) % 7 == 0
    column = pa.array(income, pa.float64(), mask=gaps)
    pq.write_table(persons.set_column(persons.schema.get_field_index("income"), "income", column),
                   d / "persons.parquet")
    settings = Settings.load(data=d, prepared=d.parent / "prepared", store=d.parent / "s.sqlite")
    return d, Builder(settings, open_prepared(settings))


@pytest.mark.parametrize("where", ["not income > 20000", "income <= 20000 or sex = 2", "income != 0"])
def test_missing_income_is_unknown_in_the_service_as_in_the_engine(census_with_gaps, where: str) -> None:
    d, builder = census_with_gaps
    r = resolve(Query((Dim("sex"),), where=where), builder.data, builder.limits)
    ours = builder.tabulate(r)
    md = Microdata.from_file(d / "persons.parquet", codelists=read_meta(d / "meta.yaml", only=["sex"]))
    theirs = tabulate(md, ["sex"], where=where)
    for sex in ("1", "2"):
        assert ours.value("count", sex=sex) == theirs.value(sex=sex), (where, sex)


def test_a_test_and_its_negation_leave_out_the_missing(census_with_gaps) -> None:
    _, builder = census_with_gaps

    def count(where: str) -> int:
        return int(builder.tabulate(resolve(Query((Dim("sex"),), where=where), builder.data, builder.limits))
                   .value("count", sex="Total"))

    everyone = builder.data.n
    gaps = int(np.isnan(builder.data.values["income"]).sum())
    assert gaps == (everyone + 6) // 7
    assert count("income > 20000") + count("not income > 20000") == everyone - gaps
