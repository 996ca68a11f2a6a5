"""tau-ARGUS batch files (``.arb``): the commands of a job, parsed into values and written back.

Source: the tau-ARGUS manual ("Batch processing") and the batch reader of sdcTools/tauargus
(``batch.java``), which fixes the syntax where the manual is loose. One command per line,
``//`` starts a comment. :func:`read_arb` gives :class:`Command` values whose ``args`` are, per
keyword:

=================== ==============================================================
``OPENMICRODATA``   ``(path,)`` — also ``OPENTABLEDATA``, ``OPENMETADATA``, ``LOGBOOK``,
                    ``VERSIONINFO``
``SPECIFYTABLE``    ``(explanatory, response, shadow, cost, lambda)``: a tuple of
                    names, then names ("" when absent; response ``<FREQ>`` for counts;
                    cost a variable or ``-1`` freq, ``-2`` unity, ``-3`` distance)
``SAFETYRULE``      a tuple of :class:`Rule` (``P``, ``NK``, ``FREQ``, ``REQ``, ``ZERO``,
                    ``WGT``, ``MIS``, ``MAN``); empty: use the given statuses
``READTABLE``       ``(additivity, keep_status)``: 0 check, 1 compute totals, 2 none
``APRIORI``         ``(path, table, separator, ignore_error, expand_trivial)``
``RECODE``          ``(table, variable, file)`` — ``file`` a ``.grc`` file or a digit
``SUPPRESS``        ``(method, table, parameters, rest)``: ``GH``, ``MOD``, ``OPT``, ``NET``,
                    ``RND``, ``CTA``, ``CKM``; ``rest`` is CKM's p-table part
``WRITETABLE``      ``(table, format, options, path)``: format 1–7, options ``(("AS", True),…)``
``SOLVER``          ``(name, licence)``
=================== ==============================================================

Other keywords take no argument (``READMICRODATA``, ``GOINTERACTIVE``, ``CLEAR``, ``SILENT``,
``ANCO``, ``COVER``, ``JJ``). Comments are kept (keyword ``//``) so a job reads back whole.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tabsafe.interop.argus._text import fail, integer, number, quote

__all__ = ["FORMATS", "KEYWORDS", "OPTIONS", "Command", "Rule", "read_arb", "write_arb"]

#: WRITETABLE formats, numbered as in the batch file
FORMATS = {1: "csv", 2: "pivot-csv", 3: "code-value", 4: "sbs", 5: "intermediate", 6: "jj", 7: "ckm"}
#: WRITETABLE options (two letters, then + or -)
OPTIONS = ("HL", "SO", "AR", "HI", "AS", "SE", "FL", "QU", "TR", "AO", "AD", "AC")
#: safety rules and how many numbers each takes (a range: at least, at most)
RULES = {"P": (1, 3), "NK": (2, 2), "FREQ": (2, 2), "REQ": (4, 4), "ZERO": (1, 1), "WGT": (1, 1),
         "MIS": (1, 1), "MAN": (1, 1)}
SUPPRESS = ("GH", "MOD", "OPT", "NET", "RND", "CTA", "CKM")


@dataclass(frozen=True)
class Rule:
    """One safety rule: ``NK(3,75)`` is ``Rule("NK", (3, 75))``."""

    kind: str
    values: tuple[float, ...]

    def text(self) -> str:
        return f"{self.kind}({','.join(_num(v) for v in self.values)})"


@dataclass(frozen=True)
class Command:
    """One line of a batch file (module docstring for ``args``)."""

    keyword: str
    args: tuple[Any, ...] = ()
    line: int = field(default=0, compare=False)


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def _split_top(text: str, sep: str) -> list[str]:
    """Split at ``sep`` outside double quotes."""
    out, buf, inside = [], [], False
    for ch in text:
        if ch == '"':
            inside = not inside
        if ch == sep and not inside:
            out.append("".join(buf))
            buf = []
        else:
            buf.append(ch)
    out.append("".join(buf))
    return out


def _unquote(text: str) -> str:
    t = text.strip()
    return t[1:-1] if len(t) >= 2 and t[0] == t[-1] == '"' else t


def _path(rest: str, src: str, n: int, kw: str) -> tuple[Any, ...]:
    value = _unquote(rest)
    if not value:
        raise fail(src, n, kw, "needs a file name")
    return (value,)


def _specify(rest: str, src: str, n: int, kw: str) -> tuple[Any, ...]:
    parts = _split_top(rest, "|")
    expl = tuple(re.findall(r'"([^"]*)"|(\S+)', parts[0]))
    names = tuple((a or b).strip() for a, b in expl)
    if not names or not all(names):
        raise fail(src, n, kw, "needs the explanatory variables before the first '|'")
    if len(parts) < 2 or not _unquote(parts[1]):
        raise fail(src, n, kw, "needs a response variable (or <FREQ>) after the first '|'")
    if len(parts) > 4:
        raise fail(src, n, kw, "at most: explanatory|response|shadow|cost[,lambda]")
    response = _unquote(parts[1])
    shadow = _unquote(parts[2]) if len(parts) > 2 else ""
    cost_part = parts[3] if len(parts) > 3 else ""
    cost, _, lam = cost_part.partition(",")
    if lam.strip():
        number(lam, src, n, f"{kw} lambda")
    return names, response, shadow, _unquote(cost), lam.strip()


def _rules(rest: str, src: str, n: int, kw: str) -> tuple[Any, ...]:
    out = []
    for k, part in enumerate(_split_top(rest, "|"), 1):
        part = part.strip()
        if not part:
            continue
        m = re.fullmatch(r"([A-Za-z]+)\s*\(([^()]*)\)", part)
        if not m:
            raise fail(src, n, f"{kw} rule {k}", "needs NAME(numbers)")
        kind = m.group(1).upper()
        if kind not in RULES:
            raise fail(src, n, f"{kw} rule {k}", "not a rule (P, NK, FREQ, REQ, ZERO, WGT, MIS, MAN)")
        values = tuple(number(x, src, n, f"{kw} rule {k}") for x in m.group(2).split(",") if x.strip())
        low, high = RULES[kind]
        if not low <= len(values) <= high:
            raise fail(src, n, f"{kw} rule {k} ({kind})", f"takes {low}" + (f" to {high}" if high > low else "")
                       + " numbers")
        if kind in {"WGT", "MIS"} and values[0] not in (0, 1):
            raise fail(src, n, f"{kw} rule {k} ({kind})", "takes 0 or 1")
        out.append(Rule(kind, values))
    return tuple(out)


def _read_table(rest: str, src: str, n: int, kw: str) -> tuple[Any, ...]:
    m = re.fullmatch(r"\s*([012]?)\s*([TtFf]?)\s*", rest)
    if not m:
        raise fail(src, n, kw, "takes 0, 1 or 2 and an optional T or F")
    return int(m.group(1) or 0), (m.group(2).upper() == "T") if m.group(2) else None


def _flag(text: str, src: str, n: int, where: str) -> bool | None:
    t = text.strip()
    if not t:
        return None
    if t not in {"0", "1"}:
        raise fail(src, n, where, "takes 0 or 1")
    return t == "1"


def _apriori(rest: str, src: str, n: int, kw: str) -> tuple[Any, ...]:
    parts = _split_top(rest, ",")
    if len(parts) < 3:
        raise fail(src, n, kw, 'needs "file", table, "separator"')
    path = _unquote(parts[0])
    table = integer(parts[1], src, n, f"{kw} table")
    sep = _unquote(parts[2])
    if not path or not sep:
        raise fail(src, n, kw, "needs a file and a separator")
    ignore = _flag(parts[3], src, n, f"{kw} ignore errors") if len(parts) > 3 else None
    expand = _flag(parts[4], src, n, f"{kw} expand trivial levels") if len(parts) > 4 else None
    return path, table, sep, ignore, expand


def _recode(rest: str, src: str, n: int, kw: str) -> tuple[Any, ...]:
    parts = [p.strip() for p in _split_top(rest, ",")]
    if len(parts) != 3:
        raise fail(src, n, kw, "needs table, variable, file (or a level digit)")
    return integer(parts[0], src, n, f"{kw} table"), _unquote(parts[1]), _unquote(parts[2])


def _suppress(rest: str, src: str, n: int, kw: str) -> tuple[Any, ...]:
    m = re.fullmatch(r"\s*([A-Za-z]+)\s*\(([^()]*)\)(.*)", rest)
    if not m:
        raise fail(src, n, kw, "needs METHOD(table, …)")
    method = m.group(1).upper()
    if method not in SUPPRESS:
        raise fail(src, n, f"{kw} method", "not GH, MOD, OPT, NET, RND, CTA or CKM")
    args = [a.strip() for a in m.group(2).split(",")]
    table = integer(args[0], src, n, f"{kw} table")
    params = tuple(number(a, src, n, f"{kw} parameter {i}") for i, a in enumerate(args[1:], 2) if a)
    return method, table, params, m.group(3).strip()


def _writetable(rest: str, src: str, n: int, kw: str) -> tuple[Any, ...]:
    m = re.fullmatch(r"\s*\((.*)\)\s*", rest)
    if not m:
        raise fail(src, n, kw, '(table, format, options, "file")')
    parts = [p.strip() for p in _split_top(m.group(1), ",")]
    if len(parts) != 4:
        raise fail(src, n, kw, 'needs (table, format, options, "file")')
    table = integer(parts[0], src, n, f"{kw} table")
    fmt = integer(parts[1], src, n, f"{kw} format")
    if fmt not in FORMATS:
        raise fail(src, n, f"{kw} format", "not 1 to 7")
    opts = parts[2].upper().replace(" ", "")
    pairs = re.findall(r"([A-Z]{2})([+-])", opts)
    if "".join(a + b for a, b in pairs) != opts:
        raise fail(src, n, f"{kw} options", "two letters and + or - each (AS+FL-)")
    for code, _ in pairs:
        if code not in OPTIONS:
            raise fail(src, n, f"{kw} options", "an unknown option")
    path = _unquote(parts[3])
    if not path:
        raise fail(src, n, f"{kw} file", "empty")
    return table, fmt, tuple((a, b == "+") for a, b in pairs), path


def _solver(rest: str, src: str, n: int, kw: str) -> tuple[Any, ...]:
    parts = _split_top(rest, ",")
    name = _unquote(parts[0]).upper()
    if name not in {"FREE", "CPLEX", "XPRESS"}:
        raise fail(src, n, kw, "FREE, CPLEX or XPRESS")
    return name, _unquote(parts[1]) if len(parts) > 1 else ""


def _none(rest: str, src: str, n: int, kw: str) -> tuple[Any, ...]:
    if rest.strip() and not rest.strip().startswith("//"):
        raise fail(src, n, kw, "takes no argument")
    return ()


_PARSE: dict[str, Callable[[str, str, int, str], tuple[Any, ...]]] = {
    "OPENMICRODATA": _path, "OPENTABLEDATA": _path, "OPENMETADATA": _path, "LOGBOOK": _path, "VERSIONINFO": _path,
    "SPECIFYTABLE": _specify, "SAFETYRULE": _rules, "READTABLE": _read_table, "APRIORI": _apriori,
    "APRIORY": _apriori, "RECODE": _recode, "SUPPRESS": _suppress, "WRITETABLE": _writetable, "SOLVER": _solver,
    "READMICRODATA": _none, "GOINTERACTIVE": _none, "CLEAR": _none, "SILENT": _none, "ANCO": _none,
    "COVER": _none, "JJ": _none,
}
KEYWORDS = tuple(_PARSE)


def read_arb(text: str, *, source: str = "job.arb") -> list[Command]:
    """The commands of a batch file's text."""
    out: list[Command] = []
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith(("//", "\\\\")):
            out.append(Command("//", (line[2:],), n))
            continue
        m = re.match(r"<([A-Za-z]+)>(.*)", line)
        if not m:
            raise fail(source, n, "command", "a line must start with <KEYWORD> or //")
        keyword = m.group(1).upper()
        if keyword not in _PARSE:
            raise fail(source, n, "command", "not a batch keyword tabsafe knows")
        if keyword == "APRIORY":
            keyword = "APRIORI"
        out.append(Command(keyword, _PARSE[keyword](m.group(2), source, n, f"<{keyword}>"), n))
    return out


def _format(cmd: Command) -> str:
    kw, a = cmd.keyword, cmd.args
    if kw == "//":
        return "//" + a[0]
    head = f"<{kw}>"
    if kw in {"OPENMICRODATA", "OPENTABLEDATA", "OPENMETADATA", "LOGBOOK", "VERSIONINFO"}:
        return f"{head} {quote(a[0])}"
    if kw == "SPECIFYTABLE":
        names, response, shadow, cost, lam = a
        text = "".join(quote(x) for x in names) + "|" + quote(response) + "|"
        text += (quote(shadow) if shadow else "") + "|" + (quote(cost) if cost else "")
        return f"{head} {text}" + (f",{lam}" if lam else "")
    if kw == "SAFETYRULE":
        return f"{head} " + "|".join(r.text() for r in a)
    if kw == "READTABLE":
        return f"{head} {a[0]}" + ("" if a[1] is None else ("T" if a[1] else "F"))
    if kw == "APRIORI":
        path, table, sep, ignore, expand = a
        flags = [x for x in (ignore, expand)]
        tail = "" if ignore is None and expand is None else "," + ",".join("" if f is None else str(int(f)) for f in flags)
        return f"{head} {quote(path)}, {table}, {quote(sep)}{tail}"
    if kw == "RECODE":
        return f"{head} {a[0]}, {a[1]}, " + (a[2] if re.fullmatch(r"\d", a[2]) else quote(a[2]))
    if kw == "SUPPRESS":
        method, table, params, rest = a
        inner = ",".join([str(table), *(_num(p) for p in params)])
        return f"{head} {method}({inner})" + (f" {rest}" if rest else "")
    if kw == "WRITETABLE":
        table, fmt, opts, path = a
        return f"{head} ({table},{fmt},{''.join(c + ('+' if on else '-') for c, on in opts)},{quote(path)})"
    if kw == "SOLVER":
        return f"{head} {a[0]}" + (f",{quote(a[1])}" if a[1] else "")
    return head


def write_arb(commands: Sequence[Command]) -> str:
    """The text of a batch file (:func:`read_arb` reads it back to the same commands)."""
    return "".join(_format(c) + "\n" for c in commands)
