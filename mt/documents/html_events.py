"""An HTML document cut into text and markup, each piece the document's own characters.

The tokenizer is Python's `html.parser.HTMLParser` (maintained with the standard library); it says where each
tag, comment, declaration and text run starts, and every piece is the document's own characters from there to
the next one. Markup is therefore never rebuilt from what the parser understood: a CDATA section, a comment
left open at the end, a tag cut off at the end, odd whitespace or quoting in a tag all come back as sent. The
contents of script and style, and text inside markup left open at the end, are markup. mt/documents/inline_markup.py
translates the text and puts the markup back.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from html.parser import HTMLParser


RAW = {"script", "style"}
LEFT_OPEN = re.compile(r"<[A-Za-z/!?]")  # a tag, comment or declaration the document ends inside
ATTRIBUTE = re.compile(r"""\s([\w:.-]+)\s*=\s*("[^"]*"|'[^']*')""")  # an attribute in a tag: its name, its quoted value


@dataclass(frozen=True)
class Event:
    """One piece of a document: its characters as sent, "text" or "markup", and for a tag its lower-case name,
    role (open, close or void: a self-closed tag, and every comment, declaration or markup left open) and
    attributes."""
    raw: str
    kind: str
    name: str = ""
    role: str = "void"
    attrs: tuple = ()


def html_events(document: str) -> list[Event]:
    """The document as events whose `raw` strings, joined, give it back exactly: one text event for text the
    parser reports in parts ("a < b"), and markup from where markup left open at the end starts (the parser
    reports it as text)."""
    parser = _Offsets(document)
    parser.feed(document)
    parser.close()
    merged: list[tuple[int, str, tuple]] = []
    left_open = False
    for offset, kind, tag in parser.events:
        left_open = left_open or (kind == "text" and LEFT_OPEN.match(document, offset) is not None)
        if left_open:
            kind, tag = "markup", ()
        if merged and (merged[-1][0] == offset or kind == merged[-1][1] == "text"):
            continue
        merged.append((offset, kind, tag))
    ends = [offset for offset, _, _ in merged[1:]] + [len(document)]
    return [Event(document[start:end], kind, *tag) for (start, kind, tag), end in zip(merged, ends)
            if document[start:end]]


class _Offsets(HTMLParser):
    """Where each piece starts: `getpos()` inside a handler is the start of what it handles."""

    def __init__(self, document: str):
        super().__init__(convert_charrefs=True)
        self.line_starts = [0]
        for line in document.split("\n")[:-1]:
            self.line_starts.append(self.line_starts[-1] + len(line) + 1)
        self.events: list[tuple[int, str]] = []
        self.raw_depth = 0

    def _at(self, kind: str, tag: tuple = ()) -> None:
        line, column = self.getpos()
        self.events.append((self.line_starts[line - 1] + column, kind, tag))

    def handle_starttag(self, tag, attrs):
        self._at("markup", (tag, "open", tuple(attrs)))
        if tag in RAW:
            self.raw_depth += 1

    def handle_endtag(self, tag):
        self._at("markup", (tag, "close"))
        if tag in RAW and self.raw_depth:
            self.raw_depth -= 1

    def handle_data(self, data):
        self._at("markup" if self.raw_depth else "text")

    def handle_startendtag(self, tag, attrs):
        self._at("markup", (tag, "void", tuple(attrs)))

    def handle_comment(self, data):
        self._at("markup")

    def handle_decl(self, decl):
        self._at("markup")

    def handle_pi(self, data):
        self._at("markup")

    def unknown_decl(self, data):
        self._at("markup")

    def handle_entityref(self, name):  # only without convert_charrefs; kept for safety
        self._at("text")

    def handle_charref(self, name):
        self._at("text")


def tag_attribute(tag: str, name: str) -> str | None:
    """The value of attribute `name` (its case as written) in a tag's own characters, unescaped; None without it."""
    found = next((m for m in ATTRIBUTE.finditer(tag) if m.group(1) == name), None)
    return None if found is None else html.unescape(found.group(2)[1:-1])


def with_attribute(tag: str, name: str, value: str) -> str:
    """A tag's own characters with attribute `name` set to `value`: in place where the tag has it, else added
    before the tag's end; every other character as it was."""
    quoted = '"' + html.escape(value) + '"'
    found = next((m for m in ATTRIBUTE.finditer(tag) if m.group(1) == name), None)
    if found is not None:
        return tag[:found.start(2)] + quoted + tag[found.end(2):]
    end = len(tag) - (2 if tag.endswith("/>") else 1)
    return f"{tag[:end].rstrip()} {name}={quoted}{tag[end:]}"
