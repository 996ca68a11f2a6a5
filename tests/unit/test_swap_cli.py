"""`tabsafe swap` and `tabsafe protect --method targeted-swap,ckm` as a user runs them."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from tabsafe.cli import main

SWAP = ["--geography", "region,area,small_area", "--risk-vars", "sex,age", "--k", "3", "--swaprate", "0.05",
        "--similar", "household_size"]


def cli(args: list[object], capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def private(path: Path) -> bool:
    return stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_swap_writes_private_microdata_report_and_evaluation(small_census, tmp_path: Path, capsys) -> None:
    out, report, ev = tmp_path / "swapped.parquet", tmp_path / "report.json", tmp_path / "ev.parquet"
    code, stdout, err = cli(["swap", small_census.persons, *SWAP, "--seed", 3, "--out", out, "--report", report,
                             "--evaluation", ev], capsys)
    assert code == 0, err
    assert "swaps" in stdout and "households" in stdout
    before = pq.read_table(small_census.persons).to_pandas()
    after = pq.read_table(out).to_pandas()
    assert list(after.columns) == [*before.columns, "swapped"] and len(after) == len(before)
    assert all(private(p) for p in (out, report, ev))  # microdata and what was swapped: never public
    moved = (after["small_area"] != before["small_area"]).to_numpy()
    assert moved.any() and not (moved & ~after["swapped"].to_numpy()).any()
    assert (after.groupby("household_id")["small_area"].nunique() == 1).all()
    for c in ("sex", "age", "person_id", "income", "rkey"):
        assert after[c].equals(before[c])
    payload = json.loads(report.read_text())
    assert payload["method"] == "targeted-swap" and payload["seed"] == 3 and "private" in payload
    assert payload["figures"]["pairs"] * 2 == int(pq.read_table(ev).to_pandas().groupby(
        before["household_id"])["swapped"].first().sum())
    # the same seed gives the same records
    again = tmp_path / "again.parquet"
    assert cli(["swap", small_census.persons, *SWAP, "--seed", 3, "--out", again, "--quiet"], capsys)[0] == 0
    assert pq.read_table(again).equals(pq.read_table(out))


def test_swap_csv_keeps_codes_and_draws_a_seed(tmp_path: Path, capsys) -> None:
    from tabsafe.protect.swapping.examples import population

    df = population(200)
    df["small_area"] = "0" + df["small_area"]  # codes with leading zeros stay codes
    src = tmp_path / "people.csv"
    df.to_csv(src, index=False)
    out = tmp_path / "out.csv"
    code, stdout, err = cli(["swap", src, "--method", "random", "--geography", "area,small_area", "--swaprate", 0.2,
                             "--similar", "hsize", "--out", out], capsys)
    assert code == 0, err
    # a drawn seed is a secret: stdout shows its fingerprint only
    assert "seed drawn" in stdout and "fingerprint hmac-sha256:" in stdout
    got = pd.read_csv(out, dtype=str)
    assert got["small_area"].str.startswith("0R").all()
    assert sorted(got.groupby("area")["small_area"].apply(sorted).sum()) == sorted(
        df.groupby("area")["small_area"].apply(sorted).sum())  # random swaps stay in their area


def test_pram_through_swap(small_census, tmp_path: Path, capsys) -> None:
    out = tmp_path / "pram.parquet"
    code, _stdout, err = cli(["swap", small_census.persons, "--method", "pram", "--variable", "small_area",
                             "--within", "area", "--retention", 0.7, "--household", "household_id", "--seed", 1,
                             "--out", out], capsys)
    assert code == 0, err
    after = pq.read_table(out).to_pandas()
    before = pq.read_table(small_census.persons).to_pandas()
    assert "changed" in after.columns and after["changed"].any()
    assert (after["area"] == before["area"]).all()
    assert all(s.startswith(a + "S") for s, a in zip(after["small_area"], after["area"]))  # stay in their area
    # the transition matrix applied, per area, beside the output: a release file (seed 001 §6)
    matrix = pd.read_csv(tmp_path / "pram-transitions.csv", dtype=str).astype({"p": float})
    assert list(matrix.columns) == ["area", "from", "to", "p"]
    assert not private(tmp_path / "pram-transitions.csv")
    assert np.allclose(matrix.groupby(["area", "from"])["p"].sum(), 1.0)
    assert all(f.startswith(a + "S") and t.startswith(a + "S") for a, f, t in
               zip(matrix["area"], matrix["from"], matrix["to"]))
    assert set(matrix["area"]) == set(before["area"])
    # an existing matrix file is not replaced without --force, and nothing is written
    out2 = tmp_path / "pram2.parquet"
    (tmp_path / "pram2-transitions.csv").write_text("mine\n")
    code, _stdout, err = cli(["swap", small_census.persons, "--method", "pram", "--variable", "small_area",
                              "--within", "area", "--retention", 0.7, "--household", "household_id", "--seed", 1,
                              "--out", out2], capsys)
    assert code != 0 and "pram2-transitions.csv" in err and not out2.exists()
    assert (tmp_path / "pram2-transitions.csv").read_text() == "mine\n"


def _broken(small_census, tmp_path: Path, what: str) -> Path:
    df = pq.read_table(small_census.persons).to_pandas()
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
    path = tmp_path / f"{what}.parquet"
    df.to_parquet(path)
    return path


@pytest.mark.parametrize(
    ("data", "args", "message"),
    [
        ("nesting", SWAP, "does not nest: small_area"),
        ("household", SWAP, "has members in different areas: small_area"),
        (None, [*SWAP[:2], "--risk-vars", "sex,agee", *SWAP[4:]], "unknown variable 'agee' in --risk-vars"),
        (None, [*SWAP[:6], "--swaprate", "1.5", *SWAP[8:]], "--swaprate must be a number in [0, 1]; got 1.5"),
        (None, [*SWAP[:4], "--k", "0", *SWAP[6:]], "--k must be an integer >= 1; got 0"),
        (None, SWAP[2:], "needs --geography"),
        (None, [*SWAP, "--similar", "region"], "'region' is a geography variable: it cannot be in --similar"),
        (None, [*SWAP, "--hierarchy", "region,area,small_area"], "give the geography levels with --geography only"),
        (None, ["--hierarchy", "region,area,small_area", *SWAP[2:]],
         "--hierarchy takes VAR=FILE; name the geography levels with --geography region,area,small_area"),
        (None, [*SWAP, "--pairrate", "0.1"], "give --swaprate (share of households swapped) or --pairrate"),
        (None, [*SWAP, "--risk", "age"], "exactly one source of risk"),
        (None, [*SWAP[:2], "--risk", "age", *SWAP[6:]], "--risk needs --risk-threshold"),
        (None, [*SWAP, "--donors", "nearby"], "--donors must be one of anywhere, same-top-area"),
    ],
)
def test_swap_bad_input_is_one_line_and_writes_nothing(small_census, tmp_path: Path, capsys, data, args,
                                                       message) -> None:
    src = _broken(small_census, tmp_path, data) if data else small_census.persons
    out, report = tmp_path / "out.parquet", tmp_path / "r.json"
    code, _stdout, err = cli(["swap", src, *args, "--seed", 1, "--out", out, "--report", report], capsys)
    assert code == 2
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert not out.exists() and not report.exists()


def test_swap_refuses_to_overwrite_its_input(small_census, tmp_path: Path, capsys) -> None:
    src = tmp_path / "p.parquet"
    src.write_bytes(Path(small_census.persons).read_bytes())
    code, _, err = cli(["swap", src, *SWAP, "--seed", 1, "--out", src], capsys)
    assert code == 2 and "input of this command" in err
    assert src.read_bytes() == Path(small_census.persons).read_bytes()


def test_protect_chains_swapping_and_the_cell_key_method(small_census, tmp_path: Path, capsys) -> None:
    """The UK 2021 design: targeted swapping, then the cell key method, in one command."""
    release, report = tmp_path / "release.csv", tmp_path / "report.json"
    args = ["protect", small_census.persons, "--by", "area,sex", "--method", "targeted-swap,ckm",
            "--geography", "region,area,small_area", "--risk-vars", "sex,age", "--k", 3, "--swaprate", 0.05,
            "--similar", "household_size", "--max-noise", 3, "--variance", 2, "--seed", 8]
    code, _stdout, err = cli([*args, "--out", release, "--report", report], capsys)
    assert code == 0, err
    df = pd.read_csv(release, dtype=str)
    assert list(df.columns) == ["area", "sex", "count"]  # no flag, no originals
    payload = json.loads(report.read_text())
    assert [s["method"] for s in payload["steps"]] == ["targeted-swap", "ckm"]
    assert "private" not in payload["steps"][0]  # a release report: no private figures
    assert payload["steps"][0]["figures"]["pairs"] > 0
    again = tmp_path / "again.csv"
    assert cli([*args, "--out", again, "--quiet"], capsys)[0] == 0
    assert again.read_text() == release.read_text()
    # evaluation: the originals are the unswapped data's counts
    ev = tmp_path / "ev.parquet"
    assert cli([*args, "--out", tmp_path / "r2.csv", "--evaluation", ev, "--quiet"], capsys)[0] == 0
    table = pd.read_parquet(ev)
    before = pq.read_table(small_census.persons).to_pandas()
    want = before.groupby(["area", "sex"], observed=True).size()
    got = table[(table["area"] != "Total") & (table["sex"] != "Total")].set_index(["area", "sex"])["original"]
    assert (got[want.index].to_numpy() == want.to_numpy()).all()
