"""Malformed tau-ARGUS files: one line naming file, line and field, never the file's content."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from tabsafe.errors import InputError
from tabsafe.interop.argus.arb import read_arb
from tabsafe.interop.argus.asc import read_asc
from tabsafe.interop.argus.cdl import read_cdl
from tabsafe.interop.argus.grc import read_grc
from tabsafe.interop.argus.hrc import read_hrc
from tabsafe.interop.argus.hst import read_hst
from tabsafe.interop.argus.rda import read_rda
from tabsafe.interop.argus.tab import read_tab

SECRET = "S3CR3T"  # stands for a confidential value: it must never appear in a message

TABLE = read_rda('<SEPARATOR> ";"\nA\n  <RECODEABLE>\n  <TOTCODE> "T"\nV\n  <NUMERIC>\nS\n  <STATUS>\n', kind="table")
FIXED = read_rda("A 1 2\n  <RECODEABLE>\nV 3 4\n  <NUMERIC>\n", kind="micro")
FREE = read_rda('<SEPARATOR> ";"\nA 2\n  <RECODEABLE>\nV 4\n  <NUMERIC>\n', kind="micro")

CASES: list[tuple[str, Callable[[str], object], str, int, str]] = [
    # (file, reader, text, line, field)
    ("m.rda", lambda t: read_rda(t, kind="micro", source="m.rda"), "A 1 2\n  <RECODEABLE>\n  <FOO>\n", 3, "keyword"),
    ("m.rda", lambda t: read_rda(t, kind="micro", source="m.rda"), f"A {SECRET} 2\n  <RECODEABLE>\n", 1, "start column"),
    ("m.rda", lambda t: read_rda(t, kind="micro", source="m.rda"), "A 1\n  <RECODEABLE>\n", 1, "variable"),
    ("m.rda", lambda t: read_rda(t, kind="micro", source="m.rda"), "A 1 2\n  <RECODEABLE>\n  <HIERLEVELS> 1 2\n", 3,
     "<HIERLEVELS>"),
    ("m.rda", lambda t: read_rda(t, kind="micro", source="m.rda"), "A 1 2\n  <RECODEABLE>\nA 3 2\n  <RECODEABLE>\n", 3,
     "variable"),
    ("m.rda", lambda t: read_rda(t, kind="micro", source="m.rda"), "  <RECODEABLE>\nA 1 2\n", 1, "<RECODEABLE>"),
    ("m.rda", lambda t: read_rda(t, kind="micro", source="m.rda"), f"A 1 2\n  <RECODEABLE>\n  <CKM> {SECRET}\n", 3, "<CKM>"),
    ("t.rda", lambda t: read_rda(t, kind="table", source="t.rda"), "A\n  <RECODEABLE>\nV\n  <NUMERIC>\n", 1, "<TOTCODE>"),
    ("t.rda", lambda t: read_rda(t, kind="table", source="t.rda"), 'A\n  <RECODEABLE>\n  <TOTCODE> "T"\n  <WEIGHT>\n', 4,
     "<WEIGHT>"),
    ("d.asc", lambda t: read_asc(t, FIXED, source="d.asc"), "ab1234\nc\n", 2, "A (columns 1-2)"),
    ("d.asc", lambda t: read_asc(t, FIXED, source="d.asc"), f"ab{SECRET[:4]}\n", 1, "field 2 (V)"),
    ("d.asc", lambda t: read_asc(t, FREE, source="d.asc"), f"a;1\nb;2;{SECRET}\n", 2, "record"),
    ("d.asc", lambda t: read_asc(t, FREE, source="d.asc"), f'a;1\n"{SECRET};2\n', 2, "field 1"),
    ("t.tab", lambda t: read_tab(t, TABLE, source="t.tab"), f"T;1;S\nx;{SECRET};S\n", 2, "field 2 (V)"),
    ("t.tab", lambda t: read_tab(t, TABLE, source="t.tab"), "T;1;S\nx;2;Q\n", 2, "field 3 (S)"),
    ("t.tab", lambda t: read_tab(t, TABLE, source="t.tab"), f"T;1;S;{SECRET}\n", 1, "cell"),
    ("a.hst", lambda t: read_hst(t, separator=";", dimensions=2, source="a.hst"), f"a;b;S\na;{SECRET}\n", 2, "field 3"),
    ("a.hst", lambda t: read_hst(t, separator=";", dimensions=2, source="a.hst"), f"a;b;{SECRET}\n", 1,
     "field 3 (action)"),
    ("a.hst", lambda t: read_hst(t, separator=";", dimensions=2, source="a.hst"), f"a;b;PL;1;{SECRET}\n", 1, "field 5"),
    ("a.hst", lambda t: read_hst(t, separator=";", dimensions=1, source="a.hst"), "a;C\n", 1, "field 3"),
    ("h.hrc", lambda t: read_hrc(t, source="h.hrc"), f"A\n@@{SECRET}\n", 2, "level"),
    ("h.hrc", lambda t: read_hrc(t, source="h.hrc"), f"{SECRET}\nB\n@{SECRET}\n", 3, "code"),
    ("h.hrc", lambda t: read_hrc(t, source="h.hrc"), "A\n@\n", 2, "code"),
    ("c.cdl", lambda t: read_cdl(t, source="c.cdl"), f"1,a\n{SECRET}\n", 2, "line"),
    ("c.cdl", lambda t: read_cdl(t, source="c.cdl"), f"1,a\n1,{SECRET}\n", 2, "code"),
    ("r.grc", lambda t: read_grc(t, source="r.grc"), f"A : 1\n{SECRET}\n", 2, "rule"),
    ("r.grc", lambda t: read_grc(t, source="r.grc"), "A : 1, 3-\nB : 4--5\n", 2, "source 1"),
    ("j.arb", lambda t: read_arb(t, source="j.arb"), f"<OPENMICRODATA> \"a\"\n<FOO> {SECRET}\n", 2, "command"),
    ("j.arb", lambda t: read_arb(t, source="j.arb"), f"<SAFETYRULE> NK(3,75)|XX({SECRET})\n", 1, "<SAFETYRULE> rule 2"),
    ("j.arb", lambda t: read_arb(t, source="j.arb"), "<SAFETYRULE> NK(3)\n", 1, "<SAFETYRULE> rule 1 (NK)"),
    ("j.arb", lambda t: read_arb(t, source="j.arb"), '<WRITETABLE> (1,9,AS+,"x")\n', 1, "<WRITETABLE> format"),
    ("j.arb", lambda t: read_arb(t, source="j.arb"), '<WRITETABLE> (1,2,ZZ+,"x")\n', 1, "<WRITETABLE> options"),
    ("j.arb", lambda t: read_arb(t, source="j.arb"), f"<SUPPRESS> {SECRET}(1)\n", 1, "<SUPPRESS>"),
    ("j.arb", lambda t: read_arb(t, source="j.arb"), "<SUPPRESS> HYPER(1)\n", 1, "<SUPPRESS> method"),
    ("j.arb", lambda t: read_arb(t, source="j.arb"), "<SPECIFYTABLE> |\"V\"\n", 1, "<SPECIFYTABLE>"),
    ("j.arb", lambda t: read_arb(t, source="j.arb"), "<APRIORI> \"a.hst\", x, \";\"\n", 1, "<APRIORI> table"),
    ("j.arb", lambda t: read_arb(t, source="j.arb"), f"{SECRET}\n", 1, "command"),
]


@pytest.mark.parametrize(("name", "reader", "text", "line", "field"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_one_line_naming_file_line_and_field(name: str, reader: Callable[[str], object], text: str, line: int,
                                             field: str) -> None:
    with pytest.raises(InputError) as err:
        reader(text)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"{name}:{line}: {field}: "), message
    assert SECRET not in message and SECRET[:4] not in message


def test_whole_file_errors_name_the_file() -> None:
    for reader, text in [(lambda t: read_cdl(t, source="c.cdl"), "\n"), (lambda t: read_hrc(t, source="c.cdl"), " \n"),
                         (lambda t: read_rda(t, kind="micro", source="c.cdl"), "A 1 2\n")]:
        with pytest.raises(InputError, match=re.escape("c.cdl: ")):
            reader(text)
