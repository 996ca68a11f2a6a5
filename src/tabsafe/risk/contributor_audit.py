"""The interval audit from the contributors' point of view: what an insider computes after suppression.

Source: the handbook of Hundepool et al. (2012), §4.2 "Secondary tabular data protection
methods": the feasibility interval of a sensitive cell must reach its upper and lower protection
levels, and "a suppression pattern should not be considered as valid, when certain respondents
can use their insider knowledge (on their own contribution to a cell) to disclose individual
contributions of other respondents" — the singleton and multiple-singleton problems (Cox 2001).

An intruder is a contributor (or a coalition of them: the two largest of a cell) who knows the
published cells, the table's additive relations, and its own contribution to every cell: a
suppressed cell it contributes to is at least its own contribution (contributions are not
negative), and one whose every contributor is in the coalition is known exactly. The empty
coalition is the public. For each intruder, the interval of every primary cell it does not hold
alone is computed by linear programming over the suppressed cells it does not know, and checked
on both sides: the maximum must reach ``value + upper level``, the minimum ``value − lower level``.

Most intruders need no program: a table the public cannot rule out that the intruder cannot rule
out either is a witness for the intruder too. For each primary cell and side the public pass
keeps the nearest such table that reaches the level — the true table moved towards the
public extreme just as far as needed (a convex combination of two feasible tables, so feasible)
— and an intruder is checked against it in a vector operation: it passes unless the witness moves
a cell it knows below its own contribution (or at all, for a cell it knows exactly). Only the
(intruder, cell) pairs that fail get programs, warm-started per intruder and component.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import scipy.sparse as sp

from tabsafe.model.contributions import Contributions
from tabsafe.risk.intervals import capacity, independent_parts
from tabsafe.solver import Extreme, ExtremeSolver

__all__ = ["ContributorAudit", "Finding", "Intruder", "contributor_audit", "intruders_of"]

_TOL = 1e-6


@dataclass(frozen=True)
class Intruder:
    """A coalition of contributors (indices into the audited :class:`Contributions`' units);
    the empty coalition is the public."""

    units: tuple[int, ...]
    label: str = "public"


@dataclass(frozen=True, eq=False)
class Finding:
    """A primary cell whose interval, computed by ``intruder``, misses a protection level.

    Attributes:
        intruder: who computes it.
        cell: the primary cell.
        side: ``"upper"`` or ``"lower"``.
        bound: the bound the intruder finds (its maximum or minimum).
        need: the bound it must reach (``value ± level``).
        holders: published cells whose hiding may widen it (from the program's duals).
    """

    intruder: Intruder
    cell: int
    side: str
    bound: float
    need: float
    holders: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


@dataclass(frozen=True, eq=False)
class ContributorAudit:
    """The audit of a pattern: the findings and what it took.

    Attributes:
        findings: every (intruder, cell, side) that misses its level.
        intruders: how many intruders were checked (the public included).
        programs: linear programs solved.
        witnessed: (intruder, cell, side) checks settled by a public witness without a program.
    """

    findings: tuple[Finding, ...]
    intruders: int
    programs: int
    witnessed: int

    @property
    def passed(self) -> bool:
        return not self.findings

    def narrow(self, n_cells: int) -> np.ndarray:
        out = np.zeros(n_cells, dtype=bool)
        out[[f.cell for f in self.findings]] = True
        return out

    def figures(self) -> dict[str, int]:
        return {"intruders": self.intruders, "programs": self.programs, "witnessed": self.witnessed,
                "findings": len(self.findings)}


def intruders_of(c: Contributions, suppressed: np.ndarray, primary: np.ndarray, *,
                 scope: str = "suppressed", coalitions: bool = True) -> list[Intruder]:
    """The intruders to audit: the public; the largest contributor of every primary cell (of
    every suppressed cell with ``scope="suppressed"``: a dominance check across the groups of
    suppressed cells, GaussSuppression issue #160); with ``coalitions``, the two largest of every
    primary cell together."""
    cells = np.flatnonzero((suppressed if scope == "suppressed" else primary) & ~c.empty)
    first = c.unit[c.ptr[cells]]
    out = [Intruder(())]
    for u in np.unique(first).tolist():
        out.append(Intruder((u,), f"contributor {c.units[u]}"))
    if coalitions:
        seen: set[tuple[int, int]] = set()
        for p in np.flatnonzero(primary & (c.contributors >= 3)).tolist():
            pair = tuple(sorted(c.unit[c.ptr[p]:c.ptr[p] + 2].tolist()))
            if pair not in seen:
                seen.add(pair)  # type: ignore[arg-type]
                out.append(Intruder(pair, f"contributors {c.units[pair[0]]} and {c.units[pair[1]]}"))  # type: ignore[misc]
    return out


@dataclass(eq=False)
class _Component:
    """One independent part of the suppressed cells: its cells, rows and the public witnesses."""

    cells: np.ndarray  # grid ids
    rows: np.ndarray  # global relation rows
    targets: np.ndarray  # grid ids of its primary cells
    up: dict[int, np.ndarray | None]  # target -> the move (over ``cells``) to its public maximum
    down: dict[int, np.ndarray | None]  # … to its public minimum (None: no finite witness)


class _Knowledge:
    """Per intruder: its own contribution to each cell and the cells it knows exactly."""

    def __init__(self, c: Contributions) -> None:
        self.c = c
        order = np.argsort(c.unit, kind="stable")
        self.entries = order
        self.start = np.searchsorted(c.unit[order], np.arange(c.units.size + 1))
        self.cell_of = np.repeat(np.arange(c.n_cells), np.diff(c.ptr))

    def of(self, intruder: Intruder) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(cells it contributes to, its contribution there, whether it holds the whole cell)."""
        if not intruder.units:
            z = np.zeros(0, dtype=np.int64)
            return z, np.zeros(0), np.zeros(0, dtype=bool)
        idx = np.concatenate([self.entries[self.start[u]:self.start[u + 1]] for u in intruder.units])
        cells, inv = np.unique(self.cell_of[idx], return_inverse=True)
        own = np.bincount(inv, weights=self.c.published[idx], minlength=cells.size)
        held = np.bincount(inv, minlength=cells.size) == self.c.contributors[cells]
        return cells, own, held


def _system(A: sp.csr_matrix, values: np.ndarray, cols: np.ndarray, rows: np.ndarray,
            known: np.ndarray) -> tuple[sp.csr_matrix, np.ndarray]:
    """The relations ``rows`` over the unknown cells ``cols`` with every other cell at its value
    (``known``: mask of cells whose value the intruder has)."""
    sub = A[rows]
    b = -(sub[:, np.flatnonzero(known)] @ values[known]) if known.any() else np.zeros(rows.size)
    return sp.csr_matrix(sub[:, cols]), b


def _public(A: sp.csr_matrix, values: np.ndarray, suppressed: np.ndarray, lb: np.ndarray,
            primary: np.ndarray, upl: np.ndarray, lpl: np.ndarray) -> tuple[list[_Component], list[tuple], int]:
    """The public pass: components, public findings and witnesses. Returns (components, public
    narrow (cell, side, bound, need, extreme, rows) tuples, programs solved)."""
    S = np.flatnonzero(suppressed)
    A_S = sp.csc_matrix(A[:, S])
    rows_all = np.flatnonzero(np.diff(sp.csr_matrix(A_S).indptr))
    A_S = sp.csr_matrix(A_S[rows_all])
    comps: list[_Component] = []
    narrow: list[tuple] = []
    programs = 0
    for cols, crow in independent_parts(A_S):
        cells = S[cols]
        targets = cells[primary[cells]]
        comp = _Component(cells, rows_all[crow], targets, {}, {})
        comps.append(comp)
        if targets.size == 0:
            continue
        if crow.size == 0:  # cells in no relation: unbounded above, held below by their bound
            for p in targets.tolist():
                comp.up[p] = None
                comp.down[p] = None
                if lb[p] > values[p] - lpl[p] + _TOL:
                    narrow.append((p, "lower", lb[p], values[p] - lpl[p], None, comp.rows))
            continue
        sub, b = _system(A, values, cells, comp.rows, ~suppressed)
        solver = ExtremeSolver(sub, b, lb[cells], np.full(cells.size, math.inf))
        local = {int(g): i for i, g in enumerate(cells.tolist())}
        for p in targets.tolist():
            i = local[p]
            for side, maximize, need in (("upper", True, values[p] + upl[p]), ("lower", False, values[p] - lpl[p])):
                if not maximize and values[p] <= lb[p] and need < lb[p] - _TOL:
                    narrow.append((p, side, lb[p], need, None, comp.rows))
                    (comp.down)[p] = None
                    continue
                ext = solver.extreme(i, maximize=maximize)
                programs += 1
                reach = ext.value >= need - _TOL if maximize else ext.value <= need + _TOL
                # unbounded: no finite witness, the intruders get programs
                move = None if ext.x is None else ext.x - values[cells]
                (comp.up if maximize else comp.down)[p] = move if reach else None
                if not reach:
                    narrow.append((p, side, ext.value, need, ext, comp.rows))
    return comps, narrow, programs


def _holders(A: sp.csr_matrix, rows: np.ndarray, cell: int, room: np.ndarray, hidden: np.ndarray,
             side: str, ext: Extreme | None) -> np.ndarray:
    """Published cells whose hiding can move ``cell``'s bound on ``side`` (from the duals)."""
    if ext is None or ext.duals is None:
        return np.zeros(0, dtype=np.int64)
    extremes = (None, ext) if side == "upper" else (ext, None)
    idx, _c = capacity(A, rows, cell, room, hidden, extremes)
    return idx[~hidden[idx]]


def _witnessed(move: np.ndarray | None, values: np.ndarray, cells: np.ndarray, local: np.ndarray,
               own: np.ndarray, held: np.ndarray, at_p: int, shift: float) -> bool:
    """Whether the true table moved along the public extreme ``move`` just far enough to shift
    cell ``at_p`` (its index in ``cells``) by ``shift`` is a table the intruder cannot rule out
    either (a convex combination of two tables the public cannot rule out)."""
    if move is None:
        return False
    span = move[at_p]
    if abs(shift) <= _TOL:
        return True
    if abs(span) <= _TOL or shift / span < 0 or shift / span > 1 + 1e-9:
        return False
    at = (shift / span) * move[local]
    if np.any(np.abs(at[held]) > _TOL):
        return False
    return bool(np.all(values[cells[local]] + at >= own - _TOL))


def _components_of(comps: Sequence[_Component], n: int) -> np.ndarray:
    comp_of = np.full(n, -1, dtype=np.int64)
    for k, comp in enumerate(comps):
        comp_of[comp.cells] = k
    return comp_of


def _needs(values: np.ndarray, upl: np.ndarray, lpl: np.ndarray, p: int, own_p: float) -> tuple[float, float]:
    """The bounds an intruder's interval of ``p`` must reach: ``value + upper level`` and
    ``value − lower level``, the latter never below the intruder's own contribution to ``p``:
    knowing the cell is at least what it gave itself tells nothing of the others."""
    return values[p] + upl[p], values[p] - min(lpl[p], max(values[p] - own_p, 0.0))


def _intruder_checks(comp: _Component, values: np.ndarray, upl: np.ndarray, lpl: np.ndarray,
                     kcells: np.ndarray, own: np.ndarray, held: np.ndarray) -> Iterator[tuple[int, str, bool]]:
    """(target, side, witnessed) for the targets of ``comp`` the intruder does not hold alone."""
    local = np.searchsorted(comp.cells, kcells)  # a component's cells are sorted grid ids
    held_cells = set(kcells[held].tolist())
    own_at = dict(zip(kcells.tolist(), own.tolist()))
    for p in comp.targets.tolist():
        if p in held_cells:
            continue
        i = int(np.searchsorted(comp.cells, p))
        up, down = _needs(values, upl, lpl, p, own_at.get(p, 0.0))
        for side, moves, need in (("upper", comp.up, up), ("lower", comp.down, down)):
            yield p, side, _witnessed(moves.get(p), values, comp.cells, local, own, held, i, need - values[p])


def _attack(A: sp.csr_matrix, values: np.ndarray, suppressed: np.ndarray, lb: np.ndarray,
            comp: _Component, kcells: np.ndarray, own: np.ndarray, held: np.ndarray,
            checks: list[tuple[int, str]], upl: np.ndarray, lpl: np.ndarray,
            intruder: Intruder) -> tuple[list[Finding], int]:
    """Programs for the (target, side) pairs no witness settled, over what the intruder does not
    know in ``comp``."""
    known = ~suppressed
    known[kcells[held]] = True
    lb_i = lb.copy()
    lb_i[kcells] = np.maximum(lb_i[kcells], own)
    cols = comp.cells[~known[comp.cells]]
    sub, b = _system(A, values, cols, comp.rows, known)
    solver = ExtremeSolver(sub, b, lb_i[cols], np.full(cols.size, math.inf))
    local = {int(g): i for i, g in enumerate(cols.tolist())}
    room = values - lb_i
    hidden = suppressed & ~known
    findings: list[Finding] = []
    programs = 0
    best: dict[tuple[int, str], float] = {}
    own_at = dict(zip(kcells.tolist(), own.tolist()))
    for p, side in checks:
        up, down = _needs(values, upl, lpl, p, own_at.get(p, 0.0))
        need = up if side == "upper" else down
        seen = best.get((p, side))
        if seen is not None and (seen >= need - _TOL if side == "upper" else seen <= need + _TOL):
            continue
        ext = solver.extreme(local[p], maximize=side == "upper")
        programs += 1
        if ext.x is not None:  # this table settles other checks of the same intruder too
            for q, s2 in checks:
                v = ext.x[local[q]]
                key = (q, s2)
                best[key] = max(best.get(key, -math.inf), v) if s2 == "upper" else min(best.get(key, math.inf), v)
        ok = ext.value >= need - _TOL if side == "upper" else ext.value <= need + _TOL
        if not ok:
            findings.append(Finding(intruder, p, side, ext.value, need,
                                    _holders(A, comp.rows, p, room, hidden, side, ext)))
    return findings, programs


def contributor_audit(
    A: sp.spmatrix,
    values: np.ndarray,
    suppressed: np.ndarray,
    c: Contributions,
    *,
    primary: np.ndarray,
    upper: np.ndarray,
    lower: np.ndarray,
    intruders: Sequence[Intruder] | None = None,
    lower_bound: np.ndarray | float | None = None,
) -> ContributorAudit:
    """Audit a suppression pattern from the public's and every intruder's point of view.

    Args:
        A: the table's relations (``A @ x = 0``), one column per grid cell.
        values: the published values of the cells (true values; hidden cells included).
        suppressed: the pattern.
        c: who contributed what (the level intruders act at: holdings when given).
        primary: the cells that need protection.
        upper, lower: their upper and lower protection levels.
        intruders: who attacks (default :func:`intruders_of`).
        lower_bound: what anyone knows as the least value of a suppressed cell (default 0, or
            no bound when a contribution is negative).

    Returns:
        the findings: (intruder, cell, side) whose bound misses the level, with holders.
    """
    A = sp.csr_matrix(A)
    n = A.shape[1]
    values = np.asarray(values, dtype=np.float64)
    suppressed = np.asarray(suppressed, dtype=bool)
    primary = np.asarray(primary, dtype=bool) & suppressed
    if lower_bound is None:
        lower_bound = -math.inf if c.negative else 0.0
    # the programs run in units of a thousandth of the largest value: sums of decimal magnitudes
    # are additive only to about 1e-16 of their size, and the solver's tolerances are absolute
    scale = max(1.0, float(np.abs(values[np.isfinite(values)]).max(initial=0.0))) / 1000.0
    values = values / scale
    lb = np.broadcast_to(np.asarray(lower_bound, dtype=np.float64), (n,)) / scale
    upl = np.asarray(upper, dtype=np.float64) / scale
    lpl = np.asarray(lower, dtype=np.float64) / scale
    intruders = list(intruders_of(c, suppressed, primary) if intruders is None else intruders)
    comps, public, programs = _public(A, values, suppressed, lb, primary, upl, lpl)
    public_intruder = Intruder(())
    findings = [Finding(public_intruder, p, side, bound * scale, need * scale,
                        _holders(A, rows, p, values - lb, suppressed, side, ext))
                for p, side, bound, need, ext, rows in public]
    failed_public = {(f.cell, f.side) for f in findings}
    comp_of = _components_of(comps, n)
    know = _Knowledge(c)
    witnessed = 0
    for intruder in intruders:
        if not intruder.units:
            continue
        cells, own, held = know.of(intruder)
        keep = suppressed[cells]
        cells, own, held = cells[keep], own[keep], held[keep]
        # a contribution known to the intruder (a hair less: it is a float sum of the same
        # contributions as the cell's value, in another order)
        own = own / scale - 1e-9
        if c.negative:
            own = np.full(own.size, -math.inf)  # a contribution says nothing of the others' sum
        for k in np.unique(comp_of[cells]).tolist():
            comp = comps[k]
            if comp.targets.size == 0:
                continue
            inside = comp_of[cells] == k
            kc, ko, kh = cells[inside], own[inside], held[inside]
            todo = []
            for p, side, ok in _intruder_checks(comp, values, upl, lpl, kc, ko, kh):
                if ok:
                    witnessed += 1
                elif (p, side) not in failed_public:  # already a finding: the intruder adds nothing new to repair
                    todo.append((p, side))
            if todo:
                found, solved = _attack(A, values, suppressed, lb, comp, kc, ko, kh, todo, upl, lpl, intruder)
                findings += [replace(f, bound=f.bound * scale, need=f.need * scale) for f in found]
                programs += solved
    return ContributorAudit(tuple(findings), len(intruders), programs, witnessed)
