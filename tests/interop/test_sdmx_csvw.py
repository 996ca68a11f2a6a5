"""Releases as SDMX-CSV and as CSV with CSV-W metadata, checked by validators from PyPI:
``sdmx1`` parses the SDMX-CSV 2.0 against a data structure (its header, columns and
observations; the codes are then checked against the structure's code lists), ``csvw`` validates
the CSV against its metadata (datatypes, codelists as formats, flags, primary key)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import csvw
import numpy as np
import pandas as pd
import pytest
import sdmx
from sdmx.model import common, v30

import tabsafe as ts
from tabsafe.cli import main
from tabsafe.errors import InputError
from tabsafe.interop.csvw import csvw_metadata
from tabsafe.interop.sdmx import sdmx_csv
from tabsafe.io import release_arrow


def _protected(method: str = "suppress", params: dict | None = None) -> ts.Protection:
    rng = np.random.default_rng(3)
    df = pd.DataFrame({"area": rng.choice(["a1", "a2", "a3", "a4"], 60, p=[.4, .3, .2, .1]),
                       "sex": rng.choice(["1", "2"], 60), "rkey": rng.random(60).round(10)})
    t = ts.tabulate(ts.Microdata.from_frame(df), ["area", "sex"], key="rkey")
    return ts.build_method(method, params or {"min_freq": 4}).protect(t)


def _dsd(protection: ts.Protection) -> v30.DataStructureDefinition:
    dsd = v30.DataStructureDefinition(id="TABLE", maintainer=common.Agency(id="TABSAFE"), version="1.0")

    def codelist(cid: str, codes: list[str]) -> common.Codelist:
        cl = common.Codelist(id=cid)
        for c in codes:
            cl.append(common.Code(id=c))
        return cl

    for d in protection.release.table.dimensions:
        codes = ["_T" if c == d.hierarchy.total else c for c in d.hierarchy.order]
        dsd.dimensions.getdefault(d.variable, local_representation=common.Representation(
            enumerated=codelist(f"CL_{d.variable.upper()}", codes)))
    dsd.measures.getdefault("OBS_VALUE")
    for attr, codes in (("OBS_STATUS", ["A", "O"]), ("CONF_STATUS", ["F", "C"])):
        dsd.attributes.getdefault(attr, local_representation=common.Representation(enumerated=codelist(f"CL_{attr}", codes)))
    return dsd


def validate_sdmx(text: str, dsd: v30.DataStructureDefinition) -> int:
    """Parse with sdmx1 against ``dsd``, then check every code against its code list; the
    number of observations."""
    msg = sdmx.read_sdmx(io.BytesIO(text.encode()), format="csv", structure=dsd)
    obs = [o for ds in msg.data for o in ds.obs]
    keys = set()
    for o in obs:
        key = []
        for kv in o.dimension.values.values():
            cl = kv.value_for.local_representation.enumerated
            if kv.value not in cl:
                raise ValueError(f"{kv.value!r} is not in {cl.id}")
            key.append(kv.value)
        for av in o.attached_attribute.values():
            cl = av.value_for.local_representation.enumerated
            if av.value not in cl:
                raise ValueError(f"{av.value!r} is not in {cl.id}")
        conf = o.attached_attribute["CONF_STATUS"].value
        if (o.value == "") != (conf == "C"):
            raise ValueError("a confidential observation must have no value, a free one a value")
        if o.value != "":
            float(o.value)
        if tuple(key) in keys:
            raise ValueError("an observation appears twice")
        keys.add(tuple(key))
    return len(obs)


def test_sdmx_csv_validates_and_carries_published_values_only() -> None:
    p = _protected()
    text = sdmx_csv(p.release)
    assert validate_sdmx(text, _dsd(p)) == p.release.table.n_cells
    frame = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    truth = p.table.densify()
    suppressed = np.isnan(np.asarray(p.release.table.densify().column("count"), dtype=float))
    assert suppressed.any() and (frame["CONF_STATUS"] == "C").tolist() == suppressed.tolist()
    assert (frame.loc[suppressed, "OBS_VALUE"] == "").all() and (frame.loc[suppressed, "OBS_STATUS"] == "O").all()
    published = np.asarray(truth.column("original"))[~suppressed]
    assert frame.loc[~suppressed, "OBS_VALUE"].astype(float).tolist() == published.astype(float).tolist()


@pytest.mark.parametrize("breakage", [
    lambda t: t.replace("STRUCTURE_ID", "STRUCTURE_NAME_ID", 1),   # a malformed header
    lambda t: t.replace(",a1,", ",zz,", 1),                         # a code outside the code list
    lambda t: t.replace(",A,F", ",X,F", 1),                         # an unknown observation status
    lambda t: t.replace(",O,C", ",O,F", 1),                         # a suppressed value flagged free
])
def test_the_sdmx_check_catches_broken_files(breakage) -> None:
    p = _protected()
    with pytest.raises(ValueError):
        validate_sdmx(breakage(sdmx_csv(p.release)), _dsd(p))


def test_sdmx_refuses_codes_that_are_not_identifiers() -> None:
    df = pd.DataFrame({"area": ["a 1", "b"] * 5})
    p = ts.build_method("round", {"base": 3}).protect(ts.tabulate(ts.Microdata.from_frame(df), ["area"]))
    with pytest.raises(InputError, match="not an SDMX identifier"):
        sdmx_csv(p.release)


def _csvw_files(tmp_path: Path, p: ts.Protection) -> Path:
    data = release_arrow(p.release)
    import pyarrow.csv as pacsv

    pacsv.write_csv(data, tmp_path / "t.csv")
    meta = tmp_path / "t.csv-metadata.json"
    meta.write_text(csvw_metadata(p.release, p.report, csv_name="t.csv", columns=data.schema))
    return meta


@pytest.mark.parametrize(("method", "params"), [("suppress", {"min_freq": 4}),
                                                ("ckm", {"max_noise": 2, "variance": 1, "key": "rkey"})])
def test_csvw_validates_with_method_parameters_and_codelists(tmp_path: Path, method: str, params: dict) -> None:
    p = _protected(method, params)
    meta = _csvw_files(tmp_path, p)
    assert csvw.CSVW(str(meta), validate=True, strict=True).is_valid
    doc = json.loads(meta.read_text())
    notes = doc["notes"][0]
    assert notes["method"] == method and notes["parameters"] == p.report.to_json()["params"]
    assert notes["hierarchies"]["area"]["a1"] == "Total"
    assert "private" not in json.dumps(doc) and "original" not in (tmp_path / "t.csv").read_text()


@pytest.mark.parametrize("breakage", [
    lambda t: t.replace('"a1","1"', '"zz","1"', 1),        # a code outside the codelist
    lambda t: t.replace('"published"', '"maybe"', 1),      # an unknown flag
    lambda t: t.replace('"a1","1"', '"a1","2"', 1),        # a cell twice (primary key)
])
def test_the_csvw_validator_catches_broken_files(tmp_path: Path, breakage) -> None:
    meta = _csvw_files(tmp_path, _protected())
    csv_path = tmp_path / "t.csv"
    csv_path.write_text(breakage(csv_path.read_text()))
    try:
        valid = csvw.CSVW(str(meta), validate=True, strict=True).is_valid
    except ValueError:
        valid = False
    assert not valid


def test_protect_and_release_commands_write_both_formats(tmp_path: Path, small_census) -> None:
    persons = str(small_census.persons)
    assert main(["protect", persons, "--by", "area,sex", "--method", "suppress", "--min-freq", "3",
                 "--format", "sdmx-csv", "--out", str(tmp_path / "s.csv"), "--quiet"]) == 0
    assert (tmp_path / "s.csv").read_text().startswith("STRUCTURE,STRUCTURE_ID,ACTION,area,sex,OBS_VALUE")
    assert main(["protect", persons, "--by", "area,sex", "--method", "round", "--base", "5", "--format", "csvw",
                 "--out", str(tmp_path / "w.csv"), "--quiet"]) == 0
    assert csvw.CSVW(str(tmp_path / "w.csv-metadata.json"), validate=True, strict=True).is_valid
    release = tmp_path / "release.yaml"
    release.write_text(f"data: {persons}\ntables:\n  - {{name: a, by: [area, sex]}}\n  - {{name: b, by: [area]}}\n")
    assert main(["protect", "--release", str(release), "--method", "suppress", "--min-freq", "3", "--format",
                 "csvw", "--out", str(tmp_path / "rel"), "--quiet"]) == 0
    for name in ("a", "b"):
        assert csvw.CSVW(str(tmp_path / "rel" / f"{name}.csv-metadata.json"), validate=True, strict=True).is_valid
    assert main(["protect", persons, "--by", "area", "--method", "suppress", "--format", "csvw", "--keep-original",
                 "--out", str(tmp_path / "k.csv"), "--quiet"]) == 2
