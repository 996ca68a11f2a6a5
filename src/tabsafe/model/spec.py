"""What to tabulate: spanning variables, hierarchies, filter, magnitudes and the cell key."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from typing import Any

from tabsafe.errors import InputError, param
from tabsafe.model import filter as _filter
from tabsafe.model.hierarchy import Hierarchy

DEFAULT_MAX_CELLS = 1_000_000_000
DEFAULT_KEY_DIGITS = 10
DEFAULT_SUM_DIGITS = 2


@dataclass(frozen=True, kw_only=True)
class KeySpec:
    """Where the record keys are and how they add up to a cell key (METHODS.md §2).

    Attributes:
        column: the record-key column of the microdata.
        digits: record keys are U[0,1) numbers with this many decimal digits; the cell key
            ``frac(Σ rk)`` is computed exactly as ``(Σ round(rk·10^digits)) mod 10^digits``.
        modulus: set instead of ``digits`` for the ABS integer form (004 §3.3): keys are integers
            in ``0..m-1`` and the cell key is ``(Σ rk) mod m``.
    """

    column: str = "rkey"
    digits: int | None = DEFAULT_KEY_DIGITS
    modulus: int | None = None

    def __post_init__(self) -> None:
        if self.modulus is not None:
            if self.modulus < 2:
                raise InputError(f"key modulus must be at least 2, got {self.modulus}")
            object.__setattr__(self, "digits", None)
        elif self.digits is None or not 1 <= self.digits <= 15:
            raise InputError(f"key digits must be between 1 and 15, got {self.digits}")

    @property
    def scale(self) -> int:
        """The integer that one whole unit of key corresponds to (10^digits or m)."""
        return self.modulus if self.modulus is not None else 10 ** int(self.digits or 0)


@dataclass(frozen=True, kw_only=True)
class ContributorSpec:
    """Where the contributions of a magnitude table are in the microdata (issue #29): a method
    that reads who contributed what to each cell (:class:`tabsafe.method.Needs`) names its
    columns here, and tabulation then keeps every cell's contributions — private, for rules and
    audits only (:class:`tabsafe.model.contributions.ContributionTable`).

    Attributes:
        value: the response variable (turnover); a cell's value is ``Σ weight × value``.
        contributor: the contributor id (default: each record is a contributor).
        holding: the holding (enterprise group) of each contributor.
        weight: decimal sampling weights.
        shadow: the variable the rules read (default ``value``).
        cost: a cost variable (default ``value``).
        request: a 0/1 column: the contributor asked for protection.
    """

    value: str
    contributor: str | None = None
    holding: str | None = None
    weight: str | None = None
    shadow: str | None = None
    cost: str | None = None
    request: str | None = None

    def columns(self) -> dict[str, str]:
        """The columns named, by role (roles left out are not named)."""
        roles = ("value", "contributor", "holding", "weight", "shadow", "cost", "request")
        return {r: getattr(self, r) for r in roles if getattr(self, r) is not None}


@dataclass(frozen=True, kw_only=True)
class TableSpec:
    """A table to build from microdata or from inner cells.

    Attributes:
        by: the spanning variables (2 to 7 in typical census use; any number ≥ 1 works).
        hierarchies: hierarchy per variable; variables without one get a flat codelist.
        where: a filter defining a sub-population, in tabsafe's filter language (text, a parsed
            filter or a mapping of variables to codes; :mod:`tabsafe.model.filter`). Its variables
            count as identifying (000 §5.2).
        sums: numeric variables whose per-cell sums are wanted (columns ``sum_<var>``), summed
            exactly as decimals of ``sum_digits`` places, so a sum is the same in every run.
        sum_digits: decimal places of the summed values (each record's value is rounded to them).
        key: compute the exact cell key from this record-key column.
        max_cells: refuse tables whose grid (margins included) has more cells than this.
        weight: a column of whole-number record weights: a cell's count is the sum of its
            records' weights (e.g. perturbation weights, 001 §7); default: the microdata's own
            weight column, if it declares one, else every record counts 1.
        contributors: a magnitude table with its contributions (:class:`ContributorSpec`): the
            table is then the whole grid of the response's totals and carries every cell's
            contributions (read into this process whatever the engine).
    """

    by: tuple[str, ...]
    hierarchies: Mapping[str, Hierarchy] = field(default_factory=dict)
    where: Any = None
    sums: tuple[str, ...] = ()
    sum_digits: int = DEFAULT_SUM_DIGITS
    key: KeySpec | None = None
    max_cells: int = DEFAULT_MAX_CELLS
    weight: str | None = None
    contributors: ContributorSpec | None = None

    def __post_init__(self) -> None:
        by = tuple(self.by)
        if not by:
            raise InputError(f"a table needs at least one spanning variable ({param('by')})")
        bad = [v for v in by if not isinstance(v, str) or not v.strip()]
        if bad:
            raise InputError(f"{param('by')} has an empty variable name: {', '.join(map(str, by))!r}")
        if len(set(by)) != len(by):
            dup = next(v for i, v in enumerate(by) if v in by[:i])
            raise InputError(f"variable {dup!r} is given twice in {param('by')}")
        object.__setattr__(self, "by", by)
        # before the sums: a magnitude method sums its response itself (no --sum was given)
        if self.contributors is not None:
            named = self.contributors.columns()
            clash = sorted(set(named.values()) & set(by))
            if clash:
                role = next(r for r, c in named.items() if c == clash[0])
                raise InputError(f"variable {clash[0]!r} is both spanning ({param('by')}) and the "
                                 f"{'magnitude' if role == 'value' else role} of the magnitude table ({param(role if role != 'value' else 'magnitude')})")
        sums = tuple(self.sums)
        if len(set(sums)) != len(sums):
            dup = next(v for i, v in enumerate(sums) if v in sums[:i])
            raise InputError(f"variable {dup!r} is given twice in {param('sum')}")
        clash = sorted(set(sums) & set(by))
        if clash:
            raise InputError(f"variable {clash[0]!r} is both spanning ({param('by')}) and summed ({param('sum')})")
        object.__setattr__(self, "sums", sums)
        if isinstance(self.sum_digits, bool) or not isinstance(self.sum_digits, int) or not 0 <= self.sum_digits <= 9:
            raise InputError(f"{param('sum_digits')} must be an integer in 0..9; got {self.sum_digits!r}")
        if isinstance(self.max_cells, bool) or not isinstance(self.max_cells, int) or self.max_cells < 1:
            raise InputError(f"{param('max_cells')} must be an integer >= 1; got {self.max_cells!r}")
        if self.weight is not None:
            if not isinstance(self.weight, str) or not self.weight.strip():
                raise InputError(f"{param('weight')} must be a column name; got {self.weight!r}")
            if self.weight in by or self.weight in sums:
                raise InputError(f"variable {self.weight!r} is both a weight ({param('weight')}) and "
                                 f"{'spanning' if self.weight in by else 'summed'}")
        object.__setattr__(self, "where", _filter.coerce(self.where, where="where"))
        unused = sorted(set(self.hierarchies) - set(by))
        if unused:
            raise InputError(f"hierarchy given for {unused[0]!r}, which is not in {param('by')} ({', '.join(by)})")
