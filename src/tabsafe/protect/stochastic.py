"""Invariant stochastic perturbation of cell values: method ``stochastic`` of the registry
(seed 002 §3.2.2; METHODS.md §6).

The inner cells' values are perturbed "using a probability mechanism based on a probability
transition matrix similar to the method that is used in PRAM": ``p_ij`` is the probability that
a cell of value ``i`` is published as ``j``, for values up to a cap ``L``. Invariance ``tP = t``
(``t`` the numbers of cells of each value) keeps the distribution of cell values and the overall
total in expectation; selecting the cells to change "without replacement" — for each value, the
expected numbers of cells that move to each other value, chosen at random — makes the total
exact. Additivity afterwards, when margins are to keep their values: IPF to the margins, then
controlled rounding to base 1.

Choices of tabsafe, each a parameter:

* **Which values move.** The paper's study perturbed "cells of values 1, 2, 3 … 10 only. All
  large cells above a value of 11 were not perturbed": by default the states are ``1..L`` and
  cells above ``L`` keep their value (``above = keep``); its general description lets cells above
  the cap "have the same perturbation probabilities" as the last row (``above = last-row``: a cell
  ``n > L`` moves by ``j − L``). Zero cells are a state (``0..L``) only with ``zeros``: then empty
  cells can be published as small counts, and small counts as 0. Without it, no cell moves to or
  from 0 (invariance forbids one-way traffic into a state outside the chain).
* **The matrix.** A base matrix ``P`` — keep the value with probability ``stay``, otherwise move
  to one of the values within ``max_step`` (equally likely), or read from a file — is made
  invariant for this table by the two-stage construction of invariant PRAM (Gouweleeuw, Kooiman,
  Willenborg & De Wolf 1998, cited by the paper): ``R = P·Q`` with the backward matrix
  ``Q_kj = P_jk·t_j / (tP)_k``, so that ``tR = Σ_k (tP)_k Q_kj = t_j``. A file's matrix can
  instead be used as given (``invariant = given``) when it is already invariant for the table.
* **Without replacement.** The expected transition counts ``M_ij = t_i·R_ij`` have integer row
  sums ``t_i`` and, by invariance, integer column sums ``t_j``. They are rounded to integers by
  Cox's (1987) unbiased controlled rounding of a two-way table (shift ±δ round a cycle of
  fractional entries, with probabilities that keep each entry's expectation): every row and
  column sum stays exact, so the numbers of cells of each value — and hence the total — are
  exactly those of the original table, and each count is ``M_ij`` in expectation. The cells of
  value ``i`` that move to ``j`` are a random sample of that size without replacement.
* **Controls.** ``control`` names a variable (e.g. the NUTS2 region, as in the paper's study):
  each of its codes gets its own invariant matrix and selection, so every one of its totals is
  exact.
* **Margins.** Margins and subtotals are sums of the perturbed inner cells (additive). With
  ``fit`` the named margins keep their published values instead: the perturbed inner cells are
  fitted to them by IPF (real values), then rounded to integers by controlled rounding
  (:func:`tabsafe.protect.controlled_rounding.controlled_round` on the table scaled by 1000, base
  1000, zero-restricted: the fitted margins are multiples and stay exact, every other cell goes to
  an adjacent integer) — the paper's "exact additivity with integer counts".
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from tabsafe.capabilities import Capabilities
from tabsafe.errors import InputError, MethodError, Reason, Suggestion, param
from tabsafe.method import Examples, Outcome, TableMethod
from tabsafe.params import Bool, Choice, Int, Optional, Real, Text, parameter
from tabsafe.model.margins import MarginList, rollup, totals_from_inner

if TYPE_CHECKING:  # pragma: no cover
    from tabsafe.model.result import Protection, Report
    from tabsafe.model.table import Table
    from tabsafe.model.release_cells import ReleaseCells

__all__ = ["Stochastic", "base_matrix", "cox_round", "invariant_matrix", "read_matrix"]

#: IPF stops when every fitted margin is within this of its target.
IPF_TOLERANCE = 1e-7
IPF_MAX_ITERATIONS = 2_000
#: Scale of the controlled rounding of the fitted table (decimals kept before rounding).
FIT_SCALE = 1000


# ------------------------------------------------------------------------------------------
# matrices


def base_matrix(states: np.ndarray, *, stay: float, max_step: int) -> np.ndarray:
    """A transition matrix over ``states``: keep the value with probability ``stay``, else move to
    one of the states within ``max_step`` of it, each equally likely.

    >>> base_matrix(np.arange(1, 4), stay=0.5, max_step=1).tolist()
    [[0.5, 0.5, 0.0], [0.25, 0.5, 0.25], [0.0, 0.5, 0.5]]
    """
    n = states.size
    near = (np.abs(states[:, None] - states[None, :]) <= max_step) & ~np.eye(n, dtype=bool)
    k = near.sum(axis=1, keepdims=True)
    P = np.where(near, (1.0 - stay) / np.maximum(k, 1), 0.0)
    P[np.arange(n), np.arange(n)] = np.where(k[:, 0] > 0, stay, 1.0)
    return P


def invariant_matrix(P: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The two-stage invariant matrix ``R = P·Q`` with ``Q_kj = P_jk t_j / (tP)_k``: ``tR = t``
    (Gouweleeuw et al. 1998; 002 §3.2.2).

    >>> P = np.array([[0.8, 0.2], [0.3, 0.7]]); t = np.array([90.0, 10.0])
    >>> np.allclose(t @ invariant_matrix(P, t), t)
    True
    """
    flow = t @ P  # (tP)_k
    Q = np.where(flow[:, None] > 0, P.T * t[None, :] / np.where(flow > 0, flow, 1.0)[:, None], 0.0)
    empty = flow <= 0
    Q[empty, :] = 0.0
    Q[empty, np.flatnonzero(empty)] = 1.0
    return P @ Q


def read_matrix(path: str, states: np.ndarray) -> np.ndarray:
    """A transition matrix from a CSV file with columns ``i,j,p`` (missing pairs are 0); every
    row of ``states`` must sum to 1."""
    file = Path(path)
    if not file.is_file():
        raise InputError("no such file", where=path)
    index = {int(s): k for k, s in enumerate(states)}
    P = np.zeros((states.size, states.size))
    with file.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if not reader.fieldnames or not {"i", "j", "p"} <= {h.strip() for h in reader.fieldnames}:
            raise InputError("a transition matrix file needs the columns i, j and p", where=path)
        for line, row in enumerate(reader, start=2):
            row = {k.strip(): v for k, v in row.items() if k}
            try:
                i, j, p = int(row["i"]), int(row["j"]), float(row["p"])
            except (TypeError, ValueError):
                raise InputError(f"line {line}: i and j must be integers and p a number", where=path) from None
            if i not in index or j not in index:
                raise InputError(f"line {line}: values must lie in {int(states[0])}..{int(states[-1])} "
                                 f"(the states of {param('cap')} and {param('zeros')}); got {i} → {j}", where=path)
            if not 0 <= p <= 1:
                raise InputError(f"line {line}: p must be in [0, 1]; got {p:g}", where=path)
            P[index[i], index[j]] += p
    sums = P.sum(axis=1)
    bad = np.flatnonzero(np.abs(sums - 1) > 1e-6)
    if bad.size:
        raise InputError(f"the probabilities of value {int(states[bad[0]])} sum to {sums[bad[0]]:.6g}, not 1",
                         where=path)
    return P


def cox_round(M: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Unbiased controlled rounding of a two-way table whose row and column sums are integers
    (Cox 1987): each entry goes to its floor or ceiling, ``E[N] = M``, and every row and column
    sum is kept exactly.

    While fractional entries remain, a cycle through them alternating between rows and columns
    exists (a row or column with one fractional entry would have a fractional sum); shifting its
    entries by ``+δ, −δ, …`` keeps every sum. Of the two largest shifts that keep entries within
    their floor and ceiling, ``+δ₁`` is taken with probability ``δ₂/(δ₁+δ₂)`` and ``−δ₂``
    otherwise: each entry's expectation is unchanged, and at least one entry becomes whole.

    >>> N = cox_round(np.array([[0.5, 0.5], [0.5, 0.5]]), np.random.default_rng(3))
    >>> N.sum(axis=0).tolist(), N.sum(axis=1).tolist()
    ([1, 1], [1, 1])
    """
    X = np.array(M, dtype=np.float64)
    eps = 1e-9
    X[np.abs(X - np.round(X)) < eps] = np.round(X[np.abs(X - np.round(X)) < eps])
    while True:
        fractional = np.abs(X - np.round(X)) >= eps
        if not fractional.any():
            break
        cycle = _cycle(fractional)
        cells = tuple(np.array(cycle).T)
        sign = np.where(np.arange(len(cycle)) % 2 == 0, 1.0, -1.0)
        values = X[cells]
        up = np.ceil(values - eps) - values  # room to go up
        down = values - np.floor(values + eps)  # room to go down
        d1 = float(np.min(np.where(sign > 0, up, down)))  # +δ on even cells, −δ on odd
        d2 = float(np.min(np.where(sign > 0, down, up)))  # −δ on even cells, +δ on odd
        if rng.random() < d2 / (d1 + d2):
            X[cells] = values + sign * d1
        else:
            X[cells] = values - sign * d2
        near = np.abs(X - np.round(X)) < eps
        X[near] = np.round(X[near])
    return np.round(X).astype(np.int64)


def _cycle(fractional: np.ndarray) -> list[tuple[int, int]]:
    """A cycle of fractional entries: consecutive entries share a row or a column, alternately,
    and the last shares one with the first (a cycle of the bipartite graph of rows and columns,
    even in length). Every row and column with a fractional entry has at least two, so a walk
    that never goes back along the entry it came by must close a cycle."""
    first = np.argwhere(fractional)[0]
    vertex: tuple[str, int] = ("r", int(first[0]))
    at = {vertex: 0}
    edges: list[tuple[int, int]] = []
    came_by: tuple[int, int] | None = None
    while True:
        kind, k = vertex
        if kind == "r":
            edge = next((k, int(j)) for j in np.flatnonzero(fractional[k]) if (k, int(j)) != came_by)
            nxt = ("c", edge[1])
        else:
            edge = next((int(i), k) for i in np.flatnonzero(fractional[:, k]) if (int(i), k) != came_by)
            nxt = ("r", edge[0])
        edges.append(edge)
        if nxt in at:
            return edges[at[nxt]:]
        at[nxt] = len(edges)
        vertex, came_by = nxt, edge


# ------------------------------------------------------------------------------------------
# the method


def _inner_grid_ids(table: Table) -> np.ndarray:
    """Grid ids of every inner cell of the grid (every combination of leaves), sorted."""
    ids = np.zeros(1, dtype=np.int64)
    for d, stride in zip(table.dimensions, table.strides):
        leaves = np.array([d.hierarchy.position[c] for c in d.hierarchy.leaves], dtype=np.int64)
        ids = (ids[:, None] + leaves[None, :] * int(stride)).ravel()
    return np.sort(ids)


@dataclass(frozen=True, kw_only=True)
class Stochastic(TableMethod):
    """Invariant stochastic perturbation of inner cell values, exact total kept (002 §3.2.2).

    Inner cells of values up to ``cap`` move to other values by an invariant transition matrix
    (built from the table's own cell-value frequencies, or read from a file); the cells to move
    are selected without replacement, so the number of cells of each value and the total are
    exactly kept (per code of ``control`` when given). Margins are sums of the perturbed inner
    cells, or, for the margins in ``fit``, keep their values (IPF, then controlled rounding to
    integers). The module docstring gives the details and sources.

    Attributes:
        cap: L, the largest value that is perturbed.
        above: cells above the cap: keep their value (the paper's study), or move like the cap's
            own row (last-row: a cell n > L moves by j − L).
        zeros: zero cells are a value of the chain (empty cells may be published as small counts
            and small counts as 0); needs every inner cell of the grid.
        stay: probability of keeping the value in the base matrix (before it is made invariant).
        max_step: the base matrix moves a value to values at most this far away.
        matrix: CSV file (i,j,p) with the base transition matrix instead of stay and max_step.
        invariant: two-stage makes the base matrix invariant for the table (R = P·Q); given uses
            the file's matrix as it is (it must already satisfy tP = t).
        control: a variable whose every code keeps its exact total (its own matrix and selection),
            e.g. the region.
        fit: margins that keep their published values: the perturbed inner cells are fitted to
            them (IPF) and rounded to integers by controlled rounding (e.g. region*sex,age).
        time_limit: seconds for the controlled rounding of the fitted table.
    """

    name: ClassVar[str] = "stochastic"
    declared: ClassVar[Capabilities] = Capabilities(random=True, additive=True, joint=True)

    cap: int = parameter(10, check=Int(min=1, max=100))
    above: str = parameter("keep", check=Choice(("keep", "last-row")))
    zeros: bool = parameter(False, check=Bool())
    stay: float = parameter(0.7, check=Real(min=0, max=1, min_open=True))
    max_step: int = parameter(1, check=Int(min=1, max=100))
    matrix: str | None = parameter(None, check=Optional(Text()))
    invariant: str = parameter("two-stage", check=Choice(("two-stage", "given")))
    control: str | None = parameter(None, check=Optional(Text(identifier=True)))
    fit: tuple[tuple[str, ...], ...] | None = parameter(None, check=Optional(MarginList()))
    time_limit: float = parameter(60.0, check=Real(min=0, min_open=True))

    def validate(self) -> None:
        if self.invariant == "given" and self.matrix is None:
            raise InputError(f"{param('invariant')} given uses the matrix of a file: give {param('matrix')}")
        base = read_matrix(self.matrix, self.states) if self.matrix is not None else \
            base_matrix(self.states, stay=self.stay, max_step=self.max_step)
        object.__setattr__(self, "_base", base)

    @property
    def states(self) -> np.ndarray:
        """The values the chain moves between: 1..L, or 0..L with ``zeros``."""
        return np.arange(0 if self.zeros else 1, self.cap + 1)

    @property
    def base(self) -> np.ndarray:
        """The base transition matrix over :attr:`states` (before it is made invariant)."""
        return self._base  # type: ignore[attr-defined]

    @classmethod
    def examples(cls) -> Examples:
        return Examples(
            typical=(cls(), cls(cap=5, zeros=True, max_step=2, control="area"), cls(above="last-row", stay=0.5),
                     cls(fit=(("area",), ("sex",)))),
            identity=cls(stay=1.0),
        )

    def capabilities(self) -> Capabilities:
        """With ``zeros`` empty cells are a state of the chain, and ``fit`` rounds the fitted dense
        grid: either works on the whole grid."""
        return replace(super().capabilities(), needs_grid=self.zeros or bool(self.fit))

    def memory_estimate(self, table: Table) -> int:
        inner = 1
        for d in table.dimensions:
            inner *= len(d.hierarchy.leaves)
        extra = inner * 40 if self.zeros else 0
        if self.fit:
            extra += table.n_cells * 200  # the dense grid and its rounding program
        return super().memory_estimate(table) + extra

    def matrix_for(self, t: np.ndarray) -> np.ndarray:
        """The invariant transition matrix for cell-value frequencies ``t`` (over :attr:`states`)."""
        if self.invariant == "given":
            drift = np.abs(t @ self.base - t)
            worst = int(np.argmax(drift / np.maximum(t, 1)))
            if drift[worst] > 1e-6 * max(1.0, float(t.sum())):
                raise InputError(
                    f"the matrix of {param('matrix')} is not invariant for this table's cell values (value "
                    f"{int(self.states[worst])} would change in number by {drift[worst] / max(t[worst], 1):.1%}); "
                    f"use {param('invariant')} two-stage")
            return self.base
        return invariant_matrix(self.base, t)

    def protect_release(self, cells: ReleaseCells, *, seed: int | None = None) -> tuple[tuple[Protection, ...], Report]:
        """Protect the tables of a release together (issue #31): the finest cells of the release
        perturbed once, every table's cells their sums (:mod:`tabsafe.model.finest`): a shared
        cell has one value in every table, and every table is additive."""
        from tabsafe.model.finest import protect_finest

        return protect_finest(self, cells, seed=seed)

    def apply(self, table: Table, seed: int | None) -> Outcome:
        """Move inner cell values by the invariant matrix, selecting cells without replacement;
        margins by addition (or fitted)."""
        rng = np.random.default_rng(seed)
        counts = np.asarray(table.counts, dtype=np.int64)
        if self.zeros:
            inner_ids = _inner_grid_ids(table)
            rows = table.rows_of(inner_ids)
            values = np.zeros(inner_ids.size, dtype=np.int64)
            values[rows >= 0] = counts[rows[rows >= 0]]
        else:
            inner_rows = np.flatnonzero(table.leaf_mask & (counts != 0))
            inner_ids, values = table.ids[inner_rows], counts[inner_rows]
        lo, cap = int(self.states[0]), self.cap
        movable = (values >= lo) & ((values <= cap) | (self.above == "last-row"))
        state = np.minimum(values, cap) - lo  # index into states; cells above the cap share the last
        groups = self._groups(table, inner_ids)
        new = values.copy()
        moved_cells = 0
        for g in np.unique(groups):
            sel = np.flatnonzero((groups == g) & movable)
            if sel.size == 0:
                continue
            t = np.bincount(state[sel], minlength=self.states.size).astype(np.float64)
            R = self.matrix_for(t)
            N = cox_round(t[:, None] * R, rng)
            for i in np.flatnonzero(t):
                cells = rng.permutation(sel[state[sel] == i])
                targets = np.repeat(np.arange(self.states.size), N[i])
                new[cells] = values[cells] + (targets - i)
                moved_cells += int(np.count_nonzero(targets != i))
        private: dict[str, Any] = {
            "inner_cells_in_chain": int(movable.sum()),
            "inner_cells_changed": moved_cells,
            "small_cells_changed_share": _share(values, new, (values >= 1) & (values <= 2)),
        }
        notes = ["the number of inner cells of each value and the total are kept exactly"
                 + (f" within each code of {self.control!r}" if self.control else "")]
        if self.fit:
            cells, released, fit_notes = self._fit(table, inner_ids, new)
            notes += fit_notes
        else:
            keep = new != 0
            cells, released = totals_from_inner(table, inner_ids[keep], new[keep])
            notes.append("margins are sums of the perturbed inner cells: the table is additive")
        return Outcome(cells=cells, release={"count": released}, figures={"cells": cells.n_cells},
                       private=private, notes=tuple(notes))

    def _groups(self, table: Table, ids: np.ndarray) -> np.ndarray:
        if self.control is None:
            return np.zeros(ids.size, dtype=np.int64)
        if self.control not in table.variables:
            raise InputError(f"{param('control')} {self.control!r} is not a variable of the table "
                             f"({', '.join(table.variables)})")
        axis = table.axis(self.control)
        return (ids // int(table.strides[axis])) % table.shape[axis]

    def _fit(self, table: Table, inner_ids: np.ndarray, new: np.ndarray) -> tuple[Table, np.ndarray, list[str]]:
        """IPF of the perturbed inner cells to the ``fit`` margins of the table, then controlled
        rounding to integers with those margins exact (002 §3.2.2)."""
        from tabsafe.model.table import Table as _Table
        from tabsafe.protect.additivity import _in_margins
        from tabsafe.protect.controlled_rounding import controlled_round

        dense = table.densify()
        positive = new > 0
        ids, x = inner_ids[positive], new[positive].astype(np.float64)
        configs = []
        for margin in self.fit or ():
            if any(v not in table.variables for v in margin):
                _in_margins(table.dimensions, ids[:1], (margin,), "fit")  # names the unknown variable
            key = np.zeros(ids.size, dtype=np.int64)
            for v in table.variables:
                if v in margin:
                    ax = table.axis(v)
                    key += ((ids // int(table.strides[ax])) % table.shape[ax]) * int(table.strides[ax])
            cell, group = np.unique(key, return_inverse=True)
            configs.append((group, dense.counts[cell].astype(np.float64)))
        for _ in range(IPF_MAX_ITERATIONS):
            worst = 0.0
            for group, target in configs:
                sums = np.bincount(group, weights=x, minlength=target.size)
                worst = max(worst, float(np.abs(sums - target).max(initial=0)))
                x *= np.where(sums > 0, target / np.where(sums > 0, sums, 1), 0)[group]
            if worst < IPF_TOLERANCE:
                break
        else:
            raise MethodError(
                f"the perturbed inner cells could not be fitted to the margins of {param('fit')} "
                f"({IPF_MAX_ITERATIONS} IPF iterations)", reason=Reason.NOT_FOUND,
                suggestions=(Suggestion("fit fewer margins, or restore additivity with the additivity method "
                                        "afterwards"),))
        # the scaled table: inner cells rounded to 1/FIT_SCALE, margins by addition, the fitted
        # margins exact multiples of FIT_SCALE (controlled rounding keeps multiples as they are)
        scaled_inner = np.rint(x * FIT_SCALE).astype(np.int64)
        z = np.zeros(dense.n_cells, dtype=np.int64)
        roll_ids, roll = rollup(table.dimensions, ids, scaled_inner)
        z[roll_ids] = roll
        fitted = _in_margins(table.dimensions, dense.ids, self.fit or (), "fit")
        z[fitted] = dense.counts[fitted].astype(np.int64) * FIT_SCALE
        try:
            res = controlled_round(dense.with_values(count=z), base=FIT_SCALE, steps=0, time_limit=self.time_limit)
        except MethodError as exc:
            raise MethodError(
                f"the fitted table has no controlled rounding to integers that keeps the margins of "
                f"{param('fit')} ({exc.what})", reason=Reason.INFEASIBLE,
                suggestions=(Suggestion("fit fewer margins, or restore additivity with the additivity method "
                                        "afterwards"),)) from None
        values = res.values // FIT_SCALE
        cells = _Table(dense.dimensions, dense.ids, {"count": dense.counts}, dict(table.meta), _checked=True)
        notes = [f"inner cells fitted to the margins {', '.join('*'.join(m) for m in self.fit or ())} by IPF and "
                 f"rounded to integers by controlled rounding ({res.status}): those margins keep their values"]
        return cells, values, notes


def _share(before: np.ndarray, after: np.ndarray, mask: np.ndarray) -> float:
    n = int(mask.sum())
    return round(int(np.count_nonzero(before[mask] != after[mask])) / n, 4) if n else 0.0
