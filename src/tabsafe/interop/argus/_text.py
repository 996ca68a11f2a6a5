"""Lexing shared by the tau-ARGUS file readers: tokens, numbers, codes and one-line errors.

tau-ARGUS files are line based. A line is split into tokens at white space; a token in double
quotes keeps its spaces and loses its quotes (``"Var 1"`` is one token). Numbers may use a
decimal comma (``16847646,84`` in ``.tab`` files written on a Dutch desktop). Codes are compared
without leading and trailing spaces: tau-ARGUS pads codes to the variable's width (``" 1"`` in a
``.hrc`` file and ``" 1"`` in a ``.tab`` file are the code ``1``), tabsafe stores them trimmed and
its writers pad them again where a width is declared.

Errors name the file, the line and the field, never the content (a file may hold confidential
values): ``pp.tab:12: field 3 (Var2): not a number``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tabsafe.errors import InputError

__all__ = ["Line", "fail", "lines", "number", "quote", "split_fields", "tokens"]


def fail(source: str, line: int | None, field: str, what: str) -> InputError:
    """The one-line error for a malformed field: ``source:line: field: what``."""
    where = f"{source}:{line}" if line is not None else source
    return InputError(f"{field}: {what}", where=where)


@dataclass(frozen=True)
class Line:
    """One non-blank line of a file: its number (1-based) and text without the line break."""

    number: int
    text: str


def lines(text: str, *, comments: bool = False) -> list[Line]:
    """The non-blank lines of ``text``; with ``comments``, lines starting ``//`` are dropped too."""
    out = []
    for i, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or (comments and stripped.startswith("//")):
            continue
        out.append(Line(i, raw.rstrip("\r\n")))
    return out


def tokens(text: str, source: str, line: int) -> list[str]:
    """The white-space separated tokens of a line; ``"…"`` is one token without its quotes."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if ch == '"':
            end = text.find('"', i + 1)
            if end < 0:
                raise fail(source, line, f"token {len(out) + 1}", "a quote is not closed")
            out.append(text[i + 1:end])
            i = end + 1
            continue
        j = i
        while j < n and not text[j].isspace() and text[j] != '"':
            j += 1
        out.append(text[i:j])
        i = j
    return out


def split_fields(text: str, sep: str, source: str, line: int) -> list[str]:
    """The fields of a separated line; a field in double quotes may hold the separator."""
    out: list[str] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] == " " and sep != " ":
            i += 1
        if i < n and text[i] == '"':
            end = text.find('"', i + 1)
            if end < 0:
                raise fail(source, line, f"field {len(out) + 1}", "a quote is not closed")
            out.append(text[i + 1:end])
            i = end + 1
            while i < n and text[i] == " " and sep != " ":
                i += 1
            if i < n and not text.startswith(sep, i):
                raise fail(source, line, f"field {len(out)}", "text after the closing quote")
        else:
            j = text.find(sep, i)
            j = n if j < 0 else j
            out.append(text[i:j])
            i = j
        if i >= n:
            return out
        i += len(sep)
        if i >= n:  # a trailing separator ends an empty last field
            out.append("")
            return out


def number(text: str, source: str, line: int, field: str) -> float:
    """A number written with a decimal point or comma (``1,5`` and ``1.5`` are 1.5)."""
    t = text.strip()
    if "," in t and "." not in t:
        t = t.replace(",", ".")
    try:
        value = float(t)
    except ValueError:
        raise fail(source, line, field, "not a number") from None
    if not math.isfinite(value):
        raise fail(source, line, field, "not a finite number")
    return value


def integer(text: str, source: str, line: int, field: str) -> int:
    """A whole number."""
    try:
        return int(text.strip())
    except ValueError:
        raise fail(source, line, field, "not a whole number") from None


def quote(text: str) -> str:
    """``text`` in double quotes (tau-ARGUS has no escape for a quote inside: refused)."""
    if '"' in text:
        raise InputError("a tau-ARGUS name or code cannot hold a double quote")
    return f'"{text}"'


def format_number(value: float, decimals: int) -> str:
    """``value`` with ``decimals`` places and a decimal point (what tau-ARGUS reads everywhere)."""
    return f"{value:.{decimals}f}"
