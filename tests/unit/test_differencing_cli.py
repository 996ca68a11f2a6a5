"""`tabsafe audit SPEC` as a user runs it: summary, output files, one-line errors, nothing written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from tabsafe.cli import main

HOURS = {"<20": 15, "20-24": 22, "25-39": 30, "40-59": 45, "60-69": 65, "70+": 75}
COUNTS = {"Male": [6, 1, 8, 5, 8, 4], "Female": [10, 0, 38, 51, 42, 32]}   # seed 000 Table 5.13

SPEC: dict[str, Any] = {
    "data": "persons.csv",
    "derived": {
        "hours_a": {"from": "hours", "codes": {"<20": [{"min": 0, "max": 19}], "20-39": [{"min": 20, "max": 39}],
                                               "40+": [{"min": 40, "max": 99}]}},
        "hours_b": {"from": "hours", "codes": {"<25": [{"min": 0, "max": 24}], "25-39": [{"min": 25, "max": 39}],
                                               "40+": [{"min": 40, "max": 99}]}},
    },
    "tables": [{"name": "Table 5.11", "by": ["sex", "hours_a"]}, {"name": "Table 5.12", "by": ["sex", "hours_b"]}],
}


def cli(args: list[object], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def release(tmp_path: Path) -> Path:
    rows = [{"sex": sex, "hours": h} for sex, ns in COUNTS.items()
            for h, n in zip(HOURS.values(), ns, strict=True) for _ in range(n)]
    pd.DataFrame(rows).to_csv(tmp_path / "persons.csv", index=False)
    return _spec(tmp_path, SPEC)


def _spec(tmp_path: Path, spec: Any, name: str = "release.yaml") -> Path:
    path = tmp_path / name
    path.write_text(spec if isinstance(spec, str) else yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


def test_summary_and_small_slivers_in_words(release: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(["audit", release], capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("tables 2, cells 24 ")
    assert "slivers found 3" in lines[1] and "small (0 < n < 3) 2, zero 1" in lines[1]
    shown = [ln for ln in lines if ln.startswith("  [")]
    assert len(shown) == 2 and all("(hours=22)" in ln for ln in shown)
    # where the slivers are, not their counts (original values: only in the private --out file)
    assert any("sex=Male" in ln for ln in shown) and not any(" = " in ln or "(" in ln.split(":")[0] for ln in shown)


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".json"])
def test_out_files(release: Path, tmp_path: Path, suffix: str, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / f"slivers{suffix}"
    code, out, err = cli(["audit", release, "--zeros", "--out", target], capsys)
    assert code == 0, err and f"wrote 3 slivers to {target}" in out
    if suffix == ".json":
        data = json.loads(target.read_text())
        assert data["summary"]["small"] == 2 and data["threshold"] == 3
        rows = data["slivers"]
    else:
        frame = pd.read_csv(target) if suffix == ".csv" else pd.read_parquet(target)
        rows = frame.to_dict(orient="records")
        for r in rows:
            r["box"] = json.loads(r["box"])
    assert sorted(r["count"] for r in rows) == [0, 1, 1]
    assert all(r["box"]["hours"] == ["22"] for r in rows)


def test_threshold_and_max_order_options(release: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(["audit", release, "--threshold", 1], capsys)
    assert code == 0 and "small (0 < n < 1) 0" in out
    target = tmp_path / "all.csv"
    code, out, _ = cli(["audit", release, "--all", "--max-order", 1, "--out", target], capsys)
    assert code == 0 and len(pd.read_csv(target)) == 3


def _bad(tmp_path: Path, spec: Any) -> Path:
    return _spec(tmp_path, spec, "bad.yaml")


BAD: list[tuple[str, Any, str]] = [
    ("not yaml", "tables: [\n", "the spec is not valid YAML"),
    ("not a mapping", "- 1\n- 2\n", "the spec must be a YAML mapping"),
    ("unknown key", {**SPEC, "tresh": 3}, "unknown key 'tresh'"),
    ("no tables", {**SPEC, "tables": []}, "'tables' must be a non-empty list"),
    ("no data", {k: v for k, v in SPEC.items() if k != "data"}, "the spec needs 'data'"),
    ("missing data file", {**SPEC, "data": "nope.csv"}, "no such data file"),
    ("bad threshold", {**SPEC, "threshold": 0}, "'threshold' must be an integer >= 1, got 0"),
    ("duplicate table", {**SPEC, "tables": [SPEC["tables"][0]] * 2}, "table name 'Table 5.11' appears twice"),
    ("unknown variable", {**SPEC, "tables": [{"name": "t", "by": ["hourz"]}]}, "unknown variable 'hourz'"),
    ("unknown code", {**SPEC, "tables": [{"name": "t", "by": ["sex"], "where": {"sex": ["X"]}}]},
     "'X' is not a code of 'sex'"),
    ("unknown derived code", {**SPEC, "tables": [{"name": "t", "by": ["sex"], "where": {"hours_a": ["<21"]}}]},
     "'<21' is not a code of 'hours_a'"),
    ("same base twice", {**SPEC, "tables": [{"name": "t", "by": ["hours_a", "hours_b"]}]},
     "are both built from 'hours'"),
    ("bad range", {**SPEC, "derived": {"h": {"from": "hours", "codes": {"x": [{"min": 5, "max": 1}]}}}},
     "range needs numbers min <= max"),
    ("derived of derived", {**SPEC, "derived": {**SPEC["derived"], "h": {"from": "hours_a", "codes": {"x": ["<20"]}}}},
     "is built from another derived variable"),
    ("hierarchy leaf", {**SPEC, "tables": [{"name": "t", "by": ["hours_a"], "hierarchies": {"hours_a": {"lo": ["<19"]}}}]},
     "hierarchy leaf '<19' is not a code of 'hours_a'"),
    ("count with data", {**SPEC, "count": "n"}, "'count' goes with 'table'"),
    ("missing column", {**SPEC, "tables": [{"name": "t", "by": ["sex"], "where": {"age": ["1"]}}]},
     "unknown variable 'age': not a column of the data"),
    ("bad margins", {**SPEC, "tables": [{"name": "t", "by": ["sex"], "margins": "yes"}]},
     "'margins' must be true or false"),
    ("filter syntax", {**SPEC, "tables": [{"name": "t", "by": ["sex"], "where": "sex = M and"}]},
     "table 't': 'where': filter 'sex = M and': expected a variable, found the end"),
    ("filter not a box", {**SPEC, "tables": [{"name": "t", "by": ["sex"], "where": "sex = Male or hours > 30"}]},
     "table 't': the filter part (sex = 'Male' or hours > 30) ties 'sex' and 'hours' together"),
    ("ordering a recode", {**SPEC, "tables": [{"name": "t", "by": ["sex"], "where": "hours_a >= 20"}]},
     "table 't': (hours_a >= 20) orders the codes of 'hours_a', which are sets of 'hours' codes"),
    ("filter typo", {**SPEC, "tables": [{"name": "t", "by": ["sex"], "where": "sex in (Male, Mael)"}]},
     "table 't': 'Mael' is not a code of 'sex'"),
]


@pytest.mark.parametrize(("case", "spec", "message"), BAD, ids=[b[0] for b in BAD])
def test_bad_specs_one_line_nothing_written(release: Path, tmp_path: Path, case: str, spec: Any, message: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "slivers.csv"
    code, out, err = cli(["audit", _bad(tmp_path, spec), "--out", target], capsys)
    assert code == 2, (case, out, err)
    assert err.count("\n") == 1 and err.startswith("tabsafe: error: ") and message in err, err
    assert not target.exists() and not any(p.name.startswith(".slivers") for p in tmp_path.iterdir())


def test_bad_command_line(release: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(["audit", tmp_path / "missing.yaml"], capsys)
    assert code == 2 and "missing.yaml: cannot read the spec: no such file" in err
    code, _, err = cli(["audit", release, "--out", tmp_path / "x.txt"], capsys)
    assert code == 2 and "unknown output format '.txt'" in err and not (tmp_path / "x.txt").exists()
    code, _, err = cli(["audit", release, "--out", tmp_path / "no" / "x.csv"], capsys)
    assert code == 2 and "output folder does not exist" in err
    code, _, err = cli(["audit", release, "--threshold", 0], capsys)
    assert code == 2 and "--threshold must be an integer >= 1, got 0" in err
    code, _, err = cli(["audit", release, "--max-order", 0], capsys)
    assert code == 2 and "--max-order must be an integer >= 1, got 0" in err


def test_out_never_overwrites_an_input(release: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # named like outputs (the spec and meta are YAML whatever their names), so only being inputs refuses them
    (tmp_path / "meta.csv").write_text(yaml.safe_dump({"variables": {"sex": {"codes": ["Male", "Female"]}}}))
    spec = _spec(tmp_path, {**SPEC, "meta": "meta.csv"}, "release.json")
    for target in ("persons.csv", "release.json", "meta.csv"):
        before = (tmp_path / target).read_bytes()
        code, out, err = cli(["audit", spec, "--out", tmp_path / target], capsys)
        assert code == 2 and "--out is an input of this command" in err and out == "", (target, err)
        assert (tmp_path / target).read_bytes() == before
    # planned before the audit runs: a spec the audit refuses still gets the --out error first
    typo = _spec(tmp_path, {**SPEC, "tables": [{"name": "t", "by": ["sex"], "where": "sex = Mael"}]}, "typo.json")
    code, out, err = cli(["audit", typo, "--out", typo], capsys)
    assert code == 2 and "--out is an input of this command" in err and out == ""


def test_out_is_private(release: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # exact counts of small groups: an evaluation file, readable by its owner only
    target = tmp_path / "slivers.json"
    code, _, err = cli(["audit", release, "--out", target], capsys)
    assert code == 0, err
    assert target.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_filter_language_where(release: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Table 5.13's 20-24 band, this time from everyone and those outside 20-24 (a numeric filter)
    spec = _spec(tmp_path, {"data": "persons.csv", "tables": [
        {"name": "all", "by": ["sex"]}, {"name": "outside 20-24", "by": ["sex"], "where": "hours < 20 or hours > 24"}]},
        "text.yaml")
    code, out, err = cli(["audit", spec], capsys)
    assert code == 0, err
    shown = [ln for ln in out.splitlines() if ln.startswith("  [")]
    assert shown == [
        "  [pair; all; outside 20-24] all[sex=Total] - outside 20-24[sex=Total]: "
        + "all but not hours in {15, 30..75} (hours=22)",
        "  [pair; all; outside 20-24] all[sex=Male] - outside 20-24[sex=Male]: "
        + "sex=Male, all but not hours in {15, 30..75} (hours=22)",
    ]
    assert "(their counts are original values: write them to a private file with --out FILE)" in out
    # stdout carries no original count (the tables' 205 and 204, 32 and 31; the slivers' 1)
    for count in ("205", "204", "(32)", "(31)", "1 ="):
        assert count not in out


def test_inner_cells_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cells = pd.DataFrame([{"sex": sex, "hours": h, "n": n} for sex, ns in COUNTS.items()
                          for h, n in zip(HOURS.values(), ns, strict=True)])
    cells.to_csv(tmp_path / "cells.csv", index=False)
    spec = {k: v for k, v in SPEC.items() if k != "data"} | {"table": "cells.csv", "count": "n"}
    code, out, err = cli(["audit", _spec(tmp_path, spec)], capsys)
    assert code == 0, err
    assert "small (0 < n < 3) 2, zero 1" in out
