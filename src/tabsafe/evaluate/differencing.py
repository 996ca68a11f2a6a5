"""How often differencing two cell-key-perturbed cells reveals a small cell exactly.

The attack of seed 001 §1: a user asks for a table of an area and of the same area less one small
building block (or of a population and of a sub-population); the difference of the two published
totals estimates the small block's count. With the cell key method (seed 000 §5.4, METHODS.md §2)
the two totals ``N`` and ``N - n`` get noise ``v1`` and ``v2`` from the p-table rows of
``min(N, i_max)`` and ``min(N - n, i_max)``, and their keys are independent: the key of the larger
cell is the smaller cell's key plus the block's key, mod 1, and the block's key is uniform and
independent of the rest. The published difference is ``n + v1 - v2``: it equals the true small
count exactly when ``v1 == v2``. Seed 001 §4 tabulates the same quantity for the ABS cell
perturbation (x = 2, n = 5: P(difference = 1 | true 1) ≈ 0.14).
"""

from __future__ import annotations

import numpy as np

from tabsafe.errors import InputError
from tabsafe.protect.ptable import PTable

__all__ = ["difference_distribution", "differencing_risk"]


def _noise(ptable: PTable, count: int) -> dict[int, float]:
    """The distribution of the noise of a cell of ``count`` records (a cell without records has
    no key and stays 0)."""
    if count == 0:
        return {0: 1.0}
    rows = ptable.rows
    block = rows[rows["i"] == min(count, ptable.i_max)]
    out: dict[int, float] = {}
    for v, p in zip(block["v"].to_numpy(np.int64), block["p"].to_numpy(float)):
        out[int(v)] = out.get(int(v), 0.0) + float(p)
    return out


def _check(ptable: PTable, n: int, total: int | None) -> int:
    if not isinstance(ptable, PTable):
        raise InputError(f"differencing risk needs a PTable; got {type(ptable).__name__}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InputError(f"the small count n must be an integer >= 1; got {n!r}")
    if total is None:
        # both cells large enough to use the last row of the p-table
        return int(ptable.i_max) + int(n)
    if isinstance(total, bool) or not isinstance(total, (int, np.integer)) or total < n:
        raise InputError(f"the total must be an integer >= n = {n}; got {total!r}")
    return int(total)


def difference_distribution(ptable: PTable, n: int, *, total: int | None = None) -> dict[int, float]:
    """The distribution of the published difference ``n̂(total) - n̂(total - n)``.

    Args:
        ptable: the p-table of the cell key method.
        n: the true count of the small block (the true difference), ``>= 1``.
        total: the true count of the larger cell; by default a count at least ``i_max + n``, so
            both cells use the p-table's last row (any area worth asking for).

    Returns:
        ``{published difference: probability}``, sorted by difference.

    >>> from tabsafe.protect.ptable import PTable
    >>> pt = PTable.from_rows([
    ...     {"i": 0, "j": 0, "p": 1.0, "v": 0, "p_int_lb": 0.0, "p_int_ub": 1.0},
    ...     {"i": 1, "j": 0, "p": 0.5, "v": -1, "p_int_lb": 0.0, "p_int_ub": 0.5},
    ...     {"i": 1, "j": 2, "p": 0.5, "v": 1, "p_int_lb": 0.5, "p_int_ub": 1.0}])
    >>> difference_distribution(pt, 1)
    {-1: 0.25, 1: 0.5, 3: 0.25}
    """
    big = _check(ptable, n, total)
    a, b = _noise(ptable, big), _noise(ptable, big - int(n))
    out: dict[int, float] = {}
    for v1, p1 in a.items():
        for v2, p2 in b.items():
            d = int(n) + v1 - v2
            out[d] = out.get(d, 0.0) + p1 * p2
    return dict(sorted(out.items()))


def differencing_risk(ptable: PTable, n: int, *, total: int | None = None) -> float:
    """The probability that differencing two perturbed cells shows the true small count ``n``.

    ``P(n̂(total) - n̂(total - n) = n) = Σ_v p_total(v) · p_{total-n}(v)`` (module docstring; seed
    001 §1 and §4). It is the cell key method's stated risk for the differencing attack: an area
    against the same area less one block of ``n`` persons, or a population against a
    sub-population ``n`` smaller.

    Args:
        ptable: the p-table of the cell key method.
        n: the true count of the small block, ``>= 1``.
        total: the true count of the larger cell (default: large, both cells in the last row).

    >>> from tabsafe.protect.ptable import PTable
    >>> pt = PTable.from_rows([
    ...     {"i": 0, "j": 0, "p": 1.0, "v": 0, "p_int_lb": 0.0, "p_int_ub": 1.0},
    ...     {"i": 1, "j": 0, "p": 0.5, "v": -1, "p_int_lb": 0.0, "p_int_ub": 0.5},
    ...     {"i": 1, "j": 2, "p": 0.5, "v": 1, "p_int_lb": 0.5, "p_int_ub": 1.0}])
    >>> differencing_risk(pt, 1)
    0.5
    """
    return float(difference_distribution(ptable, n, total=total).get(int(n), 0.0))
