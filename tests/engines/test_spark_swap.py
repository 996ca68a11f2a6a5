"""Record swapping on Spark gives the embedded engine's swaps, record by record, and its report.

One local JVM for the module (the suite gives whole files to workers). The census is small (6,000
persons in 12 areas of 3 regions) so that some households are at risk and most are not: the top
level then works from the heads of the donor lists, not from every household.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

import tabsafe as ts
from tabsafe.cli import main
from tabsafe.errors import InputError
from tabsafe.registry import build_method
from tabsafe.synth import synth_census

GEO = ["region", "area", "small_area"]
CASES = {
    "targeted": ("targeted-swap", {"geography": GEO, "risk_vars": ["sex", "age"], "k": 3, "pairrate": 0.05,
                                   "similar": [["household_size", "activity"], ["household_size"]], "household": "household_id",
                                   "donors": "same-top-area"}),
    "targeted-few-at-risk": ("targeted-swap", {"geography": GEO, "risk_vars": ["sex", "activity"], "k": 2,
                                               "swaprate": 0.02, "household": "household_id",
                                               "donors": "same-top-area"}),
    # donors from anywhere (the default): the whole population on the driver
    "targeted-anywhere": ("targeted-swap", {"geography": GEO, "risk_vars": ["sex", "age"], "k": 3, "swaprate": 0.1,
                                            "similar": [["household_size"]], "household": "household_id"}),
    "random": ("random-swap", {"geography": GEO, "swaprate": 0.1, "carry_along": ["household_size"],
                               "household": "household_id"}),
}
SWAP = ["--geography", "region,area,small_area", "--risk-vars", "sex,age", "--k", "3", "--swaprate", "0.05",
        "--similar", "household_size"]


@pytest.fixture(scope="module")
def spark():
    from tabsafe.engines.spark import SparkEngine, local_session

    return SparkEngine(session=local_session(conf={"spark.driver.memory": "2g",
                                                   "spark.sql.shuffle.partitions": "3"}))


@pytest.fixture(scope="module")
def census(tmp_path_factory):
    return synth_census(6_000, 5, tmp_path_factory.mktemp("census") / "c", n_areas=12, n_small_areas=60)


def plain(table: pa.Table) -> pd.DataFrame:
    """Codes as text (the embedded engine keeps Parquet's dictionaries, Spark does not)."""
    cols = {n: c.cast(pa.string()) if pa.types.is_dictionary(c.type) else c
            for n, c in zip(table.column_names, table.columns)}
    return pa.table(cols).to_pandas()


@pytest.mark.parametrize("case", list(CASES))
def test_same_swaps_and_report(spark, census, case: str) -> None:
    name, params = CASES[case]
    method = build_method(name, params)
    md = ts.Microdata.from_file(census.persons)
    a = method.perturb(md, seed=11)
    b = method.perturb(md, seed=11, engine=spark)
    try:
        got = plain(b.microdata.source.frame.toArrow())
        evaluation = plain(b.evaluation.toArrow())
    finally:
        b.microdata.source.close()
    want = plain(a.microdata.read())
    before = plain(md.read())
    assert a.report.figures["pairs"] > 0
    assert (want["small_area"] != before["small_area"]).any()
    pd.testing.assert_frame_equal(got, want)  # every record, in the data's order
    assert a.report.figures == b.report.figures
    assert a.report.private == b.report.private and a.report.notes == b.report.notes
    assert b.report.seed == a.report.seed == 11
    pd.testing.assert_frame_equal(evaluation.drop(columns=["household_id"]), plain(a.evaluation))
    assert (evaluation["household_id"] == before["household_id"]).all()


def test_parquet_folder_same_swaps_by_person(spark, tmp_path: Path) -> None:
    """A census Spark wrote (a folder of files): a household's first record, whose similarity
    values count, is first in the embedded engine's order (files by path) on Spark too."""
    from tabsafe.synth import synth_census_spark

    data = synth_census_spark(9_000, 2, tmp_path / "c", engine=spark, chunk=1_300, n_areas=12, n_small_areas=60)
    method = build_method(*CASES["targeted"])
    md = ts.Microdata.from_file(data.persons)
    a = method.perturb(md, seed=3)
    b = method.perturb(md, seed=3, engine=spark)
    try:
        got = plain(b.microdata.source.frame.toArrow()).sort_values("person_id", ignore_index=True)
    finally:
        b.microdata.source.close()
    want = plain(a.microdata.read()).sort_values("person_id", ignore_index=True)
    pd.testing.assert_frame_equal(got, want)
    assert a.report.figures == b.report.figures and a.report.figures["pairs"] > 0


def test_another_seed_other_swaps(spark, census) -> None:
    """The seed reaches the areas' tasks (a fixed stream would pass the test above)."""
    method = build_method(*CASES["targeted"])
    md = ts.Microdata.from_file(census.persons)
    one, two = (method.perturb(md, seed=s, engine=spark) for s in (11, 12))
    try:
        a, b = plain(one.microdata.source.frame.toArrow()), plain(two.microdata.source.frame.toArrow())
    finally:
        one.microdata.source.close()
        two.microdata.source.close()
    assert (a["small_area"] != b["small_area"]).any()
    assert method.perturb(md, seed=12).report.figures == two.report.figures


def cli(args: list[object], capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_swap_writes_the_same_records(spark, census, tmp_path: Path, capsys) -> None:
    files = {}
    for engine in ("duckdb", "spark"):
        out, ev, rep = (tmp_path / f"{engine}.parquet", tmp_path / f"{engine}-ev.parquet",
                        tmp_path / f"{engine}.json")
        code, stdout, err = cli(["swap", census.persons, *SWAP, "--seed", 4, "--engine", engine, "--out", out,
                                 "--evaluation", ev, "--report", rep], capsys)
        assert code == 0, err
        assert "swaps" in stdout
        files[engine] = (out, ev, json.loads(rep.read_text()), stdout)
    (a, aev, arep, aout), (b, bev, brep, bout) = files["duckdb"], files["spark"]
    assert b.is_dir() and all(p.stat().st_mode & 0o077 == 0 for p in (b, *b.iterdir()))  # private
    pd.testing.assert_frame_equal(plain(pads.dataset(b).to_table()), plain(pq.read_table(a)))
    ev = plain(pads.dataset(bev).to_table())
    pd.testing.assert_frame_equal(ev.drop(columns=["household_id"]), plain(pq.read_table(aev)))
    assert arep == brep and aout.replace(str(a), "") == bout.replace(str(b), "")
    # an earlier run's folder is replaced
    assert cli(["swap", census.persons, *SWAP, "--seed", 5, "--engine", "spark", "--out", b, "--quiet"],
               capsys)[0] == 0
    assert not plain(pads.dataset(b).to_table()).equals(plain(pq.read_table(a)))


def test_protect_targeted_swap_then_ckm_same_release(spark, census, tmp_path: Path, capsys) -> None:
    releases = {}
    for engine in ("duckdb", "spark"):
        out, rep = tmp_path / f"{engine}.csv", tmp_path / f"{engine}.json"
        code, _, err = cli(["protect", census.persons, "--by", "area,sex,household_size", "--method",
                            "targeted-swap,ckm", "--geography", "region,area,small_area", "--risk-vars", "sex,age",
                            "--k", 3, "--swaprate", 0.05, "--similar", "household_size", "--max-noise", 3,
                            "--variance", 2, "--seed", 8, "--engine", engine, "--out", out, "--report", rep], capsys)
        assert code == 0, err
        report = json.loads(rep.read_text())
        releases[engine] = (out.read_text(), report)
    assert releases["duckdb"][0] == releases["spark"][0]
    steps = [s for s in releases["duckdb"][1]["steps"]], [s for s in releases["spark"][1]["steps"]]
    assert steps[0] == steps[1] and steps[0][0]["figures"]["pairs"] > 0
    unswapped = tmp_path / "ckm-only.csv"
    assert cli(["protect", census.persons, "--by", "area,sex,household_size", "--method", "ckm", "--max-noise", 3,
                "--variance", 2, "--seed", 8, "--out", unswapped, "--quiet"], capsys)[0] == 0
    assert unswapped.read_text() != releases["spark"][0]  # the swap reached the tables


def _broken(census, tmp_path: Path, what: str) -> Path:
    df = pq.read_table(census.persons).to_pandas()
    if what == "nesting":  # a small area of one area appears under another
        other = df.loc[df["area"] != df.loc[0, "area"], "area"].iloc[0]
        df.loc[df["household_id"] == df.loc[0, "household_id"], "area"] = other
    elif what == "household":  # one member lives elsewhere
        big = df.groupby("household_id").size()
        hid = big[big > 1].index[0]
        row = df.index[df["household_id"] == hid][1]
        elsewhere = df.loc[df["small_area"] != df.loc[row, "small_area"]].iloc[0]
        for c in ("region", "area", "small_area"):
            df.loc[row, c] = elsewhere[c]
    elif what == "missing":
        df["age"] = df["age"].astype(object)
        df.loc[[3, 7], "age"] = None
    path = tmp_path / f"{what}.parquet"
    df.to_parquet(path)
    return path


@pytest.mark.parametrize(("data", "args"), [
    ("nesting", SWAP), ("household", SWAP), ("missing", SWAP),
    (None, [*SWAP[:2], "--risk-vars", "sex,agee", *SWAP[4:]]),
])
def test_bad_input_same_one_line(spark, census, tmp_path: Path, capsys, data, args) -> None:
    src = _broken(census, tmp_path, data) if data else census.persons
    errors = {}
    for engine in ("duckdb", "spark"):
        out = tmp_path / f"{engine}.parquet"
        code, _, err = cli(["swap", src, *args, "--seed", 1, "--engine", engine, "--out", out], capsys)
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
        assert not out.exists()
        errors[engine] = err
    assert errors["duckdb"] == errors["spark"]


@pytest.mark.parametrize("method", [["pram", "--variable", "small_area", "--retention", 0.8],
                                    ["weights", "--strata", "area"],
                                    ["sampling", "--strata", "area"]])
def test_method_without_a_spark_form_runs_in_this_process(census, tmp_path: Path, capsys, method) -> None:
    """As tabsafe protect runs it: the embedded engine's files, byte for byte (PRAM's published
    matrix too), and a note that says where it ran; no JVM is needed."""
    written = {}
    for engine in ("duckdb", "spark"):
        out, ev, rep = tmp_path / f"{engine}.parquet", tmp_path / f"{engine}-ev.parquet", tmp_path / f"{engine}.json"
        code, stdout, err = cli(["swap", census.persons, "--method", *method, "--seed", 1, "--engine", engine,
                                 "--out", out, "--evaluation", ev, "--report", rep], capsys)
        assert code == 0, err
        assert out.is_file() and ev.is_file()
        note = f"note: {method[0]} has no form for the spark engine: it ran in this process"
        assert (note in stdout) == (engine == "spark"), stdout
        written[engine] = {p.name.removeprefix(engine): p.read_bytes() for p in tmp_path.iterdir()
                           if p.name.startswith(engine)}
        assert (f"-transitions.csv" in written[engine]) == (method[0] == "pram")
    assert written["duckdb"] == written["spark"]


def test_engine_without_a_form_is_refused(census) -> None:
    method = build_method(*CASES["random"])

    class Other:
        name = "elsewhere"

    with pytest.raises(InputError, match="runs in this process only"):
        method.perturb(ts.Microdata.from_file(census.persons), seed=1, engine=Other())
