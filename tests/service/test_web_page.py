"""The web page, driven by headless Chromium with the keyboard only: load the variables, choose
two, get the protected table and its bar chart, download the CSV. The screenshot is kept in
tests/service/artifacts/ (not in git) for a person to look at."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from tests.chromium import CHROMIUM, DRIVER, require_chromium

pytestmark = pytest.mark.filterwarnings("ignore")

ARTIFACTS = Path(__file__).parent / "artifacts"


@pytest.fixture()
def browser(tmp_path):
    require_chromium()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    downloads = tmp_path / "downloads"
    downloads.mkdir()
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1280,1000"):
        options.add_argument(flag)
    options.add_experimental_option("prefs", {"download.default_directory": str(downloads),
                                              "download.prompt_for_download": False})
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    try:
        yield driver, downloads
    finally:
        driver.quit()


def _wait(check, timeout=90.0):
    end = time.time() + timeout
    while time.time() < end:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out")


def test_keyboard_only_table_chart_and_csv(served, browser):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    server, key, _ = served
    driver, downloads = browser
    driver.get(server.url + "/")
    focused = lambda: driver.execute_script("return document.activeElement && document.activeElement.id")

    def keys(*k):
        ActionChains(driver).send_keys(*k).perform()

    def tab_to(element_id, limit=40):
        for _ in range(limit):
            if focused() == element_id:
                return
            keys(Keys.TAB)
        raise AssertionError(f"Tab never reached #{element_id}; focus is on #{focused()}")

    assert focused() == "apikey"  # the page starts where the user starts
    keys(key)
    tab_to("load")
    keys(Keys.ENTER)
    _wait(lambda: focused() == "var1")  # variables loaded, focus moved to the first choice

    def choose(element_id, name):
        tab_to(element_id)
        for _ in range(30):
            if driver.execute_script(f"return document.getElementById('{element_id}').value") == name:
                return
            keys(Keys.ARROW_DOWN)
        raise AssertionError(f"{name} not reachable in #{element_id}")

    choose("var1", "activity")
    choose("var2", "sex")
    tab_to("send")
    keys(Keys.ENTER)
    try:
        _wait(lambda: driver.execute_script("return document.querySelectorAll('#tablebox tbody tr').length"))
    except AssertionError:
        raise AssertionError(driver.execute_script("return document.getElementById('status').textContent")) from None
    rows = driver.execute_script("return [...document.querySelectorAll('#tablebox tbody tr')].map("
                                 "r => [...r.cells].map(c => c.textContent))")
    head = driver.execute_script("return [...document.querySelectorAll('#tablebox thead th')].map(c => c.textContent)")
    # a cross-tabulation: activity down (5 + total), sex across (total, 1, 2), labels not codes
    assert len(rows) == 6 and all(len(r) == 4 for r in rows)
    assert head[0] == "activity" and head[1:] == ["Total", "male", "female"], head
    bold = driver.execute_script("return [...document.querySelectorAll('#tablebox td, #tablebox th')].filter("
                                 "c => getComputedStyle(c).fontWeight >= 700).map(c => c.textContent)")
    assert "Total" in bold and len(bold) >= 6 + 4  # the total row and the total column
    bars = driver.execute_script("return document.querySelectorAll('#chart svg rect').length")
    assert bars == 5
    chart_labels = driver.execute_script("return [...document.querySelectorAll('#chart svg text[text-anchor=end]')]"
                                         ".map(t => t.textContent)")
    catalogue = server.get("/api/v1/catalogue", key)[1]
    activity = next(v for v in catalogue["variables"] if v["name"] == "activity")
    assert chart_labels == [c["label"] for c in activity["codes"]]
    # the page shows the numbers the API publishes
    status, body, _ = server.table({"dimensions": [{"variable": "activity", "level": 1},
                                                   {"variable": "sex", "level": 1}]}, key)
    assert status == 200
    published = {(r[0], r[1]): r[-1] for r in body["rows"]}
    codes = {c["label"]: c["code"] for c in activity["codes"]} | {"Total": "Total"}
    sexes = ["Total", "1", "2"]
    shown = {(codes[r[0]], sex): int(v.replace(",", "")) for r in rows for sex, v in zip(sexes, r[1:])}
    assert shown == published
    tab_to("download")
    keys(Keys.ENTER)
    csv_file = _wait(lambda: next(iter(downloads.glob("*.csv")), None))
    _wait(lambda: csv_file.stat().st_size > 0)
    lines = csv_file.read_text().strip().splitlines()
    assert lines[0] == "activity,sex,count" and len(lines) == 19
    ARTIFACTS.mkdir(exist_ok=True)
    driver.set_window_size(1280, 1500)
    driver.execute_script("window.scrollTo(0, 0)")  # for the picture only: the whole page at once
    driver.save_screenshot(str(ARTIFACTS / "table_builder.png"))
    shutil.copy(csv_file, ARTIFACTS / csv_file.name)


def test_a_refusal_lists_every_rule_and_the_form_follows_the_suggestion(small_census, tmp_path, browser):
    from tests.service.conftest import Server, add_key, write_config

    state = tmp_path / "state"
    state.mkdir()
    config = write_config(tmp_path / "service.yaml", state, {"min_population": 50, "min_area_population": 300,
                                                              "min_mean_cell_size": 3, "max_small_cell_share": 0.5})
    key = add_key(small_census.directory, config, "page")
    server = Server(small_census.directory, config).start()
    driver, _ = browser
    try:
        driver.get(server.url + "/")
        driver.find_element("id", "apikey").send_keys(key)
        driver.find_element("id", "load").click()
        _wait(lambda: driver.execute_script("return !document.getElementById('choices').hidden"))
        driver.execute_script("""
            const set = (id, v) => { const e = document.getElementById(id); e.value = v;
                                     e.dispatchEvent(new Event('change')); };
            set('var1', 'age_year'); set('var2', 'sex');
            document.getElementById('area').value = 'R1A003S02';""")
        driver.find_element("id", "send").click()
        _wait(lambda: driver.execute_script("return document.querySelectorAll('#violations li').length"))
        items = driver.execute_script("return [...document.querySelectorAll('#violations li')].map(l => l.textContent)")
        status, body, _ = server.table({"dimensions": [{"variable": "age_year"}, {"variable": "sex"}],
                                        "area": ["R1A003S02"], "measure": "count"}, key)
        assert status == 409
        assert len(items) == len(body["error"]["violations"]) >= 2
        assert all(v["rule"].replace("_", " ") in " ".join(items) for v in body["error"]["violations"])
        ARTIFACTS.mkdir(exist_ok=True)
        driver.save_screenshot(str(ARTIFACTS / "refusal.png"))
        driver.find_element("id", "usesuggestion").click()
        _wait(lambda: driver.execute_script("return document.querySelectorAll('#tablebox tbody tr').length"))
        suggestion = body["error"]["suggestion"]
        form = driver.execute_script("""return {v: [1, 2, 3].map(i => document.getElementById('var' + i).value),
            l: [1, 2, 3].map(i => document.getElementById('level' + i).value),
            area: document.getElementById('area').value}""")
        dims = suggestion["dimensions"]
        assert form["v"][:len(dims)] == [d["variable"] for d in dims]
        assert form["l"][:len(dims)] == [str(d["level"]) for d in dims]
        assert form["area"] == ", ".join(suggestion.get("area", []))
        driver.save_screenshot(str(ARTIFACTS / "suggestion_accepted.png"))
        # the chart names categories by their labels, not their codes
        driver.execute_script("""
            const set = (id, v) => { const e = document.getElementById(id); e.value = v;
                                     e.dispatchEvent(new Event('change')); };
            set('var1', 'sex'); set('var2', 'activity'); set('var3', '');
            document.getElementById('area').value = ''; document.getElementById('where').value = '';""")
        driver.find_element("id", "send").click()
        _wait(lambda: driver.execute_script("return document.querySelector('#crosstab caption') && "
                                            "document.querySelector('#crosstab caption').textContent.startsWith("
                                            "'Persons by sex')"))
        labels = driver.execute_script("return [...document.querySelectorAll('#chart svg text[text-anchor=end]')]"
                                       ".map(t => t.textContent)")
        assert labels == ["male", "female"]
    finally:
        server.stop()
