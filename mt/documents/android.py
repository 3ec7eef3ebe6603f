r"""Android string resources (res/values/strings.xml): every string of the file translated in place, every other
byte written back as it came.

The file is monolingual: it holds the strings of the source language, and a translation (res/values-de/) is the
same file with each string translated; the format has no mark for a translation to review. What is translated:
each `<string>`, and each `<item>` of a `<string-array>` or `<plurals>`, but one with `translatable="false"`
(its own or its array's), a resource reference (`@string/name`, `@android:string/ok`, `?attr/name`) and an empty
one (`retranslate` changes nothing).

The file is parsed first with defusedxml as a .ts file is (mt/documents/file_checks.py: entities refused),
to check that its root is `<resources>`; its elements are then located in its own characters by
mt/documents/html_events.py. A string is read as Android reads it: its escapes undone (`\'`, `\"`, `\\`,
`\n`, `\t`, `\@`, `\?`, `\uXXXX`), whitespace outside double quotes collapsed and the quotes dropped; its
tags (`<b>`, `<annotation>`), comments and the entities `&lt;` and `&amp;` are placeholders
(mt/documents/placeholders.py), an `<xliff:g>...</xliff:g>` one whole (what it holds is not to be translated).
The translation is written escaped again: apostrophes and double quotes backslashed, backslashes doubled, line
breaks and tabs as `\n` and `\t`, a leading `@` or `?` backslashed, `<` and `&` as entities, the whole in
double quotes where the source was.

A `<plurals>` keeps the items it has, each translated from its own text with an example number of its quantity
(one: 1, few: 3, ...) in place of its count (`%d`, `%1$d`, mt/documents/messages.py): the quantities are those
of the source language, which the target language may need others of (Android lint's MissingQuantity says
which). A string holding a CDATA section is left, and one whose translation would lose a placeholder keeps its
source text; `notes` counts both.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import Path

from mt.documents.file_checks import decoded, xml_root
from mt.documents.localization import NOT_BACK, REFUSED, Catalogue, Edit, Unit, xml_units
from mt.documents.messages import Localization, numbered, plain

RESOURCES = {"string", "string-array", "plurals"}  # the resources translated: a string, or the items of the others
QUANTITIES = {"zero": 0, "one": 1, "two": 2, "few": 3, "many": 11, "other": 5}  # a number each quantity is for
REFERENCE = re.compile(r"\s*[@?]")  # a string that names another resource (a leading @ or ? not backslashed)
WHOLE = re.compile(r"<!--.*?-->|<(xliff:g)\b[^>]*?(?<!/)>.*?</\1>", re.S)  # placeholders whose insides are kept
TAG = r"""<!--.*?-->|<[A-Za-z/!?](?:[^>"']|"[^"]*"|'[^']*')*>"""
ENTITY = r"&(?:#\d+|#x[0-9A-Fa-f]+|[A-Za-z]\w*);"
READ = re.compile(rf"""(?P<tag>{TAG})|(?P<entity>{ENTITY})|(?P<escape>\\u[0-9A-Fa-f]{{4}}|\\.)|(?P<quote>")"""
                  r"|(?P<space>\s+)|(?P<char>.)", re.S)
WRITTEN = re.compile(rf"(?P<tag>{TAG})|(?P<entity>{ENTITY})|(?P<text>[^<&]+|.)", re.S)
ESCAPED = str.maketrans({"\\": "\\\\", "'": "\\'", '"': '\\"', "\n": "\\n", "\t": "\\t", "&": "&amp;",
                         "<": "&lt;"})
ESCAPES = {"n": "\n", "t": "\t"}


@dataclass
class Entry:
    """A string or item to translate: its contents [start, end) in the file, its resource's name (an array's item
    with its index, a plurals item with its quantity), a plurals item's quantity, and whether its text is one in
    double quotes (written so again)."""
    start: int
    end: int
    key: str
    quantity: str = ""
    quoted: bool = False


class AndroidDocument(Catalogue):
    """An Android string resource file (mt/documents/localization.py); a string whose translation would lose a
    placeholder keeps its source text."""
    NOTES = {"refused": f"strings kept their source text: {NOT_BACK}",
             "cdata": "strings left as they came: they hold CDATA sections, which mt does not translate in"}

    def __init__(self, data: bytes, name: Path, options: Localization = Localization()):
        xml_root(data, name, "resources", "an Android string resource file")
        super().__init__(name, decoded(data, name), options.memory)
        for entry in string_entries(self.text):
            raw = self.text[entry.start:entry.end]
            if "<![CDATA[" in raw:
                self.left["cdata"] += 1
                continue
            if REFERENCE.match(raw):
                continue
            text, entry.quoted = read(raw)
            first = plain(text, WHOLE)
            if not first.sentences:  # nothing but placeholders, or nothing at all
                continue
            number = QUANTITIES.get(entry.quantity)
            counted = numbered(text, number) if number is not None and not WHOLE.search(text) else None
            self.units.append(Unit(entry, [self.messages.add([counted, first])]))

    def edits(self, unit: Unit, texts: list[str | None], state: str) -> list[Edit]:
        entry = unit.where
        return [] if state == REFUSED else [(entry.start, entry.end, written(texts[0], entry.quoted))]


def read(raw: str) -> tuple[str, bool]:
    """A string's contents as Android reads them, for the model (tags and entities as they came, `<` and `&` as
    entities), and whether they are one text in double quotes."""
    pieces: list[tuple[str, bool]] = []  # (text, whether whitespace outside quotes)
    quoted, quotes = False, []
    for m in READ.finditer(raw):
        kind, piece = m.lastgroup, m.group()
        if kind == "quote" or (kind == "entity" and html.unescape(piece) == '"'):
            quoted = not quoted
            quotes.append(m.span())
        elif kind == "tag":
            pieces.append((piece, False))
        elif kind == "space":
            pieces.append((piece, False) if quoted else (" ", True))
        else:
            char = html.unescape(piece) if kind == "entity" else _unescaped(piece) if kind == "escape" else piece
            pieces.append((char.replace("&", "&amp;").replace("<", "&lt;"), False))
    while pieces and pieces[0][1]:
        pieces.pop(0)
    while pieces and pieces[-1][1]:
        pieces.pop()
    whole = len(quotes) == 2 and quotes[0][0] == len(raw) - len(raw.lstrip()) and quotes[1][1] == len(raw.rstrip())
    return "".join(text for text, _ in pieces), whole


def written(text: str, quoted: bool = False) -> str:
    """A translation (as `read` gives a string) as the file holds it: Android's escapes and XML's, in double
    quotes if `quoted`."""
    out = "".join(m.group() if m.lastgroup != "text" else m.group().translate(ESCAPED) for m in WRITTEN.finditer(text))
    out = "\\" + out if out.startswith(("@", "?")) else out
    return f'"{out}"' if quoted else out


def _unescaped(escape: str) -> str:
    if escape.startswith("\\u") and len(escape) == 6:
        return chr(int(escape[2:], 16))
    return ESCAPES.get(escape[1], escape[1])


def string_entries(text: str) -> list[Entry]:
    """The strings and items of the file, in order, their contents located; none with translatable="false", its
    own or its array's."""
    entries = []
    for resource in xml_units(text, lambda tag: tag.path[:-1] == ("resources",) and tag.name in RESOURCES,
                              lambda attrs: attrs.get("translatable") == "false"):
        name = resource.attrs.get("name") or ""
        if resource.name == "string":
            entries.append(Entry(resource.inner_start, resource.inner_end, name))
            continue
        for index, item in enumerate(c for c in resource.children if not c.void):
            if item.name == "item" and item.attrs.get("translatable") != "false":
                quantity = item.attrs.get("quantity") or ""
                key = f"{name}#{quantity}" if quantity else f"{name}[{index}]"
                entries.append(Entry(item.inner_start, item.inner_end, key, quantity))
    return entries
