"""The values a cell may be rounded to, and what a user can tell from a rounded value.

Seed 000 §5.5.1 (METHODS.md §4): write ``z = u·b + r``. Zero-restricted rounding allows
``a ∈ {u·b, (u+1)·b}`` and keeps multiples of ``b`` as they are; with ``K`` steps
``a ∈ {max(0, (u+j)·b)}`` for ``j = −K..K`` (``..K+1`` when ``r ≠ 0``). In steps from ``u``,
``a = b·(u + w)`` with ``w ∈ [−min(K, u), K + (r ≠ 0)]``. Existence intervals: 000 §5.5.1.2.
"""

from __future__ import annotations

import numpy as np

from tabsafe.errors import InputError, param

__all__ = ["check_base_steps", "existence_intervals", "nearest", "objective", "step_range", "violation"]


def check_base_steps(base: object, steps: object) -> None:
    """An :class:`InputError` unless ``base ≥ 1`` and ``steps ≥ 0`` are integers."""
    if not isinstance(base, (int, np.integer)) or isinstance(base, bool) or base < 1:
        raise InputError(f"parameter {param('base')} must be an integer >= 1; got {base!r}")
    if not isinstance(steps, (int, np.integer)) or isinstance(steps, bool) or steps < 0:
        raise InputError(f"parameter {param('steps')} must be an integer >= 0; got {steps!r}")


def step_range(z: np.ndarray, base: int, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Allowed range of ``w`` in ``a = b·(u + w)``: ``[−min(K, u), K + (r ≠ 0)]`` (000 §5.5.1).

    >>> lo, hi = step_range(np.array([7, 10, 2]), 5, 1)
    >>> lo.tolist(), hi.tolist()
    ([-1, -1, 0], [2, 1, 2])
    """
    u, r = np.divmod(np.asarray(z, dtype=np.int64), base)
    return -np.minimum(steps, u), steps + (r != 0)


def violation(z: np.ndarray, a: np.ndarray, base: int, steps: int) -> np.ndarray:
    """Steps by which each rounded value lies outside its allowed range (0 inside)."""
    lo, hi = step_range(z, base, steps)
    w = np.asarray(a, dtype=np.int64) // base - np.asarray(z, dtype=np.int64) // base
    return np.maximum(lo - w, 0) + np.maximum(w - hi, 0)


def nearest(z: np.ndarray, base: int) -> np.ndarray:
    """The nearest multiple of ``base``; halves (``r = b/2``) up, as conventional rounding.

    >>> nearest(np.array([1, 3, 6, 32]), 5).tolist()
    [0, 5, 5, 30]
    """
    u, r = np.divmod(np.asarray(z, dtype=np.int64), base)
    return (u + (2 * r >= base)) * base


def objective(z: np.ndarray, a: np.ndarray) -> int:
    """``Σ|z − a|``, the distance controlled rounding minimises (000 §5.5.1.1)."""
    return int(np.abs(np.asarray(z, dtype=np.int64) - np.asarray(a, dtype=np.int64)).sum())


def existence_intervals(values: np.ndarray, *, base: int, steps: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The interval a user can derive for the true value behind each rounded value.

    Source: 000 §5.5.1.2 (METHODS.md §4). Zero-restricted (``steps = 0``): ``[0, b−1]`` if
    ``a = 0``, else ``[a−b+1, a+b−1]``; with ``K`` steps: ``[0, (K+1)b−1]`` if ``a < (K+1)b``,
    else ``[a−(K+1)b+1, a+(K+1)b−1]`` (the zero-restricted rule is the case ``K = 0``). The
    rule holds for any rounding that keeps every cell within ``K`` steps of its adjacent
    multiples (random and semi-controlled rounding are the case ``K = 0`` too).

    >>> lo, hi = existence_intervals(np.array([0, 15]), base=5, steps=1)
    >>> lo.tolist(), hi.tolist()
    ([0, 6], [9, 24])
    """
    check_base_steps(base, steps)
    a = np.asarray(values, dtype=np.int64)
    width = (steps + 1) * base
    low = np.where(a < width, 0, a - width + 1)
    high = np.where(a < width, width - 1, a + width - 1)
    return low.astype(np.int64), high.astype(np.int64)
