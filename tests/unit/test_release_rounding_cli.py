"""A release controlled-rounded through the real CLI (issue #13): ``tabsafe protect --release
cfg.yaml --method controlled-round --base 3 --out DIR`` writes every table and a manifest that
records each table's base; the files agree on every shared cell, each is additive, and
``tabsafe audit --release DIR/release.yaml`` reads them as rounded (a published r is in
[r - 2, r + 2])."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from tabsafe import memory
from tabsafe.cli import main
from tabsafe.model.hierarchy import Hierarchy

TABLES = ("area_age_sex", "area_age_citizenship")
AREAS = {"R1": ["A1", "A2", "A3"], "R2": ["A4", "A5", "A6", "A7"]}


def _run(*argv: object) -> int:
    return main([str(a) for a in argv])


def _config(folder: Path) -> Path:
    """600 persons in 7 areas of 2 regions × 6 ages × 2 sexes × 3 citizenships (the release
    audit of every rounded cell is two programs per cell: a small release keeps it quick)."""
    rng = np.random.default_rng(3)
    n = 600
    areas = [a for kids in AREAS.values() for a in kids]
    pd.DataFrame({
        "area": rng.choice(areas, n, p=[0.3, 0.2, 0.1, 0.15, 0.1, 0.1, 0.05]),
        "age": rng.choice([f"Y{i}" for i in range(6)], n),
        "sex": rng.choice(["1", "2"], n),
        "citizenship": rng.choice(["C1", "C2", "C3"], n, p=[0.8, 0.15, 0.05]),
    }).to_parquet(folder / "persons.parquet")
    (folder / "area.hrc").write_text(Hierarchy.from_tree(AREAS).to_hrc())
    config = folder / "release.yaml"
    config.write_text(yaml.safe_dump({
        "data": str(folder / "persons.parquet"),
        "hierarchies": {"area": str(folder / "area.hrc")},
        "tables": [{"name": "area_age_sex", "by": ["area", "age", "sex"]},
                   {"name": "area_age_citizenship", "by": ["area", "age", "citizenship"]}],
    }))
    return config


def test_release_rounded_from_the_cli_and_audited(tmp_path: Path, capsys, monkeypatch) -> None:
    config = _config(tmp_path)
    out = tmp_path / "release"
    assert _run("protect", "--release", config, "--method", "controlled-round", "--base", 3, "--out", out,
                "--work-limit", 200,
                "--report", tmp_path / "report.json", "--evaluation", tmp_path / "eval") == 0
    printed = capsys.readouterr().out
    assert "controlled-round: wrote 2 tables" in printed
    assert sorted(p.name for p in out.iterdir()) == ["area_age_citizenship.csv", "area_age_sex.csv", "release.yaml"]
    manifest = yaml.safe_load((out / "release.yaml").read_text())
    assert [t["base"] for t in manifest["tables"]] == [3, 3]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["method"] == "controlled-round" and report["figures"]["tables"] == 2
    assert report["figures"]["shared_cells"] > 0

    files = {n: pd.read_csv(out / f"{n}.csv", dtype={"area": str, "age": str, "sex": str, "citizenship": str})
             for n in TABLES}
    originals = {n: pd.read_parquet(tmp_path / "eval" / f"{n}.evaluation.parquet") for n in TABLES}
    for n, other in zip(TABLES, ("sex", "citizenship")):
        f = files[n]
        orig = originals[n].astype({c: str for c in ("area", "age", other)})
        merged = f.merge(orig[["area", "age", other, "original"]], on=["area", "age", other], how="outer")
        assert merged["count"].notna().all() and merged["original"].notna().all()
        v, z = merged["count"].to_numpy(), merged["original"].to_numpy()
        assert (v % 3 == 0).all()
        assert (np.abs(v - z) < 3).all() and (v[z % 3 == 0] == z[z % 3 == 0]).all()
        # additive along the flat variable: each (area, age) total is the sum of its codes
        inner = f[f[other] != "Total"].groupby(["area", "age"])["count"].sum()
        total = f[f[other] == "Total"].set_index(["area", "age"])["count"]
        assert (inner.sort_index() == total.sort_index()).all()
    # the shared area × age margin: one value in both files
    a = files["area_age_sex"].query("sex == 'Total'").set_index(["area", "age"])["count"].sort_index()
    b = files["area_age_citizenship"].query("citizenship == 'Total'").set_index(["area", "age"])["count"].sort_index()
    assert a.index.equals(b.index) and (a == b).all()

    # the release audit's memory model (issue #28) refuses it under a budget too small, before any
    # program and without writing its output
    # (this release needs well under the 32 MB floor any budget must reach: the floor is lowered
    # here to reach the release audit's own model)
    capsys.readouterr()
    monkeypatch.setattr(memory, "MIN_LIMIT", 1)
    assert _run("audit", "--release", out / "release.yaml", "--out", tmp_path / "audit.json",
                "--memory-limit", "100KB") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the release audit of" in err and "more than the limit of 100 KB" in err
    assert not (tmp_path / "audit.json").exists()
    monkeypatch.undo()
    # the release audit reads the manifest's bases: no published value is taken as exact
    assert _run("audit", "--release", out / "release.yaml", "--out", tmp_path / "audit.json") == 0
    audit = json.loads((tmp_path / "audit.json").read_text())
    summary = audit["summary"]
    assert summary["tables"] == 2 and summary["shared_cells"] > 0
    assert summary["unknown_cells"] == summary["cells"]
    assert "release audit: 2 tables" in capsys.readouterr().out


def test_release_rapid_rounding_is_refused_and_nothing_written(tmp_path: Path, capsys) -> None:
    """RAPID rounds a table's inner cells and adds up its margins: with tables sharing cells
    that are inner in one and margins in another it is not defined, so the release is refused."""
    config = _config(tmp_path)
    out = tmp_path / "release"
    assert _run("protect", "--release", config, "--method", "controlled-round", "--solution", "rapid",
                "--out", out) == 2
    err = capsys.readouterr().err
    assert "neither joint" in err and "is joint with other parameters" in err and "Traceback" not in err
    assert not out.exists()
