"""Differencing audit on the seeds' worked examples (seed 000 §5.2 Tables 5.4–5.13; seed 001 §1).

Each case builds microdata that reproduce the published tables exactly, writes a SPEC, audits it
and checks the slivers against the seed's differenced table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from tabsafe.risk.differencing import AuditResult, DifferencingSpec, audit


def _release(tmp_path: Path, rows: list[tuple[int, dict[str, str]]], spec: dict[str, Any]) -> AuditResult:
    records = [r for n, r in rows for _ in range(n)]
    pd.DataFrame(records).to_csv(tmp_path / "persons.csv", index=False)
    path = tmp_path / "release.yaml"
    path.write_text(yaml.safe_dump({"data": "persons.csv", **spec}, sort_keys=False), encoding="utf-8")
    return audit(DifferencingSpec.from_yaml(path))


def _by(result: AuditResult, needle: str) -> pd.DataFrame:
    return result.slivers[result.slivers["sliver"].str.contains(needle, regex=False)]


def _box(result: AuditResult, **box: list[str]) -> dict[str, Any]:
    """The one sliver whose records are exactly ``box`` (base variable -> codes)."""
    hits = [r for r in result.slivers.to_dict("records") if r["box"] == box]
    assert len(hits) == 1, f"{len(hits)} slivers with box {box}"
    return hits[0]


# ---------------------------------------------------------------- geographical: Tables 5.4–5.6

HOURS = [">30", "16-30", "15 or less"]
T54 = {"Male": [50, 128, 39], "Female": [54, 140, 49]}   # Area A, 2001 OA definition
T55 = {"Male": [52, 130, 39], "Female": [55, 140, 49]}   # Area A, 1991 ED definition
T56 = {"Male": [2, 2, 0], "Female": [1, 0, 0]}           # the differenced table


def _geography_rows() -> list[tuple[int, dict[str, str]]]:
    rows = []
    for sex in ("Male", "Female"):
        for h, n_oa, n_ed in zip(HOURS, T54[sex], T55[sex], strict=True):
            rows.append((n_oa, {"block": "core", "household": "single", "sex": sex, "hours": h}))
            rows.append((n_ed - n_oa, {"block": "edge", "household": "single", "sex": sex, "hours": h}))
    # records outside the tables: other households in the edge block, another area
    rows.append((7, {"block": "edge", "household": "couple", "sex": "Female", "hours": "16-30"}))
    rows.append((30, {"block": "far", "household": "single", "sex": "Male", "hours": ">30"}))
    return rows


GEO_DERIVED = {
    "area_2001": {"from": "block", "codes": {"A": ["core"], "B": ["edge", "far"]}},
    "area_1991": {"from": "block", "codes": {"A": ["core", "edge"], "B": ["far"]}},
}


def test_tables_5_4_to_5_6_geographical_differencing(tmp_path: Path) -> None:
    result = _release(tmp_path, _geography_rows(), {
        "derived": GEO_DERIVED,
        "tables": [
            {"name": "Table 5.4", "by": ["hours", "sex"], "margins": False,
             "where": {"area_2001": ["A"], "household": ["single"]}},
            {"name": "Table 5.5", "by": ["hours", "sex"], "margins": False,
             "where": [{"area_1991": ["A"]}, {"household": ["single"]}]},
        ],
    })
    s = result.slivers
    assert len(s) == 6 and (s["order"] == 1).all() and (s["variable"] == "block").all()
    assert (s["tables"] == "Table 5.4; Table 5.5").all()
    assert s["sliver"].str.contains("(block=edge)", regex=False).all()
    got = {(r.sliver.split(", ")[1].removeprefix("sex="), r.sliver.split(", ")[0].removeprefix("hours=")): r.count
           for r in s.itertuples()}
    want = {(sex, h): n for sex, ns in T56.items() for h, n in zip(HOURS, ns, strict=True)}
    assert got == want  # Table 5.6: 2, 1 / 2, 0 / 0, 0
    assert sorted(result.small["count"]) == [1, 2, 2]
    assert len(result.zeros) == 3
    assert result.summary["small"] == 3 and result.summary["slivers"] == 6
    row = _by(result, "hours=>30, sex=Female").iloc[0]
    assert (row["outer"], row["inner"]) == ("Table 5.5[hours=>30, sex=Female]", "Table 5.4[hours=>30, sex=Female]")
    assert (row["outer_count"], row["inner_count"]) == (55, 54)


def test_tables_5_4_5_5_with_margins_add_the_female_total(tmp_path: Path) -> None:
    result = _release(tmp_path, _geography_rows(), {
        "derived": GEO_DERIVED,
        "tables": [{"name": name, "by": ["hours", "sex"], "where": {area: ["A"], "household": ["single"]}}
                   for name, area in (("OA", "area_2001"), ("ED", "area_1991"))],
    })
    counts = {r.sliver.split(" area_1991")[0]: r.count for r in result.slivers.itertuples()}
    # the margins difference too: all hours of each sex, each hours band, and everyone
    assert counts["sex=Female, household=single,"] == 1
    assert counts["sex=Male, household=single,"] == 4
    assert counts["hours=16-30, household=single,"] == 2
    assert counts["household=single,"] == 5
    assert len(result.slivers) == 12 and result.summary["small"] == 5


# ---------------------------------------------------------------- linking: Tables 5.7–5.10

def _linking_rows() -> list[tuple[int, dict[str, str]]]:
    cells = {  # (lives, works, sex): persons; Table 5.10 is the females' row
        ("A", "A", "M"): 21, ("A", "A", "F"): 1,
        ("A", "elsewhere", "M"): 58, ("A", "elsewhere", "F"): 5,
        ("A", "none", "M"): 9, ("A", "none", "F"): 8,
        ("elsewhere", "A", "M"): 23, ("elsewhere", "A", "F"): 4,
        ("elsewhere", "elsewhere", "M"): 40, ("elsewhere", "none", "F"): 12,
    }
    return [(n, {"lives": lv, "works": wk, "sex": sx}) for (lv, wk, sx), n in cells.items()]


def test_tables_5_7_to_5_10_linking(tmp_path: Path) -> None:
    # max_order 3 lists every sliver of order 2, small or not: the whole of Table 5.10
    result = _release(tmp_path, _linking_rows(), {
        "max_order": 3,
        "derived": {"employment": {"from": "works", "codes": {"Employed": ["A", "elsewhere"],
                                                              "Not employed": ["none"]}}},
        "tables": [
            {"name": "Table 5.7", "by": ["employment"], "where": {"lives": ["A"]}},
            {"name": "Table 5.8 working", "where": {"works": ["A"]}},
            {"name": "Table 5.8 living", "where": {"lives": ["A"]}},
            {"name": "Table 5.8 living and working", "where": {"lives": ["A"], "works": ["A"]}},
            {"name": "Table 5.9 living and working", "where": {"sex": ["M"], "lives": ["A"], "works": ["A"]}},
            {"name": "Table 5.9 living", "where": {"sex": ["M"], "lives": ["A"], "works": ["elsewhere"]}},
            {"name": "Table 5.9 working", "where": {"sex": ["M"], "lives": ["elsewhere"], "works": ["A"]}},
        ],
    })
    s = result.slivers
    # Table 5.10, females: living and working 1, living in A working elsewhere 5, working in A living elsewhere 4
    lw = _box(result, lives=["A"], works=["A"], sex=["F"])
    le = _box(result, lives=["A"], works=["elsewhere"], sex=["F"])
    wl = _box(result, lives=["elsewhere"], works=["A"], sex=["F"])
    assert (lw["count"], lw["order"], lw["small"]) == (1, 1, True)
    assert (le["count"], le["order"], le["small"]) == (5, 2, False)
    assert (wl["count"], wl["order"], wl["small"]) == (4, 2, False)
    assert lw["tables"] == "Table 5.8 living and working; Table 5.9 living and working"
    assert le["tables"] == "Table 5.7; Table 5.8 living and working; Table 5.9 living"
    assert wl["tables"] == "Table 5.8 working; Table 5.8 living and working; Table 5.9 working"
    assert le["outer_count"] == 63 and le["inner_count"] == 58   # (85 - 22) - 58
    # the Total row of Table 5.10: 63 and 27 are slivers of order 1 (not small)
    totals = s[(s["order"] == 1) & ~s["sliver"].str.contains("sex=")].set_index("sliver")["count"]
    assert sorted(totals) == [27, 63, 80]  # 80 = living in A, not working in A (employed elsewhere or not)
    assert sorted(result.small["count"]) == [1]
    assert result.summary["zero"] == 0


def test_linking_pairs_only_misses_the_chains(tmp_path: Path) -> None:
    rows = _linking_rows()
    spec = {
        "max_order": 1,
        "derived": {"employment": {"from": "works", "codes": {"Employed": ["A", "elsewhere"],
                                                              "Not employed": ["none"]}}},
        "tables": [
            {"name": "T57", "by": ["employment"], "where": {"lives": ["A"]}},
            {"name": "T58", "where": {"lives": ["A"], "works": ["A"]}},
            {"name": "T59", "where": {"sex": ["M"], "lives": ["A"], "works": ["elsewhere"]}},
        ],
    }
    pairs = _release(tmp_path, rows, spec)
    assert not pairs.slivers["sliver"].str.contains("sex=F").any()
    chains = _release(tmp_path, rows, {**spec, "max_order": 2})   # the last order keeps small ones only
    assert not chains.slivers["sliver"].str.contains("sex=F").any()
    chains = _release(tmp_path, rows, {**spec, "max_order": 2, "threshold": 6})
    female = chains.slivers[chains.slivers["sliver"].str.contains("sex=F")]
    assert list(female["count"]) == [5] and list(female["order"]) == [2] and female["small"].all()


# ---------------------------------------------------------------- recoding: Tables 5.11–5.13

BANDS_13 = ["<20", "20-24", "25-39", "40-59", "60-69", "70+"]
T513 = {"Male": [6, 1, 8, 5, 8, 4], "Female": [10, 0, 38, 51, 42, 32]}
HOURS_OF = {"<20": 15, "20-24": 22, "25-39": 30, "40-59": 45, "60-69": 65, "70+": 75}


def _hours_spec(margins: bool) -> dict[str, Any]:
    upper = {"40-59": [{"min": 40, "max": 59}], "60-69": [{"min": 60, "max": 69}], "70 or more": [{"min": 70, "max": 99}]}
    return {
        "derived": {
            "hours_a": {"from": "hours", "codes": {"<20": [{"min": 0, "max": 19}], "20-39": [{"min": 20, "max": 39}],
                                                   **upper}},
            "hours_b": {"from": "hours", "codes": {"<25": [{"min": 0, "max": 24}], "25-39": [{"min": 25, "max": 39}],
                                                   **upper}},
        },
        "tables": [{"name": "Table 5.11", "by": ["sex", "hours_a"], "margins": margins},
                   {"name": "Table 5.12", "by": ["sex", "hours_b"], "margins": margins}],
    }


def _hours_rows() -> list[tuple[int, dict[str, str]]]:
    return [(n, {"sex": sex, "hours": str(HOURS_OF[b])}) for sex, ns in T513.items()
            for b, n in zip(BANDS_13, ns, strict=True)]


def test_tables_5_11_to_5_13_recoding(tmp_path: Path) -> None:
    result = _release(tmp_path, _hours_rows(), _hours_spec(margins=False))
    s = result.slivers.set_index("sliver")
    assert len(s) == 2 and (s["order"] == 1).all() and (s["variable"] == "hours").all()
    male = s.filter(like="sex=Male,", axis=0)
    female = s.filter(like="sex=Female,", axis=0)
    assert list(male["count"]) == [1] and list(female["count"]) == [0]   # Table 5.13's 20–24 column
    assert male.index[0].endswith("(hours=22)")
    assert {male["outer_count"].iloc[0], male["inner_count"].iloc[0]} in ({7, 6}, {9, 8})
    assert list(result.small["count"]) == [1] and len(result.zeros) == 1


def test_tables_5_11_5_12_with_margins_add_the_sex_total(tmp_path: Path) -> None:
    result = _release(tmp_path, _hours_rows(), _hours_spec(margins=True))
    s = result.slivers
    assert len(s) == 3   # the 20–24 band for males, females and both; sibling unions are no news
    both = s[~s["sliver"].str.contains("sex=")]
    assert list(both["count"]) == [1] and both["small"].all()
    assert result.summary["redundant"] > 0


# ---------------------------------------------------------------- seed 001 §1: Remainder of ACT

CDS = {"CD1": 210, "CD2": 115, "CD3": 65, "CD4": 25, "CD5": 10, "CD6": 3, "CD7": 2}


def _act_rows() -> list[tuple[int, dict[str, str]]]:
    rows = []
    for cd, n in CDS.items():
        old = 1 if cd in ("CD1", "CD2") else 0   # two women aged 70+: a small sub-population
        rows.append((n - old - n // 2, {"cd": cd, "sex": "M", "age70": "under 70"}))
        rows.append((n // 2, {"cd": cd, "sex": "F", "age70": "under 70"}))
        rows.append((old, {"cd": cd, "sex": "F", "age70": "70+"}))
    return [r for r in rows if r[0] > 0]


def test_remainder_of_act_user_geography(tmp_path: Path) -> None:
    six = sorted(CDS, key=CDS.get, reverse=True)[:6]
    result = _release(tmp_path, _act_rows(), {
        "threshold": 5,
        "derived": {"sla": {"from": "cd", "codes": {"Remainder of ACT": list(CDS)}},
                    "user_area": {"from": "cd", "codes": {"six largest CDs": six}}},
        "tables": [{"name": "SLA", "by": ["sla", "sex"]}, {"name": "six CDs", "by": ["user_area", "sex"]}],
    })
    s = result.slivers
    assert (s["sliver"].str.endswith("(cd=CD7)")).all() and len(s) == 3
    got = {("F" if "sex=F" in x else "M" if "sex=M" in x else "all"): n for x, n in zip(s["sliver"], s["count"], strict=True)}
    assert got == {"all": 2, "F": 1, "M": 1}   # a CD with fewer than 5 persons, by sex
    assert result.small["count"].sum() == 4 and len(result.small) == 3
    assert sum(CDS.values()) == 430 and (s["outer"].str.startswith("SLA[")).all()


def test_remainder_of_act_sub_population(tmp_path: Path) -> None:
    result = _release(tmp_path, _act_rows(), {
        "threshold": 5,
        "tables": [{"name": "all ages", "by": ["sex"]},
                   {"name": "aged under 70", "by": ["sex"], "where": {"age70": ["under 70"]}}],
    })
    s = result.slivers.set_index("sliver")["count"]
    assert len(s) == 3   # males: all under 70, the difference is an informative zero
    assert s.filter(like="sex=F").tolist() == [2] and s.filter(like="sex=M").tolist() == [0]
    assert s["all but not age70=under 70 (age70=70+)"] == 2
    assert result.summary["small"] == 2 and result.summary["zero"] == 1


def test_threshold_override_and_identical_boxes(tmp_path: Path) -> None:
    rows = _act_rows()
    spec = {"tables": [{"name": "a", "by": ["sex"]}, {"name": "b", "by": ["sex"], "where": {"cd": list(CDS)}}]}
    same = _release(tmp_path, rows, spec)
    assert same.slivers.empty and same.summary["distinct_boxes"] == 3  # same cells, no slivers
    spec2 = {"tables": [{"name": "all", "by": ["cd"]}, {"name": "M", "by": ["cd"], "where": {"sex": ["M"]}}]}
    first = _release(tmp_path, rows, spec2)
    path = tmp_path / "release.yaml"
    wider = audit(DifferencingSpec.from_yaml(path), threshold=120)
    assert first.summary["small"] < wider.summary["small"]
    assert wider.threshold == 120 and set(wider.small["count"]) <= set(range(1, 120))


@pytest.mark.parametrize("order", [1, 2, 3])
def test_counts_match_a_direct_count(tmp_path: Path, order: int) -> None:
    # every reported sliver's count equals a direct count of its records
    rows = _linking_rows()
    result = _release(tmp_path, rows, {
        "max_order": order, "threshold": 100,
        "derived": {"employment": {"from": "works", "codes": {"Employed": ["A", "elsewhere"], "Not employed": ["none"]}}},
        "tables": [{"name": "T57", "by": ["employment", "sex"], "where": {"lives": ["A"]}},
                   {"name": "T58", "by": ["lives"], "where": {"works": ["A"]}},
                   {"name": "T59", "by": ["works"], "where": {"sex": ["M"]}}],
    })
    frame = pd.DataFrame([r for n, r in rows for _ in range(n)])
    assert not result.slivers.empty and result.slivers["order"].max() <= order
    for r in result.slivers.itertuples():
        inside = pd.Series(True, index=frame.index)
        for var, codes in r.box.items():
            inside &= frame[var].isin(codes)
        assert r.count == int(inside.sum()) == r.outer_count - r.inner_count


# ---------------------------------------------------------------- the filter language in 'where'

def test_tables_5_4_to_5_6_with_filter_text(tmp_path: Path) -> None:
    # the same release as above, its filters written in tabsafe's filter language
    mapping = _release(tmp_path, _geography_rows(), {
        "derived": GEO_DERIVED,
        "tables": [{"name": name, "by": ["hours", "sex"], "margins": False, "where": {area: ["A"], "household": ["single"]}}
                   for name, area in (("Table 5.4", "area_2001"), ("Table 5.5", "area_1991"))],
    })
    text = _release(tmp_path, _geography_rows(), {
        "derived": GEO_DERIVED,
        "tables": [{"name": "Table 5.4", "by": ["hours", "sex"], "margins": False,
                    "where": "area_2001 = A and household = single"},
                   {"name": "Table 5.5", "by": ["hours", "sex"], "margins": False,
                    "where": "household in ('single') and not area_1991 != A"}],
    })
    pd.testing.assert_frame_equal(text.slivers, mapping.slivers)
    got = {(r.box["sex"][0], r.box["hours"][0]): r.count for r in text.slivers.itertuples()}
    assert got == {(sex, h): n for sex, ns in T56.items() for h, n in zip(HOURS, ns, strict=True)}   # Table 5.6
    assert all(r.box["block"] == ["edge"] for r in text.slivers.itertuples())


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_table_5_13_from_a_numeric_sub_population(tmp_path: Path, fmt: str) -> None:
    # Table 5.13's 20–24 column from one table and a sub-population written as comparisons on
    # the base variable: the CSV's hours are text (compared as numbers), the Parquet's integers
    records = [r for n, r in _hours_rows() for _ in range(n)]
    frame = pd.DataFrame(records)
    if fmt == "csv":
        frame.to_csv(tmp_path / "persons.csv", index=False)
    else:
        frame.assign(hours=frame["hours"].astype("int16")).to_parquet(tmp_path / "persons.parquet", index=False)
    spec = {"data": f"persons.{fmt}", "tables": [
        {"name": "all", "by": ["sex"]},
        {"name": "not 20-24", "by": ["sex"], "where": "not (hours >= 20 and hours < 25)"},
    ]}
    (tmp_path / "release.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    result = audit(DifferencingSpec.from_yaml(tmp_path / "release.yaml"))
    got = {r.box.get("sex", ["both"])[0]: (r.count, r.box["hours"]) for r in result.slivers.itertuples()}
    assert got == {"Male": (1, ["22"]), "Female": (0, ["22"]), "both": (1, ["22"])}
    assert all(r.sliver.endswith("(hours=22)") for r in result.slivers.itertuples())


# ---------------------------------------------------------------- codes in the engine's order

def _blocks_release(tmp_path: Path, extra: dict[str, Any]) -> AuditResult:
    rows = [(4, {"block": f"A{i}", "sex": "F"}) for i in range(1, 11)] + [(1, {"block": "A10", "sex": "M"})]
    return _release(tmp_path, rows, {"threshold": 100, "max_order": 1, **extra})


SOME_BLOCKS = [{"name": "all", "by": ["sex"]},
               {"name": "some", "by": ["sex"], "where": {"block": ["A1", "A3", "A4", "A5", "A6", "A7"]}}]


def test_codes_in_natural_order(tmp_path: Path) -> None:
    # A2 before A10, as the engine sorts a codelist taken from the data (planner.natural_key)
    result = _blocks_release(tmp_path, {"tables": SOME_BLOCKS})
    assert result.slivers["box"].map(lambda b: b["block"]).tolist() == [["A2", "A8", "A9", "A10"]] * 3
    assert result.slivers["sliver"].tolist() == [
        f"{who}all but not block in {{A1, A3..A7}} (block in {{A2, A8..A10}})" for who in ("sex=M, ", "sex=F, ", "")]
    # the cells of a table by block come in the same order: one sliver per block, equal counts
    per_block = _blocks_release(tmp_path, {"tables": [{"name": "blocks", "by": ["block"]},
                                                      {"name": "men", "by": ["block"], "where": {"sex": ["M"]}}]})
    women = per_block.slivers[per_block.slivers["box"].map(lambda b: "block" in b)]
    assert women["outer"].tolist() == [f"blocks[block=A{i}]" for i in range(1, 11)]
    assert women["count"].tolist() == [4] * 10


def test_declared_codelist_order_wins(tmp_path: Path) -> None:
    order = ["A10", "A2", "A1"] + [f"A{i}" for i in range(3, 10)]
    (tmp_path / "meta.yaml").write_text(yaml.safe_dump({"variables": {"block": {"codes": order}}}), encoding="utf-8")
    result = _blocks_release(tmp_path, {"meta": "meta.yaml", "tables": SOME_BLOCKS})
    assert result.slivers["box"].map(lambda b: b["block"]).tolist() == [["A10", "A2", "A8", "A9"]] * 3
    # runs follow the codelist: A1, A3, ..., A7 are consecutive in it
    assert result.slivers["sliver"].str.endswith("but not block in {A1..A7} (block in {A10, A2, A8, A9})").all()
