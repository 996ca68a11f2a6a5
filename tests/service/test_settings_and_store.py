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


def test_rate_and_quota_counts_agree_with_the_audit_log(tmp_path):
    """The per-key counters are kept beside the log; they count what the log holds (refusals
    of the key itself not), also for a store written before the counters existed."""
    store = Store(tmp_path / "s.sqlite")
    _, ann = store.add_key("ann")
    _, bob = store.add_key("bob")
    outcomes = ["answered", "refused", "rate-limited", "invalid", "quota", "answered", "forbidden", "answered"]
    for i, outcome in enumerate(outcomes):
        store.audit(key=ann, endpoint="/api/v1/tables", query={"i": i}, status=200, outcome=outcome)
    store.audit(key=bob, endpoint="/api/v1/tables", query={}, status=200, outcome="answered")
    store.audit(key=None, endpoint="/api/v1/tables", query={}, status=401, outcome="unauthorized")
    minute, day, wait = store.usage(ann.id)
    assert (minute, day) == (5, 5)
    assert 0 < wait <= 61
    assert store.usage(bob.id)[:2] == (1, 1)
    assert store.usage("000000000000") == (0, 0, 0.0)
    # a store from before the counters: they are counted from the log when it is opened
    with sqlite3.connect(tmp_path / "s.sqlite") as db:
        db.execute("DROP TABLE usage_second")
        db.execute("DROP TABLE usage_day")
    again = Store(tmp_path / "s.sqlite")
    assert again.usage(ann.id)[:2] == (5, 5)
    assert again.usage(bob.id)[:2] == (1, 1)
