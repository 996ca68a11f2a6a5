"""Bad parameters, infeasible parameter sets and bad files fail with one clear line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tabsafe.errors
from tabsafe.cli import main
from tabsafe.protect.cell_key import (
    MagnitudeParams,
    abs_lookup,
    cell_keys,
    generate_record_keys,
    lookup_noise,
    perturb_magnitudes,
)
from tabsafe.protect.ptable import PTable, PTableParams, generate_ptable


def one_line(err: BaseException) -> str:
    text = str(err)
    assert "\n" not in text and text.strip() == text and text
    return text


def files_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# --- parameters ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_noise", 0),
        ("max_noise", 2.5),
        ("max_noise", True),
        ("variance", 0),
        ("variance", -1.0),
        ("variance", float("nan")),
        ("variance", float("inf")),
        ("variance", "3"),
        ("js", -1),
        ("js", 1.5),
        ("max_noise", 101),
        ("pstay", 0.0),
        ("pstay", 1.0),
        ("pstay", 1.2),
        ("pstay", float("nan")),
        ("monotony", "yes"),
    ],
)
def test_invalid_parameter_names_parameter_and_value(field: str, value: object) -> None:
    kwargs: dict[str, object] = {"max_noise": 3, "variance": 2.0}
    kwargs[field] = value
    with pytest.raises(tabsafe.errors.InputError) as info:
        PTableParams(**kwargs)  # type: ignore[arg-type]
    text = one_line(info.value)
    assert f"'{field}'" in text
    assert repr(value) in text
    assert "must be" in text


def test_params_are_frozen_and_keyword_only() -> None:
    params = PTableParams(max_noise=3, variance=2)
    with pytest.raises(AttributeError):
        params.variance = 5.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        PTableParams(3, 2.0)  # type: ignore[misc]


# --- infeasible parameter sets ------------------------------------------------------------


def test_variance_too_small_for_blocked_values_names_row_and_nearest_v() -> None:
    # row i=1 with values 1..2 blocked can only mix v=-1 and v=+2: variance at least 2
    with pytest.raises(tabsafe.errors.MethodError) as info:
        generate_ptable(PTableParams(max_noise=5, variance=1, js=2))
    text = one_line(info.value)
    assert "row i=1" in text
    assert "V=1" in text
    assert "nearest feasible V: any 'variance' > 2" in text
    assert info.value.reason is tabsafe.errors.Reason.INFEASIBLE


def test_variance_exactly_on_the_boundary_is_infeasible() -> None:
    with pytest.raises(tabsafe.errors.MethodError) as info:
        generate_ptable(PTableParams(max_noise=5, variance=2, js=2))
    assert "row i=1" in one_line(info.value)
    # just above the boundary the table exists
    pt = generate_ptable(PTableParams(max_noise=5, variance=2.001, js=2))
    assert (pt.report["variance"] <= 2.001 + 1e-6).all()


def test_infeasible_row_further_down_is_named() -> None:
    # js = 3: rows 1..3 need variance >= 3, 4, 3 (i (js + 1 - i)); V = 3.5 fails at row 2
    with pytest.raises(tabsafe.errors.MethodError) as info:
        generate_ptable(PTableParams(max_noise=6, variance=3.5, js=3))
    text = one_line(info.value)
    assert "row i=2" in text and "> 4" in text


@pytest.mark.parametrize(("d", "js", "row"), [(1, 3, 1), (2, 2, 3)])
def test_zero_mean_impossible_names_row_and_needed_max_noise(d: int, js: int, row: int) -> None:
    with pytest.raises(tabsafe.errors.MethodError) as info:
        generate_ptable(PTableParams(max_noise=d, variance=10, js=js))
    text = one_line(info.value)
    assert f"row i={row}" in text and "zero mean" in text
    assert f"'max_noise' must be at least 'js' + 1 = {js + 1}" in text
    assert info.value.reason is tabsafe.errors.Reason.INFEASIBLE


def test_generate_requires_params_object() -> None:
    with pytest.raises(tabsafe.errors.InputError):
        generate_ptable({"max_noise": 3, "variance": 2})  # type: ignore[arg-type]


# --- files --------------------------------------------------------------------------------


GOOD = (
    "i,j,p,v,p_int_lb,p_int_ub\n"
    "0,0,1,0,0,1\n"
    "1,0,0.5,-1,0,0.5\n"
    "1,2,0.5,1,0.5,1\n"
    "2,2,0.8,0,0,0.8\n"
    "2,3,0.2,1,0.8,1\n"
)


def write(tmp_path: Path, text: str, name: str = "pt.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (GOOD.replace(",p_int_ub", ",upper"), "missing column(s) p_int_ub"),
        (GOOD.replace("2,3,0.2,1,0.8,1", "2,3,0.3,1,0.8,1.1"), "row i=2: probabilities sum"),
        (GOOD.replace("2,3,0.2,1,0.8,1", "2,3,0.2,1,0.7,1"), "row i=2: bounds"),
        (GOOD.replace("1,0,0.5,-1,0,0.5", "1,-1,0.5,-2,0,0.5"), "row i=1: perturbed value j is negative"),
        (GOOD.replace("1,2,0.5,1,0.5,1", "1,2,0.5,2,0.5,1"), "row i=1: v differs from j - i"),
        (GOOD.replace("1,0,0.5,-1", "1,0,abc,-1"), "row i=1: column p"),
        (GOOD.replace("1,0,0.5,-1,0,0.5\n1,2,0.5,1,0.5,1\n", ""), "row i=1: no rows"),
        ("i,j,p,v,p_int_lb,p_int_ub\n", "no rows"),
        ("", "cannot parse the file: it is empty"),
        (GOOD.replace("1,2,0.5,1,0.5,1", "1,2,0.5,1,0.5,1,7"), "cannot parse the file: line 4 has 7 fields"),
        (GOOD + "2,3,0.2,1,0.8,1\n", "row i=2: perturbed value j=3 appears twice"),
        (GOOD.replace("2,2,0.8,0,0,0.8\n2,3", "2.5,2,0.8,0,0,0.8\n2,3"), "column i must hold integers"),
        (GOOD.replace("0,0,1,0,0,1", "0,0,0.5,0,0,0.5\n0,1,0.5,1,0.5,1"),
         "row i=0: a count of 0 must stay 0 (j=0 with p=1), but this p-table moves it to j=1"),
    ],
)
def test_bad_csv_names_file_and_row(tmp_path: Path, text: str, fragment: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(tabsafe.errors.InputError) as info:
        PTable.from_csv(path)
    msg = one_line(info.value)
    assert str(path) in msg
    assert fragment in msg


def test_zero_row_must_keep_zeros_from_rows_and_frames() -> None:
    """A cell without records has no cell key, and tables store only cells with records: a
    p-table that moves a count of 0 could never be applied as it says."""
    moved = [{"i": 0, "j": 0, "p": 0.9, "v": 0, "p_int_lb": 0.0, "p_int_ub": 0.9},
             {"i": 0, "j": 2, "p": 0.1, "v": 2, "p_int_lb": 0.9, "p_int_ub": 1.0}]
    with pytest.raises(tabsafe.errors.InputError) as info:
        PTable.from_rows(moved)
    assert "row i=0: a count of 0 must stay 0" in one_line(info.value) and "j=2" in str(info.value)
    with pytest.raises(tabsafe.errors.InputError):
        PTable.from_frame(pd.DataFrame(moved))
    # a zero-probability target beside j = 0 moves nothing and is accepted
    kept = [{"i": 0, "j": 0, "p": 1.0, "v": 0, "p_int_lb": 0.0, "p_int_ub": 1.0},
            {"i": 0, "j": 1, "p": 0.0, "v": 1, "p_int_lb": 1.0, "p_int_ub": 1.0}]
    assert PTable.from_rows(kept).i_max == 0


def test_from_file_tells_the_layouts_apart_by_the_header(tmp_path: Path) -> None:
    pt = generate_ptable(PTableParams(max_noise=3, variance=1.5, js=1))
    csv_in_txt = write(tmp_path, pt.to_text("csv"), "a.txt")
    tau_in_csv = write(tmp_path, pt.to_text("tau-argus"), "b.csv")
    assert PTable.from_file(csv_in_txt) == pt
    assert PTable.from_file(tau_in_csv) == pt
    # the explicit readers insist on their own layout
    with pytest.raises(tabsafe.errors.InputError) as info:
        PTable.from_csv(tau_in_csv)
    assert "missing column(s)" in one_line(info.value)


def test_tau_argus_sas_variant_and_type_column(tmp_path: Path) -> None:
    sas = write(tmp_path, "i;j;p;v;p_int_lb;p_int_ub;type\n0;0;1;0;0;1;all\n1;0;0.25;-1;0;0.25;all\n"
                          "1;2;0.75;1;0.25;1;all\n", "sas.txt")
    pt = PTable.from_file(sas)
    assert pt.column("p_int_lb").tolist() == [0.0, 0.0, 0.25]
    # R ptable's even/odd tables are read (magnitude p-tables, issue #30) but never perturb counts
    even = PTable.from_file(write(tmp_path, "i;j;p;v;p_int_ub;type\n0;0;1;0;1;even\n", "even.txt"))
    assert even.kind == "even"
    with pytest.raises(tabsafe.errors.InputError) as info:
        lookup_noise(np.array([0]), np.array([0.5]), even)
    assert "counts need one of type 'all'" in one_line(info.value)
    other = write(tmp_path, "i;j;p;v;p_int_ub;type\n0;0;1;0;1;both\n", "other.txt")
    with pytest.raises(tabsafe.errors.InputError) as info:
        PTable.from_file(other)
    assert f"{other}:2: field type: must be one of all, even, odd" in one_line(info.value)


@pytest.mark.parametrize("name", ["pt.parquet", "pt.json", "pt"])
def test_writing_refuses_a_name_that_is_not_text(tmp_path: Path, name: str) -> None:
    pt = generate_ptable(PTableParams(max_noise=2, variance=1))
    for write_it in (pt.to_csv, pt.to_tau_argus):
        with pytest.raises(tabsafe.errors.InputError) as info:
            write_it(tmp_path / name)
        assert ".csv or .txt" in one_line(info.value)
    assert files_in(tmp_path) == []


def test_reading_and_looking_up_import_neither_pandas_nor_scipy(tmp_path: Path) -> None:
    """Issue #11: the cell key method's p-table path is numpy only."""
    path = write(tmp_path, GOOD)
    code = (
        "import sys, numpy as np\n"
        "from tabsafe.protect.ptable import PTable, PTableParams\n"
        "from tabsafe.protect.cell_key import lookup_noise\n"
        f"pt = PTable.from_file({str(path)!r})\n"
        "assert lookup_noise(np.array([1, 9]), np.array([0.5, 0.9]), pt).tolist() == [-1, 1]\n"
        "PTableParams(max_noise=2, variance=1); pt.to_text('tau-argus'); pt.row_reports\n"
        "print(sorted(m for m in ('pandas', 'scipy', 'matplotlib') if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(tabsafe.errors.InputError) as info:
        PTable.from_csv(tmp_path / "nope.csv")
    assert "file not found" in one_line(info.value)


def test_csv_round_trip_and_good_file(tmp_path: Path) -> None:
    small = PTable.from_csv(write(tmp_path, GOOD))
    assert small.i_max == 2 and small.params is None
    assert lookup_noise(np.array([1, 9]), np.array([0.5, 0.9]), small).tolist() == [-1, 1]
    pt = generate_ptable(PTableParams(max_noise=4, variance=2.5, js=1))
    path = pt.to_csv(tmp_path / "gen.csv")
    back = PTable.from_csv(path)
    pd.testing.assert_frame_equal(back.rows, pt.rows)
    assert files_in(tmp_path) == ["gen.csv", "pt.csv"]


def test_tau_argus_round_trip_and_r_style_padding(tmp_path: Path) -> None:
    pt = generate_ptable(PTableParams(max_noise=3, variance=1.5, js=1))
    path = pt.to_tau_argus(tmp_path / "pt.txt")
    assert path.read_text().splitlines()[0] == "i;j;p;v;p_int_ub"
    back = PTable.from_tau_argus(path)
    pd.testing.assert_frame_equal(back.rows, pt.rows)
    # R's format(..., digits = 8) pads numbers to a common width
    padded = write(
        tmp_path,
        "i;j;p;v;p_int_ub\n0;0;1.0000000;0;1.0000000\n1;0;0.5000000;-1;0.5000000\n"
        "1;2;0.5000000; 1;1.0000000\n",
        "r.txt",
    )
    assert PTable.from_tau_argus(padded).rows["v"].tolist() == [0, -1, 1]
    bad = write(tmp_path, "i;j;p;v\n0;0;1;0\n", "bad.txt")
    with pytest.raises(tabsafe.errors.InputError) as info:
        PTable.from_tau_argus(bad)
    assert "p_int_ub" in one_line(info.value)


def test_write_to_missing_folder_leaves_nothing(tmp_path: Path) -> None:
    pt = generate_ptable(PTableParams(max_noise=2, variance=1))
    with pytest.raises(tabsafe.errors.InputError) as info:
        pt.to_csv(tmp_path / "no" / "pt.csv")
    assert "does not exist" in one_line(info.value)
    assert files_in(tmp_path) == []


def test_failed_write_keeps_old_file_and_leaves_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = write(tmp_path, GOOD)

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    pt = generate_ptable(PTableParams(max_noise=2, variance=1))
    with pytest.raises(OSError):
        pt.to_csv(target)
    assert target.read_text() == GOOD
    assert files_in(tmp_path) == ["pt.csv"]


def test_ptable_is_immutable() -> None:
    pt = generate_ptable(PTableParams(max_noise=2, variance=1))
    with pytest.raises(AttributeError):
        pt.i_max = 5  # type: ignore[misc]
    with pytest.raises(ValueError, match="read-only"):
        pt.column("p")[0] = 0.5
    ub, _ = pt.intervals(1)
    with pytest.raises(ValueError, match="read-only"):
        ub[0] = 0.0
    rows = pt.rows
    rows.loc[0, "p"] = 0.5
    assert pt.rows.loc[0, "p"] == 1.0
    with pytest.raises(TypeError):
        PTable()


# --- `tabsafe ptable` ---------------------------------------------------------------------


def cli(argv: list[object], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], str]:
    code = main(["ptable", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_cli_writes_csv_plot_report_and_reports_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, png, rep = tmp_path / "pt.csv", tmp_path / "pt.png", tmp_path / "pt.json"
    code, lines, err = cli(["--max-noise", 5, "--variance", 3, "--js", 2, "--out", out, "--plot", png,
                            "--report", rep], capsys)
    assert code == 0, err
    assert len(PTable.from_csv(out).rows) == 66
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(lines) == 10  # i = 0..8 and the summary: every row reaches V = 3, no note
    assert lines[1].startswith("i=1:") and "variance=3.000000" in lines[1]
    assert lines[8].startswith("i>=8:")
    assert not any("below" in line or line.startswith("note") for line in lines)
    report = json.loads(rep.read_text())
    assert report["params"] == {"max_noise": 5, "variance": 3.0, "js": 2, "pstay": None, "monotony": True}
    assert [r["i"] for r in report["rows"]] == list(range(9))
    assert all(abs(r["variance"] - 3) < 1e-6 and not r["below_variance"] for r in report["rows"][1:])
    assert report["notes"] == []
    assert files_in(tmp_path) == ["pt.csv", "pt.json", "pt.png"]


def test_cli_says_when_rows_stay_below_the_variance(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue #12: D=2, V=10 reaches variance 2 at most (uniform over 5 targets): say so."""
    out, rep = tmp_path / "pt.csv", tmp_path / "pt.json"
    code, lines, err = cli(["--max-noise", 2, "--variance", 10, "--out", out, "--report", rep], capsys)
    assert code == 0, err
    rows = [line for line in lines if line.startswith("i")]
    assert [("below V=10" in line) for line in rows] == [False, True, True]
    notes = [line for line in lines if line.startswith("note:")]
    assert len(notes) == 1
    assert "2 rows" in notes[0] and "i=1: 0.9319" in notes[0] and "i>=2: 2" in notes[0]
    assert "--variance 10" in notes[0] and "--max-noise" in notes[0]
    report = json.loads(rep.read_text())
    np.testing.assert_allclose([r["variance"] for r in report["rows"]], [0, 0.931884, 2.0], atol=1e-6)
    assert [r["below_variance"] for r in report["rows"]] == [False, True, True]
    assert len(report["notes"]) == 1 and "'max_noise'" not in report["notes"][0]


def test_cli_tau_argus_and_no_monotony(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "pt.txt"
    code, _, err = cli(["--max-noise", 2, "--variance", 1, "--no-monotony", "--pstay", 0.4, "--format", "tau-argus",
                        "--out", out], capsys)
    assert code == 0, err
    pt = PTable.from_tau_argus(out)
    assert pt.i_max == 2
    assert pt == generate_ptable(PTableParams(max_noise=2, variance=1, pstay=0.4, monotony=False))


@pytest.mark.parametrize(("fmt", "name"), [("csv", "pt.txt"), ("tau-argus", "pt.csv")])
def test_cli_either_layout_in_either_text_suffix(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 fmt: str, name: str) -> None:
    out = tmp_path / name
    code, _, err = cli(["--max-noise", 3, "--variance", 1.5, "--format", fmt, "--out", out], capsys)
    assert code == 0, err
    assert PTable.from_file(out) == generate_ptable(PTableParams(max_noise=3, variance=1.5))


@pytest.mark.parametrize("name", ["pt.parquet", "pt.json", "pt"])
def test_cli_refuses_a_name_that_is_not_text(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    """Issue #12: `--out p.parquet` wrote CSV text into a .parquet file."""
    code, lines, err = cli(["--max-noise", 2, "--variance", 1, "--out", tmp_path / name,
                            "--plot", tmp_path / "pt.png", "--report", tmp_path / "r.json"], capsys)
    assert code == 2
    assert one_line(err.strip()) == err.strip() and err.count("\n") == 1
    assert "--out a .csv or .txt name" in err
    assert lines == [] and files_in(tmp_path) == []


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--plot", "{d}/no/pt.png"], "output folder does not exist"),
        (["--plot", "{d}/pt.svg"], "give a .png name"),
        (["--report", "{d}/r.txt"], "the report is JSON"),
    ],
)
def test_cli_every_output_is_checked_first(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           extra: list[str], fragment: str) -> None:
    argv = ["--max-noise", 2, "--variance", 1, "--out", tmp_path / "pt.csv",
            *[e.format(d=tmp_path) for e in extra]]
    code, lines, err = cli(argv, capsys)
    assert code == 2 and fragment in err and err.count("\n") == 1
    assert lines == [] and files_in(tmp_path) == []


def test_cli_checks_outputs_before_generating(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # an infeasible parameter set and a bad plot path: the path is refused first (exit 2), the
    # optimiser never runs (it would fail with exit 3)
    code, lines, err = cli(["--max-noise", 5, "--variance", 1, "--js", 2, "--out", tmp_path / "pt.csv",
                            "--plot", tmp_path / "no" / "pt.png"], capsys)
    assert code == 2 and "output folder does not exist" in err
    assert lines == [] and files_in(tmp_path) == []


def test_cli_infeasible_leaves_no_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, err = cli(["--max-noise", 5, "--variance", 1, "--js", 2, "--out", tmp_path / "pt.csv",
                            "--plot", tmp_path / "pt.png", "--report", tmp_path / "pt.json"], capsys)
    assert code == 3
    assert "row i=1" in err and "nearest feasible V: any --variance > 2" in err
    assert lines == [] and files_in(tmp_path) == []


def test_cli_never_overwrites_an_existing_output_on_failure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = write(tmp_path, GOOD)
    code, _, err = cli(["--max-noise", 5, "--variance", 1, "--js", 2, "--out", target], capsys)
    assert code == 2 and "give --force" in err  # an existing output is refused before any work
    assert target.read_text() == GOOD and files_in(tmp_path) == ["pt.csv"]
    code, _, _ = cli(["--max-noise", 5, "--variance", 1, "--js", 2, "--out", target, "--force"], capsys)
    assert code == 3  # with --force, a failing generation still leaves the file as it was
    assert target.read_text() == GOOD and files_in(tmp_path) == ["pt.csv"]


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--max-noise", "x", "--variance", "3"], "--max-noise must be an integer"),
        (["--max-noise", "3", "--variance", "big"], "--variance must be a finite number > 0"),
        (["--max-noise", "3", "--variance", "3", "--pstay", "2"], "--pstay must be a number in (0, 1)"),
        (["--max-noise", "0", "--variance", "3"], "--max-noise must be an integer in 1..100; got 0"),
        (["--variance", "3"], "the following arguments are required: --max-noise"),
    ],
)
def test_cli_bad_values(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str) -> None:
    code, _, err = cli([*argv, "--out", tmp_path / "pt.csv"], capsys)
    assert code == 2
    assert fragment in err and err.count("\n") == 1
    assert files_in(tmp_path) == []


# --- cell key inputs ----------------------------------------------------------------------


def test_record_keys_have_exact_digits_and_follow_the_seed() -> None:
    a = generate_record_keys(1000, seed=42, digits=6)
    b = generate_record_keys(1000, seed=42, digits=6)
    c = generate_record_keys(1000, seed=43, digits=6)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert a.min() >= 0 and a.max() < 1
    k = np.rint(a * 1e6)
    np.testing.assert_array_equal(k / 1e6, a)
    assert all(float(f"{x:.6f}") == x for x in a.tolist())  # six decimals say it all
    with pytest.raises(tabsafe.errors.InputError):
        generate_record_keys(10, seed=1, digits=16)
    with pytest.raises(tabsafe.errors.InputError):
        generate_record_keys(-1, seed=1)


@pytest.mark.parametrize(
    ("counts", "keys", "fragment"),
    [
        (np.array([1, -2]), np.array([0.1, 0.2]), "counts must be >= 0"),
        (np.array([1.5, 2.0]), np.array([0.1, 0.2]), "whole numbers"),
        (np.array([1, 2]), np.array([0.1, 1.2]), "[0, 1]"),
        (np.array([1, 2]), np.array([0.1, np.nan]), "[0, 1]"),
        (np.array([1, 2]), np.array([0.1]), "shape"),
    ],
)
def test_lookup_noise_rejects_bad_input(counts: np.ndarray, keys: np.ndarray, fragment: str) -> None:
    pt = generate_ptable(PTableParams(max_noise=2, variance=1))
    with pytest.raises(tabsafe.errors.InputError) as info:
        lookup_noise(counts, keys, pt)
    assert fragment in one_line(info.value)


def test_cell_keys_and_abs_inputs() -> None:
    with pytest.raises(tabsafe.errors.InputError) as info:
        cell_keys(np.array([0.123]), np.array([0]), 1, digits=2)
    assert "more than 2 decimal digits" in one_line(info.value)
    with pytest.raises(tabsafe.errors.InputError):
        cell_keys(np.array([0.1]), np.array([3]), 2, digits=1)
    with pytest.raises(tabsafe.errors.InputError):
        abs_lookup(np.array([1]), np.array([300]), np.zeros((3, 256), dtype=np.int64))


def test_magnitude_params_validation() -> None:
    pt = generate_ptable(PTableParams(max_noise=2, variance=1))
    with pytest.raises(tabsafe.errors.InputError) as info:
        MagnitudeParams(ptable=pt, fp=100, p_small=0.1, p_large=0.2)
    assert "'p_large'" in one_line(info.value)
    with pytest.raises(tabsafe.errors.InputError) as info:
        MagnitudeParams(ptable=pt, fp=100, epsilon=(0.5, 1.0))
    assert "'epsilon'" in one_line(info.value)
    params = MagnitudeParams(ptable=pt, fp=100, epsilon=(1.0, 0.5))
    with pytest.raises(tabsafe.errors.InputError) as info:
        perturb_magnitudes(np.array([10.0]), np.array([0.5]), params)
    assert "contributions are needed" in one_line(info.value)
