"""Spark and DuckDB give the same tables, cell by cell, and the same one-line errors.

Spark runs in local mode on one JVM shared by the whole module (the suite gives whole files to
workers, ``--dist loadfile`` in pyproject.toml, so one worker starts one JVM). Each comparison runs
the same :class:`TableSpec` on both engines and requires every stored cell id and every column to
be *equal* (not close): counts, decimal sums, exact cell keys, and the cell key method's
published counts and magnitudes.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tabsafe as ts
from tabsafe.engines import planner
from tabsafe.io import read_meta
from tabsafe.model.hierarchy import Hierarchy
from tabsafe.model.microdata import FileSource, InnerCells
from tabsafe.model.spec import KeySpec, TableSpec
from tabsafe.protect.cell_key_method import CellKeyMethod
from tabsafe.tabulation import tabulate


@pytest.fixture(scope="module")
def spark():
    """The engine on the process's local session (a small heap: the tests' tables are small)."""
    from tabsafe.engines.spark import SparkEngine, local_session

    return SparkEngine(session=local_session(conf={"spark.driver.memory": "2g"}))


def both(spark, data, spec: TableSpec) -> tuple[ts.Table, ts.Table]:
    return tabulate(data, spec, engine="duckdb"), tabulate(data, spec, engine=spark)


def assert_same(a: ts.Table, b: ts.Table) -> None:
    """Same dimensions (codes in the same order), same stored cells, every column equal."""
    assert [(d.variable, d.hierarchy.order) for d in a.dimensions] == [
        (d.variable, d.hierarchy.order) for d in b.dimensions]
    assert a.n_stored == b.n_stored and a.n_stored > 0
    np.testing.assert_array_equal(a.ids, b.ids)
    assert a.value_columns == b.value_columns
    for name in a.value_columns:
        np.testing.assert_array_equal(a.column(name), b.column(name), err_msg=name)
    assert b.meta["engine"] == "spark" and a.meta["engine"] == "duckdb"


def census(small_census) -> ts.Microdata:
    return ts.Microdata.from_file(small_census.persons, codelists=read_meta(small_census.meta))


def hierarchy(small_census, name: str) -> Hierarchy:
    return Hierarchy.from_file(small_census.directory / "hierarchies" / name)


# ------------------------------------------------------------------------------ same tables
def test_hierarchies_sums_and_cell_keys(spark, small_census) -> None:
    spec = TableSpec(by=("area", "sex", "age", "activity"),
                     hierarchies={"area": hierarchy(small_census, "area.hrc"), "age": hierarchy(small_census, "age.yaml")},
                     sums=("income",), key=KeySpec(column="rkey"))
    a, b = both(spark, census(small_census), spec)
    assert_same(a, b)
    assert set(a.value_columns) >= {"count", "sum_income", "ckey", "ckey_int"}
    assert a.value("count", area="Total", sex="Total", age="Total", activity="Total") == 20_000


def test_margins_in_memory_and_over_grouping_sets_alike(spark, small_census, monkeypatch) -> None:
    """Small grids get their margins summed from the engine's inner cells, large ones from its
    grouping sets: on Spark as on DuckDB, the same table both ways (hierarchies, exact keys)."""
    spec = TableSpec(by=("area", "sex", "age"), key=KeySpec(column="rkey"),
                     hierarchies={"area": hierarchy(small_census, "area.hrc"), "age": hierarchy(small_census, "age.yaml")})
    data = census(small_census)
    in_memory, spark_in_memory = both(spark, data, spec)
    assert_same(in_memory, spark_in_memory)
    monkeypatch.setattr(planner, "IN_MEMORY_GRID_CELLS", 0)
    assert_same(in_memory, tabulate(data, spec, engine=spark))


def test_codes_taken_from_the_data(spark, small_census) -> None:
    """No declared codelist: codes are checked and placed from the pass's own grouping bits."""
    spec = TableSpec(by=("citizenship", "sex", "household_size"), sums=("income",), key=KeySpec(column="rkey"))
    a, b = both(spark, ts.Microdata.from_file(small_census.persons), spec)
    assert_same(a, b)


def test_filter_language(spark, small_census) -> None:
    spec = TableSpec(by=("region", "sex", "education"),
                     where="activity in (EMP, UNE) and age_year >= 30 and not citizenship = NAT",
                     sums=("income",), key=KeySpec(column="rkey"))
    a, b = both(spark, census(small_census), spec)
    assert_same(a, b)
    assert 0 < a.value("count", region="Total", sex="Total", education="Total") < 20_000


@pytest.fixture(scope="module")
def census_csv(small_census, tmp_path_factory) -> Path:
    """The census as CSV: every column text, numbers included."""
    path = tmp_path_factory.mktemp("csv") / "persons.csv"
    frame = pq.read_table(small_census.persons, columns=["area", "sex", "age", "age_year", "income", "rkey"]).to_pandas()
    frame.to_csv(path, index=False)
    return path


def test_csv_every_column_text(spark, census_csv) -> None:
    """Numbers in text columns: compared, summed and keyed through the dialect's casts."""
    spec = TableSpec(by=("area", "sex"), where="age_year >= 30 and age_year < 65 and sex != 2", sums=("income",),
                     key=KeySpec(column="rkey"))
    a, b = both(spark, ts.Microdata.from_file(census_csv), spec)
    assert_same(a, b)


def test_abs_integer_keys(spark, small_census) -> None:
    frame = pq.read_table(small_census.persons, columns=["region", "sex", "age", "rkey"]).to_pandas()
    frame["rkey256"] = np.floor(frame["rkey"] * 256).astype(np.int64)
    spec = TableSpec(by=("region", "sex", "age"), key=KeySpec(column="rkey256", modulus=256))
    a, b = both(spark, ts.Microdata.from_frame(frame), spec)
    assert_same(a, b)
    assert a.column("ckey_int").max() < 256


def test_key_sums_beyond_bigint(spark, small_census) -> None:
    """15-digit keys of 20,000 records sum past 2^63: the sum must switch to 38-digit decimals
    (Spark's sum of BIGINT is a BIGINT and overflows)."""
    spec = TableSpec(by=("region", "sex"), key=KeySpec(column="rkey", digits=15))
    a, b = both(spark, census(small_census), spec)
    assert_same(a, b)
    keys = pq.read_table(small_census.persons, columns=["rkey"]).column("rkey").to_numpy()
    total = sum(round(k * 10**15) for k in keys.tolist())
    assert total > 2**63
    assert a.value("ckey_int", region="Total", sex="Total") == total % 10**15


def test_sums_round_ties_alike(spark) -> None:
    """Values with more decimals than ``sum_digits`` round half away from zero of x·10^d in both
    engines (their own casts to DECIMAL disagree: 1.005 → 1.00 in DuckDB, 1.01 in Spark)."""
    values = [1.005, 2.675, 0.125, -0.125, 1234.25, 2.5, -2.5, 0.045, 1.115]
    frame = pd.DataFrame({"g": [str(i) for i in range(len(values))], "x": values})
    for digits in (0, 1, 2):
        spec = TableSpec(by=("g",), sums=("x",), sum_digits=digits)
        a, b = both(spark, ts.Microdata.from_frame(frame), spec)
        assert_same(a, b)
        scale = 10.0**digits
        expected = [math.copysign(math.floor(abs(v * scale) + 0.5), v) / scale for v in values]
        got = [a.value("sum_x", g=str(i)) for i in range(len(values))]
        assert got == expected, digits


def test_cell_key_method_counts_and_magnitudes(spark, small_census) -> None:
    method = CellKeyMethod(max_noise=3, variance=2, js=1, magnitude="income", flex_point=5000.0)
    spec = TableSpec(by=("area", "sex", "age"), hierarchies={"area": hierarchy(small_census, "area.hrc")},
                     sums=method.needs().sums, key=method.needs().key)
    a, b = both(spark, census(small_census), spec)
    pa_, pb = method.protect(a), method.protect(b)
    ra, rb = pa_.release.table, pb.release.table
    np.testing.assert_array_equal(ra.ids, rb.ids)
    assert ra.value_columns == rb.value_columns and "sum_income" in ra.value_columns
    for name in ra.value_columns:
        np.testing.assert_array_equal(ra.column(name), rb.column(name), err_msg=name)
    assert not np.array_equal(ra.column("count"), a.column("count"))  # the noise is there
    assert pa_.report.figures == pb.report.figures


def test_cell_key_method_abs_form(spark, small_census) -> None:
    frame = pq.read_table(small_census.persons, columns=["region", "sex", "activity", "rkey"]).to_pandas()
    frame["rkey256"] = np.floor(frame["rkey"] * 256).astype(np.int64)
    method = CellKeyMethod(max_noise=2, variance=1, key="rkey256", abs_modulus=256)
    spec = TableSpec(by=("region", "sex", "activity"), key=method.needs().key)
    a, b = both(spark, ts.Microdata.from_frame(frame), spec)
    np.testing.assert_array_equal(method.protect(a).release.table.column("count"),
                                  method.protect(b).release.table.column("count"))


# ------------------------------------------------------------------------------ same errors
def _frame(**cols) -> pd.DataFrame:
    base = {"a": ["x", "y", "y", "z"], "b": ["1", "1", "2", "2"], "k": [0.1, 0.2, 0.3, 0.4], "n": [1.0, 2.0, 3.0, 4.0]}
    base.update(cols)
    return pd.DataFrame(base)


ERRORS = {
    "unknown variable": (lambda: ts.Microdata.from_frame(_frame()), TableSpec(by=("a", "nope"))),
    "code outside the codelist": (
        lambda: ts.Microdata.from_frame(_frame(), codelists={"a": Hierarchy.flat(["x", "y"])}), TableSpec(by=("a", "b"))),
    "missing value": (lambda: ts.Microdata.from_frame(_frame(b=["1", None, "2", None])), TableSpec(by=("a", "b"))),
    "record key outside [0, 1)": (lambda: ts.Microdata.from_frame(_frame(k=[0.1, 1.5, 0.2, 0.3])),
                                  TableSpec(by=("a",), key=KeySpec(column="k"))),
    "huge integer key": (lambda: ts.Microdata.from_frame(_frame(k=[1.0, 1e300, 2.0, 3.0])),
                         TableSpec(by=("a",), key=KeySpec(column="k", modulus=256))),
    "fractional integer key": (lambda: ts.Microdata.from_frame(_frame(k=[1.0, 2.5, 2.0, 3.0])),
                               TableSpec(by=("a",), key=KeySpec(column="k", modulus=256))),
    "filter on unknown variable": (lambda: ts.Microdata.from_frame(_frame()), TableSpec(by=("a",), where="c = 1")),
    "filter orders codes": (lambda: ts.Microdata.from_frame(_frame()), TableSpec(by=("a",), where="b > x")),
    "summing codes": (lambda: ts.Microdata.from_frame(_frame()), TableSpec(by=("a",), sums=("b",))),
    "fractional count": (lambda: InnerCells.from_frame(_frame(n=[1.0, 2.5, 3.0, 4.0]), count="n"), TableSpec(by=("a", "b"))),
    "infinite count": (lambda: InnerCells.from_frame(_frame(n=[1.0, math.inf, 3.0, 4.0]), count="n"),
                       TableSpec(by=("a", "b"))),
    "duplicate inner cells": (lambda: InnerCells.from_frame(_frame(b=["1", "1", "1", "2"], a=["x", "y", "y", "z"]),
                                                            count="n"), TableSpec(by=("a", "b"))),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_bad_input_same_error(spark, case: str) -> None:
    make, spec = ERRORS[case]
    messages = []
    for engine in ("duckdb", spark):
        with pytest.raises(ts.InputError) as err:
            tabulate(make(), spec, engine=engine)
        messages.append(str(err.value))
    assert messages[0] == messages[1]
    assert "\n" not in messages[1]


# ------------------------------------------------------------------------------ the session
def test_session_reads_only_its_source_and_leaves_the_caller_alone(spark, small_census, tmp_path) -> None:
    other = tmp_path / "secret.parquet"
    pq.write_table(pa.table({"password": ["hunter2"]}), other)
    base = spark.spark()
    views_before = {t.name for t in base.catalog.listTables()}
    session = spark.open(FileSource.of(small_census.persons))
    try:
        assert session.run("SELECT count(*) AS n FROM src").column(0)[0].as_py() == 20_000
        for sql in [f"SELECT * FROM parquet.`{other}`", f"SELECT * FROM csv.`{other}`",
                    "SELECT CAST(9223372036854775807 AS BIGINT) + 1 AS n"]:
            with pytest.raises(ts.InputError):
                session.run(sql)
        assert "src" not in {t.name for t in base.catalog.listTables()}  # a private session's view
    finally:
        session.close()
    assert {t.name for t in base.catalog.listTables()} == views_before
    assert "src" not in {t.name for t in session.spark.catalog.listTables()}


def test_engine_by_name_and_settings() -> None:
    from tabsafe.engines.spark import SparkEngine
    from tabsafe.registry import engine_names, get_engine

    assert "spark" in engine_names()
    engine = get_engine("spark", master="local[1]")
    assert isinstance(engine, SparkEngine) and engine.master == "local[1]" and engine.dialect.name == "spark"
    with pytest.raises(ts.InputError, match="does not take these settings"):
        get_engine("spark", nope=1)


def test_parquet_folder_source(spark, small_census, tmp_path) -> None:
    """A folder of Parquet files (as Spark writes a data set) is one source for both engines."""
    folder = tmp_path / "persons.parquet"
    folder.mkdir()
    table = pq.read_table(small_census.persons, columns=["region", "sex", "age", "rkey"])
    pq.write_table(table.slice(0, 7_000), folder / "part-0.parquet")
    pq.write_table(table.slice(7_000), folder / "part-1.parquet")
    a, b = both(spark, ts.Microdata.from_file(folder), TableSpec(by=("region", "sex", "age"), key=KeySpec()))
    assert_same(a, b)
    whole = tabulate(ts.Microdata.from_file(small_census.persons), TableSpec(by=("region", "sex", "age"), key=KeySpec()))
    np.testing.assert_array_equal(a.column("ckey_int"), whole.column("ckey_int"))
    empty = tmp_path / "empty.parquet"
    empty.mkdir()
    with pytest.raises(ts.InputError, match="must hold .parquet files"):
        ts.Microdata.from_file(empty)


# ------------------------------------------------------------------------------ synth on Spark
def test_synth_on_spark_is_deterministic_and_consistent(spark, tmp_path) -> None:
    from tabsafe.synth import synth_census_spark

    runs = [synth_census_spark(2_500, 11, tmp_path / name, chunk=1_000, engine=spark) for name in ("a", "b")]
    persons = [pq.read_table(r.persons).sort_by("person_id") for r in runs]
    assert persons[0].equals(persons[1])  # same seed, same census
    p = persons[0]
    assert p.column("person_id").to_pylist() == list(range(1, 2_501))
    households = pq.read_table(runs[0].households).sort_by("household_id")
    assert runs[0].n_households == households.num_rows
    assert set(p.column("household_id").to_pylist()) == set(households.column("household_id").to_pylist())
    assert int(pa.compute.sum(households.column("persons")).as_py()) == 2_500
    # chunks draw from their own seeds: no two chunks repeat each other's keys
    keys = p.column("rkey").to_numpy()
    assert not np.array_equal(keys[:1_000], keys[1_000:2_000])
    # the codelists written beside it hold every code, and both engines read the folders alike
    md = ts.Microdata.from_file(runs[0].persons, codelists=read_meta(runs[0].meta))
    spec = TableSpec(by=("area", "sex", "age", "activity", "education"), key=KeySpec())
    assert_same(*both(spark, md, spec))


# ------------------------------------------------------------------------------ the command line
def test_cli_engine_spark_quiet_and_identical(small_census, tmp_path) -> None:
    """A user's run: a fresh process starts its own JVM, prints one line, and nothing of Spark."""
    outs = {}
    for engine in ("duckdb", "spark"):
        out = tmp_path / f"{engine}.csv"
        proc = subprocess.run(
            [sys.executable, "-m", "tabsafe.cli", "tabulate", str(small_census.persons), "--by", "region,sex,age",
             "--engine", engine, "--out", str(out)],
            check=False, capture_output=True, text=True, timeout=600,
            env={**os.environ, "TABSAFE_SPARK_MASTER": "local[1]"},
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr == ""
        assert proc.stdout.count("\n") == 1 and proc.stdout.startswith("wrote ")
        outs[engine] = out.read_bytes()
    assert outs["duckdb"] == outs["spark"]


# texts that are numbers in some engines' casts and not in the filter language (" 7", "inf"),
# missing texts, nulls and NaNs: Spark's SQL reads each filter as DuckDB's does
_GAPS = pa.table({
    "g": ["a", "b", "a", "b", "a", "b", "a", "b"],
    "t": ["07", " 7", "inf", None, "1e1", "x", "-3", "7.0"],
    "n": pa.array([7.0, None, math.nan, 1.5, 10.0, -1.0, 7.0, None], pa.float64(), from_pandas=False),
    "k": pa.array([7, None, 3, 10, None, 0, 7, 1], pa.int64()),
})


@pytest.mark.parametrize("where", [
    "t <= 7", "not t > 7", "t != x", "t not in ('07', x)", "n <= 7", "not n > 7", "n != 7",
    "k >= 7 or n < 0", "not (t = x and k > 100)", "n in (7, 1.5) or t < 0",
])
def test_filters_on_missing_values_and_number_texts_agree(spark, tmp_path, where: str) -> None:
    path = tmp_path / "gaps.parquet"
    pq.write_table(_GAPS, path)
    md = ts.Microdata.from_file(path)
    duck, theirs = both(spark, md, TableSpec(by=("g",), where=where))
    assert_same(duck, theirs)
