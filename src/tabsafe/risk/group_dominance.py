"""Dominance across groups of suppressed cells: approximate disclosure after suppression.

Source: the handbook of Hundepool et al. (2012), ch. 4 — a suppression pattern protects a
sensitive cell only if what the published cells reveal is itself safe — and issue #29's last Build
bullet (sdcTools/UserSupport #160: "dominance across a group of suppressed cells not detected").

Along an additive relation whose total is published, the suppressed cells of the relation are a
*group* whose sum is published implicitly (total − published parts). Each such group of two or
more cells is one pseudo-cell: the union of its cells' contributions, a contributor present in
several of its cells counted once with the sum of its contributions (it is the same enterprise).
The p%, (p,q) and (n,k) rules (:mod:`tabsafe.risk.dominance`, at the level of contributors and of
holdings, weights as the rules read them) are applied to it; a dominated group tells its largest
contributor's value approximately even though every cell of it is hidden. Frequency, request, zero
and "missing = safe" rules describe cells, not the sums a pattern reveals, and are not applied.
A pattern whose hidden cells keep the protection intervals the rules ask for rarely leaves a
dominated group (the intervals bound the group sums too); protection levels given a priori or
lower than the rules', and rules for holdings beside levels for contributors, do. Sums revealed
only by combining several relations are the interval audit's domain
(:mod:`tabsafe.risk.contributor_audit`): it bounds each cell, not the concentration of a sum.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tabsafe.model.contributions import Contributions, merge_cells
from tabsafe.model.table import Table
from tabsafe.risk.dominance import DominanceRules, assess_dominance

__all__ = ["GroupDominance", "group_dominance", "revealed_groups"]


@dataclass(frozen=True, eq=False)
class GroupDominance:
    """The groups of suppressed cells whose sum a pattern reveals, and which of them the rules flag.

    Attributes:
        totals: per group, the published total of its relation (a grid cell id).
        groups: per group, its suppressed cells (grid cell ids).
        flags: rule name -> per group, whether the rule flags the group's union of contributions.
    """

    totals: tuple[int, ...]
    groups: tuple[tuple[int, ...], ...]
    flags: dict[str, np.ndarray]

    @property
    def dominated(self) -> np.ndarray:
        """Per group, whether any rule flags it."""
        out = np.zeros(len(self.groups), dtype=bool)
        for mask in self.flags.values():
            out |= mask
        return out

    def findings(self) -> list[tuple[int, tuple[int, ...]]]:
        """The dominated groups, as (published total, suppressed cells) — private: they say which
        cells are dominated."""
        return [(t, g) for t, g, d in zip(self.totals, self.groups, self.dominated) if d]


def revealed_groups(table: Table, suppressed: np.ndarray) -> list[tuple[int, tuple[int, ...]]]:
    """Per additive relation of the dense grid ``table`` with a published total and at least two
    suppressed parts: (the total, the suppressed parts), each group once."""
    hidden = np.asarray(suppressed, dtype=bool)
    seen: set[tuple[int, ...]] = set()
    out: list[tuple[int, tuple[int, ...]]] = []
    for rel in table.relations():
        for r in range(rel.total_rows.size):
            total = int(rel.total_rows[r])
            if hidden[total]:
                continue
            kids = rel.child_rows[rel.child_ptr[r]:rel.child_ptr[r + 1]]
            group = tuple(sorted(int(k) for k in kids[hidden[kids]]))
            if len(group) >= 2 and group not in seen:
                seen.add(group)
                out.append((total, group))
    return out


def group_dominance(c: Contributions, suppressed: np.ndarray, rules: DominanceRules) -> GroupDominance:
    """Apply the dominance rules of ``rules`` (p%, (p,q), (n,k), at either level) to every group of
    suppressed cells whose sum ``suppressed`` reveals (module docstring).

    >>> import pandas as pd
    >>> from tabsafe.model.contributions import contributions
    >>> from tabsafe.risk.dominance import NKRule
    >>> data = pd.DataFrame({"r": ["a", "a", "a", "a"], "s": ["x", "x", "y", "y"], "id": ["E1", "E2", "E1", "E3"],
    ...                      "v": [60.0, 40, 60, 40]})
    >>> c = contributions(data, ["r", "s"], value="v", contributor="id")
    >>> hidden = [c.table().cell_id({"r": r, "s": s}) for r in ("a", "Total") for s in ("x", "y")]
    >>> g = group_dominance(c, np.isin(np.arange(c.n_cells), hidden), DominanceRules(nk=(NKRule(1, 55),)))
    >>> g.dominated.tolist()  # E1 holds 120 of the 200 the row totals reveal for the two hidden cells
    [True, True]
    """
    concentration = DominanceRules(p=rules.p, nk=rules.nk, weighting=rules.weighting) if (rules.p or rules.nk) \
        else None
    found = revealed_groups(c.table(), suppressed)
    if concentration is None or not found:
        return GroupDominance(tuple(t for t, _ in found), tuple(g for _, g in found), {})
    merged = merge_cells(c, [g for _, g in found])
    flags = dict(assess_dominance(merged, concentration).flags)
    return GroupDominance(tuple(t for t, _ in found), tuple(g for _, g in found), flags)
