"""The release audit of a perturbed release (issue #31): what an intruder holding every table
learns about each cell by combining the copies the tables publish of it.

A cell several tables hold is published once per table. Protected table by table, a noisy
method publishes independent copies of it, and the copies and the tables' additive relations
(:mod:`tabsafe.model.release_cells`) say more than any one table (seed 002 §5: averaging repeated
noisy answers removes the noise, after Dinur and Nissim). Three intruders, on the published
values only:

* **averaging** — each cell's mean over its copies;
* **least squares** — the values nearest to every copy (least squares) that satisfy every
  relation of the release: the copies of a cell and of the cells that add up to it;
* **LP** — an intruder who takes every perturbed value to lie within ``noise`` of the truth
  (the method's stated noise, :func:`noise_bound`) and asks, over all tables at once, which
  values each cell can have (:func:`tabsafe.release.audit.audit_release`'s interval
  programs): a cell whose interval holds one value is recovered exactly.

The publisher, who knows the originals, compares: of the true 1s and 2s the tables share, how
many each intruder recovers exactly, beside how many one table alone gives away and beside the
method's own statement of its differencing risk (seed 001 §4;
:func:`tabsafe.evaluate.distribution.differencing_risk`). A release protected as one (every
shared cell one value, :func:`tabsafe.release.protect_release`) gives the intruders nothing the
first table does not.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from tabsafe.errors import InputError
from tabsafe.model.release_cells import ReleaseCells

__all__ = ["PerturbedAudit", "audit_perturbed", "least_squares", "noise_bound"]

#: the weight of the relations against the copies in the least-squares intruder's program
RELATION_WEIGHT = 1e3


@dataclass(frozen=True, eq=False)
class PerturbedAudit:
    """What the intruders of the module docstring make of a perturbed release.

    Attributes:
        cells: the release's cells.
        copies: per release cell, how many tables publish it.
        differ: per release cell, whether the tables publish it with different values.
        first: per release cell, the value the first table holding it publishes.
        mean: per release cell, the mean of its published copies (the averaging intruder).
        least_squares: per release cell, the least-squares intruder's estimate.
        lp_lower, lp_upper: the LP intruder's interval (NaN where not audited).
        noise: the noise bound the LP intruder assumed (None: no LP intruder).
        stated: the method's stated differencing risk ``P(difference shows n) `` for n = 1, 2.
    """

    cells: ReleaseCells
    copies: np.ndarray
    differ: np.ndarray
    first: np.ndarray
    mean: np.ndarray
    least_squares: np.ndarray
    lp_lower: np.ndarray
    lp_upper: np.ndarray
    noise: int | None
    stated: dict[int, float]

    def recovered(self, original: np.ndarray, *, values: Sequence[int] = (1, 2), shared: bool = True) -> dict[str, Any]:
        """Of the cells whose true count is in ``values`` (held by several tables when
        ``shared``), how many each intruder recovers exactly (private: needs the originals)."""
        original = np.asarray(original, dtype=np.float64)
        mask = np.isin(original, list(values)) & ((self.copies > 1) if shared else True)
        n = int(mask.sum())

        def share(hit: np.ndarray) -> float:
            return round(int((hit & mask).sum()) / n, 4) if n else 0.0

        pinned = (self.lp_upper - self.lp_lower < 0.5) & (np.rint(self.lp_lower) == original)
        return {
            "cells": n,
            "one_table": share(self.first == original),
            "averaging": share(np.rint(self.mean) == original),
            "least_squares": share(np.rint(self.least_squares) == original),
            "lp": share(pinned) if self.noise is not None else None,
            "stated_differencing_risk": {str(k): round(v, 4) for k, v in self.stated.items()},
        }

    def summary(self) -> dict[str, Any]:
        """Figures safe to publish: how many shared cells the tables publish differently."""
        return {"tables": len(self.cells.names), "cells": self.cells.n_cells,
                "shared_cells": int((self.copies > 1).sum()), "published_differently": int(self.differ.sum()),
                "noise_bound": self.noise}


def _copies(cells: ReleaseCells, published: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every published copy: its release cell, value and table."""
    cell = np.concatenate(list(cells.cells))
    value = np.concatenate([np.asarray(v, dtype=np.float64) for v in published])
    table = np.concatenate([np.full(rows.size, i) for i, rows in enumerate(cells.cells)])
    return cell, value, table


def least_squares(cells: ReleaseCells, published: Sequence[np.ndarray]) -> np.ndarray:
    """The values nearest (least squares) to every published copy that satisfy every relation
    of the release (weighted ``RELATION_WEIGHT``): the intruder who combines the copies through
    the tables' additive relations."""
    from scipy.sparse.linalg import lsqr

    cell, value, _ = _copies(cells, published)
    B = sp.csr_matrix((np.ones(cell.size), (np.arange(cell.size), cell)), shape=(cell.size, cells.n_cells))
    A = sp.csr_matrix(cells.relations, dtype=np.float64)
    stacked = sp.vstack([B, RELATION_WEIGHT * A]).tocsr()
    rhs = np.concatenate([value, np.zeros(A.shape[0])])
    start = np.zeros(cells.n_cells)
    np.add.at(start, cell, value)
    start /= np.maximum(np.bincount(cell, minlength=cells.n_cells), 1)
    x = lsqr(stacked, rhs - stacked @ start, atol=1e-10, btol=1e-10, iter_lim=20_000)[0]
    return start + x


def noise_bound(method: Any, *, coverage: float = 0.999, up_to: int = 30) -> int | None:
    """The noise an intruder may take every perturbed cell to be within: the least ``d`` with
    ``P(|published − n| ≤ d) ≥ coverage`` for every true ``n`` in ``1..up_to``, from the
    method's stated ``published_distribution`` (None without one)."""
    dist = getattr(method, "published_distribution", None)
    if dist is None:
        return None
    worst = 0
    for n in range(1, up_to + 1):
        d = dist(n)
        if d is None:
            return None
        dev = sorted((abs(k - n), p) for k, p in d.items())
        cum = 0.0
        for a, p in dev:
            cum += p
            if cum >= coverage - 1e-12:
                worst = max(worst, a)
                break
    return worst


def audit_perturbed(cells: ReleaseCells, published: Sequence[np.ndarray], *, method: Any = None,
                    noise: int | None = None, bounded: Sequence[np.ndarray] | None = None,
                    targets: np.ndarray | None = None, lp: bool = True) -> PerturbedAudit:
    """The intruders of the module docstring on the published values of a release.

    Args:
        cells: the release's cells.
        published: per table, its published counts (aligned with ``cells.tables``).
        method: the method (its stated noise and differencing risk), if known.
        noise: the LP intruder's noise bound (default :func:`noise_bound` of ``method``; no LP
            intruder without either).
        bounded: per table, which published values are perturbed within ``noise`` (default all;
            for methods whose margins are sums of perturbed inner cells, the inner cells).
        targets: the cells the LP intruder audits (default: the shared cells whose mean copy is
            at most ``2 + noise``: the small ones; two programs per cell).
        lp: run the LP intruder (its programs are the audit's cost).
    """
    from tabsafe.release.audit import audit_release

    cell, value, _ = _copies(cells, published)
    n = cells.n_cells
    copies = np.bincount(cell, minlength=n)
    mean = np.bincount(cell, weights=value, minlength=n) / np.maximum(copies, 1)
    lo_seen = np.full(n, np.inf)
    hi_seen = np.full(n, -np.inf)
    np.minimum.at(lo_seen, cell, value)
    np.maximum.at(hi_seen, cell, value)
    differ = (copies > 1) & (hi_seen > lo_seen)
    t, g = cells.first
    first = np.array([np.asarray(published[int(i)], dtype=np.float64)[int(j)] for i, j in zip(t, g)])
    ls = least_squares(cells, published)
    if noise is None and method is not None and lp:
        noise = noise_bound(method)
    if not lp:
        noise = None
    lp_lo = np.full(n, np.nan)
    lp_hi = np.full(n, np.nan)
    if noise is not None:
        lo = np.zeros(n)
        hi = np.full(n, math.inf)
        for i, (v, rows) in enumerate(zip(published, cells.cells)):
            v = np.asarray(v, dtype=np.float64)
            mask = np.ones(v.size, dtype=bool) if bounded is None else np.asarray(bounded[i], dtype=bool)
            np.maximum.at(lo, rows[mask], np.maximum(v[mask] - noise, 0))
            np.minimum.at(hi, rows[mask], v[mask] + noise)
        hi = np.maximum(hi, lo)  # copies that contradict the bound: the intruder keeps the tightest
        want = (copies > 1) & (mean <= 2 + noise) if targets is None else np.asarray(targets, dtype=bool)
        try:
            audit = audit_release(cells, lo, hi, required=1.0, targets=want)
        except InputError:  # copies beyond the stated noise: no value fits them all
            noise = None
        else:
            lp_lo, lp_hi = audit.interval_lower.copy(), audit.interval_upper.copy()
            pinned = want & (hi - lo < 0.5)  # the bounds alone pin these: no program was needed
            lp_lo[pinned], lp_hi[pinned] = lo[pinned], hi[pinned]
    stated: dict[int, float] = {}
    if method is not None and getattr(method, "published_distribution", None) is not None:
        from tabsafe.evaluate.distribution import differencing_risk

        try:
            stated = {k: differencing_risk(method, k) for k in (1, 2)}
        except Exception:  # noqa: BLE001 - a method whose mode publishes jointly states none
            stated = {}
    return PerturbedAudit(cells, copies, differ, first, mean, ls, lp_lo, lp_hi, noise, stated)
