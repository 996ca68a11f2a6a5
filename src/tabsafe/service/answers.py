"""Answers kept on disk and shared by every server process: the same query is computed once.

An answer is a response already made from a release (published values only): its status, body
and content type, with what the audit log records of it (cells, rules applied, outcome). The key
is a hash of the query as sent, the format, and a fingerprint of everything that shapes answers
(the prepared records, the method chain, the rules, the limits), so a change of any of them
never serves an old answer. The file lives beside the prepared data and survives restarts;
answers are deterministic, so it only saves time.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    media_type: str
    headers: dict[str, str]
    outcome: str
    cells: int | None
    rules: list[dict[str, Any]] | None
    reason: str | None
    query: Any


class AnswerCache:
    """Answers on disk, at most ``kept`` of them: past that the oldest go."""

    def __init__(self, path: Path, fingerprint: str, kept: int = 50_000) -> None:
        self.path = path
        self.fingerprint = fingerprint
        self.kept = kept
        self._puts = 0
        self._local = threading.local()
        self._db().execute("CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, record TEXT NOT NULL, "
                           "body BLOB NOT NULL)")

    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=OFF")  # a lost answer is computed again
            db.execute("PRAGMA busy_timeout=30000")
            self._local.db = db
            from tabsafe.service.store import private_file

            private_file(self.path)
        return db

    def key(self, query: Any, fmt: str) -> str:
        text = json.dumps([self.fingerprint, fmt, query], sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def get(self, key: str) -> Answer | None:
        row = self._db().execute("SELECT record, body FROM answers WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        record = json.loads(row[0])
        return Answer(body=bytes(row[1]), **record)

    def put(self, key: str, answer: Answer) -> None:
        record = {k: v for k, v in answer.__dict__.items() if k != "body"}
        db = self._db()
        if self.kept <= 0:
            return
        db.execute("INSERT OR REPLACE INTO answers(key, record, body) VALUES (?, ?, ?)",
                   (key, json.dumps(record), answer.body))
        self._puts += 1
        if self._puts % 100 == 0:
            n = db.execute("SELECT count(*) FROM answers").fetchone()[0]
            if n > self.kept:
                db.execute("DELETE FROM answers WHERE rowid IN (SELECT rowid FROM answers ORDER BY rowid LIMIT ?)",
                           (n - self.kept,))


def fingerprint(settings: Any, data_fingerprint: str) -> str:
    """Everything that shapes an answer, hashed."""
    shaping = {"data": data_fingerprint, "chain": [s.model_dump() for s in settings.chain], "seed": settings.seed,
               "rules": settings.rules.model_dump(), "limits": settings.limits.model_dump(exclude={
                   "rate_per_minute", "quota_per_day", "cache_entries", "cube_cache_cells", "answers_kept"}),
               "numeric": {k: v.model_dump() for k, v in settings.numeric.items()},
               "recode_level": settings.recode_level, "magnitudes": settings.magnitudes.model_dump(), "levels": settings.levels, "labels": settings.labels,
               "format": 2}
    return hashlib.sha256(json.dumps(shaping, sort_keys=True, default=str).encode()).hexdigest()
