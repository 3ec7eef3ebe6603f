"""LibreTranslate's `POST /suggest` on a real `mt serve --suggestions` process: stored in SQLite before the 200,
answered by the next /translate (and the web page), kept across a `kill -9`, exported as TMX."""

from __future__ import annotations

import signal
import sqlite3
import threading

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from mt.data.tmx import TmxPairs
from tests.chromium import page_translation
from tests.conftest import RunningServer, one_error_line, run_mt


@pytest.fixture
def checkpoint(trained_tiny):
    return trained_tiny / "checkpoint_last.pt"


def translated(server: RunningServer, q):
    answer = server.post("/translate", json={"q": q, "source": "de", "target": "en"})
    assert answer.status_code == 200, answer.text
    return answer.json()["translatedText"]


def test_a_suggestion_is_answered_at_once_and_survives_kill_9(checkpoint, tmp_path):
    database = tmp_path / "suggestions.db"
    server = RunningServer(checkpoint, "--suggestions", str(database))
    try:
        assert server.get("/frontend/settings").json()["suggestions"] is True
        machine = translated(server, ["Das ist ein Haus.", "Guten Morgen."])
        body = {"q": "Das ist ein Haus.", "s": "This is a house.", "source": "de", "target": "en"}
        assert server.post("/suggest", json=body).json() == {"success": True}
        assert translated(server, ["Das ist ein Haus.", "Guten Morgen."]) == ["This is a house.", machine[1]]
        assert translated(server, "  Das ist ein   Haus.") == "This is a house."  # normalised as a memory is
        page = server.post("/mt/translate", json={"lines": ["Das ist ein Haus."], "source": "de", "target": "en"})
        assert page.json()["results"][0]["hypotheses"] == [{"text": "This is a house.", "score": 0.0,
                                                            "memory": True}]
        assert server.post("/suggest", data={**body, "s": "That is a house."}).json() == {"success": True}
        server.proc.send_signal(signal.SIGKILL)  # right after the 200: no shutdown, no flush
        server.proc.wait(timeout=30)
    finally:
        server.proc.kill()
    again = RunningServer(checkpoint, "--suggestions", str(database))
    try:
        assert translated(again, "Das ist ein Haus.") == "That is a house."  # the newest
        assert any("(1 texts corrected)" in line for line in again.log)
    finally:
        assert again.stop() == 0


def test_bad_suggestions_get_libretranslates_errors(checkpoint, tmp_path):
    without = RunningServer(checkpoint)
    try:
        assert without.get("/frontend/settings").json()["suggestions"] is False
        answer = without.post("/suggest", json={"q": "a", "s": "b", "source": "de", "target": "en"})
        assert (answer.status_code, answer.json()) == (403, {"error": "Suggestions are disabled on this server."})
    finally:
        assert without.stop() == 0
    keys = tmp_path / "keys.txt"
    keys.write_text("alpha\n")
    server = RunningServer(checkpoint, "--suggestions", str(tmp_path / "s.db"), "--api-keys", str(keys))
    try:
        body = {"q": "Hallo", "s": "Hello", "source": "de", "target": "en", "api_key": "alpha"}
        for name in ("q", "s", "source", "target"):
            answer = server.post("/suggest", json={**body, name: ""})
            assert (answer.status_code, answer.json()) == (400, {"error": f"Invalid request: missing {name} "
                                                                          "parameter"})
        assert server.post("/suggest", json={**body, "s": ["x"]}).status_code == 400
        assert server.post("/suggest", json={**body, "target": "fr"}).status_code == 400
        assert server.post("/suggest", json={**body, "s": "x" * 20_000}).status_code == 400
        assert server.post("/suggest", json={**body, "api_key": "nope"}).json() == {"error": "Invalid API key"}
        assert server.post("/suggest", json=body).status_code == 200
    finally:
        assert server.stop() == 0
    rows = sqlite3.connect(tmp_path / "s.db").execute("SELECT q, s, key_hash IS NOT NULL FROM suggestions").fetchall()
    assert rows == [("Hallo", "Hello", 1)]


def test_eight_clients_suggesting_and_translating_at_once_lose_nothing(checkpoint, tmp_path):
    database = tmp_path / "s.db"
    server = RunningServer(checkpoint, "--suggestions", str(database))
    failures = []

    def client(k: int):
        try:
            for i in range(10):
                q = f"Satz {k} Nummer {i}."
                assert server.post("/suggest", json={"q": q, "s": f"Sentence {k} number {i}.", "source": "de",
                                                     "target": "en"}).status_code == 200
                assert translated(server, [q, "Guten Morgen."])[0] == f"Sentence {k} number {i}."
        except AssertionError as e:
            failures.append(e)
    try:
        threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert failures == []
        assert translated(server, [f"Satz {k} Nummer 9." for k in range(8)]) == \
               [f"Sentence {k} number 9." for k in range(8)]
    finally:
        assert server.stop() == 0
    assert sqlite3.connect(database).execute("SELECT count(*) FROM suggestions").fetchone() == (80,)
    exported = tmp_path / "s.tmx"
    proc = run_mt("suggestions", "export", database, "-o", exported)
    assert "wrote 80 suggestions" in proc.stderr
    pairs = list(TmxPairs(exported, "de", "en"))
    assert len(pairs) == 80 and ("Satz 3 Nummer 4.", "Sentence 3 number 4.") in pairs
    run_mt("suggestions", "export", database, "-o", tmp_path / "none.tmx", "--since", "2999-01-01")
    assert list(TmxPairs(tmp_path / "none.tmx", "de", "en")) == []
    bad = run_mt("suggestions", "export", database, "-o", tmp_path / "x.tmx", "--since", "soon", check=False)
    assert "--since soon: not a date" in one_error_line(bad) and not (tmp_path / "x.tmx").exists()


def test_the_page_edits_a_translation_and_the_server_answers_with_it(checkpoint, tmp_path, browser):
    server = RunningServer(checkpoint, "--suggestions", str(tmp_path / "s.db"))
    try:
        browser.get(server.url + "/")
        WebDriverWait(browser, 30).until(lambda d: d.execute_script("return suggestions"))  # settings read
        lines = page_translation(browser, "Das ist ein Test.", search="1")
        lines[0].find_element(By.CSS_SELECTOR, "button.edit").click()
        field = lines[0].find_element(By.CSS_SELECTOR, "input.suggestion")
        field.clear()
        field.send_keys("This is a test.")
        lines[0].find_element(By.TAG_NAME, "button").click()
        WebDriverWait(browser, 30).until(lambda d: d.find_element(By.ID, "status").text == "Suggestion saved.")
        assert translated(server, "Das ist ein Test.") == "This is a test."
        again = page_translation(browser, "Das ist ein Test.", search="1")
        assert again[0].get_attribute("data-text") == "This is a test."
    finally:
        assert server.stop() == 0
