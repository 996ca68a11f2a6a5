"""``tabsafe risk`` and ``tabsafe protect --method suppress`` through the real
CLI on the small synthetic census; errors write nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tabsafe import Microdata, tabulate
from tabsafe.cli import main
from tabsafe.io import read_meta
from tabsafe.risk.intervals import interval_audit


def _run(*argv: str) -> int:
    return main([str(a) for a in argv])


def test_risk_writes_flags_and_summary(small_census, tmp_path: Path, capsys) -> None:
    out = tmp_path / "risk.csv"
    code = _run("risk", small_census.persons, "--by", "region,sex,citizenship", "--min-freq", 3, "--t-abs", 3,
                "--t-rel", 99, "--t-min", 2, "--coalition", 1, "--zeros", "--target", "citizenship", "--out", out)
    assert code == 0
    frame = pd.read_csv(out, dtype={"region": str, "sex": str, "citizenship": str})
    assert list(frame.columns) == ["region", "sex", "citizenship", "count", "threshold", "1a", "1b", "2a", "2b", "3",
                                   "coalition", "zeros", "unsafe"]
    assert (frame["unsafe"] == frame[["threshold", "1a", "1b", "2a", "2b", "3", "coalition", "zeros"]].any(axis=1)).all()
    assert (frame["threshold"] == ((frame["count"] > 0) & (frame["count"] < 3))).all()
    summary = json.loads((tmp_path / "risk.summary.json").read_text())
    assert summary["cells"] == len(frame)
    for rule in ("threshold", "1a", "coalition", "zeros"):
        assert summary["rules"][rule]["cells"] == int(frame[rule].sum())
    assert summary["unsafe"]["cells"] == int(frame["unsafe"].sum())
    assert "unsafe" in capsys.readouterr().out


def test_risk_only_checked_rules_become_columns(small_census, tmp_path: Path) -> None:
    out = tmp_path / "r.parquet"
    assert _run("risk", small_census.persons, "--by", "region,sex", "--t-k-abs", 2, "--out", out,
                "--summary", tmp_path / "s.json") == 0
    frame = pd.read_parquet(out)
    assert list(frame.columns) == ["region", "sex", "count", "1a", "unsafe"]
    assert (tmp_path / "s.json").is_file()


@pytest.mark.parametrize("args, message", [
    (["--by", "region,sex"], "no rule chosen"),
    (["--by", "region,sex", "--min-freq", "3", "--target", "nope"], "unknown variable"),
    (["--by", "region,sex", "--t-rel", "120"], "--t-rel"),
    (["--by", "region,sex", "--min-freq", "three"], "--min-freq"),
    (["--by", "region,sex", "--zeros", "0"], "--zeros"),
])
def test_risk_errors_write_nothing(small_census, tmp_path: Path, capsys, args, message) -> None:
    out = tmp_path / "risk.csv"
    code = _run("risk", small_census.persons, *args, "--out", out)
    assert code != 0
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_risk_bad_output_extension_writes_nothing(small_census, tmp_path: Path) -> None:
    assert _run("risk", small_census.persons, "--by", "sex", "--min-freq", 3, "--out", tmp_path / "r.txt") != 0
    assert list(tmp_path.iterdir()) == []


def test_risk_outputs_are_planned_before_work(small_census, tmp_path: Path, capsys) -> None:
    # the summary's folder does not exist: nothing is written, not even the flags
    out = tmp_path / "risk.csv"
    code = _run("risk", small_census.persons, "--by", "region,sex", "--min-freq", 3, "--out", out,
                "--summary", tmp_path / "nodir" / "s.json")
    assert code != 0 and "output folder does not exist" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
    # the flags would overwrite the input
    code = _run("risk", small_census.persons, "--by", "region,sex", "--min-freq", 3, "--out", small_census.persons)
    assert code != 0 and "input" in capsys.readouterr().err


def test_risk_files_are_private(small_census, tmp_path: Path) -> None:
    out = tmp_path / "risk.parquet"
    assert _run("risk", small_census.persons, "--by", "region,sex", "--min-freq", 3, "--out", out) == 0
    assert out.stat().st_mode & 0o077 == 0
    assert (tmp_path / "risk.summary.json").stat().st_mode & 0o077 == 0


def test_protect_suppress_release_hides_values(small_census, tmp_path: Path, capsys) -> None:
    out = tmp_path / "release.csv"
    report = tmp_path / "report.json"
    code = _run("protect", small_census.persons, "--by", "region,age,citizenship", "--method", "suppress",
                "--min-freq", 3, "--out", out, "--report", report)
    assert code == 0
    printed = capsys.readouterr().out
    # publishable figures only (issue #12): how many cells are hidden, not how many are primary
    # nor what they hold; nothing but tabsafe's own lines (no solver banner)
    assert printed.startswith("suppress: wrote")
    figures = printed.splitlines()[0]
    assert "suppressed" in figures
    for secret in ("value_suppressed", "secondary_value", "primary", "secondary"):
        assert secret not in figures
    frame = pd.read_csv(out, dtype={"region": str, "age": str, "citizenship": str})
    assert list(frame.columns) == ["region", "age", "citizenship", "count", "status"]
    hidden = frame["status"] == "suppressed"
    assert hidden.any() and frame.loc[hidden, "count"].isna().all() and frame.loc[~hidden, "count"].notna().all()
    payload = json.loads(report.read_text())
    assert "private" not in payload
    assert payload["figures"]["suppressed"] == int(hidden.sum())
    assert not {"primary", "secondary", "value_suppressed", "secondary_value"} & set(payload["figures"])
    # Audit the written release against the original table: nothing small can be recomputed.
    table = tabulate(Microdata.from_file(small_census.persons, codelists=read_meta(small_census.meta)),
                     ["region", "age", "citizenship"]).densify()
    assert len(frame) == table.n_cells
    original = table.counts
    assert (frame.loc[~hidden, "count"].to_numpy() == original[~hidden.to_numpy()]).all()
    primary = (original > 0) & (original < 3)
    assert primary.any()
    audit = interval_audit(table, hidden.to_numpy(), required=1, lower=1, cells=primary)
    assert not audit.narrow.any()
    assert (original[hidden.to_numpy()] > 0).all()  # zeros are never suppressed by default


def test_protect_suppress_private_figures_only_beside_evaluation(small_census, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    code = _run("protect", small_census.persons, "--by", "region,age,citizenship", "--method", "suppress",
                "--min-freq", 3, "--out", tmp_path / "r.csv", "--evaluation", tmp_path / "e.parquet",
                "--report", report)
    assert code == 0
    payload = json.loads(report.read_text())
    evaluation = pd.read_parquet(tmp_path / "e.parquet")
    reason = evaluation["reason"]
    assert payload["private"]["primary"] == int((reason == "primary").sum()) > 0
    assert payload["private"]["value_suppressed"] == int(evaluation.loc[reason != "published", "original"].sum())
    assert report.stat().st_mode & 0o077 == 0


def test_protect_suppress_refuses_a_rule_that_protects_nothing(small_census, tmp_path: Path, capsys) -> None:
    out = tmp_path / "release.csv"
    code = _run("protect", small_census.persons, "--by", "region,sex", "--method", "suppress", "--min-freq", 0,
                "--out", out)
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "nothing would be protected" in err and "--min-freq" in err
    assert "'min_freq'" not in err
    assert list(tmp_path.iterdir()) == []


def test_protect_suppress_optimal_reports_a_gap(small_census, tmp_path: Path) -> None:
    out = tmp_path / "release.parquet"
    report = tmp_path / "report.json"
    code = _run("protect", small_census.persons, "--by", "region,sex,citizenship", "--method", "suppress",
                "--mode", "optimal", "--cost", "cells", "--time-limit", 10, "--out", out, "--report", report,
                "--keep-original")
    assert code == 0
    payload = json.loads(report.read_text())
    assert payload["figures"]["mode"] == "optimal" and payload["figures"]["status"]
    assert 0 <= payload["private"]["gap"] <= 1  # derived from hidden values: private
    frame = pd.read_parquet(out)
    assert "original" in frame.columns


def test_protect_suppress_bad_option_writes_nothing(small_census, tmp_path: Path, capsys) -> None:
    out = tmp_path / "release.csv"
    code = _run("protect", small_census.persons, "--by", "region,sex", "--method", "suppress",
                "--protection-level", "-1", "--out", out)
    assert code != 0
    assert "--protection-level" in capsys.readouterr().err
    assert not out.exists()


def _smallest_small_area(census) -> tuple[str, str, pd.Series]:
    persons = pd.read_parquet(census.persons, columns=["area", "small_area", "sex"])
    persons = persons.astype(str)
    sizes = persons.groupby(["area", "small_area"]).size().sort_values()
    area, small = sizes.index[0]
    by_sex = persons[persons["small_area"] == small].groupby("sex").size()
    return area, small, by_sex


