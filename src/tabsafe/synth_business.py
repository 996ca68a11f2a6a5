"""A synthetic business register: enterprises by activity, region and size class, with holdings.

For magnitude tables (issue #29): activity is a three-level hierarchy (sections, divisions,
groups, like NACE), region a two-level one (regions, districts), size class flat (by employees).
Turnover is heavy-tailed and grows with size, so a few large enterprises dominate many cells —
the situation the p% and (n,k) rules are for. About a fifth of the enterprises belong to holdings
(enterprise groups of 2–6), most of whose members share the holding's activity section. A decimal
sampling weight (``weight``, as for a stratified survey: 1 for large enterprises, larger for
small ones) is included for the weighted rules; the register itself is a census (weights unused
unless asked for).

Everything follows from the seed; the same seed and size give the same register.
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
DISTRICTS_PER_REGION = 3
SIZE_CLASSES = ("micro", "small", "medium", "large")
SIZE_SHARE = (0.70, 0.20, 0.08, 0.02)
#: employees ranges per size class (inclusive)
EMPLOYEES = ((1, 9), (10, 49), (50, 249), (250, 5000))

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
    ``weight``."""
    if not isinstance(n, int) or n < 1:
        raise InputError(f"{param('business')} must be a positive number of enterprises; got {n!r}")
    rng = np.random.default_rng(seed)
    h = business_hierarchies()
    groups = np.array(h["activity"].leaves)
    districts = np.array(h["region"].leaves)
    # skewed activity and district shares: a few big industries and a capital district
    act_w = rng.gamma(0.8, size=groups.size)
    dist_w = rng.gamma(1.2, size=districts.size)
    dist_w[0] *= 3.0
    act = rng.choice(groups.size, n, p=act_w / act_w.sum())
    dist = rng.choice(districts.size, n, p=dist_w / dist_w.sum())
    size = rng.choice(len(SIZE_CLASSES), n, p=SIZE_SHARE)
    lo = np.array([e[0] for e in EMPLOYEES])[size]
    hi = np.array([e[1] for e in EMPLOYEES])[size]
    employees = np.floor(lo + (hi - lo + 1) * rng.random(n) ** 2).astype(np.int64)
    # turnover per employee lognormal (heavy tail), so a large enterprise can dominate a cell
    turnover = np.round(employees * rng.lognormal(4.0, 0.9, n), 2)
    holding = _holdings(rng, act, groups)
    weight = np.round(np.array([6.0, 3.0, 1.5, 1.0])[size] * rng.uniform(0.8, 1.2, n), 3)
    weight[size == 3] = 1.0
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


def _holdings(rng: np.random.Generator, act: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """About a fifth of the enterprises in holdings of 2–6 members; a holding's members are
    drawn mostly from one activity section."""
    n = act.size
    holding = np.full(n, "", dtype=object)
    free = np.ones(n, dtype=bool)
    section = np.array([g[0] for g in groups])[act]
    target = n // 5
    k = 0
    while target > 0:
        sec = SECTIONS[int(rng.integers(len(SECTIONS)))]
        pool = np.flatnonzero(free & (section == sec))
        if pool.size < 2:
            pool = np.flatnonzero(free)
            if pool.size < 2:
                break
        m = int(min(rng.integers(2, 7), pool.size, target + 1))
        members = rng.choice(pool, m, replace=False)
        k += 1
        holding[members] = f"H{k:05d}"
        free[members] = False
        target -= m
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
