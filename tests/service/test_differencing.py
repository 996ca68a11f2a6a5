"""The differencing attack of seed 001 §1 against the running service.

An area against the same area less one small building block, and a population against a
sub-population, differenced cell by cell: the published difference equals the true small count
no more often than the cell key method's stated risk, computed exactly from the p-table by
:func:`tabsafe.evaluate.differencing_risk`."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from tabsafe.evaluate import differencing_risk
from tabsafe.registry import build_method
from tabsafe.service.settings import DEFAULT_CHAIN

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


def _cells(body: dict) -> dict[str, int]:
    return {row[0]: row[-1] for row in body["rows"]}


def _judge(hits: int, risks: list[float]) -> None:
    expected = sum(risks)
    sd = math.sqrt(sum(p * (1 - p) for p in risks))
    # one-sided: the attack succeeds no more often than the stated risk (3 sd of slack) …
    assert hits <= expected + 3 * sd + 1, (hits, expected, sd)
    # … and the stated risk is the real one (the attack does succeed about that often)
    assert hits >= expected - 3 * sd - 1, (hits, expected, sd)


def test_area_minus_one_small_block(served, small_census):
    server, key, _ = served
    persons = pd.read_parquet(small_census.persons, columns=["area", "small_area", "sex"])
    persons = persons.astype(str)
    ptable = build_method("ckm", DEFAULT_CHAIN[0]["params"]).ptable_table
    hits, risks, pairs = 0, [], 0
    rng = np.random.default_rng(3)
    areas = sorted(persons["area"].unique())
    for area in rng.choice(areas, size=90, replace=False):
        inside = persons[persons["area"] == area]
        blocks = sorted(inside["small_area"].unique())
        if len(blocks) < 2:
            continue
        status, whole, _ = server.table({"dimensions": [{"variable": "sex"}], "area": [area]}, key)
        assert status == 200, whole
        for block in rng.choice(blocks, size=min(3, len(blocks)), replace=False):
            rest = [b for b in blocks if b != block]
            status, less, _ = server.table({"dimensions": [{"variable": "sex"}], "area": rest}, key)
            assert status == 200, less
            pairs += 1
            for cell, sel in (("Total", slice(None)), ("1", inside["sex"] == "1"), ("2", inside["sex"] == "2")):
                group = inside[sel] if cell != "Total" else inside
                big = len(group)
                n = int((group["small_area"] == block).sum())
                if n == 0:
                    continue
                diff = _cells(whole)[cell] - _cells(less)[cell]
                hits += int(diff == n)
                risks.append(differencing_risk(ptable, n, total=big))
    assert pairs >= 150 and len(risks) >= 300
    _judge(hits, risks)


def test_population_minus_a_sub_population(served, small_census):
    server, key, _ = served
    persons = pd.read_parquet(small_census.persons, columns=["area", "sex", "age_year"])
    persons["area"] = persons["area"].astype(str)
    persons["sex"] = persons["sex"].astype(str)
    ptable = build_method("ckm", DEFAULT_CHAIN[0]["params"]).ptable_table
    hits, risks = 0, []
    for area in sorted(persons["area"].unique())[:120]:
        inside = persons[persons["area"] == area]
        q = {"dimensions": [{"variable": "sex"}], "area": [area]}
        whole = _cells(server.table(q, key)[1])
        status, body, _ = server.table({**q, "where": "age_year < 75"}, key)
        assert status == 200
        younger = _cells(body)
        for cell in ("Total", "1", "2"):
            group = inside if cell == "Total" else inside[inside["sex"] == cell]
            n = int((group["age_year"] >= 75).sum())
            if n == 0:
                continue
            hits += int(whole[cell] - younger[cell] == n)
            risks.append(differencing_risk(ptable, n, total=len(group)))
    assert len(risks) >= 150
    _judge(hits, risks)
