"""The messages of a localization file (a PO entry's msgstr, an XLIFF unit's target, a line given with
`--placeholders`), translated with their placeholders kept (mt/documents/placeholders.py).

A message is translated from one or more candidate sources, tried in order; its translation is the first whose
placeholders all come back, else None (the caller keeps no machine translation and marks it for review). A
plural form is first tried with its number filled in (`numbered`: "%d files" read as "5 files" for a form of 5,
so that the model sees the number its words agree with), the number then turned back into its placeholder; if
the number does not come back exactly once, with the placeholder protected like any other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mt.documents.fragments import Fragments
from mt.documents.inline_markup import unit_sentences
from mt.documents.placeholders import Protected, kept, protected

# The placeholder a plural's number fills: an integer printf directive, or braces named as a count.
COUNT = re.compile(r"%(?:\d+\$|\([\w.-]+\))?[-+#0']*\d*(?:hh|h|ll|l|j|z|t)?[diu]"
                   r"|\{(?:0|n|num|number|count|cnt|total|)(?::[^{}\s]*)?\}")


@dataclass(frozen=True)
class Localization:
    """What a localization file is translated for: its target language (a file's own header may name it) and
    whether entries already translated are translated again."""
    target: str | None = None
    retranslate: bool = False
    memory: object = None  # a translation memory (mt/data/translation_memories.py `Memory`) consulted first

    def retargets(self, own: str | None) -> bool:
        """Whether a catalogue whose own language is `own` (a PO's Language, XLIFF's target-language, Qt's
        language; empty or None: unset) is to say the target language instead, as msginit writes a new
        language's file: the target is known and `own` is unset or another language (pt_BR is pt's)."""
        return bool(self.target) and _primary(own or "") != _primary(self.target)

    def replaces(self, own: str | None) -> bool:
        """Whether the translations already in such a catalogue are of another language than the target, and so
        are translated again."""
        return self.retranslate or (bool(own) and self.retargets(own))


def _primary(language: str) -> str:
    """A language tag's primary subtag, lower case: de for de_DE, de-AT or de_DE.UTF-8@euro."""
    return language.strip().replace("-", "_").split("_")[0].split(".")[0].split("@")[0].lower()


@dataclass
class Candidate:
    """A source to translate a message from: its text as the model reads it and with what it must come back;
    for a numbered one, the number that stands for `count` (a placeholder of `source`)."""
    source: str
    text: Protected
    number: int | None = None
    count: str = ""

    @property
    def sentences(self) -> list[str]:
        return unit_sentences(self.text.unit)

    def translated(self, given, escape=str, fragments: Fragments | None = None) -> str | None:
        """The translation from the next of `given` ((text, alignment) per sentence), its text through `escape`
        (XML's); None if a placeholder does not come back exactly once."""
        sentences = [next(given) for _ in self.sentences]
        text = self._numbered(self.text.rendered(iter(sentences), fragments=fragments))
        if text is None or not kept(self.source, text):
            return None
        return text if escape is str else self._numbered(self.text.rendered(iter(sentences), escape, fragments))

    def _numbered(self, text: str) -> str | None:
        """`text` with the number turned back into its placeholder; None if it is not there exactly once."""
        if self.number is None:
            return text
        found = list(re.finditer(rf"(?<![\d.,]){self.number}(?![\d]|[.,]\d)", text))
        if len(found) != 1:
            return None
        return text[:found[0].start()] + self.count + text[found[0].end():]


def plain(source: str, whole: re.Pattern | None = None) -> Candidate:
    """`source` with its placeholders (and what `whole` matches) taken out."""
    return Candidate(source, protected(source, whole))


def numbered(source: str, number: int, count_pattern: re.Pattern = COUNT) -> Candidate | None:
    """`source` with `number` in place of its count placeholder (the first that `count_pattern` matches: Qt's
    is `%n`); None if it has none."""
    count = count_pattern.search(source)
    if count is None:
        return None
    text = source[:count.start()] + str(number) + source[count.end():]
    return Candidate(source, protected(text), number, count.group(0))


class Messages:
    """Messages, each with its candidates: `sentences` to translate, and `translated`, each message's
    translation or None. A message whose source the memory holds is not translated: `remembered` maps its index
    to the memory's translation."""

    def __init__(self, memory=None):
        self.candidates: list[list[Candidate]] = []
        self.memory, self.remembered = memory, {}

    def add(self, candidates: list[Candidate | None]) -> int:
        """A message; its index."""
        candidates = [c for c in candidates if c is not None]
        found = self.memory.get(candidates[-1].source) if self.memory is not None and candidates else None
        if found is not None:
            self.remembered[len(self.candidates)] = found
        self.candidates.append([] if found is not None else candidates)
        return len(self.candidates) - 1

    @property
    def sentences(self) -> list[str]:
        return [s for message in self.candidates for c in message for s in c.sentences]

    def translated(self, translations: list[tuple[str, str | None]], escape=str,
                   fragments: Fragments | None = None) -> list[str | None]:
        given, out = iter(translations), []
        for index, message in enumerate(self.candidates):
            if index in self.remembered:
                out.append(escape(self.remembered[index]))
                continue
            found = [c.translated(given, escape, fragments) for c in message]  # each candidate takes its own sentences
            out.append(next((t for t in found if t is not None), None))
        return out


class MessageText:
    """One text as one message (`/translate` with `placeholders`): `render` gives its translation, or the text
    itself where a placeholder would not come back (`kept` then False)."""

    def __init__(self, text: str):
        self.text, self.messages, self.kept = text, Messages(), True
        self.messages.add([plain(text)])
        self.sentences = self.messages.sentences

    def render(self, translations: list[tuple[str, str | None]], fragments: Fragments | None = None) -> str:
        found = self.messages.translated(translations, fragments=fragments)[0]
        self.kept = found is not None
        return self.text if found is None else found
