"""One p-table row's maximum entropy program, solved exactly through its dual (METHODS.md §2).

The program of row ``i`` (seed 000 §5.4; Giessing 2016), over the allowed deviations ``v``:

    maximise  H(p) = -sum p log p
    s.t.      sum p = 1,  sum v p = 0,  sum v^2 p <= V,  p >= eps,
              p(v=0) >= s                       (the ``pstay`` bound, when given),
              p_0 <= p_1 <= ... <= p(v=0)      (monotony: the ``chain`` of targets v <= 0).

It is strictly concave over a polytope, so its optimum is unique and the KKT conditions
characterise it. Only three multipliers carry information: ``l`` (the mean), ``m >= 0`` (the
variance) and ``n >= 0`` (the ``pstay`` bound). For fixed ``y = (l, m, n)`` the Lagrangian is
maximised over ``{p >= eps, monotone chain, sum p = 1}`` in closed form:

* scores ``t_k = -l v_k - m v_k^2 + n [v_k = 0]``;
* on the chain, the separable problem ``max sum (-p log p + t p)`` under ``p_0 <= ... <= p_z``
  is solved exactly by pooling adjacent violators: a pooled block shares
  ``p = exp(mean t - c)``;
* ``p_k = max(eps, exp(b_k - c))`` with ``b`` the pooled scores and ``c`` the one constant that
  makes ``sum p = 1`` (clipping the pooled solution at a common lower bound keeps it optimal:
  a clipped block is a whole block, and one bound multiplier, constant over the block, holds
  its KKT conditions).

The dual function ``g(y)`` is convex and continuously differentiable, with gradient
``(-sum v p, V - sum v^2 p, p_z - s)`` and a generalised Hessian equal to the covariance of the
block-averaged features over the unclipped targets. :func:`solve_row` minimises it by projected
Newton steps (``m, n >= 0``) with an Armijo line search: a handful of iterations per row, each
linear in the number of targets. Where nearly every target sits at ``eps`` that Hessian is
singular and the dual linear along its null space; a step along it goes exactly to the next
target that leaves ``eps``. At the answer the gradient is zero (or of the right sign where a
multiplier is zero), which is exactly primal feasibility plus complementary slackness: the
answer is the optimum, not an approximation of it (the tests check the KKT conditions with an
independent least-squares fit of the multipliers).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["EPSILON", "Answer", "RowProgram", "solve_row"]

EPSILON = 1e-8
"""Lower bound of every probability (R ptable: ``epsilon = 1 / 10^8``)."""
MAX_NEWTON = 200
"""Newton iterations per solve at most: the budget that turns a program without optimum (a
``pstay`` bound that cannot hold) into an answer that says it did not converge, never a hang."""
_ARMIJO = 1e-4
_HALVINGS = 40
_MIN_DAMPING = 1e-8
_MAX_DAMPING = 1e12
_TOL = 1e-12
"""Relative tolerance on the constraints the dual gradient measures (mean, variance, pstay)."""
_LOOSE_TOL = 1e-9
"""Accepted when rounding stops the line search before ``_TOL`` (the old solver's check)."""


@dataclass(frozen=True, eq=False)
class RowProgram:
    """The maximum entropy program of one row (see the module docstring).

    Attributes:
        v: allowed deviations, ascending (floats).
        variance: V, the bound on ``sum v^2 p``.
        chain: number of leading targets under monotony (the last one is ``v = 0``); 0 for none.
        zero: index of ``v = 0``, or -1 when it is not an allowed target.
        stay: lower bound ``s`` of ``p(v = 0)``; 0 for none.
    """

    v: np.ndarray
    variance: float
    chain: int = 0
    zero: int = -1
    stay: float = 0.0
    feats: np.ndarray = field(init=False, repr=False)
    metric: np.ndarray = field(init=False, repr=False)
    scale: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # fixed per program, used at every evaluation: the features (-v, -v^2, [v = 0]) whose
        # multiplier-weighted sum is the score, their variances under the uniform distribution
        # (the damping metric) and the scale each constraint's residual is measured in
        v = np.asarray(self.v, dtype=float)
        feats = np.zeros((v.size, 3))
        feats[:, 0] = -v
        feats[:, 1] = -v * v
        if self.zero >= 0:
            feats[self.zero, 2] = 1.0
        for name, value in (
            ("v", v),
            ("feats", feats),
            ("metric", np.array([float(v.var()), float((v * v).var()), 1.0 / v.size])),
            ("scale", np.array([float(np.abs(v).max()), max(self.variance, 1.0), 1.0])),
        ):
            object.__setattr__(self, name, value)

    @property
    def q(self) -> np.ndarray:
        """The squared deviations."""
        return -self.feats[:, 1]

    @property
    def bounded_stay(self) -> bool:
        """Whether the ``pstay`` bound says more than ``p >= eps``."""
        return self.zero >= 0 and self.stay > EPSILON


@dataclass(frozen=True, eq=False)
class Answer:
    """The optimum found by :func:`solve_row`.

    Attributes:
        p: the distribution (sums to 1).
        y: the multipliers ``(l, m, n)`` of mean, variance and pstay bound.
        converged: whether the optimality conditions hold to tolerance.
        iterations: Newton iterations used.
        gap: duality gap ``g(y) - H(p)`` (>= 0 up to rounding; 0 at the optimum).
    """

    p: np.ndarray
    y: np.ndarray
    converged: bool
    iterations: int
    gap: float


def pool_chain(t: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """Pool adjacent violators of ``t_0 <= t_1 <= ...`` (equal weights).

    Returns the pooled values (each element replaced by its block's mean) and the block sizes,
    in order. Pooling gives the exact maximiser of ``sum (-p log p + t p)`` over non-decreasing
    ``p`` (seed 000 §5.4's monotony), since each summand is concave in ``p`` alone.
    """
    means: list[float] = []
    sizes: list[int] = []
    for x in t.tolist():
        mean, size = x, 1
        while means and means[-1] > mean:
            prev, count = means.pop(), sizes.pop()
            mean = (prev * count + mean * size) / (count + size)
            size += count
        means.append(mean)
        sizes.append(size)
    return np.repeat(means, sizes), sizes


def _pooled(prog: RowProgram, t: np.ndarray) -> tuple[np.ndarray, list[int] | None]:
    """Scores with the chain pooled, and the chain's block sizes (None if nothing pooled)."""
    k = prog.chain
    if k < 2 or bool(np.all(t[1:k] >= t[: k - 1])):
        return t, None
    b = t.copy()
    b[:k], sizes = pool_chain(t[:k])
    return b, sizes


_LOG_EPS = math.log(EPSILON)


def _normalise(b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``p = max(eps, exp(b - c))`` with the ``c`` that makes ``sum p = 1``, and ``b - c``.

    Starting with nothing clipped, ``c`` only grows and the clipped set only grows, up to the
    root of the decreasing function ``c -> sum max(eps, exp(b - c))``: a few passes at most.
    """
    n = b.size
    top = float(b.max())
    w = np.exp(b - top)
    free = np.ones(n, dtype=bool)
    clipped = 0
    for _ in range(n + 1):
        c = top + math.log(float(w[free].sum())) - math.log(1.0 - clipped * EPSILON)
        now = free & (b - c > _LOG_EPS)
        count = n - int(now.sum())
        if count == clipped:
            break
        free, clipped = now, count
    log_raw = b - c
    return np.where(free, np.exp(np.minimum(log_raw, 0.0)), EPSILON), log_raw


@dataclass(frozen=True, eq=False)
class _Point:
    """The Lagrangian's maximiser at multipliers ``y`` and the dual's value and derivatives."""

    y: np.ndarray
    p: np.ndarray
    value: float
    grad: np.ndarray
    blocks: list[int] | None
    log_raw: np.ndarray


def _evaluate(prog: RowProgram, y: np.ndarray) -> _Point:
    t = prog.feats @ y
    b, blocks = _pooled(prog, t)
    p, log_raw = _normalise(b)
    moments = p @ prog.feats  # (-mean, -second moment, p(v=0))
    # value = H(p) + t.p + m V - n s, gradient (-sum v p, V - sum v^2 p, p_z - s)
    value = -float(p @ np.log(p)) + float(moments @ y) + y[1] * prog.variance - y[2] * prog.stay
    grad = moments + np.array([0.0, prog.variance, -prog.stay])
    return _Point(y, p, value, grad, blocks, log_raw)


def _curvature(prog: RowProgram, pt: _Point) -> tuple[np.ndarray, np.ndarray]:
    """The generalised Hessian ``sum_U p f f' - (sum_U p f)(sum_U p f)' / sum_U p`` over the
    unclipped targets ``U``, and every target's centred features ``f - (sum_U p f) / sum_U p``
    (the features ``f`` averaged over pooled blocks): along ``d`` the exponent ``b - c`` of
    target ``k`` moves at rate ``centred_k . d`` while no target crosses ``eps``."""
    feats = prog.feats
    if pt.blocks is not None:
        k = prog.chain
        feats = feats.copy()
        sizes = np.array(pt.blocks)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        feats[:k] = np.repeat(np.add.reduceat(feats[:k], starts, axis=0) / sizes[:, None], sizes, axis=0)
    w = np.where(pt.p > EPSILON, pt.p, 0.0)
    centred = feats - (w @ feats) / float(w.sum())
    return (centred * w[:, None]).T @ centred, centred


def _residual(prog: RowProgram, pt: _Point) -> float:
    """Largest violation of the optimality conditions the dual gradient measures, relative to
    the scale of each constraint (zero multipliers need only a gradient of the right sign)."""
    r = pt.grad / prog.scale
    out = abs(r[0])
    for j in (1, 2) if prog.bounded_stay else (1,):
        out = max(out, abs(r[j]) if pt.y[j] > 0 else max(0.0, -r[j]))
    return out


def _direction(prog: RowProgram, pt: _Point, bounded: np.ndarray,
               damping: float) -> tuple[np.ndarray, np.ndarray, bool]:
    """Projected Newton direction (Bertsekas 1982): multipliers held at zero with a gradient
    pushing them below zero stay there; the rest take a Newton step on their block. Without a
    ``pstay`` bound its multiplier is held at zero throughout.

    Where few targets are unclipped the Hessian is singular and the dual linear along its null
    space; if the gradient points along it, the step goes exactly as far as the first clipped
    target whose exponent reaches ``log eps`` (:func:`_to_next_kink`): beyond it the Hessian
    gains that target's curvature. ``damping`` (Levenberg-Marquardt) adds that multiple of a
    fixed metric, the features' variances under the uniform distribution, for steps the line
    search refused. Returns the direction, the held multipliers and whether the step is not a
    plain Newton step (its length then says little and the line search may lengthen it).
    """
    held = bounded & (pt.y <= 0.0) & (pt.grad > 0.0)
    held[2] |= not prog.bounded_stay
    free = ~held
    hess, centred = _curvature(prog, pt)
    hess = hess + damping * np.diag(prog.metric)
    vals, vecs = np.linalg.eigh(hess[free][:, free])
    keep = vals > 1e-12 * max(float(vals[-1]), 0.0)
    d = np.zeros(3)
    grad = pt.grad[free]
    if not keep.all():
        null = vecs[:, ~keep]
        along = null @ (null.T @ -grad)
        if float(np.abs(along / prog.scale[free]).max()) > _TOL:
            d[free] = along
            step = _to_next_kink(pt, centred, d)
            if step is not None:
                return step * d, held, False
    d[free] = vecs[:, keep] @ ((vecs[:, keep].T @ -grad) / vals[keep])
    return d, held, damping > 0 or not bool(keep.all())


def _to_next_kink(pt: _Point, centred: np.ndarray, d: np.ndarray) -> float | None:
    """How far along ``d`` the first clipped target unclips (a hair past it), or None if none
    ever does."""
    rate = centred @ d
    clipped = (pt.p <= EPSILON) & (rate > 0)
    if not clipped.any():
        return None
    steps = (_LOG_EPS - pt.log_raw[clipped]) / rate[clipped]
    return float(steps.min()) * (1.0 + 1e-6) + 1e-12


def _project(y: np.ndarray, held: np.ndarray, bounded: np.ndarray) -> np.ndarray:
    out = y.copy()
    out[held] = 0.0
    return np.where(bounded, np.maximum(out, 0.0), out)


def _armijo(pt: _Point, cand: _Point) -> bool:
    return cand.value <= pt.value + _ARMIJO * float(pt.grad @ (cand.y - pt.y))


def _line_search(prog: RowProgram, pt: _Point, d: np.ndarray, held: np.ndarray,
                 bounded: np.ndarray, stretch: bool) -> _Point | None:
    """The first of the steps 1, 1/2, 1/4, ... along ``d`` (projected) that decreases the dual
    enough (Armijo), or None; with ``stretch``, an accepted full step is doubled while the dual
    keeps falling (a damped step in a region where the dual is almost linear is far too short).

    When the decrease a full step promises is within a few thousand roundings of the dual's
    value, the value cannot judge the step: the residual does instead (near the optimum, in
    Newton's quadratic region, it falls; where the Hessian is singular it does not, and the
    caller damps the step).
    """
    promised = -float(pt.grad @ d)
    by_value = promised > 1e-12 * (1.0 + abs(pt.value))
    residual = _residual(prog, pt)
    step = 1.0
    for _ in range(_HALVINGS):
        trial = _project(pt.y + step * d, held, bounded)
        if np.array_equal(trial, pt.y):
            return None
        cand = _evaluate(prog, trial)
        if not by_value:
            if _residual(prog, cand) < residual:
                return cand
        elif _armijo(pt, cand):
            if stretch and step == 1.0:
                return _stretch(prog, pt, cand, d, held, bounded)
            return cand
        step *= 0.5
    return None


def _stretch(prog: RowProgram, pt: _Point, best: _Point, d: np.ndarray, held: np.ndarray,
             bounded: np.ndarray) -> _Point:
    step = 1.0
    for _ in range(_HALVINGS):
        step *= 2.0
        cand = _evaluate(prog, _project(pt.y + step * d, held, bounded))
        if not (_armijo(pt, cand) and cand.value < best.value):
            break
        best = cand
    return best


def solve_row(prog: RowProgram, start: np.ndarray | None = None) -> Answer:
    """The maximum entropy distribution of ``prog`` by damped projected Newton on the dual.

    ``start`` is a starting ``y`` (a neighbouring row's multipliers: rows differ little; the
    uniform distribution otherwise). The answer says whether it converged; it does not when the
    program has no optimum (a ``pstay`` bound that cannot hold makes ``n`` grow without end).
    """
    bounded = np.array([False, True, prog.bounded_stay])
    y = np.zeros(3) if start is None else np.asarray(start, dtype=float).copy()
    if not prog.bounded_stay:
        y[2] = 0.0
    pt = _evaluate(prog, np.where(bounded, np.maximum(y, 0.0), y))
    damping = 0.0
    for it in range(MAX_NEWTON):
        if _residual(prog, pt) <= _TOL:
            return _answer(pt, True, it)
        d, held, stretch = _direction(prog, pt, bounded, damping)
        moved = _line_search(prog, pt, d, held, bounded, stretch)
        if moved is None:
            if damping >= _MAX_DAMPING:
                break
            damping = max(_MIN_DAMPING, 10.0 * damping)
            continue
        damping = 0.0 if damping < 10.0 * _MIN_DAMPING else damping / 10.0
        pt = moved
    return _answer(pt, _residual(prog, pt) <= _LOOSE_TOL, MAX_NEWTON)


def _answer(pt: _Point, converged: bool, iterations: int) -> Answer:
    entropy = -float(pt.p @ np.log(pt.p))
    return Answer(pt.p, pt.y, converged, iterations, pt.value - entropy)
