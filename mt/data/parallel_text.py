"""The corpora a config names, as (source lines, target lines): line-aligned text files (mt/data/text_files.py),
translation memories and catalogues (mt/data/translation_memories.py) or a `datasets` split, read in chunks so a
corpus of any size streams through `mt prepare` (mt/data/prepare.py) without being held in memory. Encoding is in mt/data/corpus.py, batching in mt/data/batching.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from mt.config import DataConfig
from mt.data.text_files import CHUNK_LINES, Chunks, joined, parallel_chunks
from mt.data.translation_memories import BILINGUAL, PairFile, file_format
from mt.errors import DataError


def check_sources(cfg: DataConfig) -> None:
    """Fail before any folder is made if the config names no training data or half a pair of files."""
    if not cfg.train:
        _paths(cfg, "train")
    if cfg.dev_src or cfg.dev_tgt:
        _paths(cfg, "dev")


def _paths(cfg: DataConfig, split: str) -> tuple[str | None, str | None]:
    src_path, tgt_path = (cfg.train_src, cfg.train_tgt) if split == "train" else (cfg.dev_src, cfg.dev_tgt)
    if split == "train" and src_path and file_format(src_path) in BILINGUAL:
        return src_path, tgt_path
    if src_path or tgt_path:
        if not (src_path and tgt_path):
            raise DataError(f"data.{split}_src and data.{split}_tgt must be given together")
    elif not cfg.dataset:
        also = " or data.train" if split == "train" else ""
        raise DataError(f"no {split} data: set data.{split}_src and data.{split}_tgt, or data.dataset{also}")
    return src_path, tgt_path


def source_files(cfg: DataConfig) -> dict[str, str]:
    """The local files a prepared corpus is made from, keyed by the config key that names each (a local
    `data.dataset` folder: each file in it)."""
    files = {f"data.{key}[{i}].{side}": getattr(c, side) for key in ("train", "dev")
             for i, c in enumerate(getattr(cfg, key)) for side in ("src", "tgt") if getattr(c, side)}
    files.update({f"data.{key}": getattr(cfg, key) for key in ("train_src", "train_tgt", "dev_src", "dev_tgt")
                  if getattr(cfg, key)})
    if cfg.dataset and Path(cfg.dataset).is_dir():
        files.update({f"data.dataset {p.relative_to(cfg.dataset)}": str(p)
                      for p in sorted(Path(cfg.dataset).rglob("*")) if p.is_file()})
    return files


def split_chunks(cfg: DataConfig, split: str) -> Chunks:
    """The train or dev side of the corpus as chunks of (source lines, target lines)."""
    src_path, tgt_path = _paths(cfg, split)
    if src_path:
        return parallel_chunks(src_path, tgt_path)
    return _dataset_chunks(cfg, cfg.train_split if split == "train" else cfg.dev_split)


@dataclass(frozen=True)
class TrainingCorpus:
    """One training corpus, as `mt prepare` reads it."""

    name: str  # how the log names it: its source file, or the dataset
    weight: float | None  # its share of the batches, relative to the other corpora's (mt/data/mixing.py)
    tag: str | None  # a token put before each of its source sentences
    chunks: Callable[[], Chunks]  # a fresh reading of its (source lines, target lines)
    src_lang: str | None = None  # its languages, when the config names them
    tgt_lang: str | None = None
    human: PairFile | None = None  # a file of human translations that is not text: what reading it took, skipped


def training_corpora(cfg: DataConfig) -> list[TrainingCorpus]:
    """The entries of data.train, or the one corpus of data.train_src/train_tgt or data.dataset."""
    if cfg.train:
        return [_corpus(c.src, c.tgt, c.format, c.weight, c.tag, c.src_lang, c.tgt_lang, c.fuzzy, c.inline_codes,
                        f"data.train[{i}]", (cfg.src_lang, cfg.tgt_lang)) for i, c in enumerate(cfg.train)]
    if cfg.train_src and file_format(cfg.train_src) != "text":
        return [_corpus(cfg.train_src, cfg.train_tgt, None, 1.0, None, cfg.src_lang, cfg.tgt_lang)]
    return [TrainingCorpus(cfg.train_src or cfg.dataset or "train", 1.0, None, partial(split_chunks, cfg, "train"))]


def _corpus(src, tgt, fmt, weight, tag, src_lang, tgt_lang, fuzzy=False, inline_codes="placeholders",
            key="data.train_src", languages=(None, None)) -> TrainingCorpus:
    """A corpus of data.train (or train_src): a text one, or a file of human translations read in its languages
    (the entry's, else data.src_lang and data.tgt_lang)."""
    fmt = file_format(src, fmt, f"{key}.format")
    if fmt == "text":
        if not tgt:
            raise DataError(f"{key} needs tgt: {src} is read as text, one side (a TMX, PO, XLIFF or .ts file holds "
                            "both)")
        return TrainingCorpus(src, weight, tag, partial(parallel_chunks, src, tgt), src_lang, tgt_lang)
    human = PairFile(src, tgt, fmt, src_lang or languages[0], tgt_lang or languages[1], fuzzy, inline_codes)
    return TrainingCorpus(src, weight, tag, human.chunks, src_lang, tgt_lang, human)


def dev_sets(cfg: DataConfig) -> list[tuple[str | None, str | None, list[str], list[str]]]:
    """The dev sets as (source language, target language, source lines, target lines): data.dev's, or the one of
    data.dev_src/dev_tgt or data.dataset (its languages those of data.src_lang/tgt_lang); none without a dev set."""
    if cfg.dev:
        return [(d.src_lang, d.tgt_lang, *joined(parallel_chunks(d.src, d.tgt))) for d in cfg.dev]
    if cfg.dev_src or cfg.dev_tgt or cfg.dataset:
        return [(cfg.src_lang, cfg.tgt_lang, *load_split(cfg, "dev"))]
    return []


def load_split(cfg: DataConfig, split: str) -> tuple[list[str], list[str]]:
    """The train or dev side of the corpus in memory as (source lines, target lines)."""
    return joined(split_chunks(cfg, split))


def _dataset_chunks(cfg: DataConfig, split: str) -> Chunks:
    """Rows of a `datasets` split, either {"translation": {src: .., tgt: ..}} or flat src/tgt columns.

    A loaded split is an Arrow table mapped from disk, so reading it in chunks keeps memory bounded.
    """
    ds = _load_dataset_split(cfg, split)
    if "translation" not in ds.column_names:
        for lang in (cfg.src_lang, cfg.tgt_lang):
            if lang not in ds.column_names:
                raise DataError(f"data.dataset {cfg.dataset}: no column '{lang}' (columns: {ds.column_names})")
    for rows in ds.iter(batch_size=CHUNK_LINES):
        if "translation" not in rows:
            yield list(rows[cfg.src_lang]), list(rows[cfg.tgt_lang])
            continue
        try:
            yield [p[cfg.src_lang] for p in rows["translation"]], [p[cfg.tgt_lang] for p in rows["translation"]]
        except KeyError as e:
            raise DataError(f"data.dataset {cfg.dataset}: no language {e} in 'translation'") from None


def _load_dataset_split(cfg: DataConfig, split: str):
    import datasets

    if not (cfg.src_lang and cfg.tgt_lang):
        raise DataError("data.dataset needs data.src_lang and data.tgt_lang")
    try:
        if Path(cfg.dataset).is_dir():
            ds = datasets.load_from_disk(cfg.dataset)
            return ds[split] if isinstance(ds, datasets.DatasetDict) else ds
        return datasets.load_dataset(cfg.dataset, cfg.dataset_config, split=split)
    except KeyError:
        raise DataError(f"data.dataset {cfg.dataset}: no split '{split}'") from None
    except Exception as e:  # datasets raises many kinds (network, missing config, ...)
        raise DataError(f"data.dataset {cfg.dataset}: cannot load split '{split}': {e}") from None
