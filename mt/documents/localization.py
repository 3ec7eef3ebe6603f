"""What the localization formats share (PO, XLIFF, Qt .ts, Android, JSON, .properties, and `--placeholders`
lines): a `Catalogue` is the file's text and its units, each unit one or more messages (mt/documents/messages.py:
one, or one per plural form); `render` translates the messages, asks the format for the edits of each unit,
splices them into the text and writes the notes from the format's table.

A format is a subclass that reads its units in its constructor (`self.units`, each a `Unit` holding where it is in
the file and the indices of its messages, added with `self.messages.add` or `plural_messages`) and says:
- `edits(unit, texts, state)`: (start, end, replacement) of the unit in the file's text, given its messages'
  translations (None for a message whose placeholder would not come back) and whether it is a machine
  translation for review (MACHINE), a translation the memory gave (REMEMBERED) or none (REFUSED), through the
  format's own mark (PO's `fuzzy`, XLIFF's states, Qt's `unfinished`; the resource files have none);
- `file_edits()`: edits of the file itself (a header, a language attribute), if any;
- `NOTES`: for each count the notes report (`refused`, and what the constructor counted in `self.left`), the
  words after the count;
- `escape` (how a translation's text is written, where placeholders come back in a markup language),
  `accepted(unit, texts)` (a format's own check of a unit's translations), `encode` (the file's charset).
A file that names its language calls `read_language(own, options)` (the target it is to say, and whether its
translations are made again). An XML format finds its units with `xml_units` (each an `Element` with its direct
children, located in the file's own characters) and sets its language attribute with `attribute_edits`.
Adding a format is writing these and registering its extension in mt/documents/formats.py (docs/design.md).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mt.documents.document import Rendered
from mt.documents.file_checks import decoded
from mt.documents.fragments import Fragments
from mt.documents.html_events import Event, html_events, with_attribute
from mt.documents.messages import COUNT, Messages, numbered, plain
from mt.documents.plurals import PluralForms

MACHINE, REMEMBERED, REFUSED = "machine", "remembered", "refused"
NOT_BACK = "a placeholder or tag would not come back from their translation"

Edit = tuple[int, int, str]  # (start, end, replacement) in the file's text


@dataclass
class Unit:
    """A unit of the file to fill: where it is (the format's own record), and its messages' indices."""
    where: object
    messages: list[int] = field(default_factory=list)


class Catalogue:
    """A localization file: `sentences` to translate; `render` gives its bytes with their translations, and the
    notes of what it could not do."""
    NOTES: dict[str, str] = {"refused": f"strings left in the source language: {NOT_BACK}"}

    def __init__(self, name: Path, text: str, memory=None):
        self.name, self.text = name, text
        self.messages, self.units, self.left = Messages(memory), [], Counter()

    @property
    def sentences(self) -> list[str]:
        return self.messages.sentences

    def render(self, translations: list[tuple[str, str | None]], fragments: Fragments | None = None) -> Rendered:
        found = self.messages.translated(translations, self.escape, fragments)
        edits, refused = self.file_edits(), 0
        for unit in self.units:
            texts = [found[i] for i in unit.messages]
            if not self.accepted(unit, texts):
                refused += 1
                state = REFUSED
            else:
                state = REMEMBERED if all(i in self.messages.remembered for i in unit.messages) else MACHINE
            edits += self.edits(unit, texts, state)
        return Rendered(self.encode(spliced(self.text, edits)), self.notes(refused))

    def read_language(self, own: str | None, options) -> bool:
        """Given the language the file says it is in (`own`), `target`: the language it is to say instead (None: it
        stays, `Localization.retargets`); and whether the translations it holds are to be made again."""
        self.target = options.target if options.retargets(own) else None
        return options.replaces(own)

    def escape(self, text: str) -> str:
        return text

    def accepted(self, unit: Unit, texts: list[str | None]) -> bool:
        return all(t is not None for t in texts)

    def edits(self, unit: Unit, texts: list[str | None], state: str) -> list[Edit]:
        raise NotImplementedError

    def file_edits(self) -> list[Edit]:
        return []

    def encode(self, text: str) -> bytes:
        return text.encode("utf-8")

    def notes(self, refused: int) -> list[str]:
        counts = {**self.left, "refused": refused}
        return [f"{self.name}: {counts[key]} {words}" for key, words in self.NOTES.items() if counts.get(key)]


def spliced(text: str, edits: list[Edit]) -> str:
    """`text` with each (start, end) replaced, in order of the file (edits do not overlap)."""
    out, at = [], 0
    for start, end, replacement in sorted(edits):
        out += [text[at:start], replacement]
        at = end
    out.append(text[at:])
    return "".join(out)


def plural_messages(messages: Messages, forms: PluralForms, source_of: Callable[[int], str],
                    count: re.Pattern = COUNT) -> list[int]:
    """One message per plural form, each first tried with the form's example number in place of its count
    placeholder (what `count` matches), from `source_of(form index)`."""
    found = []
    for index in range(forms.count):
        number, source = forms.example(index), source_of(index)
        first = numbered(source, number, count) if number is not None else None
        found.append(messages.add([first, plain(source)]))
    return found


@dataclass
class Located:
    """An element's tag in an XML file: the event, where it is [start, end), the local names of the elements it
    is in (itself last, for an open or close tag), and the whitespace right before it."""
    event: Event
    start: int
    end: int
    path: tuple[str, ...]
    blank: str

    @property
    def name(self) -> str:
        return self.path[-1] if self.event.role != "void" else self.event.name.rsplit(":", 1)[-1]

    @property
    def parent(self) -> str:
        """The element this tag's element is a child of."""
        inside = self.path[:-1] if self.event.role != "void" else self.path
        return inside[-1] if inside else ""


@dataclass
class Element:
    """An element of an XML file that a unit is in or is written into (XLIFF's segment and target, Qt's message
    and translation, an Android string): its local name and attributes, [start, end), its open tag (a self-closed
    one's written as open), where its contents start and what they are, the whitespace right before it, and (for
    a unit's element, `xml_units`) its direct children in order."""
    name: str
    attrs: dict[str, str]
    start: int
    open_tag: str
    inner_start: int
    blank: str
    void: bool = False
    end: int = 0
    inner: str = ""
    children: list[Element] = field(default_factory=list)

    @classmethod
    def opened(cls, tag: Located) -> Element:
        """The element of an open tag (its end and contents come with its close tag), or of a self-closed one."""
        attrs = dict(tag.event.attrs)
        if tag.event.role == "void":
            return cls(tag.name, attrs, tag.start, tag.event.raw[:-2].rstrip() + ">", tag.end, tag.blank, True,
                       tag.end)
        return cls(tag.name, attrs, tag.start, tag.event.raw, tag.end, tag.blank)

    def close(self, tag: Located, text: str) -> None:
        self.end, self.inner = tag.end, text[self.inner_start:tag.start]

    @property
    def inner_end(self) -> int:
        return self.inner_start + len(self.inner)

    def child(self, name: str) -> Element | None:
        """Its last direct child of that name, if any."""
        return next((c for c in reversed(self.children) if c.name == name), None)

    def inner_of(self, name: str) -> str:
        """The contents of its last direct child of that name ("" without one)."""
        child = self.child(name)
        return child.inner if child is not None else ""


def xml_units(text: str, picked: Callable[[Located], bool],
              left: Callable[[dict], bool] = lambda attrs: False) -> list[Element]:
    """The elements of an XML file whose open tag is `picked` (a trans-unit, a message), in order, each with its
    direct children; none inside another, nor inside an element whose attributes are `left` (translate="no")."""
    units, current, left_at = [], None, None
    for tag in xml_tags(text):
        role, depth = tag.event.role, len(tag.path)
        if current is None and role == "open" and left_at is None:
            if left(dict(tag.event.attrs)):
                left_at = depth
            elif picked(tag):
                current, unit_depth = Element.opened(tag), depth
        elif current is not None and role != "close" and depth == unit_depth + (role == "open"):
            current.children.append(Element.opened(tag))
        elif current is not None and role == "close" and depth == unit_depth + 1:
            current.children[-1].close(tag, text)
        elif current is not None and role == "close" and depth == unit_depth:
            current.close(tag, text)
            units.append(current)
            current = None
        elif role == "close" and depth == left_at:
            left_at = None
    return units


def language_tags(text: str, name: str) -> list[tuple[int, int]]:
    """[start, end) of each open tag of the elements named `name` (where a file says its language)."""
    return [(tag.start, tag.end) for tag in xml_tags(text) if tag.event.role == "open" and tag.name == name]


def attribute_edits(text: str, tags: list[tuple[int, int]], attribute: str, value: str) -> list[Edit]:
    """Each tag at [start, end) of `text` with `attribute` set to `value`."""
    return [(start, end, with_attribute(text[start:end], attribute, value)) for start, end in tags]


def xml_tags(text: str) -> Iterator[Located]:
    """Each tag of an XML file (parsed before: well-formed), located in its own characters, in order."""
    stack, offset, blank = [], 0, ""
    for event in html_events(text):
        start, offset = offset, offset + len(event.raw)
        if event.kind == "text":
            blank = event.raw if not event.raw.strip() else ""
            continue
        local = event.name.rsplit(":", 1)[-1]
        if event.role == "open":
            stack.append(local)
            yield Located(event, start, offset, tuple(stack), blank)
        elif event.role == "close" and stack and stack[-1] == local:
            yield Located(event, start, offset, tuple(stack), blank)
            stack.pop()
        elif event.role == "void":
            yield Located(event, start, offset, tuple(stack), blank)
        blank = ""


class MessageLines(Catalogue):
    """Lines, each a message (`mt translate --placeholders`); a line whose placeholder would not come back is
    written as it came."""
    NOTES = {"refused": f"lines written as they came: {NOT_BACK}"}

    def __init__(self, data: bytes, name: Path):
        super().__init__(name, decoded(data, name))
        at = 0
        for line in self.text.split("\n"):
            text = line.rstrip("\r")
            self.units.append(Unit((at, at + len(text)), [self.messages.add([plain(text)])]))
            at += len(line) + 1

    def edits(self, unit: Unit, texts: list[str | None], state: str) -> list[Edit]:
        return [] if state == REFUSED else [(*unit.where, texts[0])]
