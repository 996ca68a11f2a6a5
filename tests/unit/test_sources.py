"""The same table from Parquet, CSV, pandas, polars and Arrow; codes kept as text."""

from __future__ import annotations

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

import tabsafe as ts

DF = pd.DataFrame({"area": ["01", "01", "02", "10"], "sex": [1, 2, 2, 1], "w": [1.5, 2.0, 3.0, 4.0]})


def test_all_sources_agree(tmp_path) -> None:
    pq.write_table(pa.Table.from_pandas(DF), tmp_path / "d.parquet")
    DF.to_csv(tmp_path / "d.csv", index=False)
    sources = [
        ts.Microdata.from_file(tmp_path / "d.parquet"),
        ts.Microdata.from_file(tmp_path / "d.csv"),
        ts.Microdata.from_pandas(DF),
        ts.Microdata.from_polars(pl.from_pandas(DF)),
        ts.Microdata.from_arrow(pa.Table.from_pandas(DF)),
    ]
    tables = [ts.tabulate(s, ["area", "sex"], sums=["w"]) for s in sources]
    for t in tables[1:]:
        np.testing.assert_array_equal(t.counts, tables[0].counts)
        np.testing.assert_allclose(t.column("sum_w"), tables[0].column("sum_w"))
    # CSV codes stay text ("01", not 1) and observed codes sort naturally
    assert tables[1].dimensions[0].hierarchy.order == ("Total", "01", "02", "10")


def test_empty_filter_gives_zero_table() -> None:
    t = ts.tabulate(ts.Microdata.from_pandas(DF), ["area"], where="sex = 3")
    assert t.n_cells == 4 and t.n_stored == 0 and not t.grid("count").any()
