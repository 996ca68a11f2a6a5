"""Users, API keys and the audit log, in one SQLite file that survives restarts.

* Keys are shown once, when made, as ``tsk_<id>_<secret>``; the store keeps the id and the
  SHA-256 of the secret (a 256-bit random secret needs no slow hash), compares in constant time,
  and never logs a key.
* Per-key limits: queries per minute (rate) and per UTC day (quota). :meth:`Store.reserve`
  checks both and counts the query in one ``BEGIN IMMEDIATE`` transaction (per key and second,
  and per key and day), so two server processes can never both take the last query of a minute,
  every restart sees the same counts, and checking costs two indexed reads however long the log
  grows.
* The audit log is append-only: SQLite triggers abort any UPDATE or DELETE, and every row carries
  an HMAC-SHA256, under a secret kept outside the log (a 0600 file beside it), of the row before
  it and of itself — its time and sequence number included — and a keyed head names the last row.
  An edit, an edit with every later hash recomputed (impossible without the secret), a changed
  time, or rows cut off the end all show in :meth:`Store.verify`. One row per query: who, when,
  the definition, the cells, the rules applied, the outcome (answered, refused with the rule,
  invalid, unauthorised…).
* Every file of the store is made readable by its owner only (0600): it holds keys' hashes and
  every user's queries.
* Server processes take turns at writing through a lock file beside the store (``flock``), not
  through SQLite's busy handler: that one sleeps 1, 2, 5, 10… ms between tries, so a process
  waiting on another's write transaction idled for several milliseconds after the lock was free
  (with the differencing record written in every new population's transaction, a third of two
  workers' time under load). A blocked ``flock`` wakes the moment the holder lets go.
"""

from __future__ import annotations

import csv
import datetime as _dt
import fcntl
import hashlib
import hmac
import io
import json
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tabsafe.errors import InputError

SCHEMA = """
CREATE TABLE IF NOT EXISTS users (
    name TEXT PRIMARY KEY,
    created TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS keys (
    id TEXT PRIMARY KEY,
    user TEXT NOT NULL REFERENCES users(name),
    hash TEXT NOT NULL,
    created TEXT NOT NULL,
    revoked TEXT,
    rate_per_minute INTEGER,
    quota_per_day INTEGER,
    note TEXT
);
CREATE TABLE IF NOT EXISTS audit (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    ts REAL NOT NULL,
    at TEXT NOT NULL,
    key_id TEXT,
    user TEXT,
    endpoint TEXT NOT NULL,
    query TEXT,
    status INTEGER NOT NULL,
    outcome TEXT NOT NULL,
    cells INTEGER,
    rules TEXT,
    reason TEXT,
    prev TEXT NOT NULL,
    hash TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_key_ts ON audit(key_id, ts);
CREATE TABLE IF NOT EXISTS audit_head (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    seq INTEGER NOT NULL,
    hash TEXT NOT NULL,
    mac TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS usage_second (
    key_id TEXT NOT NULL,
    second INTEGER NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (key_id, second)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS usage_day (
    key_id TEXT NOT NULL,
    day TEXT NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (key_id, day)
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS audit_no_update BEFORE UPDATE ON audit
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
"""

AUDIT_COLUMNS = ("seq", "at", "key_id", "user", "endpoint", "query", "status", "outcome", "cells", "rules",
                 "reason", "prev", "hash")
#: outcomes that do not count against a key's rate and quota
NOT_COUNTED = ("rate-limited", "quota", "unauthorized", "forbidden")
#: seconds before the current one that a key's rate counts
WINDOW = 60


@dataclass(frozen=True)
class Key:
    """An API key as the store knows it (never the secret)."""

    id: str
    user: str
    created: str
    revoked: str | None
    rate_per_minute: int | None
    quota_per_day: int | None
    note: str | None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _now() -> tuple[float, str]:
    t = time.time()
    return t, _dt.datetime.fromtimestamp(t, _dt.UTC).isoformat(timespec="milliseconds")


def _day(t: float) -> str:
    """The UTC day of a time, as the audit log's ``at`` column begins (``YYYY-MM-DD``)."""
    return _dt.datetime.fromtimestamp(t, _dt.UTC).strftime("%Y-%m-%d")


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def split_key(text: str) -> tuple[str, str] | None:
    """``tsk_<id>_<secret>`` → (id, secret), or None when it is not shaped like a key."""
    parts = text.strip().split("_", 2)
    if len(parts) != 3 or parts[0] != "tsk" or len(parts[1]) != 12 or not parts[2]:
        return None
    return parts[1], parts[2]


def private_file(path: Path) -> None:
    """Make ``path`` (and SQLite's -wal and -shm beside it) readable by its owner only."""
    import os

    for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            os.chmod(p, 0o600)
        except FileNotFoundError:
            pass


def _secret(path: Path) -> bytes:
    """The audit chain's secret: read, or made once (32 random bytes, a 0600 file)."""
    import os

    try:
        data = path.read_bytes()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process made it first
            return _secret(path)
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(32))
        data = path.read_bytes()
    if len(data) < 32:
        raise InputError("the audit key file is too short (32 bytes expected)", where=str(path))
    return data


class Store:
    """The SQLite store (module docstring); one connection per thread."""

    def __init__(self, path: str | Path, *, key_path: str | Path | None = None) -> None:
        self.path = Path(path)
        self.key_path = Path(key_path) if key_path is not None else self.path.with_name(self.path.name + ".audit-key")
        self._local = threading.local()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            os.close(os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600))  # key hashes, every query: private (#25)
            self._secret = _secret(self.key_path)
            db = self._db()
            private_file(self.path)
            fresh = db.execute("SELECT 1 FROM sqlite_master WHERE name = 'usage_day'").fetchone() is None
            db.executescript(SCHEMA)
            if fresh:  # a store from before the counters: count the day's queries from the log
                self._backfill()
        except sqlite3.Error as exc:
            raise InputError(f"cannot open the service store: {exc}", where=str(self.path)) from None

    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA busy_timeout=30000")
            self._local.db = db
            private_file(self.path)
        return db

    def _turn(self) -> int:
        """This thread's descriptor of the store's lock file (module docstring): one per thread,
        so that threads of a process take turns as processes do."""
        fd = getattr(self._local, "turn", None)
        if fd is None:
            fd = os.open(self.path.with_name(self.path.name + ".lock"), os.O_CREAT | os.O_RDWR, 0o600)
            self._local.turn = fd
        return fd

    class _Tx:
        def __init__(self, db: sqlite3.Connection, turn: int) -> None:
            self.db = db
            self.turn = turn

        def __enter__(self) -> sqlite3.Connection:
            fcntl.flock(self.turn, fcntl.LOCK_EX)
            try:
                self.db.execute("BEGIN IMMEDIATE")
            except BaseException:
                fcntl.flock(self.turn, fcntl.LOCK_UN)
                raise
            return self.db

        def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
            try:
                self.db.execute("COMMIT" if exc_type is None else "ROLLBACK")
            finally:
                fcntl.flock(self.turn, fcntl.LOCK_UN)

    def _tx(self) -> Store._Tx:
        return Store._Tx(self._db(), self._turn())

    # ------------------------------------------------------------------ users and keys
    def add_key(self, user: str, *, rate_per_minute: int | None = None, quota_per_day: int | None = None,
                note: str | None = None) -> tuple[str, Key]:
        """A new key for ``user`` (the user is created if new); returns the key text — shown
        once, never stored — and its record."""
        user = " ".join(str(user).split())
        if not user or len(user) > 100:
            raise InputError("a user name has 1 to 100 characters")
        for name, value in (("rate", rate_per_minute), ("quota", quota_per_day)):
            if value is not None and value < 1:
                raise InputError(f"the {name} must be at least 1; got {value}")
        key_id = secrets.token_hex(6)
        secret = secrets.token_urlsafe(32)
        _, at = _now()
        with self._tx() as db:
            db.execute("INSERT OR IGNORE INTO users(name, created) VALUES (?, ?)", (user, at))
            db.execute("INSERT INTO keys(id, user, hash, created, rate_per_minute, quota_per_day, note) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?)", (key_id, user, _digest(secret), at, rate_per_minute,
                                                        quota_per_day, note))
        return f"tsk_{key_id}_{secret}", self.key(key_id)  # type: ignore[return-value]

    def key(self, key_id: str) -> Key | None:
        row = self._db().execute("SELECT id, user, created, revoked, rate_per_minute, quota_per_day, note "
                                 "FROM keys WHERE id = ?", (key_id,)).fetchone()
        return Key(*row) if row else None

    def keys(self) -> list[Key]:
        rows = self._db().execute("SELECT id, user, created, revoked, rate_per_minute, quota_per_day, note "
                                  "FROM keys ORDER BY created, id").fetchall()
        return [Key(*r) for r in rows]

    def revoke(self, key_id: str) -> Key:
        _, at = _now()
        with self._tx() as db:
            cur = db.execute("UPDATE keys SET revoked = ? WHERE id = ? AND revoked IS NULL", (at, key_id))
            if cur.rowcount == 0 and self.key(key_id) is None:
                raise InputError(f"no key with id {key_id!r}")
        return self.key(key_id)  # type: ignore[return-value]

    def check(self, text: str) -> tuple[str, Key | None]:
        """``("ok", key)``, ``("revoked", key)`` or ``("unknown", None)`` for a presented key."""
        parts = split_key(text)
        if parts is None:
            return "unknown", None
        key_id, secret = parts
        row = self._db().execute("SELECT hash, id, user, created, revoked, rate_per_minute, quota_per_day, note "
                                 "FROM keys WHERE id = ?", (key_id,)).fetchone()
        # compare even when there is no such key, so timing tells nothing
        stored = row[0] if row else _digest("no such key")
        if not hmac.compare_digest(stored, _digest(secret)) or row is None:
            return "unknown", None
        key = Key(*row[1:])
        return ("revoked" if key.revoked else "ok"), key

    def _backfill(self) -> None:
        """Counters of a store made before they existed, from the log's rows of the last minute
        and of today (INSERT OR IGNORE: a process that counted first keeps its counts)."""
        t = time.time()
        marks = ",".join("?" * len(NOT_COUNTED))
        with self._tx() as db:
            db.execute(f"INSERT OR IGNORE INTO usage_second(key_id, second, n) SELECT key_id, CAST(ts AS INTEGER), "
                       f"count(*) FROM audit WHERE key_id IS NOT NULL AND ts >= ? AND outcome NOT IN ({marks}) "
                       "GROUP BY 1, 2", (t - WINDOW - 1, *NOT_COUNTED))
            db.execute(f"INSERT OR IGNORE INTO usage_day(key_id, day, n) SELECT key_id, substr(at, 1, 10), count(*) "
                       f"FROM audit WHERE key_id IS NOT NULL AND at >= ? AND outcome NOT IN ({marks}) GROUP BY 1, 2",
                       (_day(t), *NOT_COUNTED))

    def usage(self, key_id: str) -> tuple[int, int, float]:
        """Queries of a key in the last minute and this UTC day, and when the oldest query of the
        last minute leaves the window (seconds). The minute is counted in whole seconds: it holds
        the queries of the current second and the 60 before it (a second more than a minute,
        never less)."""
        t = time.time()
        now = int(t)
        db = self._db()
        minute, oldest = db.execute("SELECT coalesce(sum(n), 0), min(second) FROM usage_second "
                                    "WHERE key_id = ? AND second >= ?", (key_id, now - WINDOW)).fetchone()
        day = db.execute("SELECT n FROM usage_day WHERE key_id = ? AND day = ?", (key_id, _day(t))).fetchone()
        wait = oldest + WINDOW + 1 - t if oldest is not None else 0.0
        return int(minute), int(day[0]) if day else 0, max(0.0, wait)

    def reserve(self, key_id: str, rate: int, quota: int) -> tuple[str, float]:
        """Take one query of a key's rate and quota, or say which is used up: ``("ok", 0)``,
        ``("quota", 0)`` or ``("rate-limited", seconds to wait)``. Checked and counted in one
        write transaction, so processes taking turns see each other's counts."""
        with self._tx() as db:
            t = time.time()
            now = int(t)
            minute, oldest = db.execute("SELECT coalesce(sum(n), 0), min(second) FROM usage_second "
                                        "WHERE key_id = ? AND second >= ?", (key_id, now - WINDOW)).fetchone()
            day = db.execute("SELECT n FROM usage_day WHERE key_id = ? AND day = ?", (key_id, _day(t))).fetchone()
            if (day[0] if day else 0) >= quota:
                return "quota", 0.0
            if minute >= rate:
                return "rate-limited", max(0.0, oldest + WINDOW + 1 - t)
            db.execute("INSERT INTO usage_second(key_id, second, n) VALUES (?, ?, 1) "
                       "ON CONFLICT(key_id, second) DO UPDATE SET n = n + 1", (key_id, now))
            db.execute("DELETE FROM usage_second WHERE key_id = ? AND second < ?", (key_id, now - WINDOW))
            db.execute("INSERT INTO usage_day(key_id, day, n) VALUES (?, ?, 1) "
                       "ON CONFLICT(key_id, day) DO UPDATE SET n = n + 1", (key_id, _day(t)))
        return "ok", 0.0

    # ------------------------------------------------------------------ audit
    def _mac(self, text: str) -> str:
        return hmac.new(self._secret, text.encode(), hashlib.sha256).hexdigest()

    def _row_mac(self, prev: str, seq: int, ts: float, values: list[Any]) -> str:
        return self._mac(prev + json.dumps([seq, repr(float(ts)), *values]))

    def audit(self, *, key: Key | None, endpoint: str, query: Any, status: int, outcome: str,
              cells: int | None = None, rules: Sequence[dict[str, Any]] | None = None,
              reason: str | None = None, db: sqlite3.Connection | None = None) -> int:
        """Append one row (keyed chain and head, module docstring); returns its sequence number.
        A query's rate and quota were counted when it was let in (:meth:`reserve`). ``db``: a
        connection of this store inside a write transaction the row joins (one commit per query,
        :meth:`tabsafe.service.defence.Defence.admit`); else the row is its own transaction."""
        if db is None:
            with self._tx() as tx:
                return self._append(tx, key, endpoint, query, status, outcome, cells, rules, reason)
        return self._append(db, key, endpoint, query, status, outcome, cells, rules, reason)

    def _append(self, db: sqlite3.Connection, key: Key | None, endpoint: str, query: Any, status: int, outcome: str,
                cells: int | None, rules: Sequence[dict[str, Any]] | None, reason: str | None) -> int:
        ts, at = _now()
        q = query if isinstance(query, str) or query is None else json.dumps(query, sort_keys=True)
        if q is not None and len(q) > 20_000:
            q = q[:20_000] + "…"
        r = json.dumps(list(rules)) if rules is not None else None
        values = [at, key.id if key else None, key.user if key else None, endpoint, q, status, outcome, cells, r,
                  reason]
        last = db.execute("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1").fetchone()
        prev = last[1] if last else "0" * 64
        seq = (int(last[0]) if last else 0) + 1
        digest = self._row_mac(prev, seq, ts, values)
        db.execute(
            "INSERT INTO audit(seq, ts, at, key_id, user, endpoint, query, status, outcome, cells, rules, reason, "
            "prev, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", (seq, ts, *values, prev, digest))
        db.execute("INSERT INTO audit_head(id, seq, hash, mac) VALUES (1, ?, ?, ?) ON CONFLICT(id) DO UPDATE "
                   "SET seq = excluded.seq, hash = excluded.hash, mac = excluded.mac",
                   (seq, digest, self._mac(f"head:{seq}:{digest}")))
        return seq

    def audit_rows(self) -> Iterator[dict[str, Any]]:
        cur = self._db().execute(f"SELECT {', '.join(AUDIT_COLUMNS)} FROM audit ORDER BY seq")
        for row in cur:
            yield dict(zip(AUDIT_COLUMNS, row))

    def audit_count(self) -> int:
        return int(self._db().execute("SELECT count(*) FROM audit").fetchone()[0])

    def verify(self) -> int | None:
        """The first row where the keyed chain breaks — a row edited, rehashed, re-timed or
        missing; for rows cut off the end, the first missing sequence number — or None when the
        log is intact."""
        prev = "0" * 64
        expected = 1
        db = self._db()
        for row in db.execute("SELECT seq, ts, at, key_id, user, endpoint, query, status, outcome, cells, rules, "
                              "reason, prev, hash FROM audit ORDER BY seq"):
            seq, ts, values, row_prev, row_hash = int(row[0]), row[1], list(row[2:12]), row[12], row[13]
            if seq != expected or row_prev != prev or not hmac.compare_digest(
                    row_hash, self._row_mac(prev, seq, ts, values)):
                return min(seq, expected)
            prev, expected = row_hash, seq + 1
        head = db.execute("SELECT seq, hash, mac FROM audit_head WHERE id = 1").fetchone()
        if head is None:
            return None if expected == 1 else expected
        seq, digest, mac = int(head[0]), head[1], head[2]
        if not hmac.compare_digest(mac, self._mac(f"head:{seq}:{digest}")):
            return seq
        if seq != expected - 1 or digest != prev:
            return min(seq, expected - 1) + 1 if seq >= expected else seq
        return None

    def export(self, fmt: str = "jsonl") -> str:
        """The whole audit log as JSON lines or CSV."""
        rows = list(self.audit_rows())
        if fmt == "jsonl":
            return "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)
        if fmt == "csv":
            buf = io.StringIO()
            w = csv.DictWriter(buf, fieldnames=AUDIT_COLUMNS, lineterminator="\n")
            w.writeheader()
            w.writerows(rows)
            return buf.getvalue()
        raise InputError(f"audit export format must be jsonl or csv; got {fmt!r}")
