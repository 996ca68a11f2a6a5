"""The carrier attack of issue #26 against real servers (`tabsafe serve`, loopback), in one run:
the differencing defence on, and off (the same rules and noise: what the service did before).

A population the release rules refuse is rebuilt as the average of the differences
``T(X + B_i) - T(B_i)`` over carriers ``B_i``: areas, filters, groups of a recode. Reported per
attack: the target's cells (sex x activity, margins included, true count >= 1), the pairs both
answered, the share of cells the rounded average recovers exactly — beside what one difference
with independent noise gives (the cell key method's stated single-difference risk,
:func:`tabsafe.evaluate.differencing_risk`), which is the most any intruder should get.

Run alone: ``python bench/run.py attack`` (TABSAFE_ATTACK_PERSONS changes the census size)."""

from __future__ import annotations

import http.client
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import defaultdict
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml
from common import OUT

from tabsafe.evaluate import differencing_risk
from tabsafe.registry import build_method
from tabsafe.service.settings import DEFAULT_CHAIN
from tabsafe.synth import synth_census

PERSONS = int(os.environ.get("TABSAFE_ATTACK_PERSONS", "20000"))
RULES = {"max_dimensions": 3, "max_cells": 20_000, "min_population": 20, "min_area_population": 60,
         "min_mean_cell_size": None, "max_small_cell_share": None}
DIMS = [{"variable": "sex"}, {"variable": "activity"}]
CLI = [sys.executable, "-m", "tabsafe.cli"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Server:
    def __init__(self, data: Path, state: Path, defence: bool) -> None:
        state.mkdir(parents=True, exist_ok=True)
        self.config = state / "service.yaml"
        self.config.write_text(yaml.safe_dump({
            "prepared": str(state / "prepared"), "store": str(state / "service.sqlite"), "rules": RULES,
            "limits": {"rate_per_minute": 1_000_000}, "differencing": {"enabled": defence,
                                                                        "populations_per_key": 1_000_000}}))
        self.key = subprocess.run([*CLI, "keys-admin", "--data", str(data), "--config", str(self.config), "add", "eve"],
                                  check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
        self.port = _free_port()
        self.proc = subprocess.Popen([*CLI, "serve", "--data", str(data), "--config", str(self.config), "--port",
                                      str(self.port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        end = time.time() + 600
        while time.time() < end:
            try:
                if self.ask("GET", "/api/v1/health")[0] == 200:
                    return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("server did not start")

    def ask(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        conn.request(method, path, json.dumps(body) if body is not None else None,
                     {"Content-Type": "application/json", "X-API-Key": self.key})
        resp = conn.getresponse()
        out = resp.status, json.loads(resp.read() or b"null")
        conn.close()
        return out

    def cpu(self) -> float:
        tick = os.sysconf("SC_CLK_TCK")
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _truth(rows: pd.DataFrame) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = defaultdict(int)
    for sex, activity in zip(rows["sex"], rows["activity"]):
        for s in (sex, "Total"):
            for a in (activity, "Total"):
                out[(s, a)] += 1
    return dict(out)


def _attacks(persons: pd.DataFrame) -> dict[str, tuple[list[tuple[dict, dict]], dict, int]]:
    """Per attack: the pairs of queries, the target's true cells, the column of the cell codes."""
    sizes = persons["area"].value_counts()
    x = next(a for a in sizes.index if 25 <= sizes[a] < 50)
    carriers = [a for a in sizes.index if sizes[a] >= 80][:60]
    areas = [({"dimensions": DIMS, "area": sorted([x, b])}, {"dimensions": DIMS, "area": [b]}) for b in carriers]
    target = "citizenship = NS and age_year >= 40"
    rows = persons[(persons["citizenship"] == "NS") & (persons["age_year"] >= 40)]
    clean = [a for a in sizes.index if sizes[a] >= 80 and not rows["area"].eq(a).any()][:80]
    filters = [({"dimensions": DIMS, "where": f"({target}) or small_area = {b}"},
                {"dimensions": DIMS, "where": f"small_area = {b} and not ({target})"}) for b in clean]
    region = persons[persons["area"].str.startswith("R1A0")]
    subsets = [list(c) for k in range(1, 5) for c in combinations(["NAT", "EU", "EUR", "ROW"], k)]
    wheres = [None] + [f"age_year < {a} or citizenship = NS" for a in range(20, 90, 8)]
    groups = []
    for s in subsets:
        for w in wheres:
            base = {"area": sorted(region["area"].unique()), **({"where": w} if w else {})}
            groups.append(tuple({**base, "dimensions": [{"variable": "citizenship", "groups": [
                {"label": "g", "codes": codes}]}, *DIMS]} for codes in (["NS", *s], s)))
    return {"areas": (areas, _truth(persons[persons["area"] == x]), 0),
            "filters": (filters, _truth(rows), 0),
            "groups": (groups, _truth(region[region["citizenship"] == "NS"]), 1)}


def _run_attack(server: _Server, pairs: list, truth: dict, at: int) -> dict[str, Any]:
    diffs: dict[tuple[str, str], list[int]] = defaultdict(list)
    answered = refused = 0
    for with_x, without_x in pairs:
        (s1, b1), (s2, b2) = server.ask("POST", "/api/v1/tables", with_x), server.ask("POST", "/api/v1/tables",
                                                                                      without_x)
        refused += (s1 == 409) + (s2 == 409)
        if s1 == s2 == 200:
            answered += 1
            c1 = {tuple(r[at:at + 2]): r[-1] for r in b1["rows"] if at == 0 or r[0] == "g"}
            c2 = {tuple(r[at:at + 2]): r[-1] for r in b2["rows"] if at == 0 or r[0] == "g"}
            for cell in set(c1) | set(c2):
                diffs[cell].append(c1.get(cell, 0) - c2.get(cell, 0))
    ptable = build_method("ckm", DEFAULT_CHAIN[0]["params"]).ptable_table
    cells = {c: n for c, n in truth.items() if n > 0}
    hits = sum(1 for c, n in cells.items() if diffs.get(c) and round(float(np.mean(diffs[c]))) == n)
    return {"carriers": len(pairs), "pairs_answered": answered, "queries_refused": refused, "target_cells": len(cells),
            "recovered_exactly": hits, "recovery_rate": round(hits / len(cells), 3),
            "one_difference_independent_noise": round(float(np.mean([differencing_risk(ptable, n)
                                                                       for n in cells.values()])), 3)}


def run() -> dict[str, Any]:
    directory = OUT / f"census-attack-{PERSONS}"
    if not (directory / "persons.parquet").is_file():
        OUT.mkdir(exist_ok=True)
        synth_census(PERSONS, 7, directory)
    persons = pd.read_parquet(directory / "persons.parquet").astype(
        {c: str for c in ("sex", "area", "small_area", "citizenship", "activity")})
    attacks = _attacks(persons)
    out: dict[str, Any] = {"persons": PERSONS, "rules": RULES}
    for defence in (True, False):
        state = OUT / f"attack-state-{'on' if defence else 'off'}"
        shutil.rmtree(state, ignore_errors=True)
        server = _Server(directory, state, defence)
        cpu0, own0, t0 = server.cpu(), resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        try:
            results = {name: _run_attack(server, *spec) for name, spec in attacks.items()}
            own1 = resource.getrusage(resource.RUSAGE_SELF)
            results["wall_s"] = round(time.perf_counter() - t0, 1)
            results["server_cpu_s"] = round(server.cpu() - cpu0, 1)
            results["client_cpu_s"] = round(own1.ru_utime + own1.ru_stime - own0.ru_utime - own0.ru_stime, 1)
        finally:
            server.stop()
        out["defence_on" if defence else "defence_off"] = results
    return out


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
