"""The evaluation report in headless Chromium: two tables × seven methods in nine settings (three
microdata methods among them, one alone and chained with the cell key method), rendered with no
console error and no request leaving the file; the measure tables and the R-U maps are on the
page (DOM), every point of the maps is a setting; the screenshot is kept in
tests/evaluate/artifacts/ (not in git) for a person to look at."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from tabsafe.cli import main
from tests.chromium import CHROMIUM, DRIVER, require_chromium

pytestmark = pytest.mark.filterwarnings("ignore")

ARTIFACTS = Path(__file__).parent / "artifacts"

SWAP = {"geography": ["region", "area"], "risk_vars": ["sex", "age"], "k": 2, "swaprate": 0.05,
        "similar": [["household_size"]]}
CKM = {"max_noise": 3, "variance": 2, "js": 1}
SETTINGS = [
    {"label": "cell key D3 V2", "method": "ckm", "params": CKM},
    {"label": "cell key D5 V3", "method": "ckm", "params": {"max_noise": 5, "variance": 3, "js": 2}},
    {"label": "random rounding base 3", "method": "round", "params": {"mode": "random", "base": 3}},
    {"label": "controlled rounding base 3", "method": "controlled-round", "params": {"base": 3}},
    {"label": "threshold 3 + secondary", "method": "suppress", "params": {"min_freq": 3}},
    {"label": "targeted swap", "method": "targeted-swap", "params": SWAP},
    {"label": "random swap 10%", "method": "random-swap",
     "params": {"geography": ["region", "area"], "swaprate": 0.1, "similar": [["household_size"]]}},
    {"label": "targeted swap, then cell key", "chain": [{"method": "targeted-swap", "params": SWAP},
                                                        {"method": "ckm", "params": CKM}]},
    {"label": "PRAM small area", "method": "pram",
     "params": {"variable": "small_area", "within": ["area"], "retention": 0.8, "household": "household_id"}},
]


@pytest.fixture()
def browser():
    require_chromium()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1400,1000"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def test_report_renders_with_tables_and_map(small_census, tmp_path: Path, browser) -> None:
    from tabsafe.registry import get_method, method_names

    names = {s.get("method") for s in SETTINGS} - {None}
    missing = sorted(names - set(method_names()))
    assert not missing, f"methods not registered: {missing}"
    assert len(names) >= 5 and any(get_method(n).kind == "microdata" for n in names)
    config = {
        "title": "Small census: seven methods, nine settings",
        "data": str(small_census.persons),
        "seed": 2026,
        "tables": {
            "area_activity_sex": {"by": ["area", "activity", "sex"], "rows": "area",
                                  "hierarchies": {"area": str(small_census.directory / "hierarchies" / "area.hrc")}},
            "region_age_sex": {"by": ["region", "age", "sex"], "rows": "region"},
        },
        "settings": SETTINGS,
    }
    cfg = tmp_path / "eval.yaml"
    cfg.write_text(yaml.safe_dump(config, sort_keys=False))
    report = tmp_path / "report.html"
    assert main(["evaluate", str(cfg), "--out", str(report), "--json", str(tmp_path / "m.json")]) == 0
    data = json.loads((tmp_path / "m.json").read_text())
    assert len(data["results"]) == 2 * len(SETTINGS)

    driver = browser
    driver.get(report.as_uri())
    labels = [s["label"] for s in SETTINGS]
    # the measure tables, one column per setting (as seed 004 Tables 5-10)
    for table_id in ("risk-0", "risk-1", "distances-0", "distances-1", "marginal-0", "variance-0", "tests-0"):
        heads = driver.execute_script(
            f"return Array.from(document.querySelectorAll('#{table_id} thead th')).map(e => e.textContent)")
        assert len(heads) == 1 + len(labels), table_id
        rows = driver.execute_script(f"return document.querySelectorAll('#{table_id} tbody tr').length")
        assert rows >= 2, table_id
    # the R-U maps: one per table, a labelled point per setting, drawn inside the plot
    for i in range(2):
        points = driver.execute_script(
            f"return Array.from(document.querySelectorAll('#ru-map-{i} .ru-point')).map(g => g.dataset.setting)")
        assert points == labels
        box = driver.execute_script(f"const r = document.querySelector('#ru-map-{i}').getBoundingClientRect();"
                                    "return [r.width, r.height]")
        assert box[0] > 300 and box[1] > 200
        inside = driver.execute_script(
            f"const svg = document.querySelector('#ru-map-{i}').getBoundingClientRect();"
            f"return Array.from(document.querySelectorAll('#ru-map-{i} .ru-point circle')).every(c => {{"
            "const r = c.getBoundingClientRect(); return r.left >= svg.left && r.right <= svg.right"
            " && r.top >= svg.top && r.bottom <= svg.bottom; })")
        assert inside
    # the output checker lists every release with its SHA-256
    checker = driver.execute_script("return document.querySelectorAll('#output-checker tbody tr').length")
    assert checker == 2 * len(SETTINGS)
    for r in data["results"]:
        assert r["checker"]["sha256"] in driver.page_source
    # the measures as data, from data: links
    href = driver.execute_script("return document.querySelector('#download-json').href")
    assert href.startswith("data:application/json;base64,")

    height = driver.execute_script("return document.body.scrollHeight")
    driver.set_window_size(1400, min(height + 40, 20000))
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "report.png"
    driver.save_screenshot(str(shot))
    assert shot.stat().st_size > 50_000
    shutil.copy(report, ARTIFACTS / "report.html")

    severe = [e for e in driver.get_log("browser") if e["level"] in {"SEVERE", "WARNING"}]
    assert severe == [], severe
    requests = set()
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            requests.add(message["params"]["request"]["url"])
    assert requests and all(u.startswith(("file://", "data:")) for u in requests), requests
