"""E-books (epub: a zip of XHTML pages, a package file and a table of contents) translated page by page: every
XHTML or HTML member is an HTML document (mt/documents/inline_markup.py), everything else (the package file,
styles, pictures, fonts) is copied as it was (mt/documents/zipped_markup.py). The table of contents' labels
(toc.ncx) are not translated."""

from __future__ import annotations

from mt.documents.inline_markup import HTML, Markup
from mt.documents.zipped_markup import ZippedMarkup

PAGES = (".xhtml", ".html", ".htm")


class EpubDocument(ZippedMarkup):
    what = "an e-book (.epub)"
    mimetypes = (b"application/epub+zip",)
    doctype = True

    def markup_of(self, member: str) -> Markup | None:
        return HTML if member.endswith(PAGES) else None
