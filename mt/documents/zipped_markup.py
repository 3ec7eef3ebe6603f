"""A zip archive whose markup members are translated and whose other members are copied: e-books (epub) and
OpenDocument files (odt, odp). The archive is checked first (mt/documents/archives.py), `mimetype` must name
the format, and the translated archive has every member in the same order, `mimetype` first and stored, as
both formats require."""

from __future__ import annotations

import copy
import io
import zipfile
from pathlib import Path

from mt.documents.archives import check_members, refuse_dtd
from mt.documents.html import HtmlDocument
from mt.documents.fragments import Fragments
from mt.documents.inline_markup import Markup
from mt.errors import MtError

MAX_UNPACKED = 1 << 30  # bytes


class ZippedMarkup:
    """`sentences` to translate; `render` gives the translated archive's bytes. A subclass names the format
    (`what`, `mimetypes`) and which members are markup to translate (`markup_of`)."""
    what: str
    mimetypes: tuple[bytes, ...]
    doctype = False  # whether a markup member may start with a bare <!DOCTYPE ...>

    def __init__(self, data: bytes, name: Path):
        try:
            self.zip = zipfile.ZipFile(io.BytesIO(data))
        except zipfile.BadZipFile:
            raise MtError(f"{name}: not {self.what}, which is a zip archive") from None
        members = self.zip.infolist()
        check_members(name, members, MAX_UNPACKED)
        if "mimetype" not in self.zip.namelist() or self.zip.read("mimetype").strip() not in self.mimetypes:
            raise MtError(f"{name}: no mimetype member saying {' or '.join(m.decode() for m in self.mimetypes)}: "
                          f"not {self.what}")
        self.check(name)
        self.pages: dict[str, HtmlDocument] = {}
        for member in members:
            markup = self.markup_of(member.filename)
            if not member.filename.endswith((".xml", ".opf", ".ncx", ".rdf")) and markup is None:
                continue
            raw = self.zip.read(member)
            refuse_dtd(raw, f"{name}: {member.filename}", doctype=markup is not None and self.doctype)
            if markup is not None:
                try:
                    self.pages[member.filename] = HtmlDocument(raw.decode("utf-8"), markup)
                except UnicodeDecodeError:
                    raise MtError(f"{name}: {member.filename}: not UTF-8") from None
        self.sentences = [s for page in self.pages.values() for s in page.sentences]

    def check(self, name: Path) -> None:
        """Refuse, in one line, what the format's own files say cannot be read (encryption)."""

    def markup_of(self, member: str) -> Markup | None:
        raise NotImplementedError

    def render(self, translations: list[tuple[str, str | None]], fragments: Fragments | None = None) -> bytes:
        given = iter(translations)
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as archive:
            for member in self.zip.infolist():
                page = self.pages.get(member.filename)
                data = self.zip.read(member) if page is None else \
                    page.render([next(given) for _ in page.sentences], fragments).encode("utf-8")
                kind = zipfile.ZIP_STORED if member.filename == "mimetype" else zipfile.ZIP_DEFLATED
                # A copy: writestr sets the entry's offsets, and the source archive is read again by a second render
                archive.writestr(copy.copy(member), data, compress_type=kind)
        return out.getvalue()
