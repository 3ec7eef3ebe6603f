"""Documents of each format built from paragraphs cut around a token, (before, token, after), the token in bold,
and read back by the format's own library: each paragraph's text and whether its bold holds exactly the token.
For scripts/bench_documents.py."""

import html
import io
import re
import zipfile

FORMATS = ("html", "docx", "pptx", "epub", "srt")
EXTENSION = {"html": ".html", "docx": ".docx", "pptx": ".pptx", "epub": ".epub", "srt": ".srt"}


def _html(paragraphs) -> str:
    return "".join(f"<p>{html.escape(b, quote=False)}<b>{html.escape(t, quote=False)}</b>"
                   f"{html.escape(a, quote=False)}</p>\n" for b, t, a in paragraphs)


def build(fmt: str, paragraphs) -> bytes:
    if fmt == "html":
        return f"<html><body>\n{_html(paragraphs)}</body></html>\n".encode()
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


def read(fmt: str, data: bytes, tokens: list[str]) -> tuple[list[str], int]:
    """(each paragraph's text, how many paragraphs have their token, alone, in bold)."""
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
    if fmt == "docx":
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
