"""Qt Linguist .ts files: each message without a translation gets one, marked `type="unfinished"`; every other
byte of the file is written back as it came.

The file is parsed first with defusedxml (no entities: an entity bomb is refused in one line; the
`<!DOCTYPE TS>` lupdate writes declares none and passes) to check that its root is `<TS>`; its elements are then
located in its own characters by mt/documents/html_events.py, as XLIFF's are, and only `<translation>` elements
are written. A message is translated when its `<translation>` is empty, self-closed or missing, unless it is
`vanished` or `obsolete` (lupdate's marks for a message gone from the program); with `retranslate`, every
message but those.

A `<source>` is read as the text it holds: XML's escapes undone, so that the escaped tags of rich text
(`&lt;b&gt;`) are tags and its entities (`&amp;amp;`) entities, and a `&` that starts no entity (a shortcut's,
`&amp;File`) read as `&#38;`, which stays with the letter after it; Qt's arguments (`%1`, `%L1`, `%n`, `%Ln`) are
placeholders (mt/documents/placeholders.py); the translation is written XML-escaped. A source holding elements
(Qt's `<byte value="..."/>` for a control character) is left.

`type="unfinished"` is Qt's mark for a translation no one has accepted yet: Linguist shows it as such, and lrelease
puts it in the .qm file all the same unless given -nounfinished. A numerus message (`numerus="yes"`, its count
`%n`) gets one `<numerusform>` per plural form of the file's `language` (else of the target language,
mt/documents/plurals.py), each translated with its number in place of %n (mt/documents/messages.py); one in a
language mt knows no plural forms of is left. A message whose translation would lose a placeholder (checked in the
text the model read, and again in the string the program will hold, where a shortcut's `&` and the word after it
could make an entity) gets an empty translation marked unfinished (with `retranslate`, one translated before keeps
its translation as it was). `notes` counts what was left.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from mt.documents.file_checks import decoded, xml_root
from mt.documents.html_events import with_attribute
from mt.documents.localization import (NOT_BACK, REFUSED, Catalogue, Edit, Element, Unit, attribute_edits,
                                       language_tags, plural_messages, xml_units)
from mt.documents.messages import Localization, plain
from mt.documents.placeholders import kept
from mt.documents.plurals import for_language

COUNT = re.compile(r"%L?n")  # the number a numerus message's form is for
LEFT = ("vanished", "obsolete")  # a message gone from the program's sources, kept for the record
BEFORE_TRANSLATION = {"source", "oldsource", "comment", "oldcomment", "extracomment", "translatorcomment"}
BARE_AMPERSAND = re.compile(r"&(?!(?:#\d+|#x[0-9A-Fa-f]+|[A-Za-z]\w*);)")


class TsDocument(Catalogue):
    """A Qt .ts file (mt/documents/localization.py), each message filled marked unfinished."""
    NOTES = {"refused": f"messages left untranslated and marked unfinished: {NOT_BACK}",
             "unsized": "numerus messages left untranslated: the file's language (the language attribute of <TS>) "
                        "and the target language are unknown or have no known plural forms",
             "holding": "messages left untranslated: their source holds XML elements (<byte/>), which mt does not "
                        "translate around"}

    def __init__(self, data: bytes, name: Path, options: Localization = Localization()):
        root = xml_root(data, name, "TS", "a Qt .ts file")
        super().__init__(name, decoded(data, name), options.memory)
        own, self.root_tag = root.get("language"), language_tags(self.text, "ts")[:1]  # html_events lowers names
        retranslate = self.read_language(own, options)
        forms = for_language(self.target) or for_language(own or options.target)
        for message in xml_units(self.text, lambda tag: tag.name == "message"):
            source, translation = message.child("source"), message.child("translation")
            if source is None or source.void or (translation is not None and translation.attrs.get("type") in LEFT) \
                    or (_has_text(message.inner_of("translation")) and not retranslate):
                continue
            source = source.inner
            if "<" in source:
                self.left["holding"] += 1
            elif _numerus(message) and forms is None:
                self.left["unsized"] += 1
            elif source.strip():
                text = _read(source)
                self.units.append(Unit(message, plural_messages(self.messages, forms, lambda _: text, COUNT)
                                       if _numerus(message) else [self.messages.add([plain(text)])]))

    def accepted(self, unit: Unit, texts: list[str | None]) -> bool:
        """Every translation came back with its placeholders, in the string the program will hold too."""
        source = html.unescape(unit.where.child("source").inner)
        return all(t is not None and kept(source, _string(t)) for t in texts)

    def file_edits(self) -> list[Edit]:
        return attribute_edits(self.text, self.root_tag, "language", self.target) if self.target and self.units \
            else []

    def edits(self, unit: Unit, texts: list[str | None], state: str) -> list[Edit]:
        """A message's translation: `texts` in it (one per form of a numerus one), marked unfinished; refused, an
        empty one marked unfinished (one that has text is left)."""
        message, translation = unit.where, unit.where.child("translation")
        inner = message.inner_of("translation")
        if state == REFUSED and _has_text(inner):
            return []
        contents = inner if state == REFUSED else _contents(message, [_written(t) for t in texts])
        if translation is None:
            before = _before_translation(message)  # the last element a translation follows
            element = f'<translation type="unfinished">{contents}</translation>'
            return [(before.end, before.end, before.blank + element)]
        element = with_attribute(translation.open_tag, "type", "unfinished") + f"{contents}</translation>"
        return [(translation.start, translation.end, element)]


def _numerus(message: Element) -> bool:
    return message.attrs.get("numerus") == "yes"


def _before_translation(message: Element) -> Element:
    return next(c for c in reversed(message.children) if c.name in BEFORE_TRANSLATION)


def _contents(message: Element, texts: list[str]) -> str:
    """A translation's contents: the text, or a numerus message's forms, each on a line of its own where the file
    has lines (indented as the forms already there, else one step in from the translation)."""
    if not _numerus(message):
        return texts[0]
    inner, translation = message.inner_of("translation"), message.child("translation")
    if "<numerusform" in inner:
        before, close = inner[:len(inner) - len(inner.lstrip())], inner[len(inner.rstrip()):]
    else:
        close = translation.blank if translation is not None else _before_translation(message).blank
        before = close + ("\t" if close.endswith("\t") else "    ") if close else ""
    return "".join(f"{before}<numerusform>{text}</numerusform>" for text in texts) + close


def _read(source: str) -> str:
    """A source's text as the model reads it: XML's escapes undone, a `&` that starts no entity (a shortcut's) as
    `&#38;`, a placeholder as the entities of rich text are."""
    return BARE_AMPERSAND.sub("&#38;", html.unescape(source))


def _string(text: str) -> str:
    """A translation (as `_read` gives its source) as the program holds it."""
    return text.replace("&#38;", "&")


def _written(text: str) -> str:
    """A translation (as `_read` gives its source) as the file holds it."""
    return html.escape(_string(text), quote=False)


def _has_text(inner: str) -> bool:
    """Whether a translation's contents hold text (in `<numerusform>`s or `<lengthvariant>`s too)."""
    return bool(re.sub(r"<[^>]*>", "", inner).strip())
