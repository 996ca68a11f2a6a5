"""Unsafe cells of a frequency table: threshold, extended (dominance) rules, coalitions, zeros.

Each rule is a pure function of a :class:`~tabsafe.model.table.Table` that returns one boolean
per *stored* cell of that table (``True``: the rule flags the cell), so rules combine with ``|``
and feed primary suppression. Every rule but the zeros rule flags non-zero cells only, so it
works on a sparse table as it stands (a margin that is not stored is zero). The zeros rule flags
informative zeros, which are cells of the grid: it wants the dense table
(:meth:`~tabsafe.model.table.Table.densify`), and :func:`assess` densifies for it. The rules
(METHODS.md §10):

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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tabsafe.errors import InputError, param
from tabsafe.model.table import Table
from tabsafe.params import Int, Optional, Real, TextList, check_all, parameter, to_params

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

_COUNT = Optional(Real(min=0))
_PERCENT = Optional(Real(min=0, max=100, min_open=True))


@dataclass(frozen=True, kw_only=True)
class RuleThresholds:
    """Thresholds of the extended rules of seed 003 (METHODS.md §10); ``None`` turns a rule off.

    Attributes:
        t_k_abs: rule 1a, ``f_k - f < t_k_abs`` (3 detects coalitions of up to 2 other units).
        t_y_abs: rule 1b, ``f_y - f < t_y_abs``.
        t_k_rel: rule 2a, ``100 f / f_k >= t_k_rel`` (a percentage in (0, 100]).
        t_y_rel: rule 2b, ``100 f / f_y >= t_y_rel``.
        t_min: rule 3, ``0 < f < t_min``.
        t_min_k: rule 3 for the key margin (default: not checked beyond ``t_min``, which already
            bounds it: a margin is at least the cell).
        t_min_y: rule 3 for the target margin.
    """

    t_k_abs: float | None = parameter(None, check=_COUNT)
    t_y_abs: float | None = parameter(None, check=_COUNT)
    t_k_rel: float | None = parameter(None, check=_PERCENT)
    t_y_rel: float | None = parameter(None, check=_PERCENT)
    t_min: float | None = parameter(None, check=_COUNT)
    t_min_k: float | None = parameter(None, check=_COUNT)
    t_min_y: float | None = parameter(None, check=_COUNT)

    def __post_init__(self) -> None:
        check_all(self)

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
        # checked under the name the caller used, so an error names what was given
        t_abs = _COUNT.check("t_abs", t_abs)
        t_rel = _PERCENT.check("t_rel", t_rel)
        t_min = _COUNT.check("t_min", t_min)
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
    counts = np.asarray(table.counts, dtype=np.float64)
    if np.isnan(counts).any():
        raise InputError("risk rules need the original counts; the table's count has missing values")
    return counts


def _axes(table: Table, targets: Sequence[str] | None) -> list[int]:
    if targets is None:
        return list(range(len(table.dimensions)))
    if isinstance(targets, str):
        raise InputError(f"{param('target')} must be a list of variable names, not one string")
    if not targets:
        raise InputError(f"give at least one {param('target')} variable")
    return [table.axis(v) for v in targets]


def _parent_positions(table: Table, axis: int) -> np.ndarray:
    """Per code position of ``axis``: its parent's position (the root maps to itself)."""
    h = table.dimensions[axis].hierarchy
    return np.array([h.position[h.parents[c]] if c != h.total else 0 for c in h.order], dtype=np.int64)


def _lookup(table: Table, f: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """``f`` at the given grid ids: the stored value, 0 for a cell that is not stored."""
    if table.is_dense:
        return f[ids]
    rows = table.rows_of(ids)
    return np.where(rows >= 0, f[np.maximum(rows, 0)], 0.0)


def threshold_rule(table: Table, min_freq: float) -> np.ndarray:
    """Cells with ``0 < n < min_freq`` (seed 000 §5.2, Table 5.1; METHODS.md §10).

    >>> import pandas as pd
    >>> from tabsafe import InnerCells, tabulate
    >>> t = tabulate(InnerCells.from_frame(pd.DataFrame({"s": ["m", "f"], "n": [5, 1]}), count="n"), ["s"])
    >>> threshold_rule(t, 3).tolist()  # Total, f, m (codes sorted)
    [False, True, False]
    """
    min_freq = Real(min=0).check("min_freq", min_freq)
    n = _counts(table)
    return (n > 0) & (n < min_freq)


def extended_rules(
    table: Table, thresholds: RuleThresholds, *, targets: Sequence[str] | None = None
) -> dict[str, np.ndarray]:
    """The extended threshold rules of seed 003 that ``thresholds`` switch on, per stored cell.

    Each target variable is checked in turn (default: every spanning variable) and a cell is
    flagged by a rule when it is flagged for any target. Hierarchies are checked against the next
    level (seed 003, "Hierarchical variables"). See the module docstring for the margins used.

    Returns:
        rule name (``"1a"``, ``"1b"``, ``"2a"``, ``"2b"``, ``"3"``) -> boolean mask, for the rules
        switched on.
    """
    f = _counts(table)
    out = {rule: np.zeros(table.n_stored, dtype=bool) for rule in thresholds.checked}
    th = thresholds
    if "3" in out and th.t_min is not None:
        out["3"] |= (f > 0) & (f < th.t_min)
    nonzero = f > 0
    n_dims = len(table.dimensions)
    positions = [table.positions(a).astype(np.int64) for a in range(n_dims)]
    parents = [_parent_positions(table, a) for a in range(n_dims)]
    strides = table.strides
    ids = table.ids
    for a in _axes(table, targets):
        pos_a = positions[a]
        target_cell = nonzero & (pos_a != 0)
        f_k = _lookup(table, f, ids + (parents[a][pos_a] - pos_a) * strides[a])
        id_y = pos_a * strides[a]
        key_nonroot = np.zeros(table.n_stored, dtype=bool)
        for b in range(n_dims):
            if b != a:
                id_y = id_y + parents[b][positions[b]] * strides[b]
                key_nonroot |= positions[b] != 0
        f_y = _lookup(table, f, id_y)
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


def coalition_rule(table: Table, k: int, *, targets: Sequence[str] | None = None) -> np.ndarray:
    """Cells directly disclosive with reference to a ``k``-coalition (seed 000 §5.9).

    A non-empty cell ``c`` is flagged when a margin ``p`` it contributes to (its parent along a
    sensitive variable: ``targets``, default every spanning variable) has ``|p| - k <= |c|``: an
    attacker who knows ``k`` of the units of ``p`` can deduce that all others are in ``c``.
    """
    k = Int(min=0).check("coalition", k)
    f = _counts(table)
    out = np.zeros(table.n_stored, dtype=bool)
    for a in _axes(table, targets):
        pos = table.positions(a).astype(np.int64)
        child = (f > 0) & (pos != 0)  # the root has no parent along this variable
        parent_ids = table.ids + (_parent_positions(table, a)[pos] - pos) * table.strides[a]
        f_p = _lookup(table, f, parent_ids)
        out |= child & (f_p - k <= f)
    return out


def zeros_rule(table: Table, *, max_categories: int = 1, targets: Sequence[str] | None = None) -> np.ndarray:
    """100% rows/columns and informative zeros (group attribute disclosure, seed 000 §5.2).

    Along each sensitive variable (``targets``, default all), every aggregate with units whose
    children (at least ``max_categories + 1`` of them) are all zero except at most
    ``max_categories`` flags all those children: the non-zero ones hold every unit of the row
    (Table 5.3: all married persons work full time) and the zeros tell what nobody in it is.

    The informative zeros are cells of the grid, so ``table`` must store them all (a dense table:
    :meth:`~tabsafe.model.table.Table.densify`).
    """
    max_categories = Int(min=1).check("zeros", max_categories)
    if not table.is_dense:
        raise InputError("the zeros rule flags zero cells: it needs the dense table (every grid cell stored)")
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
    """Which rules to check, with their parameters (``None``: not checked).

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
        if not isinstance(self.thresholds, RuleThresholds):
            raise InputError(f"thresholds must be a RuleThresholds; got {type(self.thresholds).__name__}")
        for name, check in (("min_freq", _COUNT), ("coalition", Optional(Int(min=0))), ("zeros", Optional(Int(min=1)))):
            object.__setattr__(self, name, check.check(name, getattr(self, name)))
        if self.targets is not None:
            if isinstance(self.targets, str):
                raise InputError(f"{param('target')} must be a list of variables; got the string {self.targets!r}")
            object.__setattr__(self, "targets", TextList().check("target", tuple(self.targets)))

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
        return {
            "min_freq": self.min_freq, "coalition": self.coalition, "zeros": self.zeros,
            "targets": list(self.targets) if self.targets is not None else None,
            **to_params(self.thresholds),
        }


@dataclass(frozen=True, eq=False)
class RiskAssessment:
    """The flags of each checked rule, per stored cell of ``table``, and their union ``unsafe``.

    Attributes:
        table: the assessed table (dense when the zeros rule was checked); the flags align with
            its stored cells.
        rules: the rules checked.
        flags: rule name -> boolean mask.
    """

    table: Table
    rules: RiskRules
    flags: Mapping[str, np.ndarray]

    @property
    def unsafe(self) -> np.ndarray:
        out = np.zeros(self.table.n_stored, dtype=bool)
        for mask in self.flags.values():
            out |= mask
        return out

    def summary(self) -> dict[str, Any]:
        """Counts and shares of flagged cells per rule (all grid cells and inner cells)."""
        n = self.table.n_cells
        inner = self.table.leaf_mask
        n_inner = int(np.prod([len(d.hierarchy.leaves) for d in self.table.dimensions], dtype=np.int64))

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

    def to_table(self) -> Table:
        """The assessed cells with ``count``, one boolean column per rule and ``unsafe`` (original
        counts: an evaluation output)."""
        return self.table.select(["count"]).with_values(**dict(self.flags), unsafe=self.unsafe)

    def to_frame(self) -> Any:
        """:meth:`to_table` as a pandas frame (codes as strings)."""
        frame = self.to_table().to_frame()
        for v in self.table.variables:
            frame[v] = frame[v].astype(str)
        return frame


def assess(table: Table, rules: RiskRules) -> RiskAssessment:
    """Run every rule ``rules`` switches on (METHODS.md §10); see the module docstring.

    The zeros rule flags zero cells, so with it the table is densified first (behind the dense
    size guard); the other rules work on the stored cells.

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
        raise InputError(f"no rule chosen: give {param('min_freq')}, extended-rule thresholds "
                         f"({param('t_abs')}, {param('t_rel')}, {param('t_min')}), {param('coalition')} "
                         f"or {param('zeros')}")
    _axes(table, rules.targets)  # an unknown target fails whichever rules use it
    if rules.zeros is not None:
        table = table.densify()
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
