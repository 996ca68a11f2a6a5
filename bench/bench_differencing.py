"""Differencing audit of a census-like release on the 1.5M-person synthetic census.

Four tables of 12K–25K cells each: area × age × sex and a user geography (each area plus one
small area of the next) × age × sex, both also with a second broad-age banding (one of them on
the employed only, a filter in tabsafe's filter language). The audit reads its counts through
the engine (``planner.grouped_counts``). Baseline in the same run: grouping the persons by the
base variables (small area, age, sex, activity) with a bare DuckDB — the data pass any audit needs.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import duckdb
import yaml
from common import census, measure

from tabsafe.model.hierarchy import Hierarchy
from tabsafe.risk.differencing import DifferencingSpec, audit


def _spec(directory: Path, out: Path) -> Path:
    hrc = Hierarchy.from_hrc(directory / "hierarchies" / "small_area.hrc")
    areas = [c for c in hrc.order if hrc.depth(c) == 2]
    small = {a: list(hrc.children(a)) for a in areas}
    user = {f"U{a}": small[a] + small[areas[(i + 1) % len(areas)]][:1] for i, a in enumerate(areas)}
    ages = Hierarchy.from_yaml(directory / "hierarchies" / "age.yaml")
    bands = ages.leaves
    broad_a = {b: list(ages.children(b)) for b in ages.children(ages.total)}
    broad_b = {f"{bands[i]}+": list(bands[i:i + 4]) for i in range(0, len(bands), 4)}
    spec = {
        "data": str(directory / "persons.parquet"),
        "meta": str(directory / "meta.yaml"),
        "derived": {
            "area": {"from": "small_area", "codes": small},
            "user_area": {"from": "small_area", "codes": user},
            "age_a": {"from": "age", "codes": broad_a},
            "age_b": {"from": "age", "codes": broad_b},
        },
        "tables": [
            {"name": "area x age x sex", "by": ["area", "age", "sex"]},
            {"name": "user area x age x sex", "by": ["user_area", "age", "sex"]},
            {"name": "area x broad age b x sex", "by": ["area", "age_b", "sex"]},
            {"name": "employed: user area x broad age a x sex", "by": ["user_area", "age_a", "sex"],
             "where": "activity = EMP"},
        ],
    }
    path = out / "release.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


def run() -> dict:
    data = census()
    with tempfile.TemporaryDirectory() as tmp:
        path = _spec(Path(data.directory), Path(tmp))
        spec = DifferencingSpec.from_yaml(path)

        def baseline() -> int:
            con = duckdb.connect()
            n = con.sql(f"SELECT small_area, age, sex, activity, count(*) FROM read_parquet('{data.persons}') "
                        "GROUP BY ALL").to_arrow_table().num_rows
            con.close()
            return n

        rows, base = measure(baseline, repeat=2)
        pairs, ours_pairs = measure(lambda: audit(spec, max_order=1), repeat=1)
        chains, ours_chains = measure(lambda: audit(spec), repeat=1)
    return {
        "persons": data.n_persons,
        "pairs_only": {"summary": dict(pairs.summary), **ours_pairs},
        "with_order_2": {"summary": dict(chains.summary), **ours_chains},
        "baseline_groupby_base_variables": {**base, "groups": rows},
        "first_small": pairs.small["sliver"].head(2).tolist(),
    }
