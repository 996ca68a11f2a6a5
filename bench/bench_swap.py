"""Targeted record swapping of the synthetic census, whole process, against tabulating it.

``tabsafe swap persons.parquet --geography region,area,small_area --risk-vars sex,age --k 3
--swaprate 0.05 --similar household_size`` runs as its own process (the user's time: start-up,
reading, swapping, writing the swapped records and the report), timed with its peak memory
(``/usr/bin/time``, or ``getrusage`` of the child). In the same run, ``tabsafe tabulate`` of the
same file (small_area × sex × age with every margin) gives the scale of an ordinary job. Both at
1.5M persons (about 630K households) and at 15M (``TABSAFE_BENCH_SWAP_LARGE=0`` skips it).

Reference (issue #14, same data, hierarchy, k, swap rate and similarity variable): sdcMicro
5.8.1's ``recordSwap`` (C++) takes about 25 s (17 s in its C++ core) and 1.5 GB, and swaps
61,592 households (9.75%). Target: under 5 s and 600 MB at 1.5M, linear growth to 15M.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import OUT, census

from tabsafe.synth import SynthResult, synth_census

SWAP = ["--geography", "region,area,small_area", "--risk-vars", "sex,age", "--k", "3", "--swaprate", "0.05",
        "--similar", "household_size", "--seed", "1"]
# the console script a user runs (python -m tabsafe.cli when it is not beside the interpreter)
_SCRIPT = Path(sys.executable).parent / "tabsafe"
TABSAFE = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "tabsafe.cli"]
REFERENCE = {"tool": "sdcMicro 5.8.1 recordSwap (C++)", "seconds": 25, "core_seconds": 17, "peak_mb": 1500,
             "households_swapped": 61592, "share_households_swapped": 0.0975}


def run_process(cmd: list[str]) -> dict[str, float]:
    """Wall time and peak resident memory of one command run as its own process."""
    timer = shutil.which("time") or ("/usr/bin/time" if Path("/usr/bin/time").exists() else None)
    if timer:
        with tempfile.NamedTemporaryFile("r", suffix=".txt") as f:
            start = time.perf_counter()
            subprocess.run([timer, "-f", "%e %M %U %S", "-o", f.name, *cmd], check=True, stdout=subprocess.DEVNULL)
            wall = time.perf_counter() - start
            _, peak_kb, user, system = f.read().split()[-4:]
        # CPU seconds as well: on a shared machine they say more than the wall clock
        return {"seconds": round(wall, 3), "cpu_seconds": round(float(user) + float(system), 2),
                "peak_rss_mb": round(int(peak_kb) / 1024, 1)}
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # the largest child so far
    return {"seconds": round(wall, 3), "peak_rss_mb": round(peak, 1), "note": "peak over all children so far"}


def large_census(persons: int) -> SynthResult:
    directory = OUT / f"census-{persons}"
    if (directory / "persons.parquet").is_file():
        return SynthResult(directory, directory / "persons.parquet", directory / "households.parquet",
                           directory / "meta.yaml", persons, -1)
    OUT.mkdir(exist_ok=True)
    return synth_census(persons, 1, directory)


def one(data: SynthResult, work: Path) -> dict:
    swapped, report = work / "swapped.parquet", work / "report.json"
    table = work / "table.parquet"
    # run twice (warm, then measured) over its own outputs: --force
    cmd = [*TABSAFE, "swap", str(data.persons), *SWAP, "--out", str(swapped), "--report", str(report), "--quiet",
           "--force"]
    tab = [*TABSAFE, "tabulate", str(data.persons), "--by", "small_area,sex,age", "--zero-cells", "omit",
           "--out", str(table), "--quiet"]
    run_process(cmd)  # warm the file cache and the imports for both
    swap = run_process(cmd)
    tabulate = run_process(tab)
    figures = json.loads(report.read_text())["figures"]
    return {
        "persons": figures["records"],
        "households": figures["households"],
        "tabsafe_swap": swap,
        "tabsafe_tabulate_small_area_sex_age": tabulate,
        "ratio_swap_vs_tabulate": round(swap["seconds"] / tabulate["seconds"], 3),
        "swaps": figures["pairs"],
        "households_swapped": figures["households_swapped"],
        "share_households_swapped": figures["share_households_swapped"],
        "targeted_swaps": figures["targeted_pairs"],
        "top_up_swaps": figures["top_up_pairs"],
        "records_moved_across": figures.get("records_moved_across"),
        "donors": figures.get("donors"),
        "notes": json.loads(report.read_text()).get("notes", []),
        "command": " ".join(["tabsafe", *cmd[len(TABSAFE):]]),
    }


def sdcmicro_available() -> bool:
    """Whether R's sdcMicro is installed here (then recordSwap could run on the same data)."""
    rscript = shutil.which("Rscript")
    if not rscript:
        return False
    done = subprocess.run([rscript, "-e", "quit(status = !requireNamespace('sdcMicro', quietly = TRUE))"],
                          capture_output=True)
    return done.returncode == 0


def run() -> dict:
    out: dict = {"reference": REFERENCE, "target": {"seconds": 5, "peak_mb": 600, "growth": "linear to 15M"},
                 "sdcmicro_here": sdcmicro_available()}
    if not out["sdcmicro_here"]:
        out["sdcmicro_note"] = ("R's sdcMicro is not installed on this machine: recordSwap was not run; the reference "
                                "figures are issue #14's measurement on the same data and parameters")
    with tempfile.TemporaryDirectory(dir=OUT if OUT.exists() else None) as tmp:
        out["census_1_5M"] = one(census(), Path(tmp))
        if os.environ.get("TABSAFE_BENCH_SWAP_LARGE", "1") != "0":
            big = one(large_census(10 * int(out["census_1_5M"]["persons"])), Path(tmp))
            out["census_15M"] = big
            small = out["census_1_5M"]
            out["growth_15M_vs_1_5M"] = {
                "persons": round(big["persons"] / small["persons"], 2),
                "seconds": round(big["tabsafe_swap"]["seconds"] / small["tabsafe_swap"]["seconds"], 2),
                "peak_rss_mb": round(big["tabsafe_swap"]["peak_rss_mb"] / small["tabsafe_swap"]["peak_rss_mb"], 2),
            }
    return out


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
