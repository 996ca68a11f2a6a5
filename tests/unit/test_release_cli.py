"""Releases through the real CLI (issue #13): two tables sharing their area × age margins,
suppressed one at a time, give cells away to an intruder holding both — ``tabsafe audit
--release`` on the two files finds them; protected as one release (``tabsafe protect
--release``) they withstand the same programs. Errors write nothing."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pytest
import yaml

from tabsafe.capabilities import Capabilities
from tabsafe.cli import main
from tabsafe.method import Examples, Outcome, TableMethod
from tabsafe.params import Int, parameter

H = ("area=hierarchies/area.hrc", "age=hierarchies/age.yaml")


def _run(*argv: object) -> int:
    return main([str(a) for a in argv])


@pytest.fixture(scope="module")
def census24(small_census, tmp_path_factory):
    """The small census with its 200 areas merged into 24 (12 per region): the same kind of table
    as the issue's, small enough for a unit test."""
    from types import SimpleNamespace

    from tabsafe.model.hierarchy import Hierarchy

    folder = tmp_path_factory.mktemp("census24")
    persons = pd.read_parquet(small_census.persons, columns=["region", "area", "age", "sex", "citizenship", "rkey"])
    persons = persons.astype({c: str for c in ["region", "area", "age", "sex", "citizenship"]})
    persons["area"] = persons["region"] + "A" + (persons["area"].str[-3:].astype(int) % 12).astype(str).str.zfill(2)
    persons.drop(columns=["region"]).to_parquet(folder / "persons.parquet")
    (folder / "hierarchies").mkdir()
    tree = {r: sorted(persons.loc[persons["region"] == r, "area"].unique()) for r in ("R1", "R2")}
    (folder / "hierarchies" / "area.hrc").write_text(Hierarchy.from_tree(tree).to_hrc())
    (folder / "hierarchies" / "age.yaml").write_text((small_census.directory / "hierarchies" / "age.yaml").read_text())
    return SimpleNamespace(directory=folder, persons=folder / "persons.parquet")


def _hierarchies(census) -> list[str]:
    out = []
    for h in H:
        var, _, rel = h.partition("=")
        out += ["--hierarchy", f"{var}={census.directory / rel}"]
    return out


def _config(census, folder: Path) -> Path:
    config = folder / "release.yaml"
    config.write_text(yaml.safe_dump({
        "data": str(census.persons),
        "meta": str(census.meta) if getattr(census, "meta", None) else None,
        "hierarchies": {"area": str(census.directory / "hierarchies/area.hrc"),
                        "age": str(census.directory / "hierarchies/age.yaml")},
        "tables": [{"name": "area_age_sex", "by": ["area", "age", "sex"]},
                   {"name": "area_age_citizenship", "by": ["area", "age", "citizenship"]}],
    }))
    return config


def _exposed(path: Path) -> dict:
    return json.loads(path.read_text())


def _two_table_case(census, tmp_path: Path, capsys) -> None:
    """The case of issue #13 on ``census``: separately exposed, jointly safe."""
    hs = _hierarchies(census)
    for by, name in (("area,age,sex", "a.csv"), ("area,age,citizenship", "b.csv")):
        assert _run("protect", census.persons, "--by", by, *hs, "--method", "suppress", "--mode", "fast",
                    "--min-freq", 3, "--out", tmp_path / name) == 0
    capsys.readouterr()
    assert _run("audit", "--release", tmp_path / "a.csv", tmp_path / "b.csv", *hs, "--out",
                tmp_path / "separate.json") == 1  # exposed cells: a gate fails
    printed = capsys.readouterr().out
    separate = _exposed(tmp_path / "separate.json")
    assert separate["summary"]["shared_cells"] > 0
    assert separate["summary"]["exact"] > 0, "two separately suppressed tables should give cells away"
    assert "pinned to one value" in printed
    assert "exposes" in printed.strip().splitlines()[-1]
    # every cell pinned is a cell the one table hides and the other publishes, or one they give away together
    first = separate["exposed"][0]
    assert first["exact"] and first["derivation"]
    # one release: suppressed together, audited as published
    config = _config(census, tmp_path)
    out = tmp_path / "release"
    assert _run("protect", "--release", config, "--method", "suppress", "--mode", "fast", "--min-freq", 3,
                "--out", out, "--evaluation", tmp_path / "eval") == 0
    protected = capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == ["area_age_citizenship.csv", "area_age_sex.csv", "release.yaml"]
    # the same intruder, on the files as written
    assert _run("audit", "--release", out / "release.yaml", "--out", tmp_path / "joint.json") == 0
    joint = _exposed(tmp_path / "joint.json")
    primary = set()
    for name in ("area_age_sex", "area_age_citizenship"):
        ev = pd.read_parquet(tmp_path / "eval" / f"{name}.evaluation.parquet")
        ev = ev.astype({c: str for c in ev.columns if c not in {"count", "original", "reason"}})
        codes = [c for c in ev.columns if c not in {"count", "original", "reason"}]
        for row in ev[ev["reason"] == "primary"][codes].itertuples(index=False):
            primary.add((name, "(" + ", ".join(f"{c}={v}" for c, v in zip(codes, row)) + ")"))
    assert primary
    exposed_primary = [e for e in joint["exposed"] if (e["table"], e["cell"]) in primary]
    assert exposed_primary == []
    assert "release audit: no primary cell" in protected
    # a shared cell has one status in both files
    a = pd.read_csv(out / "area_age_sex.csv", dtype=str)
    b = pd.read_csv(out / "area_age_citizenship.csv", dtype=str)
    a = a[a["sex"] == "Total"].set_index(["area", "age"])["status"]
    b = b[b["citizenship"] == "Total"].set_index(["area", "age"])["status"]
    assert (a.sort_index() == b.sort_index()).all()


def test_two_tables_separately_exposed_jointly_safe(census24, tmp_path: Path, capsys) -> None:
    _two_table_case(census24, tmp_path, capsys)


@pytest.mark.slow
def test_issue_13_case_60000_persons_seed_5(tmp_path: Path, capsys) -> None:
    from tabsafe.synth import synth_census

    census = synth_census(60_000, 5, tmp_path / "census")
    _two_table_case(census, tmp_path, capsys)


def test_release_manifest_and_modes(census24, tmp_path: Path) -> None:
    config = _config(census24, tmp_path)
    out = tmp_path / "rel"
    assert _run("protect", "--release", config, "--method", "suppress", "--min-freq", 3, "--out", out,
                "--format", "parquet", "--report", tmp_path / "report.json") == 0
    manifest = yaml.safe_load((out / "release.yaml").read_text())
    assert [t["file"] for t in manifest["tables"]] == ["area_age_sex.parquet", "area_age_citizenship.parquet"]
    assert manifest["suppressed_min"] == 1.0
    umask = os.umask(0)
    os.umask(umask)
    assert (out / "area_age_sex.parquet").stat().st_mode & 0o777 == 0o666 & ~umask
    report = json.loads((tmp_path / "report.json").read_text())
    assert "private" not in report and "audit" not in report
    assert report["figures"]["tables"] == 2 and report["figures"]["shared_cells"] > 0
    frame = pd.read_parquet(out / "area_age_sex.parquet")
    assert set(frame.columns) == {"area", "age", "sex", "count", "status"}


@pytest.mark.parametrize("extra, message", [
    (["--method", "suppress", "--min-freq", "0"], "nothing would be protected"),
    (["--method", "ckm,weights", "--max-noise", "3", "--variance", "2"], "microdata methods come before"),
    (["--method", "suppress,additivity", "--min-freq", "3"], "cannot be protected further"),
])
def test_release_errors_write_nothing(census24, tmp_path: Path, capsys, extra, message) -> None:
    config = _config(census24, tmp_path)
    out = tmp_path / "out"
    code = _run("protect", "--release", config, *extra, "--out", out)
    err = capsys.readouterr().err
    assert code != 0
    assert message in err and len(err.strip().splitlines()) == 1
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["release.yaml"]


def test_cell_key_method_protects_a_release_consistently(census24, tmp_path: Path) -> None:
    config = _config(census24, tmp_path)
    out = tmp_path / "ckm"
    assert _run("protect", "--release", config, "--method", "ckm", "--max-noise", 3, "--variance", 2, "--js", 1,
                "--out", out) == 0
    a = pd.read_csv(out / "area_age_sex.csv", dtype={"area": str, "age": str, "sex": str})
    b = pd.read_csv(out / "area_age_citizenship.csv", dtype={"area": str, "age": str, "citizenship": str})
    a = a[a["sex"] == "Total"].set_index(["area", "age"])["count"].sort_index()
    b = b[b["citizenship"] == "Total"].set_index(["area", "age"])["count"].sort_index()
    assert a.index.equals(b.index) and (a == b).all()


def test_release_config_errors(small_census, tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"tables": [{"by": ["area"], "colour": "red"}]}))
    assert _run("protect", "--release", bad, "--method", "suppress", "--out", tmp_path / "o") == 2
    assert "unknown key 'colour'" in capsys.readouterr().err
    bad.write_text(yaml.safe_dump({"data": str(small_census.persons),
                                   "tables": [{"name": "x", "by": ["sex"]}, {"name": "x", "by": ["age"]}]}))
    assert _run("protect", "--release", bad, "--method", "suppress", "--out", tmp_path / "o") == 2
    assert "two tables are named 'x'" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_audit_refuses_tables_that_do_not_add_up(census24, tmp_path: Path, capsys) -> None:
    hs = _hierarchies(census24)
    assert _run("protect", census24.persons, "--by", "area,sex", "--hierarchy", hs[1], "--method", "suppress",
                "--out", tmp_path / "a.csv") == 0
    capsys.readouterr()
    # without the area hierarchy the region subtotals look like areas: the totals do not add up
    assert _run("audit", "--release", tmp_path / "a.csv", "--out", tmp_path / "x.json") == 2
    err = capsys.readouterr().err
    assert "do not add up" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.json").exists()


def test_audit_of_a_rounded_table_uses_the_base(tmp_path: Path, capsys) -> None:
    # A total and its two cells rounded to base 5 (controlled rounding, one step): published 5, 10
    # and 0 mean [1, 9], [6, 14] and [0, 4]; the total is their sum, so all three are 3 wide:
    # T in [6, 9], a in [6, 9], b in [0, 3].
    pd.DataFrame({"x": ["Total", "a", "b"], "count": [5, 10, 0]}).to_csv(tmp_path / "r.csv", index=False)
    assert _run("audit", "--release", tmp_path / "r.csv", "--base", 5, "--protection-level", 4,
                "--out", tmp_path / "e.json") == 1  # all three narrower than 4
    rows = {r["cell"]: (r["lower"], r["upper"]) for r in _exposed(tmp_path / "e.json")["exposed"]}
    assert rows == {"(x=Total)": (6, 9), "(x=a)": (6, 9), "(x=b)": (0, 3)}
    assert _run("audit", "--release", tmp_path / "r.csv", "--base", 5, "--out", tmp_path / "e1.json") == 0
    assert _exposed(tmp_path / "e1.json")["summary"]["exposed"] == 0  # none pinned to one value
    capsys.readouterr()
    # read as exact values, 5 = 10 + 0 is not a table
    assert _run("audit", "--release", tmp_path / "r.csv", "--out", tmp_path / "e2.json") == 2
    assert "do not add up" in capsys.readouterr().err


def test_a_method_inconsistent_across_tables_is_refused(small_census) -> None:
    """A method that protects each table alone must give a shared cell one value in every table:
    one that does not declare itself consistent is refused before any work; one that declares it
    and breaks it is caught on the shared cells, and nothing is returned."""
    from tabsafe import Microdata, tabulate
    from tabsafe.errors import InputError, MethodError
    from tabsafe.io import read_meta
    from tabsafe.release import protect_release

    md = Microdata.from_file(small_census.persons, codelists=read_meta(small_census.meta))
    tables = [tabulate(md, ["region", "sex"]), tabulate(md, ["region", "age"])]
    with pytest.raises(InputError, match="neither joint .* nor consistent"):
        protect_release(tables, _Jitter(), names=["rs", "ra"], seed=1)
    with pytest.raises(MethodError, match="consistent across tables"):
        protect_release(tables, _ClaimsConsistentJitter(), names=["rs", "ra"], seed=1)
    same = protect_release(tables, _ClaimsConsistentJitter(amount=0), names=["rs", "ra"], seed=1)
    assert same.report.seed == 1 and same.report.figures["tables"] == 2


@dataclass(frozen=True, kw_only=True)
class _Jitter(TableMethod):
    """Adds noise drawn afresh for every table.

    Attributes:
        amount: the largest change.
    """

    name: ClassVar[str] = "jitter"
    declared: ClassVar[Capabilities] = Capabilities(random=True)
    amount: int = parameter(1, check=Int(min=0))

    @classmethod
    def examples(cls) -> Examples:  # pragma: no cover - not registered
        return Examples(typical=(cls(),))

    def apply(self, table: Any, seed: int | None) -> Outcome:
        rng = np.random.default_rng([seed, table.n_cells])
        noise = rng.integers(-self.amount, self.amount + 1, table.n_stored)
        return Outcome(cells=table, release={"count": np.maximum(table.counts + noise, 0)})


@dataclass(frozen=True, kw_only=True)
class _ClaimsConsistentJitter(_Jitter):
    """Adds noise drawn afresh for every table, and claims the same cell gets the same value.

    Attributes:
        amount: the largest change.
    """

    declared: ClassVar[Capabilities] = Capabilities(random=True, consistent=True)


def test_no_suppressed_cell_is_derivable(census24, tmp_path: Path, capsys) -> None:
    """Issue #13, second case: with zeros that may be hidden and a protection level of 3, the
    pattern held cells an intruder could compute exactly; they are published again and counted."""
    hs = _hierarchies(census24)
    report = tmp_path / "report.json"
    assert _run("protect", census24.persons, "--by", "area,age,sex", *hs, "--method", "suppress", "--mode", "fast",
                "--min-freq", 4, "--zeros", "safe", "--protection-level", 3, "--out", tmp_path / "a.csv",
                "--report", report) == 0
    figures = json.loads(report.read_text())["figures"]
    capsys.readouterr()
    assert _run("audit", "--release", tmp_path / "a.csv", *hs, "--suppressed-min", 0, "--out",
                tmp_path / "e.json") == 0
    audit = _exposed(tmp_path / "e.json")
    assert audit["summary"]["unknown_cells"] == figures["suppressed"]
    assert audit["summary"]["exact"] == 0
    assert figures["republished"] > 0


def test_a_release_with_a_table_by_moves_passes_the_joint_audit(census24, tmp_path: Path, capsys) -> None:
    """``--mode hypercube`` on a release (issue #28): the largest table (area × age × sex ×
    citizenship, areas without their regions) by moves, the two area tables with regions by the
    elimination, joined at the cells they share. The intruder's programs over every file as
    written (``tabsafe audit --release``, independent of the moves) pin no primary cell."""
    config = tmp_path / "release.yaml"
    area = str(census24.directory / "hierarchies/area.hrc")
    config.write_text(yaml.safe_dump({
        "data": str(census24.persons),
        "hierarchies": {"age": str(census24.directory / "hierarchies/age.yaml")},
        "tables": [{"name": "cube", "by": ["area", "age", "sex", "citizenship"]},
                   {"name": "area_age_sex", "by": ["area", "age", "sex"], "hierarchies": {"area": area}},
                   {"name": "area_citizenship", "by": ["area", "citizenship"], "hierarchies": {"area": area}}],
    }))
    out = tmp_path / "release"
    assert _run("protect", "--release", config, "--method", "suppress", "--mode", "hypercube", "--min-freq", 3,
                "--out", out, "--evaluation", tmp_path / "eval") == 0
    protected = capsys.readouterr().out
    assert "release audit: no primary cell" in protected
    assert _run("audit", "--release", out / "release.yaml", "--out", tmp_path / "joint.json") == 0
    joint = _exposed(tmp_path / "joint.json")
    primary = set()
    for name in ("cube", "area_age_sex", "area_citizenship"):
        ev = pd.read_parquet(tmp_path / "eval" / f"{name}.evaluation.parquet")
        ev = ev.astype({c: str for c in ev.columns if c not in {"count", "original", "reason"}})
        codes = [c for c in ev.columns if c not in {"count", "original", "reason"}]
        for row in ev[ev["reason"] == "primary"][codes].itertuples(index=False):
            primary.add((name, "(" + ", ".join(f"{c}={v}" for c, v in zip(codes, row)) + ")"))
    assert len(primary) > 50
    assert [e for e in joint["exposed"] if (e["table"], e["cell"]) in primary] == []
