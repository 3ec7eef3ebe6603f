"""Users' corrections (LibreTranslate's `POST /suggest`), kept in SQLite and answered at once.

One database file in WAL mode with `synchronous=FULL`: a suggestion is committed, and so on disk, before its 200,
so it survives a `kill -9` of the server or a power loss right after. Writers share one connection behind a lock
(SQLite's own locking guards other processes, `mt suggestions export` among them). Every suggestion is kept, with
when it came and a hash of the key that sent it; the newest for a (source language, target language, text) is the
one `/translate` answers, from a dict loaded at start and updated on each write (normalised as a translation
memory's segments are: mt/data/translation_memories.py). `export` writes them as TMX 1.4, with their metadata as
`<prop>`s, for review, for `mt train` or for a CAT tool.
"""

from __future__ import annotations

import datetime
import hashlib
import sqlite3
import threading
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from mt.atomic_files import atomic_write
from mt.data.translation_memories import normalized
from mt.errors import MtError

SCHEMA = """CREATE TABLE IF NOT EXISTS suggestions (
    id INTEGER PRIMARY KEY,
    q TEXT NOT NULL,
    s TEXT NOT NULL,
    source TEXT NOT NULL,
    target TEXT NOT NULL,
    created TEXT NOT NULL,
    key_hash TEXT
)"""


def _connect(path: Path) -> sqlite3.Connection:
    try:
        connection = sqlite3.connect(path, check_same_thread=False, timeout=30)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=FULL")
        connection.execute(SCHEMA)
        connection.commit()
    except sqlite3.DatabaseError as e:
        raise MtError(f"--suggestions {path}: not a suggestions database ({e})") from None
    return connection


class Suggestions:
    """The suggestions database: `add` one (durable when it returns), `get` the newest for a text."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.lock = threading.Lock()
        self.connection = _connect(self.path)
        self.newest: dict[tuple[str, str, str], str] = {}
        for q, s, source, target in self.connection.execute("SELECT q, s, source, target FROM suggestions ORDER BY id"):
            self.newest[(source, target, normalized(q))] = s

    def add(self, q: str, s: str, source: str, target: str, api_key: str | None = None) -> None:
        created = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        key_hash = hashlib.sha256(api_key.encode("utf-8")).hexdigest()[:16] if api_key else None
        with self.lock:
            with self.connection:  # committed (and, with synchronous=FULL, synced) when this block ends
                self.connection.execute("INSERT INTO suggestions (q, s, source, target, created, key_hash) "
                                        "VALUES (?, ?, ?, ?, ?, ?)", (q, s, source, target, created, key_hash))
            self.newest[(source, target, normalized(q))] = s

    def get(self, source: str, target: str, text: str) -> str | None:
        return self.newest.get((source, target, normalized(text))) if self.newest else None

    def __len__(self) -> int:
        return len(self.newest)


def export(database: str | Path, output: str | Path, since: str | None = None) -> int:
    """The suggestions (those created at or after `since`, an ISO date or time) as a TMX file, written whole or
    not at all; how many."""
    path = Path(database)
    if not path.is_file():
        raise MtError(f"{path}: no such file")
    try:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        rows = connection.execute("SELECT id, q, s, source, target, created, key_hash FROM suggestions WHERE "
                                  "created >= ? ORDER BY id", (_since(since),)).fetchall()
    except sqlite3.DatabaseError as e:
        raise MtError(f"{path}: not a suggestions database ({e})") from None

    def write(f):
        f.write(b'<?xml version="1.0" encoding="UTF-8"?>\n<tmx version="1.4">\n<header creationtool="mt" '
                b'creationtoolversion="1" datatype="plaintext" segtype="sentence" adminlang="en" srclang="*all*" '
                b'o-tmf="mt suggestions"/>\n<body>\n')
        for ident, q, s, source, target, created, key_hash in rows:
            props = f'<prop type="x-mt-suggestion">{ident}</prop>' + \
                (f'<prop type="x-mt-key">{escape(key_hash)}</prop>' if key_hash else "")
            f.write(f'<tu creationdate={quoteattr(_tmx_date(created))}>{props}'
                    f'<tuv xml:lang={quoteattr(source)}><seg>{escape(q)}</seg></tuv>'
                    f'<tuv xml:lang={quoteattr(target)}><seg>{escape(s)}</seg></tuv></tu>\n'.encode("utf-8"))
        f.write(b"</body>\n</tmx>\n")
    atomic_write(Path(output), write)
    return len(rows)


def _since(since: str | None) -> str:
    if since is None:
        return ""
    try:
        moment = datetime.datetime.fromisoformat(since)
    except ValueError:
        raise MtError(f"--since {since}: not a date or time (2026-12-01, 2026-12-01T09:30)") from None
    moment = moment if moment.tzinfo else moment.replace(tzinfo=datetime.timezone.utc)
    return moment.astimezone(datetime.timezone.utc).isoformat(timespec="seconds")


def _tmx_date(created: str) -> str:
    """TMX's date form, 20261205T213000Z."""
    return datetime.datetime.fromisoformat(created).strftime("%Y%m%dT%H%M%SZ")
