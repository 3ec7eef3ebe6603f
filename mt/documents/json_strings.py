"""JSON translation files (i18next, ngx-translate, vue-i18n, Flutter's ARB, WebExtensions' messages.json): the
source language's file in, the target language's out, every string value translated and every other byte of
the file (keys, nesting, order, indentation) written back as it came.

The file is parsed with the standard library first (a syntax error is one line naming its line and column),
then its string tokens are located in its own characters and only the values mt translates are replaced, each
written as JSON writes a string (non-ASCII as `\\uXXXX` where the file writes it so and has no other). Values
translated: every non-empty string in an object or array, except ARB's metadata (keys that start with `@`;
`@@locale` is set to the target language) and, in an object that holds a `message` (WebExtensions' and Chrome's
format), everything but the message. i18next's nesting `$t(key)` and WebExtensions' `$NAME$` are placeholders
like `{{name}}` (mt/documents/placeholders.py). ICU plural and select messages (`{count, plural, one {...} other {...}}`) are
left as they came, and counted in `notes`; so is a string whose translation would lose a placeholder. A file
is one language: the plural keys (i18next's `_one`, `_other`) are the source's.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from mt.documents.file_checks import decoded
from mt.documents.localization import REFUSED, Catalogue, Edit, Unit
from mt.documents.messages import Localization, plain
from mt.errors import MtError

TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+')
WHOLE = re.compile(r"\$t\([^()]*\)|\$\w+\$")  # i18next's $t(key), WebExtensions' $NAME$: kept whole
ICU = re.compile(r"\{\s*[\w.]+\s*,\s*(?:plural|select|selectordinal)\s*,")
LETTER = re.compile(r"[^\W\d_]")
MESSAGE_KEYS = {"message", "description", "placeholders"}  # WebExtensions' message object


class JsonDocument(Catalogue):
    """A JSON translation file (mt/documents/localization.py); a string whose translation would lose a
    placeholder keeps its source text."""
    NOTES = {**Catalogue.NOTES, "icu": "ICU plural or select messages left in the source language"}

    def __init__(self, data: bytes, name: Path, options: Localization = Localization()):
        super().__init__(name, decoded(data, name), options.memory)
        self.target = options.target
        try:
            tree = json.loads(self.text)
        except json.JSONDecodeError as e:
            raise MtError(f"{name}: line {e.lineno}: not valid JSON ({e.msg}, column {e.colno})") from None
        if not isinstance(tree, dict):
            raise MtError(f"{name}: line 1: not a JSON object of translation strings (its top is a "
                          f"{type(tree).__name__})")
        self.ascii = self.text.isascii() and re.search(r"\\u00[89a-fA-F]|\\u0[1-9a-fA-F]|\\u[1-9a-fA-F]", self.text)
        wanted = set(translated_paths(tree, ()))
        self.locale = []  # (start, end) of @@locale's value
        for start, end, path in _values(self.text):
            source = json.loads(self.text[start:end])
            if path == ("@@locale",):
                self.locale.append((start, end))
            elif path in wanted and ICU.search(source):
                self.left["icu"] += 1
            elif path in wanted and LETTER.search(WHOLE.sub("", source)):
                self.units.append(Unit((start, end, source), [self.messages.add([plain(source, WHOLE)])]))

    def edits(self, unit: Unit, texts: list[str | None], state: str) -> list[Edit]:
        start, end, source = unit.where
        return [(start, end, self._written(source if state == REFUSED else texts[0]))]

    def file_edits(self) -> list[Edit]:
        if not self.target:
            return []
        return [(start, end, self._written(self.target.replace("-", "_"))) for start, end in self.locale]

    def _written(self, text: str) -> str:
        return json.dumps(text, ensure_ascii=bool(self.ascii))


def translated_paths(value, path: tuple):
    """The key paths of the strings to translate under `value`."""
    if isinstance(value, str):
        yield path
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from translated_paths(item, (*path, index))
    elif isinstance(value, dict):
        if isinstance(value.get("message"), str) and set(value) <= MESSAGE_KEYS:
            yield (*path, "message")
            return
        for key, item in value.items():
            if not key.startswith("@"):
                yield from translated_paths(item, (*path, key))


def _values(text: str):
    """(start, end, key path) of each string value in a valid JSON text, in order."""
    stack: list[list] = []  # per open container: [is an object, the current key or index, whether a key is due]
    for token in TOKEN.finditer(text):
        t = token.group(0)
        if t in "{[":
            if stack:
                stack[-1][2] = False
            stack.append([t == "{", None if t == "{" else 0, t == "{"])
        elif t in "}]":
            stack.pop()
        elif t == ",":
            top = stack[-1]
            top[2] = top[0]
            if not top[0]:
                top[1] += 1
        elif t == ":":
            continue
        elif stack and stack[-1][2]:
            stack[-1][1], stack[-1][2] = json.loads(t), False
        elif t.startswith('"'):
            yield token.start(), token.end(), tuple(level[1] for level in stack)
