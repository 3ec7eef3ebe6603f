"""Typed configuration loaded from YAML; the only place a default is defined.

A config has a top-level `output_dir` and the sections `data`, `tokenizer`, `model`, `train`, `decode`, `clean`,
`distill`.
`--set section.key=value` overrides are parsed with YAML and checked against the field's type.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from mt.errors import ConfigError
from mt.atomic_files import atomic_write_text


@dataclass(frozen=True)
class CorpusConfig:
    """One entry of `data.train`: a pair of line-aligned text files, or a file of human translations (a TMX, a
    PO, XLIFF or .ts catalogue; two resource files of one app, paired by key: mt/data/translation_memories.py)."""

    src: str
    tgt: str | None = None  # none for a file holding both sides (TMX, PO, XLIFF, .ts)
    format: str | None = None  # text, tmx, po, xliff, ts, android, json, arb, properties; unset: src's extension's
    fuzzy: bool = False  # a catalogue's entries marked fuzzy or to review are trained on too
    inline_codes: str = "placeholders"  # TMX's and XLIFF's inline codes as placeholder tags, or drop
    weight: float | None = None  # this corpus' share of the batches, relative to the others' weights; unset: 1,
    # or with languages named, its size to the power 1 / data.temperature
    tag: str | None = None  # a token put before every source sentence of this corpus, e.g. <BT> (Caswell et al.)
    src_lang: str | None = None  # its languages' codes (e.g. de, en): a multilingual model names them for every
    tgt_lang: str | None = None  # corpus of data.train (docs/multilingual.md)


@dataclass(frozen=True)
class DevSetConfig:
    """One entry of `data.dev`: a multilingual model's dev set of one direction."""

    src: str
    tgt: str
    src_lang: str
    tgt_lang: str


@dataclass(frozen=True)
class DataConfig:
    train: tuple[CorpusConfig, ...] = ()  # several training corpora (mt/data/mixing.py), instead of train_src/train_tgt
    train_src: str | None = None  # line-aligned text files ...
    train_tgt: str | None = None
    dev_src: str | None = None
    dev_tgt: str | None = None
    dev: tuple[DevSetConfig, ...] = ()  # dev sets of several directions (a multilingual model), instead of dev_src
    temperature: float = 5.0  # corpora with languages and no weights: each one's share of the batches is its
    # size to the power 1/temperature (Arivazhagan et al. 2019): 1 samples as the sizes are, larger evens them out
    inline_tags: float = 0.0  # share of the training pairs given inline tags, so that the model carries documents'
    # inline markup itself (mt/data/inline_tags.py); 0: none, as in the paper's data
    dataset: str | None = None  # ... or a `datasets` name / `save_to_disk` folder
    dataset_config: str | None = None
    src_lang: str | None = None
    tgt_lang: str | None = None
    train_split: str = "train"
    dev_split: str = "validation"
    max_len: int = 256  # subword tokens per side; longer training pairs are skipped and counted
    pad_to_multiple: int | str = "auto"  # batch lengths rounded up to a multiple of this; auto: 8 on CUDA or
    # with train.compile (repeating shapes suit tensor cores and compiled graphs), 1 on a CPU (padding is waste)
    clean: bool = False  # not in the paper: `mt prepare` runs the training corpus through `mt clean` (the clean
    # section) first and keeps its report in data/clean.json; the dev set is never cleaned


@dataclass(frozen=True)
class TokenizerConfig:
    type: str = "bpe"  # bpe | unigram
    vocab_size: int = 8000
    joint: bool = True  # one vocabulary for both sides: one sentencepiece model, as the paper's shared BPE (with
    # vocab_file, one vocabulary over two sentencepiece models)
    max_sentences: int = 2_000_000  # sentences sampled to train sentencepiece
    character_coverage: float = 1.0
    vocab_file: str | None = None  # not in the paper: a vocabulary file (Marian's vocab.json) in front of the
    # sentencepiece model(s), whose ids the model uses; `mt import` renumbers the stored sentencepiece models to
    # its ids (mt/interop/marian.py), so only an imported checkpoint (train.init_from) brings one. None: sentencepiece's ids


@dataclass(frozen=True)
class ModelConfig:
    d_model: int = 512
    d_ff: int = 2048
    n_heads: int = 8
    n_layers: int = 6  # layers of each stack, unless encoder_layers or decoder_layers says otherwise
    encoder_layers: int | None = None  # None: n_layers (the paper); a deep encoder and a shallow decoder
    # depart from it for speed: decoding time is spent in the decoder (Kasai et al. 2021), configs/student-*.yaml
    decoder_layers: int | None = None  # None: n_layers
    dropout: float = 0.1  # residual and embedding dropout (section 5.4)
    attention_dropout: float = 0.0  # not in the paper; tensor2tensor v1 uses 0
    activation_dropout: float = 0.0  # not in the paper; tensor2tensor v1 uses 0
    norm: str = "post"  # post (the paper) | pre
    share_embeddings: bool = True
    max_positions: int = 1024
    activation: str = "relu"  # relu (3.3) | swish: x * sigmoid(x) in the feed-forward layers (OPUS-MT's base models)
    positions: str = "interleaved"  # interleaved: sin and cos in alternate dimensions (3.5) | concatenated: one
    # table [sin | cos] with the same frequencies 10000^(-k/(D/2)) (Marian, as Hugging Face converts it) | fairseq:
    # [sin | cos] with 10000^(-k/(D/2-1)), from position 2 (M2M100)
    output_bias: bool = False  # a bias on the pre-softmax projection: not in the paper (OPUS-MT's
    # final_logits_bias, which here trains)
    decoder_start: str = "bos"  # bos: the decoder's first input is BOS (the paper) | pad: PAD's all-zero row, and
    # incremental decoding never outputs PAD (Marian, whose vocabulary has no BOS and no PAD) | eos: EOS's row
    # (fairseq, M2M100)

    def __post_init__(self):
        # Each depth left unset is n_layers, so every reader sees two numbers, and a config or checkpoint from
        # before the two keys existed builds the model it built then.
        for name in ("encoder_layers", "decoder_layers"):
            if getattr(self, name) is None:
                object.__setattr__(self, name, self.n_layers)


@dataclass(frozen=True)
class TrainConfig:
    max_steps: int = 100_000
    batch_tokens: int = 4096
    accum_steps: int = 1
    warmup_steps: int = 4000
    lr_scale: float = 1.0
    adam_beta1: float = 0.9
    adam_beta2: float = 0.98
    adam_eps: float = 1e-9
    label_smoothing: float = 0.1
    clip_norm: float | None = None  # gradients clipped to this global norm; 0: not clipped. Unset: 0, as the paper
    # has none, but 1.0 for a run of several directions (data.train's languages): at the demo's schedule a
    # four-direction model ignored its source in some seeds unclipped, and used it clipped (docs/multilingual.md)
    log_every: int = 100
    eval_every: int = 1000
    save_every: int = 1000
    keep_last: int = 5
    max_bad_steps: int = 10  # consecutive non-finite losses before training stops
    best_metric: str = "bleu"  # bleu | chrf | loss (dev): what checkpoint_best.pt and patience follow
    patience: int = 0  # stop after this many dev evaluations without a better best_metric; 0: never
    init_from: str | None = None  # fine-tuning: a checkpoint whose weights and tokenizers a new run starts from
    ema_decay: float = 0.0  # an exponential moving average of the weights (mt/training/ema.py), e.g. 0.999; 0: off
    seed: int = 1
    device: str = "auto"  # auto | cpu | cuda
    precision: str = "fp32"  # fp32 | bf16 | fp16 (autocast, CUDA only)
    compile: bool = False  # torch.compile the model for training
    tensorboard: bool = False  # also write the metrics.jsonl scalars to output_dir/tensorboard/ (needs mt[plot])


def _batch_setting(*searches: str, default):
    """A DecodeConfig field that these searches (greedy, sampling, beam, constrained) take once for a whole batch;
    the others read it per request or not at all, so requests that differ in it can still share their batches
    (SentenceRequest.group). A field declared without it is a batch setting of every search: requests that differ
    in it never share a batch."""
    return dataclasses.field(default=default, metadata={"batch_setting_of": searches})


def batch_settings(search: str) -> list[str]:
    """The DecodeConfig fields `search` takes once for a whole batch: requests that share one must agree on them."""
    return [f.name for f in dataclasses.fields(DecodeConfig)
            if search in f.metadata.get("batch_setting_of", (search,))]


@dataclass(frozen=True)
class DecodeConfig:
    beam_size: int = _batch_setting("beam", "constrained", default=4)  # hypotheses kept per sentence; 1: greedy
    # search (section 6.1: 4)
    alpha: float = _batch_setting("beam", "constrained", default=0.6)  # GNMT length penalty exponent, section
    # 6.1
    max_len_a: float = _batch_setting(default=1.0)  # maximum output length = a * source length + b
    max_len_b: int = _batch_setting(default=50)  # (see max_len_a)
    batch_tokens: int = 16384  # source tokens per batch (padding counted, beams not); docs/benchmarks.md
    sampling: bool = False  # draw each next token at random instead of searching (back-translation)
    topk: int = _batch_setting("sampling", default=0)  # sampling: only from the k most probable tokens; 0: all
    topp: float = _batch_setting("sampling", default=1.0)  # sampling: only from the smallest set of tokens with
    # this much probability (nucleus)
    temperature: float = _batch_setting("sampling", default=1.0)  # sampling: probabilities from logits /
    # temperature
    seed: int = _batch_setting("sampling", default=1)  # sampling: with the input line's number, the only source
    # of a line's randomness


@dataclass(frozen=True)
class CleanConfig:
    """`mt clean` (mt/data/clean.py): each filter removes a pair when it fails on either side; 0 or false turns it off.
    Sources of the defaults: Mozilla's translations pipeline (clean_parallel.py), OpusCleaner's filters and
    OpusFilter's; what each default removes from the shipped corpora, measured: docs/cleaning.md's Filters table."""

    empty: bool = True  # a side empty or whitespace only (OpusCleaner remove_empty_lines)
    min_words: int = 1  # words per side (Mozilla clean_parallel MIN_LENGTH; OpusCleaner max_length)
    max_words: int = 150  # (Mozilla clean_parallel MAX_LENGTH; OpusCleaner max_length); 0: no maximum
    min_chars: int = 1  # characters per side (OpusFilter LengthFilter's minimum, in characters)
    max_chars: int = 1000  # (none of the three sets one; max_words at about 6.5 characters a word); 0: no maximum
    max_word_chars: int = 150  # the longest word, in characters (OpusCleaner max_word_length)
    length_ratio: float = 3.5  # the longer side's length / the shorter side's, at most (OpusFilter's
    # LengthRatioFilter), in characters as sentence aligners compare lengths (Gale and Church, 1993); why not in
    # words, as its examples and Mozilla clean_parallel: docs/cleaning.md
    ratio_unit: str = "chars"  # chars (not spaces) or words (OpusFilter LengthRatioFilter's unit)
    ratio_min_words: int = 0  # the length ratio applies only when the longer side has more words than this
    copies: bool = True  # source equals target, ignoring case (Mozilla clean_parallel IDENTICAL; OpusCleaner
    # src_trg_same) ...
    copy_min_words: int = 2  # ... and holds this many lowercase words on each side: a sentence left untranslated.
    # Names, titles and commands are the same in both languages (Emacs, IP Version 6): docs/cleaning.md
    max_copied_words: float = 0.0  # remove when this share of the target's words, or more, are source words
    # (target mostly source words); 0: off
    duplicates: bool = True  # a pair seen before, exactly (OpusCleaner deduplicate)
    duplicate_sources: bool = False  # a source seen before, whatever its target: one pair per source
    encoding: bool = True  # replacement or control characters that the other side lacks (a quoted U+FFFD on both
    # sides is text), mojibake (UTF-8 read as cp1252/latin-1)
    html: bool = True  # markup (a closing, void or self-closing tag, a tag with attributes, an element opened and
    # closed) or entities the other side lacks (OpusFilter HtmlTagFilter); `the <meta> tag` is a mention, not markup
    urls: bool = False  # the two sides' URLs differ, in order (OpusCleaner url_mismatch). Off: why in
    # docs/cleaning.md
    numbers: float = 0.0  # (shared + 1) / (differing + 1) numbers below this removes the pair (OpusCleaner
    # num_mismatch --ratio 1.0); 0: off. Off: why in docs/cleaning.md
    changed_numbers: bool = True  # as many numbers on each side, not the same ones, of the same shapes (mt's;
    # measured in docs/cleaning.md)
    punctuation: float | None = None  # OpusFilter TerminalPunctuationFilter's score -log(1 + mismatch) below this
    # removes the pair (its default -2); null: off. Off: why in docs/cleaning.md
    min_alpha_words: float = 0.0  # share of words that hold a letter of the side's script (Mozilla clean_parallel
    # RATIO_ALPHA_WORDS 0.4; OpusCleaner alpha_ratio) ...
    min_alpha_chars: float = 0.0  # ... and of their characters that are letters of it (RATIO_ALPHA_CHARS 0.5): the
    # pair goes when one side falls short and the other not; 0 and 0: off. Off: why in docs/cleaning.md
    language_id: bool = True  # each side's language, by fastText's lid.176 model (mt/data/language_id.py): a side
    # in another language removes the pair (OpusCleaner fasttext_filter; OpusFilter LanguageIDFilter). Not by their
    # rule, the most probable language (docs/cleaning.md): a side is judged only when the model can tell, as follows
    language_min_words: int = 5  # words of the side's own: letter words (not acronyms, CamelCase, paths, options,
    # versions or numbers) that the other side lacks (names copied across say nothing of the language)
    language_min_prob: float = 0.03  # a side passes when its language has at least this probability ...
    language_other_prob: float = 0.3  # ... else fails when the pair's other language has at least this
    # (untranslated, swapped) ...
    language_third_prob: float = 0.6  # ... or a third language has at least this (chosen in docs/cleaning.md)
    misaligned: bool = True  # a pair that eflomal scores as the block's pairs do with their targets shuffled, by a
    # threshold each block of `align_pairs` sets itself (mt/data/misalignment.py; bicleaner's shuffled negatives,
    # a local false discovery rate): mt's; measured in docs/cleaning.md
    misaligned_min_words: int = 3  # pairs with a side shorter are not judged (titles translated freely)
    misaligned_sample: int = 5000  # shuffled pairs scored with each block (at most a fifth of its judged pairs)
    word_alignment: float = 0.0  # eflomal's alignment score (mean negative log-probability of a word, the worse
    # of the two directions) above this removes the pair: misaligned pairs (OpusFilter WordAlignFilter, which has
    # no default threshold); 0: off, as in the three pipelines' defaults (mt/data/eflomal_scores.py)
    align_pairs: int = 100_000  # pairs eflomal's model is fitted to at a time (misaligned, word_alignment)


@dataclass(frozen=True)
class DistillConfig:
    """`mt distill` (mt/commands/distill.py): sequence-level knowledge distillation (Kim and Rush, 2016)."""

    teachers: tuple[str, ...] = ()  # checkpoints (several: an ensemble) or one `mt export` directory
    beam_size: int = 4  # the teachers' beam when they translate the training sources
    batch_lines: int = 1000  # source lines translated, then written, at a time: memory stays bounded
    filter_worst: float = 0.0  # the share of distilled pairs with the lowest teacher score dropped (0: none)
    keep_original: bool = False  # also train on the original pairs ...
    original_weight: float = 1.0  # ... with this share of the batches, beside 1.0 for the distilled pairs
    export: bool = True  # export the student to CTranslate2 int8 and compare it with the teachers (step d)


@dataclass(frozen=True)
class LanguagesConfig:
    """The directions a model translates (mt/data/languages.py). Training sets it from data.train's languages,
    `mt import` from the imported model; a config only sets `token`, to fine-tune a model that has one."""

    directions: tuple[str, ...] = ()  # source:target codes, e.g. de:en; empty: one direction, languages unnamed
    token: str = "none"  # none | target: a token >>xx<< before each source names the target language (Johnson
    # et al. 2017; OPUS-MT's multi-target models) | both: the same token also starts the target, forced when
    # decoding: the default when data.train has more than one target language (mt/data/languages.py) |
    # m2m100: the source starts with __xx__ of its language and the output with that of the target (M2M100) |
    # nllb: the same with the code itself as the token, e.g. deu_Latn (NLLB-200)
    codes: tuple[str, ...] = ()  # a many-to-many model's languages (`mt import` of M2M100): any two of them


@dataclass(frozen=True)
class Config:
    output_dir: str = "runs/default"
    data: DataConfig = field(default_factory=DataConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)
    clean: CleanConfig = field(default_factory=CleanConfig)
    distill: DistillConfig = field(default_factory=DistillConfig)
    languages: LanguagesConfig = field(default_factory=LanguagesConfig)


_SECTION_CLASSES = {
    "data": DataConfig,
    "tokenizer": TokenizerConfig,
    "model": ModelConfig,
    "train": TrainConfig,
    "decode": DecodeConfig,
    "clean": CleanConfig,
    "distill": DistillConfig,
    "languages": LanguagesConfig,
}
DEVICES = ("auto", "cpu", "cuda")
_CHOICES = {
    ("tokenizer", "type"): ("bpe", "unigram"),
    ("model", "norm"): ("post", "pre"),
    ("model", "activation"): ("relu", "swish"),
    ("model", "positions"): ("interleaved", "concatenated", "fairseq"),
    ("model", "decoder_start"): ("bos", "pad", "eos"),
    ("train", "device"): DEVICES,
    ("train", "precision"): ("fp32", "bf16", "fp16"),
    ("train", "best_metric"): ("bleu", "chrf", "loss"),
    ("clean", "ratio_unit"): ("chars", "words"),
    ("languages", "token"): ("none", "target", "both", "m2m100", "nllb"),
}


def load_config(path: str | Path | None, overrides: list[str] = ()) -> Config:
    """Read a YAML file (or start from defaults when `path` is None) and apply `section.key=value` overrides."""
    raw = _read_yaml(Path(path)) if path is not None else {}
    for item in overrides:
        _apply_override(raw, item)
    return config_from_dict(raw, source=str(path) if path else "config")


MULTILINGUAL_CLIP_NORM = 1.0  # train.clip_norm unset, for a run of several directions


def config_from_dict(raw: dict, source: str = "config") -> Config:
    """Build and validate a Config from nested plain values; errors name the key and `source`."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: expected a mapping with sections {sorted(_SECTION_CLASSES)}")
    allowed = ["output_dir", *_SECTION_CLASSES]
    for key in raw:
        if key not in allowed:
            raise ConfigError(f"{source}: unknown key '{key}' (allowed: {', '.join(allowed)})")
    sections = {}
    for name, cls in _SECTION_CLASSES.items():
        values = raw.get(name) or {}
        if not isinstance(values, dict):
            raise ConfigError(f"{source}: '{name}' must be a mapping of keys to values")
        sections[name] = _build_section(cls, name, values, source)
    output_dir = _coerce(raw.get("output_dir", Config.output_dir), str, "output_dir", source)
    if not output_dir.strip():
        raise ConfigError(f"{source}: output_dir must name a folder, got {output_dir!r}")
    cfg = Config(output_dir=output_dir, **sections)
    if cfg.train.clip_norm is None:
        several = len({(c.src_lang, c.tgt_lang) for c in cfg.data.train if c.src_lang}) > 1
        cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, clip_norm=MULTILINGUAL_CLIP_NORM
                                                                 if several else 0.0))
    _validate(cfg, source)
    return dataclasses.replace(cfg, languages=trained_languages(cfg, source)) if _names_languages(cfg.data) else cfg


def config_to_dict(cfg: Config) -> dict:
    """Nested plain values (lists, not tuples), as YAML, JSON and checkpoints store them."""
    return _plain(dataclasses.asdict(cfg))


def _plain(value):
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def data_identity(cfg: Config) -> dict:
    """The data and tokenizer settings that decide what a run trains on: the prepared cache and a resumed
    run must agree on these. `data.pad_to_multiple` only widens batch tensors, so it may change; with
    `train.init_from`, the tokenizers are that checkpoint's."""
    d = config_to_dict(cfg)
    # An empty data.train, data.clean off and no data.inline_tags are left out, so caches and checkpoints made
    # before they existed still match.
    data = {k: v for k, v in d["data"].items()
            if k != "pad_to_multiple" and not (k in ("train", "clean", "inline_tags") and not v)}
    identity = {"data": data, "tokenizer": d["tokenizer"]}
    if cfg.data.clean:
        identity["clean"] = d["clean"]
    if cfg.train.init_from:
        identity["train"] = {"init_from": cfg.train.init_from}
    return identity


def model_settings(saved: dict) -> dict:
    """A checkpoint's stored `model` section as today's config_to_dict writes it: keys newer than the checkpoint
    at their defaults, the depths it leaves out at its n_layers."""
    return config_to_dict(Config(model=ModelConfig(**saved)))["model"]


def save_config(cfg: Config, path: Path) -> None:
    atomic_write_text(path, yaml.safe_dump(config_to_dict(cfg), sort_keys=False))


def _read_yaml(path: Path) -> dict:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read config: {e}") from None
    try:
        raw = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"{path}:{where}: malformed YAML: {problem}") from None
    return raw if raw is not None else {}


class _UniqueKeyLoader(yaml.SafeLoader):
    """yaml.safe_load, except that a key given twice in one mapping is an error (PyYAML keeps the last). Keys
    merged in (`<<: *base`) are not the mapping's own: its own keys override them, as YAML's merge key says."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


def _apply_override(raw: dict, item: str) -> None:
    key, sep, text = item.partition("=")
    if not sep:
        raise ConfigError(f"--set {item}: expected section.key=value")
    try:
        value = yaml.safe_load(text) if text != "" else ""
    except yaml.YAMLError:
        value = text
    parts = key.strip().split(".")
    if len(parts) == 1 and parts[0] == "output_dir":
        raw["output_dir"] = str(value)
        return
    if len(parts) != 2:
        raise ConfigError(f"--set {item}: expected section.key=value")
    section, name = parts
    if section not in _SECTION_CLASSES:
        raise ConfigError(f"--set {key}: unknown section '{section}' (allowed: {', '.join(_SECTION_CLASSES)})")
    if not isinstance(raw.get(section), dict):
        raw[section] = {}
    raw[section][name] = value


def _build_section(cls, section: str, values: dict, source: str):
    hints = typing.get_type_hints(cls)
    fields = dataclasses.fields(cls)
    known = [f.name for f in fields]
    kwargs = {}
    for name, value in values.items():
        if name not in known:
            raise ConfigError(f"{source}: unknown key '{section}.{name}' (allowed: {', '.join(known)})")
        if hints[name] == tuple[str, ...]:  # a list of strings, e.g. distill.teachers (one string: a list of it)
            kwargs[name] = _build_strings(f"{section}.{name}", value, source)
        elif typing.get_origin(hints[name]) is tuple:  # a list of mappings, e.g. data.train
            kwargs[name] = _build_list(typing.get_args(hints[name])[0], f"{section}.{name}", value, source)
        else:
            kwargs[name] = _coerce(value, hints[name], f"{section}.{name}", source)
    required = [f.name for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    missing = [name for name in required if name not in kwargs]
    if missing:
        raise ConfigError(f"{source}: {section} needs {' and '.join(missing)}")
    return cls(**kwargs)


def _build_strings(key: str, value, source: str) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(item, str) and item for item in items):
        raise ConfigError(f"{source}: {key} must be a list of paths, got {value!r}")
    return tuple(items)


def _build_list(cls, key: str, value, source: str) -> tuple:
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise ConfigError(f"{source}: {key} must be a list of mappings with keys "
                          f"{', '.join(f.name for f in dataclasses.fields(cls))}")
    return tuple(_build_section(cls, f"{key}[{i}]", item, source) for i, item in enumerate(value))


def _coerce(value, annotation, key: str, source: str):
    """Check `value` against a field annotation (int, float, str, bool, or `X | None`)."""
    allowed = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    if value is None and type(None) in allowed:
        return None
    for kind in allowed:
        if kind is bool and isinstance(value, bool):
            return value
        if kind is int and isinstance(value, int) and not isinstance(value, bool):
            return value
        if kind is float and (number := _number(value)) is not None:
            if not math.isfinite(number):
                raise ConfigError(f"{source}: {key} must be a finite number, got {value!r}")
            return number
        if kind is str and isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
    names = " or ".join("null" if k is type(None) else k.__name__ for k in allowed)
    raise ConfigError(f"{source}: {key} must be {names}, got {value!r}")


def _number(value) -> float | None:
    """`value` as a float: a YAML number, or a string that is one (YAML 1.1 reads `1e-3`, without a dot, as a
    string; the user meant the number)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _validate(cfg: Config, source: str) -> None:
    def fail(key: str, why: str):
        raise ConfigError(f"{source}: {key} {why}")

    for (section, name), choices in _CHOICES.items():
        value = getattr(getattr(cfg, section), name)
        if value not in choices:
            fail(f"{section}.{name}", f"must be one of {', '.join(choices)}, got {value!r}")
    m, t, d, k = cfg.model, cfg.train, cfg.decode, cfg.tokenizer
    for key, value in [("model.d_model", m.d_model), ("model.d_ff", m.d_ff), ("model.n_heads", m.n_heads),
                       ("model.n_layers", m.n_layers), ("model.encoder_layers", m.encoder_layers),
                       ("model.decoder_layers", m.decoder_layers), ("model.max_positions", m.max_positions),
                       ("train.max_steps", t.max_steps), ("train.batch_tokens", t.batch_tokens),
                       ("train.accum_steps", t.accum_steps), ("train.warmup_steps", t.warmup_steps),
                       ("train.log_every", t.log_every), ("train.eval_every", t.eval_every),
                       ("train.save_every", t.save_every), ("train.max_bad_steps", t.max_bad_steps),
                       ("tokenizer.max_sentences", k.max_sentences),
                       ("data.max_len", cfg.data.max_len)]:
        if value < 1:
            fail(key, f"must be at least 1, got {value}")
    _validate_corpora(cfg.data, fail)
    _validate_distill(cfg.distill, fail)
    pad = cfg.data.pad_to_multiple
    if pad != "auto" and not (isinstance(pad, int) and pad >= 1):
        fail("data.pad_to_multiple", f"must be auto or a positive integer, got {pad!r}")
    if m.d_model % m.n_heads:
        fail("model.d_model", f"({m.d_model}) must be divisible by model.n_heads ({m.n_heads})")
    if m.d_model % 2:
        fail("model.d_model", f"must be even for sinusoidal positions, got {m.d_model}")
    for key, value in [("model.dropout", m.dropout), ("model.attention_dropout", m.attention_dropout),
                       ("model.activation_dropout", m.activation_dropout),
                       ("train.label_smoothing", t.label_smoothing), ("train.ema_decay", t.ema_decay)]:
        if not 0.0 <= value < 1.0:
            fail(key, f"must be in [0, 1), got {value}")
    for key, value in [("train.lr_scale", t.lr_scale), ("train.adam_eps", t.adam_eps)]:
        if value <= 0:
            fail(key, f"must be positive, got {value}")
    for key, value in [("train.adam_beta1", t.adam_beta1), ("train.adam_beta2", t.adam_beta2)]:
        if not 0.0 <= value < 1.0:
            fail(key, f"must be in [0, 1), got {value}")
    for key, value in [("train.clip_norm", t.clip_norm), ("train.keep_last", t.keep_last),
                       ("train.patience", t.patience)]:
        if value < 0:
            fail(key, f"must not be negative, got {value}")
    check_decode(d, source)
    _validate_clean(cfg.clean, fail)
    if t.patience and not (cfg.data.dev_src or cfg.data.dataset or cfg.data.dev):
        fail("train.patience", "needs a dev set (data.dev_src and data.dev_tgt, data.dev, or data.dataset)")
    if cfg.languages.token != "none" and not (cfg.languages.directions or cfg.languages.codes or
                                              _names_languages(cfg.data)):
        fail("languages.token", f"{cfg.languages.token} needs the languages of the model: name each data.train "
                                "corpus' src_lang and tgt_lang")
    for direction in cfg.languages.directions:
        source_lang, colon, target_lang = direction.partition(":")
        if not (colon and LANGUAGE_CODE.match(source_lang) and LANGUAGE_CODE.match(target_lang)):
            fail("languages.directions", f"entries are source:target language codes (de:en), got {direction!r}")
    if k.vocab_size < 8:
        fail("tokenizer.vocab_size", f"must be at least 8, got {k.vocab_size}")
    if not 0.0 < k.character_coverage <= 1.0:
        fail("tokenizer.character_coverage", f"must be in (0, 1], got {k.character_coverage}")


def _validate_corpora(data: DataConfig, fail) -> None:
    if data.train and (data.train_src or data.train_tgt or data.dataset):
        fail("data.train", "lists the training corpora: leave data.train_src, data.train_tgt and data.dataset unset")
    for i, corpus in enumerate(data.train):
        if corpus.weight is not None and corpus.weight <= 0:
            fail(f"data.train[{i}].weight", f"must be positive, got {corpus.weight}")
        if corpus.tag is not None and (not corpus.tag or any(c.isspace() for c in corpus.tag)):
            fail(f"data.train[{i}].tag", f"must be one token without spaces, got {corpus.tag!r}")
    if not (math.isfinite(data.temperature) and data.temperature > 0):
        fail("data.temperature", f"must be a positive number, got {data.temperature}")
    if not (math.isfinite(data.inline_tags) and 0 <= data.inline_tags <= 1):
        fail("data.inline_tags", f"must be a share from 0 to 1, got {data.inline_tags}")
    if data.dev and (data.dev_src or data.dev_tgt or data.dataset):
        fail("data.dev", "lists the dev sets with their languages: leave data.dev_src, data.dev_tgt and data.dataset "
                         "unset")
    if _names_languages(data) or data.dev:
        _validate_languages(data, fail)


def _names_languages(data: DataConfig) -> bool:
    return any(c.src_lang or c.tgt_lang for c in data.train)


def _validate_languages(data: DataConfig, fail) -> None:
    """A multilingual config: every corpus and dev set names both languages with a code; each dev set's direction
    has training data."""
    for key, entries in (("data.train", data.train), ("data.dev", data.dev)):
        for i, entry in enumerate(entries):
            for side in ("src_lang", "tgt_lang"):
                code = getattr(entry, side)
                if not code:
                    fail(f"{key}[{i}].{side}", "is missing: with languages named, every corpus names both of its "
                                               "languages (src_lang and tgt_lang)")
                if not LANGUAGE_CODE.match(code):
                    fail(f"{key}[{i}].{side}", f"must be a language code such as de, fra or zho_Hans, got {code!r}")
    if data.dev_src or data.dev_tgt:
        fail("data.dev_src", "with languages named: list the dev sets in data.dev, each with its src_lang and "
                             "tgt_lang")
    trained = {(c.src_lang, c.tgt_lang) for c in data.train}
    for i, dev in enumerate(data.dev):
        if (dev.src_lang, dev.tgt_lang) not in trained:
            fail(f"data.dev[{i}]", f"is a dev set of {dev.src_lang}:{dev.tgt_lang}, a direction data.train has no "
                                   f"corpus of (it has {', '.join(sorted(f'{s}:{t}' for s, t in trained))})")


# A language code: ISO 639-1 or 639-3, optionally with a script or region (zho_Hans, pt_BR, zh-Hant).
LANGUAGE_CODE = re.compile(r"^[a-z]{2,3}([_-][A-Za-z0-9]{2,8})?$")


def trained_languages(cfg: Config, source: str) -> LanguagesConfig:
    """The languages section of a config whose data.train names languages: its directions, in the order first
    named, and a target token when there is more than one target language (or the config asks for one)."""
    directions = tuple(dict.fromkeys(f"{c.src_lang}:{c.tgt_lang}" for c in cfg.data.train))
    if cfg.languages.directions and set(cfg.languages.directions) != set(directions):
        raise ConfigError(f"{source}: languages.directions {', '.join(cfg.languages.directions)}: set from "
                          f"data.train's languages ({', '.join(directions)}); leave it out")
    targets = {c.tgt_lang for c in cfg.data.train}
    token = cfg.languages.token if cfg.languages.token != "none" or len(targets) == 1 else "both"
    return LanguagesConfig(directions, token)


def _validate_clean(c: CleanConfig, fail) -> None:
    for key in ("min_words", "max_words", "min_chars", "max_chars", "max_word_chars", "ratio_min_words",
                "copy_min_words", "language_min_words", "misaligned_min_words"):
        if getattr(c, key) < 0:
            fail(f"clean.{key}", f"must not be negative, got {getattr(c, key)}")
    for low, high in (("min_words", "max_words"), ("min_chars", "max_chars")):  # a maximum of 0 is none
        if getattr(c, high) and getattr(c, low) > getattr(c, high):
            fail(f"clean.{low}", f"({getattr(c, low)}) is above clean.{high} ({getattr(c, high)}): every pair "
                 "would be removed")
    if c.length_ratio != 0 and not c.length_ratio >= 1:
        fail("clean.length_ratio", f"must be at least 1, or 0 (off), got {c.length_ratio}")
    for key in ("max_copied_words", "min_alpha_words", "min_alpha_chars", "language_min_prob",
                "language_other_prob", "language_third_prob"):
        if not 0.0 <= getattr(c, key) <= 1.0:
            fail(f"clean.{key}", f"must be in [0, 1], got {getattr(c, key)}")
    if not (math.isfinite(c.word_alignment) and c.word_alignment >= 0):
        fail("clean.word_alignment", f"must be a finite number, not negative, got {c.word_alignment}")
    if c.misaligned_sample < 200:
        fail("clean.misaligned_sample", f"must be at least 200 (4 bins of 50 shuffled pairs), got "
             f"{c.misaligned_sample}")
    if c.align_pairs < 1000:
        fail("clean.align_pairs", f"must be at least 1000 (eflomal fits its model to them), got {c.align_pairs}")
    if not (math.isfinite(c.numbers) and c.numbers >= 0):
        fail("clean.numbers", f"must be a finite number, not negative, got {c.numbers}")


def _validate_distill(d: DistillConfig, fail) -> None:
    if d.beam_size < 1 or d.batch_lines < 1:
        fail("distill.beam_size" if d.beam_size < 1 else "distill.batch_lines", "must be at least 1")
    if not 0.0 <= d.filter_worst < 1.0:
        fail("distill.filter_worst", f"must be in [0, 1), got {d.filter_worst}")
    if d.original_weight <= 0:
        fail("distill.original_weight", f"must be positive, got {d.original_weight}")


def decode_with(cfg: DecodeConfig, sets: list[str], values: dict, source: str = "command line") -> DecodeConfig:
    """`cfg` changed by `decode.key=value` items (`--set`, parsed as YAML), then by `values` (the options given,
    not None), checked as a config file's decode section is."""
    raw = {"decode": dataclasses.asdict(cfg)}
    for item in sets:
        if not item.partition("=")[0].strip().startswith("decode."):
            raise ConfigError(f"--set {item}: only decode.key=value applies when decoding")
        _apply_override(raw, item)
    raw["decode"].update({k: v for k, v in values.items() if v is not None})
    decoded = _build_section(DecodeConfig, "decode", raw["decode"], source)
    check_decode(decoded, source)
    return decoded


def field_comments(cls) -> dict[str, str]:
    """The comment after each field of a config dataclass (`name: type = default  # comment`, and the comment
    lines right below it), by field name: the help of the options made from it."""
    comments, name = {}, None
    for line in inspect.getsource(cls).splitlines():
        field_name, colon, rest = line.strip().partition(":")
        if name is not None and line.strip().startswith("#"):  # the comment goes on below its field
            comments[name] += " " + line.strip()[1:].strip()
            continue
        name = None
        if colon and field_name.isidentifier() and "#" in rest:
            name, comments[field_name] = field_name, rest.split("#", 1)[1].strip()
    return comments


def check_decode(d: DecodeConfig, source: str = "decode options") -> None:
    """The checks of the decode section, also for options given on the command line."""
    def fail(key: str, why: str):
        raise ConfigError(f"{source}: {key} {why}")

    for key, value in [("decode.beam_size", d.beam_size), ("decode.batch_tokens", d.batch_tokens)]:
        if value < 1:
            fail(key, f"must be at least 1, got {value}")
    for key, value in [("decode.topk", d.topk), ("decode.seed", d.seed)]:
        if value < 0:
            fail(key, f"must not be negative, got {value}")
    if not 0.0 < d.topp <= 1.0:  # (NaN fails these comparisons too)
        fail("decode.topp", f"must be in (0, 1], got {d.topp}")
    if not (math.isfinite(d.temperature) and d.temperature > 0):
        fail("decode.temperature", f"must be positive, got {d.temperature}")
    for key, value in [("decode.alpha", d.alpha), ("decode.max_len_a", d.max_len_a),
                       ("decode.max_len_b", d.max_len_b)]:
        if not (math.isfinite(value) and value >= 0):
            fail(key, f"must be a finite number, not negative, got {value}")
