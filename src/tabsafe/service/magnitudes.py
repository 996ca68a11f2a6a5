"""Sums and means of the table builder: which cells may show one (seed 000 §5.7, seed 003).

The cell key method perturbs a cell's sum from its cell key with its own magnitude p-table and
flex scaling (``ckm``'s ``mag_*``, ``flex_point``, ``p_small``, ``p_large``; R cellKey's and
tau-ARGUS's design) and publishes the mean as perturbed sum over perturbed count (000 §5.7,
Tables 5.23/5.24). Noise alone does not hide a cell of one or two contributors: the magnitude
p-table leaves a value unchanged with its probability of no change, so a one-person cell's sum
was its person's income to the cent about a third of the time. A cell's sum and mean are
therefore published only when

* its *published* count is at least ``magnitudes.min_count`` (never a sum beside a count of 0 or
  of a few persons: the count the user sees says how few contribute);
* it passes the (n, k) dominance rule: its ``n`` largest contributions make at most ``k`` % of
  its total (seed 003's relative dominance, rules 2a/2b, on values instead of counts);
* it passes the p% rule: the total less its two largest contributions is at least ``p`` % of the
  largest (the second largest contributor cannot estimate the largest within ``p`` %).

Otherwise both are null; the count is published as usual. Contributions are taken as absolute
values (a magnitude such as income is non-negative; a negative one counts by its size).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tabsafe.service.query import Resolved


def _top2(idx: np.ndarray, a: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """The largest and second largest of ``a`` per bin of ``idx`` (0 where there are fewer)."""
    top1 = np.zeros(width)
    np.maximum.at(top1, idx, a)
    first = (a == top1[idx]) & (a > 0)
    ties = np.bincount(idx, weights=first, minlength=width)
    top2 = np.zeros(width)
    np.maximum.at(top2, idx, np.where(first, 0.0, a))
    return top1, np.where(ties >= 2, top1, top2)


def contributions(data: Any, r: Resolved) -> dict[str, np.ndarray]:
    """Per cell of the query's display grid (margins included, the grid's order): the largest
    and second largest contribution and the total of the contributions' sizes."""
    sizes = [len(d.base) for d in r.dims]
    n = int(np.prod(sizes))
    strides = [int(np.prod(sizes[i + 1:])) for i in range(len(sizes))]
    scaled = [np.where(d.lut >= 0, d.lut * s, n).astype(np.intp) for d, s in zip(r.dims, strides)]
    values = data.values[r.numeric]
    idx_parts, a_parts = [], []
    for s, e in r.ranges:
        sel = slice(s, e)
        idx = scaled[0][data.codes[r.dims[0].variable.name][sel]]
        for lut, d in zip(scaled[1:], r.dims[1:]):
            idx = idx + lut[data.codes[d.variable.name][sel]]
        np.minimum(idx, n, out=idx)
        if r.mask is not None:
            idx[~r.mask(sel)] = n
        idx_parts.append(idx)
        a_parts.append(np.abs(np.nan_to_num(np.asarray(values[sel], dtype=float))))
    idx = np.concatenate(idx_parts) if idx_parts else np.zeros(0, np.intp)
    a = np.concatenate(a_parts) if a_parts else np.zeros(0)
    top1, top2 = _top2(idx, a, n + 1)
    total = np.bincount(idx, weights=a, minlength=n + 1)
    cube = {"top1": top1[:n].reshape(sizes), "top2": top2[:n].reshape(sizes), "total": total[:n].reshape(sizes)}
    for axis, d in enumerate(r.dims):
        cube = _to_display(cube, axis, d)
    return {k: v.ravel() for k, v in cube.items()}


def _to_display(cube: dict[str, np.ndarray], axis: int, d: Any) -> dict[str, np.ndarray]:
    """Units of one axis to its display categories: totals add up, the two largest of the units
    a category takes are its two largest."""
    members: list[list[int]] = [[] for _ in range(len(d.display))]
    for unit, targets in enumerate(d.targets):
        for t in targets:
            members[t].append(unit)
    out = {k: [] for k in cube}
    for units in members:
        if not units:
            shape = list(cube["total"].shape)
            shape[axis] = 1
            for k in out:
                out[k].append(np.zeros(shape))
            continue
        take = {k: np.take(v, units, axis=axis) for k, v in cube.items()}
        out["total"].append(take["total"].sum(axis=axis, keepdims=True))
        both = np.sort(np.concatenate([take["top1"], take["top2"]], axis=axis), axis=axis)
        last = both.shape[axis]
        out["top1"].append(np.take(both, [last - 1], axis=axis))
        out["top2"].append(np.take(both, [last - 2], axis=axis) if last >= 2 else np.zeros_like(out["top1"][-1]))
    return {k: np.concatenate(v, axis=axis) for k, v in out.items()}


def withheld(published_count: np.ndarray, contrib: dict[str, np.ndarray], rules: Any) -> np.ndarray:
    """The cells whose sum and mean are not published (module docstring)."""
    top1, top2, total = contrib["top1"], contrib["top2"], contrib["total"]
    few = published_count < rules.min_count
    largest = top1 + (top2 if rules.dominance_n == 2 else 0.0)
    dominated = largest > rules.dominance_k / 100.0 * total
    p_rule = (total - top1 - top2) < rules.p_percent / 100.0 * top1
    return few | ((total > 0) & (dominated | p_rule))


def withhold(payload: dict[str, Any], numeric: str, mask: np.ndarray) -> int:
    """Null the sum and mean of the masked cells in a release payload (rows in grid order);
    returns how many cells lost them."""
    cols = [i for i, c in enumerate(payload["columns"]) if c in (f"sum_{numeric}", f"mean_{numeric}")]
    rows = payload["rows"]
    hidden = 0
    for i in np.flatnonzero(mask).tolist():
        row = list(rows[i])
        if any(row[c] is not None for c in cols):
            hidden += 1
        for c in cols:
            row[c] = None
        rows[i] = tuple(row)
    return hidden


__all__ = ["contributions", "withheld", "withhold"]
