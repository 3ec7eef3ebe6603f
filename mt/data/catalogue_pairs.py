"""A project's translated localization files read as sentence pairs: one bilingual catalogue (PO, XLIFF 1.2 and
2.0, Qt .ts), or two monolingual resource files of one app paired by key (Android strings.xml, JSON and ARB,
.properties).

Each reader gives (the file's source text, its translation) pairs, with what the file says its two languages are
(None where it does not say), and counts what it skipped and why: entries not translated, fuzzy ones (PO's `fuzzy`
flag, XLIFF's needs-* states and 2.0's `initial`, Qt's `unfinished`) unless `fuzzy` keeps them, obsolete ones,
keys found in one file only. A plural entry gives one pair per form: the singular source with the first form, the
plural source with each other. The texts are as the file holds them, placeholders and inline tags included:
mt/data/translation_memories.py presents them to the model as `mt translate -i` does.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from mt.data.tmx import local, segment_text
from mt.documents import android, po, properties
from mt.documents import json_strings as json_catalogue
from mt.documents.file_checks import decoded, xml_root
from mt.errors import DataError, MtError, needs

FUZZY_XLIFF = {"needs-translation", "needs-adaptation", "needs-l10n", "needs-review-translation",
               "needs-review-adaptation", "needs-review-l10n", "new", "initial"}


class Pairs:
    """What a reader found: `pairs` (source text, translation), the file's `languages` (source, target; None
    where unsaid) and `skipped` (why: how many)."""

    def __init__(self, languages: tuple[str | None, str | None] = (None, None)):
        self.pairs: list[tuple[str, str]] = []
        self.languages = languages
        self.skipped: Counter = Counter()

    def add(self, source: str, target: str, fuzzy: bool, keep_fuzzy: bool) -> None:
        if not source.strip() or not target.strip():
            self.skipped["not translated"] += 1
        elif fuzzy and not keep_fuzzy:
            self.skipped["fuzzy or to review"] += 1
        else:
            self.pairs.append((source, target))


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except OSError as e:
        raise DataError(f"{path}: cannot read: {e.strerror}") from None


# ---------------------------------------------------------------- bilingual catalogues


def po_pairs(path: Path, keep_fuzzy: bool = False) -> Pairs:
    polib = needs("polib", "polib", "documents")
    text = po.po_text(_read(path), path)
    try:
        catalog = polib.pofile(text if "\n" in text else text + "\n")
    except (OSError, ValueError) as e:
        found = po.PO_ERROR.search(str(e))
        raise DataError(f"{path}: line {found.group(1) if found else 1}: not a valid PO file") from None
    found = Pairs((None, catalog.metadata.get("Language", "").strip() or None))
    for entry in catalog:
        if entry.obsolete:
            found.skipped["obsolete"] += 1
        elif entry.msgid and not entry.msgid_plural:
            found.add(entry.msgid, entry.msgstr, "fuzzy" in entry.flags, keep_fuzzy)
        elif entry.msgid:
            for index, form in sorted(entry.msgstr_plural.items()):
                found.add(entry.msgid if int(index) == 0 else entry.msgid_plural, form, "fuzzy" in entry.flags,
                          keep_fuzzy)
    return found


def xliff_pairs(path: Path, keep_fuzzy: bool = False, inline_codes: str = "placeholders") -> Pairs:
    try:
        root = xml_root(_read(path), path, "xliff", "an XLIFF file")
    except MtError as e:
        raise DataError(str(e)) from None
    files = [e for e in root.iter() if local(e.tag) == "file"]
    languages = (root.get("srcLang") or next((f.get("source-language") for f in files), None),
                 root.get("trgLang") or next((f.get("target-language") for f in files), None))
    found = Pairs(languages)
    for unit in root.iter():
        if local(unit.tag) not in ("trans-unit", "segment"):
            continue
        source = next((c for c in unit if local(c.tag) == "source"), None)
        target = next((c for c in unit if local(c.tag) == "target"), None)
        if source is None:
            continue
        state = (target.get("state") if target is not None else None) or unit.get("state") or ""
        found.add(segment_text(source, inline_codes), "" if target is None else segment_text(target, inline_codes),
                  state in FUZZY_XLIFF, keep_fuzzy)
    return found


def ts_pairs(path: Path, keep_fuzzy: bool = False) -> Pairs:
    try:
        root = xml_root(_read(path), path, "TS", "a Qt .ts file")
    except MtError as e:
        raise DataError(str(e)) from None
    found = Pairs((root.get("sourcelanguage") or None, root.get("language") or None))
    for message in root.iter("message"):
        source, translation = message.find("source"), message.find("translation")
        kind = "" if translation is None else translation.get("type") or ""
        if kind in ("obsolete", "vanished"):
            found.skipped["obsolete"] += 1
            continue
        text = "" if source is None else "".join(source.itertext())
        forms = [] if translation is None else [f for f in translation if f.tag == "numerusform"]
        for i, form in enumerate(forms or [translation]):
            found.add(text, "" if form is None else "".join(form.itertext()), kind == "unfinished", keep_fuzzy)
    return found


# ---------------------------------------------------------------- resource files paired by key


def android_strings(path: Path) -> dict[str, str]:
    text = decoded(_read(path), path)
    try:
        xml_root(text.encode("utf-8"), path, "resources", "an Android strings.xml")
    except MtError as e:
        raise DataError(str(e)) from None
    return {entry.key: android.read(text[entry.start:entry.end])[0] for entry in android.string_entries(text)}


def json_strings(path: Path) -> dict[str, str]:
    text = decoded(_read(path), path)
    try:
        tree = json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(f"{path}: line {e.lineno}: not valid JSON ({e.msg}, column {e.colno})") from None
    if not isinstance(tree, dict):
        raise DataError(f"{path}: line 1: not a JSON object of translation strings")
    strings = {}
    for key_path in json_catalogue.translated_paths(tree, ()):
        value = tree
        for key in key_path:
            value = value[key]
        strings[".".join(map(str, key_path))] = value
    return strings


def properties_strings(path: Path) -> dict[str, str]:
    data = _read(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")  # Java's own encoding of .properties before Java 9
    try:
        return {entry.key: entry.value for entry in properties.property_entries(text, path)}
    except MtError as e:
        raise DataError(str(e)) from None


KEYED = {"android": android_strings, "json": json_strings, "arb": json_strings, "properties": properties_strings}


def keyed_pairs(src_path: Path, tgt_path: Path, fmt: str) -> Pairs:
    """Two resource files of one app, the strings of the same key paired (a key in one file only is skipped)."""
    source, target = KEYED[fmt](src_path), KEYED[fmt](tgt_path)
    found = Pairs()
    for key, text in source.items():
        if key in target:
            found.add(text, target[key], False, False)
        else:
            found.skipped[f"not in {tgt_path}"] += 1
    found.skipped[f"not in {src_path}"] += sum(1 for key in target if key not in source)
    return found
