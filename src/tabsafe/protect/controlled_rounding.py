"""Controlled rounding: an additive table of multiples of the base, as close as possible.

The method (seed 000 §5.5 "Controlled rounding" and §5.5.1; METHODS.md §4): every cell ``z``
of the table, margins and hierarchical subtotals included, is replaced by a multiple ``a`` of the
base ``b`` so that the rounded table is additive (every rounded aggregate is the sum of its
rounded components) and ``Σ|z − a|`` is as small as possible. Write ``z = u·b + r``.
*Zero-restricted* (the default) allows ``a ∈ {u·b, (u+1)·b}`` and keeps multiples of ``b`` as
they are; with ``K`` steps ``a ∈ {max(0, (u+j)·b)}`` for ``j = −K..K`` (``..K+1`` when
``r ≠ 0``). The optimum is NP-hard to find for tables of three or more dimensions; tau-ARGUS offers
the optimal solution, the first feasible one and RAPID (inner cells to the nearest multiple,
margins by addition: additive, but margins may be several bases away).

The integer program. Each free cell gets ``a = b·(u + y + p − q)`` with a binary ``y`` ("round
up", only when ``r ≠ 0``) and, with ``K`` steps, integers ``p ∈ [0, K]`` (further steps up) and
``q ∈ [0, min(K, u)]`` (steps down). The cost ``|z − a|`` is then linear:
``r + (b − 2r)·y + b·p + b·q`` (exact at the optimum because the solver never wastes steps).
Additivity ``A·a = 0`` (``A`` from :meth:`Table.additivity`) becomes
``A·(y + p − q) = −A·u`` with integer coefficients: cells that are multiples of ``b`` (zero
cells in particular) carry no variable at all, which makes census tables — most of whose
inner cells are zero — much smaller than their grid.

Large programs. The solver alone does badly on big tables (an 80K-cell four-dimensional census
table has about 38K binary variables: HiGHS stays 16% above its bound after two minutes, and
OR-Tools CP-SAT, excellent on a 4K-cell part of the same table, finds no solution in one minute
on the whole). So when the program has more than ``direct_vars`` variables: (1) a few seconds of
HiGHS on the whole program, whose presolve proves at once when no rounding exists in sparse
tables; (2) the LP relaxation (interior point), which bounds the objective, proves infeasibility
when it has none, and is nearly integral; (3) the sequential rounding it guides
(:class:`_Sequential`): slice by slice along the dimension with the most codes, each slice an
exact program pulled towards the LP, the last group of slices exact; (4) a large-neighbourhood
search improves the rounding for the rest of the time: it repeatedly frees a box of about 2,000
cells around a cell that went to the far multiple (the cell's code with its ancestors and some
leaves under it along each large dimension, small dimensions whole), fixes the rest of the table
and solves that part exactly from the current values. Every part is solved against the fixed
rest of the whole table, so additivity always holds across parts. When the table has no long
dimension or the sequential rounding fails, HiGHS' own heuristic on the whole program gives the
first rounding instead.

Tables above ``max_cells`` (tau-ARGUS partitions above ~150K cells) first get a short run of the
solver on the whole program, whose presolve proves at once when no rounding exists (the error
then suggests one step more); otherwise they are rounded part by part along their flat variable
with the most codes: the margin slice (that variable at Total) first, recursively, then the
slices of its codes one by one, each with every relation among rounded cells and a per-cell range
that keeps the rest of the margin reachable by the later slices (the last slice is the margin
minus the others). This is a heuristic: the per-cell rule is necessary, not sufficient, so a
slice can turn out to have no rounding; the remaining slices are then re-opened and solved in one
program, and if that fails too the rounding fails with the time-limit error.

The lower bound is the solver's bound, the LP relaxation of the whole program (rounded up: the
objective is an integer) or at least ``Σ min(r, b − r)`` (every cell at its nearest multiple); the
gap is ``(objective − bound) / objective``.

Existence intervals (000 §5.5.1.2): knowing ``b`` and ``K``, a user can tell from a published
``a`` that ``z ∈ [0, (K+1)·b − 1]`` if ``a < (K+1)·b``, else ``[a − (K+1)·b + 1, a + (K+1)·b − 1]``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property

import numpy as np
import scipy.sparse as sp

from tabsafe.errors import InputError, MethodError
from tabsafe.model.table import Table
from tabsafe.solver import LinearProgram, solve

__all__ = [
    "ControlledResult",
    "SolutionKind",
    "controlled_round",
    "existence_intervals",
    "rapid_round",
]

#: tau-ARGUS rounds tables of up to about 150K cells in one model (000 §5.5.1 "Very large tables").
DEFAULT_MAX_CELLS = 150_000


class SolutionKind(str, Enum):
    """Which controlled-rounding solution to return (000 §5.5.1.1)."""

    OPTIMAL = "optimal"
    FIRST_FEASIBLE = "first-feasible"
    RAPID = "rapid"

    @classmethod
    def parse(cls, value: SolutionKind | str) -> SolutionKind:
        try:
            return cls(value)
        except ValueError:
            allowed = ", ".join(k.value for k in cls)
            raise InputError(f"solution must be one of {allowed}; got {value!r}") from None


@dataclass(frozen=True, kw_only=True)
class ControlledResult:
    """A controlled rounding and what is known about its quality.

    Attributes:
        values: the rounded value of every cell (canonical order of the table).
        objective: ``Σ|z − a|`` over all cells.
        lower_bound: a proven lower bound on the smallest possible objective.
        bound_kind: ``"lp"`` (LP relaxation), ``"mip"`` (the solver's dual bound) or
            ``"nearest"`` (every cell at its nearest multiple).
        gap: ``(objective − lower_bound) / objective`` (0 when the objective is 0).
        status: ``optimal`` (proven), ``feasible`` (additive, optimality not proven) or
            ``rapid`` (additive but not zero-restricted: margins by addition).
        seconds: wall time.
        first_seconds: wall time until the first additive rounding was in hand (the rest of the
            time went into improving it); equal to ``seconds`` when nothing was improved.
        parts: how many integer programs were solved (1: the table in one model; more: the
            neighbourhoods of the improvement phase).
        notes: decisions worth telling the user.
    """

    values: np.ndarray
    objective: int
    lower_bound: float
    bound_kind: str
    gap: float
    status: str
    seconds: float
    first_seconds: float | None = None
    parts: int = 1
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.first_seconds is None:
            object.__setattr__(self, "first_seconds", self.seconds)


# --------------------------------------------------------------------------------------------
# existence intervals and RAPID


def existence_intervals(values: np.ndarray, *, base: int, steps: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The interval a user can derive for the true value behind each rounded value.

    Source: 000 §5.5.1.2 (METHODS.md §4). Zero-restricted (``steps = 0``): ``[0, b−1]`` if
    ``a = 0``, else ``[a−b+1, a+b−1]``; with ``K`` steps: ``[0, (K+1)b−1]`` if ``a < (K+1)b``,
    else ``[a−(K+1)b+1, a+(K+1)b−1]`` (the zero-restricted rule is the case ``K = 0``).

    >>> lo, hi = existence_intervals(np.array([0, 15]), base=5, steps=1)
    >>> lo.tolist(), hi.tolist()
    ([0, 6], [9, 24])
    """
    _check_base_steps(base, steps)
    a = np.asarray(values, dtype=np.int64)
    width = (steps + 1) * base
    low = np.where(a < width, 0, a - width + 1)
    high = np.where(a < width, width - 1, a + width - 1)
    return low.astype(np.int64), high.astype(np.int64)


def rapid_round(table: Table, *, base: int) -> np.ndarray:
    """RAPID (000 §5.5.1.1): inner cells to the nearest multiple, every aggregate by addition.

    Additive by construction, but an aggregate can end up several bases from its true value.
    Halves (``r = b/2``) round up, as conventional rounding does.
    """
    _check_base_steps(base, 0)
    z = np.asarray(table.counts, dtype=np.int64)
    inner = np.where(table.leaf_mask, _nearest(z, base), 0)
    grid = _Grid.of(table)
    return grid.aggregate(inner)


def _nearest(z: np.ndarray, base: int) -> np.ndarray:
    u, r = np.divmod(z, base)
    return (u + (2 * r >= base)) * base


def _check_base_steps(base: int, steps: int) -> None:
    if not isinstance(base, (int, np.integer)) or isinstance(base, bool) or base < 1:
        raise InputError(f"base must be an integer >= 1; got {base!r}")
    if not isinstance(steps, (int, np.integer)) or isinstance(steps, bool) or steps < 0:
        raise InputError(f"steps must be an integer >= 0; got {steps!r}")


# --------------------------------------------------------------------------------------------
# the grid: shape and additive families, without pandas


@dataclass(frozen=True, eq=False)
class _Grid:
    """The complete grid of a table: its shape and, per dimension, the families
    ``(parent position, child positions)`` with cell(parent) = Σ cell(children)."""

    shape: tuple[int, ...]
    families: tuple[tuple[tuple[int, tuple[int, ...]], ...], ...]
    _trees: dict[int, _Tree] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, table: Table) -> _Grid:
        fams = []
        for d in table.dimensions:
            h = d.hierarchy
            fams.append(tuple(
                (h.position[code], tuple(h.position[c] for c in h.children(code)))
                for code in h.order if not h.is_leaf(code)
            ))
        return cls(table.shape, tuple(fams))

    @cached_property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @cached_property
    def strides(self) -> tuple[int, ...]:
        out, acc = [], 1
        for n in reversed(self.shape):
            out.append(acc)
            acc *= n
        return tuple(reversed(out))

    def _bases(self, axis: int) -> np.ndarray:
        """Rows of the cells at position 0 on ``axis`` (one per fibre along ``axis``)."""
        other = list(self.shape)
        other[axis] = 1
        idx = np.indices(other, dtype=np.int64).reshape(len(other), -1)
        return (idx * np.array(self.strides, dtype=np.int64)[:, None]).sum(0)

    @cached_property
    def additivity(self) -> sp.csc_matrix:
        """``A`` with ``A @ x = 0`` iff ``x`` is additive: +1 at each aggregate, −1 at its children."""
        rows, cols, vals = [], [], []
        offset = 0
        for axis, fams in enumerate(self.families):
            if not fams:
                continue
            base = self._bases(axis)
            stride = self.strides[axis]
            for parent, kids in fams:
                r = np.arange(base.size, dtype=np.int64) + offset
                rows.append(r)
                cols.append(parent * stride + base)
                vals.append(np.ones(base.size))
                for k in kids:
                    rows.append(r)
                    cols.append(k * stride + base)
                    vals.append(-np.ones(base.size))
                offset += base.size
        if offset == 0:
            return sp.csc_matrix((0, self.size))
        return sp.csc_matrix(
            (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(offset, self.size)
        )

    @cached_property
    def _members(self) -> sp.csr_matrix:
        return abs(self.additivity).tocsr()

    def closed_relations(self, known: np.ndarray) -> np.ndarray:
        """Mask of the additivity relations whose every cell is in the boolean mask ``known``
        (the relations a program over part of the grid can keep)."""
        return (self._members @ known.astype(np.float64)) == np.diff(self._members.indptr)

    def aggregate(self, inner: np.ndarray) -> np.ndarray:
        """Fill every aggregate cell with the sum of its inner cells (aggregates of ``inner`` ignored)."""
        x = np.array(inner, dtype=np.int64).reshape(self.shape)
        for axis, fams in enumerate(self.families):
            order = _bottom_up(fams)
            for parent, kids in order:
                idx = [slice(None)] * len(self.shape)
                idx[axis] = list(kids)
                total = x[tuple(idx)].sum(axis=axis)
                idx[axis] = parent
                x[tuple(idx)] = total
        return x.ravel()

    def tree(self, axis: int) -> _Tree:
        cached = self._trees.get(axis)
        if cached is None:
            n = self.shape[axis]
            parent = np.full(n, -1, dtype=np.int64)
            for p, kids in self.families[axis]:
                parent[list(kids)] = p
            kids_of: dict[int, tuple[int, ...]] = {p: k for p, k in self.families[axis]}

            def leaves(code: int) -> list[int]:
                if code not in kids_of:
                    return [code]
                return [leaf for k in kids_of[code] for leaf in leaves(k)]

            cached = _Tree(parent, tuple(np.array(leaves(c), dtype=np.int64) for c in range(n)))
            self._trees[axis] = cached
        return cached


def _bottom_up(fams: Sequence[tuple[int, tuple[int, ...]]]) -> list[tuple[int, tuple[int, ...]]]:
    """Families ordered so that a family comes after the families of its children."""
    parents = {p for p, _ in fams}
    done: set[int] = set()
    out: list[tuple[int, tuple[int, ...]]] = []
    pending = list(fams)
    while pending:
        rest = []
        for p, kids in pending:
            if all(k not in parents or k in done for k in kids):
                out.append((p, kids))
                done.add(p)
            else:
                rest.append((p, kids))
        if len(rest) == len(pending):  # pragma: no cover - hierarchies are trees
            raise ValueError("cyclic families")
        pending = rest
    return out


# --------------------------------------------------------------------------------------------
# one integer program over the free cells of a grid


@dataclass
class _Context:
    """Settings shared by the steps of one rounding."""

    base: int
    steps: int
    deadline: float

    def remaining(self) -> float:
        return self.deadline - time.monotonic()


#: Cost of one step beyond the allowed range while a start is being repaired (lexicographic:
#: any violation costs more than every cell of a part at its farthest allowed value).
_PENALTY = 10_000


def _step_range(z: np.ndarray, base: int, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Allowed range of ``w`` in ``a = b·(u + w)``: ``[−min(K, u), K + (r ≠ 0)]`` (000 §5.5.1)."""
    u, r = np.divmod(z, base)
    return -np.minimum(steps, u), steps + (r != 0)


def _violation(z: np.ndarray, a: np.ndarray, base: int, steps: int) -> np.ndarray:
    """Steps by which each rounded value lies outside its allowed range (0 inside)."""
    lo, hi = _step_range(z, base, steps)
    w = a // base - z // base
    return np.maximum(lo - w, 0) + np.maximum(w - hi, 0)


def _free_ranges(
    zf: np.ndarray, F: np.ndarray, base: int, steps: int, ranges: tuple[np.ndarray, np.ndarray] | None,
) -> tuple[np.ndarray, np.ndarray] | None:
    """Allowed range of ``w`` for the free cells ``F`` (values ``zf``): their step range, or the
    narrowed ``ranges`` of a part; ``None`` when some cell's range is empty."""
    if ranges is None:
        return _step_range(zf, base, steps)
    lo, hi = ranges[0][F], ranges[1][F]
    return None if np.any(lo > hi) else (lo, hi)


def _touched_rows(M: sp.csc_matrix, rhs: np.ndarray) -> tuple[sp.csc_matrix, np.ndarray] | None:
    """The rows of ``M x = rhs`` that hold a variable, with their right-hand sides; ``None`` when
    a row without variables asks for a non-zero sum (the program has no solution)."""
    touched = np.zeros(M.shape[0], dtype=bool)
    touched[M.indices] = True
    if np.any(rhs[~touched] != 0):
        return None
    rowmap = np.cumsum(touched) - 1
    kept = sp.csc_matrix((M.data, rowmap[M.indices], M.indptr), shape=(int(touched.sum()), M.shape[1]))
    return kept, rhs[touched].astype(np.float64)


def _solve_cells(
    A: sp.csc_matrix,
    z: np.ndarray,
    free: np.ndarray,
    a: np.ndarray,
    *,
    base: int,
    steps: int,
    time_limit: float,
    gap: float | None = None,
    first_feasible: bool = False,
    warm: bool = False,
    ranges: tuple[np.ndarray, np.ndarray] | None = None,
    rows: np.ndarray | None = None,
    pull: tuple[np.ndarray, float] | None = None,
    relaxed: np.ndarray | None = None,
) -> tuple[np.ndarray | None, str, float | None]:
    """Round the free cells of an additive grid given the values ``a`` of all other cells.

    Each free cell gets ``a = b·(u + w)``, ``w = y + p − q`` (see the module docstring). With
    ``warm``, the free cells of ``a`` must be additive with the rest; the solver starts from
    them, and cells outside their allowed range may stay there at a cost of ``_PENALTY`` per step
    (never further out), so a start that is additive but not yet zero-restricted is repaired.
    ``ranges`` (full-length arrays ``lo_w, hi_w``) narrows the allowed range of ``w`` per cell
    (the parts of a partitioned table); ``rows`` keeps only those additivity relations (the
    relations among cells that are free or already rounded). ``pull = (target, λ)`` adds
    ``λ·|w − target|`` to the cost of each free cell with a finite ``target`` (a full-length float
    array of step values): the sequential rounding uses it to keep close to the LP relaxation
    (such programs go to :func:`_solve_pulled`). Free cells marked in ``relaxed`` keep continuous
    steps (they are a look-ahead: their values are returned unchanged from ``a``).

    Returns the full new value array (``None`` without a solution), the solver status and the
    solver's bound on the part's objective (penalties included).
    """
    b = base
    if rows is not None:
        A = A[np.flatnonzero(rows)]
    if pull is not None:
        return _solve_pulled(A, z, free, a, base=b, steps=steps, time_limit=time_limit, gap=gap,
                             first_feasible=first_feasible, ranges=ranges, pull=pull, relaxed=relaxed)
    F = np.flatnonzero(free)
    zf = z[F]
    u, r = np.divmod(zf, b)
    allowed = _free_ranges(zf, F, b, steps, ranges)
    if allowed is None:
        return None, "infeasible", None
    lo_w, hi_w = allowed
    w0 = a[F] // b - u if warm else np.zeros(F.size, dtype=np.int64)
    over = np.maximum(w0 - hi_w, 0) if warm else np.zeros(F.size, dtype=np.int64)
    under = np.maximum(lo_w - w0, 0) if warm else np.zeros(F.size, dtype=np.int64)
    nz = r != 0
    # y ("up to the next multiple", r != 0 only), p (further steps up), q (steps down), each with
    # the bounds that keep w = y + p - q inside [lo_w, hi_w]
    y_lo = (nz & (lo_w >= 1)).astype(np.int64)
    y_hi = (nz & (hi_w >= 1)).astype(np.int64)
    p_lo = np.maximum(lo_w - y_lo, 0)
    p_hi = np.maximum(hi_w - y_hi, 0)
    q_lo = np.maximum(-hi_w, 0)
    q_hi = np.maximum(-lo_w, 0)
    ypos = np.flatnonzero(nz & (y_hi > y_lo))
    ppos = np.flatnonzero(p_hi > p_lo)
    qpos = np.flatnonzero(q_hi > q_lo)
    opos = np.flatnonzero(over > 0)
    dpos = np.flatnonzero(under > 0)
    # fixed parts of w (bounds equal) go to the right-hand side
    w_fix = y_lo * (y_hi == y_lo) + p_lo * (p_hi == p_lo) - q_lo * (q_hi == q_lo)
    w_base = w_fix + np.where(y_hi > y_lo, y_lo, 0) + np.where(p_hi > p_lo, p_lo, 0) \
        - np.where(q_hi > q_lo, q_lo, 0)
    blocks = [
        (ypos, 1.0, np.ones(ypos.size), b - 2.0 * r[ypos]),
        (ppos, 1.0, (p_hi - p_lo)[ppos].astype(float), np.full(ppos.size, float(b))),
        (qpos, -1.0, (q_hi - q_lo)[qpos].astype(float), np.full(qpos.size, float(b))),
        (opos, 1.0, over[opos].astype(float), np.full(opos.size, float(b + _PENALTY))),
        (dpos, -1.0, under[dpos].astype(float), np.full(dpos.size, float(b + _PENALTY))),
    ]
    v = np.where(free, z // b, a // b)
    v[F] += w_base
    rhs_all = -(A @ v)
    cols = [A[:, F[pos]] * sign if sign < 0 else A[:, F[pos]] for pos, sign, _, _ in blocks if pos.size]
    n = sum(pos.size for pos, _, _, _ in blocks)
    offset = float(np.abs(zf - b * (u + w_base)).sum())
    if n == 0:
        if np.any(rhs_all != 0):
            return None, "infeasible", None
        out = a.copy()
        out[F] = b * (u + w_base)
        if relaxed is not None:
            out[F[relaxed[F]]] = a[F[relaxed[F]]]
        return out, "optimal", offset
    M = sp.hstack(cols, format="csc") if len(cols) > 1 else cols[0].tocsc()
    kept = _touched_rows(M, rhs_all)
    if kept is None:
        return None, "infeasible", None
    M, rhs = kept
    # exact costs: w_base is 0 whenever y is free, and a non-zero w_base (a range that excludes
    # w = 0) leaves only moves away from z, each step costing b
    c = np.concatenate([cost for pos, _, _, cost in blocks])
    hi = np.concatenate([ub for _, _, ub, _ in blocks])
    integer = np.ones(n, dtype=bool)
    if relaxed is not None:
        rel = relaxed[F]
        integer = np.concatenate([rel[pos] for pos, _, _, _ in blocks]) == 0
    row_lo = row_hi = rhs
    start = None
    if warm:
        dw = w0 - w_base
        y = np.clip(dw, 0, 1) * (y_hi > y_lo)
        rest_up = np.maximum(dw - y, 0)
        p = np.minimum(rest_up, p_hi - p_lo)
        o = rest_up - p
        rest_down = np.maximum(-dw, 0)
        q = np.minimum(rest_down, q_hi - q_lo)
        d = rest_down - q
        start = np.concatenate([y[ypos], p[ppos], q[qpos], o[opos], d[dpos]]).astype(np.float64)
    lp = LinearProgram(c, M, row_lo, row_hi, np.zeros(n), hi, integer=integer, offset=offset)
    sol = solve(lp, start=start, time_limit=time_limit, mip_rel_gap=gap, first_feasible=first_feasible, threads=1)
    if not sol.has_solution:
        return None, sol.status, sol.bound
    x = np.rint(sol.x[:n]).astype(np.int64)
    w = w_base.copy()
    at = 0
    for pos, sign, _, _ in blocks:
        w[pos] += int(sign) * x[at:at + pos.size]
        at += pos.size
    out = a.copy()
    out[F] = b * (u + w)
    if relaxed is not None:
        out[F[rel]] = a[F[rel]]
    return out, sol.status, sol.bound


def _solve_pulled(
    A: sp.csc_matrix,
    z: np.ndarray,
    free: np.ndarray,
    a: np.ndarray,
    *,
    base: int,
    steps: int,
    time_limit: float,
    gap: float | None,
    first_feasible: bool,
    ranges: tuple[np.ndarray, np.ndarray] | None,
    pull: tuple[np.ndarray, float],
    relaxed: np.ndarray | None,
) -> tuple[np.ndarray | None, str, float | None]:
    """:func:`_solve_cells` with a pull: cost ``f(w) = |z − b·(u + w)| + λ·|w − target|`` per cell.

    ``f`` is convex in ``w``, so ``w`` is written as its lowest allowed value plus one 0/1
    variable per unit step, each costing the increase of ``f`` over its step: the solver takes
    the cheap steps first, and any solution costs exactly ``Σ f(w)``. Why not ``λ·t`` with
    ``t ≥ ±(w − target)``: those rows and continuous columns stopped HiGHS' heuristics from
    finding any rounding of a 3,240-cell five-dimensional slice in 30 s; this form, with the same
    cells and relations, finds one in 1.7 s."""
    b = base
    F = np.flatnonzero(free)
    zf = z[F]
    u, r = np.divmod(zf, b)
    allowed = _free_ranges(zf, F, b, steps, ranges)
    if allowed is None:
        return None, "infeasible", None
    lo, hi = allowed
    target, lam = pull
    tau = np.asarray(target, dtype=np.float64)[F]
    pulled = np.isfinite(tau)

    def f(w: np.ndarray, cell: np.ndarray) -> np.ndarray:
        cost = np.abs(r[cell] - b * w).astype(np.float64)
        m = pulled[cell]
        cost[m] += lam * np.abs(w[m] - tau[cell][m])
        return cost

    units = (hi - lo).astype(np.int64)
    cell = np.repeat(np.arange(F.size), units)
    step = lo[cell] + np.arange(cell.size) - np.repeat(np.cumsum(units) - units, units)
    cost = f(step + 1, cell) - f(step, cell)
    offset = float(f(lo, np.arange(F.size)).sum())
    v = np.where(free, z // b, a // b)
    v[F] += lo
    rhs_all = -(A @ v)
    M = A[:, F][:, cell].tocsc()
    kept = _touched_rows(M, rhs_all)
    if kept is None:
        return None, "infeasible", None
    M, rhs = kept
    out = a.copy()
    rel = relaxed[F] if relaxed is not None else np.zeros(F.size, dtype=bool)
    if cell.size == 0:
        out[F] = b * (u + lo)
        out[F[rel]] = a[F[rel]]
        return out, "optimal", offset
    lp = LinearProgram(cost, M, rhs, rhs, np.zeros(cell.size), np.ones(cell.size), integer=~rel[cell],
                       offset=offset)
    sol = solve(lp, time_limit=time_limit, mip_rel_gap=gap, first_feasible=first_feasible, threads=1)
    if not sol.has_solution:
        return None, sol.status, sol.bound
    w = lo.copy()
    np.add.at(w, cell, np.rint(sol.x).astype(np.int64))
    out[F] = b * (u + w)
    out[F[rel]] = a[F[rel]]
    return out, sol.status, sol.bound


def _objective(z: np.ndarray, a: np.ndarray) -> int:
    return int(np.abs(z - a).sum())


# --------------------------------------------------------------------------------------------
# phase 2: large-neighbourhood search


def _neighbourhood(grid: _Grid, rng: np.random.Generator, cells: int, around: int) -> np.ndarray:
    """A box of about ``cells`` cells around the cell ``around``.

    Small dimensions enter whole. Along the others the box takes the cell's code, all its
    ancestors, and some leaves (with their paths) under the code or, for a leaf, under its parent:
    so every aggregate of a changed inner cell lies in the box too, and a cell far from its
    allowed range can be moved by moving inner cells under it.
    """
    pos = np.unravel_index(around, grid.shape)
    allowed: list[np.ndarray | None] = [None] * len(grid.shape)
    size = 1
    for ax in sorted(range(len(grid.shape)), key=lambda k: grid.shape[k]):
        remaining_axes = sum(1 for x in allowed if x is None) - 1
        budget = max(2, int((cells / size) ** (1.0 / (remaining_axes + 1))))
        if grid.shape[ax] <= budget:
            allowed[ax] = np.ones(grid.shape[ax], dtype=bool)
            size *= grid.shape[ax]
            continue
        tree = grid.tree(ax)
        me = int(pos[ax])
        mask = np.zeros(grid.shape[ax], dtype=bool)
        node = me
        while node >= 0:
            mask[node] = True
            node = tree.parent[node]
        top = me if tree.leaves_under[me].size > 1 else max(tree.parent[me], 0)
        pool = tree.leaves_under[top]
        for leaf in rng.permutation(pool):
            if mask.sum() >= budget:
                break
            node = int(leaf)
            while node >= 0 and not mask[node]:
                mask[node] = True
                node = tree.parent[node]
        allowed[ax] = mask
        size *= int(mask.sum())
    free = allowed[0]
    for m in allowed[1:]:
        free = np.logical_and.outer(free, m)
    return np.asarray(free).ravel()


@dataclass(frozen=True, eq=False)
class _Tree:
    """One dimension's tree as arrays: parent position (−1 for roots) and leaves under each code."""

    parent: np.ndarray
    leaves_under: tuple[np.ndarray, ...]


def _improve(
    grid: _Grid, z: np.ndarray, a: np.ndarray, ctx: _Context, rng: np.random.Generator,
    *, target: float, cells: int, sub_time: float = 0.3,
) -> tuple[np.ndarray, int]:
    """Large-neighbourhood search from the additive rounding ``a`` until ``ctx.deadline`` or the
    objective reaches ``target``: first bring every cell into its allowed range (boxes around
    cells still outside it), then lower ``Σ|z − a|`` (boxes around cells rounded to the far
    multiple). Every step solves its box exactly from the current values, so nothing gets worse.
    Returns the best rounding and the number of boxes solved."""
    A = grid.additivity
    b = ctx.base
    viol = _violation(z, a, b, ctx.steps)
    best = _objective(z, a) + _PENALTY * b * int(viol.sum())
    rounds = 0
    while ctx.remaining() > 0.05:
        if viol.any():
            candidates = np.flatnonzero(viol)
        else:
            if best <= target:
                break
            far = np.abs(z - a) > np.minimum(z % b, b - z % b)
            candidates = np.flatnonzero(far)
            if candidates.size == 0:
                break
        centre = int(candidates[rng.integers(candidates.size)])
        free = _neighbourhood(grid, rng, cells, centre)
        out, _, _ = _solve_cells(
            A, z, free, a, base=b, steps=ctx.steps, warm=True, time_limit=min(sub_time, ctx.remaining()),
        )
        rounds += 1
        if out is not None:
            v = _violation(z, out, b, ctx.steps)
            value = _objective(z, out) + _PENALTY * b * int(v.sum())
            if value <= best:
                a, best, viol = out, value, v
    return a, rounds


# --------------------------------------------------------------------------------------------
# the start: LP relaxation, per part


@dataclass(frozen=True)
class _Relaxation:
    """The LP relaxation of the whole program: its status, optimal value (a lower bound on
    ``Σ|z − a|``) and the optimal steps ``w`` of every cell (fractional)."""

    status: str
    value: float | None = None
    steps: np.ndarray | None = None


def _relaxation(A: sp.csc_matrix, z: np.ndarray, *, base: int, steps: int, time_limit: float) -> _Relaxation:
    """Solve the LP relaxation of the whole program (interior point, about 3 s for 80K cells).

    An infeasible relaxation proves that no rounding exists; its optimum is the lower bound
    reported with the rounding and the guide of the sequential rounding."""
    b = base
    u, r = np.divmod(z, b)
    lo_w, hi_w = _step_range(z, b, steps)
    ypos = np.flatnonzero(r != 0)
    p_hi = hi_w - (r != 0)
    ppos = np.flatnonzero(p_hi > 0)
    qpos = np.flatnonzero(lo_w < 0)
    n = ypos.size + ppos.size + qpos.size
    if n == 0:
        feasible = not np.any(A @ u)
        return _Relaxation("optimal" if feasible else "infeasible", 0.0 if feasible else None,
                           np.zeros(z.size) if feasible else None)
    M = sp.hstack([A[:, ypos], A[:, ppos], -A[:, qpos]], format="csc")
    rhs_all = -(A @ u)
    kept = _touched_rows(M, rhs_all)
    if kept is None:
        return _Relaxation("infeasible")
    M, rhs = kept
    c = np.concatenate([b - 2.0 * r[ypos], np.full(ppos.size + qpos.size, float(b))])
    hi = np.concatenate([np.ones(ypos.size), p_hi[ppos].astype(float), (-lo_w[qpos]).astype(float)])
    sol = solve(LinearProgram(c, M, rhs, rhs, np.zeros(n), hi, offset=float(r.sum())),
                time_limit=time_limit, relax=True, lp_method="ipm")
    if sol.status == "infeasible":
        return _Relaxation("infeasible")
    if sol.status != "optimal" or sol.objective is None or sol.x is None:
        return _Relaxation("failed")
    x = sol.x
    w = np.zeros(z.size)
    np.add.at(w, ypos, x[:ypos.size])
    np.add.at(w, ppos, x[ypos.size:ypos.size + ppos.size])
    np.add.at(w, qpos, -x[ypos.size + ppos.size:])
    return _Relaxation("optimal", float(sol.objective), w)


# --------------------------------------------------------------------------------------------
# sequential rounding along one dimension, guided by the LP relaxation


def _sequential_axis(grid: _Grid, *, max_slice: int, group: int) -> int | None:
    """The dimension to round slice by slice: the one with the most codes, provided it has more
    codes than two tail groups and its slices are small enough for one quick integer program."""
    axis = max(range(len(grid.shape)), key=lambda ax: grid.shape[ax])
    n = grid.shape[axis]
    if n <= 2 * group or grid.size // n > max_slice:
        return None
    return axis


@dataclass
class _Sequential:
    """Controlled rounding of a large table slice by slice along one dimension ``v`` (the one with
    the most codes), each slice an exact integer program, steered by the LP relaxation.

    Why: the whole program is too big for the solver's own heuristics (an 80K-cell census table:
    16% above the bound after two minutes), while one slice (a table of the other variables,
    a few hundred cells) is solved exactly in milliseconds, and the LP relaxation is nearly
    integral and close to the optimum (0.5–1% below the best roundings found).

    The codes of ``v`` are processed top down. A code with few children (at most ``group``) is
    rounded together with them in one program (a *unit*: e.g. the total with its two regions);
    a code with many children has them rounded one unit at a time, smallest first, then the
    last ``group`` together with the exact relation ``parent = Σ children``:

    * each earlier child is pulled towards the LP: its cost has ``λ·|w − (w_LP − D)|`` where
      ``D`` is the running difference between the children rounded so far and their LP values
      (relative to the parent's own difference), so the errors of successive children cancel
      instead of piling up on the last ones;
    * every cell keeps the rest of the parent reachable: ``parent − Σ rounded children`` must lie
      between the smallest and largest sums of the children still to come;
    * once only ``horizon`` children remain, they join each program as continuous variables
      (relax-and-fix), so the last group always has at least a fractional completion;
    * the last group is solved exactly; should it have no rounding, the group is doubled
      (earlier children re-opened) until one is found or every child is in it.

    Every program keeps every relation among the cells rounded so far, so the result is additive;
    it stays within each cell's allowed steps because each program does.
    """

    grid: _Grid
    z: np.ndarray
    ctx: _Context
    axis: int
    w_lp: np.ndarray
    deadline: float
    group: int = 8
    horizon: int = 16
    lam: float = 1.0
    a: np.ndarray = field(init=False)
    done: np.ndarray = field(init=False)
    programs: int = 0
    regrouped: int = 0

    def __post_init__(self) -> None:
        self.a = np.zeros(self.z.size, dtype=np.int64)
        self.done = np.zeros(self.z.size, dtype=bool)
        self.kids = {p: list(k) for p, k in self.grid.families[self.axis]}
        self.lo, self.hi = _step_range(self.z, self.ctx.base, self.ctx.steps)
        self.u = self.z // self.ctx.base
        # smallest and largest allowed value of each cell, in multiples of the base
        self.floor, self.ceil = self.u + self.lo, self.u + self.hi

    def _idx(self, p: int) -> tuple:
        return tuple(p if ax == self.axis else slice(None) for ax in range(len(self.grid.shape)))

    def part(self, x: np.ndarray, p: int) -> np.ndarray:
        """The slice ``v = p`` of a cell array (a view, in the order of the other variables)."""
        return x.reshape(self.grid.shape)[self._idx(p)]

    def mask(self, codes: Sequence[int]) -> np.ndarray:
        m = np.zeros(self.grid.shape, dtype=bool)
        for p in codes:
            m[self._idx(p)] = True
        return m.ravel()

    def unit(self, code: int) -> list[int]:
        """The code and, if it has at most ``group`` children, their units (rounded together)."""
        kids = self.kids.get(code)
        if kids is None or len(kids) > self.group:
            return [code]
        return [code] + [c for k in kids for c in self.unit(k)]

    def boundary(self, code: int) -> list[int]:
        """Codes of a unit whose children are rounded afterwards, one unit at a time."""
        return [c for c in self.unit(code) if len(self.kids.get(c, ())) > self.group]

    def flexibility(self, code: int) -> int:
        return int(np.count_nonzero(self.part(self.hi - self.lo, code)))

    def solve(self, cells: np.ndarray, *, time_limit: float, relaxed: np.ndarray | None = None,
              ranges: tuple[np.ndarray, np.ndarray] | None = None, target: np.ndarray | None = None,
              gap: float | None = None) -> bool:
        """Round ``cells`` (optionally with a continuous look-ahead ``relaxed``) given the cells
        rounded so far; keep every relation among known cells."""
        remaining = self.deadline - time.monotonic()
        if remaining <= 0.05:
            return False
        free = cells if relaxed is None else cells | relaxed
        rows = self.grid.closed_relations(self.done | free)
        out, _, _ = _solve_cells(
            self.grid.additivity, self.z, free, self.a, base=self.ctx.base, steps=self.ctx.steps,
            time_limit=min(time_limit, remaining), ranges=ranges, rows=rows, gap=gap,
            pull=None if target is None else (target, self.lam), relaxed=relaxed,
        )
        self.programs += 1
        if out is None:
            return False
        self.a = out
        self.done = self.done | cells
        return True

    def run(self) -> np.ndarray | None:
        tree = self.grid.tree(self.axis)
        roots = [int(p) for p in np.flatnonzero(tree.parent < 0)]
        for root in roots:
            top = self.unit(root)
            if not self.solve(self.mask(top), time_limit=10.0, target=self.w_lp):
                return None
            for code in self.boundary(root):
                if not self.children(code):
                    return None
        return self.a if bool(self.done.all()) else None

    def children(self, parent: int) -> bool:
        """Round the units of the children of ``parent`` (already rounded); see the class doc."""
        b = self.ctx.base
        kids = sorted(self.kids[parent], key=self.flexibility)
        units = {k: self.unit(k) for k in kids}
        # D: rounded minus LP steps of the children done so far, relative to the parent's own
        w_parent = self.part(self.a, parent) // b - self.part(self.u, parent)
        drift = -(w_parent - self.part(self.w_lp, parent))
        lo_sum = sum(self.part(self.floor, k) for k in kids)
        hi_sum = sum(self.part(self.ceil, k) for k in kids)
        need = self.part(self.a, parent) // b
        head = kids[:-self.group]
        for i, k in enumerate(head):
            rest = kids[i + 1:]
            uk, lk, hk = self.part(self.u, k), self.part(self.floor, k), self.part(self.ceil, k)
            lo_sum, hi_sum = lo_sum - lk, hi_sum - hk
            target = np.full(self.z.size, np.nan)
            for c in units[k]:
                self.part(target, c)[...] = self.part(self.w_lp, c)
            self.part(target, k)[...] = self.part(self.w_lp, k) - drift
            cells = self.mask(units[k])
            ok = False
            if len(rest) <= self.horizon:
                relaxed = self.mask([c for q in rest for c in units[q]])
                ok = self.solve(cells, relaxed=relaxed, target=target, time_limit=1.0, gap=0.01)
            if not ok:
                lo, hi = self.lo.copy(), self.hi.copy()
                # need - a_k/b within [lo_sum, hi_sum]
                self.part(lo, k)[...] = np.maximum(self.part(lo, k), need - hi_sum - uk)
                self.part(hi, k)[...] = np.minimum(self.part(hi, k), need - lo_sum - uk)
                ok = self.solve(cells, ranges=(lo, hi), target=target, time_limit=2.0)
            if not ok:
                return False
            wk = self.part(self.a, k) // b - uk
            drift = drift + wk - self.part(self.w_lp, k)
            need = need - self.part(self.a, k) // b
        size = self.group
        while True:
            tail = kids[-size:]
            cells = self.mask([c for k in tail for c in units[k]])
            self.done &= ~cells
            if self.solve(cells, time_limit=10.0):
                break
            if size >= len(kids) or self.deadline - time.monotonic() <= 0.05:
                return False
            size = min(2 * size, len(kids))
            self.regrouped += 1
        return all(self.children(code) for k in kids for code in self.boundary(k))


# --------------------------------------------------------------------------------------------
# partitioning of tables above max_cells


@dataclass
class _Partition:
    """State of one partitioned rounding: values so far, which cells are rounded, programs solved."""

    grid: _Grid
    z: np.ndarray
    ctx: _Context
    max_cells: int
    a: np.ndarray
    done: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    programs: int = 0
    reopened: int = 0
    parts_left: float = 1.0

    def cells(self, fixed: dict[int, int]) -> np.ndarray:
        """Mask of the part: the cells with the given code positions on the given axes."""
        idx = [slice(None)] * len(self.grid.shape)
        for ax, p in fixed.items():
            idx[ax] = p
        m = np.zeros(self.grid.shape, dtype=bool)
        m[tuple(idx)] = True
        return m.ravel()

    def solve(self, free: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> bool:
        """One integer program: the free cells, with every relation among free and rounded cells."""
        rows = self.grid.closed_relations(self.done | free)
        share = self.ctx.remaining() / max(1.0, self.parts_left)
        out, _, _ = _solve_cells(
            self.grid.additivity, self.z, free, self.a, base=self.ctx.base, steps=self.ctx.steps,
            time_limit=max(1.0, share), first_feasible=True, ranges=(lo, hi), rows=rows,
        )
        self.programs += 1
        if out is None:
            return False
        self.a = out
        self.done = self.done | free
        return True


def _split_axis(grid: _Grid, fixed: dict[int, int], size: int, max_cells: int) -> int | None:
    """The axis to split a part along: the flat one (every code under Total is a leaf) with the
    most codes, so the parts are as small as possible (the solver's time grows faster than a
    part's size); ``None`` if there is none."""
    flat = [ax for ax in range(len(grid.shape)) if ax not in fixed and grid.shape[ax] >= 3
            and len(grid.families[ax]) == 1]
    if not flat:
        return None
    return max(flat, key=lambda ax: grid.shape[ax])


def _round_part(st: _Partition, fixed: dict[int, int]) -> None:
    """Round the part of the table with the codes ``fixed`` (axis → position), recursively.

    A part above ``max_cells`` is split along one flat variable ``v``: first its margin slice
    (``v`` = Total, itself a complete table of the other variables, rounded recursively), then the
    slices of the codes of ``v`` one after the other. Each slice is rounded with its own
    relations and, cell by cell, a range that leaves the rest of the margin reachable: the
    rounded slice ``a_k`` must satisfy ``M − Σ_{j≤k} a_j ∈ [Σ_{j>k} lo_j, Σ_{j>k} hi_j]``, so
    the last slice is the margin minus the others and is additive and within its range by
    construction. If a slice has no rounding in that range, the remaining slices are re-opened
    and solved in one program with the margin's relations. Additivity across parts holds because
    every relation between two parts is either a constraint of the later part or the remainder
    rule above (000 §5.5.1 "very large tables").
    """
    grid, b = st.grid, st.ctx.base
    size = int(np.prod([1 if ax in fixed else n for ax, n in enumerate(grid.shape)]))
    axis = _split_axis(grid, fixed, size, st.max_cells) if size > st.max_cells else None
    part = st.cells(fixed)
    if axis is None:
        if not st.solve(part & ~st.done, st.lo, st.hi):
            raise _PartInfeasible(fixed)
        return
    root, leaves = grid.families[axis][0]
    st.parts_left += len(leaves)
    _round_part(st, {**fixed, axis: root})
    st.parts_left -= 1
    u = st.z // b
    shape = grid.shape

    def at(p: int) -> np.ndarray:
        return np.flatnonzero(st.cells({**fixed, axis: p}))

    margin_rows = at(root)
    alo, ahi = b * (u + st.lo), b * (u + st.hi)
    for k, leaf in enumerate(leaves):
        if k == len(leaves) - 1:
            rows = at(leaf)
            rest = st.a[margin_rows] - sum(st.a[at(p)] for p in leaves[:-1])
            st.a[rows] = rest
            st.done[rows] = True
            break
        rows = at(leaf)
        later = leaves[k + 1:]
        remainder = st.a[margin_rows] - sum((st.a[at(p)] for p in leaves[:k]), np.zeros(rows.size, dtype=np.int64))
        lo_rest = sum(alo[at(p)] for p in later)
        hi_rest = sum(ahi[at(p)] for p in later)
        lo, hi = st.lo.copy(), st.hi.copy()
        # a_k in [remainder - hi_rest, remainder - lo_rest], in steps from u
        lo[rows] = np.maximum(lo[rows], -((-(remainder - hi_rest)) // b) - u[rows])
        hi[rows] = np.minimum(hi[rows], (remainder - lo_rest) // b - u[rows])
        free = np.zeros(st.z.size, dtype=bool)
        free[rows] = True
        if size // shape[axis] <= st.max_cells:
            ok = st.solve(free, lo, hi)
        else:
            # slices too big for one model: split them too, within the narrowed ranges
            saved = st.lo, st.hi
            st.lo, st.hi = lo, hi
            try:
                _round_part(st, {**fixed, axis: leaf})
                ok = True
            except _PartInfeasible:
                ok = False
            finally:
                st.lo, st.hi = saved
        st.parts_left -= 1
        if not ok:
            st.reopened += 1
            free = np.zeros(st.z.size, dtype=bool)
            for p in leaves[k:]:
                free[at(p)] = True
            free &= ~st.done
            if not st.solve(free, st.lo, st.hi):
                raise _PartInfeasible(fixed)
            return


class _PartInfeasible(Exception):
    """A part (and its re-opened remainder) has no rounding in its allowed range."""

    def __init__(self, fixed: dict[int, int]) -> None:
        super().__init__(f"part {fixed}")
        self.fixed = fixed


def _partitioned(grid: _Grid, z: np.ndarray, ctx: _Context, max_cells: int) -> tuple[np.ndarray | None, int, int]:
    """Round a table above ``max_cells`` part by part (see :func:`_round_part`).

    Returns the rounding (``None`` if a part had none), the number of programs solved and how
    many times remaining slices had to be re-opened."""
    lo, hi = _step_range(z, ctx.base, ctx.steps)
    st = _Partition(grid=grid, z=z, ctx=ctx, max_cells=max_cells, a=np.zeros(z.size, dtype=np.int64),
                    done=np.zeros(z.size, dtype=bool), lo=lo, hi=hi)
    try:
        _round_part(st, {})
    except _PartInfeasible:
        return None, st.programs, st.reopened
    return st.a, st.programs, st.reopened


# --------------------------------------------------------------------------------------------
# the entry point


def controlled_round(
    table: Table,
    *,
    base: int,
    steps: int = 0,
    solution: SolutionKind | str = SolutionKind.OPTIMAL,
    time_limit: float = 60.0,
    max_cells: int = DEFAULT_MAX_CELLS,
    direct_vars: int = 4_000,
    sequential_slice: int = 5_000,
    seed: int | None = None,
) -> ControlledResult:
    """Controlled rounding of every cell of ``table`` (000 §5.5, §5.5.1; METHODS.md §4).

    Args:
        base: the rounding base ``b``.
        steps: ``K``; 0 is zero-restricted rounding.
        solution: ``optimal``, ``first-feasible`` or ``rapid`` (000 §5.5.1.1).
        time_limit: seconds; the best rounding found by then is returned with its gap.
        max_cells: larger tables are partitioned (one LP relaxation per part, 000 §5.5.1).
        direct_vars: programs with at most this many variables go to the solver whole.
        sequential_slice: larger programs are rounded slice by slice along their longest
            dimension when its slices have at most this many cells (:class:`_Sequential`).
        seed: seed of the improvement phase's random choice of neighbourhoods.

    Raises:
        MethodError: no rounding of the requested kind exists (with a suggestion to allow one
            step more) or none was found within the time limit.

    >>> import pandas as pd, tabsafe as ts
    >>> cells = pd.DataFrame({"area": ["A", "A", "B", "B"], "sex": ["1", "2", "1", "2"], "n": [1, 0, 3, 3]})
    >>> t = ts.tabulate(ts.InnerCells.from_frame(cells, count="n"), ["area", "sex"])
    >>> res = controlled_round(t, base=5)
    >>> bool(t.with_values(count=res.values).is_additive()), bool((res.values % 5 == 0).all())
    (True, True)
    """
    _check_base_steps(base, steps)
    kind = SolutionKind.parse(solution)
    if not (isinstance(time_limit, (int, float)) and time_limit > 0):
        raise InputError(f"time_limit must be a positive number of seconds; got {time_limit!r}")
    if not isinstance(max_cells, int) or max_cells < 1:
        raise InputError(f"max_cells must be a positive integer; got {max_cells!r}")
    started = time.monotonic()
    z = np.asarray(table.counts, dtype=np.int64)
    if z.size and z.min() < 0:
        raise InputError(f"controlled rounding needs counts >= 0; got {int(z.min())}")
    grid = _Grid.of(table)
    nearest_bound = float(np.minimum(z % base, base - z % base).sum())
    if kind is SolutionKind.RAPID:
        values = rapid_round(table, base=base)
        obj = _objective(z, values)
        return ControlledResult(
            values=values, objective=obj, lower_bound=nearest_bound, bound_kind="nearest",
            gap=_gap(obj, nearest_bound), status="rapid", seconds=time.monotonic() - started, parts=0,
            notes=(("RAPID: inner cells at their nearest multiple, aggregates by addition; aggregates may "
                    "be several bases from their true values"),),
        )
    ctx = _Context(base=base, steps=steps, deadline=started + float(time_limit))
    A = grid.additivity
    u, r = np.divmod(z, base)
    n_vars = int(np.count_nonzero(r)) + (int(z.size + np.count_nonzero(np.minimum(steps, u))) if steps else 0)
    notes: list[str] = []
    if grid.size <= max_cells and n_vars <= direct_vars:
        values, status, bound = _solve_cells(
            A, z, np.ones(z.size, dtype=bool), np.zeros(z.size, dtype=np.int64), base=base, steps=steps,
            time_limit=ctx.remaining(), first_feasible=kind is SolutionKind.FIRST_FEASIBLE,
        )
        if values is None:
            _fail(status, base, steps, time_limit)
        obj = _objective(z, values)
        lb = max(nearest_bound, float(math.ceil(bound - 1e-6))) if bound is not None else nearest_bound
        return ControlledResult(
            values=values, objective=obj, lower_bound=lb, bound_kind="mip" if bound is not None else "nearest",
            gap=_gap(obj, lb), status="optimal" if status == "optimal" else "feasible",
            seconds=time.monotonic() - started, parts=1,
        )
    if grid.size > max_cells and _split_axis(grid, {}, grid.size, max_cells) is not None:
        return _round_partitioned(grid, z, ctx, max_cells, nearest_bound, started, time_limit)
    # Large programs: the LP relaxation (bound, guide, and a proof when no rounding exists), the
    # sequential rounding it guides, and the neighbourhood search for the rest of the time. The
    # solver's own heuristic on the whole program is the fallback when the table has no
    # dimension to go along or the sequential rounding fails.
    lower, bound_kind = nearest_bound, "nearest"
    # a few seconds of the solver on the whole program: its presolve proves at once when no
    # rounding exists in many cases where the LP relaxation is still feasible (sparse tables)
    _, status, _ = _solve_cells(
        A, z, np.ones(z.size, dtype=bool), np.zeros(z.size, dtype=np.int64), base=base, steps=steps,
        time_limit=min(3.0, 0.05 * ctx.remaining()), first_feasible=True,
    )
    if status == "infeasible":
        _fail(status, base, steps, time_limit)
    relax = _relaxation(A, z, base=base, steps=steps, time_limit=max(1.0, 0.4 * ctx.remaining()))
    if relax.status == "infeasible":
        _fail("infeasible", base, steps, time_limit)
    if relax.value is not None and math.ceil(relax.value - 1e-6) > lower:
        lower, bound_kind = float(math.ceil(relax.value - 1e-6)), "lp"
    values: np.ndarray | None = None
    status = "feasible"
    programs = 1
    axis = _sequential_axis(grid, max_slice=sequential_slice, group=8)
    if relax.steps is not None and axis is not None:
        seq = _Sequential(grid, z, ctx, axis, relax.steps,
                          deadline=time.monotonic() + 0.8 * ctx.remaining())
        values = seq.run()
        programs += seq.programs
        if values is not None:
            name = table.dimensions[axis].variable
            notes.append(
                f"rounded slice by slice along {name!r} guided by the LP relaxation ({seq.programs:,} "
                "integer programs" + (f"; the last group was enlarged {seq.regrouped} time(s)" if seq.regrouped else "")
                + ")")
        else:
            notes.append(f"the sequential rounding along {table.dimensions[axis].variable!r} found no rounding; "
                         "the whole program went to the solver")
    if values is None:
        share = ctx.remaining() * (0.9 if kind is SolutionKind.FIRST_FEASIBLE else 0.5)
        values, status, bound = _solve_cells(
            A, z, np.ones(z.size, dtype=bool), np.zeros(z.size, dtype=np.int64), base=base, steps=steps,
            time_limit=share, first_feasible=kind is SolutionKind.FIRST_FEASIBLE,
        )
        if values is None and status != "infeasible" and ctx.remaining() > 1:
            # no first solution in its share of the time: give the solver all the time that is left
            values, status, bound = _solve_cells(
                A, z, np.ones(z.size, dtype=bool), np.zeros(z.size, dtype=np.int64), base=base, steps=steps,
                time_limit=ctx.remaining(), first_feasible=True,
            )
        if values is None:
            _fail(status, base, steps, time_limit)
        if bound is not None and math.ceil(bound - 1e-6) > lower:
            lower, bound_kind = float(math.ceil(bound - 1e-6)), "mip"
    first = time.monotonic() - started
    rounds = 0
    if status != "optimal" and kind is SolutionKind.OPTIMAL and _objective(z, values) > lower:
        rng = np.random.default_rng(seed)
        before = _objective(z, values)
        values, rounds = _improve(grid, z, values, ctx, rng, target=lower, cells=2_000)
        notes.append(f"improved from {before:,} by searching {rounds:,} neighbourhoods of about 2,000 cells "
                     "(each solved exactly with the rest of the table fixed)")
    obj = _objective(z, values)
    return ControlledResult(
        values=values, objective=obj, lower_bound=lower, bound_kind=bound_kind, gap=_gap(obj, lower),
        status="optimal" if (status == "optimal" or obj <= lower) else "feasible",
        seconds=time.monotonic() - started, first_seconds=first, parts=programs + rounds, notes=tuple(notes),
    )


def _round_partitioned(
    grid: _Grid, z: np.ndarray, ctx: _Context, max_cells: int, nearest_bound: float, started: float,
    time_limit: float,
) -> ControlledResult:
    """A table above ``max_cells``: a short run of the solver on the whole program (its presolve
    proves at once that no rounding exists when that is so, and the error says to allow one step
    more), then the table part by part (:func:`_round_part`)."""
    A = grid.additivity
    check = min(20.0, 0.2 * ctx.remaining())
    values, status, _ = _solve_cells(
        A, z, np.ones(z.size, dtype=bool), np.zeros(z.size, dtype=np.int64), base=ctx.base, steps=ctx.steps,
        time_limit=check, first_feasible=True,
    )
    if status == "infeasible":
        _fail(status, ctx.base, ctx.steps, time_limit)
    notes = []
    programs, reopened = 1, 0
    if values is None:
        values, parts, reopened = _partitioned(grid, z, ctx, max_cells)
        programs += parts
        if values is None:
            kind = "zero-restricted" if ctx.steps == 0 else f"{ctx.steps}-step"
            raise MethodError(
                f"no {kind} controlled rounding to base {ctx.base} was found: the table was partitioned "
                f"({parts:,} parts of at most {max_cells:,} cells) and a part had no rounding that fits the "
                "parts rounded before it",
                hint=(f"allow --steps {ctx.steps + 1}, or a larger --time-limit so the whole program is tried "
                      "longer; --solution rapid gives an additive table whose aggregates may lie further away"),
            )
        notes.append(f"partitioned: {parts:,} parts of at most {max_cells:,} cells, each rounded with the cells "
                     "already rounded fixed" + (f"; {reopened} time(s) the remaining slices were re-opened "
                                                "and solved together" if reopened else ""))
    else:
        notes.append("the whole program was solved at once (first feasible solution)")
    obj = _objective(z, values)
    return ControlledResult(
        values=values, objective=obj, lower_bound=nearest_bound, bound_kind="nearest",
        gap=_gap(obj, nearest_bound), status="optimal" if obj <= nearest_bound else "feasible",
        seconds=time.monotonic() - started, parts=programs, notes=tuple(notes),
    )


def _gap(objective: float, bound: float) -> float:
    return 0.0 if objective <= 0 else max(0.0, (objective - bound) / objective)


def _fail(status: str, base: int, steps: int, time_limit: float) -> None:
    kind = "zero-restricted" if steps == 0 else f"{steps}-step"
    if status == "infeasible":
        raise MethodError(
            f"no {kind} controlled rounding to base {base} exists for this table",
            hint=f"allow rounding to a non-adjacent multiple with --steps {steps + 1}",
        )
    raise MethodError(
        f"no {kind} controlled rounding to base {base} was found within {time_limit:g} s",
        hint=f"raise --time-limit, or allow --steps {steps + 1}",
    )
