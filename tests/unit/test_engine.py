"""The embedded engine reads the source and nothing else."""

from __future__ import annotations

import pandas as pd
import pytest

import tabsafe as ts
from tabsafe.engines.duckdb import DuckDBEngine
from tabsafe.model.microdata import FileSource


def test_a_session_reads_only_its_source(tmp_path) -> None:
    data = tmp_path / "d.parquet"
    other = tmp_path / "secret.csv"
    pd.DataFrame({"a": ["x", "y"]}).to_parquet(data)
    other.write_text("password\nhunter2\n")
    session = DuckDBEngine().open(FileSource.of(data))
    try:
        assert session.run("SELECT count(*) AS n FROM src").column(0)[0].as_py() == 2
        for sql in [
            f"SELECT * FROM read_csv('{other}')",
            "SELECT * FROM read_text('/etc/passwd')",
            "SELECT * FROM read_csv('https://example.com/x.csv')",
            "INSTALL httpfs",
            f"COPY (SELECT 1) TO '{tmp_path / 'leak.csv'}'",
            "SET enable_external_access = true",
        ]:
            with pytest.raises(ts.InputError):
                session.run(sql)
        assert not (tmp_path / "leak.csv").exists()
    finally:
        session.close()


def test_engines_are_found_by_name() -> None:
    from tabsafe.registry import engine_names, get_engine

    assert "duckdb" in engine_names()
    assert get_engine("duckdb").name == "duckdb"
    with pytest.raises(ts.InputError, match="unknown engine 'nope'"):
        get_engine("nope")
