"""Load test of the table builder (issue #17): 50 concurrent clients send 2,000 queries of
3-variable tables over the 1.5M-person census, half of them distinct, to a real server
(`tabsafe serve`, uvicorn, on loopback). Reports p50/p95/p99 latency, throughput, errors and
the preparation time; then, as the baseline of the same run, one query asked 1,000 times (its
answer kept: the cost of HTTP, the key check, the rate count and the audit row). Target: p95
under 250 ms on a 2-core machine.

Run alone: ``python bench/run.py service`` (TABSAFE_BENCH_PERSONS, TABSAFE_BENCH_WORKERS,
TABSAFE_BENCH_CLIENTS and TABSAFE_BENCH_QUERIES change the size)."""

from __future__ import annotations

import http.client
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from common import OUT, census

CLIENTS = int(os.environ.get("TABSAFE_BENCH_CLIENTS", "50"))
QUERIES = int(os.environ.get("TABSAFE_BENCH_QUERIES", "2000"))
WORKERS = int(os.environ.get("TABSAFE_BENCH_WORKERS", "2"))
#: queries of the baseline phase (one query asked again and again)
BASELINE = int(os.environ.get("TABSAFE_BENCH_BASELINE", "1000"))
VARIABLES = ["sex", "age", "activity", "occupation", "education", "citizenship", "household_size"]


def queries(n_distinct: int, areas: list[str], seed: int = 17) -> list[dict[str, Any]]:
    """Distinct 3-variable tables: a mix of whole-population tables, tables of a user-defined
    area (one to three areas joined), sub-populations and means."""
    rng = np.random.default_rng(seed)
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    while len(out) < n_distinct:
        kind = rng.random()
        if kind < 0.35:
            names = list(rng.choice(VARIABLES, size=2, replace=False))
            dims = [{"variable": "small_area", "level": 1}] + [{"variable": v} for v in names]
        else:
            dims = [{"variable": v} for v in rng.choice(VARIABLES, size=3, replace=False)]
        for d in dims:
            if d["variable"] == "age" and rng.random() < 0.5:
                d["level"] = 1
        q: dict[str, Any] = {"dimensions": dims}
        if rng.random() < 0.4:
            q["area"] = sorted(set(rng.choice(areas, size=int(rng.integers(1, 4)), replace=False).tolist()))
        if rng.random() < 0.2:
            q["where"] = f"age_year >= {int(rng.integers(15, 70))}"
        if rng.random() < 0.1:
            q["measure"], q["variable"] = "mean", "income"
        text = json.dumps(q, sort_keys=True)
        if text not in seen:
            seen.add(text)
            out.append(q)
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run() -> dict[str, Any]:
    data = census()
    state = OUT / "service-state"
    shutil.rmtree(state, ignore_errors=True)
    state.mkdir(parents=True)
    config = state / "service.yaml"
    config.write_text(yaml.safe_dump({
        "prepared": str(state / "prepared"), "store": str(state / "service.sqlite"), "workers": WORKERS,
        "limits": {"rate_per_minute": 1_000_000, "quota_per_day": 1_000_000},
    }))
    cli = [sys.executable, "-m", "tabsafe.cli"]
    t0 = time.perf_counter()
    subprocess.run([*cli, "serve", "--data", str(data.directory), "--config", str(config), "--prepare"], check=True,
                   capture_output=True)
    prepare_s = time.perf_counter() - t0
    key = subprocess.run([*cli, "keys-admin", "--data", str(data.directory), "--config", str(config), "add", "bench"],
                         check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    meta = yaml.safe_load((data.directory / "meta.yaml").read_text())
    areas = meta["variables"]["area"]["codes"]
    distinct = queries(QUERIES // 2, areas)
    order = np.random.default_rng(5).permutation(np.repeat(np.arange(len(distinct)), 2))[:QUERIES]
    bodies = [distinct[i] for i in order.tolist()]
    # the same queries with the differencing defence off (its own store, no kept answers): what
    # the record of answered populations costs, measured in the same run
    off_config = state / "service-off.yaml"
    off_config.write_text(yaml.safe_dump({
        **yaml.safe_load(config.read_text()), "store": str(state / "service-off.sqlite"),
        "differencing": {"enabled": False}}))
    off_key = subprocess.run([*cli, "keys-admin", "--data", str(data.directory), "--config", str(off_config), "add",
                              "bench"], check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    off, _ = _serve(cli, data, off_config, off_key, [bodies], state)
    (main, floor), refusals = _serve(cli, data, config, key, [bodies, [distinct[0]] * BASELINE], state)
    return {
        "persons": data.n_persons,
        "workers": WORKERS,
        "clients": CLIENTS,
        "distinct": len(distinct),
        "prepare_s": round(prepare_s, 2),
        **main,
        "target_p95_ms": 250,
        "baseline_same_query": {k: floor[k] for k in ("queries", "throughput_qps", "latency_ms",
                                                       "server_cpu_ms_per_query", "errors")},
        "differencing_refusals": refusals,
        "defences_off_same_queries": {k: off[0][k] for k in ("queries", "throughput_qps", "latency_ms", "statuses",
                                                             "server_cpu_ms_per_query", "errors")},
        # the recorder's own work, in process: the populations this run recorded, decided again
        # one by one on a fresh record, compiled (``_record.c``) and with the numpy reference
        "recorder_in_process": _recorder_in_process(config, data.directory),
        "cpus": os.cpu_count(),
    }


def _recorder_in_process(config: Path, data_dir: Path) -> dict[str, Any]:
    """CPU seconds of deciding again, on an empty record, every population the run recorded:
    with the compiled split and basis, and with their numpy references (the baseline)."""
    import sqlite3
    import tempfile

    from tabsafe.service import population
    from tabsafe.service.defence import Defence
    from tabsafe.service.planned import open_data
    from tabsafe.service.settings import Settings
    from tabsafe.service.store import Store

    store = yaml.safe_load(config.read_text())["store"]
    with sqlite3.connect(store) as db:
        queries = [json.loads(t) for (t,) in db.execute("SELECT query FROM populations ORDER BY seq")]
    out: dict[str, Any] = {"populations": len(queries)}
    for name in ("compiled", "numpy"):
        with tempfile.TemporaryDirectory() as tmp:
            settings = Settings.load(data=data_dir, config=config, store=Path(tmp) / "s.sqlite")
            saved = population._compiled, population.Basis
            if name == "numpy":  # the references: what the recorder ran before _record.c
                population._compiled, population.Basis = None, population.BasisReference
            try:
                defence = Defence(settings, open_data(settings), Store(settings.store_path))
                defence.warm()
                t0 = time.process_time()
                refused = sum(defence.admit("bench", q) is not None for q in queries)
                out[f"{name}_cpu_s"] = round(time.process_time() - t0, 3)
                out[f"{name}_refused"] = refused
            finally:
                population._compiled, population.Basis = saved
    return out


def _serve(cli: list[str], data: Any, config: Path, key: str, phases: list[list[dict[str, Any]]],
           state: Path) -> tuple[list[dict[str, Any]], int]:
    """Start a server, run each phase of queries against it (kept answers cleared first), stop
    it; the phases' figures and how many answers the differencing record refused."""
    for f in (state / "prepared").glob("answers.sqlite*"):
        f.unlink()
    port = _free_port()
    server = subprocess.Popen([*cli, "serve", "--data", str(data.directory), "--config", str(config), "--port",
                               str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_up(port, timeout=600)
        # the baseline phase, same run, same server: one query asked again and again (an answer
        # kept from the first time): what HTTP, the key check, the rate count and the audit row cost
        out = [_load(port, key, bodies, server.pid) for bodies in phases]
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
    import sqlite3

    store = yaml.safe_load(config.read_text())["store"]
    with sqlite3.connect(store) as db:
        refusals = db.execute("SELECT count(*) FROM audit WHERE reason IN ('differencing', 'populations_per_key')"
                              ).fetchone()[0]
    return out, int(refusals)


def _load(port: int, key: str, bodies: list[dict[str, Any]], server_pid: int) -> dict[str, Any]:
    """``CLIENTS`` clients, each on its own kept-alive connection, send ``bodies`` between them
    as fast as they are answered; latency, throughput, statuses and CPU."""
    work: queue.Queue[str] = queue.Queue()
    for b in bodies:
        work.put(json.dumps(b))
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    errors: list[str] = []
    lock = threading.Lock()

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        headers = {"Content-Type": "application/json", "X-API-Key": key}
        while True:
            try:
                body = work.get_nowait()
            except queue.Empty:
                break
            start = time.perf_counter()
            try:
                conn.request("POST", "/api/v1/tables", body, headers)
                resp = conn.getresponse()
                resp.read()
                status = resp.status
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
                with lock:
                    errors.append(type(exc).__name__)
                continue
            elapsed = time.perf_counter() - start
            with lock:
                latencies.append(elapsed)
                statuses[status] = statuses.get(status, 0) + 1
        conn.close()

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    cpu0 = _cpu_seconds(server_pid)
    client0 = _own_cpu()
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    cpu = _cpu_seconds(server_pid) - cpu0
    client_cpu = _own_cpu() - client0
    load1 = os.getloadavg()[0]
    lat = np.array(latencies) * 1000
    failures = sum(v for k, v in statuses.items() if k >= 500) + len(errors)
    return {
        "queries": len(latencies) + len(errors),
        "wall_s": round(wall, 2),
        "throughput_qps": round(len(latencies) / wall, 1),
        "latency_ms": {"p50": round(float(np.percentile(lat, 50)), 1), "p95": round(float(np.percentile(lat, 95)), 1),
                       "p99": round(float(np.percentile(lat, 99)), 1), "max": round(float(lat.max()), 1)},
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "errors": failures,
        # the server's own CPU per query (its processes, every worker): what the machine must give
        # it, whatever else runs; and the load average around the run (another job's share)
        "server_cpu_ms_per_query": round(cpu / max(1, len(latencies)) * 1000, 2),
        # the load generator shares the machine: its CPU per query is taken from the server's
        "client_cpu_ms_per_query": round(client_cpu / max(1, len(latencies)) * 1000, 2),
        "load_average": [round(load0, 1), round(load1, 1)],
    }


def _own_cpu() -> float:
    """User + system CPU time of this process (the clients)."""
    import resource

    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def _cpu_seconds(root: int) -> float:
    """User + system CPU time of a process and its children (uvicorn's workers), from /proc."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(stat.parent.name), int(fields[1])
        if pid == root or ppid == root:
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def _wait_up(port: int, timeout: float = 120) -> None:
    end = time.time() + timeout
    while time.time() < end:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/api/v1/health")
            if conn.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("the server did not start")


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
