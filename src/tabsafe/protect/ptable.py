"""Perturbation tables (p-tables) for the cell key method.

A p-table holds, for every original count ``i = 0 .. i_max``, the distribution of the perturbed
value ``j``: rows ``(i, j, p, v = j - i, p_int_lb, p_int_ub)`` where ``(p_int_lb, p_int_ub]`` are
the cumulative intervals that a cell key in ``[0, 1)`` falls into (seed 000 §5.4, Table 5.16;
METHODS.md §2). A cell with count ``n`` uses the rows of ``min(n, i_max)``.

:func:`generate_ptable` builds the table by maximum entropy as the R package *ptable*
(``create_cnt_ptable``, default ``optim = 1``) does: for each row ``i = 1 .. i_max``, over the
allowed targets ``j in [max(0, i - D), i + D] minus {1..js}``,

    maximise  -sum p log p
    s.t.      sum p = 1,  sum v p = 0,  sum v^2 p <= V,  1e-8 <= p <= 1,
              p(v=0) >= pstay (when given),
              p(v_k) <= p(v_{k+1}) for consecutive allowed v_k < v_{k+1} <= 0 (monotony, only
              when v = 0 is an allowed target),

with ``i_max = D`` when ``js = 0`` and ``D + js + 1`` otherwise (Giessing 2016; seed 000 §5.4).
Two details follow R *ptable* so that equal parameters give equal tables:

* when ``pstay`` is given and the row's variance, rounded to 3 decimals, differs from ``V``,
  the lower bound of ``p(v=0)`` is lowered by 0.05 and the row solved again, at most 20 solves
  in all (rows whose original value is blocked are solved once);
* the cumulative bounds are rounded to 8 decimals and ``p`` is stored as ``p_int_ub - p_int_lb``.

Files: the tabsafe CSV layout has the columns above; the tau-ARGUS layout is the text file that
R ``ptable::pt_export(..., SDCtool = "TauArgus")`` writes: a header ``i;j;p;v;p_int_ub`` and one
``;``-separated line per row (the "SAS" variant adds ``p_int_lb`` before ``p_int_ub``).
"""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import LinearConstraint, linprog, minimize

import tabsafe.errors
from tabsafe.io import atomic_path

__all__ = ["PTable", "PTableParams", "generate_ptable"]

COLUMNS: tuple[str, ...] = ("i", "j", "p", "v", "p_int_lb", "p_int_ub")
REPORT_COLUMNS: tuple[str, ...] = (
    "i",
    "targets",
    "mean",
    "variance",
    "p_stay",
    "pstay_bound",
    "iterations",
)
TAU_ARGUS_COLUMNS: tuple[str, ...] = ("i", "j", "p", "v", "p_int_ub")

EPSILON = 1e-8
"""Lower bound of every probability (R ptable: ``epsilon = 1 / 10^8``)."""
PSTAY_STEP = 0.05
"""How much R ptable lowers the ``pstay`` bound per extra solve."""
MAX_SOLVES = 20
"""How many times R ptable solves one row at most."""
BOUND_DIGITS = 8
"""Decimals the cumulative bounds are rounded to (R ptable: ``ndigits = 8``)."""
FILE_TOL = 1e-6
"""Tolerance for sums and bounds when a p-table is read from a file."""
_CHECK_TOL = 1e-9


def _fail(name: str, allowed: str, value: object) -> tabsafe.errors.InputError:
    return tabsafe.errors.InputError(
        f"parameter '{name}' must be {allowed}; got {value!r}", where="PTableParams"
    )


def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_real(value: object) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_)
    )


@dataclass(frozen=True, kw_only=True)
class PTableParams:
    """Parameters of a count p-table made by maximum entropy (seed 000 §5.4; METHODS.md §2).

    Attributes:
        max_noise: ``D``, the largest absolute noise ``|v|``; an integer ``>= 1``.
        variance: ``V``, the noise variance each row aims at (an upper bound); a number ``> 0``.
        js: perturbed values ``1..js`` never occur (``0`` blocks nothing); an integer ``>= 0``.
        pstay: lower bound of the probability that a count stays unchanged, in ``(0, 1)``, or
            ``None`` for the plain maximum entropy solution. As in R *ptable* it is lowered in
            steps of 0.05 for rows that cannot otherwise reach ``V``.
        monotony: probabilities do not decrease towards ``v = 0`` on the negative side.

    >>> PTableParams(max_noise=5, variance=3, js=2).i_max
    8
    """

    max_noise: int
    variance: float
    js: int = 0
    pstay: float | None = None
    monotony: bool = True

    def __post_init__(self) -> None:
        if not _is_int(self.max_noise) or self.max_noise < 1:
            raise _fail("max_noise", "an integer >= 1", self.max_noise)
        if not _is_real(self.variance) or not math.isfinite(self.variance) or self.variance <= 0:
            raise _fail("variance", "a finite number > 0", self.variance)
        if not _is_int(self.js) or self.js < 0:
            raise _fail("js", "an integer >= 0", self.js)
        if self.pstay is not None and (
            not _is_real(self.pstay) or not math.isfinite(self.pstay) or not 0 < self.pstay < 1
        ):
            raise _fail("pstay", "None or a number strictly between 0 and 1", self.pstay)
        if not isinstance(self.monotony, (bool, np.bool_)):
            raise _fail("monotony", "True or False", self.monotony)
        # normalise numpy scalars so that params print and compare as plain Python values
        object.__setattr__(self, "max_noise", int(self.max_noise))
        object.__setattr__(self, "variance", float(self.variance))
        object.__setattr__(self, "js", int(self.js))
        object.__setattr__(self, "monotony", bool(self.monotony))
        if self.pstay is not None:
            object.__setattr__(self, "pstay", float(self.pstay))

    @property
    def i_max(self) -> int:
        """Largest original value with a row of its own: ``D`` if ``js = 0``, else ``D+js+1``."""
        return self.max_noise if self.js == 0 else self.max_noise + self.js + 1


# --------------------------------------------------------------------------------------------
# the optimisation, one row at a time


def _deviations(i: int, params: PTableParams) -> np.ndarray:
    """Allowed deviations ``v = j - i`` for row ``i``, ascending."""
    j = np.arange(max(0, i - params.max_noise), i + params.max_noise + 1)
    j = j[~((j >= 1) & (j <= params.js))]
    return (j - i).astype(np.int64)


def _monotony_matrix(v: np.ndarray, monotony: bool) -> np.ndarray | None:
    """Rows ``p_k - p_{k+1}`` (to be ``<= 0``) for the negative side, or None."""
    zero = np.flatnonzero(v == 0)
    if not monotony or zero.size == 0 or zero[0] == 0:
        return None
    k = int(zero[0])
    m = np.zeros((k, v.size))
    m[np.arange(k), np.arange(k)] = 1.0
    m[np.arange(k), np.arange(k) + 1] = -1.0
    return m


def _min_variance(v: np.ndarray, monotony: bool) -> tuple[float, np.ndarray] | None:
    """Smallest ``sum v^2 p`` under every constraint but the variance bound (an LP) and the
    distribution reaching it; None if even those constraints (sum 1, mean 0, bounds,
    monotony) cannot hold."""
    mono = _monotony_matrix(v, monotony)
    vf = v.astype(float)
    res = linprog(
        c=vf * vf,
        A_ub=mono,
        b_ub=None if mono is None else np.zeros(mono.shape[0]),
        A_eq=np.vstack([np.ones(v.size), vf]),
        b_eq=np.array([1.0, 0.0]),
        bounds=[(EPSILON, 1.0)] * v.size,
        method="highs",
    )
    if res.status != 0:
        return None
    return float(res.fun), np.asarray(res.x, dtype=float)


def _violation(p: np.ndarray, v: np.ndarray, variance: float, lb: np.ndarray,
               mono: np.ndarray | None) -> float:
    vf = v.astype(float)
    parts = [
        abs(p.sum() - 1.0),
        abs(vf @ p),
        max(0.0, vf * vf @ p - variance),
        max(0.0, float(np.max(lb - p))),
        max(0.0, float(np.max(p - 1.0))),
    ]
    if mono is not None:
        parts.append(max(0.0, float(np.max(mono @ p))))
    return max(parts)


def _repair(p: np.ndarray, v: np.ndarray, variance: float, lb: np.ndarray,
            anchor: np.ndarray | None) -> np.ndarray:
    """Move ``p`` a hair towards the least-variance distribution ``anchor`` when the solver
    overshot the variance bound by at most 1e-6: a convex mix keeps every linear constraint."""
    vf = v.astype(float)
    excess = float(vf * vf @ p) - variance
    if anchor is None or not 0 < excess <= 1e-6 or np.any(anchor < lb):
        return p
    gap = float(vf * vf @ p) - float(vf * vf @ anchor)
    if gap <= 0:
        return p
    t = min(1.0, excess / gap * (1.0 + 1e-6))
    return (1.0 - t) * p + t * anchor


def _max_entropy(
    v: np.ndarray,
    variance: float,
    lb: np.ndarray,
    monotony: bool,
    *,
    anchor: np.ndarray | None = None,
    start: np.ndarray | None = None,
) -> np.ndarray | None:
    """Maximum entropy distribution over ``v`` (METHODS.md §2); None if no solver converged.

    ``anchor`` is a feasible distribution of smaller variance used to repair a tiny overshoot
    of the variance bound; ``start`` a starting point (the uniform distribution by default).
    """
    vf = v.astype(float)
    n = v.size
    mono = _monotony_matrix(v, monotony)

    def objective(p: np.ndarray) -> float:
        return float(np.sum(p * np.log(p)))

    def gradient(p: np.ndarray) -> np.ndarray:
        return np.log(p) + 1.0

    bounds = list(zip(lb.tolist(), [1.0] * n))
    x0 = np.full(n, 1.0 / n) if start is None else start
    x0 = np.clip(x0, lb, 1.0)
    constraints: list[dict[str, Any]] = [
        {
            "type": "eq",
            "fun": lambda p: np.array([p.sum() - 1.0, vf @ p]),
            "jac": lambda p: np.vstack([np.ones(n), vf]),
        },
        {
            "type": "ineq",
            "fun": lambda p: np.array([variance - (vf * vf) @ p]),
            "jac": lambda p: -(vf * vf)[None, :],
        },
    ]
    if mono is not None:
        constraints.append({"type": "ineq", "fun": lambda p: -mono @ p, "jac": lambda p: -mono})
    for ftol in (1e-15, 1e-11):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # SLSQP may stop with "positive directional derivative" once it cannot improve at
            # this ftol; the result is judged by its constraint violation, not by that flag.
            res = minimize(
                objective, x0, jac=gradient, bounds=bounds, constraints=constraints,
                method="SLSQP", options={"ftol": ftol, "maxiter": 2000},
            )
        p = _repair(np.clip(res.x, lb, 1.0), v, variance, lb, anchor)
        if _violation(p, v, variance, lb, mono) <= _CHECK_TOL:
            return p
    # a slower interior-point fallback for rows SLSQP cannot settle
    lin = [
        LinearConstraint(np.vstack([np.ones(n), vf]), [1.0, 0.0], [1.0, 0.0]),
        LinearConstraint((vf * vf)[None, :], -np.inf, variance),
    ]
    if mono is not None:
        lin.append(LinearConstraint(mono, -np.inf, 0.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = minimize(
            objective, x0, jac=gradient, hess=lambda p: np.diag(1.0 / p), bounds=bounds,
            constraints=lin, method="trust-constr",
            options={"gtol": 1e-12, "xtol": 1e-14, "barrier_tol": 1e-12, "maxiter": 5000},
        )
    p = _repair(np.clip(res.x, lb, 1.0), v, variance, lb, anchor)
    if _violation(p, v, variance, lb, mono) <= 1e-7:
        return p
    return None


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def _least_variance(i: int, v: np.ndarray, params: PTableParams) -> np.ndarray:
    """The least-variance distribution of row ``i``; raises a one-line MethodError naming the
    row, the failing constraint and the nearest feasible ``V`` if the row is infeasible."""
    blocked = f"values 1..{params.js} blocked" if params.js else "no value blocked"
    # every target carries at least 1e-8, so a row needs targets on both sides of i (or only
    # i itself); the LP's feasibility tolerance is too coarse to see this
    one_sided = bool(np.any(v > 0)) != bool(np.any(v < 0))
    least = None if one_sided else _min_variance(v, params.monotony)
    if least is None:
        raise tabsafe.errors.MethodError(
            f"row i={i}: zero mean is impossible with targets j in "
            f"{sorted((v + i).tolist())} ({blocked}, D={params.max_noise})",
            where="generate_ptable",
            hint=f"max_noise must be at least js + 1 = {params.js + 1}",
        )
    vmin = least[0]
    if params.variance <= vmin + _CHECK_TOL:
        raise tabsafe.errors.MethodError(
            f"row i={i}: variance bound sum v^2 p <= V={_fmt(params.variance)} cannot hold "
            f"with zero mean and {blocked} (smallest variance for this row is {_fmt(vmin)})",
            where="generate_ptable",
            hint=f"nearest feasible V: any V > {_fmt(vmin)}",
        )
    return least[1]


def _solve_row(i: int, params: PTableParams) -> tuple[np.ndarray, np.ndarray, float, int]:
    """Deviations, probabilities, final ``pstay`` bound (NaN if none) and solve count of row i."""
    v = _deviations(i, params)
    anchor = _least_variance(i, v, params)
    lb = np.full(v.size, EPSILON)
    zero = np.flatnonzero(v == 0)
    has_stay = params.pstay is not None and zero.size == 1
    if has_stay:
        lb[zero[0]] = max(EPSILON, float(params.pstay))  # type: ignore[arg-type]
    blocked_row = 1 <= i <= params.js
    p: np.ndarray | None = None
    solves = 0
    while True:
        solves += 1
        p = _max_entropy(v, params.variance, lb, params.monotony, anchor=anchor, start=p)
        if p is None:
            raise tabsafe.errors.MethodError(
                f"row i={i}: the maximum entropy solver did not converge",
                where="generate_ptable",
                hint=f"try a slightly larger V than {_fmt(params.variance)}",
            )
        reached = round(float((v.astype(float) ** 2) @ p), 3)
        if blocked_row or reached == params.variance or solves >= MAX_SOLVES:
            break
        if not has_stay or lb[zero[0]] <= EPSILON or p[zero[0]] > lb[zero[0]] + 1e-7:
            # the bound no longer binds, so R ptable's remaining solves (up to its 20th) would
            # return this very solution: count them, and lower the bound as R does, unsolved
            if has_stay:
                lb[zero[0]] = max(EPSILON, lb[zero[0]] - PSTAY_STEP * (MAX_SOLVES - solves))
            solves = MAX_SOLVES
            break
        lb[zero[0]] = max(EPSILON, lb[zero[0]] - PSTAY_STEP)
    bound = float(lb[zero[0]]) if has_stay else math.nan
    return v, p, bound, solves


def _row_frame(i: int, v: np.ndarray, p: np.ndarray) -> pd.DataFrame:
    """Rows of one original value with rounded cumulative bounds; ``p = ub - lb``."""
    p = p / p.sum()
    ub = np.round(np.cumsum(p), BOUND_DIGITS)
    ub[-1] = 1.0
    ub = np.maximum.accumulate(ub)
    lb = np.concatenate([[0.0], ub[:-1]])
    return pd.DataFrame(
        {
            "i": np.full(v.size, i, dtype=np.int64),
            "j": (v + i).astype(np.int64),
            "p": np.round(ub - lb, BOUND_DIGITS + 2),
            "v": v.astype(np.int64),
            "p_int_lb": lb,
            "p_int_ub": ub,
        }
    )


def generate_ptable(params: PTableParams) -> PTable:
    """Generate a count p-table by maximum entropy, as R ``ptable::create_cnt_ptable`` does.

    The optimisation problem is the one of METHODS.md §2 (seed 000 §5.4; Giessing 2016); see
    the module docstring for the two R conventions kept (``pstay`` relaxation, rounded bounds).

    Args:
        params: the p-table parameters.

    Returns:
        The p-table with one row block per ``i = 0 .. params.i_max`` and a report of the mean
        and variance each row reached.

    Raises:
        tabsafe.errors.MethodError: a row has no feasible distribution (naming the row, the
            failing constraint and the nearest feasible ``V``).

    >>> pt = generate_ptable(PTableParams(max_noise=2, variance=1))
    >>> pt.rows.loc[pt.rows.i == 1, "p"].round(4).tolist()
    [0.3665, 0.3665, 0.1676, 0.0995]
    """
    if not isinstance(params, PTableParams):
        raise tabsafe.errors.InputError(
            f"params must be a PTableParams; got {type(params).__name__}", where="generate_ptable"
        )
    frames = [_row_frame(0, np.array([0], dtype=np.int64), np.array([1.0]))]
    bounds = [math.nan]
    solves = [0]
    for i in range(1, params.i_max + 1):
        v, p, bound, count = _solve_row(i, params)
        frames.append(_row_frame(i, v, p))
        bounds.append(bound)
        solves.append(count)
    frame = pd.concat(frames, ignore_index=True)
    report = _report(frame)
    report["pstay_bound"] = bounds
    report["iterations"] = np.asarray(solves, dtype=np.int64)
    return PTable._create(frame, params=params, report=report)


# --------------------------------------------------------------------------------------------
# the value object


def _report(frame: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for i, grp in frame.groupby("i", sort=True):
        p = grp["p"].to_numpy(float)
        v = grp["v"].to_numpy(float)
        mean = float(p @ v)
        stay = grp.loc[grp["v"] == 0, "p"]
        rows.append(
            {
                "i": int(i),
                "targets": int(len(grp)),
                "mean": mean,
                "variance": float(p @ (v - mean) ** 2),
                "p_stay": float(stay.iloc[0]) if len(stay) else 0.0,
                "pstay_bound": math.nan,
                "iterations": 0,
            }
        )
    return pd.DataFrame(rows, columns=list(REPORT_COLUMNS))


def _validate_frame(raw: pd.DataFrame, source: str) -> pd.DataFrame:
    """Check a p-table frame (METHODS.md §2 layout) and return it typed and sorted."""
    missing = [c for c in COLUMNS if c not in raw.columns]
    if missing:
        raise tabsafe.errors.InputError(
            f"missing column(s) {', '.join(missing)}; a p-table needs {', '.join(COLUMNS)}",
            where=source,
        )
    if raw.empty:
        raise tabsafe.errors.InputError("the p-table has no rows", where=source)
    df = raw.loc[:, list(COLUMNS)].copy()
    i_text = df["i"].astype(str)
    for col in COLUMNS:
        values = pd.to_numeric(df[col], errors="coerce")
        bad = values.isna() | ~np.isfinite(values.to_numpy(float))
        if bad.any():
            at = i_text[bad].iloc[0]
            raise tabsafe.errors.InputError(
                f"row i={at}: column {col} has a missing or non-numeric value", where=source
            )
        df[col] = values.astype(float)
    for col in ("i", "j", "v"):
        frac = df[col] != np.round(df[col])
        if frac.any():
            at = i_text[frac].iloc[0]
            raise tabsafe.errors.InputError(
                f"row i={at}: column {col} must hold integers; got {df.loc[frac, col].iloc[0]}",
                where=source,
            )
        df[col] = df[col].astype(np.int64)
    checks: list[tuple[pd.Series, str]] = [
        (df["i"] < 0, "original value i is negative"),
        (df["j"] < 0, "perturbed value j is negative"),
        (df["v"] != df["j"] - df["i"], "v differs from j - i"),
        (df["p"] < 0, "p is negative"),
    ]
    for mask, text in checks:
        if mask.any():
            raise tabsafe.errors.InputError(f"row i={df.loc[mask, 'i'].iloc[0]}: {text}", where=source)
    df = df.sort_values(["i", "j"], kind="stable").reset_index(drop=True)
    dup = df.duplicated(["i", "j"])
    if dup.any():
        raise tabsafe.errors.InputError(
            f"row i={df.loc[dup, 'i'].iloc[0]}: perturbed value j={df.loc[dup, 'j'].iloc[0]} "
            "appears twice",
            where=source,
        )
    present = np.unique(df["i"].to_numpy())
    expected = np.arange(int(present.max()) + 1)
    gaps = np.setdiff1d(expected, present)
    if gaps.size:
        raise tabsafe.errors.InputError(
            f"row i={int(gaps[0])}: no rows for this original value (rows must cover "
            f"i = 0..{int(present.max())})",
            where=source,
        )
    for i, grp in df.groupby("i", sort=True):
        p = grp["p"].to_numpy()
        lb = grp["p_int_lb"].to_numpy()
        ub = grp["p_int_ub"].to_numpy()
        total = float(p.sum())
        if abs(total - 1.0) > FILE_TOL:
            raise tabsafe.errors.InputError(
                f"row i={i}: probabilities sum to {total:.8g}, not 1 (tolerance {FILE_TOL:g})",
                where=source,
            )
        if (
            abs(lb[0]) > FILE_TOL
            or abs(ub[-1] - 1.0) > FILE_TOL
            or np.any(np.abs(ub - lb - p) > FILE_TOL)
            or np.any(np.abs(lb[1:] - ub[:-1]) > FILE_TOL)
            or np.any(ub < lb)
        ):
            raise tabsafe.errors.InputError(
                f"row i={i}: bounds p_int_lb/p_int_ub are not the cumulative sums of p "
                "(must run from 0 to 1 with p = p_int_ub - p_int_lb)",
                where=source,
            )
    return df


class PTable:
    """An immutable p-table: rows ``(i, j, p, v, p_int_lb, p_int_ub)`` for ``i = 0..i_max``.

    Build one with :func:`generate_ptable`, :meth:`from_frame`, :meth:`from_csv` or
    :meth:`from_tau_argus`. ``rows`` and ``report`` return copies, so a p-table never changes.
    """

    __slots__ = ("_frame", "_params", "_report", "_i_max", "_lookup")

    _frame: pd.DataFrame
    _params: PTableParams | None
    _report: pd.DataFrame
    _i_max: int
    _lookup: tuple[tuple[np.ndarray, np.ndarray], ...]

    def __init__(self) -> None:
        raise TypeError(
            "build a PTable with generate_ptable(), PTable.from_frame(), PTable.from_csv() "
            "or PTable.from_tau_argus()"
        )

    @classmethod
    def _create(
        cls, frame: pd.DataFrame, *, params: PTableParams | None, report: pd.DataFrame | None = None
    ) -> PTable:
        obj = object.__new__(cls)
        frame = frame.loc[:, list(COLUMNS)].reset_index(drop=True)
        frame = frame.astype(
            {"i": np.int64, "j": np.int64, "p": float, "v": np.int64,
             "p_int_lb": float, "p_int_ub": float}
        )
        lookup = []
        for _, grp in frame.groupby("i", sort=True):
            ub = grp["p_int_ub"].to_numpy(float).copy()
            v = grp["v"].to_numpy(np.int64).copy()
            ub.setflags(write=False)
            v.setflags(write=False)
            lookup.append((ub, v))
        object.__setattr__(obj, "_frame", frame)
        object.__setattr__(obj, "_params", params)
        object.__setattr__(obj, "_report", report if report is not None else _report(frame))
        object.__setattr__(obj, "_i_max", int(frame["i"].max()))
        object.__setattr__(obj, "_lookup", tuple(lookup))
        return obj

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("PTable is immutable")

    def __repr__(self) -> str:
        return f"PTable(i_max={self._i_max}, rows={len(self._frame)}, params={self._params!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PTable):
            return NotImplemented
        a, b = self._frame, other._frame
        return a.shape == b.shape and bool(np.allclose(a.to_numpy(float), b.to_numpy(float), rtol=0, atol=1e-12))

    def __hash__(self) -> int:
        return hash((self._i_max, len(self._frame)))

    # -- accessors ---------------------------------------------------------------------------

    @property
    def params(self) -> PTableParams | None:
        """The parameters it was generated with; None when read from a file or frame."""
        return self._params

    @property
    def i_max(self) -> int:
        """Largest original value with rows of its own; larger counts use its rows."""
        return self._i_max

    @property
    def rows(self) -> pd.DataFrame:
        """A copy of the rows, columns exactly ``i, j, p, v, p_int_lb, p_int_ub``."""
        return self._frame.copy()

    @property
    def report(self) -> pd.DataFrame:
        """Per original value: targets, mean, variance reached, p(stay), final pstay bound,
        number of solves (R's ``iter``)."""
        return self._report.copy()

    def intervals(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Read-only ``(p_int_ub, v)`` arrays of original value ``min(i, i_max)``, by ``j``."""
        return self._lookup[min(int(i), self._i_max)]

    # -- constructors ------------------------------------------------------------------------

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, *, source: str = "p-table") -> PTable:
        """Validate a frame with columns ``i, j, p, v, p_int_lb, p_int_ub`` and wrap it.

        Raises:
            tabsafe.errors.InputError: a column is missing, a row block does not sum to 1, the
                bounds are not cumulative, ``j`` is negative, or an ``i`` is missing.
        """
        if not isinstance(frame, pd.DataFrame):
            raise tabsafe.errors.InputError(
                f"expected a pandas DataFrame; got {type(frame).__name__}", where=source
            )
        return cls._create(_validate_frame(frame, source), params=None)

    @classmethod
    def from_rows(cls, rows: Any, *, source: str = "p-table") -> PTable:
        """From a list of row mappings (``i, j, p, v, p_int_lb, p_int_ub``), as :meth:`to_rows` gives."""
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise tabsafe.errors.InputError("p-table rows must be a list of mappings", where=source)
        return cls._create(_validate_frame(pd.DataFrame(rows), source), params=None)

    def to_rows(self) -> list[dict[str, Any]]:
        """The rows as plain mappings (JSON)."""
        return [
            {"i": int(r.i), "j": int(r.j), "p": float(r.p), "v": int(r.v), "p_int_lb": float(r.p_int_lb),
             "p_int_ub": float(r.p_int_ub)}
            for r in self._frame.itertuples(index=False)
        ]

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> PTable:
        """Read a p-table in either layout: the tau-ARGUS one (``;``-separated) or the tabsafe CSV
        layout, told apart by the header line."""
        source = str(path)
        try:
            with open(path, encoding="utf-8-sig") as fh:
                header = fh.readline()
        except OSError as exc:
            raise tabsafe.errors.InputError(f"cannot read the p-table: {exc.strerror}", where=source) from None
        if ";" in header:
            return cls.from_tau_argus(path)
        return cls.from_csv(path)

    @classmethod
    def from_csv(cls, path: str | os.PathLike[str]) -> PTable:
        """Read a p-table in the tabsafe CSV layout (``i,j,p,v,p_int_lb,p_int_ub``)."""
        source = str(path)
        raw = _read_table(path, sep=",")
        return cls._create(_validate_frame(raw, source), params=None)

    @classmethod
    def from_tau_argus(cls, path: str | os.PathLike[str]) -> PTable:
        """Read a p-table in the tau-ARGUS text layout written by R ``ptable::pt_export``.

        The header is ``i;j;p;v;p_int_ub`` (a ``p_int_lb`` column, as in the "SAS" export, is
        used when present; a ``type`` column must say ``all``). ``p_int_lb`` is rebuilt as the
        previous row's ``p_int_ub`` within each ``i``.
        """
        source = str(path)
        raw = _read_table(path, sep=";")
        missing = [c for c in TAU_ARGUS_COLUMNS if c not in raw.columns]
        if missing:
            raise tabsafe.errors.InputError(
                f"missing column(s) {', '.join(missing)}; the tau-ARGUS layout needs "
                f"{';'.join(TAU_ARGUS_COLUMNS)}",
                where=source,
            )
        if "type" in raw.columns:
            kinds = set(raw["type"].astype(str).str.strip())
            if kinds - {"all"}:
                raise tabsafe.errors.InputError(
                    f"column type must be 'all' for a count p-table; got {sorted(kinds)}",
                    where=source,
                )
        if "p_int_lb" not in raw.columns:
            ub = pd.to_numeric(raw["p_int_ub"], errors="coerce")
            raw = raw.assign(p_int_ub=ub)
            raw["p_int_lb"] = raw.groupby("i", sort=False)["p_int_ub"].shift(1).fillna(0.0)
        return cls._create(_validate_frame(raw, source), params=None)

    # -- output ------------------------------------------------------------------------------

    def to_csv(self, path: str | os.PathLike[str]) -> Path:
        """Write the tabsafe CSV layout atomically (temporary file in the same folder, then
        ``os.replace``); returns the path written."""
        lines = [",".join(COLUMNS)]
        for r in self._frame.itertuples(index=False):
            lines.append(
                f"{int(r.i)},{int(r.j)},{float(r.p)!r},{int(r.v)},"
                f"{float(r.p_int_lb)!r},{float(r.p_int_ub)!r}"
            )
        return _atomic_write_text(path, "\n".join(lines) + "\n")

    def to_tau_argus(self, path: str | os.PathLike[str]) -> Path:
        """Write the tau-ARGUS text layout of R ``ptable::pt_export(SDCtool = "TauArgus")``:
        header ``i;j;p;v;p_int_ub``, ``;``-separated, ``.`` as decimal mark; atomically."""
        lines = [";".join(TAU_ARGUS_COLUMNS)]
        for r in self._frame.itertuples(index=False):
            lines.append(f"{int(r.i)};{int(r.j)};{float(r.p)!r};{int(r.v)};{float(r.p_int_ub)!r}")
        return _atomic_write_text(path, "\n".join(lines) + "\n")

    def plot(self, path: str | os.PathLike[str]) -> Path:
        """Write a PNG with one panel per original value ``i``: ``p`` against noise ``v``."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        groups = list(self._frame.groupby("i", sort=True))
        ncols = min(4, len(groups))
        nrows = math.ceil(len(groups) / ncols)
        fig, axes = plt.subplots(
            nrows, ncols, figsize=(3.2 * ncols, 2.4 * nrows), squeeze=False, sharex=True
        )
        d = int(self._frame["v"].abs().max())
        for ax, (i, grp) in zip(axes.flat, groups):
            ax.bar(grp["v"], grp["p"], width=0.8, color="#3a6ea5")
            rep = self._report.loc[self._report["i"] == i].iloc[0]
            label = f"i>={i}" if i == self._i_max else f"i={i}"
            ax.set_title(f"{label}  var={rep['variance']:.3f}", fontsize=9)
            ax.set_xlim(-d - 0.6, d + 0.6)
            ax.set_ylim(0, 1)
        for ax in list(axes.flat)[len(groups):]:
            ax.set_visible(False)
        fig.supxlabel("noise v = j - i")
        fig.supylabel("p")
        fig.tight_layout()
        try:
            with atomic_path(path) as tmp:
                fig.savefig(tmp, format="png", dpi=100)
        finally:
            plt.close(fig)
        return Path(path)


# --------------------------------------------------------------------------------------------
# files


def _atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8", newline="\n")
    return Path(path)


def _read_table(path: str | os.PathLike[str], *, sep: str) -> pd.DataFrame:
    source = str(path)
    if not Path(path).is_file():
        raise tabsafe.errors.InputError("file not found", where=source)
    try:
        raw = pd.read_csv(path, sep=sep, skipinitialspace=True, dtype=str)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise tabsafe.errors.InputError(f"cannot parse the file: {first}", where=source) from None
    raw.columns = [str(c).strip() for c in raw.columns]
    for col in raw.columns:
        raw[col] = raw[col].str.strip()
    if "i" in raw.columns:
        raw["i"] = raw["i"].where(raw["i"].notna(), "?")
    return raw
