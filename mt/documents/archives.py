"""Zip archives (Argos packages, docx, pptx, odt, epub) checked before anything in them is read: a limit on
members, on their unpacked size and on each member's compression ratio (a zip bomb is far above it), and no name
that would leave the folder, no link, no encrypted member; XML inside them is read first with defusedxml."""

from __future__ import annotations

import zipfile
from pathlib import Path

from mt.errors import MtError

MAX_MEMBERS = 10_000
MAX_UNPACKED = 8 << 30  # bytes, all members together
MAX_RATIO = 200  # unpacked / packed, per member


def check_members(archive: Path, members: list[zipfile.ZipInfo], max_unpacked: int = MAX_UNPACKED) -> None:
    """Refuse, in one line naming `archive`, what unpacking its `members` would do harm with."""
    if not members:
        raise MtError(f"{archive}: an empty archive")
    if len(members) > MAX_MEMBERS:
        raise MtError(f"{archive}: {len(members)} members, more than {MAX_MEMBERS}")
    total = 0
    for m in members:
        parts = Path(m.filename).parts
        if m.filename.startswith(("/", "\\")) or ".." in parts or ":" in m.filename:
            raise MtError(f"{archive}: member {m.filename!r} would be written outside the folder it unpacks into")
        if (m.external_attr >> 16) & 0o170000 == 0o120000:
            raise MtError(f"{archive}: member {m.filename!r} is a symbolic link; only files are read")
        if m.flag_bits & 0x1:
            raise MtError(f"{archive}: member {m.filename!r} is encrypted")
        if m.compress_size and m.file_size / m.compress_size > MAX_RATIO:
            raise MtError(f"{archive}: member {m.filename!r} unpacks {m.file_size / m.compress_size:.0f} times its "
                          f"packed size (more than {MAX_RATIO}): refused as a zip bomb")
        total += m.file_size
    if total > max_unpacked:
        raise MtError(f"{archive}: unpacks to {total / 2**30:.1f} GiB, more than {max_unpacked / 2**30:g} GiB")


def refuse_dtd(xml: bytes, name: str, doctype: bool = False) -> None:
    """Parse `xml` with defusedxml, which refuses a DTD (unless `doctype`: an XHTML page's bare `<!DOCTYPE
    html>`), entity declarations and external references: the XML of an office document or epub has none, and
    an entity bomb needs them."""
    import defusedxml.ElementTree as safe
    from defusedxml import DefusedXmlException

    try:
        safe.fromstring(xml, forbid_dtd=not doctype)
    except DefusedXmlException:
        raise MtError(f"{name}: declares a DTD or entities, which no such document has: refused") from None
    except safe.ParseError as e:
        raise MtError(f"{name}: not well-formed XML ({e})") from None
