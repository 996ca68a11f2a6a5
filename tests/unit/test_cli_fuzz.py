"""Every command driven with random option combinations drawn from its own help (hypothesis):
no traceback, exit 0 only with every named output complete, a one-line error otherwise and no
output left behind (issue #12)."""

from __future__ import annotations

import argparse
import contextlib
import io
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tabsafe.cli import COMMANDS, build_parser, main

#: Commands whose run starts a server or builds a large census are driven elsewhere.
SKIP = {"serve", "demo"}
#: Options that name files the command writes.
OUTPUT_OPTIONS = {"--out", "--report", "--evaluation", "--summary", "--plot", "--log-json"}
#: Options that name outputs of one command only (a folder among them).
COMMAND_OUTPUTS = {"evaluate": {"--json", "--csv", "--releases"}}


def _actions(command: str, extra: list[str]) -> list[argparse.Action]:
    parser = build_parser([command, *extra])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [a for a in sub.choices[command]._actions if a.option_strings and a.dest != "help"]


def _values(small: object, tmp: Path) -> st.SearchStrategy[str]:
    persons = str(small.persons)  # type: ignore[attr-defined]
    return st.sampled_from([
        "0", "1", "3", "-1", "2.5", "1e9", "nan", "", "x", "area", "sex", "age", "area,sex", "area,,sex", "income",
        "rkey", persons, str(tmp / "missing.parquet"), "sex = 1", "1=1; DROP TABLE src", "none", "true",
        "random", "fast", "optimal", "controlled", "tau-argus", "ckm", "round", "suppress", "4GB", "10KB",
    ])


def _served(census: object, tmp: Path) -> Path:
    """A data folder of its own for the table builder's key store (the census fixture is shared)."""
    import shutil

    folder = tmp / "served"
    folder.mkdir()
    for name in ("persons.parquet", "meta.yaml"):
        shutil.copy(Path(census.directory) / name, folder / name)  # type: ignore[attr-defined]
    from tabsafe.service.store import Store

    Store(folder / "service.sqlite")  # keys-admin lists, audits and verifies an existing store only
    return folder


def _outputs(argv: list[str], options: set[str] = OUTPUT_OPTIONS) -> list[Path]:
    """The files the command line names as outputs (an option given twice: its last value)."""
    out: dict[str, Path] = {}
    for flag, value in zip(argv, argv[1:]):
        if flag in options and value:
            out[flag] = Path(value)
    return list(out.values())


def _job(tmp: Path) -> Path:
    """A tau-ARGUS batch file that runs (tabsafe argus run)."""
    job = tmp / "job.arb"
    job.write_text("// nothing to do but stop\n<GOINTERACTIVE>\n")
    return job


@pytest.mark.parametrize("command", sorted(set(COMMANDS) - SKIP))
def test_random_option_combinations(command: str, small_census, tmp_path_factory) -> None:
    tmp = tmp_path_factory.mktemp(f"fuzz-{command}")
    persons = str(small_census.persons)
    config = tmp / "evaluate.yaml"
    config.write_text(f"data: {persons}\ntables: {{t: [sex]}}\nsettings: [{{method: ckm, params: {{max_noise: 3, "
                      "variance: 2}}]\n")
    # a working command line; drawn options are added to it (and may override its own)
    base = {
        "tabulate": [persons, "--by", "sex"],
        "protect": [persons, "--by", "sex", "--method", "ckm", "--max-noise", "3", "--variance", "2"],
        "keys": [persons, "--seed", "1", "--column", "k2"],
        "synth": ["--persons", "300"],
        "ptable": ["--max-noise", "3", "--variance", "2"],
        "risk": [persons, "--by", "sex", "--min-freq", "3"],
        "swap": [persons, "--geography", "region,area,small_area", "--risk-vars", "sex,age", "--k", "3",
                 "--swaprate", "0.05", "--seed", "1"],
        "keys-admin": ["--data", str(_served(small_census, tmp)), "list"],
        "measure": ["info-gain", "--method", "ckm", "--max-noise", "3", "--variance", "2"],
        "evaluate": [str(config)],
        "argus": ["run", str(_job(tmp))],
    }.get(command, [])
    actions = _actions(command, base)
    flags = [a for a in actions if a.option_strings[-1] != "--log-json"]
    output_options = OUTPUT_OPTIONS | COMMAND_OUTPUTS.get(command, set())

    @settings(max_examples=25, suppress_health_check=list(HealthCheck))
    @given(st.lists(st.tuples(st.sampled_from(flags), _values(small_census, tmp)), max_size=6),
           st.sampled_from([".csv", ".parquet", ".json", ".txt", ""]))
    def check(chosen: list[tuple[argparse.Action, str]], suffix: str) -> None:
        argv = [command, *base]
        for i, (action, value) in enumerate(chosen):
            flag = action.option_strings[-1]
            if flag in output_options:
                value = str(tmp / f"o{len(argv)}_{i}{suffix}")
            argv.append(flag)
            if action.nargs != 0:
                argv.append(value)
        if "--out" not in argv and any(a.option_strings[-1] == "--out" for a in actions):
            argv += ["--out", str(tmp / f"main{len(argv)}{suffix}")]
        outputs = _outputs(argv, output_options)
        before = {p: p.exists() for p in outputs}
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main(argv)
        message = err.getvalue()
        if code == 0:
            successes.append(argv)
            for p in outputs:
                assert p.exists() and p.stat().st_size > 0, f"{argv}: exit 0 but {p} missing or empty"
        else:
            assert message.count("\n") <= 1 and "Traceback" not in message, f"{argv}: {message}"
            for p in outputs:
                assert p.exists() == before[p], f"{argv}: failed but left {p}"
        for p in outputs:
            if p.is_dir():
                shutil.rmtree(p)
            elif p.exists():
                p.unlink()
        assert not list(tmp.glob(".*.tmp")), f"{argv}: a temporary file was left behind"

    successes.clear()
    check()
    # the draws reach working command lines too, not only errors
    assert successes or command in NO_SUCCESS_EXPECTED, f"{command}: no drawn command line ran"


successes: list[list[str]] = []
#: Commands that need an input file the draws cannot name.
NO_SUCCESS_EXPECTED = {"audit"}
