"""Debian's headless chromium for the tests that drive a web page (mt serve's page, the browser example):
where it is, its flags, and a translation typed into mt serve's page. The `browser` fixture is in
tests/conftest.py."""

from __future__ import annotations

from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import Select, WebDriverWait

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
                  "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--window-size=1200,900")


def page_translation(driver, text: str, glossary: str = "", search: str = "") -> list:
    """Types `text` (and `glossary`) into the page, chooses the search (its option's value; "": the model's
    default), clicks Translate and returns the output's lines."""
    wait = WebDriverWait(driver, 60)
    wait.until(ec.element_to_be_clickable((By.ID, "translate-button")))
    Select(driver.find_element(By.ID, "search")).select_by_value(search)
    source = driver.find_element(By.ID, "source-text")
    source.clear()
    source.send_keys(text)
    if glossary:
        driver.find_element(By.ID, "glossary").send_keys(glossary)
    driver.find_element(By.ID, "translate-button").click()
    try:
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#output .line") or d.find_element(By.ID, "error").text)
    except TimeoutException:
        raise AssertionError("no translation on the page within 60 s") from None
    assert driver.find_element(By.ID, "error").text == ""
    return driver.find_elements(By.CSS_SELECTOR, "#output .line")
