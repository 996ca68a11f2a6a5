"""Additivity restored: method ``additivity`` of the registry (seed 004 §3.3 stage 2; METHODS.md §7).

After cell-level perturbation (the cell key method, random rounding, the stochastic perturbation)
a table's margins are not the sums of its inner cells. The ONS 2011 census restored additivity
"by visiting single cells and pairs and adding −1/0/+1 until every row and column adds up,
minimising the total distance to the original table"; METHODS.md §7 allows the solver
formulation instead, which finds the nearest table, not one reachable by local moves:

    minimise  Σ_cells w·|a − z|   over integer a ≥ 0,  subject to  every aggregate = Σ its inner cells,

where ``z`` is the table given (the previous release) and ``w`` is 1, or ``FIXED_WEIGHT`` for the
cells of the margins the user keeps (``fixed``, ``fixed_margins``): those move only when they
cannot be kept (e.g. independently perturbed area totals that do not add up to their region),
and the report names them.

The program is stated over the inner cells alone: every margin and subtotal (of every
hierarchy) *is* the sum of the inner cells under it, so the published table is additive by
construction, and the distance of a margin is a pair of continuous columns ``P_m − Q_m = Σ a − z_m``.
Integer columns are only the inner cells' moves up and down. With ``keep_zeros`` (the default)
inner cells published as 0 stay 0: a sparse table stays sparse, no persons are invented in empty
cells, and the program only has columns for the non-zero inner cells.

How it is solved. First the LP relaxation of the whole program (interior point, then crossover
to a vertex): it bounds the distance, and its vertex is integral or nearly so — integral for
two-way tables (the constraint matrix is then a network matrix), and on the 80K-cell census table
after the cell key method 8% of its inner cells are fractional. Its inner cells rounded to
integers, margins by addition, are the first table (additive at once); when nothing was
fractional it is optimal. Otherwise a program of at most ``direct_cells`` free inner cells goes to
the integer solver whole; a larger one is improved part by part like controlled rounding's: the
fractional inner cells are ordered by the codes of the variables with the most codes first and
cut into parts of whole slices; each part is an exact integer program in which every other inner
cell keeps its current value, and its solution is taken only when the table gets closer (no part
ever makes it worse); sweeps over the parts repeat until one gains nothing, the LP bound is
reached, a given number of sweeps is done (``max_sweeps``: a budget whose result is the same on
any machine) or the time is up. Every part is feasible whatever the others hold (any inner values give
an additive table), so partitioning never fails. Small parts also keep HiGHS away from the root
separation rounds in which it was seen to overrun its time limit by minutes on 1,000-cell parts.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import scipy.sparse as sp

from tabsafe.capabilities import Capabilities, Reading
from tabsafe.errors import InputError, MethodError, Reason, Suggestion, param
from tabsafe.method import Examples, Outcome, TableMethod
from tabsafe.params import Bool, Int, Optional, Real, parameter
from tabsafe.model.margins import MarginList, ancestors, rollup, totals_from_inner

if TYPE_CHECKING:  # pragma: no cover
    from tabsafe.model.result import Protection, Report
    from tabsafe.model.table import Dimension, Table
    from tabsafe.model.release_cells import ReleaseCells

__all__ = ["FIXED_WEIGHT", "Additivity", "AdditivityResult", "restore_additivity", "restore_release"]

#: The cost of moving a kept cell by one, against 1 for any other cell: kept cells move only when
#: that saves more than this much distance elsewhere, which in practice means when they cannot be
#: kept at all.
FIXED_WEIGHT = 1000

#: The LP relaxation is solved for programs of up to this many covered cells. Measured (loaded
#: 2-core machine): 51K cells (the 80K-cell census table after the cell key method) 7 s; 157K
#: cells (the 7-variable hypercube, every inner cell under 127 margins) not solved in 600 s.
LP_MAX_CELLS = 100_000



# ------------------------------------------------------------------------------------------
# the cells of the program


def _axis_positions(dimensions: Sequence[Dimension], ids: np.ndarray) -> list[np.ndarray]:
    shape = [len(d) for d in dimensions]
    strides = np.cumprod([1] + shape[::-1])[:-1][::-1]
    return [(ids // int(s)) % n for s, n in zip(strides, shape)]


def _in_margins(dimensions: Sequence[Dimension], ids: np.ndarray, margins: Sequence[Sequence[str]],
                name: str) -> np.ndarray:
    """True for the cells (grid ids) of one of ``margins``."""
    variables = [d.variable for d in dimensions]
    pos = _axis_positions(dimensions, ids)
    mask = np.zeros(ids.size, dtype=bool)
    for margin in margins:
        unknown = [v for v in margin if v not in variables]
        if unknown:
            raise InputError(f"{param(name)} names {unknown[0]!r}, which is not a variable of the table "
                             f"({', '.join(variables)})")
        inside = np.ones(ids.size, dtype=bool)
        for axis, v in enumerate(variables):
            if v not in margin:
                inside &= pos[axis] == 0  # the total comes first in display order
        mask |= inside
    return mask


def _children_csr(dimensions: Sequence[Dimension]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per dimension, the children of each code position (CSR: pointers, child positions)."""
    out = []
    for d in dimensions:
        h = d.hierarchy
        kids = [[h.position[c] for c in h.children(code)] for code in h.order]
        ptr = np.concatenate([[0], np.cumsum([len(k) for k in kids])]).astype(np.int64)
        flat = np.array([p for k in kids for p in k], dtype=np.int64)
        out.append((ptr, flat))
    return out


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``concatenate([arange(s, s + c) for s, c in zip(starts, counts)])``, vectorised."""
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.cumsum(counts) - counts
    return np.repeat(starts - offsets, counts) + np.arange(total, dtype=np.int64)


@dataclass(frozen=True, eq=False)
class _Program:
    """The program over the *covered* cells: the free inner cells and every cell above one.

    Every covered margin has one defining relation, along the variable where its code has the
    fewest children: its value is the sum of those children (each a covered cell, or a cell no
    free inner cell lies under, which is 0). By induction every margin is then the sum of the inner
    cells under it, with far fewer non-zeros than one row per (margin, inner cell) pair: each cell
    is a child in at most one relation per variable, so the LP stays sparse.

    Attributes:
        ids: the covered cells (sorted grid ids).
        z: their values in the table given (0 where the table stores none).
        w: their weights (1, or ``FIXED_WEIGHT`` for cells to keep).
        inner: which covered cells are free inner cells (the integer columns).
        def_ptr, def_child: CSR of each covered cell's defining children (indices into ``ids``;
            none for inner cells).
        constant: the weighted distance of stored cells no free inner cell lies under (they
            become 0 whatever the program does).
        floor: the least value of each free inner cell: 0, or ``js + 1`` when values ``1..js``
            are excluded (then every margin, a sum of such cells, is 0 or above ``js`` too).
    """

    dimensions: tuple[Any, ...]
    ids: np.ndarray
    z: np.ndarray
    w: np.ndarray
    inner: np.ndarray
    def_ptr: np.ndarray
    def_child: np.ndarray
    constant: float
    floor: np.ndarray

    @classmethod
    def build(cls, table: Table, free_ids: np.ndarray, fixed: Sequence[Sequence[str]], fixed_margins: bool,
              z_table: np.ndarray, js: int = 0) -> _Program:
        dims = tuple(table.dimensions)
        ids, _ = rollup(dims, free_ids, np.ones(free_ids.size, dtype=np.int64))
        rows = table.rows_of(ids)
        z = np.zeros(ids.size, dtype=np.int64)
        z[rows >= 0] = z_table[rows[rows >= 0]]
        inner = np.zeros(ids.size, dtype=bool)
        inner[np.searchsorted(ids, free_ids)] = True
        keep = _in_margins(dims, ids, fixed, "fixed") if fixed else np.zeros(ids.size, dtype=bool)
        if fixed_margins:
            keep |= ~_leaf_mask(dims, ids)
        w = np.where(keep, FIXED_WEIGHT, 1).astype(np.float64)
        # stored cells outside the covered set end at 0
        rest = np.ones(table.n_stored, dtype=bool)
        rest[rows[rows >= 0]] = False
        w_rest = np.ones(table.n_stored)
        if fixed or fixed_margins:
            k_rest = _in_margins(dims, table.ids, fixed, "fixed") if fixed else np.zeros(table.n_stored, bool)
            if fixed_margins:
                k_rest |= ~table.leaf_mask
            w_rest = np.where(k_rest, FIXED_WEIGHT, 1.0)
        constant = float(w_rest[rest] @ np.abs(z_table[rest]))
        # defining relations
        pos = _axis_positions(dims, ids)
        shape = [len(d) for d in dims]
        strides = np.cumprod([1] + shape[::-1])[:-1][::-1]
        csr = _children_csr(dims)
        kids = np.stack([np.diff(ptr)[p] for (ptr, _), p in zip(csr, pos)]) if dims else np.zeros((0, ids.size))
        kids = np.where(kids > 0, kids, np.iinfo(np.int64).max)
        axis = np.argmin(kids, axis=0)
        margin = ~inner
        row_parts, child_parts = [], []
        for ax, ((ptr, flat), stride) in enumerate(zip(csr, strides)):
            m = np.flatnonzero(margin & (axis == ax))
            if m.size == 0:
                continue
            p = pos[ax][m]
            counts = ptr[p + 1] - ptr[p]
            child_pos = flat[_ranges(ptr[p], counts)]
            parent_rows = np.repeat(m, counts)
            child_ids = ids[parent_rows] + (child_pos - np.repeat(p, counts)) * int(stride)
            loc = np.minimum(np.searchsorted(ids, child_ids), ids.size - 1)
            found = ids[loc] == child_ids
            row_parts.append(parent_rows[found])
            child_parts.append(loc[found])
        rows_all = np.concatenate(row_parts) if row_parts else np.zeros(0, dtype=np.int64)
        child_all = np.concatenate(child_parts) if child_parts else np.zeros(0, dtype=np.int64)
        order = np.argsort(rows_all, kind="stable")
        def_child = child_all[order]
        def_ptr = np.concatenate([[0], np.cumsum(np.bincount(rows_all, minlength=ids.size))]).astype(np.int64)
        floor = np.where(inner, js + 1 if js else 0, 0).astype(np.int64)
        return cls(dimensions=dims, ids=ids, z=z, w=w, inner=inner, def_ptr=def_ptr, def_child=def_child,
                   constant=constant, floor=floor)

    def values(self, inner_values: np.ndarray) -> np.ndarray:
        """Every covered cell's value from the free inner cells' values (in ``ids`` order)."""
        _, sums = rollup(self.dimensions, self.ids[self.inner], inner_values)
        return sums

    def objective(self, values: np.ndarray) -> float:
        return float(self.w @ np.abs(values - self.z) + self.constant)

    def solve_part(self, part: np.ndarray, values: np.ndarray, *, time_limit: float, relax: bool = False,
                   lp_method: str | None = None) -> tuple[np.ndarray | None, Any]:
        """New values of the free inner cells ``part`` (indices into ``ids``), every other inner
        cell keeping its value in ``values``: the part's exact program (or its LP relaxation),
        Returns the new values of the part's cells and the solution."""
        from tabsafe.solver import INF, LinearProgram, solve

        above_ids, _ = rollup(self.dimensions, self.ids[part], np.ones(part.size, dtype=np.int64))
        above = np.searchsorted(self.ids, above_ids)
        rows = above[~self.inner[above]]  # the margins the part changes
        cols = np.concatenate([part, rows])
        n, m = part.size, rows.size
        col_of = np.full(self.ids.size, -1, dtype=np.int64)
        col_of[cols] = np.arange(n + m)
        counts = self.def_ptr[rows + 1] - self.def_ptr[rows]
        child = self.def_child[_ranges(self.def_ptr[rows], counts)]
        row_of_entry = np.repeat(np.arange(m), counts)
        var = col_of[child] >= 0
        # y = value − z per column; row r: y_m − Σ_var y_c = Σ_var z_c + Σ_const value_c − z_m
        rhs = np.zeros(m)
        np.add.at(rhs, row_of_entry[var], self.z[child[var]])
        np.add.at(rhs, row_of_entry[~var], values[child[~var]])
        rhs -= self.z[rows]
        Y = sp.csc_matrix(
            (np.concatenate([np.ones(m), -np.ones(int(var.sum()))]),
             (np.concatenate([np.arange(m), row_of_entry[var]]), np.concatenate([n + np.arange(m), col_of[child[var]]]))),
            shape=(m, n + m),
        )
        A = sp.hstack([Y, -Y], format="csc")
        z = self.z[cols]
        w = self.w[cols]
        is_inner = np.arange(n + m) < n
        f = self.floor[cols]  # an inner cell ends at f or above: up by at least f − z, down by at most z − f
        lower = np.concatenate([np.where(is_inner, np.maximum(f - z, 0), 0), np.zeros(n + m)])
        upper = np.concatenate([np.full(n + m, INF), np.where(is_inner, np.maximum(z - f, 0), INF)])
        lp = LinearProgram(c=np.concatenate([w, w]), A=A, row_lower=rhs, row_upper=rhs,
                           col_lower=lower.astype(np.float64), col_upper=upper.astype(np.float64),
                           integer=np.concatenate([is_inner, is_inner]))
        # no warm start: given the current values as incumbent, HiGHS skips the root heuristics that
        # find its best solutions (measured on the 20K-person census table: 44,278 with, 26,482
        # without, in 30 s); the caller keeps the better of the two instead
        sol = solve(lp, time_limit=max(0.05, time_limit), relax=relax, lp_method=lp_method, threads=1)
        if sol.x is None:
            return None, sol
        x = sol.x
        return z[:n] + np.rint(x[:n] - x[n + m:2 * n + m]).astype(np.int64), sol


def _leaf_mask(dimensions: Sequence[Dimension], ids: np.ndarray) -> np.ndarray:
    mask = np.ones(ids.size, dtype=bool)
    for d, p in zip(dimensions, _axis_positions(dimensions, ids)):
        leaf = np.array([d.hierarchy.is_leaf(c) for c in d.hierarchy.order])
        mask &= leaf[p]
    return mask


def _parts(prog: _Program, part_cells: int, focus: np.ndarray | None = None) -> list[np.ndarray]:
    """The free inner cells (or the ``focus`` cells among them, indices into ``ids``) cut into
    parts of at most ``part_cells`` cells, in slices of the variables with the most codes (a part
    ends at a slice boundary when it can)."""
    free = np.flatnonzero(prog.inner) if focus is None else np.sort(focus)
    pos = _axis_positions(prog.dimensions, prog.ids[free])
    axes = sorted(range(len(pos)), key=lambda ax: -len(prog.dimensions[ax].hierarchy.leaves))
    order = np.lexsort([pos[ax] for ax in reversed(axes)])
    first = pos[axes[0]][order]
    parts: list[np.ndarray] = []
    start, n = 0, order.size
    while start < n:
        end = min(n, start + part_cells)
        if end < n and first[end] == first[end - 1]:
            boundary = np.flatnonzero(first[start + 1:end] != first[start:end - 1])
            if boundary.size:
                end = start + 1 + int(boundary[-1])
        parts.append(free[order[start:end]])
        start = end
    return parts


@dataclass(frozen=True, kw_only=True)
class AdditivityResult:
    """Additivity restored and what is known about it.

    Attributes:
        cells: the table's cells (extended by cells the solution reaches that were not stored).
        values: the restored value of every cell of ``cells``: additive, integer, ≥ 0.
        distance: ``Σ|a − z|`` over all cells (unweighted).
        objective: the weighted distance the program minimised.
        lower_bound: a proven lower bound on the weighted distance (None if none was computed).
        bound_kind: ``"mip"`` (the solver's bound on the whole program) or ``"lp"`` (its LP
            relaxation).
        status: ``optimal`` (proven), ``feasible`` or ``unchanged`` (the table was additive).
        programs: integer programs solved.
        sweeps: sweeps over the parts (0: the whole program in one).
        seconds: wall time.
        notes: decisions worth telling the user.
    """

    cells: Any
    values: np.ndarray
    distance: int
    objective: float
    lower_bound: float | None
    bound_kind: str | None
    status: str
    programs: int
    sweeps: int
    seconds: float
    notes: tuple[str, ...] = field(default=())

    @property
    def gap(self) -> float | None:
        if self.lower_bound is None:
            return None
        return 0.0 if self.objective <= 0 else max(0.0, (self.objective - self.lower_bound) / self.objective)


def restore_additivity(
    table: Table,
    *,
    fixed: Sequence[Sequence[str]] = (),
    fixed_margins: bool = False,
    keep_zeros: bool = True,
    time_limit: float = 60.0,
    part_cells: int = 300,
    direct_cells: int = 1_000,
    max_sweeps: int | None = None,
    js: int = 0,
) -> AdditivityResult:
    """The nearest additive integer table to ``table`` (module docstring; 004 §3.3, METHODS.md §7).

    Args:
        fixed: margins (variables spanning each) whose cells keep their values where possible.
        fixed_margins: every margin and subtotal keeps its value where possible.
        keep_zeros: inner cells at 0 stay 0 (otherwise every inner cell of the grid may change).
        time_limit: seconds for the integer programs.
        part_cells: the most free inner cells of one part when the program is solved in parts.
        direct_cells: when the LP relaxation is fractional, programs with at most this many free
            inner cells are solved whole; larger ones are improved in parts.
        max_sweeps: the most sweeps of the cell-by-cell descent and of the parts (None: until a
            sweep gains nothing). A work budget: the same table and budget give the same result on
            any machine, the time limit then being only an outer guard that says when it fired.
        js: values ``1..js`` are never published (the cell key method's promise, issue #31): an
            inner cell given above 0 ends at ``js + 1`` or more (so every margin is 0 or above
            ``js`` too); needs ``keep_zeros``.

    >>> import pandas as pd, tabsafe as ts
    >>> cells = pd.DataFrame({"a": ["x", "x", "y", "y"], "b": ["u", "v", "u", "v"], "n": [3, 4, 2, 5]})
    >>> t = ts.tabulate(ts.InnerCells.from_frame(cells, count="n"), ["a", "b"])
    >>> noisy = t.with_values(count=t.counts + (t.ids == 0) * 2)  # the grand total 2 too high
    >>> res = restore_additivity(noisy)
    >>> bool(res.cells.with_values(count=res.values).is_additive()), res.distance
    (True, 2)
    """
    started = time.monotonic()
    deadline = started + float(time_limit)
    if js and not keep_zeros:
        raise InputError(f"{param('js')} keeps values 1..js out by keeping inner cells at 0 or above js: it needs "
                         f"{param('keep_zeros')}")
    if not keep_zeros:
        table = table.densify()
    z_table = _whole_counts(table)
    inner = table.leaf_mask
    free_rows = np.flatnonzero(inner & (z_table != 0) if keep_zeros else inner)
    prog = _Program.build(table, table.ids[free_rows], fixed, fixed_margins, z_table, js=js)
    a = np.maximum(prog.z[prog.inner], prog.floor[prog.inner])
    values = prog.values(a)
    if np.array_equal(values, prog.z) and prog.constant == 0 and np.array_equal(a, prog.z[prog.inner]):
        search = _Search(a=a, values=values, best=0.0, lower=0.0, bound_kind="lp", status="unchanged",
                         notes=("the table was additive already",))
    else:
        search = _start(prog, a, values, deadline, max_sweeps)
        search = _finish(prog, search, table, deadline, part_cells=part_cells, direct_cells=direct_cells,
                         max_sweeps=max_sweeps)
    status, notes = search.status, list(search.notes)
    if status != "optimal" and time.monotonic() >= deadline:
        # the work done depends on the machine's speed: say so rather than change results silently
        status = "time limit"
        notes.append(f"stopped by its time limit ({time_limit:g} s) before proving this the nearest table: "
                     "another machine may find another; a larger time_limit may find a nearer one")
    a = search.a
    cells, released = totals_from_inner(table, prog.ids[prog.inner], a)
    original = np.zeros(cells.n_stored, dtype=np.int64)
    src = table.rows_of(cells.ids)
    original[src >= 0] = z_table[src[src >= 0]]
    distance = int(np.abs(released - original).sum())
    return AdditivityResult(cells=cells, values=released, distance=distance, objective=prog.objective(prog.values(a)),
                            lower_bound=search.lower, bound_kind=search.bound_kind, status=status,
                            programs=search.programs, sweeps=search.sweeps, seconds=time.monotonic() - started,
                            notes=tuple(notes))


@dataclass(frozen=True, eq=False)
class _Search:
    """Where the search for the nearest additive table stands: the inner cells ``a`` and the
    whole table's ``values`` (margins by addition), their objective ``best``, the lower bound
    and its kind (``"lp"``, ``"mip"``), the fractional inner cells of the LP to improve first
    (``focus``), the programs and sweeps run, and the notes for the report."""

    a: np.ndarray
    values: np.ndarray
    best: float
    lower: float | None = None
    bound_kind: str | None = None
    focus: np.ndarray | None = None
    programs: int = 0
    sweeps: int = 0
    status: str = "feasible"
    notes: tuple[str, ...] = ()


def _start(prog: _Program, a: np.ndarray, values: np.ndarray, deadline: float, max_sweeps: int | None) -> _Search:
    """The first table (module docstring, "How it is solved"): the LP relaxation bounds the
    distance and is integral or nearly so — its inner cells rounded (margins by addition) are the
    first table, optimal when nothing was fractional. Without an LP (too large), each inner cell
    to its best value with the others fixed, sweep after sweep (cheap, and most of the way; after
    the rounded LP it would only lead the exact parts into a worse corner)."""
    notes: list[str] = []
    lower, guide, fractional = None, None, np.zeros(0, dtype=np.int64)
    if prog.ids.size <= LP_MAX_CELLS:
        lower, guide, fractional = _relaxation(prog, values, time_limit=max(1.0, 0.5 * (deadline - time.monotonic())))
    else:
        notes.append(f"no LP relaxation (and no bound) for a program of {prog.ids.size:,} cells "
                     f"(above {LP_MAX_CELLS:,})")
    focus = None
    if guide is not None and prog.objective(prog.values(guide)) < prog.objective(values):
        a, values = guide, prog.values(guide)
        focus = fractional
        if fractional.size:
            notes.append(f"started from the LP relaxation's inner cells rounded to integers "
                         f"({fractional.size:,} of {a.size:,} were fractional)")
    best = prog.objective(values)
    if guide is None:
        share = time.monotonic() + 0.5 * (deadline - time.monotonic())
        before = best
        best, descents = _descend(prog, values, share, max_sweeps)  # improves values in place
        a = values[prog.inner]
        if best < before:
            notes.append(f"cell-by-cell descent: {before - best:,.0f} closer in {descents} sweep(s)")
    return _Search(a=a, values=values, best=best, lower=lower, bound_kind="lp" if lower is not None else None,
                   focus=focus, notes=tuple(notes))


def _finish(prog: _Program, search: _Search, table: Table, deadline: float, *, part_cells: int, direct_cells: int,
            max_sweeps: int | None) -> _Search:
    """Unless the first table meets the bound: the whole program exactly when it has at most
    ``direct_cells`` free inner cells, else improved part by part, each part exact with the rest
    of the table fixed (module docstring); optimal when the distance reaches the lower bound."""
    a, values, best = search.a, search.values, search.best
    lower, bound_kind = search.lower, search.bound_kind
    programs, sweeps, notes = 0, 0, list(search.notes)
    if lower is not None and best <= lower + 0.5:
        pass  # optimal
    elif a.size <= direct_cells:
        new, sol = prog.solve_part(np.flatnonzero(prog.inner), values, time_limit=deadline - time.monotonic())
        programs = 1
        if new is not None and prog.objective(prog.values(new)) < best:
            a, values = new, prog.values(new)
            best = prog.objective(values)
        if sol.bound is not None and (lower is None or math.ceil(sol.bound - 1e-6) + prog.constant > lower):
            lower, bound_kind = float(math.ceil(sol.bound - 1e-6)) + prog.constant, "mip"
    else:
        best, programs, sweeps = _improve(prog, values, _parts(prog, part_cells, search.focus), deadline, lower,
                                          max_sweeps)  # improves values in place
        what = "the fractional inner cells" if search.focus is not None else "the inner cells"
        notes.append(f"improved {what} in parts of at most {part_cells:,} (slices of {_longest(table)!r}), each "
                     f"exact with the rest of the table fixed: {programs:,} programs in {sweeps} sweep(s)"
                     + (" (the most max_sweeps allows)" if sweeps == max_sweeps else ""))
        a = values[prog.inner]
    status = "optimal" if lower is not None and best <= lower + 0.5 else "feasible"
    return _Search(a=a, values=values, best=best, lower=lower, bound_kind=bound_kind, focus=search.focus,
                   programs=programs, sweeps=sweeps, status=status, notes=tuple(notes))


def restore_release(
    relations: sp.csr_matrix,
    z: np.ndarray,
    cover: sp.csr_matrix,
    *,
    weights: np.ndarray | None = None,
    js: int = 0,
    time_limit: float = 60.0,
    max_sweeps: int = 50,
) -> AdditivityResult:
    """Values of a release's cells near ``z`` that satisfy every table's relations at once
    (issue #31): every table additive, a shared cell one value, no value in ``1..js``.

        minimise  Σ w·|M·x − z|  over the finest cells x, whole numbers 0 or above js

    ``M`` (``cover``, :func:`tabsafe.model.finest.cover_matrix`) adds the finest cells of the
    release up into its cells: any such ``x`` gives an additive release whose shared cells agree,
    and, every finest cell being 0 or above ``js``, so is every sum of them — every published
    value (a table's inner cell is a sum of finest cells too; unlike one table, a cell published
    0 may have to move, when two tables split the same records differently). One integer
    program over the release's relations with the exclusion as binary columns was tried first:
    HiGHS found no solution to it in minutes on the issue's 5,382-cell release. So: the LP
    relaxation over the finest cells, its values rounded (to 0 or ``js + 1`` below ``js + 1``),
    then each finest cell in turn moved to its best value with the others fixed, sweep after sweep
    (``max_sweeps``: a work budget; the same release gives the same values on any machine). The
    distance is reported beside the bound of the LP relaxation over the relations alone (a
    relaxation of this program).

    Args:
        relations: the release's relations (:attr:`~tabsafe.model.release_cells.ReleaseCells.relations`).
        z: the values given, one per release cell (whole numbers).
        cover: which finest cells each release cell adds up.
        weights: per cell, the cost of a unit move (default 1).
        js: values ``1..js`` are excluded.
        time_limit: seconds (an outer guard: the result says when it fired).
        max_sweeps: the most sweeps of the cell-by-cell descent.
    """
    started = time.monotonic()
    deadline = started + float(time_limit)
    z = np.asarray(z, dtype=np.int64)
    w = np.ones(z.size) if weights is None else np.asarray(weights, dtype=np.float64)
    A = sp.csr_matrix(relations, dtype=np.float64)
    M = sp.csc_matrix(cover, dtype=np.float64)
    if not np.any(np.abs(A @ z) > 0) and not (js and np.any((z >= 1) & (z <= js))) and z.min(initial=0) >= 0:
        return AdditivityResult(cells=None, values=z.copy(), distance=0, objective=0.0, lower_bound=0.0,
                                bound_kind="lp", status="unchanged", programs=0, sweeps=0,
                                seconds=time.monotonic() - started, notes=("the release was additive already",))
    lower = _release_bound(A, z, w, time_limit=max(1.0, 0.4 * time_limit))
    x = _cover_relaxation(M, z, w, time_limit=max(1.0, 0.4 * (deadline - time.monotonic())))
    f = js + 1 if js else 1
    v = np.rint(x)
    x = np.where((v > 0) & (v < f), np.where(x >= f / 2, f, 0), v).astype(np.int64)
    sweeps = _descend_cover(M, z, w, x, f, deadline, max_sweeps)
    a = np.rint(M @ x).astype(np.int64)
    if np.any(np.abs(A @ a) > 0.5):  # by construction it cannot be: never publish it if it were
        raise MethodError("the finest cells do not add up to an additive release", reason=Reason.NOT_FOUND)
    objective = float(w @ np.abs(a - z))
    notes = [f"the release's finest cells from the LP relaxation, rounded, then moved one by one: {sweeps} sweep(s)"
             + (" (the most max_sweeps allows)" if sweeps == max_sweeps else "")]
    status = "optimal" if lower is not None and objective <= lower + 0.5 else "feasible"
    if status != "optimal" and time.monotonic() >= deadline:
        status = "time limit"
        notes.append(f"stopped by its time limit ({time_limit:g} s): a larger time_limit may find a nearer release")
    return AdditivityResult(cells=None, values=a, distance=int(np.abs(a - z).sum()), objective=objective,
                            lower_bound=lower, bound_kind="lp" if lower is not None else None, status=status,
                            programs=2, sweeps=sweeps, seconds=time.monotonic() - started, notes=tuple(notes))


def _release_bound(A: sp.csr_matrix, z: np.ndarray, w: np.ndarray, *, time_limit: float) -> float | None:
    """The LP relaxation of ``min Σ w|a − z|`` over ``a ≥ 0`` with ``A a = 0``, rounded up: a
    lower bound on the distance of any additive release (None when not solved in time)."""
    from tabsafe.solver import INF, LinearProgram, solve

    n = z.size
    rhs = -(A @ z)
    lp = LinearProgram(c=np.concatenate([w, w]), A=sp.csc_matrix(sp.hstack([A, -A])), row_lower=rhs, row_upper=rhs,
                       col_lower=np.zeros(2 * n), col_upper=np.concatenate([np.full(n, INF), z.astype(np.float64)]))
    sol = solve(lp, relax=True, lp_method="ipm", time_limit=time_limit)
    if sol.status != "optimal" or sol.objective is None:
        return None
    return float(math.ceil(sol.objective - 1e-6))


def _cover_relaxation(M: sp.csc_matrix, z: np.ndarray, w: np.ndarray, *, time_limit: float) -> np.ndarray:
    """Real finest cells ``x ≥ 0`` minimising ``Σ w|M x − z|`` (the LP relaxation; zeros when
    it was not solved in time)."""
    from tabsafe.solver import INF, LinearProgram, solve

    n, k = M.shape
    lp = LinearProgram(c=np.concatenate([np.zeros(k), w, w]),
                       A=sp.csc_matrix(sp.hstack([M, -sp.identity(n), sp.identity(n)])),
                       row_lower=z.astype(np.float64), row_upper=z.astype(np.float64),
                       col_lower=np.zeros(k + 2 * n), col_upper=np.full(k + 2 * n, INF))
    sol = solve(lp, relax=True, lp_method="ipm", time_limit=time_limit)
    return np.maximum(sol.x[:k], 0.0) if sol.x is not None else np.zeros(k)


def _descend_cover(M: sp.csc_matrix, z: np.ndarray, w: np.ndarray, x: np.ndarray, f: int, deadline: float,
                   max_sweeps: int) -> int:
    """Each finest cell in turn to its best value (0, or ``f`` or more) with the others fixed —
    a weighted median of the values that would make each cell above it exact — sweep after
    sweep until nothing moves, ``max_sweeps`` or the time; ``x`` is updated in place."""
    r = M @ x - z  # residual per release cell
    ptr, idx = M.indptr, M.indices
    sweeps = 0
    while sweeps < max_sweeps and time.monotonic() < deadline:
        sweeps += 1
        moved = 0
        for j in range(x.size):
            rows = idx[ptr[j]:ptr[j + 1]]
            if rows.size == 0:
                continue
            xj = int(x[j])
            targets = xj - r[rows]  # the value of x_j that makes each cell above it exact
            ww = w[rows]
            order = np.argsort(targets, kind="stable")
            cum = np.cumsum(ww[order])
            best = int(round(targets[order][np.searchsorted(cum, cum[-1] / 2.0)]))
            candidates = {max(best, 0)}
            if 0 < best < f:
                candidates = {0, f}
            cost_now = float(ww @ np.abs(r[rows]))
            pick, pick_cost = xj, cost_now
            for c in sorted(candidates):
                cost = float(ww @ np.abs(r[rows] + (c - xj)))
                if cost < pick_cost - 1e-9:
                    pick, pick_cost = c, cost
            if pick != xj:
                r[rows] += pick - xj
                x[j] = pick
                moved += 1
        if moved == 0:
            break
    return sweeps


def _improve(prog: _Program, values: np.ndarray, parts: list[np.ndarray], deadline: float,
             lower: float | None, max_sweeps: int | None = None) -> tuple[float, int, int]:
    """Solve the parts in turn, each exactly with the rest of the table fixed, sweep after sweep
    until a sweep gains nothing, the bound is reached, ``max_sweeps`` sweeps are done or the time
    is up; ``values`` is updated in place. Returns the objective, the programs solved and the sweeps."""
    from tabsafe import progress

    best = prog.objective(values)
    programs = sweeps = 0
    while (time.monotonic() < deadline and not (lower is not None and best <= lower + 0.5)
           and (max_sweeps is None or sweeps < max_sweeps)):
        sweeps += 1
        for k, part in enumerate(parts):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            new, _ = prog.solve_part(part, values, time_limit=max(0.5, left / (len(parts) - k)))
            programs += 1
            if new is None:
                continue
            old = values[part]
            moved = new != old
            if moved.any():
                d_ids, d_vals = rollup(prog.dimensions, prog.ids[part[moved]], (new - old)[moved])
                at = np.searchsorted(prog.ids, d_ids)
                before = prog.objective(values)
                values[at] += d_vals
                if prog.objective(values) > before:  # a part stopped by its time limit can be worse
                    values[at] -= d_vals
            progress.report("additivity", done=k + 1, total=len(parts), objective=prog.objective(values))
        value = prog.objective(values)
        gained = best - value
        best = min(best, value)
        if gained < 0.5:
            break
    return best, programs, sweeps


def _descend(prog: _Program, values: np.ndarray, deadline: float, max_sweeps: int | None = None) -> tuple[float, int]:
    """Coordinate descent: each free inner cell in turn moves to the value that minimises the
    distance with every other cell fixed — a weighted median of its own given value and, for
    each margin above it, the value that would make that margin exact (the L1 distance is convex
    and piecewise linear in one cell) — sweep after sweep until nothing moves, ``max_sweeps``
    sweeps are done or the time is up;
    ``values`` is updated in place (the ONS 2011 procedure's single-cell moves, 004 §3.3, each
    taken whole). Returns the objective and the sweeps."""
    inner = np.flatnonzero(prog.inner)
    above_ids, src = ancestors(prog.dimensions, prog.ids[inner])
    above = np.searchsorted(prog.ids, above_ids)
    order = np.argsort(src, kind="stable")
    above, src = above[order], src[order]
    ptr = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=inner.size))])
    z, w = prog.z, prog.w
    sweeps = 0
    while time.monotonic() < deadline and (max_sweeps is None or sweeps < max_sweeps):
        sweeps += 1
        moved = 0
        for j, cell in enumerate(inner):
            ms = above[ptr[j]:ptr[j + 1]]
            a = values[cell]
            targets = np.concatenate([[z[cell]], z[ms] - values[ms] + a])
            weights = np.concatenate([[w[cell]], w[ms]])
            order_t = np.argsort(targets, kind="stable")
            t_sorted = targets[order_t]
            cum = np.cumsum(weights[order_t])
            half = cum[-1] / 2.0
            lo = t_sorted[np.searchsorted(cum, half)]  # the weighted medians form [lo, hi]
            hi = t_sorted[min(np.searchsorted(cum, half, side="right"), t_sorted.size - 1)]
            new = max(int(min(max(a, lo), hi)), int(prog.floor[cell]))
            if new != a:
                values[cell] = new
                values[ms] += new - a
                moved += 1
            if j % 4096 == 0 and time.monotonic() > deadline:
                break
        if moved == 0:
            break
    return prog.objective(values), sweeps


def _longest(table: Table) -> str:
    return max(table.dimensions, key=lambda d: len(d.hierarchy.leaves)).variable


def _relaxation(prog: _Program, values: np.ndarray, *,
                time_limit: float) -> tuple[float | None, np.ndarray | None, np.ndarray]:
    """The LP relaxation of the whole program (interior point, then crossover to a vertex): its
    optimum rounded up (the distance is an integer), its inner cells rounded to integers, and the
    inner cells (indices into ``ids``) it left fractional; ``(None, None, [])`` when it was not
    solved in time."""
    free = np.flatnonzero(prog.inner)
    _, sol = prog.solve_part(free, values, time_limit=time_limit, relax=True, lp_method="ipm")
    if sol.status != "optimal" or sol.objective is None or sol.x is None:
        return None, None, np.zeros(0, dtype=np.int64)
    n, m = free.size, prog.ids.size - free.size
    x = sol.x
    exact = prog.z[free] + x[:n] - x[n + m:2 * n + m]
    inner = np.maximum(np.rint(exact), prog.floor[free]).astype(np.int64)
    fractional = free[np.abs(exact - np.rint(exact)) > 1e-6]
    return float(math.ceil(sol.objective - 1e-6)) + prog.constant, inner, fractional


def _whole_counts(table: Table) -> np.ndarray:
    z = np.asarray(table.counts)
    if z.dtype.kind == "f":
        if np.isnan(z).any():
            raise InputError("additivity needs a value in every cell; the table has suppressed (empty) cells")
        if not np.all(z == np.round(z)):
            raise InputError("additivity restores tables of whole numbers; the table has fractional values")
    if z.dtype.kind not in "iuf":
        raise InputError(f"additivity needs numeric counts; got {z.dtype}")
    return z.astype(np.int64)


@dataclass(frozen=True, kw_only=True)
class Additivity(TableMethod):
    """Additivity restored: the nearest integer table whose cells add up (004 §3.3, stage 2).

    Every margin and subtotal of every hierarchy becomes the sum of the inner cells under it,
    with the smallest total distance ``Σ|a − z|`` to the table given (the release of the previous
    step in a chain such as ``ckm,additivity``), found as an integer program. Cells of the margins
    in ``fixed`` (or every margin, with ``fixed_margins``) keep their values unless they cannot:
    the report names those that moved. The report also says how far cells moved.

    Attributes:
        fixed: margins whose cells keep their values where possible, by the variables spanning
            each: area keeps the area totals (region subtotals and grand total included),
            area*sex,age the area × sex margin and the age margin.
        fixed_margins: keep every margin and subtotal where possible; only inner cells move.
        keep_zeros: inner cells published as 0 stay 0 (a sparse table stays sparse, no persons are
            invented in empty cells).
        time_limit: seconds for the integer programs; the best table found by then is published.
        part_cells: the most inner cells of one part of a large program (over 1,000 free inner
            cells: it starts from its LP relaxation rounded, then parts of it are solved exactly with
            the rest of the table fixed, sweep after sweep).
        js: values 1..js are never published: an inner cell given above 0 stays above js (the
            cell key method's promise); by default the previous step's (js of ckm in ckm,additivity),
            else 0.
    """

    name: ClassVar[str] = "additivity"
    #: restores additivity; an additive table comes back as it was; a release in one program
    declared: ClassVar[Capabilities] = Capabilities(additive=True, publishes_unchanged=True, joint=True)

    fixed: tuple[tuple[str, ...], ...] | None = parameter(None, check=Optional(MarginList()))
    fixed_margins: bool = parameter(False, check=Bool())
    keep_zeros: bool = parameter(True, check=Bool())
    time_limit: float = parameter(60.0, check=Real(min=0, min_open=True))
    part_cells: int = parameter(300, check=Int(min=10))
    js: int | None = parameter(None, check=Optional(Int(min=0, max=100)))

    def validate(self) -> None:
        if self.js and not self.keep_zeros:
            raise InputError(f"{param('js')} keeps values 1..js out by keeping inner cells at 0 or above js: it needs "
                             f"{param('keep_zeros')}")

    def follow(self, previous: Any) -> Additivity:
        """After a step that never publishes ``1..js`` (the cell key method), keep them out too
        (issue #31), unless ``js`` was given."""
        from dataclasses import replace

        excluded = previous.reading().excluded
        return replace(self, js=excluded) if self.js is None and excluded else self

    def reading(self) -> Reading:
        return Reading(excluded=self.js or 0)

    def protect_release(self, cells: ReleaseCells, *, seed: int | None = None) -> tuple[tuple[Protection, ...], Report]:
        """Restore additivity over a whole release in one program (:func:`restore_release`):
        every table additive, a shared cell one value, values ``1..js`` kept out, the distance
        beside its LP bound. The release given must agree on its shared cells (the cell key
        method's does)."""
        from tabsafe.model.result import Report
        from tabsafe.model.finest import protections_of

        z = cells.combine("count")
        if np.isnan(z).any() or not np.all(z == np.round(z)):
            raise InputError("additivity restores releases of whole numbers in every cell")
        leaf = cells.leaf
        kept = np.zeros(cells.n_cells, dtype=bool)
        for t, rows in zip(cells.tables, cells.cells):
            if self.fixed:
                kept[rows[_in_margins(t.dimensions, t.ids, self.fixed, "fixed")]] = True
        if self.fixed_margins:
            kept |= ~leaf  # every cell that is no table's inner cell
        from tabsafe.model.finest import cover_matrix

        res = restore_release(cells.relations, z.astype(np.int64), cover_matrix(cells), js=self.js or 0,
                              weights=np.where(kept, FIXED_WEIGHT, 1.0), time_limit=self.time_limit)
        moved = res.values != z
        figures: dict[str, Any] = {
            "tables": len(cells.tables), "cells": cells.n_cells, "shared_cells": int((cells.shared() > 1).sum()),
            "cells_changed": int(moved.sum()), "max_abs_change": int(np.abs(res.values - z).max(initial=0)),
            "distance": res.distance, "objective": round(res.objective, 1), "lower_bound": res.lower_bound,
            "bound": res.bound_kind, "gap": None if res.gap is None else round(res.gap, 4), "status": res.status,
            "seconds": round(res.seconds, 2),
        }
        if kept.any():
            figures["fixed_cells"] = int(kept.sum())
            figures["fixed_cells_not_kept"] = int((kept & moved).sum())
        notes = (*res.notes, "one program over every table of the release: every table is additive and a cell the "
                             "tables share has one value" + (f"; no value in 1..{self.js}" if self.js else ""))
        report = Report(method=self.name, params=self.params(), figures=figures, notes=notes)
        return protections_of(cells, res.values, report), report

    @classmethod
    def examples(cls) -> Examples:
        return Examples(
            typical=(cls(), cls(fixed=(("area",),)), cls(fixed_margins=True, part_cells=10)),
            identity=cls(),
        )

    def memory_estimate(self, table: Table) -> int:
        # the program has a row and four columns per covered cell (about the stored cells), each
        # cell a child in at most one relation per variable; the interior point solver's
        # factorisation dominates: about 2 KB per cell measured on the census tables
        cells = table.n_stored if self.keep_zeros else table.n_cells
        return int(cells * 2_000 + super().memory_estimate(table))

    def apply(self, table: Table, seed: int | None) -> Outcome:
        """Solve the program; publish the additive table; report distances and kept cells."""
        res = restore_additivity(table, fixed=self.fixed or (), fixed_margins=self.fixed_margins,
                                 keep_zeros=self.keep_zeros, time_limit=self.time_limit, part_cells=self.part_cells,
                                 js=self.js or 0)
        cells, values = res.cells, res.values
        before = cells.counts
        moved = values != before
        n = cells.n_cells
        figures: dict[str, Any] = {
            "cells": n,
            "bound": res.bound_kind,
            "status": res.status,
            "programs": res.programs,
            "seconds": round(res.seconds, 2),
        }
        # distances from the input are figures of the originals when additivity runs on them (alone,
        # or after a microdata method): private, for evaluation outputs only (issue #25)
        private: dict[str, Any] = {
            "cells_changed": int(np.count_nonzero(moved)),
            "share_changed": round(int(np.count_nonzero(moved)) / n, 4) if n else 0.0,
            "max_abs_change": int(np.abs(values - before).max(initial=0)),
            "mean_abs_change": round(res.distance / n, 4) if n else 0.0,
            "distance": res.distance,
            # the program minimises the distance with kept cells' moves weighted FIXED_WEIGHT:
            # objective, bound and gap are in those units (equal to the distance without kept cells)
            "objective": round(res.objective, 1),
            "lower_bound": res.lower_bound,
            "gap": None if res.gap is None else round(res.gap, 4),
        }
        notes = list(res.notes)
        if self.fixed or self.fixed_margins:
            kept = _in_margins(cells.dimensions, cells.ids, self.fixed or (), "fixed") if self.fixed else \
                np.zeros(cells.n_stored, bool)
            if self.fixed_margins:
                kept |= ~cells.leaf_mask
            lost = np.flatnonzero(kept & moved)
            figures["fixed_cells"] = int(np.count_nonzero(kept))
            figures["fixed_cells_not_kept"] = int(lost.size)
            figures["not_kept"] = [_codes(cells, i) for i in lost[:50]]
            if lost.size:
                shown = "; ".join(", ".join(f"{k}={v}" for k, v in _codes(cells, i).items()) for i in lost[:5])
                notes.append(f"{lost.size:,} of the cells to keep could not be kept (they did not add up): {shown}"
                             + (" …" if lost.size > 5 else ""))
        notes.append("every margin and subtotal is the sum of the inner cells under it")
        return Outcome(cells=cells, release={"count": values}, figures=figures, private=private, notes=tuple(notes))


def _codes(table: Table, row: int) -> dict[str, str]:
    return {d.variable: d.hierarchy.order[int(p[row])] for d, p in
            zip(table.dimensions, (table.positions(ax) for ax in range(len(table.dimensions))))}
