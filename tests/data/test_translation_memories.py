"""Files of human translations as corpora and as a memory: TMX, bilingual catalogues, resource files paired by key
(mt/data/translation_memories.py, tmx.py, catalogue_pairs.py), through `mt prepare`, `mt clean`, `mt translate
--memory` and `mt serve --memory`."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import httpx
import pytest

from mt.data.translation_memories import Memory, PairFile, file_format
from mt.errors import DataError
from tests.conftest import DATA, TINY, RunningServer, one_error_line, run_mt, tiny_overrides

TMX = """<?xml version="1.0" encoding="UTF-8"?>
<tmx version="1.4">
  <header creationtool="t" srclang="en-US" datatype="plaintext" segtype="sentence" adminlang="en" o-tmf="t"/>
  <body>
    <tu><tuv xml:lang="en-US"><seg>Open the <bpt i="1">&lt;b&gt;</bpt>file<ept i="1">&lt;/b&gt;</ept> now.</seg></tuv>
        <tuv xml:lang="DE-de"><seg>Öffne die <bpt i="1">&lt;b&gt;</bpt>Datei<ept i="1">&lt;/b&gt;</ept> jetzt.</seg></tuv></tu>
    <tu><tuv xml:lang="en-US"><seg>Only English here.</seg></tuv><tuv xml:lang="fr"><seg>Seulement.</seg></tuv></tu>
    <tu><tuv lang="en"><seg>Page <ph x="1">{1}</ph> of <hi>all</hi></seg></tuv>
        <tuv lang="de"><seg>Seite <ph x="1">{1}</ph> von <hi>allen</hi></seg></tuv></tu>
  </body>
</tmx>
"""

PO = r'''msgid ""
msgstr ""
"Language: de\n"
"Content-Type: text/plain; charset=UTF-8\n"
"Plural-Forms: nplurals=2; plural=(n != 1);\n"

msgid "Open %s"
msgstr "%s öffnen"

#, fuzzy
msgid "Save"
msgstr "Speichern"

msgid "Quit"
msgstr ""

msgid "%d file"
msgid_plural "%d files"
msgstr[0] "%d Datei"
msgstr[1] "%d Dateien"

#~ msgid "Old"
#~ msgstr "Alt"
'''


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def pairs(path, tgt=None, fmt=None, src_lang="de", tgt_lang="en", **options):
    found = PairFile(str(path), tgt and str(tgt), file_format(path, fmt), src_lang, tgt_lang, **options)
    return list(found.pairs()), dict(found.skipped), found


def test_tmx_units_by_language_tag_with_inline_codes_as_placeholders(tmp_path):
    got, skipped, _ = pairs(write(tmp_path / "m.tmx", TMX))
    assert got == [("Öffne die <g1>Datei</g1> jetzt.", "Open the <g1>file</g1> now."),
                   ("Seite <x1/> von <g1>allen</g1>", "Page <x1/> of <g1>all</g1>")]
    assert skipped == {"no de side": 1}
    dropped, _, found = pairs(tmp_path / "m.tmx", inline_codes="drop")
    assert dropped == [("Öffne die Datei jetzt.", "Open the file now."), ("Seite von allen", "Page of all")]
    assert list(found.chunks()) == [(["Öffne die Datei jetzt.", "Seite von allen"], ["Open the file now.",
                                                                                       "Page of all"])]
    # `de-DE` asks for that region only; a gzip file is read by its bytes, whatever its name
    (tmp_path / "m.tmx.gz").write_bytes(gzip.compress(TMX.encode("utf-8")))
    assert pairs(tmp_path / "m.tmx.gz", src_lang="de-de")[0] == got[:1]


def test_a_broken_tmx_is_one_line_naming_file_and_line(tmp_path):
    broken = write(tmp_path / "b.tmx", TMX.replace("</seg></tuv></tu>\n    <tu><tuv lang", "</tuv></tu>\n<tu><tuv lang"))
    with pytest.raises(DataError, match=r"b\.tmx: line 7: not well-formed XML .*; is it a TMX file\?"):
        pairs(broken)
    with pytest.raises(DataError, match=r"x\.tmx: line 1: not a TMX file \(its root is <xliff>\)"):
        pairs(write(tmp_path / "x.tmx", "<xliff/>"))
    (tmp_path / "cut.tmx.gz").write_bytes(gzip.compress(TMX.encode("utf-8"))[:200])
    with pytest.raises(DataError, match=r"cut\.tmx\.gz: "):
        pairs(tmp_path / "cut.tmx.gz")
    with pytest.raises(DataError, match="name the two to read"):
        pairs(tmp_path / "m.tmx", src_lang=None)


def test_po_pairs_form_by_form_without_fuzzy_untranslated_or_obsolete_and_turned_to_the_direction(tmp_path):
    po = write(tmp_path / "de.po", PO)
    got, skipped, _ = pairs(po, src_lang="en", tgt_lang="de")
    assert got == [("Open %s", "%s öffnen"), ("%d file", "%d Datei"), ("%d files", "%d Dateien")]
    assert skipped == {"fuzzy or to review": 1, "not translated": 1, "obsolete": 1}
    assert pairs(po)[0][0] == ("%s öffnen", "Open %s")  # de->en: the German PO turned round
    assert ("Save", "Speichern") in pairs(po, src_lang="en", tgt_lang="de", fuzzy=True)[0]
    _, _, found = pairs(po, src_lang="en", tgt_lang="de")
    assert next(found.chunks())[0] == ["Open", "file", "files"]  # as `mt translate -i` shows the model


def test_xliff_1_2_and_2_0_and_qt_ts_pairs(tmp_path):
    v1 = write(tmp_path / "a.xlf", """<?xml version="1.0"?>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2"><file source-language="en" target-language="de"
 datatype="plaintext" original="x"><body>
<trans-unit id="1"><source>Hello <g id="7">world</g></source><target state="translated">Hallo <g id="7">Welt</g></target></trans-unit>
<trans-unit id="2"><source>Bye</source><target state="needs-review-translation">Tschüss</target></trans-unit>
<trans-unit id="3"><source>Empty</source></trans-unit></body></file></xliff>""")
    assert pairs(v1, src_lang="en", tgt_lang="de")[:2] == (
        [("Hello <g7>world</g7>", "Hallo <g7>Welt</g7>")], {"fuzzy or to review": 1, "not translated": 1})
    v2 = write(tmp_path / "b.xliff", """<xliff xmlns="urn:oasis:names:tc:xliff:document:2.0" version="2.0"
 srcLang="en" trgLang="fr"><file id="f"><unit id="1"><segment state="final"><source>Yes <ph id="1"/></source>
<target>Oui <ph id="1"/></target></segment></unit><unit id="2"><segment state="initial"><source>No</source>
<target>Non</target></segment></unit></file></xliff>""")
    assert pairs(v2, src_lang="fr", tgt_lang="en")[:2] == ([("Oui <x1/>", "Yes <x1/>")], {"fuzzy or to review": 1})
    ts = write(tmp_path / "a.ts", """<?xml version="1.0" encoding="utf-8"?><!DOCTYPE TS>
<TS version="2.1" language="de_DE" sourcelanguage="en_US"><context><name>M</name>
<message><source>Open</source><translation>Öffnen</translation></message>
<message><source>Close</source><translation type="unfinished">Schließen</translation></message>
<message numerus="yes"><source>%n file(s)</source><translation><numerusform>%n Datei</numerusform>
<numerusform>%n Dateien</numerusform></translation></message>
<message><source>Gone</source><translation type="vanished">Weg</translation></message></context></TS>""")
    assert pairs(ts, src_lang="en", tgt_lang="de")[:2] == (
        [("Open", "Öffnen"), ("%n file(s)", "%n Datei"), ("%n file(s)", "%n Dateien")],
        {"fuzzy or to review": 1, "obsolete": 1})


def test_resource_files_of_one_app_paired_by_key(tmp_path):
    (tmp_path / "values").mkdir()
    (tmp_path / "values-de").mkdir()
    en = write(tmp_path / "values" / "strings.xml", """<resources><string name="a">Don\\'t open</string>
<string name="b" translatable="false">X</string><string name="only">Only</string>
<plurals name="n"><item quantity="one">%d file</item><item quantity="other">%d files</item></plurals>
<string-array name="days"><item>Monday</item><item>Tuesday</item></string-array></resources>""")
    de = write(tmp_path / "values-de" / "strings.xml", """<resources><string name="a">Nicht öffnen</string>
<plurals name="n"><item quantity="other">%d Dateien</item><item quantity="one">%d Datei</item></plurals>
<string-array name="days"><item>Montag</item><item>Dienstag</item></string-array></resources>""")
    got, skipped, _ = pairs(en, de, src_lang="en", tgt_lang="de")
    assert got == [("Don't open", "Nicht öffnen"), ("%d file", "%d Datei"), ("%d files", "%d Dateien"),
                   ("Monday", "Montag"), ("Tuesday", "Dienstag")]
    assert skipped == {f"not in {de}": 1}
    arb = pairs(write(tmp_path / "en.arb", '{"@@locale": "en", "a": "Open", "@a": {"description": "x"}, '
                                           '"b": {"c": "Save"}}'),
                write(tmp_path / "de.arb", '{"@@locale": "de", "a": "Öffnen", "b": {"c": "Speichern"}}'))[0]
    assert arb == [("Open", "Öffnen"), ("Save", "Speichern")]
    props = pairs(write(tmp_path / "en.properties", "a=Open\nb = Save \\\n  file\n"),
                  write(tmp_path / "de.properties", "a=\\u00d6ffnen\nb=Datei speichern\n"))[0]
    assert props == [("Open", "Öffnen"), ("Save file", "Datei speichern")]
    with pytest.raises(DataError, match=r"de2\.arb: line 1: not valid JSON"):
        pairs(tmp_path / "en.arb", write(tmp_path / "de2.arb", "{"))
    with pytest.raises(DataError, match="holds one side; give the other file too"):
        pairs(tmp_path / "en.arb")


def test_the_memory_matches_after_normalising_and_plain_lines_match_segments_with_codes(tmp_path):
    memory = Memory([PairFile(str(write(tmp_path / "m.tmx", TMX)), None, "tmx", "de", "en"),
                     PairFile(str(write(tmp_path / "de.po", PO)), None, "po", "de", "en")])
    assert memory.get("  Öffne die   Datei jetzt.") == "Open the file now."
    assert memory.get("Öffne die <g1>Datei</g1> jetzt.") == "Open the <g1>file</g1> now."
    assert memory.get("Öffne\u0308 die Datei jetzt.") is None and memory.get("öffne die Datei jetzt.") is None
    assert memory.get("%s öffnen") == "Open %s" and memory.get("Speichern") is None  # fuzzy: not a memory


def test_prepare_trains_on_tmx_and_a_catalogue_and_says_what_it_took(tmp_path):
    tmx, po = write(tmp_path / "m.tmx", TMX), write(tmp_path / "de.po", PO)
    out = tmp_path / "run"
    entries = [{"src": str(DATA / "sample-2k.de"), "tgt": str(DATA / "sample-2k.en")}, {"src": str(tmx)},
               {"src": str(po), "fuzzy": True}]
    proc = run_mt("prepare", TINY, *tiny_overrides(out), "--set", "data.train_src=null", "--set",
                  "data.train_tgt=null", "--set", f"data.train={json.dumps(entries)}", "--set", "data.src_lang=de",
                  "--set", "data.tgt_lang=en")
    assert f"prepare: data.train[1] {tmx} (tmx): took 2 pairs; skipped 1 no de side" in proc.stderr
    assert f"prepare: data.train[2] {po} (po): took 4 pairs; skipped 1 not translated, 1 obsolete" in proc.stderr
    meta = json.loads((out / "data" / "corpus.json").read_text())
    assert meta["train"]["parts"][1:] == [2, 4]
    bad = run_mt("prepare", TINY, *tiny_overrides(tmp_path / "bad"), "--set", f"data.train_src={tmp_path / 'x.tmx'}",
                 "--set", "data.train_tgt=null", "--set", "data.src_lang=de", "--set", "data.tgt_lang=en", check=False)
    assert "x.tmx: no such file" in one_error_line(bad) and not (tmp_path / "bad" / "data" / "corpus.json").exists()


def test_clean_reads_a_tmx_and_writes_its_pairs_with_their_placeholders(tmp_path):
    tmx = write(tmp_path / "m.tmx", TMX)
    run_mt("clean", "--src", tmx, "--src-lang", "de", "--tgt-lang", "en", "-o", tmp_path / "c",
           "--set", "clean.language_id=false", "--set", "clean.min_chars=1")
    assert (tmp_path / "c.de").read_text(encoding="utf-8").splitlines()[0] == "Öffne die <g1>Datei</g1> jetzt."
    broken = write(tmp_path / "b.tmx", TMX[:300])
    proc = run_mt("clean", "--src", broken, "--src-lang", "de", "--tgt-lang", "en", "-o", tmp_path / "d",
                  check=False)
    assert "b.tmx: line" in one_error_line(proc) and not list(tmp_path.glob("d.*"))


def test_translate_answers_what_the_memory_holds_and_decodes_the_rest(tmp_path, trained_tiny):
    checkpoint = trained_tiny / "checkpoint_last.pt"
    tmx = write(tmp_path / "m.tmx", TMX)
    lines = ["Öffne die Datei jetzt.", "Das ist ein Test.", "Seite {1} von allen"]
    plain = run_mt("translate", "-c", checkpoint, "--output-format", "json", input="\n".join(lines) + "\n")
    with_memory = run_mt("translate", "-c", checkpoint, "--output-format", "json", "--memory", f"de:en={tmx}",
                         input="\n".join(lines) + "\n")
    got = [json.loads(line)["hypotheses"][0] for line in with_memory.stdout.splitlines()]
    assert got[0] == {"text": "Open the file now.", "score": 0.0, "memory": True}
    assert with_memory.stdout.splitlines()[1] == plain.stdout.splitlines()[1] and "memory" not in got[1]
    proc = run_mt("translate", "-c", checkpoint, "--memory", str(tmx), input="x\n", check=False)
    assert "a TMX file holds many languages" in one_error_line(proc)


def test_serve_answers_from_the_memory_before_the_model(tmp_path, trained_tiny):
    checkpoint = trained_tiny / "checkpoint_last.pt"
    po = write(tmp_path / "de.po", PO)
    expected = run_mt("translate", "-c", checkpoint, input="Das ist ein Test.\n").stdout.strip()
    server = RunningServer(checkpoint, "--memory", str(po))
    try:
        answer = server.post("/translate", json={"q": ["%s öffnen", "Das ist ein Test.", "Speichern"],
                                                 "source": "de", "target": "en"})
        assert answer.status_code == 200, answer.text
        assert answer.json()["translatedText"][:2] == ["Open %s", expected]
        assert answer.json()["translatedText"][2] != "Save"  # a fuzzy entry is no memory
        assert any("a translation memory of 3 segments" in line for line in server.log)
        catalogue = 'msgid ""\nmsgstr ""\n"Language: en\\n"\n\nmsgid "%s öffnen"\nmsgstr ""\n'
        upload = server.post("/translate_file", data={"source": "de", "target": "en"},
                             files={"file": ("app.po", catalogue.encode("utf-8"))})
        assert upload.status_code == 200, upload.text
        filled = httpx.get(upload.json()["translatedFileUrl"], timeout=60).text
        assert filled.endswith('msgid "%s öffnen"\nmsgstr "Open %s"\n')  # the memory's, not fuzzy
    finally:
        assert server.stop() == 0


def test_a_catalogue_takes_the_memorys_translations_marked_as_its_format_marks_a_memory_match(tmp_path,
                                                                                              trained_tiny):
    checkpoint = trained_tiny / "checkpoint_last.pt"
    memory = write(tmp_path / "m.tmx", TMX)
    po = write(tmp_path / "en.po", 'msgid ""\nmsgstr ""\n"Language: en\\n"\n\nmsgid "Öffne die Datei jetzt."\n'
                                   'msgstr ""\n\nmsgid "Das ist ein Test."\nmsgstr ""\n')
    run_mt("translate", "-c", checkpoint, "-i", po, "-o", tmp_path / "out.po", "--memory", f"de:en={memory}")
    entries = (tmp_path / "out.po").read_text(encoding="utf-8").split("\n\n")
    assert entries[1] == 'msgid "Öffne die Datei jetzt."\nmsgstr "Open the file now."'  # not fuzzy
    assert entries[2].startswith('#, fuzzy\nmsgid "Das ist ein Test."\nmsgstr "')
    xlf = write(tmp_path / "a.xlf", '<xliff version="1.2"><file source-language="de" target-language="en" '
                                    'datatype="plaintext" original="x"><body><trans-unit id="1"><source>Öffne die '
                                    'Datei jetzt.</source></trans-unit><trans-unit id="2"><source>Das ist ein Test.'
                                    '</source></trans-unit></body></file></xliff>')
    run_mt("translate", "-c", checkpoint, "-i", xlf, "-o", tmp_path / "out.xlf", "--memory", f"de:en={memory}")
    out = (tmp_path / "out.xlf").read_text(encoding="utf-8")
    assert '<target state="translated" state-qualifier="exact-match">Open the file now.</target>' in out
    assert out.count('state-qualifier="leveraged-mt"') == 1
    html = write(tmp_path / "a.html", "<p>Hallo</p>")
    proc = run_mt("translate", "-c", checkpoint, "-i", html, "--memory", f"de:en={memory}", check=False)
    assert "--memory: for line input and localization files" in one_error_line(proc)
