"""Documents of each format built from paragraphs cut around a token, (before, token, after), the token in bold,
and read back by the format's own library: each paragraph's text and whether its bold holds exactly the token.
For scripts/bench_documents.py."""

import html
import io
import re
import zipfile

FORMATS = ("html", "markdown", "docx", "pptx", "odt", "odp", "epub", "srt", "pdf")
EXTENSION = {"html": ".html", "markdown": ".md", "docx": ".docx", "pptx": ".pptx", "odt": ".odt", "odp": ".odp",
             "epub": ".epub", "srt": ".srt", "pdf": ".pdf"}
LIBRETRANSLATE = ("html", "docx", "pptx", "odt", "odp", "epub", "srt", "pdf")  # LibreTranslate 1.9's among them
ODF_TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>])")


def _html(paragraphs) -> str:
    return "".join(f"<p>{html.escape(b, quote=False)}" + (f"<b>{html.escape(t, quote=False)}</b>" if t else "") +
                   f"{html.escape(a, quote=False)}</p>\n" for b, t, a in paragraphs)


def build(fmt: str, paragraphs) -> bytes:
    if fmt in ("odt", "odp"):
        return _opendocument(fmt, paragraphs)
    if fmt == "markdown":
        return "".join(f"{_md(b)}**{_md(t)}**{_md(a)}\n\n" for b, t, a in paragraphs).encode()
    if fmt == "html":
        return f"<html><body>\n{_html(paragraphs)}</body></html>\n".encode()
    if fmt == "pdf":
        return _pdf(paragraphs)
    if fmt == "srt":
        return "".join(f"{i + 1}\n00:00:{i:02d},000 --> 00:00:{i:02d},900\n{b}<b>{t}</b>{a}\n\n"
                       for i, (b, t, a) in enumerate(paragraphs)).encode()
    if fmt == "epub":
        from ebooklib import epub

        book = epub.EpubBook()
        book.set_identifier("bench")
        book.set_title("bench")
        book.set_language("de")
        page = epub.EpubHtml(title="1", file_name="page.xhtml", lang="de")
        page.content = _html(paragraphs)
        book.add_item(page)
        book.add_item(epub.EpubNcx())
        book.add_item(epub.EpubNav())
        book.spine = [page]
        out = io.BytesIO()
        epub.write_epub(out, book)
        return out.getvalue()
    out = io.BytesIO()
    if fmt == "docx":
        import docx

        doc = docx.Document()
        for b, t, a in paragraphs:
            p = doc.add_paragraph(b)
            p.add_run(t).bold = True
            p.add_run(a)
        doc.save(out)
    else:
        import pptx
        from pptx.util import Inches

        prs = pptx.Presentation()
        for i in range(0, len(paragraphs), 10):
            frame = prs.slides.add_slide(prs.slide_layouts[6]).shapes.add_textbox(
                Inches(0.5), Inches(0.5), Inches(9), Inches(6)).text_frame
            for j, (b, t, a) in enumerate(paragraphs[i:i + 10]):
                p = frame.paragraphs[0] if j == 0 else frame.add_paragraph()
                p.add_run().text = b
                r = p.add_run()
                r.text, r.font.bold = t, True
                p.add_run().text = a
        prs.save(out)
    return out.getvalue()


def _pdf(paragraphs) -> bytes:
    """An A4 PDF laid out by PyMuPDF's Story from the paragraphs' HTML: a text block per paragraph."""
    import pymupdf

    out = io.BytesIO()
    writer, story = pymupdf.DocumentWriter(out), pymupdf.Story(_html(paragraphs), user_css="p {font-size: 11px}")
    more = True
    while more:
        device = writer.begin_page(pymupdf.paper_rect("a4"))
        more, _ = story.place(pymupdf.paper_rect("a4") + (56, 56, -56, -56))
        story.draw(device)
        writer.end_page()
    writer.close()
    return out.getvalue()


def _read_pdf(data: bytes, source: bytes) -> list[list[tuple[str, bool]]]:
    """Each source paragraph's spans (text, bold) in the translated PDF: every text block of the output goes to
    the source block (a paragraph) whose rectangle holds its centre, since a server may write a paragraph as one
    block (mt) or a block per span (LibreTranslate); a space between two lines, ligatures (fi) as letters."""
    import pymupdf

    flags = pymupdf.TEXTFLAGS_DICT & ~pymupdf.TEXT_PRESERVE_LIGATURES

    def blocks(pdf: bytes) -> list[tuple[int, dict]]:
        with pymupdf.open(stream=pdf, filetype="pdf") as doc:
            return [(number, block) for number, page in enumerate(doc)
                    for block in page.get_text("dict", flags=flags)["blocks"] if block.get("lines")]

    paragraphs = blocks(source)
    found: list[list[tuple[str, bool]]] = [[] for _ in paragraphs]
    for number, block in blocks(data):
        x, y = (block["bbox"][0] + block["bbox"][2]) / 2, (block["bbox"][1] + block["bbox"][3]) / 2
        at = next((i for i, (page, p) in enumerate(paragraphs) if page == number and
                   p["bbox"][0] - 2 <= x <= p["bbox"][2] + 30 and p["bbox"][1] - 2 <= y <= p["bbox"][3] + 2), None)
        if at is None:
            continue
        if found[at] and not found[at][-1][0].endswith((" ", "-")):
            found[at].append((" ", False))
        for i, line in enumerate(block["lines"]):
            for j, span in enumerate(line["spans"]):
                last = j == len(line["spans"]) - 1 and i < len(block["lines"]) - 1
                found[at].append((span["text"] + (" " if last and not span["text"].endswith("-") else ""),
                                  bool(span["flags"] & 16)))
    return found


def _md(text: str) -> str:
    return MARKDOWN_SPECIAL.sub(r"\\\1", text)


def _opendocument(fmt: str, paragraphs) -> bytes:
    from odf.draw import Frame, Page, TextBox
    from odf.opendocument import OpenDocumentPresentation, OpenDocumentText
    from odf.style import MasterPage, PageLayout, Style, TextProperties
    from odf.text import P, Span

    doc = OpenDocumentText() if fmt == "odt" else OpenDocumentPresentation()
    bold = Style(name="B", family="text")
    bold.addElement(TextProperties(fontweight="bold"))
    doc.automaticstyles.addElement(bold)
    texts = []
    for b, t, a in paragraphs:
        p = P(text=b)
        p.addElement(Span(stylename=bold, text=t))
        p.addText(a)
        texts.append(p)
    if fmt == "odt":
        for p in texts:
            doc.text.addElement(p)
    else:
        layout = PageLayout(name="pm1")
        doc.automaticstyles.addElement(layout)
        master = MasterPage(name="M", pagelayoutname=layout)
        doc.masterstyles.addElement(master)
        for i in range(0, len(texts), 10):
            page, box = Page(masterpagename=master), TextBox()
            frame = Frame(width="25cm", height="18cm", x="1cm", y="1cm")
            for p in texts[i:i + 10]:
                box.addElement(p)
            frame.addElement(box)
            page.addElement(frame)
            doc.presentation.addElement(page)
    out = io.BytesIO()
    doc.save(out)
    return out.getvalue()


def _read_opendocument(data: bytes) -> list[list[tuple[str, bool]]]:
    """Each paragraph's pieces of text, (text, bold): bold where a span has the style B."""
    import defusedxml.ElementTree as safe

    with zipfile.ZipFile(io.BytesIO(data)) as z:
        root = safe.fromstring(z.read("content.xml"))
    style = f"{{{ODF_TEXT}}}style-name"
    paragraphs = []
    for p in root.iter(f"{{{ODF_TEXT}}}p"):
        pieces = [(p.text or "", False)]
        for child in p:
            pieces += [("".join(child.itertext()), child.get(style) == "B"), (child.tail or "", False)]
        paragraphs.append(pieces)
    return paragraphs


def read(fmt: str, data: bytes, tokens: list[str], source: bytes = b"") -> tuple[list[str], int]:
    """(each paragraph's text, how many paragraphs have their token, alone, in bold); a PDF's paragraphs are
    found by where the `source` PDF had them."""
    if fmt == "markdown":
        units = [u for u in data.decode("utf-8").split("\n\n") if u.strip()]
        placed = sum(f"**{_md(t)}**" in u for u, t in zip(units, tokens))
        return [re.sub(r"\\(.)", r"\1", u.replace("**", "")) for u in units], placed
    if fmt in ("html", "epub", "srt"):
        text = _page(data) if fmt == "epub" else data.decode("utf-8")
        if fmt == "srt":
            import srt

            units = [s.content for s in srt.parse(text)]
        else:
            units = re.findall(r"<p>(.*?)</p>", text, re.S)
        placed = sum(f"<b>{html.escape(t, quote=False)}</b>" in u for u, t in zip(units, tokens))
        return [html.unescape(re.sub(r"<[^>]+>", "", u)) for u in units], placed
    runs = []
    if fmt in ("odt", "odp"):
        runs = _read_opendocument(data)
    elif fmt == "pdf":
        runs = _read_pdf(data, source)
    elif fmt == "docx":
        import docx

        runs = [[(r.text, bool(r.bold)) for r in p.runs] for p in docx.Document(io.BytesIO(data)).paragraphs]
    else:
        import pptx

        for slide in pptx.Presentation(io.BytesIO(data)).slides:
            for shape in slide.shapes:
                runs += [[(r.text, bool(r.font.bold)) for r in p.runs] for p in shape.text_frame.paragraphs]
    placed = sum(any(bold and text.strip() == t for text, bold in p) for p, t in zip(runs, tokens))
    return ["".join(text for text, _ in p) for p in runs], placed


def _page(data: bytes) -> str:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        name = next(n for n in z.namelist() if n.endswith("page.xhtml"))
        return z.read(name).decode("utf-8")
