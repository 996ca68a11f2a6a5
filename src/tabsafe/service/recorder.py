"""One process keeps the differencing record for every worker of a server (issue #26).

With several worker processes, each kept its own copy of the record of answered populations
(:mod:`tabsafe.service.defence`) and replayed every population another process recorded: the
same split of up to every record, done once per process, and done while the others queued for
the store's write lock. Here the supervisor starts one *recorder* process that holds the only
:class:`~tabsafe.service.defence.Defence` of the server; workers send it, over a Unix socket in a
directory only the service's user can enter, each table whose population it must decide, and it
decides them one at a time (the order the record needs). A table of a population the record
already holds needs only the key's budget, which the worker counts itself in the store; it knows
those populations from the recorder's answers and from the store's record (the record never
forgets a population).

The record still lives in the store (its ``populations`` table) and is replayed from there when
the recorder starts; servers that share one store (several supervisors) keep each other's
records in step as processes did before.

If the recorder is gone, a worker answers no table it would have to ask about (503): the
supervisor then stops the whole server.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable
from typing import Any

import orjson

from tabsafe.errors import TabsafeError
from tabsafe.service.defence import (
    POPULATIONS_SCHEMA,
    RecordDamaged,
    Refused,
    budget,
    canonical,
    counted,
    population_key,
    replay_limits,
)
from tabsafe.service.query import Query, resolve

log = logging.getLogger("tabsafe.service")

#: digests of populations the record answered, kept per worker (past that the oldest half goes)
KNOWN_KEPT = 50_000


class RecorderUnavailable(Exception):
    """The recorder process does not answer: no table that needs it is let out."""


def _frame(obj: Any) -> bytes:
    body = orjson.dumps(obj)
    return len(body).to_bytes(4, "big") + body


# ---------------------------------------------------------------------- the recorder's side
def decide(defence: Any, message: dict[str, Any]) -> dict[str, Any]:
    """The recorder's answer to one message of a worker: ``admit`` (a table's population, for a
    key: refused or not, and the digest the worker may keep) or ``would`` (whether the record
    would admit a population: for suggestions)."""
    op = message.get("op")
    if op == "admit":
        refused = defence.admit(message.get("key"), message["query"])
        known = None if refused is not None else defence.recorded(message["query"])
        return {"refused": None if refused is None else [refused.rule, refused.message], "known": known}
    if op == "would":
        return {"ok": bool(defence.would_admit(message["query"]))}
    raise ValueError(f"unknown message {op!r}")


async def _serve_connection(defence: Any, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                            damaged: Callable[[], None] | None = None) -> None:
    """Decide one worker's messages in order. ``damaged`` is called when the record failed while
    recording (:class:`~tabsafe.service.defence.RecordDamaged`): the recorder then stops, and with
    it the server (fail closed; a server started again replays the record from the store)."""
    try:
        while True:
            head = await reader.readexactly(4)
            message = orjson.loads(await reader.readexactly(int.from_bytes(head, "big")))
            try:
                # decided on the loop, with no await inside: messages are decided one at a time
                reply = decide(defence, message)
            except RecordDamaged:
                log.critical("recorder: the differencing record failed while recording a population; "
                             "stopping the server (a restart replays the record from the store)", exc_info=True)
                reply = {"error": "RecordDamaged"}
                if damaged is not None:
                    damaged()
            except Exception as exc:  # a bug: the worker refuses the table (503) and the log says why
                log.exception("recorder: cannot decide a message")
                reply = {"error": type(exc).__name__}
            writer.write(_frame(reply))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


def run_recorder(settings_json: str, path: str, ready: Any) -> None:
    """The recorder process: open the data and the store, replay the record, listen on ``path``
    and say it is ready; until SIGTERM."""
    from tabsafe.service.defence import Defence
    from tabsafe.service.planned import open_data
    from tabsafe.service.processes import follow_parent, name_process
    from tabsafe.service.settings import build
    from tabsafe.service.store import Store

    follow_parent()
    name_process(b"tabsafe-record")  # ps and /proc/<pid>/comm tell it from the workers
    os.umask(0o077)
    try:
        settings = build(json.loads(settings_json))
        data = open_data(settings)
        defence = Defence(settings, data, Store(settings.store_path, key_path=settings.audit_key_path))
        defence.warm()
    except TabsafeError as exc:
        print(f"tabsafe: error: {exc.render()}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None

    broken = False

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for s in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(s, stop.set)

        def damaged() -> None:
            nonlocal broken
            broken = True
            stop.set()

        server = await asyncio.start_unix_server(lambda r, w: _serve_connection(defence, r, w, damaged), path=path)
        os.chmod(path, 0o600)
        ready.set()
        async with server:
            await stop.wait()

    asyncio.run(main())
    if broken:  # the supervisor sees the recorder end and stops the server
        raise SystemExit(70)


# ---------------------------------------------------------------------- a worker's side
class RemoteDefence:
    """A worker's view of the recorder: the interface of :class:`~tabsafe.service.defence.Defence`
    that the routes use.

    A table whose population the record holds needs only the key's budget, which the worker
    counts itself in the store (``then`` joins that transaction, as with a local defence). It
    learns which populations the record holds from the recorder's answers and from the store's
    ``populations`` table (each row: a population's digest and the canonical query that first
    asked it; a plain read of the rows added since it last looked). It knows them by what
    decides the records a query counts (its area, filter and kept categories), not by the query:
    a table of the same population in other variables is decided here too. Only a population the
    record may not hold goes to the recorder."""

    def __init__(self, path: str, store: Any, settings: Any, data: Any) -> None:
        self.path = path
        self.store = store
        self.budget_on = bool(settings.differencing.enabled)
        self.budget = int(settings.differencing.populations_per_key)
        self.data = data
        self.data_id = str(getattr(data, "fingerprint", ""))
        self.limits = replay_limits(settings)
        #: a population's digest by its query's canonical text (a table asked again: no work) and
        #: by :func:`~tabsafe.service.defence.population_key`, what decides the records a query
        #: counts whatever its variables (many tables, one population: one query resolved)
        self._known: dict[str | tuple[Any, ...], str] = {}
        self._seen = 0  # the last row of the store's record read into ``_known``
        self._replies: _Replies | None = None
        self._connecting: asyncio.Future[None] | None = None
        self._sock: socket.socket | None = None
        store._db().executescript(POPULATIONS_SCHEMA)

    async def admit_async(self, key_id: str | None, query: dict[str, Any], then: Any = None) -> Refused | None:
        """None when the table may go to ``key_id``; else why not (:meth:`Defence.admit`).
        ``then(db, refused)`` is called inside the write transaction of the key's budget when the
        worker decides; when the recorder decides, it is not called."""
        if not self.budget_on:
            return None
        text = canonical(query)
        pop = self._known.get(text)
        if pop is None:
            people = self._key(query)
            pop = self._known.get(people)
            if pop is None:
                self._catch_up()
                pop = self._known.get(people)
            if pop is not None:
                self._keep(text, pop)
        if pop is not None:  # the record holds the population: only the key's budget decides
            if counted(self.store._db(), key_id, pop):
                return None
            with self.store._tx() as db:
                refused = budget(db, key_id, pop, self.budget)
                if then is not None:
                    then(db, refused)
            return refused
        reply = await self._ask({"op": "admit", "key": key_id, "query": query})
        if reply.get("known") is not None:
            self._keep(text, reply["known"])
            self._keep(people, reply["known"])
        return None if reply["refused"] is None else Refused(*reply["refused"])

    def _key(self, query: dict[str, Any]) -> tuple[Any, ...]:
        return population_key(resolve(Query.from_json(query), self.data, self.limits))

    def _keep(self, known: str | tuple[Any, ...], pop: str) -> None:
        if len(self._known) >= KNOWN_KEPT:
            for old in list(self._known)[:KNOWN_KEPT // 2]:
                del self._known[old]
        self._known[known] = pop

    def _catch_up(self) -> None:
        """Read the populations recorded since the last look (their canonical queries and digests)."""
        rows = self.store._db().execute("SELECT seq, query, digest, data FROM populations WHERE seq > ? ORDER BY seq",
                                        (self._seen,)).fetchall()
        for seq, text, pop, data_id in rows:
            # a population this worker asked about is kept already, by text and key, from its reply
            if data_id == self.data_id and text not in self._known:
                try:
                    people = self._key(json.loads(text))
                except TabsafeError:  # a query the record replays, but this worker cannot read: it asks
                    people = None
                self._keep(text, pop)
                if people is not None:
                    self._keep(people, pop)
            self._seen = int(seq)

    def would_admit(self, query: dict[str, Any]) -> bool:
        """Whether the record admits ``query``'s population (for suggestions; blocking: only a
        refused table's search asks)."""
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self._sock.connect(self.path)
            self._sock.sendall(_frame({"op": "would", "query": query}))
            head = _recv(self._sock, 4)
            reply = orjson.loads(_recv(self._sock, int.from_bytes(head, "big")))
        except OSError as exc:
            self._sock = None
            raise RecorderUnavailable(str(exc)) from None
        if "error" in reply:
            raise RecorderUnavailable(reply["error"])
        return bool(reply["ok"])

    async def _ask(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send ``message`` and wait for its reply. Messages are not sent one at a time: each
        request of the worker writes its message at once, and the recorder, which decides them in
        the order they come, replies in that order. (Holding a lock from a message to its reply
        had made every new population of a worker wait for the previous one's reply *and* for
        that request's next turn on the loop, a queue of its own.)"""
        if self._replies is None or self._replies.lost:
            if self._connecting is None:
                self._connecting = asyncio.ensure_future(self._connect())
            try:
                await asyncio.shield(self._connecting)
            except OSError as exc:
                raise RecorderUnavailable(str(exc) or type(exc).__name__) from None
            finally:
                self._connecting = None
        replies = self._replies
        assert replies is not None
        reply = await replies.send(message)
        if "error" in reply:
            raise RecorderUnavailable(reply["error"])
        return reply

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        _, self._replies = await loop.create_unix_connection(_Replies, self.path)


class _Replies(asyncio.Protocol):
    """A worker's connection to the recorder: messages go out as they are asked, and each reply,
    parsed as soon as its bytes arrive, completes the oldest request still waiting (the
    recorder replies in order)."""

    def __init__(self) -> None:
        self.waiting: collections.deque[asyncio.Future[dict[str, Any]]] = collections.deque()
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.lost: BaseException | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def send(self, message: dict[str, Any]) -> asyncio.Future[dict[str, Any]]:
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        if self.lost is not None or self.transport is None:
            future.set_exception(RecorderUnavailable(str(self.lost) or "the recorder closed the connection"))
            return future
        # a request cancelled while it waits keeps its place: its reply still comes, and is dropped
        self.waiting.append(future)
        self.transport.write(_frame(message))
        return future

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while len(self.buffer) >= 4:
            size = int.from_bytes(self.buffer[:4], "big")
            if len(self.buffer) < 4 + size:
                break
            reply = orjson.loads(bytes(self.buffer[4:4 + size]))
            del self.buffer[:4 + size]
            future = self.waiting.popleft()
            if not future.done():
                future.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = exc or ConnectionError("the recorder closed the connection")
        while self.waiting:
            future = self.waiting.popleft()
            if not future.done():
                future.set_exception(RecorderUnavailable(str(self.lost)))


def _recv(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("the recorder closed the connection")
        out += chunk
    return bytes(out)


__all__ = ["RecorderUnavailable", "RemoteDefence", "decide", "run_recorder"]
