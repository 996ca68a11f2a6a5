"""Write → read round trips of every tau-ARGUS file tabsafe writes (hypothesis)."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from tabsafe.interop.argus.arb import Command, Rule, read_arb, write_arb
from tabsafe.interop.argus.asc import read_asc, write_asc
from tabsafe.interop.argus.cdl import read_cdl, write_cdl
from tabsafe.interop.argus.grc import Recode, RecodeRule, read_grc, write_grc
from tabsafe.interop.argus.hrc import read_hrc, write_hrc
from tabsafe.interop.argus.hst import AprioriEntry, read_hst, write_hst
from tabsafe.interop.argus.rda import Metadata, Variable, read_rda, write_rda
from tabsafe.interop.argus.tab import TabData, read_tab, write_tab
from tabsafe.model.hierarchy import Hierarchy

code = st.text(alphabet="ABCXYZ0123456789_", min_size=1, max_size=5)
name = st.text(alphabet="abcdefghijKLMN_", min_size=1, max_size=8)
label = st.text(alphabet="abc xyz,-.", min_size=0, max_size=12).map(str.strip)


@st.composite
def hierarchies(draw: st.DrawFn) -> Hierarchy:
    codes = draw(st.lists(code.filter(lambda c: c != "Total"), min_size=1, max_size=12, unique=True))
    parents: dict[str, str] = {}
    for i, c in enumerate(codes):
        parents[c] = "Total" if i == 0 else draw(st.sampled_from(["Total", *codes[:i]]))
    return Hierarchy.from_parents(parents)


@given(hierarchies(), st.sampled_from(["@", "#", "**"]), st.sampled_from([None, 6]))
def test_hrc(h: Hierarchy, lead: str, width: int | None) -> None:
    assert read_hrc(write_hrc(h, lead=lead, width=width), lead=lead) == h


@given(st.dictionaries(code, label, min_size=1, max_size=10))
def test_cdl(labels: dict[str, str]) -> None:
    assert read_cdl(write_cdl(labels)) == labels


source = st.one_of(code.map(lambda c: (c, c)), code.map(lambda c: (None, c)), code.map(lambda c: (c, None)),
                   st.tuples(code, code))


@given(st.one_of(
    st.builds(Recode, rules=st.lists(st.builds(RecodeRule, target=code, sources=st.lists(source, min_size=1,
                                                                                          max_size=4).map(tuple)),
                                     min_size=1, max_size=5).map(tuple),
              missing=st.lists(code, max_size=2).map(tuple), codelist=st.one_of(st.none(), code.map(lambda c: c + ".cdl"))),
    st.builds(Recode, tree=st.lists(code, min_size=1, max_size=5).map(tuple))))
def test_grc(recode: Recode) -> None:
    assert read_grc(write_grc(recode)) == recode


action = st.sampled_from(["S", "U", "P", "M", "ML", "C", "W", "PL", "AB"])


@st.composite
def entries(draw: st.DrawFn) -> list[AprioriEntry]:
    dims = draw(st.integers(1, 3))
    out = []
    for _ in range(draw(st.integers(1, 6))):
        a = draw(action)
        n = {"C": 1, "W": 1, "PL": 2, "AB": 2}.get(a, 0)
        values = tuple(draw(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=n, max_size=n)))
        out.append(AprioriEntry(tuple(draw(st.lists(code, min_size=dims, max_size=dims))), a, values))
    return out


@given(entries(), st.sampled_from([";", ",", "|"]))
def test_hst(items: list[AprioriEntry], sep: str) -> None:
    dims = len(items[0].codes)
    items = [e for e in items if len(e.codes) == dims]
    assert read_hst(write_hst(items, separator=sep), separator=sep, dimensions=dims) == items


@st.composite
def micro_metadata(draw: st.DrawFn) -> Metadata:
    fixed = draw(st.booleans())
    names = draw(st.lists(name, min_size=2, max_size=5, unique_by=str.lower))
    variables, start = [], 1
    for i, n in enumerate(names):
        length = draw(st.integers(1, 6))
        numeric = i > 0 and draw(st.booleans())
        v = Variable(name=n, start=start if fixed else None, length=length, recodeable=not numeric, numeric=numeric,
                     missing=tuple(draw(st.lists(code.map(lambda c, n=length: c[:n]), max_size=2))) if not numeric else (),
                     decimals=draw(st.one_of(st.none(), st.integers(0, max(length - 2, 0)))) if numeric else None,
                     total_code=draw(st.one_of(st.none(), code)),
                     distance=draw(st.one_of(st.none(), st.lists(st.integers(0, 9), min_size=1, max_size=5).map(tuple))),
                     codelist=draw(st.one_of(st.none(), st.just("c.cdl"))))
        if not numeric and draw(st.booleans()):
            v = Variable(**{**v.__dict__, "hierarchical": True, "hierfile": "h.hrc", "leadstring": "@"})
        variables.append(v)
        start += length
    return Metadata(kind="micro", variables=tuple(variables), separator=None if fixed else draw(st.sampled_from([";", ","])))


@given(micro_metadata())
def test_rda_micro(meta: Metadata) -> None:
    assert read_rda(write_rda(meta), kind="micro") == meta


@given(st.data())
def test_rda_table(data: st.DataObject) -> None:
    roles = ["frequency", "status", "shadow", "cost", "lowerpl", "upperpl", "maxscore"]
    chosen = data.draw(st.lists(st.sampled_from(roles), unique=True, max_size=5))
    variables = [Variable(name="A", recodeable=True, total_code=data.draw(code), missing=("99",)),
                 Variable(name="V", numeric=True, decimals=2)]
    variables += [Variable(name=f"r{i}", role=r, numeric=r in {"shadow", "cost", "lowerpl", "upperpl"})
                  for i, r in enumerate(chosen)]
    meta = Metadata(kind="table", variables=tuple(variables), separator=";", safe=data.draw(st.sampled_from([None, "V"])))
    assert read_rda(write_rda(meta), kind="table") == meta


@given(micro_metadata(), st.data())
def test_asc(meta: Metadata, data: st.DataObject) -> None:
    rows = data.draw(st.integers(1, 8))
    cols: dict[str, list[object]] = {}
    for v in meta.variables:
        width = v.length or 1
        if v.numeric:
            d = v.decimals or 0
            digits = width - d - 1 if d else width  # the integer part's digits that fit the columns
            cols[v.name] = [data.draw(st.integers(0, 10 ** (digits + d) - 1)) / 10 ** d for _ in range(rows)]
        else:
            cols[v.name] = [data.draw(code.map(lambda c, w=width: c[:w])) for _ in range(rows)]
    records = pa.table({k: pa.array(v, pa.float64() if meta.variable(k).numeric else pa.string()) for k, v in cols.items()})
    assert read_asc(write_asc(records, meta), meta).equals(records)


@given(st.lists(st.tuples(code, st.integers(0, 10**6), st.integers(0, 999), st.sampled_from("SUPME")), min_size=1,
                max_size=10))
def test_tab(cells: list[tuple[str, int, int, str]]) -> None:
    meta = Metadata(kind="table", separator=";", variables=(
        Variable(name="A", recodeable=True, total_code="Total"), Variable(name="V", numeric=True, decimals=2),
        Variable(name="F", role="frequency"), Variable(name="S", role="status")))
    data = TabData({"A": tuple(c[0] for c in cells), "V": tuple(c[1] / 100 for c in cells),
                    "F": tuple(float(c[2]) for c in cells), "S": tuple(c[3] for c in cells)})
    assert read_tab(write_tab(data, meta), meta) == data


rule = st.sampled_from([("NK", 2), ("FREQ", 2), ("ZERO", 1), ("MAN", 1), ("REQ", 4)]).flatmap(
    lambda kn: st.lists(st.integers(0, 99).map(float), min_size=kn[1], max_size=kn[1]).map(lambda v: Rule(kn[0], tuple(v))))
commands = st.one_of(
    st.builds(lambda p: Command("OPENMICRODATA", (p,)), code.map(lambda c: c + ".asc")),
    st.builds(lambda n, r, s: Command("SPECIFYTABLE", (tuple(n), r, s, "", "")),
              st.lists(name, min_size=1, max_size=3), st.one_of(name, st.just("<FREQ>")), st.one_of(st.just(""), name)),
    st.builds(lambda rs: Command("SAFETYRULE", tuple(rs)), st.lists(rule, max_size=4)),
    st.builds(lambda t, v, f: Command("RECODE", (t, v, f)), st.integers(1, 9), name,
              st.one_of(st.sampled_from("123"), code.map(lambda c: c + ".grc"))),
    st.builds(lambda m, t, p: Command("SUPPRESS", (m, t, tuple(float(x) for x in p), "")),
              st.sampled_from(["GH", "MOD", "OPT", "RND"]), st.integers(0, 5), st.lists(st.integers(0, 50), max_size=4)),
    st.builds(lambda t, f, o, p: Command("WRITETABLE", (t, f, tuple(o.items()), p)), st.integers(1, 5),
              st.integers(1, 7), st.dictionaries(st.sampled_from(["AS", "SE", "FL", "QU", "HL", "SO"]), st.booleans()),
              code.map(lambda c: c + ".csv")),
    st.builds(lambda p, t, s, a, b: Command("APRIORI", (p, t, s, a, b)), code.map(lambda c: c + ".hst"),
              st.integers(1, 5), st.sampled_from([";", ","]), st.one_of(st.none(), st.booleans()),
              st.one_of(st.none(), st.booleans())).filter(lambda c: not (c.args[3] is None and c.args[4] is not None)),
    st.sampled_from([Command("READMICRODATA"), Command("GOINTERACTIVE"), Command("READTABLE", (1, True)),
                     Command("READTABLE", (0, None)), Command("//", (" a comment",))]),
)


@given(st.lists(commands, min_size=1, max_size=12))
def test_arb(cmds: list[Command]) -> None:
    assert read_arb(write_arb(cmds)) == cmds
