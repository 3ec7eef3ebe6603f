"""Parallel text in, an encoded corpus out (batching is in mt/batching.py).

`prepare_data` trains the tokenizer and encodes the corpus once into `output_dir/data/`; later runs reuse it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import sentencepiece as spm
import torch

from mt.checkpoint import atomic_save, atomic_write_text, load_tensors
from mt.config import Config, DataConfig, config_to_dict
from mt.errors import DataError
from mt.tokenizer import Tokenizer, train_tokenizer


# ---------------------------------------------------------------- reading text


def read_lines(path: str | Path) -> list[str]:
    """Lines of a UTF-8 text file without their newlines; errors name the file (and line)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except OSError as e:
        raise DataError(f"{path}: cannot read: {e.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise DataError(f"{path}:{line}: not valid UTF-8 (byte {data[e.start]:#04x}); fix or remove that line") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.rstrip("\r") for line in lines]


def read_parallel(src_path: str, tgt_path: str) -> tuple[list[str], list[str]]:
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise DataError(f"parallel files differ in length: {src_path} has {len(src)} lines, {tgt_path} has {len(tgt)}")
    if not src:
        raise DataError(f"{src_path}: empty file")
    return src, tgt


def load_split(cfg: DataConfig, split: str) -> tuple[list[str], list[str]]:
    """The train or dev side of the corpus as (source lines, target lines)."""
    src_path, tgt_path = (cfg.train_src, cfg.train_tgt) if split == "train" else (cfg.dev_src, cfg.dev_tgt)
    if src_path or tgt_path:
        if not (src_path and tgt_path):
            which = "train" if split == "train" else "dev"
            raise DataError(f"data.{which}_src and data.{which}_tgt must be given together")
        return read_parallel(src_path, tgt_path)
    if cfg.dataset:
        return _load_hf_split(cfg, cfg.train_split if split == "train" else cfg.dev_split)
    raise DataError(f"no {split} data: set data.{split}_src and data.{split}_tgt, or data.dataset")


def _load_hf_split(cfg: DataConfig, split: str) -> tuple[list[str], list[str]]:
    """Rows of a `datasets` split, either {"translation": {src: .., tgt: ..}} or flat src/tgt columns."""
    import datasets

    if not (cfg.src_lang and cfg.tgt_lang):
        raise DataError("data.dataset needs data.src_lang and data.tgt_lang")
    try:
        if Path(cfg.dataset).is_dir():
            ds = datasets.load_from_disk(cfg.dataset)
            ds = ds[split] if isinstance(ds, datasets.DatasetDict) else ds
        else:
            ds = datasets.load_dataset(cfg.dataset, cfg.dataset_config, split=split)
    except KeyError:
        raise DataError(f"data.dataset {cfg.dataset}: no split '{split}'") from None
    except Exception as e:  # datasets raises many kinds (network, missing config, ...)
        raise DataError(f"data.dataset {cfg.dataset}: cannot load split '{split}': {e}") from None
    if "translation" in ds.column_names:
        pairs = ds["translation"]
        try:
            return [p[cfg.src_lang] for p in pairs], [p[cfg.tgt_lang] for p in pairs]
        except KeyError as e:
            raise DataError(f"data.dataset {cfg.dataset}: no language {e} in 'translation'") from None
    for lang in (cfg.src_lang, cfg.tgt_lang):
        if lang not in ds.column_names:
            raise DataError(f"data.dataset {cfg.dataset}: no column '{lang}' (columns: {ds.column_names})")
    return list(ds[cfg.src_lang]), list(ds[cfg.tgt_lang])


# ---------------------------------------------------------------- the encoded corpus


@dataclass
class Corpus:
    """Encoded sentence pairs stored flat: sentence i is tokens[offsets[i]:offsets[i+1]] (no BOS/EOS)."""

    src: torch.Tensor
    src_offsets: torch.Tensor
    tgt: torch.Tensor
    tgt_offsets: torch.Tensor

    def __len__(self) -> int:
        return len(self.src_offsets) - 1

    def src_lengths(self) -> torch.Tensor:
        return self.src_offsets.diff()

    def tgt_lengths(self) -> torch.Tensor:
        return self.tgt_offsets.diff()

    def costs(self) -> torch.Tensor:
        """Per pair, the length of its longer side including BOS/EOS: what it adds to a padded batch."""
        return torch.maximum(self.src_lengths(), self.tgt_lengths()) + 1

    def pair(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return (self.src[self.src_offsets[i]:self.src_offsets[i + 1]],
                self.tgt[self.tgt_offsets[i]:self.tgt_offsets[i + 1]])

    def to_dict(self) -> dict:
        return {"src": self.src, "src_offsets": self.src_offsets, "tgt": self.tgt, "tgt_offsets": self.tgt_offsets}


def _flatten(seqs: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.int64)
    offsets = torch.zeros(len(seqs) + 1, dtype=torch.int64)
    offsets[1:] = lengths.cumsum(0)
    flat = torch.tensor([t for s in seqs for t in s], dtype=torch.int32)
    return flat, offsets


def encode_corpus(src_lines, tgt_lines, src_tok: Tokenizer, tgt_tok: Tokenizer, max_len: int | None):
    """Encode pairs; drop pairs with an empty side or a side over `max_len` tokens. Returns (corpus, counts)."""
    src_ids, tgt_ids = src_tok.encode(src_lines), tgt_tok.encode(tgt_lines)
    kept_src, kept_tgt, counts = [], [], {"empty": 0, "too_long": 0}
    for s, t in zip(src_ids, tgt_ids):
        if not s or not t:
            counts["empty"] += 1
        elif max_len is not None and max(len(s), len(t)) > max_len:
            counts["too_long"] += 1
        else:
            kept_src.append(s)
            kept_tgt.append(t)
    src, src_offsets = _flatten(kept_src)
    tgt, tgt_offsets = _flatten(kept_tgt)
    return Corpus(src, src_offsets, tgt, tgt_offsets), counts


# ---------------------------------------------------------------- prepare and cache


@dataclass
class PreparedData:
    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer
    train: Corpus
    dev: Corpus | None
    dev_src: list[str]  # raw dev text, for BLEU
    dev_ref: list[str]
    stats: dict


def data_dir(cfg: Config) -> Path:
    return Path(cfg.output_dir) / "data"


def _stamp(cfg: Config) -> dict:
    """What the cache depends on; a different stamp means the cache is not this config's."""
    d = config_to_dict(cfg)
    return {"data": d["data"], "tokenizer": d["tokenizer"]}


def prepare_data(cfg: Config, log=print, force: bool = False) -> PreparedData:
    """Load the cache in `output_dir/data/`, or build it: train sentencepiece, encode train and dev."""
    folder = data_dir(cfg)
    stamp_path = folder / "prepared.json"
    if stamp_path.exists() and not force:
        old = json.loads(stamp_path.read_text())
        if old != _stamp(cfg):
            changed = [f"{sec}.{k}" for sec in old for k in old[sec] if old[sec][k] != _stamp(cfg)[sec].get(k)]
            raise DataError(f"{cfg.output_dir}: prepared with a different config ({', '.join(changed)} changed); "
                            "use another output_dir or run with --restart")
        return load_prepared(cfg)
    folder.mkdir(parents=True, exist_ok=True)
    train_src, train_tgt = load_split(cfg.data, "train")
    has_dev = bool(cfg.data.dev_src or cfg.data.dev_tgt or cfg.data.dataset)
    dev_src, dev_ref = load_split(cfg.data, "dev") if has_dev else ([], [])
    log(f"prepare: training sentencepiece ({cfg.tokenizer.type}, vocab {cfg.tokenizer.vocab_size}, "
        f"{'joint' if cfg.tokenizer.joint else 'separate'}) on {len(train_src)} pairs")
    spm.set_random_generator_seed(cfg.train.seed)
    if cfg.tokenizer.joint:
        src_tok = tgt_tok = train_tokenizer(train_src + train_tgt, cfg.tokenizer)
    else:
        src_tok, tgt_tok = train_tokenizer(train_src, cfg.tokenizer), train_tokenizer(train_tgt, cfg.tokenizer)
    train, counts = encode_corpus(train_src, train_tgt, src_tok, tgt_tok, cfg.data.max_len)
    if len(train) == 0:
        raise DataError(f"no usable training pairs: {counts['empty']} empty, {counts['too_long']} over "
                        f"data.max_len={cfg.data.max_len}")
    dev, _ = encode_corpus(dev_src, dev_ref, src_tok, tgt_tok, None) if has_dev else (None, None)
    stats = {"train_pairs": len(train_src), "kept_pairs": len(train), "skipped_empty": counts["empty"],
             "skipped_too_long": counts["too_long"], "src_vocab": len(src_tok), "tgt_vocab": len(tgt_tok),
             "dev_pairs": len(dev_src)}
    atomic_save(folder / "corpus.pt", {
        "src_tokenizer": src_tok.to_tensor(), "tgt_tokenizer": tgt_tok.to_tensor(),
        "train": train.to_dict(), "dev": dev.to_dict() if dev is not None else {},
        "dev_src": dev_src, "dev_ref": dev_ref, "stats": stats})
    atomic_write_text(stamp_path, json.dumps(_stamp(cfg), indent=1))
    log(f"prepare: kept {len(train)} of {len(train_src)} pairs (skipped {counts['empty']} with an empty side, "
        f"{counts['too_long']} over {cfg.data.max_len} tokens); vocab {len(src_tok)}")
    return PreparedData(src_tok, tgt_tok, train, dev, dev_src, dev_ref, stats)


def load_prepared(cfg: Config) -> PreparedData:
    blob = load_tensors(data_dir(cfg) / "corpus.pt")
    src_tok = Tokenizer.from_tensor(blob["src_tokenizer"])
    tgt_tok = src_tok if cfg.tokenizer.joint else Tokenizer.from_tensor(blob["tgt_tokenizer"])
    dev = Corpus(**blob["dev"]) if blob["dev"] else None
    return PreparedData(src_tok, tgt_tok, Corpus(**blob["train"]), dev, blob["dev_src"], blob["dev_ref"],
                        blob["stats"])
