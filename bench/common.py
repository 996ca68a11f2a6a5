"""Shared benchmark helpers: the 1.5M-person census (cached), timing and peak memory."""

from __future__ import annotations

import gc
import os
import resource
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tabsafe.synth import SynthResult, synth_census

OUT = Path(__file__).resolve().parent / "out"
PERSONS = int(os.environ.get("TABSAFE_BENCH_PERSONS", "1500000"))
HYPERCUBE = ("region", "sex", "age", "activity", "occupation", "education", "citizenship")


def census() -> SynthResult:
    """The synthetic census of the benchmarks (seed 1), generated once and kept in bench/out."""
    directory = OUT / f"census-{PERSONS}"
    if (directory / "persons.parquet").is_file():
        return SynthResult(directory, directory / "persons.parquet", directory / "households.parquet",
                           directory / "meta.yaml", PERSONS, -1)
    OUT.mkdir(exist_ok=True)
    return synth_census(PERSONS, 1, directory)


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def measure(fn: Callable[[], Any], repeat: int = 3) -> tuple[Any, dict[str, float]]:
    """Run ``fn`` ``repeat`` times; best wall time and the peak RSS growth during the runs (MB)."""
    best = float("inf")
    result = None
    peak = 0.0
    for _ in range(repeat):
        gc.collect()
        base = _rss_mb()
        stop = threading.Event()
        top = [base]

        def sample(stop: threading.Event = stop, top: list[float] = top) -> None:
            while not stop.is_set():
                top[0] = max(top[0], _rss_mb())
                time.sleep(0.005)

        t = threading.Thread(target=sample, daemon=True)
        t.start()
        start = time.perf_counter()
        result = fn()
        elapsed = time.perf_counter() - start
        stop.set()
        t.join()
        best = min(best, elapsed)
        peak = max(peak, top[0])
    return result, {"seconds": round(best, 3), "peak_rss_mb": round(peak, 1),
                    "max_rss_mb_process": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
