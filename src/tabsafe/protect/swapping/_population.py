"""Records grouped into households, with the integer codes swapping and PRAM work on.

Every pre-tabular method here works on households (or on single records when there is no
household variable): the geography, the risk variables and the similarity variables become
integer codes once, households are ordered by their identifier (so random draws attach to the
same household whatever the row order of the file), and the checks a user needs to hear about
are made before any work: unknown variables, missing values, a geography that does not nest, a
household whose members live in different areas, a household-level variable that varies
within a household.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tabsafe._arrow import from_numpy, to_numpy
from tabsafe.errors import InputError, param, shown_list

#: Above this many possible combinations a combined code is compressed with np.unique instead
#: of counted with np.bincount.
_BINCOUNT_LIMIT = 1 << 26


@dataclass(frozen=True)
class Codes:
    """One variable as integer codes: ``codes[i]`` indexes ``labels`` (the distinct values)."""

    codes: np.ndarray
    labels: list[str]

    @property
    def n(self) -> int:
        return len(self.labels)


def column_codes(table: pa.Table, name: str, *, option: str, where: str) -> Codes:
    """The values of column ``name`` as integer codes; a missing value is an error naming
    ``option`` (the parameter the variable was given in)."""
    col = table.column(name)
    if col.null_count:
        raise InputError(f"variable {name!r} in {param(option)} has {col.null_count:,} missing values", where=where)
    if not pa.types.is_dictionary(col.type):
        col = pc.dictionary_encode(col)
    col = pa.Table.from_arrays([col], names=["v"]).unify_dictionaries().column(0)
    if col.num_chunks == 0:
        return Codes(np.zeros(0, dtype=np.int32), [])
    dictionary = col.chunk(0).dictionary
    # int32 codes (Arrow's own dictionary indices): half the memory of int64 at census scale
    parts = [to_numpy(chunk.indices).astype(np.int32, copy=False) for chunk in col.chunks]
    codes = np.concatenate(parts) if len(parts) > 1 else parts[0]
    labels = dictionary.cast(pa.string()).to_pylist() if len(dictionary) else []
    return Codes(codes, [str(x) for x in labels])


def combine(parts: Sequence[np.ndarray], sizes: Sequence[int], n: int, *, dense: bool = False) -> tuple[np.ndarray, int]:
    """Ids of the combinations of several code arrays: ``(ids, bound)`` with ``0 <= ids < bound``;
    equal combinations get equal ids. Ids are mixed-radix numbers (compressed when the radix space
    is large), or numbered ``0..bound-1`` in sorted order of the combinations with ``dense``."""
    if not parts:
        return np.zeros(n, dtype=np.int64), 1
    key = np.zeros(n, dtype=np.int64)
    space = 1
    for codes, size in zip(parts, sizes):
        size = max(int(size), 1)
        if space * size > _BINCOUNT_LIMIT:
            # compress what we have so far before it can overflow
            key, space = _dense(key)
        key = key * size + codes
        space *= size
    if dense or space > _BINCOUNT_LIMIT:
        return _dense(key)
    return key, space


def _dense(key: np.ndarray) -> tuple[np.ndarray, int]:
    uniq, inverse = np.unique(key, return_inverse=True)
    return inverse.astype(np.int64, copy=False).reshape(-1), len(uniq)


def group_counts(ids: np.ndarray, n_ids: int) -> np.ndarray:
    """For each element, how many elements share its id."""
    return np.bincount(ids, minlength=n_ids)[ids]


@dataclass(frozen=True, eq=False)
class Households:
    """Which records form which household, households ordered by identifier.

    Attributes:
        of_record: per record, its household (0..n-1).
        first: per household, its first record in the data (its reference person: the values a
            household-level comparison reads).
        order: records sorted by household (stable), or None when the data already are.
        starts: per household, where its records start in ``order``.
        size: records per household.
        column: the household variable, or None when every record is its own household.
    """

    of_record: np.ndarray
    first: np.ndarray
    order: np.ndarray | None
    starts: np.ndarray
    size: np.ndarray
    column: str | None

    @property
    def n(self) -> int:
        return int(self.first.size)

    def reduce(self, ufunc: np.ufunc, values: np.ndarray) -> np.ndarray:
        """``ufunc`` over each household's records (e.g. ``np.maximum`` → the household's max)."""
        if self.n == 0:
            return values[:0]
        v = values if self.order is None else values[self.order]
        return ufunc.reduceat(v, self.starts)

    def at_household(self, values: np.ndarray) -> np.ndarray:
        """The value of each household's first record."""
        return values[self.first]


def households(table: pa.Table, column: str | None, *, option: str, where: str) -> Households:
    """Group the records of ``table`` by ``column`` (None: every record its own household)."""
    n = table.num_rows
    if column is None:
        idx = np.arange(n, dtype=np.int64)
        return Households(idx, idx, None, idx, np.ones(n, dtype=np.int64), None)
    col = table.column(column)
    if col.null_count:
        raise InputError(f"variable {column!r} in {param(option)} has {col.null_count:,} missing values", where=where)
    if pa.types.is_integer(col.type):
        ids = to_numpy(col).astype(np.int64, copy=False)
        if n and bool(np.all(ids[1:] >= ids[:-1])):
            # the common layout: records sorted by household (no sort needed)
            change = np.empty(n, dtype=bool)
            change[:1] = True
            np.not_equal(ids[1:], ids[:-1], out=change[1:])
            starts = np.flatnonzero(change)
            of_record = np.cumsum(change, dtype=np.int32) - 1
            size = np.diff(np.append(starts, n))
            return Households(of_record, starts, None, starts, size, column)
        _, of_record = np.unique(ids, return_inverse=True)
    else:
        codes = column_codes(table, column, option=option, where=where)
        # households are ordered by identifier, not by first appearance, so that a household's
        # random draws do not depend on the order of the rows
        rank = np.argsort(np.array(codes.labels, dtype=object), kind="stable")
        position = np.empty(len(rank), dtype=np.int64)
        position[rank] = np.arange(len(rank))
        of_record = position[codes.codes]
        used = np.zeros(len(rank), dtype=bool)
        used[of_record] = True
        if not used.all():  # unused dictionary entries: renumber densely
            of_record = (np.cumsum(used) - 1)[of_record]
    of_record = of_record.astype(np.int32, copy=False).reshape(-1)
    order = np.argsort(of_record, kind="stable")
    counts = np.bincount(of_record)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    first = order[starts]
    return Households(of_record, first, order, starts, counts.astype(np.int64), column)


def household_ids(table: pa.Table, hh: Households, rows: np.ndarray) -> list[str]:
    """The identifiers (as text) of the households whose first records are ``rows``."""
    if hh.column is None:
        return [f"record {int(r) + 1}" for r in rows]
    values = table.column(hh.column).take(from_numpy(np.asarray(rows, dtype=np.int64)))
    return [str(v) for v in values.to_pylist()]


def check_columns(table: pa.Table | Sequence[str], wanted: Sequence[tuple[str, str]], *, where: str) -> None:
    """Every named variable exists; the first that does not is an error naming its parameter
    (``table``: the data, or their column names in order)."""
    have = list(table.column_names) if isinstance(table, pa.Table) else list(table)
    for name, option in wanted:
        if name not in have:
            shown = shown_list(have)
            raise InputError(f"unknown variable {name!r} in {param(option)}; the data have: {shown}", where=where)


def check_nesting(levels: Sequence[Codes], names: Sequence[str], *, option: str, where: str) -> None:
    """Each code of a level lies in exactly one area of the level above (codes identify their
    area on their own, as in the synthetic census: a code found under two parents is an error).

    The error names the smallest such code and its two smallest parents (text order), so it is
    the same whatever the order of the records, and on every engine."""
    for k in range(1, len(levels)):
        child, parent = levels[k], levels[k - 1]
        # one parent per child code (any record's); a record whose parent differs breaks nesting
        parent_of = np.zeros(child.n, dtype=np.int32)
        parent_of[child.codes] = parent.codes
        bad = np.flatnonzero(parent_of[child.codes] != parent.codes)
        if bad.size:
            # every code with two parents has a record here (the parent it was not given)
            c = min(np.unique(child.codes[bad]).tolist(), key=lambda i: child.labels[i])
            parents = sorted(parent.labels[i] for i in np.unique(parent.codes[child.codes == c]).tolist())
            raise InputError(
                f"the geography in {param(option)} does not nest: {names[k]} {child.labels[c]!r} lies in "
                f"{names[k - 1]} {parents[0]!r} and in {parents[1]!r}", where=where)


def check_constant(table: pa.Table, hh: Households, codes: Codes, name: str, *, what: str, where: str) -> None:
    """A household-level variable has one value per household; else an error naming the first
    household (identifier order) that has two, with its smallest and largest value (text order:
    the same whatever the order of the records; ``what`` says what that means: "has members in
    different areas")."""
    if hh.column is None or hh.n == 0:
        return
    lo = hh.reduce(np.minimum, codes.codes)
    hi = hh.reduce(np.maximum, codes.codes)
    bad = np.flatnonzero(lo != hi)
    if bad.size:
        h = int(bad[0])
        ident = household_ids(table, hh, hh.first[bad[:1]])[0]
        members = np.flatnonzero(hh.of_record == h)
        values = sorted(codes.labels[i] for i in np.unique(codes.codes[members]).tolist())
        raise InputError(
            f"household {ident} ({hh.column}) {what}: {name} {values[0]!r} and {values[-1]!r}", where=where)
