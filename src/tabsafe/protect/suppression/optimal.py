"""The optimal mode: an integer program over the candidate cells, with interval-audit cuts.

A binary per candidate cell, minimising the total value suppressed or the number of cells,
with a covering constraint per primary cell and relation (another cell of the relation, able to
move the right way, is hidden) and a partner constraint per hidden candidate and relation (a
lone hidden cell is determined and protects nothing, so an optimal pattern never has one). A
pattern is audited with the interval LPs (:mod:`.audit`); a primary cell left too narrow yields
a cut from the duals of its programs, Fischetti and Salazar-González's capacity constraint
(:func:`tabsafe.risk.intervals.capacity`: the width is at most the sum of the capacities of the
hidden cells, so a protected pattern hides enough capacity; where the capacities are not known,
"one of the published cells holding its bound is hidden"). Every cut keeps every protected
pattern, so the program's bound is a lower bound on the optimum; the gap to the best audited
pattern is reported (large tables stop when the budget is spent, with the gap).

The cuts are separated at the root, on the LP relaxation (:func:`_root_cuts`): the cells the LP
optimum touches at all are audited as a pattern, and each primary cell still too narrow yields
a cut that LP optimum violates. A cut does not depend on the point it was found at, and an LP
round takes a few seconds (the relaxation re-solved from its last basis) where an integer round
takes a minute: branch-and-cut's root loop, run outside the solver because HiGHS takes no cut
callbacks. A better pattern than the fast mode's comes from a neighbourhood search
(:func:`_neighbourhood`): the same loop on the integer program restricted to the incumbent's
cells and the LP optimum's. On the 26,796-cell area × age × citizenship table (120 s, from the
fast pattern of before its sign test, 41,441): the search found 40,155, the root loop raised the
bound from 18,462 to 38,841, a gap of 3.3% (it was 17.3% with cover cuts, fresh LP solves and no
search). From today's fast pattern (40,962), the default 25 rounds give 40,163 and a bound of
38,310, a gap of 4.6% (``bench/run.py suppression``).

The work is a budget of rounds (:class:`Budget`; ``work_limit``), not seconds: each round solves
one program — the LP relaxation, or an integer program under a fixed node cap on one thread with
a fixed seed — and audits its answer, so the pattern is a function of the problem and the budget
on any machine and under any load (with a wall-clock limit it was not: the same 120 s gave a
3.5% gap on an idle machine and the unchanged fast pattern, gap 100%, on a loaded one). A time
limit is an outer guard only; when it stops the search the status says ``time limit``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp

from tabsafe.errors import MethodError, Reason
from tabsafe.protect.suppression.audit import TimeUp, audit, fast
from tabsafe.protect.suppression.problem import Problem
from tabsafe.progress import report
from tabsafe.solver import LinearProgram, Relaxation, Solution, solve

__all__ = ["TUNING", "Budget", "OptimalResult", "Tuning", "gap", "optimal"]

_TOL = 1e-9


@dataclass(frozen=True, eq=False)
class OptimalResult:
    """The best audited pattern the optimal mode found, with its solver figures.

    Attributes:
        suppressed: the pattern.
        rounds: rounds of the budget spent (programs solved and audited).
        status: ``optimal`` (gap within ``mip_gap``), ``work limit`` (the budget is spent),
            ``time limit`` (the guard stopped it: machine-dependent) or ``feasible`` (the cut
            loop ended with a gap).
        objective: the pattern's cost (reveals original values: private).
        lower_bound: a lower bound on the least cost (private).
        gap: ``(objective - lower_bound) / objective``.
    """

    suppressed: np.ndarray
    rounds: int
    status: str
    objective: float
    lower_bound: float
    gap: float


_Row = tuple[np.ndarray, np.ndarray, float]


def gap(cost: float, lower_bound: float) -> float:
    """The relative gap ``(cost - lower_bound) / cost`` of a pattern (0 for a pattern costing 0)."""
    return max(0.0, (cost - lower_bound) / cost) if cost > 0 else 0.0


def _model_rows(problem: Problem, var_of: np.ndarray) -> list[_Row]:
    """The starting constraints of the integer program, as (variables, coefficients, lower bound).

    * covering: for each primary cell and relation, another cell of the relation that can move
      the compensating way is hidden (at its least value a cell can only grow: an aggregate
      above it grows or a sibling with room shrinks);
    * partners: a hidden candidate has another hidden cell in each of its relations. A hidden cell
      alone in a relation is determined, and publishing it changes no interval, so an optimal
      pattern never has one; the constraint removes no optimal pattern and closes the relaxation
      (without it, the program hides lone cells the audit then rejects, one round at a time).
    """
    A, AT = problem.A, problem.AT
    out: list[_Row] = []
    fixed = problem.primary | problem.hidden
    values = np.nan_to_num(problem.values, nan=np.inf)
    slack = values - problem.lower > 0
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
                raise MethodError(f"primary cell {problem.name(p)} cannot be protected: no cell of one of its "
                                  "relations may be hidden", reason=Reason.INFEASIBLE)
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


def _matrix(rows: list[_Row], n: int) -> tuple[sp.csr_matrix, np.ndarray]:
    """The rows as a sparse matrix over ``n`` variables, with their lower bounds."""
    indptr = np.concatenate([[0], np.cumsum([r[0].size for r in rows])]).astype(np.int64)
    M = sp.csr_matrix(
        (np.concatenate([r[1] for r in rows]) if rows else np.zeros(0),
         np.concatenate([r[0] for r in rows]) if rows else np.zeros(0, dtype=np.int64), indptr),
        shape=(len(rows), n),
    )
    return M, np.array([r[2] for r in rows], dtype=np.float64)


def _program(rows: list[_Row], cost: np.ndarray) -> LinearProgram:
    n = cost.size
    M, lower = _matrix(rows, n)
    return LinearProgram(c=cost, A=M, row_lower=lower, row_upper=np.full(len(rows), math.inf),
                         col_lower=np.zeros(n), col_upper=np.ones(n), integer=np.ones(n, dtype=bool))


def _hiding(problem: Problem, cand: np.ndarray, chosen: np.ndarray) -> np.ndarray:
    """The pattern that hides the candidates ``cand[chosen]`` besides the cells always hidden."""
    pattern = problem.primary | problem.hidden
    pattern[cand[chosen]] = True
    return pattern


def _cheapest(problem: Problem, best: np.ndarray, others: list[np.ndarray]) -> tuple[np.ndarray, float]:
    """The cheapest of ``best`` and ``others`` with its cost (``best`` on a tie)."""
    best_cost = problem.pattern_cost(best)
    for pattern in others:
        c = problem.pattern_cost(pattern)
        if c < best_cost - _TOL:
            best, best_cost = pattern, c
    return best, best_cost


def _cuts(problem: Problem, pattern: np.ndarray, result: Audit, var_of: np.ndarray) -> list[_Row]:
    """One cut per primary cell the audit of ``pattern`` finds too narrow: its capacities (of the
    cells always hidden counted in) reach its required width, each capped at what is still
    needed, a valid strengthening for binaries; without capacities (a cell alone in its
    relations), one of the published cells holding its bound is hidden (module docstring)."""
    allowed = problem.candidates & ~pattern
    out: list[_Row] = []
    fixed = problem.primary | problem.hidden
    for p in np.flatnonzero(result.narrow).tolist():
        cap = result.intervals.capacities.get(p)
        if cap is not None:
            idx, c = cap
            need = problem.required[p] - float(c[fixed[idx]].sum())
            free = problem.candidates[idx]
            if need > _TOL and np.isfinite(need) and free.any():
                coef = np.minimum(c[free], need) / need
                keep = coef > _TOL
                out.append((var_of[idx[free][keep]], coef[keep], 1.0))
                continue
        held = np.asarray(result.intervals.holders.get(p, np.zeros(0, dtype=np.int64)), dtype=np.int64)
        held = held[allowed[held]] if held.size else held
        if held.size == 0:
            raise MethodError(f"primary cell {problem.name(p)} cannot be protected", reason=Reason.INFEASIBLE)
        v = np.unique(var_of[held])
        out.append((v, np.ones(v.size), 1.0))
    return out


class Budget:
    """The work left to the optimal mode, and the outer time guard.

    Work is counted in rounds: each solves one program (the LP relaxation, or an integer program
    under a fixed node cap, one thread, a fixed seed) and audits its answer, so the same problem
    and ``rounds`` give the same pattern on any machine and under any load. ``time_limit`` (from
    the start of secondary suppression) is only a guard: a run it stops depends on the machine,
    and :attr:`stopped_by` says so. Not a value object: the phases of one run draw on it in turn.
    """

    def __init__(self, rounds: int, time_limit: float | None = None, *, started: float | None = None) -> None:
        self.left = int(rounds)
        self.used = 0
        began = time.perf_counter() if started is None else started
        self.deadline = None if time_limit is None else began + float(time_limit)
        #: "work" or "time" once a limit has stopped the search, else None
        self.stopped_by: str | None = None

    def seconds_left(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.perf_counter()

    def timed_out(self) -> bool:
        left = self.seconds_left()
        if left is not None and left <= 0:
            self.stopped_by = "time"
            return True
        return False

    def take(self) -> bool:
        """Start one more round, if the budget and the guard allow it."""
        if self.timed_out():
            return False
        if self.left <= 0:
            self.stopped_by = self.stopped_by or "work"
            return False
        self.left -= 1
        self.used += 1
        return True

    def share(self, fraction: float) -> int:
        """A phase's part of the rounds left (at least one)."""
        return max(1, int(self.left * fraction))

    def part(self, rounds: int) -> Budget:
        """A budget of ``rounds`` (at most what is left) under the same guard, for a sub-problem;
        :meth:`absorb` charges what it spent."""
        out = Budget(min(rounds, self.left))
        out.deadline = self.deadline
        return out

    def absorb(self, part: Budget) -> None:
        self.left -= part.used
        self.used += part.used
        if part.stopped_by == "time":
            self.stopped_by = "time"

    def note(self, sol: Solution) -> None:
        """A solve the time guard cut short makes the result machine-dependent."""
        if sol.limit == "time":
            self.stopped_by = "time"

    @property
    def reproducible(self) -> bool:
        return self.stopped_by != "time"


@dataclass(frozen=True)
class Tuning:
    """How the optimal mode spends its rounds (measured defaults; tests shrink them).

    Attributes:
        search_share: the part of the rounds the first neighbourhood search may take.
        search_nodes: node cap of one program of the neighbourhood search (a few thousand
            binaries: most are solved well within it).
        integer_nodes: node cap of one integer program over every candidate cell.
        seed: HiGHS' random seed (fixed: the pattern is a function of the problem and budget).
    """

    search_share: float = 0.6
    search_nodes: int = 500
    integer_nodes: int = 1_000
    seed: int = 0


TUNING = Tuning()


class _Cuts:
    """The program's rows as the cuts come, with its LP relaxation kept warm (:class:`Relaxation`).
    Not a value object: one per :func:`optimal` run."""

    def __init__(self, rows: list[_Row], cost: np.ndarray) -> None:
        self.rows = rows
        self.cost = cost
        self._lp = Relaxation(_program(rows, cost))

    def add(self, cuts: list[_Row]) -> None:
        if cuts:
            self.rows.extend(cuts)
            M, lower = _matrix(cuts, self.cost.size)
            self._lp.add_rows(M, lower, np.full(len(cuts), math.inf))

    def relaxation(self, budget: Budget) -> Solution:
        left = budget.seconds_left()
        sol = self._lp.solve(time_limit=None if left is None else max(0.01, left))
        budget.note(sol)
        return sol

    def program(self, allowed: np.ndarray | None = None) -> LinearProgram:
        whole = _program(self.rows, self.cost)
        return whole if allowed is None else replace(whole, col_upper=allowed.astype(float))


def _deadline(budget: Budget) -> float | None:
    """The guard as a ``time.perf_counter()`` value for the fast mode's helpers."""
    return budget.deadline


def _root_cuts(problem: Problem, pool: _Cuts, cand: np.ndarray, var_of: np.ndarray,
               budget: Budget) -> tuple[float, np.ndarray | None]:
    """Cuts separated on LP optima (module docstring), added to ``pool`` until no new cut is
    violated or the budget is spent. Returns the last LP bound (a lower bound on the optimum:
    the LP relaxes a program every cut of which is valid) and, when no cut is violated, the
    pattern of the cells the LP optimum touches (the audit passed it)."""
    bound = 0.0
    while budget.take():
        sol = pool.relaxation(budget)
        if sol.x is None or sol.status != "optimal":
            break
        bound = max(bound, float(sol.objective))
        touched = _hiding(problem, cand, sol.x > _TOL)
        # every cell of a new cut is untouched: the LP optimum violates it by a whole unit
        result = audit(problem, touched)
        cuts = _cuts(problem, touched, result, var_of)
        report("suppression", phase="root cut loop", round=budget.used, narrow=int(result.narrow.sum()))
        if not cuts:
            return bound, touched
        pool.add(cuts)
    return bound, None


def _neighbourhood(problem: Problem, pool: _Cuts, cand: np.ndarray, var_of: np.ndarray, incumbent: np.ndarray,
                   budget: Budget, rounds: int, tuning: Tuning = TUNING) -> list[np.ndarray]:
    """Protected patterns among the cells of ``incumbent`` and of the current LP optimum, by the
    audit-and-cut loop on the program restricted to those cells (its cuts go to ``pool``), in
    at most ``rounds`` rounds of ``budget``.

    A neighbourhood search in the spirit of RINS (Danna, Rothberg and Le Pape, 2005): the
    incumbent (a protected pattern) satisfies every valid cut, so the restricted program always
    has a protected answer and the loop ends with one, on a few thousand binaries where the
    whole program has twenty thousand; the LP optimum adds the cells the relaxation finds worth
    hiding. When the rounds run out first, the last answer is completed by the fast mode. On the
    26,796-cell table, from the fast pattern of before its sign test (41,441) and the first LP
    optimum: 40,155 in 11 rounds (restricted to the fast pattern's cells alone, 40,555).
    """
    if budget.timed_out():
        return []
    sol = pool.relaxation(budget)
    if sol.x is None or sol.status != "optimal":
        return []
    allowed = incumbent[cand] | (sol.x > _TOL)
    start = incumbent[cand].astype(float)
    last: np.ndarray | None = None
    for _ in range(rounds):
        if not budget.take():
            break
        left = budget.seconds_left()
        answer = solve(pool.program(allowed), start=start, node_limit=tuning.search_nodes,
                       random_seed=tuning.seed, time_limit=None if left is None else max(0.01, left))
        budget.note(answer)
        if answer.x is None or answer.limit == "time":  # cut short by the guard: it may be the start
            break
        pattern = _hiding(problem, cand, answer.x > 0.5)
        result = audit(problem, pattern)
        report("suppression", phase="neighbourhood search", round=budget.used, narrow=int(result.narrow.sum()))
        if result.passed:
            return [pattern]
        pool.add(_cuts(problem, pattern, result, var_of))
        last = pattern
    if last is None:
        return []
    # out of rounds: the last answer completed by the fast mode (its cells hidden first)
    try:
        return [fast(problem, hidden_first=last, deadline=_deadline(budget))[0]]
    except TimeUp:
        budget.stopped_by = "time"
        return []


def _integer_rounds(problem: Problem, pool: _Cuts, cand: np.ndarray, var_of: np.ndarray, best: np.ndarray,
                    lower_bound: float, budget: Budget, tuning: Tuning) -> tuple[np.ndarray, float]:
    """Integer programs over every candidate, each under a node cap from the best audited
    pattern; an answer the audit rejects adds its cuts and is completed by the fast mode.
    Returns the best pattern and the lower bound."""
    while budget.take():
        left = budget.seconds_left()
        sol = solve(pool.program(), start=best[cand].astype(float), mip_rel_gap=problem.settings.mip_gap,
                    node_limit=tuning.integer_nodes, random_seed=tuning.seed,
                    time_limit=None if left is None else max(0.01, left))
        budget.note(sol)
        if sol.bound is not None and sol.limit != "time":
            lower_bound = max(lower_bound, sol.bound)
        if sol.x is None:
            break
        pattern = _hiding(problem, cand, sol.x > 0.5)
        result = audit(problem, pattern)
        report("suppression", phase="integer rounds", round=budget.used, narrow=int(result.narrow.sum()),
               nodes=sol.nodes)
        if result.passed:
            best, _ = _cheapest(problem, best, [pattern])
            if sol.status == "optimal":
                lower_bound = max(lower_bound, min(problem.pattern_cost(best),
                                                   sol.objective if sol.objective is not None else 0.0))
            # no primary too narrow, so no new cut: the same program would give the same answer
            break
        pool.add(_cuts(problem, pattern, result, var_of))
        # completed by the fast mode with the answer hidden first. Not by the audit's repairs
        # alone (mend): on the 26,796-cell table an answer of 38,326 with 347 primary cells too
        # narrow was mended to 63,508, and completed by the fast mode to 41,773
        try:
            completed, _ = fast(problem, hidden_first=pattern, deadline=_deadline(budget))
        except TimeUp:
            budget.stopped_by = "time"
            break
        best, _ = _cheapest(problem, best, [completed])
    return best, lower_bound


def optimal(problem: Problem, incumbent: np.ndarray, *, budget: Budget, tuning: Tuning = TUNING) -> OptimalResult:
    """Integer program with audit cuts (module docstring), from the audited ``incumbent``, on
    the rounds of ``budget``.

    In phases: the neighbourhood search (up to ``tuning.search_share`` of the rounds), the root
    cut loop (a bound), a second search when the loop runs out of cuts, then integer rounds
    with the rounds left: each solves the whole program from the best audited pattern, audits
    the answer and adds a cut per primary cell left too narrow; an answer that fails is also
    completed by the fast heuristic (its cells hidden first).
    """
    mip_gap = problem.settings.mip_gap
    cand = np.flatnonzero(problem.candidates)
    var_of = np.full(problem.n_cells, -1, dtype=np.int64)
    var_of[cand] = np.arange(cand.size)
    pool = _Cuts(_model_rows(problem, var_of), problem.cost[cand])
    best = incumbent.copy()
    used_before = budget.used
    # the neighbourhood search first (a better pattern), on the first LP's cells; then the root
    # cut loop (a better bound: 38,841 against 33,265 after the search on the benchmark table); a
    # second search when the loop has run out of cuts early, on the cells of its last LP optimum
    found = _neighbourhood(problem, pool, cand, var_of, best, budget, budget.share(tuning.search_share), tuning)
    lower_bound, touched = _root_cuts(problem, pool, cand, var_of, budget)
    best, best_cost = _cheapest(problem, best, found + ([] if touched is None else [touched]))
    if touched is not None:
        found = _neighbourhood(problem, pool, cand, var_of, best, budget, budget.left, tuning)
        best, best_cost = _cheapest(problem, best, found)
    if gap(best_cost, lower_bound) > mip_gap + 1e-9:
        best, lower_bound = _integer_rounds(problem, pool, cand, var_of, best, lower_bound, budget, tuning)
        best_cost = problem.pattern_cost(best)
    open_gap = gap(best_cost, lower_bound)
    # "optimal" only when the gap says so: a program reported optimal whose answer was no better
    # than the incumbent leaves a gap, and the pattern is then only known to be protected
    if open_gap <= mip_gap + 1e-9:
        final = "optimal"
    elif budget.stopped_by == "time":
        final = "time limit"
    elif budget.stopped_by == "work":
        final = "work limit"
    else:
        final = "feasible"
    return OptimalResult(best, budget.used - used_before, final, round(best_cost, 6), round(lower_bound, 6),
                         round(open_gap, 6))
