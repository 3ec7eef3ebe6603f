"""`mt serve` as a real process on an ephemeral port, with real clients: LibreTranslate's API and its own Python
client, the native endpoint, many concurrent clients, bad input, keys, a full queue, disconnects and SIGTERM."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.conftest import DATA, RunningServer, run_mt
from tests.serving.conftest import dev_lines, resident_mb, single_sentence_lines, translate_offline


@pytest.fixture(scope="module")
def checkpoint(trained_tiny) -> Path:
    return trained_tiny / "checkpoint_last.pt"


@pytest.fixture(scope="module")
def server(checkpoint):
    running = RunningServer(checkpoint, "--max-sentences", "1000", "--max-chars", "100000")
    yield running
    assert running.stop() == 0


@pytest.fixture(scope="module")
def exported(checkpoint, tmp_path_factory) -> Path:
    """The tiny checkpoint as a CTranslate2 directory (`mt export`)."""
    folder = tmp_path_factory.mktemp("export") / "ct2"
    run_mt("export", "-c", checkpoint, "-o", folder)
    return folder


def test_an_exported_model_serves_concurrent_clients_as_mt_translate_decodes_it(exported):
    """A CTranslate2 export behind mt serve: the requests that arrive together decode in one call, and each
    client gets what `mt translate -c EXPORT` gives for its line (its score to the last rounded digit)."""
    dev = dev_lines()
    # Lines within the model's trained length (data.max_len 64 tokens): longer ones are split into pieces
    # (mt/decoding/long_sentences.py), which the server decodes as separate requests.
    # Two long requests keep both calls (--parallel-batches 2, the default) busy while the 16 arrive, so that they
    # wait together: with one long request, the 16 sent at once reached the free call one by one on a loaded CI
    # machine.
    lines, busy = [line for line in dev if len(line.split()) <= 15][:16], dev
    expected = [json.loads(e)["hypotheses"][0] for e in translate_offline(exported, lines, "--output-format",
                                                                          "json")]
    running = RunningServer(exported, "--max-sentences", "2000", "--max-chars", "1000000")
    try:
        with ThreadPoolExecutor(18) as pool:
            long_ones = [pool.submit(running.post, "/mt/translate", json={"lines": busy, "source": "de",
                                                                          "target": "en"}) for _ in range(2)]
            time.sleep(0.5)
            together = threading.Barrier(len(lines))  # the 16 are sent at one moment, not as threads start

            def ask(line: str) -> dict:
                together.wait(timeout=60)
                return running.post("/mt/translate", json={"lines": [line], "source": "de", "target": "en"}).json()
            answers = list(pool.map(ask, lines))
            assert [long_one.result().status_code for long_one in long_ones] == [200, 200]
        found = [a["results"][0]["hypotheses"][0] for a in answers]
        assert [f["text"] for f in found] == [e["text"] for e in expected]
        # Two calls at once (the default), each on half the threads: a sum may round otherwise than on all of them.
        assert [f["score"] for f in found] == pytest.approx([e["score"] for e in expected], abs=1.01e-4)
        rows = re.search(r"^mt_decode_step_rows_count (\S+)", running.get("/metrics").text, re.M)
        assert float(rows.group(1)) < 1 + 2 + len(lines)  # warm-up, the long ones, and the 16 not one by one
    finally:
        assert running.stop() == 0


def test_an_exported_model_places_inline_tags_as_mt_translate_does(exported, tmp_path):
    """format html through an export, whose search keeps the attention that places the tags: the page comes
    back as `mt translate -i page.html` writes it."""
    lines = [line for line in dev_lines() if 4 <= len(line.split()) <= 12][:6]
    page = "".join(f"<p>{' '.join(words[:2])} <b>{words[2]}</b> {' '.join(words[3:])}</p>\n"
                   for words in (line.split() for line in lines))
    (tmp_path / "in.html").write_text(page, encoding="utf-8")
    run_mt("translate", "-c", exported, "-i", tmp_path / "in.html", "-o", tmp_path / "out.html")
    running = RunningServer(exported)
    try:
        answer = running.post("/translate", json={"q": page, "source": "de", "target": "en", "format": "html"})
        assert answer.status_code == 200, answer.text
        assert answer.json()["translatedText"] == (tmp_path / "out.html").read_text(encoding="utf-8")
        assert answer.json()["translatedText"].count("<b>") == len(lines)
    finally:
        assert running.stop() == 0


@pytest.mark.timing  # a comparison of two latencies: run alone, after the rest
def test_parallel_batches_answer_a_short_request_while_a_long_one_decodes(exported):
    """--parallel-batches 2: CTranslate2 decodes two calls at once, so a one-line request that arrives while a
    long request decodes is answered before it, as `mt translate` translates the line (with one, it waits)."""
    dev = dev_lines()
    line = single_sentence_lines(1)[0]
    expected = translate_offline(exported, [line])
    running = RunningServer(exported, "--parallel-batches", "2", "--max-sentences", "10000", "--max-chars", "10000000",
                            "--max-queued-tokens", "10000000")
    try:
        def timed(post):
            start = time.perf_counter()
            answer = post()
            return answer, time.perf_counter() - start

        with ThreadPoolExecutor(1) as pool:
            long_one = pool.submit(timed, lambda: running.post("/mt/translate", json={
                "lines": dev * 5, "source": "de", "target": "en"}))
            time.sleep(0.5)
            short, short_seconds = timed(lambda: running.post("/translate", json={"q": line, "source": "de",
                                                                                   "target": "en"}))
            long_answer, long_seconds = long_one.result()
        assert short.json() == {"translatedText": expected[0]}
        assert long_answer.status_code == 200
        assert short_seconds < 0.5 * long_seconds  # it did not wait for the long one's call to end
    finally:
        assert running.stop() == 0


def test_threads_sets_how_many_threads_the_decoding_runs_on(exported):
    """--threads N: torch and CTranslate2 decode on N threads (the server process has one more OS thread per
    thread of theirs); the answers stay those of `mt translate`."""
    line = single_sentence_lines(1)[0]
    expected = translate_offline(exported, [line])
    counts = {}
    for threads in (1, 2):
        running = RunningServer(exported, "--threads", str(threads))
        try:
            answer = running.post("/translate", json={"q": line, "source": "de", "target": "en"}).json()
            assert answer == {"translatedText": expected[0]}
            counts[threads] = len(os.listdir(f"/proc/{running.proc.pid}/task"))
        finally:
            assert running.stop() == 0
    assert counts[2] > counts[1]


@pytest.mark.int8
@pytest.mark.parametrize("served", ["checkpoint", "exported"])
def test_quantize_int8_serves_what_mt_translate_quantize_int8_gives_and_says_so(served, request):
    """--quantize int8 as `mt translate --quantize int8` (CTranslate2's int8 for an export, what LibreTranslate
    decodes with); the start-up line names how each model decodes."""
    model, line = request.getfixturevalue(served), single_sentence_lines(1)[0]
    expected = translate_offline(model, [line], "--quantize", "int8")
    running = RunningServer(model, "--quantize", "int8", "--threads", "2")
    try:
        started = next(entry for entry in running.log if entry.startswith("mt serve: de-en"))
        assert ("(CTranslate2 int8" if served == "exported" else "(mt, int8 weights on cpu)") in started, started
        if served == "exported":
            assert "2 calls at once" in started
        answer = running.post("/translate", json={"q": line, "source": "de", "target": "en"}).json()
        assert answer == {"translatedText": expected[0]}
    finally:
        assert running.stop() == 0


def test_libretranslate_endpoints_answer_as_libretranslate_does(server, checkpoint):
    assert server.get("/languages").json() == [{"code": "de", "name": "German", "targets": ["en"]},
                                               {"code": "en", "name": "English", "targets": []}]
    assert server.get("/health").json() == {"status": "ok"}
    assert server.get("/ready").status_code == 200
    lines = single_sentence_lines(3)
    expected = translate_offline(checkpoint, lines)
    one = server.post("/translate", json={"q": lines[0], "source": "de", "target": "en"}).json()
    assert one == {"translatedText": expected[0]}
    many = server.post("/translate", json={"q": lines, "source": "de", "target": "en"}).json()
    assert many == {"translatedText": expected}
    form = server.post("/translate", data={"q": lines[1], "source": "de", "target": "en"}).json()
    assert form == {"translatedText": expected[1]}
    alternatives = server.post("/translate", json={"q": lines[0], "source": "de", "target": "en",
                                                   "alternatives": 2}).json()
    assert alternatives["translatedText"] == expected[0] and len(alternatives["alternatives"]) == 2


@pytest.fixture(scope="module")
def two_pairs(checkpoint, trained_tiny):
    """`-m de:en=A -m en:de=B`: the tiny run's last checkpoint and its step-30 one, whose outputs differ, so an
    answer shows which model wrote it."""
    running = RunningServer(checkpoint, "-m", f"en:de={trained_tiny / 'checkpoint_30.pt'}")
    yield running
    assert running.stop() == 0


def test_a_server_of_two_pairs_lists_both_and_each_translates_with_its_model(two_pairs, checkpoint, trained_tiny):
    assert two_pairs.get("/languages").json() == [{"code": "de", "name": "German", "targets": ["en"]},
                                                 {"code": "en", "name": "English", "targets": ["de"]}]
    line = single_sentence_lines(2)[1]
    expected = {"en": translate_offline(checkpoint, [line])[0],
                "de": translate_offline(trained_tiny / "checkpoint_30.pt", [line])[0]}
    assert expected["en"] != expected["de"]
    for source, target in (("de", "en"), ("en", "de")):
        answer = two_pairs.post("/translate", json={"q": line, "source": source, "target": target})
        assert answer.json() == {"translatedText": expected[target]}
    unserved = two_pairs.post("/translate", json={"q": line, "source": "de", "target": "de"})
    assert unserved.status_code == 400 and "this server translates de-en, en-de" in unserved.json()["error"]


def test_source_auto_detects_each_served_language_and_routes_to_its_pair(two_pairs, checkpoint, trained_tiny):
    """German text goes to de-en, English to en-de, each detected from the text (a detector that followed the
    target would pick de)."""
    german, english = single_sentence_lines(2)[1], single_sentence_lines(2, DATA / "dev.en")[1]
    cases = [(german, "de", "en", checkpoint), (english, "en", "de", trained_tiny / "checkpoint_30.pt")]
    for text, language, target, model in cases:
        expected = translate_offline(model, [text])[0]
        response = two_pairs.post("/translate", json={"q": text, "source": "auto", "target": target})
        assert response.status_code == 200, response.text
        answer = response.json()
        assert answer["translatedText"] == expected and answer["detectedLanguage"]["language"] == language
        assert 90 < answer["detectedLanguage"]["confidence"] <= 100  # measured: 99.9 (de), 93.7 (en)
        listed = two_pairs.post("/translate", data={"q": [text, text], "source": "auto", "target": target}).json()
        assert listed["translatedText"] == [expected] * 2 and len(listed["detectedLanguage"]) == 2
        detected = two_pairs.post("/detect", data={"q": text}).json()
        assert [d["language"] for d in detected] == [language, "en" if language == "de" else "de"]


def test_source_auto_on_text_already_in_the_target_language_answers_it_as_sent(two_pairs):
    """As LibreTranslate's identity translation: the text unchanged, its language detected, no alternatives."""
    english = single_sentence_lines(3, DATA / "dev.en")[1:]
    answer = two_pairs.post("/translate", json={"q": english[0], "source": "auto", "target": "en", "alternatives": 2})
    assert answer.status_code == 200, answer.text
    assert answer.json()["translatedText"] == english[0] and answer.json()["alternatives"] == []
    assert answer.json()["detectedLanguage"]["language"] == "en"
    listed = two_pairs.post("/translate", json={"q": english, "source": "auto", "target": "en"}).json()
    assert listed["translatedText"] == english and [d["language"] for d in listed["detectedLanguage"]] == ["en"] * 2


def _fetched(url: str) -> bytes:
    """GET `url` as given, with the standard library's client (which, like curl, refuses a URL with a space)."""
    with urllib.request.urlopen(url, timeout=60) as response:
        return response.read()


def test_translate_file_with_source_auto_detects_the_files_language_and_its_url_fetches(two_pairs, checkpoint):
    """A file named with a space: its translatedFileUrl is percent-encoded, so a plain client fetches it; source
    auto translates it from the language detected in it, and a file already in the target language comes back
    as it was."""
    german, english = single_sentence_lines(2)[1], single_sentence_lines(2, DATA / "dev.en")[1]
    urls = {}
    for source in ("de", "auto"):
        answer = two_pairs.post("/translate_file", data={"source": source, "target": "en"},
                                files={"file": ("my notes.txt", f"{german}\n".encode())})
        assert answer.status_code == 200, answer.text
        urls[source] = answer.json()["translatedFileUrl"]
    assert urls["auto"].endswith(".my%20notes.txt")
    translated = f"{translate_offline(checkpoint, [german])[0]}\n".encode()
    assert _fetched(urls["auto"]) == _fetched(urls["de"]) == translated
    same = two_pairs.post("/translate_file", data={"source": "auto", "target": "en"},
                          files={"file": ("already english.txt", f"{english}\n".encode())})
    assert same.status_code == 200, same.text
    assert _fetched(same.json()["translatedFileUrl"]) == f"{english}\n".encode()


def test_several_sentences_come_back_joined_with_their_whitespace(server, checkpoint):
    lines = single_sentence_lines(3)
    text = f"  {lines[0]}.  {lines[1]}!\n\n{lines[2]}\n"
    parts = translate_offline(checkpoint, [f"{lines[0]}.", f"{lines[1]}!", lines[2]])
    answer = server.post("/translate", json={"q": text, "source": "de", "target": "en"}).json()
    assert answer == {"translatedText": f"  {parts[0]}  {parts[1]}\n\n{parts[2]}\n"}


def test_html_keeps_its_markup(server, checkpoint):
    words = single_sentence_lines(2)
    expected = translate_offline(checkpoint, words)
    answer = server.post("/translate", json={"q": f'<p class="x">{words[0]}</p><br/><i>{words[1]}</i>',
                                             "source": "de", "target": "en", "format": "html"}).json()
    escaped = [e.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") for e in expected]
    assert answer == {"translatedText": f'<p class="x">{escaped[0]}</p><br/><i>{escaped[1]}</i>'}


def test_libretranslates_own_client_translates_through_mt(server, checkpoint):
    from libretranslatepy import LibreTranslateAPI

    client = LibreTranslateAPI(server.url + "/")
    line = single_sentence_lines(1)[0]
    assert client.translate(line, "de", "en") == translate_offline(checkpoint, [line])[0]
    assert client.languages() == [{"code": "de", "name": "German", "targets": ["en"]},
                                  {"code": "en", "name": "English", "targets": []}]


def test_32_concurrent_clients_get_what_mt_translate_gives(server, checkpoint):
    lines = dev_lines()[:64]
    expected = translate_offline(checkpoint, lines, "--output-format", "json")

    def ask(i: int):
        return server.post("/mt/translate", json={"lines": [lines[i]], "source": "de", "target": "en"}).json()
    with ThreadPoolExecutor(32) as pool:
        answers = list(pool.map(ask, range(len(lines))))
    texts = [answer["results"][0]["hypotheses"][0]["text"] for answer in answers]
    assert texts == [json.loads(e)["hypotheses"][0]["text"] for e in expected]


def test_the_native_endpoint_takes_mt_translates_options(server, checkpoint):
    lines = single_sentence_lines(4)
    options = {"beam_size": 3, "nbest": 2, "alignment": True}
    answer = server.post("/mt/translate", json={"lines": lines, "source": "de", "target": "en", **options}).json()
    expected = translate_offline(checkpoint, lines, "--beam-size", "3", "--nbest", "2", "--alignment",
                                 "--output-format", "json")
    assert [[h["text"] for h in r["hypotheses"]] for r in answer["results"]] == \
           [[h["text"] for h in json.loads(e)["hypotheses"]] for e in expected]
    assert [[h["alignment"] for h in r["hypotheses"]] for r in answer["results"]] == \
           [[h["alignment"] for h in json.loads(e)["hypotheses"]] for e in expected]
    sampled = server.post("/mt/translate", json={"lines": lines, "source": "de", "target": "en", "sampling": True,
                                                 "seed": 7, "topk": 5}).json()
    offline = translate_offline(checkpoint, lines, "--sampling", "--seed", "7", "--topk", "5")
    assert [r["hypotheses"][0]["text"] for r in sampled["results"]] == offline


def test_a_glossary_makes_its_target_terms_appear(server, checkpoint):
    line = single_sentence_lines(1)[0]
    source_word = line.split()[0]
    answer = server.post("/translate", json={"q": line, "source": "de", "target": "en",
                                             "glossary": {source_word: "zebra"}}).json()
    assert "zebra" in answer["translatedText"]
    plain = server.post("/translate", json={"q": line, "source": "de", "target": "en"}).json()
    assert plain["translatedText"] == translate_offline(checkpoint, [line])[0]


def test_a_glossary_term_is_found_as_a_whole_word_in_any_case():
    """The substring test before each term's pattern rejects no match of the pattern (ı, ß, the Kelvin sign)."""
    from mt.serving.glossary import terms_per_sentence
    glossary = {"haus": "house", "istanbul": "Istanbul", "straße": "street", "kg": "kilogram", "New York": "NY"}
    sentences = ["Das HAUS", "Hausboot", "İstanbul", "ıSTANBUL", "STRASSE", "Straße", "5 \u212ag", "in new  york",
                 "in NEW YORK."]
    expected = [tuple(target for source, target in glossary.items()
                      if re.search(rf"(?<!\w){re.escape(source)}(?!\w)", sentence, flags=re.IGNORECASE))
                for sentence in sentences]
    assert terms_per_sentence(sentences, glossary) == expected
    assert expected == [("house",), (), ("Istanbul",), ("Istanbul",), (), ("street",), ("kilogram",), (), ("NY",)]


@pytest.mark.parametrize("body, kind, message", [
    (b"{bad json", "application/json", "malformed JSON"),
    (b'"just a string"', "application/json", "must be an object"),
    (b'{"source": "de", "target": "en"}', "application/json", "missing q"),
    (b'{"q": 5, "source": "de", "target": "en"}', "application/json", "q must be a string"),
    (b'{"q": [], "source": "de", "target": "en"}', "application/json", "missing q"),
    (b'{"q": "", "source": "de", "target": "en"}', "application/json", "missing q"),
    (b'{"q": "Hallo", "target": "en"}', "application/json", "source"),
    (b'{"q": "Hallo", "source": "fr", "target": "en"}', "application/json", "fr-en is not available"),
    (b'{"q": "Hallo", "source": "de", "target": "en", "format": "xml"}', "application/json", "format"),
    (b'{"q": "Hallo", "source": "de", "target": "en", "alternatives": "x"}', "application/json", "alternatives"),
    (b'{"q": "Hallo", "source": "de", "target": "en", "glossary": ["a"]}', "application/json", "glossary"),
    (b'{"q": "\xff\xfe", "source": "de", "target": "en"}', "application/json", "UTF-8"),
    (json.dumps({"q": "x" * 100_001, "source": "de", "target": "en"}).encode(), "application/json", "text limit"),
    (json.dumps({"q": "a\n" * 10_000, "source": "de", "target": "en"}).encode(), "application/json",
     "sentences"),
])
def test_bad_input_is_a_400_with_one_line_and_the_server_keeps_serving(server, body, kind, message):
    response = server.post("/translate", content=body, headers={"content-type": kind})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert message in error and "\n" not in error and "Traceback" not in response.text
    assert server.post("/translate", json={"q": "Hallo", "source": "de", "target": "en"}).status_code == 200


@pytest.mark.parametrize("method, path, status", [("GET", "/nowhere", 404), ("GET", "/translate", 405)])
def test_an_unknown_path_or_method_is_a_json_error(server, method, path, status):
    response = httpx.request(method, server.url + path, timeout=60)
    assert response.status_code == status
    assert path in response.json()["error"]


@pytest.mark.parametrize("fields, message", [
    ({"lines": "Hallo"}, "lines must be"),
    ({"lines": ["Hallo"], "beam_size": 0}, "decode.beam_size"),
    ({"lines": ["Hallo"], "max_len_a": "many"}, "decode.max_len_a"),
    ({"lines": ["Hallo"], "nbest": 0}, "nbest"),
    ({"lines": ["Hallo"], "alignment": "maybe"}, "alignment"),
    ({"lines": ["Hallo"], "constraints": True, "sampling": True}, "constraints"),
])
def test_native_endpoint_mistakes_are_400(server, fields, message):
    response = server.post("/mt/translate", json={"source": "de", "target": "en", **fields})
    assert response.status_code == 400 and message in response.json()["error"], response.text


def test_metrics_count_requests_queue_and_rows(server):
    server.post("/translate", json={"q": "Hallo", "source": "de", "target": "en"})
    text = server.get("/metrics").text
    for name in ("mt_requests_total", "mt_request_seconds_bucket", "mt_queued_source_tokens",
                 "mt_decode_step_rows_bucket", "mt_sentences_total", "mt_output_tokens_total"):
        assert name in text
    assert 'mt_requests_total{endpoint="/translate",status="200"}' in text


def test_logs_name_requests_without_their_text(server):
    server.post("/translate", json={"q": "Geheimnisvoller Satz", "source": "de", "target": "en"})
    time.sleep(0.2)
    log = "".join(server.log)
    assert "POST /translate 200" in log and "Geheimnisvoller" not in log


def test_api_keys_are_required_and_limited_per_minute(checkpoint, tmp_path):
    keys = tmp_path / "keys.txt"
    keys.write_text("alpha 2\nbeta\n")
    running = RunningServer(checkpoint, "--api-keys", str(keys))
    try:
        body = {"q": "Hallo", "source": "de", "target": "en"}
        assert running.post("/translate", json=body).status_code == 403
        assert running.post("/translate", json={**body, "api_key": "nope"}).json() == {"error": "Invalid API key"}
        assert [running.post("/translate", json={**body, "api_key": "alpha"}).status_code for _ in range(3)] == \
               [200, 200, 429]
        assert running.post("/translate", data={**body, "api_key": "beta"}).status_code == 200
        others = {"/detect": {"q": "Hallo"}, "/mt/translate": {"lines": ["Hallo"], "source": "de", "target": "en"}}
        for path, fields in others.items():  # one access check (app.py's _access_checked) guards each endpoint
            assert running.post(path, json=fields).json() == {"error": "Invalid API key"}, path
            assert running.post(path, json={**fields, "api_key": "beta"}).status_code == 200, path
        upload, pair = {"file": ("a.txt", b"Hallo")}, {"source": "de", "target": "en"}
        assert running.post("/translate_file", data=pair, files=upload).json() == {"error": "Invalid API key"}
        assert running.post("/translate_file", data={**pair, "api_key": "beta"}, files=upload).status_code == 200
    finally:
        assert running.stop() == 0


def test_a_full_queue_refuses_with_503_and_drops_nothing_it_accepted(checkpoint):
    """With --queue-wait 0 a request that finds the queue full is refused at once (by default it waits for room:
    tests/serving/test_weblate.py)."""
    running = RunningServer(checkpoint, "--max-queued-tokens", "200", "--queue-wait", "0")
    try:
        lines = dev_lines()[:40]

        def ask(line):
            return running.post("/mt/translate", json={"lines": [line] * 3, "source": "de", "target": "en"})
        with ThreadPoolExecutor(40) as pool:
            responses = list(pool.map(ask, lines))
        statuses = [r.status_code for r in responses]
        assert set(statuses) <= {200, 503} and 503 in statuses and 200 in statuses
        assert all(r.headers["retry-after"] == "1" for r in responses if r.status_code == 503)
        expected = translate_offline(checkpoint, lines)
        for line, response, text in zip(lines, responses, expected):
            if response.status_code == 200:
                assert [r["hypotheses"][0]["text"] for r in response.json()["results"]] == [text] * 3
    finally:
        assert running.stop() == 0


def test_a_client_that_disconnects_releases_its_sentences(server):
    """600 lines, greedy to the length limit in batches of 256 source tokens, take about a minute to decode (68 s
    on a 2-core Xeon); the client leaves after 0.5 s, and within seconds nothing of it is queued and the server
    answers the next request (the lines not yet decoding were dropped)."""
    lines = dev_lines()[:600]
    with pytest.raises(httpx.TimeoutException):
        server.post("/mt/translate", json={"lines": lines, "source": "de", "target": "en", "beam_size": 1,
                                           "max_len_b": 200, "batch_tokens": 256}, timeout=0.5)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        queued = re.search(r"^mt_queued_source_tokens (\S+)", server.get("/metrics").text, re.M)
        if float(queued.group(1)) == 0:
            break
        time.sleep(0.2)
    else:
        raise AssertionError("the disconnected client's sentences stayed queued")
    assert server.post("/translate", json={"q": "Hallo", "source": "de", "target": "en"}, timeout=10).status_code == 200


def test_an_idle_server_hands_the_memory_it_freed_back(server):
    """While it decodes, the server keeps freed memory for reuse (mt/tuning.py); a second after it goes idle,
    malloc hands it back: a large request's buffers do not stay resident."""
    peak, answered = [0.0], threading.Event()

    def sample():  # the peak while it decodes: on a loaded machine the answer may come after the trim
        while not answered.is_set():
            peak[0] = max(peak[0], resident_mb(server.proc.pid))
            time.sleep(0.05)
    sampler = threading.Thread(target=sample)
    sampler.start()
    response = server.post("/mt/translate", json={"lines": dev_lines(), "source": "de", "target": "en",
                                                  "batch_tokens": 20000})
    answered.set()
    sampler.join()
    assert response.status_code == 200
    time.sleep(3)
    assert resident_mb(server.proc.pid) < peak[0] - 30


def wait_until_accepted(running: RunningServer, endpoint: str, count: int) -> None:
    """Until the server has taken `count` requests to `endpoint` (in progress or answered): a connection still in
    the listening socket's backlog at SIGTERM is not accepted, and is reset (as gunicorn's and uvicorn's are)."""
    def taken() -> float:
        text = running.get("/metrics").text
        found = re.findall(rf'^mt_requests_(?:in_progress|total)\{{endpoint="{re.escape(endpoint)}"[^}}]*\}} (\S+)',
                           text, re.M)
        return sum(float(value) for value in found)
    deadline = time.monotonic() + 60
    while taken() < count:
        assert time.monotonic() < deadline, f"the server took {taken()} of {count} requests in 60 s"
        time.sleep(0.02)


@pytest.mark.parametrize("served", ["checkpoint", "exported"])
def test_sigterm_answers_every_accepted_request_then_exits_0(served, request):
    """Also an export decoding two CTranslate2 calls at once: the calls running at the signal are waited for."""
    dev = dev_lines()
    limits = ("--max-chars", "10000000", "--max-queued-tokens", "10000000", "--shutdown-grace", "600")
    parallel = ("--parallel-batches", "2") if served == "exported" else ()
    running = RunningServer(request.getfixturevalue(served), *parallel, *limits)
    lines = dev * 4  # four times the dev set: on an idle machine one set decodes in under 0.5 s
    results: list = []

    def ask(i):
        results.append(running.post("/mt/translate", json={"lines": lines[i::8], "source": "de", "target": "en"}))
    threads = [threading.Thread(target=ask, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    wait_until_accepted(running, "/mt/translate", 8)
    running.proc.send_signal(signal.SIGTERM)
    assert len(results) < 8  # some were still decoding
    for t in threads:
        t.join(timeout=120)
    assert running.proc.wait(timeout=120) == 0
    assert [r.status_code for r in results] == [200] * 8
    assert sum(len(r.json()["results"]) for r in results) == len(lines)
