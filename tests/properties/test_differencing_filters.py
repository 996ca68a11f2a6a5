"""The audit reads a table's filter as the engine does (hypothesis).

Random filters in tabsafe's filter language — ``in``, ``=``, ``!=``, orderings, ``not``, ``and``,
``or``, on a text column holding numbers and a code that is none, and on an integer column — are
given to the audit (tables ``all`` and ``W`` by sex) and to the engine's SQL
(:func:`grouped_counts` with ``where``). Each combination of codes holds a distinct power of two
records, so a count names exactly the combinations it sums: the audit's counts of ``W`` equal
the engine's only if both admit the same combinations.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tabsafe.engines.planner import grouped_counts
from tabsafe.errors import InputError
from tabsafe.model.microdata import InnerCells
from tabsafe.registry import get_engine
from tabsafe.risk.differencing import DifferencingSpec, audit

BLOCKS = ["b1", "b2", "b10"]
HOURS = {"csv": ["5", "07", "15", "22", "30", "x"], "parquet": ["5", "7", "15", "22", "30"]}
NUMBERS = ["0", "7", "10", "15", "22.5", "30", "99"]


def _cells(fmt: str) -> pd.DataFrame:
    rows = [(h, b, s) for h in HOURS[fmt] for b in BLOCKS for s in ("F", "M")]
    return pd.DataFrame({"hours": [r[0] for r in rows], "block": [r[1] for r in rows], "sex": [r[2] for r in rows],
                         "n": [2**k for k in range(len(rows))]})


@pytest.fixture(scope="module", params=["csv", "parquet"])
def release(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    fmt = request.param
    d = tmp_path_factory.mktemp(f"filters-{fmt}")
    cells = _cells(fmt)
    if fmt == "csv":
        cells.to_csv(d / "cells.csv", index=False)
    else:
        cells.assign(hours=cells["hours"].astype("int32")).to_parquet(d / "cells.parquet", index=False)
    return fmt, d


def _atoms(var: str, codes: list[str], numbers: bool) -> st.SearchStrategy[str]:
    code = st.sampled_from(codes)
    some = st.lists(code, min_size=1, max_size=3, unique=True).map(", ".join)
    options = [code.map(lambda c: f"{var} = {c}"), code.map(lambda c: f"{var} != {c}"),
               some.map(lambda cs: f"{var} in ({cs})"), some.map(lambda cs: f"{var} not in ({cs})")]
    if numbers:
        options.append(st.tuples(st.sampled_from(["<", "<=", ">", ">="]), st.sampled_from(NUMBERS))
                       .map(lambda t: f"{var} {t[0]} {t[1]}"))
    return st.one_of(options)


def _expr(atom: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.recursive(atom, lambda inner: st.one_of(
        inner.map(lambda e: f"not ({e})"),
        st.tuples(inner, st.sampled_from(["and", "or"]), inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
    ), max_leaves=4)


def _filters(fmt: str) -> st.SearchStrategy[str]:
    hours = _expr(_atoms("hours", HOURS[fmt], numbers=True))
    block = _expr(_atoms("block", BLOCKS, numbers=False))
    return st.one_of(hours, block, st.tuples(hours, block).map(lambda t: f"{t[0]} and {t[1]}"),
                     st.tuples(hours, block).map(lambda t: f"not ({t[0]} or {t[1]})"))


def _check(release: tuple[str, Path], where: str) -> None:
    """The audit of ``all`` and ``W`` (by sex, W filtered by ``where``) against the engine's SQL."""
    fmt, d = release
    source = InnerCells.from_file(d / f"cells.{fmt}", count="n")
    selected = grouped_counts(get_engine("duckdb"), source, ["hours", "block", "sex"], where=where)
    combos = {tuple(selected.codes[k][p] for k, p in enumerate(row)): int(n)
              for row, n in zip(selected.positions.tolist(), selected.counts.tolist(), strict=True)}
    cells = _cells(fmt)
    everyone = {"F": int(cells[cells["sex"] == "F"]["n"].sum()), "M": int(cells[cells["sex"] == "M"]["n"].sum())}
    everyone["both"] = everyone["F"] + everyone["M"]
    chosen = {s: sum(n for c, n in combos.items() if s in ("both", c[2])) for s in everyone}
    restricted = [v for k, v in enumerate(["hours", "block"])
                  if {c[k] for c in combos} != set((HOURS[fmt], BLOCKS)[k])]

    spec = {"table": f"cells.{fmt}", "count": "n", "threshold": 2**40, "max_order": 1,
            "tables": [{"name": "all", "by": ["sex"]}, {"name": "W", "by": ["sex"], "where": where}]}
    (d / "release.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    result = audit(DifferencingSpec.from_yaml(d / "release.yaml"))

    found = {r.box.get("sex", ["both"])[0]: r for r in result.slivers.itertuples()}
    for s, r in found.items():
        assert (r.outer_count, r.inner_count, r.count) == (everyone[s], chosen[s], everyone[s] - chosen[s]), where
        assert r.tables == "all; W" and set(r.box) - {"sex"} == set(restricted), where
    # a sliver of everyone exactly when W is a box that differs from all in one variable
    assert ("both" in found) == (len(restricted) == 1 and 0 < chosen["both"] < everyone["both"]), where


@pytest.mark.parametrize("where", [
    "not hours < 20",                       # 'x' is no number: neither below 20 nor not below
    "not (hours < 20 or hours > 22.5)",     # '07' is 7 on text; 22.5 between codes
    "hours >= 7 and hours <= 22",
    "hours != 15 and block not in (b2)",    # != admits 'x' (a text comparison)
    "not (hours in (5, 30) or block = b10)",   # De Morgan: an 'and' of one-variable parts
    "hours = 30 and not (block = b1 or block = b2)",
])
def test_the_audit_admits_what_the_engine_selects(release: tuple[str, Path], where: str) -> None:
    if release[0] == "parquet":
        where = where.replace("07", "7")  # integers have no leading zero
    _check(release, where)


@settings(max_examples=8, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_filters_admit_what_the_engine_selects(release: tuple[str, Path], data: st.DataObject) -> None:
    _check(release, data.draw(_filters(release[0])))


@pytest.mark.parametrize(("where", "message"), [
    ("sex = F or block = b1", "the filter part (sex = 'F' or block = 'b1') ties 'sex' and 'block' together"),
    ("not (sex = F and block = b1)", "ties 'sex' and 'block' together"),
    ("block < b2", "'block' holds codes, which have no order"),
    ("block = b4", "'b4' is not a code of 'block'"),
    ("hours in (5, 6)", "'6' is not a code of 'hours'"),
    ("hours in (5, 'x')", "'hours' is numeric; 'x' is not a number"),
    ("hours = ", "expected a value, found the end"),
])
def test_filters_the_box_method_cannot_audit(tmp_path: Path, where: str, message: str) -> None:
    cells = _cells("parquet")
    cells.assign(hours=cells["hours"].astype("int32")).to_parquet(tmp_path / "cells.parquet", index=False)
    spec = {"table": "cells.parquet", "count": "n",
            "tables": [{"name": "all", "by": ["sex"]}, {"name": "W", "by": ["sex"], "where": where}]}
    (tmp_path / "release.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    with pytest.raises(InputError) as info:
        audit(DifferencingSpec.from_yaml(tmp_path / "release.yaml"))
    text = str(info.value)
    assert message in text and "table 'W'" in text and "\n" not in text, text
