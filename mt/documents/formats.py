"""Which document class reads which format, and the format a file's extension names."""

from __future__ import annotations

from pathlib import Path

from mt.documents.android import AndroidDocument
from mt.documents.document import Document, Rendered
from mt.documents.epub import EpubDocument
from mt.documents.html import HtmlDocument
from mt.documents.json_strings import JsonDocument
from mt.documents.markdown import MarkdownDocument
from mt.documents.messages import Localization
from mt.documents.office import DocxDocument, PptxDocument
from mt.documents.opendocument import OdpDocument, OdtDocument
from mt.documents.pdf import PdfDocument
from mt.documents.po import PoDocument
from mt.documents.properties import PropertiesDocument
from mt.documents.qt import TsDocument
from mt.documents.subtitles import SrtDocument, VttDocument
from mt.documents.text import TextDocument
from mt.documents.xliff import XliffDocument
from mt.errors import MtError

EXTENSIONS = {".html": "html", ".htm": "html", ".xhtml": "html", ".md": "markdown", ".markdown": "markdown",
              ".srt": "srt", ".vtt": "vtt", ".docx": "docx", ".pptx": "pptx", ".odt": "odt", ".odp": "odp",
              ".epub": "epub", ".pdf": "pdf", ".po": "po", ".pot": "po",
              ".xlf": "xliff", ".xliff": "xliff", ".ts": "ts", ".xml": "android",
              ".json": "json", ".arb": "json", ".properties": "properties"}
FROM_TEXT = {"text": TextDocument, "html": HtmlDocument, "markdown": MarkdownDocument}  # read from UTF-8 text
FROM_BYTES = {"srt": SrtDocument, "vtt": VttDocument, "docx": DocxDocument, "pptx": PptxDocument, "odt": OdtDocument,
              "odp": OdpDocument, "epub": EpubDocument, "pdf": PdfDocument}  # read from the file's bytes
# read from bytes, for a target language (localization.py)
LOCALIZATION = {"po": PoDocument, "xliff": XliffDocument, "ts": TsDocument, "android": AndroidDocument,
                "json": JsonDocument, "properties": PropertiesDocument}
BILINGUAL = ("po", "xliff", "ts")  # files that hold their translations (the others are one language's)
FORMATS = (*FROM_TEXT, *FROM_BYTES, *LOCALIZATION)
MAX_BYTES = 100 << 20  # a document larger than this is refused before it is read


def read_document(data: bytes, fmt: str, name: Path, localization: Localization = Localization()) -> Document:
    """The document in `data` (mt/documents/document.py): `.sentences` to translate, `.render(translations)` its
    translated bytes and notes."""
    if len(data) > MAX_BYTES:
        raise MtError(f"{name}: {len(data) / 2**20:.0f} MiB, more than a document's {MAX_BYTES >> 20} MiB")
    if fmt in FROM_BYTES:
        return _Written(FROM_BYTES[fmt](data, name), bytes)
    if fmt in LOCALIZATION:
        return LOCALIZATION[fmt](data, name, localization)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise MtError(f"{name}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); is it a "
                      f"{fmt} file?") from None
    return _Written(FROM_TEXT[fmt](text), lambda text: text.encode("utf-8"))


class _Written:
    """A document whose format leaves no notes (its render gives its text or bytes), as a `Document`."""

    def __init__(self, document, encode):
        self.document, self.sentences, self.encode = document, document.sentences, encode

    def render(self, translations, fragments=None) -> Rendered:
        return Rendered(self.encode(self.document.render(translations, fragments)))
