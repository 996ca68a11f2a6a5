"""``tabsafe argus run``: batch files written here in the style of tau-ARGUS's examples, run
headless to their outputs (real DuckDB tabulation and HiGHS suppression, no mocks)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tabsafe.cli import main
from tabsafe.interop.argus.rda import Metadata, Variable, write_rda
from tabsafe.interop.argus.tab import read_tab

REGIONS = {"N": [" 1", " 2", " 3"], "S": [" 4", " 5", "10"]}


def _records(seed: int = 5, n: int = 150) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    region = rng.choice([c.strip() for cs in REGIONS.values() for c in cs], n, p=[.3, .2, .05, .25, .15, .05])
    size = rng.choice([str(k) for k in range(1, 10)], n)
    value = rng.integers(0, 9999, n)
    key = rng.integers(0, 10**8, n) / 10**8
    return pd.DataFrame({"Region": region, "Size": size, "Turnover": value, "Key": key})


def _write_micro(folder: Path, frame: pd.DataFrame) -> None:
    lines = [f"{r.Region:>2}{r.Size:>1}{r.Turnover:>6}{r.Key:10.8f}" for r in frame.itertuples()]
    (folder / "firms.asc").write_text("\n".join(lines) + "\n")
    (folder / "firms.rda").write_text(
        'Region 1 2 "99"\n  <RECODEABLE>\n  <HIERARCHICAL>\n  <HIERCODELIST> "region.hrc"\n  <HIERLEADSTRING> "@"\n'
        "Size 3 1\n  <RECODEABLE>\nTurnover 4 6\n  <NUMERIC>\nKey 10 10\n  <RECORDKEY>\n  <DECIMALS> 8\n")
    (folder / "region.hrc").write_text("".join(f"{r}\n" + "".join(f"@{c}\n" for c in cs) for r, cs in REGIONS.items()))
    (folder / "size.grc").write_text("A : 1-3\nB : 4-6\nC : 7-\n")
    (folder / "prior.hst").write_text("N;B;U\n")


def _run(folder: Path, job: str, *extra: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    (folder / "job.arb").write_text(job)
    code = main(["argus", "run", str(folder / "job.arb"), *extra])
    out, err = capsys.readouterr()
    return code, out, err


MICRO_JOB = """// a job in the style of tau-ARGUS's TestRecode.arb
<OPENMICRODATA> "firms.asc"
<OPENMETADATA> "firms.rda"
<SPECIFYTABLE> "Region""Size"|<FREQ>||
<SAFETYRULE> FREQ(4,20)
<READMICRODATA>
<RECODE> 1, Size, "size.grc"
<APRIORI> "prior.hst", 1, ";"
<SUPPRESS> MOD(1)
<WRITETABLE> (1,1,QU+,"t1.csv")
<WRITETABLE> (1,2,,"t2.csv")
<WRITETABLE> (1,3,AS+,"t3.csv")
<WRITETABLE> (1,4,HL+,"t4.csv")
<WRITETABLE> (1,5,,"t5.tab")
<WRITETABLE> (1,6,,"t6.jj")
<VERSIONINFO> "v.txt"
"""


def _expected(frame: pd.DataFrame) -> dict[tuple[str, str], int]:
    """The true counts of every cell of Region (with its regions) × recoded Size."""
    size = frame["Size"].astype(int).map(lambda s: "A" if s <= 3 else "B" if s <= 6 else "C")
    parent = {c.strip(): r for r, cs in REGIONS.items() for c in cs}
    out: dict[tuple[str, str], int] = {}
    for region, sz in zip(frame["Region"], size):
        for r in ("Total", parent[region], region):
            for s in ("Total", sz):
                out[(r, s)] = out.get((r, s), 0) + 1
    return out


def test_microdata_job_suppresses_and_writes_every_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    frame = _records()
    _write_micro(tmp_path, frame)
    code, out, _ = _run(tmp_path, MICRO_JOB, "--report", str(tmp_path / "r.json"), capsys=capsys)
    assert code == 0, out
    lines = out.splitlines()
    assert len(lines) == 15 and all(ln.startswith("job.arb:") for ln in lines)  # one line per command
    assert "suppress with tabsafe's fast mode" in lines[7]
    truth = _expected(frame)
    assert sum(0 < n < 4 for n in truth.values()) >= 3  # the data have cells the rule flags
    pivot = pd.read_csv(tmp_path / "t2.csv", dtype=str, keep_default_na=False)
    assert list(pivot.columns) == ["Region", "Size", "Freq"]
    got = {(r, s): v for r, s, v in pivot.itertuples(index=False)}
    assert set(got) == {k for k in truth} | {(r, s) for r in ["Total", "N", "S", "1", "2", "3", "4", "5", "10"]
                                            for s in ["Total", "A", "B", "C"]}
    for cell, value in got.items():
        n = truth.get(cell, 0)
        if value == "x":
            continue
        assert (value == "-" and n == 0) or int(value) == n  # published values are the true counts
        assert not 0 < n < 4, cell  # every primary cell (FREQ(4)) is suppressed
    assert got[("N", "B")] == "x"  # a priori unsafe
    # no additive relation has exactly one suppressed cell (it could be recomputed)
    regions = {"Total": ["N", "S"], "N": ["1", "2", "3"], "S": ["4", "5", "10"]}
    for s in ["Total", "A", "B", "C"]:
        for parent, kids in regions.items():
            assert [got[(c, s)] for c in [parent, *kids]].count("x") != 1
    for r in ["Total", "N", "S", "1", "2", "3", "4", "5", "10"]:
        assert [got[(r, s)] for s in ["Total", "A", "B", "C"]].count("x") != 1
    # release files keep the umask, files with originals or statuses are private
    for name in ["t1.csv", "t2.csv", "v.txt"]:
        assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) != 0o600
    for name in ["t3.csv", "t4.csv", "t5.tab", "t6.jj"]:
        assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == 0o600
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["not_run"] == 0 and len(report["steps"]) == 15


def test_intermediate_file_reads_back_to_the_same_cells_and_statuses(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    _write_micro(tmp_path, _records(8))
    assert _run(tmp_path, MICRO_JOB, capsys=capsys)[0] == 0
    meta = Metadata(kind="table", separator=";", variables=(
        Variable(name="Region", recodeable=True, total_code="Total", hierarchical=True, hierfile="region.hrc",
                 leadstring="@"), Variable(name="Size", recodeable=True,
                                                                               total_code="Total"),
        Variable(name="Freq", numeric=True), Variable(name="N", role="frequency"), Variable(name="St", role="status"),
        Variable(name="Lo", role="lowerpl", numeric=True), Variable(name="Up", role="upperpl", numeric=True)))
    back = read_tab((tmp_path / "t5.tab").read_text(), meta)
    pivot = pd.read_csv(tmp_path / "t2.csv", dtype=str, keep_default_na=False)
    assert list(back.columns["Region"]) == list(pivot["Region"]) and list(back.columns["Size"]) == list(pivot["Size"])
    hidden = [v == "x" for v in pivot["Freq"]]
    assert [s in {"U", "M"} for s in back.columns["St"]] == hidden
    values = [float(v) for v, h in zip(pivot["Freq"], hidden) if not h and v != "-"]
    assert values == [v for v, h, f in zip(back.columns["Freq"], hidden, pivot["Freq"]) if not h and f != "-"]
    # the job tabsafe writes for it reads back too
    (tmp_path / "t5.rda").write_text(write_rda(meta))
    job2 = ('<OPENTABLEDATA> "t5.tab"\n<OPENMETADATA> "t5.rda"\n<SPECIFYTABLE> "Region""Size"|"Freq"\n'
            '<SAFETYRULE>\n<READTABLE> 2\n<SUPPRESS> GH(1)\n<WRITETABLE> (1,2,,"again.csv")\n')
    code, out, _ = _run(tmp_path, job2, capsys=capsys)
    assert code == 0, out
    again = pd.read_csv(tmp_path / "again.csv", dtype=str, keep_default_na=False)
    assert list(again["Region"]) == list(pivot["Region"])
    # the statuses read back: every cell suppressed before is suppressed again (U and M are primary)
    assert all(a == "x" for a, h in zip(again["Freq"], hidden) if h)
    # and a table that does not add up is refused with one line naming the cell's line
    (tmp_path / "t5.rda").write_text(write_rda(Metadata(kind="table", separator=";", variables=(
        Variable(name="Region", recodeable=True, total_code="Total"), *meta.variables[1:]))))
    code, _, err = _run(tmp_path, job2, "--force", capsys=capsys)  # again.csv exists: replaced only with --force
    assert code == 2 and err.startswith("tabsafe: error: t5.tab:1: cell: a total that is not the sum")


def test_tabular_job_uses_the_given_statuses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "t.rda").write_text('<SEPARATOR> ";"\nA\n  <RECODEABLE>\n  <TOTCODE> "Total"\nB\n  <RECODEABLE>\n'
                                    '  <TOTCODE> "Total"\nV\n  <NUMERIC>\n  <DECIMALS> 1\nF\n  <FREQUENCY>\n'
                                    'St\n  <STATUS>\n')
    inner = {("a", "x"): (10.5, 3, "S"), ("a", "y"): (2.0, 1, "U"), ("b", "x"): (7.0, 2, "S"), ("b", "y"): (9.5, 4, "S")}
    rows = []
    for (a, b), (v, f, s) in inner.items():
        rows.append(f'"{a}";"{b}";{str(v).replace(".", ",")};{f};{s}')
    for a in "ab":
        rows.append(f'"{a}";"Total";{sum(v for (x, _), (v, _, _) in inner.items() if x == a)};9;S')
    for b in "xy":
        rows.append(f'"Total";"{b}";{sum(v for (_, y), (v, _, _) in inner.items() if y == b)};9;S')
    rows.append(f'"Total";"Total";{sum(v for v, _, _ in inner.values())};9;S')
    (tmp_path / "t.tab").write_text("\n".join(rows) + "\n")
    job = ('<OPENTABLEDATA> "t.tab"\n<OPENMETADATA> "t.rda"\n<SPECIFYTABLE> "A""B"|"V"||\n<SAFETYRULE>\n'
           '<READTABLE> 0\n<SUPPRESS> OPT(1)\n<WRITETABLE> (1,2,,"o.csv")\n')
    code, out, _ = _run(tmp_path, job, capsys=capsys)
    assert code == 0, out
    assert "optimal integer program" in out
    o = pd.read_csv(tmp_path / "o.csv", dtype=str, keep_default_na=False)
    got = {(a, b): v for a, b, v in o.itertuples(index=False)}
    # the unsafe cell and the three others of its rectangle are suppressed; margins are published
    assert [got[k] for k in [("a", "x"), ("a", "y"), ("b", "x"), ("b", "y")]] == ["x"] * 4
    assert got[("Total", "Total")] == "29.0" and got[("a", "Total")] == "12.5"


MAGNITUDE_JOB = ('<OPENMICRODATA> "firms.asc"\n<OPENMETADATA> "firms.rda"\n<SPECIFYTABLE> "Region""Size"|"Turnover"||\n'
                 '<SAFETYRULE> NK(1,60)|P(15,1)|NK(0,0)\n<READMICRODATA>\n<SUPPRESS> MOD(1)\n'
                 '<WRITETABLE> (1,2,,"m.csv")\n<WRITETABLE> (1,4,,"m.sbs")\n')


def _cells_of_records(frame: pd.DataFrame) -> dict[tuple[str, str], list[float]]:
    """Every cell of Region (with its regions and total) × Size (with its total): its contributions."""
    parent = {c.strip(): r for r, cs in REGIONS.items() for c in cs}
    out: dict[tuple[str, str], list[float]] = {}
    for region, size, value in zip(frame["Region"], frame["Size"], frame["Turnover"]):
        for r in ("Total", parent[region], region):
            for sz in ("Total", size):
                out.setdefault((r, sz), []).append(float(value))
    return out


def test_magnitude_rules_run_as_magnitude_suppression(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    frame = _records()
    _write_micro(tmp_path, frame)
    code, out, _ = _run(tmp_path, MAGNITUDE_JOB, capsys=capsys)
    assert code == 0, out
    rule_line = next(ln for ln in out.splitlines() if "<SAFETYRULE>" in ln)
    assert "mapped" in rule_line and "nk:1,60" in rule_line and "p:15" in rule_line and "NK(0,0)" not in rule_line
    assert "magnitude-suppress" in next(ln for ln in out.splitlines() if "<SUPPRESS>" in ln)
    m = pd.read_csv(tmp_path / "m.csv", dtype=str, keep_default_na=False)
    shown = {(a.strip(), b.strip()): v for a, b, v in m.itertuples(index=False)}
    truth = _cells_of_records(frame)
    primary = 0
    for key, values in truth.items():
        x = sorted(values, reverse=True)
        total = sum(x)
        # the rules, computed here from the records: (1,60) dominance and the p% rule at 15%
        unsafe = total > 0 and (x[0] > 0.6 * total or total - x[0] - (x[1] if len(x) > 1 else 0) < 0.15 * x[0])
        primary += unsafe
        if unsafe:
            assert shown[key] == "x", key
        elif shown[key] != "x":
            assert float(shown[key]) == total, key
    hidden = sum(v == "x" for v in shown.values())
    assert primary > 0 and hidden > primary  # the rules flagged cells; secondary cells protect them
    sbs = pd.read_csv(tmp_path / "m.sbs", header=None, dtype=str, keep_default_na=False)
    assert stat.S_IMODE(os.stat(tmp_path / "m.sbs").st_mode) == 0o600
    for a, b, _v, _f, _s, dom in sbs.itertuples(index=False):  # the private dominance share, in percent
        values = truth[(a.strip(), b.strip())]
        assert float(dom) == pytest.approx(100 * max(values) / sum(values), abs=0.006)


def _write_holdings(folder: Path) -> None:
    """Region × Size with four equal contributions per cell, except one cell where two enterprises
    of holding H1 hold 40% each: safe by (1,60) dominance per enterprise, unsafe per holding."""
    rows = []
    for cs in REGIONS.values():
        for region in cs:
            for size in "123":
                if (region, size) == (" 1", "1"):
                    rows += [(region, size, 400, "H1"), (region, size, 400, "H1"), (region, size, 200, "")]
                else:
                    rows += [(region, size, 100, f"G{k}") for k in range(4)]
    (folder / "firms.asc").write_text("".join(f"{r:>2}{s}{v:>6}{h:<4}\n" for r, s, v, h in rows))
    (folder / "firms.rda").write_text(
        'Region 1 2 "99"\n  <RECODEABLE>\n  <HIERARCHICAL>\n  <HIERCODELIST> "region.hrc"\n  <HIERLEADSTRING> "@"\n'
        "Size 3 1\n  <RECODEABLE>\nTurnover 4 6\n  <NUMERIC>\nHolding 10 4\n  <HOLDING>\n")
    (folder / "region.hrc").write_text("".join(f"{r}\n" + "".join(f"@{c}\n" for c in cs) for r, cs in REGIONS.items()))


@pytest.mark.parametrize(("rules", "hidden"), [("NK(1,60)", False), ("NK(0,0)|NK(0,0)|NK(1,60)", True),
                                                ("NK(1,60)|NK(0,0)|NK(0,0)", False)])
def test_the_third_nk_rule_reads_holdings(tmp_path: Path, capsys: pytest.CaptureFixture[str], rules: str,
                                          hidden: bool) -> None:
    _write_holdings(tmp_path)
    job = MAGNITUDE_JOB.replace("NK(1,60)|P(15,1)|NK(0,0)", rules)
    code, out, _ = _run(tmp_path, job, capsys=capsys)
    assert code == 0, out
    m = pd.read_csv(tmp_path / "m.csv", dtype=str, keep_default_na=False)
    shown = {(a.strip(), b.strip()): v for a, b, v in m.itertuples(index=False)}
    assert (shown[("1", "1")] == "x") is hidden
    hidden_cells = sum(v == "x" for v in shown.values())
    assert hidden_cells >= 4 if hidden else hidden_cells == 0  # the cell and at least a rectangle, or nothing


def test_an_apriori_unsafe_cell_of_a_magnitude_table_is_hidden(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                                ) -> None:
    _write_holdings(tmp_path)
    (tmp_path / "prior.hst").write_text("10;3;U\n")
    job = MAGNITUDE_JOB.replace("NK(1,60)|P(15,1)|NK(0,0)", "NK(1,60)").replace(
        "<SUPPRESS>", '<APRIORI> "prior.hst", 1, ";"\n<SUPPRESS>')
    code, out, _ = _run(tmp_path, job, capsys=capsys)
    assert code == 0, out
    m = pd.read_csv(tmp_path / "m.csv", dtype=str, keep_default_na=False)
    shown = {(a.strip(), b.strip()): v for a, b, v in m.itertuples(index=False)}
    assert shown[("10", "3")] == "x" and sum(v == "x" for v in shown.values()) >= 4
    assert shown[("1", "1")] != "x"  # safe per enterprise: no rule for holdings here


def test_wgt_weighs_the_contributions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write_holdings(tmp_path)
    lines = (tmp_path / "firms.asc").read_text().splitlines()
    weights = [2.5 if k % 3 == 0 else 1.0 for k in range(len(lines))]
    (tmp_path / "firms.asc").write_text("".join(f"{ln}{w:>4.1f}\n" for ln, w in zip(lines, weights)))
    rda = (tmp_path / "firms.rda").read_text() + "Weight 14 4\n  <WEIGHT>\n  <DECIMALS> 1\n"
    (tmp_path / "firms.rda").write_text(rda)
    job = MAGNITUDE_JOB.replace("NK(1,60)|P(15,1)|NK(0,0)", "NK(1,90)|WGT(1)")
    code, out, _ = _run(tmp_path, job, capsys=capsys)
    assert code == 0, out
    assert "weighted by the <WEIGHT> variable" in next(ln for ln in out.splitlines() if "<SAFETYRULE>" in ln)
    m = pd.read_csv(tmp_path / "m.csv", dtype=str, keep_default_na=False)
    total = sum(int(ln[3:9]) * w for ln, w in zip(lines, weights))
    assert float(m.iloc[0, 2]) == total != sum(int(ln[3:9]) for ln in lines)


def test_magnitude_rules_translate_to_tabsafes() -> None:
    from tabsafe.interop.argus.arb import read_arb
    from tabsafe.interop.argus.magnitude import translate

    def rules(text: str) -> tuple[str, ...]:
        return read_arb(f"<SAFETYRULE> {text}\n")[0].args

    m = translate(rules("P(15,2)|NK(3,75)|FREQ(3,20)|REQ(30,30,3,10)|ZERO(5)|WGT(1)|MIS(1)|MAN(20)"))
    assert m.rules == ("p:15,2", "nk:3,75", "freq:3,20", "request:30", "zero:5")
    assert m.weights and m.missing_safe and m.manual == 20 and m.magnitude
    m = translate(rules("P(10,1)|P(0,0)|P(20,1)|NK(0,0)|NK(0,0)|NK(2,80)|FREQ(3,0)|FREQ(2,0)"))
    assert m.rules == ("p:10", "p:20:holding", "nk:2,80:holding", "freq:3", "freq:2:holding")
    assert translate(rules("NK(3,75)|NK(2,90)")).rules == ("nk:3,75", "nk:2,90")  # two per level
    assert not translate(rules("FREQ(3,10)|MAN(10)")).magnitude


def test_dominance_rules_on_a_frequency_table_are_not_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write_micro(tmp_path, _records())
    job = MAGNITUDE_JOB.replace('|"Turnover"||', "|<FREQ>||")
    code, out, _ = _run(tmp_path, job, capsys=capsys)
    assert code == 1
    assert "not-run" in next(ln for ln in out.splitlines() if "<SAFETYRULE>" in ln)


def test_rounding_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write_micro(tmp_path, _records())
    job = ('<OPENMICRODATA> "firms.asc"\n<OPENMETADATA> "firms.rda"\n<SPECIFYTABLE> "Region""Size"|<FREQ>||\n'
           '<SAFETYRULE> FREQ(3,10)\n<READMICRODATA>\n<SUPPRESS> RND(1,5)\n<WRITETABLE> (1,2,,"r.csv")\n')
    code, out, _ = _run(tmp_path, job, capsys=capsys)
    assert code == 0, out
    r = pd.read_csv(tmp_path / "r.csv", dtype=str, keep_default_na=False)
    values = {(a, b): float(v) for a, b, v in r.itertuples(index=False)}
    assert all(v % 5 == 0 for v in values.values())
    sizes = sorted({b for _, b in values} - {"Total"})
    for region in {a for a, _ in values}:  # additive along Size
        assert values[(region, "Total")] == sum(values[(region, s)] for s in sizes)


def test_cell_key_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write_micro(tmp_path, _records())
    assert main(["ptable", "--max-noise", "2", "--variance", "1", "--format", "tau-argus",
                 "--out", str(tmp_path / "pt.txt")]) == 0
    job = ('<OPENMICRODATA> "firms.asc"\n<OPENMETADATA> "firms.rda"\n<SPECIFYTABLE> "Region""Size"|<FREQ>||\n'
           '<SAFETYRULE>\n<READMICRODATA>\n<SUPPRESS> CKM(1) "pt.txt"\n<WRITETABLE> (1,7,,"c.csv")\n'
           '<WRITETABLE> (1,7,AO+,"c_private.csv")\n')
    capsys.readouterr()
    code, out, _ = _run(tmp_path, job, capsys=capsys)
    assert code == 0, out
    lines = (tmp_path / "c_private.csv").read_text().splitlines()
    diffs = [abs(float(x.split(",")[-2]) - float(x.split(",")[-1])) for x in lines]
    assert max(diffs) <= 2 and any(d > 0 for d in diffs)  # noise from the p-table, at most its maximum
    assert stat.S_IMODE(os.stat(tmp_path / "c_private.csv").st_mode) == 0o600
    assert len((tmp_path / "c.csv").read_text().splitlines()[0].split(",")) == 3  # codes and the published value


def test_bad_job_one_line_and_nothing_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write_micro(tmp_path, _records())
    job = ('<OPENMICRODATA> "nowhere.asc"\n<OPENMETADATA> "firms.rda"\n<SPECIFYTABLE> "Region"|<FREQ>||\n'
           '<WRITETABLE> (1,2,,"w.csv")\n')
    code, _out, err = _run(tmp_path, job, capsys=capsys)
    assert code == 2 and err.count("\n") == 1 and "job.arb:1: <OPENMICRODATA> file:" in err
    assert not (tmp_path / "w.csv").exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    job = '<OPENMICRODATA> "firms.asc"\n<WRITETABLE> (1,2,,"no/such/dir/w.csv")\n'
    code, _, err = _run(tmp_path, job, capsys=capsys)
    assert code == 2 and "job.arb:2: <WRITETABLE> file: its folder does not exist" in err


def test_digit_and_tree_recodes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    frame = _records()
    _write_micro(tmp_path, frame)
    (tmp_path / "tree.grc").write_text("<TREERECODE>\nS\n")
    job = ('<OPENMICRODATA> "firms.asc"\n<OPENMETADATA> "firms.rda"\n<SPECIFYTABLE> "Region"|<FREQ>||\n'
           '<SAFETYRULE> FREQ(1,10)\n<SPECIFYTABLE> "Region"|<FREQ>||\n<SAFETYRULE> FREQ(1,10)\n<READMICRODATA>\n'
           '<RECODE> 1, Region, 1\n<RECODE> 2, Region, "tree.grc"\n'
           '<WRITETABLE> (1,2,,"d.csv")\n<WRITETABLE> (2,2,,"t.csv")\n')
    code, out, _ = _run(tmp_path, job, capsys=capsys)
    assert code == 0, out
    d = pd.read_csv(tmp_path / "d.csv", dtype=str)
    t = pd.read_csv(tmp_path / "t.csv", dtype=str)
    parent = {c.strip(): r for r, cs in REGIONS.items() for c in cs}
    n_north = int(sum(parent[r] == "N" for r in frame["Region"]))
    assert list(d["Region"]) == ["Total", "N", "S"] and int(d["Freq"][1]) == n_north
    assert list(t["Region"]) == ["Total", "N", "1", "2", "3", "S"]
    assert int(t["Freq"][5]) == len(frame) - n_north


def test_data_errors_name_file_line_and_variable_not_the_value(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    frame = _records()
    _write_micro(tmp_path, frame)
    lines = (tmp_path / "firms.asc").read_text().splitlines()
    lines[4] = "77" + lines[4][2:]  # a region code the hierarchy does not hold
    (tmp_path / "firms.asc").write_text("\n".join(lines) + "\n")
    job = ('<OPENMICRODATA> "firms.asc"\n<OPENMETADATA> "firms.rda"\n<SPECIFYTABLE> "Region"|<FREQ>||\n'
           '<SAFETYRULE> FREQ(3,10)\n<READMICRODATA>\n<SUPPRESS> MOD(1)\n<WRITETABLE> (1,2,,"o.csv")\n')
    code, _, err = _run(tmp_path, job, capsys=capsys)
    assert code == 2 and err.strip().endswith("firms.asc:5: Region: a code that is not a leaf of the variable's hierarchy")
    assert "77" not in err and not (tmp_path / "o.csv").exists()
    _write_micro(tmp_path, frame)
    (tmp_path / "prior.hst").write_text(f"N;{frame['Size'][0]};U\nQ;{frame['Size'][0]};S\n")
    job2 = job.replace("<SUPPRESS>", '<APRIORI> "prior.hst", 1, ";"\n<SUPPRESS>').replace('"Region"|', '"Region""Size"|')
    code, _, err = _run(tmp_path, job2, capsys=capsys)
    assert code == 2 and err.strip().endswith("prior.hst:2: field 1: a code not in the table")
