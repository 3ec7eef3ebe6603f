"""`mt clean`: stream a parallel corpus through the filters of mt/data/clean_filters.py, write the pairs they keep (in
order) and report how many each filter removed.

Memory stays bounded whatever the corpus' size: pairs are read `CHUNK_PAIRS` at a time and written out at once;
the one state that grows is the set of pairs seen (for duplicates), kept as 8-byte hashes in sorted numpy runs
(`SeenHashes`): 76 MiB for 10 million distinct pairs, and a peak of about 200 MiB while the largest runs merge
(measured: docs/cleaning.md). The outputs are written beside their paths and renamed when complete
(mt/atomic_files.py): both or neither.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mt.data.clean_filters import CHEAP, COSTLY, FILTER_NAMES, Pair, active, first_failed
from mt.config import CleanConfig
from mt.errors import DataError
from mt.atomic_files import atomic_outputs
from mt.data.language_id import check_language
from mt.progress import Progress
from mt.data.eflomal_scores import alignment_scores
from mt.data.misalignment import misaligned

CHUNK_PAIRS = 10_000

RawChunks = Iterator[tuple[list[bytes], list[bytes]]]  # lines as bytes, without their line ends
Judged = tuple[list[bytes], list[bytes], list[str | None]]  # a chunk and, per pair, what removes it (None: kept)


@dataclass
class Report:
    """Pairs seen, kept, and removed by each filter (the first that removed a pair counts it)."""

    src_lang: str
    tgt_lang: str
    pairs: int = 0
    kept: int = 0
    removed: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FILTER_NAMES, 0))
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return {"pairs": self.pairs, "kept": self.kept, "removed": self.removed, "src_lang": self.src_lang,
                "tgt_lang": self.tgt_lang, "seconds": round(self.seconds, 3)}

    def table(self) -> str:
        def share(n: int) -> str:
            return f"{100 * n / max(self.pairs, 1):6.2f}%"

        lines = [f"{'':18}{'pairs':>12}  {'share':>7}", f"{'seen':18}{self.pairs:12,}  {share(self.pairs)}",
                 f"{'kept':18}{self.kept:12,}  {share(self.kept)}"]
        lines += [f"{'- ' + name:18}{n:12,}  {share(n)}" for name, n in self.removed.items()]
        return "\n".join(lines)


class SeenHashes:
    """A set of 64-bit hashes as sorted numpy runs of halving sizes (a log-structured merge): 8 bytes a hash,
    lookups by binary search in each of the O(log n) runs."""

    def __init__(self):
        self.runs: list[np.ndarray] = []

    def first_seen(self, hashes: np.ndarray) -> np.ndarray:
        """For each hash, whether it is new: not seen before and not earlier in `hashes`; then all are seen."""
        distinct, first = np.unique(hashes, return_index=True)  # sorted, so the binary searches go in order
        unseen = np.ones(len(distinct), dtype=bool)
        for run in self.runs:
            at = np.minimum(np.searchsorted(run, distinct), len(run) - 1)
            unseen &= run[at] != distinct
        new = np.zeros(len(hashes), dtype=bool)
        new[first[unseen]] = True
        if unseen.any():
            self._add(distinct[unseen])
        return new

    def _add(self, run: np.ndarray) -> None:
        self.runs.append(run)
        while len(self.runs) > 1 and len(self.runs[-2]) <= 2 * len(self.runs[-1]):
            merged = np.concatenate([self.runs[-2], self.runs.pop()])
            merged.sort(kind="stable")  # timsort: two sorted runs merge in one pass
            self.runs[-1] = merged


class Cleaner:
    """The filters `cfg` turns on, for one corpus: `reasons(src, tgt)` names what removes each pair."""

    def __init__(self, cfg: CleanConfig, src_lang: str, tgt_lang: str, log=print):
        self.cfg, self.src_lang, self.tgt_lang, self.log = cfg, src_lang, tgt_lang, log
        self.cheap, self.costly = active(CHEAP, cfg), active(COSTLY, cfg)
        self.seen_pairs, self.seen_sources = SeenHashes(), SeenHashes()
        self.aligning = cfg.misaligned or bool(cfg.word_alignment)
        self.aligned: list[tuple[str, str]] = []  # the last block's kept pairs, context for a short last block
        self.rng = np.random.default_rng(0)  # the shuffled pairs of `misaligned`

    def judged(self, chunks: RawChunks) -> Iterator[Judged]:
        """Each chunk with `reasons` for its pairs; with `misaligned` or `word_alignment` on, chunks are held until
        `align_pairs` of their pairs are kept, and those pairs' alignment is scored together."""
        held, kept = [], 0
        for src_raw, tgt_raw in chunks:
            why = self.reasons(src_raw, tgt_raw)
            held.append((src_raw, tgt_raw, why))
            kept += why.count(None)
            if not self.aligning or kept >= self.cfg.align_pairs:
                self._align(held)
                yield from held
                held, kept = [], 0
        if held:
            self._align(held)
            yield from held

    def reasons(self, src_raw: list[bytes], tgt_raw: list[bytes]) -> list[str | None]:
        """Per pair, the name of the first filter that removes it, or None for a pair kept."""
        pairs = [_decoded(s, t, self.src_lang, self.tgt_lang) for s, t in zip(src_raw, tgt_raw)]
        why = [("invalid_utf8" if p is None else first_failed(p, self.cheap, self.cfg)) for p in pairs]
        self._duplicates(pairs, why)
        for i, pair in enumerate(pairs):
            if why[i] is None:
                why[i] = first_failed(pair, self.costly, self.cfg)
        return why

    def _duplicates(self, pairs: list[Pair | None], why: list[str | None]) -> None:
        todo = [i for i, w in enumerate(why) if w is None]
        for on, seen, key in [(self.cfg.duplicates, self.seen_pairs, lambda p: (p.src, p.tgt)),
                              (self.cfg.duplicate_sources, self.seen_sources, lambda p: p.src)]:
            if on and todo:
                new = seen.first_seen(np.fromiter((hash(key(pairs[i])) for i in todo), np.int64, len(todo)))
                for i in itertools.compress(todo, ~new):
                    why[i] = "duplicate"
                todo = list(itertools.compress(todo, new))

    def _align(self, held: list[Judged]) -> None:
        """Mark the kept pairs of `held` that `misaligned` finds, then those whose alignment score is above
        `word_alignment`. A block shorter than `align_pairs` (the corpus' last) is scored beside the previous
        block's last pairs, so that eflomal's model is fitted to as many pairs as the others'."""
        if not self.aligning:
            return
        kept = [(why, i, src[i].decode("utf-8"), tgt[i].decode("utf-8"))
                for src, tgt, why in held for i, w in enumerate(why) if w is None]
        if not kept:
            return
        pairs = [(s, t) for _, _, s, t in kept]
        missing = self.cfg.align_pairs - len(pairs)
        both = (self.aligned[-missing:] if missing > 0 else []) + pairs
        sources, targets, own = [s for s, _ in both], [t for _, t in both], len(both) - len(pairs)
        if self.cfg.misaligned:
            for (why, i, _, _), out in zip(kept, misaligned(sources, targets, self.cfg, self.rng, self.log)[own:]):
                if out:
                    why[i] = "misaligned"
        if self.cfg.word_alignment:
            fwd, rev = alignment_scores(sources, targets)
            for (why, i, _, _), score in zip(kept, np.maximum(fwd, rev)[own:]):
                if why[i] is None and score > self.cfg.word_alignment:
                    why[i] = "word_alignment"
        self.aligned = pairs[-self.cfg.align_pairs:]


def _decoded(src: bytes, tgt: bytes, src_lang: str, tgt_lang: str) -> Pair | None:
    try:
        return Pair(src.decode("utf-8"), tgt.decode("utf-8"), src_lang, tgt_lang)
    except UnicodeDecodeError:
        return None


def clean_corpus(chunks: RawChunks, out_src: Path, out_tgt: Path, cfg: CleanConfig, src_lang: str,
                 tgt_lang: str, *, rejected: Path | None = None, report_path: Path | None = None, log=print,
                 command: str = "clean") -> Report:
    """Write the pairs of `chunks` that every filter keeps to out_src/out_tgt (with `rejected`, one line per pair
    removed: line number, filter, source, target, tab-separated; with `report_path`, the report as JSON), all of
    them or none; return the report."""
    cleaner, report, start = Cleaner(cfg, src_lang, tgt_lang, log), Report(src_lang, tgt_lang), time.perf_counter()
    extra = [path for path in (rejected, report_path) if path is not None]
    with atomic_outputs([out_src, out_tgt, *extra]) as files, Progress(command, "cleaned", None, log) as progress:
        kept_files, rejected_file = files[:2], files[2] if rejected is not None else None
        for src_raw, tgt_raw, why in cleaner.judged(chunks):
            _write(kept_files, rejected_file, src_raw, tgt_raw, why, report.pairs + 1)
            for reason in why:
                if reason is None:
                    report.kept += 1
                else:
                    report.removed[reason] += 1
            report.pairs += len(why)
            progress.update(len(why))
        report.seconds = time.perf_counter() - start
        if report_path is not None:
            files[-1].write(report_json(report).encode("utf-8"))
    return report


def _write(kept_files, rejected_file, src_raw: list[bytes], tgt_raw: list[bytes], why: list[str | None],
           first_line: int) -> None:
    kept = [i for i, w in enumerate(why) if w is None]
    kept_files[0].write(b"".join(src_raw[i] + b"\n" for i in kept))
    kept_files[1].write(b"".join(tgt_raw[i] + b"\n" for i in kept))
    if rejected_file is not None:
        rejected_file.write("".join(
            f"{first_line + i}\t{w}\t{src_raw[i].decode('utf-8', 'replace')}\t{tgt_raw[i].decode('utf-8', 'replace')}\n"
            for i, w in enumerate(why) if w is not None).encode("utf-8"))


# ---------------------------------------------------------------- files and languages


def file_chunks(src_path: Path, tgt_path: Path) -> RawChunks:
    """Aligned chunks of two line-parallel files, as bytes; a file shorter than the other is an error naming
    both line counts."""
    try:
        with open(src_path, "rb") as src, open(tgt_path, "rb") as tgt:
            lines = 0
            while True:
                s, t = list(itertools.islice(src, CHUNK_PAIRS)), list(itertools.islice(tgt, CHUNK_PAIRS))
                if len(s) != len(t):
                    n_src, n_tgt = lines + len(s) + sum(1 for _ in src), lines + len(t) + sum(1 for _ in tgt)
                    raise DataError(f"parallel files differ in length: {src_path} has {n_src} lines, {tgt_path} "
                                    f"has {n_tgt}")
                if not s:
                    return
                lines += len(s)
                yield [_bare(line) for line in s], [_bare(line) for line in t]
    except FileNotFoundError as e:
        raise DataError(f"{e.filename}: no such file") from None


def _bare(line: bytes) -> bytes:
    """A line without its line end (\\n or \\r\\n)."""
    return line.rstrip(b"\n").rstrip(b"\r") if line.endswith(b"\n") else line.rstrip(b"\r")


def text_chunks(chunks) -> RawChunks:
    """Chunks of decoded lines (a `datasets` split) as the bytes `clean_corpus` reads."""
    for src, tgt in chunks:
        yield [s.replace("\n", " ").encode("utf-8") for s in src], [t.replace("\n", " ").encode("utf-8") for t in tgt]


def corpus_languages(src_path: Path, tgt_path: Path, src_lang: str | None, tgt_lang: str | None,
                     cfg: CleanConfig) -> tuple[str, str]:
    """The two sides' languages: given, or the files' extensions (train.de: de, as Moses and fairseq name
    corpora); checked against the language identification model when `clean.language_id` is on."""
    langs = []
    for path, lang, option in [(src_path, src_lang, "--src-lang"), (tgt_path, tgt_lang, "--tgt-lang")]:
        lang = lang or Path(path).suffix.lstrip(".")
        if not lang:
            raise DataError(f"{path}: no extension to take its language from; give {option}")
        if cfg.language_id:
            check_language(lang, f"{path} ({option} or the file's extension)")
        langs.append(lang)
    return langs[0], langs[1]


def output_paths(prefix: str, src_path: Path, tgt_path: Path, src_lang: str | None = None,
                 tgt_lang: str | None = None) -> tuple[Path, Path]:
    """PREFIX.SRC_EXT and PREFIX.TGT_EXT (`-o cleaned` with train.de/train.en: cleaned.de/cleaned.en); an input
    without an extension (a pipe: /dev/stdin, <(zcat train.de.gz)) is named by its language, --src-lang or
    --tgt-lang."""
    src_ext, tgt_ext = (Path(path).suffix or (f".{lang}" if lang else "")
                        for path, lang in ((src_path, src_lang), (tgt_path, tgt_lang)))
    if not src_ext or not tgt_ext or src_ext == tgt_ext:
        raise DataError(f"{src_path}, {tgt_path}: the outputs are named PREFIX plus each input's extension (or, "
                        "for an input without one, its --src-lang or --tgt-lang), so the inputs need two different "
                        "extensions (train.de, train.en)")
    return Path(prefix + src_ext), Path(prefix + tgt_ext)  # checked against the inputs by mt/path_checks.py


def report_json(report: Report) -> str:
    return json.dumps(report.as_dict(), indent=1) + "\n"

