"""Word documents (docx) translated paragraph by paragraph with their formatting: python-docx opens the file,
and every paragraph of the body, tables (nested ones too), text boxes, headers and footers is translated whole,
its runs (bold, italic, a hyperlink's text, a font, ...) put back around the words aligned to their own
(mt/documents/runs.py). A run holding anything but text (a picture, a tab, a break, a field) stays as it is.

Where the translation keeps the runs' order, each run keeps its place in the file (inside a hyperlink too) and
gets its own text; where it reorders them, the paragraph's text runs are written again in the translation's
order, each a copy of the run whose formatting it carries (a hyperlink's run then keeps its look, not its link).
"""

from __future__ import annotations

import copy
import io
import zipfile
from pathlib import Path

from mt.documents.archives import check_members, refuse_dtd
from mt.documents.runs import RunsParagraph
from mt.errors import MtError, needs

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"
NOT_TEXT = {f"{W}{name}" for name in ("tab", "br", "cr", "drawing", "pict", "object", "fldChar", "instrText", "sym",
                                       "footnoteReference", "endnoteReference", "ptab")}
MAX_DOCUMENT = 1 << 30  # bytes unpacked


class DocxDocument:
    """`sentences` to translate; `render` gives the translated file's bytes."""

    def __init__(self, data: bytes, name: Path):
        docx = needs("docx", "python-docx")
        _check_archive(data, name)
        try:
            self.doc = docx.Document(io.BytesIO(data))
        except Exception as e:  # python-docx raises several kinds for a file that is not a Word document
            raise MtError(f"{name}: not a readable Word document ({type(e).__name__}: {e})") from None
        self.paragraphs = [(p, runs) for part in _parts(self.doc) for p in part.iter(f"{W}p")
                           if (runs := _text_runs(p))]
        self.translators = [RunsParagraph([_text(r) for r in runs]) for _, runs in self.paragraphs]
        self.sentences = [s for t in self.translators for s in t.sentences]

    def render(self, translations: list[tuple[str, str | None]]) -> bytes:
        given = iter(translations)
        for (paragraph, runs), translator in zip(self.paragraphs, self.translators):
            _write(runs, translator.render(given))
        out = io.BytesIO()
        self.doc.save(out)
        return out.getvalue()


def _check_archive(data: bytes, name: Path) -> None:
    if data[:4] == b"\xd0\xcf\x11\xe0":  # an OLE compound file: an encrypted (or a pre-2007 .doc) document
        raise MtError(f"{name}: an encrypted Word document, or an old .doc: mt reads unencrypted .docx files")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            check_members(name, z.infolist(), MAX_DOCUMENT)
            for member in z.namelist():
                if member.endswith((".xml", ".rels")):
                    refuse_dtd(z.read(member), f"{name}: {member}")
    except zipfile.BadZipFile:
        raise MtError(f"{name}: not a Word document (.docx is a zip archive)") from None


def _parts(doc) -> list:
    """The XML of the body, then of each header and footer part (each once)."""
    parts, seen = [doc.element.body], set()
    for rel in doc.part.rels.values():
        if rel.is_external or not rel.reltype.endswith(("/header", "/footer", "/footnotes", "/endnotes")):
            continue
        element = getattr(rel.target_part, "element", None)  # a part python-docx reads as XML
        if element is not None and rel.target_part not in seen:
            seen.add(rel.target_part)
            parts.append(element)
    return parts


def _text_runs(paragraph) -> list:
    """The paragraph's own runs that hold text and nothing else (not those of a paragraph nested in a text box)."""
    runs = []
    for run in paragraph.iter(f"{W}r"):
        owner = run.getparent()
        while owner is not None and owner.tag != f"{W}p":
            owner = owner.getparent()
        if owner is paragraph and run.find(f"{W}t") is not None and not any(c.tag in NOT_TEXT for c in run):
            runs.append(run)
    return runs


def _text(run) -> str:
    return "".join(t.text or "" for t in run.iter(f"{W}t"))


def _set_text(run, text: str) -> None:
    texts = list(run.iter(f"{W}t"))
    texts[0].text = text
    texts[0].set(XML_SPACE, "preserve")
    for t in texts[1:]:
        t.getparent().remove(t)


def _write(runs: list, segments: list[tuple[int, str]]) -> None:
    order = [run for run, _ in segments]
    if order == sorted(order):  # the runs' own order: each keeps its place
        texts = {i: "" for i in range(len(runs))}
        for run, text in segments:
            texts[run] += text
        for i, run in enumerate(runs):
            _set_text(run, texts[i])
        return
    anchor = runs[0]
    for run, text in segments:  # reordered: copies in the translation's order, after the first run
        new = copy.deepcopy(runs[run])
        _set_text(new, text)
        anchor.addnext(new)
        anchor = new
    for run in runs:
        run.getparent().remove(run)
