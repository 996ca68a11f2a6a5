"""``tabsafe protect --method magnitude-suppress`` (issue #29): a business table protected from its
contributors through the real command, the published file carrying published totals and statuses
only, the private files 0600, the result the library's; a-priori files; holdings."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

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


def _release_config(register: Path, folder: Path, **extra: object) -> Path:
    import yaml

    config = folder / "release.yaml"
    config.write_text(yaml.safe_dump({
        "data": str(register / "enterprises.parquet"), "meta": str(register / "meta.yaml"),
        "hierarchies": {"activity": str(register / "hierarchies" / "activity.hrc"),
                        "region": str(register / "hierarchies" / "region.hrc")},
        "tables": [{"name": "activity_size", "by": ["activity", "size"]},
                   {"name": "activity_region", "by": ["activity", "region"]}], **extra}))
    return config


def _protect_release(config: Path, out: Path, *extra: str) -> int:
    return main(["protect", "--release", str(config), "--method", "magnitude-suppress", "--magnitude", "turnover",
                 "--contributor", "enterprise", "--holding", "holding", "--rule", "p:15", "--rule", "freq:3",
                 "--out", str(out), "--quiet", *extra])


@pytest.fixture(scope="module")
def small_register(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("business") / "small"
    synth_business(100, 4, folder)
    return folder


def test_a_release_of_magnitude_tables_is_suppressed_jointly(small_register: Path, tmp_path: Path) -> None:
    """``protect --release``: the activity margin both tables share has one status in both (each
    table suppressed alone gives it different ones on this register); the public's independent LP
    attack finds nothing in either table, nor does any insider's in activity × size."""
    import importlib.util

    register = small_register
    assert _protect_release(_release_config(register, tmp_path), tmp_path / "out", "--evaluation",
                            str(tmp_path / "ev")) == 0
    files = {name: pd.read_csv(tmp_path / "out" / f"{name}.csv", dtype=str)
             for name in ("activity_size", "activity_region")}
    shared = [f[f[name.split("_")[1]] == "Total"].set_index("activity")["status"] for name, f in files.items()]
    assert (shared[0] == "suppressed").sum() > 3 and shared[0].equals(shared[1])
    spec = importlib.util.spec_from_file_location(
        "magnitude_attack", Path(__file__).parents[1] / "properties" / "test_magnitude_attack.py")
    attack = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(attack)  # type: ignore[union-attr]
    data = pd.read_parquet(register / "enterprises.parquet")
    for name, frame in files.items():
        by = name.split("_")
        c = contributions(data, by, value="turnover", contributor="enterprise", holding="holding",
                          hierarchies={v: h for v, h in {**business_hierarchies(),
                                                          "size": Hierarchy.flat(list(SIZE_CLASSES))}.items()
                                       if v in by}, digits=2)
        ev = pd.read_parquet(tmp_path / "ev" / f"{name}.evaluation.parquet")
        hidden = frame["status"].to_numpy() == "suppressed"
        assert np.array_equal(frame["sum_turnover"].isna().to_numpy(), hidden) and "count" not in frame
        assert len(frame) == c.n_cells and np.array_equal(ev["reason"].to_numpy() != "published", hidden)
        res = SimpleNamespace(suppressed=hidden, reason=ev["reason"].to_numpy(), upper=ev["upper_level"].to_numpy(),
                              lower=ev["lower_level"].to_numpy())
        level = c.at_holdings()
        run = attack.Attack(level, res)
        assert run.run(()) == []
        if name == "activity_region":
            continue  # its insiders' attack costs half a CPU minute: the public's alone here
        for units in attack.intruders(level, res):
            assert run.run(units) == [], (name, level.units[list(units)])


def test_a_magnitude_release_refuses_an_apriori_file_in_one_line(small_register: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.csv").write_text("activity,size,status\nA,micro,safe\n")
    assert _protect_release(_release_config(small_register, tmp_path), tmp_path / "out", "--apriori",
                            str(tmp_path / "a.csv")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "a-priori" in err and "release" in err, err
    assert not (tmp_path / "out").exists()
