"""The compiled elimination (``protect/suppression/_gauss.c``) takes the decisions of the Python
reference (:func:`~tabsafe.protect.suppression.elimination.gauss_reference`) on random tables with
hierarchies, for every zero policy, random candidate orders, cells hidden from the start and cells
no release holds; the fast mode falls back to the reference when the extension is absent; and the
array-built support basis is the dict-built one."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.properties.strategies import dimensions
from tabsafe import InnerCells, tabulate
from tabsafe.model.table import Table
from tabsafe.protect.suppression import CellSystem, Problem, Settings, elimination, secondary_suppression
from tabsafe.protect.suppression.elimination import gauss, gauss_reference, support_basis, support_matrix


@st.composite
def tables(draw: st.DrawFn) -> Table:
    n_dims = draw(st.sampled_from([2, 3]))
    names = ["a", "b", "c"][:n_dims]
    hierarchies, codes = dimensions(draw, names, 6 if n_dims == 2 else 4)
    grid = pd.MultiIndex.from_product(codes, names=names).to_frame(index=False)
    grid["n"] = draw(st.lists(st.sampled_from([0, 0, 0, 1, 1, 2, 3, 5, 8, 20]), min_size=len(grid), max_size=len(grid)))
    return tabulate(InnerCells.from_frame(grid, count="n"), names, hierarchies=hierarchies).densify()


def _problem(draw: st.DrawFn, table: Table, zeros: str) -> Problem:
    """A problem with primary cells below a drawn threshold, some cells no release holds (then the
    basis is the full dict-built one) and a drawn candidate order (random costs)."""
    counts = np.asarray(table.counts)
    primary = (counts > 0) & (counts < draw(st.sampled_from([2, 3, 4])))
    hidden = None
    if draw(st.booleans()):
        hidden = np.array(draw(st.lists(st.booleans(), min_size=table.n_cells, max_size=table.n_cells)))
        hidden &= np.asarray(table.leaf_mask) & ~primary  # inner cells nobody publishes
    problem = Problem.build(CellSystem.of_table(table), primary, Settings(zeros=zeros), hidden=hidden)
    if draw(st.booleans()):
        cost = np.array(draw(st.lists(st.integers(0, 9), min_size=table.n_cells, max_size=table.n_cells)), dtype=float)
        problem = dataclasses.replace(problem, cost=np.where(problem.hidden, 0.0, cost))
    return problem


def test_the_extension_is_built() -> None:
    """Every install builds it (pyproject's ext-modules): a broken build would make the
    comparisons below compare the reference with itself."""
    assert elimination._compiled is not None


@settings(max_examples=150)
@given(data=st.data(), table=tables(), zeros=st.sampled_from(["never", "safe", "primary"]))
def test_compiled_elimination_takes_the_reference_decisions(data: st.DataObject, table: Table, zeros: str) -> None:
    problem = _problem(data.draw, table, zeros)
    first = np.array(data.draw(st.lists(st.booleans(), min_size=table.n_cells, max_size=table.n_cells)))
    first &= problem.candidates & (np.arange(table.n_cells) % 3 == 0)  # a few candidates hidden beforehand
    expected = gauss_reference(problem, first)
    got = gauss(problem, first)
    assert got.dtype == bool and got.shape == expected.shape
    assert np.array_equal(got, expected), f"{np.flatnonzero(got ^ expected)} decided otherwise"


@settings(max_examples=30)
@given(table=tables(), zeros=st.sampled_from(["never", "safe", "primary"]))
def test_without_the_extension_the_fast_mode_uses_the_reference(table: Table, zeros: str) -> None:
    primary = (np.asarray(table.counts) > 0) & (np.asarray(table.counts) < 3)
    assume(primary.any())  # else there is nothing to eliminate
    compiled = secondary_suppression(table, primary, Settings(mode="fast", zeros=zeros)).suppressed
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(elimination, "_compiled", None)
        mp.setattr(elimination, "gauss_reference", _counting(elimination.gauss_reference))
        pure = secondary_suppression(table, primary, Settings(mode="fast", zeros=zeros)).suppressed
        assert elimination.gauss_reference.calls > 0  # type: ignore[attr-defined]
    assert np.array_equal(compiled, pure)


def _counting(f):  # noqa: ANN001, ANN202 - a test spy
    def wrapped(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        wrapped.calls += 1
        return f(*args, **kwargs)
    wrapped.calls = 0
    return wrapped


@settings(max_examples=40)
@given(table=tables())
def test_the_array_built_support_basis_is_the_dict_built_one(table: Table) -> None:
    m = support_matrix(table)
    columns = support_basis(table)
    assert m.shape == (table.n_cells, len(columns))
    for k, col in enumerate(columns):
        rows = m.indices[m.indptr[k]:m.indptr[k + 1]]
        assert dict(zip(rows.tolist(), m.data[m.indptr[k]:m.indptr[k + 1]].tolist())) == col
