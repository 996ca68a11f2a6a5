"""The embedded engine reads the source and nothing else."""

from __future__ import annotations

import subprocess
import sys

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


def test_duckdb_prints_no_progress_bar_of_its_own(tmp_path) -> None:
    # tabsafe reports its own progress (quiet with --quiet); DuckDB's bar would print on a
    # terminal. Checked in a process of its own: inside pytest DuckDB leaves the bar off anyway.
    data = tmp_path / "d.parquet"
    pd.DataFrame({"a": ["x", "y"]}).to_parquet(data)
    code = (
        "import sys\n"
        "from tabsafe.engines.duckdb import DuckDBEngine\n"
        "from tabsafe.model.microdata import FileSource\n"
        "s = DuckDBEngine().open(FileSource.of(sys.argv[1]))\n"
        "print(s.run(\"SELECT current_setting('enable_progress_bar') AS x\").column(0)[0].as_py())\n"
        "try:\n"
        "    s.run('SET enable_progress_bar = true')\n"
        "    print('changed')\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__)\n"
        "s.close()\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(data)], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "InputError"]  # off, and the locked configuration keeps it off


def test_engines_are_found_by_name() -> None:
    from tabsafe.registry import engine_names, get_engine

    assert "duckdb" in engine_names()
    assert get_engine("duckdb").name == "duckdb"
    with pytest.raises(ts.InputError, match="unknown engine 'nope'"):
        get_engine("nope")
