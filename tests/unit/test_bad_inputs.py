"""Issue #25, "every failure one line": a battery of bad inputs across every command.

Each case runs ``tabsafe`` in process on a decoy tree (a census, a published release, a user's own
files, files that are links to secrets) and must: exit non-zero, print exactly one line on stderr
(``tabsafe…: error: …``, no traceback, no secret's content), print nothing on stdout, and leave
the tree exactly as it was (sha256 of every file and link, and no new entry: no partial output,
no temporary file). The cases are generated from tables — one base command line per command and
the bad values each option can take — plus the cases the issue lists by name.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tabsafe.cli import main

SECRET = "root:*:20228:0:99999:7:::"

# ------------------------------------------------------------------ the tree


def _tree(root: Path) -> None:
    """The decoy tree every case runs in (``root`` is the working folder)."""
    from tabsafe.synth import synth_census

    synth_census(2_000, 3, root / "census")
    (root / "census" / "hierarchies").joinpath("area.hrc").chmod(0o644)
    (root / "secret.txt").write_text("\n".join([SECRET] * 5) + "\n")
    (root / "evil.hrc").symlink_to(root / "secret.txt")  # a hierarchy that is a link to a secret
    (root / "shadow.csv").symlink_to(root / "secret.txt")  # data that is a link to a secret
    (root / "rag.csv").write_text("a,b\nroot:x:0:0,secretpass,extra\n")  # a ragged CSV quoting a secret
    (root / "empty.csv").write_text("")
    (root / "header.csv").write_text("area,sex,n\n")
    cells = pd.DataFrame({"area": ["R1A01", "R1A02", "R2A01"], "sex": ["1", "2", "1"], "n": [3, 4, 5]})
    (root / "decoy").mkdir()
    cells.to_csv(root / "decoy" / "data.csv", index=False)
    (root / "decoy" / "data.summary.json").write_text('{"mine": true}\n')
    (root / "decoy" / "notes.txt").write_text("keep me\n")
    pd.DataFrame({"area": ["R1A01"], "sex": ["1"], "n": ["three"]}).to_csv(root / "text_counts.csv", index=False)
    (root / "mine" / "hierarchies").mkdir(parents=True)
    (root / "mine" / "hierarchies" / "my_regions.hrc").write_text("R1\n@R1A01\n")
    (root / "bad.yaml").write_text("tables: [\n")
    (root / "list.yaml").write_text("- 1\n- 2\n")
    (root / "unknown_key.yaml").write_text("colour: red\n")
    (root / "job.arb").write_text("<OPENMICRODATA> \"nosuch.asc\"\n")
    (root / "bad.arb").write_text("<NOSUCHCOMMAND>\n")
    (root / "log.jsonl").write_text('{"t": 0.0, "what": "earlier"}\n')
    (root / "notes.txt").write_text("not a log\n")
    release = {"data": "census/persons.parquet",
               "hierarchies": {"area": "census/hierarchies/area.hrc"},
               "tables": [{"name": "area_sex", "by": ["area", "sex"]},
                          {"name": "region_sex", "by": ["region", "sex"]}]}
    (root / "release.yaml").write_text(yaml.safe_dump(release))
    assert main(["protect", "--release", str(root / "release.yaml"), "--method", "controlled-round", "--base", "3",
                 "--out", str(root / "pub"), "--quiet"]) == 0
    text = (root / "pub" / "area_sex.csv").read_text().splitlines()
    text[1] = re.sub(r",\d+$", ",abc", text[1])  # text in a count column
    (root / "pub_text").mkdir()
    (root / "pub_text" / "area_sex.csv").write_text("\n".join(text) + "\n")
    (root / "pub_text" / "region_sex.csv").write_text((root / "pub" / "region_sex.csv").read_text())
    (root / "pub_text" / "release.yaml").write_text((root / "pub" / "release.yaml").read_text())
    (root / "served").mkdir()
    for name in ("persons.parquet", "meta.yaml"):
        (root / "served" / name).write_bytes((root / "census" / name).read_bytes())
    (root / "served_bad").mkdir()
    (root / "served_bad" / "persons.parquet").write_bytes((root / "census" / "persons.parquet").read_bytes())
    (root / "served_bad" / "meta.yaml").write_text("variables: [a, b\n  c: {\n")
    (root / "ptable.csv").write_text("i,j,p,v,p_int_lb,p_int_ub\n0,0,1,0,0,1\n")
    from tabsafe.synth_business import synth_business

    synth_business(120, 3, root / "business")  # a magnitude table's contributions (issue #29)
    (root / "apriori_bad.csv").write_text("activity,size,status\nZZ,micro,safe\n")
    (root / "apriori_text.csv").write_text("activity,size,upper\nA11,micro,lots\n")


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("decoy")
    cwd = os.getcwd()
    os.chdir(root)
    try:
        _tree(root)
    finally:
        os.chdir(cwd)
    return root


def snapshot(root: Path) -> dict[str, str]:
    """sha256 of every file (a link: its target's name) under ``root``, by relative path; folders too."""
    out: dict[str, str] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = "link:" + os.readlink(path)
            elif path.is_dir():
                out[rel] = f"dir:{path.stat().st_mode & 0o7777:o}"
            else:
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest() + f":{path.stat().st_mode & 0o7777:o}"
    return out


# ------------------------------------------------------------------ the cases

#: one good command line per command; each case breaks one thing in it
BASE = {
    "protect": "protect census/persons.parquet --by area,sex --method barnardisation --p 0.2 "
               "--seed 1234567890123456 --out new.csv",
    "tabulate": "tabulate census/persons.parquet --by area,sex --out new.csv",
    "risk": "risk census/persons.parquet --by area,sex --min-freq 3 --out new.csv",
    "keys": "keys census/persons.parquet --seed 1234567890123 --out new.parquet",
    "ptable": "ptable --max-noise 3 --variance 2 --out new.csv",
    "swap": "swap census/persons.parquet --method targeted --geography region,area,small_area "
            "--risk-vars sex,age --k 3 --swaprate 0.05 --seed 1234567890123 --out new.parquet",
    "measure": "measure info-gain --method ckm --max-noise 3 --variance 2",
    "synth": "synth --persons 100 --out newcensus",
    "release": "protect --release release.yaml --method controlled-round --base 3 --out newpub",
    "audit": "audit --release pub/release.yaml --out new.json",
    "magnitude": "protect business/enterprises.parquet --by activity,size --method magnitude-suppress "
                 "--magnitude turnover --contributor enterprise --rule p:15 --out new.csv",
}

#: option -> bad values, for every base command that has the option
BAD_VALUES: dict[str, list[str]] = {
    "--by": ["", "nosuch", "area,,sex", ",", "area;sex", "Total", "area,nosuch"],
    "--hierarchy": ["area=evil.hrc", "area=missing.hrc", "area", "=x", "area=census/meta.yaml", "area=shadow.csv",
                    "area=census", "area=bad.yaml", "area=census/hierarchies/small_area.hrc"],
    "--where": ["sex =", "nosuch = 1", "sex = 1 and", "((sex = 1)", "age_year >= x", "sex = 1; DROP TABLE x",
                "sex in ()", "\"sex\" = '1"],
    "--out": ["census/persons.parquet", "census/meta.yaml", "census/hierarchies/area.hrc", "pub/area_sex.csv",
              "nofolder/x.csv", "census", "x.txt", "", "decoy/data.csv", "release.yaml", "/dev/null", "secret.txt"],
    "--log-json": ["census/meta.yaml", "census/persons.parquet", "census/hierarchies/area.hrc", "notes.txt",
                   "census", "nofolder/log.jsonl", "pub/area_sex.csv", "mine/hierarchies/my_regions.hrc"],
    "--memory-limit": ["1KB", "0", "-1GB", "x", "1e999GB", "99999999999999999999TB", "12 parsecs", "10KB"],
    "--seed": ["-5", "x", "1.5", "99999999999999999999", "", "0x10"],
    "--max-cells": ["0", "-1", "x", "1"],
    "--engine": ["nosuch", ""],
    "DATA": ["missing.parquet", "census", "shadow.csv", "census/meta.yaml", "empty.csv", "header.csv",
             "secret.txt", "census/hierarchies/area.hrc"],
}

#: method options of the base commands: the method's own bad values
METHOD_BAD: dict[str, dict[str, list[str]]] = {
    "protect": {"--p": ["-1", "2", "nan", "inf", "x", "", "1e999", "-0.5"],
                "--method": ["nosuch", "", "barnardisation,targeted-swap", "barnardisation,,ckm", "BARNARDISATION"]},
    "ptable": {"--max-noise": ["0", "-1", "x", "99999999999999999999", "1.5"],
               "--variance": ["0", "-1", "x", "nan", "inf", "1e999"]},
    "measure": {"--max-noise": ["0", "-3", "x"], "--variance": ["-2", "nan", "x"],
                "--method": ["nosuch", "", "suppress,ckm"]},
    "swap": {"--k": ["0", "-1", "x", "99999999999999999999"], "--swaprate": ["-0.1", "1.5", "x", "nan"],
             "--geography": ["", "nosuch", "region,,area"], "--risk-vars": ["nosuch", ""],
             "--method": ["nosuch", "ckm"]},
    "risk": {"--min-freq": ["-1", "x", "nan"], "--t-rel": ["x", "-5"], "--coalition": ["x", "1.5"],
             "--summary": ["x.txt", "census/meta.yaml", "decoy/data.summary.json"]},
    "synth": {"--persons": ["0", "-1", "x", "1000000000000", "1e6"], "--areas": ["0", "x"],
              "--small-areas": ["0", "-1"], "--out": [".", "mine", "census/persons.parquet", "decoy", "nofolder/x/y"]},
    "keys": {"--digits": ["0", "-1", "x", "99"], "--column": ["", "area"]},
    "release": {"--release": ["missing.yaml", "bad.yaml", "list.yaml", "unknown_key.yaml", "census/meta.yaml"],
                "--out": ["census/persons.parquet", "nofolder/x", "release.yaml"],
                "--evaluation": ["newpub", "census/persons.parquet"],
                "--method": ["nosuch", "ckm,additivity", "ckm,nosuch", ""]},
    "audit": {"--release": ["missing.yaml", "bad.yaml", "pub_text/release.yaml", "census/meta.yaml", "pub/area_sex.csv"],
              "--out": ["pub/area_sex.csv", "pub/release.yaml", "x.txt", "nofolder/x.json", "census/persons.parquet"]},
    "tabulate": {"--sum": ["nosuch", "sex", ""], "--key": ["nosuch", "sex"]},
    "magnitude": {"--rule": ["", "p", "p:x", "p:-5", "p:15,0", "pq:15", "pq:20,10", "nk:2", "nk:0,85",
                             "nk:2,150", "nk:1.5,80", "freq:0", "freq:3,x", "zero:-1", "colour:3", "p:15:group",
                             "p:15:holding", "request:10", "p:15;nk:2,85"],
                  "--magnitude": ["nosuch", "activity", "enterprise", "", "holding"],
                  "--contributor": ["nosuch", "size", "turnover", ""],
                  "--holding": ["nosuch", "activity", "enterprise"],
                  "--weight": ["nosuch", "activity", "holding"],
                  "--shadow": ["nosuch", "holding"],
                  "--request": ["nosuch"],
                  "--apriori": ["missing.csv", "shadow.csv", "decoy/data.csv", "census/meta.yaml", "apriori_bad.csv",
                                "apriori_text.csv", "empty.csv", "rag.csv"],
                  "--cost": ["nosuch", "", "activity"],
                  "--lam": ["-1", "2", "x", "nan"],
                  "--manual-ratio": ["-1", "101", "x"],
                  "--missing": ["activity", ":x", "activity:"],
                  "--weighting": ["nosuch"],
                  "--mode": ["nosuch"],
                  "--work-limit": ["0", "x"],
                  "--time-limit": ["0", "-1", "x"],
                  "--out": ["business/enterprises.parquet", "business/meta.yaml", "business/hierarchies/activity.hrc"],
                  "--method": ["magnitude-suppress,ckm", "suppress,magnitude-suppress"]},
}

#: which generic options each base command takes
GENERIC = {
    "protect": ["--by", "--hierarchy", "--where", "--out", "--log-json", "--memory-limit", "--seed", "--max-cells",
                "--engine", "DATA"],
    "tabulate": ["--by", "--hierarchy", "--where", "--out", "--log-json", "--memory-limit", "--max-cells", "--engine",
                 "DATA"],
    "risk": ["--by", "--hierarchy", "--where", "--out", "--log-json", "--memory-limit", "DATA"],
    "keys": ["--out", "--log-json", "--memory-limit", "--seed", "DATA"],
    "ptable": ["--out", "--log-json", "--memory-limit"],
    "swap": ["--out", "--log-json", "--seed", "DATA"],
    "measure": ["--log-json", "--memory-limit"],
    "synth": ["--log-json", "--seed", "--memory-limit"],
    "release": ["--log-json", "--seed"],
    "audit": ["--log-json", "--memory-limit"],
    "magnitude": ["--by", "--where", "--out", "--max-cells", "DATA"],
}

#: values of a generic option that are fine for one command (not a bad input there)
NOT_BAD = {
    ("keys", "--seed", "1.5"), ("swap", "--out", "x.txt"),
    ("keys", "DATA", "shadow.csv"),  # a CSV (of a secret's lines) gets record keys: it is data, and private output
    ("ptable", "--out", "x.txt"),  # a p-table may be written as text (tau-ARGUS's layout)
}

#: the cases the issue names (and other whole command lines)
NAMED = [
    ("log-json into meta", "tabulate census/persons.parquet --by sex --out new.csv --log-json census/meta.yaml"),
    ("log-json into the data", "tabulate census/persons.parquet --by sex --out new.csv --log-json decoy/data.csv"),
    ("log-json into a hrc", "tabulate census/persons.parquet --by sex --out new.csv "
                            "--log-json census/hierarchies/area.hrc"),
    ("audit replaces a published table", "audit --release pub/release.yaml --out pub/area_sex.csv"),
    ("synth deletes the user's hierarchy", "synth --persons 100 --out mine"),
    ("swap replaces the census", "swap census/persons.parquet --method targeted --geography region,area,small_area "
                                 "--risk-vars sex,age --k 3 --swaprate 0.05 --seed 1234567890123 "
                                 "--out census/households.parquet"),
    ("risk replaces the user's summary", "risk --table decoy/data.csv --count n --by area,sex --min-freq 3 "
                                         "--out decoy/data.csv"),
    ("risk replaces a side file", "risk --table decoy/data.csv --count n --by area,sex --min-freq 3 "
                                  "--out decoy/data2.csv --summary decoy/data.summary.json"),
    ("risk: a side file that exists", "risk census/persons.parquet --by area,sex --min-freq 3 --out decoy/data.csv"),
    ("keys-admin makes a folder", "keys-admin --data nonexistent list"),
    ("keys-admin on a file", "keys-admin --data notes.txt list"),
    ("keys-admin without a store", "keys-admin --data served list"),
    ("keys-admin audit without a store", "keys-admin --data served audit --out new.jsonl"),
    ("keys-admin revoke", "keys-admin --data served revoke nosuch"),
    ("hrc linked to a secret", "tabulate census/persons.parquet --by area,sex --hierarchy area=evil.hrc --out new.csv"),
    ("csv linked to a secret", "tabulate --table shadow.csv --count n --by a --out new.csv"),
    ("synth absurd size", "synth --persons 1000000000000 --out newcensus"),
    ("memory limit 1KB", "tabulate census/persons.parquet --by sex --out new.csv --memory-limit 1KB"),
    ("base overflow", "protect census/persons.parquet --by sex --method round --base 99999999999999999999 "
                      "--out new.csv"),
    ("text in a count column", "audit --release pub_text/release.yaml --out new.json"),
    ("text counts as inner cells", "tabulate --table text_counts.csv --count n --by area,sex --out new.csv"),
    ("evaluation is out", "protect census/persons.parquet --by sex --method barnardisation --p 0.2 "
                          "--seed 1234567890123 --out new.csv --evaluation new.csv"),
    ("release evaluation is out", "protect --release release.yaml --method controlled-round --base 3 --out newpub "
                                  "--evaluation newpub"),
    ("serve with an invalid meta", "serve --data served_bad --port 9"),
    ("serve without data", "serve --data nonexistent --port 9"),
    ("report is the data", "protect census/persons.parquet --by sex --method barnardisation --p 0.2 "
                           "--seed 1234567890123 --out new.csv --report census/meta.yaml"),
    ("report exists", "protect census/persons.parquet --by sex --method barnardisation --p 0.2 "
                      "--seed 1234567890123 --out new.csv --report decoy/data.summary.json"),
    ("csvw side file exists", "protect census/persons.parquet --by sex --method barnardisation --p 0.2 "
                              "--seed 1234567890123 --format csvw --out decoy/data.csv"),
    ("table and data", "tabulate census/persons.parquet --table decoy/data.csv --count n --by area --out new.csv"),
    ("table without count", "tabulate --table decoy/data.csv --by area --out new.csv"),
    ("table count missing", "tabulate --table decoy/data.csv --count nosuch --by area --out new.csv"),
    ("ragged csv", "tabulate --table rag.csv --count b --by a --out new.csv"),
    ("ragged csv as microdata", "tabulate rag.csv --by a --out new.csv"),
    ("ragged csv keys", "keys rag.csv --seed 1234567890123 --out new.parquet"),
    ("table empty", "tabulate --table empty.csv --count n --by area --out new.csv"),
    ("table header only", "tabulate --table header.csv --count n --by area --out new.csv"),
    ("microdata method on cells", "protect --table decoy/data.csv --count n --by area,sex --method targeted-swap "
                                  "--out new.csv"),
    ("ckm without keys", "protect --table decoy/data.csv --count n --by area,sex --method ckm --max-noise 3 "
                         "--variance 2 --out new.csv"),
    ("evaluate missing config", "evaluate missing.yaml --out new.html"),
    ("evaluate bad config", "evaluate bad.yaml --out new.html"),
    ("evaluate list config", "evaluate list.yaml --out new.html"),
    ("evaluate unknown key", "evaluate unknown_key.yaml --out new.html"),
    ("evaluate into the census", "evaluate release.yaml --out census/meta.yaml"),
    ("argus missing job", "argus run missing.arb"),
    ("argus bad command", "argus run bad.arb"),
    ("argus missing data", "argus run job.arb"),
    ("argus report into the job", "argus run job.arb --report job.arb"),
    ("demo into the census", "demo --persons 100 --out census"),
    ("demo into a file", "demo --persons 100 --out notes.txt"),
    ("demo absurd", "demo --persons 0 --out newdemo"),
    ("ptable into the data", "ptable --max-noise 3 --variance 2 --out census/persons.parquet"),
    ("ptable exists", "ptable --max-noise 3 --variance 2 --out ptable.csv"),
    ("ptable plot into meta", "ptable --max-noise 3 --variance 2 --out new.csv --plot census/meta.yaml"),
    ("unknown command", "nosuch"),
    ("no command options", "protect"),
    ("measure unknown", "measure nosuch --method ckm"),
    ("magnitude from cells", "protect --table decoy/data.csv --count n --by area,sex --method magnitude-suppress "
                             "--magnitude n --rule p:15 --out new.csv"),
    ("magnitude holding and weight", "protect business/enterprises.parquet --by activity,size "
                                     "--method magnitude-suppress --magnitude turnover --contributor enterprise "
                                     "--holding holding --weight weight --rule p:15 --out new.csv"),
    ("magnitude without rules", "protect business/enterprises.parquet --by activity,size "
                                "--method magnitude-suppress --magnitude turnover --out new.csv"),
    ("magnitude evaluation is the data", "protect business/enterprises.parquet --by activity,size "
                                         "--method magnitude-suppress --magnitude turnover --rule p:15 --out new.csv "
                                         "--evaluation business/enterprises.parquet"),
    ("swap microdata of a table method", "swap census/persons.parquet --method ckm --out new.parquet"),
    ("swap hierarchy and geography", "swap census/persons.parquet --method targeted --geography region,area "
                                     "--hierarchy region,area --risk-vars sex --k 3 --swaprate 0.05 --out new.parquet"),
]

#: filters nested beyond any use (a RecursionError before): one line too
NAMED += [
    ("where: 3,000 brackets", "tabulate census/persons.parquet --by sex --out new.csv --where "
                              + shlex.quote("(" * 3000 + "sex = 1" + ")" * 3000)),
    ("where: 2,400 nots", "tabulate census/persons.parquet --by sex --out new.csv --where "
                          + shlex.quote("not " * 2400 + "sex = 1")),
]


def _replace(argv: list[str], option: str, value: str) -> list[str]:
    out = list(argv)
    if option == "DATA":
        out[1] = value
        return out
    if option in out:
        out[out.index(option) + 1] = value
    else:
        out += [option, value]
    return out


def cases() -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for command, base in BASE.items():
        argv = shlex.split(base)
        for option in GENERIC[command]:
            for value in BAD_VALUES[option]:
                if (command, option, value) in NOT_BAD:
                    continue
                found.append((f"{command} {option}={value!r}", shlex.join(_replace(argv, option, value))))
        for option, values in METHOD_BAD.get(command, {}).items():
            for value in values:
                found.append((f"{command} {option}={value!r}", shlex.join(_replace(argv, option, value))))
    found += [(f"named: {name}", line) for name, line in NAMED]
    unique: dict[str, str] = {}
    for name, line in found:  # two tables may give one command line: run it once
        unique.setdefault(line, name)
    return [(name, line) for line, name in unique.items()]


CASES = cases()
ERROR_LINE = re.compile(r"tabsafe( [\w-]+)*: error: \S.*\n")


def check_case(tree: Path, line: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tree)
    before = snapshot(tree)
    code = main(shlex.split(line))
    out = capsys.readouterr()
    assert code not in (0, 130), f"exit {code}: {out.out[:300]}{out.err[:300]}"
    assert ERROR_LINE.fullmatch(out.err), repr(out.err[:500])
    assert "Traceback" not in out.err and "root:" not in out.err and "secretpass" not in out.err
    assert out.out == "", out.out[:300]
    after = snapshot(tree)
    for extra in sorted(set(after) - set(before), reverse=True):  # a failing case must not spoil the next ones
        path = tree / extra
        if path.is_dir() and not path.is_symlink():
            import shutil

            shutil.rmtree(path, ignore_errors=True)
        elif path.exists() or path.is_symlink():
            path.unlink()
    assert after == before, {k: (before.get(k), after.get(k)) for k in set(before) | set(after)
                             if before.get(k) != after.get(k)}


def test_the_battery_is_large_and_covers_every_command() -> None:
    from tabsafe.cli import COMMANDS

    assert len(CASES) >= 300, len(CASES)
    commands = {shlex.split(line)[0] for _, line in CASES}
    assert set(COMMANDS) <= commands, set(COMMANDS) - commands


@pytest.mark.parametrize(("name", "line"), CASES, ids=[name for name, _ in CASES])
def test_bad_input(tree: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, name: str,
                   line: str) -> None:
    check_case(tree, line, capsys, monkeypatch)
