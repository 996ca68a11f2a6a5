"""Risk summaries of original tables: how many small cells a table has before protection."""

from __future__ import annotations

from typing import Any

import numpy as np

from tabsafe.model.table import Table


def risk_summary(table: Table) -> dict[str, Any]:
    """Cells, zeros, ones, twos and the share of small (1–2) cells over every cell, margins
    included (seed 002 Table 1 counts inner cells this way; seed 004 §5.2 ``DR`` builds on it).

    Works on the stored cells: every implied cell is a zero.
    """
    c = table.counts
    n = table.n_cells
    ones, twos = int((c == 1).sum()), int((c == 2).sum())
    nonzero = int((c != 0).sum())
    n_inner = 1
    for d in table.dimensions:
        n_inner *= len(d.hierarchy.leaves)
    return {
        "cells": n,
        "inner_cells": n_inner,
        "zeros": n - nonzero,
        "ones": ones,
        "twos": twos,
        "small_cell_share": round((ones + twos) / n, 4) if n else 0.0,
        "small_among_nonzero": round((ones + twos) / max(1, nonzero), 4),
        "inner_zero_share": round(1 - float(np.count_nonzero(c[table.leaf_mask])) / n_inner, 4) if n_inner else 0.0,
    }
