"""A synthetic business register: enterprises by activity, region and size class, with holdings.

For magnitude tables (issue #29), shaped like business demography (Eurostat's structural
business statistics: about nine enterprises in ten are micro enterprises of 0–9 persons employed,
a few in a thousand are large, and the large ones make a large share of the turnover):

* activity is a three-level hierarchy (sections, divisions, groups, like NACE) and region a
  two-level one (regions, districts); enterprises concentrate in a few activities (group shares
  drawn from a Gamma(1) law) and in the big regions (region shares 50/30/20 %, a capital
  district three times its neighbours), larger enterprises more so (the shares raised to a power
  growing with the size class);
* size class by persons employed: micro (0–9), small (10–49), medium (50–249), large (250+),
  with shares 90 / 8 / 1.6 / 0.4 %; within a class employees are skewed to its lower end, and
  the large class has a Pareto tail (index 1.2);
* turnover (thousands) is employees (at least one) times a lognormal turnover per person whose
  median rises with the size class, so it is heavy-tailed within each class and a few large
  enterprises dominate the cells they are in — the situation the p% and (n,k) rules are for;
* holdings (enterprise groups of 2–6 members, mostly of one activity section) take most large
  enterprises (60 %), a third of the medium ones and few small (8 %) and micro (1 %) ones;
* a decimal sampling ``weight`` as for a stratified survey (1 for large enterprises, larger for
  small ones) for the weighted rules; the register itself is a census.

At 10,000 enterprises (seed 7) about 390 of the 864 inner cells of activity group × district ×
size class have contributors, and about 60 % of those more than five; the medium and large cells
are sparse, as they are in real registers. Everything follows from the seed; the same seed and size give the
same register.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from tabsafe.errors import InputError, param
from tabsafe.model.hierarchy import Hierarchy

__all__ = ["BUSINESS_ENTRIES", "business_hierarchies", "generate_business", "synth_business"]

SECTIONS = ("A", "B", "C", "D")
DIVISIONS_PER_SECTION = 3
GROUPS_PER_DIVISION = 2
REGIONS = ("N", "S", "W")
#: the regions' shares of enterprises (big regions first)
REGION_SHARE = (0.5, 0.3, 0.2)
DISTRICTS_PER_REGION = 3
SIZE_CLASSES = ("micro", "small", "medium", "large")
#: business demography: about 90 % micro enterprises, a few large ones in a thousand
SIZE_SHARE = (0.90, 0.08, 0.016, 0.004)
#: persons employed per size class: the lower end (inclusive) and the class's width (large: open)
EMPLOYEES = ((0, 9), (10, 49), (50, 249), (250, None))
#: median turnover per person employed (thousands) by size class: larger enterprises are more productive
TURNOVER_PER_PERSON = (60.0, 90.0, 130.0, 180.0)
#: share of each size class's enterprises that belong to a holding
HOLDING_SHARE = (0.01, 0.08, 0.33, 0.60)
#: per size class, the power of the activity and district shares its enterprises are drawn from
#: (above 1: concentrated in the big activities and regions)
CONCENTRATION = (1.0, 1.5, 2.5, 3.0)
#: sampling weights of a stratified survey by size class (large enterprises: a census stratum)
WEIGHTS = (6.0, 3.0, 1.5, 1.0)

#: What ``synth_business`` writes in its folder.
BUSINESS_ENTRIES = ("enterprises.parquet", "meta.yaml", "hierarchies")


def business_hierarchies() -> dict[str, Hierarchy]:
    """The activity and region hierarchies, keyed by variable."""
    activity = {s: {f"{s}{d}": [f"{s}{d}{g}" for g in range(1, GROUPS_PER_DIVISION + 1)]
                    for d in range(1, DIVISIONS_PER_SECTION + 1)} for s in SECTIONS}
    region = {r: [f"{r}{k}" for k in range(1, DISTRICTS_PER_REGION + 1)] for r in REGIONS}
    return {"activity": Hierarchy.from_tree(activity, source="activity.hrc"),
            "region": Hierarchy.from_tree(region, source="region.hrc")}


def generate_business(n: int, seed: int) -> pd.DataFrame:
    """``n`` enterprises: ``enterprise``, ``holding`` (empty when none), ``activity`` (a group),
    ``region`` (a district), ``size``, ``employees``, ``turnover`` (thousands, two decimals),
    ``weight`` (module docstring)."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise InputError(f"{param('business')} must be a positive number of enterprises; got {n!r}")
    rng = np.random.default_rng(seed)
    h = business_hierarchies()
    groups = np.array(h["activity"].leaves)
    districts = np.array(h["region"].leaves)
    act_w = _shares(rng.gamma(1.0, size=groups.size))
    dist_w = _district_shares(rng)
    size = rng.choice(len(SIZE_CLASSES), n, p=SIZE_SHARE)
    act = np.empty(n, dtype=np.int64)
    dist = np.empty(n, dtype=np.int64)
    for k, sharp in enumerate(CONCENTRATION):
        # larger enterprises concentrate more in the big activities and regions
        members = size == k
        act[members] = rng.choice(groups.size, int(members.sum()), p=_shares(act_w ** sharp))
        dist[members] = rng.choice(districts.size, int(members.sum()), p=_shares(dist_w ** sharp))
    employees = _employees(rng, size)
    # turnover per person lognormal around its class's median (heavy tail within each class)
    per_person = np.array(TURNOVER_PER_PERSON)[size] * rng.lognormal(0.0, 0.8, n)
    turnover = np.round(np.maximum(employees, 1) * per_person, 2)
    holding = _holdings(rng, act, groups, size)
    weight = np.round(np.array(WEIGHTS)[size] * rng.uniform(0.8, 1.2, n), 3)
    weight[size == len(SIZE_CLASSES) - 1] = 1.0
    return pd.DataFrame({
        "enterprise": [f"E{i + 1:06d}" for i in range(n)],
        "holding": holding,
        "activity": groups[act],
        "region": districts[dist],
        "size": np.array(SIZE_CLASSES)[size],
        "employees": employees,
        "turnover": turnover,
        "weight": weight,
    })


def _shares(w: np.ndarray) -> np.ndarray:
    return w / w.sum()


def _district_shares(rng: np.random.Generator) -> np.ndarray:
    """Districts' shares: the region's share split among its districts, the first district of
    the first region (the capital) three times its draw."""
    out = []
    for k, share in enumerate(REGION_SHARE):
        w = rng.gamma(1.5, size=DISTRICTS_PER_REGION)
        if k == 0:
            w[0] *= 3.0
        out.append(share * w / w.sum())
    return np.concatenate(out)


def _employees(rng: np.random.Generator, size: np.ndarray) -> np.ndarray:
    """Persons employed within each size class, skewed to the class's lower end; the large class
    a Pareto tail above 250 (a few enterprises of several thousand)."""
    u = rng.random(size.size)
    lo = np.array([e[0] for e in EMPLOYEES])[size]
    width = np.array([(e[1] - e[0] + 1) if e[1] is not None else 0 for e in EMPLOYEES])[size]
    out = np.floor(lo + width * u ** 2).astype(np.int64)
    large = size == len(SIZE_CLASSES) - 1
    out[large] = np.minimum(250 * (1.0 + rng.pareto(1.2, int(large.sum()))), 200_000).astype(np.int64)
    return out


def _holdings(rng: np.random.Generator, act: np.ndarray, groups: np.ndarray, size: np.ndarray) -> np.ndarray:
    """Holdings of 2–6 members: an enterprise joins one with its size class's probability
    (:data:`HOLDING_SHARE`); members are grouped within their activity section, in random order."""
    n = act.size
    holding = np.full(n, "", dtype=object)
    joins = rng.random(n) < np.array(HOLDING_SHARE)[size]
    section = np.array([g[0] for g in groups])[act]
    k = 0
    for sec in SECTIONS:
        pool = rng.permutation(np.flatnonzero(joins & (section == sec)))
        start = 0
        while pool.size - start >= 2:
            m = int(min(rng.integers(2, 7), pool.size - start))
            if pool.size - start - m == 1:  # no holding of one: the last member joins this one
                m += 1
            k += 1
            holding[pool[start:start + m]] = f"H{k:05d}"
            start += m
    return holding


def synth_business(n: int, seed: int, out: str | os.PathLike[str]) -> Path:
    """Write ``enterprises.parquet``, ``meta.yaml`` and ``hierarchies/`` (``activity.hrc``,
    ``region.hrc``) to ``out`` (a new or empty folder, or one holding an earlier register)."""
    from tabsafe.io import OutputFolder

    folder = OutputFolder(out, BUSINESS_ENTRIES)
    frame = generate_business(n, seed)
    with folder as tmp:
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), tmp / "enterprises.parquet")
        # the records stand for confidential microdata: private, like the census's persons
        (tmp / "enterprises.parquet").chmod(0o600)
        (tmp / "hierarchies").mkdir()
        for var, h in business_hierarchies().items():
            (tmp / "hierarchies" / f"{var}.hrc").write_text(h.to_hrc(), encoding="utf-8")
        meta = {
            "description": f"synthetic business register, {n} enterprises, seed {seed}",
            "variables": {"size": {"codes": list(SIZE_CLASSES)}},
            "hierarchies": {"activity": "hierarchies/activity.hrc", "region": "hierarchies/region.hrc"},
        }
        (tmp / "meta.yaml").write_text(yaml.safe_dump(meta, sort_keys=False), encoding="utf-8")
    return Path(out)
