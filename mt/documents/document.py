"""The shape every document format has (`Document`: its sentences, and `render` giving a `Rendered`), and the one
front end that translates a document in steps (`DocumentTranslation`), which `mt translate -i` takes in turn and
`/translate_file` awaits one by one, as both do with the text front end's `TextBatch`.

A document's sentences are translated a part at a time (a part decodes as it would alone, beside the others:
the command line's progress, a background job's); it is then rendered once to find the words of lost inline
elements to translate alone (mt/documents/inline_markup.py `Fragments`), and again, for good, with them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from mt.documents.fragments import Fragments, Rendering

SENTENCES_A_PART = 256  # a document's sentences are searched this many at a time


@dataclass(frozen=True)
class Rendered:
    """A translated document: its bytes, and what its rendering left for a person to review (one line each)."""
    data: bytes
    notes: list[str] = field(default_factory=list)


class Document(Protocol):
    """A document read by mt/documents/formats.py `read_document`."""
    sentences: list[str]

    def render(self, translations: list[tuple[str, str | None]], fragments: Fragments | None = None) -> Rendered:
        """The document with each sentence's (text, word alignment), the alignment placing its inline markup."""


class DocumentTranslation(Rendering):
    """One document's translation in the steps its caller runs: each of `parts` translated (its sentences'
    (text, alignment)) and given to `add`; then `words` to translate alone, and their translations to
    `rendered`, which gives the `Rendered` document."""

    def __init__(self, document: Document, part: int = SENTENCES_A_PART):
        super().__init__(lambda fragments: document.render(self.found, fragments))
        sentences = document.sentences
        self.parts = [sentences[at:at + part] for at in range(0, len(sentences), max(part, 1))]
        self.found: list[tuple[str, str | None]] = []

    def add(self, found: list[tuple[str, str | None]]) -> None:
        """The translations of the next part."""
        self.found += found
