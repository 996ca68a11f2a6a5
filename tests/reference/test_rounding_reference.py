"""Rounding: the worked examples of seed 000 §5.5 (Tables 5.18–5.21) and §5.5.1."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

import tabsafe as ts
from tabsafe.errors import MethodError
from tabsafe.protect.controlled_rounding import _step_range, controlled_round, existence_intervals, rapid_round
from tabsafe.protect.rounding import Rounding, random_round

AREAS = ["Area A", "Area B", "Area C"]

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


def as_grid(table: ts.Table, column: str = "count") -> dict[str, tuple[int, int, int]]:
    def v(area: str, sex: str) -> int:
        return int(table.value(column, area=area, sex=sex))

    return {a: (v(a, "Male"), v(a, "Female"), v(a, "Total")) for a in [*AREAS, "Total"]}


def from_grid(table: ts.Table, grid: dict[str, tuple[int, int, int]]) -> np.ndarray:
    out = np.zeros(table.n_cells, dtype=np.int64)
    for area, values in grid.items():
        for sex, value in zip(["Male", "Female", "Total"], values):
            out[table.row_of({"area": area, "sex": sex})] = value
    return out


def test_table_5_18_is_tabulated_as_printed() -> None:
    assert as_grid(table_5_18()) == TABLE_5_18


def test_conventional_rounding_gives_table_5_19() -> None:
    t = table_5_18()
    p = Rounding(mode="conventional", base=5).protect(t)
    assert as_grid(p.table) == TABLE_5_19
    assert as_grid(p.table, "original") == TABLE_5_18
    assert not p.table.is_additive()  # "Tables are not additive"


@pytest.mark.parametrize("seed", range(5))
def test_random_rounding_moves_each_cell_to_an_adjacent_multiple(seed: int) -> None:
    t = table_5_18()
    got = Rounding(mode="random", base=5).protect(t, seed=seed).table.counts
    z = t.counts
    assert set(np.unique(got % 5)) == {0}
    assert np.all((got == (z // 5) * 5) | (got == -(-z // 5) * 5))


def test_table_5_20_is_a_possible_random_rounding() -> None:
    t = table_5_18()
    z, printed = t.counts, from_grid(t, TABLE_5_20)
    assert np.all((printed == (z // 5) * 5) | (printed == -(-z // 5) * 5))


def test_random_rounding_probabilities_of_the_base_3_example() -> None:
    """000 §5.5: base 3, residue 1 goes up with 1/3, residue 2 with 2/3; multiples stay."""
    draws = (np.arange(3000) + 0.5) / 3000  # an exact grid of uniform draws
    for value, p_up in [(0, 0.0), (1, 1 / 3), (2, 2 / 3), (3, 0.0), (4, 1 / 3), (5, 2 / 3), (6, 0.0)]:
        got = random_round(np.full(draws.size, value), 3, draws)
        floor = (value // 3) * 3
        assert set(np.unique(got)) <= {floor, floor + 3}
        assert np.mean(got > floor) == pytest.approx(p_up, abs=1e-9)


def test_table_5_21_is_a_zero_restricted_controlled_rounding() -> None:
    t = table_5_18()
    printed = from_grid(t, TABLE_5_21)
    assert t.with_values(count=printed).is_additive()
    lo, hi = _step_range(t.counts, 5, 0)
    w = printed // 5 - t.counts // 5
    assert np.all((w >= lo) & (w <= hi))


def test_controlled_rounding_of_table_5_18() -> None:
    t = table_5_18()
    p = Rounding(mode="controlled", base=5).protect(t)
    got, z = p.table.counts, t.counts
    assert p.table.is_additive()
    assert np.all(got % 5 == 0)
    assert np.all((got == (z // 5) * 5) | (got == -(-z // 5) * 5))  # every cell at an adjacent multiple
    printed_objective = int(np.abs(from_grid(t, TABLE_5_21) - z).sum())
    assert printed_objective == 22
    # optimal: no worse than the handbook's solution, and proven optimal
    assert p.report.figures["objective"] <= printed_objective
    assert p.report.figures["status"] == "optimal"
    assert p.report.figures["gap"] == 0


def test_steps_allow_the_values_of_000_5_5_1() -> None:
    """000 §5.5.1: 7 at base 5 may become 5 or 10 zero-restricted, 0, 5, 10 or 15 with one step."""
    lo, hi = _step_range(np.array([7, 10, 2]), 5, 0)
    assert (lo.tolist(), hi.tolist()) == ([0, 0, 0], [1, 0, 1])
    lo, hi = _step_range(np.array([7, 10, 2]), 5, 1)
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
    values = rapid_round(t, base=5)
    assert t.with_values(count=values).is_additive()
    inner = t.leaf_mask
    assert values[inner].tolist() == [0, 0, 5, 5, 10, 20]
    assert int(values[0]) == 40


# A 2x2x2x2 table with no zero-restricted controlled rounding to base 3 (found by search; the
# solver's presolve proves it), which does have one with one step.
INFEASIBLE = [[[[5, 0], [0, 0]], [[5, 0], [1, 0]]], [[[0, 4], [0, 0]], [[1, 1], [0, 5]]]]


def infeasible_table() -> ts.Table:
    vals = np.array(INFEASIBLE)
    rows = [dict(a=f"a{i}", b=f"b{j}", c=f"c{k}", d=f"d{m}", n=int(vals[i, j, k, m]))
            for i, j, k, m in itertools.product(range(2), repeat=4)]
    return ts.tabulate(ts.InnerCells.from_frame(pd.DataFrame(rows), count="n"), ["a", "b", "c", "d"])


def test_infeasible_zero_restricted_rounding_is_reported_with_the_steps_hint() -> None:
    t = infeasible_table()
    with pytest.raises(MethodError, match=r"no zero-restricted controlled rounding to base 3 exists.*--steps 1"):
        controlled_round(t, base=3)
    res = controlled_round(t, base=3, steps=1)
    assert t.with_values(count=res.values).is_additive()
    assert np.all(res.values % 3 == 0)
    lo, hi = _step_range(t.counts, 3, 1)
    w = res.values // 3 - t.counts // 3
    assert np.all((w >= lo) & (w <= hi))
