"""`mt serve` against hostile and ordinary clients, as a real process: a request that cannot stall the server,
bodies over the limit, slow, half-sent and idle connections, shutdown with a client that never finishes, every
client mistake a 4xx, the query string of deep-translator's LibreTranslator, CORS, a /metrics token and the web
page with an API key in Chromium."""

from __future__ import annotations

import random
import signal
import socket
import string
import threading
import time

import httpx
import pytest
from deep_translator import LibreTranslator
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.chromium import page_translation
from tests.conftest import RunningServer
from tests.serving.conftest import resident_mb, single_sentence_lines, translate_offline

TOKEN = "metrics-s3cret"
ORIGIN = "https://app.example"


@pytest.fixture(scope="module")
def checkpoint(trained_tiny):
    return trained_tiny / "checkpoint_last.pt"


@pytest.fixture(scope="module")
def offline(checkpoint) -> dict[str, str]:
    """`mt translate` of the first two one-sentence dev lines, line -> translation (one process for the file)."""
    lines = single_sentence_lines(2)
    return dict(zip(lines, translate_offline(checkpoint, lines)))


@pytest.fixture(scope="module")
def server(checkpoint):
    """Open to every origin (the default), with short timeouts and a /metrics token."""
    running = RunningServer(checkpoint, "--read-timeout", "2", "--keep-alive-timeout", "1",
                            "--metrics-auth-token", TOKEN)
    yield running
    assert running.stop() == 0


@pytest.fixture(scope="module")
def keyed(checkpoint, tmp_path_factory):
    """With API keys, and CORS for one origin only."""
    keys = tmp_path_factory.mktemp("keys") / "keys.txt"
    keys.write_text("alpha\n")
    running = RunningServer(checkpoint, "--api-keys", str(keys), "--cors-origins", ORIGIN)
    yield running
    assert running.stop() == 0


def raw(url: str, data: bytes = b"") -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)))
    if data:
        sock.sendall(data)
    return sock


def read_until_closed(sock: socket.socket, timeout: float = 15) -> tuple[bytes, float]:
    """What the server sent until it closed the connection, and the seconds that took."""
    sock.settimeout(timeout)
    start, received = time.monotonic(), b""
    while chunk := sock.recv(65536):
        received += chunk
    return received, time.monotonic() - start


def metric(running: RunningServer, endpoint: str, status: int) -> float:
    text = httpx.get(running.url + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30).text
    prefix = f'mt_requests_total{{endpoint="{endpoint}",status="{status}"}} '
    return next((float(line.removeprefix(prefix)) for line in text.splitlines() if line.startswith(prefix)), 0.0)


def test_health_answers_within_100_ms_while_the_largest_glossary_request_decodes(server):
    """500 lines and a 1,000-entry glossary (the bounds): matching runs off the event loop."""
    rng = random.Random(1)
    lines = [" ".join(rng.choice(["das", "ist", "klein", "wir"]) for _ in range(3)) for _ in range(499)] + ["Haus"]
    glossary = {}
    while len(glossary) < 999:
        term = "".join(rng.choice(string.ascii_lowercase) for _ in range(5))
        glossary[term] = term[::-1]
    glossary["Haus"] = "house"
    waits, done = [], threading.Event()

    def poll():
        with httpx.Client() as client:
            while not done.is_set():
                start = time.perf_counter()
                assert client.get(server.url + "/health").status_code == 200
                waits.append(time.perf_counter() - start)
                time.sleep(0.005)  # often: on a fast machine the request decodes in 0.2 s
    poller = threading.Thread(target=poll)
    poller.start()
    try:
        answer = server.post("/translate", json={"q": "\n".join(lines), "source": "de", "target": "en",
                                                 "glossary": glossary})
    finally:
        done.set()
        poller.join()
    assert answer.status_code == 200, answer.text
    assert len(waits) > 10 and max(waits) < 0.1, (len(waits), max(waits))


@pytest.mark.parametrize("glossary, message", [
    ({f"w{i}": "x" for i in range(1001)}, "glossary has 1001 entries, more than 1000"),
    ({"Haus": "x" * 201}, "a glossary term has 201 characters, more than 200"),
    ({f"w{i:04}": "y" * 190 for i in range(105)}, "glossary included) exceeds text limit (20000)"),
    ({"Haus": "house", "Baum": " "}, 'glossary term "Baum" has an empty target term'),
    ({"Haus": "house", "": "tree"}, 'glossary has an empty source term (its target term is "tree")'),
])
def test_a_glossary_is_bounded_and_counted_in_the_character_limit(server, glossary, message):
    answer = server.post("/translate", json={"q": "Haus", "source": "de", "target": "en", "glossary": glossary})
    assert answer.status_code == 400 and message in answer.json()["error"], answer.text


def test_a_body_over_the_limit_is_a_413_before_it_is_read(server):
    """50 MB of `q`: refused from Content-Length, and the server does not grow by it."""
    before = resident_mb(server.proc.pid)
    answer = server.post("/translate", content=b'{"q": "' + b"a" * 50_000_000 + b'"}',
                         headers={"content-type": "application/json"})
    assert answer.status_code == 413
    assert answer.json() == {"error": "Request body too large: 50000009 bytes, more than 305536"}
    assert resident_mb(server.proc.pid) < before + 30
    assert server.post("/translate", json={"q": "Hallo", "source": "de", "target": "en"}).status_code == 200


def test_a_chunked_body_is_cut_at_the_limit_while_it_is_read(server):
    sock = raw(server.url, b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                           b"Transfer-Encoding: chunked\r\n\r\n")
    chunk = b"a" * 100_000
    for _ in range(4):
        sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
    sock.sendall(b"0\r\n\r\n")
    received, _ = read_until_closed(sock)
    assert received.startswith(b"HTTP/1.1 413 ")
    assert received.endswith(b'{"error":"Request body too large: more than 305536 bytes"}')


def test_idle_slow_and_half_sent_connections_are_closed(server):
    """Keep-alive 1 s, read timeout 2 s: a connection that sends nothing, one that sends half its headers, and one
    that sends its headers and one byte of a 60-byte body."""
    idle = [raw(server.url) for _ in range(200)]
    for sock in idle:
        received, seconds = read_until_closed(sock)
        assert received == b"" and seconds < 5
    received, seconds = read_until_closed(raw(server.url, b"POST /translate HTTP/1.1\r\nHost: x\r\n"))
    assert received.startswith(b"HTTP/1.1 408 ") and b'{"error":"Request not received within 2 s"}' in received
    assert 1.5 < seconds < 5
    received, seconds = read_until_closed(raw(server.url, b"POST /translate HTTP/1.1\r\nHost: x\r\n"
                                                          b"Content-Type: application/json\r\nContent-Length: 60\r\n\r\n{"))
    assert received.startswith(b"HTTP/1.1 408 ") and received.endswith(b'"Request body not received within 2 s"}')
    assert 1.5 < seconds < 5
    sock = raw(server.url, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")  # keep-alive: closed after its answer
    received, seconds = read_until_closed(sock)
    assert received.endswith(b'{"status":"ok"}') and seconds < 4


def test_a_client_that_leaves_mid_body_is_counted_as_499_not_500(server):
    before = metric(server, "/translate", 499)
    sock = raw(server.url, b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                           b"Content-Length: 60\r\n\r\n{")
    time.sleep(0.3)
    sock.close()
    deadline = time.monotonic() + 10
    while metric(server, "/translate", 499) == before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert metric(server, "/translate", 499) == before + 1
    assert metric(server, "/translate", 500) == 0


def deeply_nested(depth: int) -> bytes:
    return b'{"q": ' + b"[" * depth + b"]" * depth + b', "source": "de", "target": "en"}'


@pytest.mark.parametrize("body, kind, status, message", [
    (b'{"q": "\\ud800", "source": "de", "target": "en"}', "application/json", 400,
     "field 'q' holds a lone surrogate"),
    (b'{"q": "Hallo", "source": "de", "target": "en", "alternatives": Infinity}', "application/json", 400,
     "Infinity is not a JSON number"),
    (b'{"q": "Hallo", "source": "de", "target": "en", "alternatives": 1e400}', "application/json", 400,
     "1e400 is too large a number"),
    (b'{"q": "Hallo", "source": "de", "target": "en", "alternatives": ' + b"9" * 5000 + b"}", "application/json",
     400, "malformed JSON"),
    (deeply_nested(100_000), "application/json", 400, "nested too deeply"),
    ("&".join(f"f{i}=x" for i in range(1001)).encode(), "application/x-www-form-urlencoded", 400,
     "Too many fields"),
    (b"q=" + b"a" * 1_100_000, "application/x-www-form-urlencoded", 413, "Request body too large"),
    (b"q=Hallo&source=de&target=en&alternatives=Infinity", "application/x-www-form-urlencoded", 400,
     "alternatives must be an integer"),
])
def test_client_mistakes_are_4xx_with_one_line(server, body, kind, status, message):
    response = server.post("/translate", content=body, headers={"content-type": kind})
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert message in error and "\n" not in error
    assert server.post("/translate", json={"q": "Hallo", "source": "de", "target": "en"}).status_code == 200


@pytest.mark.parametrize("key", [["alpha"], {"key": "alpha"}, 5])
def test_an_api_key_that_is_not_a_string_is_a_403(keyed, key):
    response = keyed.post("/translate", json={"q": "Hallo", "source": "de", "target": "en", "api_key": key})
    assert response.status_code == 403 and response.json() == {"error": "Invalid API key"}


def test_deep_translators_libretranslator_sends_the_query_string(server, keyed, offline):
    line, expected = next(iter(offline.items()))
    for running, key in ((server, "anything"), (keyed, "alpha")):
        client = LibreTranslator(source="de", target="en", api_key=key, custom_url=running.url + "/")
        assert client.translate(line) == expected
    refused = httpx.post(keyed.url + "/translate", params={"q": line, "source": "de", "target": "en"}, timeout=60)
    assert refused.status_code == 403


def test_cors_allows_every_origin_by_default_and_one_when_restricted(server, keyed):
    preflight = {"Origin": ORIGIN, "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "content-type"}
    answer = httpx.options(server.url + "/translate", headers=preflight, timeout=30)
    assert answer.status_code == 200 and answer.headers["access-control-allow-origin"] == "*"
    posted = server.post("/translate", json={"q": "Hallo", "source": "de", "target": "en"},
                         headers={"Origin": "https://other.example"})
    assert posted.headers["access-control-allow-origin"] == "*"
    allowed = httpx.options(keyed.url + "/translate", headers=preflight, timeout=30)
    assert allowed.status_code == 200 and allowed.headers["access-control-allow-origin"] == ORIGIN
    other = httpx.options(keyed.url + "/translate", headers={**preflight, "Origin": "https://other.example"},
                          timeout=30)
    assert other.status_code == 400 and "access-control-allow-origin" not in other.headers


def test_metrics_need_the_token_when_one_is_set(server, keyed):
    refused = httpx.get(server.url + "/metrics", timeout=30)
    assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
    assert httpx.get(server.url + "/metrics", headers={"Authorization": "Bearer wrong"}, timeout=30).status_code == 401
    granted = httpx.get(server.url + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
    assert granted.status_code == 200 and "mt_requests_total" in granted.text
    assert httpx.get(keyed.url + "/metrics", timeout=30).status_code == 200  # no token set: open


def test_sigterm_closes_a_half_sent_request_after_the_grace_period(checkpoint):
    """A client that sent its headers and one byte of its body, and idle connections: SIGTERM answers it 503
    after the 2 s grace period and exits 1 (a request was cut off)."""
    running = RunningServer(checkpoint, "--shutdown-grace", "2", "--read-timeout", "60")
    try:
        half = raw(running.url, b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                b"Content-Length: 60\r\n\r\n{")
        idle = [raw(running.url) for _ in range(5)]
        time.sleep(0.5)
        start = time.monotonic()
        running.proc.send_signal(signal.SIGTERM)
        assert running.proc.wait(timeout=30) == 1
        assert time.monotonic() - start < 12
        received, _ = read_until_closed(half)
        assert received.startswith(b"HTTP/1.1 503 ") and received.endswith(b'{"error":"the server is shutting down"}')
        assert all(read_until_closed(sock)[0] == b"" for sock in idle)
        assert "closed 1 request(s) with 503" in "".join(running.log)
    finally:
        running.proc.kill()


def test_the_page_sends_the_api_key_it_keeps(keyed, browser):
    browser.get(keyed.url + "/")
    line = single_sentence_lines(1)[0]
    page_translation_with_error = WebDriverWait(browser, 60)
    browser.find_element(By.ID, "source-text").send_keys(line)
    page_translation_with_error.until(lambda d: d.find_element(By.ID, "translate-button").is_enabled())
    browser.find_element(By.ID, "translate-button").click()
    assert "Invalid API key" in page_translation_with_error.until(lambda d: d.find_element(By.ID, "error").text)
    key = browser.find_element(By.ID, "api-key")
    key.send_keys("alpha")
    browser.find_element(By.ID, "source-text").click()  # the key field's change event stores it
    browser.refresh()
    assert browser.find_element(By.ID, "api-key").get_attribute("value") == "alpha"  # kept in the browser
    assert len(page_translation(browser, line, search="1")) == 1


def test_an_overlong_sentence_is_split_at_its_clause_boundary_and_joined_back(server, checkpoint):
    """Two halves of about 50 tokens joined by a comma: together over the 64 tokens of the tiny model's training
    pairs (data.max_len; it has 254 source positions), they are translated apart (as `mt translate` translates
    each) and joined; the native endpoint says so."""
    from mt.decoding.loading import load_translator

    tokenizer = load_translator([str(checkpoint)], "cpu").src_tokenizer
    words = [w.strip(",;:.!?") for line in single_sentence_lines(200) for w in line.split()]
    halves, at = [], 0
    for _ in range(2):
        end = at + 1
        while len(tokenizer.encode([" ".join(words[at:end]) + ","])[0]) < 50:
            end += 1
        halves.append(" ".join(words[at:end]))
        at = end
    sentence = f"{halves[0]}, {halves[1]}"
    assert len(tokenizer.encode([sentence])[0]) > 64
    short = {"beam_size": 1, "max_len_a": 0, "max_len_b": 8}  # outputs of 8 tokens at most: a quick test
    parts = translate_offline(checkpoint, [halves[0] + ",", halves[1]], "--beam-size", "1", "--max-len-a", "0",
                              "--max-len-b", "8")
    answer = server.post("/mt/translate", json={"lines": [sentence], "source": "de", "target": "en",
                                                **short}).json()
    assert answer["results"][0]["split_into"] == 2
    assert answer["results"][0]["hypotheses"][0]["text"] == " ".join(p for p in parts if p)
    long_words = " ".join(words[:600])  # no clause punctuation: cut at whitespace, nothing dropped
    answer = server.post("/mt/translate", json={"lines": [long_words], "source": "de", "target": "en",
                                                **short}).json()
    tokens = len(tokenizer.encode([long_words])[0])
    assert tokens > 254 and answer["results"][0]["split_into"] >= tokens / 64  # pieces of 64 tokens at most


def test_html_edge_cases_come_back_as_sent(server, offline):
    words, expected = list(offline), list(offline.values())
    escaped = [e.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") for e in expected]
    document = (f'<P CLASS = "x" >{words[0]}</P ><![CDATA[ x < y ]]><?pi x?>\n<script>var a = "<b>";</script>'
                f"<b>{words[1]}</b> <!-- an unclosed comment, not translated")
    answer = server.post("/translate", json={"q": document, "source": "de", "target": "en", "format": "html"})
    assert answer.json() == {"translatedText": (f'<P CLASS = "x" >{escaped[0]}</P ><![CDATA[ x < y ]]><?pi x?>\n'
                                                f'<script>var a = "<b>";</script><b>{escaped[1]}</b> '
                                                "<!-- an unclosed comment, not translated")}


def test_detect_and_frontend_settings_answer_as_libretranslate_does(server):
    """With one pair, /detect lists its source alone. Detection with two pairs: tests/serving/test_server.py."""
    detected = server.post("/detect", data={"q": "Das ist ein kleines Haus und wir gehen nach Hause."}).json()
    assert [d["language"] for d in detected] == ["de"] and detected[0]["confidence"] > 90
    assert server.post("/detect", json={}).status_code == 400
    settings = server.get("/frontend/settings").json()
    assert settings["charLimit"] == 20000 and settings["keyRequired"] is False
    assert settings["language"] == {"source": {"code": "auto", "name": "Auto Detect"},
                                    "target": {"code": "en", "name": "English"}}
