"""Unsafe cells of a frequency table: threshold, extended (dominance) rules, coalitions, zeros.

Each rule is a pure function of a :class:`~tabsafe.model.table.Table` that returns one boolean
per cell (``True``: the rule flags the cell), so rules combine with ``|`` and feed primary
suppression. The rules (METHODS.md §10):

* threshold rule ``0 < n < t`` (seed 000 §5.2, Table 5.1);
* the extended threshold rules 1a/1b/2a/2b/3 of seed 003, for a target variable ``Y`` and the
  other spanning variables as key: with ``f`` the cell, ``f_k`` its key margin (the next level of
  the target: its parent code, the total for a flat variable) and ``f_y`` its target margin (the
  key variables at their next level), 1a ``f_k - f < t_k_abs``, 1b ``f_y - f < t_y_abs``,
  2a ``100 f / f_k >= t_k_rel``, 2b ``100 f / f_y >= t_y_rel``, 3 ``0 < f < t_min`` (and,
  when given, ``0 < f_k < t_min_k``, ``0 < f_y < t_min_y``). Rules 1–2 apply to non-zero cells
  whose target code is not the total (those cells say something about the target) and, for 1b/2b,
  whose key is not all totals. With several key variables the target margin is the cell with
  every key code replaced by its parent: the seed's ``f_y`` (the sum over the key ``X1…Xp``)
  when the key is flat, the next level of the key when it is hierarchical;
* directly disclosive cells for a ``k``-coalition (seed 000 §5.9, Lupp & Langsrud):
  ``|p_c| - k <= |c|`` for a published margin ``p_c`` that the non-empty cell ``c`` contributes to
  along a sensitive variable (its parent along that variable's hierarchy);
* 100% rows/columns and group attribute disclosure (seed 000 §5.2, Table 5.3; seed 001 §4): along
  a variable, an aggregate with units whose children are all zero except at most ``m`` — the
  non-zero children (all units in one or a few categories) and the informative zeros are flagged.

:func:`assess` runs the chosen rules and summarises them (counts and shares per rule).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tabsafe.errors import InputError
from tabsafe.model.table import Table

__all__ = [
    "EXTENDED_RULES",
    "RiskAssessment",
    "RiskRules",
    "RuleThresholds",
    "assess",
    "coalition_rule",
    "extended_rules",
    "threshold_rule",
    "zeros_rule",
]

EXTENDED_RULES = ("1a", "1b", "2a", "2b", "3")


def _check_number(name: str, value: float | None, *, low: float, high: float = math.inf,
                  integer: bool = False) -> None:
    if value is None:
        return
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if ok and integer:
        ok = float(value).is_integer()
    if not ok or not (low <= float(value) <= high) or math.isnan(float(value)):
        kind = "an integer" if integer else "a number"
        upper = "" if high == math.inf else f" and <= {high:g}"
        raise InputError(f"{name} must be {kind} >= {low:g}{upper}; got {value!r}")


@dataclass(frozen=True, kw_only=True)
class RuleThresholds:
    """Thresholds of the extended rules of seed 003 (METHODS.md §10); ``None`` turns a rule off.

    Attributes:
        t_k_abs: rule 1a, ``f_k - f < t_k_abs`` (3 detects coalitions of up to 2 other units).
        t_y_abs: rule 1b, ``f_y - f < t_y_abs``.
        t_k_rel: rule 2a, ``100 f / f_k >= t_k_rel`` (a percentage in (0, 100]).
        t_y_rel: rule 2b, ``100 f / f_y >= t_y_rel``.
        t_min: rule 3, ``0 < f < t_min``.
        t_min_k, t_min_y: rule 3 for the key and target margins (default: not checked beyond
            ``t_min``, which already bounds them: a margin is at least the cell).
    """

    t_k_abs: float | None = None
    t_y_abs: float | None = None
    t_k_rel: float | None = None
    t_y_rel: float | None = None
    t_min: float | None = None
    t_min_k: float | None = None
    t_min_y: float | None = None

    def __post_init__(self) -> None:
        for name in ("t_k_abs", "t_y_abs", "t_min", "t_min_k", "t_min_y"):
            _check_number(name, getattr(self, name), low=0)
        for name in ("t_k_rel", "t_y_rel"):
            value = getattr(self, name)
            _check_number(name, value, low=0, high=100)
            if value is not None and value <= 0:
                raise InputError(f"{name} must be a percentage in (0, 100]; got {value!r}")

    @classmethod
    def both_sides(
        cls,
        *,
        t_abs: float | None = None,
        t_rel: float | None = None,
        t_min: float | None = None,
        **sided: float | None,
    ) -> RuleThresholds:
        """One threshold for both sides (``t_abs`` sets 1a and 1b…), overridden by sided ones.

        >>> RuleThresholds.both_sides(t_abs=3, t_y_abs=2).t_k_abs, RuleThresholds.both_sides(t_abs=3, t_y_abs=2).t_y_abs
        (3, 2)
        """
        values: dict[str, float | None] = {
            "t_k_abs": t_abs, "t_y_abs": t_abs, "t_k_rel": t_rel, "t_y_rel": t_rel, "t_min": t_min,
        }
        unknown = sorted(set(sided) - {"t_k_abs", "t_y_abs", "t_k_rel", "t_y_rel", "t_min_k", "t_min_y"})
        if unknown:
            raise InputError(f"unknown threshold {unknown[0]!r}")
        values.update({k: v for k, v in sided.items() if v is not None})
        return cls(**values)

    @property
    def checked(self) -> tuple[str, ...]:
        """The rules these thresholds switch on, in seed order."""
        on = {
            "1a": self.t_k_abs is not None,
            "1b": self.t_y_abs is not None,
            "2a": self.t_k_rel is not None,
            "2b": self.t_y_rel is not None,
            "3": self.t_min is not None or self.t_min_k is not None or self.t_min_y is not None,
        }
        return tuple(r for r in EXTENDED_RULES if on[r])


def _counts(table: Table) -> np.ndarray:
    counts = np.asarray(table.cells["count"].to_numpy(dtype=np.float64, na_value=np.nan))
    if np.isnan(counts).any():
        raise InputError("risk rules need the original counts; the table's count has missing values")
    return counts


def _axes(table: Table, targets: Sequence[str] | None) -> list[int]:
    if targets is None:
        return list(range(len(table.dimensions)))
    if isinstance(targets, str):
        raise InputError("targets must be a list of variable names, not one string")
    if not targets:
        raise InputError("give at least one target variable")
    return [table.axis(v) for v in targets]


def _parent_positions(table: Table, axis: int) -> np.ndarray:
    """Per code position of ``axis``: its parent's position (the root maps to itself)."""
    h = table.dimensions[axis].hierarchy
    return np.array([h.position[h.parents[c]] if c != h.total else 0 for c in h.order], dtype=np.int64)


def threshold_rule(table: Table, min_freq: float) -> np.ndarray:
    """Cells with ``0 < n < min_freq`` (seed 000 §5.2, Table 5.1; METHODS.md §10).

    >>> import pandas as pd
    >>> from tabsafe import InnerCells, tabulate
    >>> t = tabulate(InnerCells.from_frame(pd.DataFrame({"s": ["m", "f"], "n": [5, 1]}), count="n"), ["s"])
    >>> threshold_rule(t, 3).tolist()  # Total, f, m (codes sorted)
    [False, True, False]
    """
    _check_number("min_freq", min_freq, low=0)
    n = _counts(table)
    return (n > 0) & (n < min_freq)


def extended_rules(
    table: Table, thresholds: RuleThresholds, *, targets: Sequence[str] | None = None
) -> dict[str, np.ndarray]:
    """The extended threshold rules of seed 003 that ``thresholds`` switch on, per cell.

    Each target variable is checked in turn (default: every spanning variable) and a cell is
    flagged by a rule when it is flagged for any target. Hierarchies are checked against the next
    level (seed 003, "Hierarchical variables"). See the module docstring for the margins used.

    Returns:
        rule name (``"1a"``, ``"1b"``, ``"2a"``, ``"2b"``, ``"3"``) -> boolean mask, for the rules
        switched on.
    """
    f = _counts(table)
    out = {rule: np.zeros(table.n_cells, dtype=bool) for rule in thresholds.checked}
    th = thresholds
    if "3" in out and th.t_min is not None:
        out["3"] |= (f > 0) & (f < th.t_min)
    nonzero = f > 0
    positions = [table.positions(a) for a in range(len(table.dimensions))]
    parents = [_parent_positions(table, a) for a in range(len(table.dimensions))]
    strides = np.array(table.strides, dtype=np.int64)
    rows = np.arange(table.n_cells, dtype=np.int64)
    for a in _axes(table, targets):
        pos_a = positions[a]
        target_cell = nonzero & (pos_a != 0)
        row_k = rows + (parents[a][pos_a] - pos_a) * strides[a]
        f_k = f[row_k]
        row_y = pos_a * strides[a]
        key_nonroot = np.zeros(table.n_cells, dtype=bool)
        for b in range(len(table.dimensions)):
            if b != a:
                row_y = row_y + parents[b][positions[b]] * strides[b]
                key_nonroot |= positions[b] != 0
        f_y = f[row_y]
        on_y = target_cell & key_nonroot
        if th.t_k_abs is not None:
            out["1a"] |= target_cell & (f_k - f < th.t_k_abs)
        if th.t_y_abs is not None:
            out["1b"] |= on_y & (f_y - f < th.t_y_abs)
        if th.t_k_rel is not None:
            out["2a"] |= target_cell & (100.0 * f >= th.t_k_rel * f_k)
        if th.t_y_rel is not None:
            out["2b"] |= on_y & (100.0 * f >= th.t_y_rel * f_y)
        if th.t_min_k is not None:
            out["3"] |= target_cell & (f_k > 0) & (f_k < th.t_min_k)
        if th.t_min_y is not None:
            out["3"] |= on_y & (f_y > 0) & (f_y < th.t_min_y)
    return out


def _relation_pairs(table: Table, axes: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """(aggregate row, child row) of every additive relation along the given axes."""
    tot, kid = [], []
    for rel in table.relations():
        if rel.dimension in axes:
            tot.append(np.repeat(rel.total_rows, np.diff(rel.child_ptr)))
            kid.append(rel.child_rows)
    if not tot:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(tot), np.concatenate(kid)


def coalition_rule(table: Table, k: int, *, targets: Sequence[str] | None = None) -> np.ndarray:
    """Cells directly disclosive with reference to a ``k``-coalition (seed 000 §5.9).

    A non-empty cell ``c`` is flagged when a margin ``p`` it contributes to (its parent along a
    sensitive variable: ``targets``, default every spanning variable) has ``|p| - k <= |c|``: an
    attacker who knows ``k`` of the units of ``p`` can deduce that all others are in ``c``.
    """
    _check_number("coalition k", k, low=0, integer=True)
    f = _counts(table)
    parent, child = _relation_pairs(table, _axes(table, targets))
    hit = (f[child] > 0) & (f[parent] - k <= f[child])
    out = np.zeros(table.n_cells, dtype=bool)
    out[child[hit]] = True
    return out


def zeros_rule(table: Table, *, max_categories: int = 1, targets: Sequence[str] | None = None) -> np.ndarray:
    """100% rows/columns and informative zeros (group attribute disclosure, seed 000 §5.2).

    Along each sensitive variable (``targets``, default all), every aggregate with units whose
    children (at least ``max_categories + 1`` of them) are all zero except at most
    ``max_categories`` flags all those children: the non-zero ones hold every unit of the row
    (Table 5.3: all married persons work full time) and the zeros tell what nobody in it is.
    """
    _check_number("max_categories", max_categories, low=1, integer=True)
    f = _counts(table)
    out = np.zeros(table.n_cells, dtype=bool)
    axes = _axes(table, targets)
    for rel in table.relations():
        if rel.dimension not in axes:
            continue
        sizes = np.diff(rel.child_ptr)
        owner = np.repeat(np.arange(rel.total_rows.size), sizes)
        nonzero = np.bincount(owner, weights=(f[rel.child_rows] > 0), minlength=rel.total_rows.size)
        bad = (f[rel.total_rows] > 0) & (nonzero <= max_categories) & (sizes > max_categories)
        out[rel.child_rows[bad[owner]]] = True
    return out


@dataclass(frozen=True, kw_only=True)
class RiskRules:
    """Which rules to check, with their parameters (``None`` or empty: not checked).

    Attributes:
        min_freq: threshold rule ``0 < n < min_freq``.
        thresholds: the extended rules of seed 003.
        coalition: ``k`` of the directly-disclosive rule.
        zeros: the number of non-zero categories at most that makes a row group-disclosive
            (1: 100% rows and columns).
        targets: the sensitive/target variables (default: every spanning variable in turn).
    """

    min_freq: float | None = None
    thresholds: RuleThresholds = field(default_factory=RuleThresholds)
    coalition: int | None = None
    zeros: int | None = None
    targets: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        _check_number("min_freq", self.min_freq, low=0)
        _check_number("coalition", self.coalition, low=0, integer=True)
        _check_number("zeros", self.zeros, low=1, integer=True)
        if self.targets is not None:
            if isinstance(self.targets, str):
                raise InputError(f"targets must be a list of variables; got the string {self.targets!r}")
            object.__setattr__(self, "targets", tuple(self.targets))
            if not self.targets:
                raise InputError("targets, when given, must name at least one variable")

    @property
    def checked(self) -> tuple[str, ...]:
        """The output columns these rules produce, in a fixed order."""
        names: list[str] = []
        if self.min_freq is not None:
            names.append("threshold")
        names += list(self.thresholds.checked)
        if self.coalition is not None:
            names.append("coalition")
        if self.zeros is not None:
            names.append("zeros")
        return tuple(names)

    def params(self) -> dict[str, Any]:
        th = self.thresholds
        return {
            "min_freq": self.min_freq, "coalition": self.coalition, "zeros": self.zeros,
            "targets": list(self.targets) if self.targets is not None else None,
            **{k: getattr(th, k) for k in ("t_k_abs", "t_y_abs", "t_k_rel", "t_y_rel", "t_min", "t_min_k", "t_min_y")},
        }


@dataclass(frozen=True, eq=False)
class RiskAssessment:
    """The flags of each checked rule, per cell, and their union ``unsafe``."""

    table: Table
    rules: RiskRules
    flags: Mapping[str, np.ndarray]

    @property
    def unsafe(self) -> np.ndarray:
        out = np.zeros(self.table.n_cells, dtype=bool)
        for mask in self.flags.values():
            out |= mask
        return out

    def summary(self) -> dict[str, Any]:
        """Counts and shares of flagged cells per rule (all cells and inner cells)."""
        n = self.table.n_cells
        inner = self.table.leaf_mask
        n_inner = int(inner.sum())

        def entry(mask: np.ndarray) -> dict[str, Any]:
            return {
                "cells": int(mask.sum()), "share": round(float(mask.sum()) / n, 6) if n else 0.0,
                "inner_cells": int((mask & inner).sum()),
                "inner_share": round(float((mask & inner).sum()) / n_inner, 6) if n_inner else 0.0,
            }

        return {
            "cells": n, "inner_cells": n_inner,
            "rules": {name: entry(mask) for name, mask in self.flags.items()},
            "unsafe": entry(self.unsafe),
            "params": self.rules.params(),
        }

    def to_frame(self) -> Any:
        """Spanning variables, ``count``, one boolean column per rule, ``unsafe``."""
        frame = self.table.cells[list(self.table.variables)].astype(str).reset_index(drop=True)
        frame["count"] = self.table.counts.astype(np.int64)
        for name, mask in self.flags.items():
            frame[name] = mask
        frame["unsafe"] = self.unsafe
        return frame


def assess(table: Table, rules: RiskRules) -> RiskAssessment:
    """Run every rule ``rules`` switches on (METHODS.md §10); see the module docstring.

    >>> import pandas as pd
    >>> from tabsafe import InnerCells, tabulate
    >>> inner = pd.DataFrame({"m": ["married", "married", "single", "single"], "h": ["ft", "pt"] * 2,
    ...                       "n": [6, 0, 2, 2]})
    >>> t = tabulate(InnerCells.from_frame(inner, count="n"), ["m", "h"])
    >>> a = assess(t, RiskRules(zeros=1, targets=("h",)))
    >>> int(a.flags["zeros"].sum())  # married: full time 6 and the informative zero part time
    2
    """
    if not rules.checked:
        raise InputError("no rule chosen: give a threshold, extended-rule thresholds, a coalition or zeros")
    _axes(table, rules.targets)  # an unknown target fails whichever rules use it
    flags: dict[str, np.ndarray] = {}
    if rules.min_freq is not None:
        flags["threshold"] = threshold_rule(table, rules.min_freq)
    if rules.thresholds.checked:
        flags.update(extended_rules(table, rules.thresholds, targets=rules.targets))
    if rules.coalition is not None:
        flags["coalition"] = coalition_rule(table, rules.coalition, targets=rules.targets)
    if rules.zeros is not None:
        flags["zeros"] = zeros_rule(table, max_categories=rules.zeros, targets=rules.targets)
    return RiskAssessment(table, rules, flags)
