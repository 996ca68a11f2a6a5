"""Small populations for the examples, the contract suite and the tests of the swapping methods."""

from __future__ import annotations

from typing import Any

import numpy as np


def population(n_households: int = 160, seed: int = 5, *, regions: int = 2, areas: int = 2,
               small_areas: int = 3) -> Any:
    """Persons in households with a nested geography (region > area > small_area), sex, a
    three-band age, household size ``hsize`` and ``tenure`` (household level), as a pandas
    frame; rare ages make some households risky."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    size = rng.choice([1, 2, 3, 4], n_households, p=[0.3, 0.35, 0.2, 0.15])
    region = rng.integers(0, regions, n_households)
    area = rng.integers(0, areas, n_households)
    small = rng.integers(0, small_areas, n_households)
    tenure = rng.choice(["own", "rent"], n_households)
    hh = np.repeat(np.arange(n_households), size)
    r, a, s = region[hh], area[hh], small[hh]
    n = hh.size
    return pd.DataFrame({
        "person": np.arange(1, n + 1),
        "household_id": hh + 1,
        "region": [f"R{x + 1}" for x in r],
        "area": [f"R{x + 1}A{y + 1}" for x, y in zip(r, a)],
        "small_area": [f"R{x + 1}A{y + 1}S{z + 1}" for x, y, z in zip(r, a, s)],
        "sex": rng.choice(["1", "2"], n),
        "age": rng.choice(["young", "mid", "old"], n, p=[0.3, 0.6, 0.1]),
        "hsize": [str(x) for x in size[hh]],
        "tenure": tenure[hh],
    })
