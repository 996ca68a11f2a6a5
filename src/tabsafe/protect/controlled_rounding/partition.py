"""Partitioning: tables above ``part_cells`` rounded part by part (seed 000 §5.5.1 "Very large
tables": tau-ARGUS partitions above ~150K cells).

A part above the limit is split along one flat variable ``v``: first its margin slice (``v`` =
Total, itself a complete table of the other variables, rounded recursively), then the slices of
the codes of ``v`` one after the other, each with every relation among rounded cells and a
per-cell range that keeps the rest of the margin reachable by the later slices (the last slice is
the margin minus the others). This is a heuristic: the per-cell rule is necessary, not
sufficient, so a slice can turn out to have no rounding; the remaining slices are then re-opened
and solved in one program, and if that fails too the partitioned rounding fails.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from tabsafe.protect.controlled_rounding.grid import Grid
from tabsafe.protect.controlled_rounding.program import Part, Problem, Rounds, run_part
from tabsafe.protect.controlled_rounding.work import Tuning, Work

__all__ = ["Partitioned", "partitioned", "split_axis"]


def split_axis(grid: Grid, fixed: Mapping[int, int]) -> int | None:
    """The axis to split a part along: the flat one (every code under Total is a leaf) with the
    most codes, so the parts are as small as possible (the solver's time grows faster than a
    part's size); None if there is none."""
    flat = [ax for ax in range(len(grid.shape)) if ax not in fixed and grid.shape[ax] >= 3
            and len(grid.families[ax]) == 1]
    if not flat:
        return None
    return max(flat, key=lambda ax: grid.shape[ax])


@dataclass(frozen=True, eq=False)
class Partitioned:
    """The result of a partitioned rounding.

    Attributes:
        values: the rounding, or None when a part had no rounding that fits the parts before it.
        parts: how many part programs were solved.
        reopened: how many times the remaining slices had to be re-opened and solved together.
    """

    values: np.ndarray | None
    parts: int
    reopened: int


class _PartFailed(Exception):
    """A part (and its re-opened remainder) has no rounding in its allowed range."""


@dataclass
class _State(Rounds):
    """One partitioned rounding in progress (not a value object): the values so far, which cells
    are rounded, and the allowed ranges of the cells still open."""

    problem: Problem
    work: Work
    tuning: Tuning
    part_cells: int
    a: np.ndarray
    done: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    programs: int = 0
    reopened: int = 0
    grid: Grid = field(init=False)

    def __post_init__(self) -> None:
        self.grid = self.problem.grid

    def solve(self, free: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> bool:
        """One integer program: the free cells, with every relation among free and rounded cells."""
        part = Part(free=free, values=self.a, ranges=(lo, hi), rows=self.grid.closed_relations(self.done | free))
        return self.take(run_part(self.problem, part, self.work, cap=self.tuning.part_nodes, first_feasible=True),
                         free)

    def round(self, fixed: Mapping[int, int]) -> None:
        """Round the part with the codes ``fixed`` (axis → position), recursively.

        Each slice ``k`` is rounded with its own relations and, cell by cell, a range such that
        ``M − Σ_{j≤k} a_j ∈ [Σ_{j>k} lo_j, Σ_{j>k} hi_j]`` for the margin ``M``, so the last slice
        is the margin minus the others and is additive and within its range by construction.
        Additivity across parts holds because every relation between two parts is either a
        constraint of the later part or this remainder rule."""
        grid, b = self.grid, self.problem.base
        size = int(np.prod([1 if ax in fixed else n for ax, n in enumerate(grid.shape)]))
        axis = split_axis(grid, fixed) if size > self.part_cells else None
        if axis is None:
            if not self.solve(grid.cells(fixed) & ~self.done, self.lo, self.hi):
                raise _PartFailed
            return
        root, leaves = grid.families[axis][0]
        self.round({**fixed, axis: root})
        u = self.problem.u

        def at(p: int) -> np.ndarray:
            return np.flatnonzero(grid.cells({**fixed, axis: p}))

        margin_rows = at(root)
        alo, ahi = b * (u + self.lo), b * (u + self.hi)
        for k, leaf in enumerate(leaves):
            rows = at(leaf)
            if k == len(leaves) - 1:
                self.a[rows] = self.a[margin_rows] - sum(self.a[at(p)] for p in leaves[:-1])
                self.done[rows] = True
                break
            later = leaves[k + 1:]
            remainder = self.a[margin_rows] - sum((self.a[at(p)] for p in leaves[:k]),
                                                  np.zeros(rows.size, dtype=np.int64))
            lo_rest = sum(alo[at(p)] for p in later)
            hi_rest = sum(ahi[at(p)] for p in later)
            lo, hi = self.lo.copy(), self.hi.copy()
            # a_k in [remainder - hi_rest, remainder - lo_rest], in steps from u
            lo[rows] = np.maximum(lo[rows], -((-(remainder - hi_rest)) // b) - u[rows])
            hi[rows] = np.minimum(hi[rows], (remainder - lo_rest) // b - u[rows])
            if size // grid.shape[axis] <= self.part_cells:
                free = np.zeros(u.size, dtype=bool)
                free[rows] = True
                ok = self.solve(free, lo, hi)
            else:
                # slices too big for one program: split them too, within the narrowed ranges
                saved = self.lo, self.hi
                self.lo, self.hi = lo, hi
                try:
                    self.round({**fixed, axis: leaf})
                    ok = True
                except _PartFailed:
                    ok = False
                finally:
                    self.lo, self.hi = saved
            if not ok:
                self.reopened += 1
                free = np.zeros(u.size, dtype=bool)
                for p in leaves[k:]:
                    free[at(p)] = True
                if not self.solve(free & ~self.done, self.lo, self.hi):
                    raise _PartFailed
                return


def partitioned(problem: Problem, work: Work, tuning: Tuning, part_cells: int) -> Partitioned:
    """Round a table above ``part_cells`` part by part (module docstring)."""
    lo, hi = problem.ranges
    n = problem.z.size
    st = _State(problem=problem, work=work, tuning=tuning, part_cells=part_cells, a=np.zeros(n, dtype=np.int64),
                done=np.zeros(n, dtype=bool), lo=lo.copy(), hi=hi.copy())
    try:
        st.round({})
    except _PartFailed:
        return Partitioned(None, st.programs, st.reopened)
    return Partitioned(st.a, st.programs, st.reopened)
