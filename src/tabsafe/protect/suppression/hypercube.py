"""The hypercube mode: secondary suppression of tables too large for the elimination, with a proof per cell.

Repsilber's hypercube method (GHMITER, the ``GH`` mode of tau-ARGUS) protects each primary cell
by hiding the corners of a hypercube around it: in every variable the primary's code and one
partner code, so that adding ``t`` to the primary and to every corner of even parity while taking
``t`` from every corner of odd parity leaves every published cell, margins included, as it was.
An intruder who knows the published cells and the table's relations cannot tell the true table
from the moved one, so the primary cell's feasibility interval (seed 000 §5.3, METHODS.md §10)
holds every value the move reaches within the corners' bounds. The method scales with the number
of primary cells, not with the table: the demo's 7-variable hypercube (997,920 cells) is out of
reach of the elimination (:mod:`.elimination`, whose fill-in grows with the 128 cells every
inner cell adds to) and of one interval program per cell.

Here a move is the tensor product of one vector per variable over its leaves (:class:`_Axis`):

* ``e_x − e_y`` (``x`` a leaf under the primary's code, ``y`` a leaf outside it): changes the
  codes from ``x`` up to, not including, the lowest common ancestor (``+``) and those from ``y``
  (``−``); for a leaf code and a sibling ``y`` that is the two codes of Repsilber's hypercube;
* ``e_x``: changes ``x`` and every code above it (``+``), up to the total: the only choice for a
  primary at the total of a variable, and always possible.

A move changes the cells whose codes are changed codes in every variable (``2^k`` cells in a
``k``-variable table with only totals); every changed cell must be suppressed (a published zero
cannot be), and the move's width — how far up and down it can go before a cell passes its least
value — must reach the primary's required protection. For each primary cell (margins before
inner cells, larger subtables first) the cheapest such move is sought by coordinate descent over
the variables, cells already hidden costing nothing, starting from the move that is always
possible (``e_x`` in every variable for the largest inner cell under the primary: the primary and
its margins, all moving up). Its cells are hidden, and the move is kept as the primary cell's
certificate (:class:`Moves`), which :func:`verify` checks independently: ``A z = 0`` over every
relation of the table, no published cell moved, widths from the bounds. A last pass publishes
again costly cells the moves can go round (:func:`_publish_back`, on a work budget).

The pattern is safe by construction but far from minimal: a move alternates in a variable only
where the partner's cells are non-zero at every level the move touches, down to the inner cells,
and elsewhere it goes up to the total. On the 26,796-cell area × age × citizenship table it hides
4,232 secondary cells of value 1.17M where the fast mode hides 2,688 of value 40,962; on the
demo's hypercube, whose inner level has 19,514 non-zero cells of 245,700, 83% of the non-zero
cells, the grand total among them (``bench/bench_hypercube.py``). The fast and optimal modes stay the
choice for tables they can handle.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp

from tabsafe.errors import InputError
from tabsafe.model.hierarchy import Hierarchy
from tabsafe.progress import report
from tabsafe.protect.suppression.problem import Problem

__all__ = ["Moves", "box", "hypercube", "verify"]

#: leaves under a margin code tried as the start of a move's path (the largest slabs first)
MAX_PATHS = 8
#: partner leaves tried per variable (the largest slabs first)
MAX_PARTNERS = 32
#: sweeps of the coordinate descent over the variables (it stops earlier when a sweep changes nothing)
SWEEPS = 4
#: the publish-back pass's work budget: hidden cells tried (the most costly first) and moves
#: sought again. Measured on the demo's hypercube (value hidden by secondary cells 98.0M before the
#: pass): 3,000 cells, 24,346 moves, 40 s CPU: 77.5M; 10,000 cells, 50,477 moves, 134 s: 75.6M
PUBLISH_BACK_CELLS = 3_000
PUBLISH_BACK_MOVES = 100_000

_TOL = 1e-9


@dataclass(frozen=True, eq=False)
class Moves:
    """One move per primary cell, the certificate of its protection.

    Move ``i`` of primary cell ``primary[i]`` adds ``signs[j]`` to cell ``cells[j]`` for
    ``ptr[i] <= j < ptr[i + 1]`` (times any ``t`` within its width).
    """

    primary: np.ndarray
    ptr: np.ndarray
    cells: np.ndarray
    signs: np.ndarray

    def matrix(self, n_cells: int) -> sp.csc_matrix:
        """The moves as the columns of a cells × primary-cells matrix."""
        return sp.csc_matrix((self.signs.astype(np.float64), self.cells, self.ptr),
                             shape=(n_cells, self.primary.size))


@dataclass(frozen=True, eq=False)
class _Axis:
    """One variable's hierarchy as positions: ancestors, leaves below, changed codes of a pair."""

    hierarchy: Hierarchy
    stride: int

    @property
    def size(self) -> int:
        return len(self.hierarchy.order)

    @cached_property
    def ancestors(self) -> tuple[np.ndarray, ...]:
        """Per position, the positions from the code up to the total."""
        h, pos = self.hierarchy, self.hierarchy.position
        return tuple(np.array([pos[a] for a in h.ancestors(c)], dtype=np.int64) for c in h.order)

    @cached_property
    def leaves_under(self) -> tuple[np.ndarray, ...]:
        """Per position, the leaf positions under the code (itself for a leaf)."""
        out: list[list[int]] = [[] for _ in range(self.size)]
        for leaf in np.flatnonzero(self.is_leaf).tolist():
            for a in self.ancestors[leaf].tolist():
                out[a].append(leaf)
        return tuple(np.array(sorted(v), dtype=np.int64) for v in out)

    @cached_property
    def is_leaf(self) -> np.ndarray:
        h = self.hierarchy
        return np.array([h.is_leaf(c) for c in h.order], dtype=bool)

    def up(self, x: int) -> tuple[np.ndarray, np.ndarray]:
        """The codes ``e_x`` changes: ``x`` and every code above it, all ``+``."""
        codes = self.ancestors[x]
        return codes, np.ones(codes.size, dtype=np.int64)

    @cached_property
    def outside(self) -> tuple[np.ndarray, ...]:
        """Per position, the leaf positions not under the code."""
        leaves = np.flatnonzero(self.is_leaf)
        return tuple(leaves[~np.isin(leaves, under)] for under in self.leaves_under)

    @cached_property
    def _pairs(self) -> dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]:
        return {}

    def pair(self, x: int, y: int) -> tuple[np.ndarray, np.ndarray]:
        """The codes ``e_x − e_y`` changes: up from ``x`` (``+``) and from ``y`` (``−``), each to
        below their lowest common ancestor."""
        key = (x, y)
        out = self._pairs.get(key)
        if out is None:
            ax, ay = self.ancestors[x].tolist(), self.ancestors[y].tolist()
            common = set(ax) & set(ay)
            px, py = [c for c in ax if c not in common], [c for c in ay if c not in common]
            out = (np.array(px + py, dtype=np.int64), np.array([1] * len(px) + [-1] * len(py), dtype=np.int64))
            self._pairs[key] = out
        return out


def _corners(base: int, axes: tuple[_Axis, ...], chosen: list[tuple[np.ndarray, np.ndarray]],
             skip: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """The cells and signs of the tensor product of each variable's chosen codes and signs (all
    but variable ``skip``), from the cell ``base`` at position 0 in every variable."""
    off, sgn = np.array([base]), np.ones(1, dtype=np.int64)
    for a, (ax, (codes, signs)) in enumerate(zip(axes, chosen)):
        if a != skip:
            off = (off[:, None] + codes[None, :] * ax.stride).ravel()
            sgn = (sgn[:, None] * signs[None, :]).ravel()
    return off, sgn


def _axes(problem: Problem) -> tuple[_Axis, ...]:
    table = problem.system.table
    if table is None:
        raise InputError("the hypercube mode needs one table's grid (a release of several tables is suppressed "
                         "table by table: cube_release.py)")
    return tuple(_Axis(d.hierarchy, int(s)) for d, s in zip(table.dimensions, table.strides))


class _Search:
    """The cheapest move of each primary cell, given the cells hidden so far (module docstring)."""

    def __init__(self, problem: Problem, axes: tuple[_Axis, ...], before: np.ndarray | None = None) -> None:
        self.axes = axes
        self.values = np.nan_to_num(problem.values)
        self.room = self.values - problem.lower
        # a forced cell (a published zero) cannot move; a hidden one (no release holds it) costs
        # nothing, and, its value unknown here, gets no room to go down (room 0: the checked width
        # only understates the interval)
        self.blocked = problem.forced & ~problem.primary
        self.cost = np.where(self.blocked, np.inf, problem.cost)
        self.required = problem.required
        self.suppressed = problem.primary | problem.hidden
        if before is not None:  # hidden by an earlier pass: free to reuse, unless blocked
            self.suppressed = self.suppressed | before

    def options(self, cell: int, axis: int, start: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """The vectors variable ``axis`` may take in a move of ``cell`` (the first: ``e_start``)."""
        ax = self.axes[axis]
        here = (cell // ax.stride) % ax.size
        base = cell - here * ax.stride

        def usable(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            cells = base + codes * ax.stride
            return codes[~self.blocked[cells]], self.values[cells[~self.blocked[cells]]]

        paths = ax.leaves_under[here]
        if paths.size > 1:
            paths, vals = usable(paths)
            paths = paths[np.argsort(-vals, kind="stable")][:MAX_PATHS]
        if start not in paths:
            paths = np.concatenate([[start], paths[: MAX_PATHS - 1]])
        else:
            paths = np.concatenate([[start], paths[paths != start]])
        partners, vals = usable(ax.outside[here])
        partners = partners[np.argsort(-vals, kind="stable")][:MAX_PARTNERS]
        out = []
        for x in paths.tolist():
            out.append(ax.up(x))
            out.extend(ax.pair(x, y) for y in partners.tolist())
        return out

    def start(self, cell: int) -> list[int]:
        """Per variable, the leaf of the largest inner cell under ``cell``."""
        ids = np.zeros(1, dtype=np.int64)
        for ax in self.axes:
            here = (cell // ax.stride) % ax.size
            ids = (ids[:, None] + ax.leaves_under[here][None, :] * ax.stride).ravel()
        best = int(ids[int(np.argmax(self.values[ids]))])
        return [int((best // ax.stride) % ax.size) for ax in self.axes]

    def move(self, cell: int) -> tuple[np.ndarray, np.ndarray]:
        """The cheapest move found for ``cell`` (coordinate descent over the variables)."""
        axes = self.axes
        leaf = self.start(cell)
        opts = [self.options(cell, a, leaf[a]) for a in range(len(axes))]
        choice = [0] * len(axes)  # e_start everywhere: the cell and its margins, all up
        base = cell - sum(((cell // ax.stride) % ax.size) * ax.stride for ax in axes)
        cost_now = np.inf
        for _ in range(SWEEPS):
            changed = False
            for a, ax in enumerate(axes):
                off, sgn = _corners(base, axes, [opts[b][choice[b]] for b in range(len(axes))], skip=a)
                best, best_cost = self._best(cell, off, sgn, opts[a], ax.stride, choice[a])
                if best is not None and (best != choice[a] and best_cost < cost_now - _TOL or cost_now == np.inf):
                    changed = changed or best != choice[a]
                    choice[a], cost_now = best, best_cost
            if not changed:
                break
        return _corners(base, axes, [opts[a][choice[a]] for a in range(len(axes))])

    def _best(self, cell: int, off: np.ndarray, sgn: np.ndarray, options: list[tuple[np.ndarray, np.ndarray]],
              stride: int, current: int = 0) -> tuple[int | None, float]:
        """The cheapest feasible option of one variable, the others' corners being ``off``/``sgn``."""
        codes = np.concatenate([c for c, _ in options])
        signs = np.concatenate([s for _, s in options])
        starts = np.cumsum([0] + [c.size for c, _ in options[:-1]])
        corners = off[:, None] + codes[None, :] * stride
        corner_sign = sgn[:, None] * signs[None, :]
        # a blocked cell hidden earlier still costs infinity: no move changes it
        each = np.where(self.suppressed[corners] & ~self.blocked[corners], 0.0, self.cost[corners])
        cost = each.sum(axis=0)
        room = self.room[corners]
        up = np.where(corner_sign < 0, room, np.inf).min(axis=0)    # how far the primary can go up
        down = np.where(corner_sign > 0, room, np.inf).min(axis=0)  # and down
        cost = np.add.reduceat(cost, starts)
        width = np.minimum.reduceat(up, starts) + np.minimum.reduceat(down, starts)
        ok = np.isfinite(cost) & (width >= self.required[cell] - _TOL)
        if not ok.any():
            # no option will do with the other variables as they are. When the current one has
            # blocked cells, one with fewer, so that the next variables can clear the rest (a
            # move that must alternate in two variables to miss the cells another table holds)
            stuck = np.add.reduceat(np.isinf(each).sum(axis=0), starts).astype(np.float64)
            stuck[width < self.required[cell] - _TOL] = np.inf  # wide enough, the blocked cells apart
            fewer = int(np.argmin(stuck))
            return (fewer, np.inf) if stuck[fewer] < stuck[current] else (None, np.inf)
        cost = np.where(ok, cost, np.inf)
        best = int(np.argmin(cost))
        return best, float(cost[best])


def hypercube(problem: Problem, before: np.ndarray | None = None) -> tuple[np.ndarray, Moves]:
    """The hypercube pattern of ``problem`` (one table's grid) and each primary cell's move.

    ``before``: cells an earlier pass hid (:mod:`.cube_release`): the moves reuse them at no cost,
    unless ``problem`` forces them published (then no move changes them), and they stay hidden.

    Primary cells are visited from the largest subtable down (cells with more totals first, then
    larger values, then cell order): a margin's move hides cells that the inner cells' moves can
    then reuse at no cost.
    """
    axes = _axes(problem)
    search = _Search(problem, axes, before)
    prim = np.flatnonzero(problem.primary)
    totals = np.zeros(prim.size, dtype=np.int64)
    for ax in axes:
        totals += ~ax.is_leaf[(prim // ax.stride) % ax.size]
    # measured on the demo's hypercube: 116,996 secondary cells (value 98.0M) this way, 129,477
    # (116.6M) with inner cells first
    prim = prim[np.lexsort((prim, -search.values[prim], -totals))]
    found: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for i, p in enumerate(prim.tolist()):
        if i % 1024 == 0:
            report("suppression", phase="hypercube moves", done=i, total=int(prim.size))
        off, sgn = search.move(p)
        search.suppressed[off] = True
        found[p] = (off, sgn)
    _publish_back(search, problem, found, before)
    cells = [found[p][0] for p in prim.tolist()]
    ptr = np.concatenate([[0], np.cumsum([c.size for c in cells])]).astype(np.int64)
    moves = Moves(prim, ptr, np.concatenate(cells) if cells else np.zeros(0, np.int64),
                  np.concatenate([found[p][1] for p in prim.tolist()]) if cells else np.zeros(0, np.int64))
    return search.suppressed.copy(), moves


def _publish_back(search: _Search, problem: Problem, found: dict[int, tuple[np.ndarray, np.ndarray]],
                  before: np.ndarray | None = None) -> int:
    """Publish again costly hidden cells the moves can go round, in place (``search.suppressed``,
    ``found``); how many.

    Cells hidden early cost the later moves nothing, so a costly cell one move needed is reused by
    many that did not need it. For each hidden secondary cell, the most costly first, the moves
    through it are sought again with the cell published; the cell is published when every one is
    found and the cells they newly hide cost less than it. A cell no move uses then is published
    too. Bounded by :data:`PUBLISH_BACK_CELLS` and :data:`PUBLISH_BACK_MOVES`.
    """
    n = problem.n_cells
    if not found:
        return 0
    owners = np.concatenate([np.full(off.size, p, dtype=np.int64) for p, (off, _) in found.items()])
    where = np.concatenate([off for off, _ in found.values()])
    through = sp.csr_matrix((np.ones(where.size, dtype=np.int8), (where, owners)), shape=(n, n))
    uses = np.bincount(where, minlength=n)
    added: dict[int, set[int]] = {}  # moves through a cell since ``through`` was built
    fixed = problem.primary | problem.hidden
    if before is not None:
        fixed = fixed | before
    candidates = np.flatnonzero(search.suppressed & ~fixed)
    order = candidates[np.lexsort((candidates, -search.cost[candidates]))][:PUBLISH_BACK_CELLS]
    budget, published = PUBLISH_BACK_MOVES, 0
    for k, c in enumerate(order.tolist()):
        if k % 256 == 0:
            report("suppression", phase="hypercube publish-back", done=k, total=int(order.size), published=published)
        if not search.suppressed[c]:
            continue
        users = sorted(p for p in {*through[c].indices.tolist(), *added.get(c, ())} if (found[p][0] == c).any())
        if len(users) > budget:
            break
        redone, tried = _around(search, c, users)
        budget -= tried
        if redone is None:
            continue
        for p, (off, sgn) in redone.items():
            np.subtract.at(uses, found[p][0], 1)
            np.add.at(uses, off, 1)
            for cell in off.tolist():
                added.setdefault(cell, set()).add(p)
            found[p] = (off, sgn)
        search.suppressed = fixed | (uses > 0)
        published += 1
    report("suppression", phase="hypercube publish-back", done=int(order.size), total=int(order.size),
           published=published)
    return published


def _around(search: _Search, cell: int, users: list[int]) -> tuple[dict[int, tuple[np.ndarray, np.ndarray]] | None, int]:
    """New moves of ``users`` that leave ``cell`` published, when they newly hide less than it
    costs (else None; ``search`` is left as it was), and how many moves were sought."""
    before = search.suppressed.copy()
    cost, blocked = search.cost[cell], search.blocked[cell]
    search.suppressed[cell] = False
    search.cost[cell], search.blocked[cell] = np.inf, True
    out: dict[int, tuple[np.ndarray, np.ndarray]] | None = {}
    spent, tried = 0.0, 0
    for p in users:
        tried += 1
        off, sgn = search.move(p)
        fresh = off[~search.suppressed[off]]
        spent += float(search.cost[fresh].sum())
        if (off == cell).any() or spent >= cost:
            out = None
            break
        search.suppressed[off] = True
        out[p] = (off, sgn)
    search.cost[cell], search.blocked[cell] = cost, blocked
    search.suppressed = before
    return out, tried


def box(problem: Problem, cell: int, partners: int) -> np.ndarray:
    """The cells around ``cell`` in which a change of it is sought (:mod:`.cube_release`): those
    whose code in every variable is the cell's own, one above it, or one of the ``partners``
    codes whose cells, the cell's other codes kept, are the largest non-zero ones. In a table of
    flat variables (codes and their total), every hypercube move of an inner cell whose partners
    are among those codes lies in it."""
    axes = _axes(problem)
    values = np.nan_to_num(problem.values)
    ids = np.array([cell], dtype=np.int64)
    for ax in axes:
        here = (cell // ax.stride) % ax.size
        slab = cell + (np.arange(ax.size) - here) * ax.stride
        keep = np.zeros(ax.size, dtype=bool)
        keep[ax.ancestors[here]] = True
        order = np.argsort(-values[slab], kind="stable")
        order = order[~keep[order] & (values[slab[order]] > 0)][:partners]
        keep[order] = True
        ids = (ids[:, None] + (np.flatnonzero(keep) - here)[None, :] * ax.stride).ravel()
    return ids


def verify(problem: Problem, suppressed: np.ndarray, moves: Moves) -> np.ndarray:
    """The width each move proves for its primary cell (0 where the move is not a valid one).

    Checked from the problem alone, not from how the moves were found: the move keeps every
    relation (``A z = 0``), moves no published cell, and can go up by the least room of the cells
    it lowers and down by the least room of those it raises (room: value less least value).
    """
    n = problem.n_cells
    Z = moves.matrix(n)
    keeps = np.abs(problem.A @ Z).max(axis=0).toarray().ravel() == 0 if Z.shape[1] else np.zeros(0, bool)
    room = np.nan_to_num(problem.values) - problem.lower
    width = np.zeros(moves.primary.size)
    for i in range(moves.primary.size):
        lo, hi = moves.ptr[i], moves.ptr[i + 1]
        c, s = moves.cells[lo:hi], moves.signs[lo:hi]
        p = moves.primary[i]
        own = s[c == p]
        if not keeps[i] or not suppressed[c].all() or own.size != 1:
            continue
        s = s * own[0]  # the primary's own direction is up
        up = room[c[s < 0]].min(initial=np.inf)
        down = room[c[s > 0]].min(initial=np.inf)
        width[i] = up + down
    return width
