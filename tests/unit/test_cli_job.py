"""What every command does besides its job: feedback, memory budget, seeds, outputs checked first."""

from __future__ import annotations

import io
import json
import os
import stat

import pytest

from tabsafe import progress
from tabsafe.cli import main


def run(args: list[object], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_log_json_is_one_object_per_line_and_quiet_prints_nothing(small_census, tmp_path, capsys) -> None:
    log = tmp_path / "log.jsonl"
    code, out, err = run(["tabulate", small_census.persons, "--by", "area,sex", "--out", tmp_path / "t.csv",
                          "--log-json", log, "--quiet"], capsys)
    assert code == 0 and out == "" and err == ""
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert events and all({"t", "what"} <= set(e) for e in events)
    assert {e["what"] for e in events} >= {"tabulation"}


def test_the_solvers_report_their_phases_in_the_json_log(small_census, tmp_path, capsys) -> None:
    """Progress from inside the suppression (issue #28): the elimination's candidates done out of
    all, the audit-and-repair rounds, the interval audit's cells and the optimal mode's rounds,
    each in --log-json; and no original value in them (cells and counts of cells only)."""
    log = tmp_path / "log.jsonl"
    code, _, err = run(["protect", small_census.persons, "--by", "area,sex,citizenship", "--hierarchy",
                        f"area={small_census.directory / 'hierarchies' / 'area.hrc'}", "--method", "suppress",
                        "--mode", "optimal", "--work-limit", "3", "--out", tmp_path / "r.csv", "--log-json", log,
                        "--quiet"], capsys)
    assert code == 0, err
    events = [json.loads(line) for line in log.read_text().splitlines()]
    phases = [e.get("phase") for e in events if e["what"] == "suppression"]
    assert {"elimination", "audit and repair", "neighbourhood search"} <= set(phases), phases
    elimination = [e for e in events if e.get("phase") == "elimination"]
    assert elimination[0]["done"] == 0 and all(e["done"] < e["total"] for e in elimination)
    audits = [e for e in events if e["what"] == "interval audit"]
    assert audits and all(0 <= e["done"] < e["total"] for e in audits)
    rounds = [e["round"] for e in events if e.get("phase") == "neighbourhood search"]
    assert rounds == sorted(rounds) and max(rounds) <= 3
    private = {"objective", "gap", "lower_bound", "value", "count"}
    assert not any(private & set(e) for e in events)


def test_the_hypercube_mode_reports_its_moves_and_its_publish_back(small_census, tmp_path, capsys) -> None:
    """Issue #28: the hypercube mode's two phases in --log-json, each from 0 to its end."""
    log = tmp_path / "log.jsonl"
    code, _, err = run(["protect", small_census.persons, "--by", "area,sex,age", "--method", "suppress",
                        "--mode", "hypercube", "--out", tmp_path / "r.csv", "--log-json", log, "--quiet"], capsys)
    assert code == 0, err
    events = [json.loads(line) for line in log.read_text().splitlines()]
    for phase in ("hypercube moves", "hypercube publish-back"):
        seen = [e for e in events if e.get("phase") == phase]
        assert seen and seen[0]["done"] == 0 and all(0 <= e["done"] <= e["total"] for e in seen), phase
    assert [e for e in events if e.get("phase") == "hypercube publish-back"][-1]["done"] > 0


def test_terminal_display_redraws_one_line_and_clears_it() -> None:
    stream = io.StringIO()
    term = progress.Terminal(stream)
    with progress.reporting(term):
        progress.report("solver", done=3, total=10, objective=12.5)
    text = stream.getvalue()
    assert "solver: [######..............] 3/10 objective 12.5" in text and text.endswith("\r")
    assert "\n" not in text


def test_a_job_over_the_memory_budget_is_refused_before_it_starts(small_census, tmp_path, capsys) -> None:
    out = tmp_path / "r.csv"
    census = tmp_path / "big"
    code, _, err = run(["synth", "--persons", "100000000", "--out", census, "--memory-limit", "1GB"], capsys)
    assert code == 2 and err.count("\n") == 1 and "more than the limit of 1.0 GB" in err and "--memory-limit" in err
    assert not census.exists() and list(tmp_path.iterdir()) == []
    # a limit below what any job needs is a typo, refused as such (issue #25: 1KB was accepted)
    code, _, err = run(["protect", small_census.persons, "--by", "area,age,sex", "--method", "ckm", "--max-noise", "3",
                        "--variance", "2", "--out", out, "--memory-limit", "10KB"], capsys)
    assert code == 2 and err.count("\n") == 1 and "less than any job needs" in err
    assert not out.exists()


@pytest.mark.parametrize("method", [["suppress"], ["controlled-round", "--base", "3"]])
def test_a_solver_job_over_the_memory_budget_is_refused_with_its_estimate(small_census, tmp_path, capsys,
                                                                         method) -> None:
    """The memory models of suppression and controlled rounding (issue #28) count the grid, the
    relations, the elimination's basis or the integer program, not a few bytes per stored cell:
    small area × age × sex needs hundreds of MB, and 40 MB (above the floor every job needs)
    refuses it before any work, in one line with the estimate."""
    out = tmp_path / "r.csv"
    code, _, err = run(["protect", small_census.persons, "--by", "small_area,age,sex", "--method", *method,
                        "--out", out, "--memory-limit", "40MB"], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert f"method {method[0]!r}" in err and "would need about" in err and "more than the limit of 40.0 MB" in err
    assert not out.exists()


def test_a_random_method_without_seed_draws_and_records_one_that_reproduces_the_release() -> None:
    from tabsafe.pipeline import Chain
    from tabsafe.testing.contract import example_table
    from tests.contract.test_contract_catches import Noise

    chain = Chain((Noise(),))
    table = example_table(Noise())
    first = chain.protect(table, seeds=[None])
    assert isinstance(first.report.seed, int)
    again = chain.protect(table, seeds=[first.report.seed])
    assert (first.release.table.column("count") == again.release.table.column("count")).all()


def test_outputs_are_checked_before_any_work_and_inputs_never_overwritten(small_census, tmp_path, capsys) -> None:
    data = tmp_path / "in.csv"
    data.write_text("sex,n\n1,3\n2,4\n")
    before = data.read_bytes()
    code, _, err = run(["tabulate", "--table", data, "--count", "n", "--by", "sex", "--out", data], capsys)
    assert code == 2 and "input of this command" in err and data.read_bytes() == before
    # two outputs on one path: refused, nothing written
    rel = tmp_path / "r.csv"
    code, _, err = run(["protect", small_census.persons, "--by", "sex", "--method", "ckm", "--max-noise", "3",
                        "--variance", "2", "--out", rel, "--evaluation", rel], capsys)
    assert code == 2 and "another output" in err and not rel.exists()
    # an output in a missing folder fails before the release is written
    code, _, err = run(["protect", small_census.persons, "--by", "sex", "--method", "ckm", "--max-noise", "3",
                        "--variance", "2", "--out", rel, "--report", tmp_path / "nodir" / "r.json"], capsys)
    assert code == 2 and "does not exist" in err and not rel.exists()


def test_release_files_follow_the_umask_and_evaluation_files_are_private(small_census, tmp_path, capsys) -> None:
    old = os.umask(0o022)
    try:
        rel, ev = tmp_path / "r.csv", tmp_path / "e.parquet"
        code, _, _ = run(["protect", small_census.persons, "--by", "sex", "--method", "ckm", "--max-noise", "3",
                          "--variance", "2", "--out", rel, "--evaluation", ev], capsys)
    finally:
        os.umask(old)
    assert code == 0
    assert stat.S_IMODE(rel.stat().st_mode) == 0o644
    assert stat.S_IMODE(ev.stat().st_mode) == 0o600
    header = rel.read_text().splitlines()[0]
    assert "original" not in header and "ckey" not in header


@pytest.mark.parametrize("bad", [["--by", "area,,sex"], ["--by", "sex", "--max-cells", "-1"],
                                 ["--by", "sex", "--sum", "sex"], ["--by", "sex", "--sum", "area"]])
def test_wrong_answers_without_an_error_are_errors(small_census, tmp_path, capsys, bad) -> None:
    out = tmp_path / "t.csv"
    code, _, err = run(["tabulate", small_census.persons, *bad, "--out", out], capsys)
    assert code == 2 and err.count("\n") == 1 and not out.exists()


def test_a_file_a_method_reads_is_an_input_too(small_census, tmp_path, capsys) -> None:
    ptable = tmp_path / "p.csv"
    code, _, _ = run(["ptable", "--max-noise", "3", "--variance", "2", "--out", ptable], capsys)
    assert code == 0
    before = ptable.read_bytes()
    code, _, err = run(["protect", small_census.persons, "--by", "sex", "--method", "ckm", "--ptable", ptable,
                        "--out", ptable], capsys)
    assert code == 2 and "input of this command" in err and ptable.read_bytes() == before
