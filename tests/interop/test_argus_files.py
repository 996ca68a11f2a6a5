"""tau-ARGUS files read as the manual describes them: one fixture per format feature (written
here, in the style of sdcTools/tauargus's data/ folder, not copied from it)."""

from __future__ import annotations

import pytest

from tabsafe.interop.argus.arb import Rule, read_arb
from tabsafe.interop.argus.asc import read_asc
from tabsafe.interop.argus.cdl import read_cdl
from tabsafe.interop.argus.grc import apply_rules, close_nodes, read_grc, truncate
from tabsafe.interop.argus.hrc import digit_hierarchy, read_hrc, write_hrc
from tabsafe.interop.argus.hst import AprioriEntry, read_hst
from tabsafe.interop.argus.rda import read_rda
from tabsafe.interop.argus.tab import read_tab

MICRO_FIXED = """\
Sector 1 4 "9999"
  <RECODEABLE>
  <HIERARCHICAL>
  <HIERLEVELS> 2 1 1
Zone 5 2 "99" "98"
  <RECODEABLE>
  <HIERARCHICAL>
  <HIERCODELIST> "zone.hrc"
  <HIERLEADSTRING> "#"
  <CODELIST> "zone.cdl"
  <DISTANCE> 1 2
Turnover 7 8
  <NUMERIC>
  <DECIMALS> 1
W 15 3
  <WEIGHT>
Ask 18 1
  <REQUEST> "1"
RK 19 6
  <RECORDKEY>
  <DECIMALS> 4
  <PFILE> "p.txt"
"""

TABLE_META = """\
<SEPARATOR> "|"
<SAFE> "V"
Zone "99"
  <RECODEABLE>
  <TOTCODE> "All"
Value
  <NUMERIC>
  <DECIMALS> 2
N
  <FREQUENCY>
St
  <STATUS>
Lo
  <NUMERIC> <LOWERPL>
"""


def test_rda_fixed_microdata_every_role() -> None:
    m = read_rda(MICRO_FIXED, kind="micro", source="f.rda")
    assert m.fixed and m.separator is None
    sector, zone, turnover, w, ask, rk = m.variables
    assert (sector.start, sector.length, sector.missing, sector.hierlevels) == (1, 4, ("9999",), (2, 1, 1))
    assert (zone.missing, zone.hierfile, zone.leadstring, zone.codelist, zone.distance) == (
        ("99", "98"), "zone.hrc", "#", "zone.cdl", (1, 2))
    assert turnover.numeric and not turnover.recodeable and turnover.decimals == 1
    assert [w.role, ask.role, rk.role] == ["weight", "request", "recordkey"]
    assert ask.request_codes == ("1",) and rk.pfile == "p.txt" and rk.decimals == 4


def test_rda_free_microdata_and_ckm_options() -> None:
    text = '<SEPARATOR> ","\nA 2\n  <RECODEABLE>\nS 6\n  <NUMERIC>\n  <CKM> t(2)\n  <INCLUDEZEROS> Y\n' \
           '  <PARITY> N\n  <SCALING> F(0.1,0.2,100,2,0.5)\n  <SEPARATION> N\nK 8\n  <RECORDKEY>\n' \
           '  <PFILE_FREQ> "f.txt"\n  <PFILE_CONT> "c.txt"\n  <PFILE_SEP> "s.txt"\n'
    m = read_rda(text, kind="micro")
    assert m.separator == "," and not m.fixed
    s = m.variable("s")  # names compare without case, as in tau-ARGUS
    assert (s.ckm, s.includezeros, s.parity, s.separation, s.scaling) == ("T(2)", True, False, False,
                                                                           "F(0.1,0.2,100,2,0.5)")
    assert (m.variable("K").pfile, m.variable("K").pfile_cont, m.variable("K").pfile_sep) == ("f.txt", "c.txt", "s.txt")


def test_rda_table_metadata_roles_and_status_letters() -> None:
    m = read_rda(TABLE_META, kind="table")
    assert m.separator == "|" and m.status_letters == ("V", "U", "P")
    assert m.variable("Zone").total_code == "All" and m.variable("Zone").missing == ("99",)
    assert [v.role for v in m.variables] == [None, None, "frequency", "status", "lowerpl"]


def test_asc_fixed_and_free() -> None:
    meta = read_rda(MICRO_FIXED, kind="micro")
    line = "1101" + " 2" + "   123.5" + " 10" + "1" + "0.1234"
    records = read_asc(line + "\n" + "9999" + "99" + "        " + "  1" + "0" + "0.5000" + "\n", meta)
    assert records.column("Sector").to_pylist() == ["1101", "9999"]
    assert records.column("Zone").to_pylist() == ["2", "99"]  # padded codes are trimmed
    assert records.column("Turnover").to_pylist() == [123.5, None]  # an empty number is missing
    assert records.column("RK").to_pylist() == [0.1234, 0.5]
    free = read_rda('<SEPARATOR> ";"\nA 3\n  <RECODEABLE>\nV 8\n  <NUMERIC>\n', kind="micro")
    got = read_asc('"x;y";1,5\nb;2\n', free)
    assert got.column("A").to_pylist() == ["x;y", "b"] and got.column("V").to_pylist() == [1.5, 2.0]


def test_tab_decimal_comma_quotes_and_statuses() -> None:
    meta = read_rda(TABLE_META, kind="table")
    data = read_tab('"All"|10,25|3|V|0\n" 1"|7.5|2|U|1,5\n"2"|2,75|1|M|0\n', meta)
    assert data.columns["Zone"] == ("All", "1", "2")
    assert data.columns["Value"] == (10.25, 7.5, 2.75)
    assert data.columns["St"] == ("V", "U", "M") and data.columns["Lo"] == (0.0, 1.5, 0.0)


def test_hrc_lead_string_padding_and_missing_codes() -> None:
    h = read_hrc("N\n# 1\n# 2\nS \n#10\n##101\n", lead="#", extra=("99",))
    assert h.order == ("Total", "N", "1", "2", "S", "10", "101", "99")
    assert h.parents["101"] == "10" and h.parents["99"] == "Total"
    assert write_hrc(h, lead="#", width=3).splitlines()[:2] == ["  N", "#  1"]


def test_digit_hierarchy_levels() -> None:
    h = digit_hierarchy(["1101", "1102", "1201", "2101", "9999"], (2, 1, 1), missing=("9999",))
    assert h.parents["1101"] == "110" and h.parents["110"] == "11" and h.parents["11"] == "Total"
    assert h.parents["9999"] == "Total"
    assert set(h.leaves) == {"1101", "1102", "1201", "2101", "9999"}


def test_cdl_labels() -> None:
    assert read_cdl(" 1,North, upper\n2,South\n") == {"1": "North, upper", "2": "South"}


def test_grc_rules_ranges_and_tau_ordering() -> None:
    r = read_grc("A : 1-9, 12\nB : 10-11\nC : 13-\n<MISSING> 99\n")
    assert r.missing == ("99",)
    codes = ["1", "2", "9", "10", "11", "12", "13", "20"]
    # codes compare right-aligned, as tau-ARGUS compares them: 9 < 10
    assert apply_rules(r, codes, width=2) == {"1": "A", "2": "A", "9": "A", "10": "B", "11": "B", "12": "A",
                                             "13": "C", "20": "C"}
    assert apply_rules(read_grc("L : -3\n"), ["1", "3", "4"], width=1) == {"1": "L", "3": "L", "4": "4"}


def test_tree_recode_and_digit_truncation() -> None:
    h = read_hrc("A\n@1\n@2\nB\n@3\n@@31\n@@32\n")
    closed, mapping = close_nodes(h, read_grc("<TREERECODE>\nB\n").tree)
    assert closed.order == ("Total", "A", "1", "2", "B") and mapping["31"] == "B" and mapping["1"] == "1"
    nested, mapping3 = close_nodes(h, ["3", "B"])  # a closed node inside a closed node: the outer one counts
    assert nested.order == closed.order and mapping3["31"] == "B"
    top, mapping2 = truncate(h, 1)
    assert top.order == ("Total", "A", "B") and mapping2["32"] == "B" and mapping2["2"] == "A"


def test_hst_every_action() -> None:
    text = "a;1;S\na;2;u\nb;1;P\nb;2;M\nT;T;ML\na;1;C;5\na;2;W;2,5\nb;1;PL;1;2\nb;2;AB;0;9\n"
    entries = read_hst(text, separator=";", dimensions=2)
    assert [e.action for e in entries] == ["S", "U", "P", "M", "ML", "C", "W", "PL", "AB"]
    assert entries[6] == AprioriEntry(("a", "2"), "W", (2.5,)) and entries[7].values == (1.0, 2.0)


def test_arb_every_command() -> None:
    text = """// a job
<OPENMICRODATA> "d.asc"
<OPENMETADATA> "d.rda"
<SPECIFYTABLE> "A""B"|"V"|"S"|-1,2.5
<SAFETYRULE> P(15,2)|NK(3,75)|FREQ(3,20)|REQ(30,30,3,10)|ZERO(5)|WGT(1)|MIS(0)|MAN(20)
<SPECIFYTABLE> "A"|<FREQ>||
<SAFETYRULE>
<READMICRODATA>
<APRIORI> "a.hst", 1, ";", 0, 1
<RECODE> 1, A, "a.grc"
<RECODE> 2, A, 2
<SOLVER> FREE
<SUPPRESS> OPT(1,5)
<SUPPRESS> CKM(2) "ptable.txt"
<WRITETABLE> (1,2,AS+FL-QU+,"out.csv")
<VERSIONINFO> "v.txt"
<CLEAR>
<OPENTABLEDATA> "t.tab"
<OPENMETADATA> "t.rda"
<SPECIFYTABLE> "A"|"V"
<READTABLE> 2F
<GOINTERACTIVE>
"""
    cmds = [c for c in read_arb(text) if c.keyword != "//"]
    spec = cmds[2].args
    assert spec == (("A", "B"), "V", "S", "-1", "2.5")
    assert cmds[3].args[0] == Rule("P", (15.0, 2.0)) and len(cmds[3].args) == 8
    assert cmds[4].args[1] == "<FREQ>" and cmds[5].args == ()
    assert cmds[7].args == ("a.hst", 1, ";", False, True)
    assert cmds[9].args == (2, "A", "2")
    assert cmds[11].args == ("OPT", 1, (5.0,), "") and cmds[12].args == ("CKM", 2, (), '"ptable.txt"')
    assert cmds[13].args == (1, 2, (("AS", True), ("FL", False), ("QU", True)), "out.csv")
    assert cmds[19].args == (2, False)


@pytest.mark.parametrize("text", ["<READTABLE>", "<READTABLE> 1", "<READTABLE> 0T"])
def test_arb_readtable_forms(text: str) -> None:
    assert read_arb(text)[0].keyword == "READTABLE"


def test_ptable_with_the_ptable_packages_earlier_column_names(tmp_path) -> None:
    from tabsafe.protect.ptable.table import read_ptable

    path = tmp_path / "p.txt"
    path.write_text('"i";"j";"p_ij";"v";"p_ij_ub"\n0;0;1;0;1\n1;0;0.5;-1;0.5\n1;1;0.25;0;0.75\n1;2;0.25;1;1\n')
    table = read_ptable(path)
    assert table.n_rows == 4 and table.column("p").tolist() == [1.0, 0.5, 0.25, 0.25]
