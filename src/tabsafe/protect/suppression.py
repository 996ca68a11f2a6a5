"""Cell suppression: primary suppression from the risk rules, secondary suppression, interval audit.

Primary suppression (seed 000 §5.3) hides the cells the rules of :mod:`tabsafe.risk.rules` flag.
Secondary suppression hides further cells so that no primary cell can be recomputed from the
published cells and the table's additive relations (every hierarchy level included):

* **fast** — a Gaussian-elimination heuristic in the spirit of Langsrud's GaussSuppression:
  candidate cells are visited from the most to the least costly to hide, and a candidate is
  published unless publishing it would let an intruder solve for a primary cell (a rank test).
  It keeps a sparse basis of the additive tables that agree with everything published so far
  (rows = cells, columns = basis tables); publishing a cell is one pivot on its row, and it
  reveals a primary cell exactly when the candidate's row is proportional to the primary's.
  The basis starts as the tensor product of per-variable "chain" bases of the additive vectors
  along each hierarchy, which is sparse in every row (a grand total touches one basis table),
  so the elimination stays sparse (the same greedy decisions as elimination on the
  cells-by-inner-cells model matrix, an order of magnitude faster). Rank is not the whole story:
  counts cannot be negative, so a published sum of cells that all sit at their least possible
  value pins them (two suppressed 1s under a published 2 when zeros are never suppressed; two
  suppressed zeros under a total of 0): the frequency-table "singleton" problem. A second
  elimination, in which those at-bound primary cells are known from the start, tells when a
  candidate would reveal a combination of them alone; such a candidate is hidden too
  (Langsrud's "anySum", here without the sign test: cautious). Every pattern is then audited by
  linear programming (:mod:`tabsafe.risk.intervals`); a primary cell whose interval is narrower
  than its protection gets one more suppressed cell among the published cells that hold its
  bound (cells with room to move first), and the elimination runs again until the audit passes.
* **optimal** — an integer program: a binary per candidate cell, minimising the total value
  suppressed or the number of cells, with a covering constraint per primary cell and relation
  (another cell of the relation, able to move the right way, is hidden) and a partner
  constraint per hidden candidate and relation (a lone hidden cell is determined and protects
  nothing, so an optimal pattern never has one). The answer is audited with the interval LPs; a
  primary cell left too narrow yields a cut "one of the published cells holding its bound is
  hidden" (those in relations with non-zero duals: keeping them all published keeps the bound,
  so the cut removes no protected pattern), the answer is completed by the fast heuristic as a
  candidate incumbent, and the program is solved again from the best audited pattern (the fast
  mode's at first). The program's bound is a lower bound on the optimum; the gap to the best
  audited pattern is reported (large tables stop at the time limit with the gap).

Zeros (``zeros``): ``never`` — zero cells are always published (then an intruder knows every
suppressed cell is at least 1, and the audit uses that bound; this also covers what the single
respondent of a suppressed 1 knows about its own cell: the frequency-table form of the
singleton problem); ``safe`` — zeros are not primary but may be hidden as secondary cells
(bound 0); ``primary`` — every zero cell is primary (informative zeros, seed 000 §5.2).

Protection: the feasibility interval of every primary cell must be at least
``max(protection_level, protection_ratio * value)`` wide (default 1: never a single value).

Linked tables (cells shared by several tables, 000 §5.2 "linking"): :meth:`CellSuppression.
protect_linked` works on the table spanned by all their variables, in which each table's cells
are cells and the other cells are unknown to the intruder (hidden); a shared cell is one cell,
so it is suppressed in every table or in none.

The release holds ``count`` with suppressed cells missing and ``status`` (``published`` or
``suppressed``). Which suppressed cells are primary is kept out of the release (``reason``:
``safe``/``primary``/``secondary`` is an evaluation column): a primary cell is known to be small,
which would narrow its interval.
"""

from __future__ import annotations

import argparse
import itertools
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import scipy.sparse as sp

from tabsafe.errors import InputError, MethodError
from tabsafe.model.hierarchy import Hierarchy
from tabsafe.model.result import Protection, Report
from tabsafe.model.table import Dimension, Table
from tabsafe.solver import LinearProgram, solve
from tabsafe.registry import Needs, register_method
from tabsafe.risk.intervals import feasibility_intervals
from tabsafe.risk.rules import RiskRules, RuleThresholds, coalition_rule, extended_rules, threshold_rule

__all__ = [
    "CellSuppression",
    "Cost",
    "Mode",
    "SuppressionResult",
    "ZeroPolicy",
    "joint_table",
    "primary_suppression",
    "secondary_suppression",
]

_TOL = 1e-9
_LP_TOL = 1e-7
MAX_JOINT_CELLS = 5_000_000


class _Choice(str, Enum):
    @classmethod
    def parse(cls, value: Any, name: str) -> Any:
        try:
            return cls(value.value if isinstance(value, Enum) else value)
        except ValueError:
            allowed = ", ".join(m.value for m in cls)
            raise InputError(f"{name} must be one of {allowed}; got {value!r}") from None


class ZeroPolicy(_Choice):
    """How zero cells are treated (see the module docstring)."""

    PRIMARY = "primary"
    SAFE = "safe"
    NEVER = "never"


class Mode(_Choice):
    """Secondary suppression algorithm: Gaussian-elimination heuristic or integer program."""

    FAST = "fast"
    OPTIMAL = "optimal"


class Cost(_Choice):
    """What secondary suppression minimises: total value suppressed or number of cells."""

    COUNT = "count"
    CELLS = "cells"


# ------------------------------------------------------------------------------------------------
# primary suppression


def primary_suppression(
    table: Table,
    rules: RiskRules,
    *,
    zeros: ZeroPolicy | str = ZeroPolicy.NEVER,
) -> np.ndarray:
    """Cells flagged by any of ``rules`` (threshold, extended rules, coalition), plus zeros when
    ``zeros`` is ``primary`` (seed 000 §5.3; METHODS.md §10).

    The zeros rule of :mod:`tabsafe.risk.rules` is a risk report, not a primary rule here: it
    flags the non-zero cells of a 100% row as well, and hiding those only makes sense together
    with the zeros, which ``zeros="primary"`` does for every zero.
    """
    zeros = ZeroPolicy.parse(zeros, "zeros")
    mask = np.zeros(table.n_cells, dtype=bool)
    if rules.min_freq is not None:
        mask |= threshold_rule(table, rules.min_freq)
    if rules.thresholds.checked:
        for flags in extended_rules(table, rules.thresholds, targets=rules.targets).values():
            mask |= flags
    if rules.coalition is not None:
        mask |= coalition_rule(table, rules.coalition, targets=rules.targets)
    if zeros is ZeroPolicy.PRIMARY:
        mask |= table.counts == 0
    return mask


# ------------------------------------------------------------------------------------------------
# the sparse null-space basis and the Gaussian elimination


def _chain_basis(h: Hierarchy) -> list[dict[int, float]]:
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
        for a, b in zip(kids, kids[1:]):
            v = dict(chain(a))
            for k, val in chain(b).items():
                v[k] = v.get(k, 0.0) - val
            vectors.append(v)
    return vectors


def _null_basis(table: Table) -> list[dict[int, float]]:
    """A sparse basis of all additive tables (``A x = 0``): tensor products of chain bases."""
    bases = [_chain_basis(d.hierarchy) for d in table.dimensions]
    strides = table.strides
    columns: list[dict[int, float]] = []
    for combo in itertools.product(*bases):
        col = {0: 1.0}
        for axis, vec in enumerate(combo):
            stride = strides[axis]
            col = {r + p * stride: a * b for r, a in col.items() for p, b in vec.items()}
        columns.append(col)
    return columns


class _Elimination:
    """A sparse basis of the additive tables that are 0 on every published cell.

    Rows are cells still of interest, columns basis tables (sparse dicts both ways). Publishing
    cell ``c`` keeps the tables that are 0 at ``c``: pivot on a column ``k`` of row ``c`` (the
    sparsest) and subtract multiples of it from the row's other columns. A cell is determined by
    the published cells exactly when its row is empty. Not a value: it changes as cells are
    published (it lives inside one call of :func:`_gauss`).
    """

    def __init__(self, basis: Sequence[dict[int, float]], tracked: np.ndarray) -> None:
        self.rows: dict[int, dict[int, float]] = {}
        self.cols: dict[int, dict[int, float]] = {}
        for k, col in enumerate(basis):
            kept = {r: v for r, v in col.items() if tracked[r]}
            if kept:
                self.cols[k] = kept
                for r, v in kept.items():
                    self.rows.setdefault(r, {})[k] = v

    def determined(self, c: int) -> bool:
        return not self.rows.get(c)

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
        rc = self.drop(c)
        if not rc:
            return  # already determined by what is published: publishing it adds nothing
        rows, cols = self.rows, self.cols
        k = min(rc, key=lambda q: len(cols[q]))
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


def _gauss(
    basis: Sequence[dict[int, float]],
    n_cells: int,
    *,
    order: np.ndarray,
    forced: np.ndarray,
    primary: np.ndarray,
    at_bound: np.ndarray | None = None,
) -> np.ndarray:
    """Greedy secondary suppression by Gaussian elimination (GaussSuppression's principle).

    Args:
        basis: columns of a basis of the additive tables (sparse dicts row -> value).
        order: candidate cells, the first the most wanted published.
        forced: cells published first, without any check (e.g. zeros that are never hidden).
        primary: mask of cells that must not become determined.
        at_bound: primary cells at their least possible value. Publishing a candidate that is
            determined by the published cells *and these* reveals a combination of them alone;
            a sum of them pins every term to its bound (a suppressed 1 and 1 under a published 2
            when zeros are never suppressed), so such a candidate is hidden too. This is the
            frequency-table singleton problem (Langsrud's "anySum"), checked on a second
            elimination in which the at-bound cells are published from the start; it also
            rules out revealing a difference of them, which pins nothing — a conservative
            choice, and the interval audit decides the rest.

    Returns:
        mask of the candidates that must be suppressed.

    ``c`` reveals a primary ``p`` iff their rows are proportional: then every table the intruder
    cannot rule out moves ``p`` and ``c`` together, and knowing ``c`` gives ``p``.
    """
    tracked = np.zeros(n_cells, dtype=bool)
    tracked[order] = True
    tracked[forced] = True
    tracked |= primary
    main = _Elimination(basis, tracked)
    second = None
    if at_bound is not None and at_bound.any():
        second = _Elimination(basis, tracked)
        for c in np.flatnonzero(at_bound).tolist():
            second.publish(c)
    secondary = np.zeros(n_cells, dtype=bool)
    for c in forced.tolist():
        main.publish(c)
        if second is not None:
            second.publish(c)
    for c in order.tolist():
        hide = main.reveals(c, primary)
        if not hide and second is not None:
            hide = second.determined(c) and not main.determined(c)
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


# ------------------------------------------------------------------------------------------------
# the problem and its solution


@dataclass(frozen=True, eq=False)
class _Problem:
    """Everything secondary suppression needs about one (possibly joint) table."""

    table: Table
    values: np.ndarray      # true counts; NaN for hidden cells of a joint table
    primary: np.ndarray
    hidden: np.ndarray
    forced: np.ndarray      # published whatever happens (zeros under ZeroPolicy.NEVER)
    lower: np.ndarray       # what an intruder knows as the least value of a suppressed cell
    required: np.ndarray    # interval width each primary cell needs
    cost: np.ndarray

    @property
    def candidates(self) -> np.ndarray:
        return ~(self.primary | self.hidden | self.forced)

    def order(self, exclude: np.ndarray) -> np.ndarray:
        """Candidates, the most costly to hide first (then larger values, margins, row order)."""
        idx = np.flatnonzero(self.candidates & ~exclude)
        leaf = self.table.leaf_mask[idx]
        vals = np.nan_to_num(self.values[idx])
        return idx[np.lexsort((idx, leaf, -vals, -self.cost[idx]))]

    def at_bound(self) -> np.ndarray | None:
        """Primary cells at their least possible value, when pinning them matters.

        With zeros never suppressed these are the primary 1s; with primary zeros, the zeros.
        With zeros ``safe`` the cells at their bound are non-primary zeros: pinning them is
        harmless by itself and the audit handles the rest.
        """
        at = self.primary & (np.nan_to_num(self.values, nan=-1.0) == self.lower)
        return at if at.any() else None

    def pattern_cost(self, suppressed: np.ndarray) -> float:
        return float(self.cost[suppressed & self.candidates].sum())


def _audit(problem: _Problem, A: sp.csr_matrix, suppressed: np.ndarray):
    """Interval LPs of the primary cells; the ones narrower than required and their holders."""
    res = feasibility_intervals(
        A, problem.values, suppressed, lower=problem.lower, targets=problem.primary, required=problem.required,
        certify=True,
    )
    width = res.upper - res.lower
    bad = problem.primary & (width < problem.required - _LP_TOL)
    return res, bad


def _cell_name(table: Table, row: int) -> str:
    return "(" + ", ".join(f"{v}={table.cells[v].iat[row]}" for v in table.variables) + ")"


def _relations_of(A: sp.csr_matrix) -> sp.csr_matrix:
    """Cell -> relations incidence (CSR over cells)."""
    return sp.csr_matrix(A.T)


def _repair_cells(problem: _Problem, A: sp.csr_matrix, AT: sp.csr_matrix, suppressed: np.ndarray,
                  bad: np.ndarray, holders: dict[int, np.ndarray]) -> np.ndarray:
    """For each too-narrow primary cell, the cheapest published cell that may loosen it."""
    allowed = problem.candidates & ~suppressed
    slack = np.nan_to_num(problem.values, nan=0.0) - problem.lower > 0
    add = np.zeros(problem.table.n_cells, dtype=bool)
    for p in np.flatnonzero(bad).tolist():
        pool = np.asarray(holders.get(p, np.zeros(0, dtype=np.int64)), dtype=np.int64)
        pool = pool[allowed[pool]] if pool.size else pool
        if pool.size == 0:  # no dual information: the published neighbours of p
            rels = AT[p].indices
            pool = np.unique(A[rels].indices) if rels.size else np.zeros(0, dtype=np.int64)
            pool = pool[allowed[pool]]
        if pool.size == 0:
            raise MethodError(
                f"primary cell {_cell_name(problem.table, p)} cannot be protected: every cell that could "
                "hide it is published by force (zeros never suppressed?)"
            )
        key = np.lexsort((pool, problem.cost[pool], ~slack[pool]))
        add[pool[key[0]]] = True
    return add


def _fast(problem: _Problem, A: sp.csr_matrix, *, hidden_first: np.ndarray | None = None,
          basis: Sequence[dict[int, float]] | None = None, max_rounds: int = 500) -> tuple[np.ndarray, int]:
    """The Gaussian-elimination heuristic with audit-and-repair rounds (see module docstring).

    ``hidden_first`` are candidates hidden from the start (the optimal mode completes the
    patterns of its integer programs this way).
    """
    t = problem.table
    basis = _null_basis(t) if basis is None else basis
    at_bound = problem.at_bound()
    AT = _relations_of(A)
    forced_suppressed = np.zeros(t.n_cells, dtype=bool) if hidden_first is None else hidden_first & problem.candidates
    forced = np.flatnonzero(problem.forced)[::-1]  # deepest cells first: much less fill-in
    for rounds in range(1, max_rounds + 1):
        secondary = _gauss(basis, t.n_cells, order=problem.order(forced_suppressed), forced=forced,
                           primary=problem.primary, at_bound=at_bound)
        suppressed = problem.primary | problem.hidden | forced_suppressed | secondary
        res, bad = _audit(problem, A, suppressed)
        if not bad.any():
            return suppressed, rounds
        forced_suppressed |= _repair_cells(problem, A, AT, suppressed, bad, dict(res.holders))
    raise MethodError(f"secondary suppression did not pass its interval audit within {max_rounds} rounds")


def _model_rows(problem: _Problem, A: sp.csr_matrix, var_of: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, float]]:
    """The starting constraints of the integer program, as (variables, coefficients, lower bound).

    * covering: for each primary cell and relation, another cell of the relation that can move
      the compensating way is hidden (at its least value a cell can only grow: an aggregate
      above it grows or a sibling with room shrinks);
    * partners: a hidden candidate has another hidden cell in each of its relations. A hidden cell
      alone in a relation is determined, and publishing it changes no interval, so an optimal
      pattern never has one; the constraint removes no optimal pattern and closes the relaxation
      (without it, the program hides lone cells the audit then rejects, one round at a time).
    """
    out: list[tuple[np.ndarray, np.ndarray, float]] = []
    fixed = problem.primary | problem.hidden
    values = np.nan_to_num(problem.values, nan=np.inf)
    slack = values - problem.lower > 0
    AT = _relations_of(A)
    for p in np.flatnonzero(problem.primary).tolist():
        at_bound = not slack[p]
        for r in AT[p].indices.tolist():
            cells = A[r].indices
            coef = A[r].data
            others = cells[cells != p]
            if fixed[others].any():
                continue
            if at_bound and coef[cells == p][0] < 0:
                agg = cells[coef > 0]
                sib = others[(coef[cells != p] < 0) & slack[others]]
                movers = np.concatenate([agg, sib])
            else:
                movers = others
            v = var_of[movers]
            v = np.unique(v[v >= 0])
            if v.size == 0:
                raise MethodError(
                    f"primary cell {_cell_name(problem.table, p)} cannot be protected: no cell of one of its "
                    "relations may be hidden"
                )
            out.append((v, np.ones(v.size), 1.0))
    for r in range(A.shape[0]):
        cells = A[r].indices
        if fixed[cells].any():
            continue
        v = var_of[cells]
        v = v[v >= 0]
        if v.size == 1:  # alone among cells that are always published: never worth hiding
            out.append((v, -np.ones(1), 0.0))
            continue
        if v.size == 0:
            continue
        for j in v.tolist():
            coef = np.ones(v.size)
            coef[v == j] = -1.0
            out.append((v, coef, 0.0))
    return out


def _optimal(problem: _Problem, A: sp.csr_matrix, incumbent: np.ndarray, *, time_limit: float,
             mip_gap: float) -> tuple[np.ndarray, dict[str, Any]]:
    """Integer program with audit cuts (see module docstring); returns the pattern and figures.

    Each round solves the program from the best audited pattern, audits the answer and adds a
    cut per primary cell left too narrow; an answer that fails is also completed by the fast
    heuristic (its cells hidden first), which often beats the incumbent. The program's bound is
    a lower bound on the optimum because every cut keeps every protected pattern.
    """
    start = time.perf_counter()
    cand = np.flatnonzero(problem.candidates)
    var_of = np.full(problem.table.n_cells, -1, dtype=np.int64)
    var_of[cand] = np.arange(cand.size)
    cost = problem.cost[cand]
    rows = _model_rows(problem, A, var_of)
    basis = _null_basis(problem.table)
    best = incumbent.copy()
    best_cost = problem.pattern_cost(best)
    lower_bound = 0.0
    rounds = 0
    status = "time limit"
    while True:
        remaining = time_limit - (time.perf_counter() - start)
        if remaining <= 0.05:
            break
        rounds += 1
        n_rows = len(rows)
        indptr = np.concatenate([[0], np.cumsum([r[0].size for r in rows])]).astype(np.int64)
        M = sp.csr_matrix(
            (np.concatenate([r[1] for r in rows]) if rows else np.zeros(0),
             np.concatenate([r[0] for r in rows]) if rows else np.zeros(0, dtype=np.int64), indptr),
            shape=(n_rows, cand.size),
        )
        lp = LinearProgram(
            c=cost, A=M, row_lower=np.array([r[2] for r in rows]), row_upper=np.full(n_rows, math.inf),
            col_lower=np.zeros(cand.size), col_upper=np.ones(cand.size), integer=np.ones(cand.size, dtype=bool),
        )
        sol = solve(lp, start=best[cand].astype(float), time_limit=remaining, mip_rel_gap=mip_gap)
        if sol.bound is not None:
            lower_bound = max(lower_bound, sol.bound)
        if sol.x is None:
            status = sol.status
            break
        pattern = (problem.primary | problem.hidden).copy()
        pattern[cand[sol.x > 0.5]] = True
        res, bad = _audit(problem, A, pattern)
        if not bad.any():
            c = problem.pattern_cost(pattern)
            if c < best_cost - _TOL:
                best, best_cost = pattern, c
            status = sol.status
            if sol.status == "optimal":
                lower_bound = max(lower_bound, min(best_cost, sol.objective if sol.objective is not None else 0.0))
                break
            continue
        allowed = problem.candidates & ~pattern
        for p in np.flatnonzero(bad).tolist():
            held = np.asarray(res.holders.get(p, np.zeros(0, dtype=np.int64)), dtype=np.int64)
            held = held[allowed[held]] if held.size else held
            if held.size == 0:
                raise MethodError(f"primary cell {_cell_name(problem.table, p)} cannot be protected")
            v = np.unique(var_of[held])
            rows.append((v, np.ones(v.size), 1.0))
        if time_limit - (time.perf_counter() - start) > 0.05:
            completed, _ = _fast(problem, A, hidden_first=pattern, basis=basis)
            c = problem.pattern_cost(completed)
            if c < best_cost - _TOL:
                best, best_cost = completed, c
    gap = (best_cost - lower_bound) / best_cost if best_cost > 0 else 0.0
    gap = max(0.0, gap)
    figures = {
        "rounds": rounds, "status": "optimal" if gap <= mip_gap + 1e-9 else status,
        "objective": round(best_cost, 6), "lower_bound": round(lower_bound, 6), "gap": round(gap, 6),
    }
    return best, figures


@dataclass(frozen=True, eq=False)
class SuppressionResult:
    """A suppression pattern.

    Attributes:
        reason: per cell, ``"safe"`` (published), ``"primary"``, ``"secondary"`` or ``"hidden"``
            (a cell of a joint table that no released table contains).
        figures: primary, secondary, value suppressed, gap, seconds, …
    """

    reason: np.ndarray
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def suppressed(self) -> np.ndarray:
        return self.reason != "safe"


def _make_problem(table: Table, primary: np.ndarray, *, zeros: ZeroPolicy, cost: Cost,
                  protection_level: float, protection_ratio: float, hidden: np.ndarray | None,
                  values: np.ndarray | None = None) -> _Problem:
    n = table.n_cells
    vals = np.asarray(table.cells["count"].to_numpy(dtype=np.float64, na_value=np.nan)) if values is None else values
    hidden = np.zeros(n, dtype=bool) if hidden is None else np.asarray(hidden, dtype=bool)
    primary = np.asarray(primary, dtype=bool) & ~hidden
    if primary.shape != (n,):
        raise InputError(f"primary mask has {primary.size} entries, the table {n} cells")
    if np.isnan(vals[~hidden]).any():
        raise InputError("secondary suppression needs the counts of every released cell")
    zero = (vals == 0) & ~hidden
    if zeros is ZeroPolicy.NEVER:
        if (primary & zero).any():
            r = int(np.flatnonzero(primary & zero)[0])
            raise InputError(f"cell {_cell_name(table, r)} is a primary zero, but zeros='never' never suppresses zeros")
        forced = zero
        lower = np.where(hidden, 0.0, 1.0)
    else:
        forced = np.zeros(n, dtype=bool)
        lower = np.zeros(n)
    if zeros is ZeroPolicy.PRIMARY:
        primary = primary | zero
    required = np.where(primary, np.maximum(protection_level, protection_ratio * np.nan_to_num(vals)), 0.0)
    safe_vals = np.nan_to_num(vals)
    if cost is Cost.COUNT:
        c = safe_vals + 1.0 / (n + 1)  # the tie-break prefers fewer cells among equal totals
    else:
        c = 1.0 + safe_vals / (safe_vals.sum() + 1.0)
    c = np.where(hidden, 0.0, c)
    return _Problem(table, vals, primary, hidden, forced, lower, required, c)


def secondary_suppression(
    table: Table,
    primary: np.ndarray,
    *,
    mode: Mode | str = Mode.FAST,
    cost: Cost | str = Cost.COUNT,
    zeros: ZeroPolicy | str = ZeroPolicy.NEVER,
    protection_level: float = 1.0,
    protection_ratio: float = 0.0,
    hidden: np.ndarray | None = None,
    time_limit: float = 60.0,
    mip_gap: float = 1e-4,
) -> SuppressionResult:
    """Hide more cells so that no primary cell can be recomputed (seed 000 §5.3).

    Args:
        table: the table (true counts in ``count``; NaN allowed only in ``hidden`` cells).
        primary: mask of primary cells.
        mode: ``fast`` (Gaussian elimination + audit repair) or ``optimal`` (integer program with
            audit cuts, started from the fast pattern).
        cost: ``count`` (least total value suppressed) or ``cells`` (fewest cells).
        zeros: ``never``, ``safe`` or ``primary`` (module docstring).
        protection_level, protection_ratio: each primary cell's interval must be at least
            ``max(level, ratio * value)`` wide.
        hidden: cells no release contains (joint tables of linked releases).
        time_limit: seconds for the optimal mode.
        mip_gap: relative gap at which the optimal mode stops.

    >>> import pandas as pd
    >>> from tabsafe import InnerCells, tabulate
    >>> inner = pd.DataFrame({"r": list("aabb"), "c": list("xyxy"), "n": [1, 5, 4, 6]})
    >>> t = tabulate(InnerCells.from_frame(inner, count="n"), ["r", "c"])
    >>> res = secondary_suppression(t, t.counts == 1)
    >>> int(res.suppressed.sum())  # the 1 and the three cells of its rectangle
    4
    """
    mode = Mode.parse(mode, "mode")
    cost = Cost.parse(cost, "cost")
    zeros = ZeroPolicy.parse(zeros, "zeros")
    start = time.perf_counter()
    problem = _make_problem(table, primary, zeros=zeros, cost=cost, protection_level=protection_level,
                            protection_ratio=protection_ratio, hidden=hidden)
    A = sp.csr_matrix(table.additivity())
    figures: dict[str, Any] = {"mode": mode.value}
    if not problem.primary.any():
        suppressed = problem.hidden.copy()
        figures["audit_rounds"] = 0
        if mode is Mode.OPTIMAL:
            figures.update({"rounds": 0, "status": "optimal", "objective": 0.0, "lower_bound": 0.0, "gap": 0.0,
                            "fast_secondary": 0})
    else:
        suppressed, rounds = _fast(problem, A)
        figures["audit_rounds"] = rounds
        if mode is Mode.OPTIMAL:
            fast_secondary = int((suppressed & problem.candidates).sum())
            remaining = max(0.0, time_limit - (time.perf_counter() - start))
            suppressed, opt = _optimal(problem, A, suppressed, time_limit=remaining, mip_gap=mip_gap)
            figures.update(opt)
            figures["fast_secondary"] = fast_secondary
    reason = np.full(table.n_cells, "safe", dtype=object)
    reason[suppressed & problem.candidates] = "secondary"
    reason[problem.primary] = "primary"
    reason[problem.hidden] = "hidden"
    released = ~problem.hidden
    vals = np.nan_to_num(problem.values)
    figures.update({
        "primary": int(problem.primary.sum()),
        "secondary": int((reason == "secondary").sum()),
        "suppressed": int((suppressed & released).sum()),
        "value_suppressed": int(vals[suppressed & released].sum()),
        "secondary_value": int(vals[reason == "secondary"].sum()),
        "seconds": round(time.perf_counter() - start, 3),
    })
    return SuppressionResult(reason.astype(str), figures)


# ------------------------------------------------------------------------------------------------
# linked tables


def joint_table(tables: Sequence[Table]) -> tuple[Table, list[np.ndarray]]:
    """The table spanned by every variable of ``tables``, and where each table's cells are in it.

    A cell of a table is the cell of the joint table with the table's codes and the total of every
    variable it lacks. Shared variables must have the same hierarchy and shared cells the same
    count. The joint ``count`` is NaN where no table has the cell.
    """
    if not tables:
        raise InputError("no tables to link")
    dims: dict[str, Dimension] = {}
    for i, t in enumerate(tables):
        for d in t.dimensions:
            if d.variable in dims and dims[d.variable].hierarchy != d.hierarchy:
                raise InputError(f"table {i + 1}: variable {d.variable!r} has other codes or hierarchy than before")
            dims.setdefault(d.variable, d)
    joint_dims = tuple(dims.values())
    n = int(np.prod([len(d) for d in joint_dims], dtype=np.int64))
    if n > MAX_JOINT_CELLS:
        raise InputError(f"the linked tables span {n:,} cells together (limit {MAX_JOINT_CELLS:,}); link fewer variables")
    counts = np.full(n, np.nan)
    joint = Table.from_arrays(joint_dims, {"count": counts})
    strides = dict(zip(joint.variables, joint.strides))
    maps = []
    for i, t in enumerate(tables):
        rows = np.zeros(t.n_cells, dtype=np.int64)
        for axis, v in enumerate(t.variables):
            rows += t.positions(axis) * strides[v]
        vals = np.asarray(t.cells["count"].to_numpy(dtype=np.float64, na_value=np.nan))
        known = ~np.isnan(counts[rows])
        clash = known & (counts[rows] != vals)
        if clash.any():
            r = int(np.flatnonzero(clash)[0])
            raise InputError(f"table {i + 1}: cell {_cell_name(t, r)} has count {vals[r]:g}, another table {counts[rows[r]]:g}")
        counts[rows] = vals
        maps.append(rows)
    return Table.from_arrays(joint_dims, {"count": counts}), maps


# ------------------------------------------------------------------------------------------------
# the registered method


def _release(table: Table, reason: np.ndarray) -> Table:
    counts = np.asarray(table.cells["count"].to_numpy(dtype=np.float64, na_value=np.nan))
    suppressed = reason != "safe"
    released = pd.array(np.where(suppressed, 0, counts).astype(np.int64), dtype="Int64")
    released[suppressed] = pd.NA
    cells = table.cells.copy(deep=False)
    cells["count"] = released
    cells["original"] = counts.astype(np.int64)
    cells["status"] = np.where(suppressed, "suppressed", "published")
    cells["reason"] = reason
    return Table(table.dimensions, cells.reset_index(drop=True), dict(table.meta))


def _positive(name: str, value: float, *, allow_zero: bool = True) -> None:
    bad = not isinstance(value, (int, float, np.integer, np.floating)) or isinstance(value, bool)
    if bad or math.isnan(float(value)) or value < 0 or (value == 0 and not allow_zero):
        raise InputError(f"{name} must be a number {'>=' if allow_zero else '>'} 0; got {value!r}")


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("primary suppression (any rule flags a cell)")
    g.add_argument("--min-freq", type=float, default=3, help="threshold rule 0 < n < T (default 3; 0 turns it off)")
    g.add_argument("--t-abs", type=float, help="extended rules 1a and 1b (seed 003)")
    g.add_argument("--t-rel", type=float, help="extended rules 2a and 2b, a percentage")
    g.add_argument("--t-min", type=float, help="extended rule 3")
    for side in ("k", "y"):
        g.add_argument(f"--t-{side}-abs", type=float, help=f"rule 1{'a' if side == 'k' else 'b'} alone")
        g.add_argument(f"--t-{side}-rel", type=float, help=f"rule 2{'a' if side == 'k' else 'b'} alone")
    g.add_argument("--target", action="append", default=None, metavar="VAR",
                   help="target variable of the extended and coalition rules (repeat; default every variable)")
    g.add_argument("--coalition", type=int, help="directly disclosive cells for a k-coalition")
    g.add_argument("--zeros", default="never", choices=[z.value for z in ZeroPolicy],
                   help="zeros never suppressed (default), safe (may be secondary) or primary")
    s = parser.add_argument_group("secondary suppression")
    s.add_argument("--mode", default="fast", choices=[m.value for m in Mode], help="fast heuristic or optimal program")
    s.add_argument("--cost", default="count", choices=[c.value for c in Cost],
                   help="minimise the value suppressed (count) or the number of cells (cells)")
    s.add_argument("--protection-level", type=float, default=1.0, help="least interval width of a primary cell")
    s.add_argument("--protection-ratio", type=float, default=0.0, help="least interval width as a share of the value")
    s.add_argument("--time-limit", type=float, default=60.0, help="seconds for the optimal mode")
    s.add_argument("--mip-gap", type=float, default=1e-4, help="relative gap at which the optimal mode stops")


def _from_args(args: argparse.Namespace) -> CellSuppression:
    thresholds = RuleThresholds.both_sides(
        t_abs=args.t_abs, t_rel=args.t_rel, t_min=args.t_min,
        t_k_abs=args.t_k_abs, t_y_abs=args.t_y_abs, t_k_rel=args.t_k_rel, t_y_rel=args.t_y_rel,
    )
    return CellSuppression(
        min_freq=args.min_freq if args.min_freq else None, thresholds=thresholds,
        targets=tuple(args.target) if args.target else None, coalition=args.coalition, zeros=args.zeros,
        mode=args.mode, cost=args.cost, protection_level=args.protection_level,
        protection_ratio=args.protection_ratio, time_limit=args.time_limit, mip_gap=args.mip_gap,
    )


@register_method("suppress", add_arguments=_add_arguments, from_args=_from_args,
                 summary="cell suppression: primary by the risk rules, secondary so that no primary cell "
                         "can be recomputed (fast Gaussian elimination or optimal integer program)")
@dataclass(frozen=True, kw_only=True)
class CellSuppression:
    """Cell suppression as a protection method (seed 000 §5.3; module docstring).

    Attributes:
        min_freq: threshold rule ``0 < n < min_freq`` (``None``: off).
        thresholds: extended rules of seed 003.
        targets: target variables of the extended and coalition rules (default: all).
        coalition: ``k`` of the directly-disclosive rule (``None``: off).
        zeros: ``never`` / ``safe`` / ``primary``.
        mode: ``fast`` / ``optimal``.
        cost: ``count`` / ``cells``.
        protection_level, protection_ratio: least interval width of a primary cell.
        time_limit, mip_gap: stopping rules of the optimal mode.
    """

    name: ClassVar[str] = "suppress"

    min_freq: float | None = 3
    thresholds: RuleThresholds = field(default_factory=RuleThresholds)
    targets: tuple[str, ...] | None = None
    coalition: int | None = None
    zeros: ZeroPolicy | str = ZeroPolicy.NEVER
    mode: Mode | str = Mode.FAST
    cost: Cost | str = Cost.COUNT
    protection_level: float = 1.0
    protection_ratio: float = 0.0
    time_limit: float = 60.0
    mip_gap: float = 1e-4

    def __post_init__(self) -> None:
        object.__setattr__(self, "zeros", ZeroPolicy.parse(self.zeros, "zeros"))
        object.__setattr__(self, "mode", Mode.parse(self.mode, "mode"))
        object.__setattr__(self, "cost", Cost.parse(self.cost, "cost"))
        if not isinstance(self.thresholds, RuleThresholds):
            raise InputError(f"thresholds must be a RuleThresholds; got {type(self.thresholds).__name__}")
        _positive("protection_level", self.protection_level)
        _positive("protection_ratio", self.protection_ratio)
        _positive("time_limit", self.time_limit, allow_zero=False)
        _positive("mip_gap", self.mip_gap)
        if self.protection_level == 0 and self.protection_ratio == 0:
            raise InputError("protection_level and protection_ratio are both 0: a primary cell would need no protection")
        object.__setattr__(self, "_rules", RiskRules(
            min_freq=self.min_freq, thresholds=self.thresholds, coalition=self.coalition, targets=self.targets,
        ))

    def needs(self) -> Needs:
        return Needs()

    def params(self) -> dict[str, Any]:
        rules: RiskRules = self._rules  # type: ignore[attr-defined]
        return {
            **{k: v for k, v in rules.params().items() if k != "zeros"},
            "zeros": self.zeros.value, "mode": self.mode.value, "cost": self.cost.value,  # type: ignore[union-attr]
            "protection_level": self.protection_level, "protection_ratio": self.protection_ratio,
            "time_limit": self.time_limit, "mip_gap": self.mip_gap,
        }

    def _suppress(self, table: Table, primary: np.ndarray, hidden: np.ndarray | None) -> SuppressionResult:
        return secondary_suppression(
            table, primary, mode=self.mode, cost=self.cost, zeros=self.zeros,
            protection_level=self.protection_level, protection_ratio=self.protection_ratio, hidden=hidden,
            time_limit=self.time_limit, mip_gap=self.mip_gap,
        )

    def _notes(self) -> tuple[str, ...]:
        notes = ["the release shows which cells are suppressed, not why: primary cells are known to be small"]
        if self.zeros is ZeroPolicy.NEVER:
            notes.append("zeros are never suppressed, so the audit assumes an intruder knows every suppressed "
                         "cell is at least 1 (this covers a singleton respondent's knowledge of its own cell)")
        return tuple(notes)

    def protect(self, table: Table, *, seed: int | None = None) -> Protection:
        """Primary and secondary suppression of one table; ``seed`` is unused (deterministic)."""
        primary = primary_suppression(table, self._rules, zeros=self.zeros)  # type: ignore[attr-defined]
        result = self._suppress(table, primary, None)
        report = Report(method=self.name, params=self.params(), seed=seed, figures=result.figures, notes=self._notes())
        return Protection(table=_release(table, result.reason), report=report, release_columns=("count", "status"))

    def protect_linked(self, tables: Sequence[Table], *, seed: int | None = None) -> tuple[Protection, ...]:
        """Suppress linked tables consistently: a cell shared by several tables is one cell.

        Primary cells are flagged in each table by the rules and are primary everywhere.
        """
        joint, maps = joint_table(tables)
        primary = np.zeros(joint.n_cells, dtype=bool)
        for t, rows in zip(tables, maps):
            primary[rows] |= primary_suppression(t, self._rules, zeros=self.zeros)  # type: ignore[attr-defined]
        hidden = np.ones(joint.n_cells, dtype=bool)
        for rows in maps:
            hidden[rows] = False
        result = self._suppress(joint, primary, hidden)
        out = []
        for t, rows in zip(tables, maps):
            report = Report(method=self.name, params={**self.params(), "linked_tables": len(tables)}, seed=seed,
                            figures=result.figures, notes=self._notes())
            out.append(Protection(table=_release(t, result.reason[rows]), report=report,
                                  release_columns=("count", "status")))
        return tuple(out)
