"""One command at a time per output_dir: `mt train` and `mt prepare` hold a lock on the folder while they run.

Two runs on one folder (a scheduler's retry, a second terminal) would interleave their metrics.jsonl rows and
overwrite each other's checkpoints. The lock is `fcntl.flock` on `output_dir/.lock`, which names the process
holding it: the kernel drops it when that process ends in any way (crash, kill -9), so a stale lock never blocks
the next run. Within one process the lock is re-entrant (`mt train` prepares its data under its own lock).
flock is reliable on local disks; on some network file systems it is not enforced.

The lock file also marks the folder as mt's: a folder that exists, holds files and has no `.lock` was made by
someone else (a project folder given as `output_dir: .`), and mt refuses it rather than write or delete there.
A folder this command created and left holding nothing but its lock (a run that failed before writing) is
removed again.
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
    given, folder = folder, Path(folder).resolve()
    if folder in _held:
        _held[folder] += 1
        try:
            yield
        finally:
            _held[folder] -= 1
        return
    created = _claim(folder, given)
    try:
        fd = os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise MtError(f"{given}: cannot write the output folder ({e.strerror})") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode("utf-8", errors="replace").strip() or "another process"
            raise MtError(f"{folder} is in use by {holder}; wait for it to end or use another output_dir") from None
        _note_holder(fd, folder / LOCK_NAME, what)
        _held[folder] = 1
        try:
            yield
        finally:
            del _held[folder]
            os.ftruncate(fd, 0)
            if created and [p.name for p in folder.iterdir()] == [LOCK_NAME]:
                _remove_created(folder, created)
    finally:
        os.close(fd)  # closing drops the lock


def _note_holder(fd: int, path: Path, what: str) -> None:
    """Write who holds the lock into it (a full disk fails here first: name the file)."""
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"process {os.getpid()} on {socket.gethostname()} ({what}: {' '.join(sys.argv)})".encode(), 0)
    except OSError as e:
        raise MtError(f"{path}: cannot write the lock file ({e.strerror})") from None


def _claim(folder: Path, given) -> list[Path]:
    """Make `folder` if it is missing and return the folders that made (deepest first), or check that it is
    empty or mt's own and return []."""
    if folder.exists() and not folder.is_dir():
        raise MtError(f"output_dir {given}: exists and is not a folder")
    if folder.is_dir():
        if not (folder / LOCK_NAME).exists() and any(folder.iterdir()):
            raise MtError(f"output_dir {given}: holds files mt did not write; give a new or empty folder")
        return []
    created = [p for p in [folder, *folder.parents] if not p.exists()]
    try:
        folder.mkdir(parents=True)
    except OSError as e:
        raise MtError(f"output_dir {given}: cannot create it ({e.strerror})") from None
    return created


def _remove_created(folder: Path, created: list[Path]) -> None:
    (folder / LOCK_NAME).unlink()
    for path in created:
        try:
            path.rmdir()
        except OSError:  # something else appeared in it meanwhile
            return
