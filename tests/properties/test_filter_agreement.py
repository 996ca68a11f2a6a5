"""Every filter evaluator gives a filter the same meaning (hypothesis).

Random filters — ``=``, ``!=``, ``in``, ``not in``, orderings, ``not``, ``and``, ``or`` — over
random records with missing values (None in a text column, null and NaN in a numeric one, null
in an integer one) are evaluated by DuckDB running the engine's SQL
(:func:`tabsafe.model.filter.compile_sql`), by the numpy evaluator
(:func:`tabsafe.model.filter.evaluate`), by the service's evaluator on a code matrix
(:func:`tabsafe.service.query.compile_filter`) and by the differencing audit's reading of a
filter as sets of base codes (:func:`tabsafe.risk.differencing.filter_masks`). Each must select
exactly the records DuckDB selects: three-valued logic as SQL has it (a test on a missing value
is unknown, ``not unknown`` is unknown, a record passes only where the filter is true).
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from tabsafe.engines.duckdb import DIALECT
from tabsafe.errors import InputError
from tabsafe.model import filter as flt
from tabsafe.model.hierarchy import Hierarchy
from tabsafe.risk.differencing import CodeSets, filter_masks
from tabsafe.service.prepared import Variable
from tabsafe.service.query import compile_filter

# text codes: numbers in several spellings (" 7" and "7.0"-like texts are what engines' own casts
# read differently), codes that are no number, one that needs quoting
T_CODES = ["1", "2", "10", "07", "1e1", " 7", "-3", ".5", "A", "b", "x y"]
C_CODES = ["1", "2", "3", "10", "07", "A", "B"]  # a categorical variable of the service: no missing
K_CODES = [str(i) for i in range(-2, 13)]
# bounds of orderings: each is a value of the records (a slip at the bound shows), in two spellings
NUMBERS = ["-3", "-1.5", "0", "0.5", "1", "2", "7", "7.0", "10", "1e1", "10.5", "12"]
KINDS = {"t": "text", "c": "text", "n": "number", "k": "integer"}
DOMAINS = {"t": T_CODES, "c": C_CODES, "k": K_CODES}  # the audit's declared codelists
ORDERS = ["<", "<=", ">", ">="]


def _literal(draw: Any, codes: list[str], quote: bool) -> str:
    code = draw(st.sampled_from(codes))
    bare = all(ch.isalnum() or ch in "_+-./" for ch in code) and code.lower() not in {"and", "or", "not", "in"}
    return code if bare and not (quote and draw(st.booleans())) else "'" + code.replace("'", "''") + "'"


#: a strategy for a filter, given per variable the numbers its bounds are drawn from
Atom = Callable[[dict[str, list[str]]], st.SearchStrategy[str]]


def _test(var: str, codes: list[str]) -> Atom:
    """One test of ``var`` given the numbers to compare with: values from ``codes`` (or the
    numbers, for a numeric variable), quoted only on a text variable (a quoted number on a
    numeric one is refused, by every evaluator)."""

    @st.composite
    def test(draw: Any, bounds: dict[str, list[str]]) -> str:
        numbers = bounds.get(var) or NUMBERS
        quote = KINDS[var] == "text"
        values = codes if quote else codes + numbers
        form = draw(st.sampled_from(["=", "!=", "in", "not in"] + ORDERS))
        if form in ORDERS:
            return f"{var} {form} {draw(st.sampled_from(numbers))}"
        if form in {"=", "!="}:
            return f"{var} {form} {_literal(draw, values, quote)}"
        listed = [_literal(draw, values, quote) for _ in range(draw(st.integers(1, 3)))]
        return f"{var} {form} ({', '.join(listed)})"

    return test


def _any(*atoms: Atom) -> Atom:
    return lambda numbers: st.one_of(*(a(numbers) for a in atoms))


def _tree(atom: Atom) -> Atom:
    return lambda numbers: st.recursive(atom(numbers), lambda inner: st.one_of(
        inner.map(lambda e: f"not ({e})"),
        st.tuples(inner, st.sampled_from(["and", "or"]), inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
    ), max_leaves=5)


# every variable; text and integer tests also name values that are no code of the data
ANY_TEST = _any(_test("t", T_CODES + ["Z", "7.0", "7"]), _test("c", C_CODES + ["7"]), _test("n", []),
                _test("k", K_CODES + ["7.0", "99"]))
# the service's variables: a categorical one (codes of its codelist) and a numeric one
SERVICE_TEST = _any(_test("c", C_CODES), _test("n", []))

ROWS = st.lists(st.tuples(
    st.none() | st.sampled_from(T_CODES),
    st.sampled_from(C_CODES),
    st.sampled_from([None, math.nan, -1.5, 0.0, 1.0, 2.0, 7.0, 10.0, 10.5]),
    st.none() | st.sampled_from([-2, 0, 1, 2, 7, 10, 12]),
), min_size=1, max_size=30)


def _held(rows: list[tuple[Any, ...]]) -> dict[str, list[str]]:
    """Per variable the numbers its records hold, written as literals: a bound at a value a
    record holds is where ``<`` and ``<=`` differ."""
    out: dict[str, list[str]] = {"t": [], "c": [], "n": [], "k": []}
    for t, c, n, k in rows:
        out["t"] += [t] if t is not None and flt.text_number(t) is not None else []
        out["c"] += [c] if flt.text_number(c) is not None else []
        out["n"] += [repr(n)] if n is not None and not math.isnan(n) else []
        out["k"] += [str(k)] if k is not None else []
    return out


@st.composite
def cases(draw: Any, filters: Atom) -> tuple[list[tuple[Any, ...]], str]:
    """Records, and a filter whose bounds are mostly numbers the records hold."""
    rows = draw(ROWS)
    text = draw(filters(_held(rows) if draw(st.integers(0, 3)) else {}))
    note(f"records (t, c, n, k): {rows!r}; filter: {text}")
    return rows, text


def _table(rows: list[tuple[Any, ...]]) -> pa.Table:
    t, c, n, k = zip(*rows)
    # a null and a NaN are both missing in a numeric column (from_pandas=False keeps NaN a NaN)
    return pa.table({
        "i": pa.array(range(len(rows)), pa.int64()),
        "t": pa.array(t, pa.string()), "c": pa.array(c, pa.string()),
        "n": pa.array(n, pa.float64(), from_pandas=False), "k": pa.array(k, pa.int64()),
    })


def by_duckdb(table: pa.Table, node: flt.Filter) -> np.ndarray:
    """The engine's SQL run by DuckDB on the records written to Parquet, as the engine reads
    them (a NaN read from Parquet is not equal to DuckDB's own NaN)."""
    sql = flt.compile_sql(node, DIALECT.filter_dialect(), KINDS)
    con = duckdb.connect()
    try:
        with tempfile.TemporaryDirectory() as d:
            pq.write_table(table, f"{d}/records.parquet")
            rows = con.execute(f"SELECT i FROM read_parquet('{d}/records.parquet') AS src WHERE {sql}").fetchall()
    finally:
        con.close()
    mask = np.zeros(table.num_rows, dtype=bool)
    mask[[r[0] for r in rows]] = True
    return mask


def by_numpy(table: pa.Table, node: flt.Filter) -> np.ndarray:
    return np.asarray(flt.evaluate(node, lambda v: table.column(v).to_numpy(zero_copy_only=False), KINDS), bool)


def by_service(table: pa.Table, node: flt.Filter) -> np.ndarray:
    """The service's evaluator over the records as ``tabsafe serve --prepare`` stores them: the
    categorical variable as positions in its codelist, the numeric one as floats (NaN: missing)."""
    h = Hierarchy.flat(C_CODES, source="c")
    var = Variable("c", h, levels=("c",), labels={}, recode_level=1)
    positions = np.array([h.leaves.index(code) for code in table.column("c").to_pylist()], dtype=np.uint8)
    data = SimpleNamespace(variables={"c": var}, codes={"c": positions},
                           values={"n": table.column("n").to_numpy(zero_copy_only=False).astype(float)})
    return np.asarray(compile_filter(data, node)(slice(None)), bool)  # type: ignore[arg-type]


def _code_sets() -> dict[str, CodeSets]:
    return {v: CodeSets(v, domain, KINDS[v]) for v, domain in DOMAINS.items()}


def names_a_non_code(node: flt.Filter) -> bool:
    """Whether a test names (by =, != or in) a value that is no code of its variable's codelist."""
    sets = _code_sets()

    def leaf(test: flt.Test, _: bool) -> bool:
        if isinstance(test, flt.Compare) and test.op not in {"=", "!="}:
            return False
        values = test.values if isinstance(test, flt.In) else (test.value,)
        return test.variable in sets and any(sets[test.variable].code_mask(v.text) is None for v in values)

    return bool(flt.fold(node, leaf, any, any))


def by_differencing(table: pa.Table, node: flt.Filter) -> np.ndarray:
    """The audit's boxes: per base variable the codes of its declared codelist the filter admits;
    a record is inside when each restricted variable's code is admitted (a missing code is not)."""
    codes = DOMAINS
    masks = filter_masks({}, node, _code_sets(), "test")
    inside = np.ones(table.num_rows, dtype=bool)
    for var, admitted in masks.items():
        values = table.column(var).to_pylist()
        inside &= [v is not None and bool(admitted[codes[var].index(str(v))]) for v in values]
    return inside


def outcome(evaluator: Any, table: pa.Table, node: flt.Filter) -> list[bool] | str:
    """The records selected, or the error's kind: a filter refused by one evaluator (a quoted
    number on a numeric variable, an ordering of codes) must be refused by all."""
    try:
        return evaluator(table, node).tolist()  # type: ignore[no-any-return]
    except InputError as exc:
        assert "\n" not in str(exc)
        return "refused"


@given(cases(ANY_TEST), st.booleans())
def test_every_evaluator_agrees_on_one_test(case: tuple[list[tuple[Any, ...]], str], negate: bool) -> None:
    """One test (or its negation): where each evaluator reads values, literals and missing values."""
    rows, text = case
    table, node = _table(rows), flt.parse(f"not ({text})" if negate else text)
    want = outcome(by_duckdb, table, node)
    assert outcome(by_numpy, table, node) == want, text
    # the service and the audit refuse a value that is no code of the variable (a typo)
    if node.variables[0] in {"c", "n"}:
        assert outcome(by_service, table, node) == ("refused" if names_a_non_code(node) else want), text
    if node.variables[0] in {"t", "c", "k"}:
        assert outcome(by_differencing, table, node) == ("refused" if names_a_non_code(node) else want), text


@given(cases(_tree(ANY_TEST)))
def test_engine_sql_and_numpy_agree(case: tuple[list[tuple[Any, ...]], str]) -> None:
    rows, text = case
    table, node = _table(rows), flt.parse(text)
    assert outcome(by_numpy, table, node) == outcome(by_duckdb, table, node), text


@given(cases(_tree(SERVICE_TEST)))
def test_the_service_agrees_with_the_engine(case: tuple[list[tuple[Any, ...]], str]) -> None:
    rows, text = case
    table, node = _table(rows), flt.parse(text)
    want = outcome(by_duckdb, table, node)
    assert outcome(by_service, table, node) == want, text
    assert outcome(by_numpy, table, node) == want, text


def _box(numbers: dict[str, list[str]]) -> st.SearchStrategy[str]:
    """A box: an 'and' of filters that each test one base variable (after 'not' is pushed
    inwards), naming codes of the variables' codelists."""
    parts = st.lists(st.sampled_from(["t", "c", "k"]), min_size=1, max_size=3, unique=True).flatmap(
        lambda vs: st.tuples(*[_tree(_test(v, DOMAINS[v]))(numbers) for v in vs]))
    return st.one_of(parts.map(lambda ps: " and ".join(f"({p})" for p in ps)),
                     parts.map(lambda ps: "not (" + " or ".join(f"({p})" for p in ps) + ")"))


@given(cases(_box))
def test_the_differencing_audit_agrees_with_the_engine(case: tuple[list[tuple[Any, ...]], str]) -> None:
    rows, text = case
    table, node = _table(rows), flt.parse(text)
    want = "refused" if names_a_non_code(node) else outcome(by_duckdb, table, node)
    assert outcome(by_differencing, table, node) == want, text


ROWS_SEEN = [("07", "1", 7.0, 7), (None, "A", None, None), (" 7", "2", math.nan, 3)]


@pytest.mark.parametrize(("text", "want"), [
    ("n <= 7", [True, False, False]),
    ("not n > 7", [True, False, False]),   # missing (null or NaN): unknown, and so is 'not unknown'
    ("n != 1", [True, False, False]),
    ("t <= 7", [True, False, False]),      # "07" is 7; " 7" is no number (no blanks), so unknown
    ("t not in (A)", [True, False, True]),
    ("not (t = A and k > 100)", [True, False, True]),  # false and unknown is false; unknown and unknown is not
    ("k >= 7 or n < 0", [True, False, False]),
])
def test_every_evaluator_on_worked_cases(text: str, want: list[bool]) -> None:
    table, node = _table(ROWS_SEEN), flt.parse(text)
    assert by_duckdb(table, node).tolist() == want
    assert by_numpy(table, node).tolist() == want
    if set(node.variables) <= {"c", "n"}:
        assert by_service(table, node).tolist() == want


def test_a_slip_in_one_evaluator_breaks_the_agreement(monkeypatch: pytest.MonkeyPatch) -> None:
    """The agreement check bites: ``<=`` read as ``<`` by numpy is caught on a value at the bound."""
    table, node = _table(ROWS_SEEN), flt.parse("n <= 7")
    monkeypatch.setitem(flt._NP_ORDER, "<=", "less")
    assert by_numpy(table, node).tolist() != by_duckdb(table, node).tolist()
