"""Word documents (docx, python-docx) and slides (pptx, python-pptx) translated paragraph by paragraph with their
formatting. Every paragraph of a docx's body, tables (nested ones too), text boxes, headers, footers, footnotes
and endnotes, and of a
pptx's slides (text frames, tables) and speaker notes is translated whole, its runs (bold, italic, a hyperlink's
text, a font, ...) put back around the words aligned to their own (mt/documents/runs.py). A line break inside a
paragraph cuts it in two pieces translated apart; a run holding anything but text (a picture, a tab, a field)
stays as it is.

Where the translation keeps the runs' order, each run keeps its place in the file (inside a hyperlink too) and
gets its own text; where it reorders them, the piece's text runs are written again in the translation's order,
each a copy of the run whose formatting it carries (a hyperlink's run then keeps its look, not its link).
"""

from __future__ import annotations

import copy
import io
import zipfile
from dataclasses import dataclass
from pathlib import Path

from mt.documents.archives import check_members, refuse_dtd
from mt.documents.fragments import Fragments
from mt.documents.runs import RunsParagraph
from mt.errors import MtError, needs

MAX_DOCUMENT = 1 << 30  # bytes unpacked
XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"


@dataclass(frozen=True)
class Dialect:
    """Where a format keeps paragraphs, runs and their text, and what inside a paragraph is not text."""
    ns: str
    breaks: frozenset[str]  # local names that cut a paragraph in pieces
    not_text: frozenset[str]  # local names that keep a run out of translation


WORD = Dialect("{http://schemas.openxmlformats.org/wordprocessingml/2006/main}", frozenset({"br", "cr"}),
               frozenset({"tab", "br", "cr", "drawing", "pict", "object", "fldChar", "instrText", "sym",
                          "footnoteReference", "endnoteReference", "footnoteRef", "endnoteRef", "ptab"}))
SLIDES = Dialect("{http://schemas.openxmlformats.org/drawingml/2006/main}", frozenset({"br"}), frozenset())


class _OfficeDocument:
    """`sentences` to translate; `render` gives the translated file's bytes."""
    dialect: Dialect

    def __init__(self, parts: list, save):
        self.save = save
        self.pieces = [runs for part in parts for p in part.iter(f"{self.dialect.ns}p")
                       for runs in _pieces(p, self.dialect) if runs]
        self.translators = [RunsParagraph([_text(r, self.dialect) for r in runs],
                                          frozenset(i for i, r in enumerate(runs) if _linked(r, self.dialect)))
                            for runs in self.pieces]
        self.sentences = [s for t in self.translators for s in t.sentences]

    def render(self, translations: list[tuple[str, str | None]], fragments: Fragments | None = None) -> bytes:
        """The translated file; the document itself is written to, so only once: while the words of lost inline
        elements are being asked for (mt/documents/inline_markup.py `Fragments`) nothing is written."""
        given = iter(translations)
        placed = [translator.render(given, fragments) for translator in self.translators]
        if fragments is not None and fragments.asking:
            return b""
        for runs, segments in zip(self.pieces, placed):
            _write(runs, segments, self.dialect)
        out = io.BytesIO()
        self.save(out)
        return out.getvalue()


class DocxDocument(_OfficeDocument):
    dialect = WORD

    def __init__(self, data: bytes, name: Path):
        docx = needs("docx", "python-docx", "documents")
        doc = _opened(docx.Document, data, name, "word/document.xml", "Word document")
        notes = _notes(doc.part)

        def save(out) -> None:
            from docx.opc.oxml import serialize_part_xml

            for part, element in notes:  # python-docx keeps these parts as bytes: written back from their XML
                part._blob = serialize_part_xml(element)
            doc.save(out)
        parts = [doc.element.body] + _xml_parts(doc.part.package, ("/header", "/footer"))
        super().__init__(parts + [element for _, element in notes], save)


class PptxDocument(_OfficeDocument):
    dialect = SLIDES

    def __init__(self, data: bytes, name: Path):
        pptx = needs("pptx", "python-pptx", "documents")
        prs = _opened(pptx.Presentation, data, name, "ppt/presentation.xml", "presentation")
        super().__init__(_xml_parts(prs.part.package, ("/slides/", "/notesSlides/")), prs.save)


MAIN_PARTS = {"word/document.xml": "a Word document (.docx)",  # where Word, PowerPoint and Excel keep their main part
              "ppt/presentation.xml": "a PowerPoint presentation (.pptx)",
              "xl/workbook.xml": "an Excel workbook (.xlsx)"}


def _opened(read, data: bytes, name: Path, main: str, kind: str):
    """What `read` (python-docx's Document, python-pptx's Presentation) makes of the archive, checked first; what
    it raises for a file that is not a readable `kind` is one line."""
    _check_archive(data, name, main)
    try:
        return read(io.BytesIO(data))
    except Exception as e:  # python-docx and python-pptx raise several kinds for a file that is not theirs
        raise MtError(f"{name}: not a readable {kind} ({type(e).__name__}: {e})") from None


def _check_archive(data: bytes, name: Path, main: str) -> None:
    """An unencrypted, bounded zip holding no DTD, whose main part is `main`: not another kind of Office file
    given this one's extension."""
    what = MAIN_PARTS[main]
    if data[:4] == b"\xd0\xcf\x11\xe0":  # an OLE compound file: an encrypted (or a pre-2007) document
        raise MtError(f"{name}: an encrypted document, or an old binary one: mt reads unencrypted {what} files")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            check_members(name, z.infolist(), MAX_DOCUMENT)
            for member in z.namelist():
                if member.endswith((".xml", ".rels")):
                    refuse_dtd(z.read(member), f"{name}: {member}")
            other = next((kind for part, kind in MAIN_PARTS.items() if part != main and part in z.namelist()), None)
            if main not in z.namelist() and other:
                raise MtError(f"{name}: {other}, not {what}; give it its own extension")
    except zipfile.BadZipFile:
        raise MtError(f"{name}: not {what}, which is a zip archive") from None


def _xml_parts(package, kinds: tuple[str, ...]) -> list:
    """The XML of the package's parts whose name holds one of `kinds` (/header, /slides/, ...)."""
    parts = []
    for part in package.iter_parts():
        element = getattr(part, "_element", None)
        if element is not None and any(kind in str(part.partname) for kind in kinds):
            parts.append(element)
    return parts


def _notes(document_part) -> list[tuple]:
    """(part, its XML) of a Word document's footnotes and endnotes, which python-docx reads as bytes."""
    from docx.opc.constants import RELATIONSHIP_TYPE
    from docx.oxml import parse_xml  # python-docx's parser: entities are not resolved

    kinds = (RELATIONSHIP_TYPE.FOOTNOTES, RELATIONSHIP_TYPE.ENDNOTES)
    return [(rel.target_part, parse_xml(rel.target_part.blob)) for rel in document_part.rels.values()
            if rel.reltype in kinds and not rel.is_external]


def _pieces(paragraph, dialect: Dialect) -> list[list]:
    """The paragraph's own text runs (not those of a paragraph nested in a text box), cut at line breaks."""
    pieces, current = [], []
    for element in paragraph.iter(f"{dialect.ns}r", *(f"{dialect.ns}{b}" for b in dialect.breaks)):
        if _paragraph_of(element, dialect) is not paragraph:
            continue
        if element.tag != f"{dialect.ns}r":  # a break between runs
            pieces, current = pieces + [current], []
        elif any(child.tag.removeprefix(dialect.ns) in dialect.breaks for child in element):
            pieces, current = pieces + [current], []  # a run holding a break: kept as it is, a cut
        elif element.find(f"{dialect.ns}t") is not None and not any(
                child.tag.removeprefix(dialect.ns) in dialect.not_text for child in element):
            current.append(element)
    return pieces + [current]


def _paragraph_of(element, dialect: Dialect):
    owner = element.getparent()
    while owner is not None and owner.tag != f"{dialect.ns}p":
        owner = owner.getparent()
    return owner


def _linked(run, dialect: Dialect) -> bool:
    """Whether the run is a hyperlink's text: inside a w:hyperlink (docx), or with an a:hlinkClick (pptx)."""
    return run.getparent().tag == f"{dialect.ns}hyperlink" or run.find(f"{dialect.ns}rPr/{dialect.ns}hlinkClick") \
        is not None


def _text(run, dialect: Dialect) -> str:
    return "".join(t.text or "" for t in run.iter(f"{dialect.ns}t"))


def _set_text(run, text: str, dialect: Dialect) -> None:
    texts = list(run.iter(f"{dialect.ns}t"))
    texts[0].text = text
    if dialect is WORD:
        texts[0].set(XML_SPACE, "preserve")
    for t in texts[1:]:
        t.getparent().remove(t)


def _write(runs: list, segments: list[tuple[int, str]], dialect: Dialect) -> None:
    order = [run for run, _ in segments]
    if order == sorted(order):  # the runs' own order: each keeps its place
        texts = {i: "" for i in range(len(runs))}
        for run, text in segments:
            texts[run] += text
        for i, run in enumerate(runs):
            _set_text(run, texts[i], dialect)
        return
    anchor = runs[0]
    for run, text in segments:  # reordered: copies in the translation's order, after the first run
        new = copy.deepcopy(runs[run])
        _set_text(new, text, dialect)
        anchor.addnext(new)
        anchor = new
    for run in runs:
        run.getparent().remove(run)
