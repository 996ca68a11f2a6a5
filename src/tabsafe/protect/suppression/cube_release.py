"""A release whose largest tables only the hypercube mode can take: moves inside those tables,
the elimination over the others together, joined at the cells they share (issue #28).

Parts. Each table the elimination cannot take (a *cube*: :meth:`CellSuppression.cube_tables`) is
one part; the other tables together are *the rest*. A release cell two parts hold is an
*interface* cell (in the demo's release, 1,935 region-level cells of the 7-variable hypercube's
997,920 that the area tables also publish).

Why the parts can be protected apart. An intruder's feasible tables are those that keep the
release's relations and published values (seed 000 §5.3, METHODS.md §10). A change of one part's
cells that keeps that part's relations and published cells and changes no interface cell is,
extended by zero, a change of the whole release that keeps everything published. So:

* a primary cell of a cube, not on the interface: a hypercube move (:mod:`.hypercube`) that
  changes no interface cell (they are blocked in its search; :func:`~.hypercube.verify` and a
  check that the move misses the interface);
* a primary cell of the rest, not on the interface: the elimination and its interval audit over
  the rest with every interface cell published (:func:`~.audit.fast`), then the interval audit
  of the rest (:func:`~.audit.audit`) with every interface cell at its true value. A table it
  finds, joined with the true cubes, is a table of the release, so the interval it finds lies
  inside the release's;
* a primary cell on the interface (a small region-level cell a cube and the rest both hold): its
  cube's move ``h`` changes interface cells; the rest follows with a change ``t`` of its own
  cells equal to ``h`` on the interface (:func:`_follow`: a linear program per direction, which
  hides cells of the rest, the cheapest first, when its hidden cells cannot carry the move).
  ``h + t`` is a move of the release; each direction reaches the smaller of the two;
* a primary cell of the rest that only interface cells can hide (*tied*: four hidden 1s under a
  region's published 4): one program per direction over both parts at once
  (:func:`_joint_program`): the cube's cells in a box around the interface cells near it
  (:func:`~.hypercube.box`), the rest's cells near it and near those, each part's relations
  kept, the shared cells one variable, published cells hidden when they must change, the
  cheapest first. Its answer, checked against every relation of every part, is a change of the
  release.

Cells hidden later never undo an earlier proof: a change that keeps every published cell keeps
them when fewer are published. The proofs give the release audit's intervals (inner bounds:
each proven wide enough), without one program over the whole release.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from tabsafe.errors import MethodError, Reason
from tabsafe.model.result import Proven
from tabsafe.progress import report
from tabsafe.protect.suppression.audit import audit
from tabsafe.protect.suppression.hypercube import box, hypercube, verify
from tabsafe.protect.suppression.linked import release_system
from tabsafe.protect.suppression.problem import CellSystem, Mode, Problem, Settings
from tabsafe.protect.suppression.secondary import SuppressionResult, suppress_problem

if TYPE_CHECKING:  # pragma: no cover
    from tabsafe.model.release_cells import ReleaseCells

__all__ = ["suppress_with_cubes"]

_TOL = 1e-6
#: relations away from a move that the rest's first program to follow it looks (then everywhere)
NEAR = 3
#: new moves sought for a primary cell whose move the rest cannot follow (each a search in the
#: cube and a few programs)
RETRIES = 3
#: the programs tried to move a tied cell, each (partner codes per variable of the box around an
#: anchor, :func:`~.hypercube.box`; relations away from it and its anchors that the rest's cells
#: may be; whether published cells may be hidden for it), the smallest first. On the demo's
#: release its 269 tied cells all move, in 115 s
JOINT = ((4, 3, False), (8, 3, False), (2, 2, True), (4, 3, True), (8, 3, True))


def suppress_with_cubes(cells: ReleaseCells, primary: np.ndarray, settings: Settings,
                        cubes: Sequence[int]) -> tuple[SuppressionResult, Proven]:
    """Suppress the release ``cells`` (``primary``: its primary cells) with the tables numbered
    ``cubes`` by moves and the rest by the elimination (module docstring); the pattern over the
    release's cells and the audit its proofs give."""
    return _Join(cells, primary, settings, tuple(sorted(set(cubes)))).run()


class _Join:
    """One run of :func:`suppress_with_cubes`: the parts, the pattern so far, the proofs."""

    def __init__(self, cells: ReleaseCells, primary: np.ndarray, settings: Settings, cubes: tuple[int, ...]) -> None:
        self.cells, self.primary, self.settings, self.cubes = cells, primary, settings, cubes
        self.rest = tuple(i for i in range(len(cells.tables)) if i not in cubes)
        parts = np.zeros(cells.n_cells, dtype=np.int64)
        in_cubes = np.zeros(cells.n_cells, dtype=np.int64)
        for i in cubes:
            held = np.unique(cells.cells[i])
            parts[held] += 1
            in_cubes[held] += 1
        if self.rest:
            parts[np.unique(np.concatenate([cells.cells[i] for i in self.rest]))] += 1
        self.interface, self.between = parts > 1, in_cubes > 1
        if (self.between & primary).any():
            c = int(np.flatnonzero(self.between & primary)[0])
            raise MethodError(f"cell {cells.name(c)} is primary and held by two tables suppressed by moves; suppress "
                              "one of them with the others (mode fast), or publish them as separate releases",
                              reason=Reason.NOT_APPLICABLE)
        self.values = np.nan_to_num(cells.combine("count"))
        self.hidden = primary.copy()
        self.inner = np.full((2, cells.n_cells), np.nan)  # each primary cell's proven interval (inner bounds)
        #: moves the rest follows (primary release cell: cells, signs, how far up, how far down)
        self.moved: dict[int, tuple[np.ndarray, np.ndarray, float, float]] = {}
        self.figures: dict = {}
        #: each cube's cells, bounds and costs (for moves sought again and joint programs)
        self.cube_problems: dict[int, Problem] = {}
        self.cube_local: dict[int, np.ndarray] = {}  # release cell -> the cube's cell (-1: not held)
        self.cube_of: dict[int, int] = {}  # a moved primary cell: its cube
        self.followed: dict[tuple[bytes, bytes], float] = {}  # changes of the rest followed, how far

    def run(self) -> tuple[SuppressionResult, Proven]:
        started = time.perf_counter()
        cells, primary, hidden = self.cells, self.primary, self.hidden
        ties: dict[int, np.ndarray] = {}
        narrow = np.zeros(cells.n_cells, dtype=bool)
        if self.rest:
            self.sub, self.held = cells.subset(self.rest)
            self.local = np.full(cells.n_cells, -1, dtype=np.int64)
            self.local[self.held] = np.arange(self.held.size)
            ties = self._rest_pattern()
        for i in self.cubes:
            report("suppression", phase="moves", table=cells.names[i])
            self._cube(i)
        if self.rest:
            narrow = self._follow_moves(ties)
        reason = np.full(cells.n_cells, "secondary", dtype=object)
        reason[~hidden] = "published"
        reason[primary] = "primary"
        values = self.values
        result = SuppressionResult(reason.astype(str), {
            "mode": self.settings.mode.value, "cells": cells.n_cells, "suppressed": int(hidden.sum()),
            "tables_by_moves": [cells.names[i] for i in self.cubes], "interface_cells": int(self.interface.sum()),
            "audit": "moves and programs", **self.figures, "seconds": round(time.perf_counter() - started, 3),
        }, {
            "primary": int(primary.sum()), "secondary": int((hidden & ~primary).sum()),
            "value_suppressed": int(values[hidden].sum()), "secondary_value": int(values[hidden & ~primary].sum()),
            "moves_followed": len(self.moved), "tied_to_interface": len(ties),
        })
        return result, Proven(self.inner[0].copy(), self.inner[1].copy(), primary.copy(), narrow)

    def _required(self, value: float) -> float:
        """The interval width a primary cell of ``value`` needs (as :meth:`Problem.build` states it)."""
        return float(max(self.settings.protection_level, self.settings.protection_ratio * value))

    def _rest_pattern(self) -> dict[int, np.ndarray]:
        """The rest's elimination and audit with every interface cell published; the primary cells
        it cannot protect so (*tied* to the interface: four hidden 1s of a region's four, its cell
        published), each with the interface cells near it (its *anchors*: the cubes' cells around
        them change with it, :meth:`_tie`)."""
        sub, face = self.sub, self.interface[self.held]
        system, settings = release_system(sub), replace(self.settings, mode=Mode.FAST)
        first = Problem.build(system, self.primary[self.held] & ~face, settings, published=face)
        report("suppression", phase="rest", tables=len(self.rest), cells=sub.n_cells)
        # tied: left out of the rest's elimination, which would otherwise hide ever more cells
        # around them in vain
        tied = _pinned(first)
        stuck = set(np.flatnonzero(tied).tolist())
        self.problem = Problem.build(system, first.primary & ~tied, settings, published=face | tied)
        result = suppress_problem(self.problem, stuck=stuck)  # stuck: any its repairs find besides
        self.figures.update({"audit_rounds": result.figures.get("audit_rounds"),
                             "republished": result.figures.get("republished")})
        self.mine = result.suppressed | self.hidden[self.held]
        usable = face & (self.values[self.held] > 0) & ~self.between[self.held]
        ties: dict[int, np.ndarray] = {}
        for q in sorted(stuck):
            rows = self.problem.AT[q].indices
            # the interface cells of its relations; else those a few relations away
            for hops in (1, NEAR):
                near = _near(self.problem, rows, ~self.problem.forced, hops) & usable
                if near.any():
                    break
            else:
                raise MethodError(f"primary cell {self.cells.name(int(self.held[q]))} cannot be protected: every "
                                  "cell that could hide it is published by force", reason=Reason.INFEASIBLE)
            ties[int(self.held[q])] = self.held[near]
        return ties

    def _cube(self, i: int) -> None:
        """Moves in cube ``i``: first for its primary interface cells (other interface cells may
        move; the rest follows them); then for its other primary cells, no interface cell moving;
        those with no such move get one the rest follows."""
        rows = self.cells.cells[i]
        system = CellSystem.of_table(self.cells.tables[i])
        prim, face, between = self.primary[rows], self.interface[rows], self.between[rows]
        self.cube_problems[i] = Problem.build(system, prim, self.settings, published=between)
        self.cube_local[i] = np.full(self.cells.n_cells, -1, dtype=np.int64)
        self.cube_local[i][rows] = np.arange(rows.size)
        pattern = np.zeros(rows.size, dtype=bool)
        touching: list = []
        if (prim & face).any():
            pattern, done = _moves(Problem.build(system, prim & face, self.settings, published=between), pattern, None)
            touching += done
        inside = Problem.build(system, prim & ~face, self.settings, published=face)
        pattern, done = _moves(inside, pattern, face)
        for p, _, _, up, down in done:
            self.inner[:, rows[p]] = (self.values[rows[p]] - down, self.values[rows[p]] + up)
        failed = prim & ~face
        failed[[d[0] for d in done]] = False
        if failed.any():
            pattern, done = _moves(Problem.build(system, failed, self.settings, published=between), pattern, None)
            touching += done
        for p, cs, ss, up, down in touching:
            self.moved[int(rows[p])] = (rows[cs], ss, up, down)
            self.cube_of[int(rows[p])] = i
        self.hidden[rows[pattern | prim]] = True

    def _follow_moves(self, ties: dict[int, np.ndarray]) -> np.ndarray:
        """The rest follows every move of :attr:`moved` (with its hidden cells, else cells it
        hides for them), and each tied cell moves with the cubes' cells around its anchors
        (:meth:`_tie`); then the rest's audit with the interface at its true values. Its narrow
        cells, over the release."""
        face = self.interface[self.held]
        self.mine |= self.hidden[self.held]  # what the cubes hid of the interface
        hidden_before = int(self.mine.sum())
        for k, (f, move) in enumerate(sorted(self.moved.items())):
            report("suppression", phase="moves followed", done=k, total=len(self.moved) + len(ties))
            self._follow_primary(f, move)
        for k, (q, anchors) in enumerate(ties.items()):
            report("suppression", phase="moves followed", done=len(self.moved) + k, total=len(self.moved) + len(ties))
            if not self._tie(q, anchors):
                raise MethodError(f"primary cell {self.cells.name(q)} can only be hidden with cells a table suppressed "
                                  "by moves holds, and no change of both near it hides it", reason=Reason.INFEASIBLE)
        self.figures["hidden_to_follow"] = int(self.mine.sum()) - hidden_before
        self.hidden[self.held[self.mine]] = True
        tied = np.zeros(self.held.size, dtype=bool)
        tied[self.local[list(ties)]] = True
        narrow = np.zeros(self.cells.n_cells, dtype=bool)
        narrow[self.held] = _rest_audit(self.held, self.problem, self.mine, face, self.problem.primary & ~tied,
                                        self.inner)
        return narrow

    def _follow_primary(self, f: int, move: tuple[np.ndarray, np.ndarray, float, float]) -> None:
        """The rest follows the move of primary cell ``f`` both ways; when it cannot, the cube's
        move is sought again with the interface cells of the last one kept still (up to
        :data:`RETRIES` times). Its proven interval goes to :attr:`inner`."""
        need = self._required(self.values[f])
        still: set[int] = set()
        for _ in range(RETRIES + 1):
            cs, ss, up, _ = move  # the move's width is at least need (_moves): need - need_up <= down
            need_up = min(up, need)
            u = self._face_move(cs, ss)
            if self._follow(u, need_up) and self._follow(-u, need - need_up):
                self.inner[:, f] = (self.values[f] - (need - need_up), self.values[f] + need_up)
                return
            still.update(int(c) for c in cs[self.interface[cs] & (cs != f)])
            again = self._again(f, still)
            if again is None:
                break
            move = again
        raise MethodError(f"the tables suppressed by elimination cannot follow the move of primary cell "
                          f"{self.cells.name(f)}, which a table suppressed by moves holds", reason=Reason.INFEASIBLE)

    def _tie(self, q: int, anchors: np.ndarray) -> bool:
        """Whether the tied cell ``q`` moves far enough both ways with the cubes' cells around its
        anchors and the rest's near it, in one program each way (:meth:`_joint`); then its proven
        interval goes to :attr:`inner`. Up first: a count goes up freely, while going down it
        meets the least values of the cells that must go down with it (1s, when zeros are
        published)."""
        need = self._required(self.values[q])
        down = min(need, float(self.values[q] - self.problem.lower[self.local[q]]))
        for up in sorted({need, need - down}, reverse=True):
            if self._joint(q, up, anchors) and self._joint(q, -(need - up), anchors):
                self.inner[:, q] = (self.values[q] - (need - up), self.values[q] + up)
                return True
        return False

    def _joint(self, q: int, change: float, anchors: np.ndarray) -> bool:
        """Whether ``q`` changes by ``change``, the rest and the cubes following in one program
        (:func:`_joint_program`; the attempts of :data:`JOINT`); cells it hides for that are hidden."""
        if change == 0:
            return True
        hidden = self.hidden.copy()
        hidden[self.held[self.mine]] = True
        rest, face = self.problem, self.interface[self.held]
        parts = [(self.held, self.local, rest)]
        for i in self.cubes:
            if (self.cube_local[i][anchors] >= 0).any():
                parts.append((self.cells.cells[i], self.cube_local[i], self.cube_problems[i]))
        for partners, hops, spend in JOINT:
            free, spare = [np.array([q])], [np.zeros(0, dtype=np.int64)]
            for rows, local, problem in parts[1:]:
                around = [box(problem, int(g), partners) for g in local[anchors][local[anchors] >= 0]]
                cells = rows[np.unique(np.concatenate(around))]
                cells = cells[~self.between[cells]]
                free.append(cells[hidden[cells]])
                spare.append(cells[~hidden[cells] & problem.candidates[local[cells]]] if spend else spare[0])
            # the rest's cells near q and near the interface cells the cubes' part may change
            shared = self.local[np.concatenate(free + spare)]
            start = np.unique(rest.AT[shared[(shared >= 0) & face[np.maximum(shared, 0)]]].indices)
            start = np.union1d(start, rest.AT[self.local[q]].indices)
            near = _near(rest, start, self.mine & ~face, hops) & ~face
            free.append(self.held[near & self.mine])
            if spend:
                spare.append(self.held[near & rest.candidates & ~self.mine])
            fresh = _joint_program(parts, self.values, hidden, np.unique(np.concatenate(free)),
                                   np.unique(np.concatenate(spare)), q, change)
            if fresh is not None:
                self.hidden[fresh] = True
                self.mine[self.local[fresh][self.local[fresh] >= 0]] = True
                return True
        return False

    def _again(self, f: int, still: set[int]) -> tuple[np.ndarray, np.ndarray, float, float] | None:
        """A new move in its cube for primary cell ``f``, the interface cells ``still`` kept still
        (its cells hidden in the release), or None."""
        i = self.cube_of[f]
        rows = self.cells.cells[i]
        alone = rows == f
        kept = self.between[rows] | (np.isin(rows, np.fromiter(still, dtype=np.int64)) & ~alone)
        problem = Problem.build(self.cube_problems[i].system, alone, self.settings, published=kept)
        pattern, done = _moves(problem, self.hidden[rows] & ~kept, np.zeros(rows.size, dtype=bool))
        if not done:
            return None
        self.hidden[rows[pattern]] = True
        self.mine |= self.hidden[self.held]
        _, cs, ss, up, down = done[0]
        return rows[cs], ss, up, down

    def _face_move(self, cs: np.ndarray, ss: np.ndarray) -> np.ndarray:
        """A cube's move on the rest's cells (its interface part), as a vector over the rest."""
        at = self.local[cs]
        u = np.zeros(self.held.size)
        u[at[at >= 0]] = ss[at >= 0]
        return u

    def _follow(self, move: np.ndarray, size: float) -> bool:
        """Whether the rest follows ``size`` times ``move`` (cells it hides for it added to
        :attr:`mine`)."""
        if size <= 0:
            return True
        # many cells' moves change the same cells of the rest (a region's margins): a change
        # followed once is followed for good, since the rest only hides more
        at = np.flatnonzero(move)
        key = (at.tobytes(), move[at].tobytes())
        if self.followed.get(key, -1.0) >= size:
            return True
        fresh = _follow(self.problem, self.mine, self.interface[self.held] | (move != 0), size * move)
        if fresh is None:
            return False
        self.mine |= fresh
        self.followed[key] = size
        return True

def _pinned(problem: Problem) -> np.ndarray:
    """Primary cells narrower than required whatever else is hidden, by one relation: its cells
    that may be hidden all on one side (the children of a published aggregate, say), whose room
    above their least values, added up, is less than the cell needs (four 1s of a published 4)."""
    A = problem.A.tocsr()
    free = problem.primary | problem.candidates
    room = np.where(free, np.nan_to_num(problem.values) - problem.lower, 0.0)
    plus = (A > 0).astype(np.float64) @ free
    minus = (A < 0).astype(np.float64) @ free
    one_side = (plus == 0) | (minus == 0)
    slack = abs(A) @ room
    rows = np.flatnonzero(one_side & (plus + minus > 0))
    out = np.zeros(problem.n_cells, dtype=bool)
    sub = A[rows]
    cell = sub.indices
    row_slack = np.repeat(slack[rows], np.diff(sub.indptr))
    hit = problem.primary[cell] & (row_slack < problem.required[cell] - 1e-9)
    out[cell[hit]] = True
    return out


def _moves(problem: Problem, before: np.ndarray, avoid: np.ndarray | None) -> tuple[np.ndarray, list]:
    """The hypercube moves of ``problem``'s primary cells, cells hidden ``before`` reused; the
    pattern (those cells and every valid move's) and the valid moves, each checked
    (:func:`~.hypercube.verify`, and missing ``avoid``): the primary cell, the move's cells and
    signs (the primary's ``+``), how far it goes up and down. Without ``avoid`` every move must be
    valid."""
    suppressed, moves = hypercube(problem, before)
    width = verify(problem, suppressed, moves)
    room = np.nan_to_num(problem.values) - problem.lower
    pattern = before | problem.primary
    done = []
    for k, p in enumerate(moves.primary.tolist()):
        c = moves.cells[moves.ptr[k]:moves.ptr[k + 1]]
        s = moves.signs[moves.ptr[k]:moves.ptr[k + 1]]
        if width[k] < problem.required[p] - 1e-9 or (avoid is not None and avoid[c].any()):
            if avoid is not None:
                continue  # the caller moves it with the interface
            # a defect of the search, never a property of the table: stop, publish nothing
            raise MethodError(f"the hypercube mode's move for primary cell {problem.name(p)} does not prove its "
                              "protection in the release", reason=Reason.INFEASIBLE)
        s = s * s[c == p][0]
        pattern[c] = True
        done.append((p, c, s, float(room[c[s < 0]].min(initial=np.inf)), float(room[c[s > 0]].min(initial=np.inf))))
    return pattern, done


def _follow(problem: Problem, hidden: np.ndarray, fixed: np.ndarray, move: np.ndarray) -> np.ndarray | None:
    """The cells to hide so that the rest follows ``move`` (the change of its ``fixed`` cells)
    with its other hidden cells: none when they carry it already; else those of a least-cost
    program in which published cells may change at the cost of hiding them; None when no change
    follows. Each program first over the cells near the move (:data:`NEAR` relations away), then
    over all. Checked: the change keeps every relation and leaves every cell at or above its least
    value."""
    A = problem.A
    x, lower = np.nan_to_num(problem.values), problem.lower
    if (x + move < lower - _TOL)[fixed & (move != 0)].any():
        return None
    rhs = -(A @ move)
    need = np.flatnonzero(np.abs(rhs) > _TOL)
    if not need.size:  # the fixed cells' change keeps the rest's relations by itself
        return np.zeros(x.size, dtype=bool)
    near = _near(problem, need, hidden & ~fixed)
    # near first, spending there before any program over the whole rest (which costs seconds)
    for spend, cells in ((False, near), (True, near), (False, None), (True, None)):
        where = np.ones(x.size, dtype=bool) if cells is None else cells
        free = np.flatnonzero(hidden & ~fixed & where)
        spare = np.flatnonzero(problem.candidates & ~hidden & ~fixed & where) if spend else np.zeros(0, np.int64)
        t = _carry(problem, rhs, need, free, spare)
        if t is None:
            continue
        fresh = np.zeros(x.size, dtype=bool)
        fresh[spare[np.abs(t[spare]) > 1e-9]] = True
        if np.abs(A @ (move + t)).max(initial=0) <= _TOL and not (x + t < lower - _TOL)[hidden | fresh].any():
            return fresh & ~hidden
    return None


def _near(problem: Problem, rows: np.ndarray, through: np.ndarray, hops: int = NEAR) -> np.ndarray:
    """The cells of ``problem`` at most ``hops`` relations away from the relations ``rows``, going
    on only through the cells ``through`` (hidden ones: a published cell stops a change)."""
    near = np.zeros(problem.n_cells, dtype=bool)
    for _ in range(hops):
        near[problem.A[rows].indices] = True
        rows = np.unique(problem.AT[np.flatnonzero(near & through)].indices)
    return near


def _joint_program(parts: list[tuple[np.ndarray, np.ndarray, Problem]], values: np.ndarray, hidden: np.ndarray,
                   free: np.ndarray, spare: np.ndarray, q: int, change: float) -> np.ndarray | None:
    """The published cells to hide so that release cell ``q`` changes by ``change``, the hidden
    cells ``free`` and the published cells ``spare`` changing with it (the least-cost program:
    hiding a spare cell costs its cost), every relation of every part kept. ``parts``: per part,
    its cells' numbers in the release, the release's cells numbered in it (-1: not held), its
    problem (relations, least values, costs). None when no change will do. Checked: every part's
    relations hold, no cell goes below its least value, only hidden and returned cells change."""
    from tabsafe.solver import INF, LinearProgram, solve

    spare = np.setdiff1d(spare, free)
    ids = np.concatenate([free, spare])
    nf, ns = free.size, spare.size
    x = values[ids]
    lower, cost, blocks = np.full(ids.size, -np.inf), np.zeros(ids.size), []
    for rows, local, problem in parts:
        at = local[ids]
        held = at >= 0
        lower[held] = np.maximum(lower[held], problem.lower[at[held]])
        cost[held] = np.maximum(cost[held], problem.cost[at[held]])
        column = np.full(rows.size, -1, dtype=np.int64)
        column[at[held]] = np.flatnonzero(held)
        sel = np.unique(problem.AT[at[held]].indices)
        sub = problem.A[sel].tocoo()
        keep = column[sub.col] >= 0  # cells outside the program stay as they are
        blocks.append(sp.csr_matrix((sub.data[keep], (sub.row[keep], column[sub.col[keep]])),
                                    shape=(sel.size, ids.size)))
    M = sp.vstack(blocks).tocsc()
    M = sp.hstack([M, -M[:, nf:]]).tocsc()  # a spare cell goes up or down, each at its cost
    col_lower = np.concatenate([lower[:nf] - x[:nf], np.zeros(2 * ns)])
    col_upper = np.concatenate([np.full(nf + ns, INF), x[nf:] - lower[nf:]])
    k = int(np.searchsorted(free, q))
    col_lower[k] = col_upper[k] = change
    zero = np.zeros(M.shape[0])
    sol = solve(LinearProgram(c=np.concatenate([np.zeros(nf), cost[nf:], cost[nf:]]), A=M, row_lower=zero,
                              row_upper=zero, col_lower=col_lower, col_upper=col_upper), relax=True)
    if sol.status != "optimal" or sol.x is None:
        return None
    z = sol.x[:nf + ns].copy()
    z[nf:] -= sol.x[nf + ns:]
    moved = np.abs(z) > 1e-9
    for rows, local, problem in parts:
        at = local[ids]
        whole = np.zeros(rows.size)
        whole[at[at >= 0]] = z[at >= 0]
        if np.abs(problem.A @ whole).max(initial=0) > _TOL:
            return None
    if (x + z < lower - _TOL)[moved].any() or abs(z[k] - change) > _TOL or not hidden[free].all():
        return None
    return spare[moved[nf:]]


def _carry(problem: Problem, rhs: np.ndarray, need: np.ndarray, free: np.ndarray,
           spare: np.ndarray) -> np.ndarray | None:
    """A change ``t`` of the cells ``free`` (down to their least values) and ``spare`` (published,
    at the cost of hiding them) with ``A t = rhs``, the cheapest; None when there is none."""
    from tabsafe.solver import INF, LinearProgram, solve

    x, lower = np.nan_to_num(problem.values), problem.lower
    cols = np.concatenate([free, spare, spare])
    k, m = free.size, spare.size
    rows = np.union1d(need, problem.AT[cols].indices) if cols.size else need
    sign = np.concatenate([np.ones(k + m), -np.ones(m)])
    sub = (problem.A[rows][:, cols] @ _diag(sign)).tocsc()
    lp = LinearProgram(c=np.concatenate([np.zeros(k), problem.cost[spare], problem.cost[spare]]), A=sub,
                       row_lower=rhs[rows], row_upper=rhs[rows],
                       col_lower=np.concatenate([lower[free] - x[free], np.zeros(2 * m)]),
                       col_upper=np.concatenate([np.full(k + m, INF), x[spare] - lower[spare]]))
    sol = solve(lp, relax=True)
    if sol.status != "optimal" or sol.x is None:
        return None
    t = np.zeros(x.size)
    np.add.at(t, cols, sign * sol.x)
    return t


def _diag(values: np.ndarray) -> sp.csc_matrix:
    return sp.diags(values, format="csc")


def _rest_audit(held: np.ndarray, problem: Problem, hidden: np.ndarray, face: np.ndarray, targets: np.ndarray,
                inner: np.ndarray) -> np.ndarray:
    """The interval audit of the rest (:func:`~.audit.audit`) with its interface cells at their true
    values (module docstring): its targets' intervals go to ``inner``; the narrow ones."""
    report("suppression", phase="rest audit", cells=int(held.size))
    checked = audit(replace(problem, primary=targets, required=np.where(targets, problem.required, 0.0)),
                    hidden & ~face)
    inner[0, held[targets]] = checked.intervals.lower[targets]
    inner[1, held[targets]] = checked.intervals.upper[targets]
    return checked.narrow
