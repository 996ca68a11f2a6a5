"""differencing_risk: the exact probability that a differenced pair of cell-key-perturbed cells
shows the true small count (seed 001 §1, §4)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tabsafe.errors import InputError
from tabsafe.evaluate import difference_distribution, differencing_risk
from tabsafe.protect.cell_key import lookup_noise
from tabsafe.protect.ptable import PTable, PTableParams, generate_ptable

# a hand-made p-table: counts 1+ move by -1 or +1 with probability 1/2; its differences are
# n-2, n, n+2 with 1/4, 1/2, 1/4 (both cells large)
HALF = PTable.from_rows([
    {"i": 0, "j": 0, "p": 1.0, "v": 0, "p_int_lb": 0.0, "p_int_ub": 1.0},
    {"i": 1, "j": 0, "p": 0.5, "v": -1, "p_int_lb": 0.0, "p_int_ub": 0.5},
    {"i": 1, "j": 2, "p": 0.5, "v": 1, "p_int_lb": 0.5, "p_int_ub": 1.0},
])


def test_hand_computed_reference():
    assert differencing_risk(HALF, 3) == 0.5
    assert difference_distribution(HALF, 3) == {1: 0.25, 3: 0.5, 5: 0.25}
    # the block is the whole cell: the smaller cell has no records and is published as 0
    assert differencing_risk(HALF, 2, total=2) == 0.0
    assert difference_distribution(HALF, 2, total=2) == {1: 0.5, 3: 0.5}


def test_noise_off_reveals_always():
    identity = PTable.from_rows([{"i": 0, "j": 0, "p": 1.0, "v": 0, "p_int_lb": 0.0, "p_int_ub": 1.0},
                                 {"i": 1, "j": 1, "p": 1.0, "v": 0, "p_int_lb": 0.0, "p_int_ub": 1.0}])
    assert differencing_risk(identity, 4) == 1.0


def test_bad_arguments():
    for bad in (0, -1, 1.5, True):
        with pytest.raises(InputError):
            differencing_risk(HALF, bad)  # type: ignore[arg-type]
    with pytest.raises(InputError):
        differencing_risk(HALF, 5, total=4)


PT = generate_ptable(PTableParams(max_noise=3, variance=1.5, js=1))


@settings(max_examples=25)
@given(n=st.integers(1, 8), extra=st.integers(0, 10))
def test_matches_the_lookup_with_uniform_keys(n, extra):
    """The exact value agrees with the cell key look-up itself on independent uniform keys."""
    total = n + extra
    rng = np.random.default_rng(n * 100 + extra)
    size = 40_000
    k1, k2 = rng.random(size), rng.random(size)
    big = total + lookup_noise(np.full(size, total), k1, PT)
    small = (total - n) + lookup_noise(np.full(size, total - n), k2, PT)
    empirical = float(np.mean(big - small == n))
    exact = differencing_risk(PT, n, total=total)
    assert abs(empirical - exact) < 4 * np.sqrt(exact * (1 - exact) / size) + 1e-3
    dist = difference_distribution(PT, n, total=total)
    assert sum(dist.values()) == pytest.approx(1.0)
