"""Inline markup the model itself reads and writes, for a model trained with `data.inline_tags`
(mt/data/inline_tags.py): each inline element of a sentence goes to the model as a numbered placeholder tag and
comes back from it.

The tags are those `mt prepare` makes of a TMX's inline codes (mt/data/tmx.py): `<g1>`...`</g1>` around the words
of an element, `<x1/>` for an element without words (an image, an empty element, a lone tag), numbered 1 to
MAX_TAGS in the order they open in the sentence; an element past MAX_TAGS, or one the model dropped or wrote twice,
is placed by word alignment as for any other model (mt/documents/inline_markup.py). Tags are put in without spaces,
so the sentence without them is the sentence as sent (but for a marker, a footnote's 1, whose text its lone tag
stands in for), and the words of the two are the same words.

Which documents are read so is set once, where the model is known: `tags_to_model(True)` around reading the
document (a context variable, so that each of the formats that make units need not take a flag); each `Unit` made
meanwhile remembers it, so that its rendering parses the model's tags.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from contextvars import ContextVar

MAX_TAGS = 8  # tags of each kind the tokenizer has as pieces of their own
SYMBOLS = [f"<g{n}>" for n in range(1, MAX_TAGS + 1)] + [f"</g{n}>" for n in range(1, MAX_TAGS + 1)] \
    + [f"<x{n}/>" for n in range(1, MAX_TAGS + 1)]
TAG = re.compile(r"<(/?)g(\d+)>|<x(\d+)/>")
WORD = re.compile(r"\S+")

_to_model: ContextVar[bool] = ContextVar("tags_to_model", default=False)


@contextmanager
def tags_to_model(enabled: bool):
    """Units read inside this block give their inline elements to the model as tags (where `enabled`)."""
    token = _to_model.set(enabled)
    try:
        yield
    finally:
        _to_model.reset(token)


def reading_for_model() -> bool:
    return _to_model.get()


def tagged_sentence(sentence: str, elements: list) -> tuple[str, dict[int, int], list[int | None]]:
    """The sentence with its elements (inline_markup's: `start`, `end` in the sentence, `children`) as numbered
    tags, a marker (no letter in it: a footnote's 1) as a lone tag in place of its text. Also the number of each
    element (by id) that got one, in the order they open, and for each whitespace word of the tagged sentence its
    word in the sentence (None: tags alone)."""
    numbers: dict[int, int] = {}
    pieces: list[tuple[str, int | None]] = []  # (text, its offset in the sentence; None for a tag)

    def write(lo: int, hi: int, elements: list) -> None:
        at = lo
        for e in sorted(elements, key=lambda e: e.start):
            pieces.append((sentence[at:e.start], at))
            if len(numbers) >= MAX_TAGS:
                write(e.start, e.end, e.children)
            elif e.start == e.end or (not e.children and not any(c.isalpha() for c in sentence[e.start:e.end])):
                numbers[id(e)] = n = len(numbers) + 1
                pieces.append((f"<x{n}/>", None))
            else:
                numbers[id(e)] = n = len(numbers) + 1
                pieces.append((f"<g{n}>", None))
                write(e.start, e.end, e.children)
                pieces.append((f"</g{n}>", None))
            at = e.end
        pieces.append((sentence[at:hi], at))

    write(0, len(sentence), elements)
    text, origin = "", []
    for piece, at in pieces:
        text += piece
        origin += [None] * len(piece) if at is None else range(at, at + len(piece))
    words = [m.span() for m in WORD.finditer(sentence)]
    word_at = {o: i for i, (s, t) in enumerate(words) for o in range(s, t)}
    mapped = []
    for m in WORD.finditer(text):
        first = next((origin[o] for o in range(*m.span()) if origin[o] is not None), None)
        mapped.append(word_at.get(first) if first is not None else None)
    return text, numbers, mapped


def without_tags(text: str) -> tuple[str, dict[str, list[int]]]:
    """`text` without its tags, spaces left where a tag stood alone between words made one; and where each tag
    was in it: {"<g1>": [offsets], ...}, offsets in the text returned."""
    plain, found, at, length = [], {}, 0, 0

    def add(piece: str) -> None:
        nonlocal length
        if (length == 0 or plain[-1][-1:].isspace()) and piece[:1].isspace():
            piece = piece.lstrip()
        if piece:
            plain.append(piece)
            length += len(piece)

    for m in TAG.finditer(text):
        add(text[at:m.start()])
        found.setdefault(m.group(0), []).append(length)
        at = m.end()
    add(text[at:])
    stripped = "".join(plain).rstrip()
    return stripped, {tag: [min(o, len(stripped)) for o in offsets] for tag, offsets in found.items()}


def model_spans(text: str) -> tuple[str, dict[int, tuple[int, int]]]:
    """The model's output without its tags, and the span of each tag number it wrote exactly once (a pair opened
    before it closed, or a lone tag), its spaces trimmed; a tag dropped or written twice has none."""
    plain, found = without_tags(text)
    spans = {}
    for n in range(1, MAX_TAGS + 1):
        opened, closed, lone = (found.get(t, []) for t in (f"<g{n}>", f"</g{n}>", f"<x{n}/>"))
        if len(opened) == 1 and len(closed) == 1 and not lone and opened[0] <= closed[0]:
            s, t = opened[0], closed[0]
            while s < t and plain[s].isspace():
                s += 1
            while t > s and plain[t - 1].isspace():
                t -= 1
            spans[n] = (s, t)
        elif len(lone) == 1 and not opened and not closed:
            spans[n] = (lone[0], lone[0])
    return plain, spans


def word_map(text: str) -> list[int | None]:
    """For each whitespace word of tagged `text`, the index of its word in the text without tags (None for a word
    that is tags alone)."""
    mapped, n = [], 0
    for m in WORD.finditer(text):
        if TAG.sub("", m.group(0)):
            mapped.append(n)
            n += 1
        else:
            mapped.append(None)
    return mapped


def untagged_alignment(alignment: str | None, source: list[int | None], output: list[int | None]) -> str | None:
    """A word alignment between a tagged source and a tagged output, as one between the two without tags, given
    each one's `word_map`."""
    if alignment is None:
        return None
    links = []
    for link in alignment.split():
        i, j = map(int, link.split("-"))
        if i < len(source) and j < len(output) and source[i] is not None and output[j] is not None:
            links.append(f"{source[i]}-{output[j]}")
    return " ".join(dict.fromkeys(links))
