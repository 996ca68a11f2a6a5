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

Meaning (one for every evaluator: each engine's SQL, numpy, the service, the differencing
audit — all compiled from the tree below by :func:`fold`). Logic is SQL's three-valued logic: a
test on a missing value is *unknown*, ``not unknown`` is unknown, ``and``/``or`` are Kleene's,
and a record passes only where the filter is *true*. A test on a numeric column compares
numbers (NaN counts as missing). A test ``=``, ``!=``, ``in`` on a text column compares texts
(``7`` and ``'7'`` both name the code ``"7"``; ``7.0`` names ``"7.0"``); an ordering on a text
column compares the text as a number when it is one by :data:`NUMBER_PATTERN` (``"07" < 10``),
and is unknown for a text that is none (``"00-04"``). Nesting is at most :data:`MAX_DEPTH`
deep, so no evaluator recurses without bound.

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
from typing import Any, TypeVar, Union

from tabsafe.errors import InputError

__all__ = [
    "And",
    "Compare",
    "Filter",
    "In",
    "Not",
    "Or",
    "Predicate",
    "Test",
    "coerce",
    "compile_sql",
    "evaluate",
    "fold",
    "from_mapping",
    "nnf",
    "parse",
    "predicate",
    "text_number",
    "truth_mask",
]

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
#: When a text in the data is a number (for orderings on text columns): ASCII digits only, no
#: blanks, no ``inf``/``nan``. The engines' SQL tests the same pattern (no backslash in it, so
#: every dialect's string literal carries it unchanged), so no engine's own cast rules leak in.
NUMBER_PATTERN = "[+-]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]+)?"
_TEXT_NUMBER = re.compile(NUMBER_PATTERN)
MAX_LENGTH = 10_000
#: The deepest nesting of brackets and ``not``s a filter may have (evaluators recurse on it).
MAX_DEPTH = 64

T = TypeVar("T")


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
#: A leaf of the tree: a test of one variable.
Test = Union[In, Compare]


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
    """Recursive descent over the grammar of the module docstring. Each bracket and each ``not``
    is one level of recursion, so the depth is counted and capped (:data:`MAX_DEPTH`): a deep
    filter is one error line, never a RecursionError here or in an evaluator."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.i = 0
        self.depth = 0

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

    def deeper(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            t = self.toks[self.i - 1]
            raise _error(f"nested more than {MAX_DEPTH} deep (brackets and 'not's) at character {t[2] + 1}; "
                         "write it with fewer levels", self.text)

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
            self.deeper()
            node: Filter = Not(self.not_())
            self.depth -= 1
            return node
        t = self.peek()
        if t is not None and t[0] == "lparen":
            self.i += 1
            self.deeper()
            node = self.or_()
            self.expect("rparen", "')'")
            self.depth -= 1
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
    """Parse a filter; an error names what was expected and where. At most :data:`MAX_LENGTH`
    characters and :data:`MAX_DEPTH` levels of nesting."""
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


def _depth(node: Filter) -> int:
    """The nesting of a tree (iterative: a tree built in code may be deeper than any parse)."""
    deepest, stack = 0, [(node, 0)]
    while stack:
        n, d = stack.pop()
        deepest = max(deepest, d)
        if isinstance(n, Not):
            stack.append((n.part, d + 1))
        elif isinstance(n, (And, Or)):
            stack.extend((p, d + 1) for p in n.parts)
    return deepest


def coerce(value: Any, *, where: str = "filter") -> Filter | None:
    """A filter from text, a mapping, a list of mappings (and), or a parsed filter."""
    if value is None:
        return None
    if isinstance(value, (In, Compare, Not, And, Or)):
        if _depth(value) > 2 * MAX_DEPTH + 1:  # a bracket adds at most an "or" and an "and" level
            raise InputError(f"{where}: a filter nested more than {2 * MAX_DEPTH + 1} deep")
        return value
    if isinstance(value, str):
        return parse(value)
    if isinstance(value, Mapping):
        return from_mapping(value, where=where)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, (Mapping, str)) for v in value):
        parts = tuple(coerce(v, where=where) for v in value)
        return parts[0] if len(parts) == 1 else And(parts)  # type: ignore[arg-type]
    raise InputError(f"{where}: a filter is a text or a mapping of variables to codes; got {value!r}")


# ------------------------------------------------------------------------------ meaning


def fold(node: Filter, leaf: Callable[[Test, bool], T], all_: Callable[[list[T]], T],
         any_: Callable[[list[T]], T], *, negate: bool = False) -> T:
    """Where a filter is TRUE, built from where each test is true or false (every evaluator).

    In SQL's three-valued logic ``not`` swaps true and false and leaves unknown alone, so with
    every ``not`` pushed down to a test (De Morgan: ``not (a and b)`` = ``not a or not b`` holds
    in three-valued logic too) the records where a filter is true are those where ``and``/``or``
    of its tests' *literals* are true: ``leaf(test, False)`` is where the test is true,
    ``leaf(test, True)`` where it is false — not merely "not true": an unknown test is in
    neither. ``all_`` and ``any_`` combine the literals of an ``and`` and an ``or``.
    """
    if isinstance(node, Not):
        return fold(node.part, leaf, all_, any_, negate=not negate)
    if isinstance(node, (And, Or)):
        parts = [fold(p, leaf, all_, any_, negate=negate) for p in node.parts]
        return all_(parts) if isinstance(node, And) != negate else any_(parts)
    return leaf(node, negate)


def nnf(node: Filter) -> Filter:
    """The same filter with every ``not`` on a test (:func:`fold`), ``and``/``or`` flattened."""

    def join(kind: type[And | Or]) -> Callable[[list[Filter]], Filter]:
        def make(parts: list[Filter]) -> Filter:
            flat: list[Filter] = []
            for p in parts:
                flat.extend(p.parts if isinstance(p, kind) else (p,))
            return kind(tuple(flat))
        return make

    return fold(node, lambda t, neg: Not(t) if neg else t, join(And), join(Or))


_ORDERS = ("<", "<=", ">", ">=")


@dataclass(frozen=True)
class Predicate:
    """One test as every evaluator reads it (module docstring, "Meaning").

    Attributes:
        variable: the variable tested.
        numeric: the column holds numbers (else text).
        op: ``"in"`` or an ordering ``<``, ``<=``, ``>``, ``>=``.
        texts: for ``in`` on a text column, the texts it names.
        numbers: for ``in`` on a numeric column the numbers it names; for an ordering its bound.
        negate: ``not in`` (and ``!=``).
    """

    variable: str
    numeric: bool
    op: str
    texts: tuple[str, ...] = ()
    numbers: tuple[float, ...] = ()
    negate: bool = False


def _is_numeric(kind: str | None) -> bool:
    return kind in {"number", "integer"}


def predicate(test: Test, kind: str, *, where: str | None = None) -> Predicate:
    """A test on a column of ``kind`` (``"integer"``, ``"number"``: numbers; anything else:
    text), with its literals checked: numbers for a numeric column and for an ordering (codes
    have no order). ``=`` is ``in`` one value, ``!=`` is ``not in`` one value."""
    numeric = _is_numeric(kind)
    if isinstance(test, Compare) and test.op in _ORDERS:
        x = test.value.number
        if x is None:
            if numeric:
                raise InputError(f"filter: {test.variable!r} is numeric; {test.value.to_text()} is not a number",
                                 where=where)
            raise InputError(f"filter: {test.variable!r} holds codes, which have no order: use =, != or in, "
                             f"not {test.op}", where=where)
        return Predicate(test.variable, numeric, test.op, numbers=(x,))
    values = test.values if isinstance(test, In) else (test.value,)
    negate = test.negate if isinstance(test, In) else test.op == "!="
    if not numeric:
        return Predicate(test.variable, False, "in", texts=tuple(v.text for v in values), negate=negate)
    numbers = []
    for v in values:
        if v.number is None:
            raise InputError(f"filter: {test.variable!r} is numeric; {v.to_text()} is not a number", where=where)
        numbers.append(v.number)
    return Predicate(test.variable, True, "in", numbers=tuple(numbers), negate=negate)


def text_number(text: str) -> float | None:
    """A text of the data as a number, when it is one by :data:`NUMBER_PATTERN` (else None)."""
    return float(text) if _TEXT_NUMBER.fullmatch(text) else None


def _unknown_variable(name: str, kinds: Mapping[str, str], where: str | None) -> InputError:
    known = ", ".join(list(kinds)[:12]) + (" …" if len(kinds) > 12 else "")
    return InputError(f"filter: unknown variable {name!r}; the data have: {known}", where=where)


# ------------------------------------------------------------------------------ SQL


@dataclass(frozen=True)
class Dialect:
    """How an engine writes identifiers, literals, casts, ``full_match(expr, pattern)`` (true
    when the text ``expr`` matches the regular expression ``pattern`` whole) and ``is_nan(expr)``
    (``tabsafe.engines.base``)."""

    ident: Callable[[str], str]
    literal: Callable[[str], str]
    as_text: Callable[[str], str]
    as_number: Callable[[str], str]
    full_match: Callable[[str, str], str]
    is_nan: Callable[[str], str]


def _number_sql(x: float) -> str:
    return repr(int(x)) if x.is_integer() and abs(x) < 2**53 else repr(x)


def compile_sql(node: Filter, dialect: Dialect, kinds: Mapping[str, str], *, where: str | None = None) -> str:
    """SQL for a filter (module docstring, "Meaning"; SQL is three-valued itself). ``kinds``
    maps each column to its kind (``"integer"``, ``"number"``, ``"text"``…); variables must be
    columns of the data. Literals are escaped by the dialect and numbers rendered from parsed
    floats, so nothing of the user's text is pasted as SQL."""

    def leaf(test: Test, negated: bool) -> str:
        if test.variable not in kinds:
            raise _unknown_variable(test.variable, kinds, where)
        p = predicate(test, kinds[test.variable], where=where)
        col = dialect.ident(test.variable)
        if p.numeric:
            # NaN is missing, as in numpy (where a null is NaN); engines order NaN above all numbers
            expr = f"(CASE WHEN {dialect.is_nan(col)} THEN NULL ELSE {col} END)" if kinds[test.variable] == "number" else col
            values = [_number_sql(x) for x in p.numbers]
        elif p.op == "in":
            expr, values = dialect.as_text(col), [dialect.literal(t) for t in p.texts]
        else:
            text = dialect.as_text(col)
            expr = (f"(CASE WHEN {dialect.full_match(text, NUMBER_PATTERN)} "
                    f"THEN {dialect.as_number(text)} END)")
            values = [_number_sql(p.numbers[0])]
        if p.op != "in":
            sql = f"{expr} {p.op} {values[0]}"
        elif len(values) == 1:
            sql = f"{expr} {'<>' if p.negate else '='} {values[0]}"
        else:
            sql = f"{expr} {'NOT IN' if p.negate else 'IN'} ({', '.join(values)})"
        return f"(NOT ({sql}))" if negated else f"({sql})"

    return fold(node, leaf, lambda ps: "(" + " AND ".join(ps) + ")", lambda ps: "(" + " OR ".join(ps) + ")")


# ------------------------------------------------------------------------------ numpy


def _column(values: Any, numeric: bool) -> Any:
    """A column ready for tests: numbers as float64 with NaN for missing, or texts factorized
    (each record's position among the distinct texts, -1 for missing; and the texts)."""
    import numpy as np
    import pandas as pd

    arr = np.asarray(values)
    if numeric:
        if arr.dtype.kind in "iufb":
            return arr.astype(np.float64, copy=False)
        return pd.to_numeric(pd.Series(arr, dtype=object), errors="coerce").to_numpy(dtype=np.float64)
    codes, uniques = pd.factorize(arr.astype(object, copy=False), use_na_sentinel=True)
    return np.asarray(codes, dtype=np.int64), [u if isinstance(u, str) else str(u) for u in uniques]


_NP_ORDER = {"<": "less", "<=": "less_equal", ">": "greater", ">=": "greater_equal"}


def _mask(p: Predicate, column: Any, negated: bool) -> Any:
    import numpy as np

    # the test's answer is flipped by ``not in``/``!=`` and by a ``not`` above it; a missing
    # value (NaN, or no text) is unknown either way
    flip = p.negate != negated

    def hits(x: Any) -> Any:  # where the test without negation is true; NaN compares false
        if p.op != "in":
            return getattr(np, _NP_ORDER[p.op])(x, p.numbers[0])
        if len(p.numbers) == 1:
            return x == p.numbers[0]
        return np.isin(x, np.array(p.numbers, dtype=np.float64))

    if p.numeric:
        hit = hits(column)
        return ~(hit | np.isnan(column)) if flip else hit
    codes, texts = column
    if p.op == "in":
        wanted = set(p.texts)
        hit_u = np.fromiter((t in wanted for t in texts), dtype=bool, count=len(texts))
        known_u = np.ones(len(texts), dtype=bool)
    else:
        nums = np.fromiter((np.nan if (x := text_number(t)) is None else x for t in texts),
                           dtype=np.float64, count=len(texts))
        hit_u, known_u = hits(nums), ~np.isnan(nums)
    # per distinct text whether the literal is true; position -1 (missing) reads the last: false
    true_u = np.append(known_u & (~hit_u if flip else hit_u), False)
    return true_u[codes]


def truth_mask(p: Predicate, values: Any, negated: bool = False) -> Any:
    """Where a test is TRUE over an array of a column's values (``negated``: where it is FALSE;
    a missing value — None, NaN — is neither)."""
    return _mask(p, _column(values, p.numeric), negated)


def evaluate(node: Filter, column: Callable[[str], Sequence[Any]], kinds: Mapping[str, str]) -> Any:
    """A boolean numpy mask of the records a filter selects (where it is TRUE), from in-memory
    columns (used where no SQL engine is involved). ``column(name)`` gives a column's values,
    with None or NaN for a missing value."""
    from functools import reduce

    import numpy as np

    columns: dict[tuple[str, bool], Any] = {}

    def leaf(test: Test, negated: bool) -> Any:
        name = test.variable
        if name not in kinds:
            raise _unknown_variable(name, kinds, None)
        p = predicate(test, kinds[name])
        if (name, p.numeric) not in columns:
            columns[name, p.numeric] = _column(column(name), p.numeric)
        return _mask(p, columns[name, p.numeric], negated)

    return fold(node, leaf, lambda ms: reduce(np.logical_and, ms), lambda ms: reduce(np.logical_or, ms))
