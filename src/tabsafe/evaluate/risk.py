"""Disclosure-risk measures of a protected table against the original (METHODS.md §12).

* :func:`unperturbed_small_records` — ``DR``, the share of records in cells of 1–2 that were
  not perturbed (seed 004 §5.2, Table 5);
* :func:`small_cells` — the share of small cells before and after, and of the original small
  cells published unchanged (000 §5.9; 002 §4.1);
* :func:`directly_disclosive` — the share of cells directly disclosive with reference to a
  ``k``-coalition (Lupp & Langsrud, 000 §5.9; METHODS.md §10);
* :func:`entropy_risk` — the entropy risk ``r`` of the original table and ``r#`` of the
  perturbed one (Antal, Shlomo & Elliot, 000 §5.9);
* :func:`risky_unswapped` — for record swapping, the share of risky households left unswapped,
  read from the swapping steps' reports.

The information gain and differencing risk of a method are in
:mod:`tabsafe.evaluate.distribution`. Every function returns aggregates only: shares and numbers
of cells or records, never a cell's original value.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from tabsafe.errors import InputError

__all__ = [
    "DEFAULT_WEIGHTS",
    "directly_disclosive",
    "entropy_risk",
    "risky_unswapped",
    "small_cells",
    "unperturbed_small_records",
]

#: Weights (w1, w2, w3) of the entropy risk; 000 §5.9 leaves them to the user (ours: equal).
DEFAULT_WEIGHTS = (1 / 3, 1 / 3, 1 / 3)


def _arrays(*arrays: Any) -> list[np.ndarray]:
    out = [np.asarray(a, dtype=float).ravel() for a in arrays]
    if any(a.shape != out[0].shape for a in out):
        raise InputError("the arrays of a risk measure must have the same number of cells")
    return out


def unperturbed_small_records(original: Any, published: Any, perturbed_records: Any = None,
                              *, small: int = 2) -> dict[str, Any]:
    """``DR``: the share of the records in cells of 1..``small`` that were left unperturbed
    (004 §5.2: ``Σ_{i ∈ C1 ∪ C2} I(R_i not perturbed) / |C1 ∪ C2|`` — "the percentage of records
    in small cells that have not been perturbed").

    A record counts as perturbed when its cell's published value differs from the original
    (every record of the cell is then uncertain), or when a microdata step changed the record
    itself (``perturbed_records``: per cell, how many of its original records were swapped or
    PRAMmed — a swapped-in record can leave a count of 1 as it was, but not its person).

    A table without small cells has no record at risk: ``DR = 0``.

    Args:
        original, published: counts of the cells (inner cells), same shape.
        perturbed_records: per cell, the records a microdata step changed (default none).
        small: the largest small count (2: cells of 1 and 2).

    >>> unperturbed_small_records([1, 2, 2, 5], [1, 2, 3, 5])["dr"]
    0.6
    >>> unperturbed_small_records([1, 2, 2, 5], [1, 2, 3, 5], [0, 1, 0, 0])["dr"]
    0.4
    """
    o, p = _arrays(original, published)
    moved = np.zeros_like(o) if perturbed_records is None else _arrays(perturbed_records, o)[0]
    in_small = (o >= 1) & (o <= small)
    records = float(o[in_small].sum())
    same = in_small & (p == o)
    kept = float(np.maximum(o[same] - moved[same], 0).sum())
    return {
        "dr": kept / records if records else 0.0,
        "small_cells": int(in_small.sum()),
        "records_in_small_cells": int(records),
        "record_level": perturbed_records is not None,
    }


def small_cells(original: Any, published: Any, *, small: int = 2) -> dict[str, Any]:
    """Small cells (counts 1..``small``) before and after protection: their share of all cells
    (000 §5.9, the risk of identification), and the share of the original small cells published
    with their true value (002 §4.1: "the number of small cells of size 1 and 2 that are not
    changed by the SDC method").

    >>> small_cells([0, 1, 2, 4], [0, 1, 3, 4])["share_unchanged"]
    0.5
    """
    o, p = _arrays(original, published)
    n = o.size
    before = (o >= 1) & (o <= small)
    after = (p >= 1) & (p <= small)
    return {
        "share_before": float(before.sum() / n) if n else None,
        "share_after": float(after.sum() / n) if n else None,
        "share_unchanged": float((before & (p == o)).sum() / before.sum()) if before.any() else None,
        "cells": int(n),
    }


def _leaf_positions(h: Any) -> np.ndarray:
    return np.array([h.position[c] for c in h.leaves], dtype=np.int64)


def directly_disclosive(dimensions: Sequence[Any], original: np.ndarray, published: np.ndarray | None = None, *,
                        k: int = 1, sensitive: Iterable[str] | None = None) -> dict[str, Any]:
    """The share of inner cells directly disclosive with reference to ``k`` (Lupp & Langsrud;
    000 §5.9): an inner cell ``c`` is, when some published marginal cell ``p_c`` of a sensitive
    variable that ``c`` contributes to (``c`` with that variable at an ancestor code: its parent,
    …, the total) has ``|p_c| − k ≤ |c|`` while ``|p_c| > k`` and ``|c| > 0`` — an attacker who
    knows ``k`` contributors learns that all the other units of ``p_c`` are in ``c``.

    Args:
        dimensions: the table's dimensions (hierarchies give the ancestors).
        original: the original counts over the grid, shape of the table.
        published: the published counts over the grid, or None.
        k: the size of the attacker's coalition (0: no background knowledge).
        sensitive: the sensitive variables (default every variable).

    Returns:
        ``share_before`` (original table); with ``published``, ``share_after`` (as published:
        what an attacker sees) and ``share_after_exact`` (as published and true: the cell and the
        margin that expose it are both published exactly).
    """
    variables = [d.variable for d in dimensions]
    axes = range(len(variables)) if sensitive is None else [variables.index(v) for v in sensitive
                                                           if v in variables]
    leaves = [_leaf_positions(d.hierarchy) for d in dimensions]
    inner_shape = tuple(len(x) for x in leaves)
    n_inner = int(np.prod(inner_shape))
    flags = {"before": np.zeros(inner_shape, bool)}
    if published is not None:
        flags["after"] = np.zeros(inner_shape, bool)
        flags["after_exact"] = np.zeros(inner_shape, bool)
    for a in axes:
        h = dimensions[a].hierarchy
        index = [leaves[b] if b != a else np.arange(len(h)) for b in range(len(dimensions))]
        sel = np.ix_(*index)
        o = np.asarray(original, dtype=float)[sel]
        p = np.asarray(published, dtype=float)[sel] if published is not None else None
        for j, leaf in enumerate(h.leaves):
            pos = h.position[leaf]
            for anc in h.ancestors(leaf)[1:]:
                q = h.position[anc]
                c_o, m_o = np.take(o, pos, axis=a), np.take(o, q, axis=a)
                hit_o = (m_o > k) & (c_o >= m_o - k) & (c_o > 0)
                _or_at(flags["before"], a, j, hit_o)
                if p is not None:
                    c_p, m_p = np.take(p, pos, axis=a), np.take(p, q, axis=a)
                    hit_p = (m_p > k) & (c_p >= m_p - k) & (c_p > 0)
                    _or_at(flags["after"], a, j, hit_p)
                    _or_at(flags["after_exact"], a, j, hit_p & (c_p == c_o) & (m_p == m_o))
    out: dict[str, Any] = {"k": k, "cells": n_inner,
                           "sensitive": [variables[a] for a in axes]}
    for name, f in flags.items():
        out[f"share_{name}"] = float(f.sum() / n_inner) if n_inner else None
    return out


def _or_at(flags: np.ndarray, axis: int, j: int, hit: np.ndarray) -> None:
    index: list[Any] = [slice(None)] * flags.ndim
    index[axis] = j
    flags[tuple(index)] |= hit


def _entropy(f: np.ndarray, n: float) -> float:
    q = f[f > 0] / n
    return float(-(q * np.log(q)).sum())


def entropy_risk(original: Any, published: Any | None = None, *, transitions: Any = None,
                 weights: Sequence[float] = DEFAULT_WEIGHTS) -> dict[str, Any]:
    """The entropy risk of a population table ``r`` and of its perturbed version ``r#``
    (Antal, Shlomo & Elliot 2014; 000 §5.9).

    With ``F_l`` the counts of the ``k`` cells, ``N = Σ F``, ``D`` the zero cells and
    ``H = −Σ (F/N) log(F/N)``::

        r  = w1 |D|/k + w2 (1 − H / log k) − w3 (1/√N) log(1 / (e √N))
        r# = w1 (|D|/k)^(|D ∪ Q| / |D ∩ Q|) + w2 (1 − H / log k)(1 − H#/H) − w3 (1/√N) log(1 / (e √N))

    with ``Q`` the zero cells of the perturbed table and ``H#`` the entropy of a unit's original
    cell given its perturbed cell, ``−Σ_ij (F_ij/N) log(F_ij / F_j#)`` over the units in cell ``i``
    before and ``j`` after (the formula printed in 000 lost its layout; this reading is the
    conditional entropy, which gives ``r# = r`` when nothing changes). ``transitions`` gives the
    ``F_ij`` for record-level perturbation (swapping, PRAM); cell-level methods move no unit
    between cells, so ``H# = 0`` and only the zeros term changes. An exponent with ``D ∩ Q`` empty
    is infinite: the zeros term is then 0.

    Args:
        original: the counts of the cells (inner cells).
        published: the perturbed counts (for ``r#``).
        transitions: ``(i, j, count)`` arrays: units from original cell ``i`` now in cell ``j``.
        weights: ``(w1, w2, w3)``.

    >>> entropy_risk([5, 5, 0, 0], [5, 5, 0, 0])["r"] == entropy_risk([5, 5, 0, 0], [5, 5, 0, 0])["r_sharp"]
    True
    """
    w1, w2, w3 = (float(w) for w in weights)
    f = _arrays(original)[0]
    k = f.size
    n = float(f.sum())
    if k < 2 or n <= 0:
        return {"r": None, "r_sharp": None, "cells": int(k)}
    zeros = f == 0
    h = _entropy(f, n)
    size_term = w3 * (1 / math.sqrt(n)) * math.log(1 / (math.e * math.sqrt(n)))
    zero_share = zeros.sum() / k
    spread = 1 - h / math.log(k)
    r = w1 * zero_share + w2 * spread - size_term
    out: dict[str, Any] = {"r": float(r), "cells": int(k), "zero_share_before": float(zero_share),
                           "entropy_before": h}
    if published is None:
        return out
    g = _arrays(published, f)[0]
    q_zeros = g <= 0
    union, inter = int((zeros | q_zeros).sum()), int((zeros & q_zeros).sum())
    if zero_share == 0:
        zero_term = 0.0
    elif inter == 0:
        zero_term = 0.0 if zero_share < 1 else 1.0
    else:
        zero_term = float(zero_share ** (union / inter))
    h_sharp = 0.0
    if transitions is not None:
        _, j, c = (np.asarray(x) for x in transitions)
        c = c.astype(float)
        keep = c > 0
        j, c = j[keep], c[keep]
        col = np.bincount(j, weights=c)
        h_sharp = float(-(c / n * np.log(c / col[j])).sum())
    factor = 1 - (h_sharp / h if h > 0 else 0.0)
    r_sharp = w1 * zero_term + w2 * spread * factor - size_term
    out.update(r_sharp=float(r_sharp), zero_share_after=float(q_zeros.sum() / k), entropy_given_published=h_sharp,
               record_level=transitions is not None)
    return out


def risky_unswapped(reports: Iterable[Any]) -> dict[str, Any] | None:
    """For record swapping: the share of the risky households left unswapped, from the swapping
    steps' report figures (``risky_households`` and ``risky_unswapped``, private figures of
    targeted swapping; 000 §5.6). None when no step reports them."""
    risky = unswapped = 0
    found = False
    for report in reports:
        figures = {**dict(report.figures), **dict(report.private)}
        if "risky_households" in figures and "risky_unswapped" in figures:
            found = True
            risky += int(figures["risky_households"])
            unswapped += int(figures["risky_unswapped"])
    if not found:
        return None
    return {"share": unswapped / risky if risky else 0.0, "risky_households": risky}
