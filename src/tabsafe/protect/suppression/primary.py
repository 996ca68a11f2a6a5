"""Primary suppression: the cells the risk rules flag (seed 000 §5.3; METHODS.md §10)."""

from __future__ import annotations

import numpy as np

from tabsafe.model.table import Table
from tabsafe.protect.suppression.problem import ZeroPolicy
from tabsafe.risk.rules import RiskRules, coalition_rule, extended_rules, threshold_rule

__all__ = ["primary_suppression"]


def primary_suppression(table: Table, rules: RiskRules, *, zeros: ZeroPolicy = ZeroPolicy.NEVER) -> np.ndarray:
    """Cells flagged by any of ``rules`` (threshold, extended rules, coalition), plus zeros when
    ``zeros`` is ``primary``; one entry per grid cell (``table`` is densified).

    The zeros rule of :mod:`tabsafe.risk.rules` is a risk report, not a primary rule here: it
    flags the non-zero cells of a 100% row as well, and hiding those only makes sense together
    with the zeros, which ``zeros="primary"`` does for every zero.
    """
    dense = table.densify()
    mask = np.zeros(dense.n_cells, dtype=bool)
    if rules.min_freq is not None:
        mask |= threshold_rule(dense, rules.min_freq)
    if rules.thresholds.checked:
        for flags in extended_rules(dense, rules.thresholds, targets=rules.targets).values():
            mask |= flags
    if rules.coalition is not None:
        mask |= coalition_rule(dense, rules.coalition, targets=rules.targets)
    if ZeroPolicy(zeros) is ZeroPolicy.PRIMARY:
        mask |= dense.counts == 0
    return mask
