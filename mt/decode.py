"""The decoding front end: lines in, hypotheses out, the same for every backend (mt/backend.py).

Line preparation is written once, here: encoding, cutting sources too long for the model's positions (with a
warning through `on_truncate`), empty lines (one empty hypothesis, not decoded) and the length limit of each
sentence (a * source length + b). The backend searches the sentences in batches of at most `batch_tokens`
source tokens (padding counted, beams not, as CTranslate2's `max_batch_size` with `batch_type="tokens"`);
mt's greedy search refills its batch as sentences end. Options travel as one DecodeConfig, whose fields are the
only defaults.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

import torch

from mt.backend import Backend, Translator, load_ensemble_translator, load_model_translator, per_batch
from mt.alignment import word_alignment
from mt.config import DecodeConfig
from mt.errors import MtError
from mt.ct2_backend import load_ct2_translator
from mt.search import Hypothesis, max_output_lengths



def load_translator(path: str | Path | list[str | Path], device: str = "auto", quantize: str | None = None,
                    raw_weights: bool = False) -> Translator:
    """A checkpoint file (mt's model), a directory written by `mt export` (CTranslate2), or a list of
    checkpoints (an ensemble), as a Translator. `quantize="int8"` decodes with int8 weights: mt's dynamic
    quantization (CPU only), or CTranslate2's. `raw_weights`: a checkpoint's last-update weights, not its
    averaged ones (an export holds one set)."""
    if isinstance(path, (list, tuple)):
        if len(path) > 1:
            for p in path:
                if Path(p).is_dir():
                    raise MtError(f"{p}: an exported directory cannot join an ensemble (CTranslate2 decodes one "
                                  "model); give checkpoints")
            return load_ensemble_translator(list(path), device, quantize, raw_weights)
        path = path[0]
    if Path(path).is_dir():
        if raw_weights:
            raise MtError(f"{path}: --raw-weights needs a checkpoint; an exported directory holds one set of weights")
        return load_ct2_translator(path, device, quantize)
    return load_model_translator(path, device, quantize, raw_weights)


class Translation(NamedTuple):
    """One hypothesis of an input line, as text."""

    text: str
    score: float
    alignment: str | None = None  # Moses-format word alignment (mt/alignment.py), when asked for


def translate_ids(backend: Backend, sources: list[list[int]], opts: DecodeConfig, *, nbest: int = 1,
                  on_truncate=None, first_line: int = 0, prefixes: list[list[int]] | None = None,
                  constraints: list[list[list[int]]] | None = None, attention: bool = False) -> list[list[Hypothesis]]:
    """Hypotheses of token-id sentences (no EOS), in input order: `nbest` per sentence (beam size at least
    `nbest`; with opts.sampling, `nbest` samples), one empty hypothesis for an empty sentence. Sources too long
    for the model's positions are cut, calling `on_truncate(index, length, kept)` for each (and
    `on_truncate(index, length, room, part)` for a target prefix cut to fit, or constraint terms that cannot all
    fit the length limit, `part` naming which). Sentence i is input
    line `first_line + i` (from 0), which with opts.seed decides what sampling draws for it. `prefixes[i]`
    (target token ids, maybe empty) starts sentence i's output; its length limit grows to hold it; so it does
    for `constraints[i]`, terms (target token ids) that must all appear in sentence i's output. With
    `attention`, each hypothesis carries its cross-attention over the source (`Backend.attention`)."""
    if not opts.sampling:
        opts = replace(opts, beam_size=max(opts.beam_size, nbest))
    limit = backend.max_positions - 1
    keep = limit - 1  # room for EOS
    if on_truncate is not None:
        for i, s in enumerate(sources):
            if len(s) > keep:
                on_truncate(i, len(s), keep)
    sources = [s[:keep] for s in sources]
    results: list[list[Hypothesis]] = [[Hypothesis([], 0.0, 0.0)] for _ in sources]
    todo = [i for i, s in enumerate(sources) if s]
    if not todo:
        return results
    max_len = max_output_lengths(torch.tensor([len(sources[i]) for i in todo]), opts.max_len_a, opts.max_len_b, limit)
    todo_prefixes = None
    if prefixes is not None:
        todo_prefixes = [prefixes[i][:limit - 1] for i in todo]
        _report_cut(on_truncate, todo, [len(prefixes[i]) for i in todo], limit - 1, "target prefix")
        max_len = torch.maximum(max_len, torch.tensor([len(p) for p in todo_prefixes]))
    todo_terms = None
    if constraints is not None:
        todo_terms = [constraints[i] for i in todo]
        term_tokens = [sum(map(len, terms)) for terms in todo_terms]
        _report_cut(on_truncate, todo, term_tokens, limit, "constraint terms")
        max_len = (max_len + torch.tensor(term_tokens)).clamp(max=limit)
    found = backend.search([sources[i] for i in todo], max_len, opts, nbest, [first_line + i for i in todo],
                           todo_prefixes, todo_terms)
    for i, hyps in zip(todo, found):
        results[i] = hyps
    if attention:
        pairs = [(sources[i], h) for i in todo for h in results[i]]
        per_pair = per_batch([s for s, _ in pairs], opts.batch_tokens, lambda index: backend.attention(
            [pairs[j][0] for j in index], [pairs[j][1].tokens for j in index]))
        for (_, h), weights in zip(pairs, per_pair):
            h.attention = weights
    return results


def _report_cut(on_truncate, index: list[int], lengths: list[int], room: int, part: str) -> None:
    """on_truncate(i, length, room, part) for each sentence whose `part` is longer than `room` tokens."""
    if on_truncate is not None:
        for i, length in zip(index, lengths):
            if length > room:
                on_truncate(i, length, room, part)


def translate_lines(tr: Translator, lines: list[str], opts: DecodeConfig, *, nbest: int = 1,
                    on_truncate=None, first_line: int = 0, prefixes: list[str] | None = None,
                    constraints: list[list[str]] | None = None, alignment: bool = False) -> list[list[Translation]]:
    """Detokenized hypotheses per input line, each starting with its target prefix when `prefixes` gives one
    (text; "" for none), containing its terms when `constraints` gives some, with its word alignment when
    `alignment`; see `translate_ids`."""
    prefix_ids = tr.tgt_tokenizer.encode(prefixes) if prefixes is not None else None
    term_ids = None
    if constraints is not None:
        term_ids = [[t for t in tr.tgt_tokenizer.encode(terms) if t] for terms in constraints]
    sources = tr.src_tokenizer.encode(lines)
    hyps = translate_ids(tr.backend, sources, opts, nbest=nbest, on_truncate=on_truncate, first_line=first_line,
                         prefixes=prefix_ids, constraints=term_ids, attention=alignment)
    return [[Translation(tr.tgt_tokenizer.decode(h.tokens), h.score, _alignment(tr, source, h) if alignment else None)
             for h in per_line] for source, per_line in zip(sources, hyps)]


def _alignment(tr: Translator, source: list[int], h: Hypothesis) -> str:
    if h.attention is None:  # an empty line: nothing decoded, nothing aligned
        return ""
    src_pieces = [tr.src_tokenizer.sp.id_to_piece(t) for t in source[:h.attention.size(1)]]
    return word_alignment(h.attention, src_pieces, [tr.tgt_tokenizer.sp.id_to_piece(t) for t in h.tokens])
