"""Spark (local[2]) against the embedded engine: tabulation and the cell key method of the
7-variable hypercube at 1.5M, 15M and 60M persons.

Both engines read the same census, generated once per size on Spark
(:func:`tabsafe.synth.synth_census_spark`, kept in ``bench/out/spark-census-N``), and must give
the same release cell by cell (``identical``). Per size and engine: the tabulation with exact
cell keys, the cell key method on it (the same code for both), and, for Spark, what its plan
moved: rows read, rows after the first (pre-)aggregation, rows and bytes written to the
shuffle, and the rows and bytes collected on the driver (the non-empty cells).

Environment: ``TABSAFE_BENCH_SPARK_PERSONS`` (default ``1500000,15000000,60000000``),
``TABSAFE_BENCH_SPARK_BUDGET`` seconds (default 2400): a size whose Spark run would take longer,
projected linearly from the size before, is skipped and reported with its projection. One run per
measurement (CPU is shared; re-measure on a quiet machine).
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np
from common import HYPERCUBE, OUT, measure

import tabsafe as ts
from tabsafe.io import read_meta
from tabsafe.model.spec import TableSpec
from tabsafe.protect.cell_key_method import CellKeyMethod
from tabsafe.protect.ptable import PTableParams, generate_ptable
from tabsafe.synth import SynthResult, synth_census_spark

SIZES = [int(x) for x in os.environ.get("TABSAFE_BENCH_SPARK_PERSONS", "1500000,15000000,60000000").split(",")]
BUDGET = float(os.environ.get("TABSAFE_BENCH_SPARK_BUDGET", "2400"))


def _census(n: int, engine: Any) -> tuple[SynthResult, float | None]:
    directory = OUT / f"spark-census-{n}"
    if (directory / "meta.yaml").is_file():
        return SynthResult(directory, directory / "persons.parquet", directory / "households.parquet",
                           directory / "meta.yaml", n, -1), None
    OUT.mkdir(exist_ok=True)
    start = time.perf_counter()
    result = synth_census_spark(n, 1, directory, engine=engine)
    return result, round(time.perf_counter() - start, 1)


class _PlanMetrics:
    """The Spark plan's own counters for the last query the engine ran (the main pass).

    Reads the executed plan's SQL metrics through the JVM (benchmark only, not the engine): each
    operator's name with its row and byte counters, scans, aggregations, exchanges (shuffles).
    """

    def __init__(self) -> None:
        from tabsafe.engines import spark as engine_module

        self.last: Any = None
        self.collected = (0, 0)
        original = engine_module._Session.run
        holder = self

        def run(session: Any, sql: str) -> Any:
            frame = session.spark.sql(sql)
            holder.last = frame
            with engine_module.spark_errors("cannot read data", where=session.where):
                result = frame.toArrow()
            holder.collected = (result.num_rows, result.nbytes)
            return result

        self._module, self._original = engine_module, original
        engine_module._Session.run = run  # type: ignore[method-assign]

    def close(self) -> None:
        self._module._Session.run = self._original  # type: ignore[method-assign]

    def read(self) -> dict[str, Any]:
        if self.last is None:
            return {}
        jvm = self.last.sparkSession.sparkContext._jvm
        converters = jvm.scala.jdk.javaapi.CollectionConverters
        plan = self.last._jdf.queryExecution().executedPlan()
        nodes: list[dict[str, Any]] = []

        def walk(node: Any) -> None:
            name = node.nodeName()
            if name == "AdaptiveSparkPlan":
                walk(node.executedPlan())
                return
            if "QueryStage" in name:
                walk(node.plan())
                return
            metrics = converters.asJava(node.metrics())
            values = {k: int(metrics.get(k).value()) for k in metrics.keySet()
                      if any(w in k.lower() for w in ("rows", "records", "size", "bytes", "files"))}
            nodes.append({"operator": name, **values})
            children = converters.asJava(node.children())
            for i in range(children.size()):
                walk(children.get(i))

        walk(plan)
        shuffles = [n for n in nodes if n["operator"] in {"Exchange", "ShuffleExchange"}]
        return {
            "driver_collected_rows": self.collected[0],
            "driver_collected_arrow_bytes": self.collected[1],
            "operators": nodes,
            "shuffle_records_written": sum(n.get("shuffleRecordsWritten", 0) for n in shuffles),
            "shuffle_bytes_written": sum(n.get("shuffleBytesWritten", 0) for n in shuffles),
            "shuffles": len(shuffles),
        }


def run() -> dict:
    from tabsafe.engines.spark import SparkEngine, local_session

    start = time.perf_counter()
    spark = SparkEngine(session=local_session("local[2]"))
    jvm_start = round(time.perf_counter() - start, 1)
    ptable = generate_ptable(PTableParams(max_noise=5, variance=3, js=2))
    method = CellKeyMethod(ptable=ptable)
    spec = TableSpec(by=HYPERCUBE, key=method.needs().key)
    results: dict[str, Any] = {"spark_master": "local[2]", "jvm_start_seconds": jvm_start, "sizes": {}}
    previous: tuple[int, float] | None = None
    for i, n in enumerate(SIZES):
        data, synth_seconds = _census(n, spark)
        md = ts.Microdata.from_file(data.persons, codelists=read_meta(data.meta))
        if i == 0:
            # The first queries of a JVM compile Spark's generated code: a warm-up run, timed
            # apart, so each size measures the tabulation and not the JIT.
            start = time.perf_counter()
            ts.tabulate(md, spec, engine=spark)
            results["spark_warmup_seconds"] = round(time.perf_counter() - start, 1)
        row: dict[str, Any] = {"synth_on_spark_seconds": synth_seconds}
        table, duck = measure(lambda md=md: ts.tabulate(md, spec, engine="duckdb"), repeat=1)
        protection, duck_ckm = measure(lambda table=table: method.protect(table), repeat=1)
        row["duckdb"] = {"tabulate_with_keys": duck, "ckm": duck_ckm,
                         "total_seconds": round(duck["seconds"] + duck_ckm["seconds"], 3)}
        if previous is not None and previous[1] * n / previous[0] > BUDGET:
            row["spark"] = {"skipped": f"projected {previous[1] * n / previous[0]:.0f} s > budget {BUDGET:.0f} s"}
            results["sizes"][str(n)] = row
            continue
        metrics = _PlanMetrics()
        try:
            spark_table, sp = measure(lambda md=md: ts.tabulate(md, spec, engine=spark), repeat=1)
            plan = metrics.read()
        finally:
            metrics.close()
        spark_protection, sp_ckm = measure(lambda t=spark_table: method.protect(t), repeat=1)
        release = protection.release.table
        spark_release = spark_protection.release.table
        identical = bool(np.array_equal(release.ids, spark_release.ids)
                         and np.array_equal(release.column("count"), spark_release.column("count"))
                         and np.array_equal(table.column("ckey_int"), spark_table.column("ckey_int")))
        row["spark"] = {
            "tabulate_with_keys": sp, "ckm": sp_ckm, "total_seconds": round(sp["seconds"] + sp_ckm["seconds"], 3),
            "plan": plan,
        }
        row["identical_release"] = identical
        row["cells_with_margins"] = table.n_cells
        row["cells_stored"] = table.n_stored
        row["spark_vs_duckdb"] = round(row["spark"]["total_seconds"] / row["duckdb"]["total_seconds"], 2)
        previous = (n, row["spark"]["total_seconds"])
        results["sizes"][str(n)] = row
    faster = [int(n) for n, r in results["sizes"].items() if isinstance(r.get("spark_vs_duckdb"), float)
              and r["spark_vs_duckdb"] < 1]
    results["spark_pays_off_from_persons"] = min(faster) if faster else None
    return results
