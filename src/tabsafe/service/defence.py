"""The table builder's differencing defence: the record of answered populations, shared by every
server process through the SQLite store, and the per-key budget of distinct populations.

Before a table leaves the service, :meth:`Defence.admit` checks its population — the records the
table counts (:func:`population_mask`) — and, for a table of a user-defined area, the area alone,
against every population answered before to any key (intruders share what they get):

* the rule of :mod:`tabsafe.service.population` on a record of populations (minimum:
  ``rules.min_population``) and on a record of areas (minimum: ``rules.min_area_population``),
  so that no combination of answered tables isolates what the release rules refuse;
* a key is answered at most ``differencing.populations_per_key`` distinct populations a UTC day.

The record of every process is the same: the store's ``populations`` table lists each population
answered, in order, with the canonical query it came from; a process replays the rows it has not
seen (recomputing their records) and checks its own population before it takes the write lock,
then takes the ``BEGIN IMMEDIATE`` transaction in which it appends its own. If another process
recorded a population meanwhile, it lets go, catches up outside the lock and comes back
(:data:`STALE_RETRIES` times; the last time it replays inside the transaction and checks again),
so two processes never admit two halves of a difference, and the lock every process queues for is
held for the commit alone. A
population already in the record (the same records, however the query spelled them) is admitted
without a transaction beyond the key's budget.

A refusal says which rule and what passes instead; it carries no figure of any population.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tabsafe.errors import InputError
from tabsafe.service.population import DIGEST_FORM, Record, digest
from tabsafe.service.query import Query, Resolved, resolve

POPULATIONS_SCHEMA = """
CREATE TABLE IF NOT EXISTS populations (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    at TEXT NOT NULL,
    key_id TEXT,
    digest TEXT NOT NULL,
    query TEXT NOT NULL,
    data TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS key_populations (
    key_id TEXT NOT NULL,
    day TEXT NOT NULL,
    digest TEXT NOT NULL,
    PRIMARY KEY (key_id, day, digest)
) WITHOUT ROWID;
"""


#: times a process lets go of the write lock to catch up outside it with populations another
#: process recorded after its check ahead, before it replays them inside (:meth:`Defence.admit`)
STALE_RETRIES = 2


class RecordDamaged(Exception):
    """A population was being taken into the record when something failed (memory, a bug): the
    record may be half-changed, so it decides nothing more. The store already holds the
    population; a process started again replays the record from it."""


class _Stale(Exception):
    """The record moved on between the check ahead and the write lock (:meth:`Defence.admit`)."""


@dataclass(frozen=True)
class Refused:
    """Why the defence refuses a table: the rule and a sentence without figures."""

    rule: str
    message: str


def population_mask(data: Any, r: Resolved) -> np.ndarray:
    """The records a resolved query counts: its area, its filter, the categories and groups its
    variables keep (a record in no shown category is left out of the table)."""
    mask = np.zeros(data.n, dtype=bool)
    restricted = [(d.lut, data.codes[d.variable.name]) for d in r.dims if bool((d.lut < 0).any())]
    for s, e in r.ranges:
        sel = slice(s, e)
        keep = r.mask(sel) if r.mask is not None else np.ones(e - s, dtype=bool)
        for lut, codes in restricted:
            keep &= lut[codes[sel]] >= 0
        mask[sel] = keep
    return mask


def population_key(r: Resolved) -> tuple[Any, ...]:
    """What decides the records a resolved query counts (:func:`population_mask`) and its area
    (:func:`area_mask`): the runs of its area, its canonical filter, and which leaf codes each
    restricted variable keeps. Two queries with the same key count the same records, so a
    population's digests are computed once per key, not once per query."""
    restricted = tuple(sorted((d.variable.name, np.packbits(d.lut >= 0).tobytes())
                              for d in r.dims if bool((d.lut < 0).any())))
    return r.ranges, r.area_label is not None, r.query.where, restricted


def replay_limits(settings: Any) -> Any:
    """The limits under which a recorded query is resolved again: a recorded population is
    replayed whatever the limits of the day (they bound a table's size, not which records it
    counts)."""
    return settings.limits.model_copy(update={
        "max_grid_cells": 2**62, "max_area_blocks": 2**62, "max_groups": 2**62, "max_filter_length": 2**62})


def area_mask(data: Any, r: Resolved) -> np.ndarray | None:
    """The records of the query's user-defined area (None: no area)."""
    if r.area_label is None:
        return None
    mask = np.zeros(data.n, dtype=bool)
    for s, e in r.ranges:
        mask[s:e] = True
    return mask


def _day(t: float) -> str:
    return _dt.datetime.fromtimestamp(t, _dt.UTC).strftime("%Y-%m-%d")


class Defence:
    """The record of answered populations of one server process, kept in step with the store."""

    def __init__(self, settings: Any, data: Any, store: Any) -> None:
        self.settings = settings
        self.data = data
        self.store = store
        self.limits = replay_limits(settings)
        self.data_id = str(getattr(data, "fingerprint", ""))
        self.budget = settings.differencing.populations_per_key
        t_pop, t_area = settings.thresholds()
        self.active = Defence.records(settings)
        self.budget_on = settings.differencing.enabled
        self._lock = threading.Lock()
        self._digests: dict[str, tuple[str, str | None]] = {}
        #: a population's digests by :func:`population_key` (many queries, one population)
        self._populations: dict[tuple[Any, ...], tuple[str, str | None]] = {}
        self.last = 0
        self.damaged = False  # a commit failed half-way (:class:`RecordDamaged`)
        if self.active and getattr(data, "blocks", None) is None and data.geography is not None:
            raise InputError("the differencing defence needs the prepared records (engine: prepared); "
                             "switch it off only where no table can be differenced (differencing.enabled)")
        self.people = Record(data.n, t_pop) if self.active else None
        self.areas = Record(data.n, t_area) if self.active and data.geography else None
        db = store._db()
        db.executescript(POPULATIONS_SCHEMA)
        if self.active:
            with self._lock:
                self._sync(db)

    # ------------------------------------------------------------------ populations of a query
    def _masks(self, query: dict[str, Any]) -> tuple[np.ndarray, np.ndarray | None, Any]:
        """The records of a query's population and area, and the runs outside which both are
        empty (None: the whole data set)."""
        r = resolve(Query.from_json(query), self.data, self.limits)
        return population_mask(self.data, r), area_mask(self.data, r), r.ranges if r.area_label else None

    def _identify(self, query: dict[str, Any], people: str | None = None) -> tuple[tuple[str, str | None], Any]:
        """The digests of a query's population and area, and their masks when they had to be
        computed (None when the population's key was seen before: :func:`population_key`);
        ``people``: the population's digest when known (a recorded row's)."""
        r = resolve(Query.from_json(query), self.data, self.limits)
        key = population_key(r)
        known = self._populations.get(key)
        if known is not None:
            return known, None
        masks = population_mask(self.data, r), area_mask(self.data, r), r.ranges if r.area_label else None
        if people is None or not people.startswith(DIGEST_FORM):  # none, or a stored one of an older form
            people = digest(masks[0], masks[2])
        # an area with no filter and every category kept: the population is the area's records
        whole_area = r.query.where is None and not key[3]
        known = (people, None if masks[1] is None else people if whole_area else digest(masks[1], masks[2]))
        if len(self._populations) > 50_000:
            self._populations.clear()
        self._populations[key] = known
        return known, masks

    def _knows(self, known: tuple[str, str | None]) -> bool:
        """Whether the record holds the population and the area of these digests."""
        assert self.people is not None
        return known[0] in self.people.known and (known[1] is None or self.areas is None
                                                   or known[1] in self.areas.known)

    def _trials(self, masks: tuple[np.ndarray, np.ndarray | None, Any], *, check: bool,
                known: tuple[str, str | None] | None = None) -> Refused | list[tuple[Record, Any]]:
        """Check one query's population and area against the record as it is (``known``: their
        digests, when computed already): why it is refused, or the trials that record it
        (:meth:`_commit`). Replaying, nothing is refused (``check`` false)."""
        assert self.people is not None
        people, area, spans = masks
        trials = []
        pairs = [(self.people, people, known[0] if known else None)]
        if self.areas is not None and area is not None:
            pairs.append((self.areas, area, known[1] if known else None))
        for record, mask, d in pairs:
            split = record.split([[mask]], [[d]] if d is not None else None, spans)
            if not split.rows:
                continue
            trial = record.trial(split)
            if check and trial.problem is not None:
                return _refusal(record is self.areas, trial.problem)
            trials.append((record, trial))
        return trials

    def _commit(self, trials: list[tuple[Record, Any]]) -> None:
        try:
            for record, trial in trials:
                record.commit(trial)
        except BaseException as exc:
            # a commit changes labels, sizes and both bases in turn: stopped half-way, the record
            # no longer says what was answered, and deciding on it could let a population through
            self.damaged = True
            raise RecordDamaged(f"the differencing record failed while recording a population "
                                f"({type(exc).__name__}); it decides nothing more until the service "
                                f"starts again (it is replayed from the store)") from exc

    def _whole(self) -> None:
        """Refuse to decide on a record a failed commit may have left half-changed."""
        if self.damaged:
            raise RecordDamaged("the differencing record failed earlier; it decides nothing more until the "
                                "service starts again")

    def _sync(self, db: Any) -> None:
        """Replay the populations other processes recorded since this one last looked."""
        # populations answered from other records (prepared again since) say nothing of these
        rows = db.execute("SELECT seq, query, data, digest FROM populations WHERE seq > ? ORDER BY seq",
                          (self.last,)).fetchall()
        for seq, text, data_id, pop in rows:
            if data_id == self.data_id:
                known, masks = self._identify(json.loads(text), pop)
                if not self._knows(known):  # a population this process has not recorded yet
                    trials = self._trials(masks if masks is not None else self._masks(json.loads(text)),
                                          check=False, known=known)
                    assert not isinstance(trials, Refused)  # nothing is refused when replaying
                    self._commit(trials)
            self.last = int(seq)

    # ------------------------------------------------------------------ the check
    def admit(self, key_id: str | None, query: dict[str, Any],
              then: Callable[[Any, Refused | None], None] | None = None) -> Refused | None:
        """None when the table may be published to ``key_id``; else why not (module docstring).
        ``query`` is the canonical query of an answered table. ``then(db, refused)`` is called
        inside the write transaction when one is needed (the audit row joins it: one commit per
        query); the caller knows it ran when it did."""
        if not self.budget_on:
            return None
        text = canonical(query)
        with self._lock:
            self._whole()
            known = self._digests.get(text)
            if known is None and not self.active:
                # nothing to record: the budget counts queries by their canonical text
                known = (hashlib.blake2b(text.encode(), digest_size=16).hexdigest(), None)
                masks = None
            elif known is None:
                known, masks = self._identify(query)
                if len(self._digests) > 50_000:
                    self._digests.clear()
                self._digests[text] = known
            else:
                masks = None
            fresh = self.active and not self._knows(known)
            if not fresh and self._counted(key_id, known[0]):
                # a recorded population the key was answered today: nothing to check or write,
                # so no write transaction (its lock is what processes queue for)
                return None
            for attempt in range(STALE_RETRIES + 1):
                ahead = None
                if fresh:
                    # the work before the write lock, which every process queues for: catch up with
                    # the populations others recorded (committed rows: a plain read) and check this one
                    self._sync(self.store._db())
                    if masks is None:
                        masks = self._masks(query)
                    ahead = (self.last, None if self._knows(known) else self._trials(masks, check=True, known=known))
                try:
                    with self.store._tx() as db:
                        if fresh and attempt < STALE_RETRIES and self._recorded_since(db):
                            # another process recorded a population after the check ahead: replaying
                            # it here would hold every process's lock for a split of the records, so
                            # let go, catch up outside, and come back (the last try replays inside)
                            raise _Stale
                        refused, recorded = self._check(db, key_id, query, text, known, masks, fresh, ahead)
                        if then is not None:
                            then(db, refused)
                except _Stale:
                    continue
                if recorded is not None:
                    # the record takes the population once the store has it, after the write lock
                    # is let go: the split of the records is not held against every process's turn
                    # (no thread of this process can look meanwhile: ``self._lock``)
                    trials, seq = recorded
                    self._commit(trials)
                    self.last = seq
                return refused
            raise AssertionError("unreachable: the last try does not give up")  # pragma: no cover

    def _recorded_since(self, db: Any) -> bool:
        """Whether a population was recorded after the last this process replayed."""
        return int(db.execute("SELECT coalesce(max(seq), 0) FROM populations").fetchone()[0]) > self.last

    def _check(self, db: Any, key_id: str | None, query: dict[str, Any], text: str, known: tuple[str, str | None],
               masks: Any, fresh: bool, ahead: tuple[int, Any] | None = None
               ) -> tuple[Refused | None, tuple[list[tuple[Record, Any]], int] | None]:
        """The budget and the record, inside the write transaction ``db`` (:meth:`admit`): why the
        table is refused, or None and — for a new population, written to the store — the trials
        that record it and its sequence number, for :meth:`admit` to commit after the
        transaction. ``ahead``: the check made before the transaction, with the last population
        the record held then; it stands when no other process recorded one since."""
        refused = self._budget(db, key_id, known[0])
        if refused is not None or not fresh:
            return refused, None
        self._sync(db)
        if self._knows(known):  # another process recorded it meanwhile
            return None, None
        if masks is None:
            masks = self._masks(query)
        # the record is what it was when checked ahead (no population added since): that check
        # holds; else check again against the record as it now is
        outcome = ahead[1] if ahead is not None and ahead[1] is not None and ahead[0] == self.last else \
            self._trials(masks, check=True, known=known)
        refused = outcome if isinstance(outcome, Refused) else None
        if refused is not None:
            db.execute("DELETE FROM key_populations WHERE key_id = ? AND day = ? AND digest = ?",
                       (key_id or "", _day(time.time()), known[0]))
            return refused, None
        assert not isinstance(outcome, Refused)
        cur = db.execute("INSERT INTO populations(at, key_id, digest, query, data) VALUES (?, ?, ?, ?, ?)",
                         (_dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds"), key_id, known[0],
                          text, self.data_id))
        return None, (outcome, int(cur.lastrowid))

    def would_admit(self, query: dict[str, Any]) -> bool:
        """Whether the record (as this process knows it) admits ``query``'s population: for
        suggestions; :meth:`admit` decides."""
        if not self.active:
            return True
        with self._lock:
            self._whole()
            people, area, _ = self._masks(query)
            for record, mask in ((self.people, people), (self.areas, area)):
                if record is None or mask is None:
                    continue
                split = record.split([[mask]])
                if split.rows and record.trial(split).problem is not None:
                    return False
        return True

    def _counted(self, key_id: str | None, pop: str) -> bool:
        return counted(self.store._db(), key_id, pop)

    def recorded(self, query: dict[str, Any]) -> str | None:
        """The digest of ``query``'s population when the record holds it (after :meth:`admit`
        let it out), else None: a worker that keeps it lets the same table out again to a key
        counted for it without asking (:mod:`tabsafe.service.recorder`)."""
        with self._lock:
            self._whole()
            known = self._digests.get(canonical(query))
            if known is None or (self.active and not self._knows(known)):
                return None
            return known[0]

    @staticmethod
    def records(settings: Any) -> bool:
        """Whether the settings keep a record of populations (else only the keys' budgets)."""
        return bool(settings.differencing.enabled and max(settings.thresholds()) > 1)

    async def admit_async(self, key_id: str | None, query: dict[str, Any],
                          then: Callable[[Any, Refused | None], None] | None = None) -> Refused | None:
        """:meth:`admit`, as the routes call it (the recorder's client waits on a socket)."""
        return self.admit(key_id, query, then)

    def _budget(self, db: Any, key_id: str | None, pop: str) -> Refused | None:
        return budget(db, key_id, pop, self.budget)

    def warm(self) -> None:
        """Check (and record nothing of) one query of each kind, so that code loaded on first use
        is in place before the first table waits on it (:func:`~tabsafe.service.builder.warm_queries`)."""
        from tabsafe.errors import TabsafeError
        from tabsafe.service.builder import warm_queries

        if not self.active:
            return
        for raw in warm_queries(self.data):
            try:
                self.would_admit(raw)
            except TabsafeError:  # a data set without this kind of query: nothing to warm there
                continue


def budget(db: Any, key_id: str | None, pop: str, limit: int) -> Refused | None:
    """Count a population against a key's budget of the day (inserted when new), inside the write
    transaction ``db``: None, or the refusal when the key has had its ``limit`` populations."""
    day = _day(time.time())
    key = key_id or ""
    seen = db.execute("SELECT 1 FROM key_populations WHERE key_id = ? AND day = ? AND digest = ?",
                      (key, day, pop)).fetchone()
    if seen:
        return None
    n = db.execute("SELECT count(*) FROM key_populations WHERE key_id = ? AND day = ?", (key, day)).fetchone()[0]
    if n >= limit:
        return Refused("populations_per_key", f"the key has been answered its {limit:,} distinct "
                       f"populations of the day; ask again for a population already answered, or tomorrow")
    db.execute("INSERT INTO key_populations(key_id, day, digest) VALUES (?, ?, ?)", (key, day, pop))
    return None


def canonical(query: dict[str, Any]) -> str:
    """The text by which the record knows a canonical query (stored with each population)."""
    return json.dumps(query, sort_keys=True, separators=(",", ":"))


def counted(db: Any, key_id: str | None, pop: str) -> bool:
    """Whether a key's budget of the day already counts a population (a plain read of the store:
    a counted population stays counted all day)."""
    return db.execute("SELECT 1 FROM key_populations WHERE key_id = ? AND day = ? AND digest = ?",
                      (key_id or "", _day(time.time()), pop)).fetchone() is not None


def _refusal(area: bool, problem: str) -> Refused:
    what, a_what = ("area", "an area") if area else ("population", "a population")
    if problem == "repeated":
        text = (f"the table's {what} is under the minimum and a combination of tables already published gives "
                f"it too: it would be seen twice, and differences averaged")
    else:
        text = (f"together with tables already published, the table's {what} would isolate {a_what} under the "
                f"minimum by differencing (seed 002 §5)")
    return Refused("differencing", text)


__all__ = ["Defence", "RecordDamaged", "Refused", "area_mask", "budget", "canonical", "counted", "population_key", "population_mask",
           "replay_limits"]
