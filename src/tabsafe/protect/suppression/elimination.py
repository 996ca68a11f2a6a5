"""The fast mode's core: greedy secondary suppression by sparse Gaussian elimination.

In the spirit of Langsrud's GaussSuppression: candidate cells are visited from the most to the
least costly to hide, and a candidate is published unless publishing it would let an intruder
solve for a primary cell (a rank test). :class:`Elimination` keeps a sparse basis of the
additive tables that agree with everything published so far (rows = cells, columns = basis
tables); publishing a cell is one pivot on its row, and it reveals a primary cell exactly when
the candidate's row is proportional to the primary's.

For one table the basis starts as the tensor product of per-variable "chain" bases of the
additive vectors along each hierarchy (:func:`null_basis`), which is sparse in every row (a
grand total touches one basis table), so the elimination stays sparse (the same greedy decisions
as elimination on the cells-by-inner-cells model matrix, an order of magnitude faster). A
release of several tables starts from the basis its own module builds.

Rank is not the whole story: counts cannot be negative, so a published sum of cells that all
sit at their least possible value pins them (two suppressed 1s under a published 2 when zeros
are never suppressed; two suppressed zeros under a total of 0): the frequency-table "singleton"
problem. A second elimination, in which those at-bound primary cells are known from the start,
tells when a candidate would reveal a combination of them alone, and with which coefficients
(its tag columns, :class:`Elimination`). A combination of one sign is at its least value only
with every cell in it at its bound: such a candidate is hidden (Langsrud's "anySum").

One that mixes signs pins none of them by itself, but several can together (``x1 - x2 + x3``
and ``x2 - x3 + x4`` give ``x1 + x4``). An at-bound cell is pinned exactly when some combination
of the at-bound cells with no negative coefficient, its own positive, is fixed by the published
cells (Farkas: else a move raises it and lowers none of them). So a mixed combination is
published only when it shares no at-bound cell with those published before: then no sum of
them, each mixed, has one sign, and the revealed combinations pin no cell. GaussSuppression's
sign test publishes every mixed one. Secondary cells once the interval audit and its repair
(:mod:`.audit`) pass, on the 1.5M-person census (threshold 3, zeros never suppressed):

============================================  =================  =====================
                                              area × age ×       area × age ×
                                              citizenship        activity × sex
============================================  =================  =====================
every such candidate hidden (before)          2,752 cells        8,435
every mixed one published                     2,663              10,367 (1,688 primary
                                                                 cells left narrow)
mixed and disjoint (this rule)                2,688, none narrow 8,035
============================================  =================  =====================
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from tabsafe.model.hierarchy import Hierarchy
from tabsafe.model.table import Table
from tabsafe.progress import report

try:
    from tabsafe.protect.suppression import _gauss as _compiled
except ImportError:  # pragma: no cover - a checkout whose extension was not built
    _compiled = None

if TYPE_CHECKING:  # pragma: no cover - an annotation only: problem.py builds on this module
    from tabsafe.protect.suppression.problem import Problem

__all__ = ["Elimination", "as_csc", "chain_basis", "gauss", "gauss_reference", "joint_basis", "null_basis",
           "support_basis", "support_matrix", "table_basis"]

_TOL = 1e-9
#: candidates between two progress events of the elimination
PROGRESS_EVERY = 2048


def chain_basis(h: Hierarchy) -> list[dict[int, float]]:
    """A sparse basis of the additive vectors over one hierarchy's codes (by display position).

    ``v`` is additive when ``v[parent] = Σ v[children]`` for every inner code. The basis: the
    chain from the root down the first children to a leaf, and for every pair of consecutive
    siblings the difference of their chains. There are as many vectors as leaves.
    """
    pos = h.position

    def chain(code: str) -> dict[int, float]:
        out = {pos[code]: 1.0}
        while not h.is_leaf(code):
            code = h.children(code)[0]
            out[pos[code]] = 1.0
        return out

    vectors = [chain(h.total)]
    for code in h.order:
        kids = h.children(code)
        for a, b in itertools.pairwise(kids):
            v = dict(chain(a))
            for k, val in chain(b).items():
                v[k] = v.get(k, 0.0) - val
            vectors.append(v)
    return vectors


def null_basis(table: Table) -> list[dict[int, float]]:
    """A sparse basis of all additive tables (``A x = 0``) of ``table``'s grid: tensor products
    of chain bases (cells are grid ids)."""
    bases = [chain_basis(d.hierarchy) for d in table.dimensions]
    strides = table.strides
    columns: list[dict[int, float]] = []
    for combo in itertools.product(*bases):
        col = {0: 1.0}
        for axis, vec in enumerate(combo):
            stride = strides[axis]
            col = {r + p * stride: a * b for r, a in col.items() for p, b in vec.items()}
        columns.append(col)
    return columns


def support_basis(table: Table) -> list[dict[int, float]]:
    """A sparse basis of the additive tables of ``table``'s grid that are zero wherever the table
    is zero: one column per non-zero inner cell, 1 at that cell and at every margin it adds to
    (the cells-by-inner-cells model matrix of GaussSuppression, restricted to the inner cells with
    records).

    An additive table is fixed by its inner cells; zero inner cells are published zeros, and a
    zero margin's inner cells are all zero, so these columns span exactly the additive tables an
    intruder cannot tell from the true one once every zero cell is published (``zeros='never'``).
    On a sparse table (the 7-variable census hypercube is 92% zeros) this is a small part of the
    full basis, and the elimination never publishes the zeros one by one.
    """
    dense = table.densify()
    counts = np.asarray(dense.counts)
    leaf_cells = np.flatnonzero(np.asarray(dense.leaf_mask) & (counts != 0))
    above: list[list[np.ndarray]] = []  # per dimension, per code position: the positions of its ancestors and itself
    for d in dense.dimensions:
        h = d.hierarchy
        above.append([np.array([h.position[a] for a in h.ancestors(code)], dtype=np.int64) for code in h.order])
    positions = [np.asarray(dense.positions(a), dtype=np.int64) for a in range(len(dense.dimensions))]
    strides = dense.strides
    columns: list[dict[int, float]] = []
    for cell in leaf_cells.tolist():
        ids = np.zeros(1, dtype=np.int64)
        for axis, stride in enumerate(strides):
            ids = (ids[:, None] + above[axis][positions[axis][cell]][None, :] * stride).ravel()
        columns.append(dict.fromkeys(ids.tolist(), 1.0))
    return columns


def support_matrix(table: Table) -> sp.csc_matrix:
    """:func:`support_basis` as a sparse matrix (cells × basis tables, the same columns in the same
    order), built with array operations: the 7-variable hypercube's 2.5 million entries in a
    second rather than the dicts' half a minute."""
    dense = table.densify()
    counts = np.asarray(dense.counts)
    leaf_cells = np.flatnonzero(np.asarray(dense.leaf_mask) & (counts != 0))
    col = np.arange(leaf_cells.size, dtype=np.int64)
    ids = np.zeros(leaf_cells.size, dtype=np.int64)
    for axis, (d, stride) in enumerate(zip(dense.dimensions, dense.strides)):
        h = d.hierarchy
        # per code position, the positions of the code and its ancestors (ragged, flattened)
        lists = [np.array([h.position[a] for a in h.ancestors(code)], dtype=np.int64) for code in h.order]
        lengths = np.array([x.size for x in lists], dtype=np.int64)
        flat = np.concatenate(lists)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        pos = np.asarray(dense.positions(axis), dtype=np.int64)[leaf_cells[col]]
        k = lengths[pos]
        offs = np.arange(int(k.sum()), dtype=np.int64) - np.repeat(np.cumsum(k) - k, k)
        ids = np.repeat(ids, k) + flat[np.repeat(starts[pos], k) + offs] * stride
        col = np.repeat(col, k)
    m = sp.csc_matrix((np.ones(ids.size), (ids, col)), shape=(dense.n_cells, leaf_cells.size))
    m.sort_indices()
    return m


def table_basis(table: Table, zeros_published: bool) -> list[dict[int, float]] | sp.csc_matrix:
    """The basis the elimination starts from: :func:`support_matrix` when every zero cell is
    published, else :func:`null_basis`."""
    return support_matrix(table) if zeros_published else null_basis(table)


def as_csc(basis: Sequence[dict[int, float]] | sp.spmatrix, n_cells: int) -> sp.csc_matrix:
    """A basis (columns as ``{cell: value}``, or a sparse matrix) as a CSC matrix with sorted
    row indices (what the compiled elimination reads)."""
    if sp.issparse(basis):
        m = sp.csc_matrix(basis)
    else:
        lengths = np.fromiter((len(c) for c in basis), dtype=np.int64, count=len(basis))
        rows = np.fromiter((r for c in basis for r in c), dtype=np.int64, count=int(lengths.sum()))
        vals = np.fromiter((v for c in basis for v in c.values()), dtype=np.float64, count=int(lengths.sum()))
        indptr = np.concatenate([[0], np.cumsum(lengths)])
        m = sp.csc_matrix((vals, rows, indptr), shape=(n_cells, len(basis)))
    m.sum_duplicates()
    m.sort_indices()
    return m


def as_columns(basis: Sequence[dict[int, float]] | sp.spmatrix) -> Sequence[dict[int, float]]:
    """A basis as columns ``{cell: value}`` (what :class:`Elimination` reads)."""
    if not sp.issparse(basis):
        return basis
    m = sp.csc_matrix(basis)
    return [dict(zip(m.indices[m.indptr[k]:m.indptr[k + 1]].tolist(), m.data[m.indptr[k]:m.indptr[k + 1]].tolist()))
            for k in range(m.shape[1])]


class Elimination:
    """A sparse basis of the additive tables that are 0 on every published cell.

    Rows are cells still of interest, columns basis tables (sparse dicts both ways). Publishing
    cell ``c`` keeps the tables that are 0 at ``c``: pivot on a column ``k`` of row ``c`` (the
    sparsest) and subtract multiples of it from the row's other columns. A cell is determined by
    the published cells exactly when its row is empty. Not a value: it changes as cells are
    published (it lives inside one call of :func:`gauss`).

    ``tagged`` cells get a tag column each: 1 in the cell's own row. Tags are never pivots and
    do not count in :meth:`determined`, but the pivots' row operations carry them: a row is
    always its cell's original row less a combination of the rows of the cells published, and
    its tags hold minus the coefficients of the tagged ones. Pivots are the sparsest real
    column, the lowest id among equals, so that the tags (which, unlike the decisions of the
    rank rule, depend on the pivots) are the same here and in the compiled elimination.
    """

    def __init__(self, basis: Sequence[dict[int, float]], tracked: np.ndarray,
                 tagged: Sequence[int] = ()) -> None:
        self.rows: dict[int, dict[int, float]] = {}
        self.cols: dict[int, dict[int, float]] = {}
        for k, col in enumerate(basis):
            kept = {r: v for r, v in col.items() if tracked[r]}
            if kept:
                self.cols[k] = kept
                for r, v in kept.items():
                    self.rows.setdefault(r, {})[k] = v
        # tag columns (ids from len(basis) on): one per tagged cell, 1 in its own row. They are
        # never pivots and never make a cell undetermined; the row operations of the pivots carry
        # them along, so a row whose real part is empty holds in its tags the combination of the
        # tagged cells that fixes the cell (see :meth:`tags`)
        self.real = len(basis)
        for i, r in enumerate(tagged):
            if r in self.rows:
                self.cols[self.real + i] = {r: 1.0}
                self.rows[r][self.real + i] = 1.0

    def determined(self, c: int) -> bool:
        return not any(k < self.real for k in self.rows.get(c, ()))

    def tags(self, c: int) -> dict[int, float]:
        """The tags of row ``c`` (tag number → value): once the row's real part is empty, the
        cell's value is a known constant less ``Σ tags[j] · x[tagged[j]]``."""
        return {k - self.real: v for k, v in self.rows.get(c, {}).items() if k >= self.real}

    def reveals(self, c: int, guarded: np.ndarray) -> bool:
        """Would publishing ``c`` determine a guarded cell (one whose row is proportional)?"""
        rc = self.rows.get(c)
        if not rc:
            return False
        k = min(rc, key=lambda q: len(self.cols[q]))
        for p in self.cols[k]:
            if p != c and guarded[p]:
                rp = self.rows[p]
                if len(rp) == len(rc) and rp.keys() == rc.keys():
                    f = rp[k] / rc[k]
                    if all(abs(rp[m] - f * rc[m]) <= _TOL * max(1.0, abs(rp[m])) for m in rc):
                        return True
        return False

    def drop(self, c: int) -> dict[int, float] | None:
        """Forget cell ``c`` (hidden for good, never checked again); return its row."""
        rc = self.rows.pop(c, None)
        if rc:
            for k in rc:
                del self.cols[k][c]
        return rc

    def publish(self, c: int) -> None:
        """Keep the basis tables that are 0 at ``c`` (an intruder knows ``c``)."""
        rc = self.drop(c)
        if rc and any(k < self.real for k in rc):  # an empty row: already determined by what is
            self._restrict(rc)                     # published; publishing it adds nothing

    def equate(self, a: int, b: int) -> None:
        """Keep the basis tables that agree at ``a`` and ``b`` (two copies of one cell)."""
        f = dict(self.rows.get(a, {}))
        for k, v in self.rows.get(b, {}).items():
            f[k] = f.get(k, 0.0) - v
        f = {k: v for k, v in f.items() if abs(v) > _TOL}
        if f:
            self._restrict(f)

    def _restrict(self, rc: dict[int, float]) -> None:
        """Keep the combinations ``Σ α_k col_k`` with ``Σ α_k rc[k] = 0``: pivot on the sparsest
        column ``k`` of ``rc`` and subtract multiples of it from the others."""
        rows, cols = self.rows, self.cols
        k = min((q for q in rc if q < self.real), key=lambda q: (len(cols[q]), q))
        ck = cols.pop(k)
        a = rc[k]
        for m, bm in rc.items():
            if m == k:
                continue
            f = bm / a
            cm = cols[m]
            for r, v in ck.items():
                val = cm.get(r, 0.0) - f * v
                rr = rows[r]
                if abs(val) <= _TOL:
                    if r in cm:
                        del cm[r]
                        del rr[m]
                else:
                    cm[r] = val
                    rr[m] = val
            if not cm:
                del cols[m]
        for r in ck:
            del rows[r][k]


def joint_basis(bases: Sequence[Sequence[dict[int, float]]], cells: Sequence[np.ndarray],
                n_cells: int) -> list[dict[int, float]]:
    """A sparse basis of the vectors additive in every table of a union of tables.

    ``bases[t]`` is a basis of table ``t``'s additive vectors over its grid; ``cells[t][g]`` the
    union's cell of its grid cell ``g``. Each table's basis is laid over its own copy of the
    cells; the copies of a shared cell are then made equal one pair at a time (a pivot each,
    exactly as publishing a cell is) and merged.

    The shared cells are equated the narrowest first (fewest basis tables in their copies' rows:
    inner cells of the shared margins before their aggregates). Once the copies of an aggregate's
    children agree, the aggregate's copies agree already and equating them is no pivot at all;
    the other way round, every aggregate's pivot is as wide as its subtree and fills the basis
    in. The space is the same in any order; on the demo release at 1.5M persons (five tables,
    18,476 copies) this order takes 2.4 s instead of 200 s.
    """
    offsets = np.cumsum([0] + [c.size for c in cells])
    columns = [{int(offsets[t]) + g: v for g, v in col.items()} for t, basis in enumerate(bases)
               for col in as_columns(basis)]
    copy_of = np.concatenate(cells) if cells else np.zeros(0, dtype=np.int64)
    elim = Elimination(columns, np.ones(copy_of.size, dtype=bool))
    order = np.argsort(copy_of, kind="stable")
    bounds = np.flatnonzero(np.diff(copy_of[order])) + 1
    groups = [g for g in np.split(order, bounds) if g.size > 1]
    width = np.array([sum(len(elim.rows.get(int(r), ())) for r in g) for g in groups], dtype=np.int64)
    for i in np.argsort(width, kind="stable").tolist():
        group = groups[i]
        first = int(group[0])
        for other in group[1:].tolist():
            elim.equate(first, other)
            elim.drop(other)
    return [{int(copy_of[r]): v for r, v in col.items()} for col in elim.cols.values() if col]


class TimeUp(Exception):
    """A step that was given a deadline would pass it: its caller goes on without its result."""


def gauss(problem: Problem, hidden_first: np.ndarray, deadline: float | None = None) -> np.ndarray:
    """:func:`gauss_reference`, compiled (``_gauss.c``: the same decisions, the basis stored in
    arrays, 12 bytes an entry in a column and 4 in a row instead of dicts' 250), with the same
    progress events and deadline. Falls back to the reference when the extension is not built."""
    if _compiled is None:  # a checkout whose extension was not built (tests/properties/test_elimination_compiled.py)
        return gauss_reference(problem, hidden_first, deadline)
    n = problem.n_cells
    order = problem.order(hidden_first)
    forced = np.flatnonzero(problem.forced)[::-1].astype(np.int64)
    primary = np.ascontiguousarray(problem.primary, dtype=np.uint8)
    at_bound = problem.at_bound()
    tracked = np.zeros(n, dtype=np.uint8)
    tracked[order] = 1
    tracked[forced] = 1
    tracked[problem.primary] = 1
    basis = as_csc(problem.basis, n)
    secondary = np.zeros(n, dtype=np.uint8)
    total = int(order.size)
    last = [-PROGRESS_EVERY]

    def tick(i: int, _total: int, hidden: int, entries: int, peak: int) -> None:
        if deadline is not None and time.perf_counter() > deadline:
            raise TimeUp
        if i >= 0 and i - last[0] >= PROGRESS_EVERY:
            last[0] = i
            report("suppression", phase="elimination", done=i, total=total, secondary=hidden, entries=entries,
                   peak_entries=peak)

    _compiled.gauss(n, basis.shape[1], basis.indptr.astype(np.int64), basis.indices.astype(np.int32),
                    basis.data.astype(np.float64), tracked, primary,
                    None if at_bound is None else np.flatnonzero(at_bound).astype(np.int64),
                    forced, order.astype(np.int64), secondary, tick)
    return secondary.astype(bool)


def gauss_reference(problem: Problem, hidden_first: np.ndarray, deadline: float | None = None) -> np.ndarray:
    """Greedy secondary suppression by Gaussian elimination (GaussSuppression's principle).

    Cells published by force (``problem.forced``: zeros never hidden) are published first, the
    deepest first (much less fill-in), without any check; then the candidates not in
    ``hidden_first``, the most wanted published first (:meth:`Problem.order`), each published
    unless that reveals a primary cell — or, through the second elimination, a combination of
    primary cells at their least value (module docstring).

    Returns:
        mask of the candidates that must be suppressed (``hidden_first`` not included).

    ``c`` reveals a primary ``p`` iff their rows are proportional: then every table the intruder
    cannot rule out moves ``p`` and ``c`` together, and knowing ``c`` gives ``p``.

    With a ``deadline`` (a ``time.perf_counter()`` value) the elimination stops once past it
    (:class:`TimeUp`): the optimal mode's helpers give up a pattern rather than the
    time limit.
    """
    def past(i: int) -> None:  # every 64 cells: the clock costs more than a pivot
        if deadline is not None and i % 64 == 0 and time.perf_counter() > deadline:
            raise TimeUp

    n = problem.n_cells
    order = problem.order(hidden_first)
    forced = np.flatnonzero(problem.forced)[::-1]
    primary = problem.primary
    at_bound = problem.at_bound()
    tracked = np.zeros(n, dtype=bool)
    tracked[order] = True
    tracked[forced] = True
    tracked |= primary
    columns = as_columns(problem.basis)
    main = Elimination(columns, tracked)
    second = None
    if at_bound is not None:
        second = Elimination(columns, tracked, np.flatnonzero(at_bound).tolist())
        for i, c in enumerate(np.flatnonzero(at_bound).tolist()):
            past(i)
            second.publish(c)
    secondary = np.zeros(n, dtype=bool)
    used: set[int] = set()  # tags in a combination the sign test let through
    for i, c in enumerate(forced.tolist()):
        past(i)
        main.publish(c)
        if second is not None:
            second.publish(c)
    for i, c in enumerate(order.tolist()):
        past(i)
        if i % PROGRESS_EVERY == 0:
            report("suppression", phase="elimination", done=i, total=int(order.size), secondary=int(secondary.sum()))
        hide = main.reveals(c, primary)
        if not hide and second is not None and second.determined(c) and not main.determined(c):
            tags = second.tags(c)
            signs = {v > 0 for v in tags.values()}
            hide = len(signs) < 2 or not used.isdisjoint(tags)
            if not hide:
                used.update(tags)
        if hide:
            secondary[c] = True
            main.drop(c)
            if second is not None:
                second.drop(c)
        else:
            main.publish(c)
            if second is not None:
                second.publish(c)
    return secondary
