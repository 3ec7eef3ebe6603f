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

import re
from dataclasses import dataclass, field
from pathlib import Path

from mt.documents.file_checks import decoded
from mt.documents.inline_markup import Fragments
from mt.documents.messages import Localization, Messages, numbered, plain
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


@dataclass
class Fill:
    """An entry mt translates: its block, its messages (one per msgstr, plural forms in order), whether plural."""
    block: Block
    messages: list[int] = field(default_factory=list)
    plural: bool = False


class PoDocument:
    """`sentences` to translate; `render` gives the PO file's bytes with their translations; `notes` what the
    last render could not do."""

    def __init__(self, data: bytes, name: Path, options: Localization = Localization()):
        polib = needs("polib", "polib", "documents")
        self.name, self.text = name, po_text(data, name)
        try:
            catalog = polib.pofile(self.text if "\n" in self.text else self.text + "\n")  # never a path
        except (OSError, ValueError) as e:
            found = PO_ERROR.search(str(e))
            where = f"line {found.group(1)}: " if found else ""
            raise MtError(f"{name}: {where}not a valid PO file ({(found and found.group(2)) or 'syntax error'})") \
                from None
        self.newline = "\r\n" if "\r\n" in self.text else "\n"
        self.lines = self.text.splitlines(keepends=True)
        blocks = [b for b in _blocks(self.lines, name) if b.msgstr]
        entries = _matched(catalog, blocks, name)
        self.header = next((b for b in blocks if all(b is not blk for blk, _ in entries)), None)
        line = catalog.metadata.get("Plural-Forms", "").strip()
        own = catalog.metadata.get("Language", "").strip()
        self.target = options.target if options.retargets(own) else None  # the Language the header is to say
        retargeted = for_language(self.target)  # the target's forms replace the header's (another language's)
        self.header_forms = bool(line) and "INTEGER" not in line and not retargeted  # a POT's: nplurals=INTEGER
        self.header_template = "INTEGER" in line or "charset=CHARSET" in catalog.metadata.get("Content-Type", "")
        self.forms = parsed(line, f"{name}: header") if self.header_forms else \
            retargeted or for_language(own or options.target)
        retranslate = options.replaces(own)
        self.messages, self.fills, self.unsized = Messages(options.memory), [], 0
        for block, entry in entries:
            if entry.obsolete or not entry.msgid or (_translated(entry) and not retranslate):
                continue
            if entry.msgid_plural and self.forms is None:
                self.unsized += 1
                continue
            self.fills.append(self._fill(block, entry))
        self.sentences = self.messages.sentences
        self.refused = 0

    def _fill(self, block: Block, entry) -> Fill:
        fill = Fill(block, plural=bool(entry.msgid_plural))
        if not entry.msgid_plural:
            fill.messages.append(self.messages.add([plain(entry.msgid)]))
            return fill
        for index in range(self.forms.count):
            number = self.forms.example(index)
            source = entry.msgid if self.forms.singular(index) else entry.msgid_plural
            first = numbered(source, number) if number is not None else None
            fill.messages.append(self.messages.add([first, plain(source)]))
        return fill

    def render(self, translations: list[tuple[str, str | None]], fragments: Fragments | None = None) -> bytes:
        translated = self.messages.translated(translations, fragments=fragments)
        edits = []  # (block, its new lines)
        self.refused = 0
        for fill in self.fills:
            texts = [translated[i] for i in fill.messages]
            if any(t is None for t in texts):
                self.refused += 1
                texts = [""] * len(texts)
            remembered = all(i in self.messages.remembered for i in fill.messages)
            edits.append((fill.block, self._entry(self.lines[fill.block.start:fill.block.end], fill, texts,
                                                  fuzzy=not remembered)))
        if self.fills and (self.header_template or self.target or (self.forms and not self.header_forms)):
            edits.append(self._header())
        lines = list(self.lines)
        for block, new in sorted(edits, key=lambda edit: -edit[0].start):  # from the end: none moves another
            lines[block.start:block.end] = new
        return "".join(lines).encode("utf-8")

    def _entry(self, lines: list[str], fill: Fill, texts: list[str], fuzzy: bool = True) -> list[str]:
        """An entry's lines with its msgstr lines replaced by `texts` and `fuzzy` in its flags (not for a memory's
        translation, as msgmerge fills an exact match from a compendium)."""
        first = next(i for i, line in enumerate(lines) if line.lstrip().startswith("msgstr"))
        last_newline = lines[-1][len(lines[-1].rstrip("\r\n")):]
        new = []
        for index, text in enumerate(texts):
            new += msgstr_lines(f"msgstr[{index}]" if fill.plural else "msgstr", text)
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

    def notes(self) -> list[str]:
        out = []
        if self.refused:
            out.append(f"{self.name}: {self.refused} entries left untranslated and marked fuzzy: a placeholder or "
                       "tag would not come back from their translation")
        if self.unsized:
            out.append(f"{self.name}: {self.unsized} plural entries left untranslated: the header has no "
                       "Plural-Forms and the target language is unknown (add Plural-Forms to the header)")
        return out


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
