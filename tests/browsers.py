"""A real headless Chromium for the end-to-end tests (Debian's `chromium` and
`chromium-driver`), and the helpers that drive it. conftest.py offers the fixture
`chromium` to every test."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def chromium(tmp_path: Path) -> Iterator[Any]:
    browser_bin, driver_bin = shutil.which("chromium"), shutil.which("chromedriver")
    if not (browser_bin and driver_bin):
        pytest.fail("headless Chromium is missing: apt-get install -y chromium chromium-driver")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = browser_bin
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'chromium'}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_bin))
    try:
        yield driver
    finally:
        driver.quit()


def page_json(driver: Any, url: str) -> Any:
    """Navigate to `url` and parse the page's text as JSON."""
    from selenium.webdriver.common.by import By

    driver.get(url)
    return json.loads(driver.find_element(By.TAG_NAME, "body").text)


# Runs in the page: fetches every URL at once (the page's cookies sent, its Set-Cookie
# kept, as for the page's own requests) and hands back their JSON bodies, in order.
# "no-store": Chromium's HTTP cache would otherwise hold a request back until another one
# for the same URL has answered (its cache lock), and they would not run together.
_FETCH_ALL = """
const urls = arguments[0], done = arguments[arguments.length - 1];
const get = u => fetch(u, {credentials: "same-origin", cache: "no-store"}).then(r => r.json());
Promise.all(urls.map(get)).then(done, e => done({error: String(e)}));
"""


def fetch_all(driver: Any, urls: list[str]) -> list[Any]:
    """GET `urls` in parallel from the page the browser is on (same origin); their JSON."""
    answers = driver.execute_async_script(_FETCH_ALL, urls)
    assert isinstance(answers, list), answers
    return answers
