"""Qt Linguist .ts files (mt/documents/qt.py) and Android string resources (mt/documents/android.py): `mt translate`
fills what is untranslated and keeps every other byte, written files read back in translate-toolkit (and pass
Qt's lrelease), numerus messages get the target language's forms, Android's escapes are
undone and written again, a translation that would lose a placeholder is not written, and bad files are one
line each with nothing written. The model is tests/documents/conftest.py's small random one."""

from __future__ import annotations

import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from translate.storage import aresource
from translate.storage import ts2 as ts

from mt.documents.android import AndroidDocument, read, written
from mt.documents.inline_markup import WORD
from mt.documents.messages import Localization
from mt.documents.qt import TsDocument
from mt.errors import MtError
from tests.conftest import run_mt
from tests.documents.conftest import LAUGHS, SENTENCES
from tests.documents.localization_checks import each_refused_in_one_line

LRELEASE = "/usr/lib/qt6/bin/lrelease"  # Debian's qt6-l10n-tools puts it off the PATH
S = SENTENCES
WORDS = S[0].rstrip(".").split()
TS = """<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE TS>
<TS version="2.1" language="{language}" sourcelanguage="de">
<context>
    <name>MainWindow</name>
    <message>
        <location filename="../src/mainwindow.cpp" line="12"/>
        <source>{s[1]}</source>
        <comment>the menu's</comment>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Datei öffnen</source>
        <translation>Open file</translation>
    </message>
    <message>
        <location filename="../src/mainwindow.cpp" line="+4"/>
        <source>{w[0]} %1 {rest} &amp;{w[1]} &lt;b&gt;{s[3]}&lt;/b&gt; %L2</source>
        <translation type="unfinished"/>
    </message>
    <message numerus="yes">
        <source>%n {plural}</source>
        <translation type="unfinished">
            <numerusform></numerusform>
            <numerusform></numerusform>
        </translation>
    </message>
    <message>
        <source>{s[4]}</source>
        <translation type="vanished">Gone</translation>
    </message>
    <message>
        <source>{s[5]}</source>
        <translation type="obsolete"></translation>
    </message>
</context>
<context>
    <name>Dialog</name>
    <message>
        <source>Don&apos;t &quot;{s[0]}&quot;</source>
        <extracomment>no translation element</extracomment>
    </message>
</context>
</TS>
"""
ANDROID = """<?xml version="1.0" encoding="utf-8"?>
<resources xmlns:tools="http://schemas.android.com/tools" xmlns:xliff="urn:oasis:names:tc:xliff:document:1.2">
    <!-- The app's name is no word to translate -->
    <string name="app_name" translatable="false">Adonthell</string>
    <string name="title">{s[1]}</string>
    <string name="greeting">{w[0]} <xliff:g id="n">%1$s</xliff:g> {rest} \\'{w[1]}\\' &amp; <b>{s[3]}</b></string>
    <string name="spaced">"  {s[2]}  "</string>
    <string name="reference">@string/title</string>
    <string name="attribute">?attr/colorPrimary</string>
    <string name="empty"></string>
    <string-array name="lines">
        <item>{s[4]}</item>
        <item>@string/title</item>
    </string-array>
    <string-array name="codes" translatable="false">
        <item>de</item>
    </string-array>
    <plurals name="packages">
        <item quantity="one">{w[0]} {w[1]}.</item>
        <item quantity="other">%d {plural}</item>
    </plurals>
    <string name="html"><![CDATA[<b>{s[5]}</b>]]></string>
</resources>
"""
TRANSLATED_TS = ("<translation>Open file</translation>", '<translation type="vanished">Gone</translation>',
                 '<translation type="obsolete"></translation>')
KEPT_ANDROID = ('<string name="app_name" translatable="false">Adonthell</string>',
                '<string name="reference">@string/title</string>', '<item>@string/title</item>',
                '<string name="attribute">?attr/colorPrimary</string>', '<string name="empty"></string>',
                '<string-array name="codes" translatable="false">\n        <item>de</item>',
                "<!-- The app's name is no word to translate -->", f"<![CDATA[<b>{S[5]}</b>]]>")
TRANSLATION = re.compile(r"\s*<translation\b[^>]*?(?:/>|>.*?</translation>)", re.S)
CONTENTS = re.compile(r"(<(string|item)\b[^>]*>).*?(</\2>)", re.S)


def ts_file(language: str = "de") -> str:
    plural = f"{S[2][0].lower()}{S[2][1:]}"
    return TS.format(language=language, s=S, w=WORDS, rest=" ".join(WORDS[2:]), plural=plural)


def android_file() -> str:
    return ANDROID.format(s=S, w=WORDS, rest=" ".join(WORDS[2:]), plural=f"{S[2][0].lower()}{S[2][1:]}")


def same(translations_of):
    """Each sentence given back as its own translation, each word aligned to itself, or as `translations_of` says
    (no alignment)."""
    def given(sentence: str) -> tuple[str, str | None]:
        if sentence in translations_of:
            return translations_of[sentence], None
        return sentence, " ".join(f"{i}-{i}" for i in range(len(WORD.findall(sentence))))
    return lambda document: [given(s) for s in document.sentences]


# ---------------------------------------------------------------- Qt Linguist


@pytest.fixture(scope="module")
def translated_ts(model, tmp_path_factory) -> tuple[str, str, Path]:
    folder = tmp_path_factory.mktemp("ts")
    (folder / "de.ts").write_text(ts_file(), encoding="utf-8")
    proc = run_mt("translate", "-c", model, "-i", folder / "de.ts", "-o", folder / "out.ts", "--quiet")
    assert proc.stderr == ""
    return ts_file(), (folder / "out.ts").read_text(encoding="utf-8"), folder


def toolkit_reads_ts_as_written(source: bytes, data: bytes) -> list:
    """translate-toolkit reads a .ts file mt wrote as ElementTree does (the same messages in order, with their
    sources and translations, each numerus form), each message mt translated as unfinished (its `isfuzzy`),
    every other in the state it read in the source; its units."""
    units, originals = ts.tsfile.parsestring(data).units, ts.tsfile.parsestring(source).units
    messages = list(ET.fromstring(data).iter("message"))
    assert len(units) == len(originals) == len(messages)
    for unit, original, message in zip(units, originals, messages):
        translation = message.find("translation")
        assert unit.source == original.source == message.find("source").text
        if unit.hasplural():
            assert list(unit.target.strings) == [f.text or "" for f in translation.iter("numerusform")]
        else:
            assert unit.target == ("" if translation is None else translation.text or "")
        if unit.target != original.target:
            assert unit.isfuzzy() and translation.get("type") == "unfinished", unit.getid()
        else:
            assert (unit.isfuzzy(), unit.isobsolete()) == (original.isfuzzy(), original.isobsolete())
    return units


def test_ts_messages_get_unfinished_translations_and_keep_every_other_byte(translated_ts):
    source, out, _ = translated_ts
    for kept in TRANSLATED_TS:
        assert kept in out, kept
    assert TRANSLATION.sub("", out) == TRANSLATION.sub("", source)
    units = toolkit_reads_ts_as_written(source.encode(), out.encode())
    menu, open_file, markup, plural, vanished, obsolete, quoted = units
    assert [u.isfuzzy() for u in units] == [True, False, True, True, False, False, True]
    assert all(u.target for u in (menu, markup, quoted)) and open_file.target == "Open file"
    assert [markup.target.count(p) for p in ("%1", "%L2", "&", "<b>", "</b>")] == [1] * 5
    assert markup.target.index("<b>") < markup.target.index("</b>")
    assert '&lt;b&gt;' in out.split("<translation")[3] and out.count('<translation type="unfinished">') == 4
    assert len(plural.target.strings) == 2 and all(form.count("%n") == 1 for form in plural.target.strings)
    assert vanished.isobsolete() and obsolete.isobsolete()
    assert ("        <extracomment>no translation element</extracomment>\n"
            '        <translation type="unfinished">') in out


def test_ts_files_pass_lrelease(translated_ts):
    """Qt's own compiler reads the written file: every message mt filled is in the .qm file (as unfinished), and
    Qt's lconvert reads from it the translations ElementTree reads in the .ts file, each numerus form."""
    lrelease = LRELEASE
    assert Path(lrelease).exists(), f"{lrelease} missing: apt-get install qt6-l10n-tools (.ci/run does)"
    _, _, folder = translated_ts
    proc = subprocess.run([lrelease, folder / "out.ts", "-qm", folder / "out.qm"], capture_output=True, text=True)
    assert proc.returncode == 0 and (folder / "out.qm").stat().st_size > 0, proc.stdout + proc.stderr
    assert "Generated 5 translation(s) (1 finished and 4 unfinished)" in proc.stdout, proc.stdout
    lconvert = Path(lrelease).with_name("lconvert")
    subprocess.run([lconvert, "-i", folder / "out.qm", "-o", folder / "back.ts"], check=True, capture_output=True)

    def translations(path: Path) -> dict[str, list[str]]:
        return {m.find("source").text: [t.text or "" for t in m.iter() if t.tag in ("translation", "numerusform")
                                        and not len(t)] for m in ET.parse(path).getroot().iter("message")}
    back, written_ts = translations(folder / "back.ts"), translations(folder / "out.ts")
    assert back == {source: written_ts[source] for source in back} and len(back) == 5


@pytest.mark.parametrize("language,count", [("de", 2), ("pl", 3), ("ru_RU", 3), ("ja", 1)])
def test_numerus_messages_get_one_form_per_plural_form_of_the_language(language, count):
    """The forms of the file's `language`, each with %n where the number it was translated with went."""
    document = TsDocument(ts_file(language).encode(), Path("app.ts"))
    data = document.render(same({})(document)).data
    plural = toolkit_reads_ts_as_written(ts_file(language).encode(), data)[3]
    assert len(plural.target.strings) == count and all(f.count("%n") == 1 for f in plural.target.strings)
    assert plural.target.strings[0] == f"%n {S[2][0].lower()}{S[2][1:]}"
    assert document.render(same({})(document)).notes == []


def test_numerus_messages_of_an_unknown_language_are_left():
    source = ts_file("").replace(' language=""', "")
    document = TsDocument(source.encode(), Path("app.ts"))
    out = document.render(same({})(document)).data.decode()
    assert "<numerusform></numerusform>\n            <numerusform></numerusform>" in out
    assert document.render(same({})(document)).notes == ["app.ts: 1 numerus messages left untranslated: the file's language (the language "
                                "attribute of <TS>) and the target language are unknown or have no known plural forms"]
    document = TsDocument(source.encode(), Path("app.ts"), Localization("pl"))
    toolkit_reads_ts_as_written(source.encode(), document.render(same({})(document)).data)
    assert document.render(same({})(document)).notes == []


def test_ts_text_is_escaped_as_xml():
    document = TsDocument(ts_file().encode(), Path("app.ts"))
    data = document.render(same({S[1]: "Tom & Jerry's 1 < 2 > 0"})(document)).data
    assert "<translation type=\"unfinished\">Tom &amp; Jerry's 1 &lt; 2 &gt; 0</translation>" in data.decode()
    assert toolkit_reads_ts_as_written(ts_file().encode(), data)[0].target == "Tom & Jerry's 1 < 2 > 0"


def test_a_ts_message_that_would_lose_a_placeholder_gets_an_empty_unfinished_translation():
    source = ts_file().encode()
    document = TsDocument(source, Path("app.ts"))
    out = document.render([(s + " %s", None) for s in document.sentences]).data
    units = toolkit_reads_ts_as_written(source, out)
    assert [u.target for u in units] == [o.target for o in ts.tsfile.parsestring(source).units]
    assert out.decode().count('<translation type="unfinished">') == 4
    assert document.render([(s + " %s", None) for s in document.sentences]).notes == ["app.ts: 4 messages left untranslated and marked unfinished: a placeholder or tag "
                                "would not come back from their translation"]


def test_a_ts_translation_is_checked_again_as_the_string_the_program_holds():
    """A shortcut's `&` reaches the model as the placeholder `&#38;`, a rich text's `&amp;` as the placeholder it is;
    a translation whose words after the shortcut's `&` would make an entity (`&amp;`) is not written."""
    source = ('<?xml version="1.0" encoding="utf-8"?>\n<TS version="2.1" language="en"><context><name>x</name>\n'
              '<message><source>&amp;Datei öffnen</source><translation type="unfinished"/></message>\n'
              '<message><source>Neue &amp;amp; Datei</source><translation type="unfinished"/></message>\n'
              '</context></TS>\n').encode()
    document = TsDocument(source, Path("app.ts"))
    assert [m[0].source for m in document.messages.candidates] == ["&#38;Datei öffnen", "Neue &amp; Datei"]
    out = document.render([("amp; file", None), ("New file", None)]).data.decode()
    assert '<source>&amp;Datei öffnen</source><translation type="unfinished"></translation>' in out
    assert '<translation type="unfinished">New file &amp;amp;</translation>' in out  # no alignment: placed last
    assert document.render([("amp; file", None), ("New file", None)]).notes[0].startswith("app.ts: 1 messages left untranslated and marked unfinished")
    out = document.render([("Open file", None), ("New file", None)]).data.decode()
    assert '<translation type="unfinished">&amp;Open file</translation>' in out and not document.render([("Open file", None), ("New file", None)]).notes


def test_retranslate_fills_translated_messages_too_but_not_vanished_ones():
    document = TsDocument(ts_file().encode(), Path("app.ts"), Localization(retranslate=True))
    out = document.render(same({"Datei öffnen": "Open the file"})(document)).data.decode()
    assert '<translation type="unfinished">Open the file</translation>' in out
    assert all(kept in out for kept in TRANSLATED_TS[1:])


def test_a_ts_source_holding_elements_is_left():
    source = ts_file().replace("<source>Datei öffnen</source>\n        <translation>Open file</translation>",
                               '<source>Datei<byte value="7"/></source>\n        <translation></translation>')
    document = TsDocument(source.encode(), Path("app.ts"))
    out = document.render(same({})(document)).data.decode()
    assert '<source>Datei<byte value="7"/></source>\n        <translation></translation>' in out
    assert document.render(same({})(document)).notes == ["app.ts: 1 messages left untranslated: their source holds XML elements (<byte/>), "
                                "which mt does not translate around"]


def test_bad_ts_files_are_one_line_each_and_write_nothing(model, tmp_path):
    cases = {
        "text.ts": (b"Hallo Welt\n", "line 1: not well-formed XML (syntax error, column 1)"),
        "code.ts": (b"export const x = 1;\n", "line 1: not well-formed XML (syntax error, column 1); is it a Qt .ts "
                                              "file?"),  # TypeScript's extension too
        "cut.ts": (ts_file()[:420].encode(), "line 13: not well-formed XML (no element found"),
        "bomb.ts": (LAUGHS, "declares entities, which a Qt .ts file needs not: refused"),
        "html.ts": (b"<!DOCTYPE html><html><p>x</p></html>", "line 1: not a Qt .ts file (its root is <html>)"),
        "latin1.ts": ('<?xml version="1.0" encoding="ISO-8859-1"?>\n<TS><context><name>\xe4</name></context></TS>'
                      .encode("latin-1"), "line 2: not UTF-8 (byte 0xe4)"),
    }
    each_refused_in_one_line(model, tmp_path, cases)


# ---------------------------------------------------------------- Android string resources


@pytest.fixture(scope="module")
def translated_android(model, tmp_path_factory) -> tuple[str, str]:
    folder = tmp_path_factory.mktemp("android")
    (folder / "strings.xml").write_text(android_file(), encoding="utf-8")
    proc = run_mt("translate", "-c", model, "-i", folder / "strings.xml", "-o", folder / "out.xml", "--quiet")
    assert proc.stderr == f"note: {folder / 'strings.xml'}: 1 strings left as they came: they hold CDATA sections, " \
                          "which mt does not translate in\n"
    return android_file(), (folder / "out.xml").read_text(encoding="utf-8")


def toolkit_android(data: bytes) -> dict:
    """translate-toolkit's units of an Android file by name (it reads `<string>` and `<plurals>`), its own
    parser's checks passed."""
    return {u.getid(): u for u in aresource.AndroidResourceFile.parsestring(data).units}


def test_android_strings_are_translated_in_place_and_every_other_byte_kept(translated_android):
    source, out = translated_android
    for kept in KEPT_ANDROID:
        assert kept in out, kept
    assert CONTENTS.sub(r"\1\3", out) == CONTENTS.sub(r"\1\3", source)
    units, originals = toolkit_android(out.encode()), toolkit_android(source.encode())
    assert list(units) == list(originals)
    changed = [name for name in units if units[name].target != originals[name].target]
    assert changed == ["title", "greeting", "spaced", "packages"]
    greeting = units["greeting"].target
    assert [greeting.count(p) for p in ('<xliff:g id="n">%1$s</xliff:g>', "&", "<b>")] == [1] * 3
    assert re.search(r'<string name="spaced">"  .*  "</string>', out)
    assert units["spaced"].target.startswith("  ") and units["spaced"].target.endswith("  ")
    assert "%d" in units["packages"].target.strings[1]
    items = re.findall(r"<item>(.*?)</item>", out)
    assert items[1:] == ["@string/title", "de"] and items[0] and items[0] != S[4]


def test_android_escapes_are_read_and_written_again():
    assert read("Don\\'t \\\"go\\\" \\\\ \\u0041\\n  <b>x</b>  &amp; &apos;\\@ \\?") == \
        ("Don't \"go\" \\ A\n <b>x</b> &amp; '@ ?", False)
    assert read('\n   "  a  b\'s "  \n') == ("  a  b's ", True)
    assert read('a "b  c" d') == ("a b  c d", False)
    assert written("It's \"x\" \\ a\nb\tc & 1 < 2 &amp; <b>y</b>") == \
        "It\\'s \\\"x\\\" \\\\ a\\nb\\tc &amp; 1 &lt; 2 &amp; <b>y</b>"
    assert written("@home") == "\\@home" and written("?x") == "\\?x" and written("  a ", True) == '"  a "'
    source = android_file()
    document = AndroidDocument(source.encode(), Path("strings.xml"))
    given = {S[1]: "It's \"x\" \\ ok & 1 < 2", S[2]: "Good day", S[4]: "@home\tnow"}
    data = document.render(same(given)(document)).data
    out = data.decode()
    assert "<string name=\"title\">It\\'s \\\"x\\\" \\\\ ok &amp; 1 &lt; 2</string>" in out
    assert '<string name="spaced">"  Good day  "</string>' in out and "<item>\\@home\\tnow</item>" in out
    units = toolkit_android(data)
    assert units["title"].target == "It's \"x\" \\ ok & 1 < 2" and units["spaced"].target == "  Good day  "
    greeting = next(line for line in source.splitlines() if 'name="greeting"' in line)
    assert greeting in out.splitlines()  # given back as it came, its escapes read and written again
    assert document.render(same(given)(document)).notes == ["strings.xml: 1 strings left as they came: they hold CDATA sections, which mt does "
                                "not translate in"]


def test_android_plurals_keep_their_items_each_translated_with_its_number():
    document = AndroidDocument(android_file().encode(), Path("strings.xml"))
    assert f"5 {S[2][0].lower()}{S[2][1:]}" in document.sentences  # the other item, read for 5
    units = toolkit_android(document.render(same({})(document)).data)
    assert units["packages"].target.strings == [f"{WORDS[0]} {WORDS[1]}.", f"%d {S[2][0].lower()}{S[2][1:]}"]


def test_an_android_string_that_would_lose_a_placeholder_keeps_its_source():
    source = android_file().encode()
    document = AndroidDocument(source, Path("strings.xml"))
    assert document.render([(s + " %s", None) for s in document.sentences]).data == source
    assert document.render([(s + " %s", None) for s in document.sentences]).notes[0] == "strings.xml: 6 strings kept their source text: a placeholder or tag would not " \
                                  "come back from their translation"


def test_bad_android_files_are_one_line_each_and_write_nothing(model, tmp_path):
    cases = {
        "text.xml": (b"Hallo Welt\n", "line 1: not well-formed XML (syntax error, column 1)"),
        "bomb.xml": (LAUGHS, "declares entities, which an Android string resource file needs not: refused"),
        "layout.xml": (b'<?xml version="1.0"?>\n<LinearLayout/>',
                       "line 1: not an Android string resource file (its root is <LinearLayout>)"),
        "open.xml": (b"<resources>\n<string name='a'>x</resources>", "line 2: not well-formed XML (mismatched tag"),
    }
    each_refused_in_one_line(model, tmp_path, cases)
    with pytest.raises(MtError, match=r"^x.xml: line 1: not UTF-8 \(byte 0xff\)$"):
        AndroidDocument(b'<?xml version="1.0" encoding="latin-1"?><resources>\xff</resources>', Path("x.xml"))


def test_a_ts_file_for_another_language_says_the_target_and_takes_its_forms(tmp_path):
    """An English file written for Russian: <TS language="ru">, its numerus messages in Russian's three forms, the
    English translations already there translated again; lrelease compiles it. A file that says the target
    language is left as it is."""
    source = ts_file("en_US")
    document = TsDocument(source.encode(), Path("app.ts"), Localization("ru"))
    assert "Datei öffnen" in document.sentences  # translated into English before: translated again
    data = document.render(same({})(document)).data
    assert data.decode().startswith(source.split("<TS")[0] + '<TS version="2.1" language="ru" sourcelanguage="de">')
    plural = toolkit_reads_ts_as_written(source.encode(), data)[3]
    assert len(plural.target.strings) == 3
    (tmp_path / "ru.ts").write_bytes(data)
    proc = subprocess.run([LRELEASE, tmp_path / "ru.ts", "-qm", tmp_path / "ru.qm"], capture_output=True, text=True)
    assert proc.returncode == 0 and "(0 finished and 5 unfinished)" in proc.stdout, proc.stdout + proc.stderr
    again = TsDocument(data, Path("ru.ts"), Localization("ru"))
    assert again.sentences == [] and again.render([]).data == data
