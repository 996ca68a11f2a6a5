"""The ``suppress`` method on the contract: its parameters, what it refuses, what it publishes and
what it keeps private (issues #11, #12), on seed 000's Table 5.1."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tabsafe import Hierarchy, InnerCells, tabulate
from tabsafe.errors import InputError, as_flag
from tabsafe.protect.suppression import CellSuppression
from tabsafe.registry import get_method


@pytest.fixture(scope="module")
def table_5_1():
    """Seed 000 §5.2, Table 5.1: marital status by sex; one single female."""
    frame = pd.DataFrame({
        "marital": ["Married", "Married", "Divorced", "Divorced", "Single", "Single"],
        "sex": ["Male", "Female"] * 3, "n": [38, 17, 7, 4, 3, 1],
    })
    hs = {"marital": Hierarchy.flat(["Married", "Divorced", "Single"]), "sex": Hierarchy.flat(["Male", "Female"])}
    return tabulate(InnerCells.from_frame(frame, count="n"), ["marital", "sex"], hierarchies=hs)


def test_registered_under_its_name() -> None:
    assert get_method("suppress") is CellSuppression


@pytest.mark.parametrize("params", [{"min_freq": 0}, {"min_freq": None}, {"min_freq": 1}])
def test_a_rule_that_protects_nothing_is_refused(params) -> None:
    with pytest.raises(InputError) as err:
        CellSuppression(**params)
    assert "nothing would be protected" in err.value.render()
    assert "'min_freq'" in err.value.render()
    assert "--min-freq" in err.value.render(as_flag) and "'min_freq'" not in err.value.render(as_flag)


@pytest.mark.parametrize("params", [{"min_freq": 0, "t_abs": 3}, {"min_freq": 0, "zeros": "primary"},
                                    {"min_freq": None, "coalition": 1}, {"min_freq": 2}])
def test_any_other_rule_is_enough(params) -> None:
    CellSuppression(**params)


def test_no_protection_required_is_refused() -> None:
    with pytest.raises(InputError, match="protection_level"):
        CellSuppression(protection_level=0, protection_ratio=0)


@pytest.mark.parametrize("mode", ["fast", "optimal", "hypercube"])
def test_table_5_1_single_female_hidden_in_the_cheapest_rectangle(table_5_1, mode) -> None:
    p = CellSuppression(min_freq=3, mode=mode, time_limit=10).protect(table_5_1)
    t = p.table.to_frame()
    t = t.assign(marital=t["marital"].astype(str), sex=t["sex"].astype(str))
    hidden = t[t["status"] == "suppressed"]
    assert hidden["count"].isna().all() and t.loc[t["status"] == "published", "count"].notna().all()
    cells = {(r.marital, r.sex): r.reason for r in hidden.itertuples()}
    # the 1, and the cheapest rectangle through it: the single male (3) and the divorced row (7, 4)
    assert cells == {("Single", "Female"): "primary", ("Single", "Male"): "secondary",
                     ("Divorced", "Male"): "secondary", ("Divorced", "Female"): "secondary"}
    # published figures say how many cells are hidden, nothing about which are primary or their values
    figures = dict(p.report.figures)
    assert figures["suppressed"] == 4 and figures["cells"] == 12
    assert not {"primary", "secondary", "value_suppressed", "secondary_value", "objective", "lower_bound",
                "gap", "moves_verified"} & set(figures)
    private = dict(p.report.private)
    assert (private["primary"], private["secondary"], private["value_suppressed"], private["secondary_value"]) == (
        1, 3, 15, 14)
    assert "private" not in p.report.to_json() and p.report.to_json(evaluation=True)["private"] == private
    # the release itself has no reason and no original
    assert set(p.release.columns) == {"count", "status"}
    assert set(p.evaluation.value_columns) >= {"original", "reason"}


def test_release_of_a_sparse_table_covers_the_grid(table_5_1) -> None:
    sparse = table_5_1.take(table_5_1.counts != 0)
    p = CellSuppression(min_freq=3).protect(sparse)
    assert p.release.table.is_dense and p.release.table.n_cells == sparse.n_cells
    assert np.array_equal(np.nan_to_num(p.release.table.column("count"), nan=-1) >= 0,
                          p.release.table.column("status") == "published")


def test_a_table_too_large_for_the_fast_mode_is_refused_with_the_mode_that_fits(table_5_1) -> None:
    """Issue #28: the memory model refuses mode fast before any work and names mode hypercube
    with its own estimate when that one fits; mode hypercube then runs under the same limit."""
    from tabsafe import memory
    from tabsafe.errors import TooLargeError

    dense = table_5_1.densify()
    fast_need = CellSuppression(min_freq=3).memory_estimate(dense)
    cube_need = CellSuppression(min_freq=3, mode="hypercube").memory_estimate(dense)
    assert cube_need < fast_need
    with memory.limited((fast_need + cube_need) // 2):
        with pytest.raises(TooLargeError) as err:
            CellSuppression(min_freq=3).protect(dense)
        text = err.value.render(as_flag)
        assert "mode fast" in text and "--mode hypercube needs about" in text and "more than the limit" in text
        p = CellSuppression(min_freq=3, mode="hypercube").protect(dense)
        assert (p.release.table.column("status") == "suppressed").sum() == 4
    with memory.limited(cube_need - 1), pytest.raises(TooLargeError) as err:
        CellSuppression(min_freq=3, mode="hypercube").protect(dense)
    assert "hypercube" not in err.value.render(as_flag).split("more than")[1]
