"""`mt translate`: read lines (streaming from stdin), write exactly one result per line, through mt/decoding/lines.py.

Output formats: 1-best `hypothesis`; with --scores `score \\t hypothesis`; with --nbest K, K lines per input
`index \\t score \\t hypothesis` (index counts input lines from 0); with --output-format json one object per
input line, `{"line": index, "hypotheses": [{"text": ..., "score": ...}, ...]}`. With --alignment each result
ends with `\\t` and its word alignment (`"alignment"` in json). With --prefix input lines are `source \\t prefix`; with --constraints `source \\t term \\t term ...`.
"""

from __future__ import annotations

import collections
import io
import json
import os
import select
import sys
import time
from pathlib import Path
from typing import IO

import torch

from mt.decoding.protocol import Translator
from mt.config import DecodeConfig
from mt.decoding.lines import LineFormat, LineText, Translation, line_text
from mt.decoding.text_front_end import translate_whole_lines
from mt.atomic_files import atomic_write
from mt.data.translation_memories import Memory


def _decode_line(raw: bytes, number: int, warn) -> str:
    text = raw.rstrip(b"\n").rstrip(b"\r")
    try:
        return text.decode("utf-8")
    except UnicodeDecodeError:
        warn(f"warning: input line {number}: invalid UTF-8 replaced with U+FFFD")
        return text.decode("utf-8", errors="replace")


def translate_block(tr: Translator, lines: list[str], first_number: int, opts: DecodeConfig, fmt: LineFormat,
                    warn, memory: Memory | None = None) -> list[list[Translation]]:
    """Translate lines (numbered from `first_number` for warnings); one longer than the model learned is translated
    in pieces and joined, with a warning (mt/decoding/long_sentences.py). With `fmt.prefix` a line is
    `source<TAB>target prefix` (no tab: no prefix), and its output starts with it. A line the memory holds is
    answered from it (score 0) and not decoded."""
    found = [None if memory is None or fmt.prefix or fmt.constraints else memory.get(line) for line in lines]
    if any(t is not None for t in found):
        asked = [i for i, t in enumerate(found) if t is None]
        decoded = iter(translate_block(tr, [lines[i] for i in asked], first_number, opts, fmt, warn) if asked else [])
        return [[Translation(t, 0.0, memory=True)] if t is not None else next(decoded) for t in found]
    def split(i: int, length: int, room: int, pieces: int) -> None:
        warn(f"warning: input line {first_number + i}: {length} tokens, more than the model learned ({room}): "
             f"translated in {pieces} pieces, joined")

    def truncated(i: int, length: int, kept: int, part: str = "source") -> None:
        if part == "target prefix":
            warn(f"warning: input line {first_number + i}: target prefix of {length} tokens, cut to {kept}")
        else:
            warn(f"warning: input line {first_number + i}: {part} of {length} tokens do not fit the model's "
                 f"{kept} output positions; the output may miss some")

    texts = [line_text(line, first_number - 1 + i, fmt) for i, line in enumerate(lines)]
    for i, text in enumerate(texts):
        _warn_unknown_characters(tr, text, first_number + i, warn)
    return translate_whole_lines(tr, texts, opts, nbest=fmt.nbest or 1, on_truncate=truncated, on_split=split,
                                 alignment=fmt.alignment)


def _warn_unknown_characters(tr: Translator, text: LineText, number: int, warn) -> None:
    """A target prefix or a term with characters the target vocabulary lacks: they can only come out as
    sentencepiece's unknown piece (" ⁇ "), so say which."""
    for part, value in (("target prefix", text.prefix), *(("constraint term", term) for term in text.terms)):
        unknown = tr.tgt_tokenizer.unknown_characters(value)
        if unknown:
            warn(f"warning: input line {number}: {part} {value!r} has characters the model's target vocabulary "
                 f"lacks ({' '.join(unknown)}); they come out as ' ⁇ '")


OUTPUT_FORMATS = ("text", "json")


def format_results(results: list[list[Translation]], first_index: int, fmt: LineFormat) -> str:
    nbest, scores, output_format = fmt.nbest, fmt.scores, fmt.output_format
    out = []
    for i, per_line in enumerate(results):
        padded = (per_line + per_line[-1:] * (nbest or 1))[:nbest or 1]  # an empty line has one (empty) hypothesis
        if output_format == "json":
            hyps = [{"text": h.text, "score": round(h.score, 4),
                     **({"alignment": h.alignment} if h.alignment is not None else {}),
                     **({"memory": True} if h.memory else {})} for h in padded]
            out.append(json.dumps({"line": first_index + i, "hypotheses": hyps}, ensure_ascii=False))
        elif nbest:
            out += [f"{first_index + i}\t{h.score:.4f}\t{h.text}{_aligned(h)}" for h in padded]
        else:
            h = per_line[0]
            out.append((f"{h.score:.4f}\t" if scores else "") + h.text + _aligned(h))
    return "".join(line + "\n" for line in out)


def _aligned(h) -> str:
    return "" if h.alignment is None else f"\t{h.alignment}"


def _stream_blocks(stream: IO[bytes], wait_s: float, max_lines: int):
    """Yield lists of raw lines: whatever arrives within `wait_s` of the first line of a block.

    The main thread reads the file descriptor itself (select, then os.read), with no reader thread: a thread
    blocked on stdin would abort the interpreter at exit ("_enter_buffered_busy") after Ctrl-C, a closed pipe or
    an error raised while it waits.
    """
    try:
        reader = _LineReader(stream.fileno())
    except (AttributeError, io.UnsupportedOperation):  # an in-memory stream: every line is already there
        lines = stream.readlines()
        yield from (lines[i:i + max_lines] for i in range(0, len(lines), max_lines))
        return
    while (first := reader.next_line(timeout=None)) is not None:
        block, deadline = [first], time.monotonic() + wait_s
        while len(block) < max_lines:
            raw = reader.next_line(timeout=max(deadline - time.monotonic(), 0))
            if raw is None:  # nothing more within the wait, or the end of the input
                break
            block.append(raw)
        yield block


class _LineReader:
    """Lines of a file descriptor, each with its newline (the last one maybe without)."""

    def __init__(self, fd: int):
        self.fd, self.pending, self.lines, self.ended = fd, b"", collections.deque(), False

    def next_line(self, timeout: float | None) -> bytes | None:
        """The next line; None at the end of the input, or when none is complete within `timeout` seconds."""
        while not self.lines and not self.ended:
            if not select.select([self.fd], [], [], timeout)[0]:
                return None
            self._read()
        return self.lines.popleft() if self.lines else None

    def _read(self) -> None:
        data = os.read(self.fd, 1 << 16)
        if not data:
            self.ended = True
            if self.pending:
                self.lines.append(self.pending)
            return
        *complete, self.pending = (self.pending + data).split(b"\n")
        self.lines.extend(line + b"\n" for line in complete)


BLOCK_WAIT_S = 0.05  # a block of stdin is what arrives within this long of its first line
BLOCK_LINES = 2000  # and at most this many lines


def run_translate(tr: Translator, source: IO[bytes], sink: IO[str], opts: DecodeConfig, fmt: LineFormat,
                  warn, memory: Memory | None = None) -> int:
    """Translate `source` to `sink` block by block, flushing after each; returns the number of lines."""
    count = 0
    for block in _stream_blocks(source, BLOCK_WAIT_S, BLOCK_LINES):
        lines = [_decode_line(raw, count + i + 1, warn) for i, raw in enumerate(block)]
        with torch.inference_mode():
            results = translate_block(tr, lines, count + 1, opts, fmt, warn, memory)
        sink.write(format_results(results, count, fmt))
        sink.flush()
        count += len(block)
    return count


def translate_file(tr: Translator, input_path: str | None, output_path: str | None, opts: DecodeConfig,
                   fmt: LineFormat, warn, memory: Memory | None = None) -> int:
    """stdin/stdout by default; an output file is written atomically (complete or not at all)."""
    source = open(input_path, "rb") if input_path else sys.stdin.buffer
    try:
        if output_path is None:
            return run_translate(tr, source, sys.stdout, opts, fmt, warn, memory)
        count = 0

        def write(f):
            nonlocal count
            text = io.StringIO()
            count = run_translate(tr, source, text, opts, fmt, warn, memory)
            f.write(text.getvalue().encode("utf-8"))

        atomic_write(Path(output_path), write)
        return count
    finally:
        if input_path:
            source.close()
