"""PDF files (mt/documents/pdf.py): each text block translated whole, read back by pypdf as well as by PyMuPDF,
with the pages, images, links and the runs' bold kept; through `mt translate -i` and `/translate_file`."""

from __future__ import annotations

import io

import httpx
import pymupdf
import pypdf
import pytest

from tests.conftest import one_error_line, run_mt
from tests.documents.conftest import SENTENCES, plain


def _pdf(sentences: list[str]) -> bytes:
    """Two pages: a sentence per block on the first, the second sentence's second word in bold, an image and a
    link over that block; a page number alone on the second (no letter: not translated)."""
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 72), sentences[0], fontname="helv", fontsize=11)
    words = sentences[1].split()
    writer = pymupdf.TextWriter(page.rect)
    writer.append((72, 120), words[0] + " ", font=pymupdf.Font("helv"), fontsize=11)
    writer.append(writer.last_point, words[1], font=pymupdf.Font("hebo"), fontsize=11)
    writer.append(writer.last_point, " " + " ".join(words[2:]), font=pymupdf.Font("helv"), fontsize=11)
    writer.write_text(page)
    pixels = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 8, 8), False)
    pixels.set_rect(pixels.irect, (200, 30, 30))
    page.insert_image(pymupdf.Rect(300, 300, 340, 340), pixmap=pixels)
    page.insert_link({"kind": pymupdf.LINK_URI, "from": pymupdf.Rect(72, 108, 300, 124), "uri": "https://example.org"})
    doc.new_page(width=400, height=300).insert_text((72, 72), "- 2 -", fontname="helv", fontsize=9)
    return doc.tobytes()


def _blocks_text(data: bytes) -> list[list[str]]:
    """Each page's text blocks, by PyMuPDF, white space made single spaces."""
    with pymupdf.open(stream=data, filetype="pdf") as doc:
        return [[" ".join(b[4].split()) for b in page.get_text("blocks") if b[4].strip()] for page in doc]


def _checked(source: bytes, translated: bytes, expected: list[str]) -> None:
    assert _blocks_text(translated) == [expected, ["- 2 -"]]
    reader = pypdf.PdfReader(io.BytesIO(translated))  # another library reads it too
    first = " ".join(reader.pages[0].extract_text().split())
    assert first == " ".join(expected) and SENTENCES[0] not in first
    before, after = pymupdf.open(stream=source, filetype="pdf"), pymupdf.open(stream=translated, filetype="pdf")
    assert [p.rect for p in after] == [p.rect for p in before]
    assert len(after[0].get_images()) == 1
    assert [(link["from"], link["uri"]) for link in after[0].get_links()] == [
        (link["from"], link["uri"]) for link in before[0].get_links()]
    spans = [s for b in after[0].get_text("dict")["blocks"] for line in b.get("lines", []) for s in line["spans"]]
    assert any(s["flags"] & 16 and s["text"].strip() for s in spans)  # a bold run: where, tests/documents/test_inline_markup.py
    assert all(s["size"] <= 11 for s in spans)


def test_pdf_blocks_are_translated_whole_keeping_pages_images_links_and_bold(model, tmp_path):
    source = _pdf(SENTENCES)
    (tmp_path / "in.pdf").write_bytes(source)
    run_mt("translate", "-c", model, "-i", tmp_path / "in.pdf", "-o", tmp_path / "out.pdf")
    _checked(source, (tmp_path / "out.pdf").read_bytes(), plain(model, SENTENCES[:2]))


def test_translate_file_takes_a_pdf(file_server, model, tmp_path):
    source = _pdf(SENTENCES)
    answer = file_server.post("/translate_file", data={"source": "de", "target": "en"},
                              files={"file": ("Bericht.pdf", source)})
    assert answer.status_code == 200, answer.text
    download = httpx.get(answer.json()["translatedFileUrl"], timeout=60)
    _checked(source, download.content, plain(model, SENTENCES[:2]))
    assert ".pdf" in file_server.get("/frontend/settings").json()["supportedFilesFormat"]
    for data in (NO_PAGES, REPAIRED_TO_NONE):
        answer = file_server.post("/translate_file", data={"source": "de", "target": "en"},
                                  files={"file": ("leer.pdf", data)})
        assert answer.status_code == 400 and answer.json()["error"].startswith(
            "Invalid request: leer.pdf: a PDF without pages"), answer.text


def _raw_pdf(*objects: bytes) -> bytes:
    """A PDF of these objects (1 0 R the catalogue), written byte by byte with its cross-reference table."""
    out, offsets = b"%PDF-1.4\n", []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    table = b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    return out + b"xref\n0 %d\n0000000000 65535 f \n%strailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1, table, len(objects) + 1, len(out))


NO_PAGES = _raw_pdf(b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [] /Count 0 >>")
REPAIRED_TO_NONE = b"%PDF-1.7\n1 0 obj\n<< /Type /Catalog >>\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n"


@pytest.mark.parametrize("case", ["lies", "encrypted", "truncated", "no pages", "repaired to none"])
def test_bad_pdfs_are_one_line_each_and_write_nothing(model, tmp_path, case):
    if case == "no pages":
        data, message = NO_PAGES, "a PDF without pages (its page tree is empty): nothing to translate"
    elif case == "repaired to none":
        data, message = REPAIRED_TO_NONE, "a PDF without pages (its page tree is empty, as PyMuPDF repaired it)"
    elif case == "lies":
        data, message = b"<html>not a PDF</html>", "not a readable PDF"
    elif case == "encrypted":
        doc = pymupdf.open()
        doc.new_page().insert_text((72, 72), SENTENCES[0])
        data = doc.tobytes(encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="secret", owner_pw="owner")
        message = "an encrypted PDF (it needs a password): mt translates unencrypted PDF files"
    else:
        data, message = _pdf(SENTENCES)[:200], "not a readable PDF"
    path, out = tmp_path / f"{case}.pdf", tmp_path / "out.pdf"
    path.write_bytes(data)
    line = one_error_line(run_mt("translate", "-c", model, "-i", path, "-o", out, check=False))
    assert line.startswith(f"error: {path}: {message}"), line
    assert not out.exists()


COLUMNS = (72, 222, 372)  # where a table's cells start


def _table_and_field(sentences: list[str]) -> tuple[bytes, list[list[str]]]:
    """A table inside a drawn border, each row's cells on one line (MuPDF reads each row as one block), and
    below it a sentence beside a text field holding a value; and the table's rows."""
    rows = [["Paket", "Version", "Beschreibung"], [" ".join(sentences[0].split()[:2]), "1.0", sentences[1]],
            [" ".join(sentences[2].split()[:2]), "2.3", " ".join(sentences[3].split()[:3])]]
    doc = pymupdf.open()
    page = doc.new_page()
    for r, cells in enumerate(rows):
        for x, text in zip(COLUMNS, cells):
            page.insert_text((x, 100 + 20 * r), text, fontname="helv", fontsize=11)
    page.draw_rect(pymupdf.Rect(68, 85, 560, 150))
    page.insert_text((72, 214), sentences[4], fontname="helv", fontsize=11)
    field = pymupdf.Widget()
    field.field_name, field.field_type = "name", pymupdf.PDF_WIDGET_TYPE_TEXT
    field.field_value, field.rect = "Hans Müller wohnt hier", pymupdf.Rect(72, 230, 300, 250)
    page.add_widget(field)
    return doc.tobytes(), rows


def test_table_cells_on_one_line_are_translated_apart_and_form_fields_left_alone(model, tmp_path):
    source, rows = _table_and_field(SENTENCES)
    (tmp_path / "in.pdf").write_bytes(source)
    run_mt("translate", "-c", model, "-i", tmp_path / "in.pdf", "-o", tmp_path / "out.pdf")
    page = pymupdf.open(tmp_path / "out.pdf")[0]
    texts = [cell for row in rows for cell in row if any(c.isalpha() for c in cell)]
    expected = iter(plain(model, texts + [SENTENCES[4]]))
    for r, cells in enumerate(rows):
        for k, cell in enumerate(cells):
            right = COLUMNS[k + 1] - 2 if k + 1 < len(COLUMNS) else 560
            found = page.get_text("text", clip=pymupdf.Rect(COLUMNS[k] - 2, 86 + 20 * r, right, 104 + 20 * r))
            want = next(expected) if any(c.isalpha() for c in cell) else cell
            assert " ".join(found.split()) == " ".join(want.split()), (r, k)
    table = page.get_text("dict", clip=pymupdf.Rect(68, 85, 560, 150))["blocks"]
    spans = [s for b in table for line in b.get("lines", []) for s in line["spans"]]
    assert not [s["text"] for s in spans if any(s["bbox"][0] < x - 2 < s["bbox"][2] for x in COLUMNS[1:])]
    assert " ".join(page.get_text("text", clip=pymupdf.Rect(70, 200, 560, 222)).split()) == \
        " ".join(next(expected).split())
    field = next(page.widgets())
    assert field.field_value == "Hans Müller wohnt hier"
    assert " ".join(page.get_text("text", clip=field.rect).split()) == "Hans Müller wohnt hier"
