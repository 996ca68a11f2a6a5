"""One process keeps the differencing record for every worker (tabsafe.service.recorder): workers
ask it about new populations, decide known ones themselves (the key's budget), and let out no
table it cannot check."""

from __future__ import annotations

import asyncio
import multiprocessing
import signal
import time
from pathlib import Path

import pytest

from tests.service.conftest import LENIENT, Server, add_key, write_config

RULES = {"min_population": 20, "min_area_population": 60}
#: a carrier pair: ``R2A193`` (33 persons) is refused as an area, and as a difference of areas
PAIR = ({"dimensions": [{"variable": "sex"}], "area": ["R2A193", "R1A001"], "measure": "count"},
        {"dimensions": [{"variable": "sex"}], "area": ["R1A001"], "measure": "count"})
FILLER = {"dimensions": [{"variable": "sex"}], "area": ["R1A002"], "measure": "count"}


def _recorder(small_census, tmp_path, **differencing):
    """A recorder process over a fresh store, and a function making workers' clients."""
    import json

    from tabsafe.service.planned import open_data
    from tabsafe.service.recorder import RemoteDefence, run_recorder
    from tabsafe.service.settings import Settings
    from tabsafe.service.store import Store

    settings = Settings.load(data=small_census.directory, prepared=tmp_path / "prepared", store=tmp_path / "s.sqlite",
                             rules=RULES, differencing=differencing)
    data = open_data(settings)  # prepared here, before the recorder opens them
    path = str(tmp_path / "recorder.sock")
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    proc = ctx.Process(target=run_recorder, args=(json.dumps(settings.model_dump(mode="json")), path, ready))
    proc.start()
    assert ready.wait(120), "the recorder did not start"

    def worker() -> RemoteDefence:
        return RemoteDefence(path, Store(settings.store_path), settings, data)

    return proc, worker


def test_workers_ask_the_recorder_and_decide_known_populations_themselves(small_census, tmp_path):
    from tabsafe.service.recorder import RecorderUnavailable

    proc, worker = _recorder(small_census, tmp_path, populations_per_key=2)
    first, second = worker(), worker()

    async def main() -> None:
        try:
            assert await first.admit_async("a", PAIR[0]) is None
            assert await first.admit_async("a", FILLER) is None
            refused = await second.admit_async("b", PAIR[1])  # the other worker: the record is one
            assert refused is not None and refused.rule == "differencing"
        finally:
            proc.terminate()
            proc.join(30)
        # the recorder is gone: a population it holds is still let out (the worker reads the
        # store's record and counts the key's budget itself) ...
        written = []
        assert await second.admit_async("c", PAIR[0], lambda db, r: written.append(r)) is None
        assert written == [None]  # the audit row joins the budget's transaction
        assert await second.admit_async("c", FILLER) is None
        assert await second.admit_async("c", PAIR[0]) is None  # counted already: no new population
        assert await first.admit_async("d", PAIR[0]) is None  # another worker, another key
        # the same population in other variables: the worker knows it without asking
        assert await first.admit_async("d", {**PAIR[0], "dimensions": [{"variable": "age", "level": 1}]}) is None
        # ... but not the same variables over a part of it (a category left out: fewer records)
        with pytest.raises(RecorderUnavailable):
            await first.admit_async("d", {**PAIR[0], "dimensions": [{"variable": "sex", "categories": ["1"]}]})
        # ... and a population it may not hold is not let out
        with pytest.raises(RecorderUnavailable):
            await second.admit_async("c", {"dimensions": [{"variable": "sex"}], "area": ["R1A003"],
                                           "measure": "count"})

    asyncio.run(main())


def test_the_budget_counted_by_a_worker_refuses_a_population_past_it(small_census, tmp_path):
    proc, worker = _recorder(small_census, tmp_path, populations_per_key=1)
    w = worker()

    async def main() -> None:
        try:
            assert await w.admit_async("a", PAIR[0]) is None
            assert await w.admit_async("a", FILLER) is not None  # the recorder counts "a"'s budget
            assert await w.admit_async("b", FILLER) is None
        finally:
            proc.terminate()
            proc.join(30)
        # both populations are known to the worker now: it counts "c"'s budget itself
        assert await w.admit_async("c", PAIR[0]) is None
        over = await w.admit_async("c", FILLER)
        assert over is not None and over.rule == "populations_per_key"

    asyncio.run(main())


def test_a_worker_asks_many_populations_at_once_and_each_gets_its_own_answer(small_census, tmp_path):
    """Messages go out without waiting for the replies before them: each reply must complete its
    own request (the recorder answers in order)."""
    import yaml

    from tabsafe.service.defence import canonical, population_mask
    from tabsafe.service.population import digest
    from tabsafe.service.query import Query, resolve

    proc, worker = _recorder(small_census, tmp_path, populations_per_key=100)
    w = worker()
    codes = yaml.safe_load((small_census.directory / "meta.yaml").read_text())["variables"]["area"]["codes"]
    queries = [{"dimensions": [{"variable": "sex"}], "area": [c], "measure": "count"} for c in codes[:40]]
    masks = [population_mask(w.data, resolve(Query.from_json(q), w.data, w.limits)) for q in queries]
    # disjoint areas each over the minimum: every one is let out, whatever the order
    queries = [q for q, m in zip(queries, masks) if m.sum() >= RULES["min_area_population"]][:12]
    assert len(queries) >= 6

    async def main() -> list:
        try:
            return await asyncio.gather(*(w.admit_async("a", q) for q in queries))
        finally:
            proc.terminate()
            proc.join(30)

    assert asyncio.run(main()) == [None] * len(queries)
    # each population's digest, as the worker learnt it from its reply, is that population's own
    digests = [digest(population_mask(w.data, resolve(Query.from_json(q), w.data, w.limits))) for q in queries]
    assert w._known == {**{w._key(q): d for q, d in zip(queries, digests)},
                        **{canonical(q): d for q, d in zip(queries, digests)}}


def _children(pid: int) -> dict[int, str]:
    out = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                out[int(stat.parent.name)] = (stat.parent / "comm").read_text().strip()
        except OSError:
            continue
    return out


def test_a_server_of_two_workers_keeps_one_record_and_stops_without_it(small_census, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    config = write_config(tmp_path / "service.yaml", state, {**LENIENT, **RULES}, workers=2)
    key = add_key(small_census.directory, config, "rita")
    server = Server(small_census.directory, config).start()
    try:
        assert server.proc is not None
        children = _children(server.proc.pid)
        recorders = [p for p, name in children.items() if name == "tabsafe-record"]
        assert len(recorders) == 1
        # the server's own processes (multiprocessing's resource tracker ends on its own time)
        ours = [p for p, name in children.items() if name in ("tabsafe-record", "tabsafe-worker")]
        assert len(ours) == 3
        # each request on its own connection: the kernel spreads them over the workers
        assert server.table(PAIR[0], key)[0] == 200
        statuses = [server.table(PAIR[1], key) for _ in range(6)]
        assert {s for s, _, _ in statuses} == {409}
        assert all(b["error"]["rule"] == "differencing" for _, b, _ in statuses)
        assert {server.table(PAIR[0], key)[0] for _ in range(6)} == {200}
        # without the recorder no new population is let out, and the server stops
        import os

        os.kill(recorders[0], signal.SIGKILL)
        fresh = {"dimensions": [{"variable": "sex"}], "area": ["R1A004"], "measure": "count"}
        seen = set()
        deadline = time.time() + 120  # an outer guard: the loop ends when the server has stopped
        while time.time() < deadline and server.proc.poll() is None:
            try:
                seen.add(server.table(fresh, key)[0])
            except OSError:
                seen.add("closed")
            time.sleep(0.05)
        assert server.proc.poll() not in (None, 0)
        assert seen <= {503, "closed"}
    finally:
        server.stop()
    assert not any(_alive(p) for p in ours)  # the supervisor stopped and waited for every one


def _alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # starlette's test client on httpx
def test_a_worker_whose_recorder_does_not_answer_lets_no_new_population_out(small_census, tmp_path):
    """503 with one line, and an audit row: not a table whose population nobody checked."""
    from starlette.testclient import TestClient

    from tabsafe.service.app import create_app
    from tabsafe.service.settings import Settings
    from tabsafe.service.store import Store

    settings = Settings.load(data=small_census.directory, prepared=tmp_path / "prepared", store=tmp_path / "s.sqlite",
                             rules={**LENIENT, **RULES})
    app = create_app(settings, recorder=str(tmp_path / "nobody.sock"))
    store = Store(settings.store_path)
    key = store.add_key("rita")[0]
    with TestClient(app) as client:
        r = client.post("/api/v1/tables", json=PAIR[0], headers={"X-API-Key": key})
    assert r.status_code == 503
    assert r.json()["error"]["type"] == "unavailable" and "rows" not in r.json()
    rows = list(store.audit_rows())
    assert [(row["status"], row["outcome"]) for row in rows] == [(503, "unavailable")]


def test_a_recorder_whose_record_fails_while_recording_stops(small_census, tmp_path, monkeypatch):
    """The recorder's side of RecordDamaged: the worker's table is refused (its client raises
    RecorderUnavailable: 503) and the recorder is told to stop (the supervisor then stops the
    server), instead of deciding the next populations on a half-changed record."""
    from tabsafe.service.defence import Defence
    from tabsafe.service.population import Record
    from tabsafe.service.prepared import open_prepared
    from tabsafe.service.recorder import RecorderUnavailable, RemoteDefence, _serve_connection
    from tabsafe.service.settings import Settings
    from tabsafe.service.store import Store

    settings = Settings.load(data=small_census.directory, prepared=tmp_path / "prepared", store=tmp_path / "s.sqlite",
                             rules=RULES)
    data = open_prepared(settings)
    defence = Defence(settings, data, Store(settings.store_path))
    path = str(tmp_path / "r.sock")
    stopped: list[bool] = []

    def fail(self, trial):
        raise MemoryError

    monkeypatch.setattr(Record, "commit", fail)

    async def main() -> None:
        server = await asyncio.start_unix_server(
            lambda r, w: _serve_connection(defence, r, w, lambda: stopped.append(True)), path=path)
        async with server:
            worker = RemoteDefence(path, Store(settings.store_path), settings, data)
            with pytest.raises(RecorderUnavailable):
                await worker.admit_async("a", FILLER)
            assert stopped == [True]
            with pytest.raises(RecorderUnavailable):  # and a later population is not decided either
                await worker.admit_async("a", PAIR[1])

    asyncio.run(main())
    assert defence.damaged


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # starlette's test client on httpx
def test_a_server_without_recorder_whose_record_fails_answers_503(small_census, tmp_path, monkeypatch):
    """A process keeping its own record (no recorder): the table whose population failed to be
    recorded, and the next new one, get 503 with one line, not a 500 or a table."""
    from starlette.testclient import TestClient

    from tabsafe.service.app import create_app
    from tabsafe.service.population import Record
    from tabsafe.service.settings import Settings
    from tabsafe.service.store import Store

    settings = Settings.load(data=small_census.directory, prepared=tmp_path / "prepared", store=tmp_path / "s.sqlite",
                             rules={**LENIENT, **RULES})
    app = create_app(settings)
    key = Store(settings.store_path).add_key("rita")[0]

    def fail(self, trial):
        raise MemoryError

    with TestClient(app) as client:
        monkeypatch.setattr(Record, "commit", fail)
        first = client.post("/api/v1/tables", json=FILLER, headers={"X-API-Key": key})
        monkeypatch.undo()
        second = client.post("/api/v1/tables", json=PAIR[1], headers={"X-API-Key": key})
    assert (first.status_code, second.status_code) == (503, 503)
    assert first.json()["error"]["type"] == "unavailable" and "rows" not in second.json()
