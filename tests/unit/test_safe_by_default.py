"""Issue #12, "safe by default": each case a user hit, as a test (others: test_cli_job.py,
test_filter.py, test_engine.py, test_ptable_errors.py, test_suppression_method.py, rounding tests)."""

from __future__ import annotations

import pandas as pd
import pytest

from tabsafe.cli import main


def run(args: list[object], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("where", [".", "..", "mine"])
def test_synth_never_deletes_a_folder_it_did_not_write(tmp_path, capsys, monkeypatch, where) -> None:
    work = tmp_path / "work"
    (work / "mine").mkdir(parents=True)
    (work / "notes.txt").write_text("keep me")
    (work / "mine" / "thesis.tex").write_text("keep me too")
    (tmp_path / "sibling.txt").write_text("and me")
    monkeypatch.chdir(work)
    code, _, err = run(["synth", "--persons", "100", "--out", where], capsys)
    assert code == 2 and err.count("\n") == 1 and "did not write" in err
    assert (work / "notes.txt").read_text() == "keep me"
    assert (work / "mine" / "thesis.tex").read_text() == "keep me too"
    assert (tmp_path / "sibling.txt").exists()


def test_synth_and_demo_refuse_a_file_as_their_folder(tmp_path, capsys) -> None:
    target = tmp_path / "afile.txt"
    target.write_text("data")
    for cmd in (["synth", "--persons", "100"], ["demo", "--persons", "100"]):
        code, _, err = run([*cmd, "--out", target], capsys)
        assert code == 2 and "is a file, not a folder" in err and err.count("\n") == 1
    assert target.read_text() == "data"


def test_an_interrupted_demo_leaves_nothing(tmp_path, capsys, monkeypatch) -> None:
    import tabsafe.synth

    real = tabsafe.synth.synth_census

    def interrupted(*args: object, **kwargs: object) -> object:
        real(*args, **kwargs)  # the census is written, then the user presses Ctrl-C
        raise KeyboardInterrupt

    monkeypatch.setattr(tabsafe.synth, "synth_census", interrupted)
    out = tmp_path / "demo-output"
    code, _, err = run(["demo", "--persons", "200", "--out", out], capsys)
    assert code == 130 and err.strip() == "tabsafe: interrupted; nothing was written"
    assert not out.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [["protect", "--method", "ckm"], ["synth"], ["demo"], ["keys"]])
def test_negative_seeds_are_one_line_errors(small_census, tmp_path, capsys, command) -> None:
    args = [*command, "--seed", "-5", "--out", tmp_path / "x"]
    if command[0] in {"protect", "keys"}:
        args.insert(1, small_census.persons)
    if command[0] == "protect":
        args += ["--by", "sex", "--max-noise", "3", "--variance", "2"]
    code, _, err = run(args, capsys)
    assert code == 2 and err.count("\n") == 1 and "seed" in err and "Traceback" not in err


def test_sums_are_exact_and_the_same_every_run(tmp_path, capsys) -> None:
    data = tmp_path / "d.parquet"
    # values whose float sum depends on the order of summation
    values = [407597724.47, 0.01, 0.1, 0.2, 1e-2, 12345678.91] * 2000
    pd.DataFrame({"a": ["x", "y"] * 6000, "income": values}).to_parquet(data)
    outs = []
    for i in range(3):
        out = tmp_path / f"t{i}.csv"
        assert run(["tabulate", data, "--by", "a", "--sum", "income", "--out", out], capsys)[0] == 0
        outs.append(out.read_text())
    assert outs[0] == outs[1] == outs[2]
    total = next(line for line in outs[0].splitlines() if line.startswith('"Total"'))
    exact = sum(round(v * 100) for v in values)  # cents, exactly
    assert total.split(",")[-1] == f"{exact // 100}.{exact % 100:02d}"


@pytest.mark.parametrize("bad", ["nan", "inf", "-inf"])
def test_non_finite_counts_are_one_line_errors(tmp_path, capsys, bad) -> None:
    cells = tmp_path / "cells.csv"
    cells.write_text(f"area,n\nA,3\nB,{bad}\n")
    out = tmp_path / "t.csv"
    code, _, err = run(["tabulate", "--table", cells, "--count", "n", "--by", "area", "--out", out], capsys)
    assert code == 2 and err.count("\n") == 1 and "not finite numbers" in err and not out.exists()


def test_ctrl_c_in_any_command_is_one_line(monkeypatch, capsys) -> None:
    import tabsafe.cli.tabulate as cmd

    def stop(args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(cmd, "run", stop)
    code, _, err = run(["tabulate", "x.parquet", "--by", "a", "--out", "t.csv"], capsys)
    assert code == 130 and err.count("\n") == 1 and "Traceback" not in err


def test_the_console_script_imports_nothing_heavy() -> None:
    """Ctrl-C in the first moment of a command used to land in imports (a long traceback); the
    command's entry imports only argparse and tabsafe.errors now."""
    import subprocess
    import sys

    code = ("import sys, tabsafe.cli; heavy = {'numpy', 'pandas', 'pyarrow', 'duckdb', 'scipy', 'yaml'} & "
            "set(sys.modules); print(sorted(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
