"""`tabsafe protect --method ckm` and `tabsafe ptable` as a user runs them."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tabsafe.cli import main


def cli(args: list[object], capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_protect_ckm_release_and_evaluation(small_census, tmp_path: Path, capsys) -> None:
    release = tmp_path / "release.csv"
    code, out, err = cli(["protect", small_census.persons, "--by", "area,sex", "--hierarchy",
                          f"area={small_census.directory}/hierarchies/area.hrc", "--method", "ckm",
                          "--max-noise", 5, "--variance", 3, "--js", 2, "--out", release], capsys)
    assert code == 0, err
    df = pd.read_csv(release, dtype=str)
    assert list(df.columns) == ["area", "sex", "count"]  # no originals, no keys
    evaluation = tmp_path / "eval.parquet"
    code, _, err = cli(["protect", small_census.persons, "--by", "area,sex", "--method", "ckm", "--max-noise", 5,
                        "--variance", 3, "--js", 2, "--keep-original", "--out", evaluation], capsys)
    assert code == 0, err
    ev = pd.read_parquet(evaluation)
    assert {"count", "original"} <= set(ev.columns)
    counts = ev["count"].to_numpy()
    assert (counts >= 0).all() and not ((counts >= 1) & (counts <= 2)).any()
    # same cell (same records), same value: area totals agree between the two runs/tables
    rel = df.set_index(["area", "sex"])["count"].astype(int)
    ev = ev.set_index(["area", "sex"])["count"]
    common = ev.index.intersection(rel.index)
    assert len(common) > 100 and (rel[common] == ev[common]).all()


def test_ptable_command_and_reuse(small_census, tmp_path: Path, capsys) -> None:
    ptable = tmp_path / "p.csv"
    code, out, err = cli(["ptable", "--max-noise", 5, "--variance", 3, "--js", 2, "--out", ptable], capsys)
    assert code == 0, err
    assert list(pd.read_csv(ptable).columns) == ["i", "j", "p", "v", "p_int_lb", "p_int_ub"]
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    assert cli(["protect", small_census.persons, "--by", "sex,age", "--method", "ckm", "--ptable", ptable,
                "--out", a], capsys)[0] == 0
    assert cli(["protect", small_census.persons, "--by", "sex,age", "--method", "ckm", "--max-noise", 5,
                "--variance", 3, "--js", 2, "--out", b], capsys)[0] == 0
    assert a.read_text() == b.read_text()


@pytest.mark.parametrize(
    ("setup", "extra", "message"),
    [
        (None, ["--key", "nokey"], "unknown variable 'nokey' in --key"),
        ("badkeys", [], "record key column 'rkey' has values outside [0, 1) (e.g. 1.5)"),
        ("badptable", [], "row i=1: probabilities sum to 0.8, not 1"),
        (None, ["--max-noise", "3"], "needs --ptable FILE or --max-noise D --variance V"),
        (None, ["--max-noise", "3", "--variance", "1.5", "--js", "2"], "nearest feasible V"),
    ],
)
def test_bad_inputs_write_nothing(small_census, tmp_path: Path, capsys, setup, extra, message) -> None:
    data = small_census.persons
    args = ["--max-noise", 5, "--variance", 3, "--js", 2] if not any(a.startswith("--max") for a in extra) else []
    if setup == "badkeys":
        df = pd.read_parquet(data, columns=["sex", "rkey"]).head(100)
        df.loc[3, "rkey"] = 1.5
        data = tmp_path / "bad.parquet"
        df.to_parquet(data)
    if setup == "badptable":
        bad = tmp_path / "bad_ptable.csv"
        bad.write_text("i,j,p,v,p_int_lb,p_int_ub\n0,0,1,0,0,1\n1,0,0.5,-1,0,0.5\n1,2,0.3,1,0.5,0.8\n")
        args = ["--ptable", bad]
    out = tmp_path / "out.csv"
    code, _, err = cli(["protect", data, "--by", "sex", "--method", "ckm", *args, *extra, "--out", out], capsys)
    assert code != 0
    assert message in err, err
    assert err.count("\n") == 1
    assert not out.exists()


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
