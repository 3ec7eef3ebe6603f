"""`mt score`: the log-probability of given translations under a model, by teacher forcing (fairseq's
--score-reference, Marian's marian-scorer): what cross-entropy filtering, reranking and `mt distill` need.

A pair's score is the sum of log p(y_t | y_<t, x) over its target tokens and EOS; normalised, it is divided by
the GNMT length penalty of the search (mt/decoding/protocol.py `length_penalty`, |Y| counting EOS), so that a target
that `mt translate --scores` produced gets the score printed there. Sources are cut to the model's positions as
the decoding front end cuts them; an empty source is not scored (0.0), as `mt translate` gives an empty line a
score of 0. A checkpoint, an ensemble (the log of the mean of the members' probabilities, as they decode) or an
exported directory (CTranslate2's `score_batch`) scores.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterable, Iterator
from itertools import islice, zip_longest
from pathlib import Path

import torch

from mt.decoding.model_backend import ModelBackend
from mt.data.batching import pad_sequences, source_batch
from mt.decoding.protocol import Translator, length_penalty
from mt.errors import MtError
from mt.atomic_files import atomic_write_text, is_special
from mt.progress import Progress
from mt.decoding.scheduler import in_static_batches
from mt.symbols import BOS, EOS, PAD

BLOCK_LINES = 2000  # pairs read, scored and written at a time: memory stays bounded on any corpus
# Tokens of a teacher-forced batch (the wider side of each pair, padding counted). It holds every position of every
# target at once, where a search holds one per step, so it wants far fewer than decode.batch_tokens: on 2 CPU
# cores the demo model scored 2,000 pairs in 3.1-3.3 s at 1,024 or 2,048, 3.4-3.5 s at 4,096, 4.3-4.6 s at 16,384.
SCORE_BATCH_TOKENS = 2048


def score_pairs(tr: Translator, sources: list[str], targets: list[str], *, alpha: float, normalize: bool,
                batch_tokens: int = SCORE_BATCH_TOKENS, on_truncate=None) -> list[float]:
    """Each (source, target) pair's log-probability, length-normalised with `alpha` when `normalize`; batches of
    at most `batch_tokens` tokens (the wider side of a pair, padding counted). `on_truncate(index, side, length,
    kept)` hears of every side cut to fit the model's positions."""
    src_ids, tgt_ids = tr.encode_sources(sources), tr.encode_targets(targets)
    limit = tr.backend.max_positions - 1  # positions with EOS (source) or BOS (target input)
    for i, (s, t) in enumerate(zip(src_ids, tgt_ids)):
        for side, ids, kept in (("source", s, limit - 1), ("target", t, limit)):
            if len(ids) > kept and on_truncate is not None:
                on_truncate(i, side, len(ids), kept)
    src_ids = [s[:limit - 1] for s in src_ids]
    tgt_ids = [t[:limit] for t in tgt_ids]
    todo = [i for i, s in enumerate(src_ids) if s]
    found = in_static_batches([max(len(src_ids[i]), len(tgt_ids[i])) + 1 for i in todo], batch_tokens,
                              lambda index: pair_log_probs(tr, [src_ids[todo[j]] for j in index],
                                                           [tgt_ids[todo[j]] for j in index]))
    scores = [0.0] * len(sources)
    for i, log_prob in zip(todo, found):
        scores[i] = log_prob / length_penalty(len(tgt_ids[i]) + 1, alpha) if normalize else log_prob
    return scores


def pair_log_probs(tr: Translator, sources: list[list[int]], targets: list[list[int]]) -> list[float]:
    """Sum of the target's and EOS's log-probabilities per pair of token ids (sources without EOS)."""
    if not isinstance(tr.backend, ModelBackend):  # an exported directory (mt/decoding/ct2_backend.py)
        return _ct2_log_probs(tr.backend, sources, targets)
    with torch.inference_mode():
        return _forced_log_probs(tr.backend.model, sources, targets)


def _forced_log_probs(model, sources: list[list[int]], targets: list[list[int]]) -> list[float]:
    """Teacher forcing: one pass of the decoder over BOS + y, the log-probability of y + EOS at each position.
    Only real positions are projected to the vocabulary, as training projects them (`at`): padding's share of
    a batch's positions costs nothing there."""
    device = next(model.parameters()).device
    src, src_mask = source_batch(sources, device)
    tgt_in = pad_sequences([torch.tensor([BOS, *t]) for t in targets]).to(device)  # (B, T)
    tgt_out = pad_sequences([torch.tensor([*t, EOS]) for t in targets]).to(device)  # (B, T), PAD after EOS
    real = (tgt_out != PAD).flatten().nonzero()[:, 0]  # (N,) indices into the B*T positions
    logits = model.decode(model.encode(src, src_mask), src_mask, tgt_in, at=real).float()  # (N, V)
    if model.cfg.decoder_start == "pad":  # as the searches do: a Marian model never outputs PAD
        logits[:, PAD] = float("-inf")
    picked = logits.log_softmax(-1).gather(-1, tgt_out.flatten()[real, None])[:, 0]  # (N,)
    sums = torch.zeros(len(targets), dtype=picked.dtype, device=device)
    return sums.index_add_(0, real // tgt_out.size(1), picked).tolist()


def _ct2_log_probs(backend, sources: list[list[int]], targets: list[list[int]]) -> list[float]:
    src = [[backend.src_sp.id_to_piece(t) for t in s] for s in sources]
    tgt = [[backend.tgt_sp.id_to_piece(t) for t in s] for s in targets]
    return [sum(r.log_probs) for r in backend.translator.score_batch(src, tgt)]  # EOS's included


def paired_lines(src_path: str, tgt_path: str) -> Iterator[list[tuple[str, str]]]:
    """Blocks of (source, target) lines of two line-aligned files. Files of different lengths are an error: before
    the first block where both are files (each is read once to count, then once to score), else where the shorter
    one ends (a pipe is read once)."""
    if not (is_special(Path(src_path)) or is_special(Path(tgt_path))):
        _check_aligned(count_lines(src_path), count_lines(tgt_path), src_path, tgt_path)
    with open(src_path, "rb") as src, open(tgt_path, "rb") as tgt:
        pairs, done = zip_longest(_text_lines(src, src_path), _text_lines(tgt, tgt_path)), 0
        while block := list(islice(pairs, BLOCK_LINES)):
            if None in block[-1]:  # one side ended first (zip_longest's None): the other's lines are counted
                first = next(i for i, pair in enumerate(block) if None in pair)
                shorter, longer = done + first, done + len(block) + sum(1 for _ in pairs)
                _check_aligned(*((longer, shorter) if block[first][1] is None else (shorter, longer)),
                               src_path, tgt_path)
            yield block
            done += len(block)


def _check_aligned(src_lines: int, tgt_lines: int, src_path: str, tgt_path: str) -> None:
    if src_lines != tgt_lines:
        raise MtError(f"--tgt {tgt_path}: {tgt_lines} lines, but --src {src_path} has {src_lines}; the files "
                      "must be line-aligned")


def count_lines(path: str | Path) -> int:
    """Lines of a file, a last line without a newline counted."""
    with open(path, "rb") as f:
        data = f.read(1 << 20)
        count, last = 0, b"\n"
        while data:
            count, last = count + data.count(b"\n"), data[-1:]
            data = f.read(1 << 20)
    return count + (last != b"\n")


def _text_lines(f, path: str) -> Iterable[str]:
    for number, raw in enumerate(f, 1):
        try:
            yield raw.rstrip(b"\n").rstrip(b"\r").decode("utf-8").strip()
        except UnicodeDecodeError:
            raise MtError(f"{path}: line {number}: not UTF-8") from None


def run_score(tr: Translator, src_path: str, tgt_path: str, output: str | None, *, alpha: float,
              normalize: bool, warn, batch_tokens: int | None = None, quiet: bool = False) -> int:
    """`mt score`: the scores of the pairs of two files, block by block, to stdout (flushed after each block) or
    to `output` (written atomically at the end: a float per line is small), with its progress on stderr; returns
    the number of pairs. `batch_tokens`: None for SCORE_BATCH_TOKENS."""
    sink = io.StringIO() if output else sys.stdout
    count = 0
    total = None if is_special(Path(src_path)) else count_lines(src_path)
    with Progress("score", "scored", total, warn, "pairs", quiet=quiet) as progress:
        for block in paired_lines(src_path, tgt_path):
            count += _score_block(tr, block, sink, count, alpha, normalize, warn, batch_tokens)
            progress.update(len(block))
    if output:
        atomic_write_text(Path(output), sink.getvalue())
    return count


def _score_block(tr: Translator, block, sink, count: int, alpha: float, normalize: bool, warn,
                 batch_tokens: int | None) -> int:
    """One block's scores written to `sink` and flushed (its lines numbered after the `count` before it)."""

    def truncated(i: int, side: str, length: int, kept: int) -> None:
        warn(f"warning: line {count + i + 1}: {side} of {length} tokens, cut to {kept}")

    sources, targets = zip(*block)
    sink.write(format_scores(score_pairs(tr, list(sources), list(targets), alpha=alpha, normalize=normalize,
                                         batch_tokens=batch_tokens or SCORE_BATCH_TOKENS, on_truncate=truncated)))
    sink.flush()
    return len(block)


def format_scores(scores: list[float]) -> str:
    """One line per score, with the four decimals of `mt translate --scores`."""
    return "".join(f"{score:.4f}\n" for score in scores)
