"""How fast an intruder searches seeds against a release (issue #25): the replay rate, and what it
makes of a 30-bit seed (the earlier ``randbelow(10**9)``) and of a drawn 63-bit one.

The intruder knows the method and its parameters (public in the report) and the true count of a
few cells (their own households, a total published elsewhere). For each candidate seed they replay
barnardisation's draws over the release's non-zero inner cells and keep the seeds that give every
known cell its published value; then the seed gives back every original inner cell. Measured on a
table of 400 inner cells; the search over 2**16 candidates holding the true seed shows it works
(a 2**30 search is the same loop, 16,384 times longer).
"""

from __future__ import annotations

import os
import resource
import time

import numpy as np


def _replay(seed: int, n: int, p: float) -> np.ndarray:
    from tabsafe.seeds import stream_seed

    u = np.random.default_rng(stream_seed(seed, 0)).random(n)
    return np.where(u < p / 2, -1, np.where(u < p, 1, 0))


def run() -> dict:
    from tabsafe.protect.barnardisation import barnardise
    from tabsafe.seeds import draw_seed, stream_seed

    rng = np.random.default_rng(1)
    n, p = 400, 0.2
    original = rng.integers(1, 30, n)  # inner cells of a 20,000-person table: all non-zero
    true_seed = int(rng.integers(0, 2**16))
    released = barnardise(original, p, np.random.default_rng(stream_seed(true_seed, 0)))
    known = rng.choice(n, 40, replace=False)  # the cells the intruder knows
    cpu0 = time.process_time()
    wall0 = time.perf_counter()
    found = [s for s in range(2**16)
             if np.array_equal(original[known] + _replay(s, n, p)[known], released[known])]
    cpu = time.process_time() - cpu0
    wall = time.perf_counter() - wall0
    rate = 2**16 / cpu
    recovered = (released - _replay(found[0], n, p)) if found else None
    drawn = draw_seed()
    return {
        "candidates": 2**16, "cpu_s": round(cpu, 2), "wall_s": round(wall, 2),
        "replays_per_cpu_second": round(rate),
        "seeds_found": found, "true_seed": true_seed,
        "original_cells_recovered": int((recovered == original).sum()) if recovered is not None else 0,
        "inner_cells": n,
        "search_2e30_core_hours": round(2**30 / rate / 3600, 1),
        "search_2e30_on_the_cores_here_hours": round(2**30 / rate / 3600 / (os.cpu_count() or 1), 1),
        "search_2e63_core_years": float(f"{2**62 / rate / 3600 / 24 / 365:.3g}"),
        "a_drawn_seed_bits": drawn.bit_length(),
        "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
