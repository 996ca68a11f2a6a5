"""Dominance across groups of suppressed cells (issue #29; sdcTools/UserSupport #160): the sums a
suppression pattern reveals along a relation with a published total, checked by the p% and (n,k)
rules on the union of their contributions — examples computed by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tabsafe.model.contributions import contributions
from tabsafe.risk.dominance import DominanceRules, NKRule, PRule
from tabsafe.risk.group_dominance import group_dominance, revealed_groups


def _table(rows: list[tuple[str, str, str, float]]):
    data = pd.DataFrame(rows, columns=["r", "s", "id", "v"])
    return contributions(data, ["r", "s"], value="v", contributor="id")


def _hidden(c, cells: list[tuple[str, str]]) -> np.ndarray:
    table = c.table()
    out = np.zeros(c.n_cells, dtype=bool)
    out[[table.cell_id({"r": r, "s": s}) for r, s in cells]] = True
    return out


# a dominated primary cell a-x (E1 holds 90 of 100) hidden with a-y and, for the rectangle, b-x, b-y
PRIMARY = [("a", "x", "E1", 90.0), ("a", "x", "E2", 5.0), ("a", "x", "E3", 5.0),
           ("b", "x", "E6", 40.0), ("b", "x", "E7", 40.0), ("b", "y", "E8", 40.0), ("b", "y", "E9", 40.0),
           ("a", "z", "E10", 50.0), ("a", "z", "E11", 50.0), ("b", "z", "E12", 40.0), ("b", "z", "E13", 40.0)]
RECTANGLE = [("a", "x"), ("a", "y"), ("b", "x"), ("b", "y")]


@pytest.mark.parametrize(("partner", "dominated"), [
    # a-y small: row a (total 205: safe) reveals a-x + a-y = 105 beside the published a-z, of which E1
    # holds 90 (85.7% > 80%): approximate disclosure
    ([("a", "y", "E4", 3.0), ("a", "y", "E5", 2.0)], True),
    # a-y large: the revealed 200 hide E1's 90 (45%)
    ([("a", "y", "E4", 50.0), ("a", "y", "E5", 50.0)], False),
])
def test_a_primary_cell_hidden_with_a_small_partner_is_dominated_as_a_group(partner, dominated: bool) -> None:
    c = _table(PRIMARY + partner)
    g = group_dominance(c, _hidden(c, RECTANGLE), DominanceRules(nk=(NKRule(1, 80),)))
    table = c.table()
    row_a = tuple(sorted(table.cell_id({"r": "a", "s": s}) for s in ("x", "y")))
    assert row_a in g.groups
    k = g.groups.index(row_a)
    assert g.totals[k] == table.cell_id({"r": "a", "s": "Total"})
    assert bool(g.dominated[k]) is dominated
    # the p% rule: what remains beside the two largest (105 - 90 - 5 = 10; 200 - 90 - 50 = 60) against
    # p% of E1's 90: safe at 10% (9) either way, at 20% (18) only with the large partner
    p = group_dominance(c, _hidden(c, RECTANGLE), DominanceRules(p=(PRule(10),)))
    assert bool(p.dominated[p.groups.index(row_a)]) is False
    p = group_dominance(c, _hidden(c, RECTANGLE), DominanceRules(p=(PRule(20),)))
    assert bool(p.dominated[p.groups.index(row_a)]) is dominated  # 10 < 18 small; 60 >= 18 large


def test_one_enterprise_in_two_cells_of_a_group_is_one_contributor() -> None:
    # row a reveals a-x + a-y = 200, of which the enterprise E1 holds 60 + 60
    c = _table([("a", "x", "E1", 60.0), ("a", "x", "E2", 40.0), ("a", "y", "E1", 60.0), ("a", "y", "E3", 40.0)])
    hidden = _hidden(c, [("a", "x"), ("a", "y"), ("Total", "x"), ("Total", "y")])
    g = group_dominance(c, hidden, DominanceRules(nk=(NKRule(2, 75),)))
    # by contributor, the two largest of the 200 are E1 (120) and E2 (40): 80% > 75%; counted per cell
    # entry they would be 60 + 60 = 60%, safe
    assert g.dominated.all() and len(g.groups) == 2


def test_a_group_whose_total_is_hidden_reveals_nothing() -> None:
    c = _table(PRIMARY + [("a", "y", "E4", 3.0), ("a", "y", "E5", 2.0)])
    table = c.table()
    hidden = _hidden(c, RECTANGLE + [("a", "Total"), ("b", "Total")])
    groups = [g for _, g in revealed_groups(table, hidden)]
    row_a = tuple(sorted(table.cell_id({"r": "a", "s": s}) for s in ("x", "y")))
    assert row_a not in groups
    assert all(not hidden[t] for t, _ in revealed_groups(table, hidden))
    # the columns still reveal a-x + b-x and a-y + b-y (their totals are published)
    col_x = tuple(sorted(table.cell_id({"r": r, "s": "x"}) for r in ("a", "b")))
    assert col_x in groups


def test_no_group_no_finding_and_frequency_rules_are_not_applied() -> None:
    c = _table(PRIMARY + [("a", "y", "E4", 3.0), ("a", "y", "E5", 2.0)])
    assert group_dominance(c, np.zeros(c.n_cells, dtype=bool), DominanceRules(nk=(NKRule(1, 80),))).groups == ()
    # every revealed sum has fewer than 10 contributors, none is 99% one enterprise's
    g = group_dominance(c, _hidden(c, RECTANGLE), DominanceRules(nk=(NKRule(1, 99),), min_freq=10))
    assert len(g.groups) > 0 and not g.dominated.any() and set(g.flags) == {"nk1,99"}


def test_protect_magnitudes_reports_the_dominated_groups_of_its_pattern() -> None:
    from tabsafe.protect.magnitude import Controls, protect_magnitudes

    c = _table(PRIMARY + [("a", "y", "E4", 3.0), ("a", "y", "E5", 2.0)])
    rules = DominanceRules(nk=(NKRule(1, 80),))
    # a protection level given a priori (1 either way) lower than the rule's (12.5): the rectangle
    # a-x, a-y, b-x, b-y protects a-x's interval, yet row a reveals a-x + a-y = 105, 86% E1's
    controls = Controls.from_cells(c, {(("r", "a"), ("s", "x")): {"upper": 1.0, "lower": 1.0}})
    res = protect_magnitudes(c, rules, controls=controls)
    assert res.suppressed.sum() == 4
    want = group_dominance(c, res.suppressed, rules).findings()
    assert res.protection.report.private["dominated_groups"] == len(want) == 1
    assert "dominated_groups" not in res.protection.report.figures  # private: it points at dominated cells
