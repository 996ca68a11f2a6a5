"""Record swapping on random populations (hypothesis): the properties issue #14 asks for.

Every property is checked against the records themselves (pandas), not against the method's
own bookkeeping: who is risky is recounted from the data, whether a donor existed is searched
for among the households left unswapped, pairs are read back from the geography that moved.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tabsafe.model.microdata import Microdata
from tabsafe.protect.swapping import RandomSwap, TargetedSwap

GEO = ("region", "area", "small_area")
SETTINGS = settings(max_examples=40)


@st.composite
def populations(draw: st.DrawFn) -> pd.DataFrame:
    """Households (1–70) in a nested geography of 1–3 regions × 1–3 areas × 1–3 small areas,
    with sizes 1–4, a household size and tenure, and persons' sex and skewed age."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    n_hh = draw(st.integers(1, 70))
    regions, areas, smalls = (draw(st.integers(1, 3)) for _ in range(3))
    size = rng.integers(1, 5, n_hh)
    r, a, s = rng.integers(0, regions, n_hh), rng.integers(0, areas, n_hh), rng.integers(0, smalls, n_hh)
    tenure = rng.choice(["own", "rent"], n_hh)
    hh = np.repeat(np.arange(n_hh), size)
    # household ids out of order and not contiguous: the method must not depend on row order
    ids = rng.permutation(np.arange(10, 10 + 3 * n_hh, 3))
    rows = rng.permutation(hh.size)
    hh = hh[rows]
    n = hh.size
    return pd.DataFrame({
        "household_id": ids[hh],
        "region": [f"R{x}" for x in r[hh]],
        "area": [f"R{x}A{y}" for x, y in zip(r[hh], a[hh])],
        "small_area": [f"R{x}A{y}S{z}" for x, y, z in zip(r[hh], a[hh], s[hh])],
        "sex": rng.choice(["1", "2"], n),
        "age": rng.choice(["y", "m", "o"], n, p=[0.3, 0.6, 0.1]),
        "hsize": [str(x) for x in size[hh]],
        "tenure": tenure[hh],
    })


PROFILES = st.sampled_from([(), (("hsize",),), (("hsize", "tenure"), ("hsize",)), (("tenure",),)])
GEOGRAPHIES = st.sampled_from([GEO, GEO[1:], GEO[2:], ("region", "small_area")])


def run(method, df: pd.DataFrame, seed: int = 11):
    out = method.perturb(Microdata.from_frame(df), seed=seed)
    return out.microdata.read().to_pandas(), out.evaluation.to_pandas(), out.report


def households_of(df: pd.DataFrame, household: str | None) -> pd.Series:
    return df[household] if household else pd.Series(np.arange(len(df)), index=df.index)


def first_risky_level(df: pd.DataFrame, geography, risk_vars, k: int, household: str | None) -> pd.Series:
    """Per household, the first level (index) where a member's risk combination occurs fewer
    than k times in its area — recounted from the records (seed 000 §5.6.1)."""
    hh = households_of(df, household)
    out = pd.Series(len(geography), index=hh.unique())
    for lvl in range(len(geography) - 1, -1, -1):
        count = df.groupby([geography[lvl], *risk_vars])[geography[lvl]].transform("size")
        risky = (count < k).groupby(hh).any()
        out[risky[risky].index] = lvl
    return out


def pairs_of(before: pd.DataFrame, after: pd.DataFrame, ev: pd.DataFrame, household: str | None) -> pd.DataFrame:
    """One row per swapped household: its id, partner, level, role and profile (from the
    evaluation), with the household's geography before and after."""
    hh = households_of(before, household)
    frame = pd.DataFrame({"hh": hh.to_numpy(), "partner": ev["partner"].to_numpy(),
                          "level": ev["swap_level"].astype(object).to_numpy(),
                          "role": ev["swap_role"].astype(object).to_numpy(),
                          "profile": ev["swap_profile"].astype(object).to_numpy(), "swapped": ev["swapped"]})
    for c in before.columns:
        frame[f"{c}_before"] = before[c].to_numpy()
        frame[f"{c}_after"] = after[c].to_numpy()
    firsts = frame.groupby("hh").first()
    return firsts


def check_common(method, df: pd.DataFrame, after: pd.DataFrame, ev: pd.DataFrame, report) -> pd.DataFrame:
    """Properties every swapping run keeps; returns the households table."""
    geo, household = method.geography, method.household
    hh = households_of(df, household)
    # only the geography (and carried variables) change, record by record
    moving = set(geo) | set(method.carry_along)
    for c in df.columns:
        if c not in moving:
            assert (after[c].to_numpy() == df[c].to_numpy()).all(), f"{c} changed"
    # every household's members share one geography after swapping
    for g in geo:
        assert (after.groupby(hh.to_numpy())[g].nunique() == 1).all(), f"a household is split over {g}"
    firsts = pairs_of(df, after, ev, household)
    swapped = firsts[firsts["swapped"]]
    # pairs: symmetric, each household at most once, the partner's geography received whole
    partner = swapped["partner"].astype(df[household].dtype if household else np.int64)
    if household is None:
        partner = partner - 1  # evaluation numbers records from 1
    assert set(partner) <= set(swapped.index), "a partner is not swapped"
    assert (swapped.loc[partner.to_numpy(), "partner"].astype(partner.dtype).to_numpy()
            - (1 if household is None else 0) == swapped.index.to_numpy()).all(), "pairs are not symmetric"
    for g in (*geo, *method.carry_along):
        got = swapped[f"{g}_after"].to_numpy()
        want = swapped.loc[partner.to_numpy(), f"{g}_before"].to_numpy()
        assert (got == want).all(), f"{g} is not the partner's"
    unswapped = firsts[~firsts["swapped"]]
    for g in geo:
        assert (unswapped[f"{g}_after"] == unswapped[f"{g}_before"]).all(), f"an unswapped household moved ({g})"
    # a pair matches on the profile it was matched on, and comes from different areas at its level
    profiles = method.similar or ((),)
    names = {",".join(p) if p else "(any)": p for p in profiles}
    other = firsts.loc[partner.to_numpy()]
    for name, prof in names.items():
        on = (swapped["profile"] == name).to_numpy()
        for v in prof:
            assert (swapped[f"{v}_before"].to_numpy()[on] == other[f"{v}_before"].to_numpy()[on]).all(), (
                f"a pair differs on {v}")
    within_top = getattr(method, "donors", "same-top-area") == "same-top-area"
    for lvl in geo:
        at = (swapped["level"] == lvl).to_numpy()
        assert (swapped[f"{lvl}_before"].to_numpy()[at] != other[f"{lvl}_before"].to_numpy()[at]).all(), (
            f"a pair shares its {lvl}")
        if lvl != geo[0] and within_top:  # below the top level, pairs stay inside their top-level area
            assert (swapped[f"{geo[0]}_before"].to_numpy()[at] == other[f"{geo[0]}_before"].to_numpy()[at]).all(), (
                "a pair crossed top-level areas")
    assert (swapped["level"].to_numpy() == other["level"].to_numpy()).all()
    assert (swapped["profile"].to_numpy() == other["profile"].to_numpy()).all()
    # the report counts what happened
    f = report.figures
    assert f["pairs"] * 2 == len(swapped) == f["households_swapped"]
    assert f["records_swapped"] == int(ev["swapped"].sum())
    return firsts


def eligible_donor_exists(firsts: pd.DataFrame, h, level: str, top: str | None, profiles, free: pd.Index) -> bool:
    """Whether a household still unswapped could have been ``h``'s donor at ``level``: another
    free household in a different area at that level (the same top-level area below the top,
    unless ``top`` is None: donors from anywhere) with one of the profiles."""
    i = firsts.index.get_loc(h)
    ok = firsts.index.isin(free)
    ok[i] = False
    col = firsts[f"{level}_before"].to_numpy()
    ok &= col != col[i]
    if top is not None and level != top:
        t = firsts[f"{top}_before"].to_numpy()
        ok &= t == t[i]
    for prof in profiles:
        same = ok.copy()
        for v in prof:
            c = firsts[f"{v}_before"].to_numpy()
            same &= c == c[i]
        if same.any():
            return True
    return False


def donor_scope_top(method) -> str | None:
    """The top level when donors below it must share it, None when they come from anywhere."""
    return method.geography[0] if getattr(method, "donors", "same-top-area") == "same-top-area" else None


def pairs_asked(method, households: int) -> int:
    """Pairs the rate asks for in an area of ``households`` households: the swap rate counts
    both households of a pair (sdcMicro), the pair rate the households sampled."""
    if method.pairrate is not None:
        return math.ceil(method.pairrate * households - 1e-9)
    return math.ceil(method.rate * households / 2 - 1e-9)


def check_rate(method, firsts: pd.DataFrame, report) -> None:
    """The swap rate is reached in every top-level area, counted by sampled households — or the
    report says which area fell short, and truly no further household there had a donor."""
    geo = method.geography
    top = geo[0] if len(geo) > 1 else None
    scope = firsts[f"{top}_before"] if top else pd.Series("(all)", index=firsts.index)
    sampled = firsts[firsts["role"].isin(["targeted", "top-up"])]
    short = report.private["short_areas"]
    profiles = method.similar or ((),)
    free = firsts.index[~firsts["swapped"]]
    for area, members in firsts.groupby(scope):
        target = pairs_asked(method, len(members))
        got = int((scope[sampled.index] == area).sum())
        if got >= target:
            assert area not in short
            continue
        assert short[area] == {"target": target, "pairs": got}, f"area {area} fell short silently"
        assert report.figures["shortfall_pairs"] > 0 and any("swap rate" in n for n in report.notes)
        for h in members.index.intersection(free):
            assert not eligible_donor_exists(firsts, h, geo[-1], donor_scope_top(method), profiles, free), (
                f"area {area} fell short although household {h} had a donor")


RATES = st.sampled_from([("swaprate", 0.0), ("swaprate", 0.05), ("swaprate", 0.3), ("swaprate", 1.0),
                         ("pairrate", 0.05), ("pairrate", 0.5)])


@SETTINGS
@given(df=populations(), geography=GEOGRAPHIES, k=st.integers(1, 4), rate=RATES, similar=PROFILES,
       by_household=st.booleans(), donors=st.sampled_from(["anywhere", "same-top-area"]), seed=st.integers(0, 2**40))
def test_targeted_swap_properties(df, geography, k, rate, similar, by_household, donors, seed) -> None:
    household = "household_id" if by_household else None
    carry = ("tenure",) if household and ("tenure",) not in similar else ()
    method = TargetedSwap(geography=geography, risk_vars=("sex", "age"), k=k, similar=similar,
                          household=household, carry_along=carry, donors=donors, **{rate[0]: rate[1]})
    after, ev, report = run(method, df, seed)
    firsts = check_common(method, df, after, ev, report)
    check_rate(method, firsts, report)
    # every household risky at some level that had a donor there was swapped
    risky_at = first_risky_level(df, geography, ("sex", "age"), k, household)
    free = firsts.index[~firsts["swapped"]]
    profiles = method.similar or ((),)
    for h in free:
        first = int(risky_at[h])
        for lvl in range(first, len(geography)):  # risky at a level ⇒ risky below
            top = geography[0] if lvl == 0 else donor_scope_top(method)
            assert not eligible_donor_exists(firsts, h, geography[lvl], top, profiles, free), (
                f"household {h}, risky at {geography[lvl]}, had a donor but was not swapped")
    # the evaluation's risk level is the recount's
    got = ev.groupby(households_of(df, household).to_numpy())["risk_level"].first().astype(object)
    want = [geography[i] if i < len(geography) else None for i in risky_at]
    assert [g if isinstance(g, str) else None for g in got[risky_at.index]] == want, "risk levels differ"
    # same seed, same output
    again, ev2, _ = run(method, df, seed)
    assert again.equals(after) and ev2.equals(ev)


@SETTINGS
@given(df=populations(), geography=st.sampled_from([GEO, GEO[1:], ("region", "small_area")]),
       rate=st.sampled_from([0.0, 0.1, 0.5]), similar=PROFILES, seed=st.integers(0, 2**40))
def test_random_swap_properties(df, geography, rate, similar, seed) -> None:
    method = RandomSwap(geography=geography, swaprate=rate, similar=similar)
    after, ev, report = run(method, df, seed)
    firsts = check_common(method, df, after, ev, report)
    check_rate(method, firsts, report)
    swapped = firsts[firsts["swapped"]]
    assert (swapped["role"] != "targeted").all()
    assert (swapped["level"] == geography[-1]).all(), "random swaps pair households of different lowest areas"
    # pairs stay in their top-level area: every count there is unchanged, for every variable
    cols = [c for c in df.columns if c not in geography[1:]]
    assert df.groupby(cols).size().sort_index().equals(after.groupby(cols).size().sort_index())


@SETTINGS
@given(df=populations(), similar=st.sampled_from([(("hsize",),), (("hsize", "tenure"),)]), k=st.integers(1, 4),
       rate=st.sampled_from([0.0, 0.2, 1.0]), seed=st.integers(0, 2**40))
def test_counts_per_area_and_profile_unchanged(df, similar, k, rate, seed) -> None:
    """A pair matches on its (single) profile, so the households of each profile in every area
    at every level keep their number; below the top level, pairs stay in their top-level area,
    so every count of a top-level area stays as it was (with donors from the same top-level area)."""
    method = TargetedSwap(geography=GEO, risk_vars=("sex", "age"), k=k, swaprate=rate, similar=similar,
                          donors="same-top-area")
    after, _ev, report = run(method, df, seed)
    prof = list(similar[0])
    before_hh = df.groupby("household_id").first()
    after_hh = after.groupby("household_id").first()
    for g in GEO:
        a = before_hh.groupby([g, *prof]).size().sort_index()
        b = after_hh.groupby([g, *prof]).size().sort_index()
        assert a.equals(b), f"households per {g} and profile changed"
    if not report.figures["levels"][0]["pairs"]:  # no swap crossed regions
        cols = [c for c in df.columns if c not in GEO[1:]]
        assert df.groupby(cols).size().sort_index().equals(after.groupby(cols).size().sort_index())


@settings(max_examples=25)
@given(df=populations(), geography=GEOGRAPHIES, similar=PROFILES, seed=st.integers(0, 2**40))
def test_no_risk_and_no_rate_leaves_the_records_alone(df, geography, similar, seed) -> None:
    """k = 1 (nobody is risky) and swap rate 0: the input comes back unchanged."""
    md = Microdata.from_frame(df)
    for method in (TargetedSwap(geography=geography, risk_vars=("sex", "age"), k=1, swaprate=0.0, similar=similar),
                   RandomSwap(geography=geography, swaprate=0.0, similar=similar)):
        out = method.perturb(md, seed=seed)
        assert out.microdata.read().equals(md.read())
        assert out.report.figures["pairs"] == 0 and not out.evaluation.column("swapped").to_pylist().count(True)


def test_work_splits_per_top_level_area() -> None:
    """Below the top level each top-level area is swapped from its own random stream: an area
    swapped alone gives exactly the swaps it gets in the whole run (what lets a Spark engine
    split the work per area, issue #18)."""
    from tabsafe.protect.swapping.examples import population

    df = population(600, seed=3, regions=3, areas=3, small_areas=4)
    method = TargetedSwap(geography=GEO, risk_vars=("sex", "age"), k=3, pairrate=0.1, similar=(("hsize",),),
                          donors="same-top-area")
    after, ev, report = run(method, df, seed=99)
    assert report.figures["levels"][0]["pairs"] == 0  # nothing risky in a whole region here
    assert report.figures["pairs"] > 30
    for region in sorted(df["region"].unique()):
        part = df[df["region"] == region].reset_index(drop=True)
        alone, ev_alone, _ = run(method, part, seed=99)
        mask = (df["region"] == region).to_numpy()
        assert alone.equals(after[mask].reset_index(drop=True)), f"region {region} differs when swapped alone"
        assert (ev_alone["swapped"].to_numpy() == ev["swapped"].to_numpy()[mask]).all()


def test_report_names_risky_households_without_donor() -> None:
    """A unique household with no look-alike anywhere stays unswapped, and the report and the
    notes say so (sdcMicro only writes a log file)."""
    df = pd.DataFrame({
        "household_id": [1, 2, 3, 4, 4],
        "region": ["R"] * 5,
        "area": ["A1", "A1", "A2", "A2", "A2"],
        "small_area": ["S1", "S1", "S2", "S3", "S3"],
        "sex": ["1", "1", "1", "1", "2"],
        "age": ["y", "y", "y", "y", "o"],
        "hsize": ["1", "1", "1", "2", "2"],
    })
    method = TargetedSwap(geography=GEO, risk_vars=("sex", "age"), k=2, swaprate=0.0, similar=(("hsize",),))
    _after, ev, report = run(method, df)
    # household 4 (hsize 2) is unique at every level and the only household of its size
    assert report.private["risky_unswapped"] >= 1
    assert any("stay unswapped" in n for n in report.notes)
    assert not ev["swapped"][df["household_id"] == 4].any()
    levels = {row["level"]: row for row in report.private["levels"]}
    assert levels["area"]["no_donor"] >= 1 and levels["area"]["no_donor_under_profile"] == {"hsize": levels["area"][
        "no_donor"]}


@pytest.mark.parametrize("layout", ["sorted", "shuffled"])
def test_row_order_does_not_matter(layout: str) -> None:
    """Households are ordered by identifier before any draw: the same households in another
    row order get the same swaps."""
    from tabsafe.protect.swapping.examples import population

    df = population(300, seed=8)
    method = TargetedSwap(geography=GEO, risk_vars=("sex", "age"), k=3, swaprate=0.2, similar=(("hsize",),))
    base, _, _ = run(method, df, seed=4)
    perm = np.random.default_rng(1).permutation(len(df)) if layout == "shuffled" else np.arange(len(df))
    other, _, _ = run(method, df.iloc[perm].reset_index(drop=True), seed=4)
    assert other.equals(base.iloc[perm].reset_index(drop=True))


def test_risky_household_without_donor_above_is_swapped_below() -> None:
    """Households unique in their area with no look-alike in another area of the region are
    still swapped at the level below, with each other (other small areas of their own area;
    donors from anywhere — one region here)."""
    df = pd.DataFrame({
        "household_id": [1, 2, 3, 4],
        "region": ["R"] * 4,
        "area": ["A1", "A1", "A2", "A2"],
        "small_area": ["S1", "S2", "S3", "S3"],
        "sex": ["1", "1", "1", "1"],
        "age": ["o", "m", "m", "m"],
        "hsize": ["1", "1", "2", "2"],
    })
    method = TargetedSwap(geography=GEO, risk_vars=("sex", "age"), k=2, swaprate=0.0, similar=(("hsize",),))
    after, ev, report = run(method, df)
    assert list(after["small_area"]) == ["S2", "S1", "S3", "S3"]
    assert list(ev["swap_level"].astype(object)[:2]) == ["small_area", "small_area"]
    levels = {row["level"]: row for row in report.private["levels"]}
    assert levels["region"]["no_donor"] == 1 and levels["area"]["no_donor"] == 2
    assert report.private["risky_unswapped"] == 0
