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
from pathlib import Path

from mt.documents.file_checks import decoded, xml_root
from mt.documents.html_events import ATTRIBUTE, tag_attribute
from mt.documents.localization import (NOT_BACK, REFUSED, REMEMBERED, Catalogue, Edit, Unit, attribute_edits,
                                       language_tags, xml_units)
from mt.documents.messages import Localization, plain
from mt.errors import MtError

NATIVE = re.compile(r"<((?:\w+:)?(?:ph|bpt|ept|it))\b[^>]*?(?<!/)>.*?</\1>", re.S)  # 1.2's native code, kept whole
MARKS = {"1": ({"state": "needs-review-translation", "state-qualifier": "leveraged-mt"},
               {"state": "needs-translation"}),
         "2": ({"state": "translated", "subState": "mt:needs-review"}, {"state": "initial"})}
EXACT_MATCH = {"1": {"state": "translated", "state-qualifier": "exact-match"}, "2": {"state": "translated"}}  # memory's
UNITS = {"1": "trans-unit", "2": "segment"}
LANGUAGE_TAGS = {"1": ("file", "target-language"), "2": ("xliff", "trgLang")}  # where each names its target


class XliffDocument(Catalogue):
    """An XLIFF 1.2 or 2.0 file (mt/documents/localization.py), each unit marked as its version marks it."""

    def __init__(self, data: bytes, name: Path, options: Localization = Localization()):
        version = _version(data, name)
        super().__init__(name, decoded(data, name), options.memory)
        self.version, where = version, LANGUAGE_TAGS[version]
        self.language_tags = language_tags(self.text, where[0])
        own = next((tag_attribute(self.text[start:end], where[1]) for start, end in self.language_tags), None)
        retranslate = self.read_language(own, options)
        for unit in xml_units(self.text, lambda tag: tag.name == UNITS[version], lambda a: a.get("translate") == "no"):
            source = unit.child("source")
            if source is not None and not source.void and (retranslate or not unit.inner_of("target").strip()):
                self.units.append(Unit(unit, [self.messages.add([plain(source.inner, NATIVE)])]))
        self.NOTES = {"refused": f"units given their source as target, marked {MARKS[version][1]['state']}: "
                                 f"{NOT_BACK}"}

    def escape(self, text: str) -> str:
        return html.escape(text, quote=False)

    def file_edits(self) -> list[Edit]:
        if not (self.target and self.units):
            return []
        return attribute_edits(self.text, self.language_tags, LANGUAGE_TAGS[self.version][1], self.target)

    def edits(self, unit: Unit, texts: list[str | None], state: str) -> list[Edit]:
        """A unit's target, and a 2.0 segment's state, in file order."""
        source, target = unit.where.child("source"), unit.where.child("target")
        marks = EXACT_MATCH[self.version] if state == REMEMBERED else MARKS[self.version][state == REFUSED]
        text = source.inner if state == REFUSED else texts[0]
        edits = []
        if self.version == "2":
            edits.append((unit.where.start, unit.where.inner_start, _marked(unit.where.open_tag, marks)))
            marks = {}
        if target is not None:
            open_tag = _marked(target.open_tag, marks) if marks else target.open_tag
            edits.append((target.start, target.end, f"{open_tag}{text}</{_name(target.open_tag)}>"))
        else:
            tag = _name(source.open_tag).rsplit("source", 1)[0] + "target"
            edits.append((source.end, source.end, f"{source.blank}{_marked('<' + tag + '>', marks)}{text}</{tag}>"))
        return edits


def _version(data: bytes, name: Path) -> str:
    """"1" or "2": the XLIFF version of a file defusedxml parses; an MtError for anything else."""
    root = xml_root(data, name, "xliff", "an XLIFF 1.2 or 2.0 file")
    version = root.get("version", "")
    if not version.startswith(("1.", "2.")):
        raise MtError(f"{name}: line 1: not an XLIFF 1.2 or 2.0 file (its version is '{version}')")
    return version[0]


def _name(tag: str) -> str:
    return re.match(r"<([\w:.-]+)", tag).group(1)


def _marked(tag: str, marks: dict[str, str]) -> str:
    """An open tag with `marks` set (replaced where it has them), other attributes as they were."""
    attrs = [(k, v) for k, v in ATTRIBUTE.findall(tag) if k not in marks and k not in ("state-qualifier", "subState")]
    written = "".join(f" {k}={v}" for k, v in attrs) + "".join(f' {k}="{v}"' for k, v in marks.items())
    return f"<{_name(tag)}{written}>"
