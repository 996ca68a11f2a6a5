"""``tabsafe evaluate CONFIG.yaml`` through the real CLI on the small synthetic census: the
report and its data files, releases whose checksums the report lists (and ``tabsafe protect``
reproduces), configuration errors in one line, outputs checked before any work."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from tabsafe.cli import main


def _config(tmp_path: Path, census, **extra) -> Path:
    config = {
        "title": "small census",
        "data": str(census.persons),
        "seed": 12,
        "tables": {"region_age_sex": {"by": ["region", "age", "sex"], "rows": "region"}},
        "settings": [
            {"method": "ckm", "params": {"max_noise": 3, "variance": 2, "js": 1}},
            {"label": "threshold 3", "method": "suppress", "params": {"min_freq": 3}},
        ],
    }
    config.update(extra)
    path = tmp_path / "eval.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def test_evaluate_writes_report_data_and_releases(small_census, tmp_path: Path, capsys) -> None:
    cfg = _config(tmp_path, small_census)
    out = tmp_path / "report.html"
    code = main(["evaluate", str(cfg), "--out", str(out), "--json", str(tmp_path / "m.json"),
                 "--csv", str(tmp_path / "m.csv"), "--releases", str(tmp_path / "releases")])
    assert code == 0, capsys.readouterr().err
    assert "2 settings × 1 tables" in capsys.readouterr().out
    page = out.read_text()
    assert page.startswith("<!doctype html>") and "threshold 3" in page
    assert out.stat().st_mode & 0o077 == 0  # an evaluation output: private
    data = json.loads((tmp_path / "m.json").read_text())
    assert [s["label"] for s in data["settings"]] == ["ckm (max_noise 3, variance 2, js 1)", "threshold 3"]
    assert data["settings"][0]["seed"] is None  # the cell key method is deterministic: no seed to record
    results = {r["setting"]: r for r in data["results"]}
    assert results["threshold 3"]["checker"]["cells_suppressed"] > 0
    assert results["threshold 3"]["checker"]["cells_perturbed"] == 0
    assert results["ckm (max_noise 3, variance 2, js 1)"]["checker"]["cells_suppressed"] == 0
    # the measures CSV is long form and holds the same numbers
    lines = (tmp_path / "m.csv").read_text().splitlines()
    assert lines[0] == "table,setting,group,measure,value"
    hd = results["threshold 3"]["measures"]["utility"]["inner"]["hellinger"]["mean"]
    assert any(line.startswith("region_age_sex,threshold 3,utility.inner.hellinger,mean,")
               and float(line.rsplit(",", 1)[1]) == pytest.approx(hd) for line in lines)
    # every release file is there, with the checksum the report lists
    for r in data["results"]:
        f = tmp_path / "releases" / r["checker"]["release_file"]
        assert hashlib.sha256(f.read_bytes()).hexdigest() == r["checker"]["sha256"]
        assert r["checker"]["sha256"] in page


def test_report_checksum_is_what_tabsafe_protect_writes(small_census, tmp_path: Path, capsys) -> None:
    """The parameters and seed in the report rerun the release: `tabsafe protect` with them
    writes a file with the listed SHA-256."""
    cfg = _config(tmp_path, small_census)
    assert main(["evaluate", str(cfg), "--out", str(tmp_path / "r.html"), "--json", str(tmp_path / "m.json")]) == 0
    data = json.loads((tmp_path / "m.json").read_text())
    ckm = next(r for r in data["results"] if r["setting"].startswith("ckm"))
    release = tmp_path / "ckm.csv"
    assert main(["protect", str(small_census.persons), "--by", "region,age,sex", "--method", "ckm",
                 "--max-noise", "3", "--variance", "2", "--js", "1", "--seed", "12", "--out", str(release)]) == 0
    assert hashlib.sha256(release.read_bytes()).hexdigest() == ckm["checker"]["sha256"]


def test_same_config_same_report(small_census, tmp_path: Path) -> None:
    cfg = _config(tmp_path, small_census)
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert main(["evaluate", str(cfg), "--out", str(tmp_path / "a.html"), "--json", str(a)]) == 0
    assert main(["evaluate", str(cfg), "--out", str(tmp_path / "b.html"), "--json", str(b)]) == 0
    assert json.loads(a.read_text())["results"] == json.loads(b.read_text())["results"]


@pytest.mark.parametrize("change, message", [
    ({"settings": [{"method": "nope"}]}, "unknown method 'nope'"),
    ({"settings": [{"method": "ckm", "params": {"max_noise": 0, "variance": 2}}]}, "max_noise"),
    ({"settings": [{"method": "ckm", "param": {}}]}, "unknown key 'param'"),
    ({"settings": []}, "'settings' must be a list"),
    ({"tables": {"t": {"by": ["region"], "rows": "sex"}}}, "'rows' must be one of its variables"),
    ({"tables": {"t": {"by": ["region"], "hierarchies": {"sex": "x.hrc"}}}}, "not in 'by'"),
    ({"measures": {"prior": "0.2,0.2"}}, "sum to 1"),
    ({"measures": {"weights": [1, 2]}}, "three numbers"),
    ({"seed": -1}, "seed"),
    ({"data": "missing.parquet"}, "no such file"),
    ({"settings": [{"label": "x", "method": "ckm", "params": {"max_noise": 3, "variance": 2}},
                   {"label": "x", "method": "suppress", "params": {"min_freq": 3}}]}, "labelled 'x'"),
])
def test_configuration_errors_are_one_line_and_write_nothing(small_census, tmp_path: Path, capsys, change,
                                                              message) -> None:
    cfg = _config(tmp_path, small_census, **change)
    out = tmp_path / "report.html"
    assert main(["evaluate", str(cfg), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert message in err
    assert not out.exists()


def test_outputs_are_checked_before_any_work(small_census, tmp_path: Path, capsys) -> None:
    cfg = _config(tmp_path, small_census)
    # a missing folder, the configuration itself, a wrong suffix: refused before anything runs
    assert main(["evaluate", str(cfg), "--out", str(tmp_path / "no" / "r.html")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["evaluate", str(cfg), "--out", str(tmp_path / "r.html"), "--json", str(cfg)]) == 2
    assert "--json" in capsys.readouterr().err
    assert main(["evaluate", str(cfg), "--out", str(tmp_path / "r.html"), "--csv", str(tmp_path / "m.txt")]) == 2
    assert "--csv" in capsys.readouterr().err
    # a releases folder holding someone else's file is refused, and nothing is written
    foreign = tmp_path / "rel"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    assert main(["evaluate", str(cfg), "--out", str(tmp_path / "r.html"), "--releases", str(foreign)]) == 2
    assert "--releases" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]


def test_evaluate_reports_structure_measures_and_imputed_suppression(small_census, tmp_path: Path, capsys) -> None:
    """The log-linear fit, median subgroup entropy and cell-size variance are in every result,
    and a suppressed table's distances are also given with its cells imputed (000 §5.8): the
    figures equal the functions run on the same tables, and the report shows them."""
    import numpy as np

    import tabsafe as ts
    from tabsafe.evaluate.measures import Comparison, relative_absolute_distance
    from tabsafe.evaluate.table_measures import impute_suppressed, loglinear_fit, median_subgroup_entropy

    cfg = _config(tmp_path, small_census)
    out = tmp_path / "report.html"
    rel = tmp_path / "releases"
    assert main(["evaluate", str(cfg), "--out", str(out), "--json", str(tmp_path / "m.json"),
                 "--releases", str(rel)]) == 0, capsys.readouterr().err
    data = json.loads((tmp_path / "m.json").read_text())
    results = {r["setting"]: r for r in data["results"]}
    sup = results["threshold 3"]
    u = sup["measures"]["utility"]
    original = ts.tabulate(ts.Microdata.from_file(small_census.persons), ["region", "age", "sex"])
    protected = ts.build_method("suppress", {"min_freq": 3}).protect(original, seed=12).release.table
    cmp = Comparison.of(original, protected, rows="region")
    idx = np.ix_(*[cmp._leaves(a) for a in range(3)])
    assert u["loglinear"]["before"]["chi2"] == pytest.approx(loglinear_fit(cmp.original[idx])["chi2"])
    assert u["loglinear"]["after"]["chi2"] == pytest.approx(loglinear_fit(cmp.published[idx])["chi2"])
    assert u["subgroup_entropy"]["before"] == pytest.approx(median_subgroup_entropy(cmp.original[idx], [0]))
    for how in ("midpoint", "average"):
        filled = Comparison.of(original, impute_suppressed(protected, how=how), rows="region")
        o, p = filled.inner()
        assert u["imputed"][how]["rad"]["mean"] == pytest.approx(relative_absolute_distance(o, p).mean)
    # imputing is closer to the original than zeros
    assert u["imputed"]["midpoint"]["aad"]["mean"] < u["inner"]["aad"]["mean"]
    assert "imputed" not in results["ckm (max_noise 3, variance 2, js 1)"]["measures"]["utility"]
    page = out.read_text()
    assert "log-linear model" in page and "median entropy of the subgroups of region" in page
    assert "suppressed cells as interval midpoints" in page
