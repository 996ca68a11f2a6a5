"""Targeted record swapping on Spark (local[2]) against the embedded engine, at 1.5M and 15M persons.

Both engines swap the same census (generated on Spark once per size and kept in
``bench/out/spark-census-N``, as :mod:`bench_spark` does) with ``tabsafe swap``'s benchmark
setting (geography region/area/small_area, risk sex×age, k 3, swap rate 5%, similar household
size, seed 1) and must give the same records and report (``identical``: the swapped small area of
every record, and the report's figures). Timed per engine: the swap and writing the swapped
records as Parquet (Spark: a folder, one file per task). For Spark also what moved: bytes and
records written to the shuffle (from the application's stage store), and what the driver
received for the top level (households at risk there, the donor lists' heads, passes).

Environment: ``TABSAFE_BENCH_SPARK_SWAP_PERSONS`` (default ``1500000,15000000``),
``TABSAFE_BENCH_SPARK_BUDGET`` seconds (default 2400; a size projected beyond it is skipped).
One run per measurement (the CPU is shared).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
from bench_spark import _census
from common import OUT

import tabsafe as ts
from tabsafe.registry import build_method

SIZES = [int(x) for x in os.environ.get("TABSAFE_BENCH_SPARK_SWAP_PERSONS", "1500000,15000000").split(",")]
BUDGET = float(os.environ.get("TABSAFE_BENCH_SPARK_BUDGET", "2400"))
# the per-area split (donors in the same top-level area) and the earlier swap rate (now the pair rate), so the
# figures stay comparable with the earlier runs; donors from anywhere run on the driver (_spark.on_driver)
PARAMS = {"geography": ["region", "area", "small_area"], "risk_vars": ["sex", "age"], "k": 3, "pairrate": 0.05,
          "similar": [["household_size"]], "household": "household_id", "donors": "same-top-area"}


def _shuffle_totals(spark: Any) -> tuple[int, int]:
    """Bytes and records written to the shuffle by every stage so far (the status store)."""
    sc = spark.sparkContext
    conv = sc._jvm.scala.jdk.javaapi.CollectionConverters
    store = sc._jsc.sc().statusStore()
    # stageList(statuses=null: all, details, withSummaries, quantiles, taskStatus): Scala defaults
    stages = conv.asJava(store.stageList(None, False, False, getattr(store, "stageList$default$4")(),
                                         getattr(store, "stageList$default$5")()))
    b = r = 0
    for i in range(stages.size()):
        st = stages.get(i)
        b += int(st.shuffleWriteBytes())
        r += int(st.shuffleWriteRecords())
    return b, r


def _plain(x: Any) -> Any:
    """Mappings as dicts, sequences as lists (a report keeps read-only views and tuples)."""
    if hasattr(x, "items"):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


def _small_areas(table: pa.Table) -> np.ndarray:
    return np.asarray(table.column("small_area").cast(pa.string()).to_pylist(), dtype=object)


def run() -> dict:
    from tabsafe.engines.spark import SparkEngine, local_session
    from tabsafe.protect.swapping._spark import swap_on_spark

    start = time.perf_counter()
    engine = SparkEngine(session=local_session("local[2]"))
    spark = engine.spark()
    results: dict[str, Any] = {"spark_master": "local[2]", "jvm_start_seconds": round(time.perf_counter() - start, 1),
                               "params": PARAMS, "sizes": {}}
    method = build_method("targeted-swap", PARAMS)
    work = Path(tempfile.mkdtemp(prefix="swap-", dir=OUT if OUT.exists() else None))
    previous: tuple[int, float] | None = None
    try:
        for n in SIZES:
            data, synth_seconds = _census(n, engine)
            md = ts.Microdata.from_file(data.persons)
            row: dict[str, Any] = {"synth_on_spark_seconds": synth_seconds}
            t0 = time.perf_counter()
            a = method.perturb(md, seed=1)
            t1 = time.perf_counter()
            pq.write_table(a.microdata.read(), work / f"duck-{n}.parquet", write_statistics=False)
            t2 = time.perf_counter()
            row["duckdb"] = {"swap_seconds": round(t1 - t0, 1), "write_seconds": round(t2 - t1, 1),
                             "total_seconds": round(t2 - t0, 1)}
            if previous is not None and previous[1] * n / previous[0] > BUDGET:
                row["spark"] = {"skipped": f"projected {previous[1] * n / previous[0]:.0f} s > budget {BUDGET:.0f} s"}
                results["sizes"][str(n)] = row
                continue
            before = _shuffle_totals(spark)
            t0 = time.perf_counter()
            out = swap_on_spark(engine, md, method.spec(), 1)
            t1 = time.perf_counter()
            target = work / f"spark-{n}.parquet"
            out.data.write.mode("overwrite").parquet(str(target))
            t2 = time.perf_counter()
            for frame in out.cached:
                frame.unpersist()
            after = _shuffle_totals(spark)
            row["spark"] = {"swap_seconds": round(t1 - t0, 1), "write_seconds": round(t2 - t1, 1),
                            "total_seconds": round(t2 - t0, 1),
                            "shuffle_bytes_written": after[0] - before[0],
                            "shuffle_records_written": after[1] - before[1],
                            "driver": out.driver}
            # by person: Spark reads a folder's files packed into tasks (largest first), so its
            # output need not keep the embedded engine's order (files by path)
            swapped = pads.dataset(target).to_table(columns=["person_id", "small_area"]).sort_by("person_id")
            mine = a.microdata.read().select(["person_id", "small_area"]).sort_by("person_id")
            row["identical"] = bool(_plain(out.figures) == _plain(a.report.figures) and np.array_equal(
                _small_areas(swapped), _small_areas(mine)))
            row["figures"] = {k: a.report.figures[k] for k in ("records", "households", "pairs",
                                                               "households_swapped", "targeted_pairs")}
            row["spark_vs_duckdb"] = round(row["spark"]["total_seconds"] / row["duckdb"]["total_seconds"], 2)
            previous = (n, row["spark"]["total_seconds"])
            results["sizes"][str(n)] = row
            shutil.rmtree(target, ignore_errors=True)
            (work / f"duck-{n}.parquet").unlink(missing_ok=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return results


if __name__ == "__main__":
    import json
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    print(json.dumps(run(), indent=2, default=str))
