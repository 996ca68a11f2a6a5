"""One contract for every registered protection method (DESIGN.md, style 10):
same seed → same output; input table untouched; dimensions kept; report complete; release
columns free of originals; identity parameters → the original table."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

import tabsafe as ts
from tabsafe.io import is_secret
from tabsafe.protect.ptable import PTable, PTableParams
from tabsafe.registry import get_method, method_names

rng = np.random.default_rng(42)
N = 400
DF = pd.DataFrame({
    "area": rng.choice(["a1", "a2", "a3", "a4"], N),
    "sex": rng.choice(["1", "2"], N),
    "age": rng.choice(["y", "m", "o"], N, p=[0.2, 0.5, 0.3]),
    "rkey": rng.integers(0, 10**10, N) / 1e10,
})
AREA = ts.Hierarchy.from_tree({"N": ["a1", "a2"], "S": ["a3", "a4"]})

IDENTITY_PTABLE = PTable.from_frame(pd.DataFrame({
    "i": [0, 1], "j": [0, 1], "p": [1.0, 1.0], "v": [0, 0], "p_int_lb": [0.0, 0.0], "p_int_ub": [1.0, 1.0],
}))

# name -> (typical instance, identity instance or None)
CASES: dict[str, tuple[Callable[[], Any], Callable[[], Any] | None]] = {
    "ckm": (lambda: ts.CellKeyMethod(ptable=PTableParams(max_noise=3, variance=2, js=1)),
            lambda: ts.CellKeyMethod(ptable=IDENTITY_PTABLE)),
    "round": (lambda: get_method("round").cls(mode="random", base=3),
              lambda: get_method("round").cls(mode="random", base=1)),
    "suppress": (lambda: get_method("suppress").cls(min_freq=3),
                 lambda: get_method("suppress").cls(min_freq=0)),
}


def test_every_registered_method_has_a_contract_case() -> None:
    assert set(method_names()) <= set(CASES)


def _table(method: Any) -> ts.Table:
    needs = method.needs()
    return ts.tabulate(ts.Microdata.from_frame(DF), ["area", "sex", "age"], hierarchies={"area": AREA},
                       key=needs.key, sums=needs.sums)


@pytest.mark.parametrize("name", sorted(CASES))
def test_contract(name: str) -> None:
    make, _ = CASES[name]
    method = make()
    table = _table(method)
    before = table.cells.copy(deep=True)
    a = method.protect(table, seed=7)
    b = make().protect(_table(make()), seed=7)
    # same seed, same output
    pd.testing.assert_frame_equal(a.table.cells, b.table.cells)
    # input untouched
    pd.testing.assert_frame_equal(table.cells, before)
    # the table keeps its dimensions and grid, and carries the originals for evaluation
    assert a.table.dimensions == table.dimensions and a.table.n_cells == table.n_cells
    np.testing.assert_array_equal(a.table.column("original"), table.counts)
    # the report names the method and its parameters; release columns hold no originals or keys
    assert a.report.method == name and a.report.params
    assert "count" in a.release_columns and not any(is_secret(c) for c in a.release_columns)


@pytest.mark.parametrize("name", sorted(CASES))
def test_identity_parameters_return_the_original(name: str) -> None:
    _, identity = CASES[name]
    assert identity is not None
    method = identity()
    table = _table(method)
    out = method.protect(table, seed=1).table
    np.testing.assert_array_equal(np.asarray(out.column("count"), dtype=float), table.counts.astype(float))
