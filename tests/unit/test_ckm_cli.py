"""`tabsafe protect --method ckm` and `tabsafe ptable` as a user runs them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tabsafe.cli import main

PTABLE_ARGS = ["--max-noise", 5, "--variance", 3, "--js", 2]


def cli(args: list[object], capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def ptable_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The p-table D=5, V=3, js=2 written once by `tabsafe ptable`."""
    path = tmp_path_factory.mktemp("ptable") / "p.csv"
    assert main(["ptable", *map(str, PTABLE_ARGS), "--out", str(path)]) == 0
    return path


def test_protect_ckm_release_and_evaluation(small_census, tmp_path: Path, capsys) -> None:
    release = tmp_path / "release.csv"
    code, _, err = cli(["protect", small_census.persons, "--by", "area,sex", "--hierarchy",
                          f"area={small_census.directory}/hierarchies/area.hrc", "--method", "ckm",
                          *PTABLE_ARGS, "--out", release], capsys)
    assert code == 0, err
    df = pd.read_csv(release, dtype=str)
    assert list(df.columns) == ["area", "sex", "count"]  # no originals, no keys
    evaluation = tmp_path / "eval.parquet"
    code, _, err = cli(["protect", small_census.persons, "--by", "area,sex", "--method", "ckm", *PTABLE_ARGS,
                        "--keep-original", "--out", evaluation], capsys)
    assert code == 0, err
    ev = pd.read_parquet(evaluation)
    assert {"count", "original"} <= set(ev.columns)
    counts = ev["count"].to_numpy()
    assert (counts >= 0).all() and not ((counts >= 1) & (counts <= 2)).any()
    assert (ev["count"] != ev["original"]).mean() > 0.3  # noise is really applied


def _published(path: Path, by: list[str]) -> pd.Series:
    return pd.read_csv(path, dtype=str).set_index(by)["count"].astype(int)


def test_same_cell_same_value_across_different_tables(small_census, ptable_file: Path, tmp_path: Path,
                                                      capsys) -> None:
    """Seed 000 §5.4: a cell's noise comes from its records' keys, so the same records get the
    same published value in every table. Three different tables from the same persons, each
    protected by its own `tabsafe protect` run, share cells:

    * area × sex is the age total of area × age × sex;
    * area × age of the women (``--where "sex = 2"``) is the sex = 2 slice of area × age × sex.
    """
    hier = ["--hierarchy", f"area={small_census.directory}/hierarchies/area.hrc"]
    runs = {
        "area_sex": (["--by", "area,sex"], ["area", "sex"]),
        "area_age_sex": (["--by", "area,age,sex"], ["area", "age", "sex"]),
        "women_area_age": (["--by", "area,age", "--where", "sex = 2"], ["area", "age"]),
    }
    published: dict[str, pd.Series] = {}
    for name, (args, by) in runs.items():
        out = tmp_path / f"{name}.csv"
        code, _, err = cli(["protect", small_census.persons, *args, *hier, "--method", "ckm", "--ptable",
                            ptable_file, "--out", out, "--quiet"], capsys)
        assert code == 0, err
        published[name] = _published(out, by)
    big = published["area_age_sex"]
    evaluation = tmp_path / "big_eval.parquet"
    code, _, err = cli(["protect", small_census.persons, "--by", "area,age,sex", *hier, "--method", "ckm",
                        "--ptable", ptable_file, "--out", tmp_path / "again.csv", "--evaluation", evaluation,
                        "--quiet"], capsys)
    assert code == 0, err
    original = pd.read_parquet(evaluation).astype({"area": str, "age": str, "sex": str}).set_index(
        ["area", "age", "sex"])["original"]

    # area x sex == the age total of area x age x sex
    totals = big.xs("Total", level="age")
    shared = published["area_sex"].index.intersection(totals.index)
    assert len(shared) == len(published["area_sex"]) > 300
    pd.testing.assert_series_equal(published["area_sex"][shared], totals[shared], check_names=False)
    # women's area x age == the sex = 2 slice of area x age x sex
    women = big.xs("2", level="sex")
    shared_w = published["women_area_age"].index.intersection(women.index)
    assert len(shared_w) == len(published["women_area_age"]) > 3000
    pd.testing.assert_series_equal(published["women_area_age"][shared_w], women[shared_w], check_names=False)
    # not vacuous: in the shared cells with records, the noise really moved most counts
    orig_totals = original.xs("Total", level="age")[shared]
    moved = (totals[shared] != orig_totals)[orig_totals > 0]
    assert moved.mean() > 0.5


def test_ptable_command_and_reuse(small_census, ptable_file: Path, tmp_path: Path, capsys) -> None:
    assert list(pd.read_csv(ptable_file).columns) == ["i", "j", "p", "v", "p_int_lb", "p_int_ub"]
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    assert cli(["protect", small_census.persons, "--by", "sex,age", "--method", "ckm", "--ptable", ptable_file,
                "--out", a], capsys)[0] == 0
    assert cli(["protect", small_census.persons, "--by", "sex,age", "--method", "ckm", *PTABLE_ARGS,
                "--out", b], capsys)[0] == 0
    assert a.read_text() == b.read_text()


@pytest.mark.parametrize("name", ["p.txt", "p.csv"])
def test_tau_argus_ptable_round_trip_through_the_cli(small_census, tmp_path: Path, capsys, name: str) -> None:
    """Issue #12: a p-table that `tabsafe ptable --format tau-argus` wrote is accepted by
    `protect --ptable` and gives the very release of the same p-table in the CSV layout."""
    args = ["--max-noise", 4, "--variance", 2.5, "--js", 1, "--pstay", 0.5]
    tau = tmp_path / name
    code, _, err = cli(["ptable", *args, "--format", "tau-argus", "--out", tau], capsys)
    assert code == 0, err
    assert tau.read_text().splitlines()[0] == "i;j;p;v;p_int_ub"
    plain = tmp_path / "plain.csv"
    assert cli(["ptable", *args, "--out", plain], capsys)[0] == 0
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    code, _, err = cli(["protect", small_census.persons, "--by", "area,age", "--method", "ckm", "--ptable", tau,
                        "--out", a, "--quiet"], capsys)
    assert code == 0, err
    assert cli(["protect", small_census.persons, "--by", "area,age", "--method", "ckm", "--ptable", plain,
                "--out", b, "--quiet"], capsys)[0] == 0
    assert a.read_text() == b.read_text()


ZERO_MOVES = "i,j,p,v,p_int_lb,p_int_ub\n0,0,0.5,0,0,0.5\n0,1,0.5,1,0.5,1\n1,1,1,0,0,1\n"


@pytest.mark.parametrize(
    ("setup", "extra", "message"),
    [
        (None, ["--key", "nokey"], "unknown variable 'nokey' in --key"),
        ("badkeys", [], "record key column 'rkey' has values outside [0, 1) (e.g. 1.5)"),
        ("badptable", [], "row i=1: probabilities sum to 0.8, not 1"),
        ("zeroptable", [], "row i=0: a count of 0 must stay 0"),
        ("parquetptable", [], "cannot parse the file: not UTF-8 text"),
        (None, ["--max-noise", "3"], "needs --ptable or --max-noise and --variance"),
        (None, ["--max-noise", "3", "--variance", "1.5", "--js", "2"], "nearest feasible V"),
    ],
)
def test_bad_inputs_write_nothing(small_census, tmp_path: Path, capsys, setup, extra, message) -> None:
    data = small_census.persons
    args = PTABLE_ARGS if not any(a.startswith("--max") for a in extra) else []
    if setup == "badkeys":
        df = pd.read_parquet(data, columns=["sex", "rkey"]).head(100)
        df.loc[3, "rkey"] = 1.5
        data = tmp_path / "bad.parquet"
        df.to_parquet(data)
    if setup in {"badptable", "zeroptable", "parquetptable"}:
        bad = tmp_path / "bad_ptable.csv"
        if setup == "badptable":
            bad.write_text("i,j,p,v,p_int_lb,p_int_ub\n0,0,1,0,0,1\n1,0,0.5,-1,0,0.5\n1,2,0.3,1,0.5,0.8\n")
        elif setup == "zeroptable":
            bad.write_text(ZERO_MOVES)
        else:
            bad = tmp_path / "ptable.parquet"
            pd.DataFrame({"i": [0], "j": [0], "p": [1.0]}).to_parquet(bad)
        args = ["--ptable", bad]
    out = tmp_path / "out.csv"
    code, _, err = cli(["protect", data, "--by", "sex", "--method", "ckm", *args, *extra, "--out", out], capsys)
    assert code != 0
    assert message in err, err
    assert err.count("\n") == 1
    assert not out.exists()


def _imported(args: list[str], cwd: Path) -> set[str]:
    """Top-level packages a whole `tabsafe` process imports (``python -X importtime``)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "tabsafe.cli", *args], cwd=cwd,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    names = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names


def test_hot_path_imports_neither_pandas_nor_scipy(small_census, ptable_file: Path, tmp_path: Path) -> None:
    """Issue #11: protecting with a p-table file needs numpy, Arrow and DuckDB only; generating
    one needs neither (issue #24: the maximum entropy rows are solved with numpy alone)."""
    base = ["protect", str(small_census.persons), "--by", "area,sex", "--hierarchy",
            f"area={small_census.directory}/hierarchies/area.hrc", "--method", "ckm", "--quiet"]
    with_file = _imported([*base, "--ptable", str(ptable_file), "--out", "r.csv"], tmp_path)
    assert {"tabsafe", "numpy", "duckdb"} <= with_file
    assert not {"pandas", "scipy", "matplotlib"} & with_file
    generated = _imported([*base, *map(str, PTABLE_ARGS), "--out", "g.parquet"], tmp_path)
    assert not {"pandas", "scipy", "matplotlib"} & generated


def test_keys_command_attaches_reproducible_keys(tmp_path: Path, capsys) -> None:
    data = tmp_path / "m.csv"
    pd.DataFrame({"area": ["01", "02", "02"], "sex": ["1", "2", "1"]}).to_csv(data, index=False)
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    assert cli(["keys", data, "--seed", 9, "--out", a], capsys)[0] == 0
    assert cli(["keys", data, "--seed", 9, "--out", b], capsys)[0] == 0
    ka, kb = pd.read_parquet(a), pd.read_parquet(b)
    assert ka.equals(kb) and ka["area"].tolist() == ["01", "02", "02"]
    assert ((ka.rkey >= 0) & (ka.rkey < 1)).all() and (ka.rkey.round(10) == ka.rkey).all()
    code, _, err = cli(["keys", a, "--seed", 1, "--out", tmp_path / "c.parquet"], capsys)
    assert code == 2 and "already have a column 'rkey'" in err and not (tmp_path / "c.parquet").exists()
