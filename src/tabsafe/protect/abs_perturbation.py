"""The ABS cell perturbation with parameter x: method ``abs-perturbation`` of the registry
(seed 001 §4 and §8; METHODS.md §3).

For each non-zero inner cell ``n`` the paper draws ``n`` deviations, one per record, iid with
``P(d=0) = p``, ``P(d=−1) = (2/3)(1−p)``, ``P(d=+2) = (1/3)(1−p)``, where ``p = 0`` if
``n ≤ x`` and ``p = 1 − x/n`` otherwise, and publishes ``n* = n + Σ d``. Zeros stay zero ("structural
zeros are maintained"); margins are sums of the perturbed inner cells (additive). Each ``d`` has
mean 0 and variance ``2(1−p)``, so ``E n* = n`` and ``Var n* = 2n(1−p) = 2·min(n, x)``.

Only the sum matters, and it has a closed form: the number ``K`` of non-zero deviations is
``Binomial(n, 1−p)`` and the number of them that are +2 is ``Binomial(K, 1/3)``, so
``Σ d = 3·K₊ − K``. Both forms below draw exactly that distribution.

``consistent = false`` (§4): every run draws afresh from the seed, so the same cell is perturbed
differently in two tables.

``consistent = true`` (§8, "improving consistency by assigning random numbers or record keys"):
the draws are a deterministic function of the records in the cell, so the same set of records is
perturbed the same way in every table and every run. The paper's first variant gives each record
a permanent random number ``u`` and sets its ``d`` from ``u`` and the cell's ``p``. A table cell,
however, holds its count and the exact sum of its records' keys (the cell key of METHODS.md §2), not
the records themselves: the per-record form would need a second pass over the microdata per cell
with the cell's ``p``, and — worse — it defeats the differencing protection §4 was built for.
Two nested cells of ``n`` and ``n − 1`` records share ``n − 1`` permanent numbers and have almost
the same ``p``, so their shared records get almost the same deviations and the difference of
the two published cells is essentially ``1 + d`` of the one extra record: with ``x = 2`` and
``n = 1000`` it shows the true difference 1 almost every time (``bench/abs_differencing.py``
measures it), where the paper's table promises 0.15. tabsafe therefore uses the paper's second
variant: "any aggregate of n records will correspond to a unique […] aggregate key […] the key of
the aggregate can be used to seed a pseudo-random number". The aggregate key is the exact cell key
integer ``(Σ round(rk·10^digits)) mod 10^digits`` (order-free like the paper's XOR, and the key the
cell key method already computes); it seeds the splitmix64 generator, whose first two outputs are
the uniforms that draw ``K`` and ``K₊`` by inverse CDF. The distribution of ``n*`` is the paper's;
the same records give the same ``n*`` in every table; different sets of records (e.g. the nested
cells above) get independent perturbations, as §4's differencing analysis assumes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from tabsafe.capabilities import Capabilities
from tabsafe.errors import InputError, param
from tabsafe.method import Examples, Needs, Outcome, TableMethod
from tabsafe.model.spec import DEFAULT_KEY_DIGITS, KeySpec
from tabsafe.params import Bool, Int, Real, Text, parameter
from tabsafe.model.margins import totals_from_inner

if TYPE_CHECKING:  # pragma: no cover
    from tabsafe.model.result import Protection, Report
    from tabsafe.model.table import Table
    from tabsafe.model.release_cells import ReleaseCells

__all__ = ["AbsPerturbation", "abs_deviations", "abs_deviations_from_keys", "abs_deviations_from_uniforms", "key_uniforms"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix64(z: np.ndarray) -> np.ndarray:
    """The splitmix64 output function (Steele, Lea & Flood 2014) on uint64 arrays (wrapping)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def key_uniforms(cell_keys: np.ndarray, k: int) -> np.ndarray:
    """The first ``k`` outputs of splitmix64 seeded with each cell key integer, as uniforms in
    the open interval (0, 1): an array of shape ``(k, len(cell_keys))``. The same key always gives
    the same numbers (001 §8: the aggregate key seeds a pseudo-random number generator).

    >>> u = key_uniforms(np.array([12345, 12345, 7]), 2)
    >>> bool(u[0, 0] == u[0, 1]), bool(u[0, 0] != u[0, 2]), bool(((u > 0) & (u < 1)).all())
    (True, True, True)
    """
    state = np.asarray(cell_keys).astype(np.uint64)
    out = np.empty((k, state.size), dtype=np.float64)
    with np.errstate(over="ignore"):
        for i in range(k):
            state = state + _GOLDEN
            bits = _mix64(state) >> np.uint64(11)
            out[i] = (bits.astype(np.float64) + 0.5) * 2.0**-53
    return out


def _nonzero_share(counts: np.ndarray, x: float) -> np.ndarray:
    """``1 − p``: the probability that one record's deviation is not zero (1 for ``n ≤ x``)."""
    n = np.maximum(counts, 1).astype(np.float64)
    return np.where(counts <= x, 1.0, x / n)


def _binomial_pmf(n: int, q: float) -> np.ndarray:
    """``P(K = k)`` for ``K ~ Binomial(n, q)``, ``k = 0..n`` (log-gamma form: no overflow for
    large ``n``)."""
    k = np.arange(n + 1)
    if q >= 1.0:
        return (k == n).astype(float)
    if q <= 0.0:
        return (k == 0).astype(float)
    lgamma = np.vectorize(math.lgamma, otypes=[float])
    log = lgamma(n + 1.0) - lgamma(k + 1.0) - lgamma(n - k + 1.0) + k * math.log(q) + (n - k) * math.log1p(-q)
    return np.exp(log)


def abs_deviations(counts: np.ndarray, x: float, rng: np.random.Generator) -> np.ndarray:
    """``Σ_j d_ij`` for inner cells of the given counts, drawn afresh (001 §4); 0 for zero cells.

    >>> abs_deviations(np.array([0, 5, 9]), 0.0, np.random.default_rng(1)).tolist()
    [0, 0, 0]
    """
    counts = np.asarray(counts, dtype=np.int64)
    n = np.maximum(counts, 0)
    nonzero = rng.binomial(n, _nonzero_share(n, x))
    plus = rng.binomial(nonzero, 1.0 / 3.0)
    return 3 * plus - nonzero


def binomial_ppf(u: np.ndarray, n: np.ndarray, q: np.ndarray) -> np.ndarray:
    """The inverse CDF of ``Binomial(n, q)`` at ``u`` (elementwise): the smallest ``k`` with
    ``P(K ≤ k) ≥ u``, by walking up the probabilities ``P(K = k+1) = P(K = k)·(n−k)/(k+1)·q/(1−q)``.
    The walk takes as many steps as the largest ``k`` returned (about ``x`` plus a few standard
    deviations here), so it costs no more than a draw; scipy's version would cost its import, a
    second of a command's run.

    >>> binomial_ppf(np.array([0.2, 0.5, 0.99]), np.array([4, 4, 4]), np.array([0.5, 0.5, 1.0])).tolist()
    [1, 2, 4]
    """
    u = np.asarray(u, dtype=np.float64)
    n = np.asarray(n, dtype=np.int64)
    q = np.broadcast_to(np.asarray(q, dtype=np.float64), u.shape)
    k = np.zeros(u.shape, dtype=np.int64)
    certain = q >= 1.0
    ratio = np.where(certain | (q <= 0), 0.0, q / np.where(certain, 1.0, 1.0 - q))
    pmf = np.ones(u.shape)  # q = 0: K = 0 surely
    mid = ~certain & (q > 0)
    pmf[mid] = np.exp(n[mid] * np.log1p(-q[mid]))  # P(K = 0) = (1 − q)^n
    cdf = pmf.copy()
    active = ~certain & (u > cdf) & (k < n)
    idx = np.flatnonzero(active)
    while idx.size:
        kk = k[idx]
        pmf[idx] *= (n[idx] - kk) / (kk + 1) * ratio[idx]
        k[idx] = kk + 1
        cdf[idx] += pmf[idx]
        idx = idx[(u[idx] > cdf[idx]) & (k[idx] < n[idx])]
    return np.where(certain, n, k)


def abs_deviations_from_uniforms(counts: np.ndarray, x: float, u_nonzero: np.ndarray, u_plus: np.ndarray) -> np.ndarray:
    """``Σ_j d_ij`` by inverse CDF from two uniforms per cell: ``K = F⁻¹(u₁)`` of
    ``Binomial(n, 1−p)``, ``K₊ = F⁻¹(u₂)`` of ``Binomial(K, 1/3)``, ``Σ d = 3K₊ − K``."""
    counts = np.asarray(counts, dtype=np.int64)
    n = np.maximum(counts, 0)
    nonzero = binomial_ppf(u_nonzero, n, _nonzero_share(n, x))
    plus = binomial_ppf(u_plus, nonzero, np.full(n.shape, 1.0 / 3.0))
    return 3 * plus - nonzero


def abs_deviations_from_keys(counts: np.ndarray, cell_keys: np.ndarray, x: float) -> np.ndarray:
    """``Σ_j d_ij`` of the consistent form (001 §8): the cell key integer seeds the draws, so the
    same records always get the same deviation."""
    u = key_uniforms(cell_keys, 2)
    return abs_deviations_from_uniforms(counts, x, u[0], u[1])


@dataclass(frozen=True, kw_only=True)
class AbsPerturbation(TableMethod):
    """ABS cell perturbation: records of inner cells add 0, −1 or +2; totals from them (001 §4).

    Every record of a non-zero inner cell of count ``n`` adds a deviation: 0 with probability
    ``p``, −1 with ``2(1−p)/3``, +2 with ``(1−p)/3``, where ``p = 0`` for ``n ≤ x`` (cells up to
    ``x`` are perturbed with certainty) and ``1 − x/n`` above (``x`` deviations expected). Unbiased,
    variance ``2·min(n, x)``; a published 1 or 2 never comes from a true 1 or 2 when ``x ≥ 2``.
    Zeros stay zero; margins are sums of the perturbed inner cells (additive, not consistent
    between tables). With ``consistent`` the draws come from the cells' record keys (001 §8; the
    module docstring says how), so the same records are perturbed the same way in every table.

    Attributes:
        x: the number of non-zero deviations expected in a cell above x; cells up to x are always
            perturbed. 0 leaves the table as it is; the paper's candidate is 2.
        consistent: draw each cell's perturbation from its cell key (the sum of its records'
            keys) instead of the seed, so the same records get the same value in every table.
        key: the record-key column the cell keys are summed from (with consistent).
        key_digits: decimal digits of U[0,1) record keys (with consistent).
    """

    name: ClassVar[str] = "abs-perturbation"

    x: float = parameter(2.0, check=Real(min=0))
    consistent: bool = parameter(False, check=Bool())
    key: str = parameter("rkey", check=Text(identifier=True))
    key_digits: int = parameter(DEFAULT_KEY_DIGITS, check=Int(min=1, max=15))

    #: margins are sums of the perturbed inner cells
    declared: ClassVar[Capabilities] = Capabilities(random=True, additive=True, joint=True)

    def capabilities(self) -> Capabilities:
        """The seed matters only to the independent form; the consistent one draws each inner
        cell from its cell key. Not consistent across tables even then: a margin is the sum of
        the table's perturbed inner cells, so the same margin differs between tables with other
        inner cells (issue #31). A release protects its tables together (:meth:`protect_release`):
        the finest cells drawn once, margins included, the same value in every table."""
        return replace(super().capabilities(), random=not self.consistent)

    @property
    def key_spec(self) -> KeySpec:
        return KeySpec(column=self.key, digits=self.key_digits)

    def needs(self) -> Needs:
        if self.consistent:
            return Needs(key=self.key_spec, microdata=True)
        return Needs()

    @classmethod
    def examples(cls) -> Examples:
        return Examples(typical=(cls(), cls(x=5), cls(consistent=True)), identity=cls(x=0))

    def published_distribution(self, n: int) -> dict[int, float]:
        """``P(published | n)`` of an inner cell (the :class:`~tabsafe.method.CellDistribution`
        capability), exactly, from the closed form of the module docstring: ``K ~ Binomial(n, 1−p)``
        records deviate, ``K₊ ~ Binomial(K, 1/3)`` of them by +2, so ``n* = n + 3K₊ − K`` (001 §4,
        METHODS.md §3). The same for both forms (the consistent one draws its uniforms from cell
        keys). Zeros stay zero; margins are sums of the perturbed inner cells."""
        n = int(n)
        q = 0.0 if n == 0 else min(1.0, float(self.x) / n)  # 1 − p: the chance a record deviates
        if q == 0.0:
            return {n: 1.0}
        dist = np.zeros(3 * n + 1)  # index: the published value n + 3K₊ − K (0 to 3n)
        k_pmf = _binomial_pmf(n, q)
        for k in np.flatnonzero(k_pmf > 0):
            j = np.arange(k + 1)
            dist[n + 3 * j - k] += k_pmf[k] * _binomial_pmf(int(k), 1.0 / 3.0)
        return {int(i): float(dist[i]) for i in np.flatnonzero(dist > 0)}

    def protect_release(self, cells: ReleaseCells, *, seed: int | None = None) -> tuple[tuple[Protection, ...], Report]:
        """Protect the tables of a release together (issue #31): the finest cells of the release
        perturbed once, every table's cells their sums (:mod:`tabsafe.model.finest`): a shared
        cell has one value in every table, and every table is additive."""
        from tabsafe.model.finest import protect_finest

        return protect_finest(self, cells, seed=seed)

    def apply(self, table: Table, seed: int | None) -> Outcome:
        """Perturb the non-zero inner cells, then every aggregate as their sum."""
        counts = np.asarray(table.counts, dtype=np.int64)
        inner = np.flatnonzero(table.leaf_mask & (counts > 0))
        n = counts[inner]
        if self.consistent:
            digits = dict(table.meta.get("key", {}) or {}).get("digits")
            if not table.has("ckey_int") or digits != self.key_digits:
                raise InputError(f"the consistent form needs cell keys of {param('key_digits')} {self.key_digits} "
                                 f"digits summed from {param('key')} {self.key!r}: tabulate the microdata with them")
            dev = abs_deviations_from_keys(n, table.column("ckey_int")[inner], self.x)
        else:
            dev = abs_deviations(n, self.x, np.random.default_rng(seed))
        cells, released = totals_from_inner(table, table.ids[inner], n + dev)
        original = cells.counts
        changed = int(np.count_nonzero(dev))
        private: dict[str, Any] = {
            "inner_cells_drawn": int(inner.size),
            "inner_cells_changed": changed,
            "share_of_inner_cells_changed": round(changed / inner.size, 4) if inner.size else 0.0,
            "max_abs_deviation": int(np.abs(released - original).max(initial=0)),
        }
        evaluation: dict[str, Any] = {}
        if self.consistent:
            ev_rows = cells.rows_of(table.ids)
            for col in ("ckey", "ckey_int"):
                if table.has(col):
                    full = np.zeros(cells.n_stored, dtype=table.column(col).dtype)
                    full[ev_rows] = table.column(col)
                    evaluation[col] = full
        notes = ["margins are sums of the perturbed inner cells: the table is additive, its totals are perturbed"]
        if self.consistent:
            notes.append("each inner cell's perturbation comes from its cell key: the same records get the same "
                         "value in every table")
        return Outcome(cells=cells, release={"count": released}, evaluation=evaluation,
                       figures={"cells": cells.n_cells}, private=private, notes=tuple(notes))
