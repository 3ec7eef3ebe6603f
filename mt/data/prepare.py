"""`mt prepare`: train sentencepiece and encode the corpus once into `output_dir/data/`, in bounded memory.

The training text is read twice, in chunks, and never held whole: the first pass draws the lines sentencepiece
trains on (a uniform sample of `tokenizer.max_sentences`, see `Reservoir`), the second encodes every pair
straight into the files the trainer maps (mt/data/corpus.py). The finished folder holds

    train.{src,tgt}.{bin,idx}, dev.{src,tgt}.{bin,idx}   the encoded corpus (layout in mt/data/corpus.py)
    src.model, tgt.model    the sentencepiece models (one, src.model, when both sides use the same)
    dev.json                the raw dev text, for BLEU
    clean.json              with data.clean, what `mt clean` removed from each training corpus (mt/data/clean.py)
    corpus.json             pair counts, token dtypes, statistics
    prepared.json           the config it was made from; written last, so it marks the folder complete

It is built in `data.partial/` and renamed to `data/` when complete: an interrupted run leaves nothing a later
run mistakes for a good cache.
"""

from __future__ import annotations

import array
import dataclasses
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import sentencepiece as spm

from mt.atomic_files import atomic_write_text, read_record
from mt.checkpoint import init_source
from mt.data.clean import clean_corpus, corpus_languages, file_chunks, text_chunks
from mt.config import Config, config_to_dict, data_identity
from mt.data.inline_tags import TagInjection, tag_symbols
from mt.data.corpus import Corpus, CorpusWriter, corpus_of_ids, map_corpus, prefixed, token_dtype, write_corpus
from mt.data.languages import source_prefix, target_prefix, tokens_of
from mt.data.parallel_text import TrainingCorpus, dev_sets, source_files, training_corpora
from mt.data.text_files import parallel_chunks
from mt.errors import DataError, MtError
from mt.progress import Progress
from mt.data.tokenizer import Tokenizer, train_tokenizer

FORMAT = "mt-prepared-2"  # 1 was one torch file, corpus.pt, loaded whole
STAMP = "prepared.json"
AGAIN = "run the same command with --restart to prepare the data again"  # a damaged record's remedy


@dataclass
class PreparedData:
    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer
    train: Corpus
    dev: Corpus | None
    dev_src: list[str]  # raw dev text, for BLEU
    dev_ref: list[str]
    stats: dict
    train_parts: list[Corpus]  # the training corpora of data.train, in order, as parts of `train` (one: `train`)
    dev_directions: list[tuple[str | None, str | None, int]]  # the dev sets in order: languages, lines (data.dev)


def data_dir(cfg: Config) -> Path:
    return Path(cfg.output_dir) / "data"


SOURCES = "sources"  # the stamp's record of the files the cache was made from


def _stamp(cfg: Config) -> dict:
    """What the cache depends on: the config's data settings, and the size and modification time of each file
    they name; a different stamp means the cache is not this config's, or not of these files."""
    files = {key: Path(path) for key, path in source_files(cfg.data).items()}
    return {**data_identity(cfg), SOURCES: {key: [str(path), *_fingerprint(path)] for key, path in files.items()}}


def _fingerprint(path: Path) -> list[int]:
    try:
        info = path.stat()
    except OSError:  # missing: reading it will say so
        return []
    return [info.st_size, info.st_mtime_ns]


def _check_stamp(cfg: Config, folder: Path) -> None:
    """Fail in one line if the cache in `folder` was made with other data settings or from files changed since
    (a stamp written before files were recorded has no SOURCES: its files are not checked)."""
    old, new = read_record(folder / STAMP, AGAIN), _stamp(cfg)
    old_sources, new_sources = old.pop(SOURCES, None), new.pop(SOURCES)
    if old != new:
        changed = [f"{sec}.{k}" for sec in new for k in {*old.get(sec, {}), *new[sec]}
                   if old.get(sec, {}).get(k) != new[sec].get(k)]
        raise DataError(f"{cfg.output_dir}: prepared with a different config ({', '.join(changed)} changed); "
                        "use another output_dir or run with --restart")
    for key, now in (new_sources.items() if old_sources is not None else ()):
        then = old_sources.get(key)
        if then != now:
            raise DataError(f"{key} {now[0]}: changed since {folder} was prepared from it ({_change(then, now)}); "
                            "run with --restart to prepare it again, or use another output_dir")


def _change(then: list | None, now: list) -> str:
    """How a recorded [path, size, mtime] differs from the file now."""
    if len(now) < 3:
        return "now missing"
    if not then or then[0] != now[0]:
        return "another file"
    if len(then) < 3:
        return "missing then"
    return f"{then[1]:,} bytes then, {now[1]:,} now" if then[1] != now[1] else "modified, same size"


def prepare_data(cfg: Config, log=print, force: bool = False) -> PreparedData:
    """Load the cache in `output_dir/data/`, or build it: train sentencepiece, encode train and dev."""
    folder = data_dir(cfg)
    if (folder / STAMP).exists() and not force:
        _check_stamp(cfg, folder)
        if _format(folder) == FORMAT:
            return load_prepared(cfg)
        log(f"prepare: {folder} was written by an older mt; encoding the corpus again")
    if folder.exists() and not _written_by_mt(folder):
        raise DataError(f"{folder}: exists and was not written by mt prepare; move it away or use another "
                        "output_dir")
    building = folder.with_name(folder.name + ".partial")
    shutil.rmtree(building, ignore_errors=True)  # left by an interrupted run (output_dir is mt's: folder_lock)
    try:
        building.mkdir(parents=True)
        _build(cfg, building, log)
        atomic_write_text(building / STAMP, json.dumps(_stamp(cfg), indent=1))
        shutil.rmtree(folder, ignore_errors=True)
        building.rename(folder)
    except OSError as e:
        raise DataError(f"{building}: cannot write the prepared data ({e.strerror})") from None
    finally:
        shutil.rmtree(building, ignore_errors=True)  # nothing half-written stays behind
    return load_prepared(cfg)


def _written_by_mt(folder: Path) -> bool:
    """A prepared-data folder carries mt's files: a finished one its stamp, an older one corpus.json or
    corpus.pt (the first format); anything else is someone else's folder."""
    return folder.is_dir() and any((folder / name).exists() for name in (STAMP, "corpus.json", "corpus.pt"))


def _format(folder: Path) -> str | None:
    meta = folder / "corpus.json"
    return read_record(meta, AGAIN).get("format") if meta.exists() else None


def load_prepared(cfg: Config) -> PreparedData:
    """The complete cache of `prepare_data`, its token arrays memory-mapped."""
    folder = data_dir(cfg)
    if not (folder / STAMP).exists() or _format(folder) != FORMAT:
        raise DataError(f"{folder}: no prepared data; run `mt prepare` first")
    needed = ["corpus.json", "dev.json", "src.model", *([] if cfg.tokenizer.joint else ["tgt.model"])]
    missing = [name for name in needed if not (folder / name).is_file()]
    if missing:
        raise DataError(f"{folder / missing[0]}: missing, the prepared data is damaged; run the same command "
                        "with --restart to prepare it again")
    try:
        meta = json.loads((folder / "corpus.json").read_text())
        src_tok = Tokenizer((folder / "src.model").read_bytes())
        tgt_path = folder / "tgt.model"  # also with tokenizer.joint, where an imported model has two (vocab_file)
        tgt_tok = Tokenizer(tgt_path.read_bytes()) if tgt_path.is_file() else src_tok
        dev_text = json.loads((folder / "dev.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RuntimeError) as e:  # unreadable, malformed JSON, a broken sentencepiece model
        raise DataError(f"{folder}: the prepared data is damaged ({str(e).splitlines()[0] if str(e) else e!r}); "
                        "run the same command with --restart to prepare it again") from None
    dev = map_corpus(folder, "dev", meta["dev"]) if meta["dev"] else None
    train = map_corpus(folder, "train", meta["train"])
    bounds = np.cumsum([0, *meta["train"].get("parts", [len(train)])]).tolist()
    parts = [train.part(start, stop) for start, stop in zip(bounds, bounds[1:])]
    directions = [tuple(d) for d in dev_text.get("directions", [[None, None, len(dev_text["src"])]])]
    return PreparedData(src_tok, tgt_tok, train, dev, dev_text["src"], dev_text["ref"], meta["stats"], parts,
                        directions)


def _build(cfg: Config, folder: Path, log) -> None:
    devs = dev_sets(cfg.data)  # small; first, so a bad file fails fast
    corpora = _cleaned_corpora(cfg, training_corpora(cfg.data), folder, log) if cfg.data.clean else \
        training_corpora(cfg.data)
    if cfg.tokenizer.vocab_file and not cfg.train.init_from:
        raise DataError(f"tokenizer.vocab_file {cfg.tokenizer.vocab_file}: comes with an imported checkpoint "
                        "(mt import); set train.init_from to it")
    src_tok, tgt_tok, pairs = _checkpoint_tokenizers(cfg, corpora, log) if cfg.train.init_from else \
        _train_tokenizers(cfg, corpora, log)
    (folder / "src.model").write_bytes(src_tok.model_proto)
    if not cfg.tokenizer.joint or tgt_tok.model_proto != src_tok.model_proto:
        (folder / "tgt.model").write_bytes(tgt_tok.model_proto)
    counts, parts = {"empty": 0, "too_long": 0}, []
    with CorpusWriter(folder, "train", token_dtype(len(src_tok)), token_dtype(len(tgt_tok))) as writer, \
            Progress("prepare", "encoded", pairs, log) as progress:
        for i, corpus in enumerate(corpora):
            src_prefix, tgt_prefix = _corpus_prefixes(cfg, src_tok, tgt_tok, corpus, i)
            injection = TagInjection(cfg.data.inline_tags, cfg.train.seed, i) if cfg.data.inline_tags else None
            before = writer.pairs
            for src, tgt in corpus.chunks():
                if injection is not None:
                    src, tgt = injection.chunk(src, tgt)
                src_ids, tgt_ids = prefixed(src_prefix, src_tok.encode(src)), prefixed(tgt_prefix, tgt_tok.encode(tgt))
                for key, n in writer.add(src_ids, tgt_ids, cfg.data.max_len).items():
                    counts[key] += n
                progress.update(len(src))
            parts.append(writer.pairs - before)
            if corpus.human is not None:
                log(f"prepare: data.train[{i}] {corpus.human.report()}")
        train_meta = {**writer.close(), "parts": parts}
    if train_meta["pairs"] == 0:
        raise DataError(f"no usable training pairs: {counts['empty']} empty, {counts['too_long']} over "
                        f"data.max_len={cfg.data.max_len}")
    for i, (corpus, kept) in enumerate(zip(corpora, parts)):
        if kept == 0:
            raise DataError(f"data.train[{i}] {corpus.name}: no usable training pairs")
    dev_src = [line for *_, src, _ in devs for line in src]
    dev_ref = [line for *_, ref in devs for line in ref]
    dev_meta = write_corpus(folder, "dev", _dev_corpus(cfg, devs, src_tok, tgt_tok)) if devs else None
    directions = [[src_lang, tgt_lang, len(src)] for src_lang, tgt_lang, src, _ in devs]
    (folder / "dev.json").write_text(json.dumps({"src": dev_src, "ref": dev_ref, "directions": directions},
                                                ensure_ascii=False), encoding="utf-8")
    stats = {"train_pairs": pairs, "kept_pairs": train_meta["pairs"], "skipped_empty": counts["empty"],
             "skipped_too_long": counts["too_long"], "src_vocab": len(src_tok), "tgt_vocab": len(tgt_tok),
             "dev_pairs": len(dev_src)}
    shutil.rmtree(folder / "cleaned", ignore_errors=True)  # encoded now; clean.json keeps the report
    (folder / "corpus.json").write_text(json.dumps({"format": FORMAT, "train": train_meta, "dev": dev_meta,
                                                    "stats": stats}, indent=1))
    log(f"prepare: kept {train_meta['pairs']} of {pairs} pairs (skipped {counts['empty']} with an empty side, "
        f"{counts['too_long']} over {cfg.data.max_len} tokens); vocab {len(src_tok)}")


def _cleaned_corpora(cfg: Config, corpora: list[TrainingCorpus], folder: Path, log) -> list[TrainingCorpus]:
    """data.clean: each training corpus through `mt clean` (the clean section) into folder/cleaned/, and the
    reports into folder/clean.json; the corpora read from there."""
    d = cfg.data
    files = [(c.src, c.tgt) for c in d.train] if d.train else [(d.train_src, d.train_tgt)]
    cleaned, reports = [], []
    for i, (corpus, (src, tgt)) in enumerate(zip(corpora, files)):
        out_src, out_tgt = folder / "cleaned" / f"{i}.src", folder / "cleaned" / f"{i}.tgt"
        text = src and corpus.human is None
        langs = corpus_languages(Path(src or d.dataset), Path(tgt or src or d.dataset),
                                 corpus.src_lang or d.src_lang, corpus.tgt_lang or d.tgt_lang, cfg.clean)
        chunks = file_chunks(Path(src), Path(tgt)) if text else text_chunks(corpus.chunks())
        log(f"prepare: cleaning {corpus.name} ({langs[0]}-{langs[1]})")
        report = clean_corpus(chunks, out_src, out_tgt, cfg.clean, *langs, log=log, command="prepare")
        log(report.table())
        if report.kept == 0:
            raise DataError(f"{corpus.name}: data.clean kept none of its {report.pairs} pairs (see {folder.name}/"
                            "clean.json)")
        reports.append({"corpus": corpus.name, **report.as_dict()})
        cleaned.append(dataclasses.replace(corpus, chunks=partial(parallel_chunks, out_src, out_tgt)))
    (folder / "clean.json").write_text(json.dumps(reports, indent=1))
    return cleaned


def _corpus_prefixes(cfg: Config, src_tok: Tokenizer, tgt_tok: Tokenizer, corpus: TrainingCorpus,
                     i: int) -> tuple[list[int], list[int]]:
    """The token ids put before each source of data.train[i] (its language token, mt/data/languages.py, then its
    tag), and before each target (an M2M100 model's target language token)."""
    try:
        src, tgt = _language_prefixes(cfg, src_tok, tgt_tok, (corpus.src_lang, corpus.tgt_lang), f"data.train[{i}]")
    except DataError as e:
        raise DataError(f"{e} (train.init_from's checkpoint was trained without it)") from None
    tag = _tag_id(src_tok, corpus.tag, i)
    return src + ([] if tag is None else [tag]), tgt


def _dev_corpus(cfg: Config, devs: list, src_tok: Tokenizer, tgt_tok: Tokenizer) -> Corpus:
    """The dev sets encoded one after another, each after its direction's language tokens."""
    src_ids, tgt_ids = [], []
    for i, (source, target, src, ref) in enumerate(devs):
        src_prefix, tgt_prefix = _language_prefixes(cfg, src_tok, tgt_tok, (source, target), f"data.dev[{i}]")
        src_ids += prefixed(src_prefix, src_tok.encode(src))
        tgt_ids += prefixed(tgt_prefix, tgt_tok.encode(ref))
    return corpus_of_ids(src_ids, tgt_ids, None)[0]


def _language_prefixes(cfg: Config, src_tok: Tokenizer, tgt_tok: Tokenizer, direction: tuple,
                       where: str) -> tuple[list[int], list[int]]:
    try:
        return (source_prefix(cfg.languages, src_tok, direction, where),
                target_prefix(cfg.languages, tgt_tok, direction, where))
    except MtError as e:
        raise DataError(str(e)) from None


def _tag_id(tok: Tokenizer, tag: str | None, i: int) -> int | None:
    """The token id of data.train[i].tag (None without a tag); the tokenizer must hold it as one piece."""
    if tag is None:
        return None
    piece = tok.piece_id(tag)
    if piece is None:
        raise DataError(f"data.train[{i}].tag {tag!r} is not a piece of the tokenizer (train.init_from's "
                        "checkpoint was trained without it)")
    return piece


# ---------------------------------------------------------------- the tokenizer's sample


class Reservoir:
    """A uniform sample of `size` lines of a stream (Vitter's Algorithm R), drawn in one pass.

    Each line comes with a key; `lines()` returns the sample ordered by key, so a stream that fits whole comes
    back exactly as it went in (whatever order the chunks arrived in).
    """

    def __init__(self, size: int, seed: int):
        self.size, self.seen = size, 0
        self.rng = np.random.default_rng(seed)
        self.sample: list[str] = []
        self.keys = array.array("q")

    def add(self, lines: list[str], first_key: int) -> None:
        """Offer `lines`, whose keys are first_key, first_key + 1, ..."""
        room = min(max(self.size - len(self.sample), 0), len(lines))
        self.sample += lines[:room]
        self.keys.extend(range(first_key, first_key + room))
        # Line number t of the stream (0-based) replaces a random slot with probability size / (t + 1).
        positions = np.arange(self.seen + room, self.seen + len(lines))
        slots = self.rng.integers(0, positions + 1)
        for i in np.flatnonzero(slots < self.size).tolist():  # in stream order: a later line wins a slot
            self.sample[slots[i]] = lines[room + i]
            self.keys[slots[i]] = first_key + room + i
        self.seen += len(lines)

    def lines(self) -> Iterator[str]:
        """The sample in key order, each line dropped once yielded (sentencepiece keeps its own copy)."""
        order = np.argsort(np.frombuffer(self.keys, dtype=np.int64), kind="stable")
        sample, self.sample, self.keys = self.sample, [], array.array("q")
        for i in order.tolist():
            line, sample[i] = sample[i], None
            yield line


TGT_KEYS = 1 << 48  # joint sample: target lines sort after every source line, as in src_lines + tgt_lines


def _checkpoint_tokenizers(cfg: Config, corpora: list[TrainingCorpus], log) -> tuple[Tokenizer, Tokenizer, int]:
    """Fine-tuning: the tokenizers of the `train.init_from` checkpoint (no new sentencepiece model), and the
    number of training pairs."""
    ckpt = init_source(cfg.train.init_from, config_to_dict(cfg)["model"], cfg.tokenizer.joint)
    src_tok, tgt_tok = Tokenizer.from_tensor(ckpt["src_tokenizer"]), Tokenizer.from_tensor(ckpt["tgt_tokenizer"])
    _check_init_languages(cfg, ckpt)
    for i, corpus in enumerate(corpora):
        _corpus_prefixes(cfg, src_tok, tgt_tok, corpus, i)  # before reading the corpora: a missing tag fails at once
    missing = [t for t in tag_symbols(cfg.data.inline_tags)
               if src_tok.piece_id(t) is None or tgt_tok.piece_id(t) is None]
    if missing:
        raise DataError(f"data.inline_tags: train.init_from's tokenizer has no piece {missing[0]} (its model was "
                        "trained without inline tags)")
    pairs = sum(len(src) for corpus in corpora for src, _ in corpus.chunks())
    if pairs == 0:
        raise DataError("no training pairs: the training data is empty")
    log(f"prepare: the tokenizers of {cfg.train.init_from} (train.init_from), for {pairs} pairs")
    return src_tok, tgt_tok, pairs


def _train_tokenizers(cfg: Config, corpora: list[TrainingCorpus], log) -> tuple[Tokenizer, Tokenizer, int]:
    """One pass over the training text: count the pairs, sample the lines and train sentencepiece on them (the
    corpora's tags become pieces of the source side's model)."""
    tc, seed = cfg.tokenizer, cfg.train.seed
    balanced = tc.joint and bool(cfg.languages.directions)
    languages = sorted({lang for c in corpora for lang in (c.src_lang, c.tgt_lang)}) if balanced else []
    reservoirs = [Reservoir(tc.max_sentences // len(languages), seed + k) for k in range(len(languages))] if balanced \
        else [Reservoir(tc.max_sentences, seed)] if tc.joint else \
        [Reservoir(tc.max_sentences, seed), Reservoir(tc.max_sentences, seed + 1)]
    pairs = 0
    with Progress("prepare", "read", None, log) as progress:
        for corpus in corpora:
            src_side, tgt_side = (languages.index(corpus.src_lang), languages.index(corpus.tgt_lang)) if balanced \
                else (0, -1)
            for src, tgt in corpus.chunks():
                reservoirs[src_side].add(src, pairs)
                reservoirs[tgt_side].add(tgt, pairs + TGT_KEYS)
                pairs += len(src)
                progress.update(len(src))
    if pairs == 0:
        raise DataError("no training pairs: the training data is empty")
    lines = sum(len(r.sample) for r in reservoirs)
    log(f"prepare: training sentencepiece ({tc.type}, vocab {tc.vocab_size}, "
        f"{'joint' if tc.joint else 'separate'}) on {pairs} pairs"
        + (f", {min(len(r.sample) for r in reservoirs)} lines of each of {', '.join(languages)}" if balanced else
           f" ({lines} lines sampled)" if any(r.seen > r.size for r in reservoirs) else ""))
    spm.set_random_generator_seed(seed)
    inline = tag_symbols(cfg.data.inline_tags)  # both sides': the model reads and writes them
    tags = tokens_of(cfg.languages) + list(dict.fromkeys(corpus.tag for corpus in corpora if corpus.tag)) + inline
    if balanced:
        return (tok := train_tokenizer(_balanced(reservoirs, seed), tc, tags)), tok, pairs
    tokenizers = [train_tokenizer(r.lines(), tc, tags if i == 0 else inline) for i, r in enumerate(reservoirs)]
    return tokenizers[0], tokenizers[-1], pairs


def _balanced(reservoirs: list[Reservoir], seed: int) -> Iterator[str]:
    """A language-balanced sample for a joint vocabulary: as many lines of each language (one reservoir each) as
    the language with fewest has, drawn uniformly from its sample."""
    each = min(len(r.sample) for r in reservoirs)
    rng = np.random.default_rng(seed)
    for r in reservoirs:
        sample = list(r.lines())
        for i in np.sort(rng.choice(len(sample), each, replace=False)).tolist():
            yield sample[i]


def _check_init_languages(cfg: Config, ckpt: dict) -> None:
    """Fine-tuning a model that names the target with a token goes on naming it: the config must say so."""
    token = ckpt["config"].get("languages", {}).get("token", "none")
    if token != "none" and cfg.languages.token != token:
        raise DataError(f"train.init_from {cfg.train.init_from}: its model is told the languages by tokens "
                        f"(languages.token {token}); set languages.token: {token} and name each corpus' languages")
