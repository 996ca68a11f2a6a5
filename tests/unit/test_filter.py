"""tabsafe's filter language: parsed, compiled with escaped literals; SQL is refused."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tabsafe as ts
from tabsafe.cli import main
from tabsafe.engines.duckdb import DIALECT
from tabsafe.model.filter import compile_sql, parse

DF = pd.DataFrame({
    "area": ["A1", "A2", "A10", "A2", "B'1"],
    "sex": ["1", "2", "2", "1", "1"],
    "age_year": [10, 70, 66, 30, 80],
})

ATTACKS = [
    "1=1; DROP TABLE src",
    "area = 'A1'; DROP TABLE src",
    "(SELECT substr(content,1,1) FROM read_text('/etc/passwd'))='r'",
    "area in (SELECT area FROM src)",
    "read_csv('/etc/passwd') = 1",
    "area = 'x' or 1=1 --",
    "area = read_csv('https://example.com/x.csv')",
    "sex = 1 /* comment */",
]


@pytest.mark.parametrize("text", ATTACKS)
def test_sql_is_refused_with_one_line(text: str) -> None:
    with pytest.raises(ts.InputError) as err:
        parse(text)
    assert "\n" not in str(err.value) and str(err.value).startswith("filter ")


@pytest.mark.parametrize("text", ATTACKS)
def test_sql_in_where_is_refused_by_the_cli_and_nothing_is_written(tmp_path, capsys, text: str) -> None:
    data = tmp_path / "d.csv"
    DF.to_csv(data, index=False)
    out = tmp_path / "t.csv"
    code = main(["tabulate", str(data), "--by", "sex", "--where", text, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "filter" in err and not out.exists()


def test_filters_select_what_they_say() -> None:
    md = ts.Microdata.from_frame(DF)
    cases = {
        "sex = 1": 3, "sex != 1": 2, "area in (A2, A10)": 3, "area not in (A2)": 3,
        "age_year >= 66": 3, "age_year > 66 and sex = 1": 1, "not (age_year < 66) or area = A1": 4,
        "area = 'B''1'": 1,  # a quote in a code is a literal, never SQL
    }
    for text, expected in cases.items():
        assert ts.tabulate(md, ["sex"], where=text).value() == expected, text


def test_codes_have_no_order_but_numbers_in_text_do(tmp_path) -> None:
    md = ts.Microdata.from_frame(DF)
    with pytest.raises(ts.InputError, match="holds codes, which have no order"):
        ts.tabulate(md, ["sex"], where="area < A2")
    # a CSV's columns are text: a numeric comparison compares numbers, not strings ("9" < "10")
    DF.assign(age_year=DF.age_year.astype(str)).to_csv(tmp_path / "d.csv", index=False)
    csv = ts.Microdata.from_file(tmp_path / "d.csv")
    assert ts.tabulate(csv, ["sex"], where="age_year >= 66").value() == 3


def test_unknown_variable_names_the_data() -> None:
    with pytest.raises(ts.InputError, match="unknown variable 'region'"):
        ts.tabulate(ts.Microdata.from_frame(DF), ["sex"], where="region = R1")


def test_mapping_form_is_the_same_filter() -> None:
    md = ts.Microdata.from_frame(DF)
    assert ts.tabulate(md, ["sex"], where={"area": ["A2", "A10"], "sex": "2"}).value() == 2


codes = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), min_size=1, max_size=8)


@settings(max_examples=40)  # each example tabulates with DuckDB
@given(st.lists(codes, min_size=1, max_size=4), st.sampled_from(["area", "sex"]), st.booleans())
def test_any_code_round_trips_as_a_literal(values: list[str], var: str, negate: bool) -> None:
    quoted = ", ".join("'" + v.replace("'", "''") + "'" for v in values)
    f = parse(f"{var} {'not in' if negate else 'in'} ({quoted})")
    assert parse(f.to_text()) == f
    sql = compile_sql(f, DIALECT.filter_dialect(), {"area": "text", "sex": "text"})
    # the SQL holds each value only as an escaped literal
    assert sql.count("'") % 2 == 0
    mask = ts.tabulate(ts.Microdata.from_frame(DF), ["sex"], where=f).value()
    want = DF[var].isin(values)
    assert mask == int((~want if negate else want).sum())


def test_numpy_evaluation_agrees_with_the_engine() -> None:
    from tabsafe.model.filter import evaluate

    kinds = {"area": "text", "sex": "text", "age_year": "integer"}
    for text in ["sex = 1 and age_year >= 30", "area in (A2, A10) or not sex = 2"]:
        mask = evaluate(parse(text), lambda v: DF[v].to_numpy(), kinds)
        assert int(np.sum(mask)) == ts.tabulate(ts.Microdata.from_frame(DF), ["sex"], where=text).value()


@pytest.mark.parametrize("text", [
    "(" * 320 + "sex = 1" + ")" * 320,
    "not " * 2400 + "sex = 1",
    "sex = 1 and " + "(not " * 40 + "sex = 2" + ")" * 40,   # brackets and nots count together
    "(" * 5000,
])
def test_deep_nesting_is_one_error_line_never_a_recursion_error(text: str) -> None:
    with pytest.raises(ts.InputError) as err:
        parse(text)
    assert "\n" not in str(err.value) and "nested more than 64 deep" in str(err.value)


def test_deep_nesting_is_refused_by_the_cli_with_one_line(tmp_path, capsys) -> None:
    data = tmp_path / "d.csv"
    DF.to_csv(data, index=False)
    out = tmp_path / "t.csv"
    code = main(["tabulate", str(data), "--by", "sex", "--where", "not " * 2400 + "sex = 1", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "nested more than 64" in err and not out.exists()


def test_the_deepest_filter_allowed_runs_in_every_evaluator() -> None:
    """64 levels parse, compile to SQL the engine runs, and evaluate in numpy: the guard is at
    the language's edge, not below what an evaluator can take."""
    from tabsafe.model.filter import MAX_DEPTH, evaluate

    text = "(" * (MAX_DEPTH // 2) + "not " * (MAX_DEPTH // 2) + "sex = 1" + ")" * (MAX_DEPTH // 2)
    node = parse(text)
    assert ts.tabulate(ts.Microdata.from_frame(DF), ["area"], where=node).value() == 3  # an even number of nots
    mask = evaluate(node, lambda v: DF[v].to_numpy(), {"area": "text", "sex": "text", "age_year": "integer"})
    assert mask.tolist() == (DF.sex == "1").tolist()
    with pytest.raises(ts.InputError, match="nested more than"):
        parse("not " + text)
