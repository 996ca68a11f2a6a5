"""Seed 001 §5 and §4, computed exactly from stated cell distributions (tabsafe.evaluate.distribution).

§5: the expected information gain (H(X) − H(X|Y)) / H(X) about a true count X in 0..5 from its
published value Y is about 17% for random rounding to base 5 and 33% for the ABS perturbation
with x = 2 (uniform prior; entropy base 6), about 17% and 34% with the skewed prior
p(X) = .35, .25, .15, .10, .10, .05 — the paper simulated a million cells; here the sums are exact.
§4: P(difference of the published cells = 1 | true difference 1) for x = 2 and the larger cell
n = 1..5, 20, 100, 1000 (0, 0, .182, .142, .142, .152, .152, .152 from 10,000 simulated pairs),
and the whole distribution of the difference for n = 5.

The ABS perturbation (METHODS.md §3) and random rounding (§4) are written out here as the
distributions those sections state: this checks the measure, not a method's implementation (the
methods' own distributions are checked by the contract suite against their outputs).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tabsafe.evaluate.distribution import differenced_distribution, differencing_risk, information_gain

SKEWED = (0.35, 0.25, 0.15, 0.10, 0.10, 0.05)


class RandomRounding:
    """Unbiased random rounding to base b (METHODS.md §4): up with probability r/b."""

    def __init__(self, base: int) -> None:
        self.base = base

    def published_distribution(self, n: int) -> dict[int, float]:
        r = n % self.base
        if r == 0:
            return {n: 1.0}
        return {n - r + self.base: r / self.base, n - r: 1 - r / self.base}


class AbsPerturbation:
    """The ABS cell perturbation with parameter x (seed 001 §4; METHODS.md §3): each of the n
    units adds 0 with probability p, −1 with 2(1−p)/3, +2 with (1−p)/3; p = 0 for n <= x, else
    1 − x/n; zeros stay zero. The sum of the n deviations, by convolution."""

    def __init__(self, x: int) -> None:
        self.x = x

    def published_distribution(self, n: int) -> dict[int, float]:
        if n == 0:
            return {0: 1.0}
        p = 0.0 if n <= self.x else 1 - self.x / n
        step = np.array([2 * (1 - p) / 3, p, 0.0, (1 - p) / 3])  # deviations -1, 0, +1, +2
        dist = np.array([1.0])  # index k: deviation k - n (the sum of n deviations is >= -n)
        for _ in range(n):
            dist = np.convolve(dist, step)
        return {k: float(q) for k, q in enumerate(dist) if q > 0}  # published n + (k - n)


def _entropy6(probs) -> float:
    return -sum(p * math.log(p, 6) for p in probs if p > 0)


def test_random_rounding_base_5_uniform_prior_is_17_percent_and_exact() -> None:
    got = information_gain(RandomRounding(5), "uniform")
    # by hand: Y is 0 or 5, each with probability 1/2; p(x | Y=0) = (1, .8, .6, .4, .2, 0)/3 and
    # p(x | Y=5) its mirror image, so H(X|Y) = H6((1, .8, .6, .4, .2)/3) and H(X) = 1
    h_x_y = _entropy6([v / 3 for v in (1, 0.8, 0.6, 0.4, 0.2)])
    assert got["entropy_x"] == pytest.approx(1.0, abs=1e-12)
    assert got["entropy_x_given_y"] == pytest.approx(h_x_y, abs=1e-12)
    assert got["information_gain"] == pytest.approx(1 - h_x_y, abs=1e-12)
    assert round(100 * got["information_gain"]) == 17


def test_random_rounding_base_5_skewed_prior_is_17_percent() -> None:
    got = information_gain(RandomRounding(5), ",".join(map(str, SKEWED)))
    # by hand: joint p(x, y) = p(x) P(y | x); H(X|Y) = H(X, Y) − H(Y)
    joint = {}
    for x, px in enumerate(SKEWED):
        for y, q in RandomRounding(5).published_distribution(x).items():
            joint[(x, y)] = joint.get((x, y), 0) + px * q
    p_y = {}
    for (_, y), p in joint.items():
        p_y[y] = p_y.get(y, 0) + p
    expected = (_entropy6(SKEWED) - (_entropy6(joint.values()) - _entropy6(p_y.values()))) / _entropy6(SKEWED)
    assert got["information_gain"] == pytest.approx(expected, abs=1e-12)
    assert round(100 * got["information_gain"]) == 17


@pytest.mark.parametrize("prior", ["uniform", ",".join(map(str, SKEWED))])
def test_the_round_method_states_random_rounding(prior: str) -> None:
    """The registered method ``round`` (mode random, base 5) states exactly METHODS.md §4's
    distribution: the same information gain, 17%."""
    from tabsafe.registry import build_method

    method = build_method("round", {"mode": "random", "base": 5})
    for n in range(12):
        assert method.published_distribution(n) == pytest.approx(RandomRounding(5).published_distribution(n))
    got = information_gain(method, prior)["information_gain"]
    assert got == pytest.approx(information_gain(RandomRounding(5), prior)["information_gain"], abs=1e-12)
    assert round(100 * got) == 17


def test_round_modes_state_their_distributions() -> None:
    """METHODS.md §4 for every mode with one (000 §5.5): conventional (halves up), small-cell
    (only counts below the base move), consistent (the cell key is uniform: as random)."""
    from tabsafe.registry import build_method

    conventional = build_method("round", {"mode": "conventional", "base": 4})
    assert conventional.published_distribution(6) == {8: 1.0}  # r = 2 = b/2 goes up
    assert conventional.published_distribution(5) == {4: 1.0}
    assert conventional.published_distribution(8) == {8: 1.0}
    small = build_method("round", {"mode": "small-cell", "base": 5})
    assert small.published_distribution(2) == pytest.approx({5: 0.4, 0: 0.6})
    assert small.published_distribution(7) == {7: 1.0} and small.published_distribution(0) == {0: 1.0}
    consistent = build_method("round", {"mode": "consistent", "base": 3})
    assert consistent.published_distribution(7) == pytest.approx({9: 1 / 3, 6: 2 / 3})
    assert build_method("round", {"mode": "semi-controlled", "base": 3}).published_distribution(7) is None


@pytest.mark.parametrize("prior, percent", [("uniform", 33), (",".join(map(str, SKEWED)), 34)])
def test_abs_perturbation_x2_is_33_and_34_percent(prior: str, percent: int) -> None:
    got = information_gain(AbsPerturbation(2), prior)
    assert round(100 * got["information_gain"]) == percent


def test_information_gain_bounds_and_base() -> None:
    class Stay:
        def published_distribution(self, n):
            return {n: 1.0}

    class Blind:  # publishes 0 whatever the count: nothing is learnt
        def published_distribution(self, n):
            return {0: 1.0}

    assert information_gain(Stay())["information_gain"] == pytest.approx(1.0)
    assert information_gain(Blind())["information_gain"] == pytest.approx(0.0, abs=1e-12)
    # the base follows the prior's support (K + 1 values): the uniform prior has H(X) = 1
    assert information_gain(Stay(), "0.25,0.25,0.25,0.25")["entropy_x"] == pytest.approx(1.0)


# seed 001 §4: x = 2, true difference 1, larger cell n: simulated P(difference = 1), 10,000 pairs
SEED_001_SECTION_4 = [(1, 0.0), (2, 0.0), (3, 0.182), (4, 0.142), (5, 0.142), (20, 0.152), (100, 0.152),
                      (1000, 0.152)]


@pytest.mark.parametrize("total, simulated", SEED_001_SECTION_4)
def test_abs_differencing_matches_seed_001_section_4(total: int, simulated: float) -> None:
    p = differencing_risk(AbsPerturbation(2), 1, total=total)
    # the seed's figures are simulations of 10,000 pairs: within 3 standard errors (and rounding)
    se = math.sqrt(max(simulated * (1 - simulated), 1e-12) / 10_000)
    assert abs(p - simulated) <= 3 * se + 0.0005


# seed 001 §4: the empirical distribution of the difference, x = 2, n = 5 (10,000 pairs)
SEED_001_DIFFERENCES = {13: 0.0002, 11: 0.0005, 10: 0.0005, 9: 0.0020, 8: 0.0055, 7: 0.0148, 6: 0.0304,
                        5: 0.0512, 4: 0.0766, 3: 0.1030, 2: 0.1434, 1: 0.1411, 0: 0.1302, -1: 0.1145,
                        -2: 0.0777, -3: 0.0521, -4: 0.0296, -5: 0.0146, -6: 0.0080, -7: 0.0026, -8: 0.0011,
                        -9: 0.0004}


def test_abs_difference_distribution_matches_seed_001_table() -> None:
    dist = differenced_distribution(AbsPerturbation(2), 1, total=5)
    assert sum(dist.values()) == pytest.approx(1.0, abs=1e-12)
    for d, simulated in SEED_001_DIFFERENCES.items():
        se = math.sqrt(max(dist.get(d, 0.0) * (1 - dist.get(d, 0.0)), 1e-6) / 10_000)
        assert abs(dist.get(d, 0.0) - simulated) <= 4 * se + 0.0005, d
    # the mean difference is the true one: the method is unbiased
    assert sum(d * p for d, p in dist.items()) == pytest.approx(1.0, abs=1e-9)


def test_cell_key_generic_differencing_equals_the_p_table_form() -> None:
    """Two independent implementations: the generic one over ckm's stated distribution and the
    service's over its p-table (tabsafe.evaluate.differencing)."""
    from tabsafe.evaluate.differencing import difference_distribution
    from tabsafe.protect.cell_key_method import CellKeyMethod

    method = CellKeyMethod(max_noise=3, variance=2, js=1)
    for n, total in ((1, None), (2, 3), (1, 4), (3, 40)):
        generic = differenced_distribution(method, n, total=total if total is not None else None)
        if total is None:
            # the service's default larger cell uses the p-table's last row, as the generic one does
            total = method.ptable_table.i_max + n
        by_ptable = difference_distribution(method.ptable_table, n, total=total)
        assert generic.keys() == by_ptable.keys()
        for d in generic:
            assert generic[d] == pytest.approx(by_ptable[d], abs=1e-12)


def test_the_registered_abs_and_barnardisation_state_the_papers_distributions() -> None:
    """The registered methods' own P(published | n) equal the sections' distributions written out
    above (ABS: the convolution of n record deviations; Barnardisation: ±1 with p/2), and the
    information gain through the registered ABS method is seed 001 §5's 33% and 34%."""
    from tabsafe.registry import build_method

    for x in (2, 3.5):
        method = build_method("abs-perturbation", {"x": x, "consistent": x == 2})
        for n in [*range(0, 25), 60]:
            want = AbsPerturbation(x).published_distribution(n)
            got = method.published_distribution(n)
            assert set(got) == set(want), (x, n)
            for value, q in want.items():
                assert got.get(value, 0.0) == pytest.approx(q, abs=1e-12), (x, n, value)
    abs2 = build_method("abs-perturbation", {"x": 2})
    assert round(100 * information_gain(abs2)["information_gain"]) == 33
    assert round(100 * information_gain(abs2, ",".join(map(str, SKEWED)))["information_gain"]) == 34
    barn = build_method("barnardisation", {"p": 0.3})
    assert barn.published_distribution(0) == {0: 1.0}
    assert barn.published_distribution(4) == pytest.approx({3: 0.15, 4: 0.7, 5: 0.15})
    assert build_method("barnardisation", {"p": 1.0}).published_distribution(1) == pytest.approx({0: 0.5, 2: 0.5})
