"""Run every benchmark (bench/bench_*.py) and print one JSON document.

Each module defines ``run() -> dict``. ``python bench/run.py [name ...]`` runs a selection,
e.g. ``python bench/run.py tabulate``.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def main(argv: list[str]) -> int:
    names = argv or sorted(p.stem.removeprefix("bench_") for p in HERE.glob("bench_*.py"))
    results = {}
    for name in names:
        module = importlib.import_module(f"bench_{name}")
        print(f"running {name} …", file=sys.stderr)
        results[name] = module.run()
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
