"""Sentences longer than a model was trained on (data.max_len, within its positions), cut into pieces it can
translate and joined back.

A sentence over the limit is cut in two at the best boundary nearest its middle: after clause punctuation
(, ; : and their CJK forms, dashes) followed by whitespace, else at whitespace, else (a script without spaces)
between two characters; each half over the limit is cut again. The pieces' translations are joined with a
space, in order: nothing a user sent is dropped. The text front end (mt/decoding/text_front_end.py) applies it
for every caller.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

from mt.decoding.lines import LineIds, LineText, Translation, encode_lines
from mt.decoding.protocol import Translator

CLAUSE_END = re.compile(r"(?<=[,;:，、；：–—])\s+|\s+(?=[–—]\s)")
SPACE = re.compile(r"\s+")


def cut_to_fit(text: str, fits: Callable[[str], bool]) -> list[str]:
    """`text` in pieces that each fit (`fits(piece)`), in order, whitespace at the cuts dropped."""
    if fits(text) or len(text) < 2:
        return [text]
    at = _best_cut(text)
    return cut_to_fit(text[:at[0]], fits) + cut_to_fit(text[at[1]:], fits)


def _best_cut(text: str) -> tuple[int, int]:
    """(end of the first half, start of the second) at the best kind of boundary, the one nearest the middle."""
    middle = len(text) / 2
    for boundary in (CLAUSE_END, SPACE):
        cuts = [(m.start(), m.end()) for m in boundary.finditer(text) if 0 < m.start() and m.end() < len(text)]
        if cuts:
            return min(cuts, key=lambda cut: abs(cut[0] - middle))
    return int(middle), int(middle)


def trained_length(tr: Translator) -> int:
    """Source tokens a piece may have: as many as the model's training pairs had at most (data.max_len of the
    config a checkpoint or an export stores), within its positions. Cut to its positions instead, a model trained
    on 128-token pairs answered a 1,777-word sentence with 1,098 words; its clauses sent alone gave 2,255."""
    positions = tr.backend.max_positions - 2  # what mt.decoding.lines.sentence_requests keeps of a source (and EOS)
    return min(tr.cfg.data.max_len, positions)


def fit_to_model(tr: Translator, lines: list[LineText]
                 ) -> tuple[list[LineText], list[int], list[LineIds], list[int]]:
    """`split_lines` for what the model learned (`trained_length`): the pieces, the line of each, the pieces
    encoded, and each line's source tokens."""
    encoded = encode_lines(tr, lines)
    lengths = [len(e.source) for e in encoded]
    room = trained_length(tr)
    if all(length <= room for length in lengths):
        return lines, list(range(len(lines))), encoded, lengths
    pieces, owners = split_lines(lines, lengths, room, lambda text: len(tr.encode_sources([text])[0]))
    return pieces, owners, encode_lines(tr, pieces), lengths


def split_lines(lines: list[LineText], lengths: list[int], max_tokens: int,
                tokens: Callable[[str], int]) -> tuple[list[LineText], list[int]]:
    """Lines with each one over `max_tokens` (its `lengths` entry, in tokens) replaced by its pieces (the first
    keeps the line's target prefix and terms), and for each piece the index of its line."""
    pieces, owners = [], []
    for i, (line, length) in enumerate(zip(lines, lengths)):
        parts = [line.source] if length <= max_tokens else cut_to_fit(line.source, lambda t: tokens(t) <= max_tokens)
        for k, part in enumerate(parts):
            pieces.append(replace(line, source=part) if k == 0 else LineText(part, line.line))
            owners.append(i)
    return pieces, owners


def joined_translations(found: list[list[Translation]], owners: list[int], sources: list[str]
                        ) -> tuple[list[list[Translation]], list[int]]:
    """The translations of pieces joined back per line (hypothesis k of a line: the pieces' k-th, or their last
    one, joined with spaces; scores added; word alignments shifted by the words before), and each line's count
    of pieces."""
    lines: dict[int, list[int]] = {}
    for piece, owner in enumerate(owners):
        lines.setdefault(owner, []).append(piece)
    joined, counts = [], []
    for owner in sorted(lines):
        parts = lines[owner]
        counts.append(len(parts))
        if len(parts) == 1:
            joined.append(found[parts[0]])
            continue
        nbest = max(len(found[p]) for p in parts)
        joined.append([_join([found[p][min(k, len(found[p]) - 1)] for p in parts], [sources[p] for p in parts])
                       for k in range(nbest)])
    return joined, counts


def _join(parts: list[Translation], sources: list[str]) -> Translation:
    text = " ".join(t.text for t in parts if t.text)
    alignment = None
    if all(t.alignment is not None for t in parts):
        links, source_words, target_words = [], 0, 0
        for t, source in zip(parts, sources):
            for link in t.alignment.split():
                i, j = link.split("-")
                links.append(f"{int(i) + source_words}-{int(j) + target_words}")
            source_words += len(source.split())
            target_words += len(t.text.split())
        alignment = " ".join(links)
    return Translation(text, sum(t.score for t in parts), alignment)
