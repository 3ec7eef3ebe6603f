"""Text with inline markup (an HTML unit: mt/documents/html.py; a Markdown, docx or PDF paragraph; a message's
placeholders) translated a whole sentence at a time, its inline markup put back by word alignment.

Block elements (p, div, li, td, h1, ...), line breaks (br), comments outside text and what is never translated
stay where they are. Each run of text between them, with the inline elements inside it (b, i, em, strong, a,
span, code, sub, sup, u, and any tag not known as a block), is one unit: its text is cut into sentences
(mt/documents/text.py) and each sentence is translated whole, not fragment by fragment. An inline element
inside a sentence is then put around target words: where its text occurs in the translation as a whole word or
words (names, numbers, commands), around that (the occurrence its alignment points at, if several), claimed
before the others; else from the first to the last target word aligned to its source words (cross-attention,
mt/decoding/attention_alignment.py). An element whose words align to nothing, an empty one, and a void one
(img, wbr) go where the word after it went (or after the word before it). Nested elements stay nested (a child
is kept inside its parent's span), siblings do not overlap, and every tag is written back byte for byte as
sent. The contents of code, kbd, samp, pre and of elements marked
translate="no" are translated with their sentence for its sense, and written back as sent.

An element holding one word that the sentence's translation lost is written back as sent too, where the word
is one a translation keeps as written (`written_as_is`: a word with a digit, with `_ / . : + @ #` inside, or
with a capital after its first letter: versions, paths, file names, acronyms, CamelCase names), in place of the
one or two target words aligned to it, else where its neighbours put it; or where a target word aligned to it
is a failed copy of it (`near_copy`: Blobley for Blobby, ipmilocate for ipmi-locate), in place of that word; or
where the model, asked for the word alone, writes it unchanged (a name: Edge, Microsoft), as the first. The words
to ask for alone are found while rendering (`Fragments`): a caller renders, translates the words asked for,
and renders again (mt/documents/fragments.py). A small model drops or bends such words (in docs/benchmarks.md's
documents, 220 of 395 sentences lost the bold word), and a user who marked one wants it.

A marker is not written in place of words: an element without a letter (a footnote's 1, a reference's [1]) or
stuck to a word with letters or digits of its own (Dokumentation<sup>1</sup>, Python<sup>TM</sup>) that the
translation lost is written next to the target of the word it follows (or of the word it precedes, where it is
stuck to that one only), as close to it as in the source: the words aligned to a marker are its word's. An
element of punctuation alone (a docx run holding the full stop after a superscript) goes there too, around
its text where the translation has it there, else empty.

An element whose target words came back empty is written as its markup says (`Tag.when_empty`): its tags around
nothing (HTML's <b></b>, invisible); nothing at all (Markdown's emphasis markers, which would show as `****`); or,
for a link (HTML's and Markdown's a, OpenDocument's text:a, a docx or pptx hyperlink's run), its tags around its
source words as sent, with their own markup, where the translation would put it: an empty link is invisible, and
the reader keeps the link and its text.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from difflib import SequenceMatcher

from mt.documents.fragments import AROUND, TRAILING, Fragments
from mt.documents.html_events import Event
from mt.documents.model_tags import model_spans, reading_for_model, tagged_sentence, untagged_alignment, word_map
from mt.documents.text import split_text

# Elements that start and end a unit; everything else (b, i, a, span, unknown tags, ...) is inline.
BLOCK = {"address", "article", "aside", "audio", "base", "blockquote", "body", "canvas", "caption", "col",
         "colgroup", "dd", "details", "dialog", "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer",
         "form", "h1", "h2", "h3", "h4", "h5", "h6", "head", "header", "hgroup", "hr", "html", "iframe", "legend",
         "li", "link", "main", "math", "menu", "meta", "nav", "noscript", "object", "ol", "optgroup", "option", "p",
         "pre", "script", "section", "select", "source", "style", "summary", "svg", "table", "tbody", "td",
         "template", "textarea", "tfoot", "th", "thead", "title", "tr", "track", "ul", "video"}
BREAKS = {"br"}  # a line break ends a unit too: the lines either side are translated apart, as LibreTranslate does
VOID = {"area", "embed", "img", "input", "param", "wbr"}  # inline elements with no closing tag
KEPT = {"code", "kbd", "samp", "pre", "script", "style"}  # written back as sent, as is translate="no"
WORD = re.compile(r"\S+")
AS_IS = re.compile(r"\w.*[_/.:+@#]\S*\w|\d|\w\S*[A-Z]")  # see written_as_is


def written_as_is(word: str) -> bool:
    """Whether a translation keeps `word` as written: one word with a digit, with `_ / . : + @ #` between two of
    its characters, or with a capital after its first character. Lower-case words with hyphens (apt-get, but
    also well-known) are not: a language's own words are written so too."""
    return bool(word) and not any(c.isspace() for c in word) and AS_IS.search(word) is not None


NEAR_COPY = 0.75  # how alike (difflib's ratio) a target word must be to count as a failed copy


def near_copy(word: str, written: str, first: bool = False) -> bool:
    """Whether the target word `written` is a failed copy of the source word `word` (Blobley for Blobby,
    ipmilocate for ipmi-locate): a name's or a command's word (a capital or a hyphen in it: système for
    system is a translation), first letters in the same case (house for Haus is one too), and NEAR_COPY alike
    ignoring case and the punctuation around it, but not the same word in other case (TITEL, chosen). `first`:
    `written` starts its sentence, where a capital is grammar's (Bmcconfig for bmc-config)."""
    bare = written.strip(AROUND)
    return (len(word) > 2 and bare != "" and (word != word.lower() or "-" in word)
            and (first or bare[0].isupper() == word[0].isupper()) and bare.lower() != word.lower()
            and SequenceMatcher(None, word.lower(), bare.lower()).ratio() >= NEAR_COPY)


@dataclass(frozen=True)
class Markup:
    """Which tags of a tag language (HTML, an OpenDocument's XML) end a unit, are void, keep their contents as
    sent, or are hidden: an element kept whole as one void tag, its text not part of the sentence."""
    blocks: frozenset[str] = frozenset(BLOCK)
    breaks: frozenset[str] = frozenset(BREAKS)
    void: frozenset[str] = frozenset(VOID)
    kept: frozenset[str] = frozenset(KEPT)
    hidden: frozenset[str] = frozenset()
    spaces: frozenset[str] = frozenset()  # void tags that also stand for a space between words (ODF's text:s)
    inline: frozenset[str] | None = None  # if given, the only inline tags: every other tag is a block
    links: frozenset[str] = frozenset({"a"})  # elements whose source words are written where they came back empty

    def ends_unit(self, name: str) -> bool:
        if self.inline is not None and name not in self.inline | self.void | self.kept | self.hidden:
            return True
        return name in self.blocks or name in self.breaks

    def keeps(self, event: Event) -> bool:
        return event.name in self.kept or any(k == "translate" and (v or "").lower() == "no" for k, v in event.attrs)


HTML = Markup()


@dataclass
class Element:
    """An inline element inside one sentence: its source span (offsets in the sentence), its tags as sent, the
    contents as sent where they are kept, its children; and its target span once placed."""
    start: int
    end: int
    open: str
    close: str = ""
    kept: str | None = None
    children: list[Element] = field(default_factory=list)
    target: tuple[int, int] = (0, 0)
    written: str | None = None  # its own text, written in place of its target span (see `written_as_is`)
    when_empty: str = "tags"  # see Tag
    shown: str | None = None  # its source contents as sent, rendered, written where its target came back empty
    glued: tuple[bool, bool] = (False, False)  # written without a space before, after it (a marker: see above)


@dataclass
class Tag:
    at: int  # offset in the unit's text
    raw: str
    role: str  # open, close, void
    name: str = ""
    kept: str | None = None  # for an open tag whose contents are kept: those contents as sent
    when_empty: str = "tags"  # an open tag whose element's target is empty: "tags", "nothing" or "source" words


@dataclass
class Unit:
    """A run of text (entities decoded) and the inline tags inside it, at their offsets; `tagged`: its elements go
    to the model as tags (a model trained with them, mt/documents/model_tags.py), set when the unit is read."""
    text: str = ""
    tags: list[Tag] = field(default_factory=list)
    tagged: bool = field(default_factory=reading_for_model)


def sentence_spans(text: str) -> list[tuple[str, int, int]]:
    """(sentence, start, end) of each sentence to translate in a unit's text."""
    found, at = [], 0
    for piece in split_text(text):
        if piece.translate:
            found.append((piece.text, at, at + len(piece.text)))
        at += len(piece.text)
    return found


def unit_sentences(unit: Unit) -> list[str]:
    """What the model is given of each sentence of the unit: its text, with its inline elements as tags where the
    unit is `tagged`."""
    sentences = sentence_spans(unit.text)
    if not unit.tagged:
        return [text for text, _, _ in sentences]
    inside, _ = _assign(unit.tags, sentences)
    return [tagged_sentence(text, elements)[0] for (text, _, _), elements in zip(sentences, inside)]


def _escape(text: str) -> str:
    return html.escape(text, quote=False)


def render_unit(unit: Unit, given, escape=_escape, fragments: Fragments | None = None) -> str:
    """The unit with its sentences' translations (the next ones of `given`, (text, alignment) each) and its tags
    placed; the text through `escape`; `fragments`: the words of lost elements asked for alone (`Fragments`)."""
    sentences = sentence_spans(unit.text)
    inside, outside = _assign(unit.tags, sentences)
    out, at, tag = [], 0, 0
    for k, (sentence, start, end) in enumerate(sentences):
        text, alignment = next(given)
        out.append(_text_with_tags(unit.text, at, start, outside, tag, escape))
        tag += sum(1 for t in outside[tag:] if t.at <= start)
        if unit.tagged:
            text, alignment, spans = _from_model(sentence, inside[k], text, alignment)
        else:
            spans = {}
        out.append(_render_sentence(sentence, start, inside[k], text, alignment, escape, fragments, spans))
        at = end
    out.append(_text_with_tags(unit.text, at, len(unit.text), outside, tag, escape))
    return "".join(out)


def _text_with_tags(text: str, start: int, end: int, tags: list[Tag], first: int, escape) -> str:
    """text[start:end] escaped, with the tags from `first` on that lie in [start, end] at their offsets (those at
    `end` too: what follows is a sentence whose tags come after them)."""
    out, at = [], start
    for tag in tags[first:]:
        if tag.at > end:
            break
        # A tag inside the sentence before (an element crossing sentences) comes right after it.
        out += [escape(text[at:max(at, tag.at)]), tag.raw]
        at = max(at, tag.at)
    out.append(escape(text[at:end]))
    return "".join(out)


def _assign(tags: list[Tag], sentences: list[tuple[str, int, int]]) -> tuple[list[list], list[Tag]]:
    """Per sentence, its elements (a tree) and the lone tags strictly inside it; and the tags outside every
    sentence (between sentences, or an element crossing sentences), in order."""
    inside: list[list] = [[] for _ in sentences]
    outside: list[Tag] = []

    def sentence_of(lo: int, hi: int) -> int | None:
        return next((k for k, (_, s, e) in enumerate(sentences) if s <= lo and hi <= e), None)

    stack: list[tuple[Tag, list]] = [(Tag(0, "", "root"), [])]
    for tag in tags:
        if tag.role == "open":
            stack.append((tag, []))
        elif tag.role == "close" and len(stack) > 1 and stack[-1][0].name == tag.name:
            opened, children = stack.pop()
            stack[-1][1].append((opened, tag, children))
        else:
            stack[-1][1].append((tag, None, []))
    for opened, children in stack[1:]:  # left open at the unit's end: each a lone tag
        stack[0][1].append((opened, None, []))
        stack[0][1].extend(children)

    def visit(nodes):
        """Top-level nodes: an element inside one sentence (or a lone tag strictly inside it) goes to that
        sentence with its subtree; anything else is outside, and its children are visited the same way."""
        for opened, closed, children in nodes:
            hi = closed.at if closed else opened.at
            k = sentence_of(opened.at, hi)
            if k is not None and (closed is not None or sentences[k][1] < opened.at < sentences[k][2]):
                start = sentences[k][1]
                element = _element(opened, closed, start)
                inside[k].append(element)
                visit_children(children, element, start)
            else:
                outside.append(opened)
                visit(children)
                if closed:
                    outside.append(closed)

    def visit_children(nodes, parent: Element, start: int):
        for opened, closed, children in nodes:
            element = _element(opened, closed, start)
            parent.children.append(element)
            visit_children(children, element, start)

    visit(stack[0][1])
    outside.sort(key=lambda t: t.at)  # stable: tags at one offset keep their order
    return inside, outside


def _element(opened: Tag, closed: Tag | None, start: int) -> Element:
    end = closed.at if closed else opened.at
    return Element(opened.at - start, end - start, opened.raw, closed.raw if closed else "", opened.kept,
                   when_empty=opened.when_empty)


def _from_model(sentence: str, elements: list[Element], text: str,
                alignment: str | None) -> tuple[str, str | None, dict[int, tuple[int, int]]]:
    """A tag-trained model's output: its text without tags, its alignment between the two texts without tags, and
    the span the model put each element's tags around (by the element's id), for those it wrote once each."""
    _, numbers, source_words = tagged_sentence(sentence, elements)
    plain, spans = model_spans(text)
    by_number = {n: key for key, n in numbers.items()}
    return plain, untagged_alignment(alignment, source_words, word_map(text)), \
        {by_number[n]: span for n, span in spans.items() if n in by_number}


def _render_sentence(source: str, start: int, elements: list[Element], text: str, alignment: str | None,
                     escape, fragments: Fragments | None = None,
                     spans: dict[int, tuple[int, int]] | None = None) -> str:
    links = [tuple(map(int, link.split("-"))) for link in (alignment or "").split()]
    src_words = [m.span() for m in WORD.finditer(source)]
    tgt_words = [m.span() for m in WORD.finditer(text)]
    placer = _Placer(source, src_words, text, tgt_words, links, escape, fragments, spans)
    placer.place(elements, 0, len(text))
    return _render(text, 0, len(text), elements, escape)


def _render(text: str, lo: int, hi: int, elements: list[Element], escape) -> str:
    out, at = [], lo
    for e in sorted(elements, key=lambda e: e.target):
        s, t = e.target
        out += [escape(text[at:s]), e.open]
        if e.written is not None or e.shown is not None:
            inner = escape(e.written) if e.written is not None else e.shown
            out[-1:] = _spaced(text, s, t, e.open, inner + e.close, e.glued)
        elif e.kept is not None:
            out += [e.kept, e.close]
        else:
            inner = _render(text, s, t, e.children, escape)
            out[-1:] = [inner] if e.when_empty == "nothing" and not inner.strip() else [e.open, inner, e.close]
        at = t
    out.append(escape(text[at:hi]))
    return "".join(out)


def _spaced(text: str, s: int, t: int, before: str, after: str, glued: tuple[bool, bool]) -> list[str]:
    """[before, after], with a space outside them where they go between two words with none (an empty target
    span next to a word), on the sides where they are not `glued` to the word."""
    if s < t:
        return [before, after]
    left = " " if 0 < s and not text[s - 1].isspace() and not glued[0] else ""
    right = " " if s < len(text) and not text[s].isspace() and text[s] not in TRAILING and not glued[1] else ""
    return [left + before, after + right]


def _has_word(text: str) -> bool:
    return any(c.isalnum() for c in text)


class _Placer:
    """Target spans for the elements of one sentence (see the module's docstring)."""

    def __init__(self, source, src_words, text, tgt_words, links, escape, fragments: Fragments | None = None,
                 spans: dict[int, tuple[int, int]] | None = None):
        self.source, self.src_words, self.text, self.tgt_words = source, src_words, text, tgt_words
        self.escape, self.fragments = escape, fragments
        self.spans = spans or {}  # element id -> the span a tag-trained model put its tags around
        self.aligned: dict[int, list[int]] = {}
        for i, j in links:
            if i < len(src_words) and j < len(tgt_words):
                self.aligned.setdefault(i, []).append(j)

    def place(self, elements: list[Element], lo: int, hi: int) -> None:
        """Each element's target span inside [lo, hi], siblings without overlap: those placed around their own
        copied text claim their span first, the others are cut around what is claimed."""
        exact = {}
        for e in elements:
            span = self._copied(e) or self._written(e) or self._punctuation(e)
            exact[id(e)] = span is not None
            span = span or self._aligned(e) or (self._position(e.start),) * 2
            e.target = (min(max(span[0], lo), hi), min(max(span[1], lo), hi))
        claimed: list[tuple[int, int]] = []
        for e in sorted(elements, key=lambda e: (not exact[id(e)], e.target)):
            s, t = e.target
            for cs, ct in sorted(claimed):
                if s < ct and cs < t:  # overlaps a claimed span: keep the part before it, or else after it
                    s, t = (s, cs) if s < cs else (ct, max(t, ct))
            e.target = (s, max(s, t))
            claimed.append(e.target)
        for e in elements:
            if e.when_empty == "source" and e.written is None and e.kept is None and self._as_sent(e):
                continue
            self.place(e.children, *e.target)

    def _as_sent(self, e: Element) -> bool:
        """For a link whose target words came back empty (or white space), `shown` set: its source words and
        their markup, where its target starts. False where its target holds a word or it has no source words."""
        s, t = e.target
        lo, hi = e.start, e.end
        while lo < hi and self.source[lo].isspace():
            lo += 1
        while hi > lo and self.source[hi - 1].isspace():
            hi -= 1
        if self.text[s:t].strip() or lo == hi:
            return False

        def as_sent(elements: list[Element]) -> None:
            for child in elements:
                child.target, child.written = (child.start, child.end), None
                as_sent(child.children)
        as_sent(e.children)
        e.target, e.shown = (s, s), _render(self.source, lo, hi, e.children, self.escape)
        return True

    def _words(self, e: Element) -> list[int]:
        return [i for i, (s, t) in enumerate(self.src_words) if s < e.end and t > e.start]

    def _copied(self, e: Element) -> tuple[int, int] | None:
        """Where the element's own text is in the translation as whole words (the occurrence its alignment
        points at, if several); the whole translation for an element holding the whole sentence."""
        words = self._words(e)
        if not words:
            return None
        if words[0] == 0 and words[-1] == len(self.src_words) - 1 and self.tgt_words:
            return self.tgt_words[0][0], self.tgt_words[-1][1]
        own = self.source[e.start:e.end].strip()
        found = [m.span() for m in re.finditer(rf"(?<!\w){re.escape(own)}(?!\w)", self.text)] if own else []
        spans = [self.tgt_words[j] for i in words for j in self.aligned.get(i, [])]
        return next((f for f in found if any(s < f[1] and f[0] < t for s, t in spans)), found[0]) if found else None

    def _written(self, e: Element) -> tuple[int, int] | None:
        """For an element holding one word that the translation lost (see the module's docstring), the span its
        word is written in (`written`): a failed copy of it aligned to it; else, for a word kept as written or
        one the model writes unchanged alone (`Fragments`), the one or two target words aligned to it, or where
        its neighbours put it. None for other elements."""
        own = self.source[e.start:e.end].strip()
        words = self._words(e)
        if e.kept is not None or e.children or not own or any(c.isspace() for c in own) or not words:
            return None
        targets = self._targets(e, words)
        if words[0] > 0 or not own.isalpha() or own[0].islower():  # else a first capital may be grammar's
            copy = next((j for j in targets if near_copy(own, self.text[slice(*self.tgt_words[j])], j == 0)), None)
            if copy is not None:
                e.written = own
                return self._trimmed(*self.tgt_words[copy], own)
        name = own != own.lower() or not own.isalpha()  # a lower-case word alone is no name: not asked for
        if not written_as_is(own) and not (self.fragments is not None and name and self.fragments.copied(own)):
            return None
        if self._marker(e, own, words):
            return self._beside(e, own)
        e.written = own
        if targets and targets[-1] - targets[0] < 2:
            return self._aligned(e)
        return (self._position(e.start),) * 2

    def _marker(self, e: Element, own: str, words: list[int]) -> bool:
        """Whether the element is a marker (see the module's docstring): no letter in its text, or letters or
        digits of its words outside it."""
        first, last = self.src_words[words[0]][0], self.src_words[words[-1]][1]
        return not any(c.isalpha() for c in own) or _has_word(self.source[first:e.start] + self.source[e.end:last])

    def _punctuation(self, e: Element) -> tuple[int, int] | None:
        """For an element of punctuation alone (a run holding the full stop after a footnote's number): placed
        as a marker is, but an empty span where the translation lost it."""
        own = self.source[e.start:e.end].strip()
        if e.kept is not None or e.children or not own or any(c.isalnum() or c.isspace() for c in own):
            return None
        return self._beside(e, own, write=False)

    def _beside(self, e: Element, own: str, write: bool = True) -> tuple[int, int]:
        """Where a marker goes (see the module's docstring): its text's span where the translation has it there
        (documentation1), else an empty span there, its text `written` (where `write`) and `glued` as in the
        source."""
        def outside(i: int) -> str:  # the text of source word i outside the element
            s, t = self.src_words[i]
            return self.source[s:max(s, min(t, e.start))] + self.source[min(t, max(s, e.end)):t]

        words = range(len(self.src_words))
        before = next((i for i in reversed(words) if self.src_words[i][0] < e.start and _has_word(outside(i))), None)
        after = next((i for i in words if self.src_words[i][1] > e.end and _has_word(outside(i))), None)
        left = 0 < e.start and not self.source[e.start - 1].isspace()
        right = e.end < len(self.source) and not self.source[e.end].isspace()
        follows = self.aligned.get(before, []) if before is not None else []
        precedes = self.aligned.get(after, []) if after is not None else []
        if id(e) in self.spans:  # where a tag-trained model put the marker's tag
            at, glued = self.spans[id(e)][0], (left, right)
        elif follows and (left or not (right and precedes)):
            start, at = self.tgt_words[max(follows)]
            word = self.source[self.src_words[before][0]:e.start].rstrip()
            while at - 1 > start and self.text[at - 1] in TRAILING and not word.endswith(self.text[at - 1]):
                at -= 1  # "documentation." for "Dokumentation": the marker goes before the full stop
            glued = (left, False)
        elif precedes:
            at, glued = self.tgt_words[min(precedes)][0], (False, right)
        elif own_words := self._aligned(e):  # its neighbours unaligned: after the words aligned to its own
            at, glued = own_words[1], (left, False)
        else:
            at, glued = self._position(e.start), (False, False)
        for span in ((at - len(own), at), (at, at + len(own))):
            if 0 <= span[0] and self.text[slice(*span)] == own:
                return span
        if write:
            e.written, e.glued = own, glued
        return at, at

    def _trimmed(self, start: int, end: int, own: str) -> tuple[int, int]:
        """[start, end) without the punctuation around it that `own` lacks ("(Berkeleyfilter)" for Berkeley)."""
        while end - 1 > start and self.text[end - 1] in AROUND and not own.endswith(self.text[end - 1]):
            end -= 1
        while start + 1 < end and self.text[start] in AROUND and not own.startswith(self.text[start]):
            start += 1
        return start, end

    def _targets(self, e: Element, words: list[int]) -> list[int]:
        """The target words of the element: inside the span a tag-trained model gave it, else aligned to `words`."""
        if id(e) in self.spans:
            s, t = self.spans[id(e)]
            return [j for j, (ws, wt) in enumerate(self.tgt_words) if ws < t and wt > s]
        return sorted({j for i in words for j in self.aligned.get(i, [])})

    def _aligned(self, e: Element) -> tuple[int, int] | None:
        """The span a tag-trained model put the element's tags around; else from the first to the last target word
        aligned to the element's words."""
        if id(e) in self.spans:
            return self.spans[id(e)]
        targets = self._targets(e, self._words(e))
        if not targets:
            return None
        start, end = self.tgt_words[targets[0]][0], self.tgt_words[targets[-1]][1]
        own = self.source[e.start:e.end].strip()
        while end - 1 > start and self.text[end - 1] in TRAILING and not own.endswith(self.text[end - 1]):
            end -= 1  # "package." for "<paket>": the sentence's full stop stays outside
        return start, end

    def _position(self, offset: int) -> int:
        """Where a zero-width element at source `offset` goes: before the target of the word after it, else
        after the target of the word before it, else the sentence's start or end."""
        after = next((i for i, (s, _) in enumerate(self.src_words) if s >= offset), None)
        if after is not None and self.aligned.get(after):
            return self.tgt_words[min(self.aligned[after])][0]
        before = next((i for i in reversed(range(len(self.src_words))) if self.src_words[i][1] <= offset), None)
        if before is not None and self.aligned.get(before):
            return self.tgt_words[max(self.aligned[before])][1]
        return 0 if after == 0 or before is None else len(self.text)
