"""OpenDocument text (odt) and presentations (odp): a zip whose content.xml (the body, slides, notes) and
styles.xml (headers and footers) are translated paragraph by paragraph (text:p, text:h) with their formatting,
as HTML is (mt/documents/inline_markup.py): a paragraph's text:span and text:a elements are inline markup put
back around the words aligned to their own, with every tag as sent; spaces (text:s) and bookmarks are
void tags (a space is also a space between the words translated); a line break or a tab cuts a paragraph in
pieces translated apart. Fields (page numbers, dates, authors, references), note citations, comments
(office:annotation) and the style definitions are kept as sent and not translated; a note's own paragraphs are
translated, but a note inside a sentence cuts the sentence there. Every other member (pictures, meta.xml,
settings, the manifest) is copied as it was (mt/documents/zipped_markup.py).

The XML is read as the tags' conventional names (text:p, text:span, ...), which every producer of
OpenDocument writes; a part that binds the prefix text: to another namespace is refused.
"""

from __future__ import annotations

from pathlib import Path

from mt.documents.inline_markup import Markup
from mt.documents.zipped_markup import ZippedMarkup
from mt.errors import MtError

PARTS = ("content.xml", "styles.xml")
TEXT_NAMESPACE = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
FIELDS = ("page-number", "page-count", "page-continuation", "date", "time", "author-name", "author-initials",
          "creator", "file-name", "chapter", "sheet-name", "sequence", "sequence-ref", "bookmark-ref",
          "reference-ref", "note-ref", "variable-get", "variable-set", "variable-input", "user-field-get",
          "user-field-input", "user-defined", "expression", "text-input", "title", "subject", "description",
          "keywords", "initial-creator", "creation-date", "creation-time", "editing-cycles", "editing-duration",
          "print-date", "print-time", "printed-by", "modification-date", "modification-time", "word-count",
          "character-count", "paragraph-count", "page-variable-get", "page-variable-set", "placeholder",
          "note-citation", "hidden-text", "conditional-text", "drop-down", "database-display", "template-name",
          "sender-firstname", "sender-lastname", "sender-company", "sender-email")
ODF = Markup(
    blocks=frozenset(), kept=frozenset(),
    inline=frozenset({"text:span", "text:a", "text:meta", "text:ruby", "text:ruby-base"}),
    links=frozenset({"text:a"}),
    breaks=frozenset({"text:line-break", "text:tab"}), spaces=frozenset({"text:s"}),
    void=frozenset({"text:s", "text:soft-page-break", "text:bookmark", "text:bookmark-start",
                    "text:bookmark-end", "text:reference-mark", "text:reference-mark-start",
                    "text:reference-mark-end", "text:change", "text:change-start", "text:change-end",
                    "text:toc-mark", "text:alphabetical-index-mark", "text:user-index-mark",
                    "text:alphabetical-index-mark-start", "text:alphabetical-index-mark-end",
                    "office:annotation-end"}),
    hidden=frozenset({f"text:{f}" for f in FIELDS} | {"text:ruby-text", "office:annotation", "office:automatic-styles",
                      "office:styles", "office:font-face-decls", "office:scripts", "office:forms",
                      "office:event-listeners", "text:tracked-changes"}))


class _OpenDocument(ZippedMarkup):

    def check(self, name: Path) -> None:
        if "META-INF/manifest.xml" in self.zip.namelist() and \
                b"encryption-data" in self.zip.read("META-INF/manifest.xml"):
            raise MtError(f"{name}: an encrypted document: mt reads unencrypted ones")
        for part in PARTS:
            if part not in self.zip.namelist():
                continue
            head = self.zip.read(part)[:8192]
            if b"xmlns:text=" in head and f'xmlns:text="{TEXT_NAMESPACE}"'.encode() not in head and \
                    f"xmlns:text='{TEXT_NAMESPACE}'".encode() not in head:
                raise MtError(f"{name}: {part}: binds the prefix text: to another namespace than OpenDocument's "
                              "text namespace; mt reads the conventional prefixes")

    def markup_of(self, member: str) -> Markup | None:
        return ODF if member in PARTS else None


class OdtDocument(_OpenDocument):
    what = "an OpenDocument text (.odt)"
    mimetypes = (b"application/vnd.oasis.opendocument.text",)


class OdpDocument(_OpenDocument):
    what = "an OpenDocument presentation (.odp)"
    mimetypes = (b"application/vnd.oasis.opendocument.presentation",)
