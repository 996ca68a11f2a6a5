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
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from tabsafe.model.contributions import Contributions
from tabsafe.risk.intervals import capacity, independent_parts
from tabsafe.solver import Extreme, ExtremeSolver

__all__ = ["Auditor", "ContributorAudit", "Finding", "Intruder", "contributor_audit", "intruders_of"]

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
        # a cell of two included: the pair knows it exactly and may narrow another cell with it
        # (the independent attack of tests/properties/test_magnitude_attack.py found such pairs)
        for p in np.flatnonzero(primary & (c.contributors >= 2)).tolist():
            pair = tuple(sorted(c.unit[c.ptr[p]:c.ptr[p] + 2].tolist()))
            if pair not in seen:
                seen.add(pair)  # type: ignore[arg-type]
                out.append(Intruder(pair, f"contributors {c.units[pair[0]]} and {c.units[pair[1]]}"))  # type: ignore[misc]
    return out


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


@dataclass(frozen=True, eq=False)
class _Witness:
    """A move from the true table to a table the public cannot rule out (on ``cells``, sorted)."""

    cells: np.ndarray
    move: np.ndarray
    span: float  # the move at the target

    def holds_for(self, shift: float, kcells: np.ndarray, own: np.ndarray, held: np.ndarray,
                  values: np.ndarray) -> bool:
        """Whether the true table moved along this witness just far enough to shift the target
        by ``shift`` is a table the intruder cannot rule out either (a convex combination of two
        tables the public cannot rule out: feasible for the public; the intruder's own
        contributions and exactly known cells are its only further constraints)."""
        if abs(shift) <= _TOL:
            return True
        lam = shift / self.span if abs(self.span) > _TOL else -1.0
        if not 0 <= lam <= 1 + 1e-9:
            return False
        if self.cells.size == 0:
            return True
        pos = np.minimum(np.searchsorted(self.cells, kcells), self.cells.size - 1)
        on = self.cells[pos] == kcells
        at = np.where(on, lam * self.move[pos], 0.0)
        if np.any(np.abs(at[held]) > _TOL):
            return False
        return bool(np.all(values[kcells] + at >= own - _TOL))


def _system(A: sp.csr_matrix, values: np.ndarray, cols: np.ndarray, rows: np.ndarray,
            known: np.ndarray) -> tuple[sp.csr_matrix, np.ndarray]:
    """The relations ``rows`` over the unknown cells ``cols`` with every other cell at its value
    (``known``: mask of cells whose value the intruder has)."""
    sub = A[rows]
    b = -(sub[:, np.flatnonzero(known)] @ values[known]) if known.any() else np.zeros(rows.size)
    return sp.csr_matrix(sub[:, cols]), b


def _holders(A: sp.csr_matrix, rows: np.ndarray, cell: int, room: np.ndarray, hidden: np.ndarray,
             side: str, ext: Extreme | None) -> np.ndarray:
    """Published cells whose hiding can move ``cell``'s bound on ``side`` (from the duals)."""
    if ext is None or ext.duals is None:
        return np.zeros(0, dtype=np.int64)
    extremes = (None, ext) if side == "upper" else (ext, None)
    idx, _c = capacity(A, rows, cell, room, hidden, extremes)
    return idx[~hidden[idx]]


def _reached(side: str, value: float, need: float) -> bool:
    return value >= need - _TOL if side == "upper" else value <= need + _TOL


class _Program:
    """The interval programs of one component as one intruder sees it, warm-started; every
    optimal point found is kept to settle other checks (module docstring)."""

    def __init__(self, auditor: Auditor, cells: np.ndarray, rows: np.ndarray, known: np.ndarray,
                 lb: np.ndarray) -> None:
        self.cols = cells[~known[cells]]
        self.rows = rows
        sub, b = _system(auditor.A, auditor.values, self.cols, rows, known)
        self.solver = ExtremeSolver(sub, b, lb[self.cols], np.full(self.cols.size, math.inf))
        self.local = {int(g): i for i, g in enumerate(self.cols.tolist())}
        self.points: list[np.ndarray] = []
        self.base = auditor.values[self.cols]

    def seen(self, p: int, side: str, need: float) -> np.ndarray | None:
        """A kept point that already reaches ``need`` at ``p``, if any."""
        i = self.local[p]
        for x in self.points:
            if _reached(side, x[i], need):
                return x
        return None

    def extreme(self, p: int, side: str) -> Extreme:
        ext = self.solver.extreme(self.local[p], maximize=side == "upper")
        if ext.x is not None:
            self.points.append(ext.x)
        return ext

    def push(self, targets: list[tuple[int, str]]) -> None:
        """One program pushing all ``targets`` their way at once (a point for many checks)."""
        cost = np.zeros(self.cols.size)
        for p, side in targets:
            cost[self.local[p]] += 1.0 if side == "upper" else -1.0
        if not cost.any():
            return
        ext = self.solver.optimum(cost, maximize=True)
        if ext.x is not None:
            self.points.append(ext.x)


class Auditor:
    """The contributor audit of a growing pattern (a repair loop adds cells between audits).

    A check that passes stays passed: hiding more cells only widens every interval, for the
    public and for every intruder (a table feasible under a pattern stays feasible under a
    larger one). So each (intruder, cell, side) is settled once, and public witnesses found for
    one pattern serve all larger ones. Not a value: it lives in one suppression run.
    """

    def __init__(self, A: sp.spmatrix, values: np.ndarray, c: Contributions, *, primary: np.ndarray,
                 upper: np.ndarray, lower: np.ndarray, lower_bound: np.ndarray | float | None = None) -> None:
        self.A = sp.csr_matrix(A)
        n = self.A.shape[1]
        values = np.asarray(values, dtype=np.float64)
        # the programs run in units of a thousandth of the largest value: sums of decimal
        # magnitudes are additive only to about 1e-16 of their size, and the solver's
        # tolerances are absolute
        self.scale = max(1.0, float(np.abs(values[np.isfinite(values)]).max(initial=0.0))) / 1000.0
        self.values = values / self.scale
        if lower_bound is None:
            lower_bound = -math.inf if c.negative else 0.0
        self.lb = np.broadcast_to(np.asarray(lower_bound, dtype=np.float64), (n,)) / self.scale
        self.upl = np.asarray(upper, dtype=np.float64) / self.scale
        self.lpl = np.asarray(lower, dtype=np.float64) / self.scale
        self.primary = np.asarray(primary, dtype=bool)
        self.c = c
        self.know = _Knowledge(c)
        self.witness: dict[tuple[int, str], _Witness] = {}
        self.settled: set[tuple[tuple[int, ...], int, str]] = set()
        self.programs = 0
        self.witnessed = 0

    def needs(self, p: int, own_p: float) -> tuple[float, float]:
        """The bounds an interval of ``p`` must reach: ``value + upper level`` and ``value −
        lower level``, the latter never below the intruder's own contribution to ``p`` (knowing
        the cell is at least what it gave itself tells nothing of the others)."""
        v = self.values[p]
        return v + self.upl[p], v - min(self.lpl[p], max(v - own_p, 0.0))

    def audit(self, suppressed: np.ndarray, intruders: Sequence[Intruder]) -> ContributorAudit:
        """Findings of every unsettled (intruder, primary cell, side) under ``suppressed``."""
        suppressed = np.asarray(suppressed, dtype=bool)
        comps = _components(self.A, suppressed)
        comp_of = np.full(suppressed.size, -1, dtype=np.int64)
        for k, (cells, _rows) in enumerate(comps):
            comp_of[cells] = k
        findings = self._public(suppressed, comps)
        failed = {(f.cell, f.side) for f in findings}
        for intruder in intruders:
            if intruder.units:
                findings += self._intruder(intruder, suppressed, comps, comp_of, failed)
        return ContributorAudit(tuple(findings), len(intruders), self.programs, self.witnessed)

    def _public(self, suppressed: np.ndarray, comps: list[tuple[np.ndarray, np.ndarray]]) -> list[Finding]:
        findings: list[Finding] = []
        public = Intruder(())
        for cells, rows in comps:
            todo = [(p, side) for p in cells[self.primary[cells]].tolist() for side in ("upper", "lower")
                    if ((), p, side) not in self.settled]
            if not todo:
                continue
            prog = _Program(self, cells, rows, ~suppressed, self.lb) if rows.size else None
            if prog is not None and len(todo) > 8:
                prog.push([t for t in todo if t[1] == "upper"])
                prog.push([t for t in todo if t[1] == "lower"])
            for p, side in todo:
                need = self.needs(p, -math.inf)[0 if side == "upper" else 1]
                found = self._check(prog, p, side, need, public, suppressed, self.lb)
                if found is None:
                    self.settled.add(((), p, side))
                else:
                    findings.append(found)
        return findings

    def _check(self, prog: _Program | None, p: int, side: str, need: float, intruder: Intruder,
               suppressed: np.ndarray, lb: np.ndarray) -> Finding | None:
        """One (intruder, cell, side) by program: None when it passes (a public pass keeps its
        witness), else the finding with its holders."""
        if prog is None:  # a cell in no relation: unbounded above, held below by its bound
            ok = side == "upper" or lb[p] <= need + _TOL
            return None if ok else Finding(intruder, p, side, lb[p] * self.scale, need * self.scale)
        x = prog.seen(p, side, need)
        if x is None:
            ext = prog.extreme(p, side)
            self.programs += 1
            if not _reached(side, ext.value, need):
                room = self.values - lb
                hidden = np.zeros(suppressed.size, dtype=bool)
                hidden[prog.cols] = True
                return Finding(intruder, p, side, ext.value * self.scale, need * self.scale,
                               _holders(self.A, prog.rows, p, room, hidden, side, ext))
            x = ext.x
        if not intruder.units and x is not None:
            move = x - prog.base
            self.witness[(p, side)] = _Witness(prog.cols, move, float(move[prog.local[p]]))
        return None

    def _intruder(self, intruder: Intruder, suppressed: np.ndarray, comps: list[tuple[np.ndarray, np.ndarray]],
                  comp_of: np.ndarray, failed: set[tuple[int, str]]) -> list[Finding]:
        cells, own, held = self.know.of(intruder)
        keep = suppressed[cells]
        # a contribution known to the intruder (a hair less: it is a float sum of the same
        # contributions as the cell's value, in another order)
        cells, own, held = cells[keep], own[keep] / self.scale - 1e-9, held[keep]
        if self.c.negative:
            own = np.full(own.size, -math.inf)  # a contribution says nothing of the others' sum
        findings: list[Finding] = []
        for k in np.unique(comp_of[cells]).tolist():
            ccells, rows = comps[k]
            inside = comp_of[cells] == k
            kc, ko, kh = cells[inside], own[inside], held[inside]
            todo = self._unsettled(intruder, ccells, kc, ko, kh, failed)
            if not todo:
                continue
            known = ~suppressed
            known[kc[kh]] = True
            lb = self.lb.copy()
            lb[kc] = np.maximum(lb[kc], ko)
            prog = _Program(self, ccells, rows, known, lb) if rows.size else None
            if prog is not None and len(todo) > 8:
                prog.push([(p, s) for p, s, _ in todo])
            for p, side, need in todo:
                found = self._check(prog, p, side, need, intruder, suppressed, lb)
                if found is None:
                    self.settled.add((intruder.units, p, side))
                else:
                    findings.append(found)
        return findings

    def _unsettled(self, intruder: Intruder, ccells: np.ndarray, kc: np.ndarray, ko: np.ndarray, kh: np.ndarray,
                   failed: set[tuple[int, str]]) -> list[tuple[int, str, float]]:
        """The (cell, side, need) of a component the intruder's checks leave open: not settled
        before, not a public finding already, not settled by a public witness."""
        own_at = dict(zip(kc.tolist(), ko.tolist()))
        held_cells = set(kc[kh].tolist())
        todo = []
        for p in ccells[self.primary[ccells]].tolist():
            if p in held_cells:
                continue
            up, down = self.needs(p, own_at.get(p, -math.inf))
            for side, need in (("upper", up), ("lower", down)):
                key = (intruder.units, p, side)
                if key in self.settled or (p, side) in failed:
                    continue
                w = self.witness.get((p, side))
                if w is not None and w.holds_for(need - self.values[p], kc, ko, kh, self.values):
                    self.witnessed += 1
                    self.settled.add(key)
                else:
                    todo.append((p, side, need))
        return todo


def _components(A: sp.csr_matrix, suppressed: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """The independent parts of the suppressed cells: (sorted grid ids, global relation rows)."""
    S = np.flatnonzero(suppressed)
    A_S = sp.csc_matrix(A[:, S])
    rows_all = np.flatnonzero(np.diff(sp.csr_matrix(A_S).indptr))
    A_S = sp.csr_matrix(A_S[rows_all])
    return [(np.sort(S[cols]), rows_all[crow]) for cols, crow in independent_parts(A_S)]


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
    suppressed = np.asarray(suppressed, dtype=bool)
    primary = np.asarray(primary, dtype=bool) & suppressed
    auditor = Auditor(A, values, c, primary=primary, upper=upper, lower=lower, lower_bound=lower_bound)
    chosen = list(intruders_of(c, suppressed, primary) if intruders is None else intruders)
    return auditor.audit(suppressed, chosen)
