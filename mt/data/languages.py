"""The languages of a model: the directions it translates, and how its input names the target language.

A model trained on more than one target language is told which one to produce by a token before the source,
`>>xx<<` for target xx (Johnson et al. 2017, "Google's Multilingual Neural Machine Translation System"; the form
OPUS-MT's multi-target models use): languages.token `target`. The token is one piece of the source vocabulary (a
sentencepiece user-defined symbol), put before the source's own pieces: training does it per corpus
(mt/data/prepare.py), decoding per line (`source_prefix`, which mt/decoding/lines.py puts before each source).

languages.token `both`, the default of a model trained on more than one target language, also starts the target
with the token (`target_prefix`), forced as the first output and dropped from the text, as fairseq's multilingual
task does with --encoder-langtok tgt --decoder-langtok. Told the target only in its source, the demo's model of
four directions learned to write each language but hardly used the source: on the shipped corpora its greedy dev
BLEU was 1.8 / 1.4 / 2.0 at updates 400 / 800 / 1,200 (and 2.5 at 4,800), while with `both` it was 1.9 / 4.8 /
6.6 (and 17.9 at 4,800; docs/multilingual.md).

An imported M2M100 model (Fan et al. 2021, "Beyond English-Centric Multilingual Machine Translation") has another
convention, languages.token `m2m100`: the source starts with its own language's token `__de__`, and the target
with the target language's `__fr__` (`target_prefix`), which decoding forces as the first output and drops from
the text; it translates between any two of its languages (languages.codes). NLLB-200 (NLLB Team 2022), an
M2M100 model with its own tokenizer, does the same with the language codes themselves as tokens, `deu_Latn`:
languages.token `nllb`.
"""

from __future__ import annotations

import math

from mt.config import Config, LanguagesConfig
from mt.data.tokenizer import Tokenizer
from mt.errors import MtError


def target_token(lang: str) -> str:
    """The piece that asks for target language `lang`: >>de<<."""
    return f">>{lang}<<"


def m2m100_token(lang: str) -> str:
    """M2M100's piece of language `lang`: __de__."""
    return f"__{lang}__"


NAMED_BOTH = ("m2m100", "nllb")  # conventions whose source names its language and whose target starts with its own
TARGET_TOKENS = ("target", "both")  # conventions whose source starts with the target's >>xx<<


def language_piece(token: str, lang: str) -> str:
    """The piece of language `lang` under convention `token` (one of NAMED_BOTH): __de__, or deu_Latn itself."""
    return m2m100_token(lang) if token == "m2m100" else lang


def directions(cfg: Config) -> list[tuple[str, str]]:
    """The (source, target) directions a model knows: every pair of languages.codes (a many-to-many model), its
    languages.directions, or the one that data.src_lang and data.tgt_lang name; none for a model trained without
    languages named."""
    if cfg.languages.codes:
        return [(s, t) for s in cfg.languages.codes for t in cfg.languages.codes if s != t]
    if cfg.languages.directions:
        return [tuple(d.split(":", 1)) for d in cfg.languages.directions]
    if cfg.data.src_lang and cfg.data.tgt_lang:
        return [(cfg.data.src_lang, cfg.data.tgt_lang)]
    return []


def described(known: list[tuple[str, str]]) -> str:
    """de:en, en:de; or, for many, `9900 directions between 100 languages (af, am, ...)`."""
    if len(known) <= 12:
        return ", ".join(f"{s}:{t}" for s, t in known)
    languages = sorted({lang for pair in known for lang in pair})
    return f"{len(known)} directions between {len(languages)} languages ({', '.join(languages)})"


def pick_direction(cfg: Config, source: str | None, target: str | None, model: str,
                   options: tuple[str, str] = ("--source-lang", "--target-lang")) -> tuple[str, str] | None:
    """The direction asked for (--source-lang, --target-lang) among the model's: a missing source is any that goes
    to `target`; a missing target is the only one there is. None for a model without languages asked for none.
    A direction it does not know, or a multilingual model without a target, is an MtError naming `model` and
    the directions it knows; `options` are how the user gives the languages."""
    known = directions(cfg)
    if not known:
        if source is None and target is None:
            return None
        raise MtError(f"{model}: trained on one direction without languages named, so it takes no "
                      f"{options[0]}/{options[1]}")
    matching = [(s, t) for s, t in known if source in (None, s) and target in (None, t)]
    if not matching:
        asked = f"{source}:{target}" if source and target else f"from {source}" if source else f"into {target}"
        raise MtError(f"{model}: translates {described(known)}, not {asked}")
    targets = {t for _, t in matching}
    if len(targets) > 1:
        raise MtError(f"{model}: translates {described(known)}; say which target with {options[1]}")
    if source is None and cfg.languages.token in NAMED_BOTH:
        raise MtError(f"{model}: translates {described(known)} and is told the source language; say which with "
                      f"{options[0]}")
    return (source or matching[0][0], matching[0][1])


def source_prefix(cfg: LanguagesConfig, tok: Tokenizer, direction: tuple[str | None, str | None],
                  where: str) -> list[int]:
    """The token ids a source of this direction starts with: [>>target<<] with languages.token target or both,
    [__source__] with m2m100 ([deu_Latn] with nllb), else none."""
    if cfg.token == "none":
        return []
    source, target = direction
    if cfg.token in NAMED_BOTH:
        return [_piece(tok, language_piece(cfg.token, source), source, "source", where)]
    if target is None:
        raise MtError(f"{where}: a multilingual model needs the target language (--target-lang)")
    return [_piece(tok, target_token(target), target, "source", where)]


def target_prefix(cfg: LanguagesConfig, tok: Tokenizer, direction: tuple[str | None, str | None],
                  where: str) -> list[int]:
    """The token ids a target of this direction starts with, forced when decoding: [>>target<<] with both,
    [__target__] with m2m100 ([fra_Latn] with nllb)."""
    if cfg.token == "both":
        return [_piece(tok, target_token(direction[1]), direction[1], "target", where)]
    if cfg.token not in NAMED_BOTH:
        return []
    return [_piece(tok, language_piece(cfg.token, direction[1]), direction[1], "target", where)]


def _piece(tok: Tokenizer, piece: str, lang: str | None, side: str, where: str) -> int:
    found = tok.piece_id(piece) if lang is not None else None
    if found is None:
        raise MtError(f"{where}: {piece} is not one piece of the {side} vocabulary, so the model cannot be asked "
                      f"for {lang}")
    return found


def tokens_of(cfg: LanguagesConfig) -> list[str]:
    """The language tokens a model of these languages needs as pieces: one per target (token target), or one per
    language (m2m100, which a config may also train from scratch)."""
    pairs = [d.split(":", 1) for d in cfg.directions]
    if cfg.token in NAMED_BOTH:
        return list(dict.fromkeys(language_piece(cfg.token, lang) for pair in pairs for lang in pair))
    return list(dict.fromkeys(target_token(t) for _, t in pairs)) if cfg.token in TARGET_TOKENS else []


def temperature_weights(sizes: list[int], temperature: float) -> list[float]:
    """Each corpus' share of the batches when sampled with a temperature (Arivazhagan et al. 2019, section 4.2):
    p_i proportional to (n_i / N) ** (1 / T). T = 1 keeps the sizes' proportions; larger T evens them out."""
    total = sum(sizes)
    raw = [(n / total) ** (1.0 / temperature) if n else 0.0 for n in sizes]
    return [w / math.fsum(raw) for w in raw]
