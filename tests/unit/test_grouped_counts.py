"""`planner.grouped_counts`: the inner cells of some variables through the engine, validated as
tabulation validates, in the engine's code order (what the differencing audit reads)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

import tabsafe as ts
from tabsafe.engines.planner import GroupedCounts, grouped_counts, natural_key
from tabsafe.errors import InputError
from tabsafe.io import read_meta
from tabsafe.model.hierarchy import Hierarchy
from tabsafe.model.microdata import InnerCells, Microdata
from tabsafe.registry import get_engine
from tabsafe.synth import SynthResult

ENGINE = get_engine("duckdb")
BASE = ["small_area", "age", "sex", "activity"]


def _as_dict(g: GroupedCounts) -> dict[tuple[str, ...], int]:
    return {tuple(g.codes[k][p] for k, p in enumerate(row)): int(n)
            for row, n in zip(g.positions.tolist(), g.counts.tolist(), strict=True)}


def _old_reader(frame: pd.DataFrame, variables: list[str]) -> dict[tuple[str, ...], int]:
    """What the audit's own reader computed before it read through the engine: the records
    grouped by the variables with pandas, codes as text."""
    cols = frame[variables].astype(str)
    return {tuple(k): int(n) for k, n in cols.groupby(variables, observed=True).size().items()}


def test_counts_equal_the_old_reader_on_the_synthetic_census(small_census: SynthResult, tmp_path: Path) -> None:
    meta = read_meta(small_census.meta)
    persons = pq.read_table(small_census.persons).to_pandas()
    want = _old_reader(persons, BASE)
    g = grouped_counts(ENGINE, Microdata.from_file(small_census.persons, codelists=meta), BASE)
    assert _as_dict(g) == want and int(g.counts.sum()) == len(persons)
    assert g.codes == tuple(meta[v].leaves for v in BASE)   # declared codelists fix order and domain
    assert (g.counts > 0).all() and len(g.counts) == len(want)
    # groups sorted by code positions, row-major
    assert np.array_equal(np.lexsort(g.positions.T[::-1]), np.arange(len(g.counts)))
    # the same from a CSV (every column text) and without declared codelists
    persons[BASE].to_csv(tmp_path / "persons.csv", index=False)
    g_csv = grouped_counts(ENGINE, Microdata.from_file(tmp_path / "persons.csv"), BASE)
    assert _as_dict(g_csv) == want
    assert g_csv.codes[2] == tuple(sorted(persons["sex"].astype(str).unique(), key=natural_key))


def test_a_filter_selects_records_but_codes_come_from_all_data(small_census: SynthResult) -> None:
    meta = read_meta(small_census.meta)
    persons = pq.read_table(small_census.persons).to_pandas()
    chosen = persons[(persons["activity"].astype(str) == "EMP") & (persons["age_year"] >= 65)]
    assert 0 < len(chosen) < len(persons)
    g = grouped_counts(ENGINE, Microdata.from_file(small_census.persons, codelists=meta), ["area", "sex"],
                       where="activity = EMP and age_year >= 65")
    assert _as_dict(g) == _old_reader(chosen, ["area", "sex"])
    assert g.codes[0] == meta["area"].leaves and g.kinds == ("text", "text")


def test_codes_from_the_data_in_natural_order() -> None:
    frame = pd.DataFrame({"a": ["A10", "A2", "A1", "A2", "B"], "n": [1, 2, 3, 4, 5]})
    g = grouped_counts(ENGINE, Microdata.from_frame(frame), ["a", "n"])
    assert g.codes == (("A1", "A2", "A10", "B"), ("1", "2", "3", "4", "5")) and g.kinds == ("text", "integer")
    assert g.positions.tolist() == [[0, 2], [1, 1], [1, 3], [2, 0], [3, 4]] and g.counts.tolist() == [1] * 5
    # a declared codelist keeps its own order and codes without records
    declared = Microdata.from_frame(frame, codelists={"a": Hierarchy.flat(["B", "A10", "A2", "A1", "C"])})
    g = grouped_counts(ENGINE, declared, ["a"])
    assert g.codes == (("B", "A10", "A2", "A1", "C"),)
    assert g.positions[:, 0].tolist() == [0, 1, 2, 3] and g.counts.tolist() == [1, 1, 2, 1]
    total = grouped_counts(ENGINE, declared, [])
    assert total.codes == () and total.positions.shape == (1, 0) and total.counts.tolist() == [5]


def test_inner_cells_are_summed_and_checked(tmp_path: Path) -> None:
    cells = pd.DataFrame({"sex": ["F", "F", "M", "M"], "area": ["A2", "A10", "A2", "A10"], "n": [3, 0, 2, 7]})
    cells.to_csv(tmp_path / "cells.csv", index=False)
    g = grouped_counts(ENGINE, InnerCells.from_file(tmp_path / "cells.csv", count="n"), ["area", "sex"])
    # the explicit zero is no occurring combination
    assert _as_dict(g) == {("A2", "F"): 3, ("A2", "M"): 2, ("A10", "M"): 7}
    assert grouped_counts(ENGINE, InnerCells.from_frame(cells, count="n"), [], where="sex = M").counts.tolist() == [9]


def _error(fn) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError) as info:
        fn()
    return str(info.value)


@pytest.mark.parametrize(("case", "data", "by"), [
    ("outside codelist", Microdata.from_frame(pd.DataFrame({"a": ["x", "y", "z"]}),
                                              codelists={"a": Hierarchy.flat(["x", "y"])}), ["a"]),
    ("missing value", Microdata.from_frame(pd.DataFrame({"a": ["x", None]})), ["a"]),
    ("code named Total", Microdata.from_frame(pd.DataFrame({"a": ["x", "Total"]})), ["a"]),
    ("negative count", InnerCells.from_frame(pd.DataFrame({"a": ["x", "y"], "n": [1, -1]}), count="n"), ["a"]),
    ("fractional count", InnerCells.from_frame(pd.DataFrame({"a": ["x", "y"], "n": [1, 0.5]}), count="n"), ["a"]),
    ("duplicate cell", InnerCells.from_frame(pd.DataFrame({"a": ["x", "x"], "n": [1, 2]}), count="n"), ["a"]),
])
def test_validated_like_tabulation(case: str, data: Microdata | InnerCells, by: list[str]) -> None:
    message = _error(lambda: grouped_counts(ENGINE, data, by))
    assert message == _error(lambda: ts.tabulate(data, by)), case
    assert "\n" not in message


def test_unknown_variables_are_named() -> None:
    data = Microdata.from_frame(pd.DataFrame({"a": ["x"], "b": ["y"]}))
    assert "unknown variable 'c': not a column of the data (the data have: 'a', 'b')" in _error(
        lambda: grouped_counts(ENGINE, data, ["a", "c"]))
    assert "unknown variable 'c'" in _error(lambda: grouped_counts(ENGINE, data, ["a"], where="c = 1"))
    assert "'a' is grouped twice" in _error(lambda: grouped_counts(ENGINE, data, ["a", "a"]))
    cells = InnerCells.from_frame(pd.DataFrame({"a": ["x"], "n": [1]}), count="m")
    assert "no count column 'm' in the data" in _error(lambda: grouped_counts(ENGINE, cells, ["a"]))


def test_audit_of_a_census_release_counts_the_records(small_census: SynthResult, tmp_path: Path) -> None:
    # the benchmark's kind of release on the 20,000-person census: every sliver's count is the
    # number of its records, and its codes come in the declared codelist's order
    from tabsafe.risk.differencing import DifferencingSpec, audit

    hrc = Hierarchy.from_hrc(small_census.directory / "hierarchies" / "small_area.hrc")
    areas = [c for c in hrc.order if hrc.depth(c) == 2][:20]
    small = {a: list(hrc.children(a)) for a in areas}
    user = {f"U{a}": small[a] + small[areas[(i + 1) % len(areas)]][:1] for i, a in enumerate(areas)}
    spec = {"data": str(small_census.persons), "meta": str(small_census.meta), "threshold": 5, "max_order": 1,
            "derived": {"area": {"from": "small_area", "codes": small},
                        "user_area": {"from": "small_area", "codes": user}},
            "tables": [{"name": "area", "by": ["area", "sex"]},
                       {"name": "user area", "by": ["user_area", "sex"]},
                       {"name": "employed", "by": ["user_area"], "where": "activity = EMP"}]}
    (tmp_path / "release.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    result = audit(DifferencingSpec.from_yaml(tmp_path / "release.yaml"))
    assert result.summary["small"] > 0
    persons = pq.read_table(small_census.persons, columns=["small_area", "sex", "activity"]).to_pandas().astype(str)
    meta = read_meta(small_census.meta)
    for r in result.slivers.itertuples():
        inside = pd.Series(True, index=persons.index)
        for var, codes in r.box.items():
            inside &= persons[var].isin(codes)
            position = [meta[var].leaves.index(c) for c in codes]
            assert position == sorted(position)
        assert r.count == int(inside.sum()) == r.outer_count - r.inner_count
