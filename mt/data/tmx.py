"""TMX 1.4 translation memories (a CAT tool's export, an OPUS corpus) read as sentence pairs, streaming.

The file is parsed incrementally (defusedxml's iterparse; a `.gz` is decompressed as it is read) and each `<tu>`
is dropped once read, so a file of any size is read in bounded memory. A unit's two sides are the `<tuv>`s whose
`xml:lang` (TMX 1.1-1.3: `lang`) matches the languages asked for as BCP 47 tags are matched, ignoring case: `de`
takes `de-DE` and `de-AT`, `de-DE` only `de-DE`. A unit that lacks either language is skipped and counted.

Inline codes become the placeholders `mt translate -i` protects in a localization file (mt/documents/
placeholders.py), so that `mt prepare` presents such a pair to the model as `mt translate -i` presents a string:
a paired code (`<bpt i="1">`...`<ept i="1">`) the tags `<g1>`...`</g1>`, a lone one (`<ph>`, `<it>`, `<ut>`,
`<x/>`) `<x1/>`, a highlight (`<hi>`) a pair of tags around its text; the codes' native contents (RTF, HTML) are
not kept. With `inline_codes: drop` they are left out and only the text stays. XLIFF's inline elements (mt/data/
catalogue_pairs.py) are read by the same `segment_text`.
"""

from __future__ import annotations

import gzip
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from mt.errors import DataError, needs

XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
PAIRED_OPEN = {"bpt", "bx", "sc"}  # the start of a paired code (TMX, XLIFF 1.2's bx, 2.0's sc)
PAIRED_CLOSE = {"ept", "ex", "ec"}
WRAPPING = {"hi", "g", "pc"}  # an element around text: a pair of tags around its text
TRANSPARENT = {"mrk", "sub"}  # annotations: their text is kept, as if they were not there
INLINE_CODES = ("placeholders", "drop")


def matches(tag: str, wanted: str) -> bool:
    """Whether the language tag `tag` serves `wanted` (BCP 47, case-insensitive; `_` read as `-`): the same tag,
    or `wanted` is a bare language and `tag` that language with a region or script."""
    tag, wanted = tag.strip().lower().replace("_", "-"), wanted.strip().lower().replace("_", "-")
    return tag == wanted or ("-" not in wanted and tag.split("-")[0] == wanted)


def local(tag: str) -> str:
    """An element's name without its namespace."""
    return tag.rsplit("}", 1)[-1]


def segment_text(element, inline_codes: str = "placeholders") -> str:
    """The text of a `<seg>` (or an XLIFF `<source>`/`<target>`), its inline codes as placeholders or dropped."""
    out, numbers = [element.text or ""], Counter()

    def walk(parent):
        for child in parent:
            name = local(child.tag)
            ident = child.get("i") or child.get("x") or child.get("id") or child.get("rid") or child.get("startRef")
            if name in TRANSPARENT:
                out.append(child.text or "")
                walk(child)
            elif inline_codes == "drop":
                if name in WRAPPING:
                    out.append(child.text or "")
                    walk(child)
            elif name in WRAPPING:
                numbers["g"] += 1
                tag = f"g{ident or numbers['g']}"
                out.append(f"<{tag}>{child.text or ''}")
                walk(child)
                out.append(f"</{tag}>")
            elif name in PAIRED_OPEN or name in PAIRED_CLOSE:
                numbers[name] += 1
                tag = f"g{ident or numbers[name]}"
                out.append(f"<{tag}>" if name in PAIRED_OPEN else f"</{tag}>")
            else:  # ph, it, ut, x, and anything else inline: a lone code
                numbers["x"] += 1
                out.append(f"<x{ident or numbers['x']}/>")
            out.append(child.tail or "")

    walk(element)
    return " ".join("".join(out).split())


def opened(path: Path):
    """The file as bytes, decompressed as read when it is gzip's (by its first bytes, whatever its name)."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except OSError as e:
        raise DataError(f"{path}: cannot read: {e.strerror}") from None
    if f.peek(2)[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=f)
    return f


class TmxPairs:
    """The (source, target) pairs of a TMX file for two languages; `skipped` counts the units not taken, by why."""

    def __init__(self, path: str | Path, src_lang: str, tgt_lang: str, inline_codes: str = "placeholders"):
        if not (src_lang and tgt_lang):
            raise DataError(f"{path}: a TMX file holds many languages; name the two to read (a config's src_lang "
                            "and tgt_lang; --memory SRC:TGT=FILE)")
        self.path, self.langs, self.inline_codes = Path(path), (src_lang, tgt_lang), inline_codes
        self.skipped: Counter = Counter()
        self.units = 0

    def __iter__(self) -> Iterator[tuple[str, str]]:
        safe = needs("defusedxml.ElementTree", "defusedxml", "documents")
        from defusedxml import DefusedXmlException

        self.skipped.clear()
        self.units = 0
        with opened(self.path) as f:
            events = safe.iterparse(f, events=("start", "end"))
            body, root = None, None
            try:
                for event, element in events:
                    name = local(element.tag)
                    if root is None:
                        root = element
                        if name != "tmx":
                            raise DataError(f"{self.path}: line 1: not a TMX file (its root is <{name}>)")
                    if event == "start":
                        body = element if name == "body" else body
                        continue
                    if name == "tu":
                        pair = self._pair(element)
                        if pair is not None:
                            yield pair
                        (body if body is not None else root).clear()  # what was read is let go
            except DefusedXmlException:
                raise DataError(f"{self.path}: declares entities, which a TMX file needs not: refused") from None
            except safe.ParseError as e:
                line, column = e.position
                raise DataError(f"{self.path}: line {line}: not well-formed XML ({str(e).split(':')[0]}, column "
                                f"{column + 1}); is it a TMX file?") from None
            except (EOFError, gzip.BadGzipFile, OSError) as e:
                raise DataError(f"{self.path}: cannot read: {e}") from None

    def _pair(self, unit) -> tuple[str, str] | None:
        self.units += 1
        sides = []
        for wanted in self.langs:
            seg = next((tuv.find("seg") for tuv in unit if local(tuv.tag) == "tuv"
                        and matches(tuv.get(XML_LANG) or tuv.get("lang") or "", wanted)), None)
            if seg is None:
                self.skipped[f"no {wanted} side"] += 1
                return None
            sides.append(segment_text(seg, self.inline_codes))
        if not all(sides):
            self.skipped["an empty side"] += 1
            return None
        return sides[0], sides[1]
