"""Every risk measure on a small table worked out by hand (seed 004 §5.2, 000 §5.9, 002 §4.1;
tabsafe.evaluate.risk)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from tabsafe.evaluate.risk import (
    directly_disclosive,
    entropy_risk,
    risky_unswapped,
    small_cells,
    unperturbed_small_records,
)


def test_dr_counts_records_of_small_cells_published_unchanged() -> None:
    # small cells: 1, 2, 2, 1 (6 records); unchanged: the 1 and the first 2 → 3 records
    got = unperturbed_small_records([1, 2, 2, 1, 7, 0], [1, 2, 3, 0, 7, 1])
    assert got["dr"] == pytest.approx(3 / 6)
    assert got["small_cells"] == 4 and got["records_in_small_cells"] == 6
    # with small = 1 only the two cells of 1 count: one kept of two
    assert unperturbed_small_records([1, 2, 2, 1], [1, 2, 3, 0], small=1)["dr"] == pytest.approx(1 / 2)


def test_dr_record_level_moves() -> None:
    # the unchanged 2 had one record swapped away (and one swapped in): only 1 of its 2 is unperturbed
    got = unperturbed_small_records([1, 2, 2, 1], [1, 2, 3, 0], [0, 1, 0, 0])
    assert got["dr"] == pytest.approx(2 / 6)
    assert got["record_level"]
    # no small cells: nothing at risk
    assert unperturbed_small_records([0, 5], [0, 5])["dr"] == 0.0


def test_small_cells_before_after_unchanged() -> None:
    got = small_cells([0, 1, 2, 4, 1], [0, 1, 3, 4, 2])
    assert got["share_before"] == pytest.approx(3 / 5)
    assert got["share_after"] == pytest.approx(2 / 5)  # published 1 and 2
    assert got["share_unchanged"] == pytest.approx(1 / 3)  # only the first 1


def _dims():
    from tabsafe.model.hierarchy import Hierarchy
    from tabsafe.model.table import Dimension

    return [Dimension("area", Hierarchy.flat(["a1", "a2"])), Dimension("job", Hierarchy.flat(["x", "y", "z"]))]


def _grid(inner):
    """A 3 × 4 grid (Total, a1, a2) × (Total, x, y, z) from a 2 × 3 array of inner cells."""
    inner = np.asarray(inner, dtype=float)
    g = np.zeros((3, 4))
    g[1:, 1:] = inner
    g[0, 1:] = inner.sum(axis=0)
    g[1:, 0] = inner.sum(axis=1)
    g[0, 0] = inner.sum()
    return g


def test_directly_disclosive_by_hand() -> None:
    # a1: (5, 1, 0) — along job, a1's margin is 6 and cell x holds 5 ≥ 6 − 1: directly disclosive;
    #     y holds 1 < 5 no. Along area, x's margin 5 + 3 = 8: 5 < 7 no.
    # a2: (3, 0, 0) — margin 3: x holds 3 ≥ 2: disclosive. Along area, column y: margin 1, k = 1:
    #     |p| must exceed k. Column z: all zero.
    original = _grid([[5, 1, 0], [3, 0, 0]])
    got = directly_disclosive(_dims(), original, k=1)
    assert got["share_before"] == pytest.approx(2 / 6)
    # k = 0: only cells holding the whole margin: a2×x (3 of 3) and a1×y along area (1 of 1)
    assert directly_disclosive(_dims(), original, k=0)["share_before"] == pytest.approx(2 / 6)
    # only 'area' sensitive (margins over areas): at k = 1 nothing (column margins 8, 1, 0)
    assert directly_disclosive(_dims(), original, k=1, sensitive=["area"])["share_before"] == 0.0


def test_directly_disclosive_after_protection() -> None:
    original = _grid([[5, 1, 0], [3, 0, 0]])
    # published (5, 1, 0 | 6) and (2, 1, 0 | 3), columns 7, 2, 0. Along job: a1×x 5 ≥ 6 − 1 (and
    # both 5 and 6 are true: exact); a2×x 2 ≥ 3 − 1 (apparent: both values false). Along area,
    # column y (2): a1×y 1 ≥ 1 and a2×y 1 ≥ 1 (apparent: the margin is false)
    published = _grid([[5, 1, 0], [2, 1, 0]])
    got = directly_disclosive(_dims(), original, published, k=1)
    assert got["share_before"] == pytest.approx(2 / 6)
    assert got["share_after"] == pytest.approx(4 / 6)
    assert got["share_after_exact"] == pytest.approx(1 / 6)


def test_entropy_risk_by_hand() -> None:
    f = [6, 2, 0, 0]
    n, k = 8, 4
    h = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))
    size = (1 / math.sqrt(n)) * math.log(1 / (math.e * math.sqrt(n)))
    w = (0.2, 0.5, 0.3)
    r = w[0] * 2 / 4 + w[1] * (1 - h / math.log(k)) - w[2] * size
    got = entropy_risk(f, f, weights=w)
    assert got["r"] == pytest.approx(r)
    assert got["r_sharp"] == pytest.approx(r)  # nothing changed: r# = r
    # a zero filled in: Q = {3}, D = {2, 3}: exponent |D ∪ Q| / |D ∩ Q| = 2 / 1
    got = entropy_risk(f, [6, 1, 1, 0], weights=w)
    assert got["r_sharp"] == pytest.approx(w[0] * (2 / 4) ** 2 + w[1] * (1 - h / math.log(k)) - w[2] * size)
    # units moved between cells (record swapping): 1 of the 6 in cell 0 now in cell 1, 1 of the 2
    # in cell 1 now in cell 0: F_00 = 5, F_01 = 1, F_10 = 1, F_11 = 1; F#_0 = 6, F#_1 = 2
    trans = (np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]), np.array([5, 1, 1, 1]))
    h_sharp = -(5 / 8 * math.log(5 / 6) + 1 / 8 * math.log(1 / 2) + 1 / 8 * math.log(1 / 6) + 1 / 8 * math.log(1 / 2))
    got = entropy_risk(f, f, transitions=trans, weights=w)
    assert got["entropy_given_published"] == pytest.approx(h_sharp)
    assert got["r_sharp"] == pytest.approx(w[0] * 2 / 4 + w[1] * (1 - h / math.log(k)) * (1 - h_sharp / h)
                                           - w[2] * size)
    assert got["r_sharp"] < got["r"]


def test_risky_unswapped_from_reports() -> None:
    reports = [SimpleNamespace(figures={"pairs": 3}, private={"risky_households": 40, "risky_unswapped": 4}),
               SimpleNamespace(figures={}, private={})]
    assert risky_unswapped(reports) == {"share": pytest.approx(0.1), "risky_households": 40}
    assert risky_unswapped([SimpleNamespace(figures={}, private={})]) is None
