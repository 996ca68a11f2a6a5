"""Production controls of magnitude suppression (issue #29): a-priori statuses, given protection
levels, cost functions and the λ transform, and bad input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tabsafe.errors import InputError
from tabsafe.model.contributions import contributions
from tabsafe.protect.magnitude import Controls, MagnitudeSettings, _costs, protect_magnitudes
from tabsafe.risk.dominance import DominanceRules, NKRule, PRule

RULES = DominanceRules(p=(PRule(20),))


@pytest.fixture(scope="module")
def table():
    # 3 × 3 with margins; cell (x, p) is dominated by one enterprise
    rng = np.random.default_rng(5)
    rows = []
    for a in "xyz":
        for b in "pqr":
            for k in range(4):
                rows.append((a, b, f"{a}{b}{k}", float(rng.integers(20, 40))))
    rows.append(("x", "p", "big", 900.0))
    data = pd.DataFrame(rows, columns=["a", "b", "id", "v"])
    return contributions(data, ["a", "b"], value="v", contributor="id")


def _cell(c, **codes):
    return c.table().cell_id(codes)


def test_a_dominated_cell_is_primary_and_protected(table) -> None:
    res = protect_magnitudes(table, RULES)
    xp = _cell(table, a="x", b="p")
    assert res.reason[xp] == "primary"
    assert res.suppressed.sum() >= 4 and res.audit.passed
    assert np.isnan(res.protection.release.table.column("sum_v")[xp])


def test_protected_cells_are_never_hidden(table) -> None:
    first = protect_magnitudes(table, RULES)
    secondary = np.flatnonzero(first.reason == "secondary")
    keep = int(secondary[0])
    codes = tuple(zip(("a", "b"), table.table().to_frame().iloc[keep][["a", "b"]].astype(str)))
    res = protect_magnitudes(table, RULES, controls=Controls.from_cells(table, {codes: {"status": "protected"}}))
    assert res.reason[keep] == "published"
    assert res.reason[_cell(table, a="x", b="p")] == "primary" and res.audit.passed


def test_safe_status_overrides_the_rules_and_unsafe_adds_a_primary(table) -> None:
    xp, zr = _cell(table, a="x", b="p"), _cell(table, a="z", b="r")
    controls = Controls.from_cells(table, {(("a", "x"), ("b", "p")): {"status": "safe"},
                                           (("a", "z"), ("b", "r")): {"status": "unsafe"}})
    res = protect_magnitudes(table, RULES, MagnitudeSettings(manual_ratio=10), controls)
    assert res.reason[xp] != "primary"
    assert res.reason[zr] == "primary"
    assert res.upper[zr] == pytest.approx(0.10 * table.value[zr])


def test_given_protection_levels_replace_the_rules(table) -> None:
    xp = _cell(table, a="x", b="p")
    controls = Controls.from_cells(table, {(("a", "x"), ("b", "p")): {"upper": 123.0, "lower": 45.0}})
    res = protect_magnitudes(table, RULES, controls=controls)
    assert (res.upper[xp], res.lower[xp]) == (123.0, 45.0)


def test_a_priori_suppressed_cells_stay_hidden(table) -> None:
    first = protect_magnitudes(table, RULES)
    cell = int(np.flatnonzero(first.reason == "published")[-1])  # a cell the rules' pattern publishes
    codes = tuple(zip(("a", "b"), table.table().to_frame().iloc[cell][["a", "b"]].astype(str)))
    res = protect_magnitudes(table, RULES, controls=Controls.from_cells(table, {codes: {"status": "suppressed"}}))
    assert res.reason[cell] == "secondary"


def test_cost_functions_and_the_lambda_transform(table) -> None:
    n = table.n_cells
    tie = 1.0 / (n + 1)
    value = _costs(table, MagnitudeSettings(cost="value"), Controls())
    assert value - tie == pytest.approx(np.abs(table.value))
    assert _costs(table, MagnitudeSettings(cost="frequency"), Controls()) - tie == pytest.approx(table.contributors)
    assert _costs(table, MagnitudeSettings(cost="unity"), Controls()) - tie == pytest.approx(np.ones(n))
    assert _costs(table, MagnitudeSettings(lam=0.5), Controls()) - tie == pytest.approx(np.sqrt(np.abs(table.value)))
    assert _costs(table, MagnitudeSettings(lam=0), Controls()) - tie == pytest.approx(np.log1p(np.abs(table.value)))
    given = np.full(n, np.nan)
    given[3] = 7.0
    assert _costs(table, MagnitudeSettings(), Controls(cost=given))[3] == pytest.approx(7.0 + tie)


def test_costs_steer_the_secondary_cells(table) -> None:
    # a huge cost on every cell the default pattern hides (not primary) moves the pattern elsewhere
    first = protect_magnitudes(table, RULES)
    cost = np.where(first.reason == "secondary", 1e9, np.nan)
    res = protect_magnitudes(table, RULES, controls=Controls(cost=cost))
    assert res.audit.passed
    assert (res.reason == "secondary").sum() > 0
    assert not np.array_equal(res.reason == "secondary", first.reason == "secondary")


@pytest.mark.parametrize("data, kwargs, message", [
    (pd.DataFrame({"a": ["x"], "v": ["ten"]}), {}, "response variable 'v' is not a number in record 1"),
    (pd.DataFrame({"a": ["x", None], "v": [1.0, 2.0]}), {}, "variable 'a' is missing in record 2"),
    (pd.DataFrame({"a": ["x"], "v": [1.0], "w": [0.0]}), {"weight": "w"}, "must be positive; record 1 has 0"),
    (pd.DataFrame({"a": ["x"], "v": [1.0]}), {"contributor": "id"}, "contributor 'id' is not a column"),
])
def test_bad_input_is_one_clear_line(data, kwargs, message) -> None:
    with pytest.raises(InputError, match=message) as err:
        contributions(data, ["a"], value="v", **kwargs)
    assert "\n" not in str(err.value)


def test_bad_rules_and_controls_are_refused(table) -> None:
    with pytest.raises(InputError, match="no magnitude rule"):
        DominanceRules()
    with pytest.raises(InputError, match=r"of the \(n,k\) rule must be in"):
        NKRule(1, 100)
    with pytest.raises(InputError, match="status 'secret' is not one of"):
        Controls.from_cells(table, {(("a", "x"),): {"status": "secret"}})
    with pytest.raises(InputError, match="must be one of value, frequency"):
        MagnitudeSettings(cost="distance")


def test_synth_business_writes_a_register_that_reruns_from_its_seed(tmp_path) -> None:
    from tabsafe.cli import main

    for name in ("a", "b"):
        assert main(["synth", "--business", "60", "--seed", "4", "--out", str(tmp_path / name), "--quiet"]) == 0
    a = pd.read_parquet(tmp_path / "a" / "enterprises.parquet")
    b = pd.read_parquet(tmp_path / "b" / "enterprises.parquet")
    assert len(a) == 60 and a.equals(b)
    assert set(a.columns) >= {"enterprise", "holding", "activity", "region", "size", "turnover", "weight"}
    assert (tmp_path / "a" / "hierarchies" / "activity.hrc").is_file()
    c = contributions(a, ["activity", "region", "size"], value="turnover", contributor="enterprise",
                      holding="holding", hierarchies=__import__("tabsafe.synth_business").synth_business.business_hierarchies())
    assert c.value[0] == pytest.approx(a["turnover"].sum())


def test_the_business_register_looks_like_business_demography() -> None:
    """``synth --business``: about 90 % micro enterprises, the large ones few, mostly in holdings and
    making a large share of a heavy-tailed turnover; enterprises concentrated in a few activities
    and regions, so that at 10,000 enterprises most inner cells with contributors have more than
    five (issue #29)."""
    from tabsafe.synth_business import generate_business

    d = generate_business(10_000, 7)
    share = d["size"].value_counts(normalize=True)
    assert 0.87 < share["micro"] < 0.93 and 0.001 < share["large"] < 0.008
    assert d.loc[d["size"] == "micro", "employees"].between(0, 9).all()
    assert (d.loc[d["size"] == "large", "employees"] >= 250).all()
    turnover = d.groupby("size")["turnover"].sum() / d["turnover"].sum()
    assert turnover["large"] > 0.25 and turnover["micro"] < 0.3  # the few large make much of it
    top = np.sort(d["turnover"].to_numpy())[::-1]
    assert top[:100].sum() > 0.4 * top.sum()  # heavy tail: the top 1 % hold over 40 %
    in_holding = (d["holding"] != "").groupby(d["size"]).mean()
    assert in_holding["large"] > 0.4 and in_holding["micro"] < 0.03
    assert d.loc[d["holding"] != ""].groupby("holding").size().between(2, 7).all()
    activity = d["activity"].value_counts(normalize=True)
    assert activity.iloc[:5].sum() > 0.4  # 5 of 24 activity groups hold over 40 %
    cells = d.groupby(["activity", "region", "size"]).size()
    assert (cells > 5).mean() > 0.5, cells.describe()
    assert generate_business(500, 4).equals(generate_business(500, 4))
    assert not generate_business(500, 4).equals(generate_business(500, 5))
