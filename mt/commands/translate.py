"""`mt translate`: read lines (streaming from stdin), write exactly one result per line, through mt/decoding/lines.py.

Output formats: 1-best `hypothesis`; with --scores `score \\t hypothesis`; with --nbest K, K lines per input
`index \\t score \\t hypothesis` (index counts input lines from 0); with --output-format json one object per
input line, `{"line": index, "hypotheses": [{"text": ..., "score": ...}, ...]}`. With --alignment each result
ends with `\\t` and its word alignment (`"alignment"` in json). With --prefix input lines are `source \\t prefix`; with --constraints `source \\t term \\t term ...`.
"""

from __future__ import annotations

import collections
import dataclasses
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
from mt.atomic_files import atomic_write, is_special
from mt.commands.resumable_output import ResumableOutput, file_digest
from mt.commands.shards import Shard, Span, join_parts, part_name, shard_span, torchrun_shard, wait_for_all_ranks
from mt.errors import MtError
from mt.data.translation_memories import Memory
from mt.decoding.scoring import count_lines
from mt.progress import Progress


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


def _stream_blocks(stream: IO[bytes], wait_s: float | None, max_lines: int):
    """Yield lists of raw lines: whatever arrives within `wait_s` of the first line of a block (None: `max_lines`
    lines, as from a file, whose blocks must not depend on how fast it is read).

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
        block, deadline = [first], time.monotonic() + (wait_s or 0)
        while len(block) < max_lines:
            raw = reader.next_line(timeout=None if wait_s is None else max(deadline - time.monotonic(), 0))
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
BLOCK_LINES = 2000  # and at most this many lines: with -o FILE, a durable chunk


def run_translate(tr: Translator, source: IO[bytes], sink, opts: DecodeConfig, fmt: LineFormat, warn,
                  memory: Memory | None = None, first_line: int = 0, block_lines: int = BLOCK_LINES,
                  progress: Progress | None = None, wait_s: float | None = BLOCK_WAIT_S, limit: int | None = None
                  ) -> int:
    """Translate `source` block by block (`limit` lines at most), each block's results given to `sink(text, lines,
    raw input)` (or written to a text stream and flushed); returns the number of lines, counting from
    `first_line`."""
    count = first_line
    for block in _stream_blocks(source, wait_s, block_lines) if limit is None or limit > 0 else ():
        if limit is not None:
            block = block[:limit - (count - first_line)]
        lines = [_decode_line(raw, count + i + 1, warn) for i, raw in enumerate(block)]
        with torch.inference_mode():
            results = translate_block(tr, lines, count + 1, opts, fmt, warn, memory)
        text = format_results(results, count, fmt)
        if callable(sink):
            sink(text, len(block), b"".join(block))
        else:
            sink.write(text)
            sink.flush()
        count += len(block)
        if progress is not None:
            progress.update(len(block))
        if limit is not None and count - first_line >= limit:
            break
    return count


def made_by(checkpoints: list[Path], opts: DecodeConfig, fmt: LineFormat, **options) -> dict:
    """What a resumed run's results depend on besides its input: the model files by content, the decoding and line
    options."""
    return {"model": [{"path": str(c), "sha256": file_digest(Path(c))} for c in checkpoints],
            "options": json.loads(json.dumps({"decode": dataclasses.asdict(opts), "lines": dataclasses.asdict(fmt),
                                              **options}, default=str))}


def translate_file(tr: Translator, input_path: str | None, output_path: str | None, opts: DecodeConfig,
                   fmt: LineFormat, warn, memory: Memory | None = None, identity=dict,
                   restart: bool = False, quiet: bool = False, block_lines: int = BLOCK_LINES,
                   shard: Shard | None = None) -> int:
    """stdin/stdout by default. A file input to an output file is written in durable chunks and resumed by the same
    command (mt/commands/resumable_output.py), and may be shared among processes (`shard`, or torchrun's ranks:
    mt/commands/shards.py); any other output file is written atomically (complete or not at all). A file input
    shows its progress on stderr. `identity()`: what the results depend on (`made_by`)."""
    total = count_lines(input_path) if input_path and not is_special(Path(input_path)) else None
    resumable = output_path is not None and total is not None and not is_special(Path(output_path))
    ranked = torchrun_shard() if shard is None else None
    if (shard or ranked) and not resumable:
        raise MtError(f"{'--shard' if shard else 'torchrun'}: needs -i FILE and -o FILE (each process translates "
                      "its own part of a file)")
    if resumable:
        return _translate_resumably(tr, input_path, output_path, opts, fmt, warn, memory, identity(), restart, quiet,
                                    block_lines, shard or ranked, joined=ranked is not None, total=total)
    source = open(input_path, "rb") if input_path else sys.stdin.buffer
    wait = None if total is not None else BLOCK_WAIT_S
    try:
        with Progress("translate", "translated", total, warn, "lines", quiet=quiet or total is None) as progress:
            if output_path is None:
                return run_translate(tr, source, sys.stdout, opts, fmt, warn, memory, 0, block_lines, progress, wait)
            count = 0

            def write(f):
                nonlocal count
                text = io.StringIO()
                count = run_translate(tr, source, text, opts, fmt, warn, memory, 0, block_lines, progress, wait)
                f.write(text.getvalue().encode("utf-8"))

            atomic_write(Path(output_path), write)
            return count
    finally:
        if input_path:
            source.close()


def _translate_resumably(tr: Translator, input_path: str, output_path: str, opts: DecodeConfig, fmt: LineFormat,
                         warn, memory: Memory | None, made: dict, restart: bool, quiet: bool, block_lines: int,
                         shard: Shard | None, joined: bool, total: int) -> int:
    """-i FILE to -o FILE in durable chunks, or this shard's chunks of it; torchrun's ranks (`joined`) each write
    a part beside -o, and rank 0 joins them once all are done."""
    span = shard_span(input_path, shard, block_lines) if shard else Span(0, 0, total)
    target = part_name(output_path, shard) if joined else output_path
    out = ResumableOutput(target, input_path, {**made, "shard": str(shard) if shard else None}, restart,
                          span.start_byte)
    done, skip = out.start()
    with open(input_path, "rb") as source, \
            Progress("translate", "translated", span.lines, warn, "lines", done, quiet) as progress:
        source.seek(span.start_byte + skip)
        count = run_translate(tr, source, out.add, opts, fmt, warn, memory, span.first_line + done, block_lines,
                              progress, None, limit=span.lines - done)
    if not joined:
        out.finish()
        return count
    wait_for_all_ranks()  # every part complete
    if shard.index == 0:
        parts = [ResumableOutput(part_name(output_path, Shard(i, shard.count)), input_path, made)
                 for i in range(shard.count)]
        join_parts(output_path, [part.partial for part in parts])
        for part in parts:
            part.remove()
    return count
