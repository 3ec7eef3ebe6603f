"""Weblate as a client: its LibreTranslate backend (weblate/machinery/libretranslate.py and base.py) replayed against
a real `mt serve` process, each request as Weblate sends it and each answer read as Weblate reads it."""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.conftest import RunningServer, run_mt
from tests.serving.conftest import dev_lines

# Weblate's own patterns: a format string's placeholders (python-format's, among those it knows), which it replaces
# by [X{offset}X] before it asks, and how it finds them again in the answer.
FORMAT_PLACEHOLDER = re.compile(r"%(?:\([^)]+\))?[sd]|\{\w*\}")
MARKER_IN_ANSWER = re.compile(r"\[X(\d+)X *\]")
SWITCHED_OFF = {456, 429, 401, 403, 503}  # statuses that turn the service off for every user for 30 minutes
BATCH = 20  # distinct strings per request
TIMEOUT_S = 20


class ServiceOff(Exception):
    """An answer whose status makes Weblate switch the service off."""


class Weblate:
    """Weblate's LibreTranslate machinery, as it talks to a server at `url`."""

    def __init__(self, url: str, key: str = ""):
        self.url, self.key = url.rstrip("/") + "/", key
        self.headers = {"Referer": "https://weblate.example/", "Accept": "application/json"}

    def _answer(self, response: httpx.Response):
        if response.status_code in SWITCHED_OFF:
            raise ServiceOff(response.status_code, response.json())
        response.raise_for_status()
        return response.json()

    def languages(self) -> list[str]:
        """GET /languages, each entry's code kept (its targets ignored)."""
        answer = self._answer(httpx.get(self.url + "languages", headers=self.headers, timeout=TIMEOUT_S))
        return [entry["code"] for entry in answer]

    def translate(self, source: str, target: str, strings: list[str]) -> dict[str, str]:
        """Each distinct string's translation, asked in batches of 20, its placeholders sent as [X7X] markers and
        put back from the answer."""
        unique = list(dict.fromkeys(strings))
        found = {}
        for at in range(0, len(unique), BATCH):
            batch = unique[at:at + BATCH]
            sent = [escaped(s)[0] for s in batch]
            body = {"api_key": self.key, "q": sent, "source": source, "target": target}
            answer = self._answer(httpx.post(self.url + "translate", json=body, headers=self.headers,
                                             timeout=TIMEOUT_S))
            assert len(answer["translatedText"]) == len(batch)
            for string, translated in zip(batch, answer["translatedText"]):
                found[string] = unescaped(translated, escaped(string)[1])
        return found

    def check_settings(self) -> str:
        """Saving the service's settings: the languages, then a fixed English to German probe."""
        self.languages()
        return self.translate("en", "de", ["test"])["test"]


def escaped(text: str) -> tuple[str, dict[int, str]]:
    """`text` with each placeholder as [X{offset}X], and the placeholders by offset."""
    found = {m.start(): m.group() for m in FORMAT_PLACEHOLDER.finditer(text)}
    return FORMAT_PLACEHOLDER.sub(lambda m: f"[X{m.start()}X]", text), found


def unescaped(text: str, placeholders: dict[int, str]) -> str:
    return MARKER_IN_ANSWER.sub(lambda m: placeholders.get(int(m.group(1)), m.group()), text)


def python_strings(count: int) -> list[str]:
    """German strings of a program: dev sentences with python-format placeholders put in."""
    lines = [line for line in dev_lines() if 3 <= len(line.split()) <= 12][:count]
    forms = ["{line}: %s", "%(name)s: {line}", "{line} (%d)", "{line} {{0}}"]
    return [forms[i % len(forms)].format(line=line) for i, line in enumerate(lines)]


@pytest.fixture(scope="module")
def checkpoint(trained_tiny) -> Path:
    return trained_tiny / "checkpoint_last.pt"


@pytest.fixture(scope="module")
def one_direction(checkpoint):
    """`mt serve -m de:en=CKPT`, as a Weblate instance that translates from German would use it."""
    running = RunningServer(checkpoint)
    yield running
    assert running.stop() == 0


def test_weblate_gets_every_language_and_batches_of_twenty_with_their_placeholders(one_direction, checkpoint):
    weblate = Weblate(one_direction.url)
    assert weblate.languages() == ["de", "en"]  # each language either side: Weblate offers de -> en
    strings = python_strings(45)
    translated = weblate.translate("de", "en", strings)  # three requests: 20, 20 and 5 strings
    for string in strings:
        assert sorted(FORMAT_PLACEHOLDER.findall(translated[string])) == sorted(FORMAT_PLACEHOLDER.findall(string))
    # each marked string is translated as `mt translate --placeholders` translates it, [X7X] a placeholder
    sent = "".join(escaped(s)[0] + "\n" for s in strings)
    offline = run_mt("translate", "-c", checkpoint, "--placeholders", input=sent).stdout.splitlines()
    assert [unescaped(t, escaped(s)[1]) for s, t in zip(strings, offline)] == [translated[s] for s in strings]
    assert sum(translated[s] != s for s in strings) >= 40  # translated, not answered as sent


def test_a_text_without_markers_is_translated_as_plain_text(one_direction, checkpoint):
    """Only a text holding Weblate's markers is read as a message: another text of a request without
    `placeholders` is plain text, as LibreTranslate reads it (a `%` or `$` in it is a word)."""
    line = "Kosten: 100 $ und 5 %"
    plain = run_mt("translate", "-c", checkpoint, input=line + "\n").stdout.splitlines()
    answer = one_direction.post("/translate", json={"q": [line], "source": "de", "target": "en"}).json()
    assert answer == {"translatedText": plain}


def test_the_settings_probe_needs_english_to_german(one_direction, checkpoint, trained_tiny):
    """Weblate's settings check asks for English to German: a server without that direction answers 400 (which
    Weblate shows, and which switches nothing off), one that serves it answers the probe."""
    with pytest.raises(httpx.HTTPStatusError) as refused:
        Weblate(one_direction.url).check_settings()
    assert refused.value.response.status_code == 400
    assert "this server translates de-en" in refused.value.response.json()["error"]
    both = RunningServer(checkpoint, "-m", f"en:de={trained_tiny / 'checkpoint_30.pt'}")
    try:
        probe = run_mt("translate", "-c", trained_tiny / "checkpoint_30.pt", input="test\n").stdout.splitlines()
        assert Weblate(both.url).check_settings() == probe[0]
    finally:
        assert both.stop() == 0


def test_a_full_queue_makes_weblate_wait_not_switch_off(checkpoint):
    """Eight Weblate workers send their batches at once into a queue that holds a fraction of them: every
    request waits for room and is answered within Weblate's 20 s, none with a status that switches it off."""
    running = RunningServer(checkpoint, "--max-queued-tokens", "300")
    try:
        strings = python_strings(160)
        parts = [strings[i::8] for i in range(8)]
        start = time.monotonic()
        with ThreadPoolExecutor(8) as pool:
            done = list(pool.map(lambda part: Weblate(running.url).translate("de", "en", part), parts))
        assert time.monotonic() - start < TIMEOUT_S
        assert sum(len(d) for d in done) == len(set(strings))
    finally:
        assert running.stop() == 0


def test_a_bad_key_is_libretranslates_403(checkpoint, tmp_path):
    keys = tmp_path / "keys"
    keys.write_text("alpha\n")
    running = RunningServer(checkpoint, "--api-keys", str(keys))
    try:
        with pytest.raises(ServiceOff) as off:
            Weblate(running.url, key="wrong").translate("de", "en", ["Hallo"])
        assert off.value.args == (403, {"error": "Invalid API key"})
        offline = run_mt("translate", "-c", checkpoint, input="Hallo\n").stdout.splitlines()
        assert Weblate(running.url, key="alpha").translate("de", "en", ["Hallo"]) == {"Hallo": offline[0]}
    finally:
        assert running.stop() == 0
