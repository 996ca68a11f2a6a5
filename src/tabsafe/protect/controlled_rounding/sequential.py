"""Sequential rounding: a large table slice by slice along one dimension, guided by the LP.

Why (seed 000 §5.5.1 "the optimisation procedure ... may take a long time for large tables"):
the whole program of a census table is too big for the solver's own heuristics (an 80K-cell
table: 16% above the bound after two minutes), while one slice (a table of the other variables,
a few hundred cells) is solved exactly in milliseconds, and the LP relaxation is nearly integral
and close to the optimum (0.5–1% below the best roundings found).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from tabsafe.protect.controlled_rounding.grid import Grid
from tabsafe.protect.controlled_rounding.program import Part, Problem, Pull, Rounds, run_part
from tabsafe.protect.controlled_rounding.work import Tuning, Work

__all__ = ["Sequential", "sequential_axis"]


def sequential_axis(grid: Grid, tuning: Tuning) -> int | None:
    """The dimension to round slice by slice: the one with the most codes, provided it has more
    codes than two tail groups and its slices are small enough for one quick integer program."""
    axis = max(range(len(grid.shape)), key=lambda ax: grid.shape[ax])
    n = grid.shape[axis]
    if n <= 2 * tuning.group or grid.size // n > tuning.sequential_slice:
        return None
    return axis


@dataclass
class Sequential(Rounds):
    """Controlled rounding of a large table slice by slice along one dimension ``v`` (the one with
    the most codes), each slice an exact integer program, steered by the LP relaxation.

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
    it stays within each cell's allowed steps because each program does. The number of programs
    is fixed by the table (one per unit, plus regrouping), each under a node cap, so the result
    is deterministic.

    Not a value object: it is the state of one run (the rounding so far). Use :meth:`run`.

    Attributes:
        problem: the rounding.
        axis: the dimension ``v``.
        w_lp: the LP relaxation's steps of every cell.
        work: the budget the programs are charged to.
        tuning: group, horizon, pull and node caps.
    """

    problem: Problem
    axis: int
    w_lp: np.ndarray
    work: Work
    tuning: Tuning
    a: np.ndarray = field(init=False)
    done: np.ndarray = field(init=False)
    programs: int = 0
    regrouped: int = 0

    def __post_init__(self) -> None:
        n = self.problem.z.size
        self.a = np.zeros(n, dtype=np.int64)
        self.done = np.zeros(n, dtype=bool)
        self.grid = self.problem.grid
        self.kids = {p: list(k) for p, k in self.grid.families[self.axis]}
        self.lo, self.hi = self.problem.ranges
        self.u = self.problem.u
        # smallest and largest allowed value of each cell, in multiples of the base
        self.floor, self.ceil = self.u + self.lo, self.u + self.hi

    def _idx(self, p: int) -> tuple:
        return tuple(p if ax == self.axis else slice(None) for ax in range(len(self.grid.shape)))

    def part(self, x: np.ndarray, p: int) -> np.ndarray:
        """The slice ``v = p`` of a cell array (a view, in the order of the other variables)."""
        return x.reshape(self.grid.shape)[self._idx(p)]

    def mask(self, codes: Sequence[int]) -> np.ndarray:
        return self.grid.cells({self.axis: list(codes)})

    def unit(self, code: int) -> list[int]:
        """The code and, if it has at most ``group`` children, their units (rounded together)."""
        kids = self.kids.get(code)
        if kids is None or len(kids) > self.tuning.group:
            return [code]
        return [code] + [c for k in kids for c in self.unit(k)]

    def boundary(self, code: int) -> list[int]:
        """Codes of a unit whose children are rounded afterwards, one unit at a time."""
        return [c for c in self.unit(code) if len(self.kids.get(c, ())) > self.tuning.group]

    def flexibility(self, code: int) -> int:
        return int(np.count_nonzero(self.part(self.hi - self.lo, code)))

    def solve(self, cells: np.ndarray, *, cap: int, relaxed: np.ndarray | None = None,
              ranges: tuple[np.ndarray, np.ndarray] | None = None, target: np.ndarray | None = None,
              gap: float | None = None) -> bool:
        """Round ``cells`` (optionally with a continuous look-ahead ``relaxed``) given the cells
        rounded so far; keep every relation among known cells."""
        free = cells if relaxed is None else cells | relaxed
        part = Part(free=free, values=self.a, ranges=ranges, rows=self.grid.closed_relations(self.done | free),
                    pull=None if target is None else Pull(target, self.tuning.pull), relaxed=relaxed)
        return self.take(run_part(self.problem, part, self.work, cap=cap, gap=gap), cells)

    def run(self) -> np.ndarray | None:
        """The rounding, or None when a program had none (or the budget ran out)."""
        tree = self.grid.trees[self.axis]
        roots = [int(p) for p in np.flatnonzero(tree.parent < 0)]
        for root in roots:
            if not self.solve(self.mask(self.unit(root)), cap=self.tuning.slice_nodes, target=self.w_lp):
                return None
            for code in self.boundary(root):
                if not self.children(code):
                    return None
        return self.a if bool(self.done.all()) else None

    def children(self, parent: int) -> bool:
        """Round the units of the children of ``parent`` (already rounded); see the class doc."""
        b, t = self.problem.base, self.tuning
        kids = sorted(self.kids[parent], key=self.flexibility)
        units = {k: self.unit(k) for k in kids}
        # D: rounded minus LP steps of the children done so far, relative to the parent's own
        w_parent = self.part(self.a, parent) // b - self.part(self.u, parent)
        drift = -(w_parent - self.part(self.w_lp, parent))
        lo_sum = sum(self.part(self.floor, k) for k in kids)
        hi_sum = sum(self.part(self.ceil, k) for k in kids)
        need = self.part(self.a, parent) // b
        head = kids[:-t.group]
        for i, k in enumerate(head):
            rest = kids[i + 1:]
            uk, lk, hk = self.part(self.u, k), self.part(self.floor, k), self.part(self.ceil, k)
            lo_sum, hi_sum = lo_sum - lk, hi_sum - hk
            target = np.full(self.problem.z.size, np.nan)
            for c in units[k]:
                self.part(target, c)[...] = self.part(self.w_lp, c)
            self.part(target, k)[...] = self.part(self.w_lp, k) - drift
            cells = self.mask(units[k])
            ok = False
            if len(rest) <= t.horizon:
                relaxed = self.mask([c for q in rest for c in units[q]])
                ok = self.solve(cells, relaxed=relaxed, target=target, cap=t.lookahead_nodes, gap=0.01)
            if not ok:
                lo, hi = self.lo.copy(), self.hi.copy()
                # need - a_k/b within [lo_sum, hi_sum]
                self.part(lo, k)[...] = np.maximum(self.part(lo, k), need - hi_sum - uk)
                self.part(hi, k)[...] = np.minimum(self.part(hi, k), need - lo_sum - uk)
                ok = self.solve(cells, ranges=(lo, hi), target=target, cap=2 * t.lookahead_nodes)
            if not ok:
                return False
            wk = self.part(self.a, k) // b - uk
            drift = drift + wk - self.part(self.w_lp, k)
            need = need - self.part(self.a, k) // b
        size = t.group
        while True:
            tail = kids[-size:]
            cells = self.mask([c for k in tail for c in units[k]])
            self.done &= ~cells
            if self.solve(cells, cap=t.slice_nodes):
                break
            if size >= len(kids) or self.work.spent():
                return False
            size = min(2 * size, len(kids))
            self.regrouped += 1
        return all(self.children(code) for k in kids for code in self.boundary(k))
