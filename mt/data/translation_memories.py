"""Files of human translations, as training corpora and as a translation memory consulted before the model.

A file's format is its extension's unless a `format` is given (`FORMATS`): two line-aligned text files (`text`),
TMX (mt/data/tmx.py), a bilingual catalogue (PO, XLIFF, Qt .ts) or two resource files of one app paired by key
(Android strings.xml, JSON, ARB, .properties: mt/data/catalogue_pairs.py). A bilingual file is read in the
direction asked for: a German PO of English msgids serves en->de as it is and de->en turned round.

As a corpus, a pair from any of these but text is presented to the model as `mt translate -i` presents a string of
such a file: its placeholders and inline tags taken out (mt/documents/placeholders.py), its sentences joined by a
space. As a memory (`Memory`), a segment is looked up exactly after `normalized` (Unicode NFC, runs of whitespace
as one space, none at either end; case, punctuation and placeholders as they are), in a dict built once.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mt.data import catalogue_pairs
from mt.data.text_files import parallel_chunks
from mt.data.tmx import INLINE_CODES, TmxPairs, matches
from mt.documents.inline_markup import sentence_spans
from mt.documents.placeholders import protected
from mt.errors import DataError

FORMATS = ("text", "tmx", "po", "xliff", "ts", "android", "json", "arb", "properties")
BILINGUAL = ("tmx", "po", "xliff", "ts")  # one file holds both sides
EXTENSIONS = {".tmx": "tmx", ".po": "po", ".xlf": "xliff", ".xliff": "xliff", ".ts": "ts", ".xml": "android",
              ".json": "json", ".arb": "arb", ".properties": "properties"}
CHUNK_PAIRS = 100_000
CODES = re.compile(r"</?g\w+>|<x\w+/>")  # the tags mt/data/tmx.py writes for inline codes


def file_format(path: str | Path, given: str | None = None, where: str = "format") -> str:
    """The format of a corpus or memory file: `given`, else its extension's (`.tmx.gz` is TMX), else text."""
    if given is not None:
        if given not in FORMATS:
            raise DataError(f"{where}: '{given}' is not one of {', '.join(FORMATS)}")
        return given
    name = Path(path).name.lower()
    suffix = Path(name[:-3]).suffix if name.endswith(".gz") else Path(name).suffix
    return EXTENSIONS.get(suffix, "text")


def normalized(text: str) -> str:
    """A segment as the memory compares it."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def presented(text: str) -> str:
    """A string of a localization file as `mt translate -i` gives it to the model: without its placeholders."""
    return " ".join(s for s, _, _ in sentence_spans(protected(text).unit.text))


@dataclass
class PairFile:
    """One corpus or memory of human translations: where it is, its format and how to read it."""
    src: str
    tgt: str | None
    fmt: str
    src_lang: str | None = None
    tgt_lang: str | None = None
    fuzzy: bool = False  # keep the entries a catalogue marks fuzzy or to review
    inline_codes: str = "placeholders"  # or drop: TMX's and XLIFF's inline codes
    skipped: Counter = field(default_factory=Counter)
    taken: int = 0

    def __post_init__(self):
        if self.inline_codes not in INLINE_CODES:
            raise DataError(f"{self.src}: inline_codes '{self.inline_codes}' is not one of {', '.join(INLINE_CODES)}")
        if self.fmt in BILINGUAL and self.tgt not in (None, self.src):
            raise DataError(f"{self.src}: a {self.fmt} file holds both sides; give no second file (tgt)")
        if self.fmt not in BILINGUAL and not self.tgt:
            raise DataError(f"{self.src}: a {self.fmt} file holds one side; give the other file too (tgt)")

    def pairs(self) -> Iterator[tuple[str, str]]:
        """The (source, target) pairs in the direction asked for, as the file holds them; `taken` and `skipped`
        say what came of its entries when they have all been read."""
        self.skipped, self.taken = Counter(), 0
        if self.fmt == "tmx":
            units = TmxPairs(self.src, self.src_lang, self.tgt_lang, self.inline_codes)
            for pair in units:
                self.taken += 1
                yield pair
            self.skipped = units.skipped
            return
        if self.fmt == "text":
            for src, tgt in parallel_chunks(self.src, self.tgt):
                self.taken += len(src)
                yield from zip(src, tgt)
            return
        found = self._catalogue()
        self.skipped = +found.skipped
        self.taken = len(found.pairs)
        yield from (found.pairs if not self._turned(found.languages) else ((t, s) for s, t in found.pairs))

    def _catalogue(self) -> catalogue_pairs.Pairs:
        path = Path(self.src)
        if self.fmt == "po":
            return catalogue_pairs.po_pairs(path, self.fuzzy)
        if self.fmt == "xliff":
            return catalogue_pairs.xliff_pairs(path, self.fuzzy, self.inline_codes)
        if self.fmt == "ts":
            return catalogue_pairs.ts_pairs(path, self.fuzzy)
        return catalogue_pairs.keyed_pairs(path, Path(self.tgt), self.fmt)

    def _turned(self, languages: tuple[str | None, str | None]) -> bool:
        """Whether the file translates the other way: its translations are of the source language asked for, or
        its sources of the target language."""
        source, target = languages
        if self.src_lang and target and matches(target, self.src_lang.split("_")[0]):
            return not (source and matches(source, self.src_lang))
        return bool(self.tgt_lang and source and matches(source, self.tgt_lang.split("_")[0]))

    def chunks(self, shown=presented) -> Iterator[tuple[list[str], list[str]]]:
        """The pairs as the model is shown them (`presented`; `mt clean`: as they are), `CHUNK_PAIRS` at a time."""
        src, tgt = [], []
        for s, t in self.pairs():
            src.append(shown(s))
            tgt.append(shown(t))
            if len(src) == CHUNK_PAIRS:
                yield src, tgt
                src, tgt = [], []
        if src or not self.taken:
            yield src, tgt

    def report(self) -> str:
        """What reading took and skipped, for `mt prepare`'s log."""
        skipped = ", ".join(f"{n:,} {why}" for why, n in sorted(self.skipped.items()) if n)
        return f"{self.src} ({self.fmt}): took {self.taken:,} pairs" + (f"; skipped {skipped}" if skipped else "")


class Memory:
    """Human translations looked up before the model: an exact match of a `normalized` source gives its
    translation (the first a file gives, files in the order named)."""

    def __init__(self, files: list[PairFile]):
        self.translations: dict[str, str] = {}
        self.files = files
        for memory in files:
            for source, target in memory.pairs():
                self.translations.setdefault(normalized(source), target)
                if CODES.search(source):  # TMX's and XLIFF's codes: a plain line matches the text without them
                    self.translations.setdefault(normalized(CODES.sub("", source)), normalized(CODES.sub("", target)))

    def __len__(self) -> int:
        return len(self.translations)

    def get(self, source: str) -> str | None:
        return self.translations.get(normalized(source)) if self.translations else None


def memory_files(specs: list[str], src_lang: str | None, tgt_lang: str | None) -> list[PairFile]:
    """`--memory` values, `[SRC_LANG:TGT_LANG=]FILE[,FILE]`: a file of both sides (TMX, PO, XLIFF, .ts), or two
    (text files, or resource files of one app), in the languages named (else the model's direction's)."""
    files = []
    for spec in specs:
        langs, _, paths = spec.rpartition("=") if ":" in spec.split("=")[0] and "=" in spec else ("", "", spec)
        if langs:
            src_lang, _, tgt_lang = langs.partition(":")
        src, _, tgt = paths.partition(",")
        for path in (src, tgt):
            if path and not Path(path).is_file():
                raise DataError(f"--memory {spec}: {path}: no such file")
        files.append(PairFile(src, tgt or None, file_format(src), src_lang, tgt_lang))
    return files


def read_memory(specs: list[str] | None, src_lang: str | None, tgt_lang: str | None) -> Memory | None:
    """The memory of `--memory` values; None without any."""
    return Memory(memory_files(specs, src_lang, tgt_lang)) if specs else None
