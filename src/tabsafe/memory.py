"""The memory a job may use, and refusing up front a job that will not fit.

A job's budget is ``--memory-limit`` (or :func:`limited` in Python), by default half of the
machine's memory. Methods estimate what they need from their memory model before they start
(:meth:`tabsafe.method.Method.memory_estimate`), the engine is given the budget as its own limit,
and a job over budget is refused with one line instead of growing until the machine dies.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
from collections.abc import Iterator
from contextvars import ContextVar

from tabsafe.errors import InputError, TooLargeError, param

#: The smallest budget accepted: the interpreter and its libraries alone take more.
MIN_LIMIT = 32 * 2**20

#: Share of the machine's memory a job may use when no limit is given.
DEFAULT_SHARE = 0.5

_limit: ContextVar[int | None] = ContextVar("tabsafe_memory_limit", default=None)
_UNITS = {"": 1, "B": 1, "K": 2**10, "KB": 2**10, "M": 2**20, "MB": 2**20, "G": 2**30, "GB": 2**30,
          "T": 2**40, "TB": 2**40}


@functools.lru_cache(maxsize=1)
def machine_bytes() -> int:
    """Physical memory of the machine (or of its cgroup when smaller); read once per process (a
    service asks for every query)."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        text = open("/sys/fs/cgroup/memory.max").read().strip()
        if text.isdigit():
            total = min(total, int(text))
    except OSError:
        pass
    return int(total)


def parse_size(text: str) -> int:
    """``"4GB"``, ``"512M"``, ``"2.5G"`` → bytes."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", str(text))
    unit = m.group(2).upper() if m else ""
    number = float(m.group(1)) if m else 0.0
    if not m or unit not in _UNITS or not 0 < number * _UNITS.get(unit, 1) < 2**62:
        raise InputError(f"{param('memory_limit')} must be a size such as 4GB or 512MB; got {str(text)[:40]!r}")
    nbytes = int(number * _UNITS[unit])
    if nbytes < MIN_LIMIT:  # no job runs in less: such a limit is a typo (1KB for 1GB)
        raise InputError(f"{param('memory_limit')} of {human(nbytes)} is less than any job needs (at least "
                         f"{human(MIN_LIMIT)}); got {text!r}")
    return nbytes


def limit() -> int:
    """The memory budget of the current job, in bytes."""
    value = _limit.get()
    return value if value is not None else int(machine_bytes() * DEFAULT_SHARE)


@contextlib.contextmanager
def limited(nbytes: int | str | None) -> Iterator[None]:
    """Run the block with this memory budget (``None``: the default)."""
    value = parse_size(nbytes) if isinstance(nbytes, str) else nbytes
    token = _limit.set(value)
    try:
        yield
    finally:
        _limit.reset(token)


def human(nbytes: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if nbytes < 1024 or unit == "TB":
            return f"{nbytes:,.0f} {unit}" if unit in {"B", "KB"} else f"{nbytes:,.1f} {unit}"
        nbytes /= 1024
    return f"{nbytes} B"  # pragma: no cover


def check(what: str, need: int) -> None:
    """Refuse ``what`` when its estimate ``need`` (bytes) exceeds the budget."""
    budget = limit()
    if need > budget:
        raise TooLargeError(
            f"{what} would need about {human(need)} of memory, more than the limit of {human(budget)}",
            hint=f"raise {param('memory_limit')} if the machine has it, or make the table smaller",
        )
