"""What to tabulate: spanning variables, hierarchies, filter, magnitudes and the cell key."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from tabsafe.errors import InputError
from tabsafe.model.hierarchy import Hierarchy

DEFAULT_MAX_CELLS = 50_000_000
DEFAULT_KEY_DIGITS = 10


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
class TableSpec:
    """A table to build from microdata or from inner cells.

    Attributes:
        by: the spanning variables (2 to 7 in typical census use; any number ≥ 1 works).
        hierarchies: hierarchy per variable; variables without one get a flat codelist.
        where: optional SQL filter defining a sub-population (its variables count as identifying,
            000 §5.2).
        sums: numeric variables whose per-cell sums are wanted (columns ``sum_<var>``).
        key: compute the exact cell key from this record-key column.
        max_cells: refuse tables larger than this many cells (margins included).
    """

    by: tuple[str, ...]
    hierarchies: Mapping[str, Hierarchy] = field(default_factory=dict)
    where: str | None = None
    sums: tuple[str, ...] = ()
    key: KeySpec | None = None
    max_cells: int = DEFAULT_MAX_CELLS

    def __post_init__(self) -> None:
        by = tuple(self.by)
        if not by:
            raise InputError("a table needs at least one spanning variable (--by)")
        if len(set(by)) != len(by):
            dup = next(v for i, v in enumerate(by) if v in by[:i])
            raise InputError(f"variable {dup!r} is given twice in --by")
        object.__setattr__(self, "by", by)
        object.__setattr__(self, "sums", tuple(self.sums))
        unused = sorted(set(self.hierarchies) - set(by))
        if unused:
            raise InputError(f"hierarchy given for {unused[0]!r}, which is not in --by ({', '.join(by)})")
