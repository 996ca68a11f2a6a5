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
values (a magnitude such as income is non-negative; a negative one counts by its size), in the
prepared fixed point, so that totals are exact and a kept cube gives the same as the records.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tabsafe.service.prepared import SPLIT
from tabsafe.service.query import Resolved


def _top2(idx: np.ndarray, a: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """The largest and second largest of ``a`` (non-negative) per bin of ``idx`` (0 where there
    are fewer): the two largest of the bin's multiset, a tie counted twice."""
    top1 = np.zeros(width, dtype=a.dtype)
    np.maximum.at(top1, idx, a)
    first = (a == top1[idx]) & (a > 0)
    ties = np.bincount(idx, weights=first, minlength=width)
    top2 = np.zeros(width, dtype=a.dtype)
    np.maximum.at(top2, idx, np.where(first, 0, a))
    return top1, np.where(ties >= 2, top1, top2)


def abs_fixed(data: Any, numeric: str, sel: Any) -> np.ndarray:
    """The selected records' contributions: the size of each one's value in fixed point (an
    ``int64`` count of 10**-digits units; a missing value contributes 0). Integers, so that
    totals are exact whatever order they are added in, and a total kept per cell of a cube is
    the same as one counted from the records (:mod:`tabsafe.service.counting`)."""
    lo, hi = data.fixed[numeric]
    return np.abs(np.rint(hi[sel]).astype(np.int64) * (1 << SPLIT) + np.rint(lo[sel]).astype(np.int64))


def unit_contributions(idx: np.ndarray, a: np.ndarray, width: int) -> dict[str, np.ndarray]:
    """Per bin of ``idx``: the two largest contributions of ``a`` (``abs_fixed``) and their exact
    total (``int64``; summed as two float parts split at 2**SPLIT, each partial sum exact)."""
    top1, top2 = _top2(idx, a, width)
    hi = np.bincount(idx, weights=a >> SPLIT, minlength=width)
    lo = np.bincount(idx, weights=a & ((1 << SPLIT) - 1), minlength=width)
    total = np.rint(hi).astype(np.int64) * (1 << SPLIT) + np.rint(lo).astype(np.int64)
    return {"top1": top1, "top2": top2, "total": total}


def in_units(data: Any, numeric: str, cube: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Fixed-point contributions (``int64``) in the variable's units (floats)."""
    scale = 10 ** data.numeric[numeric].digits
    return {k: v / scale for k, v in cube.items()}


def contributions(data: Any, r: Resolved) -> dict[str, np.ndarray]:
    """Per cell of the query's display grid (margins included, the grid's order): the largest
    and second largest contribution and the total of the contributions' sizes, counted from the
    query's records (the kept cubes of :mod:`tabsafe.service.counting` give the same)."""
    sizes = [len(d.base) for d in r.dims]
    n = int(np.prod(sizes))
    strides = [int(np.prod(sizes[i + 1:])) for i in range(len(sizes))]
    scaled = [np.where(d.lut >= 0, d.lut * s, n).astype(np.intp) for d, s in zip(r.dims, strides)]
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
        a_parts.append(abs_fixed(data, r.numeric, sel))  # type: ignore[arg-type]
    idx = np.concatenate(idx_parts) if idx_parts else np.zeros(0, np.intp)
    a = np.concatenate(a_parts) if a_parts else np.zeros(0, np.int64)
    cube = {k: v[:n].reshape(sizes) for k, v in unit_contributions(idx, a, n + 1).items()}
    for axis, d in enumerate(r.dims):
        cube = to_display(cube, axis, d.targets, len(d.display))
    return in_units(data, r.numeric, {k: v.ravel() for k, v in cube.items()})  # type: ignore[arg-type]


def top2_over(cube: dict[str, np.ndarray], axes: tuple[int, ...]) -> dict[str, np.ndarray]:
    """Contributions of a cube with ``axes`` added up: totals summed, the two largest of the
    merged cells' two largest kept (the two largest of a union are among the parts' two)."""
    if not axes:
        return cube
    keep = [i for i in range(cube["total"].ndim) if i not in axes]
    shape = [cube["total"].shape[i] for i in keep]
    flat = {k: np.transpose(v, keep + list(axes)).reshape(*shape, -1) for k, v in cube.items()}
    both = np.sort(np.concatenate([flat["top1"], flat["top2"]], axis=-1), axis=-1)
    return {"top1": both[..., -1], "top2": both[..., -2], "total": flat["total"].sum(axis=-1)}


def to_display(cube: dict[str, np.ndarray], axis: int, targets: Any, n_display: int) -> dict[str, np.ndarray]:
    """Units of one axis to its display categories (``targets[u]``: the display positions unit
    ``u`` adds to): totals add up, the two largest of the units a category takes are its two
    largest."""
    members: list[list[int]] = [[] for _ in range(n_display)]
    for unit, ts in enumerate(targets):
        for t in ts:
            members[t].append(unit)
    out: dict[str, list[np.ndarray]] = {k: [] for k in cube}
    for units in members:
        if not units:
            shape = list(cube["total"].shape)
            shape[axis] = 1
            for k in out:
                out[k].append(np.zeros(shape, dtype=cube[k].dtype))
            continue
        take = {k: np.take(v, units, axis=axis) for k, v in cube.items()}
        out["total"].append(take["total"].sum(axis=axis, keepdims=True))
        both = np.sort(np.concatenate([take["top1"], take["top2"]], axis=axis), axis=axis)
        last = both.shape[axis]
        out["top1"].append(np.take(both, [last - 1], axis=axis))
        out["top2"].append(np.take(both, [last - 2], axis=axis))
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


__all__ = ["abs_fixed", "contributions", "in_units", "to_display", "top2_over", "unit_contributions", "withheld",
           "withhold"]
