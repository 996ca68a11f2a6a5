"""A bad engine name in a configuration file or on the command line (issue #18): one line naming
the file and the key (or the option), exit 2, nothing written, no engine started."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tabsafe.cli import main


def _evaluation(tmp_path: Path, census, engine) -> Path:
    path = tmp_path / "eval.yaml"
    path.write_text(yaml.safe_dump({
        "data": str(census.persons), "engine": engine, "tables": {"t": {"by": ["region", "sex"]}},
        "settings": [{"method": "ckm", "params": {"max_noise": 3, "variance": 2, "js": 1}}],
    }))
    return path


def _release(tmp_path: Path, census, engine) -> Path:
    path = tmp_path / "release.yaml"
    path.write_text(yaml.safe_dump({"data": str(census.persons), "engine": engine,
                                    "tables": [{"name": "t", "by": ["region", "sex"]}]}))
    return path


def _one_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert "Traceback" not in captured.err
    return lines[0]


CKM = ["--method", "ckm", "--max-noise", "3", "--variance", "2", "--js", "1"]


@pytest.mark.parametrize("engine", ["sparkle", 3, ["duckdb"]])
def test_bad_engine_in_evaluation_config(small_census, tmp_path, capsys, engine) -> None:
    cfg = _evaluation(tmp_path, small_census, engine)
    assert main(["evaluate", str(cfg), "--out", str(tmp_path / "r.html")]) == 2
    line = _one_line(capsys)
    assert "eval.yaml" in line and "'engine'" in line and "duckdb, spark" in line and repr(engine) in line
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("engine", ["sparkle", 3])
def test_bad_engine_in_release_config(small_census, tmp_path, capsys, engine) -> None:
    cfg = _release(tmp_path, small_census, engine)
    assert main(["protect", "--release", str(cfg), *CKM, "--out", str(tmp_path / "out")]) == 2
    line = _one_line(capsys)
    assert "release.yaml" in line and "'engine'" in line and "duckdb, spark" in line and repr(engine) in line
    assert not (tmp_path / "out").exists()


def test_bad_engine_option(small_census, tmp_path, capsys) -> None:
    """--engine is checked before anything is read (the file's engine is fine)."""
    cfg = _release(tmp_path, small_census, "duckdb")
    assert main(["protect", "--release", str(cfg), *CKM, "--engine", "sparkle", "--out", str(tmp_path / "out")]) == 2
    line = _one_line(capsys)
    assert "--engine" in line and "'sparkle'" in line
    assert not (tmp_path / "out").exists()
    ev = _evaluation(tmp_path, small_census, "duckdb")
    assert main(["evaluate", str(ev), "--engine", "sparkle", "--out", str(tmp_path / "r.html")]) == 2
    assert "--engine" in _one_line(capsys)
    assert not (tmp_path / "r.html").exists()
