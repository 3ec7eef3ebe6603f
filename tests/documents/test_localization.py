"""Localization files (mt/documents/po.py) and placeholders (mt/documents/placeholders.py): `mt translate` and
`/translate_file` fill what is untranslated and keep every other byte, written files pass GNU gettext's
`msgfmt --check`, read back in polib and translate-toolkit, and give translate-toolkit's placeholder checks
(pofilter's) nothing new, plural entries get the target language's forms, a translation that would lose a
placeholder is not written, and bad files are one line each with nothing written. The model is
tests/documents/conftest.py's small random one."""

from __future__ import annotations

import gettext
import re
import subprocess
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import httpx
import polib
import pytest

from tests.conftest import one_error_line, run_mt
from tests.documents.conftest import LAUGHS, SENTENCES, plain
from tests.documents.localization_checks import each_refused_in_one_line, toolkit_failures, toolkit_store

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

#, c-format
msgid "{s[5]}\\n%s\\n"
msgstr ""

#: src/env.sh:3
#, sh-format
msgid "{words[0]} $HOME {' '.join(words[1:3])} ${{x}} {{{{ user }}}} %1$s {words[3]} %(count)d"
msgstr ""

{OBSOLETE}""")


def msgfmt_check(path: Path) -> None:
    """GNU gettext's checks, of the fuzzy entries too (msgfmt skips them without --use-fuzzy: every entry mt
    fills is fuzzy)."""
    proc = subprocess.run(["msgfmt", "--check", "--use-fuzzy", "-o", "/dev/null", str(path)], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr


def toolkit_finds_nothing_new(source: bytes, written: bytes, name: str) -> None:
    """pofilter reports nothing for a unit of the written file that it did not report for the same unit of the
    source (a unit mt filled had no target there, so nothing at all), and translate-toolkit sees each target with
    the inline codes of its source (XLIFF's `<x/>`, `<g>`, `<ph>`, `<pc>`: its checks read the text without them)."""
    before, store = toolkit_failures(toolkit_store(source)), toolkit_store(written)
    for unit, failed in toolkit_failures(store).items():
        new = sorted(failed - before.get(unit, set()))
        assert not new, f"{name}: {unit!r}: pofilter's {', '.join(new)} check fails"
    for unit in (u for u in store.units if u.target):
        codes, kept = _inline_codes(unit.rich_source), _inline_codes(unit.rich_target)
        assert Counter(codes) == Counter(kept), f"{name}: {unit.getid()!r}: inline codes {codes} in the source, " \
                                                f"{kept} in the target"


def _inline_codes(rich) -> list[tuple[str, str | None]]:
    return [(type(node).__name__, getattr(node, "id", None)) for string in rich for node in string.depth_first()
            if type(node).__name__ != "StringElem"]


def toolkit_reads_po_as_polib(data: bytes) -> None:
    """translate-toolkit reads a PO file as polib does: the same entries in order, obsolete ones too, with their
    contexts, msgids, msgstrs (each plural form) and fuzzy flags."""
    def polib_entry(e):
        return (e.msgctxt or "", [e.msgid, e.msgid_plural] if e.msgid_plural else [e.msgid],
                [e.msgstr_plural[i] for i in sorted(e.msgstr_plural)] if e.msgid_plural else [e.msgstr],
                "fuzzy" in e.flags, e.obsolete)

    def toolkit_unit(u):
        strings = (lambda s: list(s.strings)) if u.hasplural() else (lambda s: [str(s)])
        return u.getcontext(), strings(u.source), strings(u.target), u.isfuzzy(), u.isobsolete()

    units = [toolkit_unit(u) for u in toolkit_store(data).units if not u.isheader()]
    assert units == [polib_entry(e) for e in polib.pofile(data.decode("utf-8"))]


def toolkit_reads_xliff_as_written(source: bytes, written: bytes) -> None:
    """translate-toolkit reads an XLIFF file mt wrote as ElementTree does (the same units in order, with their
    sources' and targets' text), each unit whose target mt wrote as waiting for review, and every other unit in the
    state it read in the source. XLIFF 2.0 has no review state: its reader takes mt's `translated` for translated
    and not yet reviewed (mt's `subState` is an extension it does not read)."""
    root = ET.fromstring(written)
    ns = root.tag[1:].split("}")[0]
    version2 = root.get("version").startswith("2")
    elements = list(root.iter(f"{{{ns}}}{'segment' if version2 else 'trans-unit'}"))
    units, originals = toolkit_store(written).units, toolkit_store(source).units
    assert len(units) == len(elements) == len(originals)
    for unit, element, original in zip(units, elements, originals):
        target = element.find(f"{{{ns}}}target")
        assert unit.source == original.source == _text(element.find(f"{{{ns}}}source"))
        assert unit.target == (None if target is None else _text(target))
        if unit.target == original.target:
            assert _state(unit) == _state(original), unit.getid()
        elif unit.target != unit.source:  # the source copied as target: a translation refused
            assert (unit.istranslated() and not unit.isapproved()) if version2 else unit.isreview(), unit.getid()


def _text(element) -> str:
    """An element's text as translate-toolkit gives it without xml:space="preserve": its whitespace collapsed."""
    return " ".join("".join(element.itertext()).split())


def _state(unit) -> tuple:
    return unit.isfuzzy(), unit.istranslated(), unit.isapproved(), unit.isreview(), unit.get_state_n()


def toolkit_checks(source: Path, written: Path) -> None:
    """Every translate-toolkit check of a file mt wrote from `source`."""
    data, written_data = source.read_bytes(), written.read_bytes()
    if written_data.lstrip().startswith(b"<"):
        toolkit_reads_xliff_as_written(data, written_data)
    else:
        toolkit_reads_po_as_polib(written_data)
    toolkit_finds_nothing_new(data, written_data, written.name)


def translated_po(model, tmp_path, text: str, *options) -> tuple[str, polib.POFile]:
    (tmp_path / "de.po").write_text(text, encoding="utf-8")
    run_mt("translate", "-c", model, "-i", tmp_path / "de.po", "-o", tmp_path / "out.po", *options)
    msgfmt_check(tmp_path / "out.po")
    toolkit_checks(tmp_path / "de.po", tmp_path / "out.po")
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
    remove, open_file, plural, markup, lines, variables, _ = catalog
    assert "fuzzy" in remove.flags and "fuzzy" not in open_file.flags and open_file.msgstr == "Open file"
    assert remove.msgstr.count("%s") == 1 and remove.msgstr.count("{dir}") == 1
    assert sorted(plural.msgstr_plural) == [0, 1] and plural.msgstr_plural[0] == plain(model, [SENTENCES[2]])[0]
    assert plural.msgstr_plural[1].count("%d") == 1  # form 0 is 1 alone: the singular, which says no number
    assert markup.msgstr.count("<b>") == 1 and markup.msgstr.count("</b>") == 1
    assert markup.msgstr.index("<b>") < markup.msgstr.index("</b>")
    assert lines.msgstr.endswith("\n%s\n") and lines.msgstr.count("%s") == 1  # msgfmt: ends with \n as msgid does
    assert [variables.msgstr.count(p) for p in ("$HOME", "${x}", "{{ user }}", "%1$s", "%(count)d")] == [1] * 5


def test_retranslate_fills_translated_entries_too(model, tmp_path):
    out, catalog = translated_po(model, tmp_path, po_file(), "--retranslate")
    open_file = catalog[1]
    assert open_file.msgstr == plain(model, ["Datei öffnen"])[0] and "fuzzy" in open_file.flags
    assert OBSOLETE in out and len(catalog.obsolete_entries()) == 1


@pytest.mark.parametrize("language,singular", [("de", [True, False]), ("pl", [True, False, False]),
                                               ("ru", [False, False, False])])
def test_plural_entries_get_one_form_per_plural_form_of_the_language(model, tmp_path, language, singular):
    """A POT's header says nplurals=INTEGER and charset=CHARSET: the forms come from the file's Language, and the
    header gets them and UTF-8.
    A form that only 1 takes is translated from the singular (no number in it); Russian's form 0 is also 21's."""
    pot = po_file(language, '"Plural-Forms: nplurals=INTEGER; plural=EXPRESSION;\\n"')
    out, catalog = translated_po(model, tmp_path, pot.replace("charset=UTF-8", "charset=CHARSET"))
    plural, count = catalog[2], len(singular)
    assert sorted(plural.msgstr_plural) == list(range(count))
    assert [plural.msgstr_plural[i].count("%d") for i in range(count)] == [0 if one else 1 for one in singular]
    assert all(plural.msgstr_plural.values())
    assert catalog.metadata["Plural-Forms"].startswith(f"nplurals={count};")
    assert catalog.metadata["Content-Type"] == "text/plain; charset=UTF-8"


def test_a_header_with_three_forms_is_followed(model, tmp_path):
    forms = '"Plural-Forms: nplurals=3; plural=(n==1) ? 0 : (n>=2 && n<=4) ? 1 : 2;\\n"'
    out, catalog = translated_po(model, tmp_path, po_file("en", forms))
    assert sorted(catalog[2].msgstr_plural) == [0, 1, 2]
    assert forms in out


def test_a_translation_that_loses_a_placeholder_is_not_written():
    from mt.documents.po import PoDocument

    document = PoDocument(po_file().encode(), Path("de.po"))
    wrong = [(s + " %s", None) for s in document.sentences]  # every translation gains a placeholder of its own
    catalog = polib.pofile(document.render(wrong).data.decode())
    filled = [e for e in catalog if not e.obsolete and e.msgid != "Datei öffnen"]
    assert all(e.msgstr == "" and not any(e.msgstr_plural.values()) and "fuzzy" in e.flags for e in filled)
    assert document.render(wrong).notes == ["de.po: 5 entries left untranslated and marked fuzzy: a placeholder or tag would "
                                "not come back from their translation"]
    toolkit_reads_po_as_polib(document.render(wrong).data)


def test_an_xliff_unit_that_would_lose_a_placeholder_gets_its_source():
    """Its source copied as target, with every inline code, which translate-toolkit reads as not yet translated."""
    from mt.documents.xliff import XliffDocument

    for template, state in ((XLIFF_12, "needs-translation"), (XLIFF_20, "initial")):
        source = xliff_file(template).encode()
        document = XliffDocument(source, Path("in.xlf"))
        written = document.render([(s + " %s", None) for s in document.sentences]).data
        toolkit_reads_xliff_as_written(source, written)
        toolkit_finds_nothing_new(source, written, "in.xlf")
        units = [u for u in toolkit_store(written).units if u.istranslatable() and u.source != "Datei öffnen"]
        assert [u.target for u in units] == [u.source for u in units] and not any(u.istranslated() for u in units)
        assert document.render([(s + " %s", None) for s in document.sentences]).notes == [f"in.xlf: {len(units)} units given their source as target, marked {state}: a "
                                    "placeholder or tag would not come back from their translation"]


def test_the_toolkit_checks_fail_on_a_lost_placeholder():
    """The checks every written file gets are not vacuous: a target that lost a placeholder or inline code fails
    them in one line naming the entry and the check."""
    # $HOME before ${x}: pofilter's variables reads no $NAME after a ${name}, nor a {{ name }} with spaces (mt's
    # own check, placeholders.kept, reads both)
    def po_text(msgstr: str) -> bytes:
        return f'msgid "Remove %s from {{dir}}, $HOME and ${{x}} <b>now</b>"\nmsgstr "{msgstr}"\n'.encode()

    translation = "Entferne %s aus {dir}, $HOME und ${x} <b>jetzt</b>"
    toolkit_finds_nothing_new(po_text(""), po_text(translation), "out.po")
    for lost, check in (("%s ", "printf"), ("{dir}", "pythonbraceformat"), ("${x}", "variables"),
                        ("$HOME", "variables"), ("<b>", "xmltags")):
        with pytest.raises(AssertionError, match=rf"^out.po: 'Remove .*': pofilter's .*\b{check}\b.* check fails"):
            toolkit_finds_nothing_new(po_text(""), po_text(translation.replace(lost, "")), "out.po")
    source = xliff_file(XLIFF_12)
    for target, fails in (('x <g id="1">y</g> <ph id="2">&lt;br/&gt;</ph>', False),
                          ('x y <ph id="2">&lt;br/&gt;</ph>', True)):
        written = source.replace("<target/>", f"<target>{target}</target>").encode()
        if fails:
            with pytest.raises(AssertionError, match=r"^out.xlf: '.*4': inline codes \[\('G', '1'\), \("
                                                     r"'UnknownXML', '2'\)\] in the source, \[\('UnknownXML', '2'\)\]"):
                toolkit_finds_nothing_new(source.encode(), written, "out.xlf")
        else:
            toolkit_finds_nothing_new(source.encode(), written, "out.xlf")


def test_placeholders_come_back_where_their_words_went():
    from mt.documents.placeholders import placeholders, protected

    source = "Remove %1$s from <b>{dir}</b>: $HOME/${x}, %(count)d &amp; 100% sure (%d) '%s'?"
    assert placeholders(source) == ["%1$s", "<b>", "{dir}", "</b>", "$HOME", "${x}", "%(count)d", "&amp;", "%d",
                                    "%s"]
    message = protected(source)
    assert message.unit.text == "Remove from : , 100% sure ?"
    text = message.rendered(iter([("Entferne aus : , 100% sicher ?", "0-0 1-1 2-2 3-3 4-4 5-5 6-6")]))
    assert text == "Entferne %1$s aus <b>{dir}</b>: $HOME/${x}, %(count)d &amp; 100% sicher (%d) '%s'?"


def test_placeholders_in_lines_come_back_each_once(model, tmp_path):
    s = SENTENCES
    words = s[0].rstrip(".").split()
    lines = [f"{words[0]} %s {' '.join(words[1:])} {{0}}.", s[1], "", f"<b>{s[2]}</b> $HOME"]
    proc = run_mt("translate", "-c", model, "--placeholders", input="\n".join(lines) + "\n")
    out = proc.stdout.split("\n")
    assert len(out) == len(lines) + 1 and out[2] == "" and proc.stderr == ""
    assert out[1] == plain(model, [s[1]])[0]
    assert out[0].count("%s") == 1 and out[0].count("{0}") == 1
    assert out[3].startswith("<b>") and out[3].count("</b>") == 1 and out[3].endswith(" $HOME")
    for options, message in ((("--nbest", "2"), "error: --nbest: not with --placeholders"),
                             (("-i", tmp_path / "a.html"), "error: --placeholders: for line input; the input is read "
                                                           "as html, whose markup is kept anyway")):
        (tmp_path / "a.html").write_text("<p>Hallo</p>")
        assert one_error_line(run_mt("translate", "-c", model, "--placeholders", *options, check=False,
                                     input="x\n")) == message


def test_a_line_that_would_lose_a_placeholder_is_written_as_it_came():
    from mt.documents.localization import MessageLines

    document = MessageLines("Datei %s löschen?\nHallo Welt\n".encode(), Path("in.txt"))
    out = document.render([("delete %d file ?", None), ("hello world", "0-0 1-1")]).data
    assert out.decode() == "Datei %s löschen?\nhello world\n"
    assert document.render([("delete %d file ?", None), ("hello world", "0-0 1-1")]).notes == ["in.txt: 1 lines written as they came: a placeholder or tag would not come back "
                                "from their translation"]


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
    each_refused_in_one_line(model, tmp_path, cases)
    line = one_error_line(run_mt("translate", "-c", model, "--retranslate", check=False, input="Hallo\n"))
    assert line == "error: --retranslate: for localization files that hold translations (po, xliff, ts); the input " \
                   "is read as lines"


XLIFF_12 = """<?xml version="1.0" encoding="UTF-8"?>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">
  <file source-language="de" target-language="en" datatype="plaintext" original="app.ts">
    <body>
      <trans-unit id="1">
        <source>{words[0]} <x id="1"/> {rest} &amp; %s {{count}} $HOME?</source>
        <note>A note</note>
      </trans-unit>
      <trans-unit id="2">
        <source>Datei öffnen</source>
        <target state="translated">Open file</target>
      </trans-unit>
      <trans-unit id="3" translate="no">
        <source>{s[2]}</source>
      </trans-unit>
      <trans-unit id="4">
        <source>{s[3]} <g id="1">{s[4]}</g> <ph id="2">&lt;br/&gt;</ph></source>
        <target/>
        <alt-trans><source>x</source><target>y</target></alt-trans>
      </trans-unit>
    </body>
  </file>
</xliff>
"""
XLIFF_20 = """<?xml version="1.0" encoding="UTF-8"?>
<xliff xmlns="urn:oasis:names:tc:xliff:document:2.0" version="2.0" srcLang="de" trgLang="en">
  <file id="f1">
    <unit id="1">
      <segment>
        <source>{words[0]} <ph id="1"/> {rest} %1$s ${{x}} {{{{name}}}} <pc id="2">{s[3]}</pc></source>
      </segment>
      <ignorable><source> </source></ignorable>
    </unit>
    <unit id="2">
      <segment state="final">
        <source>Datei öffnen</source>
        <target>Open file</target>
      </segment>
    </unit>
  </file>
</xliff>
"""


def xliff_file(template: str) -> str:
    words = SENTENCES[0].rstrip(".").split()
    return template.format(words=words, rest=" ".join(words[1:]), s=SENTENCES)


def test_xliff_units_get_targets_marked_for_review_and_keep_every_other_byte(model, tmp_path):
    for template, marks in ((XLIFF_12, ' state="needs-review-translation" state-qualifier="leveraged-mt"'),
                            (XLIFF_20, ' state="translated" subState="mt:needs-review"')):
        source = xliff_file(template)
        (tmp_path / "in.xlf").write_text(source, encoding="utf-8")
        run_mt("translate", "-c", model, "-i", tmp_path / "in.xlf", "-o", tmp_path / "out.xlf")
        toolkit_checks(tmp_path / "in.xlf", tmp_path / "out.xlf")
        out = (tmp_path / "out.xlf").read_text(encoding="utf-8")
        ns = {"x": ET.fromstring(out.encode()).tag[1:].split("}")[0]}
        root = ET.fromstring(out.encode())
        assert out.count(marks) == 1 + (template is XLIFF_12)
        if template is XLIFF_12:
            units = root.findall(".//x:trans-unit", ns)
            assert [u.find("x:target", ns) is not None for u in units] == [True, True, False, True]
            first, fourth = units[0].find("x:target", ns), units[3].find("x:target", ns)
            assert [e.tag.split("}")[1] for e in first] == ["x"] and "".join(first.itertext()).count("&") == 1
            assert "%s" in ET.tostring(first, encoding="unicode")
            assert [e.tag.split("}")[1] for e in fourth] == ["g", "ph"] and fourth[1].text == "<br/>"
            for kept in ('<target state="translated">Open file</target>', '<trans-unit id="3" translate="no">\n'
                         f'        <source>{SENTENCES[2]}</source>\n      </trans-unit>',
                         "<alt-trans><source>x</source><target>y</target></alt-trans>", "<note>A note</note>"):
                assert kept in out
        else:
            target = root.find(".//x:segment/x:target", ns)
            assert sorted(e.tag.split("}")[1] for e in target) == ["pc", "ph"]  # in the order the alignment puts them
            assert '<segment state="final">\n        <source>Datei öffnen</source>\n        <target>Open file' in out
            assert "<ignorable><source> </source></ignorable>" in out
        assert out.replace(marks, "", 1).count("<target") == source.count("<target") + 1


def test_bad_xliff_files_are_one_line_each_and_write_nothing(model, tmp_path):
    cases = {
        "text.xlf": (b"Hallo Welt\n", "line 1: not well-formed XML (syntax error, column 1)"),
        "cut.xlf": (xliff_file(XLIFF_12)[:415].encode(), "line 10: not well-formed XML (no element found"),
        "bomb.xlf": (LAUGHS, "declares entities, which an XLIFF 1.2 or 2.0 file needs not: refused"),
        "html.xlf": (b"<html version='1.2'><p>x</p></html>", "line 1: not an XLIFF 1.2 or 2.0 file (its root is "
                                                             "<html>)"),
        "v3.xlf": (b"<xliff version='3.0'/>", "line 1: not an XLIFF 1.2 or 2.0 file (its version is '3.0')"),
    }
    each_refused_in_one_line(model, tmp_path, cases)


# ---------------------------------------------------------------- LibreTranslate's file API through mt serve


@pytest.fixture(scope="module")
def file_server(model):
    from tests.conftest import RunningServer

    running = RunningServer(model)
    yield running
    assert running.stop() == 0


def test_translate_file_and_translate_keep_placeholders_as_mt_translate_does(file_server, model, tmp_path):
    (tmp_path / "de.po").write_text(po_file(), encoding="utf-8")
    run_mt("translate", "-c", model, "-i", tmp_path / "de.po", "-o", tmp_path / "offline.po")
    answer = file_server.post("/translate_file", data={"source": "de", "target": "en"},
                              files={"file": ("de.po", po_file().encode())})
    assert answer.status_code == 200, answer.text
    download = httpx.get(answer.json()["translatedFileUrl"], timeout=60)
    assert download.content == (tmp_path / "offline.po").read_bytes()
    text = f"{SENTENCES[0].rstrip('.')} %(count)d {{name}}."
    answer = file_server.post("/translate", json={"q": [text, SENTENCES[1]], "source": "de", "target": "en",
                                                  "placeholders": True}).json()
    assert answer["placeholdersKept"] == [True, True]
    assert [answer["translatedText"][0].count(p) for p in ("%(count)d", "{name}")] == [1, 1]
    assert answer["translatedText"][1] == plain(model, [SENTENCES[1]])[0]
    refused = file_server.post("/translate", json={"q": "x", "source": "de", "target": "en", "format": "html",
                                                   "placeholders": True})
    assert refused.status_code == 400 and "placeholders: for format text" in refused.json()["error"]
    bad = file_server.post("/translate_file", data={"source": "de", "target": "en"},
                           files={"file": ("bad.pot", b'msgid "a"\nmsgstr "b"\n\nmsgid "c"d"\n')})
    assert bad.status_code == 400 and bad.json()["error"].startswith("Invalid request: bad.pot: line 4: not a valid")
    bomb = file_server.post("/translate_file", data={"source": "de", "target": "en"}, files={"file": ("a.xlf", LAUGHS)})
    assert bomb.status_code == 400 and "a.xlf: declares entities" in bomb.json()["error"]


ENGLISH = """# English messages of demo.
msgid ""
msgstr ""
"Project-Id-Version: demo 1.0\\n"
"Language: en\\n"
"MIME-Version: 1.0\\n"
"Content-Type: text/plain; charset=UTF-8\\n"
"Plural-Forms: nplurals=2; plural=(n != 1);\\n"

#, python-format
msgid "Hello, %(name)s!"
msgstr "Hello, %(name)s!"

#, python-format
msgid "%(count)d file was removed"
msgid_plural "%(count)d files were removed"
msgstr[0] "%(count)d file was removed"
msgstr[1] "%(count)d files were removed"
"""


def test_a_catalogue_translated_into_another_language_says_it_and_takes_its_plural_rule(tmp_path):
    """An English catalogue written for French says Language: fr and French's plural rule, under which gettext
    gives 0 the singular form, as msginit writes a new language's file; its English translations are translated
    again (they are another language's). A catalogue that says the target language already is left as it is."""
    from mt.documents.messages import Localization
    from mt.documents.po import PoDocument

    document = PoDocument(ENGLISH.encode(), Path("en.po"), Localization("fr"))
    numbered = [s for s in document.sentences if s[0].isdigit()]  # the plural in French's forms: 0 and 1, then 2
    assert "Hello, !" in document.sentences and numbered == ["1 file was removed", "2 files were removed"]
    written = document.render([(f"«{s}»", None) for s in document.sentences]).data
    (tmp_path / "fr.po").write_bytes(written)
    msgfmt_check(tmp_path / "fr.po")
    catalog = polib.pofile(written.decode())
    assert catalog.metadata["Language"] == "fr"
    assert catalog.metadata["Plural-Forms"] == "nplurals=2; plural=(n > 1);"
    assert written.decode().startswith(ENGLISH.split('"Language')[0])  # every other header line as it was
    subprocess.run(["msgfmt", "--use-fuzzy", "-o", tmp_path / "fr.mo", tmp_path / "fr.po"], check=True)
    with open(tmp_path / "fr.mo", "rb") as f:
        french = gettext.GNUTranslations(f)
    plural = catalog[1]
    for n, form in ((0, 0), (1, 0), (2, 1)):
        assert french.ngettext(plural.msgid, plural.msgid_plural, n) == plural.msgstr_plural[form]
    assert all("fuzzy" in e.flags and e.msgstr_plural[0] != e.msgid for e in catalog if e.msgid_plural)
    french_file = written.replace(b"Language: fr", b"Language: fr_FR")
    same = PoDocument(french_file, Path("fr.po"), Localization("fr"))
    assert same.sentences == [] and same.render([]).data == french_file


def test_an_xliff_file_for_another_language_says_the_target_language():
    """1.2's <file target-language> and 2.0's <xliff trgLang> say the target, in place (every other byte as it
    was), and the targets already there (another language's) are translated again."""
    from mt.documents.messages import Localization
    from mt.documents.xliff import XliffDocument

    for template, attribute in ((XLIFF_12, 'target-language="fr"'), (XLIFF_20, 'trgLang="fr"')):
        source = xliff_file(template)
        document = XliffDocument(source.encode(), Path("in.xlf"), Localization("fr"))
        assert len(document.sentences) > len(XliffDocument(source.encode(), Path("in.xlf")).sentences)
        written = document.render([(s, None) for s in document.sentences]).data.decode()
        original_tag = re.search(r"<(?:file|xliff) [^>]*>", source).group()
        assert original_tag.replace(attribute.replace("fr", "en"), attribute) in written
        toolkit_reads_xliff_as_written(source.encode(), written.encode())
        kept = XliffDocument(written.encode(), Path("out.xlf"), Localization("fr"))  # says fr now: left as it is
        assert kept.sentences == [] and kept.render([]).data.decode() == written


def test_xml_units_give_each_unit_with_its_direct_children_only():
    """The XML unit locator of XLIFF, Qt and Android: a unit's direct children in order (a grandchild, such as
    XLIFF 1.2's alt-trans target, is not one of them), a self-closed child as void, each located in the file's own
    characters; no unit inside an element that is left (translate="no"), nor the left element itself."""
    from mt.documents.localization import xml_units
    text = ('<xliff><file>\n  <trans-unit id="1"><source>Hallo &amp; <g id="1">Welt</g></source>'
            '<alt-trans><target>old</target></alt-trans><target/></trans-unit>\n'
            '  <group translate="no"><trans-unit id="2"><source>kept</source></trans-unit></group>\n'
            '  <trans-unit id="3" translate="no"><source>kept too</source></trans-unit>\n'
            '  <trans-unit id="4">\n    <source>Tschüss</source>\n  </trans-unit></file></xliff>')
    units = xml_units(text, lambda tag: tag.name == "trans-unit", lambda attrs: attrs.get("translate") == "no")
    assert [u.attrs["id"] for u in units] == ["1", "4"]
    first, last = units
    assert [(c.name, c.void) for c in first.children] == [("source", False), ("alt-trans", False), ("target", True)]
    source = first.child("source")
    assert source.inner == 'Hallo &amp; <g id="1">Welt</g>' == text[source.inner_start:source.inner_end]
    assert text[source.start:source.end] == f"<source>{source.inner}</source>"
    assert first.inner_of("target") == "" and first.child("target").open_tag == "<target>"
    assert text[first.start:first.end].startswith('<trans-unit id="1">') and text[first.end - 13:first.end] == \
        "</trans-unit>"
    assert last.child("source").inner == "Tschüss" and last.child("source").blank == "\n    "
