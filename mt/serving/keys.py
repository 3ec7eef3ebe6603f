"""`mt serve --api-keys FILE`: which keys may make requests, and how many each may make per minute."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from mt.errors import HttpError, MtError


@dataclass
class ApiKeys:
    """Keys and their requests per minute (0: no limit), from a file of `KEY [REQUESTS_PER_MINUTE]` lines."""

    per_minute: dict[str, int]
    recent: dict[str, deque] = field(default_factory=dict)

    @classmethod
    def read(cls, path: str | Path) -> ApiKeys:
        """The keys of `path`; an empty path (an unset variable in a script) or a file with no key in it would
        serve everyone or no one, so both are refused."""
        if not str(path).strip():
            raise MtError("--api-keys: an empty file name (an unset variable?); give a file of "
                          "`KEY [REQUESTS_PER_MINUTE]` lines, or leave the option out to serve without keys")
        keys = {}
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise MtError(f"--api-keys {path}: cannot read it ({e})") from None
        for number, line in enumerate(lines, start=1):
            fields = line.split("#", 1)[0].split()
            if not fields:
                continue
            if len(fields) > 2 or (len(fields) == 2 and not fields[1].isdigit()):
                raise MtError(f"--api-keys {path}:{number}: expected KEY [REQUESTS_PER_MINUTE]")
            keys[fields[0]] = int(fields[1]) if len(fields) == 2 else 0
        if not keys:
            raise MtError(f"--api-keys {path}: no keys in it, so every request would be refused; write one "
                          "`KEY [REQUESTS_PER_MINUTE]` a line")
        return cls(keys)

    def check(self, key) -> None:
        """A request with `key`: 403 for an unknown key or one that is not a string, 429 over its requests in the
        last minute."""
        if not isinstance(key, str) or key not in self.per_minute:
            raise HttpError(403, "Invalid API key")
        limit, now = self.per_minute[key], time.monotonic()
        recent = self.recent.setdefault(key, deque())
        while recent and now - recent[0] > 60:
            recent.popleft()
        if limit and len(recent) >= limit:
            raise HttpError(429, f"Slowdown: {limit} per 1 minute")
        recent.append(now)
