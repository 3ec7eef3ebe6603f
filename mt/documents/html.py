"""HTML documents (and the XML pages of EPUB and OpenDocument files, whose `Markup` says which of their tags are
blocks): the markup between units kept as sent, each unit's sentences translated whole and its inline tags put
back by word alignment (mt/documents/inline_markup.py)."""

from __future__ import annotations

import html

from mt.documents.html_events import Event, html_events
from mt.documents.fragments import Fragments
from mt.documents.inline_markup import HTML, Markup, Tag, Unit, render_unit, unit_sentences


class HtmlDocument:
    """`sentences` to translate; `render` puts the document back together from their translations (text and
    Moses-format word alignment each)."""

    def __init__(self, document: str, markup: Markup = HTML):
        self.parts = _units(html_events(document), markup)
        self.sentences = [text for part in self.parts if isinstance(part, Unit) for text in unit_sentences(part)]

    def render(self, translations: list[tuple[str, str | None]], fragments: Fragments | None = None) -> str:
        given = iter(translations)
        return "".join(part if isinstance(part, str) else render_unit(part, given, fragments=fragments)
                       for part in self.parts)


def _units(events: list[Event], markup: Markup) -> list[str | Unit]:
    """Markup kept as sent (str) and units, in document order."""
    parts: list[str | Unit] = []
    unit, at = Unit(), 0
    while at < len(events):
        event = events[at]
        if event.kind == "text":
            unit.text += html.unescape(event.raw)
        elif event.kind == "markup" and event.role == "open" and event.name in markup.hidden:
            end = _kept_end(events, at)
            unit.tags.append(Tag(len(unit.text), "".join(e.raw for e in events[at:end]), "void", event.name))
            at = end
            continue
        elif event.kind == "markup" and event.name and markup.ends_unit(event.name):
            end = _kept_end(events, at) if event.role == "open" and markup.keeps(event) else at + 1
            parts += [unit, "".join(e.raw for e in events[at:end])]
            unit, at = Unit(), end
            continue
        elif event.role == "open" and event.name not in markup.void and markup.keeps(event):
            end = _kept_end(events, at)
            inner = events[at + 1:end - 1] if end - 1 > at and events[end - 1].role == "close" else events[at + 1:end]
            unit.tags.append(Tag(len(unit.text), event.raw, "open", event.name, "".join(e.raw for e in inner)))
            unit.text += "".join(html.unescape(e.raw) for e in inner if e.kind == "text")
            if end - 1 > at and events[end - 1].role == "close":
                unit.tags.append(Tag(len(unit.text), events[end - 1].raw, "close", event.name))
            at = end
            continue
        else:
            role = "void" if event.name in markup.void else event.role
            empty = "source" if role == "open" and event.name in markup.links else "tags"
            unit.tags.append(Tag(len(unit.text), event.raw, role, event.name, when_empty=empty))
            unit.text += " " if event.name in markup.spaces else ""
        at += 1
    parts.append(unit)
    return [p for p in parts if p != Unit() and p != ""]


def _kept_end(events: list[Event], at: int) -> int:
    """The index after the close tag that ends the element opened at `at` (same name, nesting counted)."""
    name, depth = events[at].name, 0
    for i in range(at, len(events)):
        if events[i].name == name and events[i].role in ("open", "close"):
            depth += 1 if events[i].role == "open" else -1
            if depth == 0:
                return i + 1
    return len(events)
