"""The JSON body of a protected table, made from its :class:`~tabsafe.model.result.Release` alone,
so no original value can reach a user."""

from __future__ import annotations

from typing import Any

import numpy as np

from tabsafe.model.result import Release
from tabsafe.service.query import Resolved


def release_payload(release: Release, resolved: Resolved) -> dict[str, Any]:
    """The JSON body of a protected table, made from its :class:`Release` alone.

    Every cell of the grid is listed (a cell without records is a published 0), codes in each
    variable's display order, the last variable varying fastest.
    """
    if not isinstance(release, Release):
        raise TypeError(f"only a Release can be serialised, not a {type(release).__name__}")
    table = release.table.densify()
    shape = table.shape
    ids = np.arange(table.n_cells)
    pos = np.unravel_index(ids, shape) if shape else ()
    codes = [np.array(d.hierarchy.order, dtype=object)[p] for d, p in zip(table.dimensions, pos)]
    columns = list(table.variables) + list(table.value_columns)
    values = []
    for c in table.value_columns:
        arr = table.column(c)
        if arr.dtype.kind == "f":
            missing = np.isnan(arr)
            # counts as whole numbers, other values to two decimals; a missing value as null
            out = (np.rint(np.nan_to_num(arr)).astype(np.int64) if c == "count" else np.round(arr, 2)).tolist()
            if missing.any():
                for i in np.flatnonzero(missing).tolist():
                    out[i] = None
            values.append(out)
        else:
            values.append(arr.tolist())
    rows = list(zip(*[c.tolist() for c in codes], *values))  # tuples: JSON arrays, CSV rows
    dims = []
    for d, rd in zip(table.dimensions, resolved.dims):
        var = rd.variable
        dims.append({
            "variable": d.variable,
            "codes": list(d.hierarchy.order),
            "labels": {c: var.label(c) for c in d.hierarchy.order if var.label(c) != c},
            "parents": {c: p for c, p in d.hierarchy.parents.items() if p != d.hierarchy.total},
        })
    return {"dimensions": dims, "columns": columns, "rows": rows}



__all__ = ["release_payload"]
