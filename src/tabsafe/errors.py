"""Errors that tabsafe raises on purpose.

Every error a user can cause is an :class:`InputError` (bad data, bad parameters, bad files) or a
:class:`MethodError` (valid input for which a method has no answer, e.g. an infeasible integer
program). Both carry one line of text that says *what* is wrong and *where*; the CLI prints that
line and exits non-zero, the service turns it into a 4xx. Anything else escaping is a bug.

Library errors speak of *parameters*, not of command-line flags: a parameter is named in the text
with :func:`param` and rendered for the reader — ``'steps'`` in Python and the service,
``--steps`` on the command line (:meth:`TabsafeError.render`). A :class:`MethodError` carries a
machine-readable :class:`Reason` and :class:`Suggestion` s (parameter values that would help),
which each surface turns into its own words.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

_MARK = "\x00"
_PARAM = re.compile(_MARK + r"([^\x00]+)" + _MARK)


def param(name: str) -> str:
    """A parameter's name inside an error text, rendered per surface (``'name'`` or ``--name``)."""
    return f"{_MARK}{name}{_MARK}"


#: what a code or a column name looks like; anything else read from a file is not echoed
_CODE_LIKE = re.compile(r"[\w.+\-]([\w.+\- ]{0,38}[\w.+\-])?")


def shown(value: Any) -> str:
    """A value read from a file, for an error message: its repr when it looks like a code or a
    column name, else a neutral stand-in. An error must not echo a file's content — a hierarchy
    or a CSV that is a link to ``/etc/passwd`` or ``/etc/shadow`` would print its lines (#25).

    >>> shown("R1A001"), shown("root:*:20228:0:99999:7:::")
    ("'R1A001'", '(a value that is not a code)')
    """
    text = str(value)
    return repr(text) if _CODE_LIKE.fullmatch(text) else "(a value that is not a code)"


def shown_list(values: Any, limit: int = 12) -> str:
    """Up to ``limit`` values, comma-separated, ``…`` for more — none at all when one of them does
    not look like a code or a name (the file is then not what it seems, and its other values are
    as much its content as the odd one)."""
    values = [str(v) for v in values]
    if not all(_CODE_LIKE.fullmatch(v) for v in values):
        return "(values that are not codes or names: is it the file you meant?)"
    return ", ".join(repr(v) for v in values[:limit]) + (" …" if len(values) > limit else "")


def reader_message(exc: BaseException) -> str:
    """The first line of a file reader's error without the offending row it quotes (Arrow's
    ``CSV parse error: Expected 3 columns, got 4: <the row>``): never a file's content."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return re.sub(r"(got \d+( columns)?)\s*:.*$", r"\1", first)[:300]


def as_flag(name: str) -> str:
    """The command-line option of a parameter: ``time_limit`` → ``--time-limit``."""
    return "--" + name.replace("_", "-")


def _api(name: str) -> str:
    return repr(name)


def _render_value(value: Any) -> str:
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, bool):
        return "" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


class Reason(str, Enum):
    """Why a method has no answer (machine-readable; the service returns it)."""

    INFEASIBLE = "infeasible"
    TIME_LIMIT = "time-limit"
    WORK_LIMIT = "work-limit"
    TOO_LARGE = "too-large"
    NOT_FOUND = "not-found"
    NOT_APPLICABLE = "not-applicable"


@dataclass(frozen=True)
class Suggestion:
    """Parameter values that would let the method answer, with why (e.g. ``steps=1``)."""

    text: str
    params: Mapping[str, Any] = field(default_factory=dict)

    def render(self, flag: Callable[[str], str]) -> str:
        if not self.params:
            return self.text
        if flag is as_flag:
            shown = " ".join(f"{flag(k)} {_render_value(v)}".rstrip() for k, v in self.params.items())
        else:
            shown = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{self.text} with {shown}" if self.text else shown


class TabsafeError(Exception):
    """Base of all deliberate tabsafe errors; ``str(err)`` is a single line for the user."""

    exit_code: int = 1
    http_status: int = 400

    def __init__(self, what: str, *, where: str | None = None, hint: str | None = None) -> None:
        self.what = what
        self.where = where
        self.hint = hint
        super().__init__(self.render())

    def render(self, flag: Callable[[str], str] = _api) -> str:
        """The one-line message, parameters named by ``flag`` (``as_flag`` for the CLI)."""
        text = f"{self.where}: {self.what}" if self.where else self.what
        hint = self._hint(flag)
        if hint:
            text = f"{text} ({hint})"
        text = _PARAM.sub(lambda m: flag(m.group(1)), text)
        return " ".join(text.split())  # always one line

    def _hint(self, flag: Callable[[str], str]) -> str | None:
        return self.hint

    @property
    def message(self) -> str:
        return self.render()

    def __str__(self) -> str:
        return self.render()


class InputError(TabsafeError):
    """The user's data, files or parameters are invalid."""

    exit_code = 2
    http_status = 422


class TooLargeError(InputError):
    """A requested table or job exceeds a configured size or memory limit."""

    http_status = 413


class MethodError(TabsafeError):
    """The input is valid but the method cannot produce an answer (e.g. infeasible program).

    Attributes:
        reason: why, machine-readable.
        suggestions: parameter values that would help, each rendered per surface.
    """

    exit_code = 3
    http_status = 409

    def __init__(
        self,
        what: str,
        *,
        reason: Reason | str = Reason.NOT_FOUND,
        suggestions: tuple[Suggestion, ...] = (),
        where: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.reason = Reason(reason)
        self.suggestions = tuple(suggestions)
        super().__init__(what, where=where, hint=hint)

    def _hint(self, flag: Callable[[str], str]) -> str | None:
        parts = [s.render(flag) for s in self.suggestions]
        if self.hint:
            parts.append(self.hint)
        return "; ".join(parts) if parts else None


class Interrupted(TabsafeError):
    """The user stopped the command (Ctrl-C); nothing partial was left behind."""

    exit_code = 130
