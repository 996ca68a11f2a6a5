"""Several server processes on one port, each with its own listening socket (``SO_REUSEPORT``).

uvicorn's own workers share one listening socket, and whichever process wakes first accepts
every connection waiting: 50 clients connecting at once all landed in one process (measured:
2,000 of 2,000 queries), which then answered them on one core while the other idled. With a
socket per process the kernel spreads new connections over the processes (gunicorn's
``--reuse-port``, nginx's ``reuseport``).

The supervisor checks first that nothing listens on the port (``SO_REUSEPORT`` would otherwise
let a second server share it silently), starts the processes, and stops them all when it is
told to stop or when one of them ends.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import socket
import sys
import time
from typing import Any

from tabsafe.errors import InputError
from tabsafe.service.processes import follow_parent, name_process

__all__ = ["check_free", "serve_workers"]


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def check_free(host: str, port: int) -> None:
    """Refuse a port something already listens on (the probe does not share ports)."""
    probe = socket.socket(_family(host), socket.SOCK_STREAM)
    # as the servers bind: a port whose last connections are closing (TIME_WAIT) is free, one
    # with a listener is not
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        probe.bind((host, port))
    except OSError as exc:
        raise InputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    finally:
        probe.close()


def _worker(settings_json: str, host: str, port: int, options: dict[str, Any], ready: Any,
            recorder: str | None = None) -> None:
    import uvicorn

    from tabsafe.errors import TabsafeError
    from tabsafe.service.app import create_app
    from tabsafe.service.settings import build

    follow_parent()
    name_process(b"tabsafe-worker")
    sock = socket.socket(_family(host), socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
        # the app (and its warm-up) before listening: no connection goes to a process not ready
        app = create_app(build(json.loads(settings_json)), recorder=recorder)
    except (OSError, TabsafeError) as exc:
        text = exc.render() if isinstance(exc, TabsafeError) else f"cannot listen on {host}:{port}: {exc}"
        print(f"tabsafe: error: {text}", file=sys.stderr, flush=True)
        sys.exit(2)
    # every process listens at once: a process that listened first would be the only one the
    # first clients (all the connections of a burst, kept alive) could reach
    ready.wait()
    sock.listen(2048)
    uvicorn.Server(uvicorn.Config(app, **options)).run(sockets=[sock])


def serve_workers(settings: Any, options: dict[str, Any]) -> int:
    """Run ``settings.workers`` server processes on ``settings.host:settings.port`` — and, when
    the settings keep a differencing record, the one process that keeps it for them all
    (:mod:`tabsafe.service.recorder`) — until a signal (SIGINT, SIGTERM) or the end of one of
    them; returns the exit status."""
    import shutil
    import tempfile

    from tabsafe.service.defence import Defence
    from tabsafe.service.recorder import run_recorder

    host, port = settings.host, int(settings.port)
    check_free(host, port)
    ctx = multiprocessing.get_context("spawn")
    settings_json = json.dumps(settings.model_dump(mode="json"))
    stopping = False

    def stop(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    # the recorder's socket, in a directory only this user can enter (mkdtemp: 0700)
    folder = tempfile.mkdtemp(prefix="tabsafe-recorder-") if Defence.records(settings) else None
    recorder = None
    procs: list[Any] = []
    try:
        path = None
        if folder is not None:
            path = os.path.join(folder, "recorder.sock")
            recorded = ctx.Event()
            recorder = ctx.Process(target=run_recorder, args=(settings_json, path, recorded), daemon=False)
            recorder.start()
            # the record is replayed from the store before any worker may ask
            while not stopping and recorder.is_alive() and not recorded.wait(0.2):
                pass
            if not recorder.is_alive() or stopping:
                return _stop([recorder], stopping)
        ready = ctx.Barrier(settings.workers)
        procs = [ctx.Process(target=_worker, args=(settings_json, host, port, options, ready, path), daemon=False)
                 for _ in range(settings.workers)]
        for p in procs:
            p.start()
        every = [*procs, *([recorder] if recorder is not None else [])]
        while not stopping and all(p.is_alive() for p in every):
            time.sleep(0.2)
        # the workers first (uvicorn finishes the requests under way, which may still ask the
        # recorder), then the recorder
        status = _stop(procs, stopping)
        if recorder is not None:
            status = max(status, _stop([recorder], stopping))
        return status
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def _stop(procs: list[Any], stopping: bool) -> int:
    """Stop processes (SIGTERM, then SIGKILL after 30 s); 0 when told to stop or when every one
    ended well, else 1."""
    for p in procs:
        if p.is_alive():
            os.kill(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    for p in procs:
        p.join(max(0.1, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join()
    if stopping:
        return 0
    return 1 if any(p.exitcode for p in procs) else 0
