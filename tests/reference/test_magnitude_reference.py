"""Magnitude rules and audits against the literature's worked examples.

Sources: the handbook of Hundepool et al., "Statistical Disclosure Control", ch. 4 §4.2 (Examples
1, 2, 3, 4, 5, the sampling-weight examples, the (p,q) rule); GaussSuppression's vignette
"Magnitude table suppression" (the ``magnitude1`` data set: its dominance output of Table 3 and
the contributions per company of Tables 6 and 7).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from tabsafe.errors import InputError
from tabsafe.model.contributions import contributions
from tabsafe.risk.contributor_audit import Intruder, contributor_audit
from tabsafe.risk.dominance import DominanceRules, NKRule, PRule, assess_dominance, top_sums


def _cell(values: list[float], weights: list[float] | None = None):
    """One cell (code ``a``) with the given contributions: its :class:`Contributions`."""
    data = pd.DataFrame({"r": ["a"] * len(values), "x": values})
    if weights is not None:
        data["w"] = weights
    return contributions(data, ["r"], value="x", weight="w" if weights is not None else None)


def _at_a(c, rules):
    a = assess_dominance(c, rules)
    return {k: bool(v[1]) for k, v in a.flags.items()}, float(a.upper[1]), float(a.lower[1])


def test_example_1_the_1_k_rule_misses_what_the_p_percent_rule_sees() -> None:
    # X = 100,000, x1 = 50,000, x2 = 49,000: safe by (1,90), but x2 estimates x1 within 2%
    c = _cell([50_000, 49_000, 600, 400])
    flags, upper, _ = _at_a(c, DominanceRules(nk=(NKRule(1, 90),), p=(PRule(10),)))
    assert flags == {"p10": True, "nk1,90": False}
    assert upper == pytest.approx(0.10 * 50_000 - 1_000)  # p/100 x1 − (X − x1 − x2), Example 5


def test_example_2_the_2_k_rule_overprotects_where_the_p_percent_rule_does_not() -> None:
    # p = 10, k = 100·100/110 = 90.9: X = 110,000, x1 = 52,000, x2 = 50,000
    c = _cell([52_000, 50_000, 5_000, 3_000])
    k = 100 * 100 / 110
    flags, upper, _ = _at_a(c, DominanceRules(nk=(NKRule(2, k),), p=(PRule(10),)))
    assert flags == {"p10": False, f"nk2,{k:g}": True}
    assert upper == pytest.approx(100 / k * 102_000 - 110_000)


def test_example_4_upper_protection_level_of_the_1_85_rule() -> None:
    # X = 330 (300, 20, 10): unsafe by (1,85); the upper bound must reach 100/85 · 300 = 352.94
    c = _cell([300, 20, 10])
    flags, upper, lower = _at_a(c, DominanceRules(nk=(NKRule(1, 85),)))
    assert flags == {"nk1,85": True}
    assert 330 + upper == pytest.approx(352.94, abs=0.005)
    assert lower == upper  # symmetric, and below the cell value


def test_the_p_q_rule_is_the_p_percent_rule_with_p_over_q() -> None:
    # X_R < p/q · x1: (p=10, q=50) is the p% rule at p* = 100 p/q = 20
    for rest in ([9_000], [10_500]):  # X_R = 9,000 < 10,000 (unsafe); 10,500 (safe) against x1 = 50,000
        c = _cell([50_000, 30_000, *rest])
        pq, up_pq, _ = _at_a(c, DominanceRules(p=(PRule(10, q=50),)))
        p20, up_20, _ = _at_a(c, DominanceRules(p=(PRule(20),)))
        assert list(pq.values()) == list(p20.values()) == [rest[0] < 10_000]
        assert up_pq == up_20


def test_p_percent_rule_against_a_coalition() -> None:
    # P(p, n=2): the 2nd and 3rd largest together: X − x1 − x2 − x3 < p/100 x1
    c = _cell([100, 30, 20, 4])
    one, _, _ = _at_a(c, DominanceRules(p=(PRule(10),)))
    two, upper, _ = _at_a(c, DominanceRules(p=(PRule(10, n=2),)))
    assert list(one.values()) == [False]  # X − 130 = 24 ≥ 10
    assert list(two.values()) == [True]  # X − 150 = 4 < 10
    assert upper == pytest.approx(10 - 4)


def test_weights_the_tau_argus_way() -> None:
    # handbook §4.2: 100 (weight 4) and 10 (weight 7): X = 470, the two largest are 100 and 100
    c = _cell([100, 10], [4, 7])
    assert c.value[1] == pytest.approx(470)
    assert top_sums(c, 2)[1].tolist() == pytest.approx([100, 200])
    # p% rule: 470 − 200 = 270 against p% of 100
    assert _at_a(c, DominanceRules(p=(PRule(271),)))[0] == {"p271": True}
    assert _at_a(c, DominanceRules(p=(PRule(269),)))[0] == {"p269": False}


def test_weights_overprotection_example_and_the_sample_reading() -> None:
    # 100 (weight 2), 1 (weight 3): X̂ = 203; tau-ARGUS reads two 100s: unsafe for any p > 3;
    # the sample reading (eq. p-percent-weighted) subtracts the two largest observations, 100 and 1
    c = _cell([100, 1], [2, 3])
    assert _at_a(c, DominanceRules(p=(PRule(4),)))[0] == {"p4": True}
    assert _at_a(c, DominanceRules(p=(PRule(2),)))[0] == {"p2": False}
    sample = DominanceRules(p=(PRule(4),), weighting="sample")
    assert _at_a(c, sample)[0] == {"p4": False}  # 203 − 101 = 102 ≥ 4


def test_fractional_weights_count_a_fraction_of_a_unit() -> None:
    # weight 1.5: the second "unit" is half the 100 and half of the next value
    c = _cell([100, 1], [1.5, 3])
    assert top_sums(c, 2)[1].tolist() == pytest.approx([100, 150.5])


def test_negative_contributions_are_judged_on_absolute_values() -> None:
    c = _cell([-90, 5, 5])  # |x1| = 90 of Σ|x| = 100: (1,80)-unsafe although X = −80
    flags, upper, lower = _at_a(c, DominanceRules(nk=(NKRule(1, 80),)))
    assert flags == {"nk1,80": True}
    assert upper == pytest.approx(100 / 80 * 90 - 100)
    assert lower == upper  # with negative values the cell may go below zero: not capped


# ------------------------------------------------------------------ GaussSuppression's magnitude1
MAGNITUDE1 = """Agriculture private Portugal EU A 75.9
Agriculture private Portugal EU B 24.5
Agriculture private Spain EU A 96.6
Agriculture private Spain EU B 43.2
Entertainment private Iceland nonEU B 16.8
Entertainment private Portugal EU B 7.1
Entertainment private Portugal EU D 2.3
Entertainment private Spain EU A 77.4
Entertainment private Spain EU B 11.5
Entertainment private Spain EU C 16.4
Governmental public Portugal EU B 21.6
Governmental public Portugal EU D 2.0
Governmental public Spain EU C 6.5
Governmental public Spain EU D 2.7
Industry private Iceland nonEU B 9.6
Industry private Iceland nonEU C 8.8
Industry private Iceland nonEU D 1.9
Industry private Portugal EU B 25.7
Industry private Portugal EU D 3.4
Industry private Spain EU C 8.4"""


@pytest.fixture(scope="module")
def magnitude1() -> pd.DataFrame:
    rows = [line.split() for line in MAGNITUDE1.splitlines()]
    frame = pd.DataFrame(rows, columns=["sector4", "sector2", "geo", "eu", "company", "value"])
    frame["value"] = frame["value"].astype(float)
    return frame


def _by_codes(c, mask) -> set[tuple[str, ...]]:
    t = c.table().to_frame()
    return {tuple(r) for r in t.loc[np.asarray(mask), [d.variable for d in c.dimensions]].itertuples(index=False)}


def test_gauss_suppression_dominant_cells_1_80(magnitude1) -> None:
    # SuppressDominantCells(n = 1, k = 80): Table 3's primary cells and its dominance column
    c = contributions(magnitude1, ["sector4", "geo"], value="value")
    a = assess_dominance(c, DominanceRules(nk=(NKRule(1, 80),)))
    assert _by_codes(c, a.unsafe) == {("Entertainment", "Iceland"), ("Governmental", "Portugal"),
                                      ("Industry", "Portugal"), ("Industry", "Spain")}
    t = c.table()
    share = top_sums(c, 1)[:, 0] / np.where(c.value > 0, c.value, 1)
    for codes, expected in ((("Agriculture", "Portugal"), 0.7559761), (("Total", "Total"), 0.2089552),
                            (("Governmental", "Total"), 0.6585366), (("Industry", "Iceland"), 0.4729064)):
        assert share[t.cell_id(dict(zip(("sector4", "geo"), codes)))] == pytest.approx(expected, abs=1e-7)


def test_gauss_suppression_contributions_per_company(magnitude1) -> None:
    # contributorVar = "company": Table 7's contributor counts and Table 6's aggregated values
    c = contributions(magnitude1, ["sector4", "geo"], value="value", contributor="company")
    t = c.table()
    counts = {("Total", "Total"): 4, ("Total", "Iceland"): 3, ("Total", "Portugal"): 3, ("Total", "Spain"): 4,
              ("Agriculture", "Total"): 2, ("Entertainment", "Total"): 4, ("Governmental", "Total"): 3,
              ("Industry", "Total"): 3, ("Industry", "Iceland"): 3, ("Entertainment", "Spain"): 3}
    for codes, n in counts.items():
        assert c.contributors[t.cell_id(dict(zip(("sector4", "geo"), codes)))] == n, codes
    units, amount, _ = c.cell(t.cell_id({"sector4": "Entertainment", "geo": "Total"}))
    assert dict(zip(c.units[units].tolist(), amount.round(1).tolist())) == {"A": 77.4, "B": 35.4, "C": 16.4, "D": 2.3}
    units, amount, _ = c.cell(t.cell_id({"sector4": "Total", "geo": "Total"}))
    assert amount.round(1).tolist() == [249.9, 160.0, 40.1, 12.3]
    assert c.units[units].tolist() == ["A", "B", "C", "D"]


def test_holdings_group_contributions_before_the_rules(magnitude1) -> None:
    # the same companies as holdings of one-record enterprises: the rule sees the holding sums
    frame = magnitude1.assign(enterprise=[f"e{i}" for i in range(len(magnitude1))])
    c = contributions(frame, ["sector4", "geo"], value="value", contributor="enterprise", holding="company")
    t = c.table()
    cell = t.cell_id({"sector4": "Total", "geo": "Total"})
    assert c.contributors[cell] == 20 and c.at_holdings().contributors[cell] == 4
    rules = DominanceRules(nk=(NKRule(1, 50, holding=True),))
    a = assess_dominance(c, rules)  # holding A holds 249.9 of 462.3 = 54%: unsafe only at holding level
    assert a.flags["nk1,50 holding"][cell]
    assert not assess_dominance(c, DominanceRules(nk=(NKRule(1, 50),))).unsafe[cell]


def test_holdings_and_weights_do_not_combine(magnitude1) -> None:
    with pytest.raises(InputError, match="holdings and sampling weights"):
        contributions(magnitude1.assign(w=1.5), ["geo"], value="value", holding="company", weight="w")


# ------------------------------------------------------------------ feasibility intervals (Example 3)
def _geurts():
    """Geurts (1992) Table 10 (handbook Example 3): rows 1, 2, 3 × columns 1, 2; x11 + x12 = 7,
    x21 + x22 = 3, row 3 = (3, 3), columns 9 and 7. One contributor per cell."""
    data = pd.DataFrame({"r": ["1", "1", "2", "2", "3", "3"], "k": ["1", "2"] * 3,
                         "x": [4.0, 3.0, 2.0, 1.0, 3.0, 3.0]})
    c = contributions(data, ["r", "k"], value="x")
    t = c.table()
    hidden = np.zeros(c.n_cells, dtype=bool)
    for r in ("1", "2"):
        for k in ("1", "2"):
            hidden[t.cell_id({"r": r, "k": k})] = True
    return c, t, hidden


def test_example_3_feasibility_interval_of_x11() -> None:
    c, t, hidden = _geurts()
    x11 = t.cell_id({"r": "1", "k": "1"})
    primary = np.zeros(c.n_cells, dtype=bool)
    primary[x11] = True
    big = np.where(primary, 10.0, 0.0)  # levels no interval meets: the findings carry the bounds
    audit = contributor_audit(sp.csr_matrix(t.additivity()), c.value, hidden, c, primary=primary, upper=big,
                              lower=big, intruders=[Intruder(())])
    bounds = {f.side: f.bound for f in audit.findings}
    assert bounds == pytest.approx({"upper": 6.0, "lower": 3.0})


def test_the_audit_passes_when_the_interval_is_wide_enough() -> None:
    c, t, hidden = _geurts()
    x11 = t.cell_id({"r": "1", "k": "1"})
    primary = np.zeros(c.n_cells, dtype=bool)
    primary[x11] = True
    levels = np.where(primary, 1.0, 0.0)  # [3, 6] holds [4 − 1, 4 + 1]
    audit = contributor_audit(sp.csr_matrix(t.additivity()), c.value, hidden, c, primary=primary, upper=levels,
                              lower=levels, intruders=[Intruder(())])
    assert audit.passed


def test_two_singletons_in_one_relation_disclose_each_other() -> None:
    # handbook §4.2: "two cells with only one single contributor within the same aggregation …
    # both can use this additional knowledge to disclose the other's contribution"
    data = pd.DataFrame({"r": ["a", "b", "c", "c"], "x": [50.0, 60.0, 40.0, 45.0], "id": ["A", "B", "C", "D"]})
    c = contributions(data, ["r"], value="x", contributor="id")
    t = c.table()
    a, b = t.cell_id({"r": "a"}), t.cell_id({"r": "b"})
    hidden = np.zeros(c.n_cells, dtype=bool)
    hidden[[a, b]] = True
    primary = hidden.copy()
    levels = np.where(primary, 5.0, 0.0)
    A = sp.csr_matrix(t.additivity())
    public = contributor_audit(A, c.value, hidden, c, primary=primary, upper=levels, lower=levels,
                               intruders=[Intruder(())])
    assert public.passed  # a + b = 110: each is in [0, 110] for the public
    insiders = contributor_audit(A, c.value, hidden, c, primary=primary, upper=levels, lower=levels)
    found = {(f.intruder.label, t.dimensions[0].hierarchy.order[f.cell]) for f in insiders.findings}
    assert ("contributor A", "b") in found and ("contributor B", "a") in found
