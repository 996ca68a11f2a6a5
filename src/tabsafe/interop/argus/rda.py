"""tau-ARGUS metadata files (``.rda``): the variables of microdata or of a table, and their roles.

Source: the tau-ARGUS manual (sdcTools/tauargus, "Metadata file"), and the example files of that
repository's ``data/`` folder. An ``.rda`` file describes either microdata (``.asc``) or tabular
data (``.tab``); which one is said by the batch command that opens it, so the reader is told.

* **Microdata**, fixed format: ``NAME START LENGTH [MISSING1 [MISSING2]]`` per variable (1-based
  start column); free format (first line ``<SEPARATOR> ";"``): ``NAME LENGTH [MISSING…]``.
* **Tabular data**: ``NAME [MISSING…]``; ``<SEPARATOR>``, ``<SAFE>``, ``<UNSAFE>`` and
  ``<PROTECT>`` give the field separator and the status letters of the ``.tab`` file.

Each variable line is followed by keyword lines (``<RECODEABLE>``, ``<TOTCODE> "Total"``,
``<HIERARCHICAL>``, ``<HIERCODELIST> "region.hrc"``, ``<NUMERIC> <SHADOW>``, ``<RECORDKEY>``,
``<PFILE> "ptable.txt"``, ``<CKM> T(3)``…). :func:`read_rda` parses them into a
:class:`Metadata` value and :func:`write_rda` writes that value back (in a canonical order: what
one reads, the other writes to the same value).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from tabsafe.interop.argus._text import fail, integer, lines, quote, tokens

__all__ = ["ROLES", "Metadata", "Variable", "read_rda", "write_rda"]

#: What a variable is besides categorical (``recodeable``) and/or numeric.
ROLES = ("weight", "holding", "request", "recordkey", "shadow", "cost", "lowerpl", "upperpl",
         "frequency", "maxscore", "status")
_NUMERIC_ROLE = {"<SHADOW>": "shadow", "<COST>": "cost", "<COSTVAR>": "cost", "<LOWERPL>": "lowerpl",
                 "<UPPERPL>": "upperpl"}
_CKM = re.compile(r"(?:[NMDV]|T\(\d+\))\Z")
_SCALING = re.compile(r"[FN]\(\s*-?[\d.eE+-]+(?:\s*,\s*-?[\d.eE+-]+)*\s*\)\Z")


@dataclass(frozen=True)
class Variable:
    """One variable of an ``.rda`` file (fields the file does not give are ``None``/empty).

    Attributes:
        name: the variable's name.
        start: first column (1-based) in a fixed-format ``.asc`` file.
        length: width in the data file (microdata only).
        missing: up to two missing-value codes.
        recodeable: an explanatory (categorical) variable (``<RECODEABLE>``).
        numeric: a response variable (``<NUMERIC>``); both flags: categorical and numeric.
        role: one of :data:`ROLES` (weight, holding, request, record key, shadow, cost…).
        total_code: the code of the total (``<TOTCODE>``; tabular data).
        distance: the distance function (up to five integers).
        codelist: a codelist file (``.cdl``) with labels.
        hierarchical: the codes form a hierarchy (``<HIERARCHICAL>``).
        hierlevels: digits per level of a digit-split hierarchy (``<HIERLEVELS>``).
        hierfile: the hierarchy file (``.hrc``; ``<HIERCODELIST>``).
        leadstring: the string marking a level in the ``.hrc`` file (``@``).
        decimals: decimal places of a numeric variable.
        truncable: ``<TRUNCABLE>``.
        request_codes: the codes of a request variable that ask for protection.
        pfile, pfile_cont, pfile_sep: p-table files of the cell key method (frequency,
            magnitude, magnitude small cells), on the record-key variable.
        ckm: the cell key method type of a numeric variable (``N``, ``M``, ``D``, ``V``, ``T(k)``).
        includezeros, parity, separation: the ``Y``/``N`` options of the magnitude CKM.
        scaling: the magnitude CKM's scaling (``F(σ0,σ1,x*,q,ε…)`` or ``N(σ1,ε…)``).
        line: the line of the variable in its file (for messages; not compared).
    """

    name: str
    start: int | None = None
    length: int | None = None
    missing: tuple[str, ...] = ()
    recodeable: bool = False
    numeric: bool = False
    role: str | None = None
    total_code: str | None = None
    distance: tuple[int, ...] | None = None
    codelist: str | None = None
    hierarchical: bool = False
    hierlevels: tuple[int, ...] | None = None
    hierfile: str | None = None
    leadstring: str | None = None
    decimals: int | None = None
    truncable: bool = False
    request_codes: tuple[str, ...] = ()
    pfile: str | None = None
    pfile_cont: str | None = None
    pfile_sep: str | None = None
    ckm: str | None = None
    includezeros: bool | None = None
    parity: bool | None = None
    scaling: str | None = None
    separation: bool | None = None
    line: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Metadata:
    """An ``.rda`` file: the data's layout and its variables.

    Attributes:
        kind: ``micro`` (describes an ``.asc`` file) or ``table`` (a ``.tab`` file).
        separator: the field separator of free-format data (``None``: fixed format).
        spss: the microdata are an SPSS file (``<SPSS>``; tabsafe does not read those).
        safe, unsafe, protect: the status letters of a ``.tab`` file (``None``: S, U, P).
        variables: the variables in file order.
        source: the file's name, for messages (not compared).
    """

    kind: str
    variables: tuple[Variable, ...]
    separator: str | None = None
    spss: bool = False
    safe: str | None = None
    unsafe: str | None = None
    protect: str | None = None
    source: str = field(default="metadata", compare=False)

    @property
    def fixed(self) -> bool:
        return self.kind == "micro" and self.separator is None and not self.spss

    def variable(self, name: str) -> Variable:
        """The variable called ``name`` (case-insensitive, as tau-ARGUS compares names)."""
        for v in self.variables:
            if v.name.lower() == name.lower():
                return v
        raise KeyError(name)

    def with_role(self, role: str) -> tuple[Variable, ...]:
        return tuple(v for v in self.variables if v.role == role)

    @property
    def status_letters(self) -> tuple[str, str, str]:
        return (self.safe or "S", self.unsafe or "U", self.protect or "P")


# ------------------------------------------------------------------ reading
_Handler = Callable[[Variable, list[str], str, int], Variable]


def _one(args: list[str], source: str, line: int, key: str) -> str:
    if len(args) != 1:
        raise fail(source, line, key, "needs exactly one value")
    return args[0]


def _none(args: list[str], source: str, line: int, key: str) -> None:
    if args:
        raise fail(source, line, key, "takes no value")


def _yes_no(args: list[str], source: str, line: int, key: str) -> bool:
    value = _one(args, source, line, key).upper()
    if value not in {"Y", "N"}:
        raise fail(source, line, key, "must be Y or N")
    return value == "Y"


def _set_role(v: Variable, role: str, source: str, line: int, key: str) -> Variable:
    if v.role is not None and v.role != role:
        raise fail(source, line, key, "a variable has one role (weight, holding, request, shadow…)")
    return replace(v, role=role)


def _numeric(v: Variable, args: list[str], source: str, line: int) -> Variable:
    if not args:
        return replace(v, numeric=True)
    if len(args) != 1 or args[0].upper() not in _NUMERIC_ROLE:
        raise fail(source, line, "<NUMERIC>", "may be followed only by <SHADOW>, <COSTVAR>, <LOWERPL> or <UPPERPL>")
    return _set_role(replace(v, numeric=True), _NUMERIC_ROLE[args[0].upper()], source, line, "<NUMERIC>")


def _ints(args: list[str], source: str, line: int, key: str, most: int) -> tuple[int, ...]:
    if not args or len(args) > most:
        raise fail(source, line, key, f"needs 1 to {most} whole numbers")
    values = tuple(integer(a, source, line, key) for a in args)
    if any(x < 0 for x in values):
        raise fail(source, line, key, "numbers must not be negative")
    return values


def _pattern(args: list[str], source: str, line: int, key: str, rx: re.Pattern[str]) -> str:
    value = "".join(args).upper()
    if not rx.match(value):
        raise fail(source, line, key, "malformed specification")
    return value


def _flag(key: str, **change: Any) -> _Handler:
    """A handler for a keyword without a value that sets ``change``."""
    def handle(v: Variable, a: list[str], s: str, n: int) -> Variable:
        _none(a, s, n, key)
        return replace(v, **change)
    return handle


_HANDLERS: dict[str, _Handler] = {
    "<RECODEABLE>": _flag("<RECODEABLE>", recodeable=True),
    "<RECODABLE>": _flag("<RECODABLE>", recodeable=True),
    "<TOTCODE>": lambda v, a, s, n: replace(v, total_code=_one(a, s, n, "<TOTCODE>").strip()),
    "<DISTANCE>": lambda v, a, s, n: replace(v, distance=_ints(a, s, n, "<DISTANCE>", 5)),
    "<CODELIST>": lambda v, a, s, n: replace(v, codelist=_one(a, s, n, "<CODELIST>")),
    "<HIERARCHICAL>": _flag("<HIERARCHICAL>", hierarchical=True),
    "<HIERLEVELS>": lambda v, a, s, n: replace(v, hierarchical=True, hierlevels=_ints(a, s, n, "<HIERLEVELS>", 10)),
    "<HIERCODELIST>": lambda v, a, s, n: replace(v, hierfile=_one(a, s, n, "<HIERCODELIST>")),
    "<HIERLEADSTRING>": lambda v, a, s, n: replace(v, leadstring=_one(a, s, n, "<HIERLEADSTRING>")),
    "<NUMERIC>": lambda v, a, s, n: _numeric(v, a, s, n),
    "<DECIMALS>": lambda v, a, s, n: replace(v, decimals=_ints(a, s, n, "<DECIMALS>", 1)[0]),
    "<TRUNCABLE>": _flag("<TRUNCABLE>", truncable=True),
    "<PFILE>": lambda v, a, s, n: replace(v, pfile=_one(a, s, n, "<PFILE>")),
    "<PFILE_FREQ>": lambda v, a, s, n: replace(v, pfile=_one(a, s, n, "<PFILE_FREQ>")),
    "<PFILE_CONT>": lambda v, a, s, n: replace(v, pfile_cont=_one(a, s, n, "<PFILE_CONT>")),
    "<PFILE_SEP>": lambda v, a, s, n: replace(v, pfile_sep=_one(a, s, n, "<PFILE_SEP>")),
    "<CKM>": lambda v, a, s, n: replace(v, ckm=_pattern(a, s, n, "<CKM>", _CKM)),
    "<INCLUDEZEROS>": lambda v, a, s, n: replace(v, includezeros=_yes_no(a, s, n, "<INCLUDEZEROS>")),
    "<PARITY>": lambda v, a, s, n: replace(v, parity=_yes_no(a, s, n, "<PARITY>")),
    "<SEPARATION>": lambda v, a, s, n: replace(v, separation=_yes_no(a, s, n, "<SEPARATION>")),
    "<SCALING>": lambda v, a, s, n: replace(v, scaling=_pattern(a, s, n, "<SCALING>", _SCALING)),
}
_ROLE_TAGS = {"<WEIGHT>": "weight", "<HOLDING>": "holding", "<RECORDKEY>": "recordkey",
              "<FREQUENCY>": "frequency", "<MAXSCORE>": "maxscore", "<STATUS>": "status"}
_HEADER_TAGS = {"<SEPARATOR>": "separator", "<SAFE>": "safe", "<UNSAFE>": "unsafe", "<PROTECT>": "protect"}
_MICRO_ONLY = {"<WEIGHT>", "<HOLDING>", "<REQUEST>", "<RECORDKEY>", "<TRUNCABLE>", "<PFILE>", "<PFILE_FREQ>",
               "<PFILE_CONT>", "<PFILE_SEP>", "<CKM>", "<INCLUDEZEROS>", "<PARITY>", "<SEPARATION>", "<SCALING>"}
_TABLE_ONLY = {"<FREQUENCY>", "<MAXSCORE>", "<STATUS>", "<SAFE>", "<UNSAFE>", "<PROTECT>"}


def _keyword(v: Variable, key: str, args: list[str], source: str, line: int) -> Variable:
    if key in _ROLE_TAGS:
        _none(args, source, line, key)
        return _set_role(v, _ROLE_TAGS[key], source, line, key)
    if key == "<REQUEST>":
        if not 1 <= len(args) <= 2:
            raise fail(source, line, key, "needs one or two request codes")
        return replace(_set_role(v, "request", source, line, key), request_codes=tuple(a.strip() for a in args))
    handler = _HANDLERS.get(key)
    if handler is None:
        raise fail(source, line, "keyword", "not a keyword of an .rda file")
    out = handler(v, args, source, line)
    if key == "<HIERLEVELS>" and out.length is not None and sum(out.hierlevels or ()) != out.length:
        raise fail(source, line, key, "the digits of the levels must add up to the variable's length")
    return out


def _variable_line(toks: list[str], kind: str, fixed: bool, source: str, line: int) -> Variable:
    name, rest = toks[0], toks[1:]
    start = length = None
    if kind == "micro":
        need = 2 if fixed else 1
        if len(rest) < need:
            raise fail(source, line, "variable", "needs " + ("a start column and a length" if fixed else "a length"))
        if fixed:
            start = integer(rest[0], source, line, "start column")
            if start < 1:
                raise fail(source, line, "start column", "must be 1 or more")
        length = integer(rest[need - 1], source, line, "length")
        if length < 0:
            raise fail(source, line, "length", "must not be negative")
        rest = rest[need:]
    if len(rest) > 2:
        raise fail(source, line, "missing values", "at most two")
    missing = tuple(m.strip() for m in rest)
    if length is not None and any(len(m) > length for m in rest):
        raise fail(source, line, "missing values", "longer than the variable's length")
    return Variable(name=name, start=start, length=length, missing=missing, line=line)


def read_rda(text: str, *, kind: str, source: str = "metadata.rda") -> Metadata:
    """Parse the text of an ``.rda`` file describing ``kind`` data (``micro`` or ``table``)."""
    if kind not in {"micro", "table"}:
        raise ValueError(f"kind must be 'micro' or 'table', not {kind!r}")
    header: dict[str, Any] = {}
    variables: list[Variable] = []
    for ln in lines(text):
        toks = tokens(ln.text, source, ln.number)
        key = toks[0].upper()
        if key in _HEADER_TAGS:
            if kind == "micro" and key != "<SEPARATOR>":
                raise fail(source, ln.number, key, "belongs to the metadata of a table, not of microdata")
            if kind == "micro" and variables:
                raise fail(source, ln.number, key, "must come before the first variable")
            header[_HEADER_TAGS[key]] = _one(toks[1:], source, ln.number, key)
        elif key == "<SPSS>":
            raise fail(source, ln.number, key, "SPSS system files are not read by tabsafe; export the data as text")
        elif key.startswith("<"):
            if not variables:
                raise fail(source, ln.number, key, "a keyword before the first variable")
            if key in (_TABLE_ONLY if kind == "micro" else _MICRO_ONLY):
                raise fail(source, ln.number, key, f"not allowed in the metadata of {kind}data"
                           if kind == "micro" else "not allowed in the metadata of a table")
            variables[-1] = _keyword(variables[-1], key, toks[1:], source, ln.number)
        else:
            fixed = kind == "micro" and "separator" not in header
            variables.append(_variable_line(toks, kind, fixed, source, ln.number))
    meta = Metadata(kind=kind, variables=tuple(variables), separator=header.get("separator"),
                    safe=header.get("safe"), unsafe=header.get("unsafe"), protect=header.get("protect"),
                    source=source)
    _verify(meta)
    return meta


def _verify(meta: Metadata) -> None:
    """The checks tau-ARGUS makes on reading metadata (Metadata.verify in its source)."""
    src = meta.source
    if not meta.variables:
        raise fail(src, None, "variables", "none declared")
    if not any(v.recodeable for v in meta.variables):
        raise fail(src, None, "variables", "no explanatory variable (<RECODEABLE>)")
    seen: dict[str, int] = {}
    for v in meta.variables:
        if v.name.lower() in seen:
            raise fail(src, v.line, "variable", f"the same name as the variable on line {seen[v.name.lower()]}")
        seen[v.name.lower()] = v.line
        if meta.fixed and v.length == 0:
            raise fail(src, v.line, "length", "must be at least 1 in fixed format")
        if v.hierlevels is not None and sum(v.hierlevels) == 0:
            raise fail(src, v.line, "<HIERLEVELS>", "the digits of the levels add up to 0")
        if v.hierarchical and v.hierlevels is None and not v.hierfile:
            raise fail(src, v.line, "<HIERARCHICAL>", "needs <HIERCODELIST> or <HIERLEVELS>")
        if meta.kind == "table" and v.recodeable and v.total_code is None:
            raise fail(src, v.line, "<TOTCODE>", "a table's explanatory variable needs its total code")
    if len(meta.with_role("recordkey")) > 1:
        raise fail(src, meta.with_role("recordkey")[1].line, "<RECORDKEY>", "only one record key is allowed")
    if meta.kind == "table":
        for role in ("shadow", "cost", "frequency", "lowerpl", "upperpl", "status"):
            if len(meta.with_role(role)) > 1:
                raise fail(src, meta.with_role(role)[1].line, role, "only one variable may have this role")
        if not any(v.numeric and v.role is None for v in meta.variables) and not meta.with_role("frequency"):
            raise fail(src, None, "variables", "no response (<NUMERIC>) or frequency (<FREQUENCY>) variable")


# ------------------------------------------------------------------ writing
def _flag_lines(v: Variable) -> list[str]:
    out: list[str] = []
    if v.recodeable:
        out.append("<RECODEABLE>")
    if v.total_code is not None:
        out.append(f"<TOTCODE> {quote(v.total_code)}")
    if v.distance is not None:
        out.append("<DISTANCE> " + " ".join(str(d) for d in v.distance))
    if v.codelist is not None:
        out.append(f"<CODELIST> {quote(v.codelist)}")
    if v.hierarchical:
        out.append("<HIERARCHICAL>")
    if v.hierlevels is not None:
        out.append("<HIERLEVELS> " + " ".join(str(d) for d in v.hierlevels))
    if v.hierfile is not None:
        out.append(f"<HIERCODELIST> {quote(v.hierfile)}")
    if v.leadstring is not None:
        out.append(f"<HIERLEADSTRING> {quote(v.leadstring)}")
    numeric_role = {r: k for k, r in _NUMERIC_ROLE.items() if k != "<COST>"}
    if v.role in numeric_role:
        out.append(f"<NUMERIC> {numeric_role[v.role]}")
    elif v.numeric:
        out.append("<NUMERIC>")
    if v.role == "request":
        out.append("<REQUEST> " + " ".join(quote(c) for c in v.request_codes))
    elif v.role is not None and v.role not in numeric_role:
        out.append({r: k for k, r in _ROLE_TAGS.items()}[v.role])
    return out


def _option_lines(v: Variable) -> list[str]:
    out: list[str] = []
    if v.decimals is not None:
        out.append(f"<DECIMALS> {v.decimals}")
    if v.truncable:
        out.append("<TRUNCABLE>")
    for tag, value in (("<PFILE>", v.pfile), ("<PFILE_CONT>", v.pfile_cont), ("<PFILE_SEP>", v.pfile_sep)):
        if value is not None:
            out.append(f"{tag} {quote(value)}")
    if v.ckm is not None:
        out.append(f"<CKM> {v.ckm}")
    for tag, flag in (("<INCLUDEZEROS>", v.includezeros), ("<PARITY>", v.parity)):
        if flag is not None:
            out.append(f"{tag} {'Y' if flag else 'N'}")
    if v.scaling is not None:
        out.append(f"<SCALING> {v.scaling}")
    if v.separation is not None:
        out.append(f"<SEPARATION> {'Y' if v.separation else 'N'}")
    return out


def write_rda(meta: Metadata) -> str:
    """The text of an ``.rda`` file for ``meta`` (:func:`read_rda` reads it back to ``meta``)."""
    out: list[str] = []
    if meta.separator is not None:
        out.append(f"<SEPARATOR> {quote(meta.separator)}")
    for tag, value in (("<SAFE>", meta.safe), ("<UNSAFE>", meta.unsafe), ("<PROTECT>", meta.protect)):
        if value is not None:
            out.append(f"{tag} {quote(value)}")
    for v in meta.variables:
        head = [v.name if " " not in v.name else quote(v.name)]
        if meta.kind == "micro":
            if meta.fixed:
                head.append(str(v.start))
            head.append(str(v.length))
        head += [quote(m) for m in v.missing]
        out.append(" ".join(head))
        out += ["  " + x for x in _flag_lines(v) + _option_lines(v)]
    return "\n".join(out) + "\n"
