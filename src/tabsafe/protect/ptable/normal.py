"""A count p-table from a truncated normal distribution (seed 004 §3.3, the ONS look-up table).

Seed 004 §3.3 evaluated the ABS cell perturbation with this look-up table:

====================  =========================================================
original cell value   perturbation drawn from (by the cell key)
====================  =========================================================
0                     remain as zeros
1 .. D-1              normal, mean 0, variance V, truncated at ``-i`` and ``+D``
D and more            normal, mean 0, variance V, truncated at ``-D`` and ``+D``
====================  =========================================================

with ``D = 5`` and ``V = 2``. A p-table holds integer noise, so the normal is made discrete
here (our convention; the seed gives only the continuous form): the noise ``v`` gets the normal's
mass on ``[v - 1/2, v + 1/2]``, for every integer ``v`` in ``[-min(i, D), D]``, renormalised to
sum to 1 — the continuous normal rounded to the nearest integer and truncated. The lower bound
``-i`` keeps every perturbed count non-negative; the rows of small counts are therefore not
centred (their mean noise is positive), as in the seed: the report shows each row's mean.

The rows use the same layout, rounding of the cumulative bounds and look-up as the maximum
entropy p-tables (:mod:`.maxent`), so ``tabsafe protect --method ckm --ptable FILE`` uses either.
"""

from __future__ import annotations

import math

import numpy as np

from tabsafe.errors import InputError, param
from tabsafe.protect.ptable.maxent import _row_block
from tabsafe.protect.ptable.table import COLUMNS, PTable

__all__ = ["truncated_normal_ptable"]


def _normal_cdf(x: np.ndarray, sd: float) -> np.ndarray:
    return np.array([0.5 * (1.0 + math.erf(float(t) / (sd * math.sqrt(2.0)))) for t in x])


def truncated_normal_ptable(max_noise: int = 5, variance: float = 2.0) -> PTable:
    """The p-table of seed 004 §3.3: row 0 keeps zeros; row ``i`` has noise
    ``v ∈ [-min(i, D), D]`` with probability proportional to the mass of ``N(0, V)`` on
    ``[v - 1/2, v + 1/2]`` (module docstring); row ``D`` serves every larger count.

    >>> pt = truncated_normal_ptable(5, 2.0)
    >>> pt.i_max, [int(x) for x in pt.column("v")[pt.column("i") == 1]]
    (5, [-1, 0, 1, 2, 3, 4, 5])
    """
    if isinstance(max_noise, bool) or not isinstance(max_noise, int) or not 1 <= max_noise <= 100:
        raise InputError(f"{param('max_noise')} must be an integer in [1, 100]; got {max_noise!r}")
    if isinstance(variance, bool) or not isinstance(variance, (int, float)) or not math.isfinite(variance) \
            or variance <= 0:
        raise InputError(f"{param('variance')} must be a number > 0; got {variance!r}")
    sd = math.sqrt(float(variance))
    blocks = [_row_block(0, np.array([0], dtype=np.int64), np.array([1.0]))]
    for i in range(1, max_noise + 1):
        v = np.arange(-min(i, max_noise), max_noise + 1, dtype=np.int64)
        mass = _normal_cdf(v + 0.5, sd) - _normal_cdf(v - 0.5, sd)
        blocks.append(_row_block(i, v, mass))
    cols = {c: np.concatenate([b[c] for b in blocks]) for c in COLUMNS}
    return PTable._create(cols, params=None)
