"""One command at a time per output_dir: `mt train` and `mt prepare` hold a lock on the folder while they run.

Two runs on one folder (a scheduler's retry, a second terminal) would interleave their metrics.jsonl rows and
overwrite each other's checkpoints. The lock is `fcntl.flock` on `output_dir/.lock`, which names the process
holding it: the kernel drops it when that process ends in any way (crash, kill -9), so a stale lock never blocks
the next run. Within one process the lock is re-entrant (`mt train` prepares its data under its own lock).
flock is reliable on local disks; on some network file systems it is not enforced.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import sys
from pathlib import Path

from mt.errors import MtError

LOCK_NAME = ".lock"
_held: dict[Path, int] = {}  # folder -> how many `folder_lock` blocks of this process hold it


@contextlib.contextmanager
def folder_lock(folder: str | Path, what: str):
    """Hold `folder`'s lock for the block, or fail at once with a one-line error naming who holds it."""
    folder = Path(folder).resolve()
    if folder in _held:
        _held[folder] += 1
        try:
            yield
        finally:
            _held[folder] -= 1
        return
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode("utf-8", errors="replace").strip() or "another process"
            raise MtError(f"{folder} is in use by {holder}; wait for it to end or use another output_dir") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"process {os.getpid()} on {socket.gethostname()} ({what}: {' '.join(sys.argv)})".encode(), 0)
        _held[folder] = 1
        try:
            yield
        finally:
            del _held[folder]
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # closing drops the lock
