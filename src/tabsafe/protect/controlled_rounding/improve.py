"""Neighbourhood improvement: a large-neighbourhood search from an additive rounding.

It repeatedly frees a box of about ``neighbourhood_cells`` cells around a cell that went to the
far multiple (or, first, a cell outside its allowed steps) — on a grid a box of codes
(:func:`neighbourhood`), on a cell vector without a grid (a release) the cells related to it
(:func:`related_cells`) —, fixes the rest of the table and
solves that box exactly from the current values, so nothing gets worse and additivity holds
across the table. Each box is one integer program under a node cap; the boxes are chosen by a
generator with a fixed seed, so the search is deterministic: it stops when the work budget is
spent, when the objective reaches the lower bound, when a box covering the whole table is solved
to optimality, or after ``stall`` boxes in a row without a better rounding.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from tabsafe.protect.controlled_rounding.grid import Grid
from tabsafe.protect.controlled_rounding.program import PENALTY, Part, Problem, run_part
from tabsafe.protect.controlled_rounding.steps import objective, violation
from tabsafe.protect.controlled_rounding.work import Tuning, Work

__all__ = ["Improved", "improve", "neighbourhood", "related_cells"]


def neighbourhood(grid: Grid, rng: np.random.Generator, cells: int, around: int) -> np.ndarray:
    """A box of about ``cells`` cells around the cell ``around`` (a mask).

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
        tree = grid.trees[ax]
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


def related_cells(members: sp.csr_matrix, rng: np.random.Generator, cells: int, around: int) -> np.ndarray:
    """About ``cells`` cells related to the cell ``around`` (a mask), for a cell vector without a
    grid: breadth first over the relations (``members``: relation × cell incidence), each ring
    taken in a random order until the budget is reached. A move of one cell must be balanced in
    each of its relations, and those moves in theirs: the rings around a cell hold the cycles of
    relations along which a rounding can change while the rest stays fixed."""
    n = members.shape[1]
    by_cell = members.T.tocsr()
    free = np.zeros(n, dtype=bool)
    free[around] = True
    taken = 1
    frontier = np.array([around], dtype=np.int64)
    seen_rows = np.zeros(members.shape[0], dtype=bool)
    while taken < cells and frontier.size:
        rows = np.unique(by_cell[frontier].indices)
        rows = rows[~seen_rows[rows]]
        seen_rows[rows] = True
        ring = np.unique(members[rows].indices)
        ring = ring[~free[ring]]
        if ring.size == 0:
            break
        ring = rng.permutation(ring)[:cells - taken]
        free[ring] = True
        taken += ring.size
        frontier = ring
    return free


@dataclass(frozen=True, eq=False)
class Improved:
    """What the search did.

    Attributes:
        values: the best rounding found (never worse than the start).
        boxes: neighbourhoods solved.
        proven: a box covering the whole table was solved to optimality (the rounding is optimal).
        stalled: the search stopped after ``stall`` boxes without improvement.
    """

    values: np.ndarray
    boxes: int
    proven: bool = False
    stalled: bool = False


def improve(problem: Problem, a: np.ndarray, work: Work, tuning: Tuning, *, target: float) -> Improved:
    """Large-neighbourhood search from the additive rounding ``a`` (module docstring): first bring
    every cell into its allowed range (boxes around cells still outside it), then lower
    ``Σ|z − a|`` (boxes around cells rounded to the far multiple)."""
    grid, z, b, steps = problem.grid, problem.z, problem.base, problem.steps
    rng = np.random.default_rng(tuning.search_seed)
    if grid is not None:
        def box(centre: int) -> np.ndarray:
            return neighbourhood(grid, rng, tuning.neighbourhood_cells, centre)
    else:
        members = abs(sp.csr_matrix(problem.additivity))

        def box(centre: int) -> np.ndarray:
            return related_cells(members, rng, tuning.neighbourhood_cells, centre)
    viol = violation(z, a, b, steps)
    best = objective(z, a) + PENALTY * b * int(viol.sum())
    boxes = idle = 0
    while True:
        if viol.any():
            candidates = np.flatnonzero(viol)
        else:
            if best <= target:
                break
            far = np.abs(z - a) > np.minimum(z % b, b - z % b)
            candidates = np.flatnonzero(far)
            if candidates.size == 0:
                break
        if idle >= tuning.stall:
            return Improved(a, boxes, stalled=True)
        centre = int(candidates[rng.integers(candidates.size)])
        free = box(centre)
        res = run_part(problem, Part(free=free, values=a, warm=True), work, cap=tuning.neighbourhood_nodes)
        if res.status == "spent":
            break
        boxes += 1
        idle += 1
        if res.values is not None:
            v = violation(z, res.values, b, steps)
            value = objective(z, res.values) + PENALTY * b * int(v.sum())
            if value < best:
                idle = 0
            if value <= best:
                a, best, viol = res.values, value, v
            if free.all() and res.status == "optimal":
                return Improved(a, boxes, proven=not viol.any())
    return Improved(a, boxes)
