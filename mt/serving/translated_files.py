"""LibreTranslate's file API: `POST /translate_file` (a multipart `file`, `source`, `target`, `api_key`) answers
`{"translatedFileUrl": ".../download_file/NAME"}`, and `GET /download_file/NAME` sends the translated file.

A file is read by the document class of its extension (mt/documents/formats.py), its sentences translated through
the model's worker beside every other request's, and the result kept in a private temporary folder for
KEEP_S seconds (removed with the process). Names are a random 32-hex-digit key and the upload's own name, so
one client cannot guess another's file.
"""

from __future__ import annotations

import re
import tempfile
import time
import uuid
from pathlib import Path

from mt.documents.formats import EXTENSIONS

KEEP_S = 1800.0  # seconds a translated file can be downloaded
FILE_EXTENSIONS = {".txt": "text", **EXTENSIONS}  # a .txt upload is a text document (LibreTranslate's)
NAME = re.compile(r"^[0-9a-f]{32}\.[^/\\]+$")


class TranslatedFiles:
    def __init__(self):
        self._folder = tempfile.TemporaryDirectory(prefix="mt-serve-files-")
        self.folder = Path(self._folder.name)

    def keep(self, data: bytes, filename: str) -> str:
        """Store a translated file; its download name."""
        self._drop_expired()
        name = f"{uuid.uuid4().hex}.{Path(filename).name or 'document'}"
        (self.folder / name).write_bytes(data)
        return name

    def path(self, name: str) -> Path | None:
        """The stored file `name`, None if there is none (or the name is not one this server gives)."""
        path = self.folder / name
        return path if NAME.match(name) and path.is_file() else None

    def _drop_expired(self) -> None:
        now = time.time()
        for path in self.folder.iterdir():
            if now - path.stat().st_mtime > KEEP_S:
                path.unlink(missing_ok=True)


def file_format(filename: str) -> str | None:
    return FILE_EXTENSIONS.get(Path(filename).suffix.lower())
