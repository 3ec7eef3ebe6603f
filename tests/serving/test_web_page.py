"""The web page at `/` of a real `mt serve` process, driven in Debian's headless chromium through selenium and
chromedriver: it types a sentence, reads the translation from the page and hovers an output word; its file tab
uploads a document and links the translated one."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import Select, WebDriverWait

from tests.chromium import page_translation
from tests.conftest import DATA, ROOT, run_mt


@pytest.fixture(scope="module")
def served(trained_tiny):
    """(URL, checkpoint) of `mt serve` running the tiny de:en model on an ephemeral port."""
    checkpoint = trained_tiny / "checkpoint_last.pt"
    env = {k: v for k, v in os.environ.items() if k != "MT_DEBUG"}
    proc = subprocess.Popen([sys.executable, "-m", "mt", "serve", "-m", f"de:en={checkpoint}", "--port", "0",
                             "--device", "cpu"], cwd=ROOT, env={**env, "PYTHONUNBUFFERED": "1"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    log, url = [], None
    deadline = time.monotonic() + 120
    while url is None and time.monotonic() < deadline:
        line = proc.stderr.readline()
        log.append(line)
        if match := re.search(r"ready at (http://\S+)", line):
            url = match.group(1)
        elif not line and proc.poll() is not None:
            break
    if url is None:
        proc.kill()
        raise AssertionError(f"mt serve did not get ready:\n{''.join(log)}")
    threading.Thread(target=lambda: log.extend(proc.stderr), daemon=True).start()  # keeps the pipe drained
    try:
        yield url, checkpoint
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(timeout=60) == 0, "".join(log)
        finally:
            proc.kill()


def test_page_translates_like_mt_translate_and_shows_alignments(served, browser):
    url, checkpoint = served
    sentence = (DATA / "dev.de").read_text(encoding="utf-8").splitlines()[2]
    # Greedy: the tiny model's beam search ends most sentences at once (an empty output).
    expected = run_mt("translate", "-c", checkpoint, "--device", "cpu", "--beam-size", "1",
                      input=sentence + "\n").stdout.rstrip("\n")
    assert expected.split(), "the tiny model translated the sentence to nothing; pick another"

    browser.get(url + "/")
    assert browser.title.startswith("mt")
    pair = Select(browser.find_element(By.ID, "pair"))
    WebDriverWait(browser, 30).until(lambda d: pair.first_selected_option.get_attribute("value") == "de:en")
    assert [o.get_attribute("value") for o in pair.options] == ["de:en"]

    lines = page_translation(browser, sentence, search="1")
    assert len(lines) == 1
    assert lines[0].get_attribute("data-text") == expected
    words = lines[0].find_elements(By.CSS_SELECTOR, ".word")
    assert [w.text for w in words] == expected.split()
    assert [w.get_attribute("data-index") for w in words] == [str(i) for i in range(len(words))]
    source_words = browser.find_elements(By.CSS_SELECTOR, "#source-view .word")
    assert [w.text for w in source_words] == sentence.split()

    assert not browser.find_elements(By.CSS_SELECTOR, "#source-view .word.aligned")
    ActionChains(browser).move_to_element(words[0]).perform()
    marked = WebDriverWait(browser, 10).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, "#source-view .word.aligned"))
    assert all(w.text in sentence.split() for w in marked)
    ActionChains(browser).move_to_element(browser.find_element(By.TAG_NAME, "h1")).perform()
    WebDriverWait(browser, 10).until(lambda d: not d.find_elements(By.CSS_SELECTOR, "#source-view .word.aligned"))


def test_page_glossary_and_server_errors(served, browser):
    url, checkpoint = served
    sentence = "Dieses Paket enthält die Dokumentation."
    expected = run_mt("translate", "-c", checkpoint, "--device", "cpu", "--constraints",
                      input=f"{sentence}\tXylophon\n").stdout.rstrip("\n")
    assert "Xylophon" in expected

    browser.get(url + "/")
    lines = page_translation(browser, sentence, glossary="paket = Xylophon")
    assert lines[0].get_attribute("data-text") == expected

    too_long = "x " * 12_000  # over the server's 20,000 characters per request
    browser.execute_script("arguments[0].value = arguments[1]", browser.find_element(By.ID, "source-text"), too_long)
    browser.find_element(By.ID, "translate-button").click()
    error = WebDriverWait(browser, 30).until(lambda d: d.find_element(By.ID, "error").text)
    assert "exceed the text limit" in error


def test_page_file_tab_uploads_a_document_and_links_the_translation(served, browser, tmp_path):
    import httpx

    url, checkpoint = served
    sentence = (DATA / "dev.de").read_text(encoding="utf-8").splitlines()[2]
    document = tmp_path / "Seite.html"
    document.write_text(f"<h1>Titel</h1><p><b>{sentence}</b></p>", encoding="utf-8")
    run_mt("translate", "-c", checkpoint, "--device", "cpu", "-i", document, "-o", tmp_path / "offline.html")

    browser.get(url + "/")
    WebDriverWait(browser, 30).until(ec.element_to_be_clickable((By.ID, "translate-button")))
    browser.find_element(By.ID, "file-tab").click()
    assert browser.find_element(By.ID, "file-tab").get_attribute("aria-selected") == "true"
    assert not browser.find_element(By.ID, "source-text").is_displayed()
    WebDriverWait(browser, 10).until(lambda d: ".docx" in d.find_element(By.ID, "source-file").get_attribute("accept"))
    assert browser.find_element(By.ID, "translate-button").text == "Translate file"
    browser.find_element(By.ID, "translate-button").click()  # no file chosen yet
    assert WebDriverWait(browser, 10).until(lambda d: d.find_element(By.ID, "error").text) == \
        "Choose a file to translate."

    browser.find_element(By.ID, "source-file").send_keys(str(document))
    browser.find_element(By.ID, "translate-button").click()
    link = WebDriverWait(browser, 60).until(lambda d: d.find_elements(By.ID, "download-link"))[0]
    assert link.get_attribute("download") == "Seite.html" and browser.find_element(By.ID, "error").text == ""
    download = httpx.get(link.get_attribute("href"), timeout=60)
    assert download.status_code == 200
    assert download.content == (tmp_path / "offline.html").read_bytes()

    (tmp_path / "notes.rtf").write_bytes(b"{\\rtf1 Notizen}")
    browser.find_element(By.ID, "source-file").send_keys(str(tmp_path / "notes.rtf"))
    browser.find_element(By.ID, "translate-button").click()
    error = WebDriverWait(browser, 30).until(lambda d: d.find_element(By.ID, "error").text)
    assert "notes.rtf: mt translates .arb, .docx" in error
    assert not browser.find_elements(By.ID, "download-link")
