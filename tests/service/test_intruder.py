"""A determined intruder against the running table builder (issue #26), over real HTTP.

The carrier attack: a population the release rules refuse is rebuilt as the average of many
differences ``T(X + B_i) - T(B_i)`` over carriers ``B_i`` (areas, filters, groups of a recode).
Each difference alone shows the small table with the cell key method's noise of two cells; the
average of many removes it. The differencing record (:mod:`tabsafe.service.population`) must
leave the intruder no better than one difference: the cells it recovers exactly are no more than
the single difference's stated risk (:func:`tabsafe.evaluate.differencing_risk`) allows.
"""

from __future__ import annotations

import math
from collections import defaultdict
from itertools import combinations

import numpy as np
import pandas as pd
import pytest

from tabsafe.evaluate import differencing_risk
from tabsafe.registry import build_method
from tabsafe.service.settings import DEFAULT_CHAIN
from tests.service.conftest import Server, add_key, write_config

pytestmark = [pytest.mark.filterwarnings("ignore::ResourceWarning"), pytest.mark.slow]

RULES = {"max_dimensions": 3, "max_cells": 20_000, "min_population": 20, "min_area_population": 60,
         "min_mean_cell_size": None, "max_small_cell_share": None}
DIMS = [{"variable": "sex"}, {"variable": "activity"}]


@pytest.fixture(scope="module")
def intruded(small_census, tmp_path_factory):
    state = tmp_path_factory.mktemp("intruder")
    config = write_config(state / "service.yaml", state, RULES, limits={"rate_per_minute": 100_000},
                          differencing={"populations_per_key": 100_000})
    key = add_key(small_census.directory, config, "intruder")
    server = Server(small_census.directory, config).start()
    persons = pd.read_parquet(small_census.persons).astype({c: str for c in ("sex", "area", "small_area",
                                                                                 "citizenship", "activity")})
    try:
        yield server, key, persons
    finally:
        server.stop()


def _truth(rows: pd.DataFrame) -> dict[tuple[str, str], int]:
    """The true cells of the target, margins included, keyed as the service names them."""
    out: dict[tuple[str, str], int] = defaultdict(int)
    for sex, activity in zip(rows["sex"], rows["activity"]):
        for s in (sex, "Total"):
            for a in (activity, "Total"):
                out[(s, a)] += 1
    return out


def _cells(body: dict) -> dict[tuple[str, str], int]:
    return {(r[0], r[1]): r[-1] for r in body["rows"]}


def _average_attack(server, key, pairs, truth) -> tuple[int, list[float], int]:
    """Average the differences of the answered pairs; the cells recovered exactly, the stated
    single-difference risk of each target cell, and how many pairs were answered."""
    diffs: dict[tuple[str, str], list[int]] = defaultdict(list)
    answered = 0
    for with_x, without_x in pairs:
        s1, b1, _ = server.table(with_x, key)
        s2, b2, _ = server.table(without_x, key)
        assert s1 in (200, 409) and s2 in (200, 409), (b1, b2)
        for s, b in ((s1, b1), (s2, b2)):
            if s == 409:
                assert b["error"]["type"] == "refused"
        if s1 == 200 and s2 == 200:
            answered += 1
            c1, c2 = _cells(b1), _cells(b2)
            for cell in set(c1) | set(c2):
                diffs[cell].append(c1.get(cell, 0) - c2.get(cell, 0))
    ptable = build_method("ckm", DEFAULT_CHAIN[0]["params"]).ptable_table
    hits, risks = 0, []
    for cell, n in truth.items():
        if n == 0:
            continue
        risks.append(differencing_risk(ptable, n))
        if diffs.get(cell) and round(float(np.mean(diffs[cell]))) == n:
            hits += 1
    return hits, risks, answered


def _judge(hits: int, risks: list[float]) -> None:
    expected = sum(risks)
    sd = math.sqrt(sum(p * (1 - p) for p in risks))
    assert hits <= expected + 3 * sd + 1, (hits, expected, sd)


def test_carrier_areas_do_not_rebuild_a_refused_area(intruded):
    server, key, persons = intruded
    sizes = persons["area"].value_counts()
    targets = [a for a in sizes.index if 25 <= sizes[a] < 50][:3]
    carriers = [a for a in sizes.index if sizes[a] >= 80][:60]
    assert len(targets) == 3 and len(carriers) == 60
    hits, risks, answered = 0, [], 0
    for x in targets:
        # refused when asked directly
        status, body, _ = server.table({"dimensions": DIMS, "area": [x]}, key)
        assert status == 409 and body["error"]["rule"] == "min_area_population"
        pairs = [({"dimensions": DIMS, "area": sorted([x, b])}, {"dimensions": DIMS, "area": [b]}) for b in carriers]
        h, r, a = _average_attack(server, key, pairs, _truth(persons[persons["area"] == x]))
        hits, risks, answered = hits + h, risks + r, answered + a
    assert len(risks) >= 20
    _judge(hits, risks)
    assert answered <= 3  # at most the first difference of each target


def test_carrier_filters_do_not_rebuild_a_refused_sub_population(intruded):
    server, key, persons = intruded
    target = "citizenship = NS and age_year >= 40"
    rows = persons[(persons["citizenship"] == "NS") & (persons["age_year"] >= 40)]
    assert 5 <= len(rows) < 20
    status, body, _ = server.table({"dimensions": DIMS, "where": target}, key)
    assert status == 409 and body["error"]["rule"] == "min_population"
    blocks = persons["area"].value_counts()
    carriers = [a for a in blocks.index if blocks[a] >= 80 and not ((persons["area"] == a).values
                                                                      & persons.index.isin(rows.index)).any()][:80]
    pairs = [({"dimensions": DIMS, "where": f"({target}) or small_area = {b}"},
              {"dimensions": DIMS, "where": f"small_area = {b} and not ({target})"}) for b in carriers]
    hits, risks, answered = _average_attack(server, key, pairs, _truth(rows))
    _judge(hits, risks)
    assert answered <= 1


def test_carrier_groups_do_not_rebuild_a_refused_group(intruded):
    server, key, persons = intruded
    region = persons[persons["area"].str.startswith("R1A0")]
    areas = sorted(region["area"].unique())
    rows = region[region["citizenship"] == "NS"]
    assert 5 <= len(rows) < 20 and len(region) >= 60
    others = ["NAT", "EU", "EUR", "ROW"]
    subsets = [list(c) for k in range(1, 5) for c in combinations(others, k)]
    # more carriers: the same groups within sub-populations that keep every target record
    wheres = [None] + [f"age_year < {a} or citizenship = NS" for a in range(20, 90, 8)]
    pairs = []
    for s in subsets:
        for where in wheres:
            base = {"area": areas, **({"where": where} if where else {})}
            pairs.append(({**base, "dimensions": [{"variable": "citizenship", "groups": [
                              {"label": "g", "codes": ["NS", *s]}]}, *DIMS]},
                          {**base, "dimensions": [{"variable": "citizenship", "groups": [
                              {"label": "g", "codes": s}]}, *DIMS]}))
    diffs: dict[tuple[str, str], list[int]] = defaultdict(list)
    answered = 0
    for w, wo in pairs:
        (s1, b1, _), (s2, b2, _) = server.table(w, key), server.table(wo, key)
        assert s1 in (200, 409) and s2 in (200, 409), (b1, b2)
        if s1 == s2 == 200:
            answered += 1
            c1 = {(r[1], r[2]): r[-1] for r in b1["rows"] if r[0] == "g"}
            c2 = {(r[1], r[2]): r[-1] for r in b2["rows"] if r[0] == "g"}
            for cell in c1:
                diffs[cell].append(c1[cell] - c2.get(cell, 0))
    truth = _truth(rows)
    ptable = build_method("ckm", DEFAULT_CHAIN[0]["params"]).ptable_table
    hits = sum(1 for c, n in truth.items() if n and diffs.get(c) and round(float(np.mean(diffs[c]))) == n)
    risks = [differencing_risk(ptable, int(n)) for n in truth.values() if n > 0]
    assert len(pairs) >= 150
    _judge(hits, risks)
    assert answered <= 1
