"""The sparse, immutable table: stored cells, implied zeros, no way to change a value."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import tabsafe as ts
from tabsafe.model.table import Dimension, Table

DF = pd.DataFrame({"area": ["a1", "a1", "a2", "a3"], "sex": ["1", "2", "2", "1"], "rkey": [0.1, 0.2, 0.3, 0.4]})
AREA = ts.Hierarchy.from_tree({"N": ["a1", "a2"], "S": ["a3", "a4"]})


def _table() -> Table:
    return ts.tabulate(ts.Microdata.from_frame(DF), ["area", "sex"], hierarchies={"area": AREA}, key="rkey")


def test_only_cells_with_records_are_stored_and_others_are_zero() -> None:
    t = _table()
    assert t.n_cells == 7 * 3 and t.n_stored == int((t.grid("count") > 0).sum())
    assert t.value(area="a4", sex="1") == 0 and t.value(area="S", sex="1") == 1 and t.value() == 4
    dense = t.densify()
    assert dense.is_dense and dense.n_stored == t.n_cells
    np.testing.assert_array_equal(dense.column("count"), t.grid("count"))
    # ids of a dense table are its rows; a sparse table's rows map to ids
    assert t.rows_of(np.array([t.cell_id({"area": "a4", "sex": "1"})]))[0] == -1
    assert dense.value(area="N") == t.value(area="N") == 3


def test_values_cannot_be_changed() -> None:
    t = _table()
    with pytest.raises(ValueError):
        t.column("count")[0] = 99
    with pytest.raises(ValueError):
        t.counts[:] = 0
    with pytest.raises(ValueError):
        t.ids[0] = 5
    with pytest.raises(TypeError):
        t.meta["source"] = "elsewhere"  # type: ignore[index]
    with pytest.raises(AttributeError):
        t.meta = {}  # type: ignore[misc]
    with pytest.raises(ValueError):  # a view cannot be made writable again
        t.column("count").setflags(write=True)
    assert t.value() == 4


def test_a_table_never_shares_a_callers_writable_array() -> None:
    d = Dimension("sex", ts.Hierarchy.flat(["1", "2"]))
    counts = np.array([5, 2, 3])
    t = Table.from_grid([d], {"count": counts})
    counts[0] = 100  # the caller's array stays the caller's
    assert t.value() == 5 and counts.flags.writeable


def test_new_values_give_a_new_table() -> None:
    t = _table()
    u = t.with_values(count=t.counts * 2, extra=np.ones(t.n_stored))
    assert t.value() == 4 and u.value() == 8 and "extra" not in t.value_columns
    assert u.with_values(extra=None).value_columns == t.value_columns


def test_arrow_view_has_codes_not_positions() -> None:
    t = _table()
    frame = t.densify().to_arrow(["count"]).to_pandas()
    assert list(frame.columns) == ["area", "sex", "count"]
    assert frame["area"].astype(str).iloc[0] == "Total" and len(frame) == t.n_cells
    row = frame[(frame["area"].astype(str) == "a2") & (frame["sex"].astype(str) == "2")]
    assert int(row["count"].iloc[0]) == 1


def test_a_national_grid_costs_what_its_data_cost() -> None:
    """55 million grid cells, a handful of records: stored cells only, and a dense view is refused."""
    n = 180_000
    areas = [f"A{i:06d}" for i in range(n)]
    df = pd.DataFrame({"area": areas[:5], "age": ["1", "2", "3", "4", "5"], "sex": ["1", "2", "1", "2", "1"]})
    codelists = {"area": ts.Hierarchy.flat(areas), "age": ts.Hierarchy.flat([str(i) for i in range(102)]),
                 "sex": ts.Hierarchy.flat(["1", "2"])}
    t = ts.tabulate(ts.Microdata.from_frame(df, codelists=codelists), ["area", "age", "sex"])
    assert t.n_cells == (n + 1) * 103 * 3 and t.n_stored <= 5 * 8
    with pytest.raises(ts.TooLargeError):
        t.grid("count", max_cells=10_000_000)
