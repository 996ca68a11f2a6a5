"""`tabsafe protect --method round` and `--method controlled-round` as a user runs them:
microdata, inner cells, errors.

With ``--table`` (no positional DATA) method options are written ``--opt=value``: the shared
``protect`` parser would otherwise take a method option's value for the optional DATA argument.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tabsafe.cli import main

# the 2x2x2x2 table of tests/reference/test_rounding_reference.py without a zero-restricted rounding
INFEASIBLE = [[[[5, 0], [0, 0]], [[5, 0], [1, 0]]], [[[0, 4], [0, 0]], [[1, 1], [0, 5]]]]


def cli(args: list[object], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main([str(a) for a in args])
    except SystemExit as exc:  # argparse exits on its own errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def is_additive(df: pd.DataFrame, by: list[str], column: str = "count") -> bool:
    """Flat dimensions: every Total equals the sum over the other codes, along every variable."""
    for var in by:
        rest = [v for v in by if v != var]
        inner = df[df[var] != "Total"].groupby(rest)[column].sum()
        total = df[df[var] == "Total"].set_index(rest)[column]
        if not (inner.sort_index() == total.sort_index()).all():
            return False
    return True


def inner_cells(tmp_path: Path) -> Path:
    cells = pd.DataFrame([{"area": a, "sex": s, "n": n}
                          for (a, s), n in zip(itertools.product(["A", "B", "C"], ["M", "F"]), [1, 0, 3, 3, 12, 20])])
    src = tmp_path / "cells.csv"
    cells.to_csv(src, index=False)
    return src


def test_controlled_rounding_of_microdata_with_intervals(small_census, tmp_path: Path, capsys) -> None:
    out, report, evaluation = tmp_path / "rounded.csv", tmp_path / "report.json", tmp_path / "eval.csv"
    args = ["protect", small_census.persons, "--by", "area,sex", "--hierarchy",
            f"area={small_census.directory}/hierarchies/area.hrc", "--method", "controlled-round", "--base", 5,
            "--intervals", "--out", out, "--report", report]
    code, stdout, err = cli(args, capsys)
    assert code == 0, err
    assert "status optimal" in stdout and "reproducible True" in stdout
    assert "objective" not in stdout  # computed from the original counts: evaluation only
    df = pd.read_csv(out, dtype={"area": str, "sex": str})
    assert list(df.columns) == ["area", "sex", "count", "lower", "upper"]  # no originals in a release
    assert (df["count"] % 5 == 0).all()
    assert ((df["lower"] <= df["count"]) & (df["count"] <= df["upper"])).all()
    public = json.loads(report.read_text())
    assert public["method"] == "controlled-round" and "private" not in public and "objective" not in public["figures"]
    # region subtotals are sums of their areas (the hierarchy) and the table adds up by sex
    sex_total = df[df["sex"] == "Total"].set_index("area")["count"]
    by_sex = df[df["sex"] != "Total"].groupby("area")["count"].sum()
    assert (sex_total.sort_index() == by_sex.sort_index()).all()
    regions = [a for a in df["area"].unique() if a.startswith("R") and len(a) <= 3]
    assert regions
    for region in regions:
        areas = df[(df["area"].str.startswith(region)) & (df["area"] != region) & (df["sex"] == "Total")]
        assert areas["count"].sum() == int(sex_total[region])
    # with an evaluation output the report carries the private figures, and a second run gives
    # the same release (deterministic limits)
    again = tmp_path / "again.csv"
    code, _, err = cli([*args[:-4], "--out", again, "--evaluation", evaluation, "--report", report, "--force"],
                       capsys)
    assert code == 0, err
    assert again.read_bytes() == out.read_bytes()
    private = json.loads(report.read_text())["private"]
    assert private["lower_bound"] <= private["objective"]
    ev = pd.read_csv(evaluation, dtype={"area": str, "sex": str}).merge(df, on=["area", "sex"], suffixes=("_ev", ""))
    assert len(ev) == len(df)
    assert private["objective"] == int((ev["count"] - ev["original"]).abs().sum())


@pytest.mark.parametrize("method", ["round", "controlled-round"])
def test_every_mode_on_a_table_of_inner_cells(tmp_path: Path, capsys, method: str) -> None:
    src = inner_cells(tmp_path)
    modes = ["conventional", "random", "semi-controlled", "small-cell"] if method == "round" else [None]
    results = {}
    for mode in modes:
        out = tmp_path / f"{mode}.csv"
        extra = [f"--mode={mode}"] if mode else []
        code, _, err = cli(["protect", "--table", src, "--count", "n", "--by", "area,sex", "--method", method,
                            *extra, "--base=5", "--seed=4", "--keep-original", "--zero-cells=all", "--out", out],
                           capsys)
        assert code == 0, err
        results[mode] = pd.read_csv(out)
        assert list(results[mode].columns) == ["area", "sex", "count", "original"]
        assert len(results[mode]) == 12  # every cell of the 4 x 3 grid, zeros included
    if method == "controlled-round":
        assert is_additive(results[None], ["area", "sex"])
        return
    conv = results["conventional"].set_index(["area", "sex"])["count"]
    assert conv[("C", "Total")] == 30 and conv[("B", "Total")] == 5 and conv[("Total", "Total")] == 40
    assert is_additive(results["small-cell"], ["area", "sex"])
    semi = results["semi-controlled"]
    inner = semi[(semi["area"] != "Total") & (semi["sex"] != "Total")]
    assert inner["count"].sum() == int(semi[(semi["area"] == "Total") & (semi["sex"] == "Total")]["count"].iloc[0])


def test_consistent_mode_needs_microdata(tmp_path: Path, small_census, capsys) -> None:
    src = tmp_path / "cells.csv"
    pd.DataFrame({"sex": ["1", "2"], "n": [4, 7]}).to_csv(src, index=False)
    out = tmp_path / "x.csv"
    code, _, err = cli(["protect", "--table", src, "--count", "n", "--by", "sex", "--method", "round",
                        "--mode=consistent", "--base=3", "--out", out], capsys)
    assert code != 0 and "needs microdata" in err and not out.exists()
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    for path, by in [(a, "area,sex"), (b, "area,age")]:
        code, _, err = cli(["protect", small_census.persons, "--by", by, "--method", "round", "--mode",
                            "consistent", "--base", 3, "--out", path], capsys)
        assert code == 0, err
    ta = pd.read_csv(a, dtype=str).query("sex == 'Total'").set_index("area")["count"]
    tb = pd.read_csv(b, dtype=str).query("age == 'Total'").set_index("area")["count"]
    assert (ta.sort_index() == tb.sort_index()).all()


def test_infeasible_controlled_rounding_writes_nothing_and_suggests_steps(tmp_path: Path, capsys) -> None:
    vals = np.array(INFEASIBLE)
    rows = [{"a": f"a{i}", "b": f"b{j}", "c": f"c{k}", "d": f"d{m}", "n": int(vals[i, j, k, m])}
            for i, j, k, m in itertools.product(range(2), repeat=4)]
    src = tmp_path / "cells.csv"
    pd.DataFrame(rows).to_csv(src, index=False)
    out = tmp_path / "out.csv"
    args = ["protect", "--table", src, "--count", "n", "--by", "a,b,c,d", "--method", "controlled-round",
            "--base=3", "--out", out]
    code, _, err = cli(args, capsys)
    assert code == 3
    assert err.count("\n") == 1 and "no zero-restricted controlled rounding to base 3 exists" in err
    assert "--steps 1" in err and not out.exists()
    code, _, err = cli([*args, "--steps=1"], capsys)
    assert code == 0, err
    assert out.exists()


@pytest.mark.parametrize(
    ("method", "extra", "message"),
    [
        ("round", ["--mode=controlled"], "controlled rounding is the method 'controlled-round', not a --mode"),
        ("round", ["--mode=sideways"], "parameter --mode must be one of conventional, random"),
        ("round", ["--mode=random", "--base=0"], "parameter --base must be an integer >= 1; got 0"),
        ("round", ["--mode=random", "--control=sex"], "--control applies to --mode semi-controlled only"),
        ("round", ["--mode=semi-controlled", "--control=nope"], "--control variable 'nope' is not a spanning"),
        ("round", ["--mode=small-cell", "--intervals"], "--intervals are defined for modes"),
        ("controlled-round", ["--time-limit=-1"], "parameter --time-limit must be a finite number > 0"),
        ("controlled-round", ["--work-limit=0"], "parameter --work-limit must be an integer >= 1; got 0"),
        ("controlled-round", ["--solution=rapid", "--intervals"], "--intervals assume every cell within --steps"),
    ],
)
def test_bad_options_fail_in_one_line_and_write_nothing(tmp_path: Path, capsys, method, extra, message) -> None:
    src = tmp_path / "cells.csv"
    pd.DataFrame({"sex": ["1", "2"], "n": [4, 7]}).to_csv(src, index=False)
    out = tmp_path / "out.csv"
    code, _, err = cli(["protect", "--table", src, "--count", "n", "--by", "sex", "--method", method, *extra,
                        "--out", out], capsys)
    assert code == 2
    assert message in err and err.strip().count("\n") == 0
    assert not out.exists()
