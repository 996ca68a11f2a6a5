"""The LP attack on a suppressed business table: the largest contributor of each primary cell, as
intruder, computes every primary cell's interval knowing its own contributions (issue #29).

The attack is written here, independently of :mod:`tabsafe.risk.contributor_audit`: one
``scipy.optimize.linprog`` program per (intruder, primary cell, side) over the suppressed cells
the intruder does not hold alone, with the table's relations, the published cells at their
values, and each suppressed cell at least the intruder's own contribution to it. Every primary
cell must reach ``value + upper level`` and ``value − lower level`` (the latter no lower than the
intruder's own contribution to it). A pattern made without the insiders' audit is caught by the
same attack, so the attack can fail.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linprog

from tabsafe.model.contributions import Contributions, contributions
from tabsafe.protect.magnitude import MagnitudeResult, MagnitudeSettings, protect_magnitudes
from tabsafe.risk.dominance import DominanceRules, PRule
from tabsafe.synth_business import business_hierarchies, generate_business

RULES = DominanceRules(p=(PRule(15),), min_freq=3)


def _own(c: Contributions, unit: int) -> tuple[np.ndarray, np.ndarray]:
    """The intruder's contribution to every cell and whether it is the cell's only contributor."""
    cells = np.repeat(np.arange(c.n_cells), np.diff(c.ptr))
    mine = c.unit == unit
    own = np.bincount(cells[mine], weights=c.published[mine], minlength=c.n_cells)
    alone = (np.bincount(cells[mine], minlength=c.n_cells) == c.contributors) & (c.contributors > 0)
    return own, alone


def attack(c: Contributions, res: MagnitudeResult, unit: int | None) -> list[tuple[int, str, float, float]]:
    """The primary cells whose interval, computed by contributor ``unit`` (None: the public),
    misses a protection level: (cell, side, bound found, bound needed)."""
    A = sp.csr_matrix(c.table().additivity())
    scale = np.abs(c.value).max() / 1000.0
    v = c.value / scale
    hidden = res.suppressed.copy()
    own, alone = (np.zeros(c.n_cells), np.zeros(c.n_cells, dtype=bool)) if unit is None else _own(c, unit)
    own = own / scale
    unknown = hidden & ~alone
    cols = np.flatnonzero(unknown)
    A_u = A[:, cols]
    rows = np.flatnonzero(np.diff(sp.csr_matrix(A_u).indptr))
    A_eq = A_u[rows]
    b_eq = -(A[rows][:, np.flatnonzero(~unknown)] @ v[~unknown])
    bounds = list(zip(np.maximum(own[cols] - 1e-9, 0.0), [None] * cols.size))
    out = []
    index = {int(g): i for i, g in enumerate(cols.tolist())}
    for p in np.flatnonzero((res.reason == "primary") & unknown).tolist():
        up_need = v[p] + res.upper[p] / scale
        low_need = v[p] - min(res.lower[p] / scale, max(v[p] - own[p], 0.0))
        for side, sign, need in (("upper", -1.0, up_need), ("lower", 1.0, low_need)):
            cost = np.zeros(cols.size)
            cost[index[p]] = sign
            sol = linprog(cost, A_eq=A_eq, b_eq=b_eq, bounds=bounds, method="highs")
            if sol.status == 3:  # unbounded: as wide as can be
                continue
            assert sol.status == 0, sol.message
            bound = sign * sol.fun
            if (side == "upper" and bound < need - 1e-6) or (side == "lower" and bound > need + 1e-6):
                out.append((p, side, bound * scale, need * scale))
    return out


def _largest(c: Contributions, cells: np.ndarray) -> list[int]:
    return sorted(set(c.unit[c.ptr[cells]].tolist()))


def _register(n: int, seed: int, by: tuple[str, ...]) -> Contributions:
    return contributions(generate_business(n, seed), list(by), value="turnover", contributor="enterprise",
                         holding="holding", hierarchies=business_hierarchies())


@pytest.mark.parametrize("seed", [3, 11])
def test_no_largest_contributor_narrows_a_primary_cell(seed: int) -> None:
    c = _register(400, seed, ("activity", "size"))
    res = protect_magnitudes(c, RULES)
    attack_level = c.at_holdings()
    primary = np.flatnonzero(res.reason == "primary")
    assert primary.size > 5
    assert attack(attack_level, res, None) == []
    for unit in _largest(attack_level, primary):
        assert attack(attack_level, res, unit) == [], attack_level.units[unit]


def test_the_attack_catches_a_pattern_made_without_the_insiders() -> None:
    # the broken variant: the public audit alone leaves singletons that disclose each other
    for seed in (3, 11, 5):
        c = _register(400, seed, ("activity", "size"))
        res = protect_magnitudes(c, RULES, MagnitudeSettings(intruders="none"))
        attack_level = c.at_holdings()
        assert attack(attack_level, res, None) == []  # the public finds nothing
        primary = np.flatnonzero(res.reason == "primary")
        if any(attack(attack_level, res, u) for u in _largest(attack_level, primary)):
            return
    pytest.fail("no insider disclosure found on any register: the attack would not catch a broken audit")


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("TABSAFE_LARGE") != "1", reason="the 10,000-enterprise attack: set TABSAFE_LARGE=1")
def test_ten_thousand_enterprises_activity_region_size() -> None:
    c = _register(10_000, 7, ("activity", "region", "size"))
    res = protect_magnitudes(c, RULES)
    attack_level = c.at_holdings()
    primary = np.flatnonzero(res.reason == "primary")
    assert attack(attack_level, res, None) == []
    for unit in _largest(attack_level, primary):
        assert attack(attack_level, res, unit) == [], attack_level.units[unit]
