"""E-books (epub: a zip of XHTML pages, a package file and a table of contents) translated page by page: every
XHTML or HTML member is an HTML document (mt/documents/inline_markup.py), everything else (the package file,
styles, pictures, fonts) is copied as it was, in the same order, `mimetype` first and stored, as epub requires.
The table of contents' labels (toc.ncx) are not translated."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from mt.documents.archives import check_members, refuse_dtd
from mt.documents.inline_markup import HtmlDocument
from mt.errors import MtError

MAX_BOOK = 1 << 30  # bytes unpacked
PAGES = (".xhtml", ".html", ".htm")


class EpubDocument:
    """`sentences` to translate; `render` gives the translated book's bytes."""

    def __init__(self, data: bytes, name: Path):
        try:
            self.zip = zipfile.ZipFile(io.BytesIO(data))
        except zipfile.BadZipFile:
            raise MtError(f"{name}: not an e-book (.epub), which is a zip archive") from None
        members = self.zip.infolist()
        check_members(name, members, MAX_BOOK)
        if "mimetype" not in self.zip.namelist() or self.zip.read("mimetype").strip() != b"application/epub+zip":
            raise MtError(f"{name}: no mimetype member saying application/epub+zip: not an epub")
        self.pages = {}
        for member in members:
            if not member.filename.endswith((".xml", ".opf", ".ncx", *PAGES)):
                continue
            raw = self.zip.read(member)
            refuse_dtd(raw, f"{name}: {member.filename}", doctype=member.filename.endswith(PAGES))
            if member.filename.endswith(PAGES):
                try:
                    self.pages[member.filename] = HtmlDocument(raw.decode("utf-8"))
                except UnicodeDecodeError:
                    raise MtError(f"{name}: {member.filename}: not UTF-8") from None
        self.sentences = [s for page in self.pages.values() for s in page.sentences]

    def render(self, translations: list[tuple[str, str | None]]) -> bytes:
        given = iter(translations)
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as book:
            for member in self.zip.infolist():
                page = self.pages.get(member.filename)
                data = self.zip.read(member) if page is None else \
                    page.render([next(given) for _ in page.sentences]).encode("utf-8")
                kind = zipfile.ZIP_STORED if member.filename == "mimetype" else zipfile.ZIP_DEFLATED
                book.writestr(member, data, compress_type=kind)
        return out.getvalue()
