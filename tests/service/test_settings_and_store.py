"""Settings refuse unsafe defaults; the store keeps keys hashed and the audit log append-only."""

from __future__ import annotations

import sqlite3

import pytest

from tabsafe.errors import InputError
from tabsafe.service.settings import Settings
from tabsafe.service.store import Store


def test_safe_defaults(tmp_path):
    s = Settings.load(data=tmp_path)
    assert s.host == "127.0.0.1" and s.auth and not s.debug and s.environment == "production"
    assert s.chain[0].method == "ckm"


@pytest.mark.parametrize("values, words", [
    ({"host": "0.0.0.0", "auth": False}, "auth may only be switched off on a loopback address"),
    ({"host": "192.168.1.4", "auth": False}, "loopback"),
    ({"debug": True}, "debug mode is refused in production"),
    ({"chain": []}, "may not be empty"),
    ({"rules": {"max_small_cell_share": 2}}, "rules.max_small_cell_share"),
    ({"nonsense": 1}, "nonsense"),
])
def test_unsafe_settings_are_refused_in_one_line(tmp_path, values, words):
    with pytest.raises(InputError) as err:
        Settings.load(data=tmp_path, **values)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_open_binding_with_keys_and_debug_in_development_are_allowed(tmp_path):
    assert Settings.load(data=tmp_path, host="0.0.0.0").auth
    assert Settings.load(data=tmp_path, debug=True, environment="development").debug
    assert not Settings.load(data=tmp_path, auth=False, host="::1").auth


def test_config_file_errors_are_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules: [unclosed\n")
    with pytest.raises(InputError, match="not valid YAML"):
        Settings.load(data=tmp_path, config=bad)
    with pytest.raises(InputError, match="cannot read"):
        Settings.load(data=tmp_path, config=tmp_path / "missing.yaml")


def test_keys_are_hashed_and_the_audit_log_is_append_only(tmp_path):
    store = Store(tmp_path / "s.sqlite")
    text, key = store.add_key("ann")
    secret = text.split("_", 2)[2]
    raw = (tmp_path / "s.sqlite").read_bytes()
    assert secret.encode() not in raw
    assert store.check(text) == ("ok", key)
    assert store.check(text[:-1] + ("A" if text[-1] != "A" else "B"))[0] == "unknown"
    for i in range(3):
        store.audit(key=key, endpoint="/api/v1/tables", query={"i": i}, status=200, outcome="answered")
    assert store.verify() is None
    with sqlite3.connect(tmp_path / "s.sqlite") as db:
        for sql in ("DELETE FROM audit", "UPDATE audit SET status = 500"):
            with pytest.raises(sqlite3.DatabaseError, match="append-only"):
                db.execute(sql)
        # an edit that goes round the triggers (dropping them) breaks the hash chain
        db.execute("DROP TRIGGER audit_no_update")
        db.execute("UPDATE audit SET query = '{\"i\": 9}' WHERE seq = 2")
    assert Store(tmp_path / "s.sqlite").verify() == 2
    store.revoke(key.id)
    assert store.check(text)[0] == "revoked"
    with pytest.raises(InputError, match="no key"):
        store.revoke("000000000000")


def test_rate_and_quota_are_checked_and_counted_at_once(tmp_path):
    """reserve() takes one query of a key's rate and quota or says which is used up; the counts
    live beside the log and survive reopening (a store from before them is counted from the log)."""
    store = Store(tmp_path / "s.sqlite")
    _, ann = store.add_key("ann")
    _, bob = store.add_key("bob")
    assert [store.reserve(ann.id, 3, 100)[0] for _ in range(5)] == ["ok"] * 3 + ["rate-limited"] * 2
    state, wait = store.reserve(ann.id, 3, 100)
    assert state == "rate-limited" and 0 < wait <= 61
    assert [store.reserve(bob.id, 100, 2)[0] for _ in range(3)] == ["ok", "ok", "quota"]
    assert store.usage(ann.id)[:2] == (3, 3)
    assert Store(tmp_path / "s.sqlite").usage(bob.id)[:2] == (2, 2)
    # a store from before the counters: they are counted from the log when it is opened
    for i, outcome in enumerate(["answered", "refused", "rate-limited", "answered", "forbidden"]):
        store.audit(key=ann, endpoint="/api/v1/tables", query={"i": i}, status=200, outcome=outcome)
    with sqlite3.connect(tmp_path / "s.sqlite") as db:
        db.execute("DROP TABLE usage_second")
        db.execute("DROP TABLE usage_day")
    assert Store(tmp_path / "s.sqlite").usage(ann.id)[:2] == (3, 3)


def _rows(store, n=5):
    _, key = store.add_key("ann")
    for i in range(n):
        store.audit(key=key, endpoint="/api/v1/tables", query={"i": i}, status=200, outcome="answered")


def _rehash_from(path, secret, seq, change):
    """Edit row ``seq`` round the triggers and recompute every later hash with ``secret``."""
    import hashlib
    import hmac
    import json

    with sqlite3.connect(path) as db:
        db.execute("DROP TRIGGER audit_no_update")
        db.execute(change)
        prev = db.execute("SELECT hash FROM audit WHERE seq = ?", (seq - 1,)).fetchone()
        prev = prev[0] if prev else "0" * 64
        rows = db.execute("SELECT seq, ts, at, key_id, user, endpoint, query, status, outcome, cells, rules, reason "
                          "FROM audit WHERE seq >= ? ORDER BY seq", (seq,)).fetchall()
        for row in rows:
            text = prev + json.dumps([row[0], repr(float(row[1])), *row[2:]])
            digest = (hmac.new(secret, text.encode(), hashlib.sha256) if secret else hashlib.sha256(text.encode()))
            db.execute("UPDATE audit SET prev = ?, hash = ? WHERE seq = ?", (prev, digest.hexdigest(), row[0]))
            prev = digest.hexdigest()


@pytest.mark.parametrize("change", ["UPDATE audit SET query = '{\"i\": 9}' WHERE seq = 2",
                                    "UPDATE audit SET ts = ts - 3600 WHERE seq = 2",
                                    "UPDATE audit SET at = '2000-01-01T00:00:00.000+00:00' WHERE seq = 2"])
def test_keyed_chain_detects_an_edit_with_recomputed_hashes(tmp_path, change):
    """Without the secret (kept outside the log) a forger's recomputed chain does not verify,
    whether the edit is to a query, a time (ts) or a date (at)."""
    store = Store(tmp_path / "s.sqlite")
    _rows(store)
    assert store.verify() is None
    _rehash_from(tmp_path / "s.sqlite", None, 2, change)
    assert Store(tmp_path / "s.sqlite").verify() == 2
    # with a wrong secret too
    _rehash_from(tmp_path / "s.sqlite", b"x" * 32, 2, "SELECT 1")
    assert Store(tmp_path / "s.sqlite").verify() == 2


def test_keyed_chain_detects_truncation_and_keeps_its_secret_private(tmp_path):
    import os
    import stat

    store = Store(tmp_path / "s.sqlite")
    _rows(store)
    key_file = tmp_path / "s.sqlite.audit-key"
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(tmp_path / "s.sqlite").st_mode) == 0o600
    assert key_file.read_bytes() not in (tmp_path / "s.sqlite").read_bytes()
    with sqlite3.connect(tmp_path / "s.sqlite") as db:
        db.execute("DROP TRIGGER audit_no_delete")
        db.execute("DELETE FROM audit WHERE seq >= 4")
    assert Store(tmp_path / "s.sqlite").verify() == 4
    # a row cut from the middle breaks the chain where it was
    store2 = Store(tmp_path / "t.sqlite")
    _rows(store2)
    with sqlite3.connect(tmp_path / "t.sqlite") as db:
        db.execute("DROP TRIGGER audit_no_delete")
        db.execute("DELETE FROM audit WHERE seq = 3")
    assert Store(tmp_path / "t.sqlite").verify() == 3


def test_write_transactions_take_turns_through_the_lock_file(tmp_path):
    """Every write transaction holds the store's lock file (``flock``): while another process
    holds it, none begins; it begins once the lock is let go. The lock file is private (0600)."""
    import fcntl
    import os
    import threading

    store = Store(tmp_path / "s.sqlite")
    lock = tmp_path / "s.sqlite.lock"
    old = os.umask(0o022)  # the file's own mode makes it private, not the umask
    try:
        store.add_key("a")  # a write transaction: the store makes its lock file
    finally:
        os.umask(old)
    assert oct(lock.stat().st_mode & 0o777) == "0o600"
    fd = os.open(lock, os.O_RDWR)
    began = threading.Event()

    def write() -> None:
        with store._tx() as db:
            began.set()
            db.execute("INSERT OR IGNORE INTO users(name, created) VALUES ('u', 't')")

    fcntl.flock(fd, fcntl.LOCK_EX)  # another process's transaction
    try:
        worker = threading.Thread(target=write)
        worker.start()
        # whatever the machine's speed, the transaction cannot begin while the lock is held
        assert not began.wait(0.3)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    worker.join(30)
    assert began.is_set()
