"""gettext PO and POT files (read with polib): the entries without a translation filled and marked `fuzzy`, every
other line of the file written back byte for byte.

polib checks the file's syntax and says what each entry holds (its msgid, plural, flags, whether it is obsolete);
the file is then written from its own lines, cut into entries here, and only the entries mt fills are changed:
their msgstr lines replaced and `fuzzy` added to their flags. Comments, references, contexts, previous msgids,
obsolete entries, the header, line breaks and the file's wrapping and order stay as they were. With
`retranslate` every entry but the header and the obsolete ones is filled again.

A plural entry gets one msgstr per plural form of the file (its header's Plural-Forms, else its Language's or
the target language's, mt/documents/plurals.py), each translated with its number filled in
(mt/documents/messages.py); a header without Plural-Forms then gets that line, and a POT's header its
template values filled (charset=UTF-8, the Plural-Forms for nplurals=INTEGER), as msginit does. An entry whose
translation would lose a placeholder keeps its empty msgstr and gets `fuzzy`, and is counted in `notes`.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from pathlib import Path

from mt.documents.file_checks import decoded
from mt.documents.localization import NOT_BACK, REFUSED, REMEMBERED, Catalogue, Edit, Unit, plural_messages
from mt.documents.messages import Localization, plain
from mt.documents.plurals import for_language, parsed
from mt.errors import MtError, needs

PO_ERROR = re.compile(r"\(line (\d+)\)(?::\s*(.*))?")
STRING_LINE = re.compile(r'(?:(?:msgctxt|msgid|msgid_plural|msgstr|msgstr\[\d+\])\s+)?"(?:[^"\\]|\\.)*"\s*')
CHARSETS = ("utf-8", "utf8", "charset", "us-ascii", "ascii")  # the charsets read as UTF-8 (CHARSET: a POT's)


@dataclass
class Block:
    """An entry's lines [start, end) in the file (its comments first, blank lines after it not counted)."""
    start: int
    end: int
    msgstr: bool = False
    plural: bool = False  # an entry with msgid_plural, which mt fills


class PoDocument(Catalogue):
    """A PO or POT file (mt/documents/localization.py), each entry filled marked fuzzy."""
    NOTES = {"refused": f"entries left untranslated and marked fuzzy: {NOT_BACK}",
             "unsized": "plural entries left untranslated: the header has no Plural-Forms and the target language "
                        "is unknown (add Plural-Forms to the header)"}

    def __init__(self, data: bytes, name: Path, options: Localization = Localization()):
        polib = needs("polib", "polib", "documents")
        super().__init__(name, po_text(data, name), options.memory)
        try:
            catalog = polib.pofile(self.text if "\n" in self.text else self.text + "\n")  # never a path
        except (OSError, ValueError) as e:
            found = PO_ERROR.search(str(e))
            where = f"line {found.group(1)}: " if found else ""
            raise MtError(f"{name}: {where}not a valid PO file ({(found and found.group(2)) or 'syntax error'})") \
                from None
        self.newline = "\r\n" if "\r\n" in self.text else "\n"
        self.lines = self.text.splitlines(keepends=True)
        self.offsets = list(itertools.accumulate((len(line) for line in self.lines), initial=0))
        blocks = [b for b in _blocks(self.lines, name) if b.msgstr]
        entries = _matched(catalog, blocks, name)
        self.header = next((b for b in blocks if all(b is not blk for blk, _ in entries)), None)
        line = catalog.metadata.get("Plural-Forms", "").strip()
        own = catalog.metadata.get("Language", "").strip()
        retranslate = self.read_language(own, options)
        retargeted = for_language(self.target)  # the target's forms replace the header's (another language's)
        self.header_forms = bool(line) and "INTEGER" not in line and not retargeted  # a POT's: nplurals=INTEGER
        self.header_template = "INTEGER" in line or "charset=CHARSET" in catalog.metadata.get("Content-Type", "")
        self.forms = parsed(line, f"{name}: header") if self.header_forms else \
            retargeted or for_language(own or options.target)
        for block, entry in entries:
            if entry.obsolete or not entry.msgid or (_translated(entry) and not retranslate):
                continue
            if entry.msgid_plural and self.forms is None:
                self.left["unsized"] += 1
            elif entry.msgid_plural:
                block.plural = True
                sources = lambda index, e=entry: e.msgid if self.forms.singular(index) else e.msgid_plural
                self.units.append(Unit(block, plural_messages(self.messages, self.forms, sources)))
            else:
                self.units.append(Unit(block, [self.messages.add([plain(entry.msgid)])]))

    def edits(self, unit: Unit, texts: list[str | None], state: str) -> list[Edit]:
        block = unit.where
        texts = [""] * len(texts) if state == REFUSED else texts
        return [self._lines_edit(block, self._entry(self.lines[block.start:block.end], block, texts,
                                                    fuzzy=state != REMEMBERED))]

    def file_edits(self) -> list[Edit]:
        if self.units and (self.header_template or self.target or (self.forms and not self.header_forms)):
            return [self._lines_edit(*self._header())]
        return []

    def _lines_edit(self, block: Block, lines: list[str]) -> Edit:
        return self.offsets[block.start], self.offsets[block.end], "".join(lines)

    def _entry(self, lines: list[str], block: Block, texts: list[str], fuzzy: bool = True) -> list[str]:
        """An entry's lines with its msgstr lines replaced by `texts` and `fuzzy` in its flags (not for a memory's
        translation, as msgmerge fills an exact match from a compendium)."""
        first = next(i for i, line in enumerate(lines) if line.lstrip().startswith("msgstr"))
        last_newline = lines[-1][len(lines[-1].rstrip("\r\n")):]
        new = []
        for index, text in enumerate(texts):
            new += msgstr_lines(f"msgstr[{index}]" if block.plural else "msgstr", text)
        out = lines[:first] + [line + self.newline for line in new]
        out[-1] = out[-1][:-len(self.newline)] + last_newline
        return _fuzzy(out, self.newline) if fuzzy else out

    def _header(self) -> tuple[Block, list[str]]:
        """The header with the file's charset (UTF-8 for a POT's CHARSET), the target language (`self.target`) and
        the Plural-Forms line of the forms used (in place of a POT's nplurals=INTEGER, or of another language's);
        a header made for it where there is none."""
        fields = {"Language": self.target, "Plural-Forms": self.forms.line if self.forms and not self.header_forms
                  else None}
        lines = [f'"{key}: {value}\\n"{self.newline}' for key, value in fields.items() if value]
        if self.header is None:
            return Block(0, 0), [f'msgid ""{self.newline}', f'msgstr ""{self.newline}',
                                 f'"Content-Type: text/plain; charset=UTF-8\\n"{self.newline}', *lines, self.newline]
        header = [h.replace("charset=CHARSET", "charset=UTF-8") for h in self.lines[self.header.start:self.header.end]]
        for key, value in fields.items():
            if value:
                self._set_field(header, key, value)
        return self.header, header

    def _set_field(self, header: list[str], key: str, value: str) -> None:
        """The header's `key: value` line, in place of the one there or after the last."""
        line = f'"{key}: {value}\\n"{self.newline}'
        at = next((i for i, h in enumerate(header) if h.lstrip().startswith(f'"{key}:')), None)
        if at is not None:
            header[at] = line
            return
        last = max((i for i, h in enumerate(header) if h.lstrip().startswith('"')), default=len(header) - 1)
        if not header[last].endswith(("\n", "\r")):
            header[last] += self.newline
        header.insert(last + 1, line)


def msgstr_lines(keyword: str, text: str) -> list[str]:
    """`keyword "text"` as PO writes it (without line ends): a text with line breaks inside over several
    lines, one per line break, after an empty first string."""
    parts = text.splitlines(keepends=True)
    if len(parts) <= 1:
        return [f'{keyword} "{_escaped(text)}"']
    return [f'{keyword} ""'] + [f'"{_escaped(part)}"' for part in parts]


def _escaped(text: str) -> str:
    return (text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
            .replace("\t", "\\t"))


def _fuzzy(lines: list[str], newline: str) -> list[str]:
    """An entry's lines with `fuzzy` among its flags (a flags line added before #|, msgctxt or msgid)."""
    for i, line in enumerate(lines):
        if line.startswith("#,"):
            flags = [f.strip() for f in line[2:].split(",") if f.strip()]
            if "fuzzy" not in flags:
                lines[i] = "#, " + ", ".join(["fuzzy", *flags]) + line[len(line.rstrip("\r\n")):]
            return lines
    at = next(i for i, line in enumerate(lines) if line.lstrip().startswith(("#|", "msgctxt", "msgid")))
    return lines[:at] + [f"#, fuzzy{newline}"] + lines[at:]


def _translated(entry) -> bool:
    if entry.msgid_plural:
        return any(entry.msgstr_plural.values())
    return entry.msgstr != ""


def _blocks(lines: list[str], name: Path) -> list[Block]:
    """The file's entries as line ranges: an entry starts at the first comment, msgctxt or msgid after the
    previous one's msgstr; obsolete entries (#~) alike. A line that is no comment, keyword with its string or
    continuing string (polib lets `msgid "a` pass) is an MtError."""
    blocks: list[Block] = []
    current: Block | None = None
    for i, line in enumerate(lines):
        s = line.strip()
        if not s:
            continue
        body = s[2:].lstrip() if s.startswith("#~") and not s.startswith("#~|") else s
        if not body.startswith("#") and not STRING_LINE.fullmatch(body):
            raise MtError(f"{name}: line {i + 1}: not a valid PO file (not a keyword and a quoted string)")
        continues = body.startswith(("msgstr", '"', "msgid_plural"))
        if current is None or (current.msgstr and not continues):
            current = Block(i, i + 1)
            blocks.append(current)
        current.end = i + 1
        current.msgstr = current.msgstr or body.startswith("msgstr")
    return blocks


def _matched(catalog, blocks: list[Block], name: Path) -> list[tuple[Block, object]]:
    """Each polib entry (obsolete ones too) with its block: the one whose lines hold the line polib says it starts
    at (its first entry says line 0)."""
    pairs = []
    for entry in catalog:
        line = entry.linenum or 1
        block = next((b for b in blocks if b.start < line <= b.end), None)
        if block is None or any(block is b for b, _ in pairs):
            raise MtError(f"{name}: line {line}: an entry mt cannot find the lines of")
        pairs.append((block, entry))
    return pairs


def po_text(data: bytes, name: Path) -> str:
    found = re.search(rb"charset=([\w.:-]+)", data[:4096])
    charset = found.group(1).decode("ascii").lower() if found else "utf-8"
    if charset not in CHARSETS:
        raise MtError(f"{name}: charset {charset}: mt reads UTF-8 PO files (msgconv --to-code=UTF-8 converts one)")
    return decoded(data, name, "a PO file")
