"""Inline tags put into a share of the training pairs (`data.inline_tags`), so that the model learns to carry
inline markup itself (mt/documents/model_tags.py): Hanneman and Dinu (2020, "How should markup tags be
translated?") found tags injected into training pairs beat translating the text alone and placing the tags after.

A pair is given tags around words that stand in both of its sides as one and the same word, once in each (a name,
a number, a command: the `anchors`), so that the tags' places on the two sides are known without a word aligner.
Hanneman and Dinu align any words; mt does not, because eflomal's sampler is seeded from the system and the
tagged corpus must be the same for a seed. Each tagged pair gets one of these, drawn from the seed:

- `<g1>word</g1>`: one anchor in a pair of tags;
- `<g1>word ... word</g1>`: the words from one anchor to another, where the two come in the same order in both;
- `<g1>word</g1> ... <g2>word</g2>`: two anchors, each in its own pair;
- `<g1><g2>word</g2> ... word</g1>`: a pair inside a pair;
- `word<x1/>`: a lone tag stuck to the end of an anchor (a footnote's marker), or `<x1/>word` before it (an image);
- `<g1>the whole sentence</g1>`, the only choice in a pair without an anchor.

Tags are put in without spaces: a tagged side without its tags is the side as it was.
"""

from __future__ import annotations

import random

from mt.documents.model_tags import SYMBOLS, TAG, WORD

EDGES = "([{\"'«“‘)]}\"'»”’.,;:!?"  # punctuation around a word that is not part of an anchor
KINDS = ("word", "span", "two", "nested", "marker", "image")


def _words(text: str) -> dict[str, list[tuple[int, int]]]:
    """Each word's text (punctuation around it cut off) and its spans in `text`."""
    found: dict[str, list[tuple[int, int]]] = {}
    for m in WORD.finditer(text):
        s, t = m.span()
        while s < t and text[s] in EDGES:
            s += 1
        while t > s and text[t - 1] in EDGES:
            t -= 1
        if s < t:
            found.setdefault(text[s:t], []).append((s, t))
    return found


def anchors(src: str, tgt: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(source span, target span) of each word that is once in each side, with a letter or a digit and not a tag,
    in source order."""
    src_words, tgt_words = _words(src), _words(tgt)
    found = [(spans[0], tgt_words[word][0]) for word, spans in src_words.items()
             if len(spans) == 1 and len(tgt_words.get(word, ())) == 1 and any(c.isalnum() for c in word)
             and not TAG.search(word)]
    return sorted(found)


def _inserted(text: str, tags: list[tuple[int, int, str]]) -> str:
    """`text` with each (offset, order, tag) put in at its offset, tags at one offset by their order."""
    out, at = [], 0
    for offset, _, tag in sorted(tags):
        out += [text[at:offset], tag]
        at = offset
    return "".join(out) + text[at:]


def tagged_pair(src: str, tgt: str, rng: random.Random) -> tuple[str, str]:
    """The pair with tags of one kind (the module's docstring), drawn from `rng`."""
    found = anchors(src, tgt)
    ordered = [(a, b) for i, a in enumerate(found) for b in found[i + 1:] if a[1][0] < b[1][0]]
    kinds = [k for k in KINDS if found and (k not in ("span", "two", "nested") or ordered)]
    if not kinds:
        return _whole(src), _whole(tgt)
    kind = rng.choice(kinds)
    if kind in ("word", "marker", "image"):
        a = rng.choice(found)
        sides = []
        for (s, t) in a:
            tags = {"word": [(s, 1, "<g1>"), (t, 0, "</g1>")], "marker": [(t, 0, "<x1/>")],
                    "image": [(s, 1, "<x1/>")]}[kind]
            sides.append(tags)
    else:
        a, b = rng.choice(ordered)
        sides = []
        for side in (0, 1):
            (s1, t1), (s2, t2) = a[side], b[side]
            sides.append({"span": [(s1, 1, "<g1>"), (t2, 0, "</g1>")],
                          "two": [(s1, 1, "<g1>"), (t1, 0, "</g1>"), (s2, 1, "<g2>"), (t2, 0, "</g2>")],
                          "nested": [(s1, 1, "<g1>"), (s1, 2, "<g2>"), (t1, 0, "</g2>"), (t2, 1, "</g1>")]}[kind])
    return _inserted(src, sides[0]), _inserted(tgt, sides[1])


def _whole(text: str) -> str:
    s, t = len(text) - len(text.lstrip()), len(text.rstrip())
    return _inserted(text, [(s, 1, "<g1>"), (t, 0, "</g1>")]) if s < t else text


class TagInjection:
    """A share of each corpus' pairs tagged (`tagged_pair`), which ones and how drawn from the seed and the corpus'
    number: the same pairs, the same tags, in every run."""

    def __init__(self, share: float, seed: int, corpus: int):
        self.share, self.rng = share, random.Random(f"inline_tags {seed} {corpus}")

    def chunk(self, sources: list[str], targets: list[str]) -> tuple[list[str], list[str]]:
        out_src, out_tgt = [], []
        for src, tgt in zip(sources, targets):
            if self.rng.random() < self.share:
                src, tgt = tagged_pair(src, tgt, self.rng)
            out_src.append(src)
            out_tgt.append(tgt)
        return out_src, out_tgt


def tag_symbols(share: float) -> list[str]:
    """The tokenizer's pieces for the tags: none for a model trained without them."""
    return list(SYMBOLS) if share > 0 else []
