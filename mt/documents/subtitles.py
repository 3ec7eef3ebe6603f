"""Subtitles (SubRip .srt with the `srt` library, WebVTT .vtt with webvtt-py) translated cue by cue: numbering,
timings, cue settings, notes and styles are kept; a cue's lines are translated together (a sentence often runs
over two lines), its markup (<i>, <b>, <c.x>, <v Name>) put back as HTML's inline elements are
(mt/documents/inline_markup.py), and the translation wrapped into as many lines as the cue had (as many as it
has words, where it has fewer).

Before either library reads a file, each block (lines between blank lines) is checked: one that is no cue (no
timing line `start --> end` as its first or second line; WebVTT's header, notes, styles and regions aside) and a
cue that ends before it starts are refused in one line naming the line, where srt would merge the first into the
cue before it, webvtt-py would drop it, and both would take the second."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from mt.documents.html import HtmlDocument
from mt.documents.fragments import Fragments
from mt.errors import MtError, needs


WORDS = re.compile(r"(?:<[^>]*>|[^\s<])+")  # words, a tag (with its spaces) inside the word it touches
ARROW = re.compile(r"-[ -] *>")  # what the srt library reads as a timing line's arrow


@dataclass(frozen=True)
class _Syntax:
    """What a format's blocks look like, for `check_blocks`."""
    what: str  # the format's name in a message
    timing: re.Pattern  # a timing line; its groups the start and the end
    time: Callable[[str], timedelta]
    not_cues: tuple[str, ...] = ()  # how blocks that are no cues start


def _srt_time(text: str) -> timedelta:
    hours, minutes, seconds, millis = (int(x or 0) for x in re.split(r"[,.:，．。：]", text, maxsplit=3))
    return timedelta(hours=hours, minutes=minutes, seconds=seconds, milliseconds=millis)


def _vtt_time(text: str) -> timedelta:
    *hours, minutes, seconds = text.split(":")
    return timedelta(hours=int(hours[0]) if hours else 0, minutes=int(minutes), seconds=float(seconds))


SRT_TIME = r"\d+[,.:，．。：]\d+[,.:，．。：]\d+(?:[,.:，．。：]\d*)?"  # as the srt library reads one
SUBRIP = _Syntax("SubRip", re.compile(rf"\s*({SRT_TIME}) *-[ -] *> *({SRT_TIME})"), _srt_time)
VTT_TIME = r"(?:\d{1,10}:)?\d{1,2}:\d{1,2}\.\d{1,3}"  # as webvtt-py reads one
WEBVTT = _Syntax("WebVTT", re.compile(rf"\s*({VTT_TIME})\s*-->\s*({VTT_TIME})"), _vtt_time,
                 ("WEBVTT", "NOTE", "STYLE", "REGION"))


def check_blocks(text: str, name: Path, syntax: _Syntax) -> None:
    """Refuse, in one line naming the line, a block that is no cue and a cue that ends before it starts."""
    for first, block in _blocks(text):
        if block[0].startswith(syntax.not_cues):
            continue
        at = next((k for k, line in enumerate(block[:2]) if ARROW.search(line)), None)
        if at is None:
            raise MtError(f"{name}: not a valid {syntax.what} file (line {first}: a block without a timing line "
                          f"'start --> end' as its first or second line: {block[0][:60]!r})")
        timing = syntax.timing.match(block[at])
        if timing is None:
            raise MtError(f"{name}: not a valid {syntax.what} file (line {first + at}: a timing line mt cannot "
                          f"read: {block[at][:60]!r})")
        start, end = timing.groups()
        if syntax.time(end) < syntax.time(start):
            raise MtError(f"{name}: not a valid {syntax.what} file (line {first + at}: the cue ends at {end}, "
                          f"before it starts at {start})")


def _blocks(text: str) -> list[tuple[int, list[str]]]:
    """(the number of its first line, its lines) of each run of lines between blank lines."""
    blocks: list[tuple[int, list[str]]] = []
    fresh = True
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            fresh = True
        elif fresh:
            blocks.append((number, [line]))
            fresh = False
        else:
            blocks[-1][1].append(line)
    return blocks


class _Cues:
    """Each cue's text as a one-line HTML fragment: `sentences`, and the cues' translated texts from `render`."""

    def __init__(self, texts: list[str]):
        self.lines = [max(1, len(text.split("\n"))) for text in texts]
        self.documents = [HtmlDocument(" ".join(text.split("\n"))) for text in texts]
        self.sentences = [s for d in self.documents for s in d.sentences]

    def translated(self, translations: list[tuple[str, str | None]], fragments: Fragments | None) -> list[str]:
        given, out = iter(translations), []
        for document, lines in zip(self.documents, self.lines):
            texts = [next(given) for _ in document.sentences]
            out.append(wrapped(document.render(texts, fragments), lines))
        return out


class SrtDocument:
    def __init__(self, data: bytes, name: Path):
        srt = needs("srt", "srt", "documents")
        self.subtitles = _parsed(data, name, SUBRIP, lambda text: list(srt.parse(text)),
                                 (srt.SRTParseError, ValueError), "SubRip")
        self.cues = _Cues([s.content for s in self.subtitles])
        self.sentences = self.cues.sentences

    def render(self, translations: list[tuple[str, str | None]], fragments: Fragments | None = None) -> bytes:
        srt = needs("srt", "srt", "documents")
        for subtitle, text in zip(self.subtitles, self.cues.translated(translations, fragments)):
            subtitle.content = text
        return srt.compose(self.subtitles, reindex=False).encode("utf-8")


class VttDocument:
    def __init__(self, data: bytes, name: Path):
        webvtt = needs("webvtt", "webvtt-py", "documents")
        from webvtt.errors import MalformedCaptionError, MalformedFileError

        self.vtt = _parsed(data, name, WEBVTT, webvtt.from_string,
                           (MalformedFileError, MalformedCaptionError, ValueError), "WebVTT")
        self.cues = _Cues([c.raw_text for c in self.vtt.captions])
        self.sentences = self.cues.sentences

    def render(self, translations: list[tuple[str, str | None]], fragments: Fragments | None = None) -> bytes:
        for caption, text in zip(self.vtt.captions, self.cues.translated(translations, fragments)):
            caption.text = text
        return self.vtt.content.encode("utf-8")


def _parsed(data: bytes, name: Path, syntax: _Syntax, parse, errors: tuple[type[Exception], ...], kind: str):
    """What `parse` (srt's, webvtt-py's) makes of the file's text, decoded and its blocks checked first; the
    `errors` it raises are one line naming the `kind` of file."""
    text = _decoded(data, name)
    check_blocks(text, name, syntax)
    try:
        return parse(text)
    except errors as e:
        raise MtError(f"{name}: not a valid {kind} file ({e})") from None


def _decoded(data: bytes, name: Path) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise MtError(f"{name}: not UTF-8 (byte {e.start})") from None


def wrapped(text: str, lines: int) -> str:
    """`text` in `lines` lines of about equal length, cut between words (never inside a tag)."""
    words = WORDS.findall(text)
    lines = min(lines, len(words))
    if lines <= 1:
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
