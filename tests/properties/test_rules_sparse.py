"""The risk rules on a sparse table flag exactly what they flag on its dense grid (the cells that
are not stored are zeros, which no rule but the zeros rule flags), on random tables with
hierarchies and many zeros."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.properties.strategies import dimensions
from tabsafe import InnerCells, tabulate
from tabsafe.errors import InputError
from tabsafe.model.table import Table
from tabsafe.risk.rules import RiskRules, RuleThresholds, assess, coalition_rule, extended_rules, threshold_rule


@st.composite
def sparse_tables(draw: st.DrawFn) -> Table:
    n_dims = draw(st.integers(2, 3))
    names = ["a", "b", "c"][:n_dims]
    hierarchies, codes = dimensions(draw, names, 5)
    grid = pd.MultiIndex.from_product(codes, names=names).to_frame(index=False)
    grid["n"] = draw(st.lists(st.sampled_from([0, 0, 0, 1, 2, 3, 5, 9, 30]), min_size=len(grid), max_size=len(grid)))
    grid = grid[grid["n"] > 0]  # the inner cells that exist
    if grid.empty:
        grid = pd.DataFrame({**{n: [c[0]] for n, c in zip(names, codes)}, "n": [1]})
    return tabulate(InnerCells.from_frame(grid, count="n"), names, hierarchies=hierarchies)


def _on_grid(table: Table, mask: np.ndarray) -> np.ndarray:
    out = np.zeros(table.n_cells, dtype=bool)
    out[table.ids] = mask
    return out


@settings(max_examples=40)
@given(table=sparse_tables(), t=st.sampled_from([2, 3, 4]), rel=st.sampled_from([50, 80, 100]),
       k=st.integers(0, 2))
def test_rules_on_stored_cells_equal_the_dense_grid(table: Table, t: int, rel: int, k: int) -> None:
    dense = table.densify()
    assert not table.is_dense or table.n_stored == table.n_cells
    th = RuleThresholds(t_k_abs=t, t_y_abs=t, t_k_rel=rel, t_y_rel=rel, t_min=t, t_min_k=t + 2, t_min_y=t + 2)
    sparse_flags = extended_rules(table, th)
    dense_flags = extended_rules(dense, th)
    assert sparse_flags.keys() == dense_flags.keys()
    for rule in sparse_flags:
        assert np.array_equal(_on_grid(table, sparse_flags[rule]), dense_flags[rule]), rule
    assert np.array_equal(_on_grid(table, coalition_rule(table, k)), coalition_rule(dense, k))
    assert np.array_equal(_on_grid(table, threshold_rule(table, t)), threshold_rule(dense, t))
    # the summary counts the same cells either way
    rules = RiskRules(min_freq=t, thresholds=th, coalition=k)
    assert assess(table, rules).summary() == assess(dense, rules).summary()


def test_zeros_rule_needs_the_grid_and_assess_densifies_for_it() -> None:
    inner = pd.DataFrame({"m": ["married", "single", "single"], "h": ["ft", "ft", "pt"], "n": [6, 2, 2]})
    t = tabulate(InnerCells.from_frame(inner, count="n"), ["m", "h"])
    assert not t.is_dense  # (married, pt) is an implied zero
    from tabsafe.risk.rules import zeros_rule

    with pytest.raises(InputError, match="dense"):
        zeros_rule(t)
    a = assess(t, RiskRules(zeros=1, targets=("h",)))
    assert a.table.is_dense
    flagged = a.to_frame()
    flagged = set(map(tuple, flagged.loc[flagged["zeros"], ["m", "h"]].to_numpy().tolist()))
    assert flagged == {("married", "ft"), ("married", "pt")}
