"""Text as the server receives it, cut into what the model translates and what stays: sentences and the
whitespace between them (an HTML document's text and markup: mt/documents/inline_markup.py).

`split_text` keeps every character: joining the pieces back, each sentence replaced by its translation, gives
the translated text with the request's own line breaks and spacing. A sentence ends at . ! ? or … followed by
whitespace (a rule, not a model: "z.B. hier" is cut after "z.B."; LibreTranslate's sentence splitter is a model
and makes fewer such cuts).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SENTENCE_END = re.compile(r"(?<=[.!?…])(\s+)")
LINE_BREAK = re.compile(r"(\s*\n\s*)")


@dataclass(frozen=True)
class Piece:
    text: str
    translate: bool  # a sentence to translate; else kept as it is (whitespace, markup)


def split_text(text: str) -> list[Piece]:
    """Sentences and the whitespace around them, in order."""
    pieces: list[Piece] = []
    for i, part in enumerate(LINE_BREAK.split(text)):
        if i % 2:  # a line break with its surrounding whitespace
            pieces.append(Piece(part, False))
            continue
        pieces += _sentences(part)
    return [p for p in pieces if p.text]


def _sentences(line: str) -> list[Piece]:
    lead, body, trail = _strip_parts(line)
    pieces = [Piece(lead, False)]
    for j, part in enumerate(SENTENCE_END.split(body)):
        pieces.append(Piece(part, j % 2 == 0 and bool(part.strip())))
    pieces.append(Piece(trail, False))
    return pieces


def _strip_parts(text: str) -> tuple[str, str, str]:
    body = text.strip()
    if not body:
        return text, "", ""
    start = text.index(body)
    return text[:start], body, text[start + len(body):]


def joined(pieces: list[Piece], translations: list[str]) -> str:
    """The pieces back in order, the ones to translate replaced by `translations` (one each, in order)."""
    given = iter(translations)
    return "".join(next(given) if piece.translate else piece.text for piece in pieces)


class TextDocument:
    """Plain text: the `sentences` to translate, and `render`, which puts their translations ((text, alignment)
    each; the alignment unused) back with the text's own line breaks and spacing."""

    def __init__(self, text: str):
        self.pieces = split_text(text)
        self.sentences = [p.text for p in self.pieces if p.translate]

    def render(self, translations: list[tuple[str, str | None]], fragments=None) -> str:  # no markup: no fragments
        return joined(self.pieces, [text for text, _ in translations])
