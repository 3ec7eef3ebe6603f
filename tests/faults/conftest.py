"""What the failure suites share: a folder's files as they were, the one line a failed command prints, an
`mt` process started and not waited for, and a tmpfs mounted for a full or read-only file system."""

from __future__ import annotations

import contextlib
import hashlib
import os
import resource
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def snapshot(folder: Path) -> dict[str, tuple[str, int]]:
    """Every file under `folder`: its content hash and mode."""
    return {str(p.relative_to(folder)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mode)
            for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()}


def fails_cleanly(proc: subprocess.CompletedProcess, *names, code: int = 1) -> str:
    """The one `error:` line of a failed command (its last line, after any progress lines), which names each of
    `names`."""
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and "Fatal Python error" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert [line for line in lines if line.startswith("error: ")] == lines[-1:], proc.stderr
    for name in names:
        assert str(name) in lines[-1], (name, lines[-1])
    return lines[-1]


def mt_process(*args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, limit_file_bytes=None, cwd=None):
    """`python -m mt ARGS` started, not waited for; with `limit_file_bytes`, no file it writes may grow past that
    (RLIMIT_FSIZE: the write fails with EFBIG, as on a full disk)."""
    def limit():
        if limit_file_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_file_bytes, limit_file_bytes))

    env = {k: v for k, v in os.environ.items() if k != "MT_DEBUG"}
    return subprocess.Popen([sys.executable, "-m", "mt", *map(str, args)], stdin=stdin, stdout=stdout,
                            stderr=subprocess.PIPE, cwd=cwd or ROOT, env=env, preexec_fn=limit)


@contextlib.contextmanager
def mounted(folder: Path, options: str):
    """A tmpfs at `folder` (e.g. "size=64k" for a small disk, "ro" for a read-only folder). Tests run as root
    in CI, where permission bits do not stop writes, so a real mount is how a test gets a full or read-only
    file system."""
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True, text=True)
    assert done.returncode == 0, f"mount tmpfs -o {options} failed (these tests need root): {done.stderr}"
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)
