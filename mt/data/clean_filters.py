"""The filters of `mt clean`: each a small function `(pair, cfg) -> True when the pair must go`, listed in
FILTERS cheapest first; the first one that removes a pair is the one the report counts.

Their settings are the `clean` section of the config (mt/config.py, CleanConfig), where each default says the
pipeline it comes from; docs/cleaning.md describes them. Dropping duplicates needs state across pairs: it is the
driver's (mt/data/clean.py), between the cheap filters and the costly ones.
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from collections import Counter
from functools import cached_property

from mt.config import CleanConfig
from mt.data.language_id import language_probabilities


class Pair:
    """One sentence pair and its languages; what several filters need (words) is computed once."""

    def __init__(self, src: str, tgt: str, src_lang: str, tgt_lang: str):
        self.src, self.tgt, self.src_lang, self.tgt_lang = src, tgt, src_lang, tgt_lang

    @cached_property
    def src_words(self) -> list[str]:
        return self.src.split()

    @cached_property
    def tgt_words(self) -> list[str]:
        return self.tgt.split()

    def sides(self):
        """(text, words, language) of the source, then of the target."""
        return ((self.src, self.src_words, self.src_lang), (self.tgt, self.tgt_words, self.tgt_lang))

    @cached_property
    def own_words(self) -> tuple[int, int]:
        """The source's and the target's count of words of their own (`own_words`)."""
        return own_words(self.src_words, self.tgt_words), own_words(self.tgt_words, self.src_words)


_EDGE = "\"'`«»„“”‚‘’‹›()[]{}<>.,;:!?…*"  # punctuation around a word: »Schatten«, (DVI), a list's commas
_WORD = re.compile(r"[^\W\d_]+(?:[-'’][^\W\d_]+)*")  # letters, hyphens and apostrophes between them
_JOINS = re.compile(r"[-'’]")
# scripts written without spaces between words: Thai, Lao, Myanmar, Khmer, kana, CJK ideographs
_UNSPACED = re.compile("[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff"
                       "\uf900-\ufaff]")


def _bare(word: str) -> str:
    return word.strip(_EDGE)


def _is_word(word: str) -> bool:
    """Letters with at most a first capital (in each part of a compound: Perl-Modul): a word of a language, not an
    acronym (SQL), a CamelCase name (LXQt), a path, an option, a version or a number."""
    return bool(_WORD.fullmatch(word)) and not any(ch.isupper() for part in _JOINS.split(word) for ch in part[1:])


def own_words(words: list[str], other: list[str]) -> int:
    """The words of a side (`_is_word`) that the other side lacks, ignoring case: what a language identifier can
    judge the side by. A name or a term that both sides share (Lightweight Window Manager, Debian, module)
    says nothing of the side's language. A run of letters of an unspaced script counts a word per two characters."""
    theirs = {_bare(w).casefold() for w in other}
    count = 0
    for word in map(_bare, words):
        if _is_word(word) and word.casefold() not in theirs:
            count += max(1, len(_UNSPACED.findall(word)) // 2)
    return count


def empty(p: Pair, c: CleanConfig) -> bool:
    return not p.src.strip() or not p.tgt.strip()


def length(p: Pair, c: CleanConfig) -> bool:
    for text, words, _ in p.sides():
        if len(words) < c.min_words or (c.max_words and len(words) > c.max_words):
            return True
        if len(text) < c.min_chars or (c.max_chars and len(text) > c.max_chars):
            return True
        if c.max_word_chars and max(map(len, words), default=0) > c.max_word_chars:
            return True
    return False


def length_ratio(p: Pair, c: CleanConfig) -> bool:
    words = len(p.src_words), len(p.tgt_words)
    lengths = words if c.ratio_unit == "words" else (sum(map(len, p.src_words)), sum(map(len, p.tgt_words)))
    short, long = sorted(lengths)
    return max(words) > c.ratio_min_words and long > c.length_ratio * max(short, 1)


def copies(p: Pair, c: CleanConfig) -> bool:
    """The source as target, ignoring case, when it reads as a sentence: `copy_min_words` lowercase words."""
    if p.src.strip().casefold() != p.tgt.strip().casefold():
        return False
    return min(sum(_is_word(w) and w.islower() for w in map(_bare, words)) for words in (p.src_words, p.tgt_words)) \
        >= c.copy_min_words


def copied_words(p: Pair, c: CleanConfig) -> bool:
    """Target mostly source words: an untranslated or half-translated target."""
    source = {w.casefold() for w in p.src_words}
    copied = sum(w.casefold() in source for w in p.tgt_words)
    return copied >= c.max_copied_words * max(len(p.tgt_words), 1)


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ufffd]")  # C0 and C1 controls but tab, and U+FFFD
_MOJIBAKE_HINT = re.compile(r"[ÃÂâÅÄÐÑ][\x80-\xbf\u0152-\u0178\u02c6-\u02dc\u2013-\u2122]")


def encoding(p: Pair, c: CleanConfig) -> bool:
    """Replacement or control characters that the other side lacks (a U+FFFD quoted on both sides is text), or
    mojibake: UTF-8 bytes that were decoded as cp1252 or latin-1."""
    return (sorted(_CONTROL.findall(p.src)) != sorted(_CONTROL.findall(p.tgt)) or
            _is_mojibake(p.src) or _is_mojibake(p.tgt))


def _is_mojibake(text: str) -> bool:
    if not _MOJIBAKE_HINT.search(text):
        return False
    for wrong in ("cp1252", "latin-1"):
        try:
            if text.encode(wrong).decode("utf-8") != text:
                return True
        except UnicodeError:
            continue
    return False


_TAGS = "a|b|i|u|p|br|hr|div|span|img|table|tr|td|th|ul|ol|li|h[1-6]|em|strong|html|head|body|script|style|meta|link"
# markup: a closing tag, a void or self-closing tag, any tag with attributes; an opening tag alone is counted
# only when its element is also closed on that side (`the <meta> tag`, `»<HTML>«-Element` name one)
_MARKUP = re.compile(rf"</(?:{_TAGS})\s*>|<(?:br|hr|img)\s*/?>|<[a-zA-Z][a-zA-Z0-9]*\s*/>|"
                     r"<[a-zA-Z][a-zA-Z0-9]*\s+[a-zA-Z-]+=[\"'][^<>]*>", re.IGNORECASE)
_ENTITY = re.compile(r"&(?:[a-zA-Z]{2,8}|#\d{2,5}|#x[0-9a-fA-F]{2,4});")  # &amp; &#160; &#xa0;


def html(p: Pair, c: CleanConfig) -> bool:
    """Markup on a side, or entities the other side lacks (both sides escaped alike, as `&lt;–&gt;` in a package
    description, is text)."""
    return bool(_MARKUP.search(p.src) or _MARKUP.search(p.tgt) or
                sorted(_ENTITY.findall(p.src)) != sorted(_ENTITY.findall(p.tgt)))


# scheme:// (or www.), a dotted host, then anything up to a space, less a closing punctuation mark
_URL = re.compile(r"\b(?:[a-z][a-z0-9+.-]*://|www\.)[a-z0-9-]+(?:\.[a-z0-9-]+)+(?:[^\s<>\"]*[^\s<>\".,;:!?)\]])?",
                  re.IGNORECASE)


def urls(p: Pair, c: CleanConfig) -> bool:
    return _URL.findall(p.src) != _URL.findall(p.tgt)


# every run of digits, also inside a word (mp3, x86, Python3; OpusCleaner's num_mismatch takes whole words
# only), with its decimal separators, and its thousands separators (a mark or a space before three digits)
_NUMBER = re.compile(r"(?<!\d)\d+(?:(?:[.,:]|[ \u00a0\u202f](?=\d{3}(?!\d)))\d+)*")
_THOUSANDS = re.compile(r"(?<=\d)[.,\u00a0\u202f ](?=\d{3}(?!\d))")


def _numbers(text: str) -> Counter:
    """The numbers of `text`, each as its parts without leading zeros or a last part 0: 1,000.5 (en) and 1.000,5
    (de) are both 1000*5, .005 and 0,005 both 5, 12 784 is 12784, PAR-2.0 and PAR2 both 2."""
    return Counter(_key(parts) for parts, _ in _number_parts(text))


def _number_parts(text: str) -> list[tuple[list[str], bool]]:
    """Each number's parts, and whether it is part of a word (a letter touches it: Qt5, libxine1, 3D)."""
    return [([part.lstrip("0") or "0" for part in re.split(r"[.,:]", _THOUSANDS.sub("", m.group()))],
             _touches_letter(text, m.start(), m.end())) for m in _NUMBER.finditer(text)]


def _touches_letter(text: str, start: int, end: int) -> bool:
    return (start > 0 and text[start - 1].isalpha()) or (end < len(text) and text[end].isalpha())


def _key(parts: list[str]) -> str:
    return "*".join(parts[:-1] if len(parts) > 1 and parts[-1] == "0" else parts)


def numbers(p: Pair, c: CleanConfig) -> bool:
    """OpusCleaner's num_mismatch: (shared numbers + 1) / (differing numbers + 1) below `clean.numbers`."""
    src, tgt = set(_numbers(p.src)), set(_numbers(p.tgt))
    return bool(src or tgt) and (len(src & tgt) + 1) / (len(src ^ tgt) + 1) < c.numbers


def changed_numbers(p: Pair, c: CleanConfig) -> bool:
    """As many numbers on each side, not the same ones, and those that differ pair up by shape (as many parts,
    each within a digit of its length, in a word on both sides or on neither): a number changed (a version, a
    count, a typo). Different counts or shapes are a translator's choice: a number written as a word (fünf / 5),
    a decade (40er / 1940s), Jahr 2000 / Y2K, Python 3 / Qt5."""
    src_parts, tgt_parts = _number_parts(p.src), _number_parts(p.tgt)
    src, tgt = (Counter(_key(parts) for parts, _ in side) for side in (src_parts, tgt_parts))
    if len(src_parts) != len(tgt_parts) or src == tgt:
        return False
    shapes: dict[str, list] = {}  # 4.0 has the shape of 4.5, not of 4
    for parts, in_word in src_parts + tgt_parts:
        shapes.setdefault(_key(parts), []).append((parts, in_word))
    left = list((tgt - src).elements())
    for number in (src - tgt).elements():
        match = next((other for other in left
                      if any(_same_shape(a, b) for a in shapes[number] for b in shapes[other])), None)
        if match is None:
            return False
        left.remove(match)
    return True


def _same_shape(a: tuple[list[str], bool], b: tuple[list[str], bool]) -> bool:
    (a_parts, a_in_word), (b_parts, b_in_word) = a, b
    return a_in_word == b_in_word and len(a_parts) == len(b_parts) and all(
        abs(len(x) - len(y)) <= 1 for x, y in zip(a_parts, b_parts))


_TERMINAL = re.compile(r"[.…?!]")


def punctuation(p: Pair, c: CleanConfig) -> bool:
    """OpusFilter's TerminalPunctuationFilter (Vázquez et al., 2019): the difference in terminal punctuation
    counts plus the repeats beyond the first on each side, scored -log(1 + that)."""
    s, t = len(_TERMINAL.findall(p.src)), len(_TERMINAL.findall(p.tgt))
    penalty = abs(s - t) + max(s - 1, 0) + max(t - 1, 0)
    return -math.log(1 + penalty) < c.punctuation


_SCRIPTS = {  # the script of a language's letters, by the Unicode names' first word; unlisted: Latin
    **dict.fromkeys(["ru", "uk", "bg", "sr", "mk", "be", "kk", "ky", "mn", "tg"], "CYRILLIC"),
    "el": "GREEK", "ar": "ARABIC", "fa": "ARABIC", "ur": "ARABIC", "he": "HEBREW", "yi": "HEBREW",
    "hi": "DEVANAGARI", "mr": "DEVANAGARI", "ne": "DEVANAGARI", "bn": "BENGALI", "ta": "TAMIL", "te": "TELUGU",
    "th": "THAI", "ka": "GEORGIAN", "hy": "ARMENIAN", "ko": "HANGUL", "ja": "CJK", "zh": "CJK",
}


@functools.cache
def _script_letters(script: str) -> tuple[re.Pattern, re.Pattern]:
    """Regexes of one letter of `script` (its Unicode names' first word) and of a word holding one, built once
    from the character database's Basic Multilingual Plane."""
    names = (script, "HIRAGANA", "KATAKANA") if script == "CJK" else (script,)
    letters = [ch for ch in map(chr, range(0x10000)) if ch.isalpha() and unicodedata.name(ch, "").startswith(names)]
    ranges, start = [], 0
    for i in range(1, len(letters) + 1):  # runs of consecutive code points, as a-b
        if i == len(letters) or ord(letters[i]) != ord(letters[i - 1]) + 1:
            ranges.append(re.escape(letters[start]) + ("-" + re.escape(letters[i - 1]) if i - 1 > start else ""))
            start = i
    letter = "[" + "".join(ranges) + ("\U00020000-\U0003134f]" if script == "CJK" else "]")  # + CJK extensions B-G
    return re.compile(letter), re.compile(rf"\S*?{letter}\S*")


_ALNUM = re.compile(r"[^\W_]")  # a letter or a digit


def script_ratio(p: Pair, c: CleanConfig) -> bool:
    """One side has too few letters of its script and the other enough: among the words (a word counts with one
    such letter), and among their characters (Mozilla's clean_parallel: RATIO_ALPHA_WORDS, RATIO_ALPHA_CHARS).
    Both sides mostly numbers and symbols (Qt 5, PCI-1602, a formula) is a translation; a mark standing alone
    (French `Windows 7 ;`, « », =) is no word."""
    short = [_few_letters([w for w in words if _ALNUM.search(w)], lang, c) for _, words, lang in p.sides()]
    return short[0] != short[1]


def _few_letters(words: list[str], lang: str, c: CleanConfig) -> bool:
    letter, word = _script_letters(_SCRIPTS.get(lang, "LATIN"))
    text = " ".join(words)
    return (len(word.findall(text)) < c.min_alpha_words * len(words) or
            len(letter.findall(text)) < c.min_alpha_chars * sum(map(len, words)))


def language(p: Pair, c: CleanConfig) -> bool:
    """A side that lid.176 can judge, `language_min_words` words of its own, and finds in another language: its
    own below `language_min_prob`, and the pair's other language at `language_other_prob` (untranslated,
    swapped) or a third one at `language_third_prob`. On short or technical lines the model is unsure or wrong
    (0.84 French for `a parser for XML,`), so those are kept: see docs/cleaning.md."""
    sides = ((p.src, p.src_lang, p.tgt_lang), (p.tgt, p.tgt_lang, p.src_lang))
    return any(own >= c.language_min_words and _wrong_language(text, lang, other, c)
               for own, (text, lang, other) in zip(p.own_words, sides))


def _wrong_language(text: str, lang: str, other: str, c: CleanConfig) -> bool:
    if language_probabilities(text, k=1).get(lang, 0.0) >= c.language_min_prob:
        return False  # the most probable: most sides, without the model's whole distribution
    probs = language_probabilities(text)
    if probs.get(lang, 0.0) >= c.language_min_prob:
        return False
    third = max((prob for code, prob in probs.items() if code not in (lang, other)), default=0.0)
    return probs.get(other, 0.0) >= c.language_other_prob or third >= c.language_third_prob


# (name, filter, on): cheapest first. "invalid_utf8" (when reading) and "duplicate" (mt/data/clean.py) come between.
CHEAP = [
    ("empty", empty, lambda c: c.empty),
    ("length", length, lambda c: bool(c.min_words or c.max_words or c.min_chars or c.max_chars or c.max_word_chars)),
    ("length_ratio", length_ratio, lambda c: c.length_ratio > 0),
    ("copy", copies, lambda c: c.copies),
]
COSTLY = [
    ("encoding", encoding, lambda c: c.encoding),
    ("html", html, lambda c: c.html),
    ("urls", urls, lambda c: c.urls),
    ("numbers", numbers, lambda c: c.numbers > 0),
    ("changed_numbers", changed_numbers, lambda c: c.changed_numbers),
    ("punctuation", punctuation, lambda c: c.punctuation is not None),
    ("copied_words", copied_words, lambda c: c.max_copied_words > 0),
    ("script", script_ratio, lambda c: c.min_alpha_words > 0 or c.min_alpha_chars > 0),
    ("language", language, lambda c: c.language_id),
]
# "misaligned" (mt/data/misalignment.py) and "word_alignment" score blocks of pairs together, after all the others
FILTER_NAMES = ["invalid_utf8", *(n for n, _, _ in CHEAP), "duplicate", *(n for n, _, _ in COSTLY), "misaligned",
                "word_alignment"]


def active(filters, c: CleanConfig) -> list:
    """The (name, function) of the filters `c` turns on, in order."""
    return [(name, f) for name, f, on in filters if on(c)]


def first_failed(pair: Pair, filters, c: CleanConfig) -> str | None:
    """The name of the first filter that removes `pair`, or None when all keep it."""
    for name, f in filters:
        if f(pair, c):
            return name
    return None
