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
from mt.documents.inline_markup import Fragments
from mt.documents.messages import Localization, Messages, plain
from mt.errors import MtError

TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+')
WHOLE = re.compile(r"\$t\([^()]*\)|\$\w+\$")  # i18next's $t(key), WebExtensions' $NAME$: kept whole
ICU = re.compile(r"\{\s*[\w.]+\s*,\s*(?:plural|select|selectordinal)\s*,")
LETTER = re.compile(r"[^\W\d_]")
MESSAGE_KEYS = {"message", "description", "placeholders"}  # WebExtensions' message object


class JsonDocument:
    """`sentences` to translate; `render` gives the JSON file's bytes with their translations; `notes` what the
    last render could not do."""

    def __init__(self, data: bytes, name: Path, options: Localization = Localization()):
        self.name, self.target = name, options.target
        self.text = decoded(data, name)
        try:
            tree = json.loads(self.text)
        except json.JSONDecodeError as e:
            raise MtError(f"{name}: line {e.lineno}: not valid JSON ({e.msg}, column {e.colno})") from None
        if not isinstance(tree, dict):
            raise MtError(f"{name}: line 1: not a JSON object of translation strings (its top is a "
                          f"{type(tree).__name__})")
        self.ascii = self.text.isascii() and re.search(r"\\u00[89a-fA-F]|\\u0[1-9a-fA-F]|\\u[1-9a-fA-F]", self.text)
        wanted = set(translated_paths(tree, ()))
        self.strings, self.locale, self.icu = [], [], 0  # (start, end, source) of each value translated
        for start, end, path in _values(self.text):
            source = json.loads(self.text[start:end])
            if path == ("@@locale",):
                self.locale.append((start, end))
            elif path in wanted and ICU.search(source):
                self.icu += 1
            elif path in wanted and LETTER.search(WHOLE.sub("", source)):
                self.strings.append((start, end, source))
        self.messages = Messages(options.memory)
        for _, _, source in self.strings:
            self.messages.add([plain(source, WHOLE)])
        self.sentences = self.messages.sentences
        self.refused = 0

    def render(self, translations: list[tuple[str, str | None]], fragments: Fragments | None = None) -> bytes:
        found = self.messages.translated(translations, fragments=fragments)
        self.refused = sum(1 for t in found if t is None)
        edits = [(start, end, self._written(source if text is None else text))
                 for (start, end, source), text in zip(self.strings, found)]
        if self.target:
            edits += [(start, end, self._written(self.target.replace("-", "_"))) for start, end in self.locale]
        out, at = [], 0
        for start, end, replacement in sorted(edits):
            out += [self.text[at:start], replacement]
            at = end
        out.append(self.text[at:])
        return "".join(out).encode("utf-8")

    def _written(self, text: str) -> str:
        return json.dumps(text, ensure_ascii=bool(self.ascii))

    def notes(self) -> list[str]:
        out = []
        if self.refused:
            out.append(f"{self.name}: {self.refused} strings left in the source language: a placeholder or tag "
                       "would not come back from their translation")
        if self.icu:
            out.append(f"{self.name}: {self.icu} ICU plural or select messages left in the source language")
        return out


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
