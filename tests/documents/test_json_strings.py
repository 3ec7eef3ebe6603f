"""JSON translation files (mt/documents/json_strings.py): `mt translate` translates every string value but ARB's
metadata and a WebExtensions message's description, keeps every other byte, keeps each placeholder once (as
translate-toolkit's checks see it), leaves ICU plurals, reads back in translate-toolkit, and refuses bad files in
one line. The model is tests/documents/conftest.py's small random one."""

from __future__ import annotations

import json
import re
from pathlib import Path

from translate.storage import jsonl10n, po

from tests.conftest import run_mt
from tests.documents.conftest import SENTENCES, plain
from tests.documents.localization_checks import each_refused_in_one_line, toolkit_failures

KEY = re.compile(r'\s*(?:"(?:[^"\\]|\\.)*":)?')
WORDS = SENTENCES[1].rstrip(".").split()
SOURCE = {
    "@@locale": "de",
    "title": SENTENCES[0],
    "@title": {"description": "Shown on top", "placeholders": {}},
    "menu": {"open": f"{WORDS[0]} %s {' '.join(WORDS[1:3])} {{dir}}?", "items": [SENTENCES[2], "", SENTENCES[3]]},
    "greeting": {"message": f"{SENTENCES[4].rstrip('.')} $USER$.", "description": "Kept as it is"},
    "nested": f"{SENTENCES[5].rstrip('.')} $t(menu.open) {{{{count}}}}.",
    "icu": "{count, plural, one {# Datei} other {# Dateien}}",
    "number": 3, "flag": True, "nothing": None,
}


def translated(model, tmp_path: Path, text: str) -> str:
    (tmp_path / "de.json").write_text(text, encoding="utf-8")
    proc = run_mt("translate", "-c", model, "-i", tmp_path / "de.json", "-o", tmp_path / "en.json")
    assert "note: " in proc.stderr and "1 ICU plural or select messages left" in proc.stderr
    return (tmp_path / "en.json").read_text(encoding="utf-8")


def blanked(tree, kept_paths: set, path=()):
    """`tree` with the strings mt translates (those not in `kept_paths`) blanked."""
    if isinstance(tree, dict):
        return {k: blanked(v, kept_paths, (*path, k)) for k, v in tree.items()}
    if isinstance(tree, list):
        return [blanked(v, kept_paths, (*path, i)) for i, v in enumerate(tree)]
    return "" if isinstance(tree, str) and path not in kept_paths else tree


def test_string_values_are_translated_and_every_other_byte_kept(model, tmp_path):
    text = json.dumps(SOURCE, indent=2, ensure_ascii=False) + "\n"
    out = translated(model, tmp_path, text)
    tree = json.loads(out)
    kept = {("@@locale",), ("@title", "description"), ("greeting", "description"), ("icu",), ("menu", "items", 1)}
    assert blanked(tree, kept) == blanked(SOURCE, kept)
    assert [KEY.match(line).group(0) for line in out.splitlines()] == \
        [KEY.match(line).group(0) for line in text.splitlines()]  # the layout: each line's indentation and key
    assert [tree["title"], *tree["menu"]["items"][::2]] == plain(model, [SENTENCES[0], SENTENCES[2], SENTENCES[3]])
    assert [tree["menu"]["open"].count(p) for p in ("%s", "{dir}")] == [1, 1]
    assert tree["greeting"]["message"].count("$USER$") == 1
    assert [tree["nested"].count(p) for p in ("$t(menu.open)", "{{count}}")] == [1, 1]
    pairs = po.pofile()  # each source string beside its translation, as pofilter checks a bilingual file
    for path in (("title",), ("menu", "open"), ("greeting", "message"), ("nested",)):
        unit = pairs.addsourceunit(_at(SOURCE, path))
        unit.target = _at(tree, path)
    assert all(not failed for failed in toolkit_failures(pairs).values())
    store = jsonl10n.JsonFile.parsestring(out.encode())  # translate-toolkit reads it, with the keys it had
    assert [u.getid() for u in store.units] == [u.getid() for u in jsonl10n.JsonFile.parsestring(text.encode()).units]


def test_a_file_that_writes_non_ascii_as_escapes_is_written_so_and_arb_gets_its_locale():
    from mt.documents.json_strings import JsonDocument
    from mt.documents.messages import Localization

    text = json.dumps({"@@locale": "de", "a": "Größe ändern", "b": "Keine Änderung"}, indent=1).encode()
    document = JsonDocument(text, Path("de.arb"), Localization("fr"))
    assert document.sentences == ["Größe ändern", "Keine Änderung"]
    out = document.render([("Changer la taille", None), ("Pas de changement ô", None)]).data
    assert out.isascii() and json.loads(out) == {"@@locale": "fr", "a": "Changer la taille",
                                                 "b": "Pas de changement ô"}
    wrong = document.render([("%s Changer", None), ("Pas", None)]).data  # a placeholder the source does not have
    assert json.loads(wrong)["a"] == "Größe ändern" and document.render([("%s Changer", None), ("Pas", None)]).notes == [
        "de.arb: 1 strings left in the source language: a placeholder or tag would not come back from their "
        "translation"]


def test_bad_json_files_are_one_line_each_and_write_nothing(model, tmp_path):
    cases = {
        "comma.json": (b'{\n  "a": "x",\n  "b": "y",\n}\n', "line 4: not valid JSON (Expecting property name "
                                                           "enclosed in double quotes, column 1)"),
        "list.json": (b'["a", "b"]\n', "line 1: not a JSON object of translation strings (its top is a list)"),
        "latin1.json": ('{"a": "Größe"}'.encode("latin-1"), "line 1: not UTF-8 (byte 0xf6)"),
    }
    each_refused_in_one_line(model, tmp_path, cases)


def _at(tree, path):
    for key in path:
        tree = tree[key]
    return tree
