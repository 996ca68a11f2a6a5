"""Feedback on long jobs: what is being done, reported by the library, shown by the surface.

Library code reports what it does with :func:`report` (``report("solver", phase="sequential",
done=14, total=203, objective=44136, gap=0.008)``) and never prints. Who listens is set by the
caller with :func:`reporting`: the CLI shows a one-line progress display on a terminal (nothing
when piped or with ``--quiet``) and writes one JSON object per event with ``--log-json FILE``;
the service and Python callers hear nothing unless they ask. Events carry no original values —
only what the report may publish (phases, counts of cells or programs, objectives, gaps).
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Iterator
from contextvars import ContextVar
from typing import IO, Any, Protocol


class Listener(Protocol):
    def event(self, what: str, fields: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


class _Silent:
    def event(self, what: str, fields: dict[str, Any]) -> None:
        pass

    def close(self) -> None:
        pass


_listener: ContextVar[Listener] = ContextVar("tabsafe_progress", default=_Silent())


def report(what: str, **fields: Any) -> None:
    """Tell whoever listens what is being done (cheap when nobody does)."""
    listener = _listener.get()
    if not isinstance(listener, _Silent):
        listener.event(what, fields)


@contextlib.contextmanager
def reporting(*listeners: Listener) -> Iterator[None]:
    """Send :func:`report` events to ``listeners`` within the block."""
    listener: Listener = listeners[0] if len(listeners) == 1 else _Tee(listeners) if listeners else _Silent()
    token = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(token)
        for one in listeners:
            one.close()


class _Tee:
    def __init__(self, listeners: tuple[Listener, ...]) -> None:
        self.listeners = listeners

    def event(self, what: str, fields: dict[str, Any]) -> None:
        for one in self.listeners:
            one.event(what, fields)

    def close(self) -> None:  # each is closed by reporting()
        pass


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


class Terminal:
    """A one-line display on a terminal: elapsed time, what is being done, its figures
    (redrawn at most 10 times a second; the line is cleared when the job ends)."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stderr
        self.start = time.monotonic()
        self.last = 0.0
        self.width = 0

    def event(self, what: str, fields: dict[str, Any]) -> None:
        now = time.monotonic()
        if now - self.last < 0.1 and not fields.get("final"):
            return
        self.last = now
        done, total = fields.get("done"), fields.get("total")
        bar = ""
        if isinstance(done, int) and isinstance(total, int) and total > 0:
            filled = int(20 * min(done, total) / total)
            bar = "[" + "#" * filled + "." * (20 - filled) + f"] {done:,}/{total:,} "
        rest = ", ".join(f"{k} {_fmt(v)}" for k, v in fields.items() if k not in {"done", "total", "final"})
        line = f"{now - self.start:6.1f} s  {what}: {bar}{rest}"[:160]
        self.stream.write("\r" + line.ljust(self.width))
        self.width = len(line)
        self.stream.flush()

    def clear(self) -> None:
        """Take the progress line off the terminal (before any other output; redrawn at the next
        event)."""
        if self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0
            self.last = 0.0

    def close(self) -> None:
        self.clear()


class _Clearing:
    """A stream that clears the terminal's progress line before anything is written to it."""

    def __init__(self, stream: IO[str], terminal: Terminal) -> None:
        self._stream = stream
        self._terminal = terminal

    def write(self, text: str) -> int:
        if text:
            self._terminal.clear()
        return self._stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def clearing(terminal: Terminal) -> Iterator[None]:
    """Within the block, every write to stdout or stderr first clears ``terminal``'s line: a
    summary, a warning or an error never lands on the end of a progress line."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Clearing(out, terminal), _Clearing(err, terminal)  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err


class JsonLines:
    """One JSON object per event: ``{"t": seconds, "what": …, …fields}``."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.start = time.monotonic()

    def event(self, what: str, fields: dict[str, Any]) -> None:
        record = {"t": round(time.monotonic() - self.start, 3), "what": what, **fields}
        self.stream.write(json.dumps(record, default=str) + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.stream not in (sys.stdout, sys.stderr):
            self.stream.close()
