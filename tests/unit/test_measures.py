"""Every information-loss measure on a small table worked out by hand (seed 004 §5.2, 000 §5.8,
002 §4.2; tabsafe.evaluate.measures)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tabsafe.evaluate.measures import (
    Comparison,
    anova_r2,
    average_absolute_distance,
    binomial_test,
    chi_square,
    decile_change,
    hellinger_distance,
    relative_absolute_distance,
    signed_rank_test,
    spearman,
    utility_measures,
    variance_ratio,
)

# two rows (areas) of three cells; the published table changes 4 cells
ORIG = [[4, 1, 0], [9, 0, 2]]
PERT = [[1, 1, 3], [4, 1, 2]]


def test_hellinger_per_row_mean_and_standard_error() -> None:
    m = hellinger_distance(ORIG, PERT)
    # row 1: ½(√1−√4)² + 0 + ½(√3−0)² = 0.5 + 1.5 = 2 → √2
    # row 2: ½(√4−√9)² + ½(√1−0)² + 0 = 0.5 + 0.5 = 1 → 1
    assert m.per_row.tolist() == pytest.approx([math.sqrt(2), 1.0])
    assert m.mean == pytest.approx((math.sqrt(2) + 1) / 2)
    # SE of a mean of two values = |a − b| / 2
    assert m.se == pytest.approx((math.sqrt(2) - 1) / 2)
    assert m.rows == 2


def test_relative_absolute_distance_skips_original_zeros() -> None:
    m = relative_absolute_distance(ORIG, PERT)
    # row 1: |1−4|/4 + 0 (the cell 0 → 3 has no relative distance) = 0.75
    # row 2: |4−9|/9 + 0 (0 → 1 skipped) + 0 = 5/9
    assert m.per_row.tolist() == pytest.approx([0.75, 5 / 9])
    assert m.mean == pytest.approx((0.75 + 5 / 9) / 2)


def test_average_absolute_distance_per_cell() -> None:
    m = average_absolute_distance(ORIG, PERT)
    # row 1: (3 + 0 + 3) / 3 = 2; row 2: (5 + 1 + 0) / 3 = 2
    assert m.per_row.tolist() == pytest.approx([2.0, 2.0])
    assert m.mean == pytest.approx(2.0) and m.se == pytest.approx(0.0)


def test_average_absolute_distance_with_a_mask() -> None:
    # only the first two cells of each row: row 1 (3 + 0)/2, row 2 (5 + 1)/2
    m = average_absolute_distance(ORIG, PERT, mask=[[True, True, False], [True, True, False]])
    assert m.per_row.tolist() == pytest.approx([1.5, 3.0])


def test_variance_ratio_skips_rows_without_variance() -> None:
    # row 1: V(1,3) = 2, V(0,4) = 8 → 4; row 2: V(2,2) = 0: no ratio
    m = variance_ratio([[1, 3], [2, 2]], [[0, 4], [1, 3]])
    assert m.per_row[0] == pytest.approx(4.0) and math.isnan(m.per_row[1])
    assert m.mean == pytest.approx(4.0) and m.rows == 1


def test_decile_change_by_hand() -> None:
    # ten cells 0..9 of one category, each its own decile; swapping the two smallest moves both
    m = decile_change([list(range(10))], [[1, 0, 2, 3, 4, 5, 6, 7, 8, 9]])
    assert m.mean == pytest.approx(20.0)
    # ties keep the original order: all published values equal → the ranks are the original ones
    assert decile_change([list(range(10))], [[5] * 10]).mean == pytest.approx(0.0)
    # 20 cells, two per decile; the largest cell falls to the bottom: it moves from decile 9 to
    # 0 and the 19 others move up one place: cells 1, 3, 5, … 17 cross into the next decile
    orig = list(range(20))
    pert = [x + 1 for x in orig]
    pert[19] = -1
    assert decile_change([orig], [pert]).mean == pytest.approx(100 * 10 / 20)


def test_spearman_by_hand() -> None:
    # d² = 0 + 1 + 1 + 0 = 2 → 1 − 6·2 / (4·15) = 0.8
    assert spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    # ties get their average rank: ranks (1.5, 1.5, 3) and (1, 2, 3) → r = √3/2
    assert spearman([1, 1, 2], [1, 2, 3]) == pytest.approx(math.sqrt(3) / 2)
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))
    # ranks, not values: a monotone but not linear relation has correlation 1
    assert spearman([1, 2, 3, 10], [1, 2, 3, 4]) == pytest.approx(1.0)


def test_chi_square_and_cramers_v_by_hand() -> None:
    # N = 100, rows 30/70, columns 40/60 → expected 12, 18, 28, 42
    got = chi_square([[10, 20], [30, 40]])
    chi2 = 4 / 12 + 4 / 18 + 4 / 28 + 4 / 42
    assert got["chi2"] == pytest.approx(chi2)
    assert got["dof"] == 1
    assert got["cramers_v"] == pytest.approx(math.sqrt(chi2 / 100))
    # empty rows and columns are left out
    assert chi_square([[10, 20, 0], [30, 40, 0], [0, 0, 0]])["chi2"] == pytest.approx(chi2)


def test_signed_rank_by_hand() -> None:
    # differences 1, −2, 3, 4 (and two zeros, dropped): ranks 1..4, W− = 2; of the 16 sign
    # patterns, 3 have W ≤ 2 ({}, {1}, {2}): two-sided exact p = 6/16
    got = signed_rank_test([5, 5, 5, 5, 7, 7], [6, 3, 8, 9, 7, 7])
    assert got["statistic"] == pytest.approx(2.0)
    assert got["p_value"] == pytest.approx(6 / 16)
    assert got["nonzero"] == 4


def rr3(n: int) -> dict[int, float]:
    r = n % 3
    return {n: 1.0} if r == 0 else {n - r + 3: r / 3, n - r: 1 - r / 3}


def test_binomial_test_by_hand() -> None:
    # six cells of 1 all rounded up (q = 1/3): P(6 ups) = 1/729, the only outcome as unlikely
    got = binomial_test([1] * 6, [3] * 6, rr3)
    assert got["tests"] == [{"p_up": pytest.approx(1 / 3), "cells": 6, "up": 6, "p_value": pytest.approx(1 / 729)}]
    assert got["p_min_adjusted"] == pytest.approx(1 / 729)
    assert not got["consistent"]
    # cells of 1 and 2 (q = 1/3 and 2/3): two samples, Bonferroni over both
    got = binomial_test([1, 1, 1, 2, 2, 2, 3], [3, 0, 0, 3, 3, 0, 3], rr3)
    assert [t["up"] for t in got["tests"]] == [1, 2]
    assert got["consistent"] and got["p_min_adjusted"] == pytest.approx(1.0)
    # a value random rounding cannot give is impossible
    assert binomial_test([1, 2], [2, 3], rr3)["impossible"] == 1
    # Bonferroni: the smallest p-value times the number of samples (six 1s all up, three 2s as
    # expected)
    got = binomial_test([1] * 6 + [2] * 3, [3] * 6 + [3, 3, 0], rr3)
    assert len(got["tests"]) == 2 and got["p_min_adjusted"] == pytest.approx(2 / 729)


def test_binomial_test_counts_only_ups() -> None:
    """A method that may also keep the value (barnardisation: n − 1, n, n + 1 with 1/4, 1/2,
    1/4): 'up' is published > n, probability 1/4; eight cells with 2 up, 4 kept, 2 down follow it."""
    def barnard(n):
        return {n: 1.0} if n == 0 else {n - 1: 0.25, n: 0.5, n + 1: 0.25}

    got = binomial_test([5] * 8, [6, 6, 5, 5, 5, 5, 4, 4], barnard)
    assert got["tests"][0]["p_up"] == pytest.approx(0.25)
    assert got["tests"][0]["up"] == 2 and got["p_min_adjusted"] == pytest.approx(1.0)


def test_anova_r2_by_hand() -> None:
    # groups (2, 0) and (1, 1) on scores 0, 1: grand mean 1/4; SST = 2/16 + 1/16 + 9/16 = 3/4;
    # group means 0 and 1/2 → SSB = 2/16 + 2/16 = 1/4 → R² = 1/3
    assert anova_r2([[2, 0], [1, 1]], [0.0, 1.0]) == pytest.approx(1 / 3)
    assert anova_r2([[1, 1], [1, 1]], [0.0, 1.0]) == pytest.approx(0.0)


# ------------------------------------------------------------------------------- on tables


def _tables():
    from tabsafe.model.hierarchy import Hierarchy
    from tabsafe.model.table import Dimension, Table

    area = Dimension("area", Hierarchy.from_tree({"N": ["a1", "a2"], "S": ["a3"]}))
    sex = Dimension("sex", Hierarchy.flat(["1", "2"]))
    # grid order: area Total, N, a1, a2, S, a3 (display order) × sex Total, 1, 2
    inner = {("a1", "1"): 4, ("a1", "2"): 1, ("a2", "1"): 9, ("a2", "2"): 0, ("a3", "1"): 2, ("a3", "2"): 2}

    def build(cells):
        values = {}
        for a in area.hierarchy.order:
            leaves_a = [a] if area.hierarchy.is_leaf(a) else [x for x in area.hierarchy.leaves
                                                               if a in area.hierarchy.ancestors(x)]
            for s in sex.hierarchy.order:
                leaves_s = [s] if s != "Total" else ["1", "2"]
                values[(a, s)] = sum(cells[(x, y)] for x in leaves_a for y in leaves_s)
        return values

    orig = build(inner)
    t = Table.from_grid([area, sex], {"count": np.array([orig[(a, s)] for a in area.hierarchy.order
                                                         for s in sex.hierarchy.order])})
    # published: a1×1 4 → 3, the area total a1 5 → 6 (not additive), sex 2 of a2 suppressed (was 0)
    pub = dict(orig)
    pub[("a1", "1")] = 3
    pub[("a1", "Total")] = 6
    counts = np.array([pub[(a, s)] for a in area.hierarchy.order for s in sex.hierarchy.order], dtype=float)
    counts[area.hierarchy.position["a2"] * 3 + 2] = np.nan
    # the published table stores only non-zero cells: implied zeros elsewhere
    keep = np.isnan(counts) | (counts != 0)
    published = Table.from_cells([area, sex], np.flatnonzero(keep), {"count": counts[keep]})
    return t, published


def test_comparison_views_on_a_sparse_published_table() -> None:
    original, published = _tables()
    cmp = Comparison.of(original, published, rows="area")
    assert cmp.suppressed == 1
    o, p = cmp.inner()
    assert o.tolist() == [[4, 1], [9, 0], [2, 2]]
    assert p.tolist() == [[3, 1], [9, 0], [2, 2]]  # the suppressed cell counts as 0
    # margins: rows are every area code; their cells have an aggregate code
    mo, mp, mm = cmp.margins()
    assert mo.shape == (6, 3)
    assert mm.sum() == 6 * 3 - 6  # every cell but the 6 inner ones
    row_a1 = cmp.dimensions[0].hierarchy.position["a1"]
    assert mm[row_a1].tolist() == [True, False, False]
    assert mo[row_a1, 0] == 5 and mp[row_a1, 0] == 6
    # marginal table of sex over all areas: published margin cells (Total, 1) and (Total, 2)
    a, b = cmp.marginal((1,))
    assert a.tolist() == [15, 3] and b.tolist() == [15, 3]
    a, b = cmp.marginal((0,))  # area leaves over all sexes
    assert a.tolist() == [5, 9, 4] and b.tolist() == [6, 9, 4]
    labels = [label for _, label in cmp.marginal_tables()]
    assert labels == ["area (over all sex)", "sex (over all area)"]


def test_utility_measures_on_the_table() -> None:
    original, published = _tables()
    out = utility_measures(Comparison.of(original, published, rows="area"))
    # inner cells: only a1×1 changed (4 → 3): per-row AAD 1/2, 0, 0
    assert out["inner"]["aad"]["mean"] == pytest.approx((0.5 + 0 + 0) / 3)
    assert out["inner"]["rad"]["mean"] == pytest.approx((1 / 4 + 0 + 0) / 3)
    # margins: the a1 total 5 → 6 is the only change among margin cells (rows: Total, N, a1, a2, S, a3)
    assert out["margins"]["aad"]["mean"] == pytest.approx((1 / 1) / 6)  # a1's single margin cell
    area_margin = next(t for t in out["marginal_tables"] if t["variables"] == ["area"])
    assert area_margin["rad"] == pytest.approx(1 / 5)
    assert area_margin["mean_relative_difference"] == pytest.approx((1 / 5) / 3)
    assert out["suppressed_cells"] == 1
    assert out["signed_rank"]["nonzero"] == 1


def test_binomial_test_of_a_random_rounding_realisation(small_census) -> None:
    """000 §5.8: a realisation of the registered random rounding follows its stated
    probabilities; the same cells all rounded up do not."""
    from tabsafe import Microdata, tabulate
    from tabsafe.registry import build_method

    table = tabulate(Microdata.from_file(small_census.persons), ["region", "age", "sex", "activity"])
    method = build_method("round", {"mode": "random", "base": 5})
    # a fixed realisation (a test at level 5% flags about one realisation in twenty: over 200
    # seeds the shares of ups were 0.198, 0.399, 0.595, 0.799 and 4.5% were flagged)
    published = method.protect(table, seed=2).release.table
    original, rounded = table.counts, published.column("count")
    got = binomial_test(original, rounded, method.published_distribution)
    assert [t["p_up"] for t in got["tests"]] == pytest.approx([0.2, 0.4, 0.6, 0.8])
    assert got["impossible"] == 0 and got["consistent"]
    all_up = np.where(original % 5 == 0, original, original - original % 5 + 5)
    assert not binomial_test(original, all_up, method.published_distribution)["consistent"]
