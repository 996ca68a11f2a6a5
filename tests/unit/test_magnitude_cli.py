"""``tabsafe protect --method magnitude-suppress`` (issue #29): a business table protected from its
contributors through the real command, the published file carrying published totals and statuses
only, the private files 0600, the result the library's; a-priori files; holdings."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tabsafe.cli import main
from tabsafe.model.contributions import contributions
from tabsafe.protect.magnitude import Controls, protect_magnitudes
from tabsafe.risk.dominance import parse_rules
from tabsafe.model.hierarchy import Hierarchy
from tabsafe.synth_business import SIZE_CLASSES, business_hierarchies, synth_business

BY = "activity,size"


@pytest.fixture(scope="module")
def register(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("business") / "reg"
    synth_business(300, 4, folder)
    return folder


def _protect(register: Path, out: Path, *extra: str) -> int:
    return main(["protect", str(register / "enterprises.parquet"), "--by", BY,
                 "--hierarchy", f"activity={register / 'hierarchies' / 'activity.hrc'}",
                 "--method", "magnitude-suppress", "--magnitude", "turnover", "--contributor", "enterprise",
                 "--holding", "holding", "--rule", "p:15", "--rule", "nk:2,85", "--rule", "freq:3",
                 "--out", str(out), "--quiet", *extra])


@pytest.fixture(scope="module")
def run(register: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("out")
    assert _protect(register, out / "release.csv", "--evaluation", str(out / "evaluation.parquet"),
                    "--report", str(out / "report.json")) == 0
    assert _protect(register, out / "public.csv", "--report", str(out / "public.json")) == 0
    return out


def _library(register: Path, controls: Controls | None = None):
    data = pd.read_parquet(register / "enterprises.parquet")
    c = contributions(data, ["activity", "size"], value="turnover", contributor="enterprise", holding="holding",
                      hierarchies={"activity": business_hierarchies()["activity"],
                                   "size": Hierarchy.flat(list(SIZE_CLASSES))}, digits=2)
    return c, protect_magnitudes(c, parse_rules(["p:15", "nk:2,85", "freq:3"]), controls=controls)


def test_the_release_is_the_library_pattern_with_published_totals_only(register: Path, run: Path) -> None:
    release = pd.read_csv(run / "release.csv", dtype={"activity": str, "size": str})
    # the value column is the magnitude's: no ``count`` beside it (which would read as a number of
    # contributors equal to the turnover)
    assert list(release.columns) == ["activity", "size", "sum_turnover", "status"]
    c, res = _library(register)
    assert len(release) == c.n_cells == 41 * 5
    hidden = release["status"].to_numpy() == "suppressed"
    assert np.array_equal(hidden, res.suppressed)
    assert res.reason[hidden].tolist().count("primary") > 3  # the rules flagged cells, all hidden
    assert release.loc[hidden, "sum_turnover"].isna().all()
    shown = ~hidden
    assert np.allclose(release.loc[shown, "sum_turnover"], c.value[shown])


def test_the_frequency_asked_for_is_the_real_number_of_contributors_hidden_alike(register: Path,
                                                                                 tmp_path: Path) -> None:
    assert _protect(register, tmp_path / "r.csv", "--frequency") == 0
    release = pd.read_csv(tmp_path / "r.csv", dtype={"activity": str, "size": str})
    assert list(release.columns) == ["activity", "size", "sum_turnover", "contributors", "status"]
    c, res = _library(register)
    hidden = release["status"].to_numpy() == "suppressed"
    assert np.array_equal(hidden, res.suppressed)  # the same pattern as without the frequency
    assert release.loc[hidden, "contributors"].isna().all() and release.loc[hidden, "sum_turnover"].isna().all()
    shown = ~hidden
    assert np.array_equal(release.loc[shown, "contributors"].to_numpy(), c.contributors[shown])
    assert (c.contributors[shown] > 1).any() and not np.allclose(c.contributors[shown], c.value[shown])
    # the CSV-W and SDMX forms publish the totals as the observation value
    assert _protect(register, tmp_path / "r.sdmx.csv", "--format", "sdmx-csv") == 0
    sdmx = pd.read_csv(tmp_path / "r.sdmx.csv", dtype={"activity": str, "size": str})
    assert np.allclose(sdmx["OBS_VALUE"].to_numpy()[shown], c.value[shown])
    assert sdmx["OBS_VALUE"][hidden].isna().all()


def test_private_files_hold_the_reasons_and_are_0600(run: Path) -> None:
    ev = pd.read_parquet(run / "evaluation.parquet")
    assert {"original", "contributors", "reason", "upper_level", "lower_level"} <= set(ev.columns)
    assert set(ev["reason"]) == {"published", "primary", "secondary"}
    assert os.stat(run / "evaluation.parquet").st_mode & 0o777 == 0o600
    assert os.stat(run / "report.json").st_mode & 0o777 == 0o600
    private = json.loads((run / "report.json").read_text())["private"]
    assert private["primary"] > 0


def test_the_public_report_says_nothing_of_primary_cells(run: Path) -> None:
    report = json.loads((run / "public.json").read_text())
    text = json.dumps(report)
    assert "private" not in report and "primary" not in text and "contributors\"" not in text
    assert report["figures"]["suppressed"] > 0
    assert (run / "public.csv").read_text() == (run / "release.csv").read_text()


def test_an_apriori_file_protects_and_hides_cells(register: Path, tmp_path: Path) -> None:
    c, first = _library(register)
    table = c.table()
    secondary = [int(i) for i in np.flatnonzero(first.reason == "secondary")]
    published = [int(i) for i in np.flatnonzero((first.reason == "published") & ~c.empty)]
    keep, hide = secondary[0], published[-1]
    codes = table.to_frame().astype({"activity": str, "size": str})
    rows = [{"activity": codes.iloc[keep]["activity"], "size": codes.iloc[keep]["size"], "status": "protected"},
            {"activity": codes.iloc[hide]["activity"], "size": codes.iloc[hide]["size"], "status": "suppressed"}]
    pd.DataFrame(rows).to_csv(tmp_path / "apriori.csv", index=False)
    assert _protect(register, tmp_path / "r.csv", "--apriori", str(tmp_path / "apriori.csv")) == 0
    release = pd.read_csv(tmp_path / "r.csv")
    assert release["status"].iloc[keep] == "published"
    assert release["status"].iloc[hide] == "suppressed"
    want = _library(register, Controls.from_cells(c, {
        (("activity", r["activity"]), ("size", r["size"])): {"status": r["status"]} for r in rows}))[1]
    assert np.array_equal(release["status"].to_numpy() == "suppressed", want.suppressed)


@pytest.mark.parametrize(("content", "says"), [
    ("activity,size,status\nA,micro,maybe\n", "status 'maybe'"),
    ("activity,size,status\nZZ,micro,safe\n", "line 2"),
    ("activity,status\nA,safe\n", "no column 'size'"),
    ("activity,size,upper\nA,micro,x\n", "line 2, column upper"),
    ("activity,size,colour\nA,micro,red\n", "'colour'"),
])
def test_a_bad_apriori_file_is_one_line(register: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        content: str, says: str) -> None:
    (tmp_path / "a.csv").write_text(content)
    assert _protect(register, tmp_path / "r.csv", "--apriori", str(tmp_path / "a.csv")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err and "a.csv" in err, err
    assert not (tmp_path / "r.csv").exists()


def test_an_empty_holding_is_no_holding() -> None:
    # two independent enterprises (holding empty) and a holding of two: the independents are two
    # contributors at holding level, not one holding of both (which would know both contributions)
    data = pd.DataFrame({"a": ["x"] * 4, "id": ["e1", "e2", "e3", "e4"], "h": ["", None, "H1", "H1"],
                         "v": [10.0, 20.0, 30.0, 40.0]})
    held = contributions(data, ["a"], value="v", contributor="id", holding="h").at_holdings()
    assert sorted(held.units.tolist()) == ["H1", "e1", "e2"]
    total = held.table().cell_id({"a": "Total"})
    assert sorted(held.cell(total)[1].tolist()) == [10.0, 20.0, 70.0]
