"""The demo's report picks up every registered method through the registry: each one is a
setting of the report or is named, with why, among those left out (a method whose module does not
load, or whose parameters do not fit the census)."""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

from tabsafe.evaluate.demo import write_demo_report
from tabsafe.io import read_meta
from tabsafe.model.microdata import Microdata
from tabsafe.registry import method_names


def test_every_registered_method_is_in_the_demo_report(small_census, tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    shutil.copytree(small_census.directory, folder / "census")
    md = Microdata.from_file(folder / "census" / "persons.parquet", codelists=read_meta(folder / "census" / "meta.yaml"))
    report = write_demo_report(md, folder / "census", folder, seed=5,
                               params={"ckm": {"max_noise": 3, "variance": 2, "js": 1}, "suppress": {"min_freq": 3}},
                               tables={"region_age_sex": (("region", "age", "sex"), {}, "region")})
    assert report == folder / "report.html" and report.stat().st_mode & 0o077 == 0
    page = report.read_text()
    settings = re.findall(r'<td class="l"><b>(.*?)</b></td><td class="l">(.*?)</td>', page)
    # every step of every setting (chains name theirs "a (microdata) → b (table)")
    shown = {name for _, steps in settings
             for name in re.findall(r"([\w-]+) (?:<span class=small>)?\((?:table|microdata)\)", html.unescape(steps))}
    left_out = {html.unescape(name).split(" ")[0] for name in re.findall(r"<li><b>(.*?)</b>:", page)}
    assert set(method_names()) <= shown | left_out
    # the demo's own parameters are used where it gives them; a microdata method is also chained
    assert any(label.startswith("ckm (max_noise 3, variance 2, js 1)") for label, _ in settings)
    assert any(", then ckm" in label for label, _ in settings)
    # a repair method runs after the method whose output it repairs
    assert any(label.startswith("ckm, then additivity") for label, _ in settings)
    assert not any(label.startswith("additivity") for label, _ in settings)
    # paths are named relative to the demo folder, so the recorded configuration reruns there
    assert "data: census/persons.parquet" in page
