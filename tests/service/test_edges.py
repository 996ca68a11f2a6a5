"""The table builder's edges over real HTTP (issue #26): sums that name no one, refusals without
figures, parser limits as 4xx, the body limit on the bytes read, framing headers, 0600 files,
every status in the OpenAPI schema, the rate exact across workers, bounded caches."""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import threading
from pathlib import Path

import pandas as pd
import pytest

from tests.service.conftest import LENIENT, Server, add_key, write_config

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

RULES = {"max_dimensions": 3, "max_cells": 20_000, "min_population": 20, "min_area_population": 60,
         "min_mean_cell_size": None, "max_small_cell_share": None}


@pytest.fixture(scope="module")
def edged(small_census, tmp_path_factory):
    state = tmp_path_factory.mktemp("edges")
    config = write_config(state / "service.yaml", state, RULES, limits={"rate_per_minute": 100_000})
    key = add_key(small_census.directory, config, "edgar")
    server = Server(small_census.directory, config).start()
    try:
        yield server, key, state, config
    finally:
        server.stop()


def test_no_one_person_sum_is_the_persons_income(edged, small_census):
    server, key, _, _ = edged
    persons = pd.read_parquet(small_census.persons, columns=["small_area", "sex", "income"])
    persons = persons.astype({"small_area": str, "sex": str})
    status, body, _ = server.table({"dimensions": [{"variable": "small_area"}, {"variable": "sex"}],
                                    "measure": "sum", "variable": "income"}, key)
    assert status == 200, body
    cols = body["columns"]
    ic, isum, imean = (cols.index(c) for c in ("count", "sum_income", "mean_income"))
    groups = persons.groupby(["small_area", "sex"])["income"]
    sizes, incomes = groups.size(), groups.sum()
    singles = 0
    for row in body["rows"]:
        cell = (row[0], row[1])
        if row[ic] < 5 or (cell in sizes and sizes[cell] <= 2):
            # a cell of a few persons (published or true) shows no sum and no mean
            assert row[isum] is None and row[imean] is None, row
        if cell in sizes and sizes[cell] == 1:
            singles += 1
            assert row[isum] is None or round(row[isum], 2) != round(float(incomes[cell]), 2)
    assert singles >= 100
    assert any(row[isum] is not None for row in body["rows"])  # large cells keep their sums


def _numbers(text: str) -> set[str]:
    return set(re.findall(r"\d+", text))


def test_no_refusal_carries_a_figure_of_the_refused_population(edged, small_census):
    server, key, _, _ = edged
    persons = pd.read_parquet(small_census.persons, columns=["area", "citizenship", "age_year"])
    persons["area"] = persons["area"].astype(str)
    small = persons["area"].value_counts()
    refused = 0
    for area in [a for a in small.index if small[a] < 60][:6]:
        for where in (None, "citizenship = NS"):
            q = {"dimensions": [{"variable": "sex"}], "area": [area], **({"where": where} if where else {})}
            status, body, _ = server.table(q, key)
            assert status == 409, body
            err = body["error"]
            refused += 1
            # the rule, its limit, the way out — and no number that is not the query's or a limit's
            allowed = _numbers(json.dumps(q)) | _numbers(json.dumps(RULES)) | {"002", "5", "1", "4"}
            shown = _numbers(json.dumps({k: v for k, v in err.items() if k not in ("suggestion", "changes")}))
            assert shown <= allowed, (shown - allowed, err)
            assert all("value" not in v and "by" not in v for v in err["violations"])
            true = int((persons["area"] == area).sum())
            assert str(true) not in shown or str(true) in allowed
    assert refused == 12


def test_nested_brackets_are_a_4xx_and_the_server_goes_on(edged):
    server, key, _, _ = edged
    where = "(" * 320 + "sex = 1" + ")" * 320
    assert len(where) < 2_000
    status, body, _ = server.table({"dimensions": [{"variable": "sex"}], "where": where}, key)
    assert status == 422 and body["error"]["type"] == "invalid" and "nest" in body["error"]["message"]
    assert server.get("/api/v1/health")[0] == 200


def test_a_chunked_body_over_the_limit_is_refused_before_it_is_read(edged):
    """60 MB sent chunked (no Content-Length): 413 after at most a few MB; the rest is never read."""
    server, key, _, _ = edged
    chunk = b"x" * (1 << 20)
    sent = 0
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(b"POST /api/v1/tables HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"X-API-Key: " + key.encode() + b"\r\nTransfer-Encoding: chunked\r\n\r\n")
        try:
            while sent < 60 * (1 << 20):
                sock.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
                sent += len(chunk)
        except OSError:  # the server answered and closed: the rest could not be sent
            pass
        reply = b""
        try:
            while b"\r\n\r\n" not in reply:
                part = sock.recv(65536)
                if not part:
                    break
                reply += part
        except OSError:
            pass
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    assert sent < 30 * (1 << 20)
    assert server.get("/api/v1/health")[0] == 200


def test_framing_headers_on_every_response(edged):
    server, key, _, _ = edged
    for path in ("/", "/api/v1/health", "/api/v1/catalogue"):
        status, _, headers = server.get(path, key)
        assert status == 200
        h = {k.lower(): v for k, v in headers.items()}
        assert h["x-frame-options"] == "DENY"
        assert "frame-ancestors 'none'" in h["content-security-policy"]
        assert h["x-content-type-options"] == "nosniff"


def test_every_file_the_service_writes_is_its_owners_only(edged):
    server, key, state, _ = edged
    assert server.table({"dimensions": [{"variable": "sex"}]}, key)[0] == 200
    files = [p for p in Path(state).rglob("*") if p.is_file() and p.name != "service.yaml"]
    assert any(p.name == "service.sqlite" for p in files) and any(p.name == "answers.sqlite" for p in files)
    assert any(p.name.endswith(".audit-key") for p in files) and any(p.suffix == ".npy" for p in files)
    loose = [str(p) for p in files if stat.S_IMODE(os.stat(p).st_mode) & 0o077]
    assert not loose


def test_every_status_is_in_the_openapi_schema(edged, small_census):
    server, key, _, config = edged
    schema = server.get("/openapi.json")[1]
    seen: dict[tuple[str, str], set[int]] = {}

    def record(method: str, path: str, status: int) -> None:
        seen.setdefault((method, path), set()).add(status)

    tables = "/api/v1/tables"
    queries = [
        ({"dimensions": [{"variable": "sex"}]}, key),  # 200
        ({"dimensions": [{"variable": "sex"}]}, None),  # 401
        ({"dimensions": [{"variable": "sex"}], "area": ["R2A193"]}, key),  # 409
        ({"dimensions": [{"variable": "nope"}]}, key),  # 422
        ({"dimensions": [{"variable": "sex"}], "where": "(" * 100 + "sex = 1" + ")" * 100}, key),  # 422
        ({"dimensions": [{"variable": "small_area"}, {"variable": "age_year"}, {"variable": "occupation"}]},
         key),  # 413 (too many cells to compute)
    ]
    for q, k in queries:
        record("post", tables, server.table(q, k or "")[0])
    record("post", tables, server.request("POST", tables, raw=b"x" * 300_000, key=key)[0])  # 413
    slow = add_key(small_census.directory, config, "slow", "--rate", "1")
    for _ in range(2):
        record("post", tables, server.table({"dimensions": [{"variable": "sex"}]}, slow)[0])  # 429
    record("get", "/api/v1/catalogue", server.get("/api/v1/catalogue", key)[0])
    record("get", "/api/v1/catalogue", server.get("/api/v1/catalogue")[0])
    assert seen[("post", tables)] >= {200, 401, 409, 413, 422, 429}
    for (method, path), statuses in seen.items():
        declared = {int(s) for s in schema["paths"][path][method]["responses"]}
        assert statuses <= declared, (path, statuses - declared)


def test_the_rate_is_exact_across_two_workers(small_census, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    config = write_config(tmp_path / "service.yaml", state, LENIENT, workers=2)
    key = add_key(small_census.directory, config, "ratey", "--rate", "30")
    server = Server(small_census.directory, config).start()
    statuses: list[int] = []
    lock = threading.Lock()

    def ask(i: int) -> None:
        status = server.table({"dimensions": [{"variable": "sex"}], "where": f"age_year >= {i % 7}"}, key)[0]
        with lock:
            statuses.append(status)

    try:
        threads = [threading.Thread(target=ask, args=(i,)) for i in range(70)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        server.stop()
    assert sorted(set(statuses)) == [200, 429]
    assert statuses.count(200) == 30


@pytest.mark.parametrize(("method", "params"), [("barnardisation", {"p": 0.2})])
def test_a_method_drawn_per_table_is_not_served(small_census, tmp_path, method, params):
    """A method whose noise is drawn per table (not from the cell's records) would be averaged
    away by rephrased queries: the service refuses to start with it, in one line."""
    import subprocess

    from tests.service.conftest import TABSAFE

    config = write_config(tmp_path / "service.yaml", tmp_path, chain=[{"method": method, "params": params}])
    proc = subprocess.run([*TABSAFE, "serve", "--data", str(small_census.directory), "--config", str(config),
                           "--port", "0"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "consistent" in lines[0] and method in lines[0], proc.stderr
