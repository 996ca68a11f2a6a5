"""Seed 001 §4's differencing table, reproduced by the ABS cell perturbation (both forms).

Two nested sub-population tables whose cells differ by one person (``n`` and ``n − 1``) are
perturbed independently; the paper gives, from 10,000 simulations per row rounded to two decimals,
the probability that the difference shows 1 (or 1 or 2) when the true difference is 1, and the
whole distribution of the difference for ``x = 2, n = 5``. ``bench/abs_differencing.py`` runs the
same experiment with a million draws and the exact law.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tabsafe.protect.abs_perturbation import abs_deviations, abs_deviations_from_keys

# (x, n, P(diff = 1 | 1), P(diff in {1, 2} | 1)) as printed in 001 §4
PAPER = [
    (6, 1000, 0.09, 0.16), (4, 1000, 0.11, 0.21), (2, 1000, 0.15, 0.29),
    (6, 100, 0.09, 0.17), (4, 100, 0.10, 0.20), (2, 100, 0.15, 0.29),
    (6, 20, 0.08, 0.16), (4, 20, 0.10, 0.20), (2, 20, 0.15, 0.28),
    (6, 7, 0.10, 0.15), (4, 5, 0.12, 0.18), (2, 5, 0.14, 0.28),
    (2, 4, 0.14, 0.28), (2, 3, 0.18, 0.28), (2, 2, 0.0, 0.0), (2, 1, 0.0, 0.0),
]
# 001 §4: the observed differences for x = 2, n = 5 (frequencies of 10,000)
DISTRIBUTION = {13: 2, 11: 5, 10: 5, 9: 20, 8: 55, 7: 148, 6: 304, 5: 512, 4: 766, 3: 1030, 2: 1434, 1: 1411,
                0: 1302, -1: 1145, -2: 777, -3: 521, -4: 296, -5: 146, -6: 80, -7: 26, -8: 11, -9: 4}
DRAWS = 60_000


def differences(n: int, x: float, rng: np.random.Generator, consistent: bool) -> np.ndarray:
    big, small = np.full(DRAWS, n), np.full(DRAWS, n - 1)
    if consistent:
        k1, k2 = rng.integers(0, 10**10, DRAWS), rng.integers(0, 10**10, DRAWS)
        return big + abs_deviations_from_keys(big, k1, x) - small - abs_deviations_from_keys(small, k2, x)
    return big + abs_deviations(big, x, rng) - small - abs_deviations(small, x, rng)


def tolerance(p: float) -> float:
    """The paper's rounding (two decimals), its Monte Carlo error (10,000 draws) and ours, 3 SE."""
    return 0.005 + 3 * math.sqrt(p * (1 - p) / 10_000) + 3 * math.sqrt(p * (1 - p) / DRAWS)


@pytest.mark.parametrize("consistent", [False, True])
def test_probability_that_a_differenced_cell_shows_the_true_difference(consistent: bool) -> None:
    rng = np.random.default_rng(2024)
    for x, n, p1, p12 in PAPER:
        diff = differences(n, x, rng, consistent)
        ours1 = np.mean(diff == 1)
        ours12 = np.mean((diff == 1) | (diff == 2))
        assert abs(ours1 - p1) <= tolerance(max(p1, ours1)), (x, n, ours1, p1)
        assert abs(ours12 - p12) <= tolerance(max(p12, ours12)), (x, n, ours12, p12)


def test_distribution_of_the_difference_for_x2_n5() -> None:
    """Each frequency of the paper's table lies within 4 standard errors of both samples (22
    cells: 4 SE keeps the chance of a false alarm small)."""
    diff = differences(5, 2, np.random.default_rng(7), False)
    for d, freq in DISTRIBUTION.items():
        paper = freq / 10_000
        ours = float(np.mean(diff == d))
        p = max(paper, ours, 1e-4)
        se = math.sqrt(p * (1 - p) / 10_000 + p * (1 - p) / DRAWS)
        assert abs(ours - paper) <= 4 * se, (d, ours, paper)
