"""Errors that tabsafe raises on purpose.

Every error a user can cause is an :class:`InputError` (bad data, bad parameters, bad files) or a
:class:`MethodError` (valid input for which a method has no answer, e.g. an infeasible integer
program). Both carry one line of text that says *what* is wrong and *where*; the CLI prints that
line and exits non-zero, the service turns it into a 4xx. Anything else escaping is a bug.
"""

from __future__ import annotations


class TabsafeError(Exception):
    """Base of all deliberate tabsafe errors; ``str(err)`` is a single line for the user."""

    exit_code: int = 1
    http_status: int = 400

    def __init__(self, what: str, *, where: str | None = None, hint: str | None = None) -> None:
        self.what = what
        self.where = where
        self.hint = hint
        super().__init__(self.message)

    @property
    def message(self) -> str:
        text = f"{self.where}: {self.what}" if self.where else self.what
        if self.hint:
            text = f"{text} ({self.hint})"
        return " ".join(text.split())  # always one line


class InputError(TabsafeError):
    """The user's data, files or parameters are invalid."""

    exit_code = 2
    http_status = 422


class MethodError(TabsafeError):
    """The input is valid but the method cannot produce an answer (e.g. infeasible program)."""

    exit_code = 3
    http_status = 409


class TooLargeError(InputError):
    """A requested table exceeds the configured size limit."""

    http_status = 413
