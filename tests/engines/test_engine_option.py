"""``engine:`` in configuration files (issue #18): the evaluation config (``tabsafe evaluate``) and
the release config (``tabsafe protect --release``) tabulate with the engine they name, the
command line's ``--engine`` wins over the file, and DuckDB and Spark give the same published
tables byte for byte.

One local Spark session for the module (JVM start is slow); ``engine: spark`` in a file finds it
as the process's active session. Which engine really tabulated is read from each table's
``meta["engine"]`` (a spy around :func:`tabsafe.tabulation.tabulate`, the real engines run).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import tabsafe.tabulation
from tabsafe.cli import main


@pytest.fixture(scope="module")
def spark():
    from tabsafe.engines.spark import local_session

    return local_session(conf={"spark.driver.memory": "2g"})


@pytest.fixture()
def engines_used(monkeypatch):
    """The engine of every table tabulated during the test."""
    used: list[str] = []
    real = tabsafe.tabulation.tabulate

    def spy(*args, **kwargs):
        table = real(*args, **kwargs)
        used.append(table.meta["engine"])
        return table

    monkeypatch.setattr(tabsafe.tabulation, "tabulate", spy)
    return used


def _evaluation(folder: Path, census, engine: str | None) -> Path:
    config = {
        "data": str(census.persons),
        "seed": 5,
        "tables": {
            "area_age_sex": {"by": ["area", "age", "sex"], "rows": "area",
                             "hierarchies": {"area": str(census.directory / "hierarchies" / "area.hrc")}},
            "employed": {"by": ["region", "education"], "where": "activity = EMP and age_year >= 30"},
        },
        "settings": [
            {"method": "ckm", "params": {"max_noise": 3, "variance": 2, "js": 1}},
            {"label": "ckm income", "method": "ckm",
             "params": {"max_noise": 3, "variance": 2, "js": 1, "magnitude": "income", "flex_point": 5000.0}},
        ],
    }
    if engine is not None:
        config["engine"] = engine
    folder.mkdir()
    path = folder / "eval.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def test_evaluation_config_engine(spark, small_census, tmp_path, engines_used, capsys) -> None:
    from tabsafe.evaluate.config import load_config
    from tabsafe.evaluate.runner import run_evaluation

    releases = {}
    for engine in ("duckdb", "spark"):
        engines_used.clear()
        config = load_config(_evaluation(tmp_path / engine, small_census, engine))
        assert config.engine == engine
        evaluation = run_evaluation(config)
        assert set(engines_used) == {engine}, engines_used
        releases[engine] = {(r.table, r.setting): r.release_bytes for r in evaluation.results}
        assert evaluation.config["engine"] == engine
    assert len(releases["spark"]) == 4
    assert releases["duckdb"] == releases["spark"]  # every published table, byte for byte
    # the command line wins over the file
    engines_used.clear()
    code = main(["evaluate", str(tmp_path / "spark" / "eval.yaml"), "--engine", "duckdb",
                 "--out", str(tmp_path / "r.html")])
    assert code == 0, capsys.readouterr().err
    assert set(engines_used) == {"duckdb"}


def _release(folder: Path, census, engine: str | None) -> Path:
    config = {
        "data": str(census.persons),
        "hierarchies": {"area": str(census.directory / "hierarchies" / "area.hrc")},
        "tables": [{"name": "area_sex", "by": ["area", "sex"]},
                   {"name": "area_age", "by": ["area", "age"], "where": "activity != STU"}],
    }
    if engine is not None:
        config["engine"] = engine
    folder.mkdir()
    path = folder / "release.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _protect(config: Path, out: Path, *extra: str) -> int:
    return main(["protect", "--release", str(config), "--method", "ckm", "--max-noise", "3", "--variance", "2",
                 "--js", "1", "--out", str(out), "--quiet", *extra])


def test_release_config_engine(spark, small_census, tmp_path, engines_used, capsys) -> None:
    written = {}
    for engine in ("duckdb", "spark"):
        engines_used.clear()
        out = tmp_path / f"out-{engine}"
        assert _protect(_release(tmp_path / engine, small_census, engine), out) == 0, capsys.readouterr().err
        assert engines_used == [engine, engine]
        written[engine] = {p.name: p.read_bytes() for p in out.iterdir() if p.suffix == ".csv"}
    assert sorted(written["spark"]) == ["area_age.csv", "area_sex.csv"]
    assert written["duckdb"] == written["spark"]
    # --engine wins over the file's engine
    engines_used.clear()
    assert _protect(tmp_path / "spark" / "release.yaml", tmp_path / "out-cli", "--engine", "duckdb") == 0
    assert engines_used == ["duckdb", "duckdb"]


def test_audit_engine(spark, small_census, tmp_path, monkeypatch, capsys) -> None:
    """``tabsafe audit SPEC --engine``: the counts are read by the engine named, and the slivers
    (printed and written) are the same on both."""
    import tabsafe.engines.planner as planner

    used: list[str] = []
    real = planner.grouped_counts

    def spy(engine, *args, **kwargs):
        used.append(engine.name)
        return real(engine, *args, **kwargs)

    monkeypatch.setattr(planner, "grouped_counts", spy)
    # user-defined areas: an area's small areas and one of the next area's (seed 001 §1)
    from tabsafe.model.hierarchy import Hierarchy

    hrc = Hierarchy.from_hrc(small_census.directory / "hierarchies" / "small_area.hrc")
    areas = [c for c in hrc.order if hrc.depth(c) == 2][:12]
    small = {a: list(hrc.children(a)) for a in areas}
    user = {f"U{a}": small[a] + small[areas[(i + 1) % len(areas)]][:1] for i, a in enumerate(areas)}
    spec = {"data": str(small_census.persons), "meta": str(small_census.meta), "threshold": 5, "max_order": 2,
            "derived": {"area": {"from": "small_area", "codes": small},
                        "user_area": {"from": "small_area", "codes": user}},
            "tables": [{"name": "area", "by": ["area", "sex"]},
                       {"name": "user area", "by": ["user_area", "sex"]},
                       {"name": "employed", "by": ["user_area"], "where": "activity = EMP"}]}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    printed, written = {}, {}
    for engine in ("duckdb", "spark"):
        out = tmp_path / f"{engine}.json"
        code = main(["audit", str(tmp_path / "spec.yaml"), "--engine", engine, "--zeros", "--all", "--out", str(out)])
        stdout, err = capsys.readouterr()
        assert code == 0, err
        printed[engine], written[engine] = stdout.replace(str(out), "OUT"), out.read_bytes()
    assert used == ["duckdb", "spark"]
    slivers = json.loads(written["spark"])["slivers"]
    assert any(s["small"] for s in slivers) and written["duckdb"] == written["spark"]
    assert printed["duckdb"] == printed["spark"]
