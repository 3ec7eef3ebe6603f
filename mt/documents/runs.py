"""A paragraph made of runs (a word processor's pieces of text, each with its own formatting: docx, pptx, odt)
translated whole, its runs put back by word alignment as HTML's inline elements are (mt/documents/inline_markup.py).

The longest run is the paragraph's base; every other run is an inline element around its own text. The
translation is then cut into (run, text) segments in order: each run's placed span, and the text between spans
with the base run (white space alone with the run before it). A run may come back empty, or twice where the
translation splits what it held: the writer copies its formatting for each segment. A run of a hyperlink
(`links`) whose words came back empty gets its source words (an empty link is invisible).
"""

from __future__ import annotations

from mt.documents.fragments import Fragments
from mt.documents.inline_markup import Tag, Unit, render_unit, unit_sentences

OPEN, CLOSE = "\ue000", "\ue001"  # private-use characters marking a run's segment in the rendered text


class RunsParagraph:
    """`sentences` to translate; `render` gives the translated paragraph as (run index, text) segments."""

    def __init__(self, runs: list[str], links: frozenset[int] = frozenset()):
        self.runs = runs
        self.base = max(range(len(runs)), key=lambda i: len(runs[i])) if runs else 0
        tags, at = [], 0
        for i, text in enumerate(runs):
            if i != self.base:
                empty = "source" if i in links else "tags"
                tags += [Tag(at, f"{OPEN}{i}{OPEN}", "open", f"r{i}", when_empty=empty),
                         Tag(at + len(text), CLOSE, "close", f"r{i}")]
            at += len(text)
        self.unit = Unit("".join(runs), tags)
        self.sentences = unit_sentences(self.unit)

    def render(self, given, fragments: Fragments | None = None) -> list[tuple[int, str]]:
        """(run, text) segments of the paragraph's translation, from the next translations of `given`."""
        marked = render_unit(self.unit, given, lambda text: text, fragments)
        segments, run = [], self.base
        for part in _split(marked):
            if part.startswith(OPEN):
                run = int(part.strip(OPEN))
            elif part == CLOSE:
                run = self.base
            elif part:
                segments.append((segments[-1][0] if segments and not part.strip() else run, part))
        return _merged(segments) or [(self.base, "")]


def _split(marked: str) -> list[str]:
    """The rendered text cut into run markers and text."""
    parts, at = [], 0
    while at < len(marked):
        if marked[at] == OPEN:
            end = marked.index(OPEN, at + 1) + 1
        elif marked[at] == CLOSE:
            end = at + 1
        else:
            end = min((i for i in (marked.find(OPEN, at), marked.find(CLOSE, at)) if i >= 0), default=len(marked))
        parts.append(marked[at:end])
        at = end
    return parts


def _merged(segments: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Neighbouring segments of one run as one."""
    out: list[tuple[int, str]] = []
    for run, text in segments:
        if out and out[-1][0] == run:
            out[-1] = (run, out[-1][1] + text)
        else:
            out.append((run, text))
    return out
