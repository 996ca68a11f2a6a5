"""tau-ARGUS a-priori files (``.hst``): statuses, costs and protection levels of given cells.

Source: the tau-ARGUS manual ("A priori information"). Each line names a cell by one code per
explanatory variable of the table, then an action, fields separated by the separator the batch
command ``<APRIORI> "file", table, "sep"`` gives:

* ``S`` safe, ``U`` unsafe, ``P`` protected (never suppressed), ``M`` suppressed (secondary,
  manual), ``ML`` suppressed as by the linked-tables procedure;
* ``C value`` (or ``W``) the cell's cost;
* ``PL lower upper`` the protection levels of an unsafe cell;
* ``AB lower upper`` a-priori bounds (tau-ARGUS itself refuses it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tabsafe.interop.argus._text import fail, lines, number, split_fields

__all__ = ["ACTIONS", "AprioriEntry", "read_hst", "write_hst"]

#: action -> number of values after it
ACTIONS = {"S": 0, "U": 0, "P": 0, "M": 0, "ML": 0, "C": 1, "W": 1, "PL": 2, "AB": 2}


@dataclass(frozen=True)
class AprioriEntry:
    """One line of an a-priori file."""

    codes: tuple[str, ...]
    action: str
    values: tuple[float, ...] = ()
    line: int = field(default=0, compare=False)


def read_hst(text: str, *, separator: str, dimensions: int, source: str = "apriori.hst") -> list[AprioriEntry]:
    """The entries of an a-priori file for a table of ``dimensions`` explanatory variables."""
    if not separator:
        raise fail(source, None, "separator", "empty")
    out = []
    for ln in lines(text):
        fields = split_fields(ln.text.strip(), separator, source, ln.number)
        if len(fields) < dimensions + 1:
            raise fail(source, ln.number, f"field {len(fields) + 1}", f"missing: a cell needs {dimensions} codes "
                       "and an action")
        codes = tuple(f.strip() for f in fields[:dimensions])
        action = fields[dimensions].strip().upper()
        if action not in ACTIONS:
            raise fail(source, ln.number, f"field {dimensions + 1} (action)", "not S, U, P, M, ML, C, W, PL or AB")
        need = ACTIONS[action]
        rest = fields[dimensions + 1:]
        if len([r for r in rest if r.strip()]) != need:
            raise fail(source, ln.number, f"field {dimensions + 2}", f"action {action} takes {need} value(s)")
        values = tuple(number(r, source, ln.number, f"field {dimensions + 2 + i}") for i, r in enumerate(rest[:need]))
        if action == "PL" and min(values) < 0:
            raise fail(source, ln.number, f"field {dimensions + 2}", "protection levels must not be negative")
        out.append(AprioriEntry(codes, action, values, ln.number))
    return out


def write_hst(entries: Sequence[AprioriEntry], *, separator: str) -> str:
    """The text of an a-priori file (:func:`read_hst` reads it back to the same entries)."""
    out = []
    for e in entries:
        codes = [f'"{c}"' if separator in c else c for c in e.codes]
        out.append(separator.join([*codes, e.action, *(repr(float(v)) for v in e.values)]))
    return "\n".join(out) + "\n"
