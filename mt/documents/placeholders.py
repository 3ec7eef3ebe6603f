"""Placeholders kept out of what the model sees, and put back where the word alignment says, each exactly once.

A message of software (a PO entry, an XLIFF unit, a line given with `--placeholders`) holds text the program fills
in or reads: printf directives (`%s`, `%d`, `%1$s`, `%(name)s`, `%%`), Qt's and KDE's `%1` and `%L1`, braces (`{0}`,
`{name}`, `{0:.2f}`, `{{ var }}`), shell and template variables (`$HOME`, `${x}`), entities (`&amp;`), inline XML or
HTML tags, and the markers Weblate puts in place of a string's own placeholders before it asks a machine translation
service (`[X7X]`: `WEBLATE_MARKER`). Each is taken out of the text (`protected`): the model translates the words
around it, and the placeholder goes back as HTML's inline markup does (mt/documents/inline_markup.py): a tag pair
around the target words aligned to the words inside it, a lone placeholder where the word after it went (else after
the word before it), with a space either side where the source had one. A printf directive with the space flag
(`% d`) is not taken for one: "100% sure" is text.

`kept` is the check: the rendered text holds every placeholder of the source exactly as often, unchanged, and
no other. A translation that fails it (the model wrote a `%s` of its own) is not to be written.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from mt.documents.fragments import Fragments
from mt.documents.inline_markup import Tag, Unit, render_unit

WEBLATE_MARKER = re.compile(r"\[X\d+X\]")  # Weblate's stand-in for a placeholder at that offset: [X7X]
PLACEHOLDER = re.compile(
    WEBLATE_MARKER.pattern  # first: [X7X] is one placeholder, not a bracket around X7X
    + r"|%(?:\d+\$|\([\w.-]+\))?[-+#0']*(?:\*|\d+)?(?:\.(?:\*|\d+))?(?:hh|h|ll|l|L|q|j|z|t|I64|I32)?"
    r"[diouxXeEfFgGaAcsSpn%@r]"  # printf: %s, %1$s, %(name)s, %-5.2f, %lld, Objective-C's %@
    r"|%L?\d+"  # Qt's and KDE's numbered arguments: %1, %L2
    r"|\{\{.*?\}\}|\{[\w.\[\]]*(?:![rsa])?(?::[^{}\s]*)?\}"  # braces: {{ var }}, {0}, {name}, {0:.2f}, {}
    r"|\$\{[^{}\s]+\}|\$[A-Za-z_]\w*"  # ${x}, $HOME
    r"|&(?:#\d+|#x[0-9A-Fa-f]+|[A-Za-z]\w*);"  # entities
    r"|<(/?)([A-Za-z][\w:.-]*)(?:\s[^<>]*?)?(/?)>")  # tags: </close>, <void/>, <open ...>
JOINING = re.compile(r"[^\w\s<>]*")  # what may join lone placeholders into one
PAIRS = dict(zip("([{\"'«“‘", ")]}\"'»”’"))  # brackets and quotes taken with the placeholders they hold
FIRST = 0xE000  # a lone placeholder is rendered as one private-use character (never in a model's output) first


def placeholders(text: str) -> list[str]:
    """The placeholders of `text`, in order."""
    return [m.group(0) for m in PLACEHOLDER.finditer(text)]


def kept(source: str, translation: str) -> bool:
    """Whether `translation` holds exactly the placeholders of `source`, as often each."""
    return Counter(placeholders(source)) == Counter(placeholders(translation))


@dataclass
class Protected:
    """A message with its placeholders taken out: `unit.text` (what the model reads, cut into sentences by
    `render_unit`) and its placeholders as tags at their offsets; `lone[i]`: the i-th lone placeholder and
    whether the source had whitespace before and after it."""
    unit: Unit
    lone: list[tuple[str, bool, bool]]

    def rendered(self, given, escape=str, fragments: Fragments | None = None) -> str:
        """The message with its sentences' translations (the next ones of `given`, (text, alignment) each, passed
        through `escape`) and its placeholders put back."""
        text = render_unit(self.unit, given, escape, fragments)
        out = ""
        for i, c in enumerate(text):
            if not FIRST <= ord(c) < FIRST + len(self.lone):
                out += c
                continue
            raw, before, after = self.lone[ord(c) - FIRST]
            out += " " if before and out and not out[-1].isspace() else ""
            out += raw
            following = text[i + 1:i + 2]
            out += " " if after and following and not following.isspace() and following not in ".,;:!?)" else ""
        return out


def protected(text: str, whole: re.Pattern | None = None) -> Protected:
    """`text` with its placeholders taken out, and what `whole` matches as one (an XLIFF's `<ph>...</ph>`). Lone
    placeholders joined by punctuation alone ("$HOME/${x}") are one, with the brackets or quotes around them
    ("(%d)", "'%s'"); one between two spaces takes the space after it along, so that the model reads one space
    between the words either side."""
    unit, lone, at = Unit(tagged=False), [], 0  # a message's placeholders are placed by alignment, whatever the model
    for start, end, name, role in _pieces(text, whole):
        if start < at:  # inside the space taken along with the one before
            start = at
        unit.text += text[at:start]
        if role != "void" or not name.startswith("#"):
            unit.tags.append(Tag(len(unit.text), text[start:end], role, name))
            at = end
            continue
        before = start == 0 or text[start - 1].isspace()
        after = end == len(text) or text[end].isspace()
        sentinel = chr(FIRST + len(lone))
        if not before and after and unit.text and not unit.text[-1].isspace():
            _after_word(unit, sentinel)
        else:
            unit.tags.append(Tag(len(unit.text), sentinel, "void"))
        lone.append((text[start:end], before, after))
        at = end + (1 if before and after and text[end:end + 1] == " " else 0)
    unit.text += text[at:]
    return Protected(unit, lone)


def _after_word(unit: Unit, sentinel: str) -> None:
    """A placeholder stuck to the end of the word before it (`file%s`, `here<x/>`) as the end tag of an element
    around that word, so that it follows the word's translation (a lone one goes before the next word's). The
    element's start tag and an empty child (which keeps the word from being written as sent) are empty."""
    word = len(unit.text) - len(unit.text.split()[-1])
    at = next((i for i, tag in enumerate(unit.tags) if tag.at >= word), len(unit.tags))
    name = f"#{ord(sentinel)}"
    unit.tags[at:at] = [Tag(word, "", "open", name), Tag(word, "", "void")]
    unit.tags.append(Tag(len(unit.text), sentinel, "close", name))


def _pieces(text: str, whole: re.Pattern | None) -> list[tuple[int, int, str, str]]:
    """(start, end, tag name, role) of each tag, and (start, end, "#", "void") of each run of lone placeholders."""
    pieces: list[tuple[int, int, str, str]] = []
    spans = [m.span() for m in whole.finditer(text)] if whole else []
    found = [(s, e, None) for s, e in spans] + [(m.start(), m.end(), m) for m in PLACEHOLDER.finditer(text)
                                                 if not any(s <= m.start() < e for s, e in spans)]
    for start, end, m in sorted(found, key=lambda f: f[0]):
        close, name, void = m.groups() if m else (None, None, None)
        if name and not void:
            pieces.append((start, end, name, "close" if close else "open"))
        elif pieces and pieces[-1][2] == "#" and JOINING.fullmatch(text, pieces[-1][1], start):
            pieces[-1] = (pieces[-1][0], end, "#", "void")
        else:
            pieces.append((start, end, "#", "void"))
    for i, (start, end, name, role) in enumerate(pieces):
        if name == "#" and 0 < start and end < len(text) and PAIRS.get(text[start - 1]) == text[end]:
            pieces[i] = (start - 1, end + 1, name, role)
    return pieces
