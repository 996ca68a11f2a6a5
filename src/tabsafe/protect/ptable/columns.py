"""The columns of a p-table (METHODS.md §2 layout) and reading one column of numbers: shared by
the value (:mod:`~tabsafe.protect.ptable.table`) and its files (:mod:`~tabsafe.protect.ptable.files`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tabsafe.errors import InputError

COLUMNS: tuple[str, ...] = ("i", "j", "p", "v", "p_int_lb", "p_int_ub")

FILE_TOL = 1e-6
"""Tolerance for sums and bounds when a p-table is read from a file or frame."""


def numeric_column(name: str, values: Any, i_text: Sequence[str], source: str) -> np.ndarray:
    """One column as float64; a missing, non-numeric or infinite entry names its row."""
    arr = np.asarray(values)
    if arr.dtype.kind in "iuf":
        out = arr.astype(float)
        bad = ~np.isfinite(out)
    else:
        out = np.empty(arr.shape, dtype=float)
        bad = np.zeros(arr.shape, dtype=bool)
        for k, x in enumerate(arr.tolist()):
            try:
                out[k] = float(x.strip() if isinstance(x, str) else x)
            except (TypeError, ValueError):
                bad[k] = True
                continue
            bad[k] = not math.isfinite(out[k]) or isinstance(x, bool)
    if bad.any():
        at = i_text[int(np.flatnonzero(bad)[0])]
        raise InputError(f"row i={at}: column {name} has a missing or non-numeric value", where=source)
    return out


def row_labels(values: Any) -> list[str]:
    """How each row's ``i`` reads, for messages (``?`` where it is missing)."""
    out = []
    for x in np.asarray(values).tolist():
        text = "" if x is None else str(x).strip()
        if isinstance(x, float) and x.is_integer():
            text = str(int(x))
        out.append(text if text and text.lower() != "nan" else "?")
    return out
