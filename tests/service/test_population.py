"""The record of answered populations (tabsafe.service.population) against brute force on small
universes: what it admits never lets the large answered populations combine into a small region,
never makes a small population a combination of others, and a refusal changes nothing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tabsafe.service.population import PRIME, Basis, BasisReference, Record

N, T = 14, 3


def _rank(rows: list[np.ndarray]) -> int:
    return int(np.linalg.matrix_rank(np.array(rows, dtype=float))) if rows else 0


def _regions(rows: list[np.ndarray]) -> list[np.ndarray]:
    """The Venn regions of the rows (records every row takes or leaves together)."""
    sig = np.zeros(N, dtype=np.int64)
    for i, r in enumerate(rows):
        sig = sig * 2 + r.astype(np.int64)
    return [sig == v for v in np.unique(sig)]


def _small_support(rows: list[np.ndarray]) -> bool:
    """Whether some non-zero combination of the large rows lives on fewer than T records: a
    vector of the span inside a set S of T - 1 records exists exactly when dropping S's columns
    lowers the rank."""
    from itertools import combinations

    large = [r for r in rows if r.sum() >= T]
    if not large:
        return False
    full = np.array(large, dtype=float)
    rank = _rank(large)
    for s in combinations(range(N), T - 1):
        keep = np.ones(N, dtype=bool)
        keep[list(s)] = False
        if int(np.linalg.matrix_rank(full[:, keep])) < rank:
            return True
    return False


def _violates(rows: list[np.ndarray]) -> bool:
    large = [r for r in rows if r.sum() >= T]
    small = [r for r in rows if r.sum() < T]
    for region in _regions(rows):
        if 0 < region.sum() < T and _rank(large + [region.astype(float)]) == _rank(large):
            return True  # a small region is a combination of large populations
    return _rank(rows) != _rank(large) + len(small)


def test_the_carrier_pair_is_refused_and_the_worked_cases():
    m = lambda idx: np.isin(np.arange(1000), list(idx))
    x, b1, b2 = m(range(10)), m(range(100, 200)), m(range(200, 300))
    rec = Record(1000, 30)
    assert rec.ask([[x | b1]]) is None
    assert rec.ask([[b1]]) == "combination"  # (X + B1) - B1 = X, 10 records
    assert rec.ask([[x | b2]]) is None
    assert rec.ask([[b1 | b2]]) == "combination"  # (X+B1) + (X+B2) - (B1+B2) = 2X
    rec = Record(1000, 30)
    every20 = np.arange(1000) % 20 == 0  # 50 records, then cut by areas into small regions
    assert rec.ask([[every20]]) is None
    assert rec.ask([[m(range(0, 300))]]) is None
    assert rec.ask([[m(range(300, 600))]]) is None  # the small cuts are no combination
    assert rec.ask([[m(range(0, 605))]]) == "combination"
    rec = Record(1000, 30)
    assert rec.ask([[x]]) is None  # a small population, answered once
    assert rec.ask([[x | b1]]) is None
    assert rec.ask([[b1]]) == "combination"
    rec = Record(1000, 30)
    x1, x2 = m(range(5)), m(range(5, 10))
    assert rec.ask([[x1]]) is None and rec.ask([[x2]]) is None  # two small groups, each once
    assert rec.ask([[x1 | x2]]) == "repeated"  # their union would be seen twice


SMALL = st.sets(st.integers(0, N - 1), min_size=1, max_size=4).map(lambda s: [i in s for i in range(N)])


@given(st.lists(st.one_of(st.lists(st.booleans(), min_size=N, max_size=N), SMALL), min_size=1, max_size=9))
def test_admitted_populations_never_break_the_rule(masks):
    rec = Record(N, T)
    answered = [np.ones(N)]
    for raw in masks:
        mask = np.array(raw)
        labels, sizes = rec.labels.copy(), rec.sizes.copy()
        outcome = rec.ask([[mask]])
        if outcome is None:
            if mask.any() and not any((mask == a).all() for a in answered):
                answered.append(mask.astype(float))
            assert not _violates(answered), answered
        else:
            # refused: the record is as it was, and brute force agrees something would break
            assert (rec.labels == labels).all() and (rec.sizes == sizes).all()
            rows = [*answered, mask.astype(float)]
            assert _violates(rows) or _small_support(rows)


def _two_processes(small_census, tmp_path):
    """Two defences over one store (two server processes) and a carrier pair: the first query
    with a small area (``R2A193``, 33 persons: refused as an area, and as a difference of areas),
    the second without it."""
    from tabsafe.service.defence import Defence
    from tabsafe.service.prepared import open_prepared
    from tabsafe.service.settings import Settings
    from tabsafe.service.store import Store

    settings = Settings.load(data=small_census.directory, prepared=tmp_path / "prepared", store=tmp_path / "s.sqlite",
                             rules={"min_population": 20, "min_area_population": 60})
    data = open_prepared(settings)
    first = Defence(settings, data, Store(settings.store_path))
    second = Defence(settings, data, Store(settings.store_path))
    pair = ({"dimensions": [{"variable": "sex"}], "area": ["R2A193", "R1A001"], "measure": "count"},
            {"dimensions": [{"variable": "sex"}], "area": ["R1A001"], "measure": "count"})
    return settings, data, first, second, pair


def test_the_record_is_kept_in_the_store_for_every_process(small_census, tmp_path):
    """Two defences over one store (two server processes, or one restarted) share the record:
    what one admitted, the other counts; the second half of a carrier pair is refused there."""
    settings, data, first, second, pair = _two_processes(small_census, tmp_path)
    assert first.admit("a", pair[0]) is None
    refused = second.admit("b", pair[1])
    assert refused is not None and refused.rule == "differencing"
    assert not any(ch.isdigit() for ch in refused.message.replace("002", "").replace("§5", ""))
    from tabsafe.service.defence import Defence
    from tabsafe.service.store import Store

    assert Defence(settings, data, Store(settings.store_path)).admit("c", pair[1]).rule == "differencing"
    # asking again what was answered is no new population: admitted, and within the budget
    assert second.admit("b", pair[0]) is None
    # what the second replayed from the store is the first's population, records for records
    # (its digest is taken from the stored row, not recomputed)
    from tabsafe.service.defence import area_mask, population_mask
    from tabsafe.service.population import digest
    from tabsafe.service.query import Query, resolve

    r = resolve(Query.from_json(pair[0]), data, settings.limits)
    assert digest(population_mask(data, r)) in second.people.known
    assert digest(area_mask(data, r)) in second.areas.known


def test_a_check_made_before_the_write_lock_is_made_again_when_another_process_recorded_meanwhile(
        small_census, tmp_path, monkeypatch):
    """A process checks a new population before it takes the write lock (the lock is held for the
    commit alone); if another process records a population in between, the check is made again:
    here the other process's population makes this one the second half of a carrier pair, and it
    is refused although the check ahead admitted it."""
    _, _, first, second, pair = _two_processes(small_census, tmp_path)
    tx = second.store._tx
    ahead = []

    def between() -> object:  # the other process commits after this one's check ahead
        ahead.append(second.last)
        assert first.admit("a", pair[0]) is None
        return tx()

    monkeypatch.setattr(second.store, "_tx", between)
    refused = second.admit("b", pair[1])
    assert ahead, "the check ahead ran"
    assert refused is not None and refused.rule == "differencing"
    assert second.last > ahead[0]  # it replayed the other's population before checking again


@pytest.mark.parametrize("others", ["once", "every time"])
def test_a_population_recorded_meanwhile_is_replayed_outside_the_write_lock(small_census, tmp_path, monkeypatch,
                                                                           others):
    """When another process records a population between this one's check ahead and its write
    lock, this one lets go and catches up outside the lock (the lock every process queues for is
    not held for a split of the records); if the other keeps recording, the last try replays
    inside. Either way the second half of a carrier pair is refused."""
    from tabsafe.service import defence as module

    _, _, first, second, pair = _two_processes(small_census, tmp_path)
    # populations of 60+ persons the other process records before each later try
    fillers = iter({"dimensions": [{"variable": "sex"}], "area": [a], "measure": "count"}
                   for a in ("R1A002", "R1A003", "R1A004", "R1A005"))
    tx = second.store._tx
    inside = [False]
    tries = []

    class Watched:
        def __init__(self) -> None:
            self.inner = tx()

        def __enter__(self) -> object:
            inside[0] = True
            return self.inner.__enter__()

        def __exit__(self, *exc: object) -> object:
            inside[0] = False
            return self.inner.__exit__(*exc)

    def between() -> Watched:  # the other process commits after this one's check ahead
        tries.append(second.last)
        if len(tries) == 1:
            assert first.admit("a", pair[0]) is None
        elif others == "every time":
            assert first.admit("a", next(fillers)) is None
        return Watched()

    trials = second._trials
    checked_inside = []

    def watched_trials(*args: object, **kwargs: object) -> object:
        checked_inside.append(inside[0])
        return trials(*args, **kwargs)

    monkeypatch.setattr(second.store, "_tx", between)
    monkeypatch.setattr(second, "_trials", watched_trials)
    refused = second.admit("b", pair[1])
    assert refused is not None and refused.rule == "differencing"
    if others == "once":
        assert len(tries) == 2 and checked_inside and not any(checked_inside)
    else:
        assert len(tries) == module.STALE_RETRIES + 1 and checked_inside[-1]


def test_a_key_is_answered_its_budget_of_distinct_populations(small_census, tmp_path):
    from tabsafe.service.defence import Defence
    from tabsafe.service.prepared import open_prepared
    from tabsafe.service.settings import Settings
    from tabsafe.service.store import Store

    settings = Settings.load(data=small_census.directory, prepared=tmp_path / "prepared", store=tmp_path / "s.sqlite",
                             rules={"min_population": 20, "min_area_population": 60},
                             differencing={"populations_per_key": 2})
    defence = Defence(settings, open_prepared(settings), Store(settings.store_path))
    q = lambda where: {"dimensions": [{"variable": "sex"}], "where": where, "measure": "count"}
    assert defence.admit("k", q("age_year >= 30")) is None
    assert defence.admit("k", q("age_year >= 50")) is None
    assert defence.admit("k", q("age_year >= 30")) is None  # the same population again
    assert defence.admit("k", q("age_year > 29")) is None  # and in another spelling
    over = defence.admit("k", q("age_year >= 70"))
    assert over is not None and over.rule == "populations_per_key"
    assert defence.admit("other", q("age_year >= 70")) is None  # another key has its own budget


class DenseBasis:
    """The record's basis as it was first written, dense (rows × regions): the oracle of the
    sparse one."""

    def __init__(self, n_cols: int) -> None:
        self.rows = np.zeros((8, max(8, n_cols)), dtype=np.int64)
        self.n_rows = 0
        self.n_cols = n_cols
        self.pivots: list[int] = []

    def copy(self) -> DenseBasis:
        out = DenseBasis.__new__(DenseBasis)
        out.rows = self.rows[:max(self.n_rows, 1), :max(self.n_cols, 1)].copy()
        out.n_rows, out.n_cols, out.pivots = self.n_rows, self.n_cols, list(self.pivots)
        return out

    def _room(self, rows: int, cols: int) -> None:
        r, c = self.rows.shape
        if rows <= r and cols <= c:
            return
        grown = np.zeros((max(r, rows if rows <= r else max(rows, 2 * r)),
                          max(c, cols if cols <= c else max(cols, 2 * c))), dtype=np.int64)
        grown[:self.n_rows, :self.n_cols] = self.rows[:self.n_rows, :self.n_cols]
        self.rows = grown

    def copy_columns(self, sources: np.ndarray) -> None:
        """Append one column per source, equal to it (the copies are never pivots)."""
        k = int(sources.size)
        if k == 0:
            return
        self._room(self.n_rows, self.n_cols + k)
        self.rows[:self.n_rows, self.n_cols:self.n_cols + k] = self.rows[:self.n_rows, sources]
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
        part = (coef[used] @ self.rows[used, :self.n_cols]) % PRIME
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

    def weights_after(self, j: int, v: np.ndarray, sources: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        """The records each basis row would be supported on after adding the led vector ``v``
        (pivot ``j``; columns after copying ``sources``): only rows with an entry at ``j`` change,
        so only theirs are returned, with ``v``'s own."""
        n = self.n_rows
        col = self.rows[:n, j] if j < self.n_cols else self.rows[:n, sources[j - self.n_cols]]
        hit = np.flatnonzero(col)
        rows = self.rows[hit, :self.n_cols]
        if sources.size:
            rows = np.concatenate([rows, rows[:, sources]], axis=1)
        changed = np.mod(rows - np.outer(col[hit], v), PRIME)
        live = np.concatenate([changed != 0, (v != 0)[None, :]])
        return live @ sizes

    def insert(self, v: np.ndarray) -> bool:
        """Add ``v`` (over the current columns); True when the rank grew."""
        led = self.lead(self.reduce(v))
        if led is None:
            return False
        self.insert_led(*led)
        return True

    def insert_led(self, j: int, v: np.ndarray) -> None:
        """Add a vector already reduced against the basis and led (:meth:`lead`: pivot ``j``)."""
        self._room(self.n_rows + 1, self.n_cols)
        col = self.rows[:self.n_rows, j]
        hit = np.flatnonzero(col)
        if hit.size:
            self.rows[hit, :self.n_cols] = np.mod(self.rows[hit, :self.n_cols] - np.outer(col[hit], v), PRIME)
        self.rows[self.n_rows, :self.n_cols] = v
        self.n_rows += 1
        self.pivots.append(j)


OPS = st.lists(st.tuples(st.sampled_from(["copy", "insert", "check"]), st.integers(0, 2**32 - 1)),
               min_size=1, max_size=25)


@pytest.mark.parametrize("kind", [Basis, BasisReference], ids=["compiled", "numpy"])
@given(n0=st.integers(1, 6), ops=OPS)
def test_the_sparse_basis_does_what_the_dense_one_did(kind, n0, ops):
    """Copies of columns, insertions, reductions and the weights after an insertion, on both
    sparse bases (compiled and numpy) and a dense one."""
    sparse, dense = kind(n0), DenseBasis(n0)
    for op, seed in ops:
        rng = np.random.default_rng(seed)
        n = sparse.n_cols
        if op == "copy":
            sources = rng.integers(0, n, size=int(rng.integers(0, 4)))
            sparse.copy_columns(sources)
            dense.copy_columns(sources)
        elif op == "insert":
            # 0/1 rows (populations) and, now and then, any residues
            v = rng.integers(0, 2, size=n) if rng.random() < 0.8 else rng.integers(0, PRIME, size=n)
            assert sparse.insert(v) == dense.insert(v)
        else:
            sources = rng.integers(0, n, size=int(rng.integers(0, 3)))
            v = rng.integers(0, 2, size=n + sources.size)
            reduced = sparse.reduce(v, sources)
            assert (reduced == dense.reduce(v, sources)).all()
            led = kind.lead(reduced)
            if led is not None:
                sizes = rng.integers(1, 50, size=n + sources.size)
                assert sorted(sparse.weights_after(*led, sources, sizes)) == \
                    sorted(dense.weights_after(*led, sources, sizes))
        assert sparse.pivots == dense.pivots
        assert (sparse.dense() == dense.rows[:dense.n_rows, :dense.n_cols]).all()
    copy = sparse.copy()
    copy.insert(np.ones(copy.n_cols, dtype=np.int64))
    assert (sparse.dense() == dense.rows[:dense.n_rows, :dense.n_cols]).all()  # a copy is apart


@given(st.integers(1, 70), st.lists(st.tuples(st.integers(0, 69), st.integers(0, 9)), max_size=5),
       st.sampled_from([1, 2, 4096]), st.data())
def test_a_digest_read_from_the_runs_alone_is_the_digest_of_the_whole_mask(n, runs, chunk, data):
    """An area's digest reads only its runs of records (neighbouring runs may share a byte or a
    chunk, the last may end mid-byte) and is the same population's digest as read from the whole
    mask; chunks of 1 and 2 bytes put the chunks' edges among the runs."""
    from tabsafe.service import population
    from tabsafe.service.population import digest

    spans = []
    for start, length in sorted(runs):
        s, e = min(start, n), min(start + length, n)
        if spans and s < spans[-1][1]:
            s = spans[-1][1]
        if s < e:
            spans.append((s, e))
    mask = np.zeros(n, dtype=bool)
    for s, e in spans:
        mask[s:e] = data.draw(st.lists(st.booleans(), min_size=e - s, max_size=e - s))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(population, "DIGEST_CHUNK", chunk)
        assert digest(mask, tuple(spans)) == digest(mask)
        other = mask.copy()
        other[data.draw(st.integers(0, n - 1))] ^= True
        assert digest(other) != digest(mask)


def test_a_stored_digest_of_an_older_form_is_computed_again_on_replay(small_census, tmp_path):
    """A store written before the digests' present form: its populations are known again as the
    same populations, however a later query spells them (not counted twice, and a small one not
    refused as seen twice)."""
    import sqlite3

    from tabsafe.service.defence import Defence
    from tabsafe.service.store import Store

    settings, data, first, _, _ = _two_processes(small_census, tmp_path)
    q = lambda where: {"dimensions": [{"variable": "sex"}], "where": where, "measure": "count"}
    assert first.admit("a", q("age_year >= 30")) is None
    with sqlite3.connect(settings.store_path) as db:  # as an older version wrote it
        db.execute("UPDATE populations SET digest = ?", ("0" * 32,))
    again = Defence(settings, data, Store(settings.store_path))
    known, _ = again._identify(q("age_year > 29"))  # the same records, spelled otherwise
    assert again._knows(known)


def test_the_sparse_basis_grows_past_its_first_rows_and_columns():
    """Hundreds of rows and columns (the index of which rows hold a column grows twice over)."""
    for kind in (Basis, BasisReference):
        _grows(kind)


def _grows(kind: type) -> None:
    rng = np.random.default_rng(3)
    sparse, dense = kind(40), DenseBasis(40)
    for step in range(300):
        n = sparse.n_cols
        if step % 3 == 0:
            sources = rng.choice(n, size=int(rng.integers(1, 6)), replace=False)
            sparse.copy_columns(sources)
            dense.copy_columns(sources)
        else:
            v = (rng.random(n) < 0.05).astype(np.int64)
            assert sparse.insert(v) == dense.insert(v)
    assert sparse.n_rows > 130 and sparse.n_cols > 250
    assert sparse.pivots == dense.pivots
    assert (sparse.dense() == dense.rows[:dense.n_rows, :dense.n_cols]).all()


@given(st.lists(st.one_of(st.lists(st.booleans(), min_size=N, max_size=N), SMALL), min_size=1, max_size=9))
def test_a_population_of_most_records_splits_as_the_records_inside_it_would(masks):
    """Moving the records outside a large population (and renaming regions) gives the regions,
    their numbers, the bases and the outcomes that moving the records inside gives."""
    from tabsafe.service import population

    by_outside, by_inside = Record(N, T), Record(N, T)
    for raw in masks:
        mask = np.array(raw)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(population, "SPLIT_BY_OUTSIDE", False)
            expected = by_inside.ask([[mask]])
        assert by_outside.ask([[mask]]) == expected
        assert (by_outside.alias[by_outside.labels] == by_inside.alias[by_inside.labels]).all()
        assert (by_outside.sizes == by_inside.sizes).all()
        assert (by_outside.A.dense() == by_inside.A.dense()).all()
        assert (by_outside.L.dense() == by_inside.L.dense()).all()


@st.composite
def _passes(draw):
    """Records with labels, an alias from labels to regions, a mask, runs and region numbers."""
    n = draw(st.integers(1, 60))
    n_regions = draw(st.integers(1, 6))
    n_labels = draw(st.integers(1, 8))
    alias = np.array(draw(st.lists(st.integers(0, n_regions - 1), min_size=n_labels, max_size=n_labels)),
                     dtype=np.int64)
    labels = np.array(draw(st.lists(st.integers(0, n_labels - 1), min_size=n, max_size=n)), dtype=np.int32)
    mask = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    cuts = sorted(set(draw(st.lists(st.integers(0, n), max_size=6))))
    runs = np.array([c for a, b in zip(cuts[::2], cuts[1::2]) for c in (a, b)], dtype=np.int64)
    number = np.array(draw(st.lists(st.integers(-1, 4), min_size=n_regions, max_size=n_regions)), dtype=np.int64)
    return labels, alias, mask, runs, draw(st.booleans()), number, draw(st.integers(0, 9))


@given(_passes())
def test_the_compiled_passes_count_and_move_the_records_the_reference_does(case):
    """``_record.c``'s tally and moves against their numpy references: the records of a mask (or
    outside it) within runs, counted per region, and those of numbered regions with new labels."""
    from tabsafe.service import population

    assert population._compiled is not None, "the extension tabsafe.service._record is not built"
    labels, alias, mask, runs, invert, number, base = case
    n_regions = number.size
    got, want = np.zeros(n_regions, np.int64), np.zeros(n_regions, np.int64)
    assert population.tally(labels, alias, mask, runs, invert, got) == \
        population.tally_reference(labels, alias, mask, runs, invert, want)
    assert (got == want).all()
    at = population._scan(mask, runs, invert)
    expected = int(np.count_nonzero(number[alias[labels[at]]] >= 0))
    records, new = population.moves(labels, alias, mask, runs, invert, number, base, expected)
    ref_records, ref_new = population.moves_reference(labels, alias, mask, runs, invert, number, base, expected)
    assert records.tolist() == ref_records.tolist() and new.tolist() == ref_new.tolist()
    assert new.dtype == np.int32


def test_the_compiled_passes_refuse_what_they_cannot_read():
    """A label past the alias, a region past the counts, a span past the records, or more records
    moving than counted: a ValueError, never a write out of bounds."""
    from tabsafe.service import population

    labels, alias, mask = np.array([0, 1, 2], np.int32), np.array([0, 1], np.int64), np.ones(3, bool)
    none = np.zeros(0, np.int64)
    with pytest.raises(ValueError, match="label"):
        population.tally(labels, alias, mask, none, False, np.zeros(2, np.int64))
    with pytest.raises(ValueError, match="region"):
        population.tally(labels[:2], alias, mask[:2], none, False, np.zeros(1, np.int64))
    with pytest.raises(ValueError, match="span"):
        population.tally(labels[:2], alias, mask[:2], np.array([0, 5], np.int64), False, np.zeros(2, np.int64))
    with pytest.raises(ValueError, match="more records"):
        population.moves(labels[:2], alias, mask[:2], none, False, np.array([0, 0], np.int64), 0, 1)


@given(st.lists(st.one_of(st.lists(st.booleans(), min_size=N, max_size=N), SMALL), min_size=1, max_size=9),
       st.booleans())
def test_the_record_is_the_same_with_the_compiled_passes_and_without(masks, spans):
    """A record split and reduced with ``_record.c`` and one with the numpy references (passes and
    basis): the same outcomes, labels, aliases, sizes and bases (``spans``: populations read from
    runs)."""
    from tabsafe.service import population

    assert population.Basis is not population.BasisReference, "the extension tabsafe.service._record is not built"
    compiled = Record(N, T)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(population, "Basis", population.BasisReference)
        reference = Record(N, T)
    assert isinstance(reference.A, population.BasisReference) and isinstance(compiled.A, population.Basis)
    for raw in masks:
        mask = np.array(raw)
        runs = ((0, N // 2), (N // 2, N)) if spans else None
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(population, "_compiled", None)
            expected = reference.ask([[mask]], runs)
        assert compiled.ask([[mask]], runs) == expected
        assert compiled.labels.tolist() == reference.labels.tolist()
        assert compiled.alias.tolist() == reference.alias.tolist()
        assert (compiled.sizes == reference.sizes).all()
        assert (compiled.A.dense() == reference.A.dense()).all()
        assert (compiled.L.dense() == reference.L.dense()).all()



def test_a_record_that_fails_while_recording_decides_nothing_more(small_census, tmp_path, monkeypatch):
    """A commit stopped half-way (here: the labels moved, then memory ran out before the bases
    took the population) leaves a record that no longer says what was answered: the failure is
    reported as RecordDamaged, and every later check — a new population, a known one, a
    suggestion's — is refused the same way instead of being decided on it."""
    from tabsafe.service.defence import Defence, RecordDamaged
    from tabsafe.service.prepared import open_prepared
    from tabsafe.service.settings import Settings
    from tabsafe.service.store import Store

    settings = Settings.load(data=small_census.directory, prepared=tmp_path / "prepared", store=tmp_path / "s.sqlite",
                             rules={"min_population": 20, "min_area_population": 60})
    defence = Defence(settings, open_prepared(settings), Store(settings.store_path))
    q = lambda where: {"dimensions": [{"variable": "sex"}], "where": where, "measure": "count"}
    assert defence.admit("k", q("age_year >= 30")) is None

    def half(self, trial):  # what a failure half-way through Record.commit leaves
        if trial.split.touched is not None:
            self.labels[trial.split.touched] = trial.split.new_labels
        raise MemoryError

    with monkeypatch.context() as mp:
        mp.setattr(Record, "commit", half)
        with pytest.raises(RecordDamaged):
            defence.admit("k", q("age_year >= 50"))
    # the commit works again, but the record it would work on is the half-changed one
    for check in (lambda: defence.admit("k", q("age_year >= 60")), lambda: defence.admit("k", q("age_year >= 30")),
                  lambda: defence.would_admit(q("age_year >= 40")), lambda: defence.recorded(q("age_year >= 30"))):
        with pytest.raises(RecordDamaged):
            check()
    # a process started again replays the record from the store, which holds both populations
    again = Defence(settings, open_prepared(settings), Store(settings.store_path))
    assert again.admit("k", q("age_year >= 50")) is None and not again.damaged
