"""Releases as SDMX-CSV 2.0: one observation per cell, with its observation status and
confidentiality flag.

Source: the SDMX-CSV 2.0 format (SDMX Technical Working Group, "SDMX-CSV format", version 2.0):
the first columns are ``STRUCTURE`` (``dataflow``), ``STRUCTURE_ID`` (``AGENCY:ID(VERSION)``) and
``ACTION`` (``I``: information); then one column per dimension, ``OBS_VALUE`` and the attributes.
The flags use the SDMX cross-domain code lists: ``OBS_STATUS`` (CL_OBS_STATUS) ``A`` normal value,
``O`` missing value; ``CONF_STATUS`` (CL_CONF_STATUS) ``F`` free, ``C`` confidential.

Only published values are written. A suppressed cell is ``O``/``C`` with an empty value — every
suppressed cell is ``C``, never ``D`` (secondary): which cells are primary is not published (a
primary cell is known to be small). Totals take the SDMX code ``_T`` (the cross-domain code for a
total), other codes must be SDMX identifiers (letters, digits, ``_``, ``@``, ``$``, ``-``).
"""

from __future__ import annotations

import csv
import io
import re

import numpy as np

from tabsafe.errors import InputError
from tabsafe.model.result import Release

__all__ = ["SDMX_TOTAL", "sdmx_csv"]

SDMX_TOTAL = "_T"
_ID = re.compile(r"[A-Za-z0-9_@$\-]+\Z")
_DIM_ID = re.compile(r"[A-Za-z][A-Za-z0-9_\-]*\Z")
_STRUCTURE = re.compile(r"[A-Za-z0-9_@$\-]+(\.[A-Za-z0-9_@$\-]+)*:[A-Za-z0-9_@$\-]+\(\d+(\.\d+)*\)\Z")


def _codes(release: Release) -> list[dict[str, str]]:
    """Per dimension, tabsafe code → SDMX code (the total becomes ``_T``)."""
    out = []
    for d in release.table.dimensions:
        if not _DIM_ID.match(d.variable):
            raise InputError(f"variable {d.variable!r} is not an SDMX identifier (a letter, then letters, digits, _ or -)")
        mapping = {}
        for code in d.hierarchy.order:
            sdmx = SDMX_TOTAL if code == d.hierarchy.total else code
            if code != d.hierarchy.total and (code == SDMX_TOTAL or not _ID.match(code)):
                raise InputError(f"a code of {d.variable!r} is not an SDMX identifier (letters, digits, _ @ $ -) "
                                 f"or is {SDMX_TOTAL!r}, the total's code")
            mapping[code] = sdmx
        out.append(mapping)
    return out


def sdmx_csv(release: Release, *, structure: str = "TABSAFE:TABLE(1.0)", decimals: int | None = None) -> str:
    """The SDMX-CSV 2.0 text of ``release`` (every grid cell; ``structure`` is the dataflow's
    ``AGENCY:ID(VERSION)``)."""
    if not isinstance(release, Release):
        raise TypeError("SDMX-CSV is written from a Release")
    if not _STRUCTURE.match(structure):
        raise InputError("the SDMX structure must read AGENCY:ID(VERSION), e.g. ESTAT:CENSUS_HC(1.0)")
    table = release.table.densify()
    maps = _codes(release)
    counts = np.asarray(table.counts, dtype=np.float64)  # the value column (a magnitude release: its totals)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["STRUCTURE", "STRUCTURE_ID", "ACTION", *(d.variable for d in table.dimensions),
                "OBS_VALUE", "OBS_STATUS", "CONF_STATUS"])
    positions = [table.positions(a) for a in range(len(table.dimensions))]
    orders = [d.hierarchy.order for d in table.dimensions]
    for i in range(table.n_stored):
        codes = [m[o[p[i]]] for m, o, p in zip(maps, orders, positions)]
        v = counts[i]
        if np.isnan(v):
            w.writerow(["dataflow", structure, "I", *codes, "", "O", "C"])
        else:
            shown = f"{v:.{decimals}f}" if decimals is not None else (str(int(v)) if float(v).is_integer() else repr(float(v)))
            w.writerow(["dataflow", structure, "I", *codes, shown, "A", "F"])
    return buf.getvalue()
