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
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from tabsafe.capabilities import Capabilities, Reading
from tabsafe.errors import InputError, MethodError, Reason, param, shown
from tabsafe.method import Examples, Needs, Outcome, TableMethod
from tabsafe.model.contributions import Contributions
from tabsafe.model.release_cells import ReleaseCells
from tabsafe.model.spec import ContributorSpec
from tabsafe.params import Bool, Choice, File, Int, Optional, Real, Text, TextList, parameter
from tabsafe.model.result import Protection, Release, Report
from tabsafe.model.table import VALUE_COLUMN, Table
from tabsafe.protect.suppression.elimination import support_basis
from tabsafe.protect.suppression.problem import (
    DEFAULT_WORK_LIMIT,
    CellSystem,
    Mode,
    Problem,
    Settings,
    ZeroPolicy,
    cell_name,
)
from tabsafe.protect.suppression.secondary import suppress_problem
from tabsafe.risk.contributor_audit import Auditor, ContributorAudit, Intruder, intruders_of
from tabsafe.risk.group_dominance import group_dominance
from tabsafe.risk.dominance import (
    WEIGHTINGS,
    DominanceAssessment,
    DominanceRules,
    RuleList,
    assess_dominance,
    parse_rules,
)

__all__ = ["COSTS", "STATUSES", "Controls", "MagnitudeResult", "MagnitudeSettings", "MagnitudeSuppression",
           "protect_magnitudes", "read_apriori"]

#: cost functions (tau-ARGUS: cell value, frequency, unity; a cost variable)
COSTS = ("value", "frequency", "unity", "variable")
#: a-priori statuses
STATUSES = ("safe", "unsafe", "protected", "suppressed")
#: the release column of the contributors' numbers (when published)
FREQUENCY = "contributors"
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
        work_limit: the optimal mode's budget of audit-and-cut rounds (machine-independent).
        time_limit: seconds, an outer guard on the optimal mode (None: none).
        frequency: also publish each cell's number of contributors (column ``contributors``),
            hidden where the total is.
    """

    mode: Mode = Mode.FAST
    cost: str = "value"
    lam: float = 1.0
    manual_ratio: float = 10.0
    intruders: str = "suppressed"
    coalitions: bool = True
    work_limit: int = DEFAULT_WORK_LIMIT
    time_limit: float | None = None
    frequency: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", Mode(self.mode))
        if self.cost not in COSTS:
            raise InputError(f"{param('cost')} must be one of {', '.join(COSTS)}; got {self.cost!r}")
        if not (self.lam >= 0 and math.isfinite(self.lam)):
            raise InputError(f"{param('lam')} must be a number >= 0; got {self.lam!r}")
        if self.intruders not in ("suppressed", "primary", "none"):
            raise InputError(f"{param('intruders')} must be suppressed, primary or none; got {self.intruders!r}")
        if self.manual_ratio < 0 or (self.time_limit is not None and self.time_limit <= 0) or self.work_limit < 1:
            raise InputError(f"{param('manual_ratio')} must be >= 0, {param('time_limit')} > 0 and "
                             f"{param('work_limit')} >= 1")


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


def _scale(value: np.ndarray) -> float:
    """Values are in units of a thousandth of the largest (the solver's tolerances are absolute;
    see :func:`~tabsafe.risk.contributor_audit.contributor_audit`)."""
    return max(1.0, float(np.abs(value).max(initial=0.0))) / 1000.0


def _problem(c: Contributions, table: Table, primary: np.ndarray, forced: np.ndarray, upper: np.ndarray,
             lower: np.ndarray, cost: np.ndarray, settings: MagnitudeSettings) -> Problem:
    """The secondary suppression problem of the magnitude grid (module docstring, step 2)."""
    # every empty cell is published, so the additive tables an intruder cannot rule out are spanned
    # by the inner cells with contributors (``support_basis`` reads ``count``, the contributors)
    scale = _scale(c.value)
    system = CellSystem(np.asarray(c.value, dtype=np.float64) / scale, sp.csr_matrix(table.additivity()),
                        np.asarray(table.leaf_mask), lambda _zeros: support_basis(table),
                        lambda i: cell_name(table, i), table)
    return _on_system(system, scale, c.value, c.negative, primary, forced, upper, lower, cost, settings)


def _on_system(system: CellSystem, scale: float, value: np.ndarray, negative: bool, primary: np.ndarray,
               forced: np.ndarray, upper: np.ndarray, lower: np.ndarray, cost: np.ndarray,
               settings: MagnitudeSettings) -> Problem:
    """The problem on ``system`` (a table's or a release's cells, values divided by ``scale``)."""
    base = Settings(mode=settings.mode, zeros=ZeroPolicy.SAFE, protection_level=1.0,
                    work_limit=settings.work_limit, time_limit=settings.time_limit)
    problem = Problem.build(system, primary, base)
    # a primary cell with no level (a frequency rule at range 0) must still not be exact
    floor = np.maximum(1e-3, 1e-6 * np.abs(value))
    required = np.where(primary, np.maximum(upper + lower, floor), 0.0) / scale
    bound = -math.inf if negative else 0.0
    return replace(problem, forced=forced & ~primary, lower=np.full(value.size, bound), required=required,
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
               "rules": assessed.summary()["rules"],
               # sums of hidden cells the pattern reveals that the rules find dominated (a check:
               # approximate disclosure, not repaired here; :mod:`tabsafe.risk.group_dominance`)
               "dominated_groups": len(group_dominance(c, pattern, rules).findings())}
    protection = _protection(c, table, reason, upper, lower, rules, settings, figures, private)
    return MagnitudeResult(protection, reason.astype(str), assessed, upper, lower, audit, figures)


def _protection(c: Contributions, table: Table, reason: np.ndarray, upper: np.ndarray, lower: np.ndarray,
                rules: DominanceRules, settings: MagnitudeSettings, figures: dict[str, Any],
                private: dict[str, Any], meta: Mapping[str, Any] | None = None) -> Protection:
    """The release (published values, ``status``), the evaluation table and the report."""
    hidden = reason != "published"
    published = np.where(hidden, np.nan, c.value)
    status = np.where(hidden, "suppressed", "published").astype(object)
    col = f"sum_{c.variable}"
    # the release's value column is the magnitude's (no ``count`` beside it, which would read as a
    # number of contributors); contributor counts only when asked for, hidden with the totals
    columns = {col: published}
    if settings.frequency:
        columns[FREQUENCY] = np.where(hidden, np.nan, c.contributors.astype(np.float64))
    columns["status"] = status
    release = Table(table.dimensions, table.ids, columns, {**dict(meta or {}), VALUE_COLUMN: col})
    evaluation = Table(table.dimensions, table.ids, {
        "count": c.value, "original": c.value, "contributors": c.contributors, "reason": reason.astype(object),
        "upper_level": upper, "lower_level": lower,
    }, dict(meta or {}))
    params = {"rules": rules.params(), "mode": settings.mode.value, "cost": settings.cost, "lam": settings.lam,
              "manual_ratio": settings.manual_ratio, "intruders": settings.intruders,
              "coalitions": settings.coalitions}
    counted = ("contributor counts are published beside the totals, hidden where they are" if settings.frequency
               else "contributor counts are not published")
    notes = (f"the release shows which cells are suppressed, not why; {counted}",
             "audited from the public's and from contributors' point of view (their own contributions known)")
    report = Report(method="magnitude-suppress", params=params, figures=figures, private=private, notes=notes)
    return Protection(release=Release(release), evaluation=evaluation, report=report)


# ------------------------------------------------------------------ releases


def protect_magnitude_release(cells: ReleaseCells, rules: DominanceRules,
                              settings: MagnitudeSettings | None = None) -> tuple[np.ndarray, ...]:
    """Suppress the magnitude tables of a release together: the rules in each table (a cell
    primary in one table is primary in all: its contributions are the same), secondary
    suppression over the union of the tables' cells and relations, and the contributor audit
    over the release (an insider combines every table). Returns, per release cell, the reason,
    the upper and lower protection levels, and the audit's figures (a dict, last)."""
    from tabsafe.model.contributions import gather_cells
    from tabsafe.protect.suppression.linked import joint_basis

    settings = MagnitudeSettings() if settings is None else settings
    n = cells.n_cells
    primary, forced, hidden_first = (np.zeros(n, dtype=bool) for _ in range(3))
    upper, lower, cost = np.zeros(n), np.zeros(n), np.zeros(n)
    tables = [_contributions_of(t) for t in cells.tables]
    for c, rows in zip(tables, cells.cells):
        p, f, h, up, lo = _statuses(c, assess_dominance(c, rules), Controls(), settings)
        primary[rows] |= p
        forced[rows] |= f
        hidden_first[rows] |= h
        upper[rows] = np.maximum(upper[rows], up)
        lower[rows] = np.maximum(lower[rows], lo)
        cost[rows] = _costs(c, settings, Controls())
    merged = gather_cells(list(zip(tables, cells.cells)), n)
    scale = _scale(merged.value)
    system = CellSystem(merged.value / scale, sp.csr_matrix(cells.relations), np.asarray(cells.leaf),
                        lambda _zeros: joint_basis([support_basis(t) for t in cells.tables], cells.cells, n),
                        cells.name)
    problem = _on_system(system, scale, merged.value, merged.negative, primary, forced & ~primary, upper, lower,
                         cost, settings)
    first = suppress_problem(problem)
    pattern, audit, rounds = _audit_loop(problem, first.suppressed | hidden_first, merged.at_holdings(), upper,
                                         lower, settings)
    reason = np.full(n, "published", dtype=object)
    reason[pattern] = "secondary"
    reason[primary] = "primary"
    figures = {**dict(first.figures), **audit.figures(), "contributor_audit_rounds": rounds,
               "suppressed": int(pattern.sum())}
    return reason, upper, lower, figures


def _contributions_of(table: Table) -> Contributions:
    from tabsafe.model.contributions import ContributionTable

    if not isinstance(table, ContributionTable):
        raise InputError(f"method {MagnitudeSuppression.name!r} protects magnitude tables tabulated from microdata "
                         "with one record per contribution; this release gives a table of counts")
    return table.contributions


# ------------------------------------------------------------------ a-priori files

#: the columns of an a-priori file besides the spanning variables
APRIORI_COLUMNS = ("status", "upper", "lower", "cost")


def read_apriori(path: str, c: Contributions) -> Controls:
    """The production controls of an a-priori CSV file: one row per cell, a column per spanning
    variable (codes; the total as its hierarchy names it, ``Total``), then any of ``status``
    (:data:`STATUSES`), ``upper``, ``lower`` and ``cost`` (empty: not given). Every error is one
    line naming the file, its line and column."""
    import pandas as pd

    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError("the a-priori file does not exist", where=path) from None
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise InputError(f"cannot read the a-priori file as CSV ({type(exc).__name__})", where=path) from None
    variables = [d.variable for d in c.dimensions]
    columns = [str(col) for col in frame.columns]
    missing = [v for v in variables if v not in columns]
    if missing:
        raise InputError(f"the a-priori file has no column {missing[0]!r} (a spanning variable)", where=path)
    extra = [col for col in columns if col not in variables and col not in APRIORI_COLUMNS]
    if extra:
        raise InputError(f"the a-priori file has a column {shown(extra[0])} that is neither a spanning variable nor "
                         f"one of {', '.join(APRIORI_COLUMNS)}", where=path)
    entries: dict[tuple[tuple[str, str], ...], dict[str, Any]] = {}
    for row, record in enumerate(frame.itertuples(index=False), start=2):
        values = dict(zip(columns, record))
        codes = tuple((v, values[v].strip()) for v in variables)
        for v, code in codes:
            if code not in c.dimensions[variables.index(v)].hierarchy.position:
                raise InputError(f"line {row}: {shown(code)} is not a code of {v!r}", where=path)
        what: dict[str, Any] = {}
        for col in APRIORI_COLUMNS:
            text = values.get(col, "").strip()
            if not text:
                continue
            if col == "status":
                what[col] = text.lower()
                continue
            try:
                what[col] = float(text)
            except ValueError:
                raise InputError(f"line {row}, column {col}: {shown(text)} is not a number", where=path) from None
        if codes in entries:
            raise InputError(f"line {row}: the cell is given twice", where=path)
        entries[codes] = what
    try:
        return Controls.from_cells(c, entries)
    except InputError as exc:
        raise InputError(exc.what, where=path) from None


# ------------------------------------------------------------------ the registered method

#: the cost functions that name no variable
COST_FUNCTIONS = ("value", "frequency", "unity")


@dataclass(frozen=True, kw_only=True)
class MagnitudeSuppression(TableMethod):
    """Cell suppression of a magnitude table protected from its contributors: p%, (n,k) and other rules, secondary cells audited by insiders.

    The table is the response's totals (turnover) on every margin of the spanning variables,
    tabulated from microdata with one record per contribution (issue #29; the handbook of
    Hundepool et al., ch. 4). Primary cells by the magnitude rules (:mod:`tabsafe.risk.dominance`),
    a-priori statuses, protection levels and costs from a file, secondary suppression (fast or
    optimal) and the contributor audit with its repair (:func:`protect_magnitudes`). The release
    holds the published totals (``sum_<magnitude>``, its value column: missing where suppressed),
    ``status`` and, when asked for, the contributors' numbers hidden alike; which cells are
    primary, the contributions and the protection levels are evaluation values only.

    Attributes:
        magnitude: the response variable whose totals are published (e.g. turnover).
        contributor: the column of contributor ids (an enterprise; several records of one are
            one contribution); default: each record is a contributor.
        holding: the column of holdings (enterprise groups; empty: none); rules ending in
            ``:holding`` read holdings, and insiders are audited as holdings.
        weight: a column of decimal sampling weights (a cell is the sum of weight × value).
        shadow: the variable the rules read (default: the magnitude).
        request: a 0/1 column: contributors that asked for protection (the request rule).
        rule: primary rules, repeat the option: p:P[,N] (p% rule against a coalition of N),
            pq:P,Q[,N] (prior-posterior rule), nk:N,K ((n,k) dominance), freq:N[,RANGE]
            (fewer than N contributors; RANGE percent protection), request:PCT, zero:RANGE; add
            :holding to apply p, pq, nk or freq to holdings.
        missing: codes whose cells are always safe ("missing = safe"), as VAR:CODE; repeat.
        weighting: how sampling weights enter the rules: tauargus (a weight counts as that many
            units) or sample (the sample's contributions against the weighted total).
        apriori: a CSV file of a-priori statuses (safe, unsafe, protected, suppressed),
            protection levels (upper, lower) and costs per cell, one column per spanning variable.
        cost: what hiding a cell costs: value, frequency (contributors), unity, or the name of a
            cost variable whose totals are the costs.
        lam: the λ transform of the costs, cost ** λ (0: log(1 + cost)).
        manual_ratio: protection levels of cells made unsafe a priori, in percent of their value.
        mode: secondary suppression by the fast heuristic or the optimal integer program.
        intruders: whose insider knowledge is audited: the largest contributor of every
            suppressed cell, of every primary cell, or none (the public audit only).
        coalitions: also audit the two largest contributors of each primary cell together.
        work_limit: the optimal mode's budget of audit-and-cut rounds (the same on any machine).
        time_limit: seconds, an outer guard on the optimal mode (its pattern then depends on the
            machine's speed; the report says so).
        frequency: also publish each cell's number of contributors (column contributors), hidden
            with the totals.
    """

    name: ClassVar[str] = "magnitude-suppress"
    #: deterministic; hides cells; publishes magnitudes; the other cells unchanged; whole grid;
    #: the tables of a release jointly (:meth:`protect_release`)
    declared: ClassVar[Capabilities] = Capabilities(hides=True, magnitudes=True, publishes_unchanged=True,
                                                    needs_grid=True, joint=True)

    magnitude: str = parameter(check=Text(metavar="VAR"))
    contributor: str | None = parameter(None, check=Optional(Text(metavar="COLUMN")))
    holding: str | None = parameter(None, check=Optional(Text(metavar="COLUMN")))
    weight: str | None = parameter(None, check=Optional(Text(metavar="COLUMN")))
    shadow: str | None = parameter(None, check=Optional(Text(metavar="VAR")))
    request: str | None = parameter(None, check=Optional(Text(metavar="COLUMN")))
    rule: tuple[str, ...] = parameter(check=RuleList())
    missing: tuple[str, ...] | None = parameter(None, check=Optional(TextList(identifier=False, repeat=True,
                                                                                metavar="VAR:CODE")))
    weighting: str = parameter("tauargus", check=Choice(WEIGHTINGS))
    apriori: str | None = parameter(None, check=Optional(File(suffixes=(".csv",))))
    cost: str = parameter("value", check=Text(metavar="value|frequency|unity|VAR"))
    lam: float = parameter(1.0, check=Real(min=0, max=1))
    manual_ratio: float = parameter(10.0, check=Real(min=0, max=100))
    mode: Mode = parameter(Mode.FAST, check=Choice(Mode))
    intruders: str = parameter("suppressed", check=Choice(("suppressed", "primary", "none")))
    coalitions: bool = parameter(True, check=Bool())
    work_limit: int = parameter(DEFAULT_WORK_LIMIT, check=Int(min=1, max=10_000))
    time_limit: float | None = parameter(None, check=Optional(Real(min=0, min_open=True, max=86_400)))
    frequency: bool = parameter(False, check=Bool())

    def validate(self) -> None:
        missing: dict[str, tuple[str, ...]] = {}
        for item in self.missing or ():
            var, sep, code = item.partition(":")
            if not sep or not var.strip() or not code.strip():
                raise InputError(f"{param('missing')} takes VAR:CODE; got {item!r}")
            missing[var.strip()] = (*missing.get(var.strip(), ()), code.strip())
        rules = parse_rules(self.rule, missing=missing, weighting=self.weighting)
        if rules.request is not None and self.request is None:
            raise InputError(f"the request rule needs the column of requests ({param('request')})")
        if any(r.holding for r in (*rules.p, *rules.nk)) or rules.min_freq_holding:
            if self.holding is None:
                raise InputError(f"a rule for holdings needs the column of holdings ({param('holding')})")
        if self.holding is not None and self.weight is not None:
            raise InputError(f"holdings ({param('holding')}) and sampling weights ({param('weight')}) do not "
                             "combine: the weighted contributions of a holding's enterprises are unknown (handbook "
                             "§4.2, 'Sampling weights')")
        named = [x for x in (self.magnitude, self.contributor, self.holding, self.weight, self.request) if x]
        if len(set(named)) != len(named):
            dup = next(x for i, x in enumerate(named) if x in named[:i])
            raise InputError(f"column {dup!r} is given for two roles ({param('magnitude')}, {param('contributor')}, "
                             f"{param('holding')}, {param('weight')}, {param('request')})")
        object.__setattr__(self, "_rules", rules)

    @property
    def rules(self) -> DominanceRules:
        """The primary rules these parameters state."""
        return self._rules  # type: ignore[attr-defined, no-any-return]

    def settings(self) -> MagnitudeSettings:
        return MagnitudeSettings(
            mode=self.mode, cost=self.cost if self.cost in COST_FUNCTIONS else "variable", lam=self.lam,
            manual_ratio=self.manual_ratio, intruders=self.intruders, coalitions=self.coalitions,
            work_limit=self.work_limit, time_limit=self.time_limit, frequency=self.frequency)

    def needs(self) -> Needs:
        """Microdata with contributions: the magnitude, its contributors and the other columns
        named (tabulation gives a :class:`~tabsafe.model.contributions.ContributionTable`)."""
        spec = ContributorSpec(value=self.magnitude, contributor=self.contributor, holding=self.holding,
                               weight=self.weight, shadow=self.shadow, request=self.request,
                               cost=None if self.cost in COST_FUNCTIONS else self.cost)
        return Needs(sums=(self.magnitude,), microdata=True, contributors=spec)

    def reading(self) -> Reading:
        """A hidden cell is at least 0 (no negative contribution) — or anything when one is."""
        return Reading(hidden_min=0.0)

    def required(self, values: np.ndarray) -> np.ndarray:
        """The least width of a hidden primary cell's interval that the value alone states; the
        levels themselves come from the contributions (:func:`protect_magnitudes`)."""
        return np.maximum(1e-3, 1e-6 * np.abs(np.nan_to_num(np.asarray(values, dtype=np.float64))))

    def protect_release(self, cells: ReleaseCells, *, seed: int | None = None) -> tuple[tuple[Protection, ...], Report]:
        """Suppress the magnitude tables of a release together (:func:`protect_magnitude_release`;
        ``seed`` unused): a shared cell has one status, and insiders are audited over the release."""
        if self.apriori:
            raise InputError(f"{param('apriori')} names the cells of one table: a release of magnitude tables takes "
                             "no a-priori file")
        settings = self.settings()
        reason, upper, lower, figures = protect_magnitude_release(cells, self.rules, settings)
        private = {"primary": int((reason == "primary").sum()), "secondary": int((reason == "secondary").sum())}
        report = Report(method=self.name, params=self.params(), private=private, notes=(
            "a release of magnitude tables suppressed jointly: a cell the tables share has one status",),
            figures={"suppressed": figures["suppressed"], "tables": len(cells.tables),
                     "shared_cells": int((cells.shared() > 1).sum())})
        out = []
        for t, rows in zip(cells.tables, cells.cells):
            c = _contributions_of(t)
            p = _protection(c, t, reason[rows], upper[rows], lower[rows], self.rules, settings, {}, {}, t.meta)
            out.append(replace(p, report=report))
        return tuple(out), report

    def memory_estimate(self, table: Table) -> int:
        """The grid's arrays, its relations and the contributions (a few arrays per entry)."""
        c = getattr(table, "contributions", None)
        entries = 0 if c is None else int(c.unit.size)
        return table.n_cells * 8 * 40 + entries * 8 * 12

    def apply(self, table: Table, seed: int | None) -> Outcome:
        """Rules, controls, secondary suppression and the contributor audit (``seed`` unused)."""
        from tabsafe.model.contributions import ContributionTable

        if not isinstance(table, ContributionTable):
            raise InputError(f"method {self.name!r} protects a magnitude table from its contributors: tabulate it from "
                             f"microdata with one record per contribution ({param('magnitude')}, "
                             f"{param('contributor')}), not from a table of totals")
        c = table.contributions
        if c.variable != self.magnitude:
            raise InputError(f"the table holds {c.variable!r}, not the {param('magnitude')} {self.magnitude!r}")
        controls = read_apriori(self.apriori, c) if self.apriori else Controls()
        res = protect_magnitudes(c, self.rules, self.settings(), controls)
        rel, ev = res.protection.release.table, res.protection.evaluation
        cells = Table(table.dimensions, table.ids, {"count": c.value}, dict(table.meta), _checked=True)
        release = {col: rel.column(col) for col in rel.value_columns}
        evaluation = {col: ev.column(col) for col in ("contributors", "reason", "upper_level", "lower_level")}
        figures = {k: res.figures[k] for k in ("suppressed", "contributor_audit_rounds") if k in res.figures}
        private = {**dict(res.protection.report.private), **{k: v for k, v in res.figures.items() if k not in figures}}
        notes = (*res.protection.report.notes,
                 f"the release's value column is sum_{c.variable}, the magnitude's totals (no count)")
        return Outcome(cells=cells, release=release, evaluation=evaluation, figures=figures, private=private,
                       notes=notes, value=rel.value_column)

    @classmethod
    def examples(cls) -> Examples:
        from tabsafe.synth_business import generate_business

        data = generate_business(160, 7)  # a seed whose 160 enterprises include holdings
        return Examples(
            data=data, by=("activity", "size"),
            typical=(
                cls(magnitude="turnover", contributor="enterprise", rule=("p:15", "freq:3")),
                cls(magnitude="turnover", contributor="enterprise", holding="holding",
                    rule=("nk:2,85:holding", "p:10"), cost="frequency", lam=0.5),
                cls(magnitude="turnover", weight="weight", rule=("p:20",), weighting="sample", mode=Mode.OPTIMAL,
                    cost="unity", work_limit=5),
            ),
            why_no_identity="a magnitude rule that flags nothing is still a rule; the method always audits and may "
                            "hide cells, and there is no parameter that switches it off",
        )
