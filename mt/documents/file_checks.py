"""What a localization file is checked for before it is read: UTF-8 text, and for an XML format, well-formed XML
without entities (an entity bomb is refused in one line; a bare DTD such as lupdate's `<!DOCTYPE TS>` passes)
whose root names the format. Each failure is one MtError naming the file and its line."""

from __future__ import annotations

from pathlib import Path

from mt.errors import MtError, needs


def decoded(data: bytes, name: Path, kind: str | None = None) -> str:
    """A file's UTF-8 text (a byte-order mark dropped); the error asks whether it is `kind`, if given."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        asked = f"; is it {kind}?" if kind else ""
        raise MtError(f"{name}: line {line}: not UTF-8 (byte 0x{data[e.start]:02x}){asked}") from None


def xml_root(data: bytes, name: Path, root: str, kind: str):
    """The root element of a file defusedxml parses, named `root`; `kind` says what the file was to be."""
    safe = needs("defusedxml.ElementTree", "defusedxml", "documents")
    from defusedxml import DefusedXmlException

    try:
        element = safe.fromstring(data)
    except DefusedXmlException:
        raise MtError(f"{name}: declares entities, which {kind} needs not: refused") from None
    except safe.ParseError as e:
        line, column = e.position
        raise MtError(f"{name}: line {line}: not well-formed XML ({str(e).split(':')[0]}, column {column + 1}); is "
                      f"it {kind}?") from None
    found = element.tag.rsplit("}", 1)[-1]
    if found != root:
        raise MtError(f"{name}: line 1: not {kind} (its root is <{found}>)")
    return element
