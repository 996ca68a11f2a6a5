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
