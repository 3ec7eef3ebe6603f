"""The distilled corpus of `mt distill` (output_dir/distilled/): the teachers' translations of the training
sources, their scores, and the pairs kept, each file written so that a killed run resumes where it stopped.

made_by.json records what made the folder (the teachers' files by content, their decoding settings, the corpus
by content); a folder made by anything else is refused, never mixed with, and so are kept pairs filtered with
another `distill.filter_worst` (filter.json), before anything is written. Translations and scores are
appended a block of `distill.batch_lines` lines at a time to a `.partial` file, flushed and synced; a resumed
run keeps the whole blocks there (a torn last block is cut off) and goes on from the next, so its blocks, and
so its lines, are those of a run that was never stopped. A finished file is renamed into place.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import replace
from itertools import islice
from pathlib import Path

import torch
from tqdm import tqdm

from mt.config import Config
from mt.decoding.text_front_end import translate_lines
from mt.decoding.protocol import Translator
from mt.errors import MtError
from mt.atomic_files import atomic_write, atomic_write_text, read_record
from mt.commands.resumable_output import file_digest
from mt.runtime import is_terminal
from mt.decoding.scoring import count_lines, score_pairs

MADE_BY = "made_by.json"
TRANSLATIONS = "translations.txt"  # the teachers' 1-best, line-aligned with data.train_src
SCORES = "scores.txt"  # the teachers' length-normalised score of each (source, translation) pair
KEPT_SRC, KEPT_TGT = "kept.src", "kept.tgt"  # the pairs the student trains on
REPORT = "filter.json"  # how many pairs each rule dropped


def made_by(cfg: Config, tr: Translator) -> dict:
    """What the translations depend on: the teachers by content, their decoding, the source corpus by content."""
    d = tr.cfg.decode
    return {"teachers": [{"path": p, "sha256": file_digest(Path(p))} for p in cfg.distill.teachers],
            "decoding": {"beam_size": cfg.distill.beam_size, "alpha": d.alpha, "max_len_a": d.max_len_a,
                         "max_len_b": d.max_len_b, "batch_lines": cfg.distill.batch_lines},
            "corpus": {"src": cfg.data.train_src, "sha256": file_digest(Path(cfg.data.train_src))}}


RESTART = "pass --restart to start over (the previous run is moved aside), or use another output_dir"


def recorded_state(folder: Path, filter_worst: float) -> dict | None:
    """Before any work or writing: what made `folder` (None when nothing did yet), after checking that its records
    are readable and that its kept pairs, if made, were filtered with this `filter_worst`. A run refused here
    resumes when the settings are set back: nothing of it was touched."""
    record = folder / MADE_BY
    if not record.is_file():
        if folder.exists() and any(folder.iterdir()):
            raise MtError(f"{folder}: holds files but no {MADE_BY}; not mt distill's: remove it or use another "
                          "output_dir")
        return None
    found = read_record(record, f"mt distill cannot tell what made {folder}: {RESTART}")
    if (folder / REPORT).is_file():
        kept = read_record(folder / REPORT, "remove it to filter the pairs again", ("filter_worst",))["filter_worst"]
        if kept != filter_worst:
            raise MtError(f"{folder / REPORT}: the kept pairs were filtered with distill.filter_worst {kept}, not "
                          f"{filter_worst}; set it back to resume, or {RESTART}")
    return found


def claim(folder: Path, found: dict | None, identity: dict) -> None:
    """Make `folder` this identity's (`found`: what `recorded_state` read there), or fail in one line when another
    made it."""
    if found is None:
        atomic_write_text(folder / MADE_BY, json.dumps(identity, indent=1) + "\n")
    elif found != identity:
        differ = [key for key in identity if found.get(key) != identity[key]]
        raise MtError(f"{folder}: made by other {', '.join(differ)} than this config's; never mixed: set them back "
                      f"to resume, or {RESTART}")


def translate_corpus(tr: Translator, cfg: Config, folder: Path, log) -> Path:
    """Step a: the teachers' beam translation of every training source, in order; returns the finished file."""
    opts = replace(tr.cfg.decode, beam_size=cfg.distill.beam_size)
    cut = []

    def translate(lines: list[str]) -> list[str]:
        with torch.inference_mode():
            results = translate_lines(tr, [line.strip() for line in lines], opts, on_truncate=lambda i, n, kept, *rest: cut.append(i))
        return [r[0].text for r in results]

    source = Path(cfg.data.train_src)
    done = _resumable(folder / TRANSLATIONS, _lines(source), count_lines(source), translate, cfg.distill.batch_lines,
                      "translating", log)
    if cut:
        log(f"distill: {len(cut)} sources longer than the teachers' positions were cut in this process")
    return done


def score_translations(tr: Translator, cfg: Config, folder: Path, log) -> Path:
    """The teachers' normalised score of each (source, translation) pair, as `mt score --normalize` gives it."""
    d = tr.cfg.decode

    def score(pairs: list[tuple[str, str]]) -> list[str]:
        sources, targets = zip(*pairs)
        found = score_pairs(tr, list(sources), list(targets), alpha=d.alpha, normalize=True,
                            batch_tokens=d.batch_tokens)
        return [f"{s:.6f}" for s in found]

    pairs = zip(_lines(Path(cfg.data.train_src)), _lines(folder / TRANSLATIONS))
    return _resumable(folder / SCORES, pairs, count_lines(folder / TRANSLATIONS), score, cfg.distill.batch_lines,
                      "scoring", log)


def filter_pairs(cfg: Config, folder: Path, scores: Path | None, log) -> dict:
    """Step b: the pairs kept (`kept.src`, `kept.tgt`) and a report of how many each rule dropped: pairs with an
    empty side, then the `distill.filter_worst` share of the others with the lowest teacher score."""
    sources, translations = Path(cfg.data.train_src), folder / TRANSLATIONS
    if (folder / REPORT).is_file():  # of this filter_worst: recorded_state refused another
        log(f"distill: {folder / REPORT} is complete; filtering skipped")
        return read_record(folder / REPORT, "remove it to filter the pairs again")
    empty = {i for i, (s, t) in enumerate(zip(_lines(sources), _lines(translations))) if not s.strip() or not t}
    worst: set[int] = set()
    if scores is not None:
        ranked = sorted((float(x), i) for i, x in enumerate(_lines(scores)) if i not in empty)
        worst = {i for _, i in ranked[:int(cfg.distill.filter_worst * len(ranked))]}
    dropped = empty | worst
    for name, path in ((KEPT_SRC, sources), (KEPT_TGT, translations)):
        _write_unless_same(folder / name, lambda path=path: (line for i, line in enumerate(_lines(path))
                                                             if i not in dropped))
    total = count_lines(translations)
    report = {"pairs": total, "dropped": {"empty side": len(empty), "worst teacher score": len(worst)},
              "kept": total - len(dropped), "filter_worst": cfg.distill.filter_worst}
    atomic_write_text(folder / REPORT, json.dumps(report, indent=1) + "\n")
    log(f"distill: kept {report['kept']} of {total} pairs; dropped {len(empty)} with an empty side, "
        f"{len(worst)} with the worst teacher scores")
    return report


def _write_unless_same(path: Path, lines) -> None:
    """The lines `lines()` yields, each ended by a newline, written to `path`, unless it holds just them already:
    then it is left untouched, its time too, which the student's prepared data records (a changed time there
    would refuse the resumed training)."""
    def chunks():
        return ((line + "\n").encode("utf-8") for line in lines())

    if path.is_file():
        digest = hashlib.sha256()
        for chunk in chunks():
            digest.update(chunk)
        if digest.hexdigest() == file_digest(path):
            return
    atomic_write(path, lambda f: f.writelines(chunks()))


def _resumable(done: Path, items, total: int, work, block: int, what: str, log) -> Path:
    """`work(block of items) -> output lines` over `items`, appended to `done`.partial a block at a time (flushed
    and synced), resumed after the whole blocks already there; the finished file is renamed to `done`."""
    if done.is_file():
        log(f"distill: {done} is complete; {what} skipped")
        return done
    partial = done.with_name(done.name + ".partial")
    kept = _whole_blocks(partial, block)
    items = islice(items, kept, None)
    bar = tqdm(total=total, initial=kept, unit=" lines", desc=f"distill: {what}", file=sys.stderr,
               disable=not is_terminal(), dynamic_ncols=True)
    with open(partial, "ab") as out, bar:
        while chunk := list(islice(items, block)):
            out.write("".join(line + "\n" for line in work(chunk)).encode("utf-8"))
            out.flush()
            os.fsync(out.fileno())
            bar.update(len(chunk))
    log(f"distill: {what} done: {total} lines ({kept} kept from an earlier run)")
    os.replace(partial, done)
    return done


def _whole_blocks(partial: Path, block: int) -> int:
    """Lines in `partial` cut to whole blocks of `block` lines (the rest removed from the file); 0 if absent."""
    if not partial.is_file():
        return 0
    lines, offset, keep_at = 0, 0, 0
    with open(partial, "rb") as f:
        for raw in f:
            if not raw.endswith(b"\n"):
                break
            lines, offset = lines + 1, offset + len(raw)
            if lines % block == 0:
                keep_at = offset
    os.truncate(partial, keep_at)
    return lines - lines % block


def _lines(path: Path):
    """The lines of a UTF-8 file without their line ends, one at a time."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                yield raw.rstrip(b"\n").rstrip(b"\r").decode("utf-8")
            except UnicodeDecodeError:
                raise MtError(f"{path}:{number}: not valid UTF-8; fix or remove that line") from None
