"""Tabulate the full 7-variable hypercube with all 2^7 margins, against a bare DuckDB CUBE.

Both run in the same process on the same Parquet file. The baseline is the plain aggregation
``GROUP BY CUBE(region, sex, age, activity, occupation, education, citizenship)`` fetched to
Arrow; tabsafe additionally validates codelists and returns a sparse :class:`~tabsafe.Table` of
the cells with records (the grid has 997,920 cells). Whole-process figures, as a user gets them,
are in ``bench_cli.py``.
"""

from __future__ import annotations

import duckdb
import numpy as np

import tabsafe as ts
from common import HYPERCUBE, census, measure
from tabsafe.io import read_meta


def run() -> dict:
    data = census()
    md = ts.Microdata.from_file(data.persons, codelists=read_meta(data.meta))

    def bare() -> int:
        con = duckdb.connect()
        cols = ", ".join(HYPERCUBE)
        out = con.sql(
            f"SELECT {cols}, count(*) AS n FROM read_parquet('{data.persons}') GROUP BY CUBE ({cols})"
        ).to_arrow_table()
        con.close()
        return out.num_rows

    def ours() -> ts.Table:
        return ts.tabulate(md, HYPERCUBE)

    def ours_with_key() -> ts.Table:
        return ts.tabulate(md, HYPERCUBE, key="rkey")

    ours()  # warm the file cache for both sides
    rows, base = measure(bare)
    table, mine = measure(ours)
    _, keyed = measure(ours_with_key)
    dense = table.densify()
    counts = dense.counts
    inner = counts[dense.leaf_mask]
    dist = {
        "0": float(np.mean(inner == 0)), "1": float(np.mean(inner == 1)), "2": float(np.mean(inner == 2)),
        "3-5": float(np.mean((inner >= 3) & (inner <= 5))), "6-8": float(np.mean((inner >= 6) & (inner <= 8))),
        "9-10": float(np.mean((inner >= 9) & (inner <= 10))), "11+": float(np.mean(inner >= 11)),
    }
    return {
        "persons": int(counts[0]),
        "cells_with_margins": table.n_cells,
        "inner_cells": int(dense.leaf_mask.sum()),
        "cells_stored": table.n_stored,
        "bare_cube_rows_nonzero": rows,
        "bare_group_by_cube": base,
        "tabsafe_tabulate": mine,
        "tabsafe_tabulate_with_cell_key": keyed,
        "ratio_tabulate_vs_cube": round(mine["seconds"] / base["seconds"], 3),
        "ratio_with_cell_key_vs_cube": round(keyed["seconds"] / base["seconds"], 3),
        "inner_cell_size_distribution": {k: round(100 * v, 2) for k, v in dist.items()},
        "seed_002_table_1_percent": {"0": 92.36, "1": 1.64, "2": 0.86, "3-5": 1.21, "6-8": 0.68, "9-10": 0.29, "11+": 2.96},
    }
