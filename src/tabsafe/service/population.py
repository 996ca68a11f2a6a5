"""The record of answered populations and the differencing rule over it (seed 002 §5, seed 001 §1).

A table's *population* is the set of records it counts: the area's records, those the filter
keeps, those in the categories shown; a recode into groups adds one population per group (the
group's records within the table's population), since a group is a user-made category and two
recodes that differ by a few records difference like two areas do. Every table published crosses
its population with the catalogue's fixed categories, so what an intruder can combine from
published tables is, population by population, the linear span of the answered populations'
indicator vectors over the records (Dinur & Nissim, cited in seed 002 §5).

The rule kept here, for every answered population of every key together, with ``t`` the
smallest population the release rules answer (``rules.min_population``; areas are checked the
same way against ``rules.min_area_population`` on a record of areas alone):

1. the answered populations of ``t`` records or more combine into no population of fewer than
   ``t`` records (seed 002 §5: "consistent and nested categories … to avoid disclosure by
   differencing"; seed 001 §1's slivers): a population under ``t``, refused when asked, is not
   rebuilt as a difference of answered ones;
2. an answered population under ``t`` (a small group of a recode) is a new direction: it is no
   combination of the other answered populations, and no later population makes it one.

So a small population is seen through published tables at most once — as itself, or as one
difference of small groups — and averaging many differences (the carrier attack of issue #26) has
nothing to average.

How it is checked, incrementally. The answered populations cut the records into *regions* (the
records every answered population takes or leaves together; each record's region is kept, one
``int32`` label per record and a table from labels to regions). Over the regions, modulo a prime ``P``, two reduced row-echelon bases are
kept: ``A`` of every answered population, ``L`` of those of ``t`` records or more. Rule 2 is
``rank A == rank L + (answered populations under t)``. Rule 1 is checked on ``L``: no region under
``t`` records is a combination (a reduced basis holds ``e_r`` exactly when ``e_r`` is in its span,
as the row with that single entry), and no row of the reduced basis is supported on fewer than
``t`` records (unions of small regions, as the reduction shows them). A new population splits
regions (their columns are copied: old rows take the same value on both parts) and adds its row;
the check is made on copies, so a refusal leaves the record as it was.

What rule 1 does not see: a union of small regions that is a combination of answered populations
but never a row of the reduced basis (an intruder who first cuts the target apart with helper
populations, then combines three or more). The README states this residual risk.

Ranks modulo ``P = 2,097,143`` equal the ranks over the rationals unless ``P`` divides every
largest non-zero minor of some matrix of 0/1 rows; such minors are small integers, far below
``P``. Products stay below ``2**42`` and sums of up to ``2**21`` of them fit in ``int64``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

try:
    from tabsafe.service import _record as _compiled
except ImportError:  # pragma: no cover - a checkout whose extension was not built
    _compiled = None

#: the prime of the rank arithmetic (module docstring)
PRIME = 2_097_143
#: split by a population of most records by moving the records outside it (:meth:`Record.split`)
SPLIT_BY_OUTSIDE = True


class BasisReference:
    """A reduced row-echelon basis modulo :data:`PRIME` whose columns can be copied (a region
    split in two) without changing its rank (in numpy: :class:`Basis` is the same, compiled).

    Rows are kept sparse — each its columns and values — because a population is a union of few
    regions and its reduced row stays nearly as sparse (about 1% of the regions at 10,000
    regions): a dense matrix cost rows × regions of memory and copied all of it each time it grew
    (a tenth of a second, every doubling, blocking the record). Which rows have an entry in a
    column is kept as bits, a row of bytes per column, so copying columns and finding a column's
    rows are array operations."""

    def __init__(self, n_cols: int) -> None:
        self.n_cols = n_cols
        self.pivots: list[int] = []
        self._cols: list[np.ndarray] = []  # per row: its columns with an entry
        self._vals: list[np.ndarray] = []  # per row: the entries there
        # per column, bit ``i % 8`` of byte ``i // 8`` is set when row ``i`` has an entry there
        self._inc = np.zeros((max(8, n_cols), 8), dtype=np.uint8)

    @property
    def n_rows(self) -> int:
        return len(self._cols)

    def copy(self) -> BasisReference:
        out = BasisReference.__new__(BasisReference)
        out.n_cols, out.pivots = self.n_cols, list(self.pivots)
        # rows are replaced, never changed in place: the arrays can be shared
        out._cols, out._vals = list(self._cols), list(self._vals)
        out._inc = self._inc.copy()
        return out

    def dense(self) -> np.ndarray:
        """The basis as a dense ``rows × columns`` matrix (for tests and small checks)."""
        out = np.zeros((self.n_rows, self.n_cols), dtype=np.int64)
        for i, (cols, vals) in enumerate(zip(self._cols, self._vals)):
            out[i, cols] = vals
        return out

    def _room(self, cols: int, rows: int) -> None:
        c, b = self._inc.shape
        if cols <= c and rows <= 8 * b:
            return
        grown = np.zeros((max(c, cols if cols <= c else max(cols, 2 * c)),
                          max(b, -(-rows // 8) if rows <= 8 * b else max(-(-rows // 8), 2 * b))), dtype=np.uint8)
        grown[:c, :b] = self._inc
        self._inc = grown

    def _rows_at(self, j: int) -> list[int]:
        """The rows with an entry in column ``j``, ascending."""
        return np.flatnonzero(np.unpackbits(self._inc[j], bitorder="little")[:self.n_rows]).tolist()

    def _mark(self, cols: np.ndarray, i: int, on: bool) -> None:
        bit = np.uint8(1 << (i % 8))
        if on:
            self._inc[cols, i // 8] |= bit
        else:
            self._inc[cols, i // 8] &= ~bit

    def copy_columns(self, sources: np.ndarray) -> None:
        """Append one column per source, equal to it (the copies are never pivots)."""
        k = int(sources.size)
        if k == 0:
            return
        n = self.n_cols
        self._room(n + k, self.n_rows)
        self._inc[n:n + k] = self._inc[sources]
        hit = np.unpackbits(np.bitwise_or.reduce(self._inc[sources], axis=0), bitorder="little")[:self.n_rows]
        rows = np.flatnonzero(hit).tolist()
        if rows and np.unique(sources).size == k:  # one population's split: each source gives one new column
            pos = np.full(n, -1, dtype=np.int64)
            pos[sources] = np.arange(k)
            # every hit row's entries at once: which are at a source, and the copies they get
            lens = [self._cols[i].size for i in rows]
            flat = pos[np.concatenate([self._cols[i] for i in rows])]
            at = flat >= 0
            new = n + flat[at]
            copied = np.concatenate([self._vals[i] for i in rows])[at]
            ends = np.cumsum(np.bincount(np.repeat(np.arange(len(rows)), lens)[at], minlength=len(rows))).tolist()
            start = 0
            for i, end in zip(rows, ends):
                self._cols[i] = np.concatenate((self._cols[i], new[start:end]))
                self._vals[i] = np.concatenate((self._vals[i], copied[start:end]))
                start = end
        else:
            for i in rows:  # groups of a recode: a source may give several new columns
                cols, vals = self._cols[i], self._vals[i]
                pairs = [(a, n + j) for j, src in enumerate(sources.tolist()) for a in np.flatnonzero(cols == src)]
                at_ = np.array([a for a, _ in pairs], dtype=np.int64)
                self._cols[i] = np.concatenate([cols, np.array([c for _, c in pairs], dtype=np.int64)])
                self._vals[i] = np.concatenate([vals, vals[at_]])
        self.n_cols += k

    def reduce(self, v: np.ndarray, sources: np.ndarray | None = None) -> np.ndarray:
        """``v`` (over the columns after copying ``sources``) less its part in the basis."""
        v = np.mod(v, PRIME)
        if self.n_rows == 0:
            return v
        coef = v[self.pivots]
        used = np.flatnonzero(coef)
        if used.size == 0:
            return v
        # only the basis rows whose pivot the vector has: a population touches few of them
        part = np.zeros(self.n_cols, dtype=np.int64)
        for i in used.tolist():
            part[self._cols[i]] += int(coef[i]) * self._vals[i] % PRIME
        part %= PRIME
        if sources is not None and sources.size:
            part = np.concatenate([part, part[sources]])
        return np.mod(v - part, PRIME)

    @staticmethod
    def lead(v: np.ndarray) -> tuple[int, np.ndarray] | None:
        """The pivot of a reduced vector and the vector scaled to 1 there (None: it is zero)."""
        nz = np.flatnonzero(v)
        if nz.size == 0:
            return None
        j = int(nz[0])
        return j, (v * pow(int(v[j]), PRIME - 2, PRIME)) % PRIME

    def _row(self, i: int, width: int) -> np.ndarray:
        out = np.zeros(width, dtype=np.int64)
        out[self._cols[i]] = self._vals[i]
        return out

    def weights_after(self, j: int, v: np.ndarray, sources: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        """The records each basis row would be supported on after adding the led vector ``v``
        (pivot ``j``; columns after copying ``sources``): only rows with an entry at ``j`` change,
        so only theirs are returned, with ``v``'s own."""
        src = j if j < self.n_cols else int(sources[j - self.n_cols])
        out = []
        for i in self._rows_at(src):
            row = self._row(i, self.n_cols)
            if sources.size:
                row = np.concatenate([row, row[sources]])
            changed = np.mod(row - row[j] * v, PRIME)
            out.append(int(sizes[changed != 0].sum()))
        out.append(int(sizes[v != 0].sum()))
        return np.array(out, dtype=np.int64)

    def supports(self, sizes: np.ndarray) -> np.ndarray:
        """The records each row is supported on (``sizes``: records per column)."""
        return np.array([int(sizes[c].sum()) for c in self._cols], dtype=np.int64)

    def insert(self, v: np.ndarray) -> bool:
        """Add ``v`` (over the current columns); True when the rank grew."""
        led = self.lead(self.reduce(v))
        if led is None:
            return False
        self.insert_led(*led)
        return True

    def insert_led(self, j: int, v: np.ndarray) -> None:
        """Add a vector already reduced against the basis and led (:meth:`lead`: pivot ``j``)."""
        cols = np.flatnonzero(v)
        for i in self._rows_at(j):
            row = self._row(i, self.n_cols)
            after = np.mod(row - row[j] * v, PRIME)
            # the row changes only where v has entries: so does its support
            was, now = row[cols] != 0, after[cols] != 0
            self._mark(cols[was & ~now], i, False)
            self._mark(cols[now & ~was], i, True)
            kept = np.flatnonzero(after)
            self._cols[i], self._vals[i] = kept, after[kept]
        i = self.n_rows
        self._room(self.n_cols, i + 1)
        self._cols.append(cols)
        self._vals.append(v[cols].astype(np.int64))
        self._mark(cols, i, True)
        self.pivots.append(j)


class Basis:
    """:class:`BasisReference`, compiled (``_record.c``): the same rows, pivots and answers, with
    the rows and each column's rows kept in C. In numpy each column copy, reduction and pivot
    was a few small array operations per row it touched — about half of the recorder's time per
    population."""

    def __init__(self, n_cols: int) -> None:
        self._b = _compiled.basis_new(n_cols)
        self.pivots: list[int] = []

    @property
    def n_rows(self) -> int:
        return int(_compiled.basis_shape(self._b)[0])

    @property
    def n_cols(self) -> int:
        return int(_compiled.basis_shape(self._b)[1])

    def copy(self) -> Basis:
        out = Basis.__new__(Basis)
        out._b, out.pivots = _compiled.basis_copy(self._b), list(self.pivots)
        return out

    def dense(self) -> np.ndarray:
        rows, cols = _compiled.basis_shape(self._b)
        out = np.zeros((rows, cols), dtype=np.int64)
        _compiled.basis_fill(self._b, True, _NONE, out)
        return out

    def copy_columns(self, sources: np.ndarray) -> None:
        _compiled.basis_copy_columns(self._b, np.ascontiguousarray(sources, dtype=np.int64))

    def reduce(self, v: np.ndarray, sources: np.ndarray | None = None) -> np.ndarray:
        out = np.array(v, dtype=np.int64)  # a copy: reduced in place
        _compiled.basis_reduce(self._b, out, _NONE if sources is None else np.ascontiguousarray(sources, np.int64))
        return out

    lead = staticmethod(BasisReference.lead)

    def weights_after(self, j: int, v: np.ndarray, sources: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        sources = np.ascontiguousarray(sources, dtype=np.int64)
        n = self.n_cols
        src = j if j < n else int(sources[j - n])
        out = np.empty(len(_compiled.basis_rows_at(self._b, src)) + 1, dtype=np.int64)
        _compiled.basis_weights_after(self._b, int(j), np.ascontiguousarray(v, np.int64), sources,
                                      np.ascontiguousarray(sizes, np.int64), out)
        return out

    def supports(self, sizes: np.ndarray) -> np.ndarray:
        out = np.empty(self.n_rows, dtype=np.int64)
        _compiled.basis_fill(self._b, False, np.ascontiguousarray(sizes, np.int64), out)
        return out

    insert = BasisReference.insert  # reduce, lead, insert_led: the compiled ones

    def insert_led(self, j: int, v: np.ndarray) -> None:
        _compiled.basis_insert_led(self._b, int(j), np.ascontiguousarray(v, dtype=np.int64))
        self.pivots.append(int(j))


_NONE = np.zeros(0, dtype=np.int64)
if _compiled is None:  # pragma: no cover - a checkout whose extension was not built
    Basis = BasisReference  # type: ignore[misc,assignment]


def _rank_mod(vectors: list[np.ndarray]) -> int:
    """The rank modulo :data:`PRIME` of a few vectors (already reduced against a basis)."""
    basis = Basis(vectors[0].size) if vectors else None
    return sum(basis.insert(v) for v in vectors) if basis is not None else 0


#: the form of :func:`digest` (a record's stored digests of another form are computed again)
DIGEST_FORM = "2-"
#: bytes of a packed mask per chunk of :func:`digest` (32,768 records)
DIGEST_CHUNK = 4096


def digest(mask: np.ndarray, spans: tuple[tuple[int, int], ...] | None = None) -> str:
    """A population's identity: the hash of its records (the same records, the same population,
    however the query spelled them) — of its packed mask, cut in chunks of
    :data:`DIGEST_CHUNK` bytes, the chunks with a record in them and their places. So ``spans``,
    runs of records outside which the mask is empty (a user-defined area's), are all it reads:
    an area's digest costs its chunks, not the data set."""
    width = 8 * DIGEST_CHUNK  # records per chunk
    if spans is None:
        chunks = np.arange(-(-mask.size // width))
    else:
        chunks = np.unique(np.concatenate([np.arange(s // width, (e - 1) // width + 1) for s, e in spans if e > s]
                                          or [np.zeros(0, np.int64)]))
    places, parts = [], []
    for c in chunks.tolist():
        packed = np.packbits(mask[c * width:(c + 1) * width])
        if packed.any():
            places.append(c)
            parts.append(packed.tobytes())
    text = np.array(places, dtype="<i8").tobytes() + b"".join(parts)
    return DIGEST_FORM + hashlib.blake2b(text, digest_size=16).hexdigest()


def _runs(spans: tuple[tuple[int, int], ...] | None) -> np.ndarray:
    """Runs of records as a flat ``int64`` array of starts and ends (empty: every record)."""
    return np.array(spans or [], dtype=np.int64).reshape(-1)


def _scan(mask: np.ndarray, runs: np.ndarray, invert: bool) -> np.ndarray:
    """The records of ``mask`` (``invert``: outside it) within ``runs`` (:func:`_runs`), ascending
    run by run."""
    pairs = runs.reshape(-1, 2).tolist() or [[0, mask.size]]
    parts = [s + np.flatnonzero(~mask[s:e] if invert else mask[s:e]) for s, e in pairs]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def tally_reference(labels: np.ndarray, alias: np.ndarray, mask: np.ndarray, runs: np.ndarray, invert: bool,
                    counts: np.ndarray) -> int:
    """Add to ``counts[region]`` the records of ``mask`` (``invert``: outside it) within ``runs``
    in each region (a record's region is ``alias[labels[record]]``); how many were counted."""
    at = _scan(mask, runs, invert)
    counts += np.bincount(alias[labels[at]], minlength=counts.size)
    return int(at.size)


def moves_reference(labels: np.ndarray, alias: np.ndarray, mask: np.ndarray, runs: np.ndarray, invert: bool,
                    number: np.ndarray, base: int, expected: int) -> tuple[np.ndarray, np.ndarray]:
    """The records scanned as :func:`tally_reference` does whose region ``r`` has ``number[r] >= 0``,
    in order, and their new labels ``base + number[r]`` (``expected``: how many there are)."""
    at = _scan(mask, runs, invert)
    to = number[alias[labels[at]]]
    keep = to >= 0
    if int(np.count_nonzero(keep)) != expected:
        raise AssertionError(f"{int(np.count_nonzero(keep))} records moved where {expected} were counted")
    return at[keep], (base + to[keep]).astype(np.int32)


def tally(labels: np.ndarray, alias: np.ndarray, mask: np.ndarray, runs: np.ndarray, invert: bool,
          counts: np.ndarray) -> int:
    """:func:`tally_reference`, compiled (``_record.c``: one pass, no array of records)."""
    if _compiled is None:  # pragma: no cover - a checkout whose extension was not built
        return tally_reference(labels, alias, mask, runs, invert, counts)
    return int(_compiled.tally(labels, alias, mask.view(np.uint8), runs, invert, counts))


def moves(labels: np.ndarray, alias: np.ndarray, mask: np.ndarray, runs: np.ndarray, invert: bool,
          number: np.ndarray, base: int, expected: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`moves_reference`, compiled (``_record.c``)."""
    if _compiled is None:  # pragma: no cover - a checkout whose extension was not built
        return moves_reference(labels, alias, mask, runs, invert, number, base, expected)
    records = np.empty(expected + 1, dtype=np.int64)  # one slot more: the C loop writes before it decides
    new = np.empty(expected + 1, dtype=np.int32)
    written = _compiled.moves(labels, alias, mask.view(np.uint8), runs, invert, number, base, records, new)
    if written != expected:
        raise AssertionError(f"{written} records moved where {expected} were counted")
    return records[:expected], new[:expected]


@dataclass
class Split:
    """What a set of new populations would do to the record (computed, not yet applied)."""

    new_labels: np.ndarray | None  # per record of ``touched``: its label after the split
    touched: np.ndarray | None  # the records whose label changes
    sources: np.ndarray  # per new region: the region it is cut from
    sizes: np.ndarray  # sizes of the regions after the split (old ids first, then new ones)
    rows: list[np.ndarray]  # per new population: its indicator over the regions after the split
    row_sizes: list[int]
    digests: list[str]
    alias: np.ndarray | None = None  # each label's region after the split (None: as before)


@dataclass
class Trial:
    """A split checked against the record: :meth:`Record.commit` applies it."""

    split: Split
    A: Basis | None  # the bases after the split, when checked on copies
    L: Basis | None
    small_rows: int
    problem: str | None  # None: the rule holds
    #: one new population's reduced, led rows for ``A`` and ``L`` (None: it adds no rank there),
    #: so that :meth:`Record.commit` does not reduce it again; unset when checked on copies
    led: tuple[tuple[int, np.ndarray] | None, tuple[int, np.ndarray] | None] | None = None


class Record:
    """The answered populations of every key, as regions and two bases (module docstring)."""

    def __init__(self, n_records: int, threshold: int) -> None:
        self.threshold = max(1, int(threshold))
        # a record's region is ``alias[labels[record]]``: a population of most records renames
        # regions through ``alias`` instead of moving most records (:meth:`_split_one`)
        self.labels = np.zeros(n_records, dtype=np.int32)
        self.alias = np.zeros(1, dtype=np.int64)
        self.sizes = np.array([n_records], dtype=np.int64)
        self.A = Basis(1)
        self.L = Basis(1)
        self.small_rows = 0
        # the whole population: its total is no secret, and every table adds up to it
        self.A.insert(np.ones(1, dtype=np.int64))
        if n_records >= self.threshold:
            self.L.insert(np.ones(1, dtype=np.int64))
        else:
            self.small_rows = 1
        self.known: set[str] = {digest(np.ones(n_records, dtype=bool))}

    @property
    def regions(self) -> int:
        return int(self.sizes.size)

    # ------------------------------------------------------------------ splitting
    def _fresh(self, families: list[list[np.ndarray]], digests: list[list[str]] | None,
               spans: tuple[tuple[int, int], ...] | None) -> list[list[tuple[np.ndarray, str]]]:
        """The families' populations not answered before, not empty and not repeated, with their
        digests (see :meth:`split`); families left with none are dropped."""
        fresh: list[list[tuple[np.ndarray, str]]] = []
        seen: set[str] = set()
        for fi, family in enumerate(families):
            kept = []
            for mi, m in enumerate(family):
                d = digests[fi][mi] if digests is not None else digest(m)
                empty = not (m.any() if spans is None else any(m[a:b].any() for a, b in spans))
                if d not in self.known and d not in seen and not empty:
                    seen.add(d)
                    kept.append((m, d))
            if kept:
                fresh.append(kept)
        return fresh

    def split(self, families: list[list[np.ndarray]], digests: list[list[str]] | None = None,
              spans: tuple[tuple[int, int], ...] | None = None) -> Split:
        """The regions after cutting by the new populations and each one's row over them.

        ``families`` lists populations in groups of disjoint ones (a recode's groups), so that a
        record's membership is one number per family; populations answered before are left out.
        ``digests`` are the populations' digests when already known; ``spans``, runs of records
        outside which every population is empty (a user-defined area's), so that only they are
        scanned.
        """
        fresh = self._fresh(families, digests, spans)
        if not fresh:
            return Split(None, None, np.zeros(0, np.int64), self.sizes, [], [], [])
        n_regions = self.regions
        radix = [len(f) + 1 for f in fresh]
        width = int(np.prod(radix, dtype=object))
        if width * n_regions >= 2**62:
            raise ValueError("too many populations in one query for the differencing record")
        if width == 2:  # one population (the usual case)
            return self._split_one(fresh[0][0][0], fresh[0][0][1], spans)
        # several families (a recode's groups): each record's membership, one digit per family
        # (0: in none of its populations)
        sig = np.zeros(self.labels.size, dtype=np.int64)
        place = 1
        for f, r in zip(fresh, radix):
            for i, (m, _) in enumerate(f):
                sig[m] += (i + 1) * place
            place *= r
        inside = np.flatnonzero(sig)
        combo = self.alias[self.labels[inside]] * width + sig[inside]
        dense = n_regions * width <= 1 << 22
        if dense:
            counts_all = np.bincount(combo, minlength=n_regions * width)
            keys = np.flatnonzero(counts_all)
            counts = counts_all[keys]
        else:
            keys, inverse, counts = np.unique(combo, return_inverse=True, return_counts=True)
        region, member = keys // width, keys % width
        left = self.sizes.copy()
        np.subtract.at(left, region, counts)
        # a region keeps its number for its part outside every new population, or, when every
        # record of it is inside, for its first part inside
        first = np.ones(keys.size, dtype=bool)
        first[1:] = region[1:] != region[:-1]
        keeps = (left[region] == 0) & first
        new_id = region.copy()
        n_new = int(np.count_nonzero(~keeps))
        new_id[~keeps] = n_regions + np.arange(n_new)
        sources = region[~keeps]
        sizes = np.concatenate([left, counts[~keeps]])
        sizes[region[keeps]] = counts[keeps]
        rows, row_sizes, digests = [], [], []
        place = 1
        for f, r in zip(fresh, radix):
            digit = (member // place) % r
            for i, (m, d) in enumerate(f):
                row = np.zeros(n_regions + n_new, dtype=np.int64)
                row[new_id[digit == i + 1]] = 1
                rows.append(row)
                row_sizes.append(int(np.count_nonzero(m)))
                digests.append(d)
            place *= r
        if dense:  # each record's new region straight from its combination (one pass)
            by_combo = np.zeros(n_regions * width, dtype=np.int64)
            by_combo[keys] = new_id
            new_region = by_combo[combo]
        else:
            new_region = new_id[inverse]
        return Split(*self._relabel(inside, new_region), sources, sizes, rows, row_sizes, digests,
                     np.concatenate([self.alias, n_regions + np.arange(n_new, dtype=np.int64)]))

    def _relabel(self, inside: np.ndarray, new_region: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The new labels of the records that change region, and those records: a new region
        gets a new label of its own (after the present ones, in the order of the new regions); a
        record that keeps its region keeps its label."""
        moved = np.flatnonzero(new_region >= self.regions)
        return (self.alias.size + new_region[moved] - self.regions).astype(np.int32), inside[moved]

    def _split_one(self, mask: np.ndarray, d: str, spans: tuple[tuple[int, int], ...] | None) -> Split:
        """The split by one population (``mask``, digest ``d``; ``spans``: runs of records outside
        which it is empty), in two passes over its records (:func:`tally`, :func:`moves`).

        A region it cuts keeps its number for its part outside, and its part inside takes a new
        number, in the order of the regions; a region wholly inside keeps its number. Which
        records get a new label depends on the population's size, not what the rule sees (the
        numbering is the same): a population of at most half the records moves its records in
        cut regions to new labels; one of most records (a filter such as ``age_year >= 20``)
        moves the records *outside* it instead — their new labels name the old numbers through
        ``alias``, and the old labels of every cut region are renamed to its new number."""
        n_regions, n_labels = self.regions, self.alias.size
        runs = _runs(spans)
        in_count = np.zeros(n_regions, dtype=np.int64)
        total = tally(self.labels, self.alias, mask, runs, False, in_count)
        out_count = self.sizes - in_count
        cut = np.flatnonzero((in_count > 0) & (out_count > 0))
        n_new = int(cut.size)
        number = np.full(n_regions, -1, dtype=np.int64)
        number[cut] = np.arange(n_new)
        sizes = np.concatenate([np.where(number >= 0, out_count, self.sizes), in_count[cut]])
        row = np.zeros(n_regions + n_new, dtype=np.int64)
        row[np.flatnonzero((in_count > 0) & (out_count == 0))] = 1  # regions wholly inside
        row[n_regions:] = 1
        if SPLIT_BY_OUTSIDE and 2 * total > mask.size:
            alias = self.alias.copy()
            renamed = number[alias] >= 0
            alias[renamed] = n_regions + number[alias[renamed]]
            alias = np.concatenate([alias, cut])
            # the records outside lie anywhere, not only in the spans
            touched, labels = moves(self.labels, self.alias, mask, _runs(None), True, number, n_labels,
                                    int(out_count[cut].sum()))
        else:
            alias = np.concatenate([self.alias, n_regions + np.arange(n_new, dtype=np.int64)])
            touched, labels = moves(self.labels, self.alias, mask, runs, False, number, n_labels,
                                    int(in_count[cut].sum()))
        return Split(labels, touched, cut, sizes, [row], [int(total)], [d], alias)

    # ------------------------------------------------------------------ the rule
    def _isolated(self, basis: Basis, sizes: np.ndarray) -> bool:
        """Whether a row of the reduced basis is supported on fewer than ``t`` records (a region
        under ``t``, or a union of them, is a combination of the basis)."""
        if basis.n_rows == 0:
            return False
        return bool(np.any(basis.supports(sizes[:basis.n_cols]) < self.threshold))

    def trial(self, split: Split) -> Trial:
        """Whether the rule holds with ``split`` applied; nothing changes (:meth:`commit` applies).
        One new population is checked from its reductions against the bases alone; several at
        once on copies of the bases."""
        if len(split.rows) > 1:
            return self._trial_on_copies(split)
        problem = None
        small = self.small_rows
        led_a = led_l = None
        if split.rows:
            row, size = split.rows[0], split.row_sizes[0]
            led_a = self.A.lead(self.A.reduce(row, split.sources))
            if size >= self.threshold:
                led_l = self.L.lead(self.L.reduce(row, split.sources))
                if led_l is not None:
                    weights = self.L.weights_after(led_l[0], led_l[1], split.sources, split.sizes)
                    if np.any(weights < self.threshold):
                        problem = "combination"
            else:
                small += 1
            if problem is None and self.A.n_rows + (led_a is not None) != self.L.n_rows + (led_l is not None) + small:
                problem = "repeated"
        return Trial(split, None, None, small, problem, (led_a, led_l) if split.rows else None)

    def _trial_on_copies(self, split: Split) -> Trial:
        A, L = self.A.copy(), self.L.copy()
        A.copy_columns(split.sources)
        L.copy_columns(split.sources)
        small = self.small_rows
        for row, size in zip(split.rows, split.row_sizes):
            A.insert(row)
            if size >= self.threshold:
                L.insert(row)
            else:
                small += 1
        problem = None
        if self._isolated(L, split.sizes):
            problem = "combination"
        elif A.n_rows != L.n_rows + small:
            problem = "repeated"
        return Trial(split, A, L, small, problem)

    def commit(self, trial: Trial) -> None:
        """Make a trial's split part of the record (after a trial that holds, or when replaying
        another process's answered populations)."""
        split = trial.split
        if split.touched is not None:
            self.labels[split.touched] = split.new_labels
        if split.alias is not None:
            self.alias = split.alias
        self.sizes = split.sizes
        if trial.A is not None and trial.L is not None:
            self.A, self.L = trial.A, trial.L
        elif trial.led is not None:  # one population, reduced in the trial over these columns
            self.A.copy_columns(split.sources)
            self.L.copy_columns(split.sources)
            for basis, led in zip((self.A, self.L), trial.led):
                if led is not None:
                    basis.insert_led(*led)
        else:
            self.A.copy_columns(split.sources)
            self.L.copy_columns(split.sources)
            for row, size in zip(split.rows, split.row_sizes):
                self.A.insert(row)
                if size >= self.threshold:
                    self.L.insert(row)
        self.small_rows = trial.small_rows
        self.known.update(split.digests)

    def ask(self, families: list[list[np.ndarray]], spans: tuple[tuple[int, int], ...] | None = None) -> str | None:
        """Check and, when the rule holds, record new populations: None, or what breaks it
        (``spans``: as :meth:`split` reads them)."""
        split = self.split(families, spans=spans)
        if not split.rows:
            return None
        trial = self.trial(split)
        if trial.problem is None:
            self.commit(trial)
        return trial.problem


__all__ = ["DIGEST_FORM", "PRIME", "Basis", "BasisReference", "Record", "Split", "Trial", "digest"]
