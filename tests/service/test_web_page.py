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
    assert len(rows) == 6 * 3  # activity (5 + total) × sex (2 + total), margins included
    bars = driver.execute_script("return document.querySelectorAll('#chart svg rect').length")
    assert bars == 5
    # the page shows the numbers the API publishes
    status, body, _ = server.table({"dimensions": [{"variable": "activity", "level": 1},
                                                   {"variable": "sex", "level": 1}]}, key)
    assert status == 200
    assert [int(r[-1].replace(",", "")) for r in rows] == [r[-1] for r in body["rows"]]
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
