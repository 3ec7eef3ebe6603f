"""Java .properties resource bundles: the source language's file in, the target language's out, every value
translated and every other byte (keys, separators, comments, blank lines, order) written back as it came.

The file is read as `java.util.Properties` reads it: a logical line continues while a line ends with an odd
number of backslashes, `#` and `!` start comments, a key ends at the first unescaped `=`, `:` or space. A value is
unescaped for the model (`\\uXXXX`, `\\n`, `\\t`, `\\\\`, ...) and its translation written on one line, escaped
again. Files in UTF-8 with non-ASCII characters are written in UTF-8 (Java 9 reads resource bundles so); ASCII
and ISO-8859-1 files get non-ASCII characters as `\\uXXXX`, which every Java reads.

A value with a MessageFormat argument (`{0}`, `{1,number}`) is a MessageFormat pattern, where an apostrophe is
written twice (`can''t`): it is read with one and its translation written with two, unless the source has lone
apostrophes (then it is not read by MessageFormat). A value whose translation would lose a placeholder keeps its
source text, and is counted in `notes`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from mt.documents.localization import NOT_BACK, REFUSED, Catalogue, Edit, Unit
from mt.documents.messages import Localization, plain
from mt.errors import MtError

ARGUMENT = re.compile(r"\{\d+(?:\s*,[^{}]*)?\}")  # MessageFormat's {0}, {1,number,#}
ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
ESCAPED = {c: "\\" + letter for letter, c in ESCAPES.items()}  # how each is written
LETTER = re.compile(r"[^\W\d_]")


@dataclass
class Entry:
    """A value in the file: where its text is [start, end), and what it says."""
    start: int
    end: int
    value: str
    quoted: bool = False  # a MessageFormat pattern whose apostrophes are doubled
    key: str = ""


class PropertiesDocument(Catalogue):
    """A .properties file (mt/documents/localization.py); a value whose translation would lose a placeholder keeps
    its source text."""
    NOTES = {"refused": f"values left in the source language: {NOT_BACK}"}

    def __init__(self, data: bytes, name: Path, options: Localization = Localization()):
        if b"\0" in data:
            line = data[:data.index(b"\0")].count(b"\n") + 1
            raise MtError(f"{name}: line {line}: a NUL byte, which no .properties file has")
        self.charset = "utf-8"
        try:
            text, self.ascii = data.decode("utf-8-sig"), data.isascii()
        except UnicodeDecodeError:  # ISO-8859-1, the format's first charset: written back in it
            text, self.ascii, self.charset = data.decode("latin-1"), True, "latin-1"
        super().__init__(name, text, options.memory)
        for entry in property_entries(self.text, name):
            if not LETTER.search(entry.value):
                continue
            if ARGUMENT.search(entry.value) and not re.search(r"(?<!')'(?!')", entry.value):
                entry.quoted, entry.value = True, entry.value.replace("''", "'")
            self.units.append(Unit(entry, [self.messages.add([plain(entry.value)])]))

    def edits(self, unit: Unit, texts: list[str | None], state: str) -> list[Edit]:
        entry = unit.where
        text = entry.value if state == REFUSED else texts[0]
        return [(entry.start, entry.end, self._escaped(text.replace("'", "''") if entry.quoted else text))]

    def encode(self, text: str) -> bytes:
        return text.encode(self.charset)

    def _escaped(self, value: str) -> str:
        out = []
        for i, c in enumerate(value):
            if c == "\\":
                out.append("\\\\")
            elif c in ESCAPED:
                out.append(ESCAPED[c])
            elif c == " " and i == 0:
                out.append("\\ ")  # a leading space would be read as part of the separator
            elif self.ascii and not c.isascii():
                out.append(json.dumps(c)[1:-1])  # \uXXXX (a surrogate pair past the BMP), as JSON writes it
            else:
                out.append(c)
        return "".join(out)


def property_entries(text: str, name: Path) -> list[Entry]:
    """Each key's value, as Properties.load reads it, with where it lies in `text` (from its first character to
    the end of its logical line)."""
    entries, lines = [], re.finditer(r"[^\r\n]*(?:\r\n|\r|\n|$)", text)
    number = 0
    for match in lines:
        number += 1
        line = match.group(0).rstrip("\r\n")
        body = line.lstrip(" \t\f")
        if not body or body[0] in "#!":
            if match.end() == len(text):
                break
            continue
        first, start = number, match.start() + len(line) - len(body)
        key_end = _key_end(body)
        value_at = _value_start(body, key_end)
        end = match.start() + len(line)
        while _continues(text[start:end]):
            following = next(lines, None)
            if following is None:
                break
            number += 1
            end = following.start() + len(following.group(0).rstrip("\r\n"))
        try:
            value = _unescaped(text[start + value_at:end])
        except ValueError as e:
            raise MtError(f"{name}: line {first}: not a valid .properties value ({e})") from None
        entries.append(Entry(start + value_at, end, value, key=_unescaped(body[:key_end])))
        if end == len(text):
            break
    return entries


def _key_end(body: str) -> int:
    i = 0
    while i < len(body) and body[i] not in "=: \t\f":
        i += 2 if body[i] == "\\" else 1
    return min(i, len(body))


def _value_start(body: str, at: int) -> int:
    while at < len(body) and body[at] in " \t\f":
        at += 1
    if at < len(body) and body[at] in "=:":
        at += 1
        while at < len(body) and body[at] in " \t\f":
            at += 1
    return at


def _continues(logical: str) -> bool:
    """Whether the last line of `logical` ends with an odd number of backslashes."""
    last = logical.splitlines()[-1] if logical else ""
    return (len(last) - len(last.rstrip("\\"))) % 2 == 1


def _unescaped(raw: str) -> str:
    """A value's text as Properties.load reads it: continuation lines joined (their leading blanks dropped),
    escapes turned into their characters."""
    out, i = [], 0
    while i < len(raw):
        c = raw[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        following = raw[i + 1:i + 2]
        if following in ("\r", "\n"):
            i += 2 if raw[i + 1:i + 3] != "\r\n" else 3
            while i < len(raw) and raw[i] in " \t\f":
                i += 1
        elif following == "u":
            digits = raw[i + 2:i + 6]
            if not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                raise ValueError(f"malformed \\uxxxx escape '\\u{digits}'")
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(ESCAPES.get(following, following))
            i += 2
    return "".join(out).encode("utf-16", "surrogatepass").decode("utf-16")
