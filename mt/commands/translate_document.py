"""`mt translate` of a document (`--input-format`, or -i's extension): text, HTML, subtitles, a Word file or a
localization file in, the same format out, its sentences translated in batches and put back with their markup
(mt/documents/)."""

from __future__ import annotations

import sys
from pathlib import Path

from mt.config import DecodeConfig
from mt.decoding.lines import LineText
from mt.decoding.text_front_end import translate_lines, translate_whole_lines
from mt.decoding.protocol import Translator
from mt.documents.document import DocumentTranslation
from mt.documents.formats import EXTENSIONS, FORMATS, MAX_BYTES, read_document
from mt.documents.localization import MessageLines
from mt.documents.messages import Localization
from mt.documents.model_tags import tags_to_model
from mt.errors import MtError
from mt.atomic_files import atomic_write
from mt.progress import Progress

PLACEHOLDER_LINES = "lines with placeholders"  # `mt translate --placeholders`: each line a message (messages.py)


def document_format(input: str | None, given: str, placeholders: bool = False) -> str | None:
    """The document format to read, or None for lines: `given`, or with auto -i's extension; with `placeholders`,
    lines whose placeholders are kept (PLACEHOLDER_LINES)."""
    found = _format(input, given)
    if placeholders and found is not None:
        raise MtError(f"--placeholders: for line input; the input is read as {found}, whose markup is kept anyway")
    return PLACEHOLDER_LINES if placeholders else found


def _format(input: str | None, given: str) -> str | None:
    if given == "lines" or (given == "auto" and input is None):
        return None
    if given == "auto":
        return EXTENSIONS.get(Path(input).suffix.lower())
    if given not in FORMATS:
        raise MtError(f"--input-format: one of auto, lines, {', '.join(FORMATS)}, got '{given}'")
    return given


def translate_document(tr: Translator, input: str | None, output: str | None, opts: DecodeConfig, fmt: str,
                       warn, retranslate: bool = False, memory=None, quiet: bool = False) -> None:
    name = Path(input) if input else Path("<stdin>")
    data = _read(input)
    with tags_to_model(tr.carries_tags):
        document = MessageLines(data, name) if fmt == PLACEHOLDER_LINES else \
            read_document(data, fmt, name, Localization(target_language(tr), retranslate, memory))

    def split(i: int, length: int, room: int, pieces: int) -> None:
        warn(f"warning: {name}: sentence {i + 1}: {length} tokens, more than the model learned ({room}): "
             f"translated in {pieces} pieces, joined")

    translation = DocumentTranslation(document)
    with Progress("translate", "translated", len(document.sentences), warn, "sentences",
                  quiet=quiet or input is None) as progress:
        for part in translation.parts:  # a part decodes as it would alone, beside the others
            at = len(translation.found)
            lines = [LineText(sentence.strip(), at + i) for i, sentence in enumerate(part)]
            found = translate_whole_lines(tr, lines, opts, alignment=True,
                                          on_split=lambda i, *rest, at=at: split(at + i, *rest))
            translation.add([(per[0].text, per[0].alignment) for per in found])
            progress.update(len(part))
    words = translation.words()  # the words of lost inline elements, each translated alone
    alone = [per[0].text for per in translate_lines(tr, [LineText(w, i) for i, w in enumerate(words)], opts)] \
        if words else []
    rendered = translation.rendered(alone)
    if output is None:
        sys.stdout.buffer.write(rendered.data)
    else:
        atomic_write(Path(output), lambda f: f.write(rendered.data))
    for note in rendered.notes:
        warn(f"note: {note}")


def target_language(tr: Translator) -> str | None:
    """The language a translator writes, where its model names it (--target-lang, or its one direction)."""
    if tr.direction is not None:
        return tr.direction[1]
    return tr.cfg.data.tgt_lang or next((c.tgt_lang for c in tr.cfg.data.train if c.tgt_lang), None)


def _read(input: str | None) -> bytes:
    if input is None:
        data = sys.stdin.buffer.read(MAX_BYTES + 1)
    else:
        with open(input, "rb") as f:
            data = f.read(MAX_BYTES + 1)  # enough for read_document to refuse a larger one
    return data


def check_output_format(output: str | None, input: str | None, given: str) -> None:
    """Before any work: an -o whose extension names another format than the document read is refused (a Word
    document written as out.html): a document is written in its own format."""
    fmt = document_format(input, given)
    named = EXTENSIONS.get(Path(output).suffix.lower()) if output else None
    if fmt is None or named is None or named == fmt:
        return
    own = [ext for ext, kind in EXTENSIONS.items() if kind == fmt]
    if input and Path(input).suffix.lower() in own:
        own = [Path(input).suffix]
    raise MtError(f"-o {output}: {Path(output).suffix} names {named}, but the document is {fmt}, written as {fmt}"
                  + (f"; give -o a name ending {own[0]}" if own else ""))
