"""Java .properties files (mt/documents/properties.py): `mt translate` translates every value as Properties.load
reads it, keeps keys, separators, comments and blank lines byte for byte, writes non-ASCII as \\uXXXX in an ASCII
file, doubles a MessageFormat pattern's apostrophes, keeps each placeholder once (as translate-toolkit's checks see
it), reads back in translate-toolkit with the same keys, and refuses bad files in one line."""

from __future__ import annotations

import re
from pathlib import Path

from translate.storage import po, properties

from tests.conftest import run_mt
from tests.documents.conftest import SENTENCES, plain
from tests.documents.localization_checks import each_refused_in_one_line, toolkit_failures

WORDS = SENTENCES[1].rstrip(".").split()
SOURCE = f"""# Messages of the demo
! written by hand

title = {SENTENCES[0]}
remove:{WORDS[0]} %s {' '.join(WORDS[1:3])} ''{{0}}''?
long = {' '.join(SENTENCES[2].split()[:3])} \\
       {' '.join(SENTENCES[2].split()[3:])}
size   Gr\\u00f6\\u00dfe {SENTENCES[3]}
key\\ with\\ spaces = {SENTENCES[4]}\\tmit Tab
empty =
"""
ESCAPED = "".join(c if c.isascii() else f"\\u{ord(c):04x}" for c in SOURCE)  # as native2ascii writes it
VALUE = re.compile(r"^(?![#!\s])(?:[^=:\s\\]|\\.)+[ \t]*[=: \t][ \t]*", re.M)  # an entry's key and separator


def entries(data: bytes) -> dict[str, str]:
    """Each key's value, as translate-toolkit reads the file (its comments before a blank line are a unit without a
    key)."""
    return {unit.getid(): unit.source for unit in properties.propfile.parsestring(data).units if unit.getid()}


def test_values_are_translated_and_every_other_byte_kept(model, tmp_path):
    (tmp_path / "de.properties").write_text(ESCAPED, encoding="ascii")
    run_mt("translate", "-c", model, "-i", tmp_path / "de.properties", "-o", tmp_path / "en.properties")
    data = (tmp_path / "en.properties").read_bytes()
    out, source = data.decode("ascii"), entries(ESCAPED.encode())
    written = entries(data)
    assert list(written) == list(source) == ["title", "remove", "long", "size", "key\\ with\\ spaces", "empty"]
    assert [line for line in out.splitlines() if not line.strip() or line[0] in "#!"] == \
        ["# Messages of the demo", "! written by hand", ""]
    assert VALUE.findall(out) == VALUE.findall(ESCAPED)
    assert [written["title"], written["long"]] == plain(model, [SENTENCES[0], SENTENCES[2]])
    assert written["empty"] == ""
    assert [written["remove"].count(p) for p in ("%s", "''{0}''")] == [1, 1]  # the pattern's quotes stay doubled
    pairs = po.pofile()  # each source value beside its translation, as pofilter checks a bilingual file
    for key in ("title", "remove", "long", "size", "key\\ with\\ spaces"):
        unit = pairs.addsourceunit(source[key])
        unit.target = written[key]
    assert all(not failed for failed in toolkit_failures(pairs).values())


def test_the_model_reads_values_unescaped_and_translations_are_escaped():
    from mt.documents.properties import PropertiesDocument

    document = PropertiesDocument(ESCAPED.encode(), Path("de.properties"))
    assert document.sentences[1] == f"{WORDS[0]} {' '.join(WORDS[1:3])} ?"  # its placeholders taken out
    assert document.sentences[3] == f"Größe {SENTENCES[3]}"
    sources = [message[0].source for message in document.messages.candidates]
    assert sources[1].endswith(" '{0}'?") and sources[4] == f"{SENTENCES[4]}\tmit Tab"  # as MessageFormat reads it
    given = [(s, None) for s in document.sentences]
    given[0] = ("L'outil se ferme\n ensuite", None)
    given[3] = (" Taille ô", None)
    out = document.render(given).data.decode("ascii")
    assert "title = L'outil se ferme\\n ensuite\n" in out  # no MessageFormat argument: one apostrophe
    assert "size   \\ Taille \\u00f4\n" in out
    unicode = PropertiesDocument(SOURCE.encode(), Path("de.properties"))
    assert "size   \\ Taille ô\n" in unicode.render(given).data.decode("utf-8")  # a UTF-8 file stays UTF-8
    quoted = [(s, None) for s in document.sentences]
    quoted[1] = ("L'outil ?", None)
    assert "remove:L''outil ? %s ''{0}''\n" in document.render(quoted).data.decode()  # no alignment: placed last


def test_bad_properties_files_are_one_line_each_and_write_nothing(model, tmp_path):
    cases = {
        "escape.properties": (b"a = b\nc = d \\u00zz e\n", "line 2: not a valid .properties value (malformed "
                                                            "\\uxxxx escape '\\u00zz')"),
        "binary.properties": (b"\x89PNG\r\n\x1a\n\x00\x00", "line 3: a NUL byte, which no .properties file has"),
    }
    each_refused_in_one_line(model, tmp_path, cases)
