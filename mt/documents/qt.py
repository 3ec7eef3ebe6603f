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
from dataclasses import dataclass
from pathlib import Path

from mt.documents.file_checks import decoded, xml_root
from mt.documents.html_events import with_attribute
from mt.documents.localization import NOT_BACK, REFUSED, Catalogue, Edit, Element, Unit, plural_messages, xml_tags
from mt.documents.messages import Localization, plain
from mt.documents.placeholders import kept
from mt.documents.plurals import for_language

COUNT = re.compile(r"%L?n")  # the number a numerus message's form is for
LEFT = ("vanished", "obsolete")  # a message gone from the program's sources, kept for the record
BEFORE_TRANSLATION = {"source", "oldsource", "comment", "oldcomment", "extracomment", "translatorcomment"}
BARE_AMPERSAND = re.compile(r"&(?!(?:#\d+|#x[0-9A-Fa-f]+|[A-Za-z]\w*);)")
TYPE = re.compile(r"""\stype\s*=\s*("[^"]*"|'[^']*')""")


@dataclass
class Message:
    """Where a message is in the file: its source's contents [start, end); where a missing translation goes
    (`after`, the end of the last element a translation follows, with the whitespace before that element); its
    translation element, if it has one, and that element's type."""
    numerus: bool
    start: int | None = None
    end: int | None = None
    after: int = 0
    indent: str = ""
    translation: Element | None = None
    type: str = ""
    source: str = ""  # the source string as the program holds it

    @property
    def inner(self) -> str:
        """The translation's contents (none without a translation element)."""
        return self.translation.inner if self.translation is not None else ""


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
        own = root.get("language")
        self.target = options.target if options.retargets(own) else None  # the language <TS> is to say
        forms = for_language(self.target) or for_language(own or options.target)
        retranslate = options.replaces(own)
        for message in _messages(self.text):
            if message.type in LEFT or (_has_text(message.inner) and not retranslate):
                continue
            source = self.text[message.start:message.end]
            message.source = html.unescape(source)
            if "<" in source:
                self.left["holding"] += 1
            elif message.numerus and forms is None:
                self.left["unsized"] += 1
            elif source.strip():
                text = _read(source)
                self.units.append(Unit(message, plural_messages(self.messages, forms, lambda _: text, COUNT)
                                       if message.numerus else [self.messages.add([plain(text)])]))

    def accepted(self, unit: Unit, texts: list[str | None]) -> bool:
        """Every translation came back with its placeholders, in the string the program will hold too."""
        return all(t is not None and kept(unit.where.source, _string(t)) for t in texts)

    def file_edits(self) -> list[Edit]:
        return [_language_edit(self.text, self.target)] if self.target and self.units else []

    def edits(self, unit: Unit, texts: list[str | None], state: str) -> list[Edit]:
        """A message's translation: `texts` in it (one per form of a numerus one), marked unfinished; refused, an
        empty one marked unfinished (one that has text is left)."""
        message = unit.where
        if state == REFUSED and _has_text(message.inner):
            return []
        contents = message.inner if state == REFUSED else self._contents(message, [_written(t) for t in texts])
        if message.translation is None:
            element = f'<translation type="unfinished">{contents}</translation>'
            return [(message.after, message.after, message.indent + element)]
        element = f"{_unfinished(message.translation.open_tag)}{contents}</translation>"
        return [(message.translation.start, message.translation.end, element)]

    def _contents(self, message: Message, texts: list[str]) -> str:
        """A translation's contents: the text, or a numerus message's forms, each on a line of its own where the
        file has lines (indented as the forms already there, else one step in from the translation)."""
        if not message.numerus:
            return texts[0]
        inner = message.inner
        if "<numerusform" in inner:
            before, close = inner[:len(inner) - len(inner.lstrip())], inner[len(inner.rstrip()):]
        else:
            close = message.translation.blank if message.translation is not None else message.indent
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


def _unfinished(tag: str) -> str:
    """A `<translation>` open tag with type="unfinished", its other attributes as they were."""
    found = TYPE.search(tag)
    if found:
        return f'{tag[:found.start()]} type="unfinished"{tag[found.end():]}'
    return f'{tag[:-1].rstrip()} type="unfinished">'


ROOT_TAG = re.compile(r"<TS\b[^>]*>")


def _language_edit(text: str, target: str) -> tuple[int, int, str]:
    """(start, end, replacement) of the <TS> tag saying `target` in its language attribute, as lupdate
    -target-language writes it."""
    tag = ROOT_TAG.search(text)
    return tag.start(), tag.end(), with_attribute(tag.group(), "language", target)


def _messages(text: str) -> list[Message]:
    """The file's messages with a source, in order, their source and translation located (direct children of the
    message only)."""
    messages = []
    current: Message | None = None
    for tag in xml_tags(text):
        role, name, attrs = tag.event.role, tag.name, dict(tag.event.attrs)
        own = current is not None and tag.parent == "message"
        if role == "open" and name == "message":
            current = Message(numerus=attrs.get("numerus") == "yes")
        elif role == "open" and own and name == "source":
            current.start = tag.end
        elif role in ("open", "void") and own and name == "translation":
            current.translation, current.type = Element.opened(tag), attrs.get("type") or ""
        elif role == "close" and own and name == "source":
            current.end = tag.start
        elif role == "close" and own and name == "translation":
            current.translation.close(tag, text)
        elif role == "close" and current is not None and name == "message":
            messages.append(current)
            current = None
        if own and name in BEFORE_TRANSLATION and role in ("open", "void"):
            current.indent = tag.blank
        if own and name in BEFORE_TRANSLATION and role in ("close", "void"):
            current.after = tag.end
    return [m for m in messages if m.start is not None and m.end is not None]
