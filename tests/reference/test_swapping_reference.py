"""Reference cases of the pre-tabular methods from the seeds.

* Seed 001 §6: the PRAM transition matrix of the four-CD example (rows the initial CD, columns
  the final one, ``x1 ≤ x2, x3, x4``): row 1 keeps ``1-p`` and sends ``p/3`` to each other CD;
  row ``i`` sends ``p·x1/(3·x_i)`` to each other CD — so ``x1·p/3`` households are expected to
  move between every two CDs, and "on average after PRAM has been applied there will still be
  x1 households in m1, x2 households in m2, and so on".
* Seed 000 §5.6.1: risk ``r_ik = 1/c_ik`` from the counts of the risk variables within the area
  at each level, a household's risk the largest of its members'.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tabsafe.model.microdata import Microdata
from tabsafe.protect.swapping import TargetedSwap
from tabsafe.protect.swapping.pram import invariant_matrix


def test_seed_001_four_cd_matrix() -> None:
    x = np.array([10, 20, 30, 40])
    p = 0.3
    P = invariant_matrix(x, retention=1 - p)
    want = np.array([
        [1 - p, p / 3, p / 3, p / 3],
        [p * 10 / (3 * 20), 1 - p * 10 / 20, p * 10 / (3 * 20), p * 10 / (3 * 20)],
        [p * 10 / (3 * 30), p * 10 / (3 * 30), 1 - p * 10 / 30, p * 10 / (3 * 30)],
        [p * 10 / (3 * 40), p * 10 / (3 * 40), p * 10 / (3 * 40), 1 - p * 10 / 40],
    ])
    assert np.allclose(P, want)
    assert np.allclose(P.sum(axis=1), 1)
    assert np.allclose(x @ P, x)  # the seed's invariance: x1 households stay in m1 on average
    flows = x[:, None] * P
    off = ~np.eye(4, dtype=bool)
    assert np.allclose(flows[off], 10 * p / 3)  # x1·p/3 households between every two CDs


def test_seed_000_risk_levels() -> None:
    """Counts of sex × age within region, area and small area (k = 2): household 1's member
    (1, o) is alone in its small area and area but not in the region; household 2 has a member
    alone everywhere; household 3's members have look-alikes in the area only."""
    df = pd.DataFrame({
        "household_id": [1, 1, 2, 3, 3, 4, 4, 5],
        "region": ["R"] * 8,
        "area": ["A1", "A1", "A1", "A1", "A1", "A2", "A2", "A2"],
        "small_area": ["S1", "S1", "S2", "S3", "S3", "S4", "S4", "S5"],
        "sex": ["1", "2", "2", "2", "2", "1", "2", "1"],
        "age": ["o", "m", "y", "m", "m", "o", "m", "m"],
    })
    method = TargetedSwap(geography=("region", "area", "small_area"), risk_vars=("sex", "age"), k=2,
                          swaprate=0.0, household="household_id")
    out = method.perturb(Microdata.from_frame(df), seed=1)
    ev = out.evaluation.to_pandas()
    first = ev.groupby(df["household_id"].to_numpy())["risk_level"].first().astype(object).to_dict()
    # household 1: (1,o) counts 2 in R, 1 in A1 → risky from the area
    # household 2: (2,y) counts 1 everywhere → risky from the region
    # household 3: (2,m) ×2 counts 4 in R, 3 in A1, 2 in S3 → never risky
    # household 4: (1,o) counts 2 in R, 1 in A2 → risky from the area
    # household 5: (1,m) counts 1 in R → risky from the region
    assert {h: first[h] for h in (1, 2, 4, 5)} == {1: "area", 2: "region", 4: "area", 5: "region"}
    assert pd.isna(first[3])


# ---------------------------------------------------------------------------- seed 000 §5.6.1, sdcMicro
def _two_regions() -> pd.DataFrame:
    """Two regions of one area each with two small areas. Household 1 (R1) is unique in its small
    area but not in its area: risky at small_area only. Its only look-alike by household size
    (hsize 3) outside its small area lives in region R2."""
    return pd.DataFrame({
        "household_id": [1, 2, 3, 4, 5, 6],
        "region": ["R1", "R1", "R1", "R2", "R2", "R2"],
        "area": ["A1", "A1", "A1", "A2", "A2", "A2"],
        "small_area": ["S1", "S2", "S2", "S3", "S3", "S3"],
        "sex": ["1", "1", "1", "1", "1", "1"],
        "age": ["y", "y", "y", "y", "y", "y"],
        "hsize": ["3", "1", "1", "3", "1", "1"],
    })


def test_seed_000_step_3_donor_from_any_other_area() -> None:
    """Step 3: 'select all units … which do not belong to the same area g^k' — at the small-area
    level the donor may come from another region (sdcMicro's rule, the default); with
    ``donors=same-top-area`` household 1 has no donor."""
    df = _two_regions()
    kw = dict(geography=("region", "area", "small_area"), risk_vars=("sex", "age"), k=2, swaprate=0.0,
              similar=(("hsize",),))
    out = TargetedSwap(**kw).perturb(Microdata.from_frame(df), seed=5)
    after = out.microdata.read().to_pandas()
    # household 1 (row 0) took household 4's geography (row 3) and vice versa
    assert list(after.loc[0, ["region", "small_area"]]) == ["R2", "S3"]
    assert list(after.loc[3, ["region", "small_area"]]) == ["R1", "S1"]
    assert out.report.figures["records_moved_across"] == {"region": 2, "area": 2, "small_area": 2}
    kept = TargetedSwap(**kw, donors="same-top-area").perturb(Microdata.from_frame(df), seed=5)
    assert kept.microdata.read().to_pandas().equals(df)
    assert kept.report.private["risky_unswapped"] == 1


def test_swaprate_is_the_share_of_households_swapped() -> None:
    """sdcMicro's swaprate counts both households of a pair: 0.2 of 40 households is 8
    households (4 pairs); the pair rate 0.2 samples 8 households, each with a partner (16)."""
    from tabsafe.protect.swapping import RandomSwap

    rng = np.random.default_rng(0)
    n = 40
    df = pd.DataFrame({"household_id": np.arange(n), "region": ["R"] * n,
                       "small_area": [f"S{i}" for i in rng.integers(0, 8, n)]})
    for method, swapped in ((RandomSwap(geography=("region", "small_area"), swaprate=0.2), 8),
                            (RandomSwap(geography=("region", "small_area"), pairrate=0.2), 16),
                            (TargetedSwap(geography=("region", "small_area"), risk_vars=("region",), k=1,
                                          swaprate=0.2), 8)):
        out = method.perturb(Microdata.from_frame(df), seed=1)
        assert out.report.figures["households_swapped"] == swapped, method
        assert sum(out.evaluation.column("swapped").to_pylist()) == swapped


def test_given_risk_and_threshold_choose_the_households() -> None:
    """sdcMicro's ``risk`` and ``risk_threshold`` (the seed's r_high): a household is swapped when
    a member's given risk reaches the threshold — here households 1 and 4, each the other's donor
    (different small areas, same size); the rate asks for nothing more."""
    df = pd.DataFrame({
        "household_id": [1, 1, 2, 3, 4, 5, 6],
        "region": ["R"] * 7,
        "small_area": ["S1", "S1", "S1", "S2", "S3", "S3", "S2"],
        "hsize": ["2", "2", "1", "1", "2", "1", "1"],
        "r": [0.1, 0.6, 0.2, 0.3, 0.5, 0.49, 0.0],
    })
    method = TargetedSwap(geography=("region", "small_area"), risk=("r",), risk_threshold=0.5, swaprate=0.0,
                          similar=(("hsize",),))
    out = method.perturb(Microdata.from_frame(df), seed=2)
    ev = out.evaluation.to_pandas()
    swapped = set(df["household_id"][ev["swapped"].to_numpy()])
    assert swapped == {1, 4}
    at = df["household_id"].isin([1, 4]).to_numpy()
    # one risk column: the same risk at every level, so risky from the top (one region: no donor
    # there), swapped at the small-area level
    assert list(ev["risk_level"].astype(object)[at]) == ["region"] * 3
    assert list(ev["swap_level"].astype(object)[at]) == ["small_area"] * 3
    assert ev["risk_level"][~at].isna().all()
    assert out.report.figures["records_moved_across"] == {"region": 0, "small_area": 3}


def test_small_cell_flag_targets_the_lowest_level() -> None:
    """ONS-style targeting: households with a member flagged as in a small cell are risky at the
    lowest level only, and swapped there with a household of another small area."""
    df = pd.DataFrame({
        "household_id": [1, 2, 3, 4, 5, 6],
        "region": ["R1", "R1", "R1", "R2", "R2", "R2"],
        "small_area": ["S1", "S1", "S2", "S3", "S3", "S4"],
        "small": [True, False, False, False, False, False],
    })
    out = TargetedSwap(geography=("region", "small_area"), flag="small", swaprate=0.0).perturb(
        Microdata.from_frame(df), seed=3)
    ev = out.evaluation.to_pandas()
    assert ev["swapped"].sum() == 2 and bool(ev["swapped"][0])
    assert ev["swap_level"][0] == "small_area" and ev["risk_level"][0] == "small_area"
    assert ev["risk_level"][1:].isna().all()
    assert out.report.figures["targeted_pairs"] == 1


def test_note_when_targeted_swaps_exceed_twice_the_rate() -> None:
    """Issue #25: every household at risk is swapped whatever the rate; when that is more than
    twice what the rate asks for, the report says so and why. 20 households, swap rate 0.1: one
    pair (2 households) asked for; flagged households in one small area each need a donor."""
    def run(n_flagged: int):
        df = pd.DataFrame({"household_id": np.arange(20), "region": ["R"] * 20,
                           "small_area": ["S0"] * 4 + [f"S{1 + i % 4}" for i in range(16)],
                           "small": [i < n_flagged for i in range(20)]})
        return TargetedSwap(geography=("region", "small_area"), flag="small", swaprate=0.1).perturb(
            Microdata.from_frame(df), seed=5).report

    at_two = run(2)  # 2 targeted pairs: 4 households, exactly twice the 2 asked for
    assert at_two.figures["households_swapped"] == 4 and at_two.figures["target_pairs"] == 1
    assert not [n for n in at_two.notes if "more than twice" in n]
    over = run(3)  # 3 targeted pairs: 6 households
    assert over.figures["households_swapped"] == 6 and over.figures["targeted_pairs"] == 3
    notes = [n for n in over.notes if "more than twice" in n]
    assert len(notes) == 1 and "whatever the rate" in notes[0] and "flagged by small" in notes[0]
    assert "swapped 6 households (30.0%)" in notes[0] and "the 2 (10.0%)" in notes[0]
