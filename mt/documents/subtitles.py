"""Subtitles (SubRip .srt with the `srt` library, WebVTT .vtt with webvtt-py) translated cue by cue: numbering,
timings, cue settings, notes and styles are kept; a cue's lines are translated together (a sentence often runs
over two lines), its markup (<i>, <b>, <c.x>, <v Name>) put back as HTML's inline elements are
(mt/documents/inline_markup.py), and the translation wrapped into as many lines as the cue had."""

from __future__ import annotations

import re
from pathlib import Path

from mt.documents.inline_markup import HtmlDocument
from mt.errors import MtError, needs


WORDS = re.compile(r"(?:<[^>]*>|[^\s<])+")  # words, a tag (with its spaces) inside the word it touches


class _Cues:
    """Each cue's text as a one-line HTML fragment: `sentences`, and the cues' translated texts from `render`."""

    def __init__(self, texts: list[str]):
        self.lines = [max(1, len(text.split("\n"))) for text in texts]
        self.documents = [HtmlDocument(" ".join(text.split("\n"))) for text in texts]
        self.sentences = [s for d in self.documents for s in d.sentences]

    def translated(self, translations: list[tuple[str, str | None]]) -> list[str]:
        given, out = iter(translations), []
        for document, lines in zip(self.documents, self.lines):
            texts = [next(given) for _ in document.sentences]
            out.append(wrapped(document.render(texts), lines))
        return out


class SrtDocument:
    def __init__(self, data: bytes, name: Path):
        srt = needs("srt", "srt", "documents")
        text = _decoded(data, name)
        try:
            self.subtitles = list(srt.parse(text))
        except (srt.SRTParseError, ValueError) as e:
            raise MtError(f"{name}: not a valid SubRip file ({e})") from None
        self.cues = _Cues([s.content for s in self.subtitles])
        self.sentences = self.cues.sentences

    def render(self, translations: list[tuple[str, str | None]]) -> bytes:
        srt = needs("srt", "srt", "documents")
        for subtitle, text in zip(self.subtitles, self.cues.translated(translations)):
            subtitle.content = text
        return srt.compose(self.subtitles, reindex=False).encode("utf-8")


class VttDocument:
    def __init__(self, data: bytes, name: Path):
        webvtt = needs("webvtt", "webvtt-py", "documents")
        from webvtt.errors import MalformedCaptionError, MalformedFileError

        try:
            self.vtt = webvtt.from_string(_decoded(data, name))
        except (MalformedFileError, MalformedCaptionError, ValueError) as e:
            raise MtError(f"{name}: not a valid WebVTT file ({e})") from None
        self.cues = _Cues([c.raw_text for c in self.vtt.captions])
        self.sentences = self.cues.sentences

    def render(self, translations: list[tuple[str, str | None]]) -> bytes:
        for caption, text in zip(self.vtt.captions, self.cues.translated(translations)):
            caption.text = text
        return self.vtt.content.encode("utf-8")


def _decoded(data: bytes, name: Path) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise MtError(f"{name}: not UTF-8 (byte {e.start})") from None


def wrapped(text: str, lines: int) -> str:
    """`text` in `lines` lines of about equal length, cut between words (never inside a tag)."""
    words = WORDS.findall(text)
    if lines <= 1 or len(words) < 2:
        return text
    out, rest = [], words
    for left in range(lines, 1, -1):
        target = len(" ".join(rest)) / left
        cut, length = 1, len(rest[0])
        while cut < len(rest) - left + 1 and abs(length + 1 + len(rest[cut]) - target) <= abs(length - target):
            length += 1 + len(rest[cut])
            cut += 1
        out.append(" ".join(rest[:cut]))
        rest = rest[cut:]
    out.append(" ".join(rest))
    return "\n".join(line for line in out if line)
