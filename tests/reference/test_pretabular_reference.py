"""Over-imputation and sampling (seed 000 §5.3's pre-tabular methods), each against an independent
computation of what it must give.

* Sampling — seed 001 §7's example: households sampled without replacement with fraction 1/3,
  "multiply all cell counts by 3"; every weighted cell is then a multiple of 3, and an unbiased
  estimate of the original count whose variance is the stratified simple-random-sampling formula
  ``Σ_k n_k² (1 − f) S²_k / m_k`` (computed here from the households' cell counts).
* Over-imputation — hot deck within classes: for a class ``c``, imputed values ``v`` and another
  variable ``w``, ``E n*(c, w, v) = (1 − r)·n(c, w, v) + r·n(c, w)·n(c, v)/n(c)`` (the module
  docstring; computed here with pandas from the original records).

Means over many seeded runs are compared with the expectation within 4.5 standard errors; the
seeds are fixed, so the tests are deterministic.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tabsafe.model.microdata import Microdata
from tabsafe.protect.over_imputation import OverImputation
from tabsafe.protect.sampling import Sampling

RUNS = 300


def households(n_households: int = 700, seed: int = 3) -> pd.DataFrame:
    """Persons in households of 1–5 in two areas of unequal sizes (not multiples of 3); age is
    household-correlated, tenure and sex depend on age, so tables by age are not the margins."""
    rng = np.random.default_rng(seed)
    size = rng.choice([1, 2, 3, 4, 5], n_households, p=[0.3, 0.3, 0.2, 0.15, 0.05])
    area = np.where(np.arange(n_households) < 401, "A1", "A2")
    old = rng.random(n_households) < np.where(area == "A1", 0.2, 0.5)
    hh = np.repeat(np.arange(n_households), size)
    age = np.where(old[hh] & (rng.random(hh.size) < 0.8), "old", np.where(rng.random(hh.size) < 0.5, "young", "mid"))
    tenure = np.where(age == "old", np.where(rng.random(hh.size) < 0.9, "own", "rent"),
                      np.where(rng.random(hh.size) < 0.3, "own", "rent"))
    sex = np.where(rng.random(hh.size) < np.where(age == "old", 0.75, 0.4), "2", "1")
    return pd.DataFrame({"household_id": hh, "area": area[hh], "sex": sex, "age": age, "tenure": tenure})


# ------------------------------------------------------------------------------------------ sampling
def _weighted(df: pd.DataFrame, weight: np.ndarray, by: list[str]) -> pd.Series:
    return df.assign(w=weight).groupby(by)["w"].sum()


def test_sampling_seed_example_one_in_three() -> None:
    """001 §7: a third of the households, whole; every count a multiple of 3; each area's sample
    as close to a third as a whole number can be (⌊n_k/3⌋ or ⌈n_k/3⌉)."""
    df = households()
    md = Microdata.from_frame(df)
    out = Sampling(one_in=3, strata=("area",)).perturb(md, seed=11)
    w = np.asarray(out.microdata.read().column("weight"))
    assert out.microdata.weight == "weight"
    assert set(np.unique(w)) <= {0, 3}
    per_household = pd.Series(w).groupby(df["household_id"]).agg(["min", "max"])
    assert (per_household["min"] == per_household["max"]).all(), "a household was split"
    n_k = df.groupby("area")["household_id"].nunique()
    m_k = df[w > 0].groupby("area")["household_id"].nunique()
    assert ((m_k == n_k // 3) | (m_k == -(-n_k // 3))).all()
    table = _weighted(df, w, ["area", "age", "tenure"])
    assert (table % 3 == 0).all()
    # tables count the weights: a tabulation of the sampled records is the weighted sum
    from tabsafe.tabulation import tabulate

    t = tabulate(out.microdata, ["area", "age"])
    expected = _weighted(df, w, ["area", "age"])
    for (a, g), v in expected.items():
        assert t.value(area=a, age=g) == v


def test_sampling_is_unbiased_with_the_srs_variance() -> None:
    df = households()
    md = Microdata.from_frame(df)
    by = ["area", "age", "tenure"]
    original = df.groupby(by).size()
    runs = np.array([_weighted(df, np.asarray(Sampling(one_in=3, strata=("area",)).perturb(md, seed=s)
                                              .microdata.read().column("weight")), by).reindex(original.index)
                     for s in range(RUNS)])
    # stratified SRS without replacement of households, fraction 1/3 (y: a household's persons in the cell)
    y = df.groupby(["area", "household_id", "age", "tenure"]).size().unstack(["age", "tenure"], fill_value=0)
    var = np.zeros(len(original))
    for _, block in y.groupby(level="area"):
        n_k = len(block)
        m_k = n_k / 3
        s2 = block.reindex(columns=original.droplevel("area").index.unique(), fill_value=0).var(ddof=1)
        area = block.index.get_level_values("area")[0]
        in_area = original.index.get_level_values("area") == area
        cells = original.index[in_area].droplevel("area")
        var[in_area] = (n_k ** 2 * (1 - 1 / 3) * s2.reindex(cells).to_numpy() / m_k)
    z = (runs.mean(axis=0) - original.to_numpy()) / np.sqrt(var / RUNS)
    assert np.abs(z).max() < 4.5, f"weighted counts are biased: z = {z.round(1)}"
    # and the spread is the design's, not more or less (each cell's variance within 30%)
    ratio = runs.var(axis=0, ddof=1) / var
    assert ((ratio > 0.7) & (ratio < 1.3)).all(), f"variance ratio {ratio.round(2)}"


def test_sampling_gives_every_household_probability_one_in_n_even_in_small_strata() -> None:
    """Strata of 1, 2, 4 and 5 households, one in 3: a stratum's sample is ⌊n_k/3⌋ or ⌈n_k/3⌉
    households and each household is in it with probability exactly 1/3 — so a stratum smaller
    than 3 is still sampled, a third of the time (seed 001 §7: strata of small area × household
    size are often that small)."""
    sizes = {"a": 1, "b": 2, "c": 4, "d": 5}
    hh = [(f"{k}{i}", k) for k, m in sizes.items() for i in range(m)]
    df = pd.DataFrame({"household_id": np.repeat([h for h, _ in hh], 2), "area": np.repeat([k for _, k in hh], 2)})
    md = Microdata.from_frame(df)
    runs = 450
    hits = np.zeros(len(hh))
    for s in range(runs):
        w = np.asarray(Sampling(one_in=3, strata=("area",)).perturb(md, seed=s).microdata.read().column("weight"))
        per_household = w[::2] / 3
        for k, m in sizes.items():
            in_k = np.array([a == k for _, a in hh])
            assert per_household[in_k].sum() in (m // 3, -(-m // 3))
        hits += per_household
    p = hits / runs
    se = np.sqrt(1 / 3 * 2 / 3 / runs)
    assert np.abs(p - 1 / 3).max() < 4.5 * se, f"inclusion frequencies {p.round(3)}"


def test_sampling_multiplies_an_existing_record_weight() -> None:
    """Data already weighted (a record stands for w units): the sample weight is one_in · w, so
    the estimate stays unbiased for the weighted count; a fractional weight is refused."""
    df = households(200).assign(w0=lambda d: 1 + d["household_id"] % 3)
    md = Microdata.from_frame(df, weight="w0")
    out = Sampling(one_in=2).perturb(md, seed=4)
    sampled = out.evaluation.to_pandas()["sampled"].to_numpy()
    w = np.asarray(out.microdata.read().column("weight"))
    assert out.microdata.weight == "weight"
    assert (w == np.where(sampled, 2 * df["w0"], 0)).all()
    from tabsafe.errors import InputError

    with pytest.raises(InputError, match="whole numbers"):
        Sampling(one_in=2).perturb(Microdata.from_frame(df.assign(w0=df["w0"] / 2), weight="w0"), seed=4)
    with pytest.raises(InputError, match="households have persons in different strata"):
        Sampling(strata=("age",)).perturb(Microdata.from_frame(df), seed=4)


# ------------------------------------------------------------------------------------------ over-imputation
@pytest.mark.parametrize("variables", [("age",), ("age", "tenure")])
def test_over_imputation_expected_table(variables: tuple[str, ...]) -> None:
    """The mean table of class × sex × imputed variables over the runs is the hot deck's
    expectation, computed from the original records."""
    df = households()
    md = Microdata.from_frame(df)
    rate = 0.3
    method = OverImputation(variables=variables, rate=rate, within=("area",))
    by = ["area", "sex", *variables]
    n = df.groupby(by).size()
    n_cw = df.groupby(["area", "sex"]).size()
    n_cv = df.groupby(["area", *variables]).size()
    n_c = df.groupby("area").size()
    grid = pd.MultiIndex.from_product([sorted(df[v].unique()) for v in by], names=by)
    expected = pd.Series([(1 - rate) * n.get(k, 0) + rate * n_cw[k[:2]] * n_cv.get((k[0], *k[2:]), 0) / n_c[k[0]]
                          for k in grid], index=grid)
    runs = []
    for s in range(RUNS):
        out = method.perturb(md, seed=s)
        got = out.microdata.read().to_pandas()
        assert out.report.figures["records_imputed"] == round(rate * len(df))
        assert (got.drop(columns=list(variables)) == df.drop(columns=list(variables))).all().all()
        runs.append(got.groupby(by).size().reindex(grid, fill_value=0).to_numpy())
    runs_a = np.array(runs, dtype=float)
    se = runs_a.std(axis=0, ddof=1) / np.sqrt(RUNS)
    z = (runs_a.mean(axis=0) - expected.to_numpy()) / np.maximum(se, 1e-9)
    assert np.abs(z).max() < 4.5, f"over-imputation misses its expected table: z = {z.round(1)}"
    # the tables differ from the originals: the method does something
    assert np.abs(runs_a.mean(axis=0) - n.reindex(grid, fill_value=0).to_numpy()).max() > 5


def test_over_imputation_donors_are_kept_records_of_the_class() -> None:
    """Every imputed record's values are those of a record of its class that kept its values."""
    df = households()
    out = OverImputation(variables=("age", "tenure"), rate=0.4, within=("area", "sex")).perturb(
        Microdata.from_frame(df), seed=5)
    got = out.microdata.read().to_pandas()
    flags = out.evaluation.to_pandas()
    assert flags["imputed"].sum() == round(0.4 * len(df))
    kept = df[~flags["imputed"]]
    pools = {k: set(zip(g["age"], g["tenure"])) for k, g in kept.groupby(["area", "sex"])}
    for row in got[flags["imputed"]].itertuples():
        assert (row.age, row.tenure) in pools[(row.area, row.sex)]


def test_over_imputation_takes_values_only_from_records_that_kept_theirs() -> None:
    """A class of four distinct values, half its records drawn: each drawn record takes the value
    of one of the two that kept theirs (never its own, never another drawn record's); a class of
    one record has no donor and keeps its value (``no_donor``)."""
    df = pd.DataFrame({"area": ["A", "A", "A", "A", "B"], "age": ["1", "2", "3", "4", "5"]})
    seen_pairs = set()
    for s in range(40):
        out = OverImputation(variables=("age",), rate=0.6, within=("area",)).perturb(
            Microdata.from_frame(df), seed=s)
        got = out.microdata.read().to_pandas()
        imputed = out.evaluation.to_pandas()["imputed"].to_numpy()
        no_donor = out.report.figures["no_donor"]
        assert not imputed[4] and no_donor in (0, 1)  # B's record is never imputed: it has no donor
        drawn = imputed.copy()
        drawn[4] = no_donor == 1
        assert drawn.sum() == 3  # round(0.6 · 5) records drawn
        kept_values = set(df["age"][~drawn & (df["area"] == "A").to_numpy()])
        assert set(got["age"][imputed]) <= kept_values
        assert (got["age"][~imputed] == df["age"][~imputed]).all()
        seen_pairs |= {tuple(sorted(kept_values))}
    assert len(seen_pairs) > 3  # the drawn records vary with the seed
