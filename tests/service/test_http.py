"""The table builder over real HTTP (uvicorn on loopback): same query, same numbers (also after a
restart); keys; 4xx with reasons and suggested queries; one audit row per query."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tabsafe.service.store import split_key
from tests.service.conftest import TABSAFE, Server, add_key, write_config

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

Q1 = {"dimensions": [{"variable": "sex"}, {"variable": "age", "level": 1}, {"variable": "activity"}]}
Q2 = {"dimensions": [{"variable": "small_area", "level": 3}, {"variable": "sex"}], "area": ["R1A001"],
      "where": "age_year >= 18", "measure": "mean", "variable": "income"}


def _audit_rows(config: Path) -> list[tuple]:
    import yaml

    store = yaml.safe_load(config.read_text())["store"]
    with sqlite3.connect(store) as db:
        return db.execute("SELECT seq, key_id, status, outcome, query FROM audit ORDER BY seq").fetchall()


def test_same_query_same_numbers_also_after_restart_and_audit_survives(small_census, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    config = write_config(tmp_path / "service.yaml", state, {"min_population": 1, "min_area_population": 1,
                                                              "max_small_cell_share": None,
                                                              "min_mean_cell_size": None})
    key = add_key(small_census.directory, config, "alice")
    server = Server(small_census.directory, config).start()
    try:
        first = [server.table(q, key) for q in (Q1, Q2)]
        assert [s for s, _, _ in first] == [200, 200], first
        # asking again, and in another spelling of the same table, gives the very same numbers
        again = server.table(Q1, key)[1]
        respelled = server.table({"dimensions": [{"variable": "sex", "level": 1}, {"variable": "age", "level": 1},
                                                 {"variable": "activity", "level": 1}], "measure": "count"}, key)[1]
        assert again["rows"] == first[0][1]["rows"] == respelled["rows"]
        csv1 = server.table(Q1, key, fmt="csv")[1]
        n_before = len(_audit_rows(config))
    finally:
        server.stop()
    assert n_before == 5
    # computed again after the restart, not read from the answers the first run kept
    for f in (state / "prepared").glob("answers.sqlite*"):
        f.unlink()
    server = Server(small_census.directory, config).start()
    try:
        after = [server.table(q, key) for q in (Q1, Q2)]
        assert after[0][1]["rows"] == first[0][1]["rows"]
        assert after[1][1]["rows"] == first[1][1]["rows"]
        assert server.table(Q1, key, fmt="csv")[1] == csv1
    finally:
        server.stop()
    rows = _audit_rows(config)
    assert len(rows) == 8  # one row per query, before and after the restart
    assert [r[0] for r in rows] == sorted(r[0] for r in rows)
    assert all(r[2] == 200 and r[3] == "answered" for r in rows)
    # the CSV holds the same published numbers as the JSON
    lines = csv1.strip().splitlines()
    assert lines[0] == "sex,age,activity,count"
    assert [int(x.split(",")[-1]) for x in lines[1:]] == [r[-1] for r in first[0][1]["rows"]]
    # the mean is the perturbed sum over the perturbed count (seed 000 §5.7)
    cols = first[1][1]["columns"]
    for row in first[1][1]["rows"]:
        count, total, mean = (row[cols.index(c)] for c in ("count", "sum_income", "mean_income"))
        if total is not None:  # withheld (null) where the magnitude rules say so
            assert count >= 5 and mean == pytest.approx(total / count, abs=0.01)


def test_published_values_are_the_cell_key_method_of_the_cli(served, small_census):
    """The service's numbers are those of `tabsafe tabulate` + the cell key method: same cell
    keys, same p-table, so a table is the same wherever it is made."""
    from tabsafe.io import read_meta
    from tabsafe.model.hierarchy import Hierarchy
    from tabsafe.model.microdata import Microdata
    from tabsafe.registry import build_method
    from tabsafe.service.settings import DEFAULT_CHAIN
    from tabsafe.tabulation import tabulate

    server, key, _ = served
    status, body, _ = server.table({"dimensions": [{"variable": "age", "level": 2, "subtotals": True},
                                                   {"variable": "activity"}], "where": "sex = 2"}, key)
    assert status == 200
    method = build_method("ckm", DEFAULT_CHAIN[0]["params"])
    d = small_census.directory
    md = Microdata.from_file(d / "persons.parquet", codelists=read_meta(d / "meta.yaml", only=["age", "activity"]))
    table = tabulate(md, ["age", "activity"], key=method.needs().key, where="sex = 2",
                     hierarchies={"age": Hierarchy.from_file(d / "hierarchies" / "age.yaml")})
    release = method.protect(table).release
    published = {(r[0], r[1]): r[2] for r in body["rows"]}
    assert len(published) == table.n_cells
    for (age, act), value in published.items():
        assert value == int(release.value("count", age=age, activity=act)), (age, act)


def test_missing_unknown_and_revoked_keys(served, small_census):
    server, key, config = served
    q = {"dimensions": [{"variable": "sex"}]}
    assert server.table(q, key)[0] == 200
    status, body, _ = server.request("POST", "/api/v1/tables", q)
    assert status == 401 and body["error"]["type"] == "unauthorized"
    assert server.table(q, "tsk_000000000000_nope")[0] == 401
    assert server.table(q, key + "x")[0] == 401
    assert server.get("/api/v1/catalogue")[0] == 401
    other = add_key(small_census.directory, config, "bob")
    assert server.table(q, other)[0] == 200
    key_id, _ = split_key(other)  # the secret may itself hold "_": split as the store does
    subprocess.run([*TABSAFE, "keys-admin", "--data", str(small_census.directory), "--config", str(config),
                    "revoke", key_id], check=True, capture_output=True)
    status, body, _ = server.table(q, other)
    assert status == 403 and body["error"]["type"] == "forbidden"
    assert server.get("/api/v1/catalogue", other)[0] == 403
    assert server.table(q, key)[0] == 200  # the other key is untouched


def test_rate_limit_per_key(served, small_census):
    server, _, config = served
    key = add_key(small_census.directory, config, "carol", "--rate", "3")
    q = {"dimensions": [{"variable": "citizenship"}]}
    assert [server.table(q, key)[0] for _ in range(3)] == [200, 200, 200]
    status, body, headers = server.table(q, key)
    assert status == 429 and body["error"]["type"] == "rate-limited"
    assert int(headers["retry-after"]) >= 1


def test_malformed_and_too_large_queries_get_4xx_with_reason(served):
    server, key, _ = served
    cases = [
        (b"{not json", 422, "invalid"),
        (json.dumps({"dimensions": []}).encode(), 422, "invalid"),
        (json.dumps({"dimensions": [{"variable": "shoe_size"}]}).encode(), 422, "invalid"),
        (json.dumps({"dimensions": [{"variable": "sex", "level": 7}]}).encode(), 422, "invalid"),
        (json.dumps({"dimensions": [{"variable": "sex"}], "where": "sex >>> 2"}).encode(), 422, "invalid"),
        (json.dumps({"dimensions": [{"variable": "sex"}], "where": "nosuch = 1"}).encode(), 422, "invalid"),
        (json.dumps({"dimensions": [{"variable": "sex"}], "area": ["NOWHERE"]}).encode(), 422, "invalid"),
        (json.dumps({"dimensions": [{"variable": "sex"}], "measure": "sum"}).encode(), 422, "invalid"),
        (json.dumps({"dimensions": [{"variable": "sex"}], "unexpected": 1}).encode(), 422, "invalid"),
        (b"x" * 300_000, 413, "too-large"),
    ]
    for raw, status, kind in cases:
        got, body, _ = server.request("POST", "/api/v1/tables", key=key, raw=raw)
        assert (got, body["error"]["type"]) == (status, kind), (raw[:80], body)
        assert body["error"]["message"] and "\n" not in body["error"]["message"]
    # an unknown category: the message names it, and the suggestion is a table that is answered
    status, body, _ = server.table({"dimensions": [{"variable": "sex", "categories": ["9"]},
                                                   {"variable": "activity"}]}, key)
    assert status == 422 and "'9' is not a code of 'sex'" in body["error"]["message"]
    assert server.table(body["error"]["suggestion"], key)[0] == 200
    # too large to compute: 413, with a coarser table that passes
    status, body, _ = server.table({"dimensions": [{"variable": "small_area"}, {"variable": "age_year"},
                                                   {"variable": "occupation"}]}, key)
    assert status == 413 and body["error"]["type"] == "too-large"
    suggestion = body["error"]["suggestion"]
    assert server.table(suggestion, key)[0] == 200


def test_rule_breaking_query_gets_rule_amount_and_a_table_that_passes(small_census, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    config = write_config(tmp_path / "service.yaml", state,
                          {"max_cells": 600, "min_population": 50, "min_area_population": 300,
                           "min_mean_cell_size": 3, "max_small_cell_share": 0.5})
    key = add_key(small_census.directory, config, "dave")
    server = Server(small_census.directory, config).start()
    try:
        # one small area by single year of age: refused on several rules
        q = {"dimensions": [{"variable": "age_year"}, {"variable": "sex"}], "area": ["R1A003S02"]}
        status, body, _ = server.table(q, key)
        err = body["error"]
        assert status == 409 and err["type"] == "refused"
        rules = {v["rule"]: v for v in err["violations"]}
        assert set(rules) >= {"min_population", "min_area_population"}
        first = err["rule"]
        # the rule and its limit, never a figure of the refused population (issue #26)
        assert all("value" not in v and "by" not in v for v in err["violations"])
        assert "value" not in err and "by" not in err
        assert str(err["limit"]) in err["message"].replace(",", "")
        # the suggestion is ready to send and passes every rule
        suggestion = err["suggestion"]
        assert suggestion is not None and err["changes"]
        status, answer, _ = server.table(suggestion, key)
        assert status == 200, answer
        assert all(c["passed"] for c in answer["rules"])
        # a recode that splits the published bands is refused (nested categories, seed 002 §5)
        status, body, _ = server.table({"dimensions": [{"variable": "age_year", "groups": [
            {"label": "young", "codes": ["0", "1", "2"]}, {"label": "rest", "codes": ["B15-29"]}]}]}, key)
        assert status == 409 and body["error"]["rule"] == "nested_recodes"
        assert server.table(body["error"]["suggestion"], key)[0] == 200
        # a recode of whole bands passes
        status, body, _ = server.table({"dimensions": [{"variable": "age_year", "groups": [
            {"label": "children", "codes": ["00-04", "05-09", "10-14"]}, {"label": "working", "codes": ["B15-29",
                                                                                                         "B30-49"]}]}]},
            key)
        assert status == 200, body
        assert [r[0] for r in body["rows"]] == ["Total", "children", "working"]
    finally:
        server.stop()
    rows = _audit_rows(config)
    assert len(rows) == 5  # refused and answered queries alike
    assert [r[3] for r in rows].count("refused") == 2


def test_keys_admin_lists_exports_and_verifies(served, small_census, tmp_path):
    server, key, config = served
    base = [*TABSAFE, "keys-admin", "--data", str(small_census.directory), "--config", str(config)]
    made = subprocess.run([*base, "add", "erin", "--quota", "5"], check=True, capture_output=True, text=True).stdout
    new_key = made.strip().splitlines()[-1]
    assert server.table({"dimensions": [{"variable": "sex"}]}, new_key)[0] == 200
    listing = subprocess.run([*base, "list"], check=True, capture_output=True, text=True).stdout
    (new_id, _), (key_id, secret) = split_key(new_key), split_key(key)
    assert new_id in listing
    assert key_id in listing and secret not in listing  # never the secret
    out = tmp_path / "audit.jsonl"
    subprocess.run([*base, "audit", "--out", str(out)], check=True, capture_output=True)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows and all("hash" in r for r in rows)
    assert secret not in out.read_text()
    assert (out.stat().st_mode & 0o777) == 0o600
    done = subprocess.run([*base, "verify"], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and "intact" in done.stdout
    bad = subprocess.run([*base, "audit", "--out", str(tmp_path / "audit.txt")], capture_output=True, text=True,
                         check=False)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
