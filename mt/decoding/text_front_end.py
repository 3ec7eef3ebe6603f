"""The text front end: lines of text in, translations as text out, the same for `mt translate` (lines and
documents), `mt serve` (text, html and files), `mt distill` and the dev set's BLEU.

A `TextBatch` prepares the lines (a line longer than the model learned cut into pieces: mt/decoding/long_sentences.py;
encoded; one request per piece: mt/decoding/lines.py `LineBatch`), hands its `todo` to whoever searches (the
backend at once, `translate_whole_lines`; a server's decode worker beside other requests), then turns what was
found into text, the pieces of a line joined. Its steps are the only ones: a caller that waits differently
composes the same object, never the steps.
"""

from __future__ import annotations

from mt.config import DecodeConfig
from mt.decoding.lines import LineBatch, LineText, Translation, encode_lines, translations
from mt.decoding.long_sentences import fit_to_model, joined_translations, trained_length
from mt.decoding.protocol import Backend, Hypothesis, Translator


class TextBatch:
    """Lines of text on their way through the model: `todo` the requests to search, then `hypotheses` of what the
    search found (with each hypothesis' cross-attention when `alignment`), then `translations`, one list per line.
    With `whole` (the default) a line longer than the model learned is translated in pieces and joined; without,
    it is cut to the model's positions (`on_truncate`), as the dev set's BLEU and distillation read their lines."""

    def __init__(self, tr: Translator, lines: list[LineText], opts: DecodeConfig, *, nbest: int = 1,
                 alignment: bool = False, on_truncate=None, whole: bool = True):
        self.tr, self.alignment = tr, alignment
        if whole:
            self.pieces, self.owners, self.encoded, self.lengths = fit_to_model(tr, lines)
        else:
            self.pieces, self.owners, self.encoded = lines, list(range(len(lines))), encode_lines(tr, lines)
            self.lengths = [len(e.source) for e in self.encoded]
        report = None if on_truncate is None else lambda i, *rest: on_truncate(self.owners[i], *rest)
        self.batch = LineBatch(self.encoded, opts, nbest, tr.backend.max_positions, report, alignment)
        self.todo = self.batch.todo
        self.counts: list[int] = []

    def hypotheses(self, found: list[list[Hypothesis]], attention_of: Backend | None = None) -> list[list[Hypothesis]]:
        """`LineBatch.hypotheses`: per piece, in order."""
        return self.batch.hypotheses(found, attention_of)

    def attention_parts(self, hyps: list[list[Hypothesis]], tokens: int | None = None):
        """`LineBatch.attention_parts` with this batch's backend."""
        return self.batch.attention_parts(hyps, self.tr.backend, tokens)

    def translations(self, hyps: list[list[Hypothesis]]) -> list[list[Translation]]:
        """Per line, its hypotheses as text (with word alignments when asked for), a split line's pieces joined;
        `counts` then holds each line's number of pieces."""
        found = translations(self.tr, [e.source for e in self.encoded], hyps, self.alignment)
        joined, self.counts = joined_translations(found, self.owners, [p.source for p in self.pieces])
        return joined

    def split(self) -> list[tuple[int, int, int, int]]:
        """(line, its source tokens, what the model learned, pieces) for each line translated in pieces."""
        return [(i, self.lengths[i], trained_length(self.tr), count) for i, count in enumerate(self.counts)
                if count > 1]


def translate_whole_lines(tr: Translator, lines: list[LineText], opts: DecodeConfig, *, nbest: int = 1,
                          on_truncate=None, on_split=None, alignment: bool = False) -> list[list[Translation]]:
    """Per line, its `nbest` translations (each starting with its target prefix, containing its terms, with its
    word alignment when `alignment`), searched by the translator's backend at once; a line longer than the model
    learned is translated in pieces and joined (`on_split(index, tokens, room, pieces)` hears of it);
    `on_truncate` is told a line's index, not a piece's."""
    batch = TextBatch(tr, lines, opts, nbest=nbest, alignment=alignment, on_truncate=on_truncate)
    joined = _searched(tr, batch)
    for split in batch.split() if on_split is not None else []:
        on_split(*split)
    return joined


def translate_lines(tr: Translator, lines: list[str | LineText], opts: DecodeConfig, *, nbest: int = 1,
                    on_truncate=None, alignment: bool = False) -> list[list[Translation]]:
    """`translate_whole_lines` with a line too long for the model's positions cut (`on_truncate`), not split: the
    dev set's BLEU and a distilled corpus (whose pairs fit the model) read their lines so. A plain string is line
    number its index."""
    texts = [line if isinstance(line, LineText) else LineText(line, i) for i, line in enumerate(lines)]
    return _searched(tr, TextBatch(tr, texts, opts, nbest=nbest, alignment=alignment, on_truncate=on_truncate,
                                   whole=False))


def _searched(tr: Translator, batch: TextBatch) -> list[list[Translation]]:
    """The batch's translations, searched by the translator's backend at once."""
    found = tr.backend.search(batch.todo) if batch.todo else []
    return batch.translations(batch.hypotheses(found, tr.backend if batch.alignment else None))
