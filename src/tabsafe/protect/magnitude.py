"""Cell suppression of magnitude tables, protected from their contributors.

Source: the handbook of Hundepool et al. (2012), ch. 4 (§4.2 sensitivity rules and protection
levels; §4.3 the tau-ARGUS implementation: a-priori statuses, costs and the λ transform of the
cost function, singletons). Three steps:

1. **Primary cells** by the magnitude rules of :mod:`tabsafe.risk.dominance` (p%, (p,q),
   (n,k), frequency, request, zero; holdings; weights), then the a-priori statuses: ``safe``
   (never primary), ``unsafe`` (primary; its protection levels the manual ratio of its value
   unless given), ``protected`` (published whatever happens: never hidden) and ``suppressed``
   (hidden a priori, e.g. by a linked table). Given upper/lower protection levels replace the
   rules' levels.
2. **Secondary suppression** through :func:`~tabsafe.protect.suppression.secondary.suppress_problem`
   (the fast Gaussian elimination and interval audit, or the optimal integer program), on a
   problem whose cells are the magnitude grid: empty cells (no contributor) are published (they
   are structural zeros), the costs are the chosen cost function (value, frequency, unity, the
   cost variable) after the λ transform, the required width of a primary cell is its lower plus
   upper protection level.
3. **The contributor audit** (:mod:`tabsafe.risk.contributor_audit`): the public and every
   insider (the largest contributor of each suppressed cell, the two largest of each primary
   cell) must find each primary interval reaching both protection levels. A finding hides the
   cheapest published cell that holds the bound (from the program's duals) and the audit runs
   again until it passes: the singleton and multiple-singleton problems, and dominance across
   groups of suppressed cells, are closed this way.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import scipy.sparse as sp

from tabsafe.errors import InputError, MethodError, Reason, param
from tabsafe.model.contributions import Contributions
from tabsafe.model.result import Protection, Release, Report
from tabsafe.model.table import Table
from tabsafe.protect.suppression.elimination import support_basis
from tabsafe.protect.suppression.problem import CellSystem, Mode, Problem, Settings, ZeroPolicy, cell_name
from tabsafe.protect.suppression.secondary import suppress_problem
from tabsafe.risk.contributor_audit import Auditor, ContributorAudit, Intruder, intruders_of
from tabsafe.risk.dominance import DominanceAssessment, DominanceRules, assess_dominance

__all__ = ["COSTS", "STATUSES", "Controls", "MagnitudeResult", "MagnitudeSettings", "protect_magnitudes"]

#: cost functions (tau-ARGUS: cell value, frequency, unity; a cost variable)
COSTS = ("value", "frequency", "unity", "variable")
#: a-priori statuses
STATUSES = ("safe", "unsafe", "protected", "suppressed")
#: repair rounds of the contributor audit before giving up
MAX_ROUNDS = 200


@dataclass(frozen=True, kw_only=True)
class MagnitudeSettings:
    """How a magnitude table is suppressed.

    Attributes:
        mode: ``fast`` or ``optimal`` secondary suppression.
        cost: ``value`` (the cell's value), ``frequency`` (its contributors), ``unity`` (1 per
            cell) or ``variable`` (the cost variable's total).
        lam: the λ transform of the costs, ``cost ** λ`` (λ = 0: ``log(1 + cost)``).
        manual_ratio: protection levels of a-priori unsafe cells, in percent of their value
            (tau-ARGUS ``MAN``).
        intruders: whose insider knowledge is audited: ``suppressed`` (the largest contributor of
            every suppressed cell), ``primary`` (of every primary cell) or ``none`` (the public
            audit only).
        coalitions: also audit the two largest contributors of each primary cell together.
        time_limit: seconds for the optimal mode.
    """

    mode: Mode = Mode.FAST
    cost: str = "value"
    lam: float = 1.0
    manual_ratio: float = 10.0
    intruders: str = "suppressed"
    coalitions: bool = True
    time_limit: float = 60.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", Mode(self.mode))
        if self.cost not in COSTS:
            raise InputError(f"{param('cost')} must be one of {', '.join(COSTS)}; got {self.cost!r}")
        if not (self.lam >= 0 and math.isfinite(self.lam)):
            raise InputError(f"{param('lam')} must be a number >= 0; got {self.lam!r}")
        if self.intruders not in ("suppressed", "primary", "none"):
            raise InputError(f"{param('intruders')} must be suppressed, primary or none; got {self.intruders!r}")
        if self.manual_ratio < 0 or self.time_limit <= 0:
            raise InputError(f"{param('manual_ratio')} must be >= 0 and {param('time_limit')} > 0")


@dataclass(frozen=True, kw_only=True)
class Controls:
    """Production controls per grid cell (``None``: not given).

    Attributes:
        status: per cell ``""`` (none) or one of :data:`STATUSES`.
        upper, lower: given protection levels (NaN: from the rules).
        cost: given costs (NaN: from the cost function).
    """

    status: np.ndarray | None = None
    upper: np.ndarray | None = None
    lower: np.ndarray | None = None
    cost: np.ndarray | None = None

    @classmethod
    def from_cells(cls, c: Contributions, entries: Mapping[tuple[tuple[str, str], ...], Mapping[str, Any]]) -> Controls:
        """Controls from ``{((var, code), …): {"status": …, "upper": …, "lower": …, "cost": …}}``
        (variables left out are at their total)."""
        table = c.table()
        n = c.n_cells
        status = np.full(n, "", dtype=object)
        upper, lower, cost = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
        for codes, what in entries.items():
            cell = table.cell_id(dict(codes))
            unknown = set(what) - {"status", "upper", "lower", "cost"}
            if unknown:
                raise InputError(f"cell {cell_name(table, cell)}: unknown control {sorted(unknown)[0]!r}")
            if "status" in what:
                if what["status"] not in STATUSES:
                    raise InputError(f"cell {cell_name(table, cell)}: status {what['status']!r} is not one of "
                                     f"{', '.join(STATUSES)}")
                status[cell] = what["status"]
            for name, arr in (("upper", upper), ("lower", lower), ("cost", cost)):
                if name in what:
                    v = float(what[name])
                    if not (v >= 0 and math.isfinite(v)):
                        raise InputError(f"cell {cell_name(table, cell)}: {name} must be a number >= 0; got {v!r}")
                    arr[cell] = v
        return cls(status=status, upper=upper, lower=lower, cost=cost)


@dataclass(frozen=True, eq=False)
class MagnitudeResult:
    """A suppressed magnitude table.

    Attributes:
        protection: release (published values, status), evaluation (originals, reasons, levels)
            and report.
        reason: per grid cell ``published``, ``primary`` or ``secondary``.
        assessment: the rules' flags and protection levels.
        upper, lower: the protection levels the pattern meets (rules, statuses and given levels).
        audit: the last contributor audit (passed).
    """

    protection: Protection
    reason: np.ndarray
    assessment: DominanceAssessment
    upper: np.ndarray
    lower: np.ndarray
    audit: ContributorAudit
    figures: Mapping[str, Any] = field(default_factory=dict)

    @property
    def suppressed(self) -> np.ndarray:
        return self.reason != "published"


def _statuses(c: Contributions, assessed: DominanceAssessment, controls: Controls,
              settings: MagnitudeSettings) -> tuple[np.ndarray, ...]:
    """Primary, forced, a-priori hidden cells and the protection levels after the controls."""
    n = c.n_cells
    status = np.full(n, "", dtype=object) if controls.status is None else np.asarray(controls.status, dtype=object)
    primary = assessed.unsafe.copy()
    upper, lower = assessed.upper.copy(), assessed.lower.copy()
    manual = (status == "unsafe") & ~primary
    x = np.abs(c.value)
    upper[manual] = settings.manual_ratio / 100.0 * x[manual]
    lower[manual] = upper[manual] if c.negative else np.minimum(upper[manual], x[manual])
    primary |= status == "unsafe"
    primary &= ~np.isin(status, ["safe", "protected"])
    forced = c.empty | (status == "protected")
    if (primary & c.empty).any():
        cell = int(np.flatnonzero(primary & c.empty)[0])
        raise InputError(f"cell {cell_name(c.table(), cell)} has no contributor: it cannot be unsafe")
    for given, level in ((controls.upper, upper), (controls.lower, lower)):
        if given is not None:
            g = np.asarray(given, dtype=np.float64)
            level[:] = np.where(np.isnan(g), level, g)
    upper = np.where(primary, upper, 0.0)
    lower = np.where(primary, lower, 0.0)
    hidden_first = (status == "suppressed") & ~primary & ~forced
    return primary, forced, hidden_first, upper, lower


def _costs(c: Contributions, settings: MagnitudeSettings, controls: Controls) -> np.ndarray:
    """The cost of hiding each cell: the cost function, the λ transform, the given costs."""
    base = {"value": np.abs(c.value), "frequency": c.contributors.astype(np.float64),
            "unity": np.ones(c.n_cells), "variable": np.abs(c.cost)}[settings.cost]
    cost = np.log1p(base) if settings.lam == 0 else base ** settings.lam
    if controls.cost is not None:
        g = np.asarray(controls.cost, dtype=np.float64)
        cost = np.where(np.isnan(g), cost, g)
    return cost + 1.0 / (c.n_cells + 1)  # the tie-break prefers fewer cells among equal costs


def _problem(c: Contributions, table: Table, primary: np.ndarray, forced: np.ndarray, upper: np.ndarray,
             lower: np.ndarray, cost: np.ndarray, settings: MagnitudeSettings) -> Problem:
    """The secondary suppression problem of the magnitude grid (module docstring, step 2)."""
    # every empty cell is published, so the additive tables an intruder cannot rule out are spanned
    # by the inner cells with contributors (``support_basis`` reads ``count``, the contributors)
    # in units of a thousandth of the largest value (the solver's tolerances are absolute; see
    # :func:`~tabsafe.risk.contributor_audit.contributor_audit`)
    scale = max(1.0, float(np.abs(c.value).max(initial=0.0))) / 1000.0
    system = CellSystem(np.asarray(c.value, dtype=np.float64) / scale, sp.csr_matrix(table.additivity()),
                        np.asarray(table.leaf_mask), lambda _zeros: support_basis(table),
                        lambda i: cell_name(table, i), table)
    base = Settings(mode=settings.mode, zeros=ZeroPolicy.SAFE, protection_level=1.0,
                    time_limit=settings.time_limit)
    problem = Problem.build(system, primary, base)
    # a primary cell with no level (a frequency rule at range 0) must still not be exact
    floor = np.maximum(1e-3, 1e-6 * np.abs(c.value))
    required = np.where(primary, np.maximum(upper + lower, floor), 0.0) / scale
    bound = -math.inf if c.negative else 0.0
    return replace(problem, forced=forced & ~primary, lower=np.full(c.n_cells, bound), required=required,
                   cost=np.where(problem.hidden, 0.0, cost))


def _repair(problem: Problem, suppressed: np.ndarray, audit: ContributorAudit, c: Contributions) -> np.ndarray:
    """For each finding, the cheapest published cell that may move its bound; without dual
    information, the cheapest published neighbour of the component."""
    allowed = problem.candidates & ~suppressed
    add = np.zeros(problem.n_cells, dtype=bool)
    A, AT = problem.A, problem.AT
    done: set[tuple[int, str]] = set()
    for f in audit.findings:
        if (f.cell, f.side) in done:
            continue
        done.add((f.cell, f.side))
        pool = f.holders[allowed[f.holders]] if f.holders.size else f.holders
        frontier, reached = np.array([f.cell]), {f.cell}
        for _ in range(6):
            if pool.size or frontier.size == 0:
                break
            rels = np.unique(AT[frontier].indices)
            near = np.unique(A[rels].indices) if rels.size else np.zeros(0, dtype=np.int64)
            pool = near[allowed[near]]
            frontier = np.array([x for x in near[suppressed[near]].tolist() if x not in reached], dtype=np.int64)
            reached.update(frontier.tolist())
        if pool.size == 0:
            raise MethodError(f"primary cell {problem.name(f.cell)} cannot be protected from "
                              f"{f.intruder.label}: every cell that could hide it is published by force",
                              reason=Reason.INFEASIBLE)
        add[pool[np.lexsort((pool, problem.cost[pool]))[0]]] = True
    return add


def _audit_loop(problem: Problem, pattern: np.ndarray, attack: Contributions, upper: np.ndarray,
                lower: np.ndarray, settings: MagnitudeSettings) -> tuple[np.ndarray, ContributorAudit, int]:
    """Audit from every intruder's point of view and repair until it passes (module docstring);
    each round audits only what the last left open (:class:`~tabsafe.risk.contributor_audit.Auditor`)."""
    primary = problem.primary
    auditor = Auditor(problem.A, attack.value, attack, primary=primary, upper=upper, lower=lower,
                      lower_bound=problem.lower)
    for rounds in range(MAX_ROUNDS):
        if settings.intruders == "none":
            chosen = [Intruder(())]
        else:
            chosen = intruders_of(attack, pattern, primary, scope=settings.intruders, coalitions=settings.coalitions)
        audit = auditor.audit(pattern, chosen)
        if audit.passed:
            return pattern, audit, rounds
        pattern = pattern | _repair(problem, pattern, audit, attack)
    raise MethodError(f"the contributor audit did not pass within {MAX_ROUNDS} repair rounds",
                      reason=Reason.WORK_LIMIT)


def protect_magnitudes(c: Contributions, rules: DominanceRules, settings: MagnitudeSettings | None = None,
                       controls: Controls | None = None) -> MagnitudeResult:
    """Suppress the magnitude table of ``c`` (module docstring: rules, controls, secondary
    suppression, contributor audit).

    >>> import pandas as pd
    >>> from tabsafe.model.contributions import contributions
    >>> from tabsafe.risk.dominance import NKRule
    >>> data = pd.DataFrame({"a": list("xxyyzz"), "b": list("pqpqpq"), "v": [90.0, 5, 40, 40, 30, 35]})
    >>> res = protect_magnitudes(contributions(data, ["a", "b"], value="v"), DominanceRules(nk=(NKRule(1, 80),)))
    >>> int(res.suppressed.sum()) >= 4  # a dominated cell and its rectangle at least
    True
    """
    settings = MagnitudeSettings() if settings is None else settings
    controls = Controls() if controls is None else controls
    start = time.perf_counter()
    assessed = assess_dominance(c, rules)
    primary, forced, hidden_first, upper, lower = _statuses(c, assessed, controls, settings)
    table = c.table()
    problem = _problem(c, table, primary, forced, upper, lower, _costs(c, settings, controls), settings)
    first = suppress_problem(problem)
    pattern = first.suppressed | hidden_first
    attack = c.at_holdings()
    pattern, audit, rounds = _audit_loop(problem, pattern, attack, upper, lower, settings)
    reason = np.full(c.n_cells, "published", dtype=object)
    reason[pattern] = "secondary"
    reason[primary] = "primary"
    figures = {**dict(first.figures), "contributor_audit_rounds": rounds, **audit.figures(),
               "suppressed": int(pattern.sum()), "seconds": round(time.perf_counter() - start, 3)}
    private = {**dict(first.private), "primary": int(primary.sum()),
               "secondary": int((reason == "secondary").sum()),
               "value_suppressed": float(np.abs(c.value)[pattern].sum()),
               "secondary_value": float(np.abs(c.value)[reason == "secondary"].sum()),
               "secondary_by_contributor_audit": int((pattern & ~first.suppressed & ~hidden_first).sum()),
               "rules": assessed.summary()["rules"]}
    protection = _protection(c, table, reason, upper, lower, rules, settings, figures, private)
    return MagnitudeResult(protection, reason.astype(str), assessed, upper, lower, audit, figures)


def _protection(c: Contributions, table: Table, reason: np.ndarray, upper: np.ndarray, lower: np.ndarray,
                rules: DominanceRules, settings: MagnitudeSettings, figures: dict[str, Any],
                private: dict[str, Any]) -> Protection:
    """The release (published values, ``status``), the evaluation table and the report."""
    hidden = reason != "published"
    published = np.where(hidden, np.nan, c.value)
    status = np.where(hidden, "suppressed", "published").astype(object)
    col = f"sum_{c.variable}"
    # ``count`` is a release's main published column: here the magnitude (contributor counts are
    # not published: a count derivable for a suppressed cell would tell it is a singleton)
    release = Table(table.dimensions, table.ids, {"count": published, col: published, "status": status})
    evaluation = Table(table.dimensions, table.ids, {
        "count": c.value, "original": c.value, "contributors": c.contributors, "reason": reason.astype(object),
        "upper_level": upper, "lower_level": lower,
    })
    params = {"rules": rules.params(), "mode": settings.mode.value, "cost": settings.cost, "lam": settings.lam,
              "manual_ratio": settings.manual_ratio, "intruders": settings.intruders,
              "coalitions": settings.coalitions}
    notes = ("the release shows which cells are suppressed, not why; contributor counts are not published",
             "audited from the public's and from contributors' point of view (their own contributions known)")
    report = Report(method="magnitude-suppress", params=params, figures=figures, private=private, notes=notes)
    return Protection(release=Release(release), evaluation=evaluation, report=report)
