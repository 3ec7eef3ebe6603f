"""PDF files (PyMuPDF, which LibreTranslate's argos-translate-files uses too) translated block by block.

Each text block of a page (PyMuPDF's paragraph: lines that belong together) is translated whole, its lines
joined with a space (none after a hyphen at a line's end: apt-get stays whole), and its spans of one look
(font, size, bold, italic, colour) are runs put back around the words aligned to their own
(mt/documents/runs.py). The block's source text is removed with a redaction that spares images and drawings,
and the translation is written into the block's rectangle word by word (`_lay_out`, PyMuPDF's TextWriter),
wrapped at its width and shrunk alike until it fits its height. `Page.insert_htmlbox` laid a block out in 4.8
ms against about 1 (a 129-page PDF: 14.7 s against 3.2), and embedded its fonts once per block. A block whose
lines hold pieces of text apart by a wide gap (a table's cells on one line, which MuPDF reads as one block) is
cut there: each piece is translated and written apart, into its own rectangle up to the next piece on its line.
The values of form fields (widgets) are left as they are.

What it keeps: pages and their size, images, drawings, links, annotations, where each block is, and each run's
size, colour, bold and italic. What it cannot keep: the fonts themselves (the text is written in the PDF's
standard Helvetica, Times or Courier by the span's kind, and MuPDF's fallback fonts for the characters they
lack), the lines' breaks and spacing inside a block (laid out again, left-aligned), text in images (scans have
no text to translate: such a page comes back as it was), and vertical or rotated text (left as it is).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path

from mt.documents.fragments import Fragments
from mt.documents.runs import RunsParagraph
from mt.errors import MtError, needs

MAX_PAGES = 2000
BOLD, ITALIC, SERIF, MONOSPACE = 16, 2, 4, 8  # PyMuPDF's span flags


@dataclass(frozen=True)
class _Look:
    family: str  # serif, sans-serif or monospace
    size: float
    flags: int  # BOLD, ITALIC
    color: int

    @classmethod
    def of(cls, span: dict) -> _Look:
        """A span's look; its family by the font's name first (PDF writers often mark sans-serif fonts serif)."""
        name, flags = span["font"].lower(), span["flags"]
        if flags & MONOSPACE or any(word in name for word in ("mono", "courier", "consol")):
            family = "monospace"
        elif any(word in name for word in ("sans", "helvetica", "arial", "verdana", "calibri", "gothic")):
            family = "sans-serif"
        elif flags & SERIF or any(word in name for word in ("serif", "times", "roman")):
            family = "serif"
        else:
            family = "sans-serif"
        return cls(family, round(span["size"], 1), flags & (BOLD | ITALIC), span["color"])

    @property
    def face(self) -> str:
        return FACES[self.family][bool(self.flags & BOLD) + 2 * bool(self.flags & ITALIC)]

    def font(self, pymupdf):
        """PyMuPDF's built-in face of this family and weight (MuPDF draws characters it lacks from its fallback
        fonts: Cyrillic, Greek, CJK)."""
        return _font(pymupdf, self.face)

    @property
    def rgb(self) -> tuple[float, float, float]:
        return tuple(((self.color >> shift) & 255) / 255 for shift in (16, 8, 0))


# The PDF base-14 faces, as PyMuPDF names them: regular, bold, italic, bold italic.
FACES = {"sans-serif": ("helv", "hebo", "heit", "hebi"), "serif": ("tiro", "tibo", "tiit", "tibi"),
         "monospace": ("cour", "cobo", "coit", "cobi")}
LINE_HEIGHT = 1.2  # a line's height, in font sizes
SMALLEST = 0.3  # a block's translation is shrunk to fit its rectangle, down to this share of its font sizes
WIDE_GAP = 1.0  # text on one line further apart than this many font sizes is in two cells (a word space: 0.28)


@functools.cache
def _font(pymupdf, name: str):
    return pymupdf.Font(name)


@functools.lru_cache(maxsize=1 << 16)
def _width(pymupdf, face: str, text: str) -> float:
    """The text's width at font size 1 (PyMuPDF measures a character at a time, in Python)."""
    return _font(pymupdf, face).text_length(text, fontsize=1)


@dataclass
class _Block:
    page: int
    rect: tuple[float, float, float, float]
    lines: list[tuple[float, float, float, float]]  # each line's rectangle: what the redaction removes
    looks: list[_Look] = field(default_factory=list)  # a run's look
    texts: list[str] = field(default_factory=list)  # a run's text

    def add(self, look: _Look, text: str) -> None:
        if not text:
            return
        if self.looks and self.looks[-1] == look:
            self.texts[-1] += text
        else:
            self.looks.append(look)
            self.texts.append(text)

    def end_line(self) -> None:
        """Between two lines a space; none after a hyphen, which is kept (apt-get, Debian-Paket), unless it is a
        soft hyphen (U+00AD), which is dropped."""
        last = self.texts[-1] if self.texts else ""
        if last.endswith("\u00ad"):
            self.texts[-1] = last[:-1]
        elif last and not last[-1].isspace() and not (last.endswith("-") and last[-2:-1].isalpha()):
            self.texts[-1] += " "


class PdfDocument:
    """`sentences` to translate; `render` gives the translated PDF's bytes."""

    def __init__(self, data: bytes, name: Path):
        self.pymupdf = needs("pymupdf", "PyMuPDF", "pdf")
        self.data, self.name = data, name
        pymupdf = self.pymupdf
        flags = pymupdf.TEXTFLAGS_DICT & ~(pymupdf.TEXT_PRESERVE_LIGATURES | pymupdf.TEXT_PRESERVE_IMAGES)
        with _opened(pymupdf, data, name) as doc:
            self.blocks = []
            for number, page in enumerate(doc):
                with _reading(name, number):
                    self.blocks += _blocks(page, number, flags)
        self.translators = [RunsParagraph(block.texts) for block in self.blocks]
        self.sentences = [s for t in self.translators for s in t.sentences]

    def render(self, translations: list[tuple[str, str | None]], fragments: Fragments | None = None) -> bytes:
        given = iter(translations)
        placed = [translator.render(given, fragments) for translator in self.translators]
        if fragments is not None and fragments.asking:  # only the words of lost runs are wanted
            return b""
        pymupdf = self.pymupdf
        with _opened(pymupdf, self.data, self.name) as doc:
            for number, blocks in itertools.groupby(zip(self.blocks, placed), key=lambda pair: pair[0].page):
                with _reading(self.name, number):
                    _write(pymupdf, doc[number], list(blocks))
            return doc.tobytes(garbage=4, deflate=True)  # 4: the fonts each page's text embeds, kept once


def _write(pymupdf, page, blocks: list[tuple[_Block, list[tuple[int, str]]]]) -> None:
    """The page's blocks' source text removed (images and drawings spared), the links over it put back, and each
    block's translation written into its rectangle."""
    links = page.get_links()
    for block, _ in blocks:
        for line in block.lines:
            page.add_redact_annot(line)
    page.apply_redactions(images=pymupdf.PDF_REDACT_IMAGE_NONE, graphics=pymupdf.PDF_REDACT_LINE_ART_NONE)
    _put_back(page, links)
    writers: dict[tuple, object] = {}  # a TextWriter per colour
    for block, segments in blocks:
        _lay_out(pymupdf, page, block, segments, writers)
    for rgb, writer in writers.items():
        writer.write_text(page, color=rgb)


@contextlib.contextmanager
def _reading(name: Path, number: int):
    """MuPDF's errors on a page (a broken content stream, a font it cannot load) as one line naming the page."""
    try:
        yield
    except Exception as e:  # PyMuPDF raises MuPDF's errors as several kinds
        raise MtError(f"{name}: page {number + 1}: PyMuPDF could not read or write it ({type(e).__name__}: "
                      f"{str(e).splitlines()[0] if str(e) else ''})") from None


def _opened(pymupdf, data: bytes, name: Path):
    if b"%PDF-" not in data[:1024]:  # PyMuPDF would read other kinds of file (XPS, images, text) as well
        raise MtError(f"{name}: not a readable PDF (no %PDF- header)")
    try:
        doc = pymupdf.open(stream=data, filetype="pdf")
    except Exception as e:  # PyMuPDF raises FileDataError, or RuntimeError from MuPDF, for a file it cannot read
        raise MtError(f"{name}: not a readable PDF ({type(e).__name__}: {e})") from None
    if doc.needs_pass:
        doc.close()
        raise MtError(f"{name}: an encrypted PDF (it needs a password): mt translates unencrypted PDF files")
    if doc.page_count == 0:  # PyMuPDF cannot save a PDF without pages
        repaired = ", as PyMuPDF repaired it" if doc.is_repaired else ""
        doc.close()
        raise MtError(f"{name}: a PDF without pages (its page tree is empty{repaired}): nothing to translate")
    if doc.page_count > MAX_PAGES:
        doc.close()
        raise MtError(f"{name}: {doc.page_count} pages, more than the {MAX_PAGES} mt translates in one PDF")
    return doc


def _blocks(page, number: int, flags: int) -> list[_Block]:
    """The page's horizontal text blocks that hold a letter, cut into a table's cells, their spans merged into
    runs of one look; text in form fields left out."""
    fields = [tuple(widget.rect) for widget in page.widgets()]
    found = []
    for raw in page.get_text("dict", flags=flags)["blocks"]:
        lines = [line for line in raw.get("lines", []) if any(s["text"].strip() for s in line["spans"])]
        if not lines or any(tuple(line["dir"]) != (1.0, 0.0) for line in lines):
            continue
        kept = [[s for s in line["spans"] if not _inside(s["bbox"], fields)] for line in lines]
        rows = _rows([spans for spans in kept if any(s["text"].strip() for s in spans)])
        if any(len(row) > 1 for row in rows):  # a table's cells
            pieces = [(piece, _cell_rect(row, k)) for row in rows for k, piece in enumerate(row)]
        else:
            whole = [line for row in rows for piece in row for line in piece]
            fielded = sum(map(len, kept)) < sum(len(line["spans"]) for line in lines)
            pieces = [(whole, functools.reduce(_union, [line["bbox"] for line in whole]) if fielded and whole
                       else tuple(raw["bbox"]))]
        for piece, rect in pieces:
            block = _block(number, piece, rect)
            if any(c.isalpha() for t in block.texts for c in t):
                found.append(block)
    return found


def _inside(bbox, rects: list[tuple]) -> bool:
    x, y = (bbox[0] + bbox[2]) / 2, (bbox[1] + bbox[3]) / 2
    return any(x0 <= x <= x1 and y0 <= y <= y1 for x0, y0, x1, y1 in rects)


def _rows(lines: list[list[dict]]) -> list[list[list[dict]]]:
    """The lines' spans as rows (a line, or lines MuPDF set side by side on one baseline), each row's pieces of
    text apart by a gap over WIDE_GAP font sizes (a table's cells), each piece its lines ({"bbox", "spans"})."""
    rows: list[list[list[dict]]] = []
    for spans in lines:
        current = None  # the piece of this line being filled
        for span in spans:
            last = rows[-1][-1][-1]["bbox"] if rows else None
            wide = last is not None and span["text"].strip() and span["bbox"][0] - last[2] > WIDE_GAP * span["size"]
            if current is not None and not wide:
                current["spans"].append(span)
                current["bbox"] = _union(current["bbox"], span["bbox"])
                continue
            on_row = current is not None or (last is not None and _beside(last, span["bbox"]))
            current = {"bbox": tuple(span["bbox"]), "spans": [span]}
            if not on_row:
                rows.append([[current]])
            elif wide:
                rows[-1].append([current])
            else:
                rows[-1][-1].append(current)
    return rows


def _beside(left, right) -> bool:
    """Whether the box `right` is on the line of `left` (sharing half the smaller height), after it."""
    shared = min(left[3], right[3]) - max(left[1], right[1])
    return shared > min(left[3] - left[1], right[3] - right[1]) / 2 and right[0] >= left[2] - 1


def _union(a, b) -> tuple:
    return min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3])


def _cell_rect(row: list[list[dict]], k: int) -> tuple:
    """Cell k's rectangle: its lines', reaching to a font size before the next cell on its row."""
    rect = functools.reduce(_union, [line["bbox"] for line in row[k]])
    if k + 1 < len(row):
        size = max(s["size"] for line in row[k] for s in line["spans"])
        rect = (*rect[:2], max(rect[2], row[k + 1][0]["bbox"][0] - size), rect[3])
    return rect


def _block(number: int, lines: list[dict], rect: tuple) -> _Block:
    block = _Block(number, rect, [tuple(line["bbox"]) for line in lines])
    for i, line in enumerate(lines):
        if i:
            block.end_line()
        for span in line["spans"]:
            text = span["text"].lstrip() if not block.texts or block.texts[-1][-1:].isspace() else span["text"]
            block.add(_Look.of(span), text)
    block.texts = [t.rstrip() if i == len(block.texts) - 1 else t for i, t in enumerate(block.texts)]
    return block


def _put_back(page, links: list[dict]) -> None:
    """The links a redaction removed (it removes those over the text), written again."""
    kept = {(tuple(link["from"]), link.get("uri"), link.get("page")) for link in page.get_links()}
    for link in links:
        if (tuple(link["from"]), link.get("uri"), link.get("page")) not in kept:
            page.insert_link({k: v for k, v in link.items() if k not in ("xref", "id")})


def _lay_out(pymupdf, page, block: _Block, segments: list[tuple[int, str]], writers: dict) -> None:
    """The block's translation written into its rectangle: words (each with the space after it) in their runs'
    looks, wrapped at the rectangle's width, every size shrunk alike until the lines fit its height (or as many
    lines as the source had, where its lines were set closer than LINE_HEIGHT) and a word longer than a line
    fits its width."""
    words = [(word, block.looks[run]) for run, text in segments for word in re.findall(r"\S+\s*|\s+", text)]
    x0, y0, x1, y1 = block.rect
    room = max(y1 - y0, len(block.lines) * LINE_HEIGHT * max(look.size for look in block.looks))
    scale = 1.0
    while True:
        lines = _wrapped(pymupdf, words, x1 - x0, scale)
        height = sum(LINE_HEIGHT * scale * max(look.size for _, look, _ in line) for line in lines)
        widest = max(x + scale * look.size * _width(pymupdf, look.face, word.rstrip())
                     for line in lines for word, look, x in line[-1:])
        if (height <= room and widest <= x1 - x0 + 0.5) or scale <= SMALLEST:
            break
        scale = max(SMALLEST, scale * 0.9)
    top = y0
    for line in lines:
        size = scale * max(look.size for _, look, _ in line)
        baseline = top + size * max(look.font(pymupdf).ascender for _, look, _ in line)
        for text, look, x in _runs_of(line):
            if look.rgb not in writers:
                writers[look.rgb] = pymupdf.TextWriter(page.rect)
            writers[look.rgb].append((x0 + x, baseline), text, font=look.font(pymupdf), fontsize=scale * look.size)
        top += LINE_HEIGHT * size


def _runs_of(line: list[tuple]) -> list[tuple]:
    """A line's words of one look after another, joined: one call to write each."""
    runs: list[list] = []
    for word, look, x in line:
        if runs and runs[-1][1] == look:
            runs[-1][0] += word
        else:
            runs.append([word, look, x])
    return [tuple(run) for run in runs]


def _wrapped(pymupdf, words: list[tuple[str, _Look]], width: float, scale: float) -> list[list[tuple]]:
    """Lines of (word, look, x): a word that does not fit where the line has reached starts a new line."""
    lines: list[list[tuple]] = [[]]
    x = 0.0
    for word, look in words:
        length = scale * look.size * _width(pymupdf, look.face, word)
        if lines[-1] and x + scale * look.size * _width(pymupdf, look.face, word.rstrip()) > width:
            lines.append([])
            x = 0.0
            if not word.strip():
                continue
        lines[-1].append((word, look, x))
        x += length
    return [line for line in lines if line]
