"""XLIFF 1.2 and 2.0 files: each unit without a translation gets a target, marked for review; every other byte of
the file is written back as it came.

The file is parsed first with defusedxml (no DTD, no entities: an entity bomb is refused in one line) to check
that it is XLIFF; its elements are then located in its own characters by mt/documents/html_events.py, as
OpenDocument's are, and only targets are written. A unit is a 1.2 `<trans-unit>` or a 2.0 `<segment>`; its
`<source>` is translated as a message (mt/documents/messages.py) whose inline codes are placeholders: 1.2's
`<x/>`, `<bx/>`, `<ex/>` and `<g>...</g>`, 2.0's `<ph/>`, `<sc/>`, `<ec/>` and `<pc>...</pc>`, and elements
holding native code (1.2's `<ph>`, `<bpt>`, `<ept>`, `<it>`), each kept whole. A unit with `translate="no"`, a
2.0 `<ignorable>`, and one whose target has text are left alone (unless `retranslate`).

The review mark is each version's own: 1.2's `state="needs-review-translation"` with
`state-qualifier="leveraged-mt"`, 2.0's `state="translated"` with `subState="mt:needs-review"`. A unit whose
translation would lose a placeholder gets its source copied as target, 1.2's `state="needs-translation"` and
2.0's `state="initial"` (the convention of both for a target not yet translated).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import Path

from mt.documents.file_checks import decoded, xml_root
from mt.documents.html_events import ATTRIBUTE, html_events, tag_attribute, with_attribute
from mt.documents.inline_markup import Fragments
from mt.documents.messages import Localization, Messages, plain
from mt.errors import MtError

NATIVE = re.compile(r"<((?:\w+:)?(?:ph|bpt|ept|it))\b[^>]*?(?<!/)>.*?</\1>", re.S)  # 1.2's native code, kept whole
MARKS = {"1": ({"state": "needs-review-translation", "state-qualifier": "leveraged-mt"},
               {"state": "needs-translation"}),
         "2": ({"state": "translated", "subState": "mt:needs-review"}, {"state": "initial"})}
REMEMBERED = {"1": {"state": "translated", "state-qualifier": "exact-match"}, "2": {"state": "translated"}}  # memory's
UNITS = {"1": "trans-unit", "2": "segment"}
LANGUAGE_TAGS = {"1": ("file", "target-language"), "2": ("xliff", "trgLang")}  # where each names its target


@dataclass
class Unit:
    """Where a unit is in the file: its open tag [open_start, open_end) (a 2.0 segment's holds the state), its
    source's contents [start, end) and where a new target goes (`after_source`, with the source's indentation
    before it), and the target element [target_start, target_end), if it has one, its open tag and its text."""
    open_start: int
    open_end: int
    start: int = 0
    end: int = 0
    after_source: int = 0
    indent: str = ""
    source_tag: str = ""
    target_start: int | None = None
    target_end: int = 0
    target_open: str = ""
    target_inner: int = 0
    target_text: str = ""


class XliffDocument:
    """`sentences` to translate; `render` gives the XLIFF file's bytes with their translations; `notes` what the
    last render could not do."""

    def __init__(self, data: bytes, name: Path, options: Localization = Localization()):
        self.name, self.version = name, _version(data, name)
        self.text = decoded(data, name)
        self.language_tags = _language_tags(self.text, LANGUAGE_TAGS[self.version])
        own = next((tag_attribute(self.text[start:end], LANGUAGE_TAGS[self.version][1])
                    for start, end in self.language_tags), None)
        self.target = options.target if options.retargets(own) else None  # the target language to say
        retranslate = options.replaces(own)
        self.units = [u for u in _units(self.text, UNITS[self.version])
                      if retranslate or not u.target_text.strip()]
        self.messages = Messages(options.memory)
        for unit in self.units:
            self.messages.add([plain(self.text[unit.start:unit.end], NATIVE)])
        self.sentences = self.messages.sentences
        self.refused = 0

    def render(self, translations: list[tuple[str, str | None]], fragments: Fragments | None = None) -> bytes:
        found = self.messages.translated(translations, lambda t: html.escape(t, quote=False), fragments)
        self.refused = sum(1 for t in found if t is None)
        edits = [edit for i, (unit, text) in enumerate(zip(self.units, found))
                 for edit in self._edits(unit, text, i in self.messages.remembered)]
        if self.target and self.units:
            attribute = LANGUAGE_TAGS[self.version][1]
            edits += [(start, end, with_attribute(self.text[start:end], attribute, self.target))
                      for start, end in self.language_tags]
        out, at = [], 0
        for start, end, replacement in sorted(edits):
            out += [self.text[at:start], replacement]
            at = end
        out.append(self.text[at:])
        return "".join(out).encode("utf-8")

    def _edits(self, unit: Unit, text: str | None, remembered: bool = False) -> list[tuple[int, int, str]]:
        """(start, end, replacement) for a unit, in file order: its target, and a 2.0 segment's state."""
        marks = REMEMBERED[self.version] if remembered else MARKS[self.version][0 if text is not None else 1]
        text = self.text[unit.start:unit.end] if text is None else text
        edits = []
        if self.version == "2":
            edits.append((unit.open_start, unit.open_end, _marked(self.text[unit.open_start:unit.open_end], marks)))
            marks = {}
        if unit.target_start is not None:
            open_tag = _marked(unit.target_open, marks) if marks else unit.target_open
            edits.append((unit.target_start, unit.target_end, f"{open_tag}{text}</{_name(unit.target_open)}>"))
        else:
            tag = _name(unit.source_tag).rsplit("source", 1)[0] + "target"
            target = f"{_marked('<' + tag + '>', marks)}{text}</{tag}>"
            edits.append((unit.after_source, unit.after_source, unit.indent + target))
        return edits

    def notes(self) -> list[str]:
        if not self.refused:
            return []
        return [f"{self.name}: {self.refused} units given their source as target, marked "
                f"{MARKS[self.version][1]['state']}: a placeholder or tag would not come back from their translation"]


def _version(data: bytes, name: Path) -> str:
    """"1" or "2": the XLIFF version of a file defusedxml parses; an MtError for anything else."""
    root = xml_root(data, name, "xliff", "an XLIFF 1.2 or 2.0 file")
    version = root.get("version", "")
    if not version.startswith(("1.", "2.")):
        raise MtError(f"{name}: line 1: not an XLIFF 1.2 or 2.0 file (its version is '{version}')")
    return version[0]


def _units(text: str, unit_name: str) -> list[Unit]:
    """The units of the file to translate, in order, with their source and target located (direct children of
    the unit only: a 1.2 `<alt-trans>`'s are not its own); none inside an element with translate="no"."""
    units, stack, offset = [], [], 0
    current: Unit | None = None
    kept_from = None  # the depth of the element with translate="no" we are in
    blank = ""  # the whitespace right before the current tag
    for event in html_events(text):
        start, offset = offset, offset + len(event.raw)
        local = event.name.rsplit(":", 1)[-1]
        if event.kind == "text":
            blank = event.raw if not event.raw.strip() else ""
            continue
        parent = stack[-1] if stack else ""
        if event.role == "open":
            stack.append(local)
            if kept_from is None and dict(event.attrs).get("translate") == "no":
                kept_from = len(stack)
            elif local == unit_name and kept_from is None:
                current = Unit(start, offset)
            elif current is not None and parent == unit_name and local == "source":
                current.start, current.source_tag, current.indent = offset, event.raw, blank
            elif current is not None and parent == unit_name and local == "target":
                current.target_start, current.target_open, current.target_inner = start, event.raw, offset
        elif event.role == "close" and stack:
            if current is not None and len(stack) >= 2 and stack[-2] == unit_name and local == "source":
                current.end, current.after_source = start, offset
            elif current is not None and len(stack) >= 2 and stack[-2] == unit_name and local == "target":
                current.target_end, current.target_text = offset, text[current.target_inner:start]
            elif current is not None and local == unit_name:
                units.append(current)
                current = None
            if kept_from == len(stack):
                kept_from = None
            stack.pop()
        elif event.role == "void" and current is not None and local == "target" and parent == unit_name:
            current.target_start, current.target_end = start, offset
            current.target_open = event.raw[:-2].rstrip() + ">"
        blank = ""
    return [u for u in units if u.after_source]


def _language_tags(text: str, where: tuple[str, str]) -> list[tuple[int, int]]:
    """(start, end) of each open tag that names the file's target language: 1.2's `<file>`s, 2.0's `<xliff>`."""
    found, offset = [], 0
    for event in html_events(text):
        start, offset = offset, offset + len(event.raw)
        if event.role == "open" and event.name.rsplit(":", 1)[-1] == where[0]:
            found.append((start, offset))
    return found


def _name(tag: str) -> str:
    return re.match(r"<([\w:.-]+)", tag).group(1)


def _marked(tag: str, marks: dict[str, str]) -> str:
    """An open tag with `marks` set (replaced where it has them), other attributes as they were."""
    attrs = [(k, v) for k, v in ATTRIBUTE.findall(tag) if k not in marks and k not in ("state-qualifier", "subState")]
    written = "".join(f" {k}={v}" for k, v in attrs) + "".join(f' {k}="{v}"' for k, v in marks.items())
    return f"<{_name(tag)}{written}>"
