"""tabsafe's filter language: sub-populations without SQL.

A filter selects the records a table counts (a sub-population; its variables count as
identifying, seed 000 §5.2). It is the same in the CLI (``--where``), config files, the audit
spec and the service, and it is *parsed* here into a small tree that each engine compiles into
its own SQL with quoted identifiers and escaped literals — a user's text never reaches SQL.

Grammar (keywords in any case)::

    filter     := or
    or         := and ("or" and)*
    and        := not ("and" not)*
    not        := "not" not | "(" filter ")" | test
    test       := VARIABLE ("in" | "not in") "(" value ("," value)* ")"
                | VARIABLE op value
    op         := "=" | "==" | "!=" | "<>" | "<" | "<=" | ">" | ">="
    value      := 'text' | "text" | number | code

A *code* is a bare word of letters, digits and ``_ + - . /`` (``EMP``, ``R1A008``, ``00-04``,
``6+``). On a variable that holds codes only ``=``, ``!=``, ``in`` and ``not in`` are allowed
(codes have no order); on a numeric variable all comparisons are, with numbers. In YAML a
mapping ``{variable: [codes]}`` is the same as ``variable in (codes)`` for each entry, joined by
``and``.

>>> parse("activity = EMP and age_year >= 65").to_text()
"activity = 'EMP' and age_year >= 65"
>>> parse("area in (R1A001, 'R1A002') or not sex = 2").variables
('area', 'sex')
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union

from tabsafe.errors import InputError

__all__ = ["And", "Compare", "Filter", "In", "Not", "Or", "parse", "from_mapping", "coerce"]

_OPS = {"=": "=", "==": "=", "!=": "!=", "<>": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_KEYWORDS = {"and", "or", "not", "in"}
_TOKEN = re.compile(
    r"""\s*(?:
        (?P<lparen>\()|(?P<rparen>\))|(?P<comma>,)|
        (?P<op><=|>=|==|!=|<>|=|<|>)|
        (?P<str>'(?:[^']|'')*'|"(?:[^"]|"")*")|
        (?P<word>[A-Za-z0-9_+\-./]+)
    )""",
    re.VERBOSE,
)
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NUMBER = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")
MAX_LENGTH = 10_000


@dataclass(frozen=True)
class Value:
    """A literal: its text, and whether it was quoted (then it is never a number)."""

    text: str
    quoted: bool = False

    @property
    def number(self) -> float | None:
        if self.quoted or not _NUMBER.match(self.text):
            return None
        value = float(self.text)
        return value if math.isfinite(value) else None

    def to_text(self) -> str:
        if not self.quoted and self.number is not None:
            return self.text
        return "'" + self.text.replace("'", "''") + "'"


class _Node:
    """Common to every node of a filter."""

    @property
    def variables(self) -> tuple[str, ...]:
        """The variables the filter tests, in order of first mention."""
        out: list[str] = []
        _variables(self, out)  # type: ignore[arg-type]
        return tuple(out)


@dataclass(frozen=True)
class In(_Node):
    """``variable in (values)``, or ``not in`` when ``negate``."""

    variable: str
    values: tuple[Value, ...]
    negate: bool = False

    def to_text(self) -> str:
        vals = ", ".join(v.to_text() for v in self.values)
        return f"{self.variable} {'not in' if self.negate else 'in'} ({vals})"


@dataclass(frozen=True)
class Compare(_Node):
    """``variable op value``."""

    variable: str
    op: str
    value: Value

    def to_text(self) -> str:
        return f"{self.variable} {self.op} {self.value.to_text()}"


@dataclass(frozen=True)
class Not(_Node):
    part: Filter

    def to_text(self) -> str:
        inner = self.part.to_text()
        return f"not ({inner})" if isinstance(self.part, (And, Or)) else f"not {inner}"


@dataclass(frozen=True)
class And(_Node):
    parts: tuple[Filter, ...]

    def to_text(self) -> str:
        return " and ".join(f"({p.to_text()})" if isinstance(p, Or) else p.to_text() for p in self.parts)


@dataclass(frozen=True)
class Or(_Node):
    parts: tuple[Filter, ...]

    def to_text(self) -> str:
        return " or ".join(p.to_text() for p in self.parts)


Filter = Union[In, Compare, Not, And, Or]


def _variables(node: Filter, out: list[str]) -> None:
    if isinstance(node, (In, Compare)):
        if node.variable not in out:
            out.append(node.variable)
    elif isinstance(node, Not):
        _variables(node.part, out)
    else:
        for p in node.parts:
            _variables(p, out)




# ------------------------------------------------------------------------------ parsing


def _tokens(text: str) -> list[tuple[str, str, int]]:
    out = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            bad = text[pos:].lstrip()[:12]
            raise _error(f"unexpected {bad!r} at character {len(text) - len(text[pos:].lstrip()) + 1}", text)
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind), m.start(kind)))
        pos = m.end()
    return out


def _error(what: str, text: str) -> InputError:
    shown = text if len(text) <= 60 else text[:57] + "..."
    return InputError(f"filter {shown!r}: {what}")


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.i = 0

    def peek(self) -> tuple[str, str, int] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def keyword(self, word: str) -> bool:
        t = self.peek()
        if t and t[0] == "word" and t[1].lower() == word:
            self.i += 1
            return True
        return False

    def expect(self, kind: str, what: str) -> tuple[str, str, int]:
        t = self.peek()
        if t is None or t[0] != kind:
            got = "the end" if t is None else repr(t[1])
            raise _error(f"expected {what}, found {got}", self.text)
        self.i += 1
        return t

    def parse(self) -> Filter:
        if not self.toks:
            raise _error("empty filter", self.text)
        node = self.or_()
        t = self.peek()
        if t is not None:
            raise _error(f"unexpected {t[1]!r} at character {t[2] + 1}", self.text)
        return node

    def or_(self) -> Filter:
        parts = [self.and_()]
        while self.keyword("or"):
            parts.append(self.and_())
        return parts[0] if len(parts) == 1 else Or(tuple(parts))

    def and_(self) -> Filter:
        parts = [self.not_()]
        while self.keyword("and"):
            parts.append(self.not_())
        return parts[0] if len(parts) == 1 else And(tuple(parts))

    def not_(self) -> Filter:
        if self.keyword("not"):
            return Not(self.not_())
        t = self.peek()
        if t is not None and t[0] == "lparen":
            self.i += 1
            node = self.or_()
            self.expect("rparen", "')'")
            return node
        return self.test()

    def test(self) -> Filter:
        t = self.expect("word", "a variable")
        name = t[1]
        if not _IDENT.match(name) or name.lower() in _KEYWORDS:
            raise _error(f"{name!r} is not a variable name", self.text)
        if self.keyword("not"):
            if not self.keyword("in"):
                raise _error(f"expected 'in' after '{name} not'", self.text)
            return In(name, self.values(), negate=True)
        if self.keyword("in"):
            return In(name, self.values())
        op = self.expect("op", f"a comparison or 'in' after {name!r}")
        return Compare(name, _OPS[op[1]], self.value())

    def values(self) -> tuple[Value, ...]:
        self.expect("lparen", "'(' with a list of values")
        vals = [self.value()]
        while self.peek() is not None and self.peek()[0] == "comma":  # type: ignore[index]
            self.i += 1
            vals.append(self.value())
        self.expect("rparen", "')' closing the list")
        return tuple(vals)

    def value(self) -> Value:
        t = self.peek()
        if t is None:
            raise _error("expected a value, found the end", self.text)
        if t[0] == "str":
            self.i += 1
            q = t[1][0]
            return Value(t[1][1:-1].replace(q + q, q), quoted=True)
        if t[0] == "word" and t[1].lower() not in _KEYWORDS:
            self.i += 1
            return Value(t[1])
        raise _error(f"expected a value, found {t[1]!r}", self.text)


def parse(text: str) -> Filter:
    """Parse a filter; an error names what was expected and where."""
    if not isinstance(text, str):
        raise InputError(f"a filter is a text; got {type(text).__name__}")
    if len(text) > MAX_LENGTH:
        raise InputError(f"a filter has at most {MAX_LENGTH:,} characters; got {len(text):,}")
    return _Parser(text).parse()


def from_mapping(mapping: Mapping[str, Any], *, where: str = "filter") -> Filter:
    """``{variable: [codes]}`` (or ``{variable: code}``) as ``variable in (codes) and …``."""
    parts: list[Filter] = []
    for var, codes in mapping.items():
        name = str(var)
        if not _IDENT.match(name):
            raise InputError(f"{where}: {name!r} is not a variable name")
        items = codes if isinstance(codes, (list, tuple)) else [codes]
        if not items:
            raise InputError(f"{where}: variable {name!r} has an empty list of codes")
        vals = []
        for c in items:
            if isinstance(c, bool) or c is None or isinstance(c, (dict, list)):
                raise InputError(f"{where}: variable {name!r}: {c!r} is not a code")
            vals.append(Value(str(c), quoted=not isinstance(c, (int, float))))
        parts.append(In(name, tuple(vals)))
    if not parts:
        raise InputError(f"{where}: an empty filter")
    return parts[0] if len(parts) == 1 else And(tuple(parts))


def coerce(value: Any, *, where: str = "filter") -> Filter | None:
    """A filter from text, a mapping, a list of mappings (and), or a parsed filter."""
    if value is None:
        return None
    if isinstance(value, (In, Compare, Not, And, Or)):
        return value
    if isinstance(value, str):
        return parse(value)
    if isinstance(value, Mapping):
        return from_mapping(value, where=where)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, (Mapping, str)) for v in value):
        parts = tuple(coerce(v, where=where) for v in value)
        return parts[0] if len(parts) == 1 else And(parts)  # type: ignore[arg-type]
    raise InputError(f"{where}: a filter is a text or a mapping of variables to codes; got {value!r}")


# ------------------------------------------------------------------------------ compiling


@dataclass(frozen=True)
class Dialect:
    """How an engine writes identifiers, literals and casts (``tabsafe.engines.base``)."""

    ident: Callable[[str], str]
    literal: Callable[[str], str]
    as_text: Callable[[str], str]
    as_number: Callable[[str], str]


def compile_sql(node: Filter, dialect: Dialect, kinds: Mapping[str, str], *, where: str | None = None) -> str:
    """SQL for a filter. ``kinds`` maps each column to its kind (``"integer"``, ``"number"``,
    ``"text"``…); variables must be columns of the data. Literals are escaped by the dialect and
    numbers rendered from parsed floats, so nothing of the user's text is pasted as SQL."""

    def number_text(v: Value) -> str:
        x = v.number
        assert x is not None
        return repr(int(x)) if x.is_integer() and abs(x) < 2**53 else repr(x)

    def col(name: str) -> tuple[str, str]:
        if name not in kinds:
            known = ", ".join(list(kinds)[:12]) + (" …" if len(kinds) > 12 else "")
            raise InputError(f"filter: unknown variable {name!r}; the data have: {known}", where=where)
        return dialect.ident(name), ("number" if kinds[name] in {"number", "integer"} else "text")

    def lit(kind: str, v: Value, var: str) -> str:
        if kind == "number":
            if v.number is None:
                raise InputError(f"filter: {var!r} is numeric; {v.to_text()} is not a number", where=where)
            return number_text(v)
        return dialect.literal(v.text)

    def go(n: Filter) -> str:
        if isinstance(n, In):
            c, kind = col(n.variable)
            expr = c if kind == "number" else dialect.as_text(c)
            vals = ", ".join(lit(kind, v, n.variable) for v in n.values)
            return f"({expr} {'NOT IN' if n.negate else 'IN'} ({vals}))"
        if isinstance(n, Compare):
            c, kind = col(n.variable)
            op = "<>" if n.op == "!=" else n.op
            if n.op in {"=", "!="} or kind == "number":
                expr = c if kind == "number" else dialect.as_text(c)
                return f"({expr} {op} {lit(kind, n.value, n.variable)})"
            # an ordering on text: numbers compare as numbers (a CSV's columns are text), codes
            # have no order
            if n.value.number is None:
                raise InputError(
                    f"filter: {n.variable!r} holds codes, which have no order: use =, != or in, not {n.op}",
                    where=where)
            return f"({dialect.as_number(c)} {op} {number_text(n.value)})"
        if isinstance(n, Not):
            return f"(NOT {go(n.part)})"
        joiner = " AND " if isinstance(n, And) else " OR "
        return "(" + joiner.join(go(p) for p in n.parts) + ")"

    return go(node)


def evaluate(node: Filter, column: Callable[[str], Sequence[Any]], kinds: Mapping[str, str]) -> Any:
    """A boolean numpy mask of the records a filter selects, from in-memory columns (used where
    no SQL engine is involved, e.g. the service's prepared code matrix)."""
    import numpy as np

    def go(n: Filter) -> Any:
        if isinstance(n, In):
            values = np.asarray(column(n.variable))
            if kinds.get(n.variable) in {"number", "integer"}:
                wanted = [v.number for v in n.values]
                mask = np.isin(values.astype(float), [w for w in wanted if w is not None])
            else:
                mask = np.isin(values.astype(str), [v.text for v in n.values])
            return ~mask if n.negate else mask
        if isinstance(n, Compare):
            values = np.asarray(column(n.variable))
            if kinds.get(n.variable) in {"number", "integer"}:
                x = n.value.number
                if x is None:
                    raise InputError(f"filter: {n.variable!r} is numeric; {n.value.to_text()} is not a number")
                v = values.astype(float)
            else:
                if n.op not in {"=", "!="}:
                    raise InputError(f"filter: {n.variable!r} holds codes: use =, != or in, not {n.op}")
                v, x = values.astype(str), n.value.text  # type: ignore[assignment]
            return {"=": v == x, "!=": v != x, "<": v < x, "<=": v <= x, ">": v > x, ">=": v >= x}[n.op]
        if isinstance(n, Not):
            return ~go(n.part)
        masks = [go(p) for p in n.parts]
        out = masks[0]
        for m in masks[1:]:
            out = (out & m) if isinstance(n, And) else (out | m)
        return out

    return go(node)
