"""Exact risk figures of a cell-level method from its transition ``P(published | true n)``.

A method that states how it publishes one cell (the :class:`~tabsafe.method.CellDistribution`
capability: the cell key method from its p-table, random rounding, barnardisation…) needs no
simulation to be judged:

* :func:`information_gain` — the expected information gain ``(H(X) − H(X|Y)) / H(X)`` about a
  small cell's true count ``X`` from its published value ``Y`` (seed 001 §5; METHODS.md §12: about
  17% for random rounding to base 5 and 33% for the ABS perturbation with x = 2, uniform prior
  on 0..5, where 001 simulated a million cells);
* :func:`differenced_distribution` / :func:`differencing_risk` — the published difference of two
  independently perturbed cells of ``total`` and ``total − n`` records and the probability that it
  shows the true small count ``n`` (001 §1, §4). For the cell key method this is
  :func:`tabsafe.evaluate.differencing.difference_distribution` on its p-table, which the
  generic form reproduces.

Every function takes a method (anything with ``published_distribution``) and works with exact
sums over the support; nothing here draws a random number.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tabsafe.errors import InputError, MethodError, Reason
from tabsafe.method import CellDistribution

__all__ = [
    "DEFAULT_PRIOR_SUPPORT",
    "LARGE_TOTAL",
    "cell_distribution",
    "differenced_distribution",
    "differencing_risk",
    "information_gain",
    "methods_with_distribution",
    "parse_prior",
]

#: 001 §5 considers small true counts 0..5 (the cells a disclosure would be about).
DEFAULT_PRIOR_SUPPORT = 6

#: The larger cell of a differencing attack when none is given: an area worth asking for, above
#: every p-table's last row (i_max <= 201) and far from the small-count regime of any method.
LARGE_TOTAL = 1000

#: Probabilities below this are noise of floating-point sums, not outcomes.
_EPS = 1e-15

Distribution = Callable[[int], Mapping[int, float]]


def cell_distribution(method: Any) -> Distribution | None:
    """``method.published_distribution`` when the method states one for its parameters, else
    ``None`` (the method lacks the capability, or a mode of it publishes cells jointly)."""
    if not isinstance(method, CellDistribution):
        return None
    if method.published_distribution(1) is None:
        return None
    return _checked(method)


def _checked(method: Any) -> Distribution:
    name = getattr(method, "name", type(method).__name__)

    def dist(n: int) -> Mapping[int, float]:
        got = method.published_distribution(int(n))
        if got is None:
            raise MethodError(f"method {name!r} gives no distribution for a cell of {n}", reason=Reason.NOT_APPLICABLE)
        total = 0.0
        for value, p in got.items():
            if not isinstance(value, int) or isinstance(value, bool) or not (p >= 0):
                raise MethodError(f"method {name!r}: P(published | {n}) has the entry {value!r}: {p!r}",
                                  reason=Reason.NOT_APPLICABLE)
            total += p
        if abs(total - 1.0) > 1e-9:
            raise MethodError(f"method {name!r}: P(published | {n}) sums to {total:.12g}, not 1",
                              reason=Reason.NOT_APPLICABLE)
        return got

    return dist


def _require(method: Any, what: str) -> Distribution:
    dist = cell_distribution(method)
    if dist is None:
        name = getattr(method, "name", type(method).__name__)
        having = ", ".join(methods_with_distribution()) or "none"
        raise MethodError(
            f"method {name!r} with these parameters does not state P(published | true count) for a cell, so its "
            f"{what} cannot be computed exactly (methods that state it: {having})", reason=Reason.NOT_APPLICABLE)
    return dist


def methods_with_distribution() -> list[str]:
    """Registered methods whose class has the capability (some parameter settings may still
    publish cells jointly)."""
    from tabsafe.registry import get_method, method_names

    out = []
    for name in method_names():
        try:
            cls = get_method(name)
        except Exception:  # noqa: BLE001 - a broken plugin must not hide the others
            continue
        if callable(getattr(cls, "published_distribution", None)):
            out.append(name)
    return out


def parse_prior(text: str | Sequence[float] | None) -> tuple[float, ...]:
    """A prior on true counts ``0..K``: ``"uniform"`` (on 0..5, 001 §5) or probabilities
    ``p0,p1,…`` (summing to 1 within 1e-6; scaled to exactly 1).

    >>> parse_prior("0.35,0.25,0.15,0.10,0.10,0.05")[:2]
    (0.35, 0.25)
    >>> len(parse_prior("uniform"))
    6
    """
    if text is None or (isinstance(text, str) and text.strip().lower() == "uniform"):
        return tuple([1.0 / DEFAULT_PRIOR_SUPPORT] * DEFAULT_PRIOR_SUPPORT)
    if isinstance(text, str):
        parts = [p.strip() for p in text.split(",")]
        try:
            values = [float(p) for p in parts]
        except ValueError:
            raise InputError(f"the prior must be 'uniform' or probabilities p0,p1,…; got {text!r}") from None
    else:
        values = [float(v) for v in text]
    if len(values) < 2:
        raise InputError(f"the prior needs probabilities for at least two counts (0 and 1); got {text!r}")
    if any(not math.isfinite(v) or v < 0 for v in values):
        raise InputError(f"the prior's probabilities must be numbers >= 0; got {text!r}")
    total = sum(values)
    if abs(total - 1.0) > 1e-6:
        raise InputError(f"the prior's probabilities must sum to 1; they sum to {total:.6g}")
    return tuple(v / total for v in values)


def information_gain(method: Any, prior: Sequence[float] | str | None = None) -> dict[str, Any]:
    """The expected information gain about a cell's true count from its published value.

    Seed 001 §5: with ``X`` the true count (prior ``p(x)`` on ``0..K``) and ``Y`` the published
    one, ``gain = (H(X) − H(X|Y)) / H(X)`` where ``H(X|Y) = −Σ_y p(y) Σ_x p(x|y) log p(x|y)``;
    logarithms to base ``K + 1`` so that the uniform prior has ``H(X) = 1`` (the paper's ``q = 6``;
    the ratio does not depend on the base). Computed exactly from the method's
    ``P(published | n)``.

    Returns:
        ``information_gain`` (a share), ``entropy_x``, ``entropy_x_given_y``, ``prior`` and
        ``base``.

    >>> class Stay:  # publishes every count as it is: all is learnt
    ...     def published_distribution(self, n): return {n: 1.0}
    >>> information_gain(Stay())["information_gain"]
    1.0
    """
    dist = _require(method, "information gain")
    p_x = parse_prior(prior)
    base = len(p_x)
    joint: dict[tuple[int, int], float] = {}
    p_y: dict[int, float] = {}
    for x, px in enumerate(p_x):
        if px <= 0:
            continue
        for y, q in dist(x).items():
            if q <= 0:
                continue
            joint[(x, y)] = joint.get((x, y), 0.0) + px * q
            p_y[y] = p_y.get(y, 0.0) + px * q
    h_x = -sum(p * math.log(p, base) for p in p_x if p > 0)
    h_x_y = -sum(p * math.log(p / p_y[y], base) for (_, y), p in joint.items() if p > _EPS)
    h_x_y = max(0.0, h_x_y)
    gain = (h_x - h_x_y) / h_x if h_x > 0 else 0.0
    return {
        "information_gain": gain,
        "entropy_x": h_x,
        "entropy_x_given_y": h_x_y,
        "prior": list(p_x),
        "base": base,
    }


def _is_int(value: Any) -> bool:
    import numpy as np

    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _check_counts(n: Any, total: Any) -> tuple[int, int]:
    if not _is_int(n) or n < 1:
        raise InputError(f"the small count n must be an integer >= 1; got {n!r}")
    if total is None:
        return int(n), LARGE_TOTAL + int(n)
    if not _is_int(total) or total < n:
        raise InputError(f"the total must be an integer >= n = {n}; got {total!r}")
    return int(n), int(total)


def differenced_distribution(method: Any, n: int, *, total: int | None = None) -> dict[int, float]:
    """The distribution of the published difference ``Y(total) − Y(total − n)`` of two cells
    the method perturbs independently, the true difference being ``n``.

    The attack of seed 001 §1 (an area and the same area less a block of ``n`` persons, or a
    population and a sub-population ``n`` smaller; 001 §4 tabulates it for the ABS perturbation).
    Independence holds for independent draws and for cell keys (the larger cell's key is the
    smaller's plus the block's, and the block's key is uniform and independent of the rest).

    Args:
        method: a method with ``published_distribution``.
        n: the true difference (the small block's count), ``>= 1``.
        total: the larger cell's true count; default ``n + LARGE_TOTAL`` (a large area).

    Returns:
        ``{published difference: probability}``, sorted by difference.

    >>> class Coin:  # 0 stays 0; a positive count moves one down or up with equal chance
    ...     def published_distribution(self, n):
    ...         return {0: 1.0} if n == 0 else {n - 1: 0.5, n + 1: 0.5}
    >>> differenced_distribution(Coin(), 1, total=3)
    {-1: 0.25, 1: 0.5, 3: 0.25}
    """
    dist = _require(method, "differencing risk")
    n, total = _check_counts(n, total)
    big, small = dist(total), dist(total - n)
    out: dict[int, float] = {}
    for y1, p1 in big.items():
        for y2, p2 in small.items():
            out[y1 - y2] = out.get(y1 - y2, 0.0) + p1 * p2
    return {d: p for d, p in sorted(out.items()) if p > _EPS}


def differencing_risk(method: Any, n: int, *, total: int | None = None) -> float:
    """``P(Y(total) − Y(total − n) = n)``: the probability that differencing shows the true small
    count exactly (:func:`differenced_distribution`; seed 001 §4)."""
    return float(differenced_distribution(method, n, total=total).get(int(n), 0.0))
