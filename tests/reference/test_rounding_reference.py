"""Rounding: the worked examples of seed 000 §5.5 (Tables 5.18–5.21) and §5.5.1, run through
tabsafe's methods ``round`` and ``controlled-round``."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

import tabsafe as ts
from tabsafe.errors import InputError, MethodError, Reason
from tabsafe.protect.controlled_rounding import ControlledRounding, existence_intervals, rapid_round
from tabsafe.protect.controlled_rounding.steps import step_range
from tabsafe.protect.rounding import Rounding, random_round

AREAS = ["Area A", "Area B", "Area C"]
SEXES = ["Male", "Female", "Total"]

# 000 Table 5.18: population counts by sex (rows: area; columns: Male, Female, Total).
TABLE_5_18 = {"Area A": (1, 0, 1), "Area B": (3, 3, 6), "Area C": (12, 20, 32), "Total": (16, 23, 39)}
# 000 Table 5.19 (conventional rounding, base 5), with Area C's total as 30: 32 rounds to 30,
# the handbook's 35 is a misprint (its own text: "row 3 ... does not sum to 35").
TABLE_5_19 = {"Area A": (0, 0, 0), "Area B": (5, 5, 5), "Area C": (10, 20, 30), "Total": (15, 25, 40)}
# 000 Table 5.20 (one realisation of random rounding, base 5).
TABLE_5_20 = {"Area A": (0, 0, 0), "Area B": (5, 0, 5), "Area C": (10, 20, 35), "Total": (15, 20, 40)}
# 000 Table 5.21 (a controlled rounding, base 5).
TABLE_5_21 = {"Area A": (5, 0, 5), "Area B": (0, 5, 5), "Area C": (10, 20, 30), "Total": (15, 25, 40)}


def table_5_18() -> ts.Table:
    rows = [{"area": a, "sex": s, "n": TABLE_5_18[a][i]} for a in AREAS for i, s in enumerate(["Male", "Female"])]
    hier = {"sex": ts.Hierarchy.flat(["Male", "Female"]), "area": ts.Hierarchy.flat(AREAS)}
    return ts.tabulate(ts.InnerCells.from_frame(pd.DataFrame(rows), count="n"), ["area", "sex"], hierarchies=hier)


def as_grid(table: ts.Table, column: str = "count") -> dict[str, tuple[int, ...]]:
    """The table as printed in the handbook: rows by area, columns Male, Female, Total."""
    return {a: tuple(int(table.value(column, area=a, sex=s)) for s in SEXES) for a in [*AREAS, "Total"]}


def printed(table: ts.Table, grid: dict[str, tuple[int, ...]]) -> np.ndarray:
    """A printed table as values of the dense grid of ``table``."""
    dense = table.densify()
    out = np.zeros(dense.n_cells, dtype=np.int64)
    for area, values in grid.items():
        for sex, value in zip(SEXES, values):
            out[dense.cell_id({"area": area, "sex": sex})] = value
    return out


def zero_restricted_roundings(table: ts.Table, base: int) -> np.ndarray:
    """Every additive zero-restricted rounding of a small table, by enumeration (000 §5.5.1:
    ``a ∈ {u·b, (u+1)·b}``, multiples unchanged)."""
    dense = table.densify()
    z = np.asarray(dense.counts, dtype=np.int64)
    u, r = np.divmod(z, base)
    moving = np.flatnonzero(r)
    ups = np.array(list(itertools.product([0, 1], repeat=moving.size)), dtype=np.int64)
    every = np.repeat((u * base)[None, :], ups.shape[0], axis=0)
    every[:, moving] += base * ups
    return every[np.all(dense.additivity() @ every.T == 0, axis=0)]


def zero_restricted_rounding_exists(table: ts.Table, base: int) -> bool:
    """Whether an additive zero-restricted rounding exists: ``A·(u + y) = 0`` with binary ``y``
    on the non-multiples (a feasibility program for scipy's milp, apart from tabsafe's)."""
    import scipy.optimize as so

    dense = table.densify()
    z = np.asarray(dense.counts, dtype=np.int64)
    u, r = np.divmod(z, base)
    A = dense.additivity()
    res = so.milp(np.zeros(z.size), constraints=[so.LinearConstraint(A, -(A @ u), -(A @ u))],
                  integrality=np.ones(z.size), bounds=so.Bounds(np.zeros(z.size), (r != 0).astype(float)))
    assert res.status in (0, 2), res.message
    return res.status == 0


def test_table_5_18_is_tabulated_as_printed() -> None:
    assert as_grid(table_5_18()) == TABLE_5_18


def test_conventional_rounding_gives_table_5_19() -> None:
    p = Rounding(mode="conventional", base=5).protect(table_5_18())
    assert as_grid(p.release.table) == TABLE_5_19
    assert as_grid(p.evaluation, "original") == TABLE_5_18
    assert not p.release.table.densify().is_additive()  # "Tables are not additive"


@pytest.mark.parametrize("seed", range(5))
def test_random_rounding_moves_each_cell_to_an_adjacent_multiple(seed: int) -> None:
    t = table_5_18()
    got = Rounding(mode="random", base=5).protect(t, seed=seed).release.table.grid("count")
    z = t.grid("count")
    assert set(np.unique(got % 5)) == {0}
    assert np.all((got == (z // 5) * 5) | (got == -(-z // 5) * 5))


def test_table_5_20_comes_out_of_random_rounding_as_often_as_it_should() -> None:
    """000 Table 5.20 is "a possible solution" of random rounding: over 4,000 runs of the method
    on Table 5.18 it comes out as often as the product of its cells' probabilities says
    (``r/b`` up, ``1 − r/b`` down), and every cell goes up as often as ``r/b``; the rows do not
    add up in general ("row 3 of Table 5.20 does not sum to 35")."""
    t = table_5_18()
    z = t.grid("count")
    target = printed(t, TABLE_5_20)
    r = z % 5
    up = target > z
    p_cell = np.where(r == 0, 1.0, np.where(up, r / 5, 1 - r / 5))
    assert np.all((target == z - r) | (target == z - r + 5))  # the printed table is in the support
    n = 4000
    runs = np.array([Rounding(mode="random", base=5).protect(t, seed=s).release.table.grid("count")
                     for s in range(n)])
    hits = int(np.all(runs == target, axis=1).sum())
    expected = n * float(np.prod(p_cell))  # 0.0076 × 4,000 ≈ 30
    assert abs(hits - expected) <= 4 * np.sqrt(expected), (hits, expected)
    moving = r > 0
    share_up = (runs > z).mean(0)
    assert np.all(np.abs(share_up - r / 5)[moving] <= 4 * np.sqrt(r * (5 - r) / 25 / n)[moving])
    dense = t.densify()
    row_c = [dense.cell_id({"area": "Area C", "sex": s}) for s in SEXES]
    adds_up = runs[:, row_c[0]] + runs[:, row_c[1]] == runs[:, row_c[2]]
    assert 0.2 < adds_up.mean() < 0.8  # 10 or 15, plus 20, against 30 or 35


def test_random_rounding_probabilities_of_the_base_3_example() -> None:
    """000 §5.5: base 3, residue 1 goes up with 1/3, residue 2 with 2/3; multiples stay."""
    draws = (np.arange(3000) + 0.5) / 3000  # an exact grid of uniform draws
    for value, p_up in [(0, 0.0), (1, 1 / 3), (2, 2 / 3), (3, 0.0), (4, 1 / 3), (5, 2 / 3), (6, 0.0)]:
        got = random_round(np.full(draws.size, value), 3, draws)
        floor = (value // 3) * 3
        assert set(np.unique(got)) <= {floor, floor + 3}
        assert np.mean(got > floor) == pytest.approx(p_up, abs=1e-9)


def test_controlled_rounding_of_table_5_18_as_table_5_21() -> None:
    """000 Table 5.21 is "a possible rounding solution" by controlled rounding to base 5. tabsafe's
    rounding of Table 5.18 is one too: additive, every cell at an adjacent multiple (multiples
    such as Area C's 20 females unchanged), and optimal — its distance ``Σ|z − a|`` is the least
    over every zero-restricted rounding (enumerated), no more than the handbook's 22; its
    existence intervals hold the true values."""
    t = table_5_18()
    p = ControlledRounding(base=5, intervals=True).protect(t)
    rel = p.release.table
    got, z = rel.grid("count"), t.grid("count")
    assert rel.is_additive()
    assert np.all((got == (z // 5) * 5) | (got == -(-z // 5) * 5))
    assert as_grid(rel)["Area C"][1] == 20 and as_grid(rel)["Area A"][1] == 0
    candidates = zero_restricted_roundings(t, 5)
    handbook = printed(t, TABLE_5_21)
    assert any(np.array_equal(c, handbook) for c in candidates)  # the handbook's table is one of them
    assert int(np.abs(handbook - z).sum()) == 22
    best = int(np.abs(candidates - z).sum(1).min())
    objective = p.report.private["objective"]
    assert objective == int(np.abs(got - z).sum()) == best <= 22
    assert p.report.figures["status"] == "optimal" and p.report.private["gap"] == 0
    lower, upper = rel.grid("lower"), rel.grid("upper")
    assert np.all((lower <= z) & (z <= upper))
    assert np.all(np.where(got == 0, upper == 4, (lower == got - 4) & (upper == got + 4)))
    # the report publishes no figure computed from the original counts
    assert "objective" not in p.report.figures and "gap" not in p.report.figures


def test_first_feasible_and_rapid_solutions_of_table_5_18() -> None:
    """000 §5.5.1.1: the first feasible solution is additive and zero-restricted (no better than
    the optimum); RAPID has the inner cells at their nearest multiple and margins by addition."""
    t = table_5_18()
    z = t.grid("count")
    best = int(np.abs(zero_restricted_roundings(t, 5) - z).sum(1).min())
    first = ControlledRounding(base=5, solution="first-feasible").protect(t)
    assert first.release.table.is_additive() and first.report.private["objective"] >= best
    assert np.all(np.abs(first.release.counts - z) < 5)
    rapid = ControlledRounding(base=5, solution="rapid").protect(t)
    assert rapid.report.figures["status"] == "rapid"
    assert as_grid(rapid.release.table) == {"Area A": (0, 0, 0), "Area B": (5, 5, 10), "Area C": (10, 20, 30),
                                            "Total": (15, 25, 40)}


def test_steps_allow_the_values_of_000_5_5_1() -> None:
    """000 §5.5.1: 7 at base 5 may become 5 or 10 zero-restricted, 0, 5, 10 or 15 with one step."""
    lo, hi = step_range(np.array([7, 10, 2]), 5, 0)
    assert (lo.tolist(), hi.tolist()) == ([0, 0, 0], [1, 0, 1])
    lo, hi = step_range(np.array([7, 10, 2]), 5, 1)
    assert (5 * (1 + np.arange(lo[0], hi[0] + 1))).tolist() == [0, 5, 10, 15]
    assert (5 * (2 + np.arange(lo[1], hi[1] + 1))).tolist() == [5, 10, 15]
    assert (5 * (0 + np.arange(lo[2], hi[2] + 1))).tolist() == [0, 5, 10]


def test_existence_intervals_of_000_5_5_1_2() -> None:
    lo, hi = existence_intervals(np.array([0, 10]), base=5)
    assert (lo.tolist(), hi.tolist()) == ([0, 6], [4, 14])  # [0,b-1]; a ± 4
    lo, hi = existence_intervals(np.array([15, 5]), base=5, steps=1)
    assert (lo.tolist(), hi.tolist()) == ([6, 0], [24, 9])  # the handbook's z in [6, 24]


def test_rapid_is_additive_with_inner_cells_at_the_nearest_multiple() -> None:
    t = table_5_18()
    dense = t.densify()
    values = rapid_round(t, base=5)
    assert dense.with_values(count=values).is_additive()
    assert values[dense.leaf_mask].tolist() == [0, 0, 5, 5, 10, 20]
    assert int(values[dense.cell_id({})]) == 40


# A 2x2x2x2 table with no zero-restricted controlled rounding to base 3 (found by search; the
# solver's presolve proves it), which does have one with one step.
INFEASIBLE = [[[[5, 0], [0, 0]], [[5, 0], [1, 0]]], [[[0, 4], [0, 0]], [[1, 1], [0, 5]]]]


def infeasible_table() -> ts.Table:
    vals = np.array(INFEASIBLE)
    rows = [{"a": f"a{i}", "b": f"b{j}", "c": f"c{k}", "d": f"d{m}", "n": int(vals[i, j, k, m])}
            for i, j, k, m in itertools.product(range(2), repeat=4)]
    return ts.tabulate(ts.InnerCells.from_frame(pd.DataFrame(rows), count="n"), ["a", "b", "c", "d"])


def test_infeasible_zero_restricted_rounding_is_reported_with_the_steps_suggestion() -> None:
    t = infeasible_table()
    assert not zero_restricted_rounding_exists(t, 3)  # indeed none exists
    with pytest.raises(MethodError, match=r"no zero-restricted controlled rounding to base 3 exists") as info:
        ControlledRounding(base=3).protect(t)
    assert info.value.reason is Reason.INFEASIBLE and info.value.suggestions[0].params == {"steps": 1}
    p = ControlledRounding(base=3, steps=1).protect(t)
    rel = p.release.table
    assert rel.is_additive() and np.all(rel.counts % 3 == 0)
    lo, hi = step_range(t.grid("count"), 3, 1)
    w = rel.counts // 3 - t.grid("count") // 3
    assert np.all((w >= lo) & (w <= hi))


def test_controlled_is_not_a_mode_of_round() -> None:
    with pytest.raises(InputError, match="controlled rounding is the method 'controlled-round'"):
        Rounding(mode="controlled", base=5)
