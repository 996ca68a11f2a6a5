"""Risk rules on the seeds' worked examples: seed 003 (extended threshold rules) and seed 000
§5.2 Tables 5.1–5.3."""

from __future__ import annotations

import pandas as pd
import pytest

from tabsafe import Hierarchy, InnerCells, tabulate
from tabsafe.model.table import Table
from tabsafe.risk.rules import RiskRules, RuleThresholds, assess, coalition_rule, threshold_rule, zeros_rule

# Seed 003, "Example": key values 1–12 by target Y in A–D.
SEED_003 = {
    1: [200, 0, 0, 0], 2: [20, 0, 0, 0], 3: [2, 0, 0, 0], 4: [19, 1, 0, 0], 5: [18, 2, 0, 0],
    6: [17, 3, 0, 0], 7: [7, 6, 6, 1], 8: [3, 1, 0, 0], 9: [2, 2, 0, 0], 10: [1, 0, 0, 0],
    11: [297, 3, 0, 0], 12: [298, 3, 0, 0],
}


def _table(frame: pd.DataFrame, by: list[str], codes: dict[str, list[str]]) -> Table:
    hs = {v: Hierarchy.flat(c) for v, c in codes.items()}
    return tabulate(InnerCells.from_frame(frame, count="n"), by, hierarchies=hs).densify()


@pytest.fixture(scope="module")
def seed003() -> Table:
    rows = [(str(k), y, n) for k, v in SEED_003.items() for y, n in zip("ABCD", v)]
    frame = pd.DataFrame(rows, columns=["key", "y", "n"])
    return _table(frame, ["key", "y"], {"key": [str(k) for k in SEED_003], "y": list("ABCD")})


def _flagged(table: Table, mask) -> set[tuple[str, ...]]:
    """The codes of the flagged cells (``mask`` aligned with the table's stored cells)."""
    assert mask.shape == (table.n_stored,)
    frame = table.to_frame([])[list(table.variables)].astype(str)
    return {tuple(r) for r in frame[mask].itertuples(index=False)}


def test_seed003_table_margins(seed003: Table) -> None:
    assert seed003.value(key="Total", y="Total") == 912
    assert [seed003.value(key="Total", y=y) for y in "ABCD"] == [884, 21, 6, 1]


def test_seed003_exact_flags_per_rule(seed003: Table) -> None:
    """t_abs = 3, t_rel = 99 %, t_min = 2 with Y as the target (seed 003, "Example revisited")."""
    rules = RiskRules(thresholds=RuleThresholds.both_sides(t_abs=3, t_rel=99, t_min=2), targets=("y",))
    flags = assess(seed003, rules).flags
    assert set(flags) == {"1a", "1b", "2a", "2b", "3"}
    # 1a: the rest of the row is fewer than 3 units (a coalition of up to 2 deduces it).
    assert _flagged(seed003, flags["1a"]) == {
        ("1", "A"), ("2", "A"), ("3", "A"), ("4", "A"), ("5", "A"), ("8", "A"), ("9", "A"), ("9", "B"), ("10", "A"),
    }
    # 1b: the rest of the column is fewer than 3 units: the 6 C's and the single D are all in key 7.
    assert _flagged(seed003, flags["1b"]) == {("7", "C"), ("7", "D")}
    # 2a: 99 % or more of the row; keys 11 (297/300) and 12 (298/301) only by this rule.
    assert _flagged(seed003, flags["2a"]) == {("1", "A"), ("2", "A"), ("3", "A"), ("10", "A"), ("11", "A"), ("12", "A")}
    assert _flagged(seed003, flags["2b"]) == {("7", "C"), ("7", "D")}
    # 3: singletons, the cell of key 7 and Y = D among them ("detected by two rules, 1b and 3"),
    # and the margins that are singletons themselves.
    assert _flagged(seed003, flags["3"]) == {
        ("4", "B"), ("7", "D"), ("8", "B"), ("10", "A"), ("10", "Total"), ("Total", "D"),
    }
    # Key value 6 (17 and 3) is a coalition of three: not flagged at t_abs = 3, as the seed says.
    assert ("6", "A") not in _flagged(seed003, flags["1a"])


def test_seed003_threshold_rule_misses_what_the_extended_rules_find(seed003: Table) -> None:
    plain = _flagged(seed003, threshold_rule(seed003, 3))
    assert ("1", "A") not in plain and ("3", "A") in plain and ("7", "D") in plain


def test_seed003_each_variable_in_turn_swaps_1a_and_1b(seed003: Table) -> None:
    th = RuleThresholds.both_sides(t_abs=3, t_rel=99, t_min=2)
    by_y = assess(seed003, RiskRules(thresholds=th, targets=("y",))).flags
    by_key = assess(seed003, RiskRules(thresholds=th, targets=("key",))).flags
    both = assess(seed003, RiskRules(thresholds=th)).flags
    assert (by_y["1a"] == by_key["1b"]).all() and (by_y["1b"] == by_key["1a"]).all()
    assert (both["1a"] == (by_y["1a"] | by_y["1b"])).all()


def test_separate_thresholds_switch_rules_on_one_by_one(seed003: Table) -> None:
    only = assess(seed003, RiskRules(thresholds=RuleThresholds(t_k_abs=2), targets=("y",))).flags
    assert set(only) == {"1a"}
    # t_k_abs = 2 detects a single other unit only: key 5 (18 and 2) is no longer flagged.
    assert _flagged(seed003, only["1a"]) == {("1", "A"), ("2", "A"), ("3", "A"), ("4", "A"), ("8", "A"), ("10", "A")}


def test_table_5_1_threshold_flags_the_single_female() -> None:
    frame = pd.DataFrame({
        "marital": ["Married", "Married", "Divorced", "Divorced", "Single", "Single"],
        "sex": ["Male", "Female"] * 3, "n": [38, 17, 7, 4, 3, 1],
    })
    t = _table(frame, ["marital", "sex"], {"marital": ["Married", "Divorced", "Single"], "sex": ["Male", "Female"]})
    assert t.value(marital="Total", sex="Total") == 70
    assert _flagged(t, threshold_rule(t, 3)) == {("Single", "Female")}


def test_table_5_2_zeros_reveal_the_single_females_hours() -> None:
    values = {
        ("Married", "Male"): [30, 6, 2], ("Married", "Female"): [14, 3, 0],
        ("Divorced", "Male"): [3, 4, 0], ("Divorced", "Female"): [2, 2, 0],
        ("Single", "Male"): [2, 0, 1], ("Single", "Female"): [0, 0, 1],
    }
    hours = [">30", "16-30", "<=15"]
    frame = pd.DataFrame([(m, s, h, n) for (m, s), v in values.items() for h, n in zip(hours, v)],
                         columns=["marital", "sex", "hours", "n"])
    t = _table(frame, ["marital", "sex", "hours"],
               {"marital": ["Married", "Divorced", "Single"], "sex": ["Male", "Female"], "hours": hours})
    assert t.value(marital="Total", sex="Total", hours="Total") == 70
    zeros = _flagged(t, zeros_rule(t, targets=["hours"]))
    # Her row is all zeros but the lowest band: the 1 and both informative zeros are flagged.
    assert {("Single", "Female", "<=15"), ("Single", "Female", ">30"), ("Single", "Female", "16-30")} <= zeros
    assert ("Married", "Male", ">30") not in zeros
    assert ("Single", "Female", "<=15") in _flagged(t, threshold_rule(t, 3))


def test_table_5_3_group_attribute_and_within_group_disclosure() -> None:
    frame = pd.DataFrame({
        "marital": ["Married", "Married", "Divorced", "Divorced", "Single", "Single"],
        "hours": ["Full", "Part"] * 3, "n": [6, 0, 5, 1, 2, 2],
    })
    t = _table(frame, ["marital", "hours"], {"marital": ["Married", "Divorced", "Single"], "hours": ["Full", "Part"]})
    assert t.value(marital="Total", hours="Total") == 16
    # All married persons work full time: the 100% cell and the informative zero.
    assert _flagged(t, zeros_rule(t, targets=["hours"])) == {("Married", "Full"), ("Married", "Part")}
    # The divorced part-timer knows the other five work full time (a coalition of one).
    within = _flagged(t, coalition_rule(t, 1, targets=["hours"]))
    assert ("Divorced", "Full") in within and ("Single", "Full") not in within
    rule_1a = assess(t, RiskRules(thresholds=RuleThresholds(t_k_abs=2), targets=("hours",))).flags["1a"]
    assert _flagged(t, rule_1a) == {("Married", "Full"), ("Divorced", "Full")}


def test_hierarchy_is_checked_against_the_next_level() -> None:
    # Area A1 holds every unit of region R1 with Y = x: flagged against R1, not against Total.
    frame = pd.DataFrame({"area": ["A1", "A1", "A2", "A3", "A3"], "y": ["x", "z", "z", "x", "z"], "n": [5, 9, 7, 40, 30]})
    h = Hierarchy.from_tree({"R1": ["A1", "A2"], "R2": ["A3"]})
    t = tabulate(InnerCells.from_frame(frame, count="n"), ["area", "y"], hierarchies={"area": h}).densify()
    flags = assess(t, RiskRules(thresholds=RuleThresholds(t_k_rel=100), targets=("area",))).flags["2a"]
    flagged = _flagged(t, flags)
    assert ("A1", "x") in flagged  # 5 of the 5 x's of R1
    assert ("R1", "x") not in flagged  # 5 of the 45 x's overall
    assert ("A3", "x") in flagged  # the only area of R2


def test_rules_refuse_bad_parameters(seed003: Table) -> None:
    from tabsafe.errors import InputError

    with pytest.raises(InputError, match="t_k_rel"):
        RuleThresholds(t_k_rel=150)
    with pytest.raises(InputError, match="unknown variable"):
        assess(seed003, RiskRules(min_freq=3, targets=("nope",)))
    with pytest.raises(InputError, match="no rule"):
        assess(seed003, RiskRules())
