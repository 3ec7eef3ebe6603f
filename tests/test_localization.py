"""Localization files (mt/documents/po.py) and placeholders (mt/documents/placeholders.py): `mt translate` and
`/translate_file` fill what is untranslated and keep every other byte, written files pass GNU gettext's
`msgfmt --check` and read back in polib, plural entries get the target language's forms, a translation that
would lose a placeholder is not written, and bad files are one line each with nothing written. The model is
tests/test_documents.py's small random one."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import polib
import pytest

from tests.conftest import one_error_line, run_mt
from tests.test_documents import SENTENCES, model, plain  # noqa: F401 (a fixture)
from tests.test_marian import spm_models  # noqa: F401 (a fixture)

HEADER = """# German translation of demo.
# Copyright (C) 2026 the demo authors
msgid ""
msgstr ""
"Project-Id-Version: demo 1.0\\n"
"Language: {language}\\n"
"MIME-Version: 1.0\\n"
"Content-Type: text/plain; charset=UTF-8\\n"
"Content-Transfer-Encoding: 8bit\\n"
{forms}
"""
TRANSLATED = """#. Shown in the menu
#: src/menu.c:12
msgctxt "menu"
msgid "Datei öffnen"
msgstr   "Open file"
"""
OBSOLETE = """#~ msgid "Alte Meldung"
#~ msgstr "Old message"
"""


def po_file(language: str = "en", forms: str = '"Plural-Forms: nplurals=2; plural=(n != 1);\\n"') -> str:
    s = SENTENCES
    words = s[1].rstrip(".").split()
    return (HEADER.format(language=language, forms=forms) + f"""
#. A translator's comment
#: src/main.c:10 src/main.c:20
#, c-format
msgid "{words[0]} %s {' '.join(words[1:3])} {{dir}}?"
msgstr ""

{TRANSLATED}
#: src/main.c:30
#, c-format
msgid "{s[2]}"
msgid_plural "%d {s[2][0].lower()}{s[2][1:]}"
msgstr[0] ""
msgstr[1] ""

#: src/help.c:4
#, fuzzy
#| msgid "{s[4]}"
msgid ""
"{s[3]} "
"<b>{s[4].split()[0]}</b> {' '.join(s[4].split()[1:])}"
msgstr ""

{OBSOLETE}""")


def msgfmt_check(path: Path) -> None:
    proc = subprocess.run(["msgfmt", "--check", "-o", "/dev/null", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def translated_po(model, tmp_path, text: str, *options) -> tuple[str, polib.POFile]:
    (tmp_path / "de.po").write_text(text, encoding="utf-8")
    run_mt("translate", "-c", model, "-i", tmp_path / "de.po", "-o", tmp_path / "out.po", *options)
    msgfmt_check(tmp_path / "out.po")
    return (tmp_path / "out.po").read_text(encoding="utf-8"), polib.pofile(str(tmp_path / "out.po"))


def test_po_fills_what_is_untranslated_and_keeps_every_other_byte(model, tmp_path):
    source = po_file()
    out, catalog = translated_po(model, tmp_path, source)
    for kept in (HEADER.split("{forms}")[0].format(language="en"), TRANSLATED, OBSOLETE,
                 "#. A translator's comment\n#: src/main.c:10 src/main.c:20\n#, fuzzy, c-format\n",
                 f'#, fuzzy\n#| msgid "{SENTENCES[4]}"\n'):
        assert kept in out, kept
    original = polib.pofile(source)
    assert [(e.msgctxt, e.msgid, e.obsolete) for e in catalog] == [(e.msgctxt, e.msgid, e.obsolete) for e in original]
    assert [e.occurrences for e in catalog] == [e.occurrences for e in original]
    remove, open_file, plural, markup, _ = catalog
    assert "fuzzy" in remove.flags and "fuzzy" not in open_file.flags and open_file.msgstr == "Open file"
    assert remove.msgstr.count("%s") == 1 and remove.msgstr.count("{dir}") == 1
    assert sorted(plural.msgstr_plural) == [0, 1] and plural.msgstr_plural[0] == plain(model, [SENTENCES[2]])[0]
    assert plural.msgstr_plural[1].count("%d") == 1  # form 0 is 1 alone: the singular, which says no number
    assert markup.msgstr.count("<b>") == 1 and markup.msgstr.count("</b>") == 1
    assert markup.msgstr.index("<b>") < markup.msgstr.index("</b>")


def test_retranslate_fills_translated_entries_too(model, tmp_path):
    out, catalog = translated_po(model, tmp_path, po_file(), "--retranslate")
    open_file = catalog[1]
    assert open_file.msgstr == plain(model, ["Datei öffnen"])[0] and "fuzzy" in open_file.flags
    assert OBSOLETE in out and len(catalog.obsolete_entries()) == 1


@pytest.mark.parametrize("language,singular", [("de", [True, False]), ("pl", [True, False, False]),
                                               ("ru", [False, False, False])])
def test_plural_entries_get_one_form_per_plural_form_of_the_language(model, tmp_path, language, singular):
    """A POT's header says nplurals=INTEGER: the forms come from the file's Language, and the header gets them.
    A form that only 1 takes is translated from the singular (no number in it); Russian's form 0 is also 21's."""
    out, catalog = translated_po(model, tmp_path, po_file(language, '"Plural-Forms: nplurals=INTEGER; '
                                                                    'plural=EXPRESSION;\\n"'))
    plural, count = catalog[2], len(singular)
    assert sorted(plural.msgstr_plural) == list(range(count))
    assert [plural.msgstr_plural[i].count("%d") for i in range(count)] == [0 if one else 1 for one in singular]
    assert all(plural.msgstr_plural.values())
    assert catalog.metadata["Plural-Forms"].startswith(f"nplurals={count};")


def test_a_header_with_three_forms_is_followed(model, tmp_path):
    forms = '"Plural-Forms: nplurals=3; plural=(n==1) ? 0 : (n>=2 && n<=4) ? 1 : 2;\\n"'
    out, catalog = translated_po(model, tmp_path, po_file("en", forms))
    assert sorted(catalog[2].msgstr_plural) == [0, 1, 2]
    assert forms in out


def test_a_translation_that_loses_a_placeholder_is_not_written():
    from mt.documents.po import PoDocument

    document = PoDocument(po_file().encode(), Path("de.po"))
    wrong = [(s + " %s", None) for s in document.sentences]  # every translation gains a placeholder of its own
    catalog = polib.pofile(document.render(wrong).decode())
    filled = [e for e in catalog if not e.obsolete and e.msgid != "Datei öffnen"]
    assert all(e.msgstr == "" and not any(e.msgstr_plural.values()) and "fuzzy" in e.flags for e in filled)
    assert document.notes() == ["de.po: 3 entries left untranslated and marked fuzzy: a placeholder or tag would "
                                "not come back from their translation"]


def test_placeholders_come_back_where_their_words_went():
    from mt.documents.placeholders import placeholders, protected

    source = "Remove %1$s from <b>{dir}</b>: $HOME/${x}, %(count)d &amp; 100% sure (%d) '%s'?"
    assert placeholders(source) == ["%1$s", "<b>", "{dir}", "</b>", "$HOME", "${x}", "%(count)d", "&amp;", "%d",
                                    "%s"]
    message = protected(source)
    assert message.unit.text == "Remove from : , 100% sure ?"
    text = message.rendered(iter([("Entferne aus : , 100% sicher ?", "0-0 1-1 2-2 3-3 4-4 5-5 6-6")]))
    assert text == "Entferne %1$s aus <b>{dir}</b>: $HOME/${x}, %(count)d &amp; 100% sicher (%d) '%s'?"


def test_bad_po_files_are_one_line_each_and_write_nothing(model, tmp_path):
    cases = {
        "png.po": (b"\x89PNG\r\n\x1a\n" + bytes(20), "line 1: not UTF-8 (byte 0x89); is it a PO file?"),
        "json.po": (b'{"msgid": "x"}\n', "line 1: not a valid PO file"),
        "syntax.po": (b'msgid "a"\nmsgstr "b"\n\nmsgid "c\nmsgstr ""\n', "line 4: not a valid PO file"),
        "quote.po": (b'msgid "a"\nmsgstr "b"\n\nmsgid "c"d"\nmsgstr ""\n', "line 4: not a valid PO file (unescaped"),
        "latin1.po": (b'msgid ""\nmsgstr "Content-Type: text/plain; charset=ISO-8859-1\\n"\n',
                      "charset iso-8859-1: mt reads UTF-8 PO files"),
        "forms.po": (b'msgid ""\nmsgstr "Plural-Forms: nplurals=2; plural=n ?? 1;\\n"\n', "header: Plural-Forms"),
    }
    for name, (data, message) in cases.items():
        (tmp_path / name).write_bytes(data)
        out = tmp_path / f"out-{name}"
        line = one_error_line(run_mt("translate", "-c", model, "-i", tmp_path / name, "-o", out, check=False))
        assert line.startswith(f"error: {tmp_path / name}: ") and message in line, line
        assert not out.exists()
    line = one_error_line(run_mt("translate", "-c", model, "--retranslate", check=False, input="Hallo\n"))
    assert line == "error: --retranslate: for localization files (po); the input is read as lines"


# ---------------------------------------------------------------- LibreTranslate's file API through mt serve


@pytest.fixture(scope="module")
def file_server(model):  # noqa: F811
    from tests.test_server import RunningServer

    running = RunningServer(model)
    yield running
    assert running.stop() == 0


def test_translate_file_writes_the_po_file_mt_translate_writes(file_server, model, tmp_path):
    (tmp_path / "de.po").write_text(po_file(), encoding="utf-8")
    run_mt("translate", "-c", model, "-i", tmp_path / "de.po", "-o", tmp_path / "offline.po")
    answer = file_server.post("/translate_file", data={"source": "de", "target": "en"},
                              files={"file": ("de.po", po_file().encode())})
    assert answer.status_code == 200, answer.text
    download = httpx.get(answer.json()["translatedFileUrl"], timeout=60)
    assert download.content == (tmp_path / "offline.po").read_bytes()
    bad = file_server.post("/translate_file", data={"source": "de", "target": "en"},
                           files={"file": ("bad.pot", b'msgid "a"\nmsgstr "b"\n\nmsgid "c"d"\n')})
    assert bad.status_code == 400 and bad.json()["error"].startswith("Invalid request: bad.pot: line 4: not a valid")
