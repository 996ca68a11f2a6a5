"""The release rules of the table builder (seed 002 §5) as checks, and what a query gets: an
outcome (the protected table, or the rules it breaks), a refusal with the nearest table that
passes.

A failed check names its rule and limit; the value it failed with is kept for the private audit
log only, never shown: a refusal carries no figure of the population it refuses."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tabsafe.model.table import Table
from tabsafe.service.query import Query, Resolved

@dataclass(frozen=True)
class Check:
    """One release rule applied to a table: its limit, the (protected) value, and by how much it
    fails (0 when it passes)."""

    rule: str
    limit: float | int | bool
    value: float | int | bool
    passed: bool
    by: float | int = 0
    message: str = ""
    #: the value is a figure of the table's population (a rule on numbers): when the check fails,
    #: the population is refused and the figure is not shown
    of_population: bool = False

    def to_json(self, *, private: bool = False) -> dict[str, Any]:
        """The check as a response shows it; ``private`` (the audit log) keeps every figure."""
        hide = self.of_population and not self.passed and not private
        out: dict[str, Any] = {"rule": self.rule, "limit": self.limit, "passed": self.passed}
        if not hide:
            out["value"] = self.value
        if not self.passed:
            if not hide:
                out["by"] = self.by
            out["message"] = self.message
        return out


@dataclass(frozen=True)
class Outcome:
    """What a query gets: the protected table (``payload``) or the rules it breaks."""

    query: Query
    checks: tuple[Check, ...]
    payload: dict[str, Any] | None = None
    cells: int = 0

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def failed(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if not c.passed)


@dataclass(frozen=True)
class Suggestion:
    query: Query
    changes: tuple[str, ...]
    outcome: Outcome


@dataclass(frozen=True)
class Refusal:
    outcome: Outcome
    suggestion: Suggestion | None
    tried: int = 0



def structural_checks(rules: Any, r: Resolved) -> list[Check]:
    """The rules on a table's shape (seed 002 §5): variables, cells, nested recodes; checked before
    any record is read. Their figures are of the query, not of any population."""
    out: list[Check] = []
    if rules.max_dimensions is not None:
        n = len(r.dims)
        out.append(Check("max_dimensions", rules.max_dimensions, n, n <= rules.max_dimensions,
                         n - rules.max_dimensions,
                         f"the table has {n} variables, {n - rules.max_dimensions} more than the "
                         f"maximum of {rules.max_dimensions}"))
    if rules.max_cells is not None:
        n = r.grid_cells
        out.append(Check("max_cells", rules.max_cells, n, n <= rules.max_cells, n - rules.max_cells,
                         f"the table has {n:,} cells (margins included), {n - rules.max_cells:,} more than "
                         f"the maximum of {rules.max_cells:,}"))
    if rules.nested_recodes:
        bad = []
        for d in r.dims:
            if d.spec.groups is None:
                continue
            h, level = d.variable.hierarchy, d.variable.recode_level
            bad += [f"{d.variable.name}:{c}" for _, codes in d.spec.groups for c in codes if h.depth(c) > level]
        out.append(Check("nested_recodes", True, not bad, not bad, len(bad),
                         f"groups may only join whole categories of the published level; "
                         f"{len(bad)} code(s) are finer: {', '.join(bad[:3])}"))
    return out

def data_checks(rules: Any, r: Resolved, release: Table, area: Table | None) -> list[Check]:
    """The rules on numbers (seed 002 §5), on the *protected* table; a failed one says which rule
    and its limit, never the value of the refused population (:meth:`Check.to_json`)."""
    out: list[Check] = []
    dense = release.densify()
    counts = dense.counts.astype(float)
    population = round(float(dense.value("count")))
    inner = counts[dense.leaf_mask]
    n_inner = max(int(inner.size), 1)
    if rules.min_population is not None:
        lim = rules.min_population
        out.append(Check("min_population", lim, population, population >= lim, lim - population,
                         f"the table's population (protected) is below the minimum of {lim:,}", True))
    if rules.min_area_population is not None and area is not None:
        lim = rules.min_area_population
        pop = int(area.value("count")) if area.n_stored else 0
        out.append(Check("min_area_population", lim, pop, pop >= lim, lim - pop,
                         f"the area's population (protected) is below the minimum of {lim:,}", True))
    if rules.min_mean_cell_size is not None:
        lim = rules.min_mean_cell_size
        mean = round(population / n_inner, 2)
        out.append(Check("min_mean_cell_size", lim, mean, mean >= lim, round(lim - mean, 2),
                         f"the table has fewer persons per inner cell (protected) than the minimum of {lim:g}",
                         True))
    if rules.max_small_cell_share is not None:
        lim = rules.max_small_cell_share
        small = int(np.count_nonzero((inner > 0) & (inner < rules.small_cell)))
        share = round(small / n_inner, 4)
        out.append(Check("max_small_cell_share", lim, share, share <= lim, round(share - lim, 4),
                         f"more of the inner cells are small (1..{rules.small_cell - 1}, protected) than the "
                         f"maximum share of {lim:.0%}", True))
    return out


__all__ = ["Check", "Outcome", "Refusal", "Suggestion", "data_checks", "structural_checks"]
