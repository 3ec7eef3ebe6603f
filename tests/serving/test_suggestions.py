"""LibreTranslate's `POST /suggest` on a real `mt serve --suggestions` process: stored in SQLite before the 200,
answered by the next /translate (and the web page), kept across a `kill -9`, exported as TMX."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

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
        except Exception as e:  # an assertion, or the server not answering
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


def test_sighup_swaps_in_a_model_moved_into_place_and_every_request_is_answered(trained_tiny, tmp_path):
    """The loop's last step: an adapted checkpoint replaces the served file (mv), SIGHUP loads it beside the running
    model and swaps it in while eight clients keep translating."""
    import shutil

    served = tmp_path / "served.pt"
    shutil.copy(trained_tiny / "checkpoint_last.pt", served)
    other = trained_tiny / "checkpoint_30.pt"  # an earlier update of the same run: another model
    sentence = "Dieses Paket enthält die Dokumentation."
    before, after = (run_mt("translate", "-c", c, input=sentence + "\n").stdout.strip() for c in (served, other))
    assert before != after, "the two checkpoints translate alike; pick another sentence"
    server = RunningServer(served)
    answers, stop = [], threading.Event()

    def client():
        while not stop.is_set():
            try:
                answer = server.post("/translate", json={"q": "Das ist ein Test.", "source": "de", "target": "en"})
                answers.append(answer.status_code)
            except Exception as e:  # a request the swap broke
                answers.append(repr(e))
    try:
        threads = [threading.Thread(target=client) for _ in range(8)]
        for t in threads:
            t.start()
        replacement = tmp_path / "adapted.pt"
        shutil.copy(other, replacement)
        replacement.replace(served)
        server.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 60
        while not any("reloaded de-en" in line for line in server.log) and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)
        stop.set()
        for t in threads:
            t.join()
        assert any("reloaded de-en" in line for line in server.log), "".join(server.log)
        assert answers and set(answers) == {200}, answers
        assert translated(server, sentence) == after
    finally:
        stop.set()
        assert server.stop() == 0


def test_a_request_that_chose_a_retired_model_goes_to_the_one_swapped_in(trained_tiny):
    """The race the SIGHUP swap has: a request picks the served model, a reload swaps and retires it while the
    request's lines are cut into pieces, then the request submits. The retired worker refuses it (Retired), so
    the server sends it to the new model instead of leaving it in a queue no thread reads."""
    from mt.decoding.lines import LineText
    from mt.decoding.loading import load_translator
    from mt.decoding.text_front_end import TextBatch
    from mt.serving.decode_thread import DecodeThread, Retired

    decoder = DecodeThread()
    try:
        translator = decoder.call(lambda: load_translator(trained_tiny / "checkpoint_last.pt", "cpu"))
        old, new = (decoder.add_worker(translator.backend, 10_000) for _ in range(2))
        batch = TextBatch(translator, [LineText("Das ist ein Test.", 0)], translator.cfg.decode)
        accepted = old.submit(batch.todo)  # before the swap: answered by the old worker, which waits for it
        with decoder.lock:
            assert not old.retire()
        assert accepted.done.result(timeout=60)
        with decoder.lock:
            assert old.retire() and old not in decoder.workers
        with pytest.raises(Retired):
            old.submit(batch.todo)
        assert new.submit(batch.todo).done.result(timeout=60)
    finally:
        decoder.stop()


def test_a_worker_whose_jobs_a_turn_took_is_not_retired_before_its_engine_has_them(trained_tiny):
    """The other race of the swap: the decode thread takes a turn's jobs from a worker's inbox under the lock, then
    hands them to its engine and steps it after releasing the lock (a part the engine admits is neither waiting
    nor decoding while its batch is encoded). A reload retiring the worker during the turn would find nothing
    queued and nothing decoding, let the worker go, and leave those requests unanswered."""
    from mt.decoding.lines import LineText
    from mt.decoding.loading import load_translator
    from mt.decoding.text_front_end import TextBatch
    from mt.serving.decode_thread import DecodeThread

    decoder = DecodeThread()
    try:
        translator = decoder.call(lambda: load_translator(trained_tiny / "checkpoint_last.pt", "cpu"))
        worker = decoder.add_worker(translator.backend, 10_000)
        batch = TextBatch(translator, [LineText("Das ist ein Test.", 0)], translator.cfg.decode)
        with decoder.lock:  # the decode thread takes nothing meanwhile
            accepted = worker.submit(batch.todo)
            taken = worker.take()  # as the decode thread's turn takes them, before its engine has them
            assert taken[0] and not worker.retire()
        decoder.call(lambda: worker.turn(*taken))  # the turn goes on, on the decode thread
        assert accepted.done.result(timeout=60)
        with decoder.lock:
            assert worker.retire()
    finally:
        decoder.stop()


def test_adapt_fine_tunes_on_reviewed_corrections_and_refuses_a_worse_model(trained_tiny, tmp_path, monkeypatch):
    from mt.commands import adapt
    from mt.errors import MtError
    from tests.conftest import small_dev

    corrections = tmp_path / "reviewed.tmx"
    corrections.write_text('<tmx version="1.4"><header srclang="de" datatype="plaintext" segtype="sentence" '
                           'adminlang="en" creationtool="t" o-tmf="t"/><body><tu><tuv xml:lang="de"><seg>Das ist ein '
                           'Haus.</seg></tuv><tuv xml:lang="en"><seg>This is a house.</seg></tuv></tu></body></tmx>',
                           encoding="utf-8")
    dev = small_dev()
    common = ["-c", trained_tiny / "checkpoint_last.pt", "--dev-src", dev / "dev.de", "--dev-ref", dev / "dev.en",
              "--src-lang", "de", "--tgt-lang", "en", "--steps", "3", "--max-bleu-loss", "100"]
    proc = run_mt("adapt", *common, "--corrections", corrections, "-o", tmp_path / "adapted.pt")
    assert "adapt: dev BLEU" in proc.stderr and (tmp_path / "adapted.pt").stat().st_size > 0
    assert not list(tmp_path.glob(".adapted.pt.adapt-*"))  # its run folder is gone
    assert run_mt("translate", "-c", tmp_path / "adapted.pt", input="Haus\n").returncode == 0
    database = tmp_path / "s.db"
    sqlite3.connect(database).close()
    proc = run_mt("adapt", *common, "--corrections", database, "-o", tmp_path / "b.pt", check=False)
    assert "holds what anyone sent" in one_error_line(proc) and not (tmp_path / "b.pt").exists()

    def fake(*args):  # training that writes a checkpoint, and a dev BLEU that falls from 20 to 10
        if args[0] == "train":
            run = Path(next(a for a in args if str(a).startswith("output_dir=")).split("=", 1)[1])
            run.mkdir(parents=True)
            (run / "checkpoint_last.pt").write_bytes(b"adapted")
        score = 20.0 if args[2] == trained_tiny / "checkpoint_last.pt" else 10.0  # the model, then the adapted one
        return subprocess.CompletedProcess(args, 0, json.dumps({"bleu": {"score": score}}), "")
    monkeypatch.setattr(adapt, "_mt", fake)
    with pytest.raises(MtError, match=r"loses 10\.00 BLEU .* \(20\.00 -> 10\.00\), more than --max-bleu-loss 0\.5"):
        adapt.adapt(trained_tiny / "checkpoint_last.pt", corrections, tmp_path / "worse.pt", dev / "dev.de",
                    dev / "dev.en", ("de", "en"), 3, 1.0, 0.5, False, None, lambda message: None)
    assert not (tmp_path / "worse.pt").exists() and not list(tmp_path.glob(".worse.pt.adapt-*"))
