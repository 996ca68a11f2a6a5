"""A real table-builder server (``tabsafe serve``: uvicorn on loopback, a random free port) over
a small synthetic census, and helpers to query it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from tabsafe.synth import SynthResult

ROOT = Path(__file__).resolve().parents[2]
TABSAFE = [sys.executable, "-m", "tabsafe.cli"]

#: lenient release rules: the attack tests measure the noise, not the rules
LENIENT = {"max_dimensions": 3, "max_cells": 20_000, "min_population": 1, "min_area_population": 1,
           "min_mean_cell_size": None, "max_small_cell_share": None}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """``tabsafe serve`` in a subprocess; :meth:`stop` ends it (by its own pid)."""

    def __init__(self, data: Path, config: Path, *extra: str) -> None:
        self.data, self.config, self.extra = data, config, extra
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Server:
        self.port = free_port()
        self.proc = subprocess.Popen([*TABSAFE, "serve", "--data", str(self.data), "--config", str(self.config),
                                      "--port", str(self.port), *self.extra], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        deadline = time.time() + 180
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.proc.stdout.read().decode()}")  # type: ignore[union-attr]
            try:
                if self.get("/api/v1/health")[0] == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("server did not start in 180 s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def request(self, method: str, path: str, body: Any = None, key: str | None = None,
                raw: bytes | None = None) -> tuple[int, Any, dict[str, str]]:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if key:
            req.add_header("X-API-Key", key)
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                status, text, headers = r.status, r.read().decode(), dict(r.headers)
        except urllib.error.HTTPError as e:
            status, text, headers = e.code, e.read().decode(), dict(e.headers)
        try:
            payload: Any = json.loads(text)
        except ValueError:
            payload = text
        return status, payload, headers

    def get(self, path: str, key: str | None = None) -> tuple[int, Any, dict[str, str]]:
        return self.request("GET", path, key=key)

    def table(self, query: dict[str, Any], key: str, fmt: str = "json") -> tuple[int, Any, dict[str, str]]:
        return self.request("POST", f"/api/v1/tables?format={fmt}", query, key)


def write_config(path: Path, state: Path, rules: dict[str, Any] | None = None, **extra: Any) -> Path:
    config = {"prepared": str(state / "prepared"), "store": str(state / "service.sqlite"),
              "levels": {"small_area": ["region", "area", "small_area"], "age": ["broad band", "band"],
                         "age_year": ["broad band", "band", "year"], "area": ["region", "area"]},
              "recode_level": {"age_year": 2},
              **({"rules": rules} if rules is not None else {}), **extra}
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def add_key(data: Path, config: Path, user: str, *extra: str) -> str:
    """A new key, made through the store the service reads (``keys-admin add`` does the same; its
    own test runs the command)."""
    from tabsafe.service.settings import Settings
    from tabsafe.service.store import Store

    rate = int(extra[extra.index("--rate") + 1]) if "--rate" in extra else None
    store = Store(Settings.load(data=data, config=config).store_path)
    return store.add_key(user, rate_per_minute=rate)[0]


@pytest.fixture(scope="session")
def served(small_census: SynthResult, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A running server with lenient rules and a key (it prepares the data on its first start);
    yields (server, key, config). One per test session: tests make their own keys."""
    state = tmp_path_factory.mktemp("service")
    # the attack tests send a thousand queries a minute with one key: a generous default rate
    config = write_config(state / "service.yaml", state, LENIENT, limits={"rate_per_minute": 100_000})
    key = add_key(small_census.directory, config, "tester")
    server = Server(small_census.directory, config).start()
    try:
        yield server, key, config
    finally:
        server.stop()


os.environ.setdefault("PYTHONUNBUFFERED", "1")
