"""A document rendered twice: first to find the words of its lost one-word inline elements (a name, a command),
to ask the model for alone, then for good with what the model writes for each alone (mt/documents/inline_markup.py
places an element whose word the model copies when asked for it alone)."""

from __future__ import annotations

from collections.abc import Callable

TRAILING = ".,;:!?)\"'»“”"  # punctuation a target word carries that an element's own text may not
AROUND = "([{\"'«“" + TRAILING  # punctuation a target word may carry around a copy


class Fragments:
    """A document rendered twice: first to find the words of lost one-word elements to ask for alone (`find`),
    then for good with what the model writes for each alone (`rendered`). A caller translates between the two,
    as it can (`Rendering`: the command line in one call, a server awaiting its decoder). Each render is given
    this object (`render(fragments)`), which every element placed meanwhile consults."""

    def __init__(self):
        self.asked: dict[str, None] = {}  # in the order asked
        self.given: dict[str, str] | None = None

    @property
    def asking(self) -> bool:
        """Whether this render only finds the words to ask for (its output is thrown away; a document that writes
        into itself must not)."""
        return self.given is None

    def find(self, render: Callable[[Fragments], object]) -> list[str]:
        """The words render() asks for alone (its output is thrown away)."""
        render(self)
        return list(self.asked)

    def rendered(self, render: Callable[[Fragments], object], translations: list[str]):
        """render() for good, given the translations alone of the words `find` returned, in its order."""
        self.given = dict(zip(self.asked, translations))
        return render(self)

    def copied(self, word: str) -> bool:
        """Whether the model writes `word` unchanged when asked for it alone; False (and `word` asked for) before
        the translations are given."""
        if self.given is None:
            self.asked.setdefault(word)
            return False
        return self.given.get(word, "").strip(AROUND) == word


class Rendering:
    """render(fragments) in the two steps a caller runs, translating between them: `words` to translate alone (a
    first render, its output thrown away), then `rendered` with their translations, in order."""

    def __init__(self, render: Callable[[Fragments], object]):
        self.render, self.fragments = render, Fragments()

    def words(self) -> list[str]:
        return self.fragments.find(self.render)

    def rendered(self, alone: list[str]):
        return self.fragments.rendered(self.render, alone)
