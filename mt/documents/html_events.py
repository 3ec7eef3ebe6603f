"""An HTML document cut into the text to translate and the markup to keep exactly as sent.

The tokenizer is Python's `html.parser.HTMLParser` (maintained with the standard library); it says where each
tag, comment, declaration and text run starts, and every piece is the document's own characters from there to
the next one. Markup is therefore never rebuilt from what the parser understood: a CDATA section, a comment
left open at the end, a tag cut off at the end, odd whitespace or quoting in a tag all come back as sent. Text
is unescaped for the model and its translation escaped again (`mt.serving.segments.joined(..., escape=True)`); the
contents of script and style, and text inside markup left open at the end, are kept as they are.
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

from mt.serving.segments import Piece, split_text

RAW = {"script", "style"}
LEFT_OPEN = re.compile(r"<[A-Za-z/!?]")  # a tag, comment or declaration the document ends inside


def split_html(document: str) -> list[Piece]:
    """Markup kept, the text between tags split as `split_text` splits it."""
    events = _events(document)
    pieces: list[Piece] = []
    for (start, kind), (end, _) in zip(events, events[1:] + [(len(document), "")]):
        raw = document[start:end]
        if kind == "text":
            pieces += split_text(html.unescape(raw))
        elif raw:
            pieces.append(Piece(raw, False))
    return pieces


def _events(document: str) -> list[tuple[int, str]]:
    """(offset, "text" or "markup") where each piece starts: one text piece for text the parser reports in parts
    ("a < b"), and markup from where markup left open at the end starts (the parser reports it as text)."""
    parser = _Offsets(document)
    parser.feed(document)
    parser.close()
    merged: list[tuple[int, str]] = []
    left_open = False
    for offset, kind in parser.events:
        left_open = left_open or (kind == "text" and LEFT_OPEN.match(document, offset) is not None)
        kind = "markup" if left_open else kind
        if merged and (merged[-1][0] == offset or kind == merged[-1][1] == "text"):
            continue
        merged.append((offset, kind))
    return merged


class _Offsets(HTMLParser):
    """Where each piece starts: `getpos()` inside a handler is the start of what it handles."""

    def __init__(self, document: str):
        super().__init__(convert_charrefs=True)
        self.line_starts = [0]
        for line in document.split("\n")[:-1]:
            self.line_starts.append(self.line_starts[-1] + len(line) + 1)
        self.events: list[tuple[int, str]] = []
        self.raw_depth = 0

    def _at(self, kind: str) -> None:
        line, column = self.getpos()
        self.events.append((self.line_starts[line - 1] + column, kind))

    def handle_starttag(self, tag, attrs):
        self._at("markup")
        if tag in RAW:
            self.raw_depth += 1

    def handle_endtag(self, tag):
        self._at("markup")
        if tag in RAW and self.raw_depth:
            self.raw_depth -= 1

    def handle_data(self, data):
        self._at("markup" if self.raw_depth else "text")

    def handle_startendtag(self, tag, attrs):
        self._at("markup")

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
