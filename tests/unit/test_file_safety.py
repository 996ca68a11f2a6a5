"""Issue #25, files: one rule for every written path, private files private, nothing left behind.

* the demo's private files (microdata, original tables, summary with the seeds, report) are 0600
  and its releases hold no seed;
* a full disk is one line and leaves nothing (a small tmpfs when the test may mount one, and a
  file-size limit in a subprocess everywhere);
* a run killed with SIGKILL leaves only hidden temporary entries, which the next run removes;
* ``--log-json`` is taken back when the command fails, appends only to a tabsafe log;
* ``--force`` replaces an output, never an input;
* the progress line is cleared before any other output.
"""

from __future__ import annotations

import io
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tabsafe.cli import main


def run(args: list[object], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_demo_writes_every_private_file_private(tmp_path: Path, capsys, monkeypatch) -> None:
    """``tabsafe demo`` on a small census. The report of every method side by side (minutes) is
    written by :func:`tabsafe.evaluate.demo.write_demo_report`, whose mode the demo report test
    checks; here it is an empty private page written the same way."""
    import tabsafe.evaluate.demo as demo

    def page(microdata: object, census_dir: Path, folder: Path, **kwargs: object) -> Path:
        path = Path(folder) / "report.html"
        path.write_text("<html></html>")
        path.chmod(0o600)
        return path

    monkeypatch.setattr(demo, "write_demo_report", page)
    out = tmp_path / "demo"
    code, stdout, err = run(["demo", "--persons", 1500, "--seed", 2026, "--out", out], capsys)
    assert code == 0, err
    modes = {str(p.relative_to(out)): p.stat().st_mode & 0o777 for p in out.rglob("*") if p.is_file()}
    private = {p for p in modes if p.endswith((".parquet", "summary.json", "report.html"))}
    assert {"census/persons.parquet", "census/households.parquet", "summary.json", "report.html"} <= private
    assert all(modes[p] == 0o600 for p in private), {p: oct(modes[p]) for p in private}
    summary = json.loads((out / "summary.json").read_text())
    seed = summary["protection_seed"]
    assert seed != 2026 and seed.bit_length() > 40  # drawn, not the census seed anyone reads in the command
    public = "".join(p.read_text() for p in (out / "releases").iterdir()) + stdout
    assert str(seed) not in public and "2026" not in public
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary folder left


def test_a_full_disk_is_one_line_and_leaves_nothing(small_census, tmp_path: Path) -> None:
    """``tabulate`` of a table larger than the space left: a file-size limit (EFBIG) in a
    subprocess everywhere, a 256 KB tmpfs (ENOSPC, OSError 28) where the test may mount one."""
    targets = [("limit", tmp_path / "limited")]
    small = tmp_path / "small"
    small.mkdir()
    mounted = os.geteuid() == 0 and subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(small)],
                                                   capture_output=True).returncode == 0
    if mounted:
        targets.append(("tmpfs", small))
    try:
        for kind, folder in targets:
            folder.mkdir(exist_ok=True)
            limit = (lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))) if kind == "limit" \
                else None
            proc = subprocess.run([sys.executable, "-m", "tabsafe.cli", "tabulate", str(small_census.persons), "--by",
                                   "small_area,sex,age", "--out", str(folder / "t.csv"), "--log-json",
                                   str(folder / "log.jsonl")],
                                  capture_output=True, text=True, preexec_fn=limit)
            assert proc.returncode == 1, (kind, proc.stderr)
            assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
            expected = "no space left on the device" if kind == "tmpfs" else "file too large"
            assert expected in proc.stderr and "nothing was written" in proc.stderr, proc.stderr
            assert list(folder.iterdir()) == [], (kind, list(folder.iterdir()))  # not even the log
    finally:
        if mounted:
            subprocess.run(["umount", str(small)], check=True)


def _killed(args: list[str], cwd: Path, until: str) -> None:
    """Start ``tabsafe ARGS`` and SIGKILL it as soon as ``until`` appears in its ``--log-json``."""
    log = cwd / "kill.log.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "tabsafe.cli", *args, "--log-json", str(log)], cwd=cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(6000):  # a budget of polls, not a clock: the run is killed at its own pace
            if proc.poll() is not None or (log.exists() and until in log.read_text()):
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the command ended before it could be killed"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    log.unlink(missing_ok=True)


def test_sigkill_leftovers_are_hidden_and_cleaned_by_the_next_run(small_census, tmp_path: Path, capsys,
                                                                  monkeypatch) -> None:
    import yaml

    (tmp_path / "release.yaml").write_text(yaml.safe_dump({
        "data": str(small_census.persons),
        "hierarchies": {"area": str(small_census.directory / "hierarchies" / "area.hrc")},
        "tables": [{"name": "area_sex", "by": ["area", "sex"]}, {"name": "area_age", "by": ["area", "age"]}]}))
    args = ["protect", "--release", "release.yaml", "--method", "controlled-round", "--base", "3", "--out", "pub"]
    _killed(args, tmp_path, '"what": "solver"')
    left = sorted(p.name for p in tmp_path.iterdir() if p.name not in {"release.yaml"})
    assert left and all(n.startswith(".pub.tabsafe-") for n in left), left  # no empty pub/ folder
    monkeypatch.chdir(tmp_path)
    code, _, err = run([*args, "--quiet"], capsys)
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pub", "release.yaml"]  # the leftover is gone
    # the demo: killed while it tabulates (it has minutes of work left), it leaves its hidden
    # temporary folder; the next command writing that folder removes it
    _killed(["demo", "--persons", "2000", "--out", "demo"], tmp_path, '"what": "tabulation"')
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".demo.tabsafe-")]
    assert not (tmp_path / "demo").exists()
    code, _, err = run(["synth", "--persons", "500", "--out", "demo"], capsys)
    assert code == 0, err
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_the_log_is_taken_back_when_the_command_fails(small_census, tmp_path: Path, capsys) -> None:
    log = tmp_path / "log.jsonl"
    ok = ["tabulate", small_census.persons, "--by", "sex", "--log-json", log]
    assert run([*ok, "--out", tmp_path / "a.csv"], capsys)[0] == 0
    kept = log.read_text()
    assert kept and all(json.loads(line)["what"] for line in kept.splitlines())
    # a failing command (an unknown variable) adds nothing to an existing log, makes no new one
    assert run(["tabulate", small_census.persons, "--by", "nosuch", "--log-json", log, "--out", tmp_path / "b.csv"],
               capsys)[0] == 2
    assert log.read_text() == kept
    fresh = tmp_path / "fresh.jsonl"
    assert run(["tabulate", small_census.persons, "--by", "nosuch", "--log-json", fresh, "--out", tmp_path / "c.csv"],
               capsys)[0] == 2
    assert not fresh.exists() and not (tmp_path / "c.csv").exists()
    # a later success appends to the log
    assert run([*ok, "--out", tmp_path / "d.csv"], capsys)[0] == 0
    assert log.read_text().startswith(kept) and len(log.read_text()) > len(kept)


def test_force_replaces_an_output_never_an_input(small_census, tmp_path: Path, capsys) -> None:
    out = tmp_path / "t.csv"
    base = ["tabulate", small_census.persons, "--by", "sex"]
    assert run([*base, "--out", out], capsys)[0] == 0
    first = out.read_bytes()
    out.write_text("the user's edit\n")
    code, _, err = run([*base, "--out", out], capsys)
    assert code == 2 and "give --force" in err and out.read_text() == "the user's edit\n"
    assert run([*base, "--out", out, "--force"], capsys)[0] == 0
    assert out.read_bytes() == first
    meta = small_census.meta.read_bytes()
    code, _, err = run([*base, "--out", small_census.meta, "--force"], capsys)
    assert code == 2 and "input" in err and small_census.meta.read_bytes() == meta


def test_the_progress_line_is_cleared_before_other_output() -> None:
    from tabsafe import progress

    screen = io.StringIO()
    terminal = progress.Terminal(screen)
    printed = io.StringIO()
    real = sys.stdout
    sys.stdout = printed
    try:
        with progress.clearing(terminal), progress.reporting(terminal):
            progress.report("solver", done=1, total=4)
            print("summary line")
            assert sys.stdout is not printed
    finally:
        sys.stdout = real
    shown = screen.getvalue()
    # the line was drawn, then blanked out (spaces, carriage return) before the summary was printed
    assert "solver" in shown and shown.endswith("\r") and shown.rstrip("\r ").endswith("4/4 ") is False
    assert printed.getvalue() == "summary line\n"
    drawn = shown.index("solver")
    assert shown.index("\r" + " " * 10, drawn) > drawn


def test_synth_never_deletes_a_users_file_in_its_own_folders(tmp_path: Path, capsys) -> None:
    mine = tmp_path / "mine"
    assert run(["synth", "--persons", 300, "--out", mine], capsys)[0] == 0
    (mine / "hierarchies" / "my_regions.hrc").write_text("R1\n@R1A001\n")
    code, _, err = run(["synth", "--persons", 300, "--out", mine], capsys)
    assert code == 2 and "my_regions.hrc" in err and err.count("\n") == 1
    assert (mine / "hierarchies" / "my_regions.hrc").read_text() == "R1\n@R1A001\n"
    (mine / "hierarchies" / "my_regions.hrc").unlink()
    assert run(["synth", "--persons", 300, "--out", mine], capsys)[0] == 0  # its own earlier output: replaced
