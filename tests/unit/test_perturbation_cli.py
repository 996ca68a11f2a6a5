"""The cell perturbation family from the command line, as a user runs it: chains (``ckm,additivity``,
``weights,ckm``), one-line errors, nothing written on failure; and weighted tabulation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tabsafe as ts
from tabsafe.cli import main
from tabsafe.errors import InputError


def cli(args: list[object], capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def _area_sex(path: Path, census) -> pd.DataFrame:
    df = pd.read_csv(path, dtype={"area": str, "sex": str})
    return df.set_index(["area", "sex"])["count"]


def test_ckm_then_additivity_publishes_an_additive_table(small_census, tmp_path: Path, capsys) -> None:
    out = tmp_path / "release.csv"
    report = tmp_path / "report.json"
    hrc = f"area={small_census.directory}/hierarchies/area.hrc"
    code, stdout, err = cli(["protect", small_census.persons, "--by", "area,sex", "--hierarchy", hrc,
                             "--method", "ckm,additivity", "--max-noise", 3, "--variance", 2, "--fixed", "area",
                             "--seed", 5, "--out", out, "--report", report, "--evaluation", tmp_path / "ev.parquet"],
                            capsys)
    assert code == 0, err
    assert stdout.startswith("ckm+additivity: wrote"), stdout  # nothing else before the summary line
    counts = _area_sex(out, small_census)
    area = ts.Hierarchy.from_file(f"{small_census.directory}/hierarchies/area.hrc")
    for code_ in area.order:
        # every margin is the sum of its parts, along both variables
        assert counts[(code_, "Total")] == counts[(code_, "1")] + counts[(code_, "2")]
        kids = area.children(code_)
        if kids:
            for sex in ("1", "2", "Total"):
                assert counts[(code_, sex)] == sum(counts[(k, sex)] for k in kids)
    import json

    rep = json.loads(report.read_text())
    assert [s["method"] for s in rep["steps"]] == ["ckm", "additivity"]
    figures = rep["steps"][1]["figures"]
    assert figures["fixed_cells"] == len(area.order)
    # the distance from the input is a figure of the originals: only in the private report
    assert "distance" not in figures and (report.stat().st_mode & 0o077) == 0
    figures = {**figures, **rep["steps"][1]["private"]}
    assert "original" not in out.read_text().splitlines()[0]
    # the additivity step started from the published (ckm) values: the same ckm run alone
    ckm = tmp_path / "ckm.csv"
    assert cli(["protect", small_census.persons, "--by", "area,sex", "--hierarchy", hrc, "--method", "ckm",
                "--max-noise", 3, "--variance", 2, "--out", ckm], capsys)[0] == 0
    noisy = _area_sex(ckm, small_census)
    assert int((counts - noisy.reindex(counts.index).fillna(0)).abs().sum()) == figures["distance"]


def test_standard_output_holds_only_tabsafe_lines(small_census, tmp_path: Path) -> None:
    """A fresh process that solves integer programs prints nothing but its own lines (the
    solver library announces itself on the C-level standard output when first used)."""
    import subprocess
    import sys

    out = tmp_path / "r.csv"
    proc = subprocess.run([sys.executable, "-m", "tabsafe.cli", "protect", str(small_census.persons), "--by",
                           "region,sex", "--method", "ckm,additivity", "--max-noise", "3", "--variance", "2",
                           "--out", str(out)], capture_output=True, text=True, check=True)
    assert proc.stdout.startswith("ckm+additivity: wrote"), proc.stdout[:200]
    assert all(line.startswith(("ckm+additivity:", "note:", "seed ")) for line in proc.stdout.splitlines())


def test_weights_then_ckm_and_barnardisation(small_census, tmp_path: Path, capsys) -> None:
    out = tmp_path / "w.csv"
    code, _, err = cli(["protect", small_census.persons, "--by", "region,sex", "--method", "weights,ckm",
                        "--max-noise", 3, "--variance", 2, "--seed", 1, "--keep-original", "--out", out], capsys)
    assert code == 0, err
    df = pd.read_csv(out, dtype={"region": str, "sex": str})
    grand = df[(df.region == "Total") & (df.sex == "Total")]
    # the release counts weighted records (further from the truth than the cell key method's
    # noise of at most 3 can explain); the evaluation's originals are the true counts
    assert abs(int(grand["count"].iloc[0]) - small_census.n_persons) > 3
    assert int(grand["original"].iloc[0]) == small_census.n_persons
    b = tmp_path / "b.csv"
    code, _, err = cli(["protect", small_census.persons, "--by", "region,sex", "--method", "barnardisation",
                        "--p", 0.5, "--seed", 2, "--out", b], capsys)
    assert code == 0, err


def test_weights_alone_publish_the_weighted_table(small_census, tmp_path: Path, capsys) -> None:
    """A chain of microdata methods only publishes the table of the perturbed records."""
    out = tmp_path / "w.csv"
    code, stdout, err = cli(["protect", small_census.persons, "--by", "region,sex", "--method", "weights",
                             "--seed", 3, "--keep-original", "--out", out], capsys)
    assert code == 0, err
    df = pd.read_csv(out, dtype={"region": str, "sex": str}).set_index(["region", "sex"])
    assert df.loc[("Total", "Total"), "original"] == small_census.n_persons
    assert df.loc[("Total", "Total"), "count"] != small_census.n_persons
    assert df.loc[("Total", "Total"), "count"] == df.loc[("Total", "1"), "count"] + df.loc[("Total", "2"), "count"]
    persons = pd.read_parquet(small_census.persons, columns=["household_id", "small_area", "household_size",
                                                              "region"])
    from tabsafe.protect.weights import PerturbationWeights
    from tabsafe.pipeline import step_seeds

    weighted = PerturbationWeights().perturb(ts.Microdata.from_frame(persons), seed=step_seeds(3, 1)[0])
    frame = weighted.microdata.source.table.to_pandas()
    assert df.loc[("R1", "Total"), "count"] == frame.loc[frame.region == "R1", "weight"].sum()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--method", "additivity", "--fixed", "nosuch"], "--fixed names 'nosuch', which is not a variable"),
        (["--method", "stochastic", "--matrix", "missing.csv"], "missing.csv: no such file"),
        (["--method", "stochastic", "--invariant", "given"], "--invariant given uses the matrix of a file"),
        (["--method", "barnardisation", "--p", "1.5"], "parameter --p must be a number in [0, 1]; got 1.5"),
        (["--method", "weights,ckm", "--strata", "nosuch", "--max-noise", "3", "--variance", "2"],
         "unknown variable 'nosuch' in --strata"),
    ],
)
def test_bad_input_one_line_nothing_written(small_census, tmp_path: Path, capsys, args, message) -> None:
    out = tmp_path / "out.csv"
    code, stdout, err = cli(["protect", small_census.persons, "--by", "region,sex", *args, "--out", out], capsys)
    assert code == 2, err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


def test_consistent_abs_needs_microdata(small_census, tmp_path: Path, capsys) -> None:
    cells = tmp_path / "cells.csv"
    pd.DataFrame({"a": ["x", "y"], "n": [3, 4]}).to_csv(cells, index=False)
    out = tmp_path / "o.csv"
    code, _, err = cli(["protect", "--table", cells, "--count", "n", "--by", "a", "--method", "abs-perturbation",
                        "--consistent", "--out", out], capsys)
    assert code == 2 and "needs microdata" in err and not out.exists(), err
    code, _, err = cli(["protect", "--table", cells, "--count", "n", "--by", "a", "--method", "abs-perturbation",
                        "--x", 2, "--seed", 1, "--out", out], capsys)
    assert code == 0, err


# ------------------------------------------------------------------------------ weighted tabulation


def test_weighted_tabulation_counts_sums_of_weights_and_keys_of_weighted_records() -> None:
    frame = pd.DataFrame({"a": ["x", "x", "y", "y", "y"], "w": [2, 0, 1, 3, 0],
                          "rkey": [0.1, 0.2, 0.3, 0.4, 0.25]})
    t = ts.tabulate(ts.Microdata.from_frame(frame), ["a"], weight="w", key="rkey")
    assert t.value(a="x") == 2 and t.value(a="y") == 4 and t.value() == 6
    # the record of weight 0 is in no cell: its key is in no cell key
    assert t.value("ckey", a="x") == pytest.approx(0.1)
    assert t.value("ckey", a="y") == pytest.approx(0.7)
    declared = ts.tabulate(ts.Microdata.from_frame(frame, weight="w"), ["a"])
    np.testing.assert_array_equal(declared.counts, t.counts)
    # a cell whose records all weigh 0 is not stored (an implied zero)
    zero = ts.tabulate(ts.Microdata.from_frame(frame.assign(w=[0, 0, 1, 1, 1])), ["a"], weight="w")
    assert zero.value(a="x") == 0 and zero.n_stored == 2


@pytest.mark.parametrize(("weights", "message"), [
    ([1, -1, 1], "not whole numbers >= 0 (e.g. -1)"),
    ([1, 0.5, 1], "not whole numbers >= 0 (e.g. 0.5)"),
    ([1, None, 1], "missing or non-numeric value"),
])
def test_bad_weights_are_one_line_errors(weights, message) -> None:
    frame = pd.DataFrame({"a": ["x", "y", "y"], "w": weights})
    with pytest.raises(InputError) as err:
        ts.tabulate(ts.Microdata.from_frame(frame), ["a"], weight="w")
    assert message in str(err.value)
    with pytest.raises(InputError, match="unknown variable 'nope' in 'weight'"):
        ts.tabulate(ts.Microdata.from_frame(frame), ["a"], weight="nope")
