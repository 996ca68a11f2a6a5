"""The CLI as a user meets it: synth, tabulate, and one-line errors that leave nothing behind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tabsafe.cli import main
from tabsafe.synth import SynthResult


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_tabulate_microdata_with_hierarchy(small_census: SynthResult, tmp_path: Path, capsys) -> None:
    out = tmp_path / "t.csv"
    code, stdout, err = run(
        ["tabulate", small_census.persons, "--by", "small_area,sex", "--hierarchy",
         f"small_area={small_census.directory}/hierarchies/small_area.hrc", "--sum", "income", "--out", out],
        capsys,
    )
    assert code == 0, err
    df = pd.read_csv(out, dtype={"small_area": str, "sex": str})
    assert list(df.columns) == ["small_area", "sex", "count", "sum_income"]
    total = df[(df.small_area == "Total") & (df.sex == "Total")]["count"].item()
    assert total == 20_000
    # region subtotals come from the hierarchy and add up to the total
    regions = df[df.small_area.isin(["R1", "R2"]) & (df.sex == "Total")]["count"].sum()
    assert regions == total
    assert "wrote" in stdout and str(out) in stdout


def test_tabulate_parses_the_meta_yaml_once(small_census: SynthResult, tmp_path: Path, capsys, monkeypatch) -> None:
    # meta.yaml is read to guard the outputs (the files it names) and for the codelists: one
    # parse serves both (a fixed cost of every command: 20 ms of CPU each on the 1.5M census)
    import tabsafe._yaml
    import tabsafe.io

    meta_text = (small_census.directory / "meta.yaml").read_text(encoding="utf-8")
    parsed: list[str] = []
    real = tabsafe._yaml.load_yaml

    def counting(text: str):
        parsed.append(text)
        return real(text)

    monkeypatch.setattr(tabsafe._yaml, "load_yaml", counting)
    monkeypatch.setattr(tabsafe.io, "load_yaml", counting)
    tabsafe._yaml.load_yaml_shared.cache_clear()
    code, _, err = run(["tabulate", small_census.persons, "--by", "region,sex", "--out", tmp_path / "t.csv"], capsys)
    assert code == 0, err
    assert parsed.count(meta_text) == 1


def test_tabulate_inner_cells_table(tmp_path: Path, capsys) -> None:
    cells = tmp_path / "cells.csv"
    pd.DataFrame({"area": ["A", "A", "B"], "sex": ["1", "2", "1"], "n": [3, 4, 5]}).to_csv(cells, index=False)
    out = tmp_path / "t.parquet"
    code, _, err = run(["tabulate", "--table", cells, "--count", "n", "--by", "area,sex", "--out", out], capsys)
    assert code == 0, err
    df = pd.read_parquet(out)
    assert len(df) == 3 * 3  # B × 2 is a missing combination: a zero cell
    assert df.loc[(df.area == "B") & (df.sex == "2"), "count"].item() == 0
    assert df.loc[(df.area == "Total") & (df.sex == "Total"), "count"].item() == 12


def _cells(tmp_path: Path, n: list[object], area: list[str] | None = None) -> Path:
    path = tmp_path / "cells.csv"
    pd.DataFrame({"area": area or ["A", "B", "C"][: len(n)], "n": n}).to_csv(path, index=False)
    return path


@pytest.mark.parametrize(
    ("make_args", "message"),
    [
        (lambda c, t: [c.persons, "--by", "sex,foo"], "unknown variable 'foo' in --by"),
        (lambda c, t: [c.persons, "--by", "sex", "--sum", "bar"], "unknown variable 'bar' in --sum"),
        (lambda c, t: [c.persons, "--by", "sex", "--max-cells", "2"], "would have 3 cells, more than the limit of 2"),
        (lambda c, t: [c.persons, "--by", "sex", "--where", "nonsense >"], "filter 'nonsense >': expected a value"),
        (lambda c, t: [t / "missing.parquet", "--by", "sex"], "missing.parquet: no such file"),
        (lambda c, t: ["--table", _cells(t, [1, -2, 3]), "--count", "n", "--by", "area"], "1 negative count (e.g. -2)"),
        (lambda c, t: ["--table", _cells(t, [1, 2.5, 3]), "--count", "n", "--by", "area"], "1 fractional count (e.g. 2.5)"),
        (lambda c, t: ["--table", _cells(t, [1, 2, 3], ["A", "A", "B"]), "--count", "n", "--by", "area"],
         "1 inner cell appear more than once, e.g. (area=A) 2 times"),
        (lambda c, t: ["--table", _cells(t, [1, 2, 3], ["A", "Total", "B"]), "--count", "n", "--by", "area"],
         "aggregate code 'Total'"),
        (lambda c, t: ["--table", _cells(t, [1, 2]), "--by", "area"], "--table needs --count"),
    ],
)
def test_bad_input_one_line_nonzero_no_output(small_census, tmp_path, capsys, make_args, message) -> None:
    out = tmp_path / "out.csv"
    code, stdout, err = run(["tabulate", *make_args(small_census, tmp_path), "--out", out], capsys)
    assert code != 0
    assert message in err, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.csv")]


def test_value_outside_codelist(small_census, tmp_path, capsys) -> None:
    df = pd.read_parquet(small_census.persons, columns=["sex", "age"]).head(50).astype(str)
    df.loc[:2, "age"] = "999"
    data = tmp_path / "persons.csv"
    df.to_csv(data, index=False)
    out = tmp_path / "t.csv"
    code, _, err = run(["tabulate", data, "--by", "sex,age", "--meta", small_census.meta, "--out", out], capsys)
    assert code == 2
    assert "variable 'age' has value(s) outside its codelist: '999' (3 rows)" in err
    assert not out.exists()


def test_broken_hierarchy_and_empty_data(small_census, tmp_path, capsys) -> None:
    hrc = tmp_path / "bad.hrc"
    hrc.write_text("R1\n@@R1A001S01\n")
    code, _, err = run(["tabulate", small_census.persons, "--by", "small_area", "--hierarchy", f"small_area={hrc}",
                        "--out", tmp_path / "x.csv"], capsys)
    assert code == 2 and "bad.hrc line 2" in err
    empty = tmp_path / "empty.csv"
    empty.write_text("sex,age\n")
    code, _, err = run(["tabulate", empty, "--by", "sex", "--out", tmp_path / "y.csv"], capsys)
    assert code == 2 and "the data have no records" in err
    assert not (tmp_path / "x.csv").exists() and not (tmp_path / "y.csv").exists()


def test_console_script_exit_code(tmp_path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tabsafe.cli", "tabulate", str(tmp_path / "nope.csv"), "--by", "a", "--out",
         str(tmp_path / "o.csv")],
        capture_output=True, text=True,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"tabsafe: error: {tmp_path / 'nope.csv'}: no such file"


def test_synth_is_deterministic_and_valid(tmp_path) -> None:
    from tabsafe.io import read_meta
    from tabsafe.model.hierarchy import Hierarchy
    from tabsafe.synth import synth_census

    a = synth_census(3000, 5, tmp_path / "a")
    b = synth_census(3000, 5, tmp_path / "b")
    da, db = pd.read_parquet(a.persons), pd.read_parquet(b.persons)
    pd.testing.assert_frame_equal(da, db)
    assert {"region", "area", "small_area", "sex", "age", "activity", "occupation", "education", "citizenship",
            "household_id", "household_size", "rkey"} <= set(da.columns)
    assert ((da.rkey >= 0) & (da.rkey < 1)).all()
    assert (da.rkey.round(10) == da.rkey).all()  # exactly 10 decimal digits
    codelists = read_meta(a.meta)
    for name in ("small_area.hrc", "area.hrc", "age.yaml", "age_year.hrc"):
        h = Hierarchy.from_file(a.directory / "hierarchies" / name)
        var = name.split(".")[0]
        h.check_codelist(codelists[var].leaves, variable=var)
    sizes = pd.read_parquet(a.households).set_index("household_id")["persons"]
    assert (da.groupby("household_id").size() == sizes).all()
